//! ImTCP's full-speed mode (Cao Le Thanh Man, Hasegawa, Murata, ImTCP §5.2; seed `001`).
//!
//! Reno grows its window by one segment per RTT whatever the path, so on a high-speed path it
//! takes minutes to fill it, and on a lossy (wireless) path every random loss halves a window it
//! then regrows slowly. The full-speed mode uses ImTCP's inline measurement of the available
//! bandwidth `A` to grow fast while the window is far below what the path has room for and
//! slowly as it gets there. In congestion avoidance, per RTT:
//!
//! ```text
//!   cwnd ← cwnd + max(1, h · (1 − cwnd / (A · RTT)))          (segments; h > 1)
//! ```
//!
//! The paper's OCR mangles the equation ("Cwnd <~ Cwnd + max | 1,h| 1 — Cwnd / V = ARTT"); this is
//! headroom's reading, which fits the text around it: `h` sets how fast the window grows, and with
//! `h ≤ 1` the increase is `max(1, ≤ 1) = 1` segment per RTT, "the same as Reno TCP". As the
//! window approaches `A · RTT` the term `h (1 − cwnd/(A·RTT))` falls to Reno's one segment; above
//! it, Reno's one segment remains. Loss handling is NewReno's (the paper's Reno base halves on a
//! loss; headroom's frame, [`crate::cc::window_rule`]).
//!
//! Choices the paper leaves open:
//! - `A` is the EWMA of the measurement results with gain 1/8 (ImTCP's smoothed estimate Ā,
//!   §3.2, as ImTCP-bg uses), fed by [`super::CongestionControl::on_estimate`]; before the first result
//!   the mode grows as Reno.
//! - `RTT` is the smoothed RTT of the ACK (SRTT), falling back to the sample.
//! - The per-RTT increase is applied per ACK as Reno's is: `increase · mss² / cwnd` bytes.
//! - `h` defaults to 100, the one value the paper gives (Fig. 16); Fig. 15 does not say.

use crate::cc::reno::{Recovery, RenoConfig};
use crate::cc::window_rule::{halved_flight, reno_increase, RenoRecovery, WindowRule};
use crate::cc::AckEvent;
use crate::units::{Bytes, Rate, Time};

/// The parameter `h` the paper gives (Fig. 16).
pub const DEFAULT_H: f64 = 100.0;
/// Gain of the estimate's EWMA (ImTCP's Ā).
pub const GAMMA: f64 = 1.0 / 8.0;

/// The full-speed mode's window rule.
#[derive(Clone, Debug)]
pub struct FullSpeedRule {
    h: f64,
    /// Ā in bit/s.
    smoothed: Option<f64>,
}

impl FullSpeedRule {
    /// `h` must be positive (values up to 1 give Reno).
    pub fn new(h: f64) -> Result<FullSpeedRule, String> {
        if !(h.is_finite() && h > 0.0) {
            return Err(format!("h = {h}: must be a positive number"));
        }
        Ok(FullSpeedRule { h, smoothed: None })
    }
    /// Ā, the smoothed available bandwidth.
    pub fn available(&self) -> Option<Rate> {
        self.smoothed.map(|a| Rate(a.round() as u64))
    }
    /// The per-RTT increase in segments at window `cwnd` with `A · RTT` = `room` segments.
    pub fn increase_per_rtt(&self, cwnd_segments: f64, room_segments: Option<f64>) -> f64 {
        match room_segments {
            Some(room) if room > 0.0 => (self.h * (1.0 - cwnd_segments / room)).max(1.0),
            _ => 1.0,
        }
    }
}

impl WindowRule for FullSpeedRule {
    fn name(&self) -> &'static str {
        "imtcp-fullspeed"
    }
    fn on_estimate(&mut self, _now: Time, available: Rate) {
        let a = available.0 as f64;
        self.smoothed = Some(match self.smoothed {
            None => a,
            Some(s) => (1.0 - GAMMA) * s + GAMMA * a,
        });
    }
    fn increase(&mut self, ev: &AckEvent, cwnd: Bytes) -> Bytes {
        let mss = ev.mss.0.max(1);
        let rtt = ev.srtt.or(ev.rtt);
        let room = match (self.smoothed, rtt) {
            (Some(a), Some(r)) => Some(a / 8.0 * r.as_secs_f64() / mss as f64),
            _ => None,
        };
        let per_rtt = self.increase_per_rtt(cwnd.0 as f64 / mss as f64, room);
        Bytes((reno_increase(ev.mss, cwnd).0 as f64 * per_rtt).round() as u64)
    }
    fn on_congestion(&mut self, _now: Time, _cwnd: Bytes, in_flight: Bytes, mss: Bytes) -> Bytes {
        halved_flight(in_flight, mss)
    }
}

