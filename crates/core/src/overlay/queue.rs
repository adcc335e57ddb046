//! Policy D (headroom's, not in Maki et al.): split while the proxy's own queueing delay is short.

use super::{PassReason, SplitDecision};
use crate::units::{Dur, Time};

/// Policy D: split a new connection while the smoothed time packets wait in front of the proxy's
/// CPU is below `target`.
///
/// Why: policy C (§3.2) infers overload from a packet count averaged with weight 1/8 per whole
/// second, so it reacts to a load change after several seconds and needs `t` (the CPU cost per
/// packet) to be known and constant. What hurts a split connection is the *delay* the proxy adds;
/// the proxy measures it directly for every packet it serves. D keeps
/// `q ← q + (w − q)/8` over the per-packet waits `w` (the same 1/8 gain as C and as RFC 6298's
/// SRTT, but per packet instead of per second) and splits while `q < target`.
///
/// Choices: when the CPU has served nothing for `idle_reset` the queue is empty, so `q` is reset
/// to zero (otherwise a stale high value would block splitting forever on an idle proxy);
/// `target` is a delay budget that the operator sets relative to the RTTs the proxy shortens
/// (`headroom reproduce overlay-policy-d` uses 1 ms with a 5 ms and a 30 ms receiver-side delay).
///
/// What D (or any split policy) cannot change: a connection the proxy does not split crosses it
/// on the fast path and never waits for its CPU, so its delay is the same whichever policy runs.
/// A policy changes the non-split *curve* only through which transfers it leaves unsplit; on the
/// Fig. 7 and Fig. 8 workloads the transfers left unsplit under both C and D have the same delay
/// in both runs (`headroom reproduce overlay-policy-d` pairs them and prints the differences).
#[derive(Clone, Debug, PartialEq)]
pub struct SplitWhileShortQueue {
    pub target: Dur,
    pub idle_reset: Dur,
    smoothed: Dur,
    last_sample: Option<Time>,
}

impl SplitWhileShortQueue {
    /// The `idle_reset` the simulator's `overlay-policy-d` and the real proxy's `--policy d` use:
    /// 50 ms, 1000 packet times at the simulator's `t` = 50 µs and 200 at the kernel runs' 250 µs —
    /// long against the gaps between a busy CPU's jobs, short against a web transfer.
    pub const IDLE_RESET: Dur = Dur::from_millis(50);

    pub fn new(target: Dur, idle_reset: Dur) -> SplitWhileShortQueue {
        SplitWhileShortQueue { target, idle_reset, smoothed: Dur::ZERO, last_sample: None }
    }

    fn expire(&mut self, now: Time) {
        if let Some(last) = self.last_sample {
            if now.saturating_since(last) >= self.idle_reset {
                self.smoothed = Dur::ZERO;
            }
        }
    }

    /// The CPU finished a packet at `now` that had waited `waited`.
    pub fn on_queue_delay(&mut self, now: Time, waited: Dur) {
        self.expire(now);
        let q = self.smoothed.as_nanos() as i128;
        let w = waited.as_nanos() as i128;
        self.smoothed = Dur((q + (w - q) / 8).max(0) as u64);
        self.last_sample = Some(now);
    }

    /// The smoothed queueing delay at `now`.
    pub fn delay(&mut self, now: Time) -> Dur {
        self.expire(now);
        self.smoothed
    }

    pub fn decide(&mut self, now: Time) -> SplitDecision {
        let delay = self.delay(now);
        if delay < self.target {
            SplitDecision::Split
        } else {
            SplitDecision::Pass(PassReason::QueueTooLong { delay, target: self.target })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_d_stops_splitting_when_the_queue_grows_and_resumes_when_it_drains() {
        let mut d = SplitWhileShortQueue::new(Dur::from_millis(2), Dur::from_millis(100));
        let ms = |m: u64| Time(m * 1_000_000);
        for i in 0..50 {
            d.on_queue_delay(ms(i), Dur::from_micros(100));
        }
        assert!(d.decide(ms(50)).is_split());
        // The queue builds to 10 ms waits: the average crosses 2 ms within a few dozen packets.
        let mut first_pass = None;
        for i in 0..100 {
            d.on_queue_delay(ms(50) + Dur::from_micros(10 * i), Dur::from_millis(10));
            if first_pass.is_none() && !d.decide(ms(50) + Dur::from_micros(10 * i)).is_split() {
                first_pass = Some(i);
            }
        }
        let n = first_pass.expect("never stopped splitting");
        assert!((1..20).contains(&n), "{n}");
        // Short waits again bring it back below the target.
        for i in 0..100 {
            d.on_queue_delay(ms(60 + i), Dur::ZERO);
        }
        assert!(d.decide(ms(160)).is_split());
        // And an idle CPU resets a high value.
        d.on_queue_delay(ms(200), Dur::from_secs(1));
        assert!(!d.decide(ms(201)).is_split());
        assert!(d.decide(ms(301)).is_split());
    }
}
