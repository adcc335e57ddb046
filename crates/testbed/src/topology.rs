//! Topologies and scenarios: what the testbed builds, from TOML files or from Rust.
//!
//! The one topology is a *dumbbell*: hosts on the `left` side hang off a left router, hosts on
//! the `right` side off a right router, and the two routers are joined by the bottleneck link
//! (the delay box: an exact link that serialises at its rate behind a drop-tail buffer, then
//! propagation delay and random loss; optionally a token-bucket shaper in front).
//! Senders, receivers and cross-traffic hosts are just hosts on either side; a flow names its two
//! end hosts. Every value is checked when the file is read: unknown keys and bad values are
//! errors that name the key (and, for TOML syntax or type errors, the line).

use std::path::Path;

use anyhow::{bail, Context, Result};
use headroom_core::units::de::{opt_positive, positive, probability};
use headroom_core::{Bytes, Dur, Rate};
use serde::{Deserialize, Deserializer};

/// Which side of the bottleneck a host sits on. Traffic from left to right is the bottleneck's
/// *forward* direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Left,
    Right,
    /// A node of a chain topology ([`crate::chain`]), on neither side of a dumbbell.
    Chain,
}

/// The bottleneck's buffer: a packet-counted (`pfifo`) or byte-counted (`bfifo`) drop-tail queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buffer {
    Packets(u32),
    Bytes(Bytes),
}

impl Buffer {
    /// Parses `100pkt`, `100pkts`, `100packets` (packets) or a size like `64KB` (bytes).
    pub fn parse(s: &str) -> Result<Buffer, String> {
        let t = s.trim();
        for suffix in ["packets", "pkts", "pkt", "p"] {
            if let Some(n) = t.strip_suffix(suffix) {
                let n: u32 = n.trim().parse().map_err(|_| format!("`{s}`: packet count is not a whole number"))?;
                if n == 0 {
                    return Err(format!("`{s}`: a buffer of zero packets drops everything"));
                }
                return Ok(Buffer::Packets(n));
            }
        }
        let b: Bytes = t.parse().map_err(|e| format!("{e} (or give packets, e.g. `100pkts`)"))?;
        if b.0 < 1500 {
            return Err(format!("`{s}`: a buffer smaller than one 1500-byte packet drops everything"));
        }
        Ok(Buffer::Bytes(b))
    }
}

fn de_buffer<'de, D: Deserializer<'de>>(d: D) -> Result<Buffer, D::Error> {
    let s = String::deserialize(d)?;
    Buffer::parse(&s).map_err(serde::de::Error::custom)
}
fn default_buffer() -> Buffer {
    Buffer::Packets(1000)
}

/// A token-bucket shaper (Linux `tbf`) in front of the forward link: it passes `burst` bytes at
/// the speed of the wire, then `rate`. Real paths have them (ISP plans, cloud egress limits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shaper {
    /// Token rate, counted in IP bytes.
    #[serde(deserialize_with = "positive")]
    pub rate: Rate,
    /// Bucket depth; default max(3 MTU, 1 ms at `rate`).
    #[serde(default)]
    pub burst: Option<Bytes>,
}

impl Shaper {
    /// The bucket depth in bytes ([`Shaper::burst`] or its default).
    pub fn burst_bytes(&self) -> u64 {
        self.burst.map(|b| b.0).unwrap_or_else(|| (self.rate.bps() / 8 / 1000).max(3 * 1514))
    }
}

/// Poisson cross traffic *inside* a link (`cross = { rate = "300Mbps", packet = "1000B" }`): the
/// delay box's virtual source ([`crate::delaybox`], "In-link cross traffic"). Packets of `packet`
/// IP bytes arrive at the link's drop-tail queue with exponential gaps of mean `8·packet/rate`,
/// take places in its buffer and time on its wire like real packets, and are discarded at the
/// link's output: one-hop persistent cross traffic, entering at the bottleneck and leaving after
/// it, with nothing on the wire and no generator to keep up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InLinkCross {
    /// Mean rate, in IP bits (below the link's rate).
    #[serde(deserialize_with = "positive")]
    pub rate: Rate,
    /// IP bytes of every cross packet; default [`InLinkCross::DEFAULT_PACKET`].
    #[serde(default = "default_cross_packet")]
    pub packet: Bytes,
    /// Seed of the arrival times; default: derived from the link's `seed`.
    #[serde(default)]
    pub seed: Option<u64>,
}

