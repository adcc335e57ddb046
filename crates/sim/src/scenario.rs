//! Scenario files: an experiment as data (TOML).
//!
//! ```toml
//! name = "dumbbell"
//! duration = "100s"
//! seed = 1
//!
//! [[link]]                 # a duplex link; nodes are created by naming them
//! a = "r1"
//! b = "r2"
//! rate = "100Mbps"
//! delay = "2ms"            # one-way propagation delay
//! queue = 1000             # DropTail limit in packets (or queue_bytes = "150KB")
//!
//! [[link]]
//! a = "s1"
//! b = "r1"
//! rate = "1Gbps"
//! delay = "1ms"
//!
//! [[link]]
//! a = "r2"
//! b = "d1"
//! rate = "1Gbps"
//! delay = "1ms"
//!
//! [[link]]
//! a = "u1"
//! b = "r1"
//! rate = "1Gbps"
//! delay = "1ms"
//!
//! [[link]]
//! a = "r2"
//! b = "v1"
//! rate = "1Gbps"
//! delay = "1ms"
//!
//! [[link]]
//! a = "c1"
//! b = "r1"
//! rate = "1Gbps"
//! delay = "1ms"
//!
//! [[link]]
//! a = "r2"
//! b = "w1"
//! rate = "1Gbps"
//! delay = "1ms"
//!
//! [[tcp]]                  # bulk (FTP) flows
//! from = "s1"
//! to = "d1"
//! cc = "newreno"           # reno | newreno | becc | becc-newreno | vegas | nice | lp | ledbat | cubic | ...,
//!                          # or a table with parameters: { name = "ledbat", target = "25ms" },
//!                          # { name = "cubic", hystart = true }
//! max_window = "1MB"
//!
//! [[udp]]
//! from = "u1"
//! to = "v1"
//! pattern = { kind = "exp_on_off", rate = "20Mbps", mean_on = "500ms", mean_off = "500ms" }
//! size = { kind = "fixed", size = 1000 }
//!
//! [[web]]
//! clients = "c1"
//! servers = "w1"
//! count = 200
//!
//! [trace]
//! interval = "100ms"
//! queues = ["r1->r2"]
//! ```
//!
//! Unknown keys and bad values are errors that name the file, the line and the key.

use std::ops::Range;

use headroom_core::abw::{ChirpSpec, EstimatorConfig, QuickSpec, TrainDesign};
use headroom_core::imtcp::{ControlConfig, EchoConfig, EchoProber, ImtcpBuffer, MPolicy, StoringRate, StoringTimer};
use headroom_core::units::{parse_dur, Bytes, Dur, Rate};
use serde::{Deserialize, Deserializer};
use toml::Spanned;

use crate::serde_units::{
    de_dur, de_opt_bytes, de_opt_dur, de_opt_rate, de_opt_rate_nonzero, de_probability, de_rate_nonzero,
};
use crate::tcp::RtoParams;
use crate::traffic::{SizeDist, UdpPattern, WebModel};

mod cc;
pub use cc::{CcKind, DEFAULT_STREAM_LEN};

/// A whole experiment.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// Simulated time.
    #[serde(deserialize_with = "de_dur")]
    pub duration: Dur,
    #[serde(default)]
    pub seed: u64,
    #[serde(default, rename = "link")]
    pub links: Vec<LinkSpec>,
    #[serde(default)]
    pub tcp: Vec<TcpSpec>,
    #[serde(default)]
    pub udp: Vec<UdpSpec>,
    #[serde(default)]
    pub web: Vec<WebSpec>,
    #[serde(default)]
    pub probe: Vec<ProbeSpec>,
    #[serde(default)]
    pub trace: TraceSpec,
    /// A parameter sweep run by `headroom sim sweep`.
    #[serde(default)]
    pub sweep: Option<SweepSpec>,
}

