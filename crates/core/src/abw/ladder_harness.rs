//! The whole auto-ranging ladder (coarse trains, fine train, retry) on a packet-level path, with
//! no testbed: `cargo test --release -p headroom-core abw::ladder_harness -- --ignored
//! --nocapture` (issue 19, session 7).
//!
//! The path is the testbed's exact link: one FIFO at `C` with a drop-tail buffer of `B` packets,
//! Poisson cross traffic of 1,000-byte packets (the bench's generator) running all the time,
//! then the propagation delay `d` each way; the receiver's timestamps carry ±10 µs of noise.
//! The client is [`super::autorange::Ladder`] as `headroom probe` drives it: each START leaves
//! the client when the last train was judged (after the wait for its queue when the ladder asks
//! for one) and the train enters the bottleneck `d` later; coarse trains are judged whole, the
//! others cut as the client cuts them ([`JudgePolicy::socket_receiver`] with the sender-following
//! deadline, 10 ms of slack); the server's END is a 40-byte packet behind the train. An
//! estimate's time is the bench's: the sum over its trains of START → verdict. Its wall time
//! ("wall") runs from the first START to the answer, with the waits between trains; the next
//! estimate starts 300 ms later (the bench's `--pause`), or after the backlog of an answer train
//! that lost packets ([`Ladder::backlog_drain`]) when that is longer.
//!
//! `LADDER_C` runs one path: 10, 100 or 500 Mbit/s as the goals name them, or any other capacity
//! of 0.5–500 Mbit/s (`off_grid_path`; issue 19 session 26 mapped 1–300 Mbit/s with it).

use std::collections::VecDeque;

use super::autorange::{AutoRange, Ladder, LadderStep, DEFAULT_TOP};
use super::train::{JudgePolicy, TrainJudge};
use super::{EstimatorConfig, Outcome, QuickDesign, TrainPacket, TrainVerdict, RAMP_DECREASE_FACTOR};
use crate::rng::Rng;
use crate::stats::Sorted;
use crate::units::{Bytes, Dur, Time};

/// The receiver's timestamp error of a [`Path`] unless set: uniform over ±10 µs (s).
pub const DEFAULT_STAMP_NOISE: f64 = 10e-6;

/// The exact link shared with Poisson cross traffic.
pub struct Path {
    pub c: f64,
    pub x: f64,
    pub buffer: usize,
    pub delay: f64,
    /// The receiver's timestamp error, uniform over ± this (s; [`DEFAULT_STAMP_NOISE`] unless
    /// set).
    pub stamp_noise: f64,
    rng: Rng,
    next_cross: f64,
    /// Departure times of the packets in the system.
    queue: VecDeque<f64>,
    last_departure: f64,
    /// The delay box's stalls ([`Stalls`]), none unless set.
    stalls: Option<Stalls>,
    /// The last probe packet's release while the box catches up after a stall
    /// ([`Stalls::with_catch_up`]), `None` when it is on its schedule.
    catching_up: Option<f64>,
}

/// Stalls of the delay box, as the testbed's shows them on a shared 2-core VM (issue 19,
/// session 22): the box's thread does not run for a while, and the probe packets that reach it
/// meanwhile are read, stamped as arriving and serialised when it runs again; the in-link cross
/// traffic keeps its own times. Stalls start as a Poisson process of `rate` per second and last
/// uniformly `shortest`–`longest` seconds, drawn from their own generator so that the cross
/// traffic is the same with and without them. `LADDER_STALLS=RATE,SHORTEST_US,LONGEST_US`.
///
/// With 60 stalls a second of 100–1,000 µs (200 estimates per row, seed 0), the rules of
/// `super::excursion::ABRUPT_RISE` took the idle 500 Mbit/s estimates more than 10 % off from
/// 28 to 20 at RTT 10 ms and from 23 to 17 at RTT 100 ms (p90 20.6 → 8.8 and 13.1 → 0.0 % of
/// `C`); at 30 % load 22 → 18 at RTT 100 ms; the 60 and 90 % rows and the 100 Mbit/s path were
/// the same (docs/results.md, issue 19 session 22).
///
/// With [`Stalls::with_catch_up`] a stall also holds the packets whose serialisation ended
/// during it, and the box then sends them [`CATCH_UP_SEND_GAP`] apart until it is on its
/// schedule again, as the testbed's box does when a stall falls while packets wait for release
/// (issue 19, session 25: after a 1.56 ms stall four packets came 2 µs apart).
pub struct Stalls {
    rate: f64,
    shortest: f64,
    longest: f64,
    rng: Rng,
    /// The stalls that started, `(start, end)`, oldest first (those long past dropped).
    started: VecDeque<(f64, f64)>,
    next_start: f64,
    catch_up: bool,
}

/// How far apart the box sends the packets a stall held, catching up (s).
pub const CATCH_UP_SEND_GAP: f64 = 2e-6;

impl Stalls {
    pub fn new(rate: f64, shortest: f64, longest: f64, seed: u64) -> Stalls {
        let mut rng = Rng::new(seed ^ 0x5747_414c_4c53);
        let next_start = if rate > 0.0 { rng.exponential(1.0 / rate) } else { f64::INFINITY };
        Stalls { rate, shortest, longest, rng, started: VecDeque::new(), next_start, catch_up: false }
    }

