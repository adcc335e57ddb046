//! `headroom crosscheck FILE...`: one dumbbell scenario run twice — in the simulator (SACK and
//! the simulator's CUBIC or NewReno) and on the testbed (the kernel's CUBIC or Reno, selected
//! per socket) — and the two printed side by side: per-flow throughput, mean and 95th-percentile
//! RTT, retransmitted fraction, mean bottleneck queue and drops.
//!
//! # One file, two sides
//!
//! FILE is a *testbed* scenario (`[bottleneck]`, `[[host]]`, `[run]`, `[[flow]]`: what
//! `headroom testbed run` reads), so the kernel side is exactly `headroom testbed run FILE`. The
//! simulator's scenario is generated from it ([`sim_scenario`], printed by `--print-sim`):
//!
//! | testbed | simulator |
//! |---|---|
//! | `[bottleneck] rate, delay, reverse_delay, loss, reverse_loss, buffer` | link `left`–`right`: `rate`, `delay`, `delay_ba`, `loss`, `loss_ba`, `queue` / `queue_bytes` |
//! | `reverse_rate` (absent: unlimited) | `rate_ba` (absent: 10 Gbit/s) |
//! | `[[host]] side, rate, delay` (access link; absent rate: a veth, unlimited) | link host–router: `rate` (absent: 10 Gbit/s), `delay` |
//! | `kind = "tcp"`, `cc = "cubic"` / `"reno"` | `[[tcp]]` `cc = "cubic"` / `"newreno"` (Linux's Reno *is* NewReno with SACK), `sack = true`, `rto = "linux"`, `mss = 1460` (1500-byte packets, as Linux's 1448 + 12 bytes of timestamp option), `initial_window` (`--sim-iw`, Linux: 10), `delayed_ack` (`--sim-delayed-ack`, Linux: on) |
//! | `kind = "udp"`, `pattern = "poisson"` / `"cbr"`, `rate`, `size` | `[[udp]]` `pattern = { kind = "poisson" / "cbr", rate }`, `size = { kind = "fixed", size }` |
//! | `start`, `duration` | `start`, `stop` |
//!
//! What one side cannot do is refused with the reason: a token-bucket `shaper` (the simulator has
//! no tbf), `kind = "web"` (the two web models differ), `pattern = "onoff"` (the testbed's periods
//! are fixed, the simulator's exponential), any `cc` but `cubic` and `reno`, and an unlimited
//! bottleneck.
//!
//! # The same measurement on both sides
//!
//! Both sides are sampled every `[run] sample`: the testbed by its sampler (TCP_INFO of the
//! senders, the delay box's queue), the simulator by stepping the world to each sampling instant
//! and reading the same quantities. RTT is the *smoothed* RTT on both (`tcpi_rtt`; the simulator's
//! RFC 6298 SRTT, gain 1/8 per sample as Linux), the queue the packets waiting behind the one on
//! the wire (the delay box's and the simulator's drop-tail queue count the same way), loss the
//! retransmitted share of the data segments sent (`tcpi_total_retrans / tcpi_data_segs_out`; the
//! simulator's retransmissions / segments sent). Every figure covers `--warmup` to the end, so
//! the first slow start (and HyStart, which the kernel's CUBIC runs and the simulator's does not)
//! is left out. Throughput is counted at the IP level (delivered payload × 1500 / payload per
//! packet), so Linux's 12-byte timestamp option does not bias the comparison by 0.8 %.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use clap::{ArgAction, Args};
use headroom_core::units::{Dur, Time};
use headroom_sim::{Scenario as SimScenario, World};
use headroom_testbed::measure::Row;
use headroom_testbed::topology::{FlowKind, PatternKind};
use headroom_testbed::{Buffer, Scenario, Side};

/// Payload bytes per full-sized segment: Linux with timestamps (1500 − 20 − 20 − 12) and the
/// simulator's `mss` (its headers are 40 bytes, no options counted). Both send 1500-byte packets.
const KERNEL_PAYLOAD: f64 = 1448.0;
const SIM_MSS: u32 = 1460;
const PACKET: f64 = 1500.0;
/// The rate of links the testbed leaves unlimited (veths, an unlimited reverse direction).
const UNLIMITED: &str = "10Gbps";

