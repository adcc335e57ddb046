//! TCP Vegas (Brakmo & Peterson, "TCP Vegas: End to End Congestion Avoidance on a Global
//! Internet", IEEE JSAC 13(8), 1995; SIGCOMM 1994), with Linux `tcp_vegas.c`'s constants.
//!
//! Vegas keeps a few segments queued at the bottleneck, no more. `BaseRTT` is the smallest RTT
//! seen on the connection (the path without queue). Once per round trip it compares the
//! expected rate `cwnd / BaseRTT` with the actual rate `cwnd / RTT` (§3.2):
//!
//! ```text
//! Diff = (Expected − Actual) · BaseRTT = cwnd · (RTT − BaseRTT) / RTT     [segments queued]
//! Diff < α        → cwnd += 1 segment   (the path has room)
//! Diff > β        → cwnd −= 1 segment   (too much queued)
//! otherwise       → hold
//! ```
//!
//! In slow start, once `Diff > γ`, Vegas leaves it (§3.3): `cwnd = min(cwnd, Expected·RTT + 1)`
//! (the window that would queue one segment) and `ssthresh = min(ssthresh, cwnd − 1 segment)`.
//! Losses are handled as by NewReno (fast retransmit on the third duplicate ACK, `ssthresh` =
//! FlightSize / 2, RFC 6582 recovery; a timeout sets cwnd to one segment): Linux's Vegas too
//! leaves losses to the stack's Reno code.
//!
//! # Choices
//! - **Constants**: α = 2, β = 4, γ = 1 segments, Linux `tcp_vegas.c`'s module defaults. The
//!   paper's experiments used α = 1, β = 3 (§4) and γ = 1; both are one scenario key away.
//! - **Diff as in the paper**: `cwnd · (RTT − BaseRTT) / RTT`. Linux divides by `BaseRTT`
//!   instead (`diff = cwnd * (rtt - baseRTT) / baseRTT`), which reads a larger queue for the
//!   same RTT; at RTT = 2·BaseRTT Linux's Diff is twice the paper's.
//! - **RTT of the round**: the smallest sample of the last round trip, as Linux (the paper
//!   averaged the samples of timed segments; the minimum filters delayed-ACK noise). The round
//!   ends when an ACK passes `snd_max` as it was when the round began (Linux `beg_snd_nxt`).
//!   With two samples or fewer in a round Vegas behaves like Reno for that round, as Linux.
//! - **Slow start** grows by one segment per ACK (RFC 5681, as Linux's Vegas), not the paper's
//!   doubling every other RTT.
//! - **Floor**: cwnd never falls below [`MIN_CWND`] segments through Vegas's own rule (Linux);
//!   [`crate::cc::nice`] runs the same round logic with a fractional floor.
//! - Vegas's "more timely" retransmission on the first duplicate ACK (§3.1) is not modelled:
//!   the simulator's sender keeps RFC 6298's timer and NewReno's third-duplicate-ACK rule.

use crate::cc::reno::{Reno, RenoConfig};
use crate::cc::{AckAction, AckEvent, CongestionControl, SentEvent, Window};
use crate::units::{Bytes, Dur, Time};

/// `α`: below this many segments queued at the bottleneck, grow by one segment per RTT
/// (Linux `tcp_vegas.c` default 2; the paper's experiments used 1).
pub const ALPHA: u32 = 2;
/// `β`: above this many segments queued, shrink by one segment per RTT (Linux default 4; the
/// paper's experiments used 3).
pub const BETA: u32 = 4;
/// `γ`: leave slow start once this many segments are queued (Linux default 1).
pub const GAMMA: u32 = 1;
/// Vegas's own rule keeps cwnd at or above this many segments (Linux: 2).
pub const MIN_CWND: u32 = 2;
/// Rounds with this many RTT samples or fewer run Reno instead (Linux: `cntRTT <= 2`).
pub const MIN_SAMPLES: u32 = 2;

/// Parameters of [`Vegas`]: thresholds in segments queued at the bottleneck.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VegasConfig {
    pub alpha: u32,
    pub beta: u32,
    pub gamma: u32,
}

impl Default for VegasConfig {
    fn default() -> Self {
        VegasConfig { alpha: ALPHA, beta: BETA, gamma: GAMMA }
    }
}

impl VegasConfig {
    /// α ≤ β (between them the window holds).
    pub fn validate(&self) -> Result<(), String> {
        if self.alpha > self.beta {
            return Err(format!("alpha ({}) must not exceed beta ({})", self.alpha, self.beta));
        }
        Ok(())
    }
}

/// What a round's end looked like, for controllers built on Vegas's round logic (Nice).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoundEnd {
    /// The window at the end of the round, before any change this ACK makes.
    pub cwnd: Bytes,
    /// Whether Vegas has enough samples this round to apply its rule.
    pub enough_samples: bool,
}