fn default_cross_packet() -> Bytes {
    InLinkCross::DEFAULT_PACKET
}

impl InLinkCross {
    /// 1000 IP bytes, the cross-traffic packets of the PathQuick and pathChirp papers' experiments
    /// and of `headroom probe-bench`'s generator.
    pub const DEFAULT_PACKET: Bytes = Bytes(1000);
    /// Smallest and largest `packet`: an IPv4 header plus a UDP header, and the largest IP packet.
    pub const PACKETS: std::ops::RangeInclusive<u64> = 28..=65_535;

    /// `rate` of `packet`-byte packets, seed derived from the link's.
    pub fn new(rate: Rate, packet: Bytes) -> InLinkCross {
        InLinkCross { rate, packet, seed: None }
    }

    /// Checks it against the link it is in (`link`: its rate; `buffer`: its queue); `what` names
    /// the key in the error.
    pub fn check(&self, what: &str, link: Option<Rate>, buffer: Buffer) -> Result<()> {
        let Some(link) = link else {
            bail!("{what}: in-link cross traffic needs a link rate (set the rate of that direction)");
        };
        if self.rate == Rate::ZERO {
            bail!("{what}: rate must be positive (leave `{what}` out for no cross traffic)");
        }
        if self.rate >= link {
            bail!(
                "{what}: rate {} must be below the link's rate {link} (the queue would grow without bound)",
                self.rate
            );
        }
        if !Self::PACKETS.contains(&self.packet.0) {
            bail!("{what}: packet {} B; use {}..={} bytes", self.packet.0, Self::PACKETS.start(), Self::PACKETS.end());
        }
        if let Buffer::Bytes(b) = buffer {
            if self.packet.0 > b.0 {
                bail!(
                    "{what}: packet {} B is larger than the {} B buffer: every one would be dropped",
                    self.packet.0,
                    b.0
                );
            }
        }
        Ok(())
    }
}

/// The bottleneck link between the two routers.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bottleneck {
    /// Forward (left to right) link rate, counted in IP bytes: the delay box serialises every
    /// packet at this rate (an exact link, [`crate::delaybox`]); `None` leaves it unlimited.
    #[serde(default, deserialize_with = "opt_positive")]
    pub rate: Option<Rate>,
    /// Reverse (right to left) link rate; `None` leaves it unlimited.
    #[serde(default, deserialize_with = "opt_positive")]
    pub reverse_rate: Option<Rate>,
    /// Drop-tail buffer of each link (and of the shaper's queue).
    #[serde(default = "default_buffer", deserialize_with = "de_buffer")]
    pub buffer: Buffer,
    /// A token-bucket shaper in front of the forward link (`shaper = { rate = "20Mbps",
    /// burst = "16KB" }`).
    #[serde(default)]
    pub shaper: Option<Shaper>,
    /// One-way propagation delay left to right.
    #[serde(default)]
    pub delay: Dur,
    /// One-way propagation delay right to left; default: `delay`.
    #[serde(default)]
    pub reverse_delay: Option<Dur>,
    /// Bernoulli loss probability left to right.
    #[serde(default, deserialize_with = "probability")]
    pub loss: f64,
    /// Bernoulli loss probability right to left.
    #[serde(default, deserialize_with = "probability")]
    pub reverse_loss: f64,
    /// Seed of the loss generator (runs with the same seed drop the same packet indices).
    #[serde(default)]
    pub seed: u64,
    /// Poisson cross traffic inside the forward link (`cross = { rate = "5Mbps" }`,
    /// [`InLinkCross`]); needs `rate`.
    #[serde(default)]
    pub cross: Option<InLinkCross>,
    /// Poisson cross traffic inside the reverse link; needs `reverse_rate`.
    #[serde(default)]
    pub reverse_cross: Option<InLinkCross>,
    /// How long the delay box's forward line polls its input after each arrival instead of
    /// sleeping, so that the next packet is stamped when it arrives (`crate::delaybox`, step 4;
    /// `arrival_spin = "300us"`, [`crate::delaybox::DEFAULT_ARRIVAL_SPIN`], as `headroom
    /// probe-bench` sets it). Default zero: the box sleeps after every packet, as TCP experiments
    /// want. The reverse line, and every line of a chain, always sleeps.
    #[serde(default)]
    pub arrival_spin: Dur,
}

