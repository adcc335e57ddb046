//! `headroom send-bench`: `headroom send` on the testbed (issue 15), root only.
//!
//! - **measure**: a dumbbell (two pairs) with a `--rate` bottleneck (50 Mbit/s), `--delay` each
//!   way, Poisson UDP cross traffic of 1000-byte packets from `s2` to `r2` at each `--levels`;
//!   `s1` runs `send --measure` (kernel CUBIC) to a receiver in `r1` for `--seconds`. The true
//!   available bandwidth is the rate minus the cross traffic. Reported: median estimate and its
//!   error, the error distribution (10/50/90th percentiles of the relative error), the time of
//!   the first estimate and the estimates per second; beside the simulator's ImTCP (over Reno,
//!   the simulator has no CUBIC) on the same path (same rate, delay, buffer, cross traffic).
//! - **background**: the same dumbbell without cross traffic; a foreground `send` with kernel
//!   CUBIC `s2 → r2` and a background sender `s1 → r1`, for `--seconds` each run: the
//!   foreground alone, the background alone, then both together, with `send --background`
//!   (ImTCP-bg's in-flight limit over kernel CUBIC) and with plain kernel CUBIC and Reno as the
//!   background sender (the harm baseline). With `--runs N` the three runs repeat N times and
//!   the table gives medians over rounds, the leftover taken within each round. Goals: the foreground keeps ≥ 95 % of its
//!   throughput alone, the background uses ≥ 80 % of what the foreground leaves (the link's
//!   payload capacity minus the foreground's goodput alone: [`leftover_of`]) and ≥ 85 % of the
//!   link alone.
//! - **web**: the same dumbbell; the foreground is web-like: `--web-clients` clients in `r2`,
//!   each fetching pages one at a time over its own persistent connection from a server in `s2`
//!   (kernel CUBIC), with ImTCP §4.3's page model, the simulator's default web model
//!   (`scenarios/imtcp-bg/web.toml`): 8 objects per page, Pareto object sizes (shape 1.2, mean
//!   12 KB), exponential think time (mean 1 s); each client's seed is fixed, so every run asks for
//!   the same objects. Reported per background sender: the mean page time against the web alone
//!   and the background's throughput against what the web leaves. Goals: page time within 5 %,
//!   background ≥ 80 % of the leftover. The web-alone line also gives the fraction of the run
//!   with at least one page in flight (the union of every client's page intervals).
//! - **paced senders** (`--senders paced-40`, any 1..=200): kernel CUBIC with its pacing capped
//!   at that percentage of the leftover measured earlier in the same round (the web alone, or
//!   the foreground alone), by `SO_MAX_PACING_RATE` (`send --max-rate`): a constant-rate
//!   background, as gentle as a sender of that rate can be without yielding. Swept over rates
//!   they give the trade-off frontier that `send --background` is measured against.
//!   `window-P` is the self-clocked counterpart: kernel CUBIC with a fixed in-flight limit
//!   (`send --max-in-flight`) of P % of the leftover times the propagation RTT (2 × `--delay`),
//!   whose rate falls as the queue grows.
//! - **integrity**: `--integrity-bytes` with `--verify` through a bottleneck that drops
//!   `--loss` of the packets at random (no rate limit, so loss, not the rate, sets the time):
//!   mismatches must be zero.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use headroom_core::cc::imtcp_bg::{ImtcpBgConfig, RttCur};
use headroom_core::imtcp::ControlConfig;
use headroom_core::stats::median;
use headroom_core::units::{parse_positive, Bytes, Dur, Rate};
use headroom_net::transfer::{
    send, IntervalReport, Mode, Receiver, ReceiverConfig, SendLimit, SendOptions, TransferReport,
};
use headroom_testbed::sys;
use headroom_testbed::topology::Buffer;
use headroom_testbed::traffic::{PoissonCross, GENERATOR_PRIORITY};
use headroom_testbed::{Bottleneck, Testbed, Topology};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Part {
    Measure,
    Background,
    Web,
    Integrity,
}

#[derive(Args, Debug, Clone)]
pub struct SendBenchArgs {
    /// Which parts to run (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "measure,background,web,integrity")]
    pub parts: Vec<Part>,
    /// Bottleneck rate.
    #[arg(long, default_value = "50Mbps", value_parser = parse_positive::<Rate>)]
    pub rate: Rate,
    /// One-way delay of the bottleneck.
    #[arg(long, default_value = "10ms")]
    pub delay: Dur,
    /// Bottleneck buffer (packets or bytes).
    #[arg(long, default_value = "100pkts")]
    pub buffer: String,
    /// Cross-traffic levels (Poisson UDP, 1000-byte packets).
    #[arg(long, default_value = "0,15Mbps,30Mbps", value_delimiter = ',')]
    pub levels: Vec<Rate>,
    /// Seconds of measured transfer per level.
    #[arg(long, default_value_t = 20)]
    pub seconds: u64,
    /// Packets per measurement stream (ImTCP's N).
    #[arg(long, default_value_t = 35)]
    pub stream_len: usize,
    /// Payload of the integrity run.
    #[arg(long, default_value = "1GB")]
    pub integrity_bytes: Bytes,
    /// Random loss of the integrity run's path (forward direction).
    #[arg(long, default_value_t = 0.01)]
    pub loss: f64,
    /// Skip the simulator comparison.
    #[arg(long)]
    pub no_sim: bool,
    /// Background senders to compare (comma-separated): `paper` (send --background
    /// --paper-rule), `rtt-cur` (... --rtt-cur 4), `floor` (... --rtt-cur 4
    /// --measurement-floor), `linear` (... --rtt-cur 4 --measurement-floor --linear-regrowth),
    /// `headroom` (send --background: --rtt-cur 4 --measurement-allowance --linear-regrowth), `cubic`, `reno` (kernel), `lp`, `ledbat`, `becc` (headroom's BPF controllers, loaded
    /// under per-run names for the run; skipped with a note when they cannot load), `paced-P`
    /// (kernel cubic paced at P % of the round's leftover, P in 1..=200, `send --max-rate`), `window-P` (kernel cubic with P % of the leftover times the propagation RTT in flight, `send --max-in-flight`).
    #[arg(long, value_delimiter = ',', default_value = "paper,floor,linear,headroom,cubic,reno,lp,ledbat")]
    pub senders: Vec<String>,
    /// TARGET of the BPF LEDBAT background sender (RFC 6817 allows at most 100 ms; the
    /// 100-packet buffer of 50 Mbit/s holds 24 ms, so a larger TARGET never yields).
    #[arg(long, default_value = "10ms")]
    pub ledbat_target: Dur,
    /// Web clients of the web-like foreground (`--parts web`), each one page at a time.
    #[arg(long, default_value_t = 20)]
    pub web_clients: u32,
    /// Rounds of the web and background parts: each round runs the foreground alone, then
    /// beside each sender in turn, and the ratios are taken within its round; the tables give
    /// medians over rounds (the web-alone page time drifts by ~15 % between single runs on a
    /// shared machine).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub runs: u32,
}

