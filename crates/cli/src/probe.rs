//! `headroom probe`, `headroom serve` and `headroom design`: the available-bandwidth probe on
//! real sockets (`headroom_net`) and the PathQuick paper's analytic comparison
//! (`headroom_core::abw::compare`).

use anyhow::{anyhow, Context};
use clap::Args;
use headroom_core::abw::compare::{Comparison, ComparisonSetup};
use headroom_core::abw::{EstimatorConfig, InconclusiveReason, Method, Outcome, QuickSpec};
use headroom_core::units::{parse_positive, Bytes, Dur, Rate};
use headroom_net::{estimate, Estimate, EstimateOptions, Server, ServerConfig};
use serde_json::json;
use std::time::{Duration, Instant};

fn decrease_factor_arg(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(f) if f > 1.0 && f.is_finite() => Ok(f),
        _ => Err(format!("{s:?} is not a decrease factor above 1")),
    }
}
fn method_arg(s: &str) -> Result<Method, String> {
    s.parse::<Method>().map_err(|e| e.to_string())
}

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("monitor").multiple(true).args(["interval", "watch"])))]
pub struct ProbeArgs {
    /// Server address: HOST or HOST:PORT (default port 7447).
    pub target: String,
    /// Probe train: pathquick or pathchirp.
    #[arg(long, default_value = "pathquick", value_parser = method_arg)]
    pub method: Method,
    /// Lowest rate to probe (default: PathQuick's ΔP = 12 B from the smallest packet).
    #[arg(long, value_parser = parse_positive::<Rate>)]
    pub bmin: Option<Rate>,
    /// Highest rate to probe. Without it (and without --bmin) the range is found
    /// automatically: coarse PathQuick trains from 500 Mbit/s (or the server's cap) down, then
    /// one designed around their result (docs/pathquick.md, auto-ranging).
    #[arg(long, value_parser = parse_positive::<Rate>)]
    pub bmax: Option<Rate>,
    /// Trains to send; results are combined (mean).
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Largest probe packet at the IP level.
    #[arg(long, default_value = "1500", value_parser = parse_positive::<Bytes>)]
    pub size: Bytes,
    /// pathChirp spread factor.
    #[arg(long, default_value_t = 1.2)]
    pub gamma: f64,
    /// How long to wait for the server.
    #[arg(long, default_value = "2s", value_parser = parse_positive::<Dur>)]
    pub timeout: Dur,
    /// One JSON object on stdout.
    #[arg(long, conflicts_with_all = ["instbw", "json_stream"])]
    pub json: bool,
    /// Monitor: one estimate every DUR (start to start) on one session, until --count
    /// estimates or Ctrl-C. After the first, each estimate asks for its train with the
    /// server's address-validation token (no handshake round trip) and, auto-ranging, starts
    /// from a train designed around the last estimate.
    #[arg(long, value_parser = parse_positive::<Dur>)]
    pub interval: Option<Dur>,
    /// Estimates to make with --interval or --watch (default: until interrupted).
    #[arg(long, requires = "monitor", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Monitor with a live view in the terminal (works over SSH): the estimate, the probed
    /// range and the bounds over time, and a table of the latest estimates; q, Esc or Ctrl-C
    /// quits. One estimate every --interval (default 1s).
    #[arg(long, conflicts_with_all = ["json", "json_stream", "instbw"])]
    pub watch: bool,
    /// One compact JSON object per estimate on its own line, flushed at once (for a monitoring
    /// system); an estimate that failed is a line with "error".
    #[arg(long, conflicts_with = "instbw")]
    pub json_stream: bool,
    /// pathChirp's `.instbw` lines: `<unix time s> <estimate Mbit/s>` per train.
    #[arg(long)]
    pub instbw: bool,
    #[command(flatten)]
    pub estimator: EstimatorFlags,
    /// pathChirp's decrease factor F for the excursion segmentation. Default: 5 for PathQuick
    /// (reads its ramp without the upward lag of the papers' 1.5; docs/pathquick.md), 1.5 for
    /// pathChirp.
    #[arg(long, value_parser = decrease_factor_arg)]
    pub decrease_factor: Option<f64>,
    /// pathChirp's busy-period threshold L, in gaps.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub busy_period: u32,
    /// Wait for the whole train instead of judging it at handshake RTT + train length + 10 ms.
    #[arg(long)]
    pub wait_tail: bool,
    /// Exit with status 3 when the answer is a bound ("above range", "below range") rather than
    /// an estimate. Exit statuses: 0 an estimate (or a bound without this option); 1 an error
    /// or no conclusive train; 2 bad arguments; 3 a bound with this option; 4 the server
    /// refused some of the --repeat trains (the rest are reported).
    #[arg(long)]
    pub fail_on_bound: bool,
    /// Receive with real-time scheduling (SCHED_FIFO, see `realtime`); an error where not
    /// permitted (needs root or CAP_SYS_NICE, or an RLIMIT_RTPRIO above 0).
    #[arg(long)]
    pub realtime: bool,
}

