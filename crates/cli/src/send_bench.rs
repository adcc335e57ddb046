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
//!   background sender (the harm baseline). Goals: the foreground keeps ≥ 95 % of its
//!   throughput alone, the background uses ≥ 80 % of what the foreground leaves (the link
//!   rate minus the foreground's throughput alone... see the summary) and ≥ 85 % of the link
//!   alone.
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
    Integrity,
}

#[derive(Args, Debug, Clone)]
pub struct SendBenchArgs {
    /// Which parts to run (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "measure,background,integrity")]
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
    let mut out = String::new();
    if a.parts.contains(&Part::Measure) {
        out += &measure_part(&a)?;
    }
    if a.parts.contains(&Part::Background) {
        out += &background_part(&a)?;
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

fn measure_part(a: &SendBenchArgs) -> Result<String> {
    let buffer = Buffer::parse(&a.buffer).map_err(|e| anyhow::anyhow!("--buffer: {e}"))?;
    let bottleneck = Bottleneck { rate: Some(a.rate), buffer, ..Bottleneck::new(Some(a.rate), a.delay) };
    let tb = Testbed::up(&Topology::dumbbell(2, bottleneck)).context("building the testbed")?;
    eprintln!("testbed {}: {} bottleneck, {} each way, buffer {}", tb.prefix(), a.rate, a.delay, a.buffer);
    let result = measure_on(&tb, a);
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
        let rep = measured_send(tb, opts);
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
                "       real: {} streams, {} failed, {} measurements; {} pieces of {} B, {} stamps, {} merged ACKs, {} pieces without ACK stamp, {} without send stamp, {} write stalls",
                ms.control.streams_sent,
                ms.control.stream_failures,
                ms.control.measurements,
                ms.pieces,
                ms.mss,
                ms.tracker.stamps,
                ms.tracker.merged_acks,
                ms.tracker.missing_ack,
                ms.tracker.missing_send,
                ms.write_stalls
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BgSender {
    ImtcpBg,
    Kernel(&'static str),
}

impl BgSender {
    fn name(self) -> String {
        match self {
            BgSender::ImtcpBg => "send --background (imtcp-bg over cubic)".into(),
            BgSender::Kernel(cc) => format!("kernel {cc}"),
        }
    }
    fn options(self, a: &SendBenchArgs) -> SendOptions {
        let mut c = ControlConfig::default();
        c.measurement.stream_len = a.stream_len;
        c.measurement.delayed_ack = true;
        let (cc, mode) = match self {
            BgSender::ImtcpBg => ("cubic", Mode::Background(Box::new(c), Default::default())),
            BgSender::Kernel(cc) => (cc, Mode::Bulk),
        };
        SendOptions {
            limit: SendLimit::Time(Duration::from_secs(a.seconds)),
            interval: None,
            cc: Some(cc.into()),
            mode,
            ..SendOptions::default()
        }
    }
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

fn background_part(a: &SendBenchArgs) -> Result<String> {
    let buffer = Buffer::parse(&a.buffer).map_err(|e| anyhow::anyhow!("--buffer: {e}"))?;
    let bottleneck = Bottleneck { rate: Some(a.rate), buffer, ..Bottleneck::new(Some(a.rate), a.delay) };
    let tb = Testbed::up(&Topology::dumbbell(2, bottleneck)).context("building the testbed")?;
    eprintln!("testbed {}: {} bottleneck, {} each way, buffer {}", tb.prefix(), a.rate, a.delay, a.buffer);
    let result = background_on(&tb, a);
    let down = tb.down();
    let s = result?;
    down?;
    Ok(s)
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
    let mut s = String::new();
    let _ = writeln!(
        s,
        "== background: foreground = kernel cubic bulk s2 -> r2, {} s per run, {} bottleneck",
        a.seconds, a.rate
    );
    let fg_alone = join_send(spawn_send(tb, "s2", "r2", fg_opts(), false)?)?.rate.as_mbps();
    let _ = writeln!(s, "foreground alone: {fg_alone:.2} Mbit/s ({:.1} % of the link)", fg_alone / link * 100.0);
    let leftover = (link - fg_alone).max(0.0);
    let _ = writeln!(
        s,
        "{:<42} {:>10} {:>8} {:>12} {:>12} {:>14} | goals",
        "background sender", "bg alone", "% link", "fg with bg", "fg kept %", "bg with fg"
    );
    let mut verdicts = Vec::new();
    for bg in [BgSender::ImtcpBg, BgSender::Kernel("cubic"), BgSender::Kernel("reno")] {
        let alone = join_send(spawn_send(tb, "s1", "r1", bg.options(a), bg == BgSender::ImtcpBg)?)?;
        let bt = spawn_send(tb, "s1", "r1", bg.options(a), bg == BgSender::ImtcpBg)?;
        let ft = spawn_send(tb, "s2", "r2", fg_opts(), false)?;
        let fg = join_send(ft)?.rate.as_mbps();
        let both = join_send(bt)?;
        let bgr = both.rate.as_mbps();
        let kept = fg / fg_alone;
        let used = if leftover > 0.0 { bgr / leftover } else { f64::NAN };
        let goals = [kept >= 0.95, leftover <= 0.0 || used >= 0.80, alone.rate.as_mbps() >= 0.85 * link];
        let yes = |b: bool| if b { "met" } else { "MISSED" };
        let _ = writeln!(
            s,
            "{:<42} {:>10.2} {:>7.1}% {:>12.2} {:>11.1}% {:>9.2} ({:>4.0}% of leftover) | fg kept {}, leftover used {}, alone {}",
            bg.name(),
            alone.rate.as_mbps(),
            alone.rate.as_mbps() / link * 100.0,
            fg,
            kept * 100.0,
            bgr,
            used * 100.0,
            yes(goals[0]),
            yes(goals[1]),
            yes(goals[2])
        );
        if let (BgSender::ImtcpBg, Some(m)) = (bg, both.measure) {
            let _ = writeln!(
                s,
                "{:<42} with fg: {} estimates, {} Eq. 4 reductions, last limit {} B; alone: {} estimates",
                "",
                both.estimates.len(),
                m.reductions,
                m.last_limit.unwrap_or(0),
                alone.estimates.len()
            );
        }
        verdicts.push((bg, goals));
    }
    let _ = writeln!(
        s,
        "(leftover = link {link:.1} - foreground alone {fg_alone:.2} = {leftover:.2} Mbit/s; kernel cubic and reno are the harm baseline, not held to the goals)"
    );
    let ours = verdicts.iter().find(|v| v.0 == BgSender::ImtcpBg).map(|v| v.1.iter().all(|g| *g));
    let _ = writeln!(
        s,
        "goal (issue 15, bulk foreground): send --background keeps the foreground >= 95 %, uses >= 80 % of the leftover and >= 85 % of the link alone: {}\n",
        if ours == Some(true) { "met" } else { "MISSED" }
    );
    stop_all(&s1, vec![t1])?;
    stop_all(&s2, vec![t2])?;
    Ok(s)
}