const PORT: u16 = 5301;
const CROSS_PORT: u16 = 9000;
const CROSS_SIZE: usize = 1000;
/// The measured sender's SCHED_FIFO priority: above the cross-traffic generator, below the
/// delay box (as probe-bench's).
const SENDER_PRIORITY: i32 = GENERATOR_PRIORITY + 1;

pub fn run_send_bench(a: SendBenchArgs) -> Result<()> {
    if let Some(why) = headroom_testbed::unsupported_reason() {
        bail!("the testbed cannot run here: {why}");
    }
    if a.levels.iter().any(|l| *l >= a.rate) {
        bail!("every cross-traffic level must be below the bottleneck rate {}", a.rate);
    }
    if !(0.0..1.0).contains(&a.loss) {
        bail!("--loss must be in [0, 1)");
    }
    if a.seconds == 0 {
        bail!("--seconds must be at least 1");
    }
    if !(1..=200).contains(&a.web_clients) {
        bail!("--web-clients must be within 1..=200");
    }
    let mut out = String::new();
    if a.parts.contains(&Part::Measure) {
        out += &on_dumbbell(&a, measure_on)?;
    }
    if a.parts.contains(&Part::Background) {
        out += &on_dumbbell(&a, background_on)?;
    }
    if a.parts.contains(&Part::Web) {
        out += &on_dumbbell(&a, web_on)?;
    }
    if a.parts.contains(&Part::Integrity) {
        out += &integrity_part(&a)?;
    }
    print!("{out}");
    Ok(())
}

/// A receiver in `host` serving until the returned flag is set.
fn start_receiver(tb: &Testbed, host: &str) -> Result<(Arc<AtomicBool>, std::thread::JoinHandle<Result<()>>)> {
    let rx = tb.run_in(host, || Ok(Receiver::bind(("0.0.0.0", PORT), ReceiverConfig::default())?))?;
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let t = tb.spawn_in(host, move || {
        rx.serve(s2, Arc::new(|_, _: &IntervalReport| {}), Arc::new(|_| {}))?;
        Ok(())
    })?;
    Ok((stop, t))
}

fn stop_all(stop: &AtomicBool, threads: Vec<std::thread::JoinHandle<Result<()>>>) -> Result<()> {
    stop.store(true, Ordering::SeqCst);
    for t in threads {
        match t.join() {
            Ok(r) => r?,
            Err(_) => bail!("a helper thread panicked"),
        }
    }
    Ok(())
}

/// One measured transfer from `s1` (priority: real-time, see [`SENDER_PRIORITY`]).
fn measured_send(tb: &Testbed, opts: SendOptions) -> Result<TransferReport> {
    let dst = SocketAddr::new(tb.host("r1")?.addr.into(), PORT).to_string();
    tb.run_in("s1", move || {
        if !sys::set_realtime(SENDER_PRIORITY) {
            eprintln!("warning: no real-time priority for the sender");
        }
        send(&dst, &opts, &mut |_| {}).map_err(anyhow::Error::from)
    })
}

fn percentile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[((s.len() - 1) as f64 * q).round() as usize]
}

/// Accuracy of one set of estimates (Mbit/s) against `truth`.
struct Accuracy {
    n: usize,
    median: f64,
    rel_err: [f64; 3],
    first_s: Option<f64>,
    per_s: f64,
}

fn accuracy(values: &[(f64, f64)], truth: f64, seconds: f64) -> Accuracy {
    let v: Vec<f64> = values.iter().map(|x| x.1).collect();
    let rel: Vec<f64> = v.iter().map(|x| (x - truth) / truth).collect();
    Accuracy {
        n: v.len(),
        median: median(&v).unwrap_or(f64::NAN),
        rel_err: [percentile(&rel, 0.1), percentile(&rel, 0.5), percentile(&rel, 0.9)],
        first_s: values.first().map(|x| x.0),
        per_s: v.len() as f64 / seconds,
    }
}

fn sim_scenario(a: &SendBenchArgs, cross: Rate, seconds: u64) -> String {
    let buffer = match Buffer::parse(&a.buffer) {
        Ok(Buffer::Packets(p)) => p.to_string(),
        _ => "100".into(),
    };
    let cross_flow = if cross > Rate::ZERO {
        format!(
            "[[udp]]\nname = \"cross\"\nfrom = \"xs\"\nto = \"xd\"\npattern = {{ kind = \"poisson\", rate = \"{}bps\" }}\nsize = {{ kind = \"fixed\", size = {CROSS_SIZE} }}\n",
            cross.0
        )
    } else {
        String::new()
    };
    format!(
        "name = \"send-bench-sim\"\nduration = \"{seconds}s\"\nseed = 1\n\
         [[link]]\na = \"sender\"\nb = \"r1\"\nrate = \"1Gbps\"\ndelay = \"0ms\"\n\
         [[link]]\na = \"xs\"\nb = \"r1\"\nrate = \"1Gbps\"\ndelay = \"0ms\"\n\
         [[link]]\na = \"r1\"\nb = \"r2\"\nrate = \"{}bps\"\ndelay = \"{}ns\"\nqueue = {buffer}\n\
         [[link]]\na = \"r2\"\nb = \"receiver\"\nrate = \"1Gbps\"\ndelay = \"0ms\"\n\
         [[link]]\na = \"r2\"\nb = \"xd\"\nrate = \"1Gbps\"\ndelay = \"0ms\"\n\
         [[tcp]]\nname = \"imtcp\"\nfrom = \"sender\"\nto = \"receiver\"\ncc = \"reno\"\nimtcp = {{ link_rate = \"1Gbps\" }}\n{cross_flow}",
        a.rate.0, a.delay.0
    )
}

