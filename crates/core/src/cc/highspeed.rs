//! HighSpeed TCP (S. Floyd, RFC 3649, 2003).
//!
//! Standard TCP needs a loss rate of 2·10⁻¹⁰ to hold a 10 Gbit/s, 100 ms window of 83,000
//! segments; HighSpeed TCP changes the response function above a window of `Low_Window`
//! segments so that such a window needs only `High_P` = 10⁻⁷. Below `Low_Window` it is standard
//! TCP. Above it, congestion avoidance adds `a(w)` segments per RTT and a congestion event
//! multiplies the window by `1 − b(w)` (RFC 3649 §5), with, for `w` in segments,
//!
//! ```text
//!   S    = (ln High_P − ln Low_P) / (ln High_Window − ln Low_Window)
//!   p(w) = exp(ln Low_P + S (ln w − ln Low_Window))                     (the response function)
//!   b(w) = (High_Decrease − 0.5) (ln w − ln Low_Window) / (ln High_Window − ln Low_Window) + 0.5
//!   a(w) = w² p(w) · 2 b(w) / (2 − b(w))
//! ```
//!
//! and `Low_P = 1.5 / Low_Window²`, standard TCP's loss rate at `Low_Window` (its response
//! function `w = sqrt(1.5 / p)`). Parameters: `Low_Window` 38, `High_Window` 83,000, `High_P`
//! 10⁻⁷, `High_Decrease` 0.1 (the RFC's).
//!
//! Choices the RFC leaves open, and where headroom differs from Linux's `tcp_highspeed.c`:
//! - **Formulas, not a table.** Linux looks `a(w)`/`b(w)` up in a 73-row table built from these
//!   formulas at integer steps of `a`; headroom evaluates the formulas at the current window
//!   (with the workspace's portable `ln`/`exp`, so results are bit-identical everywhere). The
//!   tests check them against the RFC's Appendix B table.
//! - `a(w)` is applied per ACK as Reno's increase is: `a(w) · mss² / cwnd` bytes per ACK.
//! - The decrease applies `b(w)` to the flight size, as RFC 5681 halves it, with `w` the
//!   congestion window in segments when the loss is detected (Linux applies it to `cwnd`); below
//!   `Low_Window`, `b = 0.5` and this is exactly Reno's rule.
//! - Loss recovery is NewReno's (see [`crate::cc::window_rule`]).

use crate::cc::reno::{Recovery, RenoConfig};
use crate::cc::window_rule::{reno_increase, RenoRecovery, WindowRule};
use crate::cc::AckEvent;
use crate::math::{exp, ln};
use crate::units::{Bytes, Time};

/// `Low_Window`: standard TCP at or below this window (segments).
pub const LOW_WINDOW: f64 = 38.0;
/// `High_Window`: the window (segments) reached at `High_P`.
pub const HIGH_WINDOW: f64 = 83_000.0;
/// `High_P`: the loss rate that sustains `High_Window`.
pub const HIGH_P: f64 = 1e-7;
/// `High_Decrease`: `b(High_Window)`.
pub const HIGH_DECREASE: f64 = 0.1;

/// HighSpeed TCP's response function (RFC 3649 §5).
#[derive(Clone, Copy, Debug, Default)]
pub struct HighSpeedRule;

impl HighSpeedRule {
    /// `Low_P = 1.5 / Low_Window²`.
    fn low_p() -> f64 {
        1.5 / (LOW_WINDOW * LOW_WINDOW)
    }
    /// Where `w` lies between `Low_Window` and `High_Window` on a log scale, in [0, ∞).
    fn position(w: f64) -> f64 {
        ((ln(w) - ln(LOW_WINDOW)) / (ln(HIGH_WINDOW) - ln(LOW_WINDOW))).max(0.0)
    }
    /// `p(w)`: the loss rate at which HighSpeed TCP holds a window of `w` segments.
    pub fn p(w: f64) -> f64 {
        if w <= LOW_WINDOW {
            return 1.5 / (w * w).max(1.0);
        }
        exp(ln(Self::low_p()) + Self::position(w) * (ln(HIGH_P) - ln(Self::low_p())))
    }
    /// `b(w)`: the decrease factor.
    pub fn b(w: f64) -> f64 {
        if w <= LOW_WINDOW {
            return 0.5;
        }
        (HIGH_DECREASE - 0.5) * Self::position(w) + 0.5
    }
    /// `a(w)`: the increase in segments per RTT.
    pub fn a(w: f64) -> f64 {
        if w <= LOW_WINDOW {
            return 1.0;
        }
        let b = Self::b(w);
        (w * w * Self::p(w) * 2.0 * b / (2.0 - b)).max(1.0)
    }
}