#[derive(Args, Debug)]
pub struct CrosscheckArgs {
    /// Testbed scenario files (see scenarios/crosscheck/); several give one summary table.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Time left out at the start of every figure (the first slow start).
    #[arg(long, default_value = "5s")]
    warmup: Dur,
    /// Run the simulator only (no root needed; the kernel columns stay empty).
    #[arg(long)]
    sim_only: bool,
    /// Print the simulator scenario generated from FILE and exit.
    #[arg(long)]
    print_sim: bool,
    /// The simulator's initial window, segments (Linux: 10).
    #[arg(long, default_value_t = 10)]
    sim_iw: u32,
    /// Delayed ACKs at the simulator's receivers (Linux: on, an ACK per two segments).
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    sim_delayed_ack: bool,
    /// `KEY=VALUE`: a sysctl set in every testbed host's namespace before the flows start
    /// (repeatable), e.g. `net.ipv4.tcp_recovery=0` (RACK off).
    #[arg(long = "kernel-sysctl", value_name = "KEY=VALUE")]
    kernel_sysctl: Vec<String>,
    /// Segmentation offloads of every testbed host's eth0: `ethtool -K eth0 tso/gso/gro off`.
    #[arg(long)]
    kernel_offloads_off: bool,
    /// Per-flow throughput tolerance of the verdict, percent.
    #[arg(long, default_value = "10")]
    throughput_tol: f64,
    /// Mean queue tolerance of the verdict, percent.
    #[arg(long, default_value = "25")]
    queue_tol: f64,
    /// One JSON object per file on stdout instead of the tables.
    #[arg(long)]
    json: bool,
}

/// One side's figures over the measured window.
#[derive(Clone, Debug, Default)]
struct Figures {
    /// Per flow (scenario order): IP-level throughput, mean and p95 smoothed RTT (TCP only),
    /// retransmitted share (TCP only).
    flows: Vec<FlowFig>,
    mean_queue_pkts: f64,
    /// Bottleneck drops in the window (queue overflow and random loss).
    drops: f64,
}

#[derive(Clone, Debug, Default)]
struct FlowFig {
    mbps: f64,
    rtt_mean_ms: Option<f64>,
    rtt_p95_ms: Option<f64>,
    retrans_pct: Option<f64>,
}

/// The delay box's own health over a testbed run.
#[derive(Clone, Debug, Default)]
struct BoxHealth {
    own_drops: u64,
    tun_drops: u64,
    mean_late_us: f64,
    max_late_us: f64,
    /// Upper bound of the lateness histogram's bucket holding the 99th percentile.
    p99_late_us: f64,
}

impl BoxHealth {
    fn keeps_up(&self) -> bool {
        self.own_drops == 0 && self.tun_drops == 0 && self.mean_late_us < 100.0
    }
}

struct Outcome {
    file: PathBuf,
    desc: String,
    names: Vec<String>,
    ccs: Vec<String>,
    sim: Figures,
    kernel: Option<(Figures, BoxHealth)>,
}

pub fn run(a: CrosscheckArgs) -> Result<()> {
    for (flag, v) in [("--throughput-tol", a.throughput_tol), ("--queue-tol", a.queue_tol)] {
        if !(v.is_finite() && v > 0.0) {
            bail!("{flag}: {v} is not a positive percentage");
        }
    }
    for kv in &a.kernel_sysctl {
        parse_sysctl(kv)?;
    }
    let mut loaded = Vec::new();
    for f in &a.files {
        let s = Scenario::load(f)?;
        let sim = sim_scenario(&s, a.sim_iw, a.sim_delayed_ack).with_context(|| f.display().to_string())?;
        if a.warmup >= s.run.duration {
            bail!("{}: --warmup {} is not shorter than the run ({})", f.display(), a.warmup, s.run.duration);
        }
        loaded.push((f.clone(), s, sim));
    }
    if a.print_sim {
        for (f, _, sim) in &loaded {
            println!("# generated from {}\n{sim}", f.display());
        }
        return Ok(());
    }
    if !a.sim_only {
        if let Some(why) = headroom_testbed::unsupported_reason() {
            bail!("the testbed is not available ({why}); use --sim-only for the simulator side alone");
        }
    }
    let interrupt = Arc::new(AtomicBool::new(false));
    if !a.sim_only {
        headroom_testbed::bed::interrupt_on_signal(interrupt.clone());
    }
    let mut outcomes = Vec::new();
    for (f, s, sim_text) in &loaded {
        let sim = run_sim(s, sim_text, f, a.warmup)?;
        let kernel = if a.sim_only { None } else { Some(run_kernel(s, &a, &interrupt)?) };
        let o = Outcome {
            file: f.clone(),
            desc: describe(s),
            names: (0..s.flows.len()).map(|i| s.flow_name(i)).collect(),
            ccs: s.flows.iter().map(|f| f.cc.clone().unwrap_or_else(|| kind_name(f.kind).into())).collect(),
            sim,
            kernel,
        };
        if a.json {
            println!("{}", outcome_json(&o, &a));
        } else {
            print!("{}", outcome_table(&o, &a));
        }
        outcomes.push(o);
    }
    if !a.json && outcomes.len() > 1 {
        print!("{}", summary_table(&outcomes, &a));
    }
    Ok(())
}

