//! The round-trip-time estimator of RFC 6298 §2, written once for every sender in headroom (the
//! simulator's TCP, ImTCP's control unit, and the socket senders that come next).
//!
//! # Algorithm
//!
//! On the first sample `R`: `SRTT = R`, `RTTVAR = R / 2` (RFC 6298 §2.2). On every later sample
//! (§2.3), with β = 1/4 and α = 1/8, `RTTVAR` first, from the *old* `SRTT`:
//!
//! ```text
//! RTTVAR = (1 - β) RTTVAR + β |SRTT - R|
//! SRTT   = (1 - α) SRTT + α R
//! ```
//!
//! and the retransmission timeout is `RTO = SRTT + max(G, 4 RTTVAR)` (§2.2–2.3), clamped by the
//! caller's minimum and maximum ([`RttEstimator::rto`]).
//!
//! # Choices the RFC leaves open
//!
//! - Integer nanoseconds with truncating division (`(3 RTTVAR + |SRTT − R|) / 4`,
//!   `(7 SRTT + R) / 8`), as the simulator always did: results are bit-exact on every platform.
//!   Kernels keep these in scaled fixed point; at nanosecond resolution the difference is below
//!   any clock the RFC has in mind.
//! - A zero sample is counted as 1 ns, so `SRTT` is never zero (a zero SRTT would make rates
//!   divided by it infinite).
//! - Which samples are valid (Karn's rule, timestamps) is the sender's business: the estimator
//!   takes every sample it is given.
//! - The smallest sample is kept as well ([`RttEstimator::min_rtt`]): BECC, ImTCP-bg, LEDBAT and
//!   Vegas need it, and it is the same stream of samples.

use crate::units::Dur;

/// RFC 6298's SRTT/RTTVAR estimator, plus the minimum and latest sample.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RttEstimator {
    srtt: Option<Dur>,
    rttvar: Dur,
    min_rtt: Option<Dur>,
    latest: Option<Dur>,
}

impl RttEstimator {
    /// An estimator with no sample yet.
    pub const fn new() -> RttEstimator {
        RttEstimator { srtt: None, rttvar: Dur::ZERO, min_rtt: None, latest: None }
    }

    /// Takes one RTT sample (RFC 6298 §2.2 for the first, §2.3 for the others).
    pub fn on_sample(&mut self, sample: Dur) {
        let r = sample.max(Dur(1));
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = Dur(r.0 / 2);
            }
            Some(s) => {
                self.rttvar = Dur((3 * self.rttvar.0 + s.0.abs_diff(r.0)) / 4);
                self.srtt = Some(Dur((7 * s.0 + r.0) / 8));
            }
        }
        self.min_rtt = Some(self.min_rtt.map_or(r, |m| m.min(r)));
        self.latest = Some(r);
    }

    /// Starts from another estimator's smoothed RTT when this one has no sample yet (ImTCP's
    /// control unit adopts TCP's SRTT until it sees samples of its own); `RTTVAR` stays zero, so
    /// the next sample is taken as a §2.3 update of the adopted value.
    pub fn adopt_srtt(&mut self, srtt: Dur) {
        if self.srtt.is_none() {
            self.srtt = Some(srtt);
        }
    }

    /// Smoothed RTT; `None` before the first sample.
    pub fn srtt(&self) -> Option<Dur> {
        self.srtt
    }

    /// RTT variation.
    pub fn rttvar(&self) -> Dur {
        self.rttvar
    }

    /// Smallest sample seen.
    pub fn min_rtt(&self) -> Option<Dur> {
        self.min_rtt
    }

    /// The most recent sample.
    pub fn latest(&self) -> Option<Dur> {
        self.latest
    }

    /// `SRTT + max(G, 4 RTTVAR)` clamped to `[min, max]`; `None` before the first sample (the
    /// caller uses its initial RTO then, RFC 6298 §2.1).
    pub fn rto(&self, granularity: Dur, min: Dur, max: Dur) -> Option<Dur> {
        let srtt = self.srtt?;
        let var = Dur(self.rttvar.0.saturating_mul(4));
        Some(Dur(srtt.0.saturating_add(granularity.max(var).0)).max(min).min(max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_sample_sets_srtt_and_half_variance() {
        let mut e = RttEstimator::new();
        assert_eq!(e.rto(Dur::from_millis(1), Dur::ZERO, Dur::MAX), None);
        e.on_sample(Dur::from_millis(100));
        assert_eq!(e.srtt(), Some(Dur::from_millis(100)));
        assert_eq!(e.rttvar(), Dur::from_millis(50));
        // RTO = 100 + 4 × 50 = 300 ms.
        assert_eq!(e.rto(Dur::from_millis(1), Dur::ZERO, Dur::MAX), Some(Dur::from_millis(300)));
    }

    #[test]
    fn later_samples_follow_rfc6298_with_the_old_srtt() {
        let mut e = RttEstimator::new();
        e.on_sample(Dur::from_millis(100));
        e.on_sample(Dur::from_millis(200));
        // RTTVAR = 3/4 · 50 + 1/4 · |100 − 200| = 62.5 ms; SRTT = 7/8 · 100 + 1/8 · 200 = 112.5 ms.
        assert_eq!(e.rttvar(), Dur(62_500_000));
        assert_eq!(e.srtt(), Some(Dur(112_500_000)));
        assert_eq!(e.min_rtt(), Some(Dur::from_millis(100)));
        assert_eq!(e.latest(), Some(Dur::from_millis(200)));
    }

    #[test]
    fn rto_is_clamped_and_granularity_dominates_a_small_variance() {
        let mut e = RttEstimator::new();
        for _ in 0..200 {
            e.on_sample(Dur::from_millis(10));
        }
        assert_eq!(e.rttvar(), Dur::ZERO);
        // SRTT + max(G, 0) = 10 + 500 ms, raised to the 1 s minimum.
        assert_eq!(e.rto(Dur::from_millis(500), Dur::from_secs(1), Dur::from_secs(60)), Some(Dur::from_secs(1)));
        assert_eq!(e.rto(Dur::from_millis(1), Dur::ZERO, Dur::MAX), Some(Dur::from_millis(11)));
        assert_eq!(e.rto(Dur::from_millis(1), Dur::ZERO, Dur::from_millis(5)), Some(Dur::from_millis(5)));
    }

    #[test]
    fn adopted_srtt_is_updated_not_replaced() {
        let mut e = RttEstimator::new();
        e.adopt_srtt(Dur::from_millis(80));
        e.adopt_srtt(Dur::from_millis(10)); // ignored: already has an SRTT
        e.on_sample(Dur::from_millis(160));
        assert_eq!(e.srtt(), Some(Dur::from_millis(90)));
        assert_eq!(e.rttvar(), Dur::from_millis(20));
    }

    #[test]
    fn zero_sample_counts_as_one_nanosecond() {
        let mut e = RttEstimator::new();
        e.on_sample(Dur::ZERO);
        assert_eq!(e.srtt(), Some(Dur(1)));
    }
}