/// The estimator's flags, shared by `headroom probe`, `probe-bench` and `probe-replay`.
#[derive(clap::Args, Clone, Copy, Debug, Default)]
pub struct EstimatorFlags {
    /// Refine the knee by fitting the queue growth after it (not in the papers; helps behind
    /// token-bucket rate limiters).
    #[arg(long)]
    pub knee_fit: bool,
    /// Look harder for a token-bucket shaper: auto-ranging's fine train with a 3-byte size
    /// step (four times the bytes), so a bucket of up to 64 KB in front of a link twice its token
    /// rate is emptied and read (`headroom_core::abw::shaper`); also turns detection on for
    /// pathChirp. PathQuick looks for shapers in every train by default (a late knee, a level
    /// shift of the received rate, then packets paced at the token rate; docs/pathquick.md).
    #[arg(long, conflicts_with = "no_detect_shaper")]
    pub detect_shaper: bool,
    /// Do not look for token-bucket shapers: report the knee of every train as it is.
    #[arg(long)]
    pub no_detect_shaper: bool,
}

impl EstimatorFlags {
    /// `opts` with these flags: the knee fit, and shaper detection on (with the shaper train)
    /// or off; without a flag, the method's default.
    pub fn apply(&self, opts: EstimateOptions) -> EstimateOptions {
        EstimateOptions {
            estimator: EstimatorConfig {
                knee_fit: self.knee_fit || opts.estimator.knee_fit,
                detect_shaper: !self.no_detect_shaper && (self.detect_shaper || opts.estimator.detect_shaper),
                ..opts.estimator
            },
            shaper_train: self.detect_shaper || opts.shaper_train,
            ..opts
        }
    }
}

/// `headroom probe`'s exit status for a bound under `--fail-on-bound`.
pub const EXIT_BOUND: i32 = 3;
/// `headroom probe`'s exit status when some `--repeat` trains were refused.
pub const EXIT_PARTIAL: i32 = 4;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:7447")]
    pub listen: String,
    /// Highest rate a train may probe.
    #[arg(long, default_value = "1Gbps", value_parser = parse_positive::<Rate>)]
    pub max_rate: Rate,
    /// Largest probe packet (IP level).
    #[arg(long, default_value = "1500", value_parser = parse_positive::<Bytes>)]
    pub max_size: Bytes,
    /// Clients served at once.
    #[arg(long, default_value_t = 64)]
    pub max_clients: usize,
    /// One line on stderr per client session: address, method, packets, how the train ended.
    #[arg(short, long)]
    pub verbose: bool,
    /// Trains per client IP per 10 s.
    #[arg(long, default_value_t = 50)]
    pub trains_per_10s: u32,
    /// Stop after this long (default: run until killed).
    #[arg(long, value_parser = parse_positive::<Dur>)]
    pub duration: Option<Dur>,
    /// Pace trains with real-time scheduling (SCHED_FIFO; the server's threads inherit it), so
    /// other load on the machine does not delay the packets; an error where not permitted.
    #[arg(long)]
    pub realtime: bool,
}

/// SCHED_FIFO priority for `--realtime` (the server's, [`headroom_net::server::REALTIME_PRIORITY`]).
const REALTIME_PRIORITY: i32 = headroom_net::server::REALTIME_PRIORITY;

/// Switches the calling thread (and the threads it starts later) to SCHED_FIFO priority
/// [`REALTIME_PRIORITY`].
pub(crate) fn try_realtime() -> std::io::Result<()> {
    headroom_net::timing::try_realtime(REALTIME_PRIORITY)
}

