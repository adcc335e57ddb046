//! ImTCP's control unit (Man, Hasegawa & Murata 2005, §3.3–3.5): the "ImTCP buffer" below the
//! TCP sender, a FIFO that holds TCP's data segments just long enough to release them as the
//! probe streams of [`super::algorithm`], and reads the ACK arrival times back. It implements
//! [`SendBuffer`]; the measurement unit inside is a [`Measurer`].
//!
//! # State machine (the paper's Fig. 5)
//!
//! ```text
//!                 ┌──────── storing timer expired ─────────┐
//!                 │         or window < N                  v
//!   ┌──────────────────┐  buffer = m   ┌─────────────┐  ┌──────────────┐
//!   │  STORE PACKET    │──────────────>│ SEND STREAM │─>│ EMPTY BUFFER │──> STORE PACKET
//!   └──────────────────┘               └─────────────┘  └──────────────┘   (next stream)
//!           ^                 last stream of the  │   not the last stream,
//!           │                 measurement sent    v   or the stream failed
//!           │                           ┌─────────────┐
//!           └── all ACKs of the streams │ PASS PACKET │
//!               arrived (+ pause)       └─────────────┘
//! ```
//!
//! - **STORE PACKET** — every released segment is held. The storing timer `T` starts with the
//!   first held segment. When `m` segments are held, go to SEND STREAM; when `T` expires or the
//!   window drops below N segments, go to EMPTY BUFFER.
//! - **SEND STREAM** — the held segments leave at the gaps of the current [`StreamPlan`]
//!   (segments released meanwhile are held too). If the next segment is not in the buffer in
//!   time the stream *fails* (`m` grows, the same stream is retried) and the buffer is emptied.
//!   After N segments: the last stream of the measurement → PASS PACKET, else EMPTY BUFFER.
//! - **EMPTY BUFFER** — everything held leaves at once; then STORE PACKET.
//! - **PASS PACKET** — every segment leaves at once. The paper's PASS PACKET waits for the ACKs
//!   of the measurement's streams ([`PassReason::AwaitingAcks`]); headroom also passes during the
//!   configured pause between measurements ([`PassReason::Interval`]), after a retransmission
//!   until the loss is repaired ([`PassReason::AfterRetransmission`], §3.5.3) and while the
//!   window is too small to measure ([`PassReason::SmallWindow`]).
//!
//! # Parameters (§3.4)
//!
//! - **m**: starts at N, within \[2, N\]; after F = 2 successive successful measurements it
//!   decreases by one; when a stream cannot be formed it *increases* by one and the stream is
//!   tried again. (The OCR'd text says "decrement" for the failure case too, but also "if m is
//!   less than its maximum of N", a guard that only makes sense for an increment, and a smaller
//!   m can only make failures more likely.)
//! - **T** = `M/A·(N-1) + 4·D_RTT`: `M/A·(N-1)` is meant as the time TCP takes to hand over N
//!   segments, which the paper equates with the available bandwidth `A` "obtained from the
//!   measurement results": headroom uses the smoothed result Ā ([`StoringRate::Estimate`];
//!   before the first result TCP's own rate, window / SRTT). `D_RTT` is the RTT mean deviation
//!   (RFC 6298's RTTVAR, computed from the ACKs' RTT samples), `M` the segment's wire size.
//!   Choice: T is capped at `max_storing_rtts` SRTTs (default 1). The timer runs from the
//!   release of the first held segment, so no segment waits longer than T for its stream.
//!   [`StoringTimer::Fixed`] gives Table 2's fixed timers. Opt-in
//!   [`StoringRate::SlowerOfEstimateAndTcp`] (headroom's earlier default, beyond the paper)
//!   uses min(Ā, window/SRTT): it lets a window-limited sender fill streams, but on a Reno
//!   flow whose window is near N it holds almost the whole window for up to one SRTT on every
//!   storing attempt. Measured in the simulator (Fig. 13 network, 10 ImTCP + 10 Reno flows,
//!   20-RTT interval, seeds 1-4, with the window coupling): ImTCP/Reno 0.755 with it, 0.926
//!   with the paper's Ā (docs/imtcp.md, "Where ImTCP loses throughput").
//! - **At most one measurement per RTT**: a measurement starts at least one SRTT after the
//!   previous one started, and `interval_rtts` SRTTs after the previous one ended (Fig. 13).
//! - **Delayed ACK** (§3.5.1): only ACKs whose cumulative number equals the end of a stream
//!   segment give that segment an arrival time; with `delayed_ack` the measurement uses every
//!   other segment (see [`super::algorithm`]).
//! - **Retransmission** (§3.5.3): [`SendBuffer::on_retransmit`], or the release of a segment
//!   marked as a retransmission, flushes the buffer, drops the measurement under way, and
//!   passes every segment until a new ACK acknowledges every segment released before the
//!   retransmission (the recovery point, NewReno's `recover`). The paper waits for "a new ACK
//!   instead of dupACKs" so that "the network has recovered from the congestion"; with
//!   several losses in one window the first new ACK is partial and the congestion is not over.
//!   Measured in the simulator (Reno, 100 Mbit/s with 40 Mbit/s of cross traffic, 24 ms RTT,
//!   0.1 % random loss, 20 s; test `retransmissions_flush_the_buffer_and_measurement_resumes`
//!   in `headroom-sim`): resuming at the first new ACK gave 15.5 Mbit/s against Reno's 20.1,
//!   waiting for the recovery point 19.8.
//!
//! # Invariants
//!
//! - Segments leave in exactly the order they were released (one FIFO; the retransmitted
//!   segment, which TCP may put on the wire directly, is never reordered with held data by this
//!   buffer), and every released segment leaves: nothing is ever dropped.
//! - A held segment always has a deadline: `next_wakeup` returns the storing timer, the next
//!   stream gap or the failure deadline, so a driver that honours it never leaves a segment in
//!   the buffer beyond `T` plus one stream's duration.
//! - Without an RTT sample, or with a window below N segments, nothing is held.
//!
//! # Choices
//!
//! - The window is taken from [`SendBuffer::on_window`] when the driver calls it, else inferred
//!   from ACKs as `in_flight + newly_acked` (what was outstanding, held segments included).
//!   Drivers should call it: after a timeout the first ACK is often cumulative over the whole
//!   pre-timeout flight, and the inference then reports that flight while cwnd is 1-2
//!   segments (the simulator calls it before every release).
//! - A stream packet is late when it is not in the buffer at its due time; the stream fails if
//!   it is still missing `late_tolerance` × the planned gap later (default 0.5; the paper has
//!   no tolerance, a discrete-event driver may release and poll in either order at one instant).
//! - A measurement whose ACKs do not all come back within `ack_wait_rtts` SRTTs after its last
//!   stream (default 2) is evaluated with the ACKs it has.
//! - The Cprobe stream of the first measurement is N segments sent back to back, so it starts
//!   only when all N are held, whatever `m` is (a back-to-back stream cannot wait for TCP).

use std::collections::VecDeque;

use super::algorithm::{ConfigError, MeasurementConfig, Measurer, StreamKey, StreamPlan};
use super::Estimate;
use crate::cc::{AckEvent, Segment, SendBuffer};
use crate::rtt::RttEstimator;
use crate::units::{Bytes, Dur, Rate, Time};

