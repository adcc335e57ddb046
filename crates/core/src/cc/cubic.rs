//! CUBIC (I. Rhee, L. Xu, S. Ha, A. Zimmermann, L. Eggert, R. Scheffenegger, RFC 9438, 2023),
//! with the Linux defaults.
//!
//! Between congestion events CUBIC sets the window from the time `t` since the current
//! *congestion-avoidance epoch* began, not from the ACK count, so flows with different RTTs
//! grow alike:
//!
//! ```text
//!   W_cubic(t) = C (t − K)³ + W_max,     K = ∛((W_max − cwnd_epoch) / C)        (RFC 9438 Eqs. 1, 2)
//! ```
//!
//! `W_max` is the window just before the last reduction, `cwnd_epoch` the window when the epoch
//! began (`K` is the time the curve takes to climb back to `W_max`; the window is concave below
//! `W_max` and convex above it). Each ACK moves `cwnd` toward `target = W_cubic(t + RTT)`,
//! clamped to `[cwnd, 1.5 cwnd]`, by `(target − cwnd) / cwnd` segments per acknowledged segment
//! (§4.4, §4.5). In the *Reno-friendly region* CUBIC follows an estimate of what Reno would
//! have, `W_est += α · segments_acked / cwnd` with `α = 3(1 − β)/(1 + β)` (§4.3; α becomes 1 once
//! `W_est` passes the window before the reduction), whenever it is above `W_cubic(t)`.
//!
//! On a congestion event (§4.6, §4.7): `ssthresh = max(β · cwnd, 2 segments)` with β = 0.7, and
//! `W_max = cwnd`, or `cwnd (1 + β)/2` with *fast convergence* when the window had not regained the
//! previous `W_max` (a flow releasing bandwidth to a newcomer). `C` = 0.4 (segments/s³).
//!
//! Choices, and where headroom follows Linux's `tcp_cubic.c` rather than the RFC's options:
//! - The reduction multiplies `cwnd` (Linux), not the flight size (the RFC allows either).
//! - The RTT in `W_cubic(t + RTT)` is the smallest RTT seen (Linux's `delay_min`), and the epoch
//!   begins at the first ACK in congestion avoidance after a reduction (Linux's `epoch_start`).
//! - A retransmission timeout computes `ssthresh` as a congestion event does, then forgets
//!   `W_max` (Linux's `bictcp_reset` on entering `TCP_CA_Loss`): the next epoch starts at the
//!   window slow start reached, with `K = 0`.
//! - **HyStart** is a key, off by default (`cc = { name = "cubic", hystart = true }`): off,
//!   slow start is standard (RFC 5681), as Linux with `hystart=0`; on, it is Linux's HyStart
//!   ([`HyStart`]: Ha & Rhee's ACK-train and delay-increase detection, Linux's default
//!   `hystart=1`, `hystart_detect=3`), not RFC 9406's HyStart++. Off by default so every
//!   existing result stays what it was; a scenario meant to match Linux turns it on.
//! - Loss recovery is NewReno's (see [`crate::cc::window_rule`]); with SACK the simulator's
//!   sender does the recovery and this controller only sets the windows.
//! - `K` uses the workspace's portable cube root ([`crate::math::cbrt`]), so the simulator stays
//!   bit-identical on every platform.

use crate::cc::reno::{Recovery, RenoConfig};
use crate::cc::window_rule::{RenoRecovery, WindowRule};
use crate::cc::AckEvent;
use crate::math::cbrt;
use crate::units::{Bytes, Dur, Time};

/// β_cubic: the multiplicative decrease (RFC 9438 §4.6; Linux `beta` 717/1024 ≈ 0.7).
pub const BETA: f64 = 0.7;
/// C: the cubic's scaling constant in segments per second³ (RFC 9438 §5.1; Linux 410/1024 ≈ 0.4).
pub const C: f64 = 0.4;

