//! The PathQuick paper's analytic comparison with pathChirp (§4.2.3, §4.3.2, §4.4.2, §4.5),
//! computed from the two designs.
//!
//! - Train length and estimate time (`+ RTT`) at the same range (§4.2.3).
//! - Range covered within an estimate-time budget (§4.3.2). As in the paper's Fig. 4, the
//!   budget minus one RTT bounds the train length, and `B_max` is swept over PathQuick's own
//!   rate grid `R_i = P_i / T_quick`: the range is `B_min` up to the largest `R_i` whose train
//!   (Eq. 9, resp. Eq. 13 with the real-valued `M`) fits. With the paper's numbers the chirp
//!   curve gives 389 ms at 200 kbps and 486 ms at 296 kbps, hence 104–200 kbps in 448 ms.
//!   Also given: the rates actually probed by the full 28-packet chirp before the budget runs
//!   out (a stricter, per-packet reading).
//! - Mean resolution: `ΔP / T_quick` (Eq. 14) vs Eq. 16.
//! - Bytes per train (§4.5), and PathQuick with `ΔP` doubled (half as many packets).

use super::pathchirp::{train_length_eq13, ChirpDesign, ChirpSpec};
use super::pathquick::{train_length_eq9, QuickDesign, QuickSpec};
use super::{gap_rates, DesignError};
use crate::units::{Bytes, Dur, Rate};

/// Inputs of the comparison.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ComparisonSetup {
    pub quick: QuickSpec,
    /// pathChirp's spread factor; the chirp uses PathQuick's `P_N` and range.
    pub gamma: f64,
    pub rtt: Dur,
    /// Budget for the whole estimate (train + RTT).
    pub budget: Dur,
}

impl ComparisonSetup {
    /// §4: T_quick = 1 ms, P_1 = 1 B, ΔP = 12 B, P_N = 1,489 B, γ = 1.2, RTT 52 ms, 500 ms budget.
    pub fn paper() -> ComparisonSetup {
        ComparisonSetup {
            quick: QuickSpec::paper(),
            gamma: 1.2,
            rtt: Dur::from_millis(52),
            budget: Dur::from_millis(500),
        }
    }
}

/// Results of the comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub quick: QuickDesign,
    pub chirp: ChirpDesign,
    pub rtt: Dur,
    pub budget: Dur,
    pub quick_train: Dur,
    pub chirp_train: Dur,
    pub quick_estimate_time: Dur,
    pub chirp_estimate_time: Dur,
    /// Range within `budget - rtt` of train (the paper's reading, on the Fig. 4 curve).
    pub quick_range_in_budget: (Rate, Rate),
    pub chirp_range_in_budget: (Rate, Rate),
    /// Highest gap rate of the concrete chirp sent before `budget - rtt`.
    pub chirp_packets_in_budget: u32,
    pub chirp_top_rate_in_budget: Rate,
    pub quick_resolution: Rate,
    pub chirp_resolution: Rate,
    pub quick_bytes: Bytes,
    pub chirp_bytes: Bytes,
    /// PathQuick with `2·ΔP`, same `P_1`, `P_N`, `T_quick`.
    pub half_quick: QuickDesign,
}

impl Comparison {
    pub fn compute(setup: &ComparisonSetup) -> Result<Comparison, DesignError> {
        let quick = setup.quick.solve()?;
        let chirp = ChirpSpec {
            gamma: setup.gamma,
            size: quick.p_n(),
            b_min: quick.b_min(),
            b_max: quick.b_max(),
            max_size: setup.quick.max_size,
        }
        .design()?;
        let p1 = quick.p_1.0 as f64;
        let pn = quick.p_n().0 as f64;
        let b_min = quick.b_min().0 as f64;
        let b_max = quick.b_max().0 as f64;
        let chirp_train = Dur::from_secs_f64(train_length_eq13(pn, setup.gamma, b_min, b_max));
        let allowance = setup.budget.saturating_sub(setup.rtt).as_secs_f64();
        // Sweep B_max over PathQuick's grid R_2..R_N.
        let grid: Vec<Rate> = (2..=quick.n).map(|i| quick.rate_of(i)).collect();
        let fits = |f: &dyn Fn(f64) -> Option<f64>| {
            grid.iter().copied().filter(|r| f(r.0 as f64).map(|t| t <= allowance + 1e-12).unwrap_or(false)).max()
        };
        // At B_max = B_min both trains are just their first gap.
        let quick_top = fits(&|bmax| {
            if bmax <= b_min {
                Some(quick.t_quick.as_secs_f64())
            } else {
                train_length_eq9(p1, pn.min(bmax * quick.t_quick.as_secs_f64() / 8.0), b_min, bmax)
            }
        });
        let chirp_top = fits(&|bmax| Some(train_length_eq13(pn, setup.gamma, b_min, bmax.max(b_min))));
        let sched = chirp.schedule();
        let in_budget = sched.iter().filter(|p| p.offset.as_secs_f64() <= allowance).count() as u32;
        let rates = gap_rates(&sched);
        let chirp_top_rate_in_budget = if in_budget >= 2 { rates[in_budget as usize - 2] } else { Rate::ZERO };
        let half_quick = QuickSpec {
            t_quick: Some(quick.t_quick),
            p_1: Some(quick.p_1),
            delta_p: Some(Bytes(quick.delta_p.0 * 2)),
            p_n: Some(quick.p_n()),
            max_size: setup.quick.max_size,
            min_size: setup.quick.min_size,
            ..QuickSpec::default()
        }
        .solve()?;
        Ok(Comparison {
            quick,
            chirp,
            rtt: setup.rtt,
            budget: setup.budget,
            quick_train: quick.train_length(),
            chirp_train,
            quick_estimate_time: quick.estimate_time(setup.rtt),
            chirp_estimate_time: chirp_train + setup.rtt,
            quick_range_in_budget: (quick.b_min(), quick_top.unwrap_or(Rate::ZERO)),
            chirp_range_in_budget: (quick.b_min(), chirp_top.unwrap_or(Rate::ZERO)),
            chirp_packets_in_budget: in_budget,
            chirp_top_rate_in_budget,
            quick_resolution: quick.resolution(),
            chirp_resolution: chirp.mean_resolution_eq16(),
            quick_bytes: quick.bytes(),
            chirp_bytes: chirp.bytes(),
            half_quick,
        })
    }