/// [`try_realtime`] for `--realtime`: an error where not permitted.
fn realtime() -> anyhow::Result<()> {
    if let Err(e) = try_realtime() {
        return Err(anyhow!(
            "--realtime: cannot switch to SCHED_FIFO priority {REALTIME_PRIORITY}: {e} (needs root or \
             CAP_SYS_NICE, or `ulimit -r` of at least {REALTIME_PRIORITY}); run without --realtime"
        ));
    }
    Ok(())
}

/// The analytic comparison uses the paper's train (P_1 = 1 B, P_N = 1489 B: UDP payload
/// sizes, N = 124). `headroom probe` sends IP-level sizes and every probe carries a 20-byte
/// header after the IP and UDP headers, so its default train is P_1 = 48 B (IPv4), ΔP = 12 B,
/// P_N = 1500 B, N = 122 at T_quick = 1 ms (12 Mbit/s); `--p1 48 --pn 1500` shows that train.
#[derive(Args, Debug)]
pub struct DesignArgs {
    /// PathQuick packet spacing T_quick.
    #[arg(long, default_value = "1ms", value_parser = parse_positive::<Dur>)]
    pub t_quick: Dur,
    /// First packet size P_1 (default: the paper's 1 B; `headroom probe` sends 48 B, the
    /// smallest IPv4 packet that holds its header).
    #[arg(long, default_value = "1", value_parser = parse_positive::<Bytes>)]
    pub p1: Bytes,
    /// Size increment ΔP.
    #[arg(long, default_value = "12", value_parser = parse_positive::<Bytes>)]
    pub delta_p: Bytes,
    /// Last packet size P_N (default: the paper's 1489 B; `headroom probe` sends up to 1500 B
    /// at the IP level).
    #[arg(long, default_value = "1489", value_parser = parse_positive::<Bytes>)]
    pub pn: Bytes,
    /// pathChirp spread factor γ (the chirp uses P = P_N and PathQuick's range).
    #[arg(long, default_value_t = 1.2)]
    pub gamma: f64,
    /// Round-trip time added to the train for the estimate time.
    #[arg(long, default_value = "52ms")]
    pub rtt: Dur,
    /// Budget for one estimate (train + RTT).
    #[arg(long, default_value = "500ms", value_parser = parse_positive::<Dur>)]
    pub budget: Dur,
    /// One JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

fn mbps(r: Rate) -> f64 {
    r.as_mbps()
}

fn outcome_json(o: &Outcome) -> serde_json::Value {
    match o {
        Outcome::Estimate(r) => json!({"kind": "estimate", "bps": r.bps()}),
        Outcome::AboveRange { at_least } => {
            json!({"kind": "above_range", "at_least_bps": at_least.bps()})
        }
        Outcome::BelowRange { at_most } => {
            json!({"kind": "below_range", "at_most_bps": at_most.bps()})
        }
        Outcome::Inconclusive { reason } => json!({"kind": "inconclusive", "reason": reason.to_string()}),
    }
}

pub(crate) fn estimate_json(e: &Estimate) -> serde_json::Value {
    let q = &e.quality;
    json!({
        "server": e.server.to_string(),
        "handshake": e.handshake.name(),
        "shaper": e.shaper.map(|sh| json!({
            "rate_bps": sh.rate.bps(), "burst_bytes": sh.burst.0, "knee_rate_bps": sh.knee_rate.bps(),
        })),
        "method": e.method.name(),
        "available_bandwidth_bps": e.available_bandwidth.map(|r| r.bps()),
        "fitted_to_caps": e.fitted_to_caps,
        "bound": e.bound.map(|b| b.name()),
        "bound_bps": e.bound.map(|b| b.rate().bps()),
        "refused": e.refused.map(|r| json!({"reason": r.reason.describe(), "missing_trains": r.missing})),
        "outcome": outcome_json(&e.outcome),
        "probed_range_bps": [e.probed_range.0.bps(), e.probed_range.1.bps()],
        "elapsed_s": e.elapsed.as_secs_f64(),
        "elapsed_per_train_s": e.elapsed_per_train.as_secs_f64(),
        "train_length_s": e.design.train_length().as_secs_f64(),
        "ranging_trains": e.ranging.iter().map(|t| json!({
            "outcome": outcome_json(&t.estimate.outcome),
            "probed_range_bps": [t.estimate.probed.0.bps(), t.estimate.probed.1.bps()],
            "elapsed_s": t.elapsed.as_secs_f64(),
        })).collect::<Vec<_>>(),
        "packets_per_train": e.design.packets(),
        "bytes_per_train": e.train_bytes.0,
        "quality": {
            "trains": q.trains, "conclusive": q.conclusive, "packets": q.packets,
            "received": q.received, "lost": q.lost, "reordered": q.reordered,
            "duplicates": q.duplicates,
            "spacing_error_mean_s": q.spacing_error_mean.as_secs_f64(),
            "spacing_error_max_s": q.spacing_error_max.as_secs_f64(),
            "late_packets": q.late_packets,
            "after_deadline": q.after_deadline,
            "kernel_timestamps": q.kernel_timestamps,
        },
        "trains": e.trains.iter().map(|t| json!({
            "outcome": outcome_json(&t.estimate.outcome),
            "elapsed_s": t.elapsed.as_secs_f64(),
            "knee_index": t.estimate.knee,
            "knee_fit_bps": t.estimate.knee_fit.map(|r| r.bps()),
            "received": t.estimate.received, "lost": t.estimate.lost,
            "reordered": t.estimate.reordered,
            "after_deadline": t.after_deadline,
        })).collect::<Vec<_>>(),
    })
}

/// The estimate options `headroom probe`'s arguments ask for.
pub(crate) fn probe_options(a: &ProbeArgs) -> EstimateOptions {
    let opts = EstimateOptions {
        method: a.method,
        b_min: a.bmin,
        b_max: a.bmax.unwrap_or(EstimateOptions::for_method(a.method).b_max),
        auto_range: a.bmax.is_none() && a.bmin.is_none(),
        max_size: a.size,
        gamma: a.gamma,
        repeat: a.repeat,
        timeout: Duration::from_nanos(a.timeout.0),
        ..EstimateOptions::for_method(a.method)
    };
    let opts = a.estimator.apply(opts);
    EstimateOptions {
        estimator: EstimatorConfig {
            decrease_factor: a.decrease_factor.unwrap_or(opts.estimator.decrease_factor),
            busy_period: a.busy_period as usize,
            ..opts.estimator
        },
        judge_slack: if a.wait_tail { None } else { opts.judge_slack },
        ..opts
    }
}

/// What to do about a train the server sent off its schedule (`pacing_fault`): on a busy host
/// an ordinary thread's sleeps overshoot by tens of µs to ms (measured on loopback at load 6:
/// mean send errors of 10–1,800 µs without `--realtime`, under 1 µs with it; docs/results.md,
/// issue 19's audit), far more than the 24–120 µs gaps of 100–500 Mbit/s trains.
pub(crate) fn pacing_note<'a>(mut outcomes: impl Iterator<Item = &'a Outcome>) -> Option<&'static str> {
    outcomes.any(|o| matches!(o, Outcome::Inconclusive { reason: InconclusiveReason::BadlyPaced(_) })).then_some(
        "the server sent the train off its schedule (its host is busy): run it as `headroom serve --realtime` \
         (SCHED_FIFO, needs root or CAP_SYS_NICE) so other work does not delay its pacer",
    )
}