impl Default for Bottleneck {
    fn default() -> Self {
        Bottleneck {
            rate: None,
            reverse_rate: None,
            buffer: default_buffer(),
            shaper: None,
            delay: Dur::ZERO,
            reverse_delay: None,
            loss: 0.0,
            reverse_loss: 0.0,
            seed: 0,
            cross: None,
            reverse_cross: None,
            arrival_spin: Dur::ZERO,
        }
    }
}

impl Bottleneck {
    /// A bottleneck of `rate` with symmetric one-way `delay`, a 1000-packet buffer and no loss.
    pub fn new(rate: Option<Rate>, one_way_delay: Dur) -> Bottleneck {
        Bottleneck { rate, delay: one_way_delay, ..Bottleneck::default() }
    }
    pub fn reverse_delay(&self) -> Dur {
        self.reverse_delay.unwrap_or(self.delay)
    }

    /// Checks the values serde cannot check alone (the in-link cross traffic against its link).
    pub fn validate(&self) -> Result<()> {
        if let Some(c) = &self.cross {
            c.check("cross", self.rate, self.buffer)?;
        }
        if let Some(c) = &self.reverse_cross {
            c.check("reverse_cross", self.reverse_rate, self.buffer)?;
        }
        Ok(())
    }
}

/// One host (a network namespace) with its access link to its side's router.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// 1 to 12 characters of `[A-Za-z0-9_-]`; `left` and `right` are the routers' names.
    pub name: String,
    pub side: Side,
    /// Access link rate (both directions, tbf on both ends); `None`: unlimited.
    #[serde(default, deserialize_with = "opt_positive")]
    pub rate: Option<Rate>,
    /// Extra one-way delay of this host's access link, added by the delay box to every packet
    /// from or to this host, in both directions (so this host's RTT grows by twice this).
    #[serde(default)]
    pub delay: Dur,
}

impl HostSpec {
    pub fn new(name: &str, side: Side) -> HostSpec {
        HostSpec { name: name.to_string(), side, rate: None, delay: Dur::ZERO }
    }
}

/// What `Testbed::up` builds.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Topology {
    pub bottleneck: Bottleneck,
    pub hosts: Vec<HostSpec>,
}

/// A host's name becomes part of its namespace's name: 1 to 12 characters of `[A-Za-z0-9_-]`.
pub(crate) fn check_host_name(name: &str) -> Result<()> {
    let ok =
        !name.is_empty() && name.len() <= 12 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !ok {
        bail!("host name `{name}`: use 1 to 12 characters of A-Z a-z 0-9 _ -");
    }
    Ok(())
}

/// Largest number of hosts per side (addresses are 10.1.k.2 / 10.2.k.2 with k in 1..=250).
pub const MAX_HOSTS_PER_SIDE: usize = 250;

impl Topology {
    /// A dumbbell with `pairs` senders `s1..` on the left and receivers `r1..` on the right.
    pub fn dumbbell(pairs: usize, bottleneck: Bottleneck) -> Topology {
        let mut hosts = Vec::new();
        for i in 1..=pairs {
            hosts.push(HostSpec::new(&format!("s{i}"), Side::Left));
        }
        for i in 1..=pairs {
            hosts.push(HostSpec::new(&format!("r{i}"), Side::Right));
        }
        Topology { bottleneck, hosts }
    }

    /// Adds a host and returns the topology (builder style).
    pub fn with_host(mut self, host: HostSpec) -> Topology {
        self.hosts.push(host);
        self
    }

