//! Auto-ranging: PathQuick without a hand-set `B_max` (issue 19).
//!
//! # Why one train cannot cover 1–500 Mbit/s
//!
//! A PathQuick train spans `B_min = P_2/T_quick` to `B_max = P_N/T_quick` (PathQuick paper §3.3,
//! Eqs. 5 and 7), so its range ratio is `B_max/B_min = P_N/P_2`: with 1,500-byte packets at most
//! and a smallest probe of a few dozen bytes (IP, UDP and probe headers) that is about 35. Three
//! decades need several trains; the question is only how to spend them.
//!
//! # The scheme
//!
//! 1. **Coarse train** over `[top/14, top]` (`top` = 500 Mbit/s, or the server's cap if lower):
//!    `P_N` = the largest packet, `T_quick = P_N/top` (Eq. 5), `N` = [`COARSE_PACKETS`] so
//!    `ΔP = (P_N − P_1)/(N − 1)` (Eq. 2); it is short (30 × 24 µs = 0.7 ms at 500 Mbit/s) and its
//!    resolution `ΔP/T_quick` (Eq. 14) is about 1/30 of `top`; its large `ΔP` makes
//!    `B_min = (P_1 + ΔP)/T_quick` about `top/14`.
//! 2. If it reads *below range*, the next coarse train covers the range just below
//!    (`top ← B_min` of the last one), at most [`MAX_COARSE`] coarse trains in all (500 →
//!    36 → 2.6 Mbit/s, the last reaching down to 0.2 Mbit/s; at 1,500-byte packets the second
//!    lasts 10 ms, the third 140 ms).
//! 3. **Fine train** around the coarse result `A₀`: `B_max = max(2·A₀, A₀ + 2·resolution₀)`,
//!    capped at `top`, with the paper's `ΔP` = 12 B and `P_N` the largest packet (so `T_quick`
//!    and `N` follow from Eqs. 5 and 8). The knee sits near the middle of the train, with as many
//!    packets above it to show the queue's growth as below it, and the resolution is
//!    `B_max/((P_N − P_1)/ΔP)` ≈ 1/120 of `B_max`, about 1.7 % of `A₀`. The fine train's result
//!    is the answer. Above range on the coarse train at the top means the fine train probes
//!    `[top/120, top]` finely; inconclusive coarse trains do the same (the widest fine train).
//!
//! Cost: the coarse train is far shorter than the fine one (its `T_quick` is the fine train's
//! divided by `B_max/A₀` ≥ 2, and it has a quarter of the packets), so the estimate takes one
//! fine train + a fraction + one RTT (one handshake; every train rides on the same cookie).
//!
//! # Choices the issue left open
//!
//! - The coarse train is a PathQuick train too (equal spacing, growing sizes), not a
//!   packet-pair or a chirp, so the same estimator judges it.
//! - The factor 2 of the fine range, the coarse `N` and the ladder depth are ours, stated above.

use super::pathquick::{QuickDesign, QuickSpec};
use super::{DesignError, Outcome};
use crate::units::{Bytes, Rate};

/// Packets of a coarse train.
pub const COARSE_PACKETS: u32 = 31;
/// Coarse trains at most before the fine train.
pub const MAX_COARSE: u32 = 3;
/// The lowest top of a fine train: 1 Mbit/s, the bottom of the range (a train topped at
/// 1 Mbit/s with 1,500-byte packets lasts 1.45 s, under `headroom serve`'s 2 s cap).
pub const MIN_FINE_TOP: Rate = Rate(1_000_000);
/// The highest rate auto-ranging probes unless the server caps it lower.
pub const DEFAULT_TOP: Rate = Rate(500_000_000);
/// Size increment of the fine train (the paper's).
pub const FINE_DELTA_P: Bytes = Bytes(12);

/// The planner: feed it each train's outcome, it answers the next train.
#[derive(Clone, Debug)]
pub struct AutoRange {
    top: Rate,
    smallest: Bytes,
    largest: Bytes,
    coarse_done: u32,
    fine: bool,
    fine_delta_p: Bytes,
}

/// What to do after a train.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Send this (coarse) train and report its outcome.
    Coarse(QuickDesign),
    /// Send this train; its outcome is the answer.
    Fine(QuickDesign),
}

impl AutoRange {
    /// `top`: the highest rate to probe; `smallest`/`largest`: packet sizes (IP level).
    pub fn new(top: Rate, smallest: Bytes, largest: Bytes) -> AutoRange {
        AutoRange { top, smallest, largest, coarse_done: 0, fine: false, fine_delta_p: FINE_DELTA_P }
    }

    /// Fine trains with this size step instead of [`FINE_DELTA_P`] (a smaller step, more bytes:
    /// the socket client's [`super::shaper::SHAPER_DELTA_P`] when it looks for shapers).
    pub fn with_fine_delta_p(self, delta_p: Bytes) -> AutoRange {
        AutoRange { fine_delta_p: delta_p, ..self }
    }