/// How `m` (segments held before a stream starts) is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MPolicy {
    /// §3.4.1: start at N, minimum 2; decrease after `successes` (F) successful measurements,
    /// increase on a failed stream.
    Adaptive { successes: u32 },
    /// A fixed m (Table 1's columns), clamped to \[2, N\].
    Fixed(usize),
}

/// How the storing timer `T` is set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StoringTimer {
    /// §3.4.2: `T = M/A·(N-1) + 4·D_RTT`, capped at `max_storing_rtts` SRTTs (None: no cap).
    Adaptive { max_storing_rtts: Option<f64> },
    /// A fixed T (Table 2's columns).
    Fixed(Dur),
}

/// Which rate `A` the adaptive storing timer's `K = M/A·(N-1)` uses (§3.4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StoringRate {
    /// The paper's: the smoothed measurement result `Ā` (before the first result, TCP's own
    /// rate, window / SRTT).
    #[default]
    Estimate,
    /// Opt-in, beyond the paper: the lower of `Ā` and TCP's own rate (window / SRTT), for a
    /// sender slower than the available bandwidth (window- or application-limited), which then
    /// gets time to fill a stream. On a Reno flow whose window is near N it lets the unit
    /// hold almost the whole window for up to the cap (one SRTT) on every storing attempt.
    SlowerOfEstimateAndTcp,
}

/// Parameters of [`ImtcpBuffer`].
#[derive(Clone, Debug, PartialEq)]
pub struct ControlConfig {
    pub measurement: MeasurementConfig,
    pub m_policy: MPolicy,
    pub storing_timer: StoringTimer,
    /// `A` of the adaptive storing timer.
    pub storing_rate: StoringRate,
    /// Pause between the end of a measurement and the start of the next, in SRTTs (Fig. 13).
    pub interval_rtts: f64,
    /// Bytes added to each segment's payload to get its size on the wire (IPv4 + TCP: 40).
    pub header_bytes: Bytes,
    /// A stream fails when its next segment is this fraction of the planned gap late.
    pub late_tolerance: f64,
    /// Give up waiting for a measurement's ACKs after this many SRTTs past its last stream.
    pub ack_wait_rtts: f64,
}

impl Default for ControlConfig {
    fn default() -> Self {
        ControlConfig {
            measurement: MeasurementConfig::default(),
            m_policy: MPolicy::Adaptive { successes: 2 },
            storing_timer: StoringTimer::Adaptive { max_storing_rtts: Some(1.0) },
            storing_rate: StoringRate::Estimate,
            interval_rtts: 0.0,
            header_bytes: Bytes(40),
            late_tolerance: 0.5,
            ack_wait_rtts: 2.0,
        }
    }
}

/// Why the control unit passes segments straight through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PassReason {
    /// The last stream of the measurement left; waiting for its ACKs until `deadline`.
    AwaitingAcks { deadline: Time },
    /// Pause between measurements (and at most one measurement per RTT) until `until`.
    Interval { until: Time },
    /// After a retransmission, until an ACK covers every segment released before it.
    AfterRetransmission,
    /// No RTT sample yet or window below N segments: cannot measure.
    SmallWindow,
}

/// The control unit's state (Fig. 5).
#[derive(Clone, Debug, PartialEq)]
pub enum ControlState {
    /// Holding segments; `timer` is the storing deadline, armed by the first held segment.
    StorePacket { timer: Option<Time> },
    /// Sending `plan`: segment `next_j` (1-based) is due at `due`; the stream fails at `fail_at`.
    SendStream { plan: StreamPlan, next_j: usize, due: Time, fail_at: Time },
    /// Releasing everything held.
    EmptyBuffer,
    /// Passing every segment through.
    PassPacket(PassReason),
}

/// Counters of the control unit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ControlStats {
    pub segments_released: u64,
    pub segments_sent: u64,
    pub streams_sent: u64,
    pub stream_failures: u64,
    pub storing_timeouts: u64,
    pub measurements: u64,
    pub aborted_measurements: u64,
    pub retransmission_flushes: u64,
    /// Longest time a segment stayed in the buffer.
    pub max_hold: Dur,
    /// Sum of the hold times of all segments (mean = total / segments_sent).
    pub total_hold: Dur,
    /// Search streams whose packets left off their schedule (the measurer's `off_schedule`).
    pub off_schedule_streams: u64,
}

/// Bound on undrained first-packet waiting times.
const MAX_WAIT_SAMPLES: usize = 1 << 16;

/// One sample of Fig. 9: how long the first segment of a measurement stream waited in the
/// buffer (from its release by TCP until it left as the stream's first packet), with the
/// storing timer `T` that was armed for it. The stream starts when `m` segments are held, at
/// the latest when `T` expires, so `wait <= storing_timer` always holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FirstPacketWait {
    pub wait: Dur,
    pub storing_timer: Dur,
}

#[derive(Clone, Copy, Debug)]
struct ProbeRef {
    key: StreamKey,
    j: usize,
    end_seq: u64,
}

/// ImTCP's buffer and control unit below a TCP sender.
#[derive(Clone, Debug)]
pub struct ImtcpBuffer {
    cfg: ControlConfig,
    measurer: Measurer,
    queue: VecDeque<(Segment, Time)>,
    state: ControlState,
    m: usize,
    successes: u32,
    round_failed: bool,
    round_start: Option<Time>,
    next_round_at: Time,
    probes: VecDeque<ProbeRef>,
    rtt: RttEstimator,
    mss: Bytes,
    window_hint: Option<Bytes>,
    window_seen: Option<Bytes>,
    first_waits: Vec<FirstPacketWait>,
    /// `T` of the storing timer armed last (for [`FirstPacketWait`]).
    armed_storing_time: Dur,
    /// End of the highest segment released so far.
    highest_released: u64,
    /// After a retransmission, measuring resumes once an ACK reaches this (§3.5.3).
    recover: u64,
    stats: ControlStats,
}

impl ImtcpBuffer {
    pub fn new(cfg: ControlConfig) -> Result<ImtcpBuffer, ConfigError> {
        if !(cfg.interval_rtts.is_finite() && cfg.interval_rtts >= 0.0) {
            return Err(ConfigError("interval_rtts must be a non-negative number".into()));
        }
        if !(cfg.late_tolerance.is_finite() && cfg.late_tolerance >= 0.0) {
            return Err(ConfigError("late_tolerance must be a non-negative number".into()));
        }
        if !(cfg.ack_wait_rtts.is_finite() && cfg.ack_wait_rtts > 0.0) {
            return Err(ConfigError("ack_wait_rtts must be positive".into()));
        }
        if let StoringTimer::Adaptive { max_storing_rtts: Some(x) } = cfg.storing_timer {
            if !(x.is_finite() && x > 0.0) {
                return Err(ConfigError("max_storing_rtts must be positive".into()));
            }
        }
        if let MPolicy::Adaptive { successes: 0 } = cfg.m_policy {
            return Err(ConfigError("F (successes) must be at least 1".into()));
        }
        let measurer = Measurer::new(cfg.measurement.clone())?;
        let n = cfg.measurement.stream_len;
        let m = match cfg.m_policy {
            MPolicy::Adaptive { .. } => n,
            MPolicy::Fixed(m) => m.clamp(2.min(n), n),
        };
        Ok(ImtcpBuffer {
            cfg,
            measurer,
            queue: VecDeque::new(),
            state: ControlState::StorePacket { timer: None },
            m,
            successes: 0,
            round_failed: false,
            round_start: None,
            next_round_at: Time::ZERO,
            probes: VecDeque::new(),
            rtt: RttEstimator::new(),
            mss: Bytes(1460),
            window_hint: None,
            window_seen: None,
            first_waits: Vec::new(),
            armed_storing_time: Dur::ZERO,
            highest_released: 0,
            recover: 0,
            stats: ControlStats::default(),
        })
    }