fn kind_name(k: FlowKind) -> &'static str {
    match k {
        FlowKind::Tcp => "tcp",
        FlowKind::Udp => "udp",
        FlowKind::Web => "web",
    }
}

fn parse_sysctl(kv: &str) -> Result<(&str, &str)> {
    let (k, v) = kv.split_once('=').ok_or_else(|| anyhow!("--kernel-sysctl `{kv}`: give KEY=VALUE"))?;
    let ok = |t: &str| !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || "._-/ ".contains(c));
    if !ok(k) || !ok(v) || k.contains(' ') {
        bail!("--kernel-sysctl `{kv}`: key and value must be plain (letters, digits, . _ - /)");
    }
    if !k.starts_with("net.") {
        bail!("--kernel-sysctl `{kv}`: only net.* keys (they are per namespace; others would change the host)");
    }
    Ok((k, v))
}

fn fmt_dur(d: Dur) -> String {
    format!("{}us", d.0 / 1000)
}

fn base_rtt(s: &Scenario, from: &str, to: &str) -> Dur {
    let extra = |h: &str| s.hosts.iter().find(|x| x.name == h).map_or(Dur::ZERO, |x| x.delay);
    let b = &s.bottleneck;
    Dur(b.delay.0 + b.reverse_delay().0 + 2 * (extra(from).0 + extra(to).0))
}

/// "10 Mbit/s, RTT 40 ms, buffer 33 pkts (1.0 BDP), 2 tcp + 1 udp, 30 s".
fn describe(s: &Scenario) -> String {
    let b = &s.bottleneck;
    let rate = b.rate.map_or(0.0, |r| r.as_mbps());
    let rtt =
        s.flows.iter().find(|f| f.kind == FlowKind::Tcp).map_or(base_rtt(s, "", ""), |f| base_rtt(s, &f.from, &f.to));
    let bdp_pkts = rate * 1e6 * rtt.as_secs_f64() / 8.0 / PACKET;
    let buf = match b.buffer {
        Buffer::Packets(n) => format!("{n} pkts ({:.2} BDP)", n as f64 / bdp_pkts),
        Buffer::Bytes(x) => format!("{} B ({:.2} BDP)", x.0, x.0 as f64 / PACKET / bdp_pkts),
    };
    let n = |k| s.flows.iter().filter(|f| f.kind == k).count();
    format!(
        "{rate} Mbit/s, RTT {:.0} ms, buffer {buf}, {} tcp + {} udp, {:.0} s",
        rtt.as_millis_f64(),
        n(FlowKind::Tcp),
        n(FlowKind::Udp),
        s.run.duration.as_secs_f64()
    )
}

