//! headroom's deterministic pseudo-random number generator (the simulator's, and every other random
//! consumer's: testbed traffic, test paths).
//!
//! # Algorithm
//!
//! [`Rng`] is xoshiro256** (Blackman and Vigna, "Scrambled linear pseudorandom number
//! generators", ACM TOMS 2021): 256 bits of state, period 2^256 - 1, each output the state word
//! `s[1]` scrambled by `rotl(s[1] * 5, 7) * 9`. A 64-bit seed is expanded into the four state
//! words by splitmix64 (Steele, Lea and Flood, OOPSLA 2014), as the xoshiro authors recommend;
//! splitmix64 never yields the all-zero state for four consecutive outputs, so every seed,
//! including 0, is valid.
//!
//! # Sub-streams
//!
//! Every random consumer of a run (a flow, a web client, a loss model) takes its own generator
//! from [`Rng::fork`]`(stream)`, which hashes the parent's state together with the stream number
//! into a fresh seed *without advancing the parent*. So the numbers a flow sees depend only on the
//! run's seed and the flow's stream number: adding, removing or reordering other flows never
//! changes them. The hash is the splitmix64 finaliser (a bijection of u64) applied word by word,
//! so distinct stream numbers give distinct seeds and `fork(a).fork(b)` differs from
//! `fork(b).fork(a)`.
//!
//! # Determinism across platforms
//!
//! Integer outputs are plain wrapping arithmetic. The floating-point samplers use only IEEE 754
//! `+ - * /`, which Rust never contracts into fused multiply-adds, plus the natural logarithm and
//! exponential implemented in this file ([`ln`], [`exp`]) with those same operations. No call
//! goes to the platform's libm, whose last-bit results differ between glibc, musl and macOS, so a
//! seed gives bit-identical samples everywhere.
//!
//! # Choices
//!
//! - [`Rng::uniform`] takes the top 53 bits: every multiple of 2^-53 in [0, 1) is equally likely.
//! - [`Rng::below`] is Lemire's multiply-and-reject method (unbiased, one multiplication in the
//!   common case).
//! - [`Rng::exponential`] is inversion, `-mean ln(1 - U)`; [`Rng::pareto`] is inversion,
//!   `scale (1 - U)^(-1/shape)` with `scale = mean (shape - 1) / shape` (the Pareto "type I" of
//!   ns-2's `RandomVariable/Pareto`, parameterised by its mean as ns-2 does with `avg_`).

/// xoshiro256** seeded through splitmix64. See the module documentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    s: [u64; 4],
}

const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The splitmix64 output function: a bijective mixer of 64-bit words.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator whose whole sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let mut s = [0u64; 4];
        for word in &mut s {
            x = x.wrapping_add(GOLDEN_GAMMA);
            *word = mix64(x);
        }
        Rng { s }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// An independent generator for sub-stream `stream`, a pure function of this generator's
    /// current state and `stream` (this generator does not advance).
    pub fn fork(&self, stream: u64) -> Rng {
        let mut h = mix64(stream.wrapping_mul(GOLDEN_GAMMA) ^ 0x5EED_F0E4_0000_0001);
        for w in self.s {
            h = mix64(h.wrapping_add(GOLDEN_GAMMA) ^ w);
        }
        Rng::new(h)
    }

    /// Uniform in [0, 1), a multiple of 2^-53.
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

    /// Uniform integer in [0, n), without bias; 0 when `n == 0`.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Lemire, "Fast random integer generation in an interval", ACM TOMACS 2019.
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = self.next_u64() as u128 * n as u128;
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// Exponentially distributed with the given mean (0 for a mean <= 0).
    pub fn exponential(&mut self, mean: f64) -> f64 {
        if mean <= 0.0 || mean.is_nan() {
            return 0.0;
        }
        // 1 - U lies in (0, 1], so the logarithm is finite.
        -mean * ln(1.0 - self.uniform())
    }

    /// Pareto distributed with the given `shape` (> 1) and `mean`: scale `mean (shape-1)/shape`,
    /// P(X > x) = (scale/x)^shape for x >= scale. Returns `mean` when `shape <= 1` or the mean is
    /// not positive (callers validate their configuration; see `traffic`).
    pub fn pareto(&mut self, shape: f64, mean: f64) -> f64 {
        if shape.is_nan() || shape <= 1.0 || mean.is_nan() || mean <= 0.0 {
            return mean.max(0.0);
        }
        let scale = mean * (shape - 1.0) / shape;
        let v = 1.0 - self.uniform(); // in (0, 1]
        scale * exp(-ln(v) / shape)
    }

    /// True with probability `p` (clamped to [0, 1]).
    pub fn bernoulli(&mut self, p: f64) -> bool {
        self.uniform() < p
    }
}

