//! Queue-growth fit: the available bandwidth as the rate where the train's own queue starts to
//! grow, fitted to the whole delay signature instead of read off its first sustained rise
//! (issue 19; in neither paper).
//!
//! # Why
//!
//! The excursion rules ([`super::excursion`]) find the knee as the first packet after which the
//! delay never comes back down. Along PathQuick's linear ramp (PathQuick paper §3, Eqs. 2–3) the
//! queue the train builds past the crossing grows only as the square of the packets since
//! (per gap by `8·ΔP/C` more: 0.96 µs per packet with ΔP = 12 B at 100 Mbit/s). The socket
//! client must ignore rises below its timestamp noise (`delay_floor`, 20 µs on the testbed), so
//! at 100 Mbit/s the first rise it counts comes about 20 packets past the crossing — 20 rate
//! steps high (+32 Mbit/s with `T_quick` = 60 µs, +80 with 24 µs). At 10 Mbit/s the same
//! increment is 9.6 µs per packet and the lag is two packets. The knee rule's error is thus set
//! by the ratio of the per-gap growth to the noise, which shrinks as the capacity grows.
//!
//! # The model
//!
//! The probe rate model in fluid form (PathQuick §2.2, pathChirp §2.1): a packet stream of rate
//! `r` through a FIFO of capacity `C` whose cross traffic leaves `A` makes the queue grow at
//! `(r − A)/C` while `r > A`, and not at all before. For a train whose gap `k` probes `r_k` for
//! `w_k` seconds, the delay of packet `k` is therefore
//!
//! ```text
//! q_k = a + b · H_k(A),     H_k(A) = Σ_{j<k} w_j · max(0, r_j − A),     b = 1/C
//! ```
//!
//! (for PathQuick `H_k` is `T_quick·ΔP/T_quick·(k − κ)²/2` past the crossing `κ`: a parabola).
//! For each candidate `A` on a grid over the probed rates (a quarter of the smallest rate step),
//! `a` and `b > 0` follow by least squares and the candidate with the smallest squared error
//! wins. A growing-size train also grows by its serialisation, `s·P_k` (`s = 8/C` at the
//! bottleneck, plus `8/C_i` for every other store-and-forward link), and `s` and `b` are the
//! same `1/C` seen twice: the model is `q_k = a + s·(P_k + H_k(A)/8)` (`s` in time per byte),
//! one slope per candidate. Tied, the two terms cannot trade: with `s` and `b` free, a train
//! that queued from its first packet (a quadratic from the start) is fitted as well by any `A`
//! below its lowest rate, the size term taking the linear part — on the testbed at 10 Mbit/s,
//! the 500 Mbit/s coarse train then "estimated" 50–135 Mbit/s. On a path with other slow
//! store-and-forward links `s` exceeds `8/C` and the growth is taken as steeper than it is. Every packet contributes, so per-packet timestamp noise and single cross-traffic
//! bursts average out instead of deciding where the knee is.
//!
//! # Verdicts
//!
//! - The fitted growth by the last packet, `b·H_last(A)`, not above the delay floor (or the best
//!   fit has no growth at all): **above range**, at least the top rate (for a growing-size
//!   train sent at one spacing, its largest packet over its median spacing: a pacing slip can
//!   make its largest gap rate 13 % high).
//! - `A` at or below the rate of the train's second gap: **below range**, unless the growth's part
//!   that no straight line in the packet sizes takes (`GrowthFit::beyond_serialisation`) is within
//!   the floor; then **above range**. A fast link's own serialisation, a straight line, can be
//!   fitted as a queue from the first gap: on the testbed's idle 500 Mbit/s link a 126–500 Mbit/s
//!   train rises 20 µs by its serialisation, and with a few 25–55 µs stalls of the delay box on
//!   it the best fit put the crossing at the lowest rate with a serialisation slope of
//!   1/(83 Gbit/s), the whole rise taken as queue and just over the 20 µs floor (11 of 153 idle
//!   estimates there, issue 19 session 19). A queue from the first gap grows as a parabola, which
//!   keeps a quarter of its rise beyond the best line: milliseconds for any real one. The same
//!   holds for a crossing within the first [`super::excursion::EARLY_CROSSING`] of the gaps
//!   (session 21: stalls put the crossing 2–41 % of the way in on that link), which then reads
//!   **above range** too.
//! - The growth made only of abrupt spikes that came back down ([`super::excursion::ABRUPT_RISE`]:
//!   a rise of more than four send spacings within one gap, a stall of the path): the caller
//!   fits again without their packets ([`fit_kept`]); growth within the floor there reads
//!   **above range** (session 22: the testbed's delay box stalled for up to 1.1 ms on an idle
//!   500 Mbit/s link, and least squares over every packet took the spike for a queue from
//!   270 Mbit/s). A train that ended inside such a spike (a stall still draining) is read
//!   from the fit without its packets, growing or not (session 23).
//! - Otherwise `A` is the estimate.
//!
//! Choices: the grid step, the floor tests and the tie are ours; equal-size trains
//! (pathChirp) have no size term and a free `b`.