/// The simulator's scenario for the testbed scenario `s` (the mapping in the module doc), or why
/// there is none.
pub fn sim_scenario(s: &Scenario, iw: u32, delayed_ack: bool) -> Result<String> {
    let b = &s.bottleneck;
    if b.shaper.is_some() {
        bail!("[bottleneck] shaper: the simulator has no token-bucket shaper; remove it to cross-check");
    }
    let Some(rate) = b.rate else { bail!("[bottleneck] rate: the simulator needs a bottleneck rate") };
    let mut t = String::new();
    let _ = writeln!(t, "name = {:?}", s.name.clone().unwrap_or_else(|| "crosscheck".into()));
    let _ = writeln!(t, "duration = \"{}\"\nseed = {}\n", fmt_dur(s.run.duration), b.seed);
    for h in &s.hosts {
        let (a, z) = match h.side {
            Side::Left => (h.name.as_str(), "left"),
            Side::Right => ("right", h.name.as_str()),
            Side::Chain => bail!("host `{}`: crosscheck runs dumbbell files, not chains", h.name),
        };
        let r = h.rate.map_or(UNLIMITED.to_string(), |r| format!("{}bps", r.bps()));
        let _ = writeln!(t, "[[link]]\na = {a:?}\nb = {z:?}\nrate = \"{r}\"\ndelay = \"{}\"\n", fmt_dur(h.delay));
    }
    let _ = writeln!(t, "[[link]]\na = \"left\"\nb = \"right\"\nrate = \"{}bps\"", rate.bps());
    let rev = b.reverse_rate.map_or(UNLIMITED.to_string(), |r| format!("{}bps", r.bps()));
    let _ = writeln!(
        t,
        "rate_ba = \"{rev}\"\ndelay = \"{}\"\ndelay_ba = \"{}\"",
        fmt_dur(b.delay),
        fmt_dur(b.reverse_delay())
    );
    match b.buffer {
        Buffer::Packets(n) => {
            let _ = writeln!(t, "queue = {n}");
        }
        Buffer::Bytes(x) => {
            let _ = writeln!(t, "queue_bytes = \"{}B\"", x.0);
        }
    }
    let _ = writeln!(t, "loss = {}\nloss_ba = {}\n", b.loss, b.reverse_loss);
    for (i, f) in s.flows.iter().enumerate() {
        let name = s.flow_name(i);
        let ctx = format!("[[flow]] `{name}`");
        let start = fmt_dur(f.start);
        let stop = f.duration.map(|d| format!("stop = \"{}\"\n", fmt_dur(Dur(f.start.0 + d.0)))).unwrap_or_default();
        match f.kind {
            FlowKind::Tcp => {
                let cc = match f.cc.as_deref().unwrap_or("cubic") {
                    "cubic" => "cubic",
                    "reno" => "newreno",
                    other => {
                        bail!("{ctx}: cc = \"{other}\": the cross-check compares the kernel's cubic and reno only")
                    }
                };
                let _ = writeln!(
                    t,
                    "[[tcp]]\nname = {name:?}\nfrom = {:?}\nto = {:?}\ncc = \"{cc}\"\nsack = true\nrto = \"linux\"\n\
                     mss = {SIM_MSS}\ninitial_window = {iw}\ndelayed_ack = {delayed_ack}\nstart = \"{start}\"\n{stop}",
                    f.from, f.to
                );
            }
            FlowKind::Udp => {
                let kind = match f.pattern.unwrap_or(PatternKind::Cbr) {
                    PatternKind::Poisson => "poisson",
                    PatternKind::Cbr => "cbr",
                    PatternKind::Onoff => bail!(
                        "{ctx}: pattern = \"onoff\": the testbed's on/off periods are fixed, the simulator's \
                         exponential; use poisson or cbr"
                    ),
                };
                let rate = f.rate.map_or(1_000_000, |r| r.bps());
                let size = f.size.map_or(1200, |b| b.0);
                let _ = writeln!(
                    t,
                    "[[udp]]\nname = {name:?}\nfrom = {:?}\nto = {:?}\npattern = {{ kind = \"{kind}\", rate = \"{rate}bps\" }}\n\
                     size = {{ kind = \"fixed\", size = {size} }}\nstart = \"{start}\"\n{stop}",
                    f.from, f.to
                );
            }
            FlowKind::Web => {
                bail!("{ctx}: kind = \"web\": the testbed's and the simulator's web models differ; not cross-checked")
            }
        }
    }
    let _ = writeln!(t, "[trace]\ninterval = \"{}\"\ncwnd = false\nrtt = false", fmt_dur(s.run.sample));
    Ok(t)
}

