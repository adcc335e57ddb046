//! Echo mode (ImTCP §4.1.1): the measurement algorithm of [`super::algorithm`] alone, fed by
//! UDP probe packets that the receiver echoes back, without TCP in the way. The paper uses it to
//! show the algorithm's accuracy against N (Fig. 8).
//!
//! # Driver contract (sans-IO)
//!
//! ```text
//! loop {
//!     while let Some(p) = prober.poll_transmit(now) { send a UDP datagram of p.size bytes
//!                                                       carrying p.id; }
//!     sleep until prober.next_wakeup() or an echo arrives;
//!     on echo of id: prober.on_echo(now, id);
//!     while let Some(e) = prober.poll_estimate() { record e; }
//! }
//! ```
//!
//! `p.size` is the datagram's size on the wire (headers included); the receiver echoes the id
//! (the echo may be small). Probes are sent when `poll_transmit` returns them, one call per
//! probe: several probes due at the same instant (Cprobe's back-to-back train) are returned by
//! successive calls.
//!
//! # Choices
//!
//! - **Stream spacing.** The paper does not say how the streams of one measurement are spaced
//!   in echo mode. By default the next stream starts after an idle time equal to the previous
//!   stream's duration (the queue a stream built drains before the next one);
//!   [`StreamSpacing::AfterEchoes`] waits for all echoes of the previous stream instead, which
//!   lets the early stop of §3.2.3 act (one stream per RTT).
//! - **Lost probes.** An echo not back `echo_timeout` after its probe left is given up; the
//!   stream is evaluated with the echoes it has.
//! - **Pacing.** Each gap is counted from the actual send time of the previous probe, so a late
//!   wake-up shifts the rest of the stream instead of compressing it.
//! - A measurement ends when all its streams were sent and all their echoes are in (or given
//!   up), so it lasts at least one RTT (§3.3: at most one measurement per RTT); the next one
//!   starts `interval` later.

use std::collections::VecDeque;

use super::algorithm::{ConfigError, MeasurementConfig, Measurer, StreamKey, StreamPlan};
use super::Estimate;
use crate::units::{Bytes, Dur, Rate, Time};

/// How the streams of one measurement follow each other in echo mode.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StreamSpacing {
    /// Idle for this multiple of the previous stream's duration.
    Idle(f64),
    /// Wait until every echo of the previous stream is back (or given up).
    AfterEchoes,
}

/// Parameters of [`EchoProber`].
#[derive(Clone, Debug, PartialEq)]
pub struct EchoConfig {
    pub measurement: MeasurementConfig,
    /// Probe size `M` on the wire.
    pub probe_size: Bytes,
    pub spacing: StreamSpacing,
    /// Give up on an echo this long after its probe left.
    pub echo_timeout: Dur,
    /// Idle time between the end of a measurement and the start of the next.
    pub interval: Dur,
}

impl Default for EchoConfig {
    fn default() -> Self {
        EchoConfig {
            measurement: MeasurementConfig::default(),
            probe_size: Bytes(1500),
            spacing: StreamSpacing::Idle(1.0),
            echo_timeout: Dur::from_secs(1),
            interval: Dur::ZERO,
        }
    }
}

/// A probe packet to send now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    /// Identifier the receiver must echo back.
    pub id: u64,
    /// Size on the wire.
    pub size: Bytes,
    /// Stream and position (1-based) of this probe in the measurement.
    pub stream: StreamKey,
    pub index: usize,
}

#[derive(Clone, Debug)]
enum EchoState {
    /// Between streams: the next one may start at `not_before`, after `wait_stream`'s echoes.
    Between { not_before: Time, wait_stream: Option<StreamKey> },
    /// Sending `plan`; packet `next_j` is due at `due`.
    Sending { plan: StreamPlan, next_j: usize, due: Time, started: Time },
    /// All streams of the measurement sent: waiting for their echoes (or their timeouts).
    Draining,
}

#[derive(Clone, Copy, Debug)]
struct Outstanding {
    id: u64,
    key: StreamKey,
    j: usize,
    sent: Time,
}

/// The echo-mode measurement driver.
#[derive(Clone, Debug)]
pub struct EchoProber {
    cfg: EchoConfig,
    measurer: Measurer,
    state: EchoState,
    next_id: u64,
    outstanding: VecDeque<Outstanding>,
    /// Streams fully sent whose echoes are not all resolved.
    open_streams: Vec<StreamKey>,
    probes_sent: u64,
    echoes: u64,
}