    /// The same stalls, holding the packets due for release too (the type's doc).
    pub fn with_catch_up(self) -> Stalls {
        Stalls { catch_up: true, ..self }
    }

    /// The end of the stall under way at `t` (the latest that started by then), if any.
    fn stalled_until(&mut self, t: f64) -> Option<f64> {
        while self.next_start <= t {
            let len = self.rng.uniform_range(self.shortest, self.longest);
            self.started.push_back((self.next_start, self.next_start + len));
            self.next_start += self.rng.exponential(1.0 / self.rate);
        }
        // Queries come in time order but for the release, up to a queue's delay later.
        while self.started.len() > 1 && self.started[1].0 <= t - 1.0 {
            self.started.pop_front();
        }
        let latest = self.started.iter().rev().find(|s| s.0 <= t)?;
        (t < latest.1).then_some(latest.1)
    }

    /// When the box reads a packet that reached it at `t`.
    fn read_at(&mut self, t: f64) -> f64 {
        self.stalled_until(t).unwrap_or(t)
    }
}

impl Path {
    pub fn new(c: f64, x: f64, buffer: usize, delay: f64, seed: u64) -> Path {
        let mut rng = Rng::new(seed);
        let next_cross = if x > 0.0 { rng.exponential(8000.0 / x) } else { f64::INFINITY };
        let stamp_noise = DEFAULT_STAMP_NOISE;
        Path {
            c,
            x,
            buffer,
            delay,
            stamp_noise,
            rng,
            next_cross,
            queue: VecDeque::new(),
            last_departure: 0.0,
            stalls: None,
            catching_up: None,
        }
    }

    /// The same path with the delay box's stalls.
    pub fn with_stalls(self, stalls: Option<Stalls>) -> Path {
        Path { stalls, ..self }
    }

    /// The same path with the receiver's timestamps off by at most ± `stamp_noise` seconds.
    pub fn with_stamp_noise(self, stamp_noise: f64) -> Path {
        Path { stamp_noise, ..self }
    }

    fn offer(&mut self, t: f64, bits: f64) -> Option<f64> {
        while self.queue.front().is_some_and(|&d| d <= t) {
            self.queue.pop_front();
        }
        if self.queue.len() >= self.buffer {
            return None;
        }
        self.last_departure = self.last_departure.max(t) + bits / self.c;
        self.queue.push_back(self.last_departure);
        Some(self.last_departure)
    }

    /// A packet of `bits` reaches the bottleneck at `t`: its departure, or `None` if dropped.
    pub fn send(&mut self, t: f64, bits: f64) -> Option<f64> {
        let t = self.stalls.as_mut().map_or(t, |s| s.read_at(t));
        while self.next_cross <= t {
            let at = self.next_cross;
            self.offer(at, 8000.0);
            self.next_cross += self.rng.exponential(8000.0 / self.x);
        }
        let due = self.offer(t, bits)?;
        let Some(stalls) = self.stalls.as_mut().filter(|s| s.catch_up) else { return Some(due) };
        // Held by a stall, or behind packets the box is still sending back to back.
        let held = stalls.stalled_until(due);
        let behind = self.catching_up.map(|last| last + CATCH_UP_SEND_GAP).filter(|&next| next > due);
        let release = held.unwrap_or(due).max(behind.unwrap_or(due));
        self.catching_up = (release > due).then_some(release);
        Some(release)
    }

    pub fn noise(&mut self) -> f64 {
        self.rng.uniform_range(-self.stamp_noise, self.stamp_noise)
    }
}

/// How far apart the server sends a capacity burst's packets in the harness (s): one
/// `send_to` of a 1,500-byte datagram, mostly 4–6 µs apart on the testbed (issue 19, session
/// 20).
pub const BURST_SEND_GAP: f64 = 5e-6;

/// One train of `design` asked for at `start` (s, the client's clock = the path's): its verdict
/// and when the client had it.
pub fn run_train(path: &mut Path, design: &QuickDesign, start: f64, cut: bool, cfg: EstimatorConfig) -> TrainVerdict {
    run_train_with_burst(path, design, start, cut, cfg, 0)
}