/// Runs the simulator side, sampling as the testbed does; rows in the testbed's shape.
fn run_sim(s: &Scenario, text: &str, file: &Path, warmup: Dur) -> Result<Figures> {
    let sc = SimScenario::parse(text, &format!("{} (generated simulator scenario)", file.display()))
        .map_err(|e| anyhow!("{e}"))?;
    let mut w = World::new(&sc, None).map_err(|e| anyhow!("{}: {e}", file.display()))?;
    let names: Vec<String> = (0..s.flows.len()).map(|i| s.flow_name(i)).collect();
    let stat_of: Vec<usize> = names
        .iter()
        .map(|n| w.stats.iter().position(|st| &st.name == n).ok_or_else(|| anyhow!("simulator lost flow `{n}`")))
        .collect::<Result<_>>()?;
    let link = w
        .net
        .links
        .iter()
        .position(|l| l.name == "left->right")
        .ok_or_else(|| anyhow!("simulator: no bottleneck link"))?;
    // the i-th [[tcp]] entry is bulk flow i
    let mut bulk_of = HashMap::new();
    for (k, i) in s.flows.iter().enumerate().filter(|(_, f)| f.kind == FlowKind::Tcp).map(|(i, _)| i).enumerate() {
        bulk_of.insert(i, k);
    }
    let dt = s.run.sample.0;
    let mut rows = Vec::new();
    let mut last = vec![0u64; names.len()];
    let mut t = dt;
    while t <= s.run.duration.0 {
        w.run_until(Time(t));
        let ts = t as f64 * 1e-9;
        for (i, n) in names.iter().enumerate() {
            let b = w.stats[stat_of[i]].bytes;
            rows.push(Row {
                time_s: ts,
                flow: n.clone(),
                metric: "throughput_bps",
                value: (b - last[i]) as f64 * 8e9 / dt as f64,
            });
            last[i] = b;
            if let Some(c) = bulk_of.get(&i).and_then(|&k| w.bulk_conn(k)) {
                if let Some(r) = c.rtt.srtt() {
                    rows.push(Row { time_s: ts, flow: n.clone(), metric: "rtt_ms", value: r.as_millis_f64() });
                }
                rows.push(Row {
                    time_s: ts,
                    flow: n.clone(),
                    metric: "retrans_segs",
                    value: c.counters.retransmits as f64,
                });
                rows.push(Row {
                    time_s: ts,
                    flow: n.clone(),
                    metric: "data_segs_out",
                    value: c.counters.segments_sent as f64,
                });
            }
        }
        let l = &w.net.links[link];
        rows.push(Row {
            time_s: ts,
            flow: "bottleneck".into(),
            metric: "queue_pkts",
            value: l.queued_packets() as f64,
        });
        rows.push(Row {
            time_s: ts,
            flow: "bottleneck".into(),
            metric: "drops",
            value: (l.drops + l.random_losses) as f64,
        });
        t += dt;
    }
    Ok(summarise(s, &rows, warmup, SIM_MSS as f64))
}

fn run_kernel(s: &Scenario, a: &CrosscheckArgs, interrupt: &AtomicBool) -> Result<(Figures, BoxHealth)> {
    let sysctls: Vec<(String, String)> = a
        .kernel_sysctl
        .iter()
        .map(|kv| parse_sysctl(kv).map(|(k, v)| (k.to_string(), v.to_string())))
        .collect::<Result<_>>()?;
    let offloads_off = a.kernel_offloads_off;
    let out = headroom_testbed::scenario::run_with(s, interrupt, |tb| {
        for h in tb.hosts() {
            for (k, v) in &sysctls {
                tb.exec(&h.name, &["sysctl", "-q", "-w", &format!("{k}={v}")])?;
            }
            if offloads_off {
                tb.exec(&h.name, &["ethtool", "-K", "eth0", "tso", "off", "gso", "off", "gro", "off"])
                    .context("--kernel-offloads-off needs ethtool")?;
            }
        }
        Ok(())
    })?;
    if out.interrupted_after.is_some() {
        bail!("interrupted");
    }
    let link = out.forward_link.unwrap_or_default();
    let health = BoxHealth {
        own_drops: link.own_drops(),
        tun_drops: out.tun_drops.0 + out.tun_drops.1,
        mean_late_us: link.mean_lateness().0 as f64 / 1e3,
        max_late_us: link.late_max_ns as f64 / 1e3,
        p99_late_us: link.lateness_quantile_bound(0.99).0 as f64 / 1e3,
    };
    Ok((summarise(s, &out.recorder.rows(), a.warmup, KERNEL_PAYLOAD), health))
}

