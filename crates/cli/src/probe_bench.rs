//! `headroom probe-bench`: PathQuick against pathChirp on the testbed, the PathQuick paper's
//! simulated path built for real (issue 4): a 12 Mbit/s bottleneck, 26 ms each way, Poisson UDP
//! cross traffic of 1000-byte packets at 0, 3, 6 and 9 Mbit/s.
//!
//! Hosts (one testbed, [`headroom_testbed::Topology::dumbbell`] with two pairs): `s1` runs the
//! probe server ([`headroom_net::Server`], it sends the trains), `r1` the client
//! ([`headroom_net::estimate_addr`], it timestamps and estimates), `s2 → r2` carries the cross
//! traffic ([`headroom_testbed::traffic::udp_send`], Poisson, 1000 IP bytes). Everything shares
//! the bottleneck (an exact link of 12 Mbit/s with a `--buffer` drop-tail queue, in the delay box).
//!
//! Per level the cross traffic starts, runs 2 s to reach a steady state, then the two methods
//! take turns, one single-train estimate each (`repeat = 1`: one handshake, one train), with
//! `--pause` between estimates so the queue a train leaves behind drains before the next. Each
//! estimate's time is the client's per-train time, START sent → estimate made (the last packet,
//! or the client's judging deadline, handshake RTT + train length + 10 ms, when the train's own
//! queue still holds its tail); the handshake happens once per call and is reported separately.
//! The goal is train length + RTT + 20 ms.
//!
//! **Two estimators, one train.** Each train is judged with the client's defaults and again
//! from the same received records with the other decrease factor, so the table compares the
//! papers' `F = 1.5` with our `F = 5` ([`RAMP_DECREASE_FACTOR`]) on identical data. The goal
//! lines compare PathQuick with pathChirp as published (its `F = 1.5`).
//!
//! **Priorities.** On a small shared machine (2 cores here, compilers running) the server's
//! pacer thread was preempted mid-train: PathQuick packets up to 8 ms late (a late packet shifts
//! the rest of its train, so the train also lasts longer). Unless `--no-realtime`, the server's
//! threads and the client's run at SCHED_FIFO priority 6, above the cross-traffic generator (5)
//! and below the delay box (10), as the testbed does for its own generator.
//!
//! **The link.** The bottleneck is the testbed's exact link (issue 19): the delay box serialises
//! every packet at the rate, as a real link does. A tbf lets `burst` bytes through at line rate
//! before it enforces its rate, which hides the first packets of a PathQuick train above the
//! available bandwidth and biases the knee upwards (docs/pathquick.md measured it: about
//! `√(2·burst/ΔP)` packets); `--shaper-burst B` puts such a token-bucket shaper (rate = the
//! link's) in front of the link to show that bias.
//!
use crate::probe::EstimatorFlags;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use headroom_core::abw::{estimate_train, EstimatorConfig, Method, Outcome, TrainDesign, RAMP_DECREASE_FACTOR};
use headroom_core::stats::median;
use headroom_core::units::{parse_positive, Bytes, Dur, Rate};
use headroom_net::{estimate_addr, EstimateOptions, Server, ServerConfig};
use headroom_testbed::sys;
use headroom_testbed::topology::{Buffer, Shaper};
use headroom_testbed::traffic::{
    CrossReport, CrossSource, CrossTraffic, GeneratorLateness, GENERATOR_PRIORITY, LATE_SEND,
};
use headroom_testbed::{Bottleneck, Testbed, Topology};

use crate::chirp_smoothing::{self, Chirp};