    pub fn state(&self) -> &ControlState {
        &self.state
    }
    /// Current `m`.
    pub fn m(&self) -> usize {
        self.m
    }
    pub fn stats(&self) -> ControlStats {
        ControlStats { off_schedule_streams: self.measurer.stats().off_schedule, ..self.stats }
    }
    pub fn measurer(&self) -> &Measurer {
        &self.measurer
    }
    /// Next measurement result not yet drained.
    pub fn poll_estimate(&mut self) -> Option<Estimate> {
        self.measurer.poll_estimate()
    }
    /// Smoothed estimate `Ā`.
    pub fn smoothed(&self) -> Option<Rate> {
        self.measurer.smoothed()
    }
    /// Drains the waiting times of the first segment of each stream sent (Fig. 9's CDF), with
    /// the storing timer armed for each; at most 65,536 undrained samples are kept.
    pub fn take_first_packet_waits(&mut self) -> Vec<FirstPacketWait> {
        std::mem::take(&mut self.first_waits)
    }

    /// The segment ending at `end_seq` really left at `at` (a driver over a kernel TCP learns
    /// the wire time from a transmit timestamp, after `poll_transmit` handed the segment
    /// over): when it is a probe still awaited, the measurement uses `at` as its send time.
    pub fn on_segment_left(&mut self, end_seq: u64, at: Time) {
        if let Some(p) = self.probes.iter().find(|p| p.end_seq == end_seq) {
            self.measurer.correct_probe_sent(p.key, p.j, at);
        }
    }

    fn n(&self) -> usize {
        self.cfg.measurement.stream_len
    }

    fn window(&self) -> Option<Bytes> {
        self.window_hint.or(self.window_seen)
    }

    fn can_measure(&self) -> bool {
        self.rtt.srtt().is_some() && self.window().is_some_and(|w| w.0 >= self.n() as u64 * self.mss.0)
    }

    fn wire(&self, seg: &Segment) -> Bytes {
        seg.len + self.cfg.header_bytes
    }

    /// The storing timer `T` (§3.4.2).
    fn storing_time(&self) -> Dur {
        let srtt = self.rtt.srtt().unwrap_or(Dur::from_millis(100));
        match self.cfg.storing_timer {
            StoringTimer::Fixed(t) => t,
            StoringTimer::Adaptive { max_storing_rtts } => {
                let m_bytes = self.mss + self.cfg.header_bytes;
                // K = M/A·(N-1) is the time TCP takes to hand over N segments; the paper takes
                // TCP's rate ≈ A, the measured available bandwidth.
                let tcp_rate = self.window().map(|w| w.per(srtt)).filter(|r| r.0 > 0);
                let est = self.measurer.smoothed().filter(|r| r.0 > 0);
                let a = match (self.cfg.storing_rate, est, tcp_rate) {
                    (StoringRate::SlowerOfEstimateAndTcp, Some(e), Some(t)) => Some(e.min(t)),
                    (_, e, t) => e.or(t),
                };
                let send = match a {
                    Some(a) => Dur(m_bytes.time_at(a).0.saturating_mul(self.n() as u64 - 1)),
                    None => srtt,
                };
                let t = send + Dur(self.rtt.rttvar().0.saturating_mul(4));
                match max_storing_rtts {
                    Some(x) => t.min(srtt.mul_f64(x)),
                    None => t,
                }
            }
        }
    }

    /// Segments to hold before the next stream starts: `m`, except for Cprobe's stream, which
    /// leaves back to back and so needs all N segments in the buffer (with a fixed m < N it
    /// could otherwise never form, and no search range would ever exist).
    fn stream_threshold(&self) -> usize {
        if self.measurer.search_range().is_none() {
            self.n()
        } else {
            self.m
        }
    }

    /// Where to go when a measurement may start (after EMPTY BUFFER, a pause, ...).
    fn resume_state(&self, now: Time) -> ControlState {
        if !self.can_measure() {
            return ControlState::PassPacket(PassReason::SmallWindow);
        }
        if !self.measurer.in_round() && now < self.next_round_at {
            return ControlState::PassPacket(PassReason::Interval { until: self.next_round_at });
        }
        ControlState::StorePacket { timer: None }
    }

    fn enter_store(&mut self, _now: Time) {
        let timer = self.arm_storing_timer();
        self.state = ControlState::StorePacket { timer };
    }

    /// Arms the storing timer from the release of the first held segment (None: nothing held).
    /// A storing episode can carry held segments over from an instant transition (a
    /// measurement that ends early on an ACK while the next stream is being stored goes
    /// through PASS PACKET and back to STORE PACKET at once); counting from their release
    /// keeps every hold within `T`.
    fn arm_storing_timer(&mut self) -> Option<Time> {
        let first = self.queue.front()?.1;
        self.armed_storing_time = self.storing_time();
        Some(first + self.armed_storing_time)
    }

    fn set_state(&mut self, now: Time, s: ControlState) {
        if let ControlState::StorePacket { .. } = s {
            self.enter_store(now);
        } else {
            self.state = s;
        }
    }

    /// The measurement's streams have all left and every ACK is in (or given up).
    fn round_acks_done(&self) -> bool {
        let round = self.measurer.round_id();
        !self.probes.iter().any(|p| Some(p.key.round) == round)
    }

    fn finish_round(&mut self, now: Time) {
        self.measurer.finish_round(now);
        self.stats.measurements += 1;
        if let MPolicy::Adaptive { successes } = self.cfg.m_policy {
            if self.round_failed {
                self.successes = 0;
            } else {
                self.successes += 1;
                if self.successes >= successes && self.m > 2 {
                    self.m -= 1;
                    self.successes = 0;
                }
            }
        }
        self.round_failed = false;
        let srtt = self.rtt.srtt().unwrap_or(Dur::ZERO);
        let after_end = now + srtt.mul_f64(self.cfg.interval_rtts);
        let one_per_rtt = self.round_start.map_or(now, |s| s + srtt);
        self.next_round_at = after_end.max(one_per_rtt);
        self.round_start = None;
    }

