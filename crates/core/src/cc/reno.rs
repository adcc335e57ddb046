//! TCP Reno (RFC 5681) and NewReno (RFC 6582) congestion control.
//!
//! Slow start grows `cwnd` by one segment per ACK that acknowledges new data (by the bytes
//! acknowledged when fewer than a segment, RFC 5681 §3.1 with L = 1 SMSS), congestion avoidance
//! by `mss * mss / cwnd` per such ACK (about one segment per RTT; with delayed ACKs about half
//! that, as in ns-2 and the RFC's per-ACK rule). The third duplicate ACK triggers fast
//! retransmit: `ssthresh = max(FlightSize / 2, 2 * SMSS)`, `cwnd = ssthresh + 3 * SMSS`, and every
//! further duplicate ACK inflates `cwnd` by one segment.
//!
//! The two variants differ only in what ends fast recovery:
//! - **Reno** leaves it on the first ACK of new data, partial or not, deflating `cwnd` to
//!   `ssthresh`. With several losses in one window it must collect three fresh duplicate ACKs per
//!   further loss, halving each time, and usually ends in a retransmission timeout: the
//!   "intermittent transfer" that BECC (Kugimoto & Amagai 1997, §2) describes.
//! - **NewReno** (RFC 6582 §3.2) remembers `recover = snd_max` on entry. A partial ACK
//!   (below `recover`) retransmits the next hole, deflates `cwnd` by the bytes acknowledged and adds
//!   back one segment, and stays in recovery; a full ACK sets `cwnd = min(ssthresh, FlightSize +
//!   SMSS)` (the RFC's option 1). Duplicate ACKs whose cumulative ACK does not pass the previous
//!   `recover` do not start a new recovery (the RFC's "careful" variant).
//!
//! A retransmission timeout sets `ssthresh = max(FlightSize / 2, 2 * SMSS)` and `cwnd` to one
//! segment (the loss window), and leaves recovery.
//!
//! **A timeout during NewReno's fast recovery keeps the recovery's `ssthresh`.** RFC 6582 §3.2
//! step 4 ends recovery on a timeout but does not say what `FlightSize` means then. The sender
//! knows only `snd_max − snd_una`, and during a recovery that one RTT does not end (a lost
//! retransmission, or more holes than the impatient timer allows for) that figure grows by one
//! segment per duplicate ACK: each one let a new segment out while the segment it reports had
//! left the network. Halving it gives an `ssthresh` far above what the path holds: on a 50 Mbit/s,
//! 20 ms path with a 100-packet buffer (BDP + buffer = 183 segments) it reached 400–460
//! segments, so every slow start overshot, lost hundreds of segments and timed out again; the
//! flow delivered 20.6 Mbit/s with 58 timeouts where Reno delivers 47.8. The reduction for this
//! congestion event was made when recovery began, so NewReno keeps it, as Linux's
//! `tcp_enter_loss` does ("reduce ssthresh if it has not yet been made inside this window") and
//! as ns-3's NewReno effectively does (its bytes in flight leave out segments that duplicate ACKs
//! reported). Reno keeps halving `snd_max − snd_una`: the 4.4BSD and ns-2 Reno the papers used
//! did so (from the inflated `cwnd`, which is the same figure), and BECC's and ImTCP's
//! reproductions depend on it.
//!
//! **The recover guard** ([`RenoConfig::recover_guard`], Reno only; NewReno always has it):
//! a third duplicate ACK starts fast retransmit only when the cumulative ACK has passed
//! `recover`, the highest sequence sent when the last fast retransmit or timeout happened. This
//! is ns-2's `bugFix_` (on by default in ns-2's `Agent/TCP`, "avoids problems with multiple
//! fast retransmits in one window of data"): after a timeout, go-back-N resends segments the
//! receiver already holds, whose duplicate ACKs would otherwise start a fresh fast retransmit
//! and halve `ssthresh` again; with several losses in one window, the later holes wait for
//! the timeout instead of halving once each. Off by default here, because 4.4BSD's Reno, which
//! BECC's experiments reproduce, had no such guard; the ImTCP scenarios (ns-2 papers) turn it
//! on for every flow.
//!
//! The threshold rule is selectable ([`SsthreshRule`]): RFC 5681 halves the *flight size*;
//! RFC 2001 and the 4.4BSD code of the 1990s halved `min(cwnd, receiver window)`, where `cwnd`
//! still carries fast recovery's inflation. With a receiver window far above the path's capacity
//! the old rule sets `ssthresh` far above what the path holds, so every restart overshoots again:
//! one ingredient of BECC's intermittent transfer.
//!
//! Choices the RFCs leave open: the initial window defaults to 2 segments (RFC 5681 allows up to
//! 4; ns-2 uses 1, which a scenario can select); the initial `ssthresh` is unlimited.

