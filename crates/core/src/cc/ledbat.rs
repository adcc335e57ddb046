//! LEDBAT, Low Extra Delay Background Transport (RFC 6817), over TCP timestamps.
//!
//! LEDBAT keeps the queueing delay it adds at the bottleneck near a TARGET and yields to
//! standard TCP, which fills the queue beyond it. The delay is one-way, measured from the
//! timestamps of every ACK (`TSval − TSecr`, the receiver's clock minus the sender's): its
//! smallest value over the last minutes is the *base delay* (propagation, plus the clock offset,
//! which cancels), the minimum of the last few samples is the *current delay* (§3.4.2's
//! filter), their difference the *queueing delay* (§2.4.2):
//!
//! ```text
//! on each ACK of new data (§2.4.2):
//!   queuing_delay = FILTER(current_delays) − MIN(base_delays)
//!   off_target    = (TARGET − queuing_delay) / TARGET
//!   cwnd         += GAIN · off_target · bytes_newly_acked · MSS / cwnd
//!   cwnd          = min(cwnd, flightsize + ALLOWED_INCREASE · MSS)
//!   cwnd          = max(cwnd, MIN_CWND · MSS)
//! base delay (§2.4.2 update_base_delay): one minimum per minute, BASE_HISTORY minutes kept
//! on loss: cwnd = max(cwnd / 2, MIN_CWND · MSS), at most once per RTT
//! ```
//!
//! Below TARGET the window grows, above it shrinks, in proportion to the distance: at most by
//! GAIN segments per RTT, like TCP's additive increase. Alone on a path, LEDBAT settles where
//! the queue holds TARGET of delay.
//!
//! # Choices and other implementations
//! - **No slow start**: the RFC's pseudo-code has none (cwnd starts at INIT_CWND = 2 segments
//!   and grows at most one segment per RTT). **ns-3's `TcpLedbat` slow-starts by default**
//!   (`SSParam = yes`, and again whenever cwnd falls to one segment); **libutp** (µTP) slow-starts
//!   too, until the window passes `ssthresh` or the delay nears TARGET. We follow the RFC.
//! - **Loss**: the simulator's sender detects losses; recovery is NewReno's (RFC 6582), whose
//!   `ssthresh = max(FlightSize / 2, 2·SMSS)` is the RFC's `max(cwnd / 2, MIN_CWND · MSS)` with
//!   FlightSize for cwnd, once per window of data (= once per RTT). A timeout sets cwnd to one
//!   segment (§2.4.2: "cwnd = 1 × MSS") and LEDBAT's rule (not slow start) grows it again.
//! - **FILTER** is the minimum of the last [`CURRENT_FILTER`] = 4 samples (§3.4.2 suggests
//!   MIN over a few samples; ns-3's `NoiseFilterLen` 4; libutp keeps 3).
//! - **Base history**: a new slot each minute of the simulation clock (`now / 60 s` changes),
//!   [`BASE_HISTORY`] = 10 slots (ns-3: a new slot when more than 60 s passed since the last
//!   one, 10 slots; libutp: 13 slots of one minute and a clock-drift correction).
//! - **Cap**: `flightsize` is the data outstanding before this ACK (the RFC subtracts the ACKed
//!   bytes after the update). ns-3 caps at that flight size without ALLOWED_INCREASE.
//! - **Offset arithmetic**: ns-3 computes off_target in whole milliseconds; libutp scales the
//!   gain to at most 3000 bytes per RTT (`MAX_CWND_INCREASE_BYTES_PER_RTT`) instead of GAIN
//!   segments. We keep nanoseconds and bytes.
//! - **Without timestamps** (or before the first sample) the window follows NewReno, as ns-3.

use std::collections::VecDeque;

use crate::cc::reno::{Reno, RenoConfig};
use crate::cc::{AckAction, AckEvent, CongestionControl, SentEvent, Window};
use crate::units::{Bytes, Dur, Time};