/// A duplex link between nodes `a` and `b`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    pub a: Spanned<String>,
    pub b: Spanned<String>,
    #[serde(deserialize_with = "de_rate_nonzero")]
    pub rate: Rate,
    #[serde(deserialize_with = "de_dur")]
    pub delay: Dur,
    /// Rate from `b` to `a` when it differs.
    #[serde(default, deserialize_with = "de_opt_rate_nonzero")]
    pub rate_ba: Option<Rate>,
    /// Delay from `b` to `a` when it differs.
    #[serde(default, deserialize_with = "de_opt_dur")]
    pub delay_ba: Option<Dur>,
    /// DropTail limit in packets, both directions (default 1000 when no byte limit is given).
    #[serde(default)]
    pub queue: Option<u32>,
    #[serde(default, deserialize_with = "de_opt_bytes")]
    pub queue_bytes: Option<Bytes>,
    /// Random (Bernoulli) loss probability from `a` to `b`.
    #[serde(default, deserialize_with = "de_probability")]
    pub loss: f64,
    /// Random loss probability from `b` to `a`.
    #[serde(default, deserialize_with = "de_probability")]
    pub loss_ba: f64,
    /// Blackouts: `[["10s", "13s"]]` drops everything in both directions from 10 s to 13 s.
    #[serde(default)]
    pub down: Vec<[String; 2]>,
}

impl LinkSpec {
    /// The blackout intervals, parsed.
    pub fn outages(&self) -> Result<Vec<(Dur, Dur)>, String> {
        self.down
            .iter()
            .map(|[a, b]| {
                let (a, b) = (parse_dur(a).map_err(|e| e.to_string())?, parse_dur(b).map_err(|e| e.to_string())?);
                if b <= a {
                    return Err(format!("blackout [{a}, {b}] ends before it starts"));
                }
                Ok((a, b))
            })
            .collect()
    }
}

/// One or more identical bulk TCP flows.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpSpec {
    #[serde(default)]
    pub name: Option<String>,
    pub from: Spanned<String>,
    pub to: Spanned<String>,
    #[serde(default = "one")]
    pub count: u32,
    #[serde(default)]
    pub cc: CcKind,
    #[serde(default, deserialize_with = "de_opt_dur")]
    pub start: Option<Dur>,
    #[serde(default, deserialize_with = "de_opt_dur")]
    pub stop: Option<Dur>,
    /// Bytes to send; unlimited when absent.
    #[serde(default, deserialize_with = "de_opt_bytes")]
    pub bytes: Option<Bytes>,
    #[serde(default, deserialize_with = "de_opt_bytes")]
    pub max_window: Option<Bytes>,
    #[serde(default)]
    pub mss: Option<u32>,
    #[serde(default)]
    pub initial_window: Option<u32>,
    /// How a loss sets ssthresh: "flight_size" (RFC 5681, default) or "window"
    /// (RFC 2001 / 4.4BSD: half of min(cwnd, receiver window)).
    #[serde(default)]
    pub ssthresh_rule: Option<Spanned<String>>,
    /// 4.4BSD congestion avoidance (an extra mss/8 per ACK).
    #[serde(default)]
    pub bsd_increase: bool,
    /// Reno: no fast retransmit until the cumulative ACK passes `recover` (ns-2's `bugFix_`,
    /// on by default in ns-2; NewReno always has it).
    #[serde(default)]
    pub recover_guard: bool,
    #[serde(default)]
    pub delayed_ack: bool,
    #[serde(default, deserialize_with = "de_opt_dur")]
    pub delack_timeout: Option<Dur>,
    #[serde(default)]
    pub timestamps: Option<bool>,
    /// Selective acknowledgements (RFC 2018) with RFC 6675 loss recovery. When absent: on for
    /// controllers with NewReno's recovery, off for `reno` and `becc` ([`CcKind::fits_sack`];
    /// asking for it with them is an error). The papers' 1990s stacks had none: their scenarios
    /// say `sack = false`.
    #[serde(default)]
    pub sack: Option<bool>,
    /// RTO preset: ns2 (default), rfc6298, linux, bsd.
    #[serde(default)]
    pub rto: Option<Spanned<String>>,
    #[serde(default, deserialize_with = "de_opt_dur")]
    pub rto_min: Option<Dur>,
    #[serde(default, deserialize_with = "de_opt_dur")]
    pub rto_granularity: Option<Dur>,
    #[serde(default, deserialize_with = "de_opt_dur")]
    pub rto_initial: Option<Dur>,
    /// Inline measurement (ImTCP): the sender's segments are shaped into probe streams.
    #[serde(default)]
    pub imtcp: Option<ImtcpSpec>,
    /// Passive estimators watching this flow (ImTCP Fig. 10): any of "westwood", "westwood+",
    /// "hoe" (over the sender's ACKs) and "rab" (over the receiver's data arrivals). Their
    /// samples are averaged over each trace interval and recorded as estimates named so.
    #[serde(default)]
    pub passive: Vec<Spanned<String>>,
}