use crate::cc::{AckAction, AckEvent, CongestionControl, SentEvent, Window};
use crate::units::{Bytes, Time};

/// Which fast-recovery rule ends recovery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovery {
    Reno,
    NewReno,
}

/// How a loss sets `ssthresh`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SsthreshRule {
    /// RFC 5681: `max(FlightSize / 2, 2 * SMSS)`.
    FlightSize,
    /// RFC 2001 / 4.4BSD: `max(min(cwnd, receiver_window) / 2, 2 * SMSS)`.
    Window { receiver_window: Bytes },
}

/// Parameters of [`Reno`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RenoConfig {
    pub mss: Bytes,
    /// Initial window in segments.
    pub initial_window: u32,
    /// Initial slow-start threshold (`None`: unlimited).
    pub initial_ssthresh: Option<Bytes>,
    pub ssthresh_rule: SsthreshRule,
    /// 4.4BSD's congestion avoidance: `mss * mss / cwnd + mss / 8` per ACK (the extra eighth
    /// of a segment per ACK makes each buffer overflow lose several segments of one window).
    pub bsd_increase: bool,
    /// Reno: no fast retransmit until the cumulative ACK passes `recover` (ns-2's `bugFix_`;
    /// module doc). NewReno always behaves so (RFC 6582's careful variant).
    pub recover_guard: bool,
}

impl Default for RenoConfig {
    fn default() -> Self {
        RenoConfig {
            mss: Bytes(1460),
            initial_window: 2,
            initial_ssthresh: None,
            ssthresh_rule: SsthreshRule::FlightSize,
            bsd_increase: false,
            recover_guard: false,
        }
    }
}

/// Reno / NewReno controller state.
#[derive(Clone, Debug)]
pub struct Reno {
    variant: Recovery,
    rule: SsthreshRule,
    bsd_increase: bool,
    recover_guard: bool,
    mss: u64,
    cwnd: u64,
    ssthresh: u64,
    in_recovery: bool,
    /// `recover`: `snd_max` when the last recovery (or timeout) began.
    recover: u64,
    /// Highest sequence number sent, learned from [`CongestionControl::on_sent`].
    snd_max: u64,
}

impl Reno {
    pub fn new(variant: Recovery, cfg: RenoConfig) -> Reno {
        let mss = cfg.mss.0.max(1);
        Reno {
            variant,
            rule: cfg.ssthresh_rule,
            bsd_increase: cfg.bsd_increase,
            recover_guard: cfg.recover_guard || variant == Recovery::NewReno,
            mss,
            cwnd: mss * cfg.initial_window.max(1) as u64,
            ssthresh: cfg.initial_ssthresh.map_or(u64::MAX / 4, |b| b.0.max(2 * mss)),
            in_recovery: false,
            recover: 0,
            snd_max: 0,
        }
    }
    #[allow(clippy::self_named_constructors)]
    pub fn reno(cfg: RenoConfig) -> Reno {
        Reno::new(Recovery::Reno, cfg)
    }
    pub fn newreno(cfg: RenoConfig) -> Reno {
        Reno::new(Recovery::NewReno, cfg)
    }
    pub fn variant(&self) -> Recovery {
        self.variant
    }
    pub fn cwnd(&self) -> Bytes {
        Bytes(self.cwnd)
    }
    pub fn ssthresh(&self) -> Bytes {
        Bytes(self.ssthresh)
    }
    /// Overrides `cwnd` (for controllers built on Reno that rescale it, e.g. ImTCP-bg's
    /// `cwnd × RTT_min / RTT_cur`). Never below one byte.
    pub fn set_cwnd(&mut self, cwnd: Bytes) {
        self.cwnd = cwnd.0.max(1);
    }