/// CUBIC's window rule.
#[derive(Clone, Debug)]
pub struct CubicRule {
    fast_convergence: bool,
    /// `W_max` in segments (0 after a timeout: no plateau to return to).
    w_max: f64,
    /// `W_max` before the last fast-convergence adjustment (Linux's `last_max_cwnd`).
    w_last_max: f64,
    /// The window before the last reduction (`cwnd_prior`), where α becomes 1.
    cwnd_prior: f64,
    epoch: Option<Epoch>,
    hystart: Option<HyStart>,
}

/// The current congestion-avoidance epoch.
#[derive(Clone, Copy, Debug)]
struct Epoch {
    start: Time,
    /// `K` in seconds.
    k: f64,
    /// The curve's plateau (`W_max`, or the window at the epoch's start when above `W_max`).
    origin: f64,
    /// `W_est`, the Reno-friendly estimate, in segments.
    w_est: f64,
}

impl Default for CubicRule {
    fn default() -> Self {
        CubicRule { fast_convergence: true, w_max: 0.0, w_last_max: 0.0, cwnd_prior: 0.0, epoch: None, hystart: None }
    }
}

impl CubicRule {
    pub fn new(fast_convergence: bool) -> CubicRule {
        CubicRule { fast_convergence, ..CubicRule::default() }
    }
    /// With Linux's HyStart ending slow start (see [`HyStart`]).
    pub fn with_hystart(self) -> CubicRule {
        CubicRule { hystart: Some(HyStart::default()), ..self }
    }
    /// HyStart's state, when it is on.
    pub fn hystart(&self) -> Option<&HyStart> {
        self.hystart.as_ref()
    }
    /// `W_max` in segments.
    pub fn w_max(&self) -> f64 {
        self.w_max
    }
    /// `K` of the current epoch in seconds (`None` before the epoch's first ACK).
    pub fn k(&self) -> Option<f64> {
        self.epoch.map(|e| e.k)
    }
    /// `W_cubic(t)` of the current epoch, `t` seconds after its start.
    pub fn w_cubic(&self, t: f64) -> Option<f64> {
        self.epoch.map(|e| C * (t - e.k) * (t - e.k) * (t - e.k) + e.origin)
    }
}

impl WindowRule for CubicRule {
    fn name(&self) -> &'static str {
        "cubic"
    }

    fn exits_slow_start(&mut self, ev: &AckEvent, cwnd: Bytes) -> bool {
        self.hystart.as_mut().is_some_and(|h| h.on_slow_start_ack(ev, cwnd))
    }

    fn increase(&mut self, ev: &AckEvent, cwnd: Bytes) -> Bytes {
        let mss = ev.mss.0.max(1) as f64;
        let w = cwnd.0 as f64 / mss;
        let epoch = *self.epoch.get_or_insert_with(|| {
            let (k, origin) = if self.w_max <= w { (0.0, w) } else { (cbrt((self.w_max - w) / C), self.w_max) };
            Epoch { start: ev.now, k, origin, w_est: w }
        });
        let acked = ev.newly_acked.0 as f64 / mss;
        let rtt = ev.min_rtt.or(ev.srtt).or(ev.rtt).map_or(0.0, |d| d.as_secs_f64());
        let t = ev.now.saturating_since(epoch.start).as_secs_f64();
        let cubic_now = C * (t - epoch.k) * (t - epoch.k) * (t - epoch.k) + epoch.origin;
        let ahead = t + rtt - epoch.k;
        let target = (C * ahead * ahead * ahead + epoch.origin).clamp(w, 1.5 * w);
        // Reno-friendly estimate (§4.3).
        let alpha = if epoch.w_est >= self.cwnd_prior { 1.0 } else { 3.0 * (1.0 - BETA) / (1.0 + BETA) };
        let w_est = epoch.w_est + alpha * acked / w;
        if let Some(e) = self.epoch.as_mut() {
            e.w_est = w_est;
        }
        let grown = if cubic_now < w_est { w_est.max(w) } else { w + (target - w) / w * acked };
        Bytes(((grown - w) * mss).round().max(0.0) as u64)
    }

    fn on_congestion(&mut self, _now: Time, cwnd: Bytes, _in_flight: Bytes, mss: Bytes) -> Bytes {
        let w = cwnd.0 as f64 / mss.0.max(1) as f64;
        self.epoch = None;
        self.cwnd_prior = w;
        if self.fast_convergence && w < self.w_last_max {
            self.w_last_max = w;
            self.w_max = w * (1.0 + BETA) / 2.0;
        } else {
            self.w_last_max = w;
            self.w_max = w;
        }
        Bytes(((w * BETA * mss.0 as f64) as u64).max(2 * mss.0))
    }

    fn on_timeout(&mut self, now: Time, cwnd: Bytes, in_flight: Bytes, mss: Bytes) -> Bytes {
        let ssthresh = self.on_congestion(now, cwnd, in_flight, mss);
        self.w_max = 0.0;
        self.w_last_max = 0.0;
        self.cwnd_prior = 0.0;
        if let Some(h) = self.hystart.as_mut() {
            *h = HyStart::default();
        }
        ssthresh
    }
}