#[derive(Args, Debug, Clone)]
pub struct ProbeBenchArgs {
    /// Cross-traffic levels (Poisson UDP, 1000-byte packets), comma-separated.
    #[arg(long, default_value = "0,3Mbps,6Mbps,9Mbps", value_delimiter = ',')]
    pub levels: Vec<Rate>,
    /// Where the cross traffic comes from: `generator` (Poisson UDP from host s2 to r2 through
    /// the bottleneck) or `in-link` (the delay box's virtual Poisson source inside the forward
    /// link: same queue, no packets on the wire, for rates the generator cannot send beside the
    /// probe on a small machine; see `headroom_testbed::delaybox`).
    #[arg(long, default_value = "generator")]
    pub cross_source: CrossSource,
    /// Single-train estimates per level and method.
    #[arg(long, default_value_t = 15)]
    pub trains: u32,
    /// Bottleneck rate.
    #[arg(long, default_value = "12Mbps", value_parser = parse_positive::<Rate>)]
    pub rate: Rate,
    /// One-way propagation delay of the bottleneck (each way).
    #[arg(long, default_value = "26ms")]
    pub delay: Dur,
    /// Put a token-bucket shaper of this depth (rate = `--rate`) in front of the link (see the
    /// module doc).
    #[arg(long, value_parser = parse_positive::<Bytes>)]
    pub shaper_burst: Option<Bytes>,
    /// The shaper's token rate (default `--rate`). Below `--rate` the shaper, not the link, is
    /// the bottleneck, as behind an ISP plan or a cloud egress limit: the true available
    /// bandwidth is this rate minus the cross traffic, and the rows say how often the client
    /// saw the shaper and the burst it read.
    #[arg(long, requires = "shaper_burst", value_parser = parse_positive::<Rate>)]
    pub shaper_rate: Option<Rate>,
    /// Bottleneck buffer (`100pkts` as in the simulated Fig. 6, or bytes such as `150KB`).
    #[arg(long, default_value = "100pkts")]
    pub buffer: String,
    /// How long the delay box polls its input after each arrival before it sleeps (default
    /// 300 µs, where the testbed's own default is zero; `0s` sleeps after every packet and
    /// stamps each arrival one wake-up late, the box before issue 19 session 17;
    /// `headroom_testbed::delaybox`, step 4).
    #[arg(long)]
    pub box_arrival_spin: Option<Dur>,
    #[command(flatten)]
    pub client: ClientChoice,
    /// Pause between two estimates.
    #[arg(long, default_value = "300ms")]
    pub pause: Dur,
    /// Leave the probe server's and client's threads at normal priority (see the module doc).
    #[arg(long)]
    pub no_realtime: bool,
    /// Write every estimate as CSV here.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write every packet of every train (auto-ranging's coarse trains too) as CSV here: send
    /// and receive times, size, the train's role and verdict, to read a train's delay signature.
    #[arg(long)]
    pub dump: Option<PathBuf>,
    /// Run the shaper grid instead (`crate::shaper_grid`): every token rate × bucket depth of
    /// `RATES/BURSTS` (default the 10,50,100 Mbit/s × 4.5,16,64 KB) in front of the
    /// `--rate` link, no cross traffic, a table of rate errors and burst ratios.
    #[arg(long, value_name = "RATES/BURSTS", num_args = 0..=1,
          default_missing_value = crate::shaper_grid::DEFAULT_GRID, conflicts_with_all = ["shaper_burst", "levels", "csv", "dump"])]
    pub shaper_grid: Option<crate::shaper_grid::ShaperGrid>,
    /// Measure the spacing error at each rate instead (`crate::pacing_grid`): PathQuick trains
    /// topped at each of `RATES` (default 1–500 Mbit/s) from a server on loopback, the sender's
    /// |send − schedule| and the receiver's |receive gap − send gap|; no testbed, no root.
    #[arg(long, value_name = "RATES", num_args = 0..=1,
          default_missing_value = crate::pacing_grid::DEFAULT_RATES, conflicts_with_all = ["shaper_grid", "shaper_burst", "levels", "csv", "dump", "bmax"])]
    pub pacing_grid: Option<crate::pacing_grid::PacingGrid>,
    /// Fixed trains, PathQuick's then pathChirp's (`headroom reproduce pathquick-fig8`; not an
    /// option of the command): no auto-ranging, no `--bmax`.
    #[arg(skip)]
    pub designs: Option<[TrainDesign; 2]>,
}

/// Size of a cross-traffic packet (IP bytes), as in the paper.
const CROSS_SIZE: usize = 1000;
const SERVER_PORT: u16 = 7447;
const CROSS_PORT: u16 = 9000;
/// SCHED_FIFO priority of the probe server's and client's threads: above the cross-traffic
/// generator, below the delay box.
const PROBE_PRIORITY: i32 = GENERATOR_PRIORITY + 1;

/// One single-train estimate on the testbed.
#[derive(Clone, Debug)]
pub struct BenchRow {
    pub cross: Rate,
    pub method: Method,
    /// How this row's train was judged.
    pub judge: Judge,
    /// `judge` is the client's own default for the method (the estimate it reported).
    pub client_default: bool,
    pub verdict: &'static str,
    pub value: Option<Rate>,
    /// START sent → estimate made, auto-ranging's coarse trains included.
    pub train_time: Duration,
    /// Auto-ranging's coarse trains before the answer's train.
    pub ranging_trains: u32,
    /// The whole call, handshake included.
    pub call_time: Duration,
    pub train_length: Dur,
    pub train_bytes: Bytes,
    pub lost: u32,
    pub spacing_error_max: Dur,
    /// The shaper the client reported (rate, burst), with the client's defaults.
    pub shaper: Option<(Rate, Bytes)>,
    /// What the level's cross traffic did (its source, offered and carried rates), once the
    /// level is over.
    pub cross_report: Option<CrossReport>,
    /// The delay box's mean release lateness on the forward link over the level (the testbed's
    /// fidelity: a box that releases packets late batches them, and no train method can read
    /// through that), once the level is over.
    pub box_lateness: Option<Dur>,
}

/// Header of `--dump`: one line per packet of every train.
pub const DUMP_HEADER: &str =
    "cross_mbps,method,estimate,train,role,verdict,value_mbps,knee,index,size,send_ns,recv_ns,\
     late,spacing_error_mean_ns,spacing_error_max_ns,round_trip_ns\n";