/// ln 2 split as in fdlibm: the high part has 21 trailing zero bits, so `k * LN2_HI` is exact for
/// any exponent `k` (|k| < 2^11); `LN2_HI + LN2_LO` is ln 2 to about 2^-100.
const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);

/// Natural logarithm with IEEE `+ - * /` only (a few ulp; bit-identical on every platform).
/// `ln(0) = -inf`, `ln(x < 0) = NaN`.
pub fn ln(x: f64) -> f64 {
    if x.is_nan() || x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return f64::NEG_INFINITY;
    }
    if x.is_infinite() {
        return x;
    }
    // x = 2^k * m with m in [sqrt(1/2), sqrt(2)).
    let mut bits = x.to_bits();
    let mut k: i64 = 0;
    if bits >> 52 == 0 {
        // Subnormal: scale into the normal range first.
        bits = (x * (1u64 << 54) as f64).to_bits();
        k -= 54;
    }
    k += ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    if m > std::f64::consts::SQRT_2 {
        m *= 0.5;
        k += 1;
    }
    // ln m = 2 atanh(s), s = (m-1)/(m+1), |s| <= 0.1716: the odd series converges fast
    // (s^2 <= 0.0295; the terms kept bring the error below 1e-18).
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let mut series = 1.0 / 25.0;
    for d in [23.0, 21.0, 19.0, 17.0, 15.0, 13.0, 11.0, 9.0, 7.0, 5.0, 3.0] {
        series = 1.0 / d + z * series;
    }
    // ln m = f - (f - 2 s series') arranged as 2s + 2s z series_tail for accuracy.
    let tail = z * series; // = z/3 + z^2/5 + ...
    let ln_m = 2.0 * s + 2.0 * s * tail;
    let kf = k as f64;
    kf * LN2_HI + (kf * LN2_LO + ln_m)
}

/// e^x with IEEE `+ - * /` only (a few ulp; bit-identical on every platform). Overflows to
/// `inf` above about 709.78 and underflows to 0 below about -745.
pub fn exp(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x > 709.782_712_893_384 {
        return f64::INFINITY;
    }
    if x < -745.133_219_101_941_1 {
        return 0.0;
    }
    // x = k ln2 + r, |r| <= ln2 / 2 (Cody-Waite reduction with a two-part ln 2).
    let kf = {
        let t = x * std::f64::consts::LOG2_E;
        // round half away from zero without calling libm
        let t = if t >= 0.0 { t + 0.5 } else { t - 0.5 };
        (t as i64) as f64
    };
    let r = (x - kf * LN2_HI) - kf * LN2_LO;
    // e^r by its Taylor series to r^15 / 15! in Horner form (|r| <= 0.347: truncation error
    // < 1e-19): 1 + r (1 + r/2 (1 + r/3 (...))).
    let mut sum = 1.0;
    for n in (1..=15).rev() {
        sum = 1.0 + r * sum / n as f64;
    }
    scale_by_pow2(sum, kf as i64)
}

