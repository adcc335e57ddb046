//! Pathload's increasing-trend test on the one-way delays of one probe stream (Jain & Dovrolis,
//! "End-to-end available bandwidth: measurement methodology, dynamics, and relation with TCP
//! throughput", SIGCOMM 2002 / IEEE/ACM ToN 2003, §IV), as ImTCP §3.2.3 prescribes.
//!
//! # The test
//!
//! The `K` relative one-way delays `D_1..D_K` of a stream are split into `Γ = ⌈K / g⌉` groups of
//! `g = ⌊√K⌋` consecutive delays, and each group is replaced by its median `D̂_k`: the medians
//! are robust to the occasional single-packet outlier. On the medians:
//!
//! - **PCT** (pairwise comparison test) — the fraction of consecutive pairs that increase:
//!   `S_PCT = Σ_{k=2..Γ} 1(D̂_k > D̂_{k-1}) / (Γ - 1)`, in \[0, 1\]; about 0.5 for an
//!   independent sequence, 1 for a strictly increasing one.
//! - **PDT** (pairwise difference test) — the net rise over the total variation:
//!   `S_PDT = (D̂_Γ - D̂_1) / Σ_{k=2..Γ} |D̂_k - D̂_{k-1}|`, in \[-1, 1\].
//!
//! Each metric votes *increasing*, *not increasing* or *grey* (unsure) with Pathload's
//! published thresholds and grey zone: PCT increasing above 0.66, not increasing below 0.54;
//! PDT increasing above 0.55, not increasing below 0.45. The two votes combine as in Pathload:
//! the stream has an increasing trend when one metric says so and the other does not say the
//! opposite; it has none when one metric says "not increasing" and the other does not disagree;
//! otherwise (conflict, or both grey) it is unsure. ImTCP writes the result `T_i` as 1, -1, 0.
//!
//! # Choices
//!
//! - PCT divides by `Γ - 1`, the number of pairs (the paper's formula; the Pathload 1.3.2
//!   source divides by `Γ`).
//! - A stream with no variation at all (`Σ |ΔD̂| = 0`, e.g. an empty fluid queue) has PDT = 0:
//!   constant delays are "not increasing".
//! - Fewer than 3 medians cannot show a trend: the result is unsure (`T = 0`). With the paper's
//!   N = 3 the three delays are compared raw (g = 1), which is exactly why N = 3 is unreliable.

use crate::stats;

/// ImTCP's `T_i`: the trend of one stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trend {
    /// `T_i = 1`: the delays increase — the stream was faster than the available bandwidth.
    Increasing,
    /// `T_i = -1`: no increasing trend — the stream was slower than the available bandwidth.
    NotIncreasing,
    /// `T_i = 0`: the grey zone, conflicting metrics, or too few samples.
    Unsure,
}

impl Trend {
    /// The paper's numeric value `T_i`.
    pub fn score(self) -> i32 {
        match self {
            Trend::Increasing => 1,
            Trend::NotIncreasing => -1,
            Trend::Unsure => 0,
        }
    }
}

/// Thresholds of the PCT/PDT test (defaults: Pathload's published values).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrendConfig {
    /// PCT above this: increasing.
    pub pct_increasing: f64,
    /// PCT below this: not increasing (between the two: grey).
    pub pct_not_increasing: f64,
    /// PDT above this: increasing.
    pub pdt_increasing: f64,
    /// PDT below this: not increasing.
    pub pdt_not_increasing: f64,
}

impl Default for TrendConfig {
    fn default() -> Self {
        TrendConfig { pct_increasing: 0.66, pct_not_increasing: 0.54, pdt_increasing: 0.55, pdt_not_increasing: 0.45 }
    }
}

/// The two metrics and the verdict for one stream.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrendReport {
    pub pct: Option<f64>,
    pub pdt: Option<f64>,
    pub trend: Trend,
}

/// Medians of consecutive groups of `⌊√K⌋` delays (the last group may be shorter).
pub fn group_medians(delays: &[f64]) -> Vec<f64> {
    let k = delays.len();
    if k == 0 {
        return Vec::new();
    }
    let g = ((k as f64).sqrt().floor() as usize).max(1);
    delays.chunks(g).filter_map(stats::median).collect() // chunks are never empty
}

/// `S_PCT` over a sequence (None for fewer than two values).
pub fn pct(seq: &[f64]) -> Option<f64> {
    if seq.len() < 2 {
        return None;
    }
    let rises = seq.windows(2).filter(|w| w[1] > w[0]).count();
    Some(rises as f64 / (seq.len() - 1) as f64)
}

