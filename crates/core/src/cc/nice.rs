//! TCP Nice (Venkataramani, Kokku & Dahlin, "TCP Nice: A Mechanism for Background
//! Transfers", OSDI 2002, §3) on the Vegas base ([`crate::cc::vegas`]).
//!
//! Nice adds to Vegas a more sensitive congestion signal and a multiplicative decrease. Every
//! ACK's RTT sample is compared with a threshold between the smallest and largest RTT seen:
//!
//! ```text
//! per ACK:     if curRTT > minRTT + t · (maxRTT − minRTT) then numCong += 1
//! per round:   if numCong > f · W then W ← W / 2   (and numCong ← 0)
//!              else Vegas's rule
//! ```
//!
//! with t = 0.1 and f = 0.5 (§3.1: "t = 0.1 ... f = 0.5"), W the window in segments. The window
//! may fall below one segment, to 1/48 (§3.1): the sender then sends one segment every
//! `1/W` round trips (the simulator's TCP does this by a timer; see `crates/sim/src/tcp.rs`).
//!
//! # Choices
//! - **minRTT and maxRTT** are the extremes of the connection's RTT samples (the paper: "the
//!   minimum and maximum round trip times observed"), never aged.
//! - **The round** is Vegas's (an ACK passing the `snd_max` of the round's start) and the count
//!   covers the ACKs of that round; `W` is the window when the round ends. Rounds with
//!   too few samples for Vegas still run Nice's test.
//! - **After a halving** `ssthresh` is set to the new window, so Nice stays in congestion
//!   avoidance (Vegas's +1 segment per round) instead of slow-starting back; the paper leaves
//!   this open. A timeout still sets the window to one segment (NewReno).
//! - **Vegas's floor** of two segments is replaced by 1/48 segment for every decrease.

use crate::cc::reno::RenoConfig;
use crate::cc::vegas::{Vegas, VegasConfig};
use crate::cc::{AckAction, AckEvent, CongestionControl, SentEvent, Window};
use crate::units::{Bytes, Dur, Time};

/// `t`: an RTT sample is "congested" when above `minRTT + t·(maxRTT − minRTT)` (§3.1: 0.1).
pub const T: f64 = 0.1;
/// `f`: halve when more than `f·W` of one round's ACKs were congested (§3.1: 0.5).
pub const F: f64 = 0.5;
/// The window may fall to `1 / MIN_WINDOW_DIVISOR` segment (§3.1: 1/48).
pub const MIN_WINDOW_DIVISOR: u32 = 48;

/// Parameters of [`Nice`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NiceConfig {
    pub vegas: VegasConfig,
    pub t: f64,
    pub f: f64,
    pub min_window_divisor: u32,
}

impl Default for NiceConfig {
    fn default() -> Self {
        NiceConfig { vegas: VegasConfig::default(), t: T, f: F, min_window_divisor: MIN_WINDOW_DIVISOR }
    }
}

impl NiceConfig {
    /// 0 < t < 1, 0 < f ≤ 1, divisor ≥ 1, and Vegas's own rule.
    pub fn validate(&self) -> Result<(), String> {
        self.vegas.validate()?;
        if !(self.t > 0.0 && self.t < 1.0) {
            return Err(format!("t must be within (0, 1), got {}", self.t));
        }
        if !(self.f > 0.0 && self.f <= 1.0) {
            return Err(format!("f must be within (0, 1], got {}", self.f));
        }
        if self.min_window_divisor == 0 {
            return Err("min_window_divisor must be at least 1".into());
        }
        Ok(())
    }
}

/// TCP Nice controller state.
#[derive(Clone, Debug)]
pub struct Nice {
    cfg: NiceConfig,
    vegas: Vegas,
    mss: u64,
    min_rtt: Option<Dur>,
    max_rtt: Option<Dur>,
    /// Congested ACKs counted in the current round.
    num_cong: u32,
    /// Halvings so far.
    halvings: u64,
}

impl Nice {
    pub fn new(cfg: NiceConfig, reno_cfg: RenoConfig) -> Result<Nice, String> {
        cfg.validate()?;
        let mss = reno_cfg.mss.0.max(1);
        let floor = Bytes((mss / cfg.min_window_divisor as u64).max(1));
        Ok(Nice {
            cfg,
            vegas: Vegas::with_floor(cfg.vegas, reno_cfg, floor),
            mss,
            min_rtt: None,
            max_rtt: None,
            num_cong: 0,
            halvings: 0,
        })
    }

    pub fn config(&self) -> &NiceConfig {
        &self.cfg
    }
    /// Multiplicative decreases made so far.
    pub fn halvings(&self) -> u64 {
        self.halvings
    }
    /// Congested ACKs counted in the current round.
    pub fn congested_acks(&self) -> u32 {
        self.num_cong
    }
}