/// The notes on stderr about how an estimate was made (caps, auto-ranging trains, pacing).
pub(crate) fn print_notes(e: &Estimate) {
    if let Some(note) = &e.fitted_to_caps {
        eprintln!("headroom probe: {note}");
    }
    if let Some(note) = pacing_note(std::iter::once(&e.outcome).chain(e.trains.iter().map(|t| &t.estimate.outcome))) {
        eprintln!("headroom probe: {note}");
    }
    for t in &e.ranging {
        eprintln!(
            "headroom probe: auto-ranging train over {:.3}–{:.3} Mbit/s: {} ({:.1} ms)",
            mbps(t.estimate.probed.0),
            mbps(t.estimate.probed.1),
            t.estimate.outcome,
            t.elapsed.as_secs_f64() * 1e3
        );
    }
}

/// The one-line human summary of an estimate.
pub(crate) fn plain_line(e: &Estimate) -> String {
    let q = &e.quality;
    let shaper = e.shaper.map_or(String::new(), |sh| {
        format!(
            " | token-bucket shaper: rate {:.3} Mbit/s, burst {:.1} KB (the knee at {:.3} Mbit/s)",
            mbps(sh.rate),
            sh.burst.0 as f64 / 1e3,
            mbps(sh.knee_rate)
        )
    });
    format!(
        "{} {}: {}{shaper} | probed {:.3}–{:.3} Mbit/s | {:.1} ms per estimate ({} train{} of {:.1} ms, {:.1} KB) | \
         received {}/{} ({} after the deadline), {} reordered | send spacing error mean {:.1} µs, max {:.1} µs, {} late | {} timestamps",
        e.method,
        e.server,
        e.outcome,
        mbps(e.probed_range.0),
        mbps(e.probed_range.1),
        e.elapsed_per_train.as_secs_f64() * 1e3,
        q.trains,
        if q.trains == 1 { "" } else { "s" },
        e.design.train_length().as_millis_f64(),
        e.train_bytes.0 as f64 / 1e3,
        q.received,
        q.packets,
        q.after_deadline,
        q.reordered,
        q.spacing_error_mean.0 as f64 / 1e3,
        q.spacing_error_max.0 as f64 / 1e3,
        q.late_packets,
        if q.kernel_timestamps { "kernel" } else { "user-space" },
    )
}