/// [`run_train`] followed by a capacity burst of `burst` packets of the train's last size,
/// [`BURST_SEND_GAP`] apart ([`TrainJudge::with_burst`]).
pub fn run_train_with_burst(
    path: &mut Path,
    design: &QuickDesign,
    start: f64,
    cut: bool,
    cfg: EstimatorConfig,
    burst: u32,
) -> TrainVerdict {
    let mut schedule = design.schedule();
    let n = schedule.len();
    let len = design.train_length();
    let rtt = Dur::from_secs_f64(2.0 * path.delay);
    let policy = if cut {
        JudgePolicy {
            cut_after_sender: Some(Dur::from_millis(10)),
            ..JudgePolicy::socket_receiver(Some(rtt + len + Dur::from_millis(10)), len + Dur::from_secs(2))
        }
    } else {
        JudgePolicy::socket_receiver(None, len + Dur::from_secs(2))
    };
    let ns = |s: f64| Time((s * 1e9).round() as u64);
    let mut judge = TrainJudge::new(&schedule, ns(start), policy, cfg).with_burst(burst);
    let last = schedule[n - 1];
    schedule.extend(
        (1..=burst).map(|j| TrainPacket {
            offset: last.offset + Dur::from_secs_f64(j as f64 * BURST_SEND_GAP),
            size: last.size,
        }),
    );
    let first = start + path.delay;
    let mut arrivals: Vec<(f64, u32, f64)> = Vec::new();
    for (i, p) in schedule.iter().enumerate() {
        let at = first + p.offset.as_secs_f64();
        if let Some(dep) = path.send(at, p.size.0 as f64 * 8.0) {
            let noise = path.noise();
            arrivals.push((dep + path.delay, i as u32, dep + path.delay + noise));
        }
    }
    let end_sent = first + schedule[schedule.len() - 1].offset.as_secs_f64();
    let end = path.send(end_sent, 320.0).map(|d| d + path.delay);
    arrivals.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (now, i, stamp) in arrivals {
        while let Some(w) = judge.wake().filter(|w| *w <= ns(now) && judge.judgement().is_none()) {
            judge.poll(w);
        }
        judge.on_packet(ns(now), i, Some(Time(schedule[i as usize].offset.0)), ns(stamp));
    }
    if let Some(e) = end {
        while let Some(w) = judge.wake().filter(|w| *w <= ns(e) && judge.judgement().is_none()) {
            judge.poll(w);
        }
        judge.on_end(ns(e));
    }
    while judge.judgement().is_none() {
        judge.poll(judge.wake().expect("a deadline"));
    }
    judge.verdict().expect("judged")
}

/// The client's estimator (`EstimateOptions::for_method(PathQuick)`).
pub fn client_estimator() -> EstimatorConfig {
    EstimatorConfig {
        delay_floor: Dur::from_micros(20),
        decrease_factor: RAMP_DECREASE_FACTOR,
        growth_fit: true,
        detect_shaper: true,
        ..EstimatorConfig::default()
    }
}

/// The fixed-range train `headroom probe --bmax B` sends: the paper's shape (P_1 = 48 B, the
/// smallest IP packet; ΔP = 12 B; P_N = 1,500 B) topped at `b_max`.
pub fn fixed_train(b_max: crate::units::Rate) -> QuickDesign {
    super::pathquick::QuickSpec {
        b_max: Some(b_max),
        p_n: Some(Bytes(1500)),
        p_1: Some(Bytes(48)),
        delta_p: Some(Bytes(12)),
        max_size: Bytes(1500),
        min_size: Bytes(48),
        ..Default::default()
    }
    .solve()
    .expect("the paper's train")
}

/// One auto-ranged estimate from `t0`: the answer, the time (sum of START → verdict), the
/// trains sent, the answer train's length, and when the client was done.
pub struct LadderRun {
    pub outcome: Outcome,
    pub time: f64,
    pub trains: Vec<(QuickDesign, Outcome, u32)>,
    pub answer_length: f64,
    pub done_at: f64,
    /// The capacity the ladder found, and its refined answer.
    pub capacity: Option<crate::units::Rate>,
    /// When the next estimate may start: the answer's inputs were complete plus
    /// [`Ladder::backlog_drain`].
    pub recovered_at: f64,
    pub refined: Option<Outcome>,
}

pub fn run_ladder(path: &mut Path, mut ladder: Ladder, t0: f64) -> LadderRun {
    let cfg = client_estimator();
    let mut t = t0;
    let mut time = 0.0;
    let mut trains = Vec::new();
    let mut step = ladder.first().expect("first train");
    // When the last train's inputs were complete: a wait the ladder asks for counts from there
    // (the client's `TrainReport::judged_after_inputs`).
    let mut ready = t0;
    loop {
        match step {
            LadderStep::Train { design, whole, wait, burst } => {
                t = t.max(ready + wait.as_secs_f64());
                let v = run_train_with_burst(path, &design, t, !whole, cfg, burst);
                ladder.on_burst(&v.burst);
                let took = v.judgement.ready_at.0 as f64 / 1e9 - t;
                ready = v.judgement.ready_at.0 as f64 / 1e9;
                let decided = v.judgement.decided_at.0 as f64 / 1e9;
                time += took;
                t = decided;
                trains.push((design, v.estimate.outcome.clone(), v.estimate.lost));
                step = ladder.on_verdict(&design, &v.estimate, &v.records).expect("next train");
            }
            LadderStep::Answer(i) => {
                let (d, o, _) = trains[i].clone();
                let o =
                    if std::env::var("LADDER_NO_REFINE").is_ok() { o } else { ladder.refined().cloned().unwrap_or(o) };
                return LadderRun {
                    outcome: o,
                    time,
                    trains,
                    answer_length: d.train_length().as_secs_f64(),
                    done_at: t,
                    capacity: ladder.capacity(),
                    recovered_at: ready + ladder.backlog_drain().as_secs_f64(),
                    refined: ladder.refined().cloned(),
                };
            }
        }
    }
}

/// Median and 90th percentile.
fn med_p90(v: &[f64]) -> (f64, f64) {
    let sorted = Sorted::from(v);
    let q = |p: f64| sorted.quantile(p).expect("at least one estimate per row");
    (q(0.5), q(0.9))
}

/// The paths the goals name: capacity (bit/s), one-way delay (s), buffer (packets).
const GRID_PATHS: [(f64, f64, usize); 3] = [(10e6, 0.010, 100), (100e6, 0.005, 1000), (500e6, 0.005, 5000)];