/// The simulator's ImTCP estimates (time s, Mbit/s) on the same path.
fn sim_estimates(a: &SendBenchArgs, cross: Rate) -> Result<Vec<(f64, f64)>> {
    let src = sim_scenario(a, cross, a.seconds);
    let sc = headroom_sim::Scenario::parse(&src, "send-bench")?;
    let mut w = headroom_sim::World::new(&sc, None).map_err(anyhow::Error::msg)?;
    w.run();
    Ok(w.estimates
        .iter()
        .filter(|e| e.method == headroom_sim::probe::EstimateMethod::Imtcp)
        .filter_map(|e| e.value.map(|v| (e.time.as_secs_f64(), v.as_mbps())))
        .collect())
}

/// Runs `part` on a two-pair dumbbell with the `--rate`/`--delay`/`--buffer` bottleneck, and
/// takes the testbed down whatever happens.
fn on_dumbbell(a: &SendBenchArgs, part: fn(&Testbed, &SendBenchArgs) -> Result<String>) -> Result<String> {
    let buffer = Buffer::parse(&a.buffer).map_err(|e| anyhow::anyhow!("--buffer: {e}"))?;
    let bottleneck = Bottleneck { rate: Some(a.rate), buffer, ..Bottleneck::new(Some(a.rate), a.delay) };
    let tb = Testbed::up(&Topology::dumbbell(2, bottleneck)).context("building the testbed")?;
    eprintln!("testbed {}: {} bottleneck, {} each way, buffer {}", tb.prefix(), a.rate, a.delay, a.buffer);
    let result = part(&tb, a);
    let down = tb.down();
    let s = result?;
    down?;
    Ok(s)
}

fn measure_on(tb: &Testbed, a: &SendBenchArgs) -> Result<String> {
    let (rx_stop, rx) = start_receiver(tb, "r1")?;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "== measure: send --measure (kernel cubic) through {} with Poisson cross traffic, {} s per level; true A = rate - cross\n\
         (sim: the simulator's ImTCP over Reno on the same path; error = estimate/true - 1, percentiles 10/50/90)",
        a.rate, a.seconds
    );
    let _ = writeln!(
        s,
        "{:>6} {:>6} | {:>5} {:>8} {:>7} {:>22} {:>7} {:>6} {:>8} | {:>5} {:>8} {:>7} {:>22} {:>7} {:>6} | goal",
        "cross",
        "true",
        "n",
        "median",
        "error",
        "err p10/p50/p90 %",
        "first",
        "est/s",
        "Mbit/s",
        "sim n",
        "median",
        "error",
        "err p10/p50/p90 %",
        "first",
        "est/s"
    );
    let mut goals = Vec::new();
    for (k, &cross) in a.levels.iter().enumerate() {
        let cross_traffic =
            PoissonCross::start(tb, ("s2", "r2"), CROSS_PORT, cross, CROSS_SIZE, (1 + k as u64, 1 + k as u32))?;
        std::thread::sleep(Duration::from_secs(if cross > Rate::ZERO { 2 } else { 0 }));
        let mut c = ControlConfig::default();
        c.measurement.stream_len = a.stream_len;
        c.measurement.delayed_ack = true;
        let opts = SendOptions {
            limit: SendLimit::Time(Duration::from_secs(a.seconds)),
            interval: None,
            cc: Some("cubic".into()),
            mode: Mode::Measure(Box::new(c)),
            ..SendOptions::default()
        };
        let (fwd0, rev0) = tb.delaybox_counters();
        let rep = measured_send(tb, opts);
        let (fwd, rev) = tb.delaybox_counters();
        let (fwd, rev) = (fwd.since(&fwd0), rev.since(&rev0));
        cross_traffic.stop()?;
        let rep = rep?;
        let truth = a.rate.as_mbps() - cross.as_mbps();
        let real: Vec<(f64, f64)> = rep.estimates.iter().map(|e| (e.time.as_secs_f64(), e.value.as_mbps())).collect();
        let r = accuracy(&real, truth, rep.duration.as_secs_f64());
        let sim = if a.no_sim { Vec::new() } else { sim_estimates(a, cross)? };
        let m = accuracy(&sim, truth, a.seconds as f64);
        let pct = |x: [f64; 3]| format!("{:+.0}/{:+.0}/{:+.0}", x[0] * 100.0, x[1] * 100.0, x[2] * 100.0);
        let first = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}s"));
        let ok = (r.median - truth).abs() <= 0.15 * truth && r.first_s.is_some_and(|f| f <= 2.0);
        goals.push(ok);
        let _ = writeln!(
            s,
            "{:>6.1} {:>6.1} | {:>5} {:>8.2} {:>+6.1}% {:>22} {:>7} {:>6.1} {:>8.2} | {:>5} {:>8.2} {:>+6.1}% {:>22} {:>7} {:>6.1} | {}",
            cross.as_mbps(),
            truth,
            r.n,
            r.median,
            (r.median / truth - 1.0) * 100.0,
            pct(r.rel_err),
            first(r.first_s),
            r.per_s,
            rep.rate.as_mbps(),
            m.n,
            m.median,
            (m.median / truth - 1.0) * 100.0,
            pct(m.rel_err),
            first(m.first_s),
            m.per_s,
            if ok { "met" } else { "MISSED" }
        );
        if let Some(ms) = rep.measure {
            let _ = writeln!(
                s,
                "       real: {} streams, {} failed, {} measurements; {} pieces of {} B, {} stamps, {} merged ACKs, {} pieces without ACK stamp, {} without send stamp, {} write stalls; box release lateness mean {:.1} us forward, {:.1} us reverse",
                ms.control.streams_sent,
                ms.control.stream_failures,
                ms.control.measurements,
                ms.pieces,
                ms.mss,
                ms.tracker.stamps,
                ms.tracker.merged_acks,
                ms.tracker.missing_ack,
                ms.tracker.missing_send,
                ms.write_stalls,
                fwd.mean_lateness().0 as f64 / 1e3,
                rev.mean_lateness().0 as f64 / 1e3
            );
        }
    }
    let _ = writeln!(
        s,
        "goal (issue 15): median within 15 % of the true value and first estimate within 2 s at every level: {}\n",
        if goals.iter().all(|g| *g) { "met" } else { "MISSED" }
    );
    stop_all(&rx_stop, vec![rx])?;
    Ok(s)
}