/// ImTCP inline-measurement parameters (ImTCP §3; defaults as the paper's).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImtcpSpec {
    /// Packets per stream `N` (default 35).
    #[serde(default)]
    pub stream_len: Option<usize>,
    /// Sub-ranges `k`.
    #[serde(default)]
    pub sub_ranges: Option<usize>,
    /// Pause between measurements, in RTTs (default 0).
    #[serde(default)]
    pub interval_rtts: Option<f64>,
    /// Upper bound of any search range (the access link rate, when known).
    #[serde(default, deserialize_with = "de_opt_rate")]
    pub link_rate: Option<Rate>,
    /// A fixed `m` (segments held before a stream starts; Table 1); absent: the adaptive rule
    /// of §3.4.1 (start at N, minimum 2, F = 2).
    #[serde(default)]
    pub m: Option<usize>,
    /// `F` of the adaptive `m` rule (successful measurements before m decreases; default 2).
    #[serde(default)]
    pub m_successes: Option<u32>,
    /// A fixed storing timer `T` (Table 2); absent: `T = M/A·(N-1) + 4·D_RTT` (§3.4.2).
    #[serde(default, deserialize_with = "de_opt_dur")]
    pub storing_timer: Option<Dur>,
    /// Cap of the adaptive storing timer in SRTTs (default 1); 0 removes the cap.
    #[serde(default)]
    pub max_storing_rtts: Option<f64>,
    /// `A` of the adaptive storing timer: "estimate" (the paper's Ā, default) or
    /// "slower-of-estimate-and-tcp" (min(Ā, window/SRTT), for window-limited senders).
    #[serde(default, deserialize_with = "de_opt_storing_rate")]
    pub storing_rate: Option<StoringRate>,
}

/// The passive estimators a `[[tcp]]` entry's `passive` key may name (ImTCP Fig. 10).
pub const PASSIVE_NAMES: &[&str] = &["westwood", "westwood+", "hoe", "rab"];

/// A measurement flow that is not TCP: PathQuick or pathChirp trains, or ImTCP's algorithm in
/// echo mode. The receiving node echoes every probe with its arrival time.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeSpec {
    #[serde(default)]
    pub name: Option<String>,
    pub from: Spanned<String>,
    pub to: Spanned<String>,
    /// pathquick | pathchirp | imtcp-echo
    pub method: Spanned<ProbeMethod>,
    #[serde(default, deserialize_with = "de_opt_dur")]
    pub start: Option<Dur>,
    #[serde(default, deserialize_with = "de_opt_dur")]
    pub stop: Option<Dur>,
    /// Time from one train (measurement) start to the next; default 1 s (0 for imtcp-echo).
    #[serde(default, deserialize_with = "de_opt_dur")]
    pub interval: Option<Dur>,
    /// PathQuick: spacing T_quick, first size P_1, increment ΔP, packets N (default: the
    /// paper's 1 ms, 1 B, 12 B, P_N = 1489 B).
    #[serde(default, deserialize_with = "de_opt_dur")]
    pub t_quick: Option<Dur>,
    #[serde(default, deserialize_with = "de_opt_bytes")]
    pub p_1: Option<Bytes>,
    #[serde(default, deserialize_with = "de_opt_bytes")]
    pub delta_p: Option<Bytes>,
    #[serde(default)]
    pub n: Option<u32>,
    /// pathChirp: spread factor γ, packet size, B_min, B_max (default: the paper's 1.2, 1489 B,
    /// 104 kbps, 11,912 kbps).
    #[serde(default)]
    pub gamma: Option<f64>,
    #[serde(default, deserialize_with = "de_opt_bytes")]
    pub size: Option<Bytes>,
    #[serde(default, deserialize_with = "de_opt_rate")]
    pub b_min: Option<Rate>,
    #[serde(default, deserialize_with = "de_opt_rate")]
    pub b_max: Option<Rate>,
    /// ImTCP echo mode: stream length N and the upper bound of the search range.
    #[serde(default)]
    pub stream_len: Option<usize>,
    #[serde(default, deserialize_with = "de_opt_rate")]
    pub link_rate: Option<Rate>,
    /// PathQuick / pathChirp estimator: pathChirp's decrease factor `F` (default 1.5) and
    /// busy-period threshold `L` in gaps (default 5).
    #[serde(default)]
    pub decrease_factor: Option<f64>,
    #[serde(default)]
    pub busy_period: Option<usize>,
}

