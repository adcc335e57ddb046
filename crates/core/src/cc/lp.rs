//! TCP-LP (Kuzmanovic & Knightly, "TCP-LP: A Distributed Algorithm for Low Priority Data
//! Transfer", INFOCOM 2003), following Linux `net/ipv4/tcp_lp.c` (written from its algorithm;
//! the constants below are its defaults).
//!
//! TCP-LP is Reno (here NewReno's loss handling) plus an *early congestion indication* from the
//! one-way delay, which rises before the bottleneck queue overflows (§III-B):
//!
//! ```text
//! per ACK with timestamps:
//!   owd    = |TSval − TSecr|                          one-way delay + clock offset
//!   min    = min(min, owd); max tracks the largest samples (see below)
//!   sowd   = 7/8 · sowd + 1/8 · owd                   (the first sample sets it)
//!   inference = 3 · RTT                                (RTT = now − TSecr)
//!   if sowd ≥ min + 15 % · (max − min):                early congestion
//!       (paper rule: only after the first loss, from a segment sent after last_drop)
//!       min = sowd, max = 2 · sowd                     (Linux rule only: its reset)
//!       cwnd = 1 segment        if the last early congestion is less than `inference` ago
//!       cwnd = max(cwnd / 2, 1) otherwise
//!       ssthresh = max(cwnd, 2)                        (paper rule only)
//!       last_drop = now
//!   Reno's increase, except inside the inference window
//! ```
//!
//! The inference window (§III-C) tells a persistent congestion from a transient one: a second
//! indication within 3 RTTs of the first sends the window to one segment, where TCP-LP probes
//! slowly until the path is quiet again.
//!
//! # Two rules: the paper's (default) and Linux's
//! Linux's module, run literally in the simulator, reached 1.17 of 9.73 Mbit/s alone on an empty
//! 10 Mbit/s path (`crates/sim/tests/background.rs`). A per-ACK trace of owd, min, max, sowd and
//! the inference window showed three causes, each a departure of `tcp_lp.c` from the paper:
//! 1. **The reset of the extremes** (`min = sowd, max = 2·sowd`, Linux's "FIXME") makes the range
//!    `max − min` equal to the *whole* smoothed one-way delay, propagation included, instead of the
//!    path's queueing range (§III-B: `d_max − d_min` over the connection's lifetime). The threshold
//!    becomes 15 % of the one-way delay (3.5 ms of queue here), and after the queue drains the true
//!    minimum returns while `sowd` still lags above `min + 15 %`: a second indication on an *empty*
//!    queue, inside the inference window, sends cwnd to one segment (trace at t = 0.362 s).
//! 2. **Slow start never ends**: an early congestion changes only cwnd, so with no loss `ssthresh`
//!    stays infinite, the window doubles again after each halving and overshoots inside the 3-RTT
//!    inference window: cwnd = 1 again. The paper's pseudo-code follows a reduction with additive
//!    increase.
//! 3. **One queue counted twice**: the ACKs of segments sent *before* a reduction still carry the
//!    old queue; Linux counts them as a second indication (cwnd = 1 one ACK after halving, trace at
//!    t = 6.227 s once the reset was removed). A reduction can only be judged by segments sent after
//!    it, which the echoed TSecr identifies.
//!
//! Removing the reset alone made it worse (0.26 Mbit/s): the lifetime range was then the flow's own
//! back-to-back jitter (one packet, 1.2 ms → a 0.18 ms threshold): **the threshold collapses when
//! `max ≈ min`**, which is also why Linux's very first sample is an early congestion. The range
//! means "the queue's capacity" only once the queue has overflowed once.
//!
//! [`LpRule::Paper`] (the default) therefore: keeps `d_min`/`d_max` over the connection's lifetime
//! (Linux's "forget the max of the max" kept); tests early congestion only after the first loss
//! (fast retransmit or timeout: before it the flow is NewReno, as the paper's TCP-LP starts as TCP
//! does, and the loss calibrates `d_max`); counts an indication only from a segment sent after the
//! last reduction (TSecr later than it) and outside loss recovery; and sets `ssthresh` to the
//! reduced window (at least 2 segments), so that growth after the inference window is additive.
//! Measured (same test, 60 s): 9.37 Mbit/s alone (96 %), and Reno keeps 9.21 of its 9.56 Mbit/s
//! alone beside it. [`LpRule::Linux`] is the literal module (the previous default), kept for
//! comparison: every step above is skipped.
//!
//! # Other choices (Linux's where the paper is open)
//! - **Delay source**: the TCP timestamps (`rcv_tsval − rcv_tsecr`), as Linux. The simulator's
//!   clocks have no offset or drift and tick in nanoseconds, so Linux's remote-HZ estimator is
//!   not needed. A sample of zero or without timestamps is ignored (Linux's `LP_VALID_OWD`).
//!   **Clock offset**: the paper rule uses only differences of delays, so it is offset-free.
//!   Linux's reset (`max = 2·sowd`) is not: with a receiver clock far ahead (Linux has randomised
//!   TS offsets since 4.10) `max` becomes huge and the threshold unreachable, so between real
//!   hosts Linux's module behaves as NewReno after its first sample.
//! - **max**: Linux keeps the largest sample in a reserve and uses the one before it as `max`
//!   ("always forget the max of the max"), so one outlier does not stretch the threshold.
//! - **Threshold test**: early congestion when `sowd ≥ min + δ·(max − min)` (Linux's
//!   `sowd < threshold` means "within"). Under the Linux rule the very first sample therefore
//!   counts as early congestion (min = max = sowd) and halves the initial window, as in Linux.
//! - **Every ACK** is tested, not once per RTT.
//! - The delay statistics are updated during fast recovery too, but the window is changed only
//!   outside it (in recovery NewReno owns the window).