/// HyStart's smallest window, in segments (Linux `hystart_low_window`).
pub const HYSTART_LOW_WINDOW: u64 = 16;
/// ACKs closer than this belong to one ACK train (Linux `hystart_ack_delta_us`).
pub const HYSTART_ACK_DELTA: Dur = Dur::from_millis(2);
/// RTT samples per round before the delay test (Linux `HYSTART_MIN_SAMPLES`).
pub const HYSTART_MIN_SAMPLES: u32 = 8;
/// Bounds of the delay test's threshold `delay_min / 8` (Linux `HYSTART_DELAY_MIN`/`_MAX`).
pub const HYSTART_DELAY_MIN: Dur = Dur::from_millis(4);
pub const HYSTART_DELAY_MAX: Dur = Dur::from_millis(16);

/// HyStart, "hybrid slow start" (S. Ha, I. Rhee, "Taming the elephants: New TCP slow start",
/// Computer Networks 55(9), 2011), as Linux's `tcp_cubic.c` runs it by default: slow start ends
/// (`ssthresh = cwnd`) *before* the first loss, when either test fires in a round (a window's
/// worth of ACKs, from the ACK that passes the previous round's highest sent byte):
///
/// - **ACK train**: ACKs arriving within [`HYSTART_ACK_DELTA`] of each other form a train; once
///   the round's train spans more than `delay_min / 2`, the window already fills half the
///   path's minimum RTT with back-to-back packets and doubling it again would overshoot.
/// - **Delay increase**: the smallest RTT of the round's first [`HYSTART_MIN_SAMPLES`] samples
///   exceeds `delay_min + clamp(delay_min / 8, 4 ms, 16 ms)`: a queue is building.
///
/// Both run only while `cwnd ≥` [`HYSTART_LOW_WINDOW`] segments, at most once until a
/// retransmission timeout re-arms them (Linux's `found`, cleared on `TCP_CA_Loss`).
/// `delay_min` is the connection's smallest RTT sample. Not modelled: the extra allowance Linux
/// adds to the ACK-train threshold for delayed ACKs under pacing (`hystart_ack_delay`; the
/// simulator does not pace), and Linux's `HZ`-tick clock (times here are exact).
#[derive(Clone, Debug, Default)]
pub struct HyStart {
    /// The current round: when it began, when the ACK train last grew, and the highest byte
    /// sent when it began (the round ends when the cumulative ACK passes it).
    round: Option<(Time, Time, u64)>,
    /// The smallest RTT sample of this round so far, and how many samples were taken.
    round_rtt: Option<Dur>,
    samples: u32,
    /// Which test ended slow start (once ended, HyStart is idle until a timeout).
    found: Option<HyStartExit>,
}

/// Which of HyStart's tests ended slow start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HyStartExit {
    AckTrain,
    DelayIncrease,
}

impl HyStart {
    /// The test that ended slow start, if one did.
    pub fn found(&self) -> Option<HyStartExit> {
        self.found
    }