/// One or more identical UDP sources.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UdpSpec {
    #[serde(default)]
    pub name: Option<String>,
    pub from: Spanned<String>,
    pub to: Spanned<String>,
    #[serde(default = "one")]
    pub count: u32,
    pub pattern: UdpPattern,
    #[serde(default = "default_udp_size")]
    pub size: SizeDist,
    #[serde(default, deserialize_with = "de_opt_dur")]
    pub start: Option<Dur>,
    #[serde(default, deserialize_with = "de_opt_dur")]
    pub stop: Option<Dur>,
}

/// A population of web clients fetching pages from servers.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSpec {
    #[serde(default)]
    pub name: Option<String>,
    pub clients: Spanned<String>,
    pub servers: Spanned<String>,
    /// Number of clients.
    #[serde(default = "one")]
    pub count: u32,
    #[serde(default)]
    pub model: WebModel,
    /// ImTCP-bg §4's N_web servers: "N_web web servers answer the requests of the clients, who
    /// send requests so that at most N_web pages download at once". Each server serves one
    /// client at a time, for the client's page and then its think time; a client ready for a
    /// page waits (FIFO) for a free server, and its page time runs from its requests (when it
    /// got a server). So at most `max_pages` pages download at once and the web load grows
    /// with it. Absent: no servers limit (every client requests when its think time ends).
    #[serde(default)]
    pub max_pages: Option<u32>,
    #[serde(default)]
    pub cc: CcKind,
    /// Reno: ns-2's `bugFix_` (see `[[tcp]] recover_guard`).
    #[serde(default)]
    pub recover_guard: bool,
    #[serde(default)]
    pub mss: Option<u32>,
    #[serde(default)]
    pub delayed_ack: bool,
    /// SACK for the web transfers (see [`TcpSpec::sack`]; the same default).
    #[serde(default)]
    pub sack: Option<bool>,
    #[serde(default, deserialize_with = "de_opt_dur")]
    pub start: Option<Dur>,
    #[serde(default, deserialize_with = "de_opt_dur")]
    pub stop: Option<Dur>,
}

/// What to record over time.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceSpec {
    #[serde(default = "default_interval", deserialize_with = "de_dur")]
    pub interval: Dur,
    /// Links whose queue length and drops are traced, as "a->b".
    #[serde(default)]
    pub queues: Vec<Spanned<String>>,
    #[serde(default = "yes")]
    pub cwnd: bool,
    #[serde(default = "yes")]
    pub rtt: bool,
    /// Also trace each bulk flow's highest acknowledged byte (a sequence plot).
    #[serde(default)]
    pub seq: bool,
    /// Also trace each bulk flow's controller's own measured rate where it keeps one (BECC's
    /// `t_msrd_th`; metric `measured_rate_bps`).
    #[serde(default)]
    pub measured_rate: bool,
}

impl Default for TraceSpec {
    fn default() -> Self {
        TraceSpec {
            interval: default_interval(),
            queues: Vec::new(),
            cwnd: true,
            rtt: true,
            seq: false,
            measured_rate: false,
        }
    }
}

/// A sweep over one parameter: `key` is a dotted path such as `tcp.max_window` (applied to
/// every `[[tcp]]` entry) and `values` the values it takes, in order.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    pub key: String,
    pub values: Vec<toml::Value>,
}

fn one() -> u32 {
    1
}
fn yes() -> bool {
    true
}
fn default_interval() -> Dur {
    Dur::from_millis(100)
}
fn default_udp_size() -> SizeDist {
    SizeDist::Fixed(1000)
}

/// A scenario error with its position when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError(pub String);

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ScenarioError {}

/// 1-based line of a byte offset.
pub fn line_of(src: &str, span: &Range<usize>) -> usize {
    src[..span.start.min(src.len())].bytes().filter(|b| *b == b'\n').count() + 1
}

impl Scenario {
    /// Parses and validates scenario text; `origin` names the file in messages.
    pub fn parse(src: &str, origin: &str) -> Result<Scenario, ScenarioError> {
        let s: Scenario =
            toml::from_str(src).map_err(|e| ScenarioError(format!("{origin}: {}", e.to_string().trim_end())))?;
        s.validate(src, origin)?;
        Ok(s)
    }