pub fn run_probe(a: ProbeArgs) -> anyhow::Result<()> {
    if a.repeat == 0 {
        return Err(anyhow!("--repeat must be at least 1"));
    }
    if a.realtime {
        realtime()?;
    }
    let opts = probe_options(&a);
    if a.interval.is_some() || a.json_stream || a.watch {
        return crate::probe_monitor::run(&a, &opts);
    }
    let e = estimate(&a.target, &opts).with_context(|| format!("probing {}", a.target))?;
    print_notes(&e);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&estimate_json(&e))?);
    } else if a.instbw {
        for t in &e.trains {
            // pathChirp's instbw lines: timestamp (s) and estimate (Mbit/s); 0 when none.
            let v = t.estimate.outcome.value().map(mbps).unwrap_or(0.0);
            println!("{:.6} {:.6}", t.finished_at.as_secs_f64(), v);
        }
    } else {
        println!("{}", plain_line(&e));
    }
    if let Some(r) = e.refused {
        eprintln!(
            "headroom: note: the server refused {} of {} trains ({}); the result is from the other {}",
            r.missing,
            a.repeat,
            r.reason.describe(),
            e.trains.len()
        );
    }
    if e.available_bandwidth.is_none() && e.bound.is_none() {
        return Err(anyhow!("no estimate: {}", e.outcome));
    }
    let code = if a.fail_on_bound && e.bound.is_some() {
        EXIT_BOUND
    } else if e.refused.is_some() {
        EXIT_PARTIAL
    } else {
        return Ok(());
    };
    use std::io::Write;
    std::io::stdout().flush()?;
    std::process::exit(code)
}