/// The `--dump` lines of one estimate: its coarse trains (`coarse`), then its answer's trains
/// (`answer`), every packet with the times the client judged (send offset carried by the probe,
/// kernel receive timestamp; empty when lost or cut) and after a train its capacity burst if it
/// had one (indices from the train's length on), each train's pacing as the server
/// reported it (packets late, mean and max send-time error) and the session's round trip:
/// what `headroom probe-replay` needs to judge the trains again.
fn dump_lines(cross: Rate, method: Method, estimate: usize, e: &headroom_net::Estimate) -> String {
    let mut s = String::new();
    let trains = e.ranging.iter().map(|t| ("coarse", t)).chain(e.trains.iter().map(|t| ("answer", t)));
    for (k, (role, t)) in trains.enumerate() {
        let o = &t.estimate.outcome;
        let value = o.value().map(|v| format!("{:.4}", v.as_mbps())).unwrap_or_default();
        let knee = t.estimate.knee.map(|k| k.to_string()).unwrap_or_default();
        for r in t.records.iter().chain(&t.burst) {
            let _ = writeln!(
                s,
                "{},{},{estimate},{k},{role},{},{value},{knee},{},{},{},{},{},{},{},{}",
                cross.as_mbps(),
                method.name(),
                o.kind(),
                r.index,
                r.size.0,
                r.send_time.0,
                r.recv_time.map(|t| t.0.to_string()).unwrap_or_default(),
                t.late,
                t.spacing_error_mean.0,
                t.spacing_error_max.0,
                e.round_trip.as_nanos()
            );
        }
    }
    s
}

/// How the bench's client estimates: its options, which `headroom probe-replay` takes too, to
/// judge a dump's trains as the client did.
#[derive(Args, Clone, Copy, Debug, Default)]
pub struct ClientChoice {
    /// Highest rate to probe; without it both methods find the range themselves
    /// (`EstimateOptions::auto_range`: PathQuick's coarse + fine trains, one wide chirp).
    #[arg(long, value_parser = parse_positive::<Rate>)]
    pub bmax: Option<Rate>,
    /// Auto-ranging's target standard deviation, as a fraction of the capacity (default
    /// `autorange::TARGET_SIGMA`): PathQuick's fine train is made long enough for it.
    #[arg(long)]
    pub target_sigma: Option<f64>,
    /// As `headroom probe`'s (the shaper grid sets `--detect-shaper`).
    #[command(flatten)]
    pub estimator: EstimatorFlags,
}

impl ClientChoice {
    /// One single-train estimate of `method` (a `fixed` design, `--bmax`, or auto-ranging).
    pub fn options(&self, method: Method, fixed: Option<TrainDesign>) -> EstimateOptions {
        let defaults = EstimateOptions::for_method(method);
        self.estimator.apply(EstimateOptions {
            repeat: 1,
            b_max: self.bmax.unwrap_or(defaults.b_max),
            auto_range: self.bmax.is_none() && fixed.is_none(),
            design: fixed,
            target_sigma: self.target_sigma.unwrap_or(defaults.target_sigma),
            ..defaults
        })
    }
}

pub fn run_probe_bench(a: ProbeBenchArgs) -> Result<()> {
    if let Some(grid) = &a.shaper_grid {
        return crate::shaper_grid::run(&a, grid);
    }
    if let Some(grid) = &a.pacing_grid {
        return crate::pacing_grid::run(&a, grid);
    }
    crate::outdir::writable_file(a.csv.as_deref(), "--csv")?;
    crate::outdir::writable_file(a.dump.as_deref(), "--dump")?;
    let (rows, dump) = measure(&a)?;
    if let Some(path) = &a.dump {
        std::fs::write(path, dump).with_context(|| format!("cannot write {}", path.display()))?;
        println!("(every packet in {})", path.display());
    }
    print!("{}", summary(&a, &rows));
    if let Some(path) = &a.csv {
        std::fs::write(path, csv(&rows)).with_context(|| format!("cannot write {}", path.display()))?;
        println!("(every estimate in {})", path.display());
    }
    Ok(())
}

/// Brings the testbed up, runs every level (the rows and, with `--dump`, the packets) and takes
/// it down again, also on error.
pub fn measure(a: &ProbeBenchArgs) -> Result<(Vec<BenchRow>, String)> {
    if let Some(why) = headroom_testbed::unsupported_reason() {
        bail!("the testbed cannot run here: {why}");
    }
    if a.trains == 0 {
        bail!("--trains must be at least 1");
    }
    if a.levels.iter().any(|l| *l >= a.rate) {
        bail!("every cross-traffic level must be below the bottleneck rate {}", a.rate);
    }
    let buffer = Buffer::parse(&a.buffer).map_err(|e| anyhow::anyhow!("--buffer: {e}"))?;
    let shaper = a.shaper_burst.map(|b| Shaper { rate: a.shaper_rate.unwrap_or(a.rate), burst: Some(b) });
    if a.shaper_rate.is_some_and(|r| r > a.rate) {
        bail!("--shaper-rate must not exceed --rate (the link behind the shaper)");
    }
    let bottleneck = Bottleneck {
        buffer,
        shaper,
        arrival_spin: a.box_arrival_spin.unwrap_or(headroom_testbed::delaybox::DEFAULT_ARRIVAL_SPIN),
        ..Bottleneck::new(Some(a.rate), a.delay)
    };
    let tb = Testbed::up(&Topology::dumbbell(2, bottleneck)).context("building the testbed")?;
    eprintln!(
        "testbed {}: {} exact link, {} each way, {}, buffer {}, cross traffic from the {} source",
        tb.prefix(),
        a.rate,
        a.delay,
        a.shaper_burst.map_or("no shaper".to_string(), |b| format!(
            "tbf shaper {} burst {} B",
            a.shaper_rate.unwrap_or(a.rate),
            b.0
        )),
        a.buffer,
        a.cross_source
    );
    let result = bench_on(&tb, a);
    let down = tb.down();
    let (rows, dump) = result?;
    down?;
    Ok((rows, dump))
}