    /// Checks names and counts; `Testbed::up` calls this.
    pub fn validate(&self) -> Result<()> {
        self.bottleneck.validate().context("[bottleneck]")?;
        if self.hosts.is_empty() {
            bail!("the topology has no hosts (add [[host]] entries)");
        }
        let mut seen = std::collections::HashSet::new();
        for h in &self.hosts {
            check_host_name(&h.name)?;
            if h.name == "left" || h.name == "right" {
                bail!("host name `{}` is reserved for a router", h.name);
            }
            if !seen.insert(h.name.as_str()) {
                bail!("host name `{}` appears twice", h.name);
            }
            if h.side == Side::Chain {
                bail!("host `{}`: side = \"chain\" is for chain topologies ([[segment]]), not a dumbbell", h.name);
            }
        }
        for side in [Side::Left, Side::Right] {
            let n = self.hosts.iter().filter(|h| h.side == side).count();
            if n > MAX_HOSTS_PER_SIDE {
                bail!("{n} hosts on the {side:?} side; at most {MAX_HOSTS_PER_SIDE}");
            }
        }
        Ok(())
    }
}

/// The kind of a scenario flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlowKind {
    /// A TCP bulk transfer from `from` to `to` with kernel congestion control `cc`.
    Tcp,
    /// A UDP generator at `from` sending to a counting receiver at `to`.
    Udp,
    /// Web-like request/response: `from` is the client, `to` the server.
    Web,
}

/// The sending pattern of a UDP flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PatternKind {
    Cbr,
    Poisson,
    Onoff,
}

/// One `[[flow]]` of a scenario. Keys that do not apply to the flow's `kind` are errors.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    /// Name used in the CSV `flow` column; default `flow<N>`.
    #[serde(default)]
    pub name: Option<String>,
    pub kind: FlowKind,
    pub from: String,
    pub to: String,
    #[serde(default)]
    pub start: Dur,
    /// Default: until the end of the run.
    #[serde(default)]
    pub duration: Option<Dur>,
    /// tcp: kernel congestion control (default `cubic`).
    #[serde(default)]
    pub cc: Option<String>,
    /// udp: `cbr` (default), `poisson` or `onoff`.
    #[serde(default)]
    pub pattern: Option<PatternKind>,
    /// udp: mean rate (cbr, poisson) or rate while on (onoff), in IP bits.
    #[serde(default, deserialize_with = "opt_positive")]
    pub rate: Option<Rate>,
    /// udp: IP packet size in bytes (default 1200).
    #[serde(default)]
    pub size: Option<Bytes>,
    /// udp onoff: on and off period lengths.
    #[serde(default)]
    pub on: Option<Dur>,
    #[serde(default)]
    pub off: Option<Dur>,
    /// udp, web: random seed.
    #[serde(default)]
    pub seed: Option<u64>,
    /// web: objects per page (default 5).
    #[serde(default)]
    pub objects: Option<u32>,
    /// web: mean object size (default 20KB), Pareto distributed.
    #[serde(default)]
    pub object_mean: Option<Bytes>,
    /// web: Pareto shape (default 1.5, must be > 1).
    #[serde(default)]
    pub object_shape: Option<f64>,
    /// web: mean think time between pages (default 500ms), exponential.
    #[serde(default)]
    pub think: Option<Dur>,
}

fn default_duration() -> Dur {
    Dur::from_secs(10)
}
fn default_sample() -> Dur {
    Dur::from_millis(100)
}

/// `[run]`: how long `headroom testbed run` runs and how it samples.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    #[serde(default = "default_duration")]
    pub duration: Dur,
    /// Sampling interval of throughput, TCP_INFO and the qdisc backlog.
    #[serde(default = "default_sample", deserialize_with = "positive")]
    pub sample: Dur,
    /// CSV output path (relative to the current directory); the CLI's `-o` overrides it.
    #[serde(default)]
    pub output: Option<String>,
}

impl Default for RunSpec {
    fn default() -> Self {
        RunSpec { duration: default_duration(), sample: default_sample(), output: None }
    }
}