use crate::cc::reno::{Reno, RenoConfig};
use crate::cc::{AckAction, AckEvent, CongestionControl, SentEvent, Window};
use crate::units::{Bytes, Time};

/// `δ`: early congestion when the smoothed one-way delay reaches `min + δ·(max − min)` (§III-B;
/// Linux: 15 %).
pub const THRESHOLD: f64 = 0.15;
/// The one-way-delay smoothing keeps `1 − 1/2^SMOOTHING_SHIFT` of the old value (Linux: 7/8).
pub const SMOOTHING_SHIFT: u32 = 3;
/// The inference window lasts this many RTTs after an early-congestion reduction (§III-C;
/// Linux: `lp->inference = 3 * delta`).
pub const INFERENCE_RTTS: u32 = 3;

/// Which reading of TCP-LP runs (module doc, "Two rules").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LpRule {
    /// The paper's: lifetime extremes, calibrated by the first loss, one indication per
    /// reduction judged by segments sent after it, additive increase after a reduction.
    #[default]
    Paper,
    /// Linux `tcp_lp.c` literally: the extremes reset to (sowd, 2·sowd) on each indication,
    /// `ssthresh` untouched.
    Linux,
}

/// Parameters of [`Lp`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LpConfig {
    pub threshold: f64,
    pub inference_rtts: u32,
    pub rule: LpRule,
}

impl Default for LpConfig {
    fn default() -> Self {
        LpConfig { threshold: THRESHOLD, inference_rtts: INFERENCE_RTTS, rule: LpRule::Paper }
    }
}

impl LpConfig {
    /// 0 < threshold < 1, inference window of at least one RTT.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.threshold > 0.0 && self.threshold < 1.0) {
            return Err(format!("threshold must be within (0, 1), got {}", self.threshold));
        }
        if self.inference_rtts == 0 {
            return Err("inference_rtts must be at least 1".into());
        }
        Ok(())
    }
}

/// What an ACK's delay sample concluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Indication {
    /// No valid sample, or the smoothed delay within the threshold.
    None,
    /// Early congestion outside the inference window: cwnd halved.
    Halved,
    /// Early congestion inside the inference window: cwnd set to one segment.
    OneSegment,
}