/// The figures over `warmup..end` from rows of either side.
fn summarise(s: &Scenario, rows: &[Row], warmup: Dur, payload: f64) -> Figures {
    let from = warmup.as_secs_f64();
    let inside: Vec<&Row> = rows.iter().filter(|r| r.time_s > from + 1e-9).collect();
    let values = |flow: &str, metric: &str| -> Vec<f64> {
        inside.iter().filter(|r| r.flow == flow && r.metric == metric).map(|r| r.value).collect()
    };
    // a cumulative counter's growth over the window: last value inside minus the last before
    let growth = |flow: &str, metric: &str| -> Option<f64> {
        let before = rows.iter().rev().find(|r| r.flow == flow && r.metric == metric && r.time_s <= from + 1e-9);
        let end = rows.iter().rev().find(|r| r.flow == flow && r.metric == metric)?;
        Some(end.value - before.map_or(0.0, |r| r.value))
    };
    // The time average over the window: each sample weighs the time since the previous sample of
    // its series. The testbed's sampler falls behind under load and then samples back to back;
    // a plain mean of its per-interval rates would then weigh a few milliseconds like 50 (one run
    // read 103 Mbit/s through a 100 Mbit/s link so). For `throughput_bps`, whose samples are the
    // bytes since the previous sample over that time, this is exactly bytes / time.
    let time_mean = |flow: &str, metric: &str| -> Option<f64> {
        let (mut prev, mut sum, mut total) = (0.0, 0.0, 0.0);
        for r in rows.iter().filter(|r| r.flow == flow && r.metric == metric) {
            let dt = r.time_s - prev;
            prev = r.time_s;
            if r.time_s > from + 1e-9 {
                sum += r.value * dt;
                total += dt;
            }
        }
        (total > 0.0).then(|| sum / total)
    };
    let mut flows = Vec::new();
    for (i, f) in s.flows.iter().enumerate() {
        let name = s.flow_name(i);
        let thr = time_mean(&name, "throughput_bps").unwrap_or(0.0);
        let ip = if f.kind == FlowKind::Tcp { thr * PACKET / payload } else { thr };
        let mut rtt = values(&name, "rtt_ms");
        rtt.sort_by(f64::total_cmp);
        let p95 = (!rtt.is_empty()).then(|| rtt[((rtt.len() as f64 * 0.95).ceil() as usize).clamp(1, rtt.len()) - 1]);
        let retrans = match (growth(&name, "retrans_segs"), growth(&name, "data_segs_out")) {
            (Some(r), Some(o)) if o > 0.0 => Some(100.0 * r / o),
            _ => None,
        };
        let rtt_mean_ms = time_mean(&name, "rtt_ms");
        flows.push(FlowFig { mbps: ip / 1e6, rtt_mean_ms, rtt_p95_ms: p95, retrans_pct: retrans });
    }
    Figures {
        flows,
        mean_queue_pkts: time_mean("bottleneck", "queue_pkts").unwrap_or(0.0),
        drops: growth("bottleneck", "drops").unwrap_or(0.0),
    }
}

/// (sim − kernel) / kernel, percent.
fn diff_pct(sim: f64, kernel: f64) -> f64 {
    if kernel == 0.0 {
        if sim == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        100.0 * (sim - kernel) / kernel
    }
}

/// Worst per-TCP-flow throughput difference and the queue difference, percent.
fn verdict(o: &Outcome) -> Option<(f64, f64)> {
    let (k, _) = o.kernel.as_ref()?;
    let thr = o
        .sim
        .flows
        .iter()
        .zip(&k.flows)
        .filter(|(s, _)| s.rtt_mean_ms.is_some())
        .map(|(s, k)| diff_pct(s.mbps, k.mbps).abs())
        .fold(0.0, f64::max);
    Some((thr, diff_pct(o.sim.mean_queue_pkts, k.mean_queue_pkts)))
}

/// The TCP flows' summed throughput, Mbit/s.
fn tcp_total(f: &Figures) -> f64 {
    f.flows.iter().filter(|f| f.rtt_mean_ms.is_some()).map(|f| f.mbps).sum()
}

/// The difference of the TCP flows' summed throughput, percent.
fn total_diff(o: &Outcome) -> Option<f64> {
    o.kernel.as_ref().map(|(k, _)| diff_pct(tcp_total(&o.sim), tcp_total(k)))
}

fn opt(v: Option<f64>, d: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.d$}"))
}

