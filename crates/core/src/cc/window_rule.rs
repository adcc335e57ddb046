//! Reno's loss recovery with another window rule: the frame that HighSpeed TCP, CUBIC,
//! Westwood+ and ImTCP's full-speed mode share.
//!
//! Those controllers change two things of Reno (RFC 5681) and nothing else: how far the
//! congestion window grows per ACK in *congestion avoidance*, and what the slow-start threshold
//! becomes on a *congestion event* (the third duplicate ACK, or a retransmission timeout). Slow
//! start, fast retransmit, fast recovery's window inflation, NewReno's partial ACKs (RFC 6582)
//! and the timeout's loss window of one segment stay Reno's, as they do in Linux, where
//! `tcp_congestion_ops` supplies `cong_avoid` and `ssthresh` and the stack does the recovery.
//! [`RenoRecovery`] runs a [`Reno`] and lets a [`WindowRule`] override exactly those two
//! decisions, so the recovery logic is written once.
//!
//! How the override works, per ACK:
//! 1. the rule sees the ACK ([`WindowRule::on_ack`]) before anything changes (estimators such as
//!    Westwood+'s bandwidth filter and the full-speed mode's estimate read it);
//! 2. Reno processes the ACK;
//! 3. if Reno entered fast recovery, `ssthresh` becomes [`WindowRule::on_congestion`]`(cwnd,
//!    flight)` and `cwnd = ssthresh + 3 segments` (Reno's inflation on entry);
//! 4. if the ACK acknowledged new data in congestion avoidance (`cwnd ≥ ssthresh` before the ACK,
//!    not in recovery before or after), Reno's increase of `mss²/cwnd` is replaced by
//!    [`WindowRule::increase`].
//!
//! A retransmission timeout sets `ssthresh` from [`WindowRule::on_timeout`], except that a
//! timeout during NewReno's recovery keeps the reduction made when the recovery began (the
//! same reasoning as Reno's, see [`crate::cc::reno`]); `cwnd` becomes one segment.
//!
//! Choice left open: the rules are per ACK like Reno's (one increment per ACK, however many
//! segments it covers), except where the rule's definition is in acknowledged segments (CUBIC
//! counts them, as RFC 9438 and Linux do).

use crate::cc::reno::{Recovery, Reno, RenoConfig};
use crate::cc::{AckAction, AckEvent, CongestionControl, SentEvent, Window};
use crate::units::{Bytes, Rate, Time};

/// The part of a Reno-family controller that differs from Reno.
pub trait WindowRule {
    /// Short name ("cubic", "highspeed", ...).
    fn name(&self) -> &'static str;
    /// Every ACK, before the window changes.
    fn on_ack(&mut self, _ev: &AckEvent) {}
    /// A result of the inline measurement below the sender (see
    /// [`CongestionControl::on_estimate`]).
    fn on_estimate(&mut self, _now: Time, _available: Rate) {}
    /// An ACK of new data in slow start (`cwnd < ssthresh`, not in recovery), before the window
    /// changes: `true` ends slow start here (`ssthresh = cwnd`, and this ACK already grows the
    /// window by [`WindowRule::increase`]), as CUBIC's HyStart does. Default: never.
    fn exits_slow_start(&mut self, _ev: &AckEvent, _cwnd: Bytes) -> bool {
        false
    }
    /// Bytes added to `cwnd` by this ACK of new data in congestion avoidance.
    fn increase(&mut self, ev: &AckEvent, cwnd: Bytes) -> Bytes;
    /// `ssthresh` after a congestion event detected by duplicate ACKs at `now`, with the window
    /// and the flight size when it was detected.
    fn on_congestion(&mut self, now: Time, cwnd: Bytes, in_flight: Bytes, mss: Bytes) -> Bytes;
    /// `ssthresh` after a retransmission timeout (default: as a congestion event).
    fn on_timeout(&mut self, now: Time, cwnd: Bytes, in_flight: Bytes, mss: Bytes) -> Bytes {
        self.on_congestion(now, cwnd, in_flight, mss)
    }
    /// A third window capping the send window (`None`: none).
    fn ceiling(&self) -> Option<Bytes> {
        None
    }
}

/// Reno's (or NewReno's) loss recovery with a [`WindowRule`]'s growth and reduction.
#[derive(Clone, Debug)]
pub struct RenoRecovery<R> {
    reno: Reno,
    rule: R,
}

impl<R: WindowRule> RenoRecovery<R> {
    pub fn new(recovery: Recovery, cfg: RenoConfig, rule: R) -> RenoRecovery<R> {
        RenoRecovery { reno: Reno::new(recovery, cfg), rule }
    }
    pub fn rule(&self) -> &R {
        &self.rule
    }
    pub fn cwnd(&self) -> Bytes {
        self.reno.cwnd()
    }
    pub fn ssthresh(&self) -> Bytes {
        self.reno.ssthresh()
    }
    /// Overrides `cwnd` (tests and scripted starts).
    pub fn set_cwnd(&mut self, cwnd: Bytes) {
        self.reno.set_cwnd(cwnd);
    }
    /// Overrides `ssthresh` (tests and scripted starts).
    pub fn set_ssthresh(&mut self, ssthresh: Bytes) {
        self.reno.set_ssthresh(ssthresh);
    }
}