/// TCP-LP controller state. Delays in nanoseconds.
#[derive(Clone, Debug)]
pub struct Lp {
    cfg: LpConfig,
    reno: Reno,
    mss: u64,
    owd_min: Option<i64>,
    owd_max: i64,
    /// Largest sample seen since the last reset (Linux `owd_max_rsv`).
    owd_max_reserve: i64,
    /// Smoothed one-way delay times 2^SMOOTHING_SHIFT (0: no sample yet).
    sowd_scaled: i64,
    inference_ns: u64,
    last_drop: Option<Time>,
    last: Indication,
    early_congestions: u64,
    /// A loss (fast retransmit or timeout) has been seen: the delay range is the queue's.
    loss_seen: bool,
}

impl Lp {
    pub fn new(cfg: LpConfig, reno_cfg: RenoConfig) -> Result<Lp, String> {
        cfg.validate()?;
        Ok(Lp {
            cfg,
            reno: Reno::newreno(reno_cfg),
            mss: reno_cfg.mss.0.max(1),
            owd_min: None,
            owd_max: 0,
            owd_max_reserve: 0,
            sowd_scaled: 0,
            inference_ns: 0,
            last_drop: None,
            last: Indication::None,
            early_congestions: 0,
            loss_seen: false,
        })
    }

    pub fn config(&self) -> &LpConfig {
        &self.cfg
    }
    /// The smoothed one-way delay in nanoseconds (None before the first sample).
    pub fn smoothed_owd_ns(&self) -> Option<i64> {
        (self.sowd_scaled != 0).then_some(self.sowd_scaled >> SMOOTHING_SHIFT)
    }
    /// What the last ACK concluded.
    pub fn last_indication(&self) -> Indication {
        self.last
    }
    /// Early-congestion reductions so far.
    pub fn early_congestions(&self) -> u64 {
        self.early_congestions
    }

    /// Updates min, max and the smoothed delay with one sample.
    fn sample(&mut self, owd: i64) {
        self.owd_min = Some(self.owd_min.map_or(owd, |m| m.min(owd)));
        if owd > self.owd_max {
            if owd > self.owd_max_reserve {
                self.owd_max = if self.owd_max_reserve == 0 { owd } else { self.owd_max_reserve };
                self.owd_max_reserve = owd;
            } else {
                self.owd_max = owd;
            }
        }
        if self.sowd_scaled != 0 {
            self.sowd_scaled += owd - (self.sowd_scaled >> SMOOTHING_SHIFT);
        } else {
            self.sowd_scaled = owd << SMOOTHING_SHIFT;
        }
    }

    /// The early-congestion test after a sample at `now` echoing a segment sent at `sent`;
    /// `in_recovery` when NewReno is in (or entering) loss recovery. The Linux rule resets the
    /// extremes on congestion.
    fn indication(&mut self, now: Time, sent: Time, in_recovery: bool) -> Indication {
        let within_inference = self.last_drop.is_some_and(|t| now.saturating_since(t).0 < self.inference_ns);
        let (Some(min), sowd) = (self.owd_min, self.sowd_scaled >> SMOOTHING_SHIFT) else {
            return Indication::None;
        };
        if self.cfg.rule == LpRule::Paper
            && (!self.loss_seen || in_recovery || self.last_drop.is_some_and(|t| sent <= t))
        {
            return Indication::None;
        }
        let threshold = min as f64 + self.cfg.threshold * (self.owd_max - min) as f64;
        if (sowd as f64) < threshold {
            return Indication::None;
        }
        if self.cfg.rule == LpRule::Linux {
            self.owd_min = Some(sowd);
            self.owd_max = self.sowd_scaled >> (SMOOTHING_SHIFT - 1);
            self.owd_max_reserve = self.owd_max;
        }
        self.last_drop = Some(now);
        self.early_congestions += 1;
        if within_inference {
            Indication::OneSegment
        } else {
            Indication::Halved
        }
    }
}