/// TARGET: the queueing delay LEDBAT aims at (§2.5.1: "MUST be 100 milliseconds or less").
pub const TARGET: Dur = Dur::from_millis(100);
/// GAIN: window change per RTT at an off-target of one TARGET (§2.5.2: "MUST be set to 1 or less").
pub const GAIN: f64 = 1.0;
/// BASE_HISTORY: minute minima kept for the base delay (§2.5.2: "SHOULD be 10").
pub const BASE_HISTORY: usize = 10;
/// CURRENT_FILTER: delay samples the current-delay filter takes the minimum of (§3.4.2 leaves
/// it open; ns-3 uses 4).
pub const CURRENT_FILTER: usize = 4;
/// ALLOWED_INCREASE: cwnd may exceed the flight size by this many segments (§2.5.1: "SHOULD be 1").
pub const ALLOWED_INCREASE: u32 = 1;
/// MIN_CWND in segments (§2.5.1: "SHOULD be 2").
pub const MIN_CWND: u32 = 2;
/// One slot of the base-delay history (§2.4.2: "minute").
pub const BASE_SLOT: Dur = Dur::from_secs(60);

/// Parameters of [`Ledbat`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LedbatConfig {
    pub target: Dur,
    pub gain: f64,
    pub base_history: usize,
    pub current_filter: usize,
    pub allowed_increase: u32,
    pub min_cwnd: u32,
}

impl Default for LedbatConfig {
    fn default() -> Self {
        LedbatConfig {
            target: TARGET,
            gain: GAIN,
            base_history: BASE_HISTORY,
            current_filter: CURRENT_FILTER,
            allowed_increase: ALLOWED_INCREASE,
            min_cwnd: MIN_CWND,
        }
    }
}

impl LedbatConfig {
    /// The RFC's MUSTs: 0 < TARGET ≤ 100 ms, 0 < GAIN ≤ 1, ALLOWED_INCREASE ≥ 1; and at least
    /// one base-history slot, one filter sample and one segment of MIN_CWND.
    pub fn validate(&self) -> Result<(), String> {
        if self.target == Dur::ZERO || self.target > TARGET {
            return Err(format!("target must be within (0, 100ms] (RFC 6817 §2.5.1), got {}", self.target));
        }
        if !(self.gain > 0.0 && self.gain <= 1.0) {
            return Err(format!("gain must be within (0, 1] (RFC 6817 §2.5.2), got {}", self.gain));
        }
        if self.base_history == 0 || self.current_filter == 0 {
            return Err("base_history and current_filter must be at least 1".into());
        }
        if self.allowed_increase == 0 {
            return Err("allowed_increase must be at least 1 (RFC 6817 §2.5.1)".into());
        }
        if self.min_cwnd == 0 {
            return Err("min_cwnd must be at least 1 segment".into());
        }
        Ok(())
    }
}

/// LEDBAT controller state. Delays in nanoseconds of `TSval − TSecr`.
#[derive(Clone, Debug)]
pub struct Ledbat {
    cfg: LedbatConfig,
    reno: Reno,
    mss: u64,
    /// Minute minima, oldest first; the last is the current minute's.
    base_delays: VecDeque<i64>,
    /// The minute (`now / BASE_SLOT`) of the last slot.
    last_rollover: u64,
    current_delays: VecDeque<i64>,
    /// cwnd with its fraction of a byte (per-ACK changes near TARGET are below one byte; rounding
    /// them away would stop growth about 8 % below TARGET). Resynchronised when NewReno moved
    /// the window (loss, timeout).
    cwnd_exact: f64,
}

impl Ledbat {
    pub fn new(cfg: LedbatConfig, reno_cfg: RenoConfig) -> Result<Ledbat, String> {
        cfg.validate()?;
        Ok(Ledbat {
            cfg,
            reno: Reno::newreno(reno_cfg),
            mss: reno_cfg.mss.0.max(1),
            base_delays: VecDeque::new(),
            last_rollover: 0,
            current_delays: VecDeque::new(),
            cwnd_exact: 0.0,
        })
    }

    pub fn config(&self) -> &LedbatConfig {
        &self.cfg
    }

    /// The queueing delay LEDBAT estimates now (None before the first sample).
    pub fn queuing_delay(&self) -> Option<Dur> {
        let base = self.base_delays.iter().min()?;
        let current = self.current_delays.iter().min()?;
        Some(Dur((current - base).max(0) as u64))
    }