    /// How many times wider PathQuick's in-budget range is, `(hi-lo)/(hi-lo)`.
    pub fn range_ratio(&self) -> f64 {
        let w = |r: (Rate, Rate)| r.1 .0.saturating_sub(r.0 .0) as f64;
        w(self.quick_range_in_budget) / w(self.chirp_range_in_budget)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_numbers() {
        let c = Comparison::compute(&ComparisonSetup::paper()).unwrap();
        // §4.2.3: trains 124 vs 682 ms, estimates 176 vs 734 ms.
        assert_eq!(c.quick_train, Dur::from_millis(124));
        assert_eq!(c.chirp_train.as_millis_f64().round(), 682.0);
        assert_eq!(c.quick_estimate_time, Dur::from_millis(176));
        assert_eq!(c.chirp_estimate_time.as_millis_f64().round(), 734.0);
        let speedup = c.chirp_estimate_time.as_secs_f64() / c.quick_estimate_time.as_secs_f64();
        assert!((speedup - 4.2).abs() < 0.05, "{speedup}");
        // §4.3.2: 104–11,912 kbps vs 104–200 kbps in a 448 ms train budget.
        assert_eq!(c.quick_range_in_budget, (Rate::from_kbps(104), Rate::from_kbps(11_912)));
        assert_eq!(c.chirp_range_in_budget, (Rate::from_kbps(104), Rate::from_kbps(200)));
        assert!((c.range_ratio() - 123.0).abs() < 0.01, "{}", c.range_ratio());
        // The concrete chirp: 6 packets by 448 ms, top gap 104·1.2⁴ = 215.7 kbps.
        assert_eq!(c.chirp_packets_in_budget, 6);
        assert!((c.chirp_top_rate_in_budget.as_kbps() - 215.7).abs() < 0.1);
        // §4.4.2: 96 kbps vs Eq. 16.
        assert_eq!(c.quick_resolution, Rate::from_kbps(96));
        assert!((c.chirp_resolution.as_kbps() - 422.6).abs() < 0.1);
        // §4.5: 93.1 KB vs 41.7 KB; 46.9 KB with ΔP = 24, N = 63.
        assert_eq!((c.quick_bytes.0 as f64 / 100.0).round() / 10.0, 93.1);
        assert_eq!((c.chirp_bytes.0 as f64 / 100.0).round() / 10.0, 41.7);
        assert_eq!(c.half_quick.n, 63);
        assert_eq!((c.half_quick.bytes().0 as f64 / 100.0).round() / 10.0, 46.9);
        assert_eq!(c.half_quick.resolution(), Rate::from_kbps(192));
    }

    #[test]
    fn a_tighter_budget_shrinks_both_ranges() {
        let setup = ComparisonSetup { budget: Dur::from_millis(152), ..ComparisonSetup::paper() };
        let c = Comparison::compute(&setup).unwrap();
        // 100 ms of train: PathQuick reaches R_101 = (1 + 100·12)·8 / 1 ms = 9,608 kbps.
        assert_eq!(c.quick_range_in_budget.1, Rate::from_kbps(9_608));
        // The chirp's first gap alone (114.5 ms) does not fit.
        assert_eq!(c.chirp_range_in_budget.1, Rate::ZERO);
    }
}