/// ImTCP full-speed mode: NewReno's recovery with the estimate-driven increase.
pub type ImtcpFullSpeed = RenoRecovery<FullSpeedRule>;

impl ImtcpFullSpeed {
    pub fn full_speed(h: f64, cfg: RenoConfig) -> Result<ImtcpFullSpeed, String> {
        Ok(RenoRecovery::new(Recovery::NewReno, cfg, FullSpeedRule::new(h)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::window_rule::tests::ack;
    use crate::cc::{CongestionControl, Reno};
    use crate::units::Dur;

    fn at(cwnd_segments: u64, h: f64) -> ImtcpFullSpeed {
        let cfg = RenoConfig { mss: Bytes(1000), initial_ssthresh: Some(Bytes(2000)), ..RenoConfig::default() };
        let mut c = ImtcpFullSpeed::full_speed(h, cfg).unwrap();
        c.set_cwnd(Bytes(cwnd_segments * 1000));
        c
    }

    /// Bytes one ACK adds at SRTT 100 ms.
    fn one_ack(c: &mut ImtcpFullSpeed) -> u64 {
        let before = c.cwnd().0;
        let mut ev = ack(1, 1000, 1000, 0, before);
        ev.srtt = Some(Dur::from_millis(100));
        c.on_ack(&ev);
        c.cwnd().0 - before
    }

    #[test]
    fn growth_slows_as_the_window_approaches_a_times_rtt() {
        // A = 80 Mbit/s, RTT 100 ms: A·RTT = 1000 segments of 1000 bytes. Per RTT the window
        // should grow by 100·(1 − w/1000) segments, at least 1: 90, 50, 10, 1, 1; per ACK
        // that is the per-RTT figure × mss²/cwnd (Reno's per-ACK share, in whole bytes).
        let mut added = Vec::new();
        for (w, per_rtt) in [(100u64, 90.0), (500, 50.0), (900, 10.0), (1000, 1.0), (1500, 1.0)] {
            let mut c = at(w, 100.0);
            c.on_estimate(Time::ZERO, Rate::from_mbps(80));
            let got = one_ack(&mut c);
            let reno_share = (1000 * 1000 / (w * 1000)).max(1) as f64;
            let want = (reno_share * per_rtt).round() as u64;
            assert_eq!(got, want, "window {w}: {got} bytes per ACK, expected {want}");
            added.push(got as f64 / reno_share);
        }
        assert!(added.windows(2).all(|p| p[0] >= p[1]), "per-RTT growth falls: {added:?}");
        // The smoothed estimate follows results with gain 1/8.
        let mut c = at(100, 100.0);
        c.on_estimate(Time::ZERO, Rate::from_mbps(80));
        c.on_estimate(Time::ZERO, Rate::from_mbps(160));
        assert_eq!(c.rule().available(), Some(Rate::from_mbps(90)));
    }

    #[test]
    fn with_h_at_most_one_or_no_estimate_it_is_reno() {
        let cfg = RenoConfig { mss: Bytes(1000), initial_ssthresh: Some(Bytes(2000)), ..RenoConfig::default() };
        for (h, estimate) in [(1.0, true), (0.5, true), (100.0, false)] {
            let mut c = ImtcpFullSpeed::full_speed(h, cfg).unwrap();
            let mut reno = Reno::newreno(cfg);
            c.set_cwnd(Bytes(50_000));
            reno.set_cwnd(Bytes(50_000));
            if estimate {
                c.on_estimate(Time::ZERO, Rate::from_mbps(800));
            }
            for i in 0..200 {
                let mut ev = ack(i, 1000 * (i + 1), 1000, 0, 50_000);
                ev.srtt = Some(Dur::from_millis(100));
                c.on_ack(&ev);
                reno.on_ack(&ev);
                assert_eq!(c.cwnd(), reno.cwnd(), "h = {h}, estimate {estimate}, ACK {i}");
            }
        }
        assert!(FullSpeedRule::new(0.0).is_err() && FullSpeedRule::new(f64::NAN).is_err());
    }
}