    /// Overrides `ssthresh` (for controllers built on Reno that leave slow start on their own
    /// congestion signal, e.g. ImTCP-bg's queue detection). Never below two segments.
    pub fn set_ssthresh(&mut self, ssthresh: Bytes) {
        self.ssthresh = ssthresh.0.max(2 * self.mss);
    }

    fn halve(&self, in_flight: Bytes) -> u64 {
        let base = match self.rule {
            SsthreshRule::FlightSize => in_flight.0,
            SsthreshRule::Window { receiver_window } => self.cwnd.min(receiver_window.0),
        };
        (base / 2).max(2 * self.mss)
    }

    fn grow(&mut self, newly_acked: u64) {
        if self.cwnd < self.ssthresh {
            self.cwnd += newly_acked.min(self.mss);
        } else {
            self.cwnd += (self.mss * self.mss / self.cwnd).max(1);
            if self.bsd_increase {
                self.cwnd += self.mss / 8;
            }
        }
    }
}

impl CongestionControl for Reno {
    fn name(&self) -> &'static str {
        match self.variant {
            Recovery::Reno => "reno",
            Recovery::NewReno => "newreno",
        }
    }

    fn on_ack(&mut self, ev: &AckEvent) -> AckAction {
        self.snd_max = self.snd_max.max(ev.snd_max);
        if ev.newly_acked.0 == 0 {
            if self.in_recovery {
                self.cwnd += self.mss;
                return AckAction::None;
            }
            if ev.dup_acks == 3 {
                // RFC 6582 §3.2 step 2 / ns-2 bugFix_: only when the cumulative ACK passed the
                // last recover.
                if self.recover_guard && ev.ack <= self.recover && self.recover != 0 {
                    return AckAction::None;
                }
                // FlightSize: what was outstanding when the loss was detected.
                self.ssthresh = self.halve(ev.in_flight);
                self.cwnd = self.ssthresh + 3 * self.mss;
                self.in_recovery = true;
                self.recover = ev.snd_max;
                return AckAction::FastRetransmit;
            }
            return AckAction::None;
        }
        if self.in_recovery {
            match self.variant {
                Recovery::Reno => {
                    self.cwnd = self.ssthresh;
                    self.in_recovery = false;
                }
                Recovery::NewReno => {
                    if ev.ack >= self.recover {
                        self.cwnd = self.ssthresh.min(ev.in_flight.0 + self.mss);
                        self.cwnd = self.cwnd.max(self.mss);
                        self.in_recovery = false;
                    } else {
                        // Partial ACK: deflate by what was acked, add back one segment.
                        self.cwnd = self.cwnd.saturating_sub(ev.newly_acked.0);
                        if ev.newly_acked.0 >= self.mss {
                            self.cwnd += self.mss;
                        }
                        self.cwnd = self.cwnd.max(self.mss);
                        return AckAction::RetransmitHole;
                    }
                }
            }
            return AckAction::None;
        }
        self.grow(ev.newly_acked.0);
        AckAction::None
    }

    fn on_timeout(&mut self, _now: Time, in_flight: Bytes) {
        // See the module doc: NewReno's reduction for this congestion event was made on entry.
        if !(self.in_recovery && self.variant == Recovery::NewReno) {
            self.ssthresh = self.halve(in_flight);
        }
        self.cwnd = self.mss;
        self.in_recovery = false;
        self.recover = self.snd_max;
    }

    fn on_sent(&mut self, ev: &SentEvent) {
        self.snd_max = self.snd_max.max(ev.seq + ev.len.0);
    }

    fn window(&self) -> Window {
        Window { cwnd: Bytes(self.cwnd), ssthresh: Bytes(self.ssthresh), ceiling: None, pacing_rate: None }
    }

    fn in_recovery(&self) -> bool {
        self.in_recovery
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(ack: u64, newly: u64, dup: u32, flight: u64, snd_max: u64) -> AckEvent {
        AckEvent {
            ack,
            newly_acked: Bytes(newly),
            dup_acks: dup,
            in_flight: Bytes(flight),
            snd_max,
            mss: Bytes(1000),
            ..Default::default()
        }
    }

    fn cfg() -> RenoConfig {
        RenoConfig { mss: Bytes(1000), ..RenoConfig::default() }
    }

    #[test]
    fn bsd_rule_halves_the_inflated_window() {
        let mut r =
            Reno::reno(RenoConfig { ssthresh_rule: SsthreshRule::Window { receiver_window: Bytes(500_000) }, ..cfg() });
        r.set_cwnd(Bytes(20_000));
        for d in 1..=3 {
            r.on_ack(&ack(5000, 0, d, 20_000, 25_000));
        }
        for d in 4..=40 {
            r.on_ack(&ack(5000, 0, d, 20_000, 25_000));
        }
        assert_eq!(r.cwnd(), Bytes(50_000), "inflated by 37 duplicate ACKs");
        r.on_timeout(Time(1), Bytes(20_000));
        assert_eq!(r.ssthresh(), Bytes(25_000), "min(cwnd, rwnd) / 2, not FlightSize / 2 = 10000");
    }

    #[test]
    fn slow_start_then_avoidance() {
        let mut r = Reno::reno(RenoConfig { initial_ssthresh: Some(Bytes(4000)), ..cfg() });
        r.on_ack(&ack(1000, 1000, 0, 1000, 2000));
        r.on_ack(&ack(2000, 1000, 0, 2000, 4000));
        assert_eq!(r.cwnd(), Bytes(4000));
        r.on_ack(&ack(3000, 1000, 0, 3000, 6000));
        assert_eq!(r.cwnd(), Bytes(4250), "congestion avoidance adds mss*mss/cwnd");
    }

    #[test]
    fn third_dup_ack_halves_and_inflates() {
        let mut r = Reno::reno(cfg());
        r.set_cwnd(Bytes(20_000));
        assert_eq!(r.on_ack(&ack(5000, 0, 1, 20_000, 25_000)), AckAction::None);
        assert_eq!(r.on_ack(&ack(5000, 0, 2, 20_000, 25_000)), AckAction::None);
        assert_eq!(r.on_ack(&ack(5000, 0, 3, 20_000, 25_000)), AckAction::FastRetransmit);
        assert_eq!(r.ssthresh(), Bytes(10_000));
        assert_eq!(r.cwnd(), Bytes(13_000));
        r.on_ack(&ack(5000, 0, 4, 20_000, 25_000));
        assert_eq!(r.cwnd(), Bytes(14_000));
        // Reno leaves recovery on a partial ACK.
        assert_eq!(r.on_ack(&ack(8000, 3000, 0, 17_000, 25_000)), AckAction::None);
        assert!(!r.in_recovery());
        assert_eq!(r.cwnd(), Bytes(10_000));
    }

    #[test]
    fn newreno_partial_ack_retransmits_hole_and_stays() {
        let mut r = Reno::newreno(cfg());
        r.set_cwnd(Bytes(20_000));
        for d in 1..=3 {
            r.on_ack(&ack(5000, 0, d, 20_000, 25_000));
        }
        assert!(r.in_recovery());
        assert_eq!(r.on_ack(&ack(8000, 3000, 0, 17_000, 25_000)), AckAction::RetransmitHole);
        assert!(r.in_recovery());
        assert_eq!(r.on_ack(&ack(25_000, 17_000, 0, 0, 25_000)), AckAction::None);
        assert!(!r.in_recovery());
        assert_eq!(r.cwnd(), Bytes(1000), "full ACK: min(ssthresh, flight + mss)");
    }

    #[test]
    fn newreno_ignores_dup_acks_below_recover() {
        let mut r = Reno::newreno(cfg());
        r.set_cwnd(Bytes(20_000));
        r.on_sent(&SentEvent {
            now: Time(0),
            seq: 24_000,
            len: Bytes(1000),
            retransmission: false,
            in_flight: Bytes(0),
        });
        r.on_timeout(Time(1), Bytes(20_000));
        assert_eq!(r.cwnd(), Bytes(1000));
        assert_eq!(r.ssthresh(), Bytes(10_000));
        for d in 1..=3 {
            assert_eq!(r.on_ack(&ack(6000, 0, d, 5000, 25_000)), AckAction::None);
        }
        assert!(!r.in_recovery());
    }

    #[test]
    fn reno_recover_guard_is_ns2_bugfix() {
        // Two holes in one window (25,000 bytes outstanding): the first is repaired by fast
        // retransmit, the partial ACK ends Reno's recovery, and three more duplicate ACKs for
        // the second hole arrive while the ACK is still below `recover` (25,000).
        let run = |guard: bool| {
            let mut r = Reno::reno(RenoConfig { recover_guard: guard, ..cfg() });
            r.set_cwnd(Bytes(20_000));
            for d in 1..=3 {
                r.on_ack(&ack(5000, 0, d, 20_000, 25_000));
            }
            let after_first = r.ssthresh();
            r.on_ack(&ack(8000, 3000, 0, 17_000, 25_000));
            let second: Vec<AckAction> = (1..=3).map(|d| r.on_ack(&ack(8000, 0, d, 17_000, 25_000))).collect();
            (after_first, second.contains(&AckAction::FastRetransmit), r.ssthresh())
        };
        let (first, again, ssthresh) = run(false);
        assert!(again, "plain Reno halves once per hole");
        assert!(ssthresh < first);
        let (first, again, ssthresh) = run(true);
        assert!(!again, "the guard waits until the ACK passes recover");
        assert_eq!(ssthresh, first);
        // After a timeout, go-back-N's duplicate ACKs below recover start no fast retransmit.
        let mut r = Reno::reno(RenoConfig { recover_guard: true, ..cfg() });
        r.on_sent(&SentEvent {
            now: Time(0),
            seq: 24_000,
            len: Bytes(1000),
            retransmission: false,
            in_flight: Bytes(0),
        });
        r.on_timeout(Time(1), Bytes(20_000));
        for d in 1..=3 {
            assert_eq!(r.on_ack(&ack(6000, 0, d, 5000, 25_000)), AckAction::None);
        }
        // Past recover, fast retransmit works again.
        r.on_ack(&ack(26_000, 20_000, 0, 1000, 27_000));
        let fr = (1..=3).map(|d| r.on_ack(&ack(26_000, 0, d, 1000, 27_000))).any(|a| a == AckAction::FastRetransmit);
        assert!(fr);
    }

    #[test]
    fn newreno_timeout_in_recovery_keeps_the_recovery_ssthresh() {
        // Recovery starts with 20 segments outstanding: ssthresh 10. Its retransmission is lost;
        // 300 duplicate ACKs inflate cwnd and let 300 new segments out, so snd_max − snd_una is
        // 320 segments when the timer fires. Halving that (160) would be far above the path.
        let mut r = Reno::newreno(cfg());
        r.set_cwnd(Bytes(20_000));
        for d in 1..=3 {
            r.on_ack(&ack(5000, 0, d, 20_000, 25_000));
        }
        assert_eq!(r.ssthresh(), Bytes(10_000));
        for d in 4..=303 {
            r.on_ack(&ack(5000, 0, d, 20_000 + (d as u64 - 3) * 1000, 25_000 + (d as u64 - 3) * 1000));
        }
        r.on_timeout(Time(1), Bytes(320_000));
        assert_eq!(r.ssthresh(), Bytes(10_000), "kept from recovery entry");
        assert_eq!(r.cwnd(), Bytes(1000));
        assert!(!r.in_recovery());
        // Outside recovery a timeout halves the flight as RFC 5681 says.
        r.on_timeout(Time(2), Bytes(40_000));
        assert_eq!(r.ssthresh(), Bytes(20_000));
        // Reno halves the flight even inside recovery (the papers' Reno).
        let mut reno = Reno::reno(cfg());
        reno.set_cwnd(Bytes(20_000));
        for d in 1..=3 {
            reno.on_ack(&ack(5000, 0, d, 20_000, 25_000));
        }
        reno.on_timeout(Time(1), Bytes(320_000));
        assert_eq!(reno.ssthresh(), Bytes(160_000));
    }
}