/// Vegas controller state.
#[derive(Clone, Debug)]
pub struct Vegas {
    cfg: VegasConfig,
    /// Losses, recovery and timeouts; also holds cwnd and ssthresh.
    reno: Reno,
    mss: u64,
    /// Floor of Vegas's own decreases, in bytes.
    floor: u64,
    /// Smallest RTT of the connection.
    base_rtt: Option<Dur>,
    /// Smallest RTT of the current round and the samples counted in it.
    round_rtt: Option<Dur>,
    round_samples: u32,
    /// The round ends when an ACK passes this (`snd_max` when it began).
    round_end: u64,
    /// Diff of the last completed round, in segments.
    last_diff: Option<f64>,
}

impl Vegas {
    pub fn new(cfg: VegasConfig, reno_cfg: RenoConfig) -> Result<Vegas, String> {
        cfg.validate()?;
        let mss = reno_cfg.mss.0.max(1);
        Ok(Vegas::with_floor(cfg, reno_cfg, Bytes(MIN_CWND as u64 * mss)))
    }

    /// Vegas whose own decreases stop at `floor` bytes (Nice's fractional floor).
    pub(crate) fn with_floor(cfg: VegasConfig, reno_cfg: RenoConfig, floor: Bytes) -> Vegas {
        Vegas {
            cfg,
            reno: Reno::newreno(reno_cfg),
            mss: reno_cfg.mss.0.max(1),
            floor: floor.0.max(1),
            base_rtt: None,
            round_rtt: None,
            round_samples: 0,
            round_end: 0,
            last_diff: None,
        }
    }

    pub fn config(&self) -> &VegasConfig {
        &self.cfg
    }
    pub fn base_rtt(&self) -> Option<Dur> {
        self.base_rtt
    }
    /// Sets cwnd and ssthresh (tests of controllers built on Vegas).
    #[cfg(test)]
    pub(crate) fn set_window_for_test(&mut self, cwnd: Bytes, ssthresh: Bytes) {
        self.reno.set_cwnd(cwnd);
        self.reno.set_ssthresh(ssthresh);
    }

    /// Diff (segments queued) of the last round Vegas judged.
    pub fn last_diff(&self) -> Option<f64> {
        self.last_diff
    }

    /// Vegas's ACK processing; at a round's end `at_round_end` runs first and, returning true,
    /// takes the round's decision instead of Vegas's rule (Nice's halving).
    pub(crate) fn ack_with(
        &mut self,
        ev: &AckEvent,
        at_round_end: impl FnOnce(&mut Reno, RoundEnd) -> bool,
    ) -> AckAction {
        if let Some(r) = ev.rtt {
            self.base_rtt = Some(self.base_rtt.map_or(r, |b| b.min(r)));
            self.round_rtt = Some(self.round_rtt.map_or(r, |b| b.min(r)));
            self.round_samples += 1;
        }
        let was_in_recovery = self.reno.in_recovery();
        let before = self.reno.cwnd().0;
        let action = self.reno.on_ack(ev);
        if ev.newly_acked.0 == 0 || was_in_recovery || self.reno.in_recovery() || action != AckAction::None {
            return action;
        }
        // A new ACK in the open state: Reno grew cwnd; Vegas decides instead.
        let grown = self.reno.cwnd().0;
        let slow_start = before < self.reno.ssthresh().0;
        if ev.ack <= self.round_end {
            // Mid-round: slow start keeps growing per ACK; congestion avoidance waits.
            self.reno.set_cwnd(Bytes(if slow_start { grown } else { before }));
            return action;
        }
        self.round_end = ev.snd_max;
        let enough = self.round_samples > MIN_SAMPLES;
        let (rtt, samples) = (self.round_rtt.take(), std::mem::take(&mut self.round_samples));
        self.reno.set_cwnd(Bytes(before));
        if at_round_end(&mut self.reno, RoundEnd { cwnd: Bytes(before), enough_samples: enough }) {
            return action;
        }
        match (self.base_rtt, rtt) {
            (Some(base), Some(rtt)) if samples > MIN_SAMPLES && rtt.0 > 0 => self.vegas_step(before, grown, base, rtt),
            _ => self.reno.set_cwnd(Bytes(grown)),
        }
        action
    }

    /// Vegas's once-per-RTT rule (module doc).
    fn vegas_step(&mut self, cwnd: u64, grown: u64, base: Dur, rtt: Dur) {
        let mss = self.mss as f64;
        let segs = cwnd as f64 / mss;
        let diff = segs * (rtt.0.saturating_sub(base.0)) as f64 / rtt.0 as f64;
        self.last_diff = Some(diff);
        let ssthresh = self.reno.ssthresh().0;
        let slow_start = cwnd < ssthresh;
        let c = self.cfg;
        let new = if slow_start && diff > c.gamma as f64 {
            // Expected · RTT + 1 segment = cwnd · BaseRTT / RTT + 1.
            let target = (segs * base.0 as f64 / rtt.0 as f64 + 1.0) * mss;
            let new = cwnd.min(target as u64);
            self.reno.set_ssthresh(Bytes(ssthresh.min(new.saturating_sub(self.mss))));
            new
        } else if slow_start {
            grown
        } else if diff > c.beta as f64 {
            let new = cwnd.saturating_sub(self.mss);
            self.reno.set_ssthresh(Bytes(ssthresh.min(new.saturating_sub(self.mss))));
            new
        } else if diff < c.alpha as f64 {
            cwnd + self.mss
        } else {
            cwnd
        };
        self.reno.set_cwnd(Bytes(new.max(self.floor)));
    }
}

