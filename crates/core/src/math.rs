//! Elementary functions with IEEE `+ - * /` only, so that the samplers and the controllers that
//! need them (CUBIC's cube root, HighSpeed TCP's logarithms) give bit-identical results on every
//! platform (see the [RNG module documentation](crate::rng)).

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

/// Real cube root with IEEE `+ - * /` only: an exponent-based first guess, then Newton's
/// iteration `y ← y − (y³ − x) / (3y²)` to convergence (at most a few dozen steps; the last step
/// is taken where the correction no longer shrinks). `cbrt(-x) = -cbrt(x)`.
pub fn cbrt(x: f64) -> f64 {
    if x == 0.0 || x.is_nan() || x.is_infinite() {
        return x;
    }
    let a = x.abs();
    // 2^(e/3) as a first guess, from the exponent bits (e may be negative).
    let e = ((a.to_bits() >> 52) & 0x7ff) as i64 - 1023;
    let mut y = scale_by_pow2(1.0, e.div_euclid(3));
    let mut last = f64::INFINITY;
    for _ in 0..200 {
        let step = (y * y * y - a) / (3.0 * y * y);
        if step.abs() >= last {
            break;
        }
        last = step.abs();
        y -= step;
        if step == 0.0 {
            break;
        }
    }
    if x < 0.0 {
        -y
    } else {
        y
    }
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
    use crate::rng::Rng;

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

    #[test]
    fn portable_cbrt_matches_libm_closely() {
        let mut r = Rng::new(7);
        for _ in 0..20_000 {
            let x = exp(r.uniform_range(-300.0, 300.0)) * if r.bernoulli(0.5) { 1.0 } else { -1.0 };
            let (a, b) = (cbrt(x), x.cbrt());
            assert!((a - b).abs() <= 4.5e-16 * b.abs(), "cbrt({x}) = {a}, libm {b}");
        }
        assert_eq!(cbrt(27.0), 3.0);
        assert_eq!(cbrt(-8.0), -2.0);
        assert_eq!(cbrt(0.0), 0.0);
    }
}