fn bench_on(tb: &Testbed, a: &ProbeBenchArgs) -> Result<(Vec<BenchRow>, String)> {
    let server_ip = tb.host("s1")?.addr;
    let realtime = !a.no_realtime;
    let server = tb.run_in("s1", move || {
        let s = Server::bind(("0.0.0.0", SERVER_PORT), ServerConfig::default())?;
        // The pacer and receive threads inherit the scheduling policy of this thread.
        if realtime && !sys::set_realtime(PROBE_PRIORITY) {
            eprintln!("warning: cannot give the probe server real-time priority; its spacing may suffer");
        }
        Ok(s.spawn()?)
    })?;
    let server_addr = std::net::SocketAddr::new(server_ip.into(), SERVER_PORT);
    let mut rows = Vec::new();
    let mut dump = String::from(DUMP_HEADER);
    for (k, &cross) in a.levels.iter().enumerate() {
        let seeds = (1 + k as u64, k as u32);
        let cross_traffic =
            CrossTraffic::start(tb, a.cross_source, ("s2", "r2"), CROSS_PORT, cross, CROSS_SIZE, seeds)?;
        if cross > Rate::ZERO {
            std::thread::sleep(Duration::from_secs(2));
        }
        eprintln!("cross traffic {cross} ({}): {} trains per method", a.cross_source, a.trains);
        let (box0, tun0, rcv0) = (tb.delaybox_counters().0, tb.tun_drops()?, udp_rcvbuf_errors(tb, "r1")?);
        let level = run_level(tb, a, server_addr, cross, &mut dump);
        let (x, tun, rcv) = (tb.delaybox_counters().0.since(&box0), tb.tun_drops()?, udp_rcvbuf_errors(tb, "r1")?);
        // Where the probes' packets were lost, if they were: the link's queue, the box itself
        // (its delay line full, writes failed), the TUN device it did not read in time, or the
        // client's socket (its receive buffer full).
        eprintln!(
            "  forward link over the level: {} packets in, queue drops {}, the box's own drops {}, TUN drops {}, release lateness mean {:.1} us, p99 < {} us, polled for arrivals {:.1} ms (budget spent after {} arrivals, {} back-offs); r1's UDP receive-buffer drops {}",
            x.packets_in,
            x.queue_drops,
            x.own_drops(),
            tun.0 - tun0.0,
            x.mean_lateness().0 as f64 / 1e3,
            x.lateness_quantile_bound(0.99).0 / 1000,
            x.poll_ns as f64 / 1e6,
            x.poll_budget_out,
            x.poll_backoffs,
            rcv - rcv0
        );
        let report = cross_traffic.stop()?;
        let mut level = level?;
        for r in &mut level {
            r.cross_report = Some(report);
            r.box_lateness = Some(x.mean_lateness());
        }
        rows.extend(level);
    }
    server.shutdown();
    Ok((rows, dump))
}

/// `Udp: RcvbufErrors` of `host`'s namespace (`/proc/thread-self/net/snmp`, read from a thread
/// inside it): datagrams dropped because a socket's receive buffer was full.
fn udp_rcvbuf_errors(tb: &Testbed, host: &str) -> Result<u64> {
    tb.run_in(host, || {
        let snmp = std::fs::read_to_string("/proc/thread-self/net/snmp")?;
        let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:")).map(|l| l.split_whitespace());
        let (Some(names), Some(values)) = (udp.next(), udp.next()) else {
            bail!("no Udp lines in /proc/thread-self/net/snmp")
        };
        names
            .zip(values)
            .find(|(n, _)| *n == "RcvbufErrors")
            .and_then(|(_, v)| v.parse().ok())
            .context("no Udp RcvbufErrors in /proc/thread-self/net/snmp")
    })
}