impl WindowRule for HighSpeedRule {
    fn name(&self) -> &'static str {
        "highspeed"
    }
    fn increase(&mut self, ev: &AckEvent, cwnd: Bytes) -> Bytes {
        let mss = ev.mss.0.max(1);
        let w = cwnd.0 as f64 / mss as f64;
        Bytes((reno_increase(ev.mss, cwnd).0 as f64 * Self::a(w)).round() as u64)
    }
    fn on_congestion(&mut self, _now: Time, cwnd: Bytes, in_flight: Bytes, mss: Bytes) -> Bytes {
        let w = cwnd.0 as f64 / mss.0.max(1) as f64;
        let keep = 1.0 - Self::b(w);
        Bytes(((in_flight.0 as f64 * keep) as u64).max(2 * mss.0))
    }
}

/// HighSpeed TCP: NewReno's recovery with RFC 3649's response function.
pub type HighSpeed = RenoRecovery<HighSpeedRule>;

impl HighSpeed {
    pub fn highspeed(cfg: RenoConfig) -> HighSpeed {
        RenoRecovery::new(Recovery::NewReno, cfg, HighSpeedRule)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::window_rule::tests::ack;
    use crate::cc::{AckAction, CongestionControl};

    #[test]
    fn a_and_b_follow_the_rfc_table() {
        // RFC 3649 Appendix B: w, a(w), b(w) (rows where a(w) reaches a whole number).
        let table = [
            (38.0, 1.0, 0.50),
            (118.0, 2.0, 0.44),
            (221.0, 3.0, 0.41),
            (347.0, 4.0, 0.38),
            (495.0, 5.0, 0.37),
            (663.0, 6.0, 0.35),
            (83_000.0, 72.0, 0.10),
        ];
        for (w, a, b) in table {
            let (ours_a, ours_b) = (HighSpeedRule::a(w), HighSpeedRule::b(w));
            assert!((ours_a - a).abs() <= 0.05 * a + 0.1, "a({w}) = {ours_a}, RFC {a}");
            assert!((ours_b - b).abs() <= 0.01, "b({w}) = {ours_b}, RFC {b}");
        }
        // The response function passes through (Low_Window, Low_P) and (High_Window, High_P).
        assert!((HighSpeedRule::p(HIGH_WINDOW) / HIGH_P - 1.0).abs() < 1e-9);
        assert!((HighSpeedRule::p(LOW_WINDOW + 1e-9) * LOW_WINDOW * LOW_WINDOW / 1.5 - 1.0).abs() < 1e-6);
    }

    #[test]
    fn below_low_window_it_is_reno_and_above_it_grows_faster_and_cuts_less() {
        let cfg = RenoConfig { mss: Bytes(1000), initial_ssthresh: Some(Bytes(2000)), ..RenoConfig::default() };
        let mut hs = HighSpeed::highspeed(cfg);
        let mut reno = crate::cc::Reno::newreno(cfg);
        hs.set_cwnd(Bytes(20_000));
        reno.set_cwnd(Bytes(20_000));
        let ev = ack(1, 21_000, 1000, 0, 20_000);
        hs.on_ack(&ev);
        reno.on_ack(&ev);
        assert_eq!(hs.cwnd(), reno.cwnd(), "w = 20 < Low_Window: Reno's mss²/cwnd");

        // At 1000 segments: a(1000) ≈ 8 segments per RTT, b(1000) ≈ 0.33.
        hs.set_cwnd(Bytes(1_000_000));
        let before = hs.cwnd().0;
        hs.on_ack(&ack(2, 1_000_000, 1000, 0, 1_000_000));
        let added = hs.cwnd().0 - before;
        let expected = HighSpeedRule::a(1000.0);
        assert!((added as f64 - expected).abs() <= 1.0, "added {added} bytes per ACK, a(1000)·mss²/cwnd = {expected}");
        assert!(added >= 7, "{added}");
        for d in 1..=3 {
            let a = hs.on_ack(&ack(3, 1_000_000, 0, d, 1_000_000));
            assert_eq!(a == AckAction::FastRetransmit, d == 3);
        }
        let kept = hs.ssthresh().0 as f64 / 1_000_000.0;
        assert!((kept - (1.0 - HighSpeedRule::b(1000.0))).abs() < 1e-3, "kept {kept}");
        assert!(kept > 0.6, "b(1000) ≈ 0.33 keeps two thirds, not Reno's half: {kept}");
    }
}
