//! The samplers, as methods of [`Rng`]; the table of them, with methods and sources, is in the
//! [module documentation](super).

use super::{exp, ln, Rng};

/// The largest mean [`Rng::poisson`] honours (a larger mean is clamped to it): the method costs
/// about `mean + 1` draws, so this bounds one call to ten million of them.
pub const POISSON_MAX_MEAN: f64 = 1e7;

impl Rng {
    /// Uniform in [0, 1): the top 53 bits of one output times 2^-53, so every multiple of 2^-53
    /// in [0, 1) is equally likely (Vigna's recommended conversion, prng.di.unimi.it).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [lo, hi) (`lo` when `hi <= lo`).
    pub fn uniform_range(&mut self, lo: f64, hi: f64) -> f64 {
        if hi <= lo {
            return lo;
        }
        lo + (hi - lo) * self.uniform()
    }

    /// Uniform integer in [0, n), without bias; 0 (and no draw) when `n == 0`. Lemire's
    /// multiply-and-reject method ("Fast random integer generation in an interval", ACM TOMACS
    /// 2019): the high word of `x n`, rejecting the `2^64 mod n` low words that would bias it; one
    /// multiplication and one draw in the common case.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = self.next_u64() as u128 * n as u128;
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// Exponentially distributed with the given mean, by inversion (Knuth TAOCP Vol. 2, §3.4.1 D;
    /// Devroye 1986, §II.2): `-mean ln(1 - U)`. 0, without a draw, for a mean <= 0 or NaN.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        if mean <= 0.0 || mean.is_nan() {
            return 0.0;
        }
        // 1 - U lies in (0, 1], so the logarithm is finite.
        -mean * ln(1.0 - self.uniform())
    }

    /// Pareto ("type I") distributed with the given `shape` α (> 1) and `mean`: scale
    /// `x_m = mean (α - 1) / α`, `P(X > x) = (x_m / x)^α` for `x >= x_m`. By inversion (Devroye
    /// 1986, §II.2): `x_m (1 - U)^(-1/α)`. Parameterised by its mean as ns-2's
    /// `RandomVariable/Pareto` (`avg_`, `shape_`) is. Returns `max(mean, 0)` without a draw when
    /// `α <= 1` (infinite mean) or the mean is not positive; callers validate their configuration.
    pub fn pareto(&mut self, shape: f64, mean: f64) -> f64 {
        if shape.is_nan() || shape <= 1.0 || mean.is_nan() || mean <= 0.0 {
            return mean.max(0.0);
        }
        let scale = mean * (shape - 1.0) / shape;
        let v = 1.0 - self.uniform(); // in (0, 1]
        scale * exp(-ln(v) / shape)
    }

    /// True with probability `p`: `U < p`, one draw (`p <= 0` never, `p >= 1` always).
    pub fn bernoulli(&mut self, p: f64) -> bool {
        self.uniform() < p
    }

    /// Uniform integer in `min(a, b)..=max(a, b)`, without bias: `lo + below(hi - lo + 1)`
    /// ([`Rng::below`]; a single point still takes one draw); the full range `0..=u64::MAX` is
    /// one raw 64-bit output.
    pub fn uniform_int(&mut self, a: u64, b: u64) -> u64 {
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        match (hi - lo).checked_add(1) {
            Some(n) => lo + self.below(n),
            None => self.next_u64(),
        }
    }

    /// Poisson distributed with the given mean: the number of arrivals of a unit-rate Poisson
    /// process in `[0, mean)`, counted by adding unit-mean exponential gaps ([`Rng::exponential`])
    /// until their sum reaches `mean`. This is Knuth's product-of-uniforms method (TAOCP Vol. 2,
    /// §3.4.1 F: multiply uniforms until the product falls below e^-mean) taken in log space,
    /// which needs no `exp(-mean)` and so no underflow for large means.
    ///
    /// Always draws the first gap, so a call consumes `result + 1` exponential draws. Cost grows
    /// with the mean: a mean above [`POISSON_MAX_MEAN`] is clamped to it; a NaN or non-positive
    /// mean gives 0.
    pub fn poisson(&mut self, mean: f64) -> u64 {
        let lambda = if mean.is_nan() { 0.0 } else { mean.min(POISSON_MAX_MEAN) };
        let mut count = 0;
        let mut t = self.exponential(1.0);
        while t < lambda {
            count += 1;
            t += self.exponential(1.0);
        }
        count
    }

    /// Geometric on 1, 2, 3, … with the given mean: the number of Bernoulli trials up to and
    /// including the first success, success probability `p = 1 / mean`, so
    /// `P(k) = p (1 - p)^(k - 1)`. By inversion (Knuth TAOCP Vol. 2, §3.4.1 F;
    /// Devroye 1986, §X.2):
    /// `1 + floor(ln V / ln(1 - p))` with `V = 1 - U` in (0, 1].
    ///
    /// A mean <= 1 or NaN gives 1 without a draw. Saturates at `u64::MAX` (also when the mean is
    /// so large that `1 - 1/mean` rounds to 1).
    pub fn geometric(&mut self, mean: f64) -> u64 {
        if mean.is_nan() || mean <= 1.0 {
            return 1;
        }
        let q = 1.0 - 1.0 / mean; // failure probability
        if q >= 1.0 {
            return u64::MAX;
        }
        let v = 1.0 - self.uniform(); // (0, 1]
        let failures = ln(v) / ln(q); // ln q < 0 and ln v <= 0: >= 0
        (failures as u64).saturating_add(1) // `as` truncates (floor of a non-negative) and saturates
    }

    /// One value of `table`, value `x_i` with probability `w_i / Σ w` for integer weights `w_i`:
    /// an exact integer pick `J = below(Σ w)` ([`Rng::below`], unbiased) and a sequential search
    /// for the first `i` with `J < w_1 + … + w_i` (Devroye 1986, §III.2). Use it where the
    /// probabilities are ratios of small integers (the Internet packet-size mix); `None` (and no
    /// draw) when the weights sum to 0.
    pub fn weighted<T: Copy>(&mut self, table: &[(T, u32)]) -> Option<T> {
        let total: u64 = table.iter().map(|p| u64::from(p.1)).sum();
        if total == 0 {
            return None;
        }
        let mut pick = self.below(total);
        for &(value, weight) in table {
            if pick < u64::from(weight) {
                return Some(value);
            }
            pick -= u64::from(weight);
        }
        None // unreachable: pick < total
    }

    /// One value of an empirical distribution given as `(value, weight)` points, value `x_i`
    /// with probability `w_i / Σ w` (weights need not sum to one; a negative or NaN weight counts
    /// as 0): inversion by sequential search (Devroye 1986, §III.2) on `U Σ w`. When rounding
    /// carries the pick past the last point, the last point with a positive weight is taken.
    ///
    /// Always one draw; `None` when no weight is positive.
    pub fn empirical<T: Copy>(&mut self, table: &[(T, f64)]) -> Option<T> {
        let total: f64 = table.iter().map(|p| p.1.max(0.0)).sum();
        let mut pick = self.uniform() * total;
        for &(value, weight) in table {
            let w = weight.max(0.0);
            if pick < w {
                return Some(value);
            }
            pick -= w;
        }
        table.iter().rev().find(|p| p.1 > 0.0).map(|p| p.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_moments_and_range() {
        let mut r = Rng::new(1);
        let n = 200_000;
        let mut sum = 0.0;
        let mut sum2 = 0.0;
        for _ in 0..n {
            let u = r.uniform();
            assert!((0.0..1.0).contains(&u));
            sum += u;
            sum2 += u * u;
        }
        let mean = sum / n as f64;
        let var = sum2 / n as f64 - mean * mean;
        assert!((mean - 0.5).abs() < 0.005, "mean {mean}");
        assert!((var - 1.0 / 12.0).abs() < 0.002, "var {var}");
        for _ in 0..1000 {
            let v = r.uniform_range(-3.0, 5.0);
            assert!((-3.0..5.0).contains(&v));
        }
        assert_eq!(r.uniform_range(2.0, 2.0), 2.0);
    }

    #[test]
    fn below_is_unbiased_and_in_range() {
        let mut r = Rng::new(9);
        let mut counts = [0u32; 6];
        let n = 600_000;
        for _ in 0..n {
            let v = r.below(6);
            counts[v as usize] += 1;
        }
        for c in counts {
            // expected 100_000 each, sd ~ 289
            assert!((c as i64 - 100_000).abs() < 1_500, "{counts:?}");
        }
        // A range that is not a power of two near 2^63 would be badly biased by `% n`.
        let big = (1u64 << 63) + (1u64 << 62);
        let above_half = (0..20_000).filter(|_| r.below(big) >= big / 2).count();
        assert!((above_half as i64 - 10_000).abs() < 500, "{above_half}");
        assert_eq!(r.below(1), 0);
        assert_eq!(r.below(0), 0);
    }

    #[test]
    fn exponential_mean_and_variance() {
        let mut r = Rng::new(3);
        let n = 400_000;
        let xs: Vec<f64> = (0..n).map(|_| r.exponential(2.5)).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!((mean / 2.5 - 1.0).abs() < 0.01, "mean {mean}");
        assert!((var / 6.25 - 1.0).abs() < 0.03, "var {var}");
        assert!(xs.iter().all(|x| *x >= 0.0 && x.is_finite()));
        assert_eq!(r.exponential(0.0), 0.0);
    }

    #[test]
    fn pareto_mean_scale_and_tail() {
        let mut r = Rng::new(5);
        // Shape 2.5: finite variance, so the sample mean converges at the usual rate.
        let n = 400_000;
        let xs: Vec<f64> = (0..n).map(|_| r.pareto(2.5, 10.0)).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        assert!((mean / 10.0 - 1.0).abs() < 0.01, "mean {mean}");
        let scale = 10.0 * 1.5 / 2.5;
        assert!(xs.iter().all(|x| *x >= scale * (1.0 - 1e-12)));
        // Tail: P(X > 2 scale) = 2^-2.5 = 0.1768.
        let p = xs.iter().filter(|x| **x > 2.0 * scale).count() as f64 / n as f64;
        assert!((p - 0.176_78).abs() < 0.003, "tail {p}");
        // Shape 1.2 (web objects): infinite variance, so check the median,
        // scale * 2^(1/1.2), instead of the mean.
        let mut ys: Vec<f64> = (0..200_001).map(|_| r.pareto(1.2, 12_000.0)).collect();
        ys.sort_by(f64::total_cmp);
        let median = ys[100_000];
        let expect = 2_000.0 * 2f64.powf(1.0 / 1.2);
        assert!((median / expect - 1.0).abs() < 0.01, "median {median} vs {expect}");
    }

    #[test]
    fn bernoulli_frequency() {
        let mut r = Rng::new(11);
        let n = 200_000;
        let hits = (0..n).filter(|_| r.bernoulli(0.3)).count() as f64 / n as f64;
        assert!((hits - 0.3).abs() < 0.005, "{hits}");
        assert!(!(0..1000).any(|_| r.bernoulli(0.0)));
        assert!((0..1000).all(|_| r.bernoulli(1.0)));
    }

    /// Sample mean and (population) variance.
    fn moments(xs: &[f64]) -> (f64, f64) {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        (mean, xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n)
    }

    #[test]
    fn uniform_int_covers_the_inclusive_range_evenly() {
        let mut r = Rng::new(17);
        let mut counts = [0u32; 5];
        for _ in 0..500_000 {
            let v = r.uniform_int(300, 304);
            assert!((300..=304).contains(&v));
            counts[(v - 300) as usize] += 1;
        }
        for c in counts {
            // expected 100_000 each, sd ~ 283
            assert!((i64::from(c) - 100_000).abs() < 1_500, "{counts:?}");
        }
        // Reversed bounds are swapped; a single point still takes its one draw.
        assert!((0..1000).map(|_| r.uniform_int(9, 7)).all(|v| (7..=9).contains(&v)));
        let mut expect = r.clone();
        expect.next_u64();
        assert_eq!(r.uniform_int(5, 5), 5);
        assert_eq!(r, expect);
        // The whole u64 range does not overflow.
        let full: Vec<u64> = (0..1000).map(|_| r.uniform_int(0, u64::MAX)).collect();
        assert!(full.iter().any(|v| *v > u64::MAX / 2) && full.iter().any(|v| *v < u64::MAX / 2));
    }

    #[test]
    fn poisson_mean_variance_and_probabilities() {
        let mut r = Rng::new(19);
        for mean in [0.5, 7.0, 40.0] {
            let xs: Vec<f64> = (0..200_000).map(|_| r.poisson(mean) as f64).collect();
            let (m, v) = moments(&xs);
            // Poisson: variance equals the mean.
            assert!((m / mean - 1.0).abs() < 0.01, "mean {mean}: sample mean {m}");
            assert!((v / mean - 1.0).abs() < 0.03, "mean {mean}: sample variance {v}");
        }
        // P(0) = e^-mean, P(1) = mean e^-mean at mean 2: 0.1353, 0.2707.
        let n = 400_000;
        let xs: Vec<u64> = (0..n).map(|_| r.poisson(2.0)).collect();
        let p0 = xs.iter().filter(|x| **x == 0).count() as f64 / n as f64;
        let p1 = xs.iter().filter(|x| **x == 1).count() as f64 / n as f64;
        assert!((p0 - 0.135_335).abs() < 0.002, "P(0) {p0}");
        assert!((p1 - 0.270_671).abs() < 0.003, "P(1) {p1}");
        // A call consumes exactly result + 1 unit exponentials.
        let mut a = Rng::new(23);
        let mut b = a.clone();
        for _ in 0..1000 {
            let k = a.poisson(3.0);
            for _ in 0..=k {
                b.exponential(1.0);
            }
            assert_eq!(a, b);
        }
        // Degenerate means: 0, without looping.
        assert_eq!(r.poisson(0.0), 0);
        assert_eq!(r.poisson(-3.0), 0);
        assert_eq!(r.poisson(f64::NAN), 0);
    }

    #[test]
    fn poisson_huge_mean_is_clamped_not_endless() {
        let mut r = Rng::new(29);
        let k = r.poisson(f64::INFINITY) as f64;
        // Clamped to POISSON_MAX_MEAN = 1e7: sd ~ 3162.
        assert!((k - POISSON_MAX_MEAN).abs() < 20_000.0, "{k}");
    }

    #[test]
    fn geometric_mean_variance_and_support() {
        let mut r = Rng::new(31);
        for mean in [1.5, 8.0, 100.0] {
            let xs: Vec<u64> = (0..300_000).map(|_| r.geometric(mean)).collect();
            assert!(xs.iter().all(|k| *k >= 1));
            let fs: Vec<f64> = xs.iter().map(|k| *k as f64).collect();
            let (m, v) = moments(&fs);
            // Variance (1 - p) / p^2 with p = 1/mean: mean (mean - 1).
            let want_var = mean * (mean - 1.0);
            assert!((m / mean - 1.0).abs() < 0.01, "mean {mean}: sample mean {m}");
            assert!((v / want_var - 1.0).abs() < 0.04, "mean {mean}: sample variance {v} vs {want_var}");
            // P(1) = p.
            let p1 = xs.iter().filter(|k| **k == 1).count() as f64 / xs.len() as f64;
            assert!((p1 - 1.0 / mean).abs() < 0.004, "mean {mean}: P(1) {p1}");
        }
        // Degenerate means give 1 without a draw; an astronomically large one saturates.
        let before = r.clone();
        assert_eq!(r.geometric(1.0), 1);
        assert_eq!(r.geometric(0.2), 1);
        assert_eq!(r.geometric(f64::NAN), 1);
        assert_eq!(r, before);
        assert_eq!(r.geometric(1e300), u64::MAX);
    }

    #[test]
    fn weighted_picks_in_proportion_to_integer_weights() {
        let mut r = Rng::new(37);
        let table = [('a', 7), ('b', 0), ('c', 4), ('d', 1)];
        let n = 600_000;
        let mut counts = std::collections::BTreeMap::new();
        for _ in 0..n {
            *counts.entry(r.weighted(&table).unwrap()).or_insert(0u32) += 1;
        }
        assert!(!counts.contains_key(&'b'), "a zero weight is never drawn");
        for (value, weight) in [('a', 7.0), ('c', 4.0), ('d', 1.0)] {
            let share = f64::from(counts[&value]) / n as f64;
            assert!((share - weight / 12.0).abs() < 0.003, "{value}: {share}");
        }
        // Nothing to pick: None, and no draw.
        let before = r.clone();
        assert_eq!(r.weighted::<u8>(&[]), None);
        assert_eq!(r.weighted(&[(1u8, 0)]), None);
        assert_eq!(r, before);
        // Weights whose sum overflows u32 are summed exactly.
        let big = [(0u8, u32::MAX), (1u8, u32::MAX)];
        let ones = (0..100_000).filter(|_| r.weighted(&big) == Some(1)).count();
        assert!((ones as i64 - 50_000).abs() < 800, "{ones}");
    }

    #[test]
    fn empirical_picks_in_proportion_to_real_weights() {
        let mut r = Rng::new(41);
        let table = [(100u32, 1.0), (200, 0.0), (300, -2.0), (400, f64::NAN), (1000, 3.0)];
        let n = 400_000;
        let xs: Vec<u32> = (0..n).map(|_| r.empirical(&table).unwrap()).collect();
        assert!(xs.iter().all(|x| *x == 100 || *x == 1000), "zero, negative and NaN weights never drawn");
        let share = xs.iter().filter(|x| **x == 1000).count() as f64 / n as f64;
        assert!((share - 0.75).abs() < 0.003, "{share}");
        // No positive weight: None after one draw.
        let mut expect = r.clone();
        expect.uniform();
        assert_eq!(r.empirical(&[(5u32, 0.0)]), None);
        assert_eq!(r.empirical::<u32>(&[]), None);
        expect.uniform();
        assert_eq!(r, expect);
    }
}