/// `8e9`: bits per byte over nanoseconds per second. A serialisation slope `s` in ns per byte
/// is `8e9/C`; the growth per bit of excess is `1/C` = `s/8e9`.
const BITS_PER_BYTE_NS: f64 = 8e9;

/// The fit's answer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GrowthFit {
    /// The rate where growth starts, bit/s.
    pub rate: f64,
    /// Fitted queue growth per bit of excess (`1/C`, s per bit scaled as the inputs).
    pub slope: f64,
    /// Fitted growth of the delay by the last packet, in the units of `q`.
    pub growth: f64,
    /// The part of the fitted growth that no straight line in the packet sizes takes: the
    /// range of `b·H_k(A)`'s residual from its least-squares line in `P_k` (in `k` alone for
    /// equal sizes), in the units of `q`.
    pub beyond_serialisation: f64,
}

/// Fits the delays `q` (one per received packet, in ns) of a train whose gap `k` (between
/// packets `k` and `k + 1`) probed `rate[k]` bit/s for `weight[k]` ns. `size` (bytes per packet)
/// adds the serialisation term `s·P_k` to the model, fitted with the rest (module doc); pass
/// `None` for equal-size trains. `None` with fewer than three packets or no spread of rates.
pub fn fit(q: &[f64], size: Option<&[f64]>, rate: &[f64], weight: &[f64]) -> Option<GrowthFit> {
    fit_kept(q, size, rate, weight, None)
}