impl CongestionControl for Nice {
    fn name(&self) -> &'static str {
        "nice"
    }
    fn on_ack(&mut self, ev: &AckEvent) -> AckAction {
        if let Some(r) = ev.rtt {
            let min = self.min_rtt.map_or(r, |m| m.min(r));
            let max = self.max_rtt.map_or(r, |m| m.max(r));
            (self.min_rtt, self.max_rtt) = (Some(min), Some(max));
            let threshold = min.0 as f64 + self.cfg.t * (max.0 - min.0) as f64;
            if r.0 as f64 > threshold {
                self.num_cong += 1;
            }
        }
        let (mss, f, floor) = (self.mss, self.cfg.f, (self.mss / self.cfg.min_window_divisor as u64).max(1));
        let num_cong = &mut self.num_cong;
        let halvings = &mut self.halvings;
        self.vegas.ack_with(ev, |reno, round| {
            let w = round.cwnd.0 as f64 / mss as f64;
            let congested = *num_cong as f64 > f * w;
            *num_cong = 0;
            if congested {
                let half = (round.cwnd.0 / 2).max(floor);
                reno.set_cwnd(Bytes(half));
                reno.set_ssthresh(Bytes(half));
                *halvings += 1;
            }
            congested
        })
    }
    fn on_timeout(&mut self, now: Time, in_flight: Bytes) {
        self.num_cong = 0;
        self.vegas.on_timeout(now, in_flight);
    }
    fn on_sent(&mut self, ev: &SentEvent) {
        self.vegas.on_sent(ev);
    }
    fn window(&self) -> Window {
        self.vegas.window()
    }
    fn in_recovery(&self) -> bool {
        self.vegas.in_recovery()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::vegas::tests::{ack, MSS};

    /// Feeds rounds of ACKs (one segment each) with the given RTT samples in ms. Each round's
    /// last ACK ends it: it is the first to pass the `snd_max` the previous round's end carried
    /// (`next_len` is the length of the round after the last one given).
    fn feed(n: &mut Nice, seq: &mut u64, rounds: &[Vec<u64>], next_len: usize) {
        for (r, samples) in rounds.iter().enumerate() {
            let next = rounds.get(r + 1).map_or(next_len, |s| s.len()) as u64;
            for (i, &rtt) in samples.iter().enumerate() {
                *seq += MSS;
                let last = i + 1 == samples.len();
                let snd_max = if last { *seq + (next - 1) * MSS } else { *seq };
                n.on_ack(&ack(r as u64 * 200 + i as u64, *seq, rtt, snd_max));
            }
        }
    }

    /// A Nice flow in congestion avoidance at 11 segments with minRTT 100 ms and maxRTT 200 ms
    /// known (threshold 110 ms), at the start of a round of 11 ACKs.
    fn primed() -> (Nice, u64) {
        let mut n = Nice::new(NiceConfig::default(), RenoConfig { mss: Bytes(MSS), ..RenoConfig::default() }).unwrap();
        let mut seq = 0;
        feed(&mut n, &mut seq, &[vec![100]], 10);
        n.vegas.set_window_for_test(Bytes(10 * MSS), Bytes(10 * MSS));
        let mut round = vec![100; 10];
        round[3] = 200;
        feed(&mut n, &mut seq, &[round], 11);
        assert_eq!(n.window().cwnd.0, 11 * MSS, "one congested ACK of 10: Vegas grew a segment");
        (n, seq)
    }

    #[test]
    fn nice_halves_when_more_than_f_w_acks_were_congested() {
        // W = 11 segments: f·W = 5.5. Six of eleven ACKs at 150 ms (> 110 ms): halve.
        let (mut n, mut seq) = primed();
        let mut round = vec![100; 11];
        round[..6].fill(150);
        feed(&mut n, &mut seq, &[round], 11);
        assert_eq!(n.halvings(), 1);
        assert_eq!(n.window().cwnd.0, 11 * MSS / 2, "halved");
        assert_eq!(n.window().ssthresh, n.window().cwnd, "stays in congestion avoidance");
    }

    #[test]
    fn nice_runs_vegas_when_at_most_f_w_acks_were_congested() {
        // Five of eleven (5 ≤ 5.5): no halving; the round's smallest RTT is BaseRTT, so
        // Vegas's Diff is 0 < α: one segment more.
        let (mut n, mut seq) = primed();
        let mut round = vec![100; 11];
        round[..5].fill(150);
        feed(&mut n, &mut seq, &[round], 11);
        assert_eq!(n.halvings(), 0);
        assert_eq!(n.window().cwnd.0, 12 * MSS, "Vegas's +1 segment");
    }

    #[test]
    fn nice_window_falls_below_one_segment_to_one_48th() {
        let (mut n, mut seq) = primed();
        let mut last = n.window().cwnd.0;
        let mut w = 11;
        for _ in 0..12 {
            // Every ACK congested; a round is one window (at least one ACK).
            let next = (last / 2 / MSS).max(1) as usize;
            feed(&mut n, &mut seq, &[vec![200; w]], next);
            w = next;
            let now = n.window().cwnd.0;
            assert!(now == (last / 2).max(MSS / 48), "{last} -> {now}");
            last = now;
        }
        assert_eq!(n.window().cwnd.0, MSS / 48, "floor of 1/48 segment");
    }
}