/// `S_PDT` over a sequence (None for fewer than two values; 0 when the sequence is flat).
pub fn pdt(seq: &[f64]) -> Option<f64> {
    if seq.len() < 2 {
        return None;
    }
    let total: f64 = seq.windows(2).map(|w| (w[1] - w[0]).abs()).sum();
    if total <= 0.0 {
        return Some(0.0);
    }
    Some((seq[seq.len() - 1] - seq[0]) / total)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Vote {
    Up,
    Flat,
    Grey,
}

fn vote(x: f64, up: f64, flat: f64) -> Vote {
    if x > up {
        Vote::Up
    } else if x < flat {
        Vote::Flat
    } else {
        Vote::Grey
    }
}

/// Combines the two metrics with Pathload's thresholds and grey zone.
pub fn classify(pct: f64, pdt: f64, cfg: &TrendConfig) -> Trend {
    let vp = vote(pct, cfg.pct_increasing, cfg.pct_not_increasing);
    let vd = vote(pdt, cfg.pdt_increasing, cfg.pdt_not_increasing);
    match (vp, vd) {
        (Vote::Up, Vote::Up) | (Vote::Up, Vote::Grey) | (Vote::Grey, Vote::Up) => Trend::Increasing,
        (Vote::Flat, Vote::Flat) | (Vote::Flat, Vote::Grey) | (Vote::Grey, Vote::Flat) => Trend::NotIncreasing,
        _ => Trend::Unsure,
    }
}

/// Pathload's trend test on the delays `D_j` of one stream (in any unit; only differences matter).
pub fn trend_of(delays: &[f64], cfg: &TrendConfig) -> TrendReport {
    let medians = group_medians(delays);
    if medians.len() < 3 {
        return TrendReport { pct: None, pdt: None, trend: Trend::Unsure };
    }
    let (Some(p), Some(d)) = (pct(&medians), pdt(&medians)) else {
        return TrendReport { pct: None, pdt: None, trend: Trend::Unsure };
    };
    let trend = classify(p, d, cfg);
    TrendReport { pct: Some(p), pdt: Some(d), trend }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random sequence in [-1, 1) (no dependency on a RNG crate).
    fn noise(n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 33) as f64 / (1u64 << 31) as f64) - 1.0
            })
            .collect()
    }

    #[test]
    fn pct_and_pdt_on_known_sequences() {
        assert_eq!(pct(&[1.0, 2.0, 3.0, 4.0]), Some(1.0));
        assert_eq!(pct(&[4.0, 3.0, 2.0, 1.0]), Some(0.0));
        assert_eq!(pct(&[1.0, 2.0, 1.0]), Some(0.5));
        assert_eq!(pdt(&[1.0, 2.0, 3.0]), Some(1.0));
        assert_eq!(pdt(&[3.0, 2.0, 1.0]), Some(-1.0));
        // rise 1, then fall 1, then rise 2: net 2 over total 4
        assert_eq!(pdt(&[0.0, 1.0, 0.0, 2.0]), Some(0.5));
        assert_eq!(pdt(&[5.0, 5.0, 5.0]), Some(0.0));
        assert_eq!(pct(&[1.0]), None);
    }

    #[test]
    fn medians_group_by_square_root() {
        let d: Vec<f64> = (0..35).map(|i| i as f64).collect();
        let m = group_medians(&d);
        // g = 5, seven groups of five
        assert_eq!(m.len(), 7);
        assert_eq!(m[0], 2.0);
        assert_eq!(m[6], 32.0);
        // an outlier inside a group does not move its median
        let mut d2 = d.clone();
        d2[1] = 1000.0;
        assert_eq!(group_medians(&d2)[0], 3.0);
    }

    #[test]
    fn increasing_delays_with_noise_are_increasing() {
        let cfg = TrendConfig::default();
        let n = noise(35, 7);
        // queue building at 1 ms per packet, jitter of +-1.5 ms
        let d: Vec<f64> = (0..35).map(|i| i as f64 * 1.0 + 1.5 * n[i]).collect();
        let r = trend_of(&d, &cfg);
        assert_eq!(r.trend, Trend::Increasing, "{r:?}");
        assert!(r.pct.unwrap() > 0.66 && r.pdt.unwrap() > 0.55);
    }

    #[test]
    fn flat_noisy_delays_are_not_increasing() {
        let cfg = TrendConfig::default();
        let mut verdicts = [0usize; 3];
        for seed in 0..50 {
            let d = noise(35, seed);
            match trend_of(&d, &cfg).trend {
                Trend::Increasing => verdicts[0] += 1,
                Trend::NotIncreasing => verdicts[1] += 1,
                Trend::Unsure => verdicts[2] += 1,
            }
        }
        // pure noise must almost never look like a queue building up
        assert!(verdicts[0] <= 3, "{verdicts:?}");
        assert!(verdicts[1] >= 25, "{verdicts:?}");
    }

    #[test]
    fn constant_delays_have_no_trend_and_decreasing_none_either() {
        let cfg = TrendConfig::default();
        assert_eq!(trend_of(&[0.01; 35], &cfg).trend, Trend::NotIncreasing);
        let dec: Vec<f64> = (0..35).map(|i| 100.0 - i as f64).collect();
        assert_eq!(trend_of(&dec, &cfg).trend, Trend::NotIncreasing);
    }

    #[test]
    fn grey_zone_and_conflicts_give_unsure() {
        let cfg = TrendConfig::default();
        // both metrics inside their grey zones
        assert_eq!(classify(0.60, 0.50, &cfg), Trend::Unsure);
        // one grey, the other decisive: the decisive one wins
        assert_eq!(classify(0.60, 0.70, &cfg), Trend::Increasing);
        assert_eq!(classify(0.70, 0.50, &cfg), Trend::Increasing);
        assert_eq!(classify(0.60, 0.10, &cfg), Trend::NotIncreasing);
        assert_eq!(classify(0.20, 0.50, &cfg), Trend::NotIncreasing);
        // conflict: PCT says up, PDT says flat
        assert_eq!(classify(0.80, 0.20, &cfg), Trend::Unsure);
        assert_eq!(classify(0.10, 0.90, &cfg), Trend::Unsure);
        // thresholds are strict inequalities at the edges of the grey zone
        assert_eq!(classify(0.66, 0.55, &cfg), Trend::Unsure);
        assert_eq!(classify(0.54, 0.45, &cfg), Trend::Unsure);
    }

    #[test]
    fn too_few_samples_is_unsure() {
        let cfg = TrendConfig::default();
        assert_eq!(trend_of(&[1.0, 2.0], &cfg).trend, Trend::Unsure);
        assert_eq!(trend_of(&[], &cfg).trend, Trend::Unsure);
        // three raw delays are enough to vote (N = 3 in the paper)
        assert_eq!(trend_of(&[1.0, 2.0, 3.0], &cfg).trend, Trend::Increasing);
    }
}