/// `v * 2^k` exactly (barring under/overflow), built from the exponent bits.
fn scale_by_pow2(mut v: f64, mut k: i64) -> f64 {
    // Apply in steps that each stay inside the normal exponent range.
    while k > 1000 {
        v *= f64::from_bits(((1000 + 1023) as u64) << 52);
        k -= 1000;
    }
    while k < -1000 {
        v *= f64::from_bits(((-1000 + 1023) as u64) << 52);
        k += 1000;
    }
    v * f64::from_bits(((k + 1023) as u64) << 52)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_and_different_seeds_differ() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        let mut c = Rng::new(43);
        let xs: Vec<u64> = (0..1000).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..1000).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..1000).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
        // Seed 0 is valid (not the all-zero state).
        let mut z = Rng::new(0);
        assert!((0..4).map(|_| z.next_u64()).any(|v| v != 0));
    }

    #[test]
    fn reference_vector_pins_the_algorithm() {
        // splitmix64(0) first outputs, from the reference C implementation (Vigna): any change to
        // the seeding or the generator changes every run's results, so pin them.
        let mut x = 0u64;
        let mut out = [0u64; 3];
        for o in &mut out {
            x = x.wrapping_add(GOLDEN_GAMMA);
            *o = mix64(x);
        }
        assert_eq!(out, [0xE220_A839_7B1D_CDAF, 0x6E78_9E6A_A1B9_65F4, 0x06C4_5D18_8009_454F]);
        // xoshiro256** from state {1, 2, 3, 4}: first output is rotl(2*5, 7)*9 = 11520.
        let mut r = Rng { s: [1, 2, 3, 4] };
        assert_eq!(r.next_u64(), 11520);
        assert_eq!(r.next_u64(), 0);
        assert_eq!(r.next_u64(), 1_509_978_240);
    }

    #[test]
    fn fork_streams_are_deterministic_independent_and_do_not_advance_parent() {
        let root = Rng::new(7);
        let before = root.clone();
        let mut f1 = root.fork(1);
        let mut f1_again = root.fork(1);
        let mut f2 = root.fork(2);
        assert_eq!(root, before, "fork must not advance the parent");
        let a: Vec<u64> = (0..256).map(|_| f1.next_u64()).collect();
        let b: Vec<u64> = (0..256).map(|_| f1_again.next_u64()).collect();
        let c: Vec<u64> = (0..256).map(|_| f2.next_u64()).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        // Nested forks do not commute.
        let mut ab = root.fork(1).fork(2);
        let mut ba = root.fork(2).fork(1);
        assert_ne!(ab.next_u64(), ba.next_u64());
        // Streams are uncorrelated: correlation of uniforms from adjacent streams is ~0.
        let n = 100_000;
        let mut s3 = root.fork(3);
        let mut s4 = root.fork(4);
        let (mut sxy, mut sx, mut sy, mut sxx, mut syy) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for _ in 0..n {
            let x = s3.uniform();
            let y = s4.uniform();
            sx += x;
            sy += y;
            sxy += x * y;
            sxx += x * x;
            syy += y * y;
        }
        let nf = n as f64;
        let cov = sxy / nf - (sx / nf) * (sy / nf);
        let corr = cov / ((sxx / nf - (sx / nf).powi(2)) * (syy / nf - (sy / nf).powi(2))).sqrt();
        assert!(corr.abs() < 0.01, "correlation between streams {corr}");
    }

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

    #[test]
    fn portable_ln_and_exp_match_libm_closely() {
        assert_eq!(LN2_HI + LN2_LO, std::f64::consts::LN_2);
        assert_eq!(LN2_HI.to_bits() & 0x1F_FFFF, 0);
        let mut r = Rng::new(13);
        let mut worst_ln: f64 = 0.0;
        let mut worst_exp: f64 = 0.0;
        for i in 0..100_000 {
            // log-uniform over a wide range, plus values near 1
            let x = if i % 2 == 0 { exp(r.uniform_range(-700.0, 700.0)) } else { 1.0 + r.uniform_range(-1e-3, 1e-3) };
            let a = ln(x);
            let b = x.ln();
            let err = (a - b).abs() / b.abs().max(1e-300);
            worst_ln = worst_ln.max(err);
            let y = r.uniform_range(-700.0, 700.0);
            let e = (exp(y) - y.exp()).abs() / y.exp();
            worst_exp = worst_exp.max(e);
        }
        assert!(worst_ln < 4e-16, "ln rel err {worst_ln}");
        assert!(worst_exp < 4e-16, "exp rel err {worst_exp}");
        assert_eq!(ln(1.0), 0.0);
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(ln(0.0), f64::NEG_INFINITY);
        assert!(ln(-1.0).is_nan());
        assert!((ln(f64::MIN_POSITIVE / 8.0) - (f64::MIN_POSITIVE / 8.0).ln()).abs() < 1e-12);
        assert_eq!(exp(-800.0), 0.0);
        assert_eq!(exp(800.0), f64::INFINITY);
    }
}
