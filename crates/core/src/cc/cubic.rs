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
//! - **HyStart is off**: slow start is standard (RFC 5681), as Linux with `hystart=0`. HyStart
//!   (or RFC 9406's HyStart++) is not implemented; there is no key for it.
//! - Loss recovery is NewReno's (see [`crate::cc::window_rule`]); with SACK the simulator's
//!   sender does the recovery and this controller only sets the windows.
//! - `K` uses the workspace's portable cube root ([`crate::math::cbrt`]), so the simulator stays
//!   bit-identical on every platform.

use crate::cc::reno::{Recovery, RenoConfig};
use crate::cc::window_rule::{RenoRecovery, WindowRule};
use crate::cc::AckEvent;
use crate::math::cbrt;
use crate::units::{Bytes, Time};

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
        CubicRule { fast_convergence: true, w_max: 0.0, w_last_max: 0.0, cwnd_prior: 0.0, epoch: None }
    }
}

impl CubicRule {
    pub fn new(fast_convergence: bool) -> CubicRule {
        CubicRule { fast_convergence, ..CubicRule::default() }
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
        ssthresh
    }
}

/// CUBIC: NewReno's recovery with RFC 9438's window rule.
pub type Cubic = RenoRecovery<CubicRule>;

impl Cubic {
    pub fn cubic(cfg: RenoConfig) -> Cubic {
        RenoRecovery::new(Recovery::NewReno, cfg, CubicRule::default())
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

    #[test]
    fn a_timeout_forgets_w_max() {
        let mut c = cubic_at(100);
        c.on_timeout(Time(0), Bytes(100_000));
        assert_eq!(c.cwnd(), Bytes(1000));
        assert_eq!(c.ssthresh(), Bytes(70_000));
        assert_eq!(c.rule().w_max(), 0.0);
    }
}