/// [`fit`] with the least squares over the packets `keep` marks only; the excess `H_k(A)` still
/// accumulates over every gap. `None` also when fewer than three packets are kept.
pub fn fit_kept(
    q: &[f64],
    size: Option<&[f64]>,
    rate: &[f64],
    weight: &[f64],
    keep: Option<&[bool]>,
) -> Option<GrowthFit> {
    let m = q.len();
    if m < 3 || rate.len() + 1 != m || weight.len() + 1 != m || size.is_some_and(|s| s.len() != m) {
        return None;
    }
    if keep.is_some_and(|k| k.len() != m || k.iter().filter(|&&x| x).count() < 3) {
        return None;
    }
    let kept = |k: usize| keep.is_none_or(|keep| keep[k]);
    let lo = rate.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = rate.iter().cloned().fold(0.0, f64::max);
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        return None;
    }
    let mut steps: Vec<f64> = rate.windows(2).map(|w| (w[1] - w[0]).abs()).filter(|d| *d > 0.0).collect();
    steps.sort_by(f64::total_cmp);
    let step = steps.first().copied().unwrap_or(hi - lo).max((hi - lo) / 2000.0) / 4.0;
    let n = (0..m).filter(|&k| kept(k)).count() as f64;
    // Centred over the kept packets; the others are 0 and drop out of every product.
    let centred = |v: &[f64]| -> Vec<f64> {
        let mean = (0..m).filter(|&k| kept(k)).map(|k| v[k]).sum::<f64>() / n;
        (0..m).map(|k| if kept(k) { v[k] - mean } else { 0.0 }).collect()
    };
    let dot = |u: &[f64], v: &[f64]| u.iter().zip(v).map(|(a, b)| a * b).sum::<f64>();
    let qc = centred(q);
    let sqq = dot(&qc, &qc);
    // The serialisation column, when sizes vary.
    let xc = size.map(centred).filter(|x| dot(x, x) > 0.0);
    let (sxx, sxq) = xc.as_ref().map_or((0.0, 0.0), |x| (dot(x, x), dot(x, &qc)));
    // "No growth" is the model without `H`: its error is what the size term leaves (with the
    // tie, `H = 0` leaves `q = a + s·P`).
    let sse0 = if sxx > 0.0 { sqq - sxq * sxq / sxx } else { sqq };
    let mut best = GrowthFit { rate: hi, slope: 0.0, growth: 0.0, beyond_serialisation: 0.0 };
    let mut best_sse = sse0;
    // `H_k(A)` (module doc) into `h`.
    let excess_bits = |a: f64, h: &mut [f64]| {
        for k in 0..m - 1 {
            h[k + 1] = h[k] + weight[k] * (rate[k] - a).max(0.0);
        }
    };
    let mut h = vec![0.0; m];
    let mut a = lo;
    while a < hi {
        excess_bits(a, &mut h);
        let hc = centred(&h);
        let (shh, shq) = (dot(&hc, &hc), dot(&hc, &qc));
        let (b, sse) = match &xc {
            // q = a + s·(P + H/8): one column, the growth tied to the serialisation.
            Some(x) => {
                let z: Vec<f64> = x.iter().zip(&hc).map(|(p, h)| p + h / BITS_PER_BYTE_NS).collect();
                let (szz, szq) = (dot(&z, &z), dot(&z, &qc));
                if szz > 0.0 && shh > 0.0 {
                    let s = szq / szz;
                    (s / BITS_PER_BYTE_NS, sqq - s * szq)
                } else {
                    (0.0, f64::INFINITY)
                }
            }
            None if shh > 0.0 => (shq / shh, sqq - shq * shq / shh),
            None => (0.0, f64::INFINITY),
        };
        if b > 0.0 && sse < best_sse {
            best_sse = sse;
            best = GrowthFit { rate: a, slope: b, growth: b * h[m - 1], beyond_serialisation: 0.0 };
        }
        a += step;
    }
    if best.slope > 0.0 {
        excess_bits(best.rate, &mut h);
        let hc = centred(&h);
        let line = xc.clone().unwrap_or_else(|| centred(&(0..m).map(|k| k as f64).collect::<Vec<f64>>()));
        let beta = dot(&line, &hc) / dot(&line, &line);
        let (lo_r, hi_r) = (0..m)
            .filter(|&k| kept(k))
            .map(|k| hc[k] - beta * line[k])
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, u), r| (l.min(r), u.max(r)));
        best.beyond_serialisation = best.slope * (hi_r - lo_r);
    }
    Some(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PathQuick-like ramp through a fluid FIFO: rates `lo + k·d`, spacing `w` ns, capacity `c`.
    fn ramp(n: usize, lo: f64, d: f64, w: f64, c: f64, avail: f64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let rate: Vec<f64> = (0..n - 1).map(|k| lo + d * k as f64).collect();
        let weight = vec![w; n - 1];
        let mut q = vec![0.0; n];
        for k in 0..n - 1 {
            q[k + 1] = (q[k] + w * (rate[k] - avail) / c).max(0.0);
        }
        (q, rate, weight)
    }

    #[test]
    fn finds_the_crossing_of_a_clean_ramp_to_a_fraction_of_a_step() {
        // 100 Mbit/s, A = 60 Mbit/s, ramp 2..200 Mbit/s in 1.6 Mbit/s steps, T = 60 µs.
        let (q, rate, w) = ramp(122, 2e6, 1.6e6, 60_000.0, 100e6, 60e6);
        let f = fit(&q, None, &rate, &w).unwrap();
        assert!((f.rate - 60e6).abs() < 0.8e6, "{}", f.rate);
        assert!((f.slope * 100e6 - 1.0).abs() < 0.05, "b·C = {}", f.slope * 100e6);
    }

    #[test]
    fn per_packet_noise_far_above_the_early_growth_does_not_delay_the_crossing() {
        // ±20 µs of noise: the first gaps past the crossing add 1 µs each, far below it.
        let (mut q, rate, w) = ramp(122, 2e6, 1.6e6, 60_000.0, 100e6, 60e6);
        let mut x = 12345u64;
        for v in q.iter_mut() {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            *v += ((x >> 33) as f64 / (1u64 << 31) as f64 - 0.5) * 40_000.0;
        }
        let f = fit(&q, None, &rate, &w).unwrap();
        assert!((f.rate - 60e6).abs() < 4e6, "{}", f.rate);
    }

    #[test]
    fn a_train_below_the_available_bandwidth_shows_no_growth() {
        let (q, rate, w) = ramp(122, 2e6, 1.6e6, 60_000.0, 100e6, 250e6);
        let f = fit(&q, None, &rate, &w).unwrap();
        assert_eq!(f.growth, 0.0, "{f:?}");
    }

    #[test]
    fn growth_from_the_first_packet_keeps_a_quarter_beyond_a_line_and_a_late_knee_nearly_all() {
        // A parabola from the start: the best line leaves +1/6 at both ends and −1/12 between.
        let (q, rate, w) = ramp(122, 2e6, 1.6e6, 60_000.0, 100e6, 1e6);
        let f = fit(&q, None, &rate, &w).unwrap();
        let share = f.beyond_serialisation / f.growth;
        assert!((share - 0.25).abs() < 0.02, "{share} of {f:?}");
        // A knee in the last tenth: a line through the whole train barely follows it.
        let (q, rate, w) = ramp(122, 2e6, 1.6e6, 60_000.0, 100e6, 180e6);
        let f = fit(&q, None, &rate, &w).unwrap();
        let share = f.beyond_serialisation / f.growth;
        assert!(share > 0.8, "{share} of {f:?}");
    }

    /// Packets of `48 + dp·k` bytes every `t` ns through a FIFO of `c` bit/s carrying fluid cross
    /// traffic `x` bit/s: delays (departure − arrival, ns), sizes, gap rates, spacings.
    fn sized_train(n: usize, dp: f64, t: f64, c: f64, x: f64) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
        let size: Vec<f64> = (0..n).map(|k| 48.0 + dp * k as f64).collect();
        let mut q = Vec::with_capacity(n);
        let mut free = 0.0f64;
        for (k, p) in size.iter().enumerate() {
            let at = k as f64 * t;
            // the cross traffic's share of the link stretches every service time by C/(C − x)
            free = free.max(at) + p * 8.0 / (c - x) * 1e9;
            q.push(free - at);
        }
        let rate: Vec<f64> = size[1..].iter().map(|p| p * 8.0 / t * 1e9).collect();
        (q, size, rate, vec![t; n - 1])
    }

    #[test]
    fn with_sizes_the_crossing_of_a_ramp_is_found_and_a_train_queued_from_the_start_is_below_its_range() {
        // 100 Mbit/s, 40 Mbit/s of cross traffic, ΔP = 12 B every 60 µs (1.6 Mbit/s steps).
        let (q, size, rate, w) = sized_train(122, 12.0, 60_000.0, 100e6, 40e6);
        let f = fit(&q, Some(&size), &rate, &w).unwrap();
        assert!((f.rate - 60e6).abs() < 1.6e6, "{}", f.rate);
        // 10 Mbit/s under a 36–500 Mbit/s coarse train: it queued from the first gap.
        let (q, size, rate, w) = sized_train(31, 48.0, 24_000.0, 10e6, 0.0);
        let f = fit(&q, Some(&size), &rate, &w).unwrap();
        assert!(f.rate <= rate[1], "{} against the second gap's {}", f.rate, rate[1]);
    }
}