    /// Instantaneous transitions at `now`.
    fn advance(&mut self, now: Time) {
        for _ in 0..16 {
            // Sending a stream has no instantaneous transition; the other states are small to
            // copy (the stream's plan is not).
            let state = match &self.state {
                ControlState::SendStream { .. } => return,
                s => s.clone(),
            };
            match state {
                ControlState::StorePacket { timer } => {
                    if !self.can_measure() {
                        self.state = ControlState::EmptyBuffer;
                        continue;
                    }
                    if self.measurer.in_round() && !self.measurer.needs_stream() {
                        let deadline = now + self.ack_wait();
                        self.state = ControlState::PassPacket(PassReason::AwaitingAcks { deadline });
                        continue;
                    }
                    if timer.is_some_and(|t| now >= t) {
                        self.stats.storing_timeouts += 1;
                        self.state = ControlState::EmptyBuffer;
                        continue;
                    }
                    if self.queue.len() >= self.stream_threshold() {
                        let starting = !self.measurer.in_round();
                        let Some(plan) = self.measurer.next_stream() else {
                            self.state = ControlState::EmptyBuffer;
                            continue;
                        };
                        if starting {
                            self.round_start = Some(now);
                        }
                        self.state = ControlState::SendStream { plan, next_j: 1, due: now, fail_at: now };
                    } else if timer.is_none() && !self.queue.is_empty() {
                        self.state = ControlState::StorePacket { timer: self.arm_storing_timer() };
                        continue;
                    }
                    return;
                }
                ControlState::SendStream { .. } => return,
                ControlState::EmptyBuffer => {
                    if !self.queue.is_empty() {
                        return;
                    }
                    let s = self.resume_state(now);
                    self.set_state(now, s);
                    if matches!(self.state, ControlState::StorePacket { .. }) {
                        return;
                    }
                }
                ControlState::PassPacket(reason) => match reason {
                    PassReason::AwaitingAcks { deadline } => {
                        if self.round_acks_done() || now >= deadline {
                            self.probes.clear();
                            self.finish_round(now);
                            let s = self.resume_state(now);
                            self.set_state(now, s);
                        } else {
                            return;
                        }
                    }
                    PassReason::Interval { until } => {
                        if now < until {
                            return;
                        }
                        let s = self.resume_state(now);
                        if s == self.state {
                            return;
                        }
                        self.set_state(now, s);
                    }
                    PassReason::AfterRetransmission => return,
                    PassReason::SmallWindow => {
                        if !self.can_measure() {
                            return;
                        }
                        let s = self.resume_state(now);
                        if s == self.state {
                            return;
                        }
                        self.set_state(now, s);
                    }
                },
            }
        }
    }

    fn ack_wait(&self) -> Dur {
        let srtt = self.rtt.srtt().unwrap_or(Dur::from_secs(1));
        srtt.mul_f64(self.cfg.ack_wait_rtts) + Dur(self.rtt.rttvar().0.saturating_mul(4))
    }

    fn pop(&mut self, now: Time) -> Option<Segment> {
        let (seg, at) = self.queue.pop_front()?;
        let hold = now.saturating_since(at);
        self.stats.max_hold = self.stats.max_hold.max(hold);
        self.stats.total_hold += hold;
        self.stats.segments_sent += 1;
        Some(seg)
    }

    fn fail_stream(&mut self, now: Time, key: StreamKey) {
        self.stats.stream_failures += 1;
        self.measurer.on_stream_failed(key);
        self.probes.retain(|p| p.key != key);
        self.round_failed = true;
        if matches!(self.cfg.m_policy, MPolicy::Adaptive { .. }) && self.m < self.n() {
            self.m += 1;
        }
        self.state = ControlState::EmptyBuffer;
        self.advance(now);
    }

    /// Closes `key` once it is fully sent and none of its probes await an ACK.
    fn close_if_complete(&mut self, key: StreamKey) {
        let sending = matches!(&self.state, ControlState::SendStream { plan, .. } if plan.key == key);
        if !sending && !self.probes.iter().any(|p| p.key == key) {
            self.measurer.close_stream(key);
        }
    }

    fn flush_for_retransmission(&mut self) {
        self.stats.retransmission_flushes += 1;
        self.recover = self.highest_released;
        if self.measurer.in_round() {
            self.measurer.abort_round();
            self.stats.aborted_measurements += 1;
        }
        self.probes.clear();
        self.round_start = None;
        self.round_failed = false;
        self.state = ControlState::PassPacket(PassReason::AfterRetransmission);
    }

    fn update_rtt(&mut self, ev: &AckEvent) {
        if let Some(r) = ev.rtt {
            self.rtt.on_sample(r);
        } else if let Some(s) = ev.srtt {
            self.rtt.adopt_srtt(s);
        }
        if ev.mss.0 > 0 {
            self.mss = ev.mss;
        }
        self.window_seen = Some(ev.in_flight + ev.newly_acked);
    }
}