/// A whole scenario file: topology (`[bottleneck]`, `[[host]]`) plus optional `[run]` and
/// `[[flow]]` for `headroom testbed run`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub bottleneck: Bottleneck,
    #[serde(default, rename = "host")]
    pub hosts: Vec<HostSpec>,
    #[serde(default)]
    pub run: RunSpec,
    #[serde(default, rename = "flow")]
    pub flows: Vec<FlowSpec>,
}

impl Scenario {
    /// Parses TOML text; `origin` (a file name) prefixes error messages.
    pub fn parse(text: &str, origin: &str) -> Result<Scenario> {
        let s: Scenario = toml::from_str(text).map_err(|e| anyhow::anyhow!("{origin}: {e}"))?;
        s.validate().with_context(|| origin.to_string())?;
        Ok(s)
    }

    pub fn load(path: &Path) -> Result<Scenario> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Scenario::parse(&text, &path.display().to_string())
    }

    pub fn topology(&self) -> Topology {
        Topology { bottleneck: self.bottleneck.clone(), hosts: self.hosts.clone() }
    }

    /// The name of flow `i` in the CSV.
    pub fn flow_name(&self, i: usize) -> String {
        self.flows[i].name.clone().unwrap_or_else(|| format!("flow{}", i + 1))
    }

    pub fn validate(&self) -> Result<()> {
        self.topology().validate()?;
        let mut names = std::collections::HashSet::new();
        for (i, f) in self.flows.iter().enumerate() {
            let name = self.flow_name(i);
            let ctx = format!("[[flow]] `{name}`");
            if !names.insert(name.clone()) || name == "bottleneck" {
                bail!("{ctx}: name: used twice (or is the reserved `bottleneck`)");
            }
            for (key, host) in [("from", &f.from), ("to", &f.to)] {
                if !self.hosts.iter().any(|h| &h.name == host) {
                    bail!("{ctx}: {key}: no host named `{host}`");
                }
            }
            if f.from == f.to {
                bail!("{ctx}: from and to are the same host");
            }
            if f.start >= self.run.duration {
                bail!("{ctx}: start: {:?} is not before the run's end", f.start);
            }
            let not_for = |key: &str, present: bool| -> Result<()> {
                if present {
                    bail!("{ctx}: {key}: does not apply to kind {:?}", f.kind);
                }
                Ok(())
            };
            let udp_keys = [
                ("pattern", f.pattern.is_some()),
                ("rate", f.rate.is_some()),
                ("size", f.size.is_some()),
                ("on", f.on.is_some()),
                ("off", f.off.is_some()),
            ];
            let web_keys = [
                ("objects", f.objects.is_some()),
                ("object_mean", f.object_mean.is_some()),
                ("object_shape", f.object_shape.is_some()),
                ("think", f.think.is_some()),
            ];
            match f.kind {
                FlowKind::Tcp => {
                    for (k, p) in udp_keys.iter().chain(web_keys.iter()) {
                        not_for(k, *p)?;
                    }
                    not_for("seed", f.seed.is_some())?;
                }
                FlowKind::Udp => {
                    not_for("cc", f.cc.is_some())?;
                    for (k, p) in web_keys {
                        not_for(k, p)?;
                    }
                    if f.rate.is_none() {
                        bail!("{ctx}: rate: required for a udp flow");
                    }
                    let size = f.size.unwrap_or(Bytes(1200)).0;
                    if !(crate::traffic::MIN_UDP_SIZE as u64..=65_000).contains(&size) {
                        bail!("{ctx}: size: {size} bytes; use {}..=65000", crate::traffic::MIN_UDP_SIZE);
                    }
                    let onoff = f.pattern == Some(PatternKind::Onoff);
                    if onoff != (f.on.is_some() && f.off.is_some()) {
                        bail!("{ctx}: on/off: give both exactly when pattern = \"onoff\"");
                    }
                    if onoff && f.on.is_some_and(|d| d.0 == 0) {
                        bail!("{ctx}: on: must be positive");
                    }
                }
                FlowKind::Web => {
                    not_for("cc", f.cc.is_some())?;
                    for (k, p) in udp_keys {
                        not_for(k, p)?;
                    }
                    if f.objects == Some(0) {
                        bail!("{ctx}: objects: must be at least 1");
                    }
                    if let Some(a) = f.object_shape {
                        if !(a > 1.0 && a.is_finite()) {
                            bail!("{ctx}: object_shape: {a} must be > 1 (finite mean)");
                        }
                    }
                    if f.object_mean.is_some_and(|b| b.0 == 0) {
                        bail!("{ctx}: object_mean: must be positive");
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "t"
[bottleneck]
rate = "50Mbps"
buffer = "100pkts"
delay = "26ms"
loss = 0.01
[[host]]
name = "s1"
side = "left"
[[host]]
name = "r1"
side = "right"
delay = "5ms"
[run]
duration = "5s"
[[flow]]
kind = "udp"
from = "s1"
to = "r1"
pattern = "poisson"
rate = "10Mbps"
"#;

    #[test]
    fn parses_a_good_file() {
        let s = Scenario::parse(GOOD, "good.toml").unwrap();
        assert_eq!(s.bottleneck.rate, Some(Rate::from_mbps(50)));
        assert_eq!(s.bottleneck.buffer, Buffer::Packets(100));
        assert_eq!(s.bottleneck.reverse_delay(), Dur::from_millis(26));
        assert_eq!(s.hosts[1].delay, Dur::from_millis(5));
        assert_eq!(s.flows[0].pattern, Some(PatternKind::Poisson));
        assert_eq!(s.flow_name(0), "flow1");
        assert_eq!(s.bottleneck.arrival_spin, Dur::ZERO, "the box sleeps after every packet by default");
        let polls =
            Scenario::parse(&GOOD.replace("loss = 0.01", "loss = 0.01\narrival_spin = \"300us\""), "x").unwrap();
        assert_eq!(polls.bottleneck.arrival_spin, Dur::from_micros(300));
    }

    #[test]
    fn unknown_key_is_named_with_its_line() {
        let bad = GOOD.replace("loss = 0.01", "los = 0.01");
        let e = format!("{:#}", Scenario::parse(&bad, "x.toml").unwrap_err());
        assert!(e.contains("los"), "{e}");
        assert!(e.contains("line 7"), "{e}");
    }

    #[test]
    fn bad_values_are_named() {
        let e = format!("{:#}", Scenario::parse(&GOOD.replace("\"50Mbps\"", "\"50Mbq\""), "x").unwrap_err());
        assert!(e.contains("Mbq") && e.contains("line 4"), "{e}");
        let e = format!("{:#}", Scenario::parse(&GOOD.replace("0.01", "1.5"), "x").unwrap_err());
        assert!(e.contains("probability"), "{e}");
        let e = format!("{:#}", Scenario::parse(&GOOD.replace("to = \"r1\"", "to = \"r9\""), "x").unwrap_err());
        assert!(e.contains("to: no host named `r9`"), "{e}");
        let e =
            format!("{:#}", Scenario::parse(&GOOD.replace("pattern = \"poisson\"", "cc = \"bbr\""), "x").unwrap_err());
        assert!(e.contains("cc: does not apply"), "{e}");
        let e = format!("{:#}", Scenario::parse(&GOOD.replace("\"100pkts\"", "\"100\""), "x").unwrap_err());
        assert!(e.contains("smaller than one"), "{e}");
        let e = format!("{:#}", Scenario::parse(&GOOD.replace("name = \"s1\"", "name = \"left\""), "x").unwrap_err());
        assert!(e.contains("reserved"), "{e}");
    }

    #[test]
    fn units_follow_the_core_rules() {
        let s = Scenario::parse(&GOOD.replace("\"50Mbps\"", "\"10MBps\"").replace("0.01", "1.0"), "x").unwrap();
        assert_eq!(s.bottleneck.rate, Some(Rate::from_mbps(80)), "MBps is bytes per second");
        assert_eq!(s.bottleneck.loss, 1.0);
        for (bad, needle) in [
            (GOOD.replace("\"50Mbps\"", "\"0Mbps\""), "must be positive"),
            (GOOD.replace("\"50Mbps\"", "\"50mbps\""), "ambiguous"),
            (GOOD.replace("\"5s\"", "\"5s\"\nsample = \"0ms\""), "must be positive"),
            (GOOD.replace("\"26ms\"", "\"-26ms\""), "negative"),
            (GOOD.replace("0.01", "-0.01"), "probability"),
        ] {
            let e = format!("{:#}", Scenario::parse(&bad, "x").unwrap_err());
            assert!(e.contains(needle) && e.contains("line"), "{e}");
        }
    }

    #[test]
    fn a_shaper_sits_in_front_of_the_link() {
        let s = Scenario::parse(
            &GOOD.replace(
                "buffer = \"100pkts\"",
                "buffer = \"100pkts\"\nshaper = { rate = \"20Mbps\", burst = \"16KB\" }",
            ),
            "x",
        )
        .unwrap();
        let sh = s.bottleneck.shaper.unwrap();
        assert_eq!((sh.rate, sh.burst_bytes()), (Rate::from_mbps(20), 16_000));
        assert_eq!(s.bottleneck.rate, Some(Rate::from_mbps(50)), "the link keeps its own rate");
        // default bucket: max(3 MTU, 1 ms at the rate)
        assert_eq!(Shaper { rate: Rate::from_mbps(100), burst: None }.burst_bytes(), 12_500);
        assert_eq!(Shaper { rate: Rate::from_mbps(10), burst: None }.burst_bytes(), 4542);
        let e = format!(
            "{:#}",
            Scenario::parse(&GOOD.replace("buffer = \"100pkts\"", "burst = \"4KB\""), "x").unwrap_err()
        );
        assert!(e.contains("burst"), "the old tbf key is refused by name: {e}");
    }

    #[test]
    fn in_link_cross_traffic_is_a_typed_key_checked_against_its_link() {
        let with = |line: &str| {
            Scenario::parse(&GOOD.replace("buffer = \"100pkts\"", &format!("buffer = \"100pkts\"\n{line}")), "x")
        };
        let s = with("cross = { rate = \"20Mbps\" }").unwrap();
        assert_eq!(s.bottleneck.cross, Some(InLinkCross::new(Rate::from_mbps(20), Bytes(1000))));
        assert_eq!(s.bottleneck.reverse_cross, None);
        let s = with("cross = { rate = \"20Mbps\", packet = \"1500B\", seed = 9 }").unwrap();
        assert_eq!(s.bottleneck.cross.map(|c| (c.packet, c.seed)), Some((Bytes(1500), Some(9))));
        for (line, needle) in [
            ("cross = { rate = \"50Mbps\" }", "must be below the link's rate"),
            ("cross = { rate = \"0Mbps\" }", "must be positive"),
            ("cross = { rate = \"5Mbps\", packet = 10 }", "packet 10 B"),
            ("cross = { rate = \"5Mbps\", size = 1000 }", "unknown field `size`"),
            ("reverse_cross = { rate = \"5Mbps\" }", "reverse_cross: in-link cross traffic needs a link rate"),
        ] {
            let e = format!("{:#}", with(line).unwrap_err());
            assert!(e.contains(needle), "{line}: {e}");
        }
        let e = format!(
            "{:#}",
            Scenario::parse(
                &GOOD.replace("buffer = \"100pkts\"", "buffer = \"2KB\"\ncross = { rate = \"5Mbps\", packet = 3000 }"),
                "x"
            )
            .unwrap_err()
        );
        assert!(e.contains("larger than the 2000 B buffer"), "{e}");
    }

    #[test]
    fn buffer_forms() {
        assert_eq!(Buffer::parse("64KB"), Ok(Buffer::Bytes(Bytes(64_000))));
        assert_eq!(Buffer::parse("20 packets"), Ok(Buffer::Packets(20)));
        assert!(Buffer::parse("0pkt").is_err());
        assert!(Buffer::parse("x").is_err());
    }
}