impl CongestionControl for Lp {
    fn name(&self) -> &'static str {
        "lp"
    }
    fn on_ack(&mut self, ev: &AckEvent) -> AckAction {
        let was_in_recovery = self.reno.in_recovery();
        let before = self.reno.cwnd().0;
        let action = self.reno.on_ack(ev);
        self.loss_seen |= action != AckAction::None;
        self.last = Indication::None;
        if ev.newly_acked.0 == 0 {
            return action;
        }
        let Some(ts) = ev.timestamps else { return action };
        let owd = ts.one_way_delay_ns().abs();
        if owd == 0 {
            return action;
        }
        self.sample(owd);
        let rtt = ev.now.saturating_since(ts.tsecr).0;
        if rtt > 0 {
            self.inference_ns = rtt.saturating_mul(self.cfg.inference_rtts as u64);
        }
        let within_inference = self.last_drop.is_some_and(|t| ev.now.saturating_since(t).0 < self.inference_ns);
        let recovery = was_in_recovery || self.reno.in_recovery() || action != AckAction::None;
        self.last = self.indication(ev.now, ts.tsecr, recovery);
        if recovery {
            return action;
        }
        let growth = if within_inference { 0 } else { self.reno.cwnd().0 - before };
        let base = match self.last {
            Indication::None => before,
            Indication::Halved => (before / 2).max(self.mss),
            Indication::OneSegment => self.mss,
        };
        self.reno.set_cwnd(Bytes(base + growth));
        if self.cfg.rule == LpRule::Paper && self.last != Indication::None {
            self.reno.set_ssthresh(Bytes(base.max(2 * self.mss)));
        }
        action
    }
    fn on_timeout(&mut self, now: Time, in_flight: Bytes) {
        self.loss_seen = true;
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
    use crate::units::Dur;

    const MSS: u64 = 1000;
    /// The receiver's clock offset (zero: Linux's reset of the extremes to sowd and 2·sowd is
    /// not offset-free; module doc).
    const OFFSET_NS: u64 = 0;

    /// An ACK of one segment at `now_ms`, echoing a segment sent `rtt_ms` ago whose one-way
    /// delay was `owd_ms`.
    fn ack(now_ms: u64, seq: u64, owd_ms: u64, rtt_ms: u64) -> AckEvent {
        let now = Time(now_ms * 1_000_000);
        let sent = now - Dur::from_millis(rtt_ms);
        AckEvent {
            now,
            ack: seq,
            newly_acked: Bytes(MSS),
            rtt: Some(Dur::from_millis(rtt_ms)),
            snd_max: seq + 100 * MSS,
            in_flight: Bytes(100 * MSS),
            mss: Bytes(MSS),
            timestamps: Some(AckTimestamps { tsval: Time(sent.0 + OFFSET_NS + owd_ms * 1_000_000), tsecr: sent }),
            ..Default::default()
        }
    }

    /// An LP flow under `rule` in congestion avoidance at 40 segments that has seen one-way
    /// delays of 50 ms (empty queue) and 150 ms (full queue) and one timeout (the loss that
    /// calibrates the paper rule's range), with its smoothed delay back at 50 ms.
    fn primed(rule: LpRule) -> (Lp, u64, u64) {
        let cfg = LpConfig { rule, ..LpConfig::default() };
        let mut lp = Lp::new(cfg, RenoConfig { mss: Bytes(MSS), ..RenoConfig::default() }).unwrap();
        let (mut t, mut seq) = (0, 0);
        for owd in [50, 150, 150, 50] {
            for _ in 0..40 {
                t += 1;
                seq += MSS;
                lp.on_ack(&ack(t, seq, owd, 100));
            }
        }
        lp.on_timeout(Time(t * 1_000_000), Bytes(40 * MSS));
        // Long after the last early congestion; past the inference window.
        t += 1000;
        for _ in 0..40 {
            t += 1;
            seq += MSS;
            lp.on_ack(&ack(t, seq, 50, 100));
        }
        lp.reno.set_cwnd(Bytes(40 * MSS));
        lp.reno.set_ssthresh(Bytes(40 * MSS));
        (lp, t, seq)
    }

    /// Feeds `n` one-segment ACKs 1 ms apart with one-way delay `owd_ms` (RTT 100 ms); returns
    /// the (time, indication, cwnd) of each early congestion.
    fn feed(lp: &mut Lp, t: &mut u64, seq: &mut u64, n: usize, owd_ms: u64) -> Vec<(u64, Indication, u64)> {
        let mut events = Vec::new();
        for _ in 0..n {
            *t += 1;
            *seq += MSS;
            lp.on_ack(&ack(*t, *seq, owd_ms, 100));
            if lp.last_indication() != Indication::None {
                events.push((*t, lp.last_indication(), lp.window().cwnd.0));
            }
        }
        events
    }

    #[test]
    fn lp_halves_on_early_congestion_outside_the_inference_window_then_drops_to_one_inside() {
        for rule in [LpRule::Paper, LpRule::Linux] {
            let (mut lp, mut t, mut seq) = primed(rule);
            // 150 ms for 250 ms: the first indication, then (paper rule) the segments sent after
            // it, still within 3 RTTs.
            let events = feed(&mut lp, &mut t, &mut seq, 250, 150);
            assert!(events.len() >= 2, "{rule:?}: {events:?}");
            let (t0, first, w0) = events[0];
            assert_eq!(first, Indication::Halved, "{rule:?}: {events:?}");
            // Halved, then this ACK's Reno increase (outside the inference window, a fraction
            // of a segment), as Linux.
            assert!((20 * MSS..20 * MSS + MSS / 10).contains(&w0), "{rule:?}: {events:?}");
            let (t1, second, w1) = events[1];
            assert!(t1 - t0 < 300, "{rule:?}: within 3 RTTs: {events:?}");
            assert_eq!((second, w1), (Indication::OneSegment, MSS), "{rule:?}: {events:?}");
            if rule == LpRule::Paper {
                // Not before the segments sent after the reduction come back (100 ms later).
                assert!(t1 - t0 > 100, "{events:?}");
                // Growth after the reduction is additive: ssthresh follows the window.
                assert_eq!(lp.reno.ssthresh(), Bytes(2 * MSS));
            } else {
                // Linux counts the next ACK (same queue) and leaves ssthresh.
                assert_eq!(t1 - t0, 1, "{events:?}");
                assert_eq!(lp.reno.ssthresh(), Bytes(40 * MSS));
            }
        }
    }

    #[test]
    fn paper_rule_waits_for_the_first_loss_before_testing_the_delay() {
        // No loss yet: the range is only the flow's own jitter, so no indication however the
        // delay moves (Linux's rule indicates at once: its first sample is early congestion).
        for rule in [LpRule::Paper, LpRule::Linux] {
            let cfg = LpConfig { rule, ..LpConfig::default() };
            let mut lp = Lp::new(cfg, RenoConfig { mss: Bytes(MSS), ..RenoConfig::default() }).unwrap();
            let (mut t, mut seq) = (0, 0);
            let mut events = feed(&mut lp, &mut t, &mut seq, 40, 50);
            events.extend(feed(&mut lp, &mut t, &mut seq, 40, 52));
            events.extend(feed(&mut lp, &mut t, &mut seq, 40, 150));
            match rule {
                LpRule::Paper => assert!(events.is_empty(), "{events:?}"),
                LpRule::Linux => assert!(!events.is_empty() && events[0].0 == 1, "{events:?}"),
            }
        }
    }

    #[test]
    fn lp_grows_as_reno_while_the_delay_stays_low_and_not_inside_the_inference_window() {
        for rule in [LpRule::Paper, LpRule::Linux] {
            let (mut lp, mut t, mut seq) = primed(rule);
            assert!(feed(&mut lp, &mut t, &mut seq, 40, 50).is_empty());
            let w = lp.window().cwnd.0;
            assert!((40 * MSS + 900..=41 * MSS).contains(&w), "{rule:?}: about one segment per window: {w}");
        }
    }
}