fn outcome_table(o: &Outcome, a: &CrosscheckArgs) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "crosscheck {}: {}; figures over {} to the end", o.file.display(), o.desc, a.warmup);
    let _ = writeln!(
        t,
        "{:<10} {:<7} {:>8} {:>8} {:>7} | {:>8} {:>8} | {:>8} {:>8} | {:>7} {:>7}",
        "flow", "cc", "sim Mb/s", "kernel", "diff %", "sim RTT", "kernel", "sim p95", "kernel", "sim rtx%", "kernel"
    );
    let none = FlowFig::default();
    for (i, s) in o.sim.flows.iter().enumerate() {
        let k = o.kernel.as_ref().map(|(k, _)| &k.flows[i]);
        let kk = k.unwrap_or(&none);
        let _ = writeln!(
            t,
            "{:<10} {:<7} {:>8.3} {:>8} {:>7} | {:>8} {:>8} | {:>8} {:>8} | {:>7} {:>7}",
            o.names[i],
            o.ccs[i],
            s.mbps,
            opt(k.map(|k| k.mbps), 3),
            opt(k.map(|k| diff_pct(s.mbps, k.mbps)), 1),
            opt(s.rtt_mean_ms, 2),
            opt(kk.rtt_mean_ms, 2),
            opt(s.rtt_p95_ms, 2),
            opt(kk.rtt_p95_ms, 2),
            opt(s.retrans_pct, 3),
            opt(kk.retrans_pct, 3),
        );
    }
    let kq = o.kernel.as_ref().map(|(k, _)| k.mean_queue_pkts);
    let _ = writeln!(
        t,
        "bottleneck: mean queue {:.1} pkts (sim) {} pkts (kernel), diff {} %; drops {:.0} (sim) {} (kernel)",
        o.sim.mean_queue_pkts,
        opt(kq, 1),
        opt(kq.map(|k| diff_pct(o.sim.mean_queue_pkts, k)), 1),
        o.sim.drops,
        opt(o.kernel.as_ref().map(|(k, _)| k.drops), 0)
    );
    if let Some((_, h)) = &o.kernel {
        let _ = writeln!(
            t,
            "delay box: own drops {}, TUN input drops {}, release lateness mean {:.1} us, p99 < {:.0} us, max {:.0} us: {}",
            h.own_drops,
            h.tun_drops,
            h.mean_late_us,
            h.p99_late_us,
            h.max_late_us,
            if h.keeps_up() { "kept up" } else { "DID NOT KEEP UP (kernel figures are CPU-limited)" }
        );
    }
    if let (Some((thr, q)), Some(sum)) = (verdict(o), total_diff(o)) {
        let _ = writeln!(
            t,
            "verdict: per-flow throughput within {}%: {} (worst {thr:.1}%, TCP sum {sum:+.1}%); mean queue within {}%: {} ({q:+.1}%)",
            a.throughput_tol,
            yes(thr <= a.throughput_tol),
            a.queue_tol,
            yes(q.abs() <= a.queue_tol)
        );
    }
    t.push('\n');
    t
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "NO"
    }
}

fn summary_table(os: &[Outcome], a: &CrosscheckArgs) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{:<20} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11} {:>7} {:>5}",
        "path", "flow |d|%", "sum d%", "q sim", "q kernel", "q diff%", "RTT sim", "RTT kernel", "box ok", "goal"
    );
    let mut met = 0;
    for o in os {
        let name = o.file.file_stem().map_or(String::new(), |s| s.to_string_lossy().into_owned());
        let rtt = |s: &Figures| {
            let v: Vec<f64> = s.flows.iter().filter_map(|f| f.rtt_mean_ms).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        let v = verdict(o);
        let ok = v.is_some_and(|(thr, q)| thr <= a.throughput_tol && q.abs() <= a.queue_tol);
        met += ok as usize;
        let _ = writeln!(
            t,
            "{:<20} {:>9} {:>9} {:>9.1} {:>9} {:>9} {:>9} {:>11} {:>7} {:>5}",
            name,
            opt(v.map(|v| v.0), 1),
            opt(total_diff(o), 1),
            o.sim.mean_queue_pkts,
            opt(o.kernel.as_ref().map(|(k, _)| k.mean_queue_pkts), 1),
            opt(v.map(|v| v.1), 1),
            opt(rtt(&o.sim), 2),
            opt(o.kernel.as_ref().and_then(|(k, _)| rtt(k)), 2),
            o.kernel.as_ref().map_or("-", |(_, h)| yes(h.keeps_up())),
            if v.is_some() { yes(ok) } else { "-" }
        );
    }
    let _ = writeln!(
        t,
        "paths meeting the goal (throughput within {}%, mean queue within {}%): {met} of {}",
        a.throughput_tol,
        a.queue_tol,
        os.len()
    );
    t
}