    /// Reads, parses and validates a scenario file.
    pub fn load(path: &std::path::Path) -> Result<Scenario, ScenarioError> {
        let src = std::fs::read_to_string(path)
            .map_err(|e| ScenarioError(format!("{}: cannot read: {e}", path.display())))?;
        Scenario::parse(&src, &path.display().to_string())
    }

    /// Checks a scenario changed in code (an experiment's typed edits of a parsed file) as
    /// [`Scenario::parse`] checks a file; messages name `origin` and the key, without lines.
    pub fn check_edited(&self, origin: &str) -> Result<(), ScenarioError> {
        self.validate("", origin)
    }

    /// Checks cross references (nodes, links, controller names) and value ranges.
    pub fn validate(&self, src: &str, origin: &str) -> Result<(), ScenarioError> {
        // `src` is empty for a scenario edited in code after parsing: no line numbers then.
        let err = |span: &Range<usize>, key: &str, msg: String| {
            if src.is_empty() || (span.is_empty() && span.start == 0) {
                ScenarioError(format!("{origin}: `{key}`: {msg}"))
            } else {
                ScenarioError(format!("{origin}: line {}: `{key}`: {msg}", line_of(src, span)))
            }
        };
        if self.duration == Dur::ZERO {
            return Err(ScenarioError(format!("{origin}: `duration` must be positive")));
        }
        if self.links.is_empty() {
            return Err(ScenarioError(format!("{origin}: no `[[link]]`: a scenario needs a topology")));
        }
        crate::limits::check(self, origin)?;
        let nodes = self.node_names();
        let known = |n: &Spanned<String>, key: &str| {
            if nodes.iter().any(|x| x == n.get_ref()) {
                Ok(())
            } else {
                Err(err(
                    &n.span(),
                    key,
                    format!(
                        "unknown node `{}` (nodes are named by `[[link]]` entries: {})",
                        n.get_ref(),
                        nodes.join(", ")
                    ),
                ))
            }
        };
        for (i, l) in self.links.iter().enumerate() {
            if l.a.get_ref() == l.b.get_ref() {
                return Err(err(&l.a.span(), &format!("link[{i}].b"), "a link needs two different nodes".into()));
            }
            l.outages().map_err(|m| err(&l.a.span(), &format!("link[{i}].down"), m))?;
            if l.queue.is_some() && l.queue_bytes.is_some() {
                return Err(err(
                    &l.a.span(),
                    &format!("link[{i}]"),
                    "give `queue` (packets) or `queue_bytes`, not both".into(),
                ));
            }
        }
        for (i, t) in self.tcp.iter().enumerate() {
            known(&t.from, &format!("tcp[{i}].from"))?;
            known(&t.to, &format!("tcp[{i}].to"))?;
            if let Some(r) = &t.ssthresh_rule {
                if !["flight_size", "window"].contains(&r.get_ref().as_str()) {
                    return Err(err(
                        &r.span(),
                        &format!("tcp[{i}].ssthresh_rule"),
                        format!("unknown rule `{}` (flight_size, window)", r.get_ref()),
                    ));
                }
            }
            if let Some(r) = &t.rto {
                rto_preset(r.get_ref()).map_err(|m| err(&r.span(), &format!("tcp[{i}].rto"), m))?;
            }
            if t.mss.is_some_and(|m| !(64..=65_000).contains(&m)) {
                return Err(err(
                    &t.from.span(),
                    &format!("tcp[{i}].mss"),
                    "mss must be within 64..=65000 bytes".into(),
                ));
            }
            if t.from.get_ref() == t.to.get_ref() {
                return Err(err(&t.to.span(), &format!("tcp[{i}].to"), "sender and receiver are the same node".into()));
            }
            if let (Some(a), Some(b)) = (t.start, t.stop) {
                if b <= a {
                    return Err(err(&t.from.span(), &format!("tcp[{i}].stop"), "stop must come after start".into()));
                }
            }
            if let Some(spec) = &t.imtcp {
                spec.control_unit(t.delayed_ack).map_err(|m| err(&t.from.span(), &format!("tcp[{i}].imtcp"), m))?;
            }
            for (k, p) in t.passive.iter().enumerate() {
                if !PASSIVE_NAMES.contains(&p.get_ref().as_str()) {
                    return Err(err(
                        &p.span(),
                        &format!("tcp[{i}].passive[{k}]"),
                        format!("unknown estimator `{}` ({})", p.get_ref(), PASSIVE_NAMES.join(", ")),
                    ));
                }
            }
        }
        for (i, u) in self.udp.iter().enumerate() {
            known(&u.from, &format!("udp[{i}].from"))?;
            known(&u.to, &format!("udp[{i}].to"))?;
            if u.from.get_ref() == u.to.get_ref() {
                return Err(err(&u.to.span(), &format!("udp[{i}].to"), "source and sink are the same node".into()));
            }
            u.pattern.validate().map_err(|m| err(&u.from.span(), &format!("udp[{i}].pattern"), m))?;
            u.size.validate().map_err(|m| err(&u.from.span(), &format!("udp[{i}].size"), m))?;
        }
        for (i, w) in self.web.iter().enumerate() {
            known(&w.clients, &format!("web[{i}].clients"))?;
            known(&w.servers, &format!("web[{i}].servers"))?;
            w.model.validate().map_err(|m| err(&w.clients.span(), &format!("web[{i}].model"), m))?;
            if w.cc.needs_inline_measurement() {
                return Err(err(
                    &w.clients.span(),
                    &format!("web[{i}].cc"),
                    format!("`{}` needs ImTCP's buffer below the sender: only `[[tcp]]` flows have one", w.cc),
                ));
            }
            if w.max_pages == Some(0) {
                return Err(err(&w.clients.span(), &format!("web[{i}].max_pages"), "must be at least 1".into()));
            }
        }
        for (i, p) in self.probe.iter().enumerate() {
            known(&p.from, &format!("probe[{i}].from"))?;
            known(&p.to, &format!("probe[{i}].to"))?;
            if p.from.get_ref() == p.to.get_ref() {
                return Err(err(
                    &p.to.span(),
                    &format!("probe[{i}].to"),
                    "sender and receiver are the same node".into(),
                ));
            }
            p.design().map_err(|m| err(&p.method.span(), &format!("probe[{i}]"), m))?;
        }
        for q in &self.trace.queues {
            let ok = q.get_ref().split_once("->").is_some_and(|(a, b)| {
                self.links
                    .iter()
                    .any(|l| (l.a.get_ref() == a && l.b.get_ref() == b) || (l.b.get_ref() == a && l.a.get_ref() == b))
            });
            if !ok {
                return Err(err(
                    &q.span(),
                    "trace.queues",
                    format!("`{}` is not a link direction \"a->b\" of this topology", q.get_ref()),
                ));
            }
        }
        if self.trace.interval == Dur::ZERO {
            return Err(ScenarioError(format!("{origin}: `trace.interval` must be positive")));
        }
        Ok(())
    }