impl<R: WindowRule> CongestionControl for RenoRecovery<R> {
    fn name(&self) -> &'static str {
        self.rule.name()
    }

    fn on_ack(&mut self, ev: &AckEvent) -> AckAction {
        self.rule.on_ack(ev);
        let mss = self.reno.mss();
        let cwnd_before = self.reno.cwnd();
        let slow_start = !self.reno.in_recovery() && cwnd_before < self.reno.ssthresh();
        if slow_start && ev.newly_acked.0 > 0 && self.rule.exits_slow_start(ev, cwnd_before) {
            self.reno.set_ssthresh(cwnd_before);
        }
        let avoidance = !self.reno.in_recovery() && cwnd_before >= self.reno.ssthresh();
        let action = self.reno.on_ack(ev);
        if action == AckAction::FastRetransmit {
            let ssthresh = self.rule.on_congestion(ev.now, cwnd_before, ev.in_flight, mss);
            self.reno.set_ssthresh(ssthresh);
            self.reno.set_cwnd(self.reno.ssthresh() + Bytes(3 * mss.0));
        } else if avoidance && ev.newly_acked.0 > 0 && !self.reno.in_recovery() {
            let grown = cwnd_before + self.rule.increase(ev, cwnd_before);
            self.reno.set_cwnd(grown);
        }
        action
    }

    fn on_timeout(&mut self, now: Time, in_flight: Bytes) {
        let keep = self.reno.in_recovery() && self.reno.variant() == Recovery::NewReno;
        let cwnd_before = self.reno.cwnd();
        self.reno.on_timeout(now, in_flight);
        if !keep {
            let ssthresh = self.rule.on_timeout(now, cwnd_before, in_flight, self.reno.mss());
            self.reno.set_ssthresh(ssthresh);
        }
    }

    fn on_sent(&mut self, ev: &SentEvent) {
        self.reno.on_sent(ev);
    }

    fn on_estimate(&mut self, now: Time, available: Rate) {
        self.rule.on_estimate(now, available);
    }

    fn window(&self) -> Window {
        Window { ceiling: self.rule.ceiling(), ..self.reno.window() }
    }

    fn in_recovery(&self) -> bool {
        self.reno.in_recovery()
    }
}

/// Reno's congestion-avoidance increase for one ACK: `mss² / cwnd` bytes (at least one), about
/// one segment per RTT ([`Reno`]'s rule, in the same integer arithmetic). Rules that grow by
/// `a` segments per RTT add `a` times this.
pub fn reno_increase(mss: Bytes, cwnd: Bytes) -> Bytes {
    Bytes((mss.0 * mss.0 / cwnd.0.max(1)).max(1))
}

/// RFC 5681's reduction: half the flight size, at least two segments.
pub fn halved_flight(in_flight: Bytes, mss: Bytes) -> Bytes {
    Bytes((in_flight.0 / 2).max(2 * mss.0))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Reno's own rule: [`RenoRecovery`] with it must behave exactly as [`Reno`].
    #[derive(Clone, Copy, Debug, Default)]
    struct RenoRule;

    impl WindowRule for RenoRule {
        fn name(&self) -> &'static str {
            "reno-rule"
        }
        fn increase(&mut self, ev: &AckEvent, cwnd: Bytes) -> Bytes {
            reno_increase(ev.mss, cwnd)
        }
        fn on_congestion(&mut self, _now: Time, _cwnd: Bytes, in_flight: Bytes, mss: Bytes) -> Bytes {
            halved_flight(in_flight, mss)
        }
    }

    /// An ACK with the fields the controllers read.
    pub(crate) fn ack(now_ms: u64, ack: u64, newly: u64, dup: u32, flight: u64) -> AckEvent {
        AckEvent {
            now: Time(now_ms * 1_000_000),
            ack,
            newly_acked: Bytes(newly),
            dup_acks: dup,
            in_flight: Bytes(flight),
            snd_max: ack + flight,
            mss: Bytes(1000),
            ..Default::default()
        }
    }

    #[test]
    fn the_frame_with_renos_rule_is_newreno() {
        let cfg = RenoConfig { mss: Bytes(1000), initial_ssthresh: Some(Bytes(8000)), ..RenoConfig::default() };
        let mut framed = RenoRecovery::new(Recovery::NewReno, cfg, RenoRule);
        let mut plain = Reno::newreno(cfg);
        // Slow start, avoidance, a loss with recovery, partial and full ACKs, a timeout.
        let mut events = Vec::new();
        let mut a = 0;
        for i in 0..40 {
            a += 1000;
            events.push(ack(i, a, 1000, 0, 10_000));
        }
        for d in 1..=5 {
            events.push(ack(50, a, 0, d, 12_000));
        }
        events.push(ack(60, a + 3000, 3000, 0, 9000));
        events.push(ack(61, a + 12_000, 9000, 0, 0));
        for ev in &events {
            assert_eq!(framed.on_ack(ev), plain.on_ack(ev));
            assert_eq!(framed.window(), plain.window(), "after {ev:?}");
        }
        framed.on_timeout(Time(1), Bytes(10_000));
        plain.on_timeout(Time(1), Bytes(10_000));
        assert_eq!(framed.window(), plain.window());
    }
}