impl CongestionControl for Vegas {
    fn name(&self) -> &'static str {
        "vegas"
    }
    fn on_ack(&mut self, ev: &AckEvent) -> AckAction {
        self.ack_with(ev, |_, _| false)
    }
    fn on_timeout(&mut self, now: Time, in_flight: Bytes) {
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
pub(crate) mod tests {
    use super::*;

    pub(crate) const MSS: u64 = 1000;

    /// A new ACK at `now_ms` of one segment with an RTT sample, `snd_max` far ahead.
    pub(crate) fn ack(now_ms: u64, ack: u64, rtt_ms: u64, snd_max: u64) -> AckEvent {
        AckEvent {
            now: Time(now_ms * 1_000_000),
            ack,
            newly_acked: Bytes(MSS),
            rtt: Some(Dur::from_millis(rtt_ms)),
            snd_max,
            in_flight: Bytes(snd_max - ack),
            mss: Bytes(MSS),
            ..Default::default()
        }
    }

    /// Feeds `rounds · per_round` ACKs of one segment each, `per_round` segments in flight, so
    /// that a round (an ACK passing the `snd_max` of the round's start) ends every `per_round`
    /// ACKs; `rtt_ms(i)` is the sample of the i-th ACK of a round. Returns the last ACK.
    pub(crate) fn rounds(
        cc: &mut dyn CongestionControl,
        mut seq: u64,
        rounds: u32,
        per_round: u64,
        rtt_ms: impl Fn(u64) -> u64,
    ) -> u64 {
        for r in 0..rounds {
            for i in 0..per_round {
                seq += MSS;
                cc.on_ack(&ack(r as u64 * 100 + i, seq, rtt_ms(i), seq + (per_round - 1) * MSS));
            }
        }
        seq
    }

    fn vegas_in_ca(cwnd_segs: u64) -> Vegas {
        let mut v =
            Vegas::new(VegasConfig::default(), RenoConfig { mss: Bytes(MSS), ..RenoConfig::default() }).unwrap();
        v.reno.set_cwnd(Bytes(cwnd_segs * MSS));
        v.reno.set_ssthresh(Bytes(cwnd_segs * MSS));
        v
    }

    /// cwnd after `n` judged rounds of RTT `rtt_ms` (after a round of 100 ms that sets BaseRTT
    /// and a round of `rtt_ms` that the first judgement still mixes with 100 ms), and before.
    fn judged(rtt_ms: u64, n: u32) -> (u64, u64, f64) {
        let mut v = vegas_in_ca(20);
        let seq = rounds(&mut v, 0, 1, 10, |_| 100);
        let seq = rounds(&mut v, seq, 1, 10, |_| rtt_ms);
        let before = v.window().cwnd.0;
        rounds(&mut v, seq, n, 10, |_| rtt_ms);
        (before, v.window().cwnd.0, v.last_diff().unwrap())
    }

    #[test]
    fn vegas_holds_between_alpha_and_beta_and_moves_outside() {
        // BaseRTT 100 ms, about 20 segments: Diff = cwnd · (RTT − 100) / RTT.
        let (before, after, diff) = judged(100, 3);
        assert_eq!(after, before + 3 * MSS, "Diff {diff} < α: one segment more per round");
        let (before, after, diff) = judged(115, 3);
        assert!((ALPHA as f64..=BETA as f64).contains(&diff), "diff {diff}");
        assert_eq!(after, before, "Diff {diff} between α and β: holds");
        let (before, after, diff) = judged(150, 3);
        assert!(diff > BETA as f64);
        assert_eq!(after, before - 3 * MSS, "Diff {diff} > β: one segment less per round");
    }

    #[test]
    fn vegas_leaves_slow_start_when_gamma_is_exceeded() {
        let mut v =
            Vegas::new(VegasConfig::default(), RenoConfig { mss: Bytes(MSS), ..RenoConfig::default() }).unwrap();
        v.reno.set_cwnd(Bytes(30 * MSS));
        let seq = rounds(&mut v, 0, 2, 10, |_| 100);
        let peak = v.window().cwnd.0;
        assert_eq!(peak, 50 * MSS, "slow start: one segment per ACK");
        assert!(v.window().ssthresh.0 > peak, "still in slow start");
        // A round of 150 ms samples (judged at the next round's first ACK): Diff > γ, so
        // cwnd = min(cwnd, cwnd · 100/150 + 1 segment) and ssthresh = cwnd − 1 segment.
        rounds(&mut v, seq, 1, 10, |_| 150);
        rounds(&mut v, seq + 10 * MSS, 1, 1, |_| 150);
        let w = v.window();
        assert!(w.cwnd.0 < peak && w.cwnd.0 <= 60 * MSS * 100 / 150 + MSS, "{w:?}");
        assert_eq!(w.ssthresh.0, w.cwnd.0 - MSS, "slow start left: {w:?}");
    }
}