    /// One ACK of new data in slow start at window `cwnd`: whether slow start ends here.
    fn on_slow_start_ack(&mut self, ev: &AckEvent, cwnd: Bytes) -> bool {
        let mss = ev.mss.0.max(1);
        let (Some(rtt), None) = (ev.rtt, self.found) else { return false };
        if cwnd.0 / mss < HYSTART_LOW_WINDOW {
            return false;
        }
        let delay_min = ev.min_rtt.unwrap_or(rtt).min(rtt);
        let now = ev.now;
        if self.round.is_none_or(|(_, _, end)| ev.ack > end) {
            self.round = Some((now, now, ev.snd_max));
            self.round_rtt = None;
            self.samples = 0;
        }
        let Some((start, last_ack, end)) = self.round else { return false };
        if now.saturating_since(last_ack) <= HYSTART_ACK_DELTA {
            self.round = Some((start, now, end));
            if now.saturating_since(start) > Dur(delay_min.0 / 2) {
                self.found = Some(HyStartExit::AckTrain);
                return true;
            }
        }
        let round_rtt = self.round_rtt.map_or(rtt, |r| r.min(rtt));
        self.round_rtt = Some(round_rtt);
        if self.samples < HYSTART_MIN_SAMPLES {
            self.samples += 1;
        } else if round_rtt.0 > delay_min.0 + Dur(delay_min.0 / 8).clamp(HYSTART_DELAY_MIN, HYSTART_DELAY_MAX).0 {
            self.found = Some(HyStartExit::DelayIncrease);
            return true;
        }
        false
    }
}

/// CUBIC: NewReno's recovery with RFC 9438's window rule.
pub type Cubic = RenoRecovery<CubicRule>;