    fn update_base_delay(&mut self, now: Time, delay: i64) {
        let minute = now.0 / BASE_SLOT.0;
        match self.base_delays.back_mut() {
            Some(tail) if minute == self.last_rollover => *tail = (*tail).min(delay),
            _ => {
                self.last_rollover = minute;
                self.base_delays.push_back(delay);
                if self.base_delays.len() > self.cfg.base_history {
                    self.base_delays.pop_front();
                }
            }
        }
    }

    fn update_current_delay(&mut self, delay: i64) {
        self.current_delays.push_back(delay);
        if self.current_delays.len() > self.cfg.current_filter {
            self.current_delays.pop_front();
        }
    }
}

impl CongestionControl for Ledbat {
    fn name(&self) -> &'static str {
        "ledbat"
    }
    fn on_ack(&mut self, ev: &AckEvent) -> AckAction {
        if let (Some(ts), true) = (ev.timestamps, ev.newly_acked.0 > 0) {
            let delay = ts.one_way_delay_ns();
            self.update_base_delay(ev.now, delay);
            self.update_current_delay(delay);
        }
        let was_in_recovery = self.reno.in_recovery();
        let before = self.reno.cwnd().0;
        let action = self.reno.on_ack(ev);
        if ev.newly_acked.0 == 0 || was_in_recovery || self.reno.in_recovery() || action != AckAction::None {
            return action;
        }
        let Some(queuing) = self.queuing_delay() else { return action };
        let target = self.cfg.target.0 as f64;
        let off_target = (target - queuing.0 as f64) / target;
        let mss = self.mss as f64;
        if self.cwnd_exact as u64 != before {
            self.cwnd_exact = before as f64;
        }
        let change = self.cfg.gain * off_target * ev.newly_acked.0 as f64 * mss / self.cwnd_exact.max(1.0);
        let flight = ev.in_flight.0 + ev.newly_acked.0;
        let cap = (flight + self.cfg.allowed_increase as u64 * self.mss) as f64;
        let floor = (self.cfg.min_cwnd as u64 * self.mss) as f64;
        self.cwnd_exact = (self.cwnd_exact + change).min(cap).max(floor);
        self.reno.set_cwnd(Bytes(self.cwnd_exact as u64));
        action
    }
    fn on_timeout(&mut self, now: Time, in_flight: Bytes) {
        self.reno.on_timeout(now, in_flight);
    }
    fn on_sent(&mut self, ev: &SentEvent) {
        self.reno.on_sent(ev);
    }
    fn window(&self) -> Window {
        self.reno.window()
    }
    fn in_recovery(&self) -> bool {
        self.reno.in_recovery()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::AckTimestamps;

    const MSS: u64 = 1000;
    /// The receiver's clock runs 5 s ahead: LEDBAT uses only differences.
    const OFFSET_NS: u64 = 5_000_000_000;

    /// A new ACK of one segment at `now_s` whose echoed segment had one-way delay `owd_ms`.
    fn ack(now_s: f64, seq: u64, owd_ms: f64) -> AckEvent {
        let now = Time::from_secs_f64(now_s);
        let sent = now - Dur::from_millis(300);
        AckEvent {
            now,
            ack: seq,
            newly_acked: Bytes(MSS),
            snd_max: seq + 100 * MSS,
            in_flight: Bytes(100 * MSS),
            mss: Bytes(MSS),
            timestamps: Some(AckTimestamps { tsval: Time(sent.0 + OFFSET_NS + (owd_ms * 1e6) as u64), tsecr: sent }),
            ..Default::default()
        }
    }

    /// The cwnd change of one ACK once the filter holds only `queue_ms` of queueing delay over a
    /// 20 ms base, at 40 segments.
    fn change_at(queue_ms: f64) -> (i64, Dur) {
        let mut l =
            Ledbat::new(LedbatConfig::default(), RenoConfig { mss: Bytes(MSS), ..RenoConfig::default() }).unwrap();
        let mut seq = MSS;
        l.on_ack(&ack(0.0, seq, 20.0));
        for i in 0..CURRENT_FILTER {
            seq += MSS;
            l.on_ack(&ack(0.1 + i as f64 * 0.01, seq, 20.0 + queue_ms));
        }
        l.reno.set_cwnd(Bytes(40 * MSS));
        seq += MSS;
        l.on_ack(&ack(0.2, seq, 20.0 + queue_ms));
        (l.window().cwnd.0 as i64 - 40 * MSS as i64, l.queuing_delay().unwrap())
    }

    #[test]
    fn ledbat_grows_below_target_and_shrinks_above_in_proportion_to_the_offset() {
        // One ACK at 40 segments: change = GAIN · (TARGET − q)/TARGET · MSS² / cwnd = 25 B · off.
        let mut got = Vec::new();
        for q in [0.0, 50.0, 100.0, 150.0, 200.0] {
            let (d, queuing) = change_at(q);
            assert_eq!(queuing, Dur::from_secs_f64(q / 1e3));
            got.push(d);
        }
        // ±12.5 B rounded down to whole bytes.
        assert_eq!(got, vec![25, 12, 0, -13, -25], "proportional to (TARGET − q) / TARGET");
    }

    #[test]
    fn ledbat_cwnd_is_capped_by_flight_plus_allowed_increase_and_floored_at_min_cwnd() {
        let mut l =
            Ledbat::new(LedbatConfig::default(), RenoConfig { mss: Bytes(MSS), ..RenoConfig::default() }).unwrap();
        l.on_ack(&ack(0.0, MSS, 20.0));
        l.reno.set_cwnd(Bytes(10 * MSS));
        // An application-limited flight of 3 segments: cwnd ≤ 3 + 1 segments.
        l.on_ack(&AckEvent { in_flight: Bytes(2 * MSS), ..ack(0.1, 2 * MSS, 20.0) });
        assert_eq!(l.window().cwnd.0, 4 * MSS);
        // A huge queueing delay cannot push cwnd below MIN_CWND.
        for i in 0..20 {
            l.on_ack(&ack(0.2 + i as f64 * 0.01, (3 + i) * MSS, 5000.0));
        }
        assert_eq!(l.window().cwnd.0, MIN_CWND as u64 * MSS);
    }

    #[test]
    fn base_delay_is_the_minimum_of_the_last_ten_minutes() {
        let mut l =
            Ledbat::new(LedbatConfig::default(), RenoConfig { mss: Bytes(MSS), ..RenoConfig::default() }).unwrap();
        // Minute 0: 10 ms; minutes 1..=10: 30 ms (the queue never empties again).
        let mut seq = 0;
        for minute in 0..=10u64 {
            for k in 0..5 {
                seq += MSS;
                let owd = if minute == 0 { 10.0 } else { 30.0 };
                l.on_ack(&ack(minute as f64 * 60.0 + k as f64, seq, owd));
            }
            let q = l.queuing_delay().unwrap();
            let want = if minute == 0 {
                Dur::ZERO
            } else if minute < 10 {
                Dur::from_millis(20)
            } else {
                Dur::ZERO
            };
            assert_eq!(q, want, "minute {minute}: the 10 ms minimum is forgotten after {BASE_HISTORY} minutes");
        }
    }

    #[test]
    fn loss_halves_once_per_window() {
        let mut l =
            Ledbat::new(LedbatConfig::default(), RenoConfig { mss: Bytes(MSS), ..RenoConfig::default() }).unwrap();
        l.on_ack(&ack(0.0, MSS, 20.0));
        l.reno.set_cwnd(Bytes(40 * MSS));
        let dup =
            |d: u32| AckEvent { newly_acked: Bytes(0), dup_acks: d, in_flight: Bytes(40 * MSS), ..ack(0.1, MSS, 20.0) };
        let actions: Vec<AckAction> = (1..=6).map(|d| l.on_ack(&dup(d))).collect();
        assert_eq!(actions.iter().filter(|&&a| a == AckAction::FastRetransmit).count(), 1);
        assert_eq!(l.window().ssthresh.0, 20 * MSS, "halved once");
    }
}