fn run_level(
    tb: &Testbed,
    a: &ProbeBenchArgs,
    server: std::net::SocketAddr,
    cross: Rate,
    dump: &mut String,
) -> Result<Vec<BenchRow>> {
    let mut rows = Vec::new();
    for n in 0..a.trains as usize {
        for method in [Method::PathQuick, Method::PathChirp] {
            let fixed = a.designs.as_ref().map(|d| d[(method == Method::PathChirp) as usize].clone());
            let opts = a.client.options(method, fixed);
            let realtime = !a.no_realtime;
            let estimator = opts.estimator;
            let called = std::time::Instant::now();
            let e = match tb.run_in("r1", move || {
                if realtime {
                    sys::set_realtime(PROBE_PRIORITY);
                }
                estimate_addr(server, &opts).map_err(anyhow::Error::from)
            }) {
                Ok(e) => e,
                // A failed call (e.g. a train that never arrived) is a failed estimate of the
                // table, not the end of the benchmark.
                Err(err) => {
                    eprintln!("  {} estimate failed: {err:#}", method.name());
                    for j in JUDGES {
                        rows.push(BenchRow {
                            cross,
                            method,
                            judge: j,
                            client_default: j.is_default(&estimator),
                            verdict: "error",
                            value: None,
                            train_time: called.elapsed(),
                            ranging_trains: 0,
                            call_time: called.elapsed(),
                            train_length: Dur::ZERO,
                            train_bytes: Bytes::ZERO,
                            lost: 0,
                            spacing_error_max: Dur::ZERO,
                            shaper: None,
                            cross_report: None,
                            box_lateness: None,
                        });
                    }
                    continue;
                }
            };
            // The path's buffer, overflowed by the estimate's last train, drains before the next.
            let pause = Duration::from_nanos(a.pause.0).max(e.recovery);
            if a.dump.is_some() {
                dump.push_str(&dump_lines(cross, method, n, &e));
            }
            let t = e.trains.first().context("no train in the estimate")?;
            // The same train judged with the papers' F, the ramp's (docs/pathquick.md) and the
            // queue-growth fit.
            for j in JUDGES {
                let default = j.is_default(&estimator);
                let judged =
                    if default { e.outcome.clone() } else { estimate_train(&t.records, &j.config(estimator)).outcome };
                rows.push(BenchRow {
                    cross,
                    method,
                    judge: j,
                    client_default: default,
                    verdict: judged.kind(),
                    value: match judged {
                        Outcome::Inconclusive { .. } => None,
                        ref o => o.value(),
                    },
                    train_time: t.elapsed + e.ranging.iter().map(|r| r.elapsed).sum::<Duration>(),
                    ranging_trains: e.ranging.len() as u32,
                    call_time: e.elapsed,
                    train_length: e.design.train_length(),
                    train_bytes: e.train_bytes,
                    lost: t.estimate.lost,
                    spacing_error_max: t.spacing_error_max,
                    shaper: e.shaper.filter(|_| default).map(|sh| (sh.rate, sh.burst)),
                    cross_report: None,
                    box_lateness: None,
                });
            }
            std::thread::sleep(pause);
        }
    }
    Ok(rows)
}

/// How a train is judged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Judge {
    /// The excursion rules with this decrease factor `F`.
    Excursion(f64),
    /// The queue-growth fit (`headroom_core::abw::growth`).
    GrowthFit,
}

impl Judge {
    /// The estimator this judge is, from the client's.
    fn config(self, client: EstimatorConfig) -> EstimatorConfig {
        match self {
            Judge::Excursion(f) => EstimatorConfig { decrease_factor: f, growth_fit: false, ..client },
            Judge::GrowthFit => EstimatorConfig { growth_fit: true, ..client },
        }
    }

    fn is_default(self, client: &EstimatorConfig) -> bool {
        match self {
            Judge::Excursion(f) => !client.growth_fit && f == client.decrease_factor,
            Judge::GrowthFit => client.growth_fit,
        }
    }

    fn label(self) -> String {
        match self {
            Judge::Excursion(f) => format!("F={f}"),
            Judge::GrowthFit => "fit".into(),
        }
    }
}

/// Every train is judged by each of these: the papers' decrease factor, the ramp's, the fit.
const JUDGES: [Judge; 3] = [Judge::Excursion(1.5), Judge::Excursion(RAMP_DECREASE_FACTOR), Judge::GrowthFit];
/// pathChirp as published.
const BASELINE: Judge = Judge::Excursion(1.5);

/// The rate of the path's bottleneck: the shaper's when it is slower than the link.
fn bottleneck_rate(a: &ProbeBenchArgs) -> Rate {
    a.shaper_rate.filter(|_| a.shaper_burst.is_some()).unwrap_or(a.rate).min(a.rate)
}

/// With a shaper: per method, how many estimates reported it and the median rate and burst.
/// The rows of one cross-traffic level and method, judged as the client does by default.
fn rows_at(rows: &[BenchRow], cross: Rate, method: Method) -> Vec<&BenchRow> {
    rows.iter().filter(|r| r.cross == cross && r.method == method && r.client_default).collect()
}

fn shaper_lines(a: &ProbeBenchArgs, rows: &[BenchRow]) -> String {
    let mut s = String::new();
    let (Some(burst), rate) = (a.shaper_burst, bottleneck_rate(a)) else { return s };
    let _ = writeln!(
        s,
        "\nshaper {rate}, burst {} B: goal (issue 19) rate within 10 % of the token rate, burst within a factor of two",
        burst.0
    );
    for &cross in &a.levels {
        for method in [Method::PathQuick, Method::PathChirp] {
            let of = rows_at(rows, cross, method);
            if of.is_empty() {
                continue;
            }
            let seen: Vec<(Rate, Bytes)> = of.iter().filter_map(|r| r.shaper).collect();
            let rates: Vec<f64> = seen.iter().map(|x| x.0.as_mbps()).collect();
            let bursts: Vec<f64> = seen.iter().map(|x| x.1 .0 as f64).collect();
            let (mr, mb) = (median(&rates).unwrap_or(f64::NAN), median(&bursts).unwrap_or(f64::NAN));
            let rate_ok = (mr - rate.as_mbps()).abs() <= 0.1 * rate.as_mbps();
            let burst_ok = mb >= burst.0 as f64 / 2.0 && mb <= burst.0 as f64 * 2.0;
            let _ = writeln!(
                s,
                "  cross {:>5.1} {:<10} shaper seen {:>3}/{:<3} median rate {:>8.2} Mbit/s ({}), median burst {:>8.0} B ({})",
                cross.as_mbps(),
                method.name(),
                seen.len(),
                of.len(),
                mr,
                if rate_ok { "met" } else { "MISSED" },
                mb,
                if burst_ok { "met" } else { "MISSED" }
            );
        }
    }
    s
}