fn integrity_part(a: &SendBenchArgs) -> Result<String> {
    let bottleneck = Bottleneck { loss: a.loss, seed: 7, ..Bottleneck::new(None, Dur::from_millis(1)) };
    let tb = Testbed::up(&Topology::dumbbell(1, bottleneck)).context("building the testbed")?;
    eprintln!("testbed {}: unlimited bottleneck, 1 ms each way, {:.1} % loss forward", tb.prefix(), a.loss * 100.0);
    let result = (|| {
        let (rx_stop, rx) = start_receiver(&tb, "r1")?;
        let dst = SocketAddr::new(tb.host("r1")?.addr.into(), PORT).to_string();
        let bytes = a.integrity_bytes.0;
        let rep = tb.run_in("s1", move || {
            let opts =
                SendOptions { limit: SendLimit::Bytes(bytes), interval: None, verify: true, ..SendOptions::default() };
            send(&dst, &opts, &mut |_| {}).map_err(anyhow::Error::from)
        });
        stop_all(&rx_stop, vec![rx])?;
        rep
    })();
    let down = tb.down();
    let rep = result?;
    down?;
    let t = rep.received.context("no account from the receiver")?;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "== integrity: {} B with --verify through {:.1} % random loss: received {} B in {:.1} s ({:.1} Mbit/s), {} retransmits, {} mismatched bytes: {}\n",
        rep.bytes,
        a.loss * 100.0,
        t.payload,
        rep.duration.as_secs_f64(),
        rep.rate.as_mbps(),
        rep.retransmits,
        t.mismatched,
        if t.mismatched == 0 && t.payload == rep.bytes { "met" } else { "MISSED" }
    );
    Ok(s)
}