    /// The first train (coarse, topped at `top`).
    pub fn first(&mut self) -> Result<Next, DesignError> {
        self.coarse_done = 1;
        Ok(Next::Coarse(self.coarse(self.top)?))
    }

    /// A coarse train topped at `b_max`.
    pub fn coarse(&self, b_max: Rate) -> Result<QuickDesign, DesignError> {
        let span = self.largest.0.saturating_sub(self.smallest.0);
        let delta_p = Bytes((span / (COARSE_PACKETS as u64 - 1)).max(1));
        self.spec(b_max, delta_p).solve()
    }

    /// The fine train around a coarse result `a0` whose train had resolution `res0`.
    pub fn fine(&self, a0: Rate, res0: Rate) -> Result<QuickDesign, DesignError> {
        let want = (a0.bps().saturating_mul(2)).max(a0.bps().saturating_add(res0.bps().saturating_mul(2)));
        self.spec(Rate(want.min(self.top.bps())), self.fine_delta_p).solve()
    }

    fn spec(&self, b_max: Rate, delta_p: Bytes) -> QuickSpec {
        QuickSpec {
            b_max: Some(b_max),
            p_n: Some(self.largest),
            p_1: Some(self.smallest),
            delta_p: Some(delta_p),
            max_size: self.largest,
            min_size: self.smallest,
            ..QuickSpec::default()
        }
    }

    /// After the coarse train `last` read `outcome`: the next train, or `None` after the fine
    /// train (its outcome is the answer).
    pub fn next(&mut self, last: &QuickDesign, outcome: &Outcome) -> Result<Option<Next>, DesignError> {
        if self.fine {
            return Ok(None);
        }
        let res = last.resolution();
        let fine_at = |a: Rate| -> Result<Option<Next>, DesignError> { Ok(Some(Next::Fine(self.fine(a, res)?))) };
        let next = match outcome {
            Outcome::Estimate(a) => fine_at(*a),
            Outcome::BelowRange { .. } if self.coarse_done < MAX_COARSE => {
                self.coarse_done += 1;
                return Ok(Some(Next::Coarse(self.coarse(last.b_min())?)));
            }
            // Below the lowest coarse train: a fine train over the bottom of the ladder.
            Outcome::BelowRange { at_most } => {
                Ok(Some(Next::Fine(self.spec((*at_most).max(MIN_FINE_TOP), self.fine_delta_p).solve()?)))
            }
            // Above a lower coarse train (the one above it read below range): around its top.
            Outcome::AboveRange { at_least } if self.coarse_done > 1 => fine_at(*at_least),
            Outcome::AboveRange { .. } | Outcome::Inconclusive { .. } => fine_at(self.top),
        };
        self.fine = true;
        next
    }
}

