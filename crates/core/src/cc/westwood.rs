//! TCP Westwood+ (S. Mascolo, L. A. Grieco, R. Ferorelli, P. Camarda, G. Piscitelli,
//! "Performance evaluation of Westwood+ TCP congestion control", Performance Evaluation 2004;
//! the original: Mascolo, Casetti, Gerla, Sanadidi, Wang, MobiCom 2001), as Linux
//! `tcp_westwood.c` runs it.
//!
//! Reno halves its window on every loss, whether the loss came from a full queue or from a
//! noisy wireless link. Westwood instead sets the window after a loss to what the path was
//! seen to deliver: the *bandwidth estimate* (BWE) from the rate of returning ACKs, times the
//! smallest RTT seen (the path's pipe without queue):
//!
//! ```text
//!   on the third duplicate ACK:  ssthresh = max(BWE × RTT_min, 2 segments); cwnd = ssthresh (+3 in recovery)
//!   on a timeout:                ssthresh = max(BWE × RTT_min, 2 segments); cwnd = 1 segment
//! ```
//!
//! Growth is Reno's. The estimate is Westwood+'s: one sample per RTT, filtered twice with gain
//! 1/8 ([`crate::imtcp::passive::Westwood`] with [`WestwoodVariant::Plus`], the same estimator the
//! ImTCP comparison watches passively: one estimator, not two).
//!
//! Choices, and where this differs from Linux:
//! - Linux sets `ssthresh` by Reno's halving when recovery begins and replaces both `ssthresh`
//!   and `cwnd` by BWE × RTT_min when the reduction completes (`CA_EVENT_COMPLETE_CWR`); here the
//!   Westwood `ssthresh` is set when recovery begins (the papers' description), and NewReno's
//!   full ACK then sets `cwnd = min(ssthresh, FlightSize + 1 segment)`.
//! - Before the first estimate (no sample yet), a loss halves the flight size as Reno does.
//! - `RTT_min` is the smallest RTT sample of the connection (Linux keeps the same, `rtt_min`).

use crate::cc::reno::{Recovery, RenoConfig};
use crate::cc::window_rule::{halved_flight, reno_increase, RenoRecovery, WindowRule};
use crate::cc::AckEvent;
use crate::imtcp::passive::{PassiveEstimator, Westwood, WestwoodVariant};
use crate::units::{Bytes, Dur, Time};

/// Westwood+'s window rule: Reno's growth, BWE × RTT_min after a loss.
#[derive(Clone, Debug)]
pub struct WestwoodRule {
    estimator: Westwood,
    rtt_min: Option<Dur>,
}

impl Default for WestwoodRule {
    fn default() -> Self {
        WestwoodRule { estimator: Westwood::new(WestwoodVariant::Plus, Dur::ZERO), rtt_min: None }
    }
}

impl WestwoodRule {
    /// The current bandwidth estimate × RTT_min, in bytes (`None` before the first sample).
    pub fn bandwidth_delay(&self) -> Option<Bytes> {
        let bwe = self.estimator.estimate()?;
        let rtt_min = self.rtt_min?;
        Some(bwe.bytes_in(rtt_min))
    }
    pub fn estimator(&self) -> &Westwood {
        &self.estimator
    }
    fn reduced(&self, in_flight: Bytes, mss: Bytes) -> Bytes {
        match self.bandwidth_delay() {
            Some(w) => Bytes(w.0.max(2 * mss.0)),
            None => halved_flight(in_flight, mss),
        }
    }
}

impl WindowRule for WestwoodRule {
    fn name(&self) -> &'static str {
        "westwood+"
    }
    fn on_ack(&mut self, ev: &AckEvent) {
        self.estimator.on_ack(ev);
        if let Some(r) = ev.rtt {
            self.rtt_min = Some(self.rtt_min.map_or(r, |m| m.min(r)));
        }
    }
    fn increase(&mut self, ev: &AckEvent, cwnd: Bytes) -> Bytes {
        reno_increase(ev.mss, cwnd)
    }
    fn on_congestion(&mut self, _now: Time, _cwnd: Bytes, in_flight: Bytes, mss: Bytes) -> Bytes {
        self.reduced(in_flight, mss)
    }
}

/// Westwood+: NewReno's recovery, Reno's growth, BWE × RTT_min after a loss.
pub type WestwoodPlus = RenoRecovery<WestwoodRule>;

impl WestwoodPlus {
    pub fn westwood_plus(cfg: RenoConfig) -> WestwoodPlus {
        RenoRecovery::new(Recovery::NewReno, cfg, WestwoodRule::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::window_rule::tests::ack;
    use crate::cc::CongestionControl;

    #[test]
    fn a_loss_sets_ssthresh_to_bwe_times_rtt_min() {
        let cfg = RenoConfig { mss: Bytes(1000), initial_ssthresh: Some(Bytes(2000)), ..RenoConfig::default() };
        let mut w = WestwoodPlus::westwood_plus(cfg);
        w.set_cwnd(Bytes(40_000));
        // ACKs of one segment every 1 ms (8 Mbit/s) for 1 s; RTT samples 60 ms, min 40 ms.
        for i in 1..=1000u64 {
            let mut ev = ack(i, i * 1000, 1000, 0, 40_000);
            ev.rtt = Some(Dur::from_millis(if i == 500 { 40 } else { 60 }));
            w.on_ack(&ev);
        }
        let bwe = w.rule().estimator().estimate().unwrap().as_mbps();
        assert!((bwe - 8.0).abs() < 0.3, "BWE {bwe}");
        let expected = w.rule().bandwidth_delay().unwrap();
        assert!((expected.0 as f64 - 40_000.0).abs() < 2000.0, "8 Mbit/s × 40 ms = 40 kB: {expected}");
        // A random loss (three duplicate ACKs) with a window far above the pipe: Reno would
        // halve the flight (50 kB); Westwood+ keeps BWE × RTT_min.
        for d in 1..=3 {
            let mut ev = ack(1001, 1_000_000, 0, d, 100_000);
            ev.rtt = None;
            w.on_ack(&ev);
        }
        assert_eq!(w.ssthresh(), expected);
        w.on_timeout(Time(2_000_000_000), Bytes(100_000));
        assert_eq!(w.cwnd(), Bytes(1000));
        assert_eq!(w.ssthresh(), w.rule().bandwidth_delay().unwrap());
    }

    #[test]
    fn before_any_estimate_a_loss_halves_the_flight() {
        let mut w = WestwoodPlus::westwood_plus(RenoConfig { mss: Bytes(1000), ..RenoConfig::default() });
        w.set_cwnd(Bytes(20_000));
        w.on_timeout(Time(1), Bytes(20_000));
        assert_eq!(w.ssthresh(), Bytes(10_000));
    }
}