impl Cubic {
    pub fn cubic(cfg: RenoConfig) -> Cubic {
        RenoRecovery::new(Recovery::NewReno, cfg, CubicRule::default())
    }
    /// CUBIC with Linux's HyStart ending slow start.
    pub fn cubic_with_hystart(cfg: RenoConfig) -> Cubic {
        RenoRecovery::new(Recovery::NewReno, cfg, CubicRule::default().with_hystart())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::window_rule::tests::ack;
    use crate::cc::{AckAction, CongestionControl};
    use crate::units::Dur;

    fn cubic_at(cwnd_segments: u64) -> Cubic {
        let cfg = RenoConfig { mss: Bytes(1000), initial_ssthresh: Some(Bytes(2000)), ..RenoConfig::default() };
        let mut c = Cubic::cubic(cfg);
        c.set_cwnd(Bytes(cwnd_segments * 1000));
        c
    }

    /// Three duplicate ACKs of `una`, then the full ACK that ends NewReno's recovery.
    fn loss(c: &mut Cubic, at_ms: u64, una: u64) {
        let flight = c.cwnd().0;
        for d in 1..=3 {
            let a = c.on_ack(&ack(at_ms, una, 0, d, flight));
            assert_eq!(a == AckAction::FastRetransmit, d == 3);
        }
        // NewReno's full ACK ends recovery at ssthresh.
        c.on_ack(&ack(at_ms + 1, una + flight, flight, 0, c.ssthresh().0 + 100_000));
        assert!(!c.in_recovery());
    }

    #[test]
    fn a_loss_keeps_beta_of_the_window_and_remembers_w_max() {
        let mut c = cubic_at(100);
        loss(&mut c, 0, 1000);
        assert_eq!(c.ssthresh(), Bytes(70_000), "β = 0.7 of cwnd");
        assert_eq!(c.cwnd(), Bytes(70_000));
        assert_eq!(c.rule().w_max(), 100.0);
        // Fast convergence: a second loss below W_max remembers less than the window.
        loss(&mut c, 10, 500_000);
        assert!((c.rule().w_max() - 70.0 * (1.0 + BETA) / 2.0).abs() < 1e-9, "{}", c.rule().w_max());
    }

    #[test]
    fn between_losses_the_window_follows_the_cubic() {
        let mut c = cubic_at(100);
        loss(&mut c, 0, 1000);
        // K = ∛(W_max (1 − β) / C) = ∛(100 · 0.3 / 0.4) ≈ 4.217 s.
        let k_expected = cbrt(100.0 * (1.0 - BETA) / C);
        // RTT 200 ms (long enough that the cubic, not the Reno-friendly estimate, sets the
        // window); every RTT the whole window is acknowledged, one ACK per segment spread over
        // the RTT. Run 8 s, past K.
        let rtt = Dur::from_millis(200);
        let mut acked = 200_000u64;
        let mut samples = Vec::new();
        let start_ns = 100_000_000u64;
        for round in 0..40u64 {
            let segments = c.cwnd().0 / 1000;
            for j in 0..segments {
                let now = Time(start_ns + round * 200_000_000 + j * 200_000_000 / segments);
                acked += 1000;
                let mut ev = ack(0, acked, 1000, 0, c.cwnd().0);
                ev.now = now;
                ev.min_rtt = Some(rtt);
                ev.rtt = Some(rtt);
                c.on_ack(&ev);
            }
            samples.push(((round + 1) as f64 * 0.2, c.cwnd().0 as f64 / 1000.0));
        }
        let k = c.rule().k().expect("epoch began");
        assert!((k - k_expected).abs() < 1e-9, "K = {k}, expected {k_expected}");
        // The window follows W(t) = C(t − K)³ + W_max: between W_cubic(t) and the target one RTT
        // ahead, plus a segment of rounding.
        for &(t, w) in &samples {
            let lo = c.rule().w_cubic(t - 0.2).unwrap();
            let hi = c.rule().w_cubic(t + 0.2).unwrap();
            assert!(w >= lo - 1.0 && w <= hi + 1.0, "t = {t:.2}: cwnd {w:.2} not within W_cubic [{lo:.2}, {hi:.2}]");
        }
        // Concave below W_max, a plateau at W_max near K, convex above.
        let at = |t: f64| samples.iter().find(|s| s.0 >= t).unwrap().1;
        assert!((at(k_expected) - 100.0).abs() < 1.5, "plateau {}", at(k_expected));
        assert!(at(1.0) - at(0.6) > at(2.0) - at(1.6), "concave before K");
        assert!(at(8.0) - at(7.6) > at(6.6) - at(6.2), "convex after K");
    }

    #[test]
    fn at_a_short_rtt_it_is_reno_friendly() {
        // RTT 10 ms: Reno's α = 3(1 − β)/(1 + β) ≈ 0.53 segments per RTT outgrows the cubic's
        // plateau; CUBIC follows W_est and stays above W_cubic(t).
        let mut c = cubic_at(100);
        loss(&mut c, 0, 1000);
        let rtt = Dur::from_millis(10);
        let mut acked = 200_000u64;
        for round in 0..300u64 {
            let segments = c.cwnd().0 / 1000;
            for j in 0..segments {
                acked += 1000;
                let mut ev = ack(0, acked, 1000, 0, c.cwnd().0);
                ev.now = Time(100_000_000 + round * 10_000_000 + j * 10_000_000 / segments);
                ev.min_rtt = Some(rtt);
                c.on_ack(&ev);
            }
        }
        let w = c.cwnd().0 as f64 / 1000.0;
        let cubic = c.rule().w_cubic(3.0).unwrap();
        assert!(w > cubic + 20.0, "cwnd {w:.1} should follow W_est, above W_cubic(3 s) = {cubic:.1}");
    }

    /// Slow start from 16 segments with no ssthresh: one ACK per segment, `spacing_us` apart,
    /// the `i`-th carrying RTT `rtt_ms(i)`. The sender keeps a window in flight (`snd_max` =
    /// the ACK + cwnd). Returns the index of the ACK that ended slow start and the window then.
    fn slow_start(c: &mut Cubic, spacing_us: u64, rtt_ms: impl Fn(usize) -> u64) -> Option<(usize, u64)> {
        c.set_cwnd(Bytes(16_000));
        let mut acked = 0u64;
        let mut min_rtt: Option<Dur> = None;
        for i in 0..2000 {
            let cwnd = c.cwnd().0;
            acked += 1000;
            let rtt = Dur::from_millis(rtt_ms(i));
            min_rtt = Some(min_rtt.map_or(rtt, |m| m.min(rtt)));
            let mut ev = ack(0, acked, 1000, 0, cwnd);
            ev.now = Time(1_000_000_000 + i as u64 * spacing_us * 1000);
            ev.rtt = Some(rtt);
            ev.min_rtt = min_rtt;
            c.on_ack(&ev);
            if c.ssthresh().0 < u64::MAX / 4 {
                return Some((i, c.ssthresh().0 / 1000));
            }
        }
        None
    }

    fn unlimited() -> RenoConfig {
        RenoConfig { mss: Bytes(1000), initial_ssthresh: None, ..RenoConfig::default() }
    }

    #[test]
    fn hystart_delay_increase_ends_slow_start_only_once_the_rtt_grows() {
        // ACKs 3 ms apart (no ACK train); RTT 40 ms, then 50 ms from the 100th ACK on: above
        // delay_min + clamp(40/8, 4, 16) = 45 ms.
        let rtt = |i: usize| if i < 100 { 40 } else { 50 };
        let mut c = Cubic::cubic_with_hystart(unlimited());
        let (at, _) = slow_start(&mut c, 3000, rtt).expect("HyStart ends slow start");
        assert!(at >= 100 + HYSTART_MIN_SAMPLES as usize, "ended at ACK {at}, before the RTT rose enough");
        assert!(at < 300, "ended late, at ACK {at}");
        assert_eq!(c.rule().hystart().unwrap().found(), Some(HyStartExit::DelayIncrease));
        // 44 ms stays below the threshold: no exit.
        let mut c = Cubic::cubic_with_hystart(unlimited());
        assert_eq!(slow_start(&mut c, 3000, |i| if i < 100 { 40 } else { 44 }), None);
        // Without HyStart (the default) slow start runs on.
        let mut c = Cubic::cubic(unlimited());
        assert_eq!(slow_start(&mut c, 3000, rtt), None);
    }

    #[test]
    fn hystart_ack_train_ends_slow_start_when_a_round_spans_half_the_min_rtt() {
        // RTT 10 ms throughout, ACKs 100 µs apart: a round of w ACKs spans w × 0.1 ms, which
        // passes delay_min / 2 = 5 ms once the window is above 50 segments.
        let mut c = Cubic::cubic_with_hystart(unlimited());
        let (_, w) = slow_start(&mut c, 100, |_| 10).expect("the ACK train ends slow start");
        assert_eq!(c.rule().hystart().unwrap().found(), Some(HyStartExit::AckTrain));
        // Rounds start at 16, 32, 64 segments; the 64-segment round's train passes 5 ms at its
        // 51st ACK, when slow start has grown the window to 64 + 51 segments.
        assert!((100..=130).contains(&w), "ssthresh {w} segments");
        // ACKs 2.5 ms apart never form a train (and the RTT does not grow).
        let mut c = Cubic::cubic_with_hystart(unlimited());
        assert_eq!(slow_start(&mut c, 2500, |_| 10), None);
        // A timeout re-arms HyStart.
        let mut c = Cubic::cubic_with_hystart(unlimited());
        slow_start(&mut c, 100, |_| 10).expect("first exit");
        c.on_timeout(Time(0), Bytes(100_000));
        assert_eq!(c.rule().hystart().unwrap().found(), None);
    }

    #[test]
    fn a_timeout_forgets_w_max() {
        let mut c = cubic_at(100);
        c.on_timeout(Time(0), Bytes(100_000));
        assert_eq!(c.cwnd(), Bytes(1000));
        assert_eq!(c.ssthresh(), Bytes(70_000));
        assert_eq!(c.rule().w_max(), 0.0);
    }
}