/// A path off the goals' grid for `LADDER_C=mbps` (a user's path is rarely 10, 100 or
/// 500 Mbit/s): that capacity, 10 ms each way, and the buffer of the grid path whose capacity
/// is nearest in ratio (100 packets up to about 32 Mbit/s, 1,000 up to about 224, 5,000 above).
/// `None` for a grid capacity (it runs as itself) or a rate outside 0.5–500 Mbit/s (the top).
fn off_grid_path(mbps: f64) -> Option<(f64, f64, usize)> {
    let c = mbps * 1e6;
    if GRID_PATHS.iter().any(|p| p.0 == c) || !(0.5..=500.0).contains(&mbps) {
        return None;
    }
    let nearest = GRID_PATHS.iter().min_by(|a, b| (c / a.0).ln().abs().total_cmp(&(c / b.0).ln().abs()))?;
    Some((c, 0.010, nearest.2))
}

#[test]
fn an_off_grid_capacity_takes_the_buffer_of_the_nearest_grid_path() {
    assert_eq!(off_grid_path(1.0), Some((1e6, 0.010, 100)));
    assert_eq!(off_grid_path(30.0), Some((30e6, 0.010, 100)));
    assert_eq!(off_grid_path(40.0), Some((40e6, 0.010, 1000)));
    assert_eq!(off_grid_path(250.0), Some((250e6, 0.010, 5000)));
    assert_eq!(off_grid_path(100.0), None);
    assert_eq!(off_grid_path(0.1), None);
}