fn generator_lateness(r: &BenchRow) -> Option<GeneratorLateness> {
    r.cross_report.and_then(|x| x.generator_lateness)
}

pub fn csv(rows: &[BenchRow]) -> String {
    let mut s = String::from("cross_mbps,method,judge,client_default,decrease_factor,verdict,estimate_mbps,train_time_ms,call_time_ms,train_length_ms,train_bytes,lost,spacing_error_max_us,ranging_trains,shaper_rate_mbps,shaper_burst_bytes,cross_source,cross_offered_mbps,cross_carried_mbps,box_lateness_mean_us,generator_lateness_mean_us,generator_late_share\n");
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{:.2},{:.2},{:.2},{},{},{:.1},{},{},{},{},{},{},{},{},{}",
            r.cross.as_mbps(),
            r.method.name(),
            r.judge.label(),
            r.client_default,
            match r.judge {
                Judge::Excursion(f) => f.to_string(),
                Judge::GrowthFit => String::new(),
            },
            r.verdict,
            r.value.map(|v| format!("{:.4}", v.as_mbps())).unwrap_or_default(),
            r.train_time.as_secs_f64() * 1e3,
            r.call_time.as_secs_f64() * 1e3,
            r.train_length.as_secs_f64() * 1e3,
            r.train_bytes.0,
            r.lost,
            r.spacing_error_max.as_secs_f64() * 1e6,
            r.ranging_trains,
            r.shaper.map(|x| format!("{:.4}", x.0.as_mbps())).unwrap_or_default(),
            r.shaper.map(|x| x.1 .0.to_string()).unwrap_or_default(),
            r.cross_report.map(|x| x.source.name()).unwrap_or_default(),
            r.cross_report.map(|x| format!("{:.4}", x.offered.as_mbps())).unwrap_or_default(),
            r.cross_report.map(|x| format!("{:.4}", x.carried.as_mbps())).unwrap_or_default(),
            r.box_lateness.map(|x| format!("{:.1}", x.as_secs_f64() * 1e6)).unwrap_or_default(),
            generator_lateness(r).map(|g| format!("{:.1}", g.mean.as_secs_f64() * 1e6)).unwrap_or_default(),
            generator_lateness(r).map(|g| format!("{:.4}", g.late_share)).unwrap_or_default()
        );
    }
    s
}

/// The per-level, per-method table and the goals, for each decrease factor.
pub fn summary(a: &ProbeBenchArgs, rows: &[BenchRow]) -> String {
    let rtt = a.delay + a.delay;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "true A = {} - cross traffic; one train per estimate; budget = train length + RTT ({:.0} ms) + 20 ms",
        a.rate,
        rtt.as_secs_f64() * 1e3
    );
    s.push_str(&cross_lines(a, rows));
    let _ = writeln!(s, "every train is judged three times: excursions with pathChirp's decrease factor F = 1.5 (the papers'), with F = {RAMP_DECREASE_FACTOR} (ours), and the queue-growth fit (ours)");
    let _ = writeln!(
        s,
        "{:>6} {:<10} {:>5} {:>4} {:>7} {:>7} {:>6} {:>10} {:>9} {:>9} {:>9} {:>8} {:>6}",
        "cross",
        "method",
        "judge",
        "n",
        "median",
        "error",
        "MAE",
        "range/inc",
        "time med",
        "time max",
        "in budget",
        "bytes",
        "lost"
    );
    // (F, cross, method) -> (median error, MAE, median time, all within budget)
    let mut stats = Vec::new();
    for f in JUDGES {
        for &cross in &a.levels {
            let truth = (bottleneck_rate(a).as_mbps() - cross.as_mbps()).max(0.0);
            for method in [Method::PathQuick, Method::PathChirp] {
                let of: Vec<&BenchRow> =
                    rows.iter().filter(|r| r.cross == cross && r.method == method && r.judge == f).collect();
                if of.is_empty() {
                    continue;
                }
                let values: Vec<f64> = of.iter().filter_map(|r| r.value.map(|v| v.as_mbps())).collect();
                let mae = values.iter().map(|v| (v - truth).abs()).sum::<f64>() / values.len().max(1) as f64;
                let med = median(&values).unwrap_or(f64::NAN); // no estimate: printed as NaN
                let times: Vec<f64> = of.iter().map(|r| r.train_time.as_secs_f64() * 1e3).collect();
                let tmax = times.iter().cloned().fold(0.0, f64::max);
                let tmed = median(&times).unwrap_or(f64::NAN);
                let budget = (of[0].train_length + rtt).as_secs_f64() * 1e3 + 20.0;
                let within = of.iter().filter(|r| r.train_time.as_secs_f64() * 1e3 <= budget).count();
                let ranges = of.iter().filter(|r| r.verdict == "above_range" || r.verdict == "below_range").count();
                let inc = of.iter().filter(|r| r.verdict == "inconclusive").count();
                let lost: u32 = of.iter().map(|r| r.lost).sum();
                let _ = writeln!(
                    s,
                    "{:>6.1} {:<10} {:>5} {:>4} {:>7.2} {:>+7.2} {:>6.2} {:>6}/{:<3} {:>6.0} ms {:>6.0} ms {:>5}/{:<3} {:>8} {:>6}",
                    cross.as_mbps(),
                    method.name(),
                    f.label(),
                    of.len(),
                    med,
                    med - truth,
                    mae,
                    ranges,
                    inc,
                    tmed,
                    tmax,
                    within,
                    of.len(),
                    of[0].train_bytes.0,
                    lost
                );
                stats.push((f, cross, method, med - truth, mae, tmed, within == of.len()));
            }
        }
    }
    // PathQuick with each F against the baseline as published: pathChirp with its F = 1.5.
    let mut goals = Vec::new();
    for &(f, cross, method, qe, qm, qt, qin) in &stats {
        let baseline = stats.iter().find(|b| b.0 == BASELINE && b.1 == cross && b.2 == Method::PathChirp);
        if let (Method::PathQuick, Some(&(_, _, _, ce, cm, ct, _))) = (method, baseline) {
            goals.push((f, cross, qe, qin, [qe.abs() < ce.abs(), qm < cm, qt < ct]));
        }
    }
    s.push_str(&capacity_goals(a, rows));
    s.push_str(&shaper_lines(a, rows));
    let _ = writeln!(s, "\ngoals (issue 4): PathQuick median error within ±1.5 Mbit/s, every estimate within budget, ahead of pathChirp (its F = 1.5) on error and time");
    let yes = |b: bool| if b { "yes" } else { "no" };
    for (f, cross, qe, qin, [median_better, mae_better, time_better]) in goals {
        let _ = writeln!(
            s,
            "  {:<5} cross {:>4.1} Mbit/s: median error {:+.2} {}, budget {}; ahead of pathChirp on |median error| {}, on MAE {}, on median time {}",
            f.label(),
            cross.as_mbps(),
            qe,
            if qe.abs() <= 1.5 { "met" } else { "MISSED" },
            if qin { "met" } else { "MISSED" },
            yes(median_better),
            yes(mae_better),
            yes(time_better)
        );
    }
    s
}