impl EchoProber {
    pub fn new(cfg: EchoConfig) -> Result<EchoProber, ConfigError> {
        if cfg.probe_size.0 == 0 {
            return Err(ConfigError("probe size must be positive".into()));
        }
        if !matches!(cfg.spacing, StreamSpacing::AfterEchoes) {
            if let StreamSpacing::Idle(f) = cfg.spacing {
                if !(f.is_finite() && f >= 0.0) {
                    return Err(ConfigError("idle spacing factor must be a non-negative number".into()));
                }
            }
        }
        let measurer = Measurer::new(cfg.measurement.clone())?;
        Ok(EchoProber {
            cfg,
            measurer,
            state: EchoState::Between { not_before: Time::ZERO, wait_stream: None },
            next_id: 0,
            outstanding: VecDeque::new(),
            open_streams: Vec::new(),
            probes_sent: 0,
            echoes: 0,
        })
    }

    pub fn measurer(&self) -> &Measurer {
        &self.measurer
    }
    /// Next measurement result not yet drained.
    pub fn poll_estimate(&mut self) -> Option<Estimate> {
        self.measurer.poll_estimate()
    }
    /// Smoothed estimate.
    pub fn smoothed(&self) -> Option<Rate> {
        self.measurer.smoothed()
    }
    pub fn probes_sent(&self) -> u64 {
        self.probes_sent
    }
    pub fn echoes_received(&self) -> u64 {
        self.echoes
    }
    /// Probes sent whose echo is neither back nor given up.
    pub fn in_flight(&self) -> usize {
        self.outstanding.len()
    }

    /// The next probe to send at `now`, if one is due.
    pub fn poll_transmit(&mut self, now: Time) -> Option<Probe> {
        self.step(now);
        let EchoState::Sending { plan, next_j, due, started } = &mut self.state else {
            return None;
        };
        if now < *due {
            return None;
        }
        let j = *next_j;
        let key = plan.key;
        let size = self.cfg.probe_size;
        let id = self.next_id;
        self.next_id += 1;
        self.probes_sent += 1;
        self.measurer.on_probe_sent(key, j, now, size);
        self.outstanding.push_back(Outstanding { id, key, j, sent: now });
        if j >= plan.packets {
            let duration = now.saturating_since(*started);
            self.measurer.on_stream_sent(key);
            self.open_streams.push(key);
            let (not_before, wait_stream) = match self.cfg.spacing {
                StreamSpacing::Idle(f) => (now + duration.mul_f64(f), None),
                StreamSpacing::AfterEchoes => (now, Some(key)),
            };
            self.state = EchoState::Between { not_before, wait_stream };
            self.close_resolved_streams();
        } else {
            *due = now + plan.gap_before(j + 1, size);
            *next_j = j + 1;
        }
        Some(Probe { id, size, stream: key, index: j })
    }

    /// The echo of probe `id` arrived at `now`.
    pub fn on_echo(&mut self, now: Time, id: u64) {
        if let Some(pos) = self.outstanding.iter().position(|o| o.id == id) {
            let o = self.outstanding.remove(pos).expect("position is in range");
            self.echoes += 1;
            self.measurer.on_probe_arrival(o.key, o.j, now);
            self.close_resolved_streams();
        }
        self.step(now);
    }