#[test]
#[ignore]
fn ladder_harness() {
    let runs = ladder_runs(30);
    let verbose = std::env::var("LADDER_VERBOSE").is_ok();
    println!("ladder harness: {runs} estimates per row, 300 ms between estimates, error in % of C");
    let coarse_sigma = match std::env::var("LADDER_COARSE_SIGMA").ok().and_then(|s| s.parse::<f64>().ok()) {
        Some(s) if s > 0.0 => Some(s),
        Some(_) => None,
        None => Some(super::autorange::COARSE_SIGMA),
    };
    // LADDER_C: one path only, by its capacity in Mbit/s (10, 100, or 500, which runs only then;
    // any other rate runs a path of that capacity, [`off_grid_path`]).
    let only: Option<f64> = std::env::var("LADDER_C").ok().and_then(|s| s.parse().ok());
    // LADDER_SIGMA: the fine train's target σ (`AutoRange::with_target_sigma`; default TARGET_SIGMA).
    let target_sigma: Option<f64> = std::env::var("LADDER_SIGMA").ok().and_then(|s| s.parse().ok());
    println!("target sigma {:?} (LADDER_SIGMA)", target_sigma.unwrap_or(super::autorange::TARGET_SIGMA));
    println!("coarse sigma {coarse_sigma:?} (LADDER_COARSE_SIGMA; 0 = the 31-packet coarse trains)");
    println!(
        "one-way delay {:?} ms (LADDER_DELAY_MS), buffer {:?} packets (LADDER_BUFFER); default per path",
        std::env::var("LADDER_DELAY_MS").ok(),
        std::env::var("LADDER_BUFFER").ok()
    );
    // LADDER_DELAY_MS: the one-way delay of both paths (default 10 ms at 10 Mbit/s, 5 ms at 100).
    let one_way: Option<f64> = std::env::var("LADDER_DELAY_MS").ok().and_then(|s| s.parse::<f64>().ok());
    // LADDER_BUFFER: the buffer of both paths in packets (default 100 at 10 Mbit/s, 1,000 at
    // 100; the PathQuick paper's Fig. 8 path is 100 at 100 Mbit/s, RTT 0.4 ms).
    let packets: Option<usize> = std::env::var("LADDER_BUFFER").ok().and_then(|s| s.parse().ok());
    // LADDER_SEED: added to every path's seed (default 0), for another draw of the cross traffic.
    let seed: u64 = std::env::var("LADDER_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    println!("seed offset {seed} (LADDER_SEED)");
    println!("timestamp noise ±{:.1} µs (LADDER_NOISE_US)", stamp_noise() * 1e6);
    // LADDER_STALLS=RATE,SHORTEST_US,LONGEST_US: the delay box's stalls ([`Stalls`]).
    let stalls: Option<(f64, f64, f64)> = std::env::var("LADDER_STALLS").ok().and_then(|s| {
        let v: Vec<f64> = s.split(',').filter_map(|x| x.trim().parse().ok()).collect();
        (v.len() == 3).then(|| (v[0], v[1] * 1e-6, v[2] * 1e-6))
    });
    println!("box stalls {stalls:?} (LADDER_STALLS: per second, shortest and longest µs)");
    // LADDER_STALL_CATCH_UP: the stalls hold the packets due for release too, then catch up
    // ([`Stalls::with_catch_up`]).
    let catch_up = std::env::var("LADDER_STALL_CATCH_UP").is_ok();
    println!("stalls catch up: {catch_up} (LADDER_STALL_CATCH_UP)");
    // The 500 Mbit/s path (the top rate, the testbed's 5,000-packet buffer) runs only
    // when asked for (`LADDER_C=500`).
    for (c, delay, buffer) in GRID_PATHS.into_iter().chain(only.and_then(off_grid_path)) {
        if only.map_or(c > 100e6, |o| o * 1e6 != c) {
            continue;
        }
        let delay = one_way.map_or(delay, |ms| ms / 1e3);
        let buffer = packets.unwrap_or(buffer);
        for load in [0.0, 0.3, 0.6, 0.9] {
            let a = c * (1.0 - load);
            let path_seed = 7 + seed + (load * 10.0) as u64;
            let mut path = Path::new(c, c * load, buffer, delay, path_seed)
                .with_stamp_noise(stamp_noise())
                .with_stalls(stalls.map(|(rate, lo, hi)| {
                    let stalls = Stalls::new(rate, lo, hi, path_seed);
                    if catch_up {
                        stalls.with_catch_up()
                    } else {
                        stalls
                    }
                }));
            let mut t = 2.0;
            let (mut errs, mut times, mut over, mut ntrains) = (Vec::new(), Vec::new(), 0, 0);
            let mut walls = Vec::new();
            for k in 0..runs {
                let mut plan = AutoRange::new(DEFAULT_TOP, Bytes(48), Bytes(1500)).with_coarse_sigma(coarse_sigma);
                if let Some(sigma) = target_sigma {
                    plan = plan.with_target_sigma(sigma);
                }
                let mut ladder = Ladder::from_plan(plan, client_estimator().max_loss_fraction);
                if std::env::var("LADDER_NO_RTT").is_err() {
                    ladder = ladder.with_round_trip(Dur::from_secs_f64(2.0 * delay));
                }
                let r = run_ladder(&mut path, ladder, t);
                walls.push((r.done_at - t) * 1e3);
                t = (r.done_at + 0.3).max(r.recovered_at);
                let e = r.outcome.value().map_or(100.0, |v| 100.0 * (v.bps() as f64 - a).abs() / c);
                errs.push(e);
                times.push(r.time * 1e3);
                ntrains += r.trains.len();
                // The bench's budget: the answer train + RTT + 20 ms, and when it ranged one
                // more train of the answer's length with its round trip (`probe-bench`'s
                // `time_budget_ms`).
                let extra = if r.trains.len() > 1 { r.answer_length + 2.0 * delay } else { 0.0 };
                let budget = r.answer_length + 2.0 * delay + 0.020 + extra;
                let late = r.time > budget;
                over += late as u32;
                if verbose {
                    let seq: Vec<String> = r
                        .trains
                        .iter()
                        .map(|(d, o, lost)| {
                            format!(
                                "[{:.1}-{:.1} {:.1}ms, {lost} lost: {}]",
                                d.b_min().as_mbps(),
                                d.b_max().as_mbps(),
                                d.train_length().as_secs_f64() * 1e3,
                                o
                            )
                        })
                        .collect();
                    let cap = r.capacity.map_or("-".to_string(), |c| format!("{:.2}", c.as_mbps()));
                    let refined = r.refined.as_ref().map_or("-".to_string(), |o| o.to_string());
                    println!(
                        "  {k:>2} e {e:>5.1} % {:>6.1} ms{} C {cap} refined {refined} {}",
                        r.time * 1e3,
                        if late { " OVER" } else { "" },
                        seq.join(" ")
                    );
                }
            }
            let (m, p) = med_p90(&errs);
            let (tm, tp) = med_p90(&times);
            let (wm, wp) = med_p90(&walls);
            println!(
                "C {:>3} Mbit/s load {:.1}: median |e| {m:>5.1} % p90 {p:>5.1} %  time med {tm:>6.1} ms p90 {tp:>6.1} ms  over budget {over}/{runs}  trains {:.1}  wall med {wm:>6.1} ms p90 {wp:>6.1} ms",
                c / 1e6,
                load,
                ntrains as f64 / runs as f64
            );
        }
    }
}

/// The receiver's timestamp error (s): `LADDER_NOISE_US` µs when set (the delay box polling its
/// input stamps within a few µs; docs/results.md, issue 19 session 17), else 10 µs.
fn stamp_noise() -> f64 {
    std::env::var("LADDER_NOISE_US")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .map_or(DEFAULT_STAMP_NOISE, |us| us * 1e-6)
}

/// Estimates per row: `LADDER_RUNS` when set to a number, else `default`.
fn ladder_runs(default: usize) -> usize {
    std::env::var("LADDER_RUNS").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// The fine train alone, designed from `A₀` = A × 1, 1.4 and 0.7 (issue 19, session 8):
/// `cargo test --release -p headroom-core abw::ladder_harness::fine_alone -- --ignored
/// --nocapture` (`LADDER_RUNS`). Signed errors (% of C) of the client's fit, of the fit refined
/// with the true capacity ([`super::dispersion::refine`]), and refined with the capacity of the
/// train's own dispersion ([`super::dispersion::capacity`]; the fit where it finds none).
/// `LADDER_C=500` runs the 500 Mbit/s path (5 ms each way, 5,000 packets) instead.
#[test]
#[ignore]
fn fine_alone() {
    use super::dispersion::{capacity, refine};
    use crate::units::Rate;
    let runs = ladder_runs(100);
    let cfg = client_estimator();
    // LADDER_C as in `ladder_harness`: one path only; 500 Mbit/s runs only when asked for.
    let only: Option<f64> = std::env::var("LADDER_C").ok().and_then(|s| s.parse().ok());
    for (c, delay, buffer) in GRID_PATHS {
        if only.map_or(c > 100e6, |o| o * 1e6 != c) {
            continue;
        }
        for load in [0.0, 0.3, 0.6, 0.9] {
            for factor in [1.0, 1.4, 0.7] {
                let a = c * (1.0 - load);
                let mut path =
                    Path::new(c, c * load, buffer, delay, 7 + (load * 10.0) as u64).with_stamp_noise(stamp_noise());
                // LADDER_KNOWN_C: the train designed with the true capacity known (`fine_window`).
                let known = std::env::var("LADDER_KNOWN_C").is_ok().then_some(Rate(c as u64));
                let plan = AutoRange::new(DEFAULT_TOP, Bytes(48), Bytes(1500)).with_capacity(known);
                let d = plan.fine(Rate((a * factor) as u64), Rate::ZERO).expect("a fine train");
                let mut t = 2.0;
                let mut errs: [Vec<f64>; 3] = Default::default();
                let (mut found, mut off) = (0, Vec::new());
                for _ in 0..runs {
                    let v = run_train(&mut path, &d, t, true, cfg);
                    t = v.judgement.decided_at.0 as f64 / 1e9 + 0.3;
                    let e = |o: &Outcome| o.value().map_or(f64::NAN, |r| 100.0 * (r.bps() as f64 - a) / c);
                    let (o, p) = (&v.estimate.outcome, v.estimate.probed);
                    errs[0].push(e(o));
                    errs[1].push(e(&refine(o, &v.records, Rate(c as u64), p)));
                    let own = capacity(&v.records, super::autorange::DISPERSION_NOISE);
                    if let Some(own) = own {
                        found += 1;
                        off.push(100.0 * (own.bps() as f64 / c - 1.0).abs());
                    }
                    errs[2].push(e(&own.map_or(o.clone(), |own| refine(o, &v.records, own, p))));
                }
                let show = signed_summary;
                let off = if off.is_empty() { f64::NAN } else { med_p90(&off).0 };
                println!(
                    "C {:>3} load {load:.1} A0 x{factor:.1} len {:>6.1} ms | fit {} | true C {} | own C {} (found {found}/{runs}, median |C err| {off:.1} %)",
                    c / 1e6,
                    d.train_length().as_secs_f64() * 1e3,
                    show(&errs[0]),
                    show(&errs[1]),
                    show(&errs[2]),
                );
            }
        }
    }
}

/// Signed errors (% of C; NaN: no estimate, counted as 100 % off): median / p90 of |error|,
/// the mean (bias) and standard deviation of the estimates.
fn signed_summary(v: &[f64]) -> String {
    let abs: Vec<f64> = v.iter().map(|e| if e.is_nan() { 100.0 } else { e.abs() }).collect();
    let (m, p) = med_p90(&abs);
    let ok: Vec<f64> = v.iter().cloned().filter(|e| !e.is_nan()).collect();
    let mean = ok.iter().sum::<f64>() / ok.len().max(1) as f64;
    let sd = (ok.iter().map(|e| (e - mean).powi(2)).sum::<f64>() / ok.len().max(1) as f64).sqrt();
    format!("{m:>4.1}/{p:>5.1} bias {mean:>+4.1} sd {sd:>4.1}")
}

/// The paper's fixed train (`headroom probe --bmax 12Mbps`: 0.48–12 Mbit/s, `P_1` 48 B, `ΔP`
/// 12 B, 122 packets) on a 12 Mbit/s path, 26 ms each way, 100-packet buffer (issue 19, session
/// 10): `cargo test --release -p headroom-core abw::ladder_harness::fixed_alone -- --ignored
/// --nocapture` (`LADDER_RUNS`, default 300). The client's fit, and the fit re-read with the
/// capacity of the train's own dispersion (what the socket client answers since session 10).
#[test]
#[ignore]
fn fixed_alone() {
    use super::dispersion::{capacity, refine};
    use crate::units::Rate;
    let runs = ladder_runs(300);
    let c = 12e6;
    let d = fixed_train(Rate(c as u64));
    for load in [0.0, 0.25, 0.5, 0.75] {
        let a = c * (1.0 - load);
        let mut path = Path::new(c, c * load, 100, 0.026, 7);
        let (mut fit, mut own, mut found) = (Vec::new(), Vec::new(), 0);
        let mut t = 1.0;
        for _ in 0..runs {
            let v = run_train(&mut path, &d, t, true, client_estimator());
            t = v.judgement.decided_at.0 as f64 / 1e9 + 0.3;
            let e = |o: &Outcome| o.value().map_or(f64::NAN, |r| 100.0 * (r.bps() as f64 - a) / c);
            let o = &v.estimate.outcome;
            fit.push(e(o));
            let cap = capacity(&v.records, super::autorange::DISPERSION_NOISE);
            found += cap.is_some() as u32;
            own.push(e(&cap.map_or(o.clone(), |cap| refine(o, &v.records, cap, v.estimate.probed))));
        }
        println!(
            "C 12 load {load:.2}: fit {} | own C {} (found {found}/{runs})",
            signed_summary(&fit),
            signed_summary(&own)
        );
    }
}

/// The ranging trains alone (issue 19, session 9): `cargo test --release -p headroom-core
/// abw::ladder_harness::ranging_alone -- --ignored --nocapture` (`LADDER_RUNS`, default 200).
/// For the first coarse train, the second rung and the coarse train topped at `2·C`, the signed
/// error (% of C) of the fit's verdict (below/above range printed as ∓999) and of the busy-gap
/// reading with the true capacity ([`super::dispersion::busy_reading`]; NaN: no reading), at
/// the 5th, 10th, 50th, 90th and 95th percentiles, and how often `A` lay within two spreads
/// ([`super::autorange::reading_spread`]) of the reading.
#[test]
#[ignore]
fn ranging_alone() {
    use super::autorange::reading_spread;
    use super::dispersion::busy_reading;
    use crate::units::Rate;
    let runs = ladder_runs(200);
    let cfg = client_estimator();
    for (c, delay, buffer) in [(10e6, 0.010, 100), (100e6, 0.005, 1000)] {
        for load in [0.0, 0.3, 0.6, 0.9] {
            let plan = AutoRange::new(DEFAULT_TOP, Bytes(48), Bytes(1500));
            let c1 = plan.coarse(DEFAULT_TOP).expect("coarse");
            let c2 = plan.coarse(c1.b_min()).expect("coarse");
            let c2c = plan.coarse(Rate((2.0 * c) as u64)).expect("coarse");
            for (name, d) in [("first", c1), ("rung 2", c2), ("2C", c2c)] {
                let mut path = Path::new(c, c * load, buffer, delay, 7 + (load * 10.0) as u64);
                let a = c * (1.0 - load);
                let (mut t, mut within) = (2.0, 0);
                let (mut fit, mut read) = (Vec::new(), Vec::new());
                for _ in 0..runs {
                    let v = run_train(&mut path, &d, t, false, cfg);
                    t = v.judgement.decided_at.0 as f64 / 1e9 + 0.3;
                    let e = |r: f64| 100.0 * (r - a) / c;
                    fit.push(match &v.estimate.outcome {
                        Outcome::Estimate(r) => e(r.bps() as f64),
                        Outcome::BelowRange { .. } => -999.0,
                        Outcome::AboveRange { .. } => 999.0,
                        _ => f64::NAN,
                    });
                    let cap = Rate(c as u64);
                    let r = busy_reading(&v.records, cap, d.b_min()).map(|(a0, busy)| (a0.min(cap), busy));
                    read.push(r.map_or(f64::NAN, |(a0, _)| e(a0.bps() as f64)));
                    within += r.is_some_and(|(a0, busy)| {
                        (a0.bps() as f64 - a).abs() <= 2.0 * reading_spread(a0, cap, busy).bps() as f64
                    }) as u32;
                }
                let q = |v: &mut Vec<f64>| {
                    v.sort_by(f64::total_cmp);
                    let n = v.len() - 1;
                    let at = |p: f64| v[(n as f64 * p).round() as usize];
                    format!("{:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>7.1}", at(0.05), at(0.1), at(0.5), at(0.9), at(0.95))
                };
                println!(
                    "C {:>3} load {load:.1} {name:>6} [{:.1}-{:.1} Mbit/s, {:.1} ms] fit {} | reading {} | A within 2 spreads {within}/{runs}",
                    c / 1e6,
                    d.b_min().as_mbps(),
                    d.b_max().as_mbps(),
                    d.train_length().as_secs_f64() * 1e3,
                    q(&mut fit),
                    q(&mut read)
                );
            }
        }
    }
}

/// The capacity vote on the first coarse train (23–500 Mbit/s, 1.6 ms) at 10, 100, 300 and
/// 500 Mbit/s, 30/60/90 % Poisson load (1,000-byte packets), with the receiver's stamps off by
/// ±1, ±2, ±5 and ±10 µs (issue 19, session 18): `cargo test --release -p headroom-core --lib
/// abw::ladder_harness::capacity_scan -- --ignored --nocapture` (`LADDER_RUNS`, default 40
/// trains per row). Per row: the trains whose capacity came out within 5 % of `C`, and more
/// than 5 % off, from [`super::dispersion::capacity`] and from the vote at 20 µs alone
/// ([`super::dispersion::capacity_at`]).
#[test]
#[ignore]
fn capacity_scan() {
    use super::dispersion::{capacity, capacity_at};
    use crate::units::Rate;
    let runs = ladder_runs(40);
    let first = AutoRange::new(DEFAULT_TOP, Bytes(48), Bytes(1500)).coarse(DEFAULT_TOP).expect("the first train");
    let noise = super::autorange::DISPERSION_NOISE;
    println!("C (Mbit/s) | load | stamps | capacity: within 5 % / off | 20 µs alone: within / off (of {runs})");
    for c in [10e6, 100e6, 300e6, 500e6] {
        for load in [0.3, 0.6, 0.9] {
            for stamp in [1e-6, 2e-6, 5e-6, 10e-6] {
                let mut path = Path::new(c, c * load, 5000, 0.005, 11).with_stamp_noise(stamp);
                let mut t = 1.0;
                let mut counts = [0usize; 4];
                for _ in 0..runs {
                    let v = run_train(&mut path, &first, t, false, client_estimator());
                    t = v.judgement.decided_at.0 as f64 / 1e9 + 0.05;
                    for (k, cap) in
                        [capacity(&v.records, noise), capacity_at(&v.records, noise)].into_iter().enumerate()
                    {
                        let near = cap.map(|r: Rate| (r.bps() as f64 / c - 1.0).abs() < 0.05);
                        counts[2 * k] += (near == Some(true)) as usize;
                        counts[2 * k + 1] += (near == Some(false)) as usize;
                    }
                }
                println!(
                    "{:>4} | {load:.1} | ±{:>2} µs | {:>2} / {:>2} | {:>2} / {:>2}",
                    c / 1e6,
                    stamp * 1e6,
                    counts[0],
                    counts[1],
                    counts[2],
                    counts[3]
                );
            }
        }
    }
}

#[test]
fn a_stall_holds_the_packets_that_reach_the_box_until_it_ends() {
    // One stall a second of exactly 1 ms: every packet that arrives within a stall is read at
    // its end, every other one when it arrives; the cross traffic is the same as without them.
    let mut stalls = Stalls::new(1.0, 1e-3, 1e-3, 3);
    let (mut held, mut passed) = (0, 0);
    for k in 0..200_000 {
        let t = k as f64 * 50e-6;
        let read = stalls.read_at(t);
        let (start, end) = stalls.started.back().copied().unwrap_or((0.0, 0.0));
        if t >= start && t < end {
            assert_eq!(read, end, "at {t}");
            held += 1;
        } else {
            assert_eq!(read, t);
            passed += 1;
        }
    }
    // 10 s with about ten stalls of 20 packets each.
    assert!((100..=400).contains(&held) && passed > 199_000, "{held} held, {passed} passed");
    // Through a path: a packet held by a stall is the packet that arrived at the stall's end,
    // with the same cross traffic ahead of it.
    let mut later = 0;
    for k in 0..50 {
        let mut plain = Path::new(500e6, 150e6, 5000, 0.005, k);
        let mut stalled = Path::new(500e6, 150e6, 5000, 0.005, k).with_stalls(Some(Stalls::new(2e3, 1e-4, 5e-4, k)));
        let t = 0.5 + k as f64 * 1e-4;
        let read = stalled.stalls.as_mut().map(|s| s.read_at(t)).unwrap();
        later += (read > t) as u32;
        assert_eq!(plain.send(read, 12_000.0), stalled.send(t, 12_000.0), "seed {k}");
        assert_eq!(plain.next_cross, stalled.next_cross, "seed {k}");
    }
    assert!(later >= 10, "{later} of 50 held");
}

#[test]
fn with_catch_up_a_stall_holds_the_packets_due_and_the_box_sends_them_back_to_back() {
    // An idle 500 Mbit/s link, 1,500-byte packets every 30 µs (24 µs of serialisation each),
    // one stall a second of exactly 1 ms. Without catch-up a packet leaves 24 µs after it is
    // read; with it, packets due during a stall leave at its end, 2 µs apart, and the box is on
    // its schedule again once a packet is due after the last one it sent.
    let mut plain = Path::new(500e6, 0.0, 5000, 0.0, 1).with_stalls(Some(Stalls::new(1.0, 1e-3, 1e-3, 3)));
    let mut caught =
        Path::new(500e6, 0.0, 5000, 0.0, 1).with_stalls(Some(Stalls::new(1.0, 1e-3, 1e-3, 3).with_catch_up()));
    let (mut fast, mut later) = (0, 0);
    let mut last: Option<f64> = None;
    for k in 0..100_000 {
        let t = k as f64 * 30e-6;
        let (a, b) = (plain.send(t, 12_000.0).unwrap(), caught.send(t, 12_000.0).unwrap());
        assert!(b >= a - 1e-12, "at {t}: {b} before {a}");
        later += (b > a + 1e-12) as u32;
        if let Some(l) = last {
            assert!(b - l >= CATCH_UP_SEND_GAP - 1e-12, "at {t}: {} after the last", b - l);
            fast += (b - l < 20e-6) as u32;
        }
        last = Some(b);
    }
    // 3 s with about three stalls: the packets due in them, and those behind them, went out
    // 2 µs apart (34 of them with these seeds).
    assert!(fast >= 3 && later >= fast, "{fast} sent back to back, {later} held");
}

#[test]
fn with_catch_up_the_packets_due_in_a_stall_leave_at_its_end_back_to_back() {
    // One stall, 10–11 ms; 20 packets of 1,500 B (24 µs at 500 Mbit/s) reach the idle link
    // 1 µs apart from 9.9 ms, so they are due every 24 µs from 9.924 ms. The first four are due
    // before the stall and leave then; the other 16 are due within it and leave at its end,
    // `CATCH_UP_SEND_GAP` apart. A packet due long after is on the schedule again.
    let stall = Stalls {
        rate: 1.0,
        shortest: 1e-3,
        longest: 1e-3,
        rng: Rng::new(1),
        started: VecDeque::from([(0.010, 0.011)]),
        next_start: f64::INFINITY,
        catch_up: true,
    };
    let mut path = Path::new(500e6, 0.0, 5000, 0.0, 1).with_stalls(Some(stall));
    for k in 0..20 {
        let release = path.send(0.0099 + k as f64 * 1e-6, 12_000.0).unwrap();
        let due = 0.0099 + (k + 1) as f64 * 24e-6;
        let expected = if k < 4 { due } else { 0.011 + (k - 4) as f64 * CATCH_UP_SEND_GAP };
        assert!((release - expected).abs() < 1e-12, "packet {k}: {release} for {expected}");
    }
    let later = path.send(0.020, 12_000.0).unwrap();
    assert!((later - 0.020024).abs() < 1e-12, "{later}");
}