/// Which source the cross traffic came from and, per level, what it offered and carried.
fn cross_lines(a: &ProbeBenchArgs, rows: &[BenchRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "cross traffic: Poisson, {CROSS_SIZE}-byte packets, from the {} source ({})",
        a.cross_source,
        match a.cross_source {
            CrossSource::Generator => "UDP from host s2 to r2 through the bottleneck",
            CrossSource::InLink =>
                "the delay box's virtual source inside the forward link: its queue and wire, no packets",
        }
    );
    for &cross in a.levels.iter().filter(|l| **l > Rate::ZERO) {
        let Some(x) = rows.iter().find(|r| r.cross == cross).and_then(|r| r.cross_report) else { continue };
        let _ = writeln!(
            s,
            "  level {:>6.1} Mbit/s: offered {:>8.3} Mbit/s, carried {:>8.3} Mbit/s, {} of {} packets lost, over {:.1} s",
            cross.as_mbps(),
            x.offered.as_mbps(),
            x.carried.as_mbps(),
            x.lost_packets,
            x.offered_packets,
            x.elapsed.as_secs_f64()
        );
        // The generator's fidelity, as the box's lateness is the link's: a generator that sent
        // late sent in bursts, and a train then met other cross traffic than the level's.
        if let Some(g) = x.generator_lateness {
            let _ = writeln!(
                s,
                "    the generator's send lateness: mean {:.1} us, max {:.1} us, {:.2} % of its packets more than {} us late",
                g.mean.as_secs_f64() * 1e6,
                g.max.as_secs_f64() * 1e6,
                g.late_share * 100.0,
                LATE_SEND.0 / 1000
            );
        }
    }
    s
}

/// Issue 19's time budget of one estimate, ms: its answer train + RTT + 20 ms, and when it
/// ranged one more train of the answer's length, with its round trip when `extra_rtt`
/// ([`capacity_goals`] says why).
fn time_budget_ms(r: &BenchRow, rtt: Dur, extra_rtt: bool) -> f64 {
    let extra = match (r.ranging_trains > 0, extra_rtt) {
        (false, _) => Dur::ZERO,
        (true, true) => r.train_length + rtt,
        (true, false) => r.train_length,
    };
    (r.train_length + rtt + extra).as_secs_f64() * 1e3 + 20.0
}