impl AutoRange {
    /// After the fine train `fine` read `outcome`: one more fine train when it read a bound
    /// (the coarse train was off by more than the factor 2 of the fine range; on the testbed at
    /// 100 Mbit/s with 30 Mbit/s of Poisson cross traffic the 0.7 ms coarse train, which sees
    /// two or three cross packets, read from 48 to 133 Mbit/s), `None` otherwise. Above range:
    /// a train topped at four times the last top (at most `top`); below range: a fine train
    /// around the bound. The retry's outcome is the answer, whatever it is.
    pub fn retry(&self, fine: &QuickDesign, outcome: &Outcome) -> Result<Option<QuickDesign>, DesignError> {
        let res = fine.resolution();
        match outcome {
            Outcome::AboveRange { .. } if fine.b_max() < self.top => {
                Ok(Some(self.fine(Rate(fine.b_max().bps().saturating_mul(2)), res)?))
            }
            Outcome::BelowRange { at_most } if *at_most > MIN_FINE_TOP => Ok(Some(self.fine(*at_most, res)?)),
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planner() -> AutoRange {
        AutoRange::new(DEFAULT_TOP, Bytes(60), Bytes(1500))
    }

    #[test]
    fn the_coarse_train_spans_top_over_14_to_top_in_a_millisecond() {
        let mut p = planner();
        let Next::Coarse(d) = p.first().unwrap() else { panic!("first train is coarse") };
        assert_eq!(d.n, COARSE_PACKETS);
        assert_eq!(d.t_quick.0, 24_000, "1500 B at 500 Mbit/s");
        assert!(d.b_max() <= DEFAULT_TOP && d.b_max().as_mbps() > 490.0, "{}", d.b_max());
        assert!(d.b_min().as_mbps() < 40.0, "{}", d.b_min());
        assert!(d.train_length().0 < 1_000_000, "{:?}", d.train_length());
    }

    #[test]
    fn an_estimate_leads_to_a_fine_train_twice_as_high_then_the_answer() {
        let mut p = planner();
        let Next::Coarse(c) = p.first().unwrap() else { panic!() };
        let next = p.next(&c, &Outcome::Estimate(Rate::from_mbps(100))).unwrap();
        let Some(Next::Fine(f)) = next else { panic!("{next:?}") };
        assert!((f.b_max().as_mbps() - 200.0).abs() < 2.0, "{}", f.b_max());
        assert_eq!(f.delta_p, FINE_DELTA_P);
        assert!(f.resolution().as_mbps() < 0.02 * 100.0, "resolution {}", f.resolution());
        assert!(f.b_min().as_mbps() < 100.0 / 3.0);
        assert_eq!(p.next(&f, &Outcome::Estimate(Rate::from_mbps(97))).unwrap(), None);
    }

    #[test]
    fn a_low_coarse_estimate_keeps_two_coarse_resolutions_of_headroom() {
        let mut p = planner();
        let Next::Coarse(c) = p.first().unwrap() else { panic!() };
        let a0 = c.b_min();
        let Some(Next::Fine(f)) = p.next(&c, &Outcome::Estimate(a0)).unwrap() else { panic!() };
        assert!(f.b_max().bps() + 1000 >= a0.bps() + 2 * c.resolution().bps(), "{} vs {}", f.b_max(), a0);
    }

    #[test]
    fn below_range_walks_down_the_ladder_to_one_megabit() {
        let mut p = planner();
        let Next::Coarse(c1) = p.first().unwrap() else { panic!() };
        let below = |d: &QuickDesign| Outcome::BelowRange { at_most: d.b_min() };
        let Some(Next::Coarse(c2)) = p.next(&c1, &below(&c1)).unwrap() else { panic!() };
        let (hi, lo) = (c2.b_max().as_mbps(), c1.b_min().as_mbps());
        assert!((hi / lo - 1.0).abs() < 0.02, "the next coarse train tops where the last began: {hi} vs {lo}");
        let Some(Next::Coarse(c3)) = p.next(&c2, &below(&c2)).unwrap() else { panic!() };
        assert!(c3.b_min().as_mbps() < 1.0, "the ladder reaches below 1 Mbit/s: {}", c3.b_min());
        let Some(Next::Fine(f)) = p.next(&c3, &below(&c3)).unwrap() else { panic!("no fourth coarse train") };
        assert_eq!(f.b_max().as_mbps().round(), 1.0, "the fine train tops at 1 Mbit/s: {}", f.b_max());
        assert!(f.train_length() < crate::units::Dur::from_secs(2), "{:?}", f.train_length());
    }

    #[test]
    fn above_a_lower_coarse_train_the_fine_train_centres_on_its_top() {
        let mut p = planner();
        let Next::Coarse(c1) = p.first().unwrap() else { panic!() };
        let Some(Next::Coarse(c2)) = p.next(&c1, &Outcome::BelowRange { at_most: c1.b_min() }).unwrap() else {
            panic!()
        };
        let Some(Next::Fine(f)) = p.next(&c2, &Outcome::AboveRange { at_least: c2.b_max() }).unwrap() else { panic!() };
        // A is between the second train's top and the first's bottom (36 Mbit/s): the fine train
        // covers it, not the 500 Mbit/s top
        assert!(f.b_max() >= c1.b_min() && f.b_max().as_mbps() < 100.0, "{}", f.b_max());
    }

    #[test]
    fn above_range_and_inconclusive_probe_finely_up_to_the_top() {
        for o in [Outcome::AboveRange { at_least: DEFAULT_TOP }, Outcome::Inconclusive { reason: "x".into() }] {
            let mut p = planner();
            let Next::Coarse(c) = p.first().unwrap() else { panic!() };
            let Some(Next::Fine(f)) = p.next(&c, &o).unwrap() else { panic!() };
            assert!(f.b_max() <= DEFAULT_TOP && f.b_max().as_mbps() > 490.0, "{}", f.b_max());
        }
    }

    #[test]
    fn a_fine_train_that_read_a_bound_is_retried_once_beyond_it() {
        let p = planner();
        let f = p.fine(Rate::from_mbps(30), Rate::from_mbps(16)).unwrap();
        let up = p.retry(&f, &Outcome::AboveRange { at_least: f.b_max() }).unwrap().expect("above: retried");
        assert!((up.b_max().as_mbps() / f.b_max().as_mbps() - 4.0).abs() < 0.1, "{} vs {}", up.b_max(), f.b_max());
        let down = p.retry(&f, &Outcome::BelowRange { at_most: f.b_min() }).unwrap().expect("below: retried");
        assert!(down.b_max() < f.b_max() && down.b_max() >= f.b_min(), "{} vs {}", down.b_max(), f.b_min());
        assert_eq!(p.retry(&f, &Outcome::Estimate(Rate::from_mbps(20))).unwrap(), None);
        let top = p.fine(DEFAULT_TOP, Rate::from_mbps(16)).unwrap();
        assert_eq!(
            p.retry(&top, &Outcome::AboveRange { at_least: top.b_max() }).unwrap(),
            None,
            "nothing above the top"
        );
    }
}