fn outcome_json(o: &Outcome, a: &CrosscheckArgs) -> String {
    let side = |s: &Figures| {
        serde_json::json!({
            "flows": s.flows.iter().enumerate().map(|(i, f)| serde_json::json!({
                "name": o.names[i], "cc": o.ccs[i], "mbps": f.mbps, "rtt_mean_ms": f.rtt_mean_ms,
                "rtt_p95_ms": f.rtt_p95_ms, "retrans_pct": f.retrans_pct,
            })).collect::<Vec<_>>(),
            "mean_queue_pkts": s.mean_queue_pkts,
            "drops": s.drops,
        })
    };
    let v = verdict(o);
    serde_json::json!({
        "file": o.file.display().to_string(),
        "path": o.desc,
        "warmup_s": a.warmup.as_secs_f64(),
        "sim": side(&o.sim),
        "kernel": o.kernel.as_ref().map(|(k, _)| side(k)),
        "delay_box": o.kernel.as_ref().map(|(_, h)| serde_json::json!({
            "own_drops": h.own_drops, "tun_drops": h.tun_drops, "mean_late_us": h.mean_late_us,
            "max_late_us": h.max_late_us, "p99_late_us_bound": h.p99_late_us, "kept_up": h.keeps_up(),
        })),
        "throughput_diff_pct_worst": v.map(|v| v.0),
        "tcp_total_diff_pct": total_diff(o),
        "queue_diff_pct": v.map(|v| v.1),
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Scenario {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/crosscheck/small.toml"))
                .unwrap();
        Scenario::parse(&text, "small.toml").unwrap()
    }

    fn row(t: f64, flow: &str, metric: &'static str, value: f64) -> Row {
        Row { time_s: t, flow: flow.into(), metric, value }
    }

    #[test]
    fn figures_leave_the_warmup_out_and_take_counters_as_growth() {
        let s = small();
        let mut rows = Vec::new();
        for k in 1..=20 {
            let t = k as f64 * 0.5;
            // before 5 s: rate 1 Mbit/s, RTT 100 ms, queue 50; after: 2 Mbit/s, RTT k ms, queue 4
            let late = t > 5.0;
            rows.push(row(t, "cubic1", "throughput_bps", if late { 2e6 } else { 1e6 }));
            rows.push(row(t, "cubic1", "rtt_ms", if late { k as f64 } else { 100.0 }));
            rows.push(row(t, "cubic1", "retrans_segs", k as f64));
            rows.push(row(t, "cubic1", "data_segs_out", 100.0 * k as f64));
            rows.push(row(t, "bottleneck", "queue_pkts", if late { 4.0 } else { 50.0 }));
            rows.push(row(t, "bottleneck", "drops", 3.0 * k as f64));
        }
        let f = summarise(&s, &rows, Dur::from_secs(5), 1448.0);
        let c = &f.flows[0];
        assert!((c.mbps - 2.0 * 1500.0 / 1448.0).abs() < 1e-9, "{c:?}");
        // RTT k = 11..=20 ms: mean 15.5, p95 = the 10th of 10 sorted = 20
        assert_eq!(c.rtt_mean_ms, Some(15.5));
        assert_eq!(c.rtt_p95_ms, Some(20.0));
        // retransmissions 20 - 10 of 2000 - 1000 segments
        assert_eq!(c.retrans_pct, Some(1.0));
        assert_eq!(f.mean_queue_pkts, 4.0);
        assert_eq!(f.drops, 30.0);
    }

    #[test]
    fn a_sampler_that_falls_behind_does_not_inflate_the_throughput() {
        let s = small();
        // 10 Mbit/s throughout, sampled every 50 ms but for a stall: one 250 ms interval and then
        // four samples 1 ms apart that carry the stalled interval's bytes unevenly
        let mut rows = Vec::new();
        let mut t = 0.0;
        let mut push = |dt: f64, bits: f64| {
            t += dt;
            rows.push(row(t, "cubic1", "throughput_bps", bits / dt));
            rows.push(row(t, "bottleneck", "queue_pkts", 2.0));
        };
        for _ in 0..200 {
            push(0.05, 0.5e6);
        }
        push(0.25, 1e6);
        for _ in 0..4 {
            push(0.001, 0.4e6);
        }
        for _ in 0..40 {
            push(0.05, 0.5e6);
        }
        let f = summarise(&s, &rows, Dur::from_secs(5), 1500.0);
        // from 5 s on: the last 100 regular samples, the stall, the catching up, 40 more
        let bits = 100.0 * 0.5e6 + 1e6 + 4.0 * 0.4e6 + 40.0 * 0.5e6;
        let time = 5.0 + 0.25 + 0.004 + 40.0 * 0.05;
        assert!((f.flows[0].mbps - bits / time / 1e6).abs() < 1e-9, "{:?}", f.flows[0]);
        assert!((f.mean_queue_pkts - 2.0).abs() < 1e-9);
    }

    #[test]
    fn the_generated_simulator_scenario_keeps_the_path() {
        let text = sim_scenario(&small(), 10, true).unwrap();
        let sc = SimScenario::parse(&text, "generated").unwrap();
        let l = sc.links.iter().find(|l| l.a.get_ref() == "left").unwrap();
        assert_eq!((l.rate.bps(), l.delay, l.queue), (10_000_000, Dur::from_millis(10), Some(17)));
        let t = &sc.tcp[0];
        assert_eq!((t.sack, t.initial_window, t.mss, t.delayed_ack), (Some(true), Some(10), Some(1460), true));
        assert_eq!(t.cc.to_string(), "cubic");
        assert!(diff_pct(11.0, 10.0) > 9.99 && diff_pct(0.0, 0.0) == 0.0);
    }
}