/// Issue 19's goals, per method and level with the default decrease factors (PathQuick's `F` =
/// [`RAMP_DECREASE_FACTOR`], pathChirp's 1.5): median and 90th percentile of the absolute error
/// in % of the capacity (an inconclusive train counts as a 100 % error), and every estimate
/// within train length + RTT + 20 ms, plus one more train when auto-ranging.
///
/// "One more train" is the answer train's length **and its round trip** (session 9): a train's
/// result comes back one RTT after its last packet, and the next train is designed from it, so
/// a ranging train costs its length plus an RTT however short it is. Before session 9 the extra
/// was the train's length alone, which at RTT 100 ms no ladder could meet (an idle 100 Mbit/s
/// path: 22.8 ms fine train + 2 × 100 ms + 13 ms against 165.5 ms; docs/results.md, issue 19
/// session 9). The count without the extra round trip is printed beside it (`strict`).
fn capacity_goals(a: &ProbeBenchArgs, rows: &[BenchRow]) -> String {
    let rtt = a.delay + a.delay;
    let cap = bottleneck_rate(a).as_mbps();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\ngoals (issue 19), error in % of the {cap} Mbit/s capacity, {}: PathQuick median |error| <= 5 %, p90 <= 10 %, each estimate within train + RTT + 20 ms{}",
        if a.client.bmax.is_none() { "auto-ranging (no --bmax)" } else { "fixed range" },
        if a.client.bmax.is_none() { " + one train and its RTT" } else { "" }
    );
    let _ = writeln!(
        s,
        "{:>6} {:<10} {:>4} {:>10} {:>8} {:>10} {:>10} {:>9} {:>9} {:>7}",
        "cross", "method", "n", "med |e| %", "p90 %", "time med", "budget", "in budget", "strict", "goal"
    );
    let mut smoothing = Vec::new();
    for &cross in &a.levels {
        let truth = (cap - cross.as_mbps()).max(0.0);
        let mut quick = None;
        for method in [Method::PathQuick, Method::PathChirp] {
            let of = rows_at(rows, cross, method);
            if of.is_empty() {
                continue;
            }
            let errs: Vec<f64> =
                of.iter().map(|r| r.value.map_or(100.0, |v| 100.0 * (v.as_mbps() - truth).abs() / cap)).collect();
            let sorted: headroom_core::stats::Sorted = errs.iter().copied().collect();
            let (med, p90) = (sorted.quantile(0.5).unwrap_or(f64::NAN), sorted.quantile(0.9).unwrap_or(f64::NAN));
            let budget_of = |r: &BenchRow| time_budget_ms(r, rtt, true);
            let within = of.iter().filter(|r| r.train_time.as_secs_f64() * 1e3 <= budget_of(r)).count();
            let strict =
                of.iter().filter(|r| r.train_time.as_secs_f64() * 1e3 <= time_budget_ms(r, rtt, false)).count();
            let times: Vec<f64> = of.iter().map(|r| r.train_time.as_secs_f64() * 1e3).collect();
            let budgets: Vec<f64> = of.iter().map(|r| budget_of(r)).collect();
            let met = med <= 5.0 && p90 <= 10.0 && within == of.len();
            let time_med = median(&times).unwrap_or(f64::NAN);
            match method {
                Method::PathQuick => quick = Some((med, time_med)),
                Method::PathChirp => {
                    if let Some((quick_error, quick_time)) = quick {
                        let chirps = of
                            .iter()
                            .map(|r| Chirp {
                                value_mbps: r.value.map(|v| v.as_mbps()),
                                time_ms: r.train_time.as_secs_f64() * 1e3,
                                train_ms: r.train_length.as_secs_f64() * 1e3,
                            })
                            .collect();
                        smoothing.push(chirp_smoothing::Level {
                            cross_mbps: cross.as_mbps(),
                            truth_mbps: truth,
                            quick_error,
                            quick_time_ms: quick_time,
                            chirps,
                        });
                    }
                }
            }
            let _ = writeln!(
                s,
                "{:>6.1} {:<10} {:>4} {:>10.2} {:>8.2} {:>7.1} ms {:>7.1} ms {:>5}/{:<3} {:>5}/{:<3} {:>7}",
                cross.as_mbps(),
                method.name(),
                of.len(),
                med,
                p90,
                time_med,
                median(&budgets).unwrap_or(f64::NAN),
                within,
                of.len(),
                strict,
                of.len(),
                if method == Method::PathQuick {
                    if met {
                        "met"
                    } else {
                        "MISSED"
                    }
                } else {
                    "-"
                }
            );
        }
    }
    s.push_str(&chirp_smoothing::report(cap, &smoothing));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ranged_estimate_may_take_one_more_train_and_its_round_trip() {
        let mut row = BenchRow {
            cross: Rate::ZERO,
            method: Method::PathQuick,
            judge: Judge::GrowthFit,
            client_default: true,
            verdict: "estimate",
            value: None,
            train_time: Duration::ZERO,
            ranging_trains: 0,
            call_time: Duration::ZERO,
            train_length: Dur::from_millis(22),
            train_bytes: Bytes(0),
            lost: 0,
            spacing_error_max: Dur::ZERO,
            shaper: None,
            cross_report: None,
            box_lateness: None,
        };
        let rtt = Dur::from_millis(100);
        // No ranging: train + RTT + 20 ms, whichever rule.
        assert!((time_budget_ms(&row, rtt, true) - 142.0).abs() < 1e-9);
        assert!((time_budget_ms(&row, rtt, false) - 142.0).abs() < 1e-9);
        // One coarse train before it: one more train and its RTT; strictly, the train alone.
        row.ranging_trains = 1;
        assert!((time_budget_ms(&row, rtt, true) - 264.0).abs() < 1e-9);
        assert!((time_budget_ms(&row, rtt, false) - 164.0).abs() < 1e-9);
    }
}