/// Which sender a background run uses.
#[derive(Clone, Debug, PartialEq)]
enum BgSender {
    /// `send --background` with this rule, under this label.
    ImtcpBg(&'static str, ImtcpBgConfig),
    /// A bulk sender with this kernel congestion control (a label, the name to select).
    Kernel(String, String),
    /// `send --background` with headroom's rule at normal scheduling priority: the control for
    /// what the real-time priority of the ImTCP senders costs the foreground on a shared CPU.
    ImtcpBgNotRealtime(&'static str, ImtcpBgConfig),
    /// Kernel cubic with its pacing capped (`SO_MAX_PACING_RATE`) at this percentage of the
    /// round's leftover.
    Paced(LeftoverPercent),
    /// Kernel cubic with a fixed in-flight limit (`send --max-in-flight`) of this percentage of
    /// the round's leftover times the path's propagation RTT (2 × `--delay`).
    Window(LeftoverPercent),
}

/// A percentage of the leftover, 1..=200 (`paced-P`, `window-P`): above 100 the limit sits beyond the leftover.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeftoverPercent(u32);

impl LeftoverPercent {
    /// `PREFIX-P` (`paced-P`, `window-P`) with P in 1..=200.
    pub fn parse_sender(name: &str, prefix: &str) -> Option<Result<LeftoverPercent>> {
        let p = name.strip_prefix(prefix)?.strip_prefix('-')?;
        Some(match p.parse::<u32>() {
            Ok(v) if (1..=200).contains(&v) => Ok(LeftoverPercent(v)),
            _ => Err(anyhow::anyhow!(
                "--senders: {name:?}: {prefix}-P takes a whole percentage P of the leftover in 1..=200"
            )),
        })
    }
    /// The in-flight limit for a leftover of `leftover_mbps` over a round trip of `rtt`: that
    /// share of the leftover's bandwidth-delay product, at least two 1448-byte segments.
    fn window(self, leftover_mbps: f64, rtt: Dur) -> Bytes {
        let bdp = leftover_mbps * 1e6 / 8.0 * rtt.as_secs_f64();
        Bytes((bdp * self.0 as f64 / 100.0).max(2.0 * 1448.0) as u64)
    }
    /// The pacing cap for a leftover of `leftover_mbps`; at least 0.1 Mbit/s, so that a round
    /// whose foreground took the whole link still runs a (tiny) paced sender.
    fn cap(self, leftover_mbps: f64) -> Rate {
        Rate::from_bps((leftover_mbps * self.0 as f64 / 100.0 * 1e6).max(1e5) as u64)
    }
}

/// Width of the sender column (the root test reads the row after it).
pub const LABEL_WIDTH: usize = 62;

impl BgSender {
    /// The ImTCP senders run at a real-time priority (their stream timing); the control does not.
    fn realtime(&self) -> bool {
        matches!(self, BgSender::ImtcpBg(..))
    }
    fn name(&self) -> String {
        match self {
            BgSender::ImtcpBg(l, _) | BgSender::ImtcpBgNotRealtime(l, _) => (*l).into(),
            BgSender::Kernel(l, _) => l.clone(),
            BgSender::Paced(p) => format!("kernel cubic paced at {} % of the leftover", p.0),
            BgSender::Window(p) => format!("kernel cubic, in flight {} % of the leftover's BDP", p.0),
        }
    }
    /// The sender's options; `leftover_mbps` is the round's leftover (paced senders only).
    fn options(&self, a: &SendBenchArgs, leftover_mbps: f64) -> SendOptions {
        let mut c = ControlConfig::default();
        c.measurement.stream_len = a.stream_len;
        c.measurement.delayed_ack = true;
        let (cc, mode) = match self {
            BgSender::ImtcpBg(_, bg) | BgSender::ImtcpBgNotRealtime(_, bg) => {
                ("cubic", Mode::Background(Box::new(c), *bg))
            }
            BgSender::Kernel(_, cc) => (cc.as_str(), Mode::Bulk),
            BgSender::Paced(_) | BgSender::Window(_) => ("cubic", Mode::Bulk),
        };
        SendOptions {
            limit: SendLimit::Time(Duration::from_secs(a.seconds)),
            interval: None,
            cc: Some(cc.into()),
            mode,
            max_pacing_rate: match self {
                BgSender::Paced(p) => Some(p.cap(leftover_mbps)),
                _ => None,
            },
            max_in_flight: match self {
                BgSender::Window(p) => Some(p.window(leftover_mbps, Dur(2 * a.delay.0))),
                _ => None,
            },
            ..SendOptions::default()
        }
    }
}

/// The background senders of `--senders`, with the BPF controllers they need registered (held
/// until the returned guards drop) and notes on those that could not load.
fn bg_senders(a: &SendBenchArgs) -> Result<(Vec<BgSender>, Vec<headroom_bpf::Registered>, Vec<String>)> {
    let (mut out, mut held, mut notes) = (Vec::new(), Vec::new(), Vec::new());
    let rtt4 = ImtcpBgConfig { rtt_cur: RttCur::MinOfLast(4), ..ImtcpBgConfig::default() };
    let n = a.stream_len as u32;
    for name in &a.senders {
        match name.as_str() {
            "paper" => out.push(BgSender::ImtcpBg("send --background --paper-rule", ImtcpBgConfig::default())),
            "rtt-cur" => out.push(BgSender::ImtcpBg("send --background --paper-rule --rtt-cur 4", rtt4)),
            "floor" => out.push(BgSender::ImtcpBg(
                "send --background --paper-rule --rtt-cur 4 --m-floor",
                ImtcpBgConfig { measurement_floor: Some(n), ..rtt4 },
            )),
            "linear" => out.push(BgSender::ImtcpBg(
                "send --background --paper-rule --rtt-cur 4 --m-floor --linear",
                ImtcpBgConfig { measurement_floor: Some(n), reduction_sets_ssthresh: true, ..rtt4 },
            )),
            "headroom" => out.push(BgSender::ImtcpBg(
                "send --background (headroom's rule, the default)",
                ImtcpBgConfig::headroom(a.stream_len),
            )),
            // δ = 1.2, the paper's second value (seed 000 Figs. 5-9): Eq. 4 acts at 20 % of
            // RTT_min of queueing instead of 50 %.
            "headroom-d12" => out.push(BgSender::ImtcpBg(
                "send --background --delta 1.2",
                ImtcpBgConfig { delta: 1.2, ..ImtcpBgConfig::headroom(a.stream_len) },
            )),
            // The same without the one-stream allowance over Ā·RTT_min (the floor keeps streams
            // forming): does the allowance's standing queue cost the web its page time?
            "headroom-not-rt" => out.push(BgSender::ImtcpBgNotRealtime(
                "send --background, normal priority (no SCHED_FIFO)",
                ImtcpBgConfig::headroom(a.stream_len),
            )),
            "headroom-d12-floor" => out.push(BgSender::ImtcpBg(
                "send --background --delta 1.2, floor instead of allowance",
                ImtcpBgConfig {
                    delta: 1.2,
                    measurement_allowance: None,
                    measurement_floor: Some(n),
                    ..ImtcpBgConfig::headroom(a.stream_len)
                },
            )),
            "cubic" | "reno" => out.push(BgSender::Kernel(format!("kernel {name}"), name.clone())),
            other if LeftoverPercent::parse_sender(other, "paced").is_some() => {
                out.push(BgSender::Paced(LeftoverPercent::parse_sender(other, "paced").expect("checked")?))
            }
            other if LeftoverPercent::parse_sender(other, "window").is_some() => {
                out.push(BgSender::Window(LeftoverPercent::parse_sender(other, "window").expect("checked")?))
            }
            other => {
                let Some(c) = headroom_bpf::Controller::parse(other) else {
                    bail!("--senders: unknown sender {other:?} (paper, rtt-cur, floor, linear, headroom, headroom-d12, headroom-d12-floor, headroom-not-rt, cubic, reno, lp, ledbat, becc, paced-P, window-P)")
                };
                let unique = headroom_bpf::unique_name(c);
                let opts = headroom_bpf::LoadOptions {
                    name: Some(unique.clone()),
                    ledbat_target: (c == headroom_bpf::Controller::Ledbat)
                        .then(|| Duration::from_nanos(a.ledbat_target.0)),
                };
                match headroom_bpf::load(c, &opts) {
                    Ok(r) => {
                        out.push(BgSender::Kernel(format!("kernel {other} (BPF, as {unique})"), unique));
                        held.push(r);
                    }
                    Err(e) => notes.push(format!("{other}: not loaded: {e}")),
                }
            }
        }
    }
    Ok((out, held, notes))
}

/// Starts a transfer from `from` to `to`'s receiver in a thread; returns its join handle.
fn spawn_send(
    tb: &Testbed,
    from: &str,
    to: &str,
    opts: SendOptions,
    realtime: bool,
) -> Result<std::thread::JoinHandle<Result<TransferReport>>> {
    let dst = SocketAddr::new(tb.host(to)?.addr.into(), PORT).to_string();
    tb.spawn_in(from, move || {
        if realtime && !sys::set_realtime(SENDER_PRIORITY) {
            eprintln!("warning: no real-time priority for the sender");
        }
        send(&dst, &opts, &mut |_| {}).map_err(anyhow::Error::from)
    })
}

fn join_send(t: std::thread::JoinHandle<Result<TransferReport>>) -> Result<TransferReport> {
    match t.join() {
        Ok(r) => r,
        Err(_) => bail!("a sender thread panicked"),
    }
}

/// Goodput of a sender's report: what the peer's TCP acknowledged by the end of the sending
/// loop, over its duration (the written rate counts the send queue left at the end too).
fn goodput(r: &TransferReport) -> f64 {
    r.acked_rate().unwrap_or(r.rate).as_mbps()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_fraction_is_the_union_of_page_intervals_over_the_span() {
        // [0,10] and [5,15] overlap into [0,15]; a gap to [20,30]: 25 of 30 ns covered.
        assert!((busy_fraction(&[(20, 30), (0, 10), (5, 15)]) - 25.0 / 30.0).abs() < 1e-12);
        // Nested intervals count once; one interval covers its own span.
        assert_eq!(busy_fraction(&[(0, 100), (10, 20)]), 1.0);
        assert_eq!(busy_fraction(&[]), 0.0);
    }

    #[test]
    fn the_leftover_is_counted_in_goodput_like_the_foreground() {
        // a foreground at the payload ceiling of 50 Mbit/s leaves nothing, not its headers
        assert!(leftover_of(50.0, 50.0 * 1448.0 / 1500.0).abs() < 1e-9);
        assert!((leftover_of(50.0, 48.05) - 0.2167).abs() < 1e-3);
        assert!((leftover_of(50.0, 16.45) - 31.8167).abs() < 1e-3);
        assert_eq!(leftover_of(10.0, 12.0), 0.0, "never negative");
    }

    #[test]
    fn paced_senders_parse_a_whole_percentage_of_the_leftover() {
        assert_eq!(LeftoverPercent::parse_sender("paced-40", "paced").unwrap().unwrap(), LeftoverPercent(40));
        assert_eq!(LeftoverPercent::parse_sender("window-60", "window").unwrap().unwrap(), LeftoverPercent(60));
        assert!(LeftoverPercent::parse_sender("paced-0", "paced").unwrap().is_err());
        assert!(LeftoverPercent::parse_sender("paced-201", "paced").unwrap().is_err());
        assert!(LeftoverPercent::parse_sender("paced-x", "paced").unwrap().is_err());
        assert!(LeftoverPercent::parse_sender("cubic", "paced").is_none());
        assert!(LeftoverPercent::parse_sender("window-40", "paced").is_none());
        assert_eq!(LeftoverPercent(40).cap(30.0), Rate::from_bps(12_000_000));
        assert_eq!(LeftoverPercent(40).cap(0.0), Rate::from_bps(100_000));
        // 40 % of 32 Mbit/s over 20 ms: 0.4 × 80,000 B; never below two segments.
        assert_eq!(LeftoverPercent(40).window(32.0, Dur::from_millis(20)), Bytes(32_000));
        assert_eq!(LeftoverPercent(1).window(1.0, Dur::from_millis(20)), Bytes(2896));
    }

    #[test]
    fn the_frontier_line_names_the_points_that_meet_both_goals() {
        let l = frontier_line("paced", &[(20, 1.01, 0.2), (80, 1.07, 0.79)]);
        assert!(l.contains(": none;") && l.contains("paced-20, 20 % at 1.010"), "{l}");
        let l = frontier_line("window", &[(80, 1.04, 0.81)]);
        assert!(l.contains("window-80 (1.040 at 81 %)"), "{l}");
        assert!(frontier_line("paced", &[(60, 1.2, 0.6)]).ends_with("no point within 5 %"));
    }
}

/// One background sender in one round of the background part (goodputs, Mbit/s).
#[derive(Clone, Copy, Debug)]
struct BgRound {
    alone: f64,
    fg: f64,
    bg: f64,
}

fn background_on(tb: &Testbed, a: &SendBenchArgs) -> Result<String> {
    let (s1, t1) = start_receiver(tb, "r1")?;
    let (s2, t2) = start_receiver(tb, "r2")?;
    let fg_opts = || SendOptions {
        limit: SendLimit::Time(Duration::from_secs(a.seconds)),
        interval: None,
        cc: Some("cubic".into()),
        ..SendOptions::default()
    };
    let link = a.rate.as_mbps();
    let (senders, _registered, notes) = bg_senders(a)?;
    // Per round: the foreground alone (goodput, written rate), then each sender alone and beside it.
    let mut fg_alone: Vec<(f64, f64)> = Vec::new();
    let mut rounds: Vec<Vec<BgRound>> = vec![Vec::new(); senders.len()];
    let mut counters: Vec<Option<String>> = vec![None; senders.len()];
    for _ in 0..a.runs {
        let r = join_send(spawn_send(tb, "s2", "r2", fg_opts(), false)?)?;
        let (fg0, written0) = (goodput(&r), r.rate.as_mbps());
        fg_alone.push((fg0, written0));
        let leftover = leftover_of(link, fg0);
        for (i, bg) in senders.iter().enumerate() {
            let ours = bg.realtime();
            let alone = join_send(spawn_send(tb, "s1", "r1", bg.options(a, leftover), ours)?)?;
            let bt = spawn_send(tb, "s1", "r1", bg.options(a, leftover), ours)?;
            let ft = spawn_send(tb, "s2", "r2", fg_opts(), false)?;
            let fg = goodput(&join_send(ft)?);
            let both = join_send(bt)?;
            rounds[i].push(BgRound { alone: goodput(&alone), fg, bg: goodput(&both) });
            if let (true, Some(m), Some(ma)) = (ours, both.measure, alone.measure) {
                counters[i] = Some(format!(
                    "with fg: {} estimates, {} Eq. 4 reductions, {} losses, last limit {} B; alone: {} estimates, {} reductions, {} losses",
                    both.estimates.len(),
                    m.reductions,
                    m.losses,
                    m.last_limit.unwrap_or(0),
                    alone.estimates.len(),
                    ma.reductions,
                    ma.losses,
                ));
            }
        }
    }
    let med = |v: Vec<f64>| median(&v).unwrap_or(f64::NAN);
    let fg0 = med(fg_alone.iter().map(|r| r.0).collect());
    let leftover = leftover_of(link, fg0);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "== background: foreground = kernel cubic bulk s2 -> r2, {} s per run, {} bottleneck, {} round{}; rates are goodputs (acknowledged payload)",
        a.seconds,
        a.rate,
        a.runs,
        if a.runs == 1 { "" } else { "s (medians over rounds; ratios within each round)" }
    );
    let per: Vec<String> = fg_alone.iter().map(|r| format!("{:.2} ({:.2} written)", r.0, r.1)).collect();
    let _ = writeln!(
        s,
        "foreground alone: {fg0:.2} Mbit/s ({:.1} % of the link; rounds: {})",
        fg0 / link * 100.0,
        per.join(", ")
    );
    let _ = writeln!(
        s,
        "{:<w$} {:>10} {:>8} {:>12} {:>12} {:>14} | goals",
        "background sender",
        "bg alone",
        "% link",
        "fg with bg",
        "fg kept %",
        "bg with fg",
        w = LABEL_WIDTH
    );
    let mut verdicts = Vec::new();
    for ((bg, rs), counter) in senders.iter().zip(&rounds).zip(&counters) {
        let alone = med(rs.iter().map(|r| r.alone).collect());
        let fg = med(rs.iter().map(|r| r.fg).collect());
        let bgr = med(rs.iter().map(|r| r.bg).collect());
        let kept = med(rs.iter().zip(&fg_alone).map(|(r, f)| r.fg / f.0).collect());
        let left = |f: &(f64, f64)| leftover_of(link, f.0);
        let used = med(rs.iter().zip(&fg_alone).map(|(r, f)| r.bg / left(f).max(f64::MIN_POSITIVE)).collect());
        let goals = [kept >= 0.95, leftover <= 0.0 || used >= 0.80, alone >= 0.85 * link];
        let yes = |b: bool| if b { "met" } else { "MISSED" };
        let _ = writeln!(
            s,
            "{:<w$} {:>10.2} {:>7.1}% {:>12.2} {:>11.1}% {:>9.2} ({:>4.0}% of leftover) | fg kept {}, leftover used {}, alone {}",
            bg.name(),
            alone,
            alone / link * 100.0,
            fg,
            kept * 100.0,
            bgr,
            used * 100.0,
            yes(goals[0]),
            yes(goals[1]),
            yes(goals[2]),
            w = LABEL_WIDTH
        );
        if a.runs > 1 {
            let per: Vec<String> = rs
                .iter()
                .zip(&fg_alone)
                .map(|(r, f)| format!("{:.1}%/{:.2}/{:.0}%", r.fg / f.0 * 100.0, r.bg, r.bg / left(f) * 100.0))
                .collect();
            let _ =
                writeln!(s, "{:<w$}   rounds (fg kept/bg Mbit/s/% leftover): {}", "", per.join("  "), w = LABEL_WIDTH);
        }
        if let Some(c) = counter {
            let _ = writeln!(s, "{:<w$} {c} (last round)", "", w = LABEL_WIDTH);
        }
        verdicts.push((bg, goals));
    }
    for n in notes {
        let _ = writeln!(s, "{n}");
    }
    let spread = fg_alone.iter().map(|r| r.0).fold(f64::NEG_INFINITY, f64::max)
        - fg_alone.iter().map(|r| r.0).fold(f64::INFINITY, f64::min);
    let _ = writeln!(
        s,
        "(leftover = the link's payload capacity {:.2} ({link:.1} Mbit/s of IP packets carrying 1448-byte segments) - foreground alone {fg0:.2} = {leftover:.2} Mbit/s of goodput; the foreground alone spans {spread:.2} Mbit/s over the rounds; kernel cubic and reno are the harm baseline, not held to the goals)",
        link * HEADERLESS
    );
    for (bg, goals) in
        verdicts.iter().filter(|v| matches!(v.0, BgSender::ImtcpBg(..) | BgSender::ImtcpBgNotRealtime(..)))
    {
        let _ = writeln!(
            s,
            "goal (issue 15, bulk foreground): {} keeps the foreground >= 95 %, uses >= 80 % of the leftover and >= 85 % of the link alone: {}",
            bg.name(),
            if goals.iter().all(|g| *g) { "met" } else { "MISSED" }
        );
    }
    s.push('\n');
    stop_all(&s1, vec![t1])?;
    stop_all(&s2, vec![t2])?;
    Ok(s)
}

/// Payload share of a full-sized packet on the bench's path: 1448 B of payload in 1500 B of IP
/// packet (20 B IP, 20 B TCP, 12 B timestamp option), the most payload goodput a link counted
/// in IP bytes can carry.
const HEADERLESS: f64 = 1448.0 / 1500.0;

/// What a foreground of goodput `fg_mbps` leaves on a link of `link_mbps` (counted in IP bytes),
/// in goodput: the link's payload capacity (`link_mbps` × [`HEADERLESS`]) minus the foreground.
/// Both sides in payload: the link's rate minus a goodput counted the foreground's own headers
/// as spare (1.73 of a "leftover" of 1.95 Mbit/s beside a bulk CUBIC foreground, session 8).
fn leftover_of(link_mbps: f64, fg_mbps: f64) -> f64 {
    (link_mbps * HEADERLESS - fg_mbps).max(0.0)
}

/// ImTCP §4.3's web model (module doc).
const WEB_OBJECTS: u32 = 8;
const WEB_OBJECT_MEAN: u64 = 12_000;
const WEB_SHAPE: f64 = 1.2;
const WEB_THINK_MS: u64 = 1000;
const WEB_PORT: u16 = 8080;

/// The verdict of one kind of gentle sender (`paced`, `window`): (percent, page ratio, share of
/// the leftover used) per point.
pub fn frontier_line(kind: &str, points: &[(u32, f64, f64)]) -> String {
    let good: Vec<String> = points
        .iter()
        .filter(|p| p.1 <= 1.05 && p.2 >= 0.80)
        .map(|p| format!("{kind}-{} ({:.3} at {:.0} %)", p.0, p.1, p.2 * 100.0))
        .collect();
    let within: Vec<&(u32, f64, f64)> = points.iter().filter(|p| p.1 <= 1.05).collect();
    let best = within.iter().max_by(|a, b| a.2.total_cmp(&b.2));
    format!(
        "{kind} frontier ({} points): >= 80 % of the leftover at a page ratio <= 1.05: {}; most of the leftover within 5 %: {}",
        points.len(),
        if good.is_empty() { "none".to_string() } else { good.join(", ") },
        best.map_or("no point within 5 %".to_string(), |p| format!("{kind}-{}, {:.0} % at {:.3}", p.0, p.2 * 100.0, p.1))
    )
}

/// One run of the web clients.
#[derive(Clone, Copy, Debug)]
struct WebRun {
    /// Mean page time, s.
    page: f64,
    pages: usize,
    /// Web throughput, Mbit/s.
    mbps: f64,
    /// Fraction of the run with at least one page in flight (any client).
    busy: f64,
}

/// The fraction of `[first start, last end]` covered by at least one of `intervals` (start,
/// end in ns): the union's length over the span; 0 without intervals.
pub fn busy_fraction(intervals: &[(u64, u64)]) -> f64 {
    let mut v: Vec<(u64, u64)> = intervals.iter().copied().filter(|(s, e)| e > s).collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    let (first, last) = (v[0].0, v.iter().map(|x| x.1).max().expect("not empty"));
    let (mut covered, mut cur) = (0u64, v[0]);
    for &(s, e) in &v[1..] {
        if s <= cur.1 {
            cur.1 = cur.1.max(e);
        } else {
            covered += cur.1 - cur.0;
            cur = (s, e);
        }
    }
    covered += cur.1 - cur.0;
    covered as f64 / (last - first) as f64
}

/// Runs the web clients in `r2` against the server in `s2` for `--seconds`.
fn web_run(tb: &Testbed, a: &SendBenchArgs) -> Result<WebRun> {
    let server = SocketAddr::new(tb.host("s2")?.addr.into(), WEB_PORT);
    let mut threads = Vec::new();
    for i in 0..a.web_clients {
        let w = headroom_testbed::traffic::WebClient {
            server,
            objects: WEB_OBJECTS,
            object_mean: Bytes(WEB_OBJECT_MEAN),
            object_shape: WEB_SHAPE,
            think: Dur::from_millis(WEB_THINK_MS),
            duration: Dur::from_secs(a.seconds),
            seed: 1000 + i as u64,
        };
        threads.push(tb.spawn_in("r2", move || headroom_testbed::traffic::web_client(&w, None, &mut |_| {}))?);
    }
    let mut pages = Vec::new();
    for t in threads {
        match t.join() {
            Ok(r) => pages.extend(r?),
            Err(_) => bail!("a web client panicked"),
        }
    }
    if pages.is_empty() {
        bail!("the web clients finished no page");
    }
    let mean = pages.iter().map(|p| p.time.as_secs_f64()).sum::<f64>() / pages.len() as f64;
    let bytes: u64 = pages.iter().map(|p| p.bytes).sum();
    let spans: Vec<(u64, u64)> = pages.iter().map(|p| (p.done_ns.saturating_sub(p.time.0), p.done_ns)).collect();
    Ok(WebRun {
        page: mean,
        pages: pages.len(),
        mbps: bytes as f64 * 8.0 / 1e6 / a.seconds as f64,
        busy: busy_fraction(&spans),
    })
}

fn web_on(tb: &Testbed, a: &SendBenchArgs) -> Result<String> {
    let (s1, t1) = start_receiver(tb, "r1")?;
    // The web server in s2; accepted sockets inherit the listener's congestion control (CUBIC).
    let listener = tb.run_in("s2", || {
        let l = std::net::TcpListener::bind(("0.0.0.0", WEB_PORT))?;
        headroom_net::transfer::sock::set_congestion(std::os::fd::AsRawFd::as_raw_fd(&l), "cubic")
            .map_err(|e| anyhow::anyhow!("cubic for the web server: {}", e.0))?;
        Ok(l)
    })?;
    let web_stop = Arc::new(AtomicBool::new(false));
    let ws = web_stop.clone();
    let server = tb.spawn_in("s2", move || headroom_testbed::traffic::web_serve(listener, ws))?;
    let result: Result<String> = (|| {
        let link = a.rate.as_mbps();
        let (senders, _registered, notes) = bg_senders(a)?;
        // Per round: the web alone, then beside each sender; (page s, pages, bg Mbit/s).
        let mut alone: Vec<WebRun> = Vec::new();
        let mut with: Vec<Vec<(f64, usize, f64)>> = vec![Vec::new(); senders.len()];
        for _ in 0..a.runs {
            let w0 = web_run(tb, a)?;
            alone.push(w0);
            for (i, bg) in senders.iter().enumerate() {
                let ours = bg.realtime();
                let bt = spawn_send(tb, "s1", "r1", bg.options(a, leftover_of(link, w0.mbps)), ours)?;
                let w = web_run(tb, a)?;
                with[i].push((w.page, w.pages, goodput(&join_send(bt)?)));
            }
        }
        let med = |v: Vec<f64>| median(&v).unwrap_or(f64::NAN);
        let page0 = med(alone.iter().map(|r| r.page).collect());
        let web0 = med(alone.iter().map(|r| r.mbps).collect());
        let busy0 = med(alone.iter().map(|r| r.busy).collect());
        let n0: usize = alone.iter().map(|r| r.pages).sum();
        let leftover = leftover_of(link, web0);
        let mut s = String::new();
        let _ = writeln!(
            s,
            "== web foreground: {} clients, {WEB_OBJECTS} objects/page, Pareto {WEB_SHAPE} mean {} KB, think {} s (ImTCP §4.3), {} s per run, {} bottleneck, {} round{}",
            a.web_clients,
            WEB_OBJECT_MEAN / 1000,
            WEB_THINK_MS as f64 / 1000.0,
            a.seconds,
            a.rate,
            a.runs,
            if a.runs == 1 { "" } else { "s (medians over rounds; ratios within each round)" }
        );
        let pages_alone: Vec<String> = alone.iter().map(|r| format!("{:.1}", r.page * 1000.0)).collect();
        let _ = writeln!(
            s,
            "web alone: mean page time {:.1} ms (rounds: {}) over {n0} pages, {web0:.2} Mbit/s; leftover {leftover:.2} Mbit/s; at least one page in flight {:.1} % of the time",
            page0 * 1000.0,
            pages_alone.join(", "),
            busy0 * 100.0
        );
        let _ = writeln!(
            s,
            "{:<w$} {:>10} {:>7} {:>10} {:>12} {:>10} | goals",
            "background sender",
            "page ms",
            "pages",
            "page ratio",
            "bg Mbit/s",
            "% leftover",
            w = LABEL_WIDTH
        );
        let (mut paced, mut windowed) = (Vec::new(), Vec::new());
        for (bg, rounds) in senders.iter().zip(&with) {
            let page = med(rounds.iter().map(|r| r.0).collect());
            let n: usize = rounds.iter().map(|r| r.1).sum();
            let ratio = med(rounds.iter().zip(&alone).map(|(r, a0)| r.0 / a0.page).collect());
            let bgr = med(rounds.iter().map(|r| r.2).collect());
            let used = med(rounds
                .iter()
                .zip(&alone)
                .map(|(r, a0)| r.2 / leftover_of(link, a0.mbps).max(f64::MIN_POSITIVE))
                .collect());
            let yes = |b: bool| if b { "met" } else { "MISSED" };
            let _ = writeln!(
                s,
                "{:<w$} {:>10.1} {:>7} {:>10.3} {:>12.2} {:>9.0}% | page time within 5 % {}, leftover used {}",
                bg.name(),
                page * 1000.0,
                n,
                ratio,
                bgr,
                used * 100.0,
                yes(ratio <= 1.05),
                yes(used >= 0.80),
                w = LABEL_WIDTH
            );
            if a.runs > 1 {
                let per: Vec<String> = rounds
                    .iter()
                    .zip(&alone)
                    .map(|(r, a0)| format!("{:.3}/{:.0}%", r.0 / a0.page, r.2 / leftover_of(link, a0.mbps) * 100.0))
                    .collect();
                let _ = writeln!(s, "{:<w$}   rounds (page ratio/% leftover): {}", "", per.join("  "), w = LABEL_WIDTH);
            }
            match bg {
                BgSender::Paced(p) => paced.push((p.0, ratio, used)),
                BgSender::Window(p) => windowed.push((p.0, ratio, used)),
                _ => {}
            }
        }
        for (kind, points) in [("paced", &paced), ("window", &windowed)] {
            if !points.is_empty() {
                let _ = writeln!(s, "{}", frontier_line(kind, points));
            }
        }
        for n in notes {
            let _ = writeln!(s, "{n}");
        }
        s.push('\n');
        Ok(s)
    })();
    web_stop.store(true, Ordering::SeqCst);
    let served = server.join();
    stop_all(&s1, vec![t1])?;
    let s = result?;
    match served {
        Ok(r) => r?,
        Err(_) => bail!("the web server panicked"),
    }
    Ok(s)
}