    /// When the prober next needs [`Self::poll_transmit`] (None: only after an echo).
    pub fn next_wakeup(&self) -> Option<Time> {
        let timeout = self.outstanding.front().map(|o| o.sent + self.cfg.echo_timeout);
        let own = match &self.state {
            EchoState::Sending { due, .. } => Some(*due),
            EchoState::Between { not_before, wait_stream: None } => Some(*not_before),
            EchoState::Between { wait_stream: Some(_), .. } | EchoState::Draining => None,
        };
        match (own, timeout) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn close_resolved_streams(&mut self) {
        let outstanding = &self.outstanding;
        let measurer = &mut self.measurer;
        self.open_streams.retain(|k| {
            let pending = outstanding.iter().any(|o| o.key == *k);
            if !pending {
                measurer.close_stream(*k);
            }
            pending
        });
    }

    fn step(&mut self, now: Time) {
        // give up on old echoes
        let timeout = self.cfg.echo_timeout;
        let before = self.outstanding.len();
        self.outstanding.retain(|o| o.sent + timeout > now);
        if self.outstanding.len() != before {
            self.close_resolved_streams();
        }
        for _ in 0..4 {
            match self.state {
                EchoState::Sending { .. } => return,
                EchoState::Draining => {
                    let round = self.measurer.round_id();
                    if self.outstanding.iter().any(|o| Some(o.key.round) == round) {
                        return;
                    }
                    self.measurer.finish_round(now);
                    self.state = EchoState::Between { not_before: now + self.cfg.interval, wait_stream: None };
                }
                EchoState::Between { not_before, wait_stream } => {
                    if now < not_before {
                        return;
                    }
                    if wait_stream.is_some_and(|k| self.outstanding.iter().any(|o| o.key == k)) {
                        return;
                    }
                    if self.measurer.in_round() && !self.measurer.needs_stream() {
                        self.state = EchoState::Draining;
                        continue;
                    }
                    match self.measurer.next_stream() {
                        Some(plan) => self.state = EchoState::Sending { plan, next_j: 1, due: now, started: now },
                        None => return,
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::imtcp::algorithm::MeasurementConfig;
    use crate::imtcp::testpath::FluidPath;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// Runs an echo prober over a fluid path for `secs`, changing the available bandwidth at the
    /// given instants; returns the estimates.
    fn run(cfg: EchoConfig, steps: &[(f64, f64)], secs: f64) -> (Vec<Estimate>, EchoProber) {
        run_on(cfg, steps, secs, None)
    }

    fn run_on(
        cfg: EchoConfig,
        steps: &[(f64, f64)],
        secs: f64,
        packet_cross: Option<u64>,
    ) -> (Vec<Estimate>, EchoProber) {
        let mut prober = EchoProber::new(cfg).unwrap();
        let mut path = FluidPath::new(100.0, 100.0 - steps[0].1, Dur::from_millis(45), Dur::from_millis(45));
        if let Some(seed) = packet_cross {
            path = path.with_packet_cross(seed);
        }
        let mut echoes: BinaryHeap<Reverse<(Time, u64)>> = BinaryHeap::new();
        let mut now = Time::ZERO;
        let end = Time::from_secs_f64(secs);
        let mut next_step = 1;
        let mut out = Vec::new();
        while now < end {
            while next_step < steps.len() && Time::from_secs_f64(steps[next_step].0) <= now {
                path.set_cross(now, 100.0 - steps[next_step].1);
                next_step += 1;
            }
            while let Some(p) = prober.poll_transmit(now) {
                let arrive = path.send(now, p.size) + path.ret_delay;
                echoes.push(Reverse((arrive, p.id)));
            }
            while let Some(e) = prober.poll_estimate() {
                out.push(e);
            }
            let wake = prober.next_wakeup().unwrap_or(Time::MAX);
            let echo_at = echoes.peek().map_or(Time::MAX, |Reverse((t, _))| *t);
            let step_at = steps.get(next_step).map_or(Time::MAX, |s| Time::from_secs_f64(s.0));
            let t = wake.min(echo_at).min(step_at).min(end);
            assert!(t >= now, "time went backwards");
            now = t;
            while let Some(Reverse((t, id))) = echoes.peek().copied() {
                if t > now {
                    break;
                }
                echoes.pop();
                prober.on_echo(now, id);
            }
        }
        (out, prober)
    }

    #[test]
    fn settles_within_ten_percent_and_follows_a_step() {
        let cfg = EchoConfig::default();
        let (est, prober) = run(cfg, &[(0.0, 60.0), (10.0, 40.0)], 20.0);
        assert!(est.len() > 20, "only {} estimates", est.len());
        // within the first few measurements the estimate is within 10 % of 60
        let first_good = est.iter().position(|e| e.time.as_secs_f64() < 10.0 && (e.value.as_mbps() - 60.0).abs() < 6.0);
        assert!(first_good.is_some_and(|i| i <= 5), "{:?}", &est[..est.len().min(8)]);
        // and stays there until the step
        let late: Vec<&Estimate> = est.iter().filter(|e| (5.0..10.0).contains(&e.time.as_secs_f64())).collect();
        assert!(!late.is_empty());
        for e in &late {
            assert!((e.value.as_mbps() - 60.0).abs() < 6.0, "{e:?}");
        }
        // after the step to 40, it follows within a few measurements
        let after: Vec<&Estimate> = est.iter().filter(|e| e.time.as_secs_f64() > 10.0).collect();
        let idx = after.iter().position(|e| (e.value.as_mbps() - 40.0).abs() < 4.0);
        assert!(idx.is_some_and(|i| i <= 6), "{:?}", &after[..after.len().min(10)]);
        for e in after.iter().filter(|e| e.time.as_secs_f64() > 15.0) {
            assert!((e.value.as_mbps() - 40.0).abs() < 4.0, "{e:?}");
        }
        assert!(prober.smoothed().is_some());
        // no echo was given up on a loss-free path
        assert_eq!(prober.probes_sent(), prober.echoes_received() + prober.in_flight() as u64);
        if std::env::var_os("IMTCP_DUMP").is_some() {
            for e in &est {
                eprintln!(
                    "{:.3} {:.2} ({:.2}, {:.2}) {}",
                    e.time.as_secs_f64(),
                    e.value.as_mbps(),
                    e.search_range.0.as_mbps(),
                    e.search_range.1.as_mbps(),
                    e.in_range
                );
            }
        }
    }

    #[test]
    fn after_echoes_spacing_uses_early_stop() {
        let cfg = EchoConfig { spacing: StreamSpacing::AfterEchoes, ..Default::default() };
        let (est, prober) = run(cfg, &[(0.0, 60.0), (5.0, 90.0)], 12.0);
        assert!(!est.is_empty());
        // jump to 90 above the narrow range: streams 1 and 2 flat -> early stop
        assert!(prober.measurer().stats().early_stops >= 1, "{:?}", prober.measurer().stats());
        let last = est.last().unwrap();
        assert!((last.value.as_mbps() - 90.0).abs() < 9.0, "{last:?}");
    }

    /// Fig. 8's shape on a path with packet cross traffic (Poisson, Internet size mix): the
    /// mean relative error of the estimates falls with N; N = 3 is far off.
    #[test]
    fn accuracy_grows_with_stream_length_under_packet_cross_traffic() {
        let mut errors = Vec::new();
        for n in [3usize, 5, 10, 35] {
            let mut sum = 0.0;
            for seed in [42u64, 7, 1234] {
                let cfg = EchoConfig {
                    measurement: MeasurementConfig { stream_len: n, ..Default::default() },
                    ..Default::default()
                };
                let (est, _) = run_on(cfg, &[(0.0, 60.0), (5.0, 40.0)], 10.0, Some(seed));
                let err = |lo: f64, hi: f64, truth: f64| {
                    let v: Vec<f64> = est
                        .iter()
                        .filter(|e| (lo..hi).contains(&e.time.as_secs_f64()))
                        .map(|e| (e.value.as_mbps() - truth).abs() / truth)
                        .collect();
                    v.iter().sum::<f64>() / v.len().max(1) as f64
                };
                sum += (err(2.0, 5.0, 60.0) + err(7.0, 10.0, 40.0)) / 2.0;
            }
            errors.push(sum / 3.0);
        }
        if std::env::var_os("IMTCP_DUMP").is_some() {
            eprintln!("mean relative error for N = 3, 5, 10, 35: {errors:?}");
        }
        assert!(errors[0] > 0.25, "{errors:?}");
        assert!(errors[0] > errors[1] && errors[1] > errors[3], "{errors:?}");
        assert!(errors[0] > 2.0 * errors[3], "{errors:?}");
        assert!(errors[3] < 0.15, "{errors:?}");
    }

    #[test]
    fn lost_echoes_do_not_block() {
        let mut prober = EchoProber::new(EchoConfig::default()).unwrap();
        let mut now = Time::ZERO;
        let mut sent = 0;
        // nothing ever echoes: the prober keeps cycling Cprobe rounds on timeouts
        for _ in 0..2000 {
            while prober.poll_transmit(now).is_some() {
                sent += 1;
            }
            match prober.next_wakeup() {
                Some(t) => now = t.max(now),
                None => panic!("prober stalled"),
            }
        }
        assert!(sent > 35, "{sent}");
        assert!(prober.poll_estimate().is_none());
    }
}