pub fn run_serve(a: ServeArgs) -> anyhow::Result<()> {
    if a.realtime {
        realtime()?;
    }
    let config = ServerConfig {
        max_rate: a.max_rate,
        max_size: a.max_size,
        max_concurrent: a.max_clients,
        trains_per_window: a.trains_per_10s,
        window: Duration::from_secs(10),
        log_sessions: a.verbose,
        ..ServerConfig::default()
    };
    config.validate().map_err(|e| anyhow!("serve: {e}"))?;
    let server = Server::bind(&a.listen, config).with_context(|| format!("cannot listen on {}", a.listen))?;
    let handle = server.spawn().context("starting the server threads")?;
    install_stop_signals();
    eprintln!("headroom serve: listening on {} (UDP)", handle.local_addr());
    let until = a.duration.map(|d| Instant::now() + Duration::from_nanos(d.0));
    let why = loop {
        match STOP_SIGNAL.load(std::sync::atomic::Ordering::Relaxed) {
            0 => {}
            libc::SIGINT => break "SIGINT",
            _ => break "SIGTERM",
        }
        if until.is_some_and(|u| Instant::now() >= u) {
            break "--duration elapsed";
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let s = handle.stats();
    let g = headroom_net::ServerStats::get;
    eprintln!(
        "headroom serve: stopping ({why}): {} datagrams, {} trains sent, {} expired, {} rejected, {} malformed, {} bad cookies",
        g(&s.datagrams),
        g(&s.trains_completed),
        g(&s.trains_expired),
        g(&s.rejected),
        g(&s.malformed),
        g(&s.bad_cookies)
    );
    handle.shutdown();
    Ok(())
}

/// The signal (SIGINT or SIGTERM) that asked `headroom serve` to stop, 0 until one did.
pub(crate) static STOP_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn on_stop_signal(sig: libc::c_int) {
    STOP_SIGNAL.store(sig, std::sync::atomic::Ordering::Relaxed);
}

/// SIGINT and SIGTERM set [`STOP_SIGNAL`] (an atomic store, async-signal-safe) so `serve`
/// prints its statistics and stops instead of dying silently.
pub(crate) fn install_stop_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: installs a handler that only stores to an atomic.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_stop_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The comparison [`run_design`] prints.
// `allow` until main.rs dispatches `headroom design` here; remove it then.
pub fn design_comparison(a: &DesignArgs) -> anyhow::Result<Comparison> {
    // The comparison reads how much of each train fits in `budget − rtt`: at least one gap.
    if a.budget.0 < a.rtt.0.saturating_add(a.t_quick.0) {
        return Err(anyhow!(
            "--budget {} leaves no train after --rtt {}: it must exceed the RTT by at least one T_quick ({})",
            a.budget,
            a.rtt,
            a.t_quick
        ));
    }
    let setup = ComparisonSetup {
        quick: QuickSpec {
            t_quick: Some(a.t_quick),
            p_1: Some(a.p1),
            delta_p: Some(a.delta_p),
            p_n: Some(a.pn),
            ..QuickSpec::default()
        },
        gamma: a.gamma,
        rtt: a.rtt,
        budget: a.budget,
    };
    Ok(Comparison::compute(&setup)?)
}

fn kb(b: Bytes) -> f64 {
    b.0 as f64 / 1e3
}

pub fn run_design(a: DesignArgs) -> anyhow::Result<()> {
    let c = design_comparison(&a)?;
    let (q, ch) = (&c.quick, &c.chirp);
    let allowance = c.budget.saturating_sub(c.rtt);
    if a.json {
        let v = json!({
            "pathquick": {
                "t_quick_s": q.t_quick.as_secs_f64(), "p_1": q.p_1.0, "delta_p": q.delta_p.0,
                "p_n": q.p_n().0, "n": q.n, "b_min_bps": q.b_min().bps(), "b_max_bps": q.b_max().bps(),
                "train_s": c.quick_train.as_secs_f64(), "estimate_s": c.quick_estimate_time.as_secs_f64(),
                "range_in_budget_bps": [c.quick_range_in_budget.0.bps(), c.quick_range_in_budget.1.bps()],
                "resolution_bps": c.quick_resolution.bps(), "bytes": c.quick_bytes.0,
            },
            "pathchirp": {
                "gamma": ch.gamma, "size": ch.size.0, "m": ch.m,
                "m_eq12": headroom_core::abw::pathchirp::m_eq12(ch.gamma, q.b_min().bps() as f64, q.b_max().bps() as f64),
                "train_s": c.chirp_train.as_secs_f64(), "estimate_s": c.chirp_estimate_time.as_secs_f64(),
                "range_in_budget_bps": [c.chirp_range_in_budget.0.bps(), c.chirp_range_in_budget.1.bps()],
                "packets_in_budget": c.chirp_packets_in_budget,
                "top_rate_in_budget_bps": c.chirp_top_rate_in_budget.bps(),
                "resolution_eq16_bps": c.chirp_resolution.bps(), "bytes": c.chirp_bytes.0,
            },
            "half_pathquick": {"delta_p": c.half_quick.delta_p.0, "n": c.half_quick.n,
                "bytes": c.half_quick.bytes().0, "resolution_bps": c.half_quick.resolution().bps()},
            "rtt_s": c.rtt.as_secs_f64(), "budget_s": c.budget.as_secs_f64(),
            "range_ratio": c.range_ratio(),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let ratio = |x: f64, y: f64| {
        if y > 0.0 {
            format!("{:.1}×", x / y)
        } else {
            "-".into()
        }
    };
    println!("PathQuick vs pathChirp, analytic (PathQuick paper §4.2–4.5)");
    println!(
        "  (the paper's sizes; `headroom probe`'s default train is --p1 48 --pn 1500: IP-level sizes with its \
         20-byte header)"
    );
    println!(
        "  PathQuick: T_quick {}, P_1 {} B, ΔP {} B, P_N {} B, N {}: {:.0}–{:.0} kbit/s",
        q.t_quick,
        q.p_1.0,
        q.delta_p.0,
        q.p_n().0,
        q.n,
        q.b_min().as_kbps(),
        q.b_max().as_kbps()
    );
    println!(
        "  pathChirp: γ {}, P {} B, M {} (Eq. 12: {:.3}): {:.0}–{:.0} kbit/s",
        ch.gamma,
        ch.size.0,
        ch.m,
        headroom_core::abw::pathchirp::m_eq12(ch.gamma, q.b_min().bps() as f64, q.b_max().bps() as f64),
        ch.b_min.as_kbps(),
        ch.top_rate().as_kbps()
    );
    println!("  {:<34}{:>16}{:>16}{:>9}", "", "PathQuick", "pathChirp", "ratio");
    let ms = |d: Dur| format!("{:.1} ms", d.as_millis_f64());
    println!(
        "  {:<34}{:>16}{:>16}{:>9}",
        "train length",
        ms(c.quick_train),
        ms(c.chirp_train),
        ratio(c.chirp_train.as_secs_f64(), c.quick_train.as_secs_f64())
    );
    println!(
        "  {:<34}{:>16}{:>16}{:>9}",
        format!("estimate time (RTT {})", c.rtt),
        ms(c.quick_estimate_time),
        ms(c.chirp_estimate_time),
        ratio(c.chirp_estimate_time.as_secs_f64(), c.quick_estimate_time.as_secs_f64())
    );
    let range = |r: (Rate, Rate)| format!("{:.0}–{:.0} kbps", r.0.as_kbps(), r.1.as_kbps());
    println!(
        "  {:<34}{:>16}{:>16}{:>9}",
        format!("range in {} of train", allowance),
        range(c.quick_range_in_budget),
        range(c.chirp_range_in_budget),
        format!("{:.1}×", c.range_ratio())
    );
    println!(
        "  {:<34}{:>16}{:>16}{:>9}",
        "mean resolution (Eq. 14 / Eq. 16)",
        format!("{:.1} kbps", c.quick_resolution.as_kbps()),
        format!("{:.1} kbps", c.chirp_resolution.as_kbps()),
        ratio(c.chirp_resolution.bps() as f64, c.quick_resolution.bps() as f64)
    );
    println!(
        "  {:<34}{:>16}{:>16}{:>9}",
        "bytes per train",
        format!("{:.1} KB", kb(c.quick_bytes)),
        format!("{:.1} KB", kb(c.chirp_bytes)),
        ratio(c.quick_bytes.0 as f64, c.chirp_bytes.0 as f64)
    );
    println!(
        "  PathQuick with ΔP = {} B: N {}, {:.1} KB per train, resolution {:.1} kbps",
        c.half_quick.delta_p.0,
        c.half_quick.n,
        kb(c.half_quick.bytes()),
        c.half_quick.resolution().as_kbps()
    );
    println!(
        "  (the concrete {}-packet chirp sends {} packets in {}, its top gap probing {:.1} kbps)",
        ch.m,
        c.chirp_packets_in_budget,
        allowance,
        c.chirp_top_rate_in_budget.as_kbps()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct DesignCli {
        #[command(flatten)]
        a: DesignArgs,
    }

    #[test]
    fn design_defaults_reproduce_the_paper() {
        let a = DesignCli::parse_from(["design"]).a;
        let c = design_comparison(&a).unwrap();
        assert_eq!(c.quick_train, Dur::from_millis(124));
        assert_eq!(c.chirp_train.as_millis_f64().round(), 682.0);
        assert_eq!(c.quick_estimate_time, Dur::from_millis(176));
        assert_eq!(c.chirp_estimate_time.as_millis_f64().round(), 734.0);
        assert_eq!(c.quick_range_in_budget, (Rate::from_kbps(104), Rate::from_kbps(11_912)));
        assert_eq!(c.chirp_range_in_budget, (Rate::from_kbps(104), Rate::from_kbps(200)));
        assert_eq!(c.quick_resolution, Rate::from_kbps(96));
        assert_eq!((kb(c.quick_bytes) * 10.0).round() / 10.0, 93.1);
        assert_eq!((kb(c.chirp_bytes) * 10.0).round() / 10.0, 41.7);
        assert_eq!((kb(c.half_quick.bytes()) * 10.0).round() / 10.0, 46.9);
        assert_eq!(c.half_quick.n, 63);
        run_design(a).unwrap();
    }

    #[test]
    fn design_rejects_impossible_trains() {
        let a = DesignCli::parse_from(["design", "--pn", "2000"]).a;
        assert!(design_comparison(&a).is_err());
        let a = DesignCli::parse_from(["design", "--gamma", "1.0"]).a;
        assert!(design_comparison(&a).is_err());
    }

    #[test]
    fn a_badly_paced_train_gets_the_realtime_note_and_nothing_else_does() {
        use headroom_core::abw::train::{pacing_fault, PacingReport};
        let spec = QuickSpec {
            t_quick: Some(Dur::from_micros(24)),
            p_1: Some(Bytes(48)),
            p_n: Some(Bytes(1500)),
            ..QuickSpec::paper()
        };
        let schedule = spec.solve().unwrap().schedule();
        // 30 µs mean error at a 24 µs spacing, as a busy server sent it (the loopback runs)
        let report = PacingReport { late: 1, mean_error: Dur::from_micros(30), max_error: Dur::from_micros(60) };
        let fault = pacing_fault(&schedule, &report).expect("badly paced");
        let paced = Outcome::Inconclusive { reason: InconclusiveReason::BadlyPaced(fault) };
        assert!(pacing_note([&paced].into_iter()).unwrap().contains("headroom serve --realtime"));
        let estimate = Outcome::Estimate(Rate::from_mbps(90));
        assert!(pacing_note([&estimate, &paced].into_iter()).is_some(), "any train of the estimate");
        let lossy = Outcome::Inconclusive { reason: InconclusiveReason::Lost { lost: 40, packets: 122 } };
        assert_eq!(pacing_note([&estimate, &lossy].into_iter()), None);
    }

    #[test]
    fn probe_args_parse_and_reject_bad_input() {
        #[derive(Parser)]
        struct P {
            #[command(flatten)]
            a: ProbeArgs,
        }
        let p =
            P::try_parse_from(["probe", "h:1", "--method", "pathchirp", "--bmin", "1Mbps", "--repeat", "3"]).unwrap().a;
        assert_eq!(p.method, Method::PathChirp);
        assert_eq!(p.bmin, Some(Rate::from_mbps(1)));
        assert!(P::try_parse_from(["probe", "h", "--method", "pathload"]).is_err());
        assert!(P::try_parse_from(["probe", "h", "--bmax", "fast"]).is_err());
        assert!(P::try_parse_from(["probe", "h", "--json", "--instbw"]).is_err());
    }

    #[test]
    fn the_estimator_flags_turn_the_knee_fit_and_shaper_detection_on_and_off() {
        #[derive(Parser)]
        struct P {
            #[command(flatten)]
            a: ProbeArgs,
        }
        let opts = |args: &[&str]| probe_options(&P::try_parse_from(args).unwrap().a);
        // Defaults: PathQuick looks for shapers (without the shaper train), pathChirp does not.
        let quick = opts(&["probe", "h"]);
        assert!(quick.estimator.detect_shaper && !quick.shaper_train && !quick.estimator.knee_fit);
        assert!(!opts(&["probe", "h", "--method", "pathchirp"]).estimator.detect_shaper);
        let chirp = opts(&["probe", "h", "--method", "pathchirp", "--detect-shaper", "--knee-fit"]);
        assert!(chirp.estimator.detect_shaper && chirp.shaper_train && chirp.estimator.knee_fit);
        let off = opts(&["probe", "h", "--no-detect-shaper"]);
        assert!(!off.estimator.detect_shaper && !off.shaper_train);
        assert!(P::try_parse_from(["probe", "h", "--detect-shaper", "--no-detect-shaper"]).is_err());
        // probe-bench takes the same flags, through its client options.
        #[derive(Parser)]
        struct B {
            #[command(flatten)]
            c: crate::probe_bench::ClientChoice,
        }
        let c = B::try_parse_from(["bench", "--detect-shaper", "--knee-fit"]).unwrap().c;
        let o = c.options(Method::PathQuick, None);
        assert!(o.estimator.detect_shaper && o.shaper_train && o.estimator.knee_fit && o.auto_range);
        let c = B::try_parse_from(["bench", "--no-detect-shaper"]).unwrap().c;
        assert!(!c.options(Method::PathQuick, None).estimator.detect_shaper);
        assert!(B::try_parse_from(["bench", "--detect-shaper", "--no-detect-shaper"]).is_err());
    }
}