impl SendBuffer for ImtcpBuffer {
    /// TCP's send window (cwnd, or min(cwnd, rwnd, ceiling)); optional — without it the window
    /// is inferred from the ACKs.
    fn on_window(&mut self, _now: Time, send_window: Bytes) {
        self.window_hint = Some(send_window);
    }
    fn release(&mut self, now: Time, seg: Segment) {
        self.stats.segments_released += 1;
        if !seg.retransmission {
            self.highest_released = self.highest_released.max(seg.seq + seg.len.0);
        }
        if seg.retransmission && self.state != ControlState::PassPacket(PassReason::AfterRetransmission) {
            self.flush_for_retransmission();
        }
        self.queue.push_back((seg, now));
        self.advance(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Segment> {
        for _ in 0..4 {
            self.advance(now);
            match self.state.clone() {
                ControlState::StorePacket { .. } => return None,
                ControlState::EmptyBuffer | ControlState::PassPacket(_) => return self.pop(now),
                ControlState::SendStream { plan, next_j, due, fail_at } => {
                    if now < due {
                        return None;
                    }
                    let Some((seg, released)) = self.queue.front().copied() else {
                        if now >= fail_at {
                            self.fail_stream(now, plan.key);
                            continue;
                        }
                        return None;
                    };
                    let wire = self.wire(&seg);
                    if next_j == 1 && self.first_waits.len() < MAX_WAIT_SAMPLES {
                        self.first_waits.push(FirstPacketWait {
                            wait: now.saturating_since(released),
                            storing_timer: self.armed_storing_time,
                        });
                    }
                    self.pop(now);
                    self.measurer.on_probe_sent(plan.key, next_j, now, wire);
                    self.probes.push_back(ProbeRef { key: plan.key, j: next_j, end_seq: seg.seq + seg.len.0 });
                    if next_j >= plan.packets {
                        self.stats.streams_sent += 1;
                        self.measurer.on_stream_sent(plan.key);
                        if !self.probes.iter().any(|p| p.key == plan.key) {
                            self.measurer.close_stream(plan.key);
                        }
                        if self.measurer.needs_stream() {
                            self.state = ControlState::EmptyBuffer;
                        } else {
                            let deadline = now + self.ack_wait();
                            self.state = ControlState::PassPacket(PassReason::AwaitingAcks { deadline });
                        }
                    } else {
                        let gap = plan.gap_before(next_j + 1, wire);
                        let due = now + gap;
                        let fail_at = due + gap.mul_f64(self.cfg.late_tolerance);
                        self.state = ControlState::SendStream { plan, next_j: next_j + 1, due, fail_at };
                    }
                    return Some(seg);
                }
            }
        }
        None
    }

    fn next_wakeup(&self) -> Option<Time> {
        match &self.state {
            ControlState::StorePacket { timer } => timer.filter(|_| !self.queue.is_empty()),
            ControlState::SendStream { due, fail_at, .. } => Some(if self.queue.is_empty() { *fail_at } else { *due }),
            ControlState::EmptyBuffer => (!self.queue.is_empty()).then_some(Time::ZERO),
            ControlState::PassPacket(reason) => {
                if !self.queue.is_empty() {
                    return Some(Time::ZERO);
                }
                match reason {
                    PassReason::AwaitingAcks { deadline } => Some(*deadline),
                    PassReason::Interval { until } => Some(*until),
                    PassReason::AfterRetransmission | PassReason::SmallWindow => None,
                }
            }
        }
    }

    fn on_ack(&mut self, ev: &AckEvent) {
        self.update_rtt(ev);
        if ev.newly_acked.0 > 0 {
            // Probes are queued in send order and a stream's probes are contiguous, so the
            // streams this ACK touches come as runs: check each run's stream once it ends (no
            // allocation per ACK).
            let mut run: Option<StreamKey> = None;
            while let Some(p) = self.probes.front().copied() {
                if p.end_seq > ev.ack {
                    break;
                }
                self.probes.pop_front();
                if p.end_seq == ev.ack {
                    self.measurer.on_probe_arrival(p.key, p.j, ev.now);
                }
                if run != Some(p.key) {
                    if let Some(key) = run {
                        self.close_if_complete(key);
                    }
                    run = Some(p.key);
                }
            }
            if let Some(key) = run {
                self.close_if_complete(key);
            }
            if self.state == ControlState::PassPacket(PassReason::AfterRetransmission)
                && ev.dup_acks == 0
                && ev.ack >= self.recover
            {
                let s = self.resume_state(ev.now);
                self.set_state(ev.now, s);
            }
        }
        self.advance(ev.now);
    }

    fn on_retransmit(&mut self, now: Time) {
        self.flush_for_retransmission();
        self.advance(now);
    }

    fn held(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::PassThrough;
    use crate::imtcp::testpath::FluidPath;
    use std::cmp::Reverse;
    use std::collections::{BinaryHeap, HashMap};

    const MSS: u64 = 1460;

    #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
    enum Ev {
        /// An ACK reaches the sender.
        Ack { ack: u64 },
        /// The receiver's delayed-ACK timer for the segment ending at `end`.
        DelAck { end: u64 },
    }

    /// A window-limited TCP-like sender (fixed window of `window` segments, no congestion
    /// control) over a [`FluidPath`], with a cumulative-ACK receiver (optionally delayed ACKs,
    /// 40 ms timer). Drives a [`SendBuffer`] exactly as the simulator does.
    struct Harness<B: SendBuffer> {
        buf: B,
        path: FluidPath,
        events: BinaryHeap<Reverse<(Time, Ev)>>,
        now: Time,
        window: u64,
        snd_una: u64,
        snd_nxt: u64,
        /// Bytes the application still has to send (None: unlimited).
        app_left: Option<u64>,
        released_at: HashMap<u64, Time>,
        released: Vec<u64>,
        sent: Vec<u64>,
        delayed_ack: bool,
        /// Receiver: end of an in-order segment not yet acknowledged (delayed ACK).
        unacked_end: Option<u64>,
        last_recv: Time,
        dup_acks: u32,
        estimates: Vec<Estimate>,
    }

    impl<B: SendBuffer> Harness<B> {
        fn new(buf: B, path: FluidPath, window: u64) -> Self {
            Harness {
                buf,
                path,
                events: BinaryHeap::new(),
                now: Time::ZERO,
                window,
                snd_una: 0,
                snd_nxt: 0,
                app_left: None,
                released_at: HashMap::new(),
                released: Vec::new(),
                sent: Vec::new(),
                delayed_ack: false,
                unacked_end: None,
                last_recv: Time::ZERO,
                dup_acks: 0,
                estimates: Vec::new(),
            }
        }

        fn try_send(&mut self) {
            while self.snd_nxt - self.snd_una < self.window * MSS {
                if let Some(left) = self.app_left.as_mut() {
                    if *left == 0 {
                        break;
                    }
                    *left = left.saturating_sub(MSS);
                }
                let seg = Segment { seq: self.snd_nxt, len: Bytes(MSS), retransmission: false };
                self.snd_nxt += MSS;
                self.released_at.insert(seg.seq + MSS, self.now);
                self.released.push(seg.seq);
                self.buf.release(self.now, seg);
            }
            self.drain();
        }

        fn drain(&mut self) {
            let mut guard = 0;
            while let Some(seg) = self.buf.poll_transmit(self.now) {
                guard += 1;
                assert!(guard < 100_000, "poll_transmit never returns None");
                self.sent.push(seg.seq);
                self.receive(seg);
            }
        }

        /// The segment crosses the path; the receiver acknowledges it.
        fn receive(&mut self, seg: Segment) {
            let arrive = self.path.send(self.now, seg.len + Bytes(40));
            assert!(arrive >= self.last_recv, "FIFO path reordered");
            self.last_recv = arrive;
            let end = seg.seq + seg.len.0;
            let back = arrive + self.path.ret_delay;
            // per-packet ACKs, or the second segment of a delayed-ACK pair: ACK now
            if !self.delayed_ack || self.unacked_end.take().is_some() {
                self.events.push(Reverse((back, Ev::Ack { ack: end })));
            } else {
                self.unacked_end = Some(end);
                self.events.push(Reverse((arrive + Dur::from_millis(40), Ev::DelAck { end })));
            }
        }

        fn on_ack(&mut self, ack: u64) {
            let newly = ack.saturating_sub(self.snd_una);
            if newly == 0 {
                self.dup_acks += 1;
            } else {
                self.dup_acks = 0;
            }
            self.snd_una = self.snd_una.max(ack);
            let rtt = self.released_at.remove(&ack).map(|t| self.now.saturating_since(t));
            let ev = AckEvent {
                now: self.now,
                ack,
                newly_acked: Bytes(newly),
                dup_acks: self.dup_acks,
                rtt,
                srtt: None,
                min_rtt: None,
                delivery_rate: None,
                in_flight: Bytes(self.snd_nxt - self.snd_una),
                snd_max: self.snd_nxt,
                mss: Bytes(MSS),
                timestamps: None,
            };
            self.buf.on_ack(&ev);
            self.try_send();
        }

        /// Runs until `until`; `changes` are (time, cross traffic Mbit/s).
        fn run(&mut self, until: Time, changes: &[(f64, f64)], mut on_wake: impl FnMut(&mut Self)) {
            if self.snd_nxt == 0 {
                self.try_send();
            }
            let mut changes: Vec<(Time, f64)> = changes.iter().map(|&(t, c)| (Time::from_secs_f64(t), c)).collect();
            changes.retain(|c| c.0 >= self.now);
            let mut same_instant = 0;
            loop {
                let t_ev = self.events.peek().map_or(Time::MAX, |Reverse((t, _))| *t);
                let t_wake = self.buf.next_wakeup().map_or(Time::MAX, |t| t.max(self.now));
                let t_change = changes.first().map_or(Time::MAX, |c| c.0);
                let t = t_ev.min(t_wake).min(t_change);
                if t > until {
                    self.now = until;
                    break;
                }
                same_instant = if t == self.now { same_instant + 1 } else { 0 };
                assert!(same_instant < 10_000, "driver spins at {t}: state {}", self.describe());
                self.now = t;
                if t == t_change {
                    let (_, c) = changes.remove(0);
                    self.path.set_cross(t, c);
                } else if t == t_ev {
                    let Some(Reverse((_, ev))) = self.events.pop() else {
                        break;
                    };
                    match ev {
                        Ev::Ack { ack } => self.on_ack(ack),
                        Ev::DelAck { end } => {
                            if self.unacked_end == Some(end) {
                                self.unacked_end = None;
                                let at = self.now + self.path.ret_delay;
                                self.events.push(Reverse((at, Ev::Ack { ack: end })));
                            }
                        }
                    }
                } else {
                    self.drain();
                }
                on_wake(self);
            }
        }

        fn describe(&self) -> String {
            format!("held {} released {} sent {}", self.buf.held(), self.released.len(), self.sent.len())
        }
    }

    impl Harness<ImtcpBuffer> {
        fn collect(&mut self) {
            while let Some(e) = self.buf.poll_estimate() {
                self.estimates.push(e);
            }
        }
    }

    fn imtcp(cfg: ControlConfig) -> ImtcpBuffer {
        ImtcpBuffer::new(cfg).expect("valid config")
    }

    /// The harness's sender is window-limited (60 segments over ~20 ms: 36 of 60 Mbit/s
    /// available), the case of the opt-in storing rate: with the paper's A = Ā the storing
    /// timer (M/Ā·(N-1) ≈ 7 ms, RTTVAR ≈ 0 on the fluid path) is shorter than the ~12 ms TCP
    /// needs for 35 segments (test `paper_storing_rate_starves_a_window_limited_sender`).
    fn window_limited() -> ControlConfig {
        ControlConfig { storing_rate: StoringRate::SlowerOfEstimateAndTcp, ..Default::default() }
    }

    fn path_60_of_100() -> FluidPath {
        FluidPath::new(100.0, 40.0, Dur::from_millis(10), Dur::from_millis(10))
    }

    /// Everything sent was released, in release order, and everything released is either sent
    /// or still held.
    fn assert_in_order_and_complete<B: SendBuffer>(h: &Harness<B>) {
        assert_eq!(h.released.len(), h.sent.len() + h.buf.held(), "segments lost or duplicated");
        assert_eq!(h.released[..h.sent.len()], h.sent[..], "segments reordered");
    }

    #[test]
    fn tracks_60_of_100_and_a_step_to_40() {
        let mut h = Harness::new(imtcp(window_limited()), path_60_of_100(), 60);
        h.run(Time::from_secs_f64(10.0), &[(5.0, 60.0)], |h| h.collect());
        h.collect();
        let est = &h.estimates;
        if std::env::var_os("IMTCP_DUMP").is_some() {
            for e in est {
                eprintln!(
                    "{:.3} {:.2} ({:.2},{:.2}) {}",
                    e.time.as_secs_f64(),
                    e.value.as_mbps(),
                    e.search_range.0.as_mbps(),
                    e.search_range.1.as_mbps(),
                    e.in_range
                );
            }
            eprintln!("{:?} m={}", h.buf.stats(), h.buf.m());
        }
        assert!(est.len() >= 20, "only {} estimates: {:?}", est.len(), h.buf.stats());
        // settles within 10 % in a few measurements
        let first = est.iter().position(|e| (e.value.as_mbps() - 60.0).abs() < 6.0);
        assert!(first.is_some_and(|i| i <= 4), "{:?}", &est[..est.len().min(8)]);
        let before: Vec<&Estimate> = est.iter().filter(|e| (2.0..5.0).contains(&e.time.as_secs_f64())).collect();
        assert!(!before.is_empty());
        let ok = before.iter().filter(|e| (e.value.as_mbps() - 60.0).abs() < 6.0).count();
        assert!(ok * 10 >= before.len() * 9, "{ok}/{} within 10 %", before.len());
        // follows the step to 40
        let after: Vec<&Estimate> = est.iter().filter(|e| e.time.as_secs_f64() > 5.0).collect();
        let idx = after.iter().position(|e| (e.value.as_mbps() - 40.0).abs() < 4.0);
        assert!(idx.is_some_and(|i| i <= 6), "{:?}", &after[..after.len().min(10)]);
        let late: Vec<&&Estimate> = after.iter().filter(|e| e.time.as_secs_f64() > 7.0).collect();
        let ok = late.iter().filter(|e| (e.value.as_mbps() - 40.0).abs() < 4.0).count();
        assert!(ok * 10 >= late.len() * 9, "{ok}/{} within 10 %", late.len());
        // m adapted down from N
        assert!(h.buf.m() < 35);
        // at most one measurement per RTT (the path's RTT is at least 20 ms)
        for w in est.windows(2) {
            assert!(w[1].time.saturating_since(w[0].time) >= Dur::from_millis(20), "{w:?}");
        }
        assert_in_order_and_complete(&h);
    }

    #[test]
    fn segments_out_equal_segments_in_and_in_order() {
        let mut h = Harness::new(imtcp(window_limited()), path_60_of_100(), 60);
        h.app_left = Some(MSS * 20_000);
        h.run(Time::from_secs_f64(10.0), &[], |_| {});
        assert!(h.buf.stats().streams_sent > 10, "{:?}", h.buf.stats());
        assert_eq!(h.released.len(), 20_000);
        assert_in_order_and_complete(&h);
        assert_eq!(h.buf.held(), 0);
        assert_eq!(h.snd_una, 20_000 * MSS, "not everything was acknowledged");
    }

    #[test]
    fn passes_through_when_the_window_is_below_n() {
        let mut h = Harness::new(imtcp(ControlConfig::default()), path_60_of_100(), 20);
        h.run(Time::from_secs_f64(2.0), &[], |_| {});
        let s = h.buf.stats();
        assert_eq!(s.max_hold, Dur::ZERO, "{s:?}");
        assert_eq!(s.streams_sent, 0);
        assert_eq!(h.buf.state(), &ControlState::PassPacket(PassReason::SmallWindow));
        assert!(h.sent.len() > 1000);
        // set_window overrides the inference
        h.buf.on_window(h.now, Bytes(100 * MSS));
        h.window = 100;
        h.run(Time::from_secs_f64(3.0), &[], |_| {});
        assert!(h.buf.stats().streams_sent > 0);
    }

    #[test]
    fn application_pause_never_strands_segments() {
        // the application writes 50 segments then stops: held segments must leave by the
        // storing timer, not wait for data that never comes
        let mut h = Harness::new(imtcp(window_limited()), path_60_of_100(), 60);
        h.app_left = Some(MSS * 3_000);
        h.run(Time::from_secs_f64(1.0), &[], |_| {});
        h.app_left = Some(MSS * 20);
        h.run(Time::from_secs_f64(3.0), &[], |_| {});
        assert_in_order_and_complete(&h);
        assert_eq!(h.buf.held(), 0, "segments stranded in the buffer");
        assert_eq!(h.snd_una, h.snd_nxt, "TCP stalled with data outstanding");
        let srtt = h.buf.rtt.srtt().unwrap();
        // holding is bounded by T (at most one SRTT) plus a stream's duration
        assert!(h.buf.stats().max_hold < srtt + srtt + Dur::from_millis(20), "{:?} srtt {srtt}", h.buf.stats());
    }

    fn delivered_ratio(interval_rtts: f64, window: u64) -> (f64, ControlStats) {
        let secs = 10.0;
        let mut plain = Harness::new(PassThrough::default(), path_60_of_100(), window);
        plain.run(Time::from_secs_f64(secs), &[], |_| {});
        let mut im = Harness::new(imtcp(ControlConfig { interval_rtts, ..window_limited() }), path_60_of_100(), window);
        im.run(Time::from_secs_f64(secs), &[], |_| {});
        (im.snd_una as f64 / plain.snd_una as f64, im.buf.stats())
    }

    #[test]
    fn throughput_cost_of_measuring_on_a_window_limited_sender() {
        // A window-limited sender (36 Mbit/s of 60 available) pays for every held millisecond;
        // measuring every RTT costs a visible share, a 20-RTT pause between measurements
        // (Fig. 13's TCP-compatible setting) almost nothing.
        let (every_rtt, s0) = delivered_ratio(0.0, 60);
        let (paused, s20) = delivered_ratio(20.0, 60);
        if std::env::var_os("IMTCP_DUMP").is_some() {
            eprintln!("delivered ratio: interval 0: {every_rtt:.4} ({s0:?}); interval 20: {paused:.4} ({s20:?})");
        }
        assert!(s0.measurements > 50 && s20.measurements > 5, "{s0:?} {s20:?}");
        assert!(every_rtt > 0.6, "interval 0: {every_rtt:.3}");
        assert!(paused > 0.95, "interval 20: {paused:.3}");
        assert!(paused > every_rtt);
    }

    #[test]
    fn paper_storing_rate_starves_a_window_limited_sender() {
        // §3.4.2 takes TCP's rate ≈ A. A sender held to 36 of 60 Mbit/s by its window needs
        // longer than M/Ā·(N-1) to hand over N segments: with the paper's A = Ā storing times
        // out almost every time; the opt-in min(Ā, window/SRTT) forms streams.
        let run = |storing_rate: StoringRate| {
            let mut h = Harness::new(imtcp(ControlConfig { storing_rate, ..Default::default() }), path_60_of_100(), 60);
            h.run(Time::from_secs_f64(5.0), &[], |_| {});
            assert_in_order_and_complete(&h);
            let waits = h.buf.take_first_packet_waits();
            assert!(waits.iter().all(|w| w.wait <= w.storing_timer), "{waits:?}");
            h.buf.stats()
        };
        let paper = run(StoringRate::Estimate);
        let slower = run(StoringRate::SlowerOfEstimateAndTcp);
        if std::env::var_os("IMTCP_DUMP").is_some() {
            eprintln!("A = Ā: {paper:?}\nA = min(Ā, W/SRTT): {slower:?}");
        }
        assert!(paper.storing_timeouts > 10 * paper.measurements.max(1), "{paper:?}");
        assert!(slower.measurements > 5 * paper.measurements.max(1), "{slower:?} vs {paper:?}");
    }

    #[test]
    fn short_fixed_storing_timer_measures_less_often() {
        // Table 2's effect: a storing timer far below the time TCP needs to hand over N
        // segments makes stream creation fail; the adaptive T does not.
        let count = |timer: StoringTimer| {
            let mut h =
                Harness::new(imtcp(ControlConfig { storing_timer: timer, ..window_limited() }), path_60_of_100(), 60);
            h.run(Time::from_secs_f64(5.0), &[], |_| {});
            assert_in_order_and_complete(&h);
            (h.buf.measurer().stats().estimates, h.buf.stats().storing_timeouts)
        };
        let (adaptive, _) = count(StoringTimer::Adaptive { max_storing_rtts: Some(1.0) });
        let (short, short_timeouts) = count(StoringTimer::Fixed(Dur::from_millis(4)));
        if std::env::var_os("IMTCP_DUMP").is_some() {
            eprintln!("estimates in 5 s: adaptive T {adaptive}, T = 4 ms {short} ({short_timeouts} storing timeouts)");
        }
        assert!(adaptive > 20);
        assert!(short * 2 < adaptive, "adaptive {adaptive}, 4 ms {short}");
        assert!(short_timeouts > 50);
    }

    #[test]
    fn delayed_ack_path_measures_with_every_other_packet() {
        let cfg = ControlConfig {
            measurement: MeasurementConfig { delayed_ack: true, ..Default::default() },
            ..Default::default()
        };
        let mut h = Harness::new(imtcp(cfg), path_60_of_100(), 80);
        h.delayed_ack = true;
        h.run(Time::from_secs_f64(6.0), &[], |h| h.collect());
        h.collect();
        let late: Vec<&Estimate> = h.estimates.iter().filter(|e| e.time.as_secs_f64() > 2.0).collect();
        assert!(late.len() >= 5, "{} estimates, {:?}", h.estimates.len(), h.buf.stats());
        let ok = late.iter().filter(|e| (e.value.as_mbps() - 60.0).abs() < 6.0).count();
        assert!(ok * 10 >= late.len() * 8, "{ok}/{}: {:?}", late.len(), &late[..late.len().min(8)]);
        assert_in_order_and_complete(&h);
    }

    #[test]
    fn retransmission_flushes_and_pauses_until_a_new_ack() {
        let mut h = Harness::new(imtcp(window_limited()), path_60_of_100(), 60);
        // run until the buffer is in the middle of a stream with segments held
        let mut hit = false;
        let mut t = 0.3;
        while t < 3.0 {
            h.run(Time::from_secs_f64(t), &[], |_| {});
            if matches!(h.buf.state(), ControlState::SendStream { .. } | ControlState::StorePacket { .. })
                && h.buf.held() > 0
            {
                hit = true;
                break;
            }
            t += 0.0007;
        }
        assert!(hit, "never caught the buffer holding segments");
        let held = h.buf.held();
        let flushes = h.buf.stats().retransmission_flushes;
        let round = h.buf.measurer().round_id();
        h.buf.on_retransmit(h.now);
        // everything held leaves at once, in order
        let mut out = 0;
        while let Some(seg) = h.buf.poll_transmit(h.now) {
            h.sent.push(seg.seq);
            h.receive(seg);
            out += 1;
        }
        assert_eq!(out, held);
        assert_eq!(h.buf.held(), 0);
        assert_eq!(h.buf.stats().retransmission_flushes, flushes + 1);
        assert_eq!(h.buf.state(), &ControlState::PassPacket(PassReason::AfterRetransmission));
        if round.is_some() {
            assert!(h.buf.measurer().round_id().is_none(), "measurement not dropped");
        }
        // segments released now pass straight through
        h.buf.release(h.now, Segment { seq: h.snd_nxt, len: Bytes(MSS), retransmission: false });
        h.released.push(h.snd_nxt);
        h.released_at.insert(h.snd_nxt + MSS, h.now);
        h.snd_nxt += MSS;
        assert!(h.buf.poll_transmit(h.now).is_some_and(|s| {
            h.sent.push(s.seq);
            h.receive(s);
            true
        }));
        // a duplicate ACK keeps the pause
        let dup = AckEvent {
            now: h.now,
            ack: h.snd_una,
            dup_acks: 1,
            mss: Bytes(MSS),
            in_flight: Bytes(h.snd_nxt - h.snd_una),
            ..Default::default()
        };
        h.buf.on_ack(&dup);
        assert_eq!(h.buf.state(), &ControlState::PassPacket(PassReason::AfterRetransmission));
        // the next new ACK resumes measuring
        h.run(h.now + Dur::from_millis(50), &[], |_| {});
        assert_ne!(h.buf.state(), &ControlState::PassPacket(PassReason::AfterRetransmission));
        h.run(h.now + Dur::from_secs(2), &[], |_| {});
        assert!(h.buf.stats().measurements > 2);
        assert_in_order_and_complete(&h);
    }

    #[test]
    fn a_partial_ack_after_a_retransmission_keeps_the_pause() {
        // §3.5.3 with two losses in a window: the first new ACK after the retransmission is
        // partial (it stops at the second hole); measuring resumes only when an ACK covers
        // everything released before the retransmission.
        let mut b = imtcp(ControlConfig::default());
        b.rtt.adopt_srtt(Dur::from_millis(20));
        b.on_window(Time::ZERO, Bytes(100 * MSS));
        b.advance(Time::ZERO);
        for k in 0..4 {
            b.release(Time::ZERO, Segment { seq: k * MSS, len: Bytes(MSS), retransmission: false });
        }
        b.on_retransmit(Time::ZERO);
        while b.poll_transmit(Time::ZERO).is_some() {}
        let pause = ControlState::PassPacket(PassReason::AfterRetransmission);
        assert_eq!(b.state(), &pause);
        let ack = |ack: u64, newly: u64| AckEvent {
            now: Time::from_secs_f64(0.02),
            ack,
            newly_acked: Bytes(newly),
            mss: Bytes(MSS),
            in_flight: Bytes(4 * MSS - ack),
            rtt: Some(Dur::from_millis(20)),
            ..Default::default()
        };
        b.on_ack(&ack(2 * MSS, 2 * MSS));
        assert_eq!(b.state(), &pause, "a partial ACK must not resume measuring");
        b.on_ack(&ack(4 * MSS, 2 * MSS));
        assert_ne!(b.state(), &pause, "the ACK of the recovery point resumes measuring");
    }

    #[test]
    fn storing_timer_counts_from_the_first_held_segment() {
        // A measurement that ends early on an ACK while the next stream is being stored goes
        // STORE PACKET → PASS PACKET (awaiting ACKs, all in) → STORE PACKET in one instant, with
        // the held segments still in the buffer. The new storing episode's timer must run from
        // their release, not from that instant, or they wait up to 2T (Fig. 9's bound).
        let mut b =
            imtcp(ControlConfig { storing_timer: StoringTimer::Fixed(Dur::from_millis(40)), ..Default::default() });
        b.rtt.adopt_srtt(Dur::from_millis(20));
        b.on_window(Time::ZERO, Bytes(100 * MSS));
        b.advance(Time::ZERO);
        let t0 = Time::from_secs_f64(1.0);
        for i in 0..5 {
            b.release(t0, Segment { seq: i * MSS, len: Bytes(MSS), retransmission: false });
        }
        assert_eq!(b.state(), &ControlState::StorePacket { timer: Some(t0 + Dur::from_millis(40)) });
        let t1 = t0 + Dur::from_millis(30);
        b.set_state(t1, ControlState::StorePacket { timer: None });
        assert_eq!(b.state(), &ControlState::StorePacket { timer: Some(t0 + Dur::from_millis(40)) });
        // and it expires on time: everything leaves at t0 + 40 ms
        assert_eq!(b.next_wakeup(), Some(t0 + Dur::from_millis(40)));
        assert!(b.poll_transmit(t1 + Dur::from_millis(5)).is_none());
        let out = std::iter::from_fn(|| b.poll_transmit(t0 + Dur::from_millis(40))).count();
        assert_eq!(out, 5);
        assert_eq!(b.stats().max_hold, Dur::from_millis(40));
    }

    #[test]
    fn retransmitted_segment_release_also_flushes() {
        let mut b = imtcp(ControlConfig::default());
        b.rtt.adopt_srtt(Dur::from_millis(20));
        b.on_window(Time::ZERO, Bytes(100 * MSS));
        b.advance(Time::ZERO);
        for i in 0..5 {
            b.release(Time::ZERO, Segment { seq: i * MSS, len: Bytes(MSS), retransmission: false });
        }
        assert_eq!(b.held(), 5);
        assert!(b.poll_transmit(Time::ZERO).is_none());
        b.release(Time::ZERO, Segment { seq: 0, len: Bytes(MSS), retransmission: true });
        let out: Vec<u64> = std::iter::from_fn(|| b.poll_transmit(Time::ZERO)).map(|s| s.seq).collect();
        assert_eq!(out, vec![0, MSS, 2 * MSS, 3 * MSS, 4 * MSS, 0]);
        assert_eq!(b.state(), &ControlState::PassPacket(PassReason::AfterRetransmission));
    }

    #[test]
    fn stream_failure_raises_m_and_retries() {
        let cfg = ControlConfig { m_policy: MPolicy::Fixed(2), ..Default::default() };
        // fixed m never moves: check the adaptive one below
        assert_eq!(imtcp(cfg).m(), 2);
        // A search stream (an initial range skips Cprobe, which always waits for N segments).
        let mut b = imtcp(ControlConfig {
            measurement: MeasurementConfig {
                initial_range: Some((Rate::from_mbps(40), Rate::from_mbps(60))),
                ..Default::default()
            },
            ..Default::default()
        });
        b.rtt.adopt_srtt(Dur::from_millis(20));
        b.on_window(Time::ZERO, Bytes(100 * MSS));
        b.m = 2;
        b.advance(Time::ZERO);
        b.release(Time::ZERO, Segment { seq: 0, len: Bytes(MSS), retransmission: false });
        b.release(Time::ZERO, Segment { seq: MSS, len: Bytes(MSS), retransmission: false });
        // two held = m: the stream starts, sends both, then runs dry
        assert!(matches!(b.state(), ControlState::SendStream { .. }));
        assert_eq!(b.poll_transmit(Time::ZERO).map(|s| s.seq), Some(0));
        assert_eq!(b.poll_transmit(Time::ZERO), None, "the second is due one gap later");
        let later = Time::from_secs_f64(0.5);
        assert_eq!(b.poll_transmit(later).map(|s| s.seq), Some(MSS));
        assert_eq!(b.poll_transmit(later), None);
        assert_eq!(b.poll_transmit(Time::from_secs_f64(1.0)), None);
        assert_eq!(b.stats().stream_failures, 1);
        assert_eq!(b.m(), 3);
        assert!(matches!(b.state(), ControlState::StorePacket { .. }));
    }

    #[test]
    fn cprobe_waits_for_n_segments_even_with_a_small_fixed_m() {
        // Table 1's m = 2, N = 17: Cprobe's back-to-back stream cannot be formed from two held
        // segments; it must wait for all N, after which the search streams use m = 2. (Before
        // this rule, every Cprobe failed and the connection never measured.)
        let cfg = ControlConfig {
            measurement: MeasurementConfig { stream_len: 17, ..Default::default() },
            m_policy: MPolicy::Fixed(2),
            ..Default::default()
        };
        let mut h = Harness::new(imtcp(cfg), path_60_of_100(), 60);
        h.run(Time::from_secs_f64(5.0), &[], |h| h.collect());
        h.collect();
        assert_in_order_and_complete(&h);
        assert!(h.buf.measurer().search_range().is_some(), "Cprobe succeeded: {:?}", h.buf.stats());
        assert!(!h.estimates.is_empty(), "measured: {:?}", h.buf.stats());
        assert_eq!(h.buf.m(), 2);
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(ImtcpBuffer::new(ControlConfig { interval_rtts: -1.0, ..Default::default() }).is_err());
        assert!(ImtcpBuffer::new(ControlConfig { m_policy: MPolicy::Adaptive { successes: 0 }, ..Default::default() })
            .is_err());
        assert!(ImtcpBuffer::new(ControlConfig { ack_wait_rtts: 0.0, ..Default::default() }).is_err());
    }
}