    /// Node names in order of first mention by `[[link]]` entries.
    pub fn node_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for l in &self.links {
            for n in [l.a.get_ref(), l.b.get_ref()] {
                if !names.iter().any(|x| x == n) {
                    names.push(n.clone());
                }
            }
        }
        names
    }
}

/// The RTO parameters of a preset name.
pub fn rto_preset(name: &str) -> Result<RtoParams, String> {
    match name {
        "ns2" => Ok(RtoParams::NS2),
        "rfc6298" => Ok(RtoParams::RFC6298),
        "linux" => Ok(RtoParams::LINUX),
        "bsd" => Ok(RtoParams::BSD),
        _ => Err(format!("unknown RTO preset `{name}` (ns2, rfc6298, linux, bsd)")),
    }
}

/// A name from a fixed list, as scenario files spell it: one `FromStr` and one `Deserialize`
/// whose error names the key's valid values.
macro_rules! named_enum {
    ($ty:ident, $what:literal, [$($variant:path => $name:literal),+ $(,)?]) => {
        impl $ty {
            /// Every value, in the order error messages list them.
            pub const ALL: &'static [$ty] = &[$($variant),+];

            /// The name scenario files use.
            pub fn name(self) -> &'static str {
                match self {
                    $($variant => $name),+
                }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl std::str::FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<$ty, String> {
                $ty::ALL.iter().copied().find(|k| k.name() == s).ok_or_else(|| {
                    let known: Vec<&str> = $ty::ALL.iter().map(|k| k.name()).collect();
                    format!("unknown {} `{s}` (known: {})", $what, known.join(", "))
                })
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$ty, D::Error> {
                String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

/// What a `[[probe]]` entry measures with (`method = "..."`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProbeMethod {
    /// PathQuick trains (Oshiba & Nakajima).
    PathQuick,
    /// pathChirp chirps (Ribeiro et al. 2003).
    PathChirp,
    /// ImTCP's algorithm over echoed UDP streams (ImTCP §4.1.1).
    ImtcpEcho,
}

named_enum!(ProbeMethod, "probe method", [
    ProbeMethod::PathQuick => "pathquick",
    ProbeMethod::PathChirp => "pathchirp",
    ProbeMethod::ImtcpEcho => "imtcp-echo",
]);

/// The names of [`StoringRate`] in scenario files.
const STORING_RATES: [(StoringRate, &str); 2] =
    [(StoringRate::Estimate, "estimate"), (StoringRate::SlowerOfEstimateAndTcp, "slower-of-estimate-and-tcp")];

/// `storing_rate = "..."`: one of [`STORING_RATES`]; the error lists them.
fn de_opt_storing_rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<StoringRate>, D::Error> {
    let s = String::deserialize(d)?;
    STORING_RATES.iter().find(|(_, n)| *n == s).map(|(r, _)| Some(*r)).ok_or_else(|| {
        let known: Vec<&str> = STORING_RATES.iter().map(|(_, n)| *n).collect();
        serde::de::Error::custom(format!("unknown storing_rate `{s}` (known: {})", known.join(", ")))
    })
}

impl ImtcpSpec {
    /// The control unit's configuration (ImTCP §3; the paper's defaults where a key is absent).
    pub fn control_config(&self, delayed_ack: bool) -> Result<ControlConfig, String> {
        let mut cfg = ControlConfig::default();
        if let Some(n) = self.stream_len {
            cfg.measurement.stream_len = n;
        }
        if let Some(k) = self.sub_ranges {
            cfg.measurement.sub_ranges = k;
        }
        if let Some(i) = self.interval_rtts {
            cfg.interval_rtts = i;
        }
        if let Some(r) = self.link_rate {
            cfg.measurement.link_rate = Some(r);
        }
        let n = cfg.measurement.stream_len;
        match (self.m, self.m_successes) {
            (Some(_), Some(_)) => return Err("give a fixed `m` or the adaptive rule's `m_successes`, not both".into()),
            (Some(m), None) if m < 2 || m > n => return Err(format!("m = {m} must be within 2..=N ({n})")),
            (Some(m), None) => cfg.m_policy = MPolicy::Fixed(m),
            (None, Some(f)) => cfg.m_policy = MPolicy::Adaptive { successes: f },
            (None, None) => {}
        }
        match (self.storing_timer, self.max_storing_rtts) {
            (Some(_), Some(_)) => {
                return Err("give a fixed `storing_timer` or the adaptive timer's `max_storing_rtts`, not both".into())
            }
            (Some(t), None) if t == Dur::ZERO => return Err("storing_timer must be positive".into()),
            (Some(t), None) => cfg.storing_timer = StoringTimer::Fixed(t),
            (None, Some(0.0)) => cfg.storing_timer = StoringTimer::Adaptive { max_storing_rtts: None },
            (None, Some(x)) => cfg.storing_timer = StoringTimer::Adaptive { max_storing_rtts: Some(x) },
            (None, None) => {}
        }
        if let Some(rate) = self.storing_rate {
            cfg.storing_rate = rate;
        }
        cfg.measurement.delayed_ack = delayed_ack;
        Ok(cfg)
    }

    /// The ImTCP control unit this entry describes (also how it is validated).
    pub fn control_unit(&self, delayed_ack: bool) -> Result<ImtcpBuffer, String> {
        ImtcpBuffer::new(self.control_config(delayed_ack)?).map_err(|e| e.to_string())
    }
}

/// What a `[[probe]]` entry measures with, in `headroom-core`'s terms.
pub enum ProbeDesign {
    /// PathQuick or pathChirp trains, one every `interval`, judged by `estimator`.
    Train { design: TrainDesign, estimator: EstimatorConfig, interval: Dur },
    /// ImTCP's algorithm over echoed UDP streams (§4.1.1).
    Echo(Box<EchoProber>),
}

impl ProbeSpec {
    /// The probe design of this entry (also how it is validated).
    pub fn design(&self) -> Result<ProbeDesign, String> {
        let mut estimator = EstimatorConfig::default();
        if let Some(f) = self.decrease_factor {
            if !(f > 1.0 && f.is_finite()) {
                return Err(format!("decrease_factor must be a number above 1, got {f}"));
            }
            estimator.decrease_factor = f;
        }
        if let Some(l) = self.busy_period {
            if l == 0 {
                return Err("busy_period must be at least 1 gap".into());
            }
            estimator.busy_period = l;
        }
        let design = match self.method.get_ref() {
            ProbeMethod::PathQuick => {
                let mut spec = QuickSpec::paper();
                if let Some(t) = self.t_quick {
                    spec.t_quick = Some(t);
                }
                if let Some(b) = self.p_1 {
                    spec.p_1 = Some(b);
                }
                if let Some(b) = self.delta_p {
                    spec.delta_p = Some(b);
                }
                if let Some(n) = self.n {
                    spec.n = Some(n);
                    spec.p_n = None;
                }
                TrainDesign::PathQuick(spec.solve().map_err(|e| e.to_string())?)
            }
            ProbeMethod::PathChirp => {
                let mut spec = ChirpSpec::paper();
                if let Some(g) = self.gamma {
                    spec.gamma = g;
                }
                if let Some(b) = self.size {
                    spec.size = b;
                }
                if let Some(r) = self.b_min {
                    spec.b_min = r;
                }
                if let Some(r) = self.b_max {
                    spec.b_max = r;
                }
                TrainDesign::PathChirp(spec.design().map_err(|e| e.to_string())?)
            }
            ProbeMethod::ImtcpEcho => {
                return EchoProber::new(self.echo_config())
                    .map(|p| ProbeDesign::Echo(Box::new(p)))
                    .map_err(|e| e.to_string());
            }
        };
        Ok(ProbeDesign::Train { design, estimator, interval: self.interval.unwrap_or(Dur::from_secs(1)) })
    }

    fn echo_config(&self) -> EchoConfig {
        let mut cfg = EchoConfig::default();
        if let Some(n) = self.stream_len {
            cfg.measurement.stream_len = n;
        }
        if let Some(r) = self.link_rate {
            cfg.measurement.link_rate = Some(r);
        }
        if let Some(i) = self.interval {
            cfg.interval = i;
        }
        if let Some(b) = self.size {
            cfg.probe_size = b;
        }
        cfg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cc_kind_names_round_trip_and_unknown_names_are_listed() {
        for name in CcKind::NAMES {
            let k = name.parse::<CcKind>().unwrap();
            assert_eq!(k.to_string(), *name);
        }
        assert_eq!("becc-newreno".parse::<CcKind>(), Ok(CcKind::BeccNewReno));
        let e = "Reno".parse::<CcKind>().unwrap_err();
        assert!(e.contains("`Reno`") && e.contains("reno, newreno, becc, becc-newreno"), "{e}");
    }

    #[test]
    fn probe_methods_are_typed_and_unknown_ones_are_listed() {
        for m in ProbeMethod::ALL {
            assert_eq!(m.to_string().parse::<ProbeMethod>(), Ok(*m));
        }
        let src = "duration = \"1s\"\n[[link]]\na = \"a\"\nb = \"b\"\nrate = \"10Mbps\"\ndelay = \"1ms\"\n\
                   [[probe]]\nfrom = \"a\"\nto = \"b\"\nmethod = \"pathchirp\"\n";
        assert_eq!(*Scenario::parse(src, "t").unwrap().probe[0].method.get_ref(), ProbeMethod::PathChirp);
        let e = Scenario::parse(&src.replace("pathchirp", "pathload"), "t").unwrap_err().to_string();
        assert!(
            e.contains("line 10") && e.contains("`pathload`") && e.contains("pathquick, pathchirp, imtcp-echo"),
            "{e}"
        );
    }

    #[test]
    fn a_scenario_without_cc_runs_newreno_and_cc_is_typed() {
        let src = "duration = \"1s\"\n[[link]]\na = \"a\"\nb = \"b\"\nrate = \"10Mbps\"\ndelay = \"1ms\"\n\
                   [[tcp]]\nfrom = \"a\"\nto = \"b\"\n[[tcp]]\nfrom = \"a\"\nto = \"b\"\ncc = \"becc\"\n";
        let sc = Scenario::parse(src, "t").unwrap();
        assert_eq!(sc.tcp[0].cc, CcKind::NewReno);
        assert_eq!(sc.tcp[1].cc, CcKind::Becc);
    }
}
