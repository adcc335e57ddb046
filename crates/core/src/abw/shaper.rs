//! Token-bucket shaper detection from one probe train (issue 19).
//!
//! # The signature
//!
//! A token-bucket shaper of rate `ρ` and depth `σ` (an ISP plan, a cloud egress limit, Linux
//! `tbf`) passes a full bucket's worth of bytes at line rate before it enforces `ρ`. A train
//! whose rate sweeps upwards crosses `ρ` at some packet `j₀` and from there spends tokens
//! faster than they come; nothing queues until the bucket is empty, at packet `l`, and only
//! then does the delay start to grow — a **late knee**, at the rate `r_l ≈ ρ + √(2σ·s)` for a
//! ramp of slope `s` (PathQuick: `s = ΔP/T_quick²`). After the knee the train queues behind
//! the bucket, which now drains at `ρ`: the queue grows per unit time as `(r_k − ρ)/ρ`, so its
//! growth, plotted against the rate probed, crosses zero at the token rate, not at the knee.
//! This is ShaperProbe's reasoning (Kanuparthy & Dovrolis, "ShaperProbe: end-to-end detection
//! of ISP traffic shaping using active methods", IMC 2011, §3: a level shift from the burst's
//! rate to the token rate, burst size `σ = (R − ρ)·τ`) applied to a rising train instead of a
//! constant-rate one.
//!
//! # The detector ([`detect`])
//!
//! 1. **Token rate.** Along the unterminated excursion (from the knee `l` on, consecutive
//!    packets only) take the points `(r_k, Δq_k/Δs_k)`: the rate a gap probed and the queue's
//!    growth per unit send time. Their Theil–Sen line ([`zero_growth_rate`]; median of the
//!    pairwise slopes, median intercept, robust to single-gap spikes) crosses zero at `ρ̂`.
//!    **Cross traffic through the same bucket:** a cross-traffic packet lands in few of a fast
//!    train's gaps, so the median reads those gaps as noise and `ρ̂` is the token rate itself,
//!    not the part the cross traffic leaves (measured in the unit test: 51 Mbit/s for a
//!    50 Mbit/s bucket carrying 20 Mbit/s of Poisson traffic). A mean intercept counts the
//!    cross traffic but was too noisy (11.4 Mbit/s for a 10 Mbit/s bucket without cross traffic)
//!    and turned a FIFO's late knee under cross traffic into a false shaper; not solved.
//! 2. **Burst.** The tokens the train spent beyond `ρ̂` before the knee:
//!    `σ̂ = Σ_{j₀ < j ≤ l} P_j − ρ̂·(s_l − s_{j₀})`, from the first packet `j₀` whose gap probed
//!    at least `ρ̂` (ShaperProbe's `(R − ρ)·τ` summed over the ramp).
//! 3. **Decision.** A shaper when (a) the fit has a positive slope and `ρ̂` lies below the
//!    knee's rate and not below the lowest rate the train probed, (b) `σ̂` is at least [`MIN_BURST_PACKETS`] of the train's largest packets
//!    (less is what the resolution of a plain knee and cross-traffic lulls of a few packets
//!    produce on a FIFO), and (c) the delay at the knee is within `2·delay_floor + P_max/ρ̂` of
//!    the lowest delay since `j₀` (the burst passed without queueing; on a FIFO whose knee was
//!    found late, the bytes above the available bandwidth sit in the queue and raise it).
//!
//! Then the available bandwidth reported is `ρ̂` (the sustained rate), and `σ̂` is extra output.
//!
//! # Choices the papers left open
//!
//! - The fit is the one of [`super::excursion`]'s optional knee fit; detection does not need
//!   it switched on.
//! - Limits: a train that never empties the bucket (its bytes beyond `ρ` stay below `σ`) shows
//!   no knee at all and reads "above range"; one train of `B` bytes lasting `T` can reveal at
//!   most `B − ρ·T` bytes of burst. Detection is off in [`super::EstimatorConfig::default`]
//!   (the papers' estimator, the simulator's results) and on in the socket client.

use crate::units::{Bytes, Rate};

/// A burst below this many of the train's largest packets is not called a shaper (decision
/// rule (b) of the module doc).
pub const MIN_BURST_PACKETS: f64 = 2.0;

/// A token-bucket shaper seen in a train.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShaperEstimate {
    /// The token rate: the sustained rate, reported as the available bandwidth.
    pub rate: Rate,
    /// The bucket depth: bytes that pass at line rate before the rate is enforced.
    pub burst: Bytes,
    /// The rate at the late knee (where queueing became visible), for comparison.
    pub knee_rate: Rate,
}

/// The Theil–Sen line through `(rate, growth)` points (the median of the pairwise slopes, the
/// median intercept): its zero crossing (bit/s) when its slope is positive. At most 150 points
/// are used (every `n/150`-th).
pub fn zero_growth_rate(pts: &[(f64, f64)]) -> Option<f64> {
    let step = pts.len().div_ceil(150).max(1);
    let pts: Vec<(f64, f64)> = pts.iter().copied().step_by(step).collect();
    let mut slopes = Vec::with_capacity(pts.len() * pts.len() / 2);
    for i in 0..pts.len() {
        for j in i + 1..pts.len() {
            let dx = pts[j].0 - pts[i].0;
            if dx > 0.0 {
                slopes.push((pts[j].1 - pts[i].1) / dx);
            }
        }
    }
    if slopes.is_empty() {
        return None;
    }
    slopes.sort_by(f64::total_cmp);
    let b = slopes[slopes.len() / 2];
    let mut icpt: Vec<f64> = pts.iter().map(|p| p.1 - b * p.0).collect();
    icpt.sort_by(f64::total_cmp);
    let a = icpt[icpt.len() / 2];
    let zero = -a / b;
    (b > 0.0 && zero.is_finite()).then_some(zero)
}

/// The received train as the detector reads it: per packet its send time (ns), its delay with
/// the serialisation component removed (ns) and its size; per gap the rate it probed (bit/s)
/// and whether the two packets are consecutive in the train.
pub struct Signature<'a> {
    pub send_ns: &'a [i128],
    pub q_ns: &'a [f64],
    pub size: &'a [Bytes],
    pub rate: &'a [f64],
    pub consecutive: &'a [bool],
    /// Gap index where the unterminated excursion starts.
    pub knee: usize,
    /// Delay changes up to this are timestamp noise (ns).
    pub floor_ns: f64,
    /// Points needed for the fit.
    pub min_points: usize,
}

/// Detects a token-bucket shaper (module doc); `None` when the signature is not one.
pub fn detect(sig: &Signature) -> Option<ShaperEstimate> {
    let gaps = sig.rate.len();
    let l = sig.knee;
    if l >= gaps {
        return None;
    }
    let pts: Vec<(f64, f64)> = (l..gaps)
        .filter(|&k| sig.consecutive[k])
        .map(|k| (sig.rate[k], (sig.q_ns[k + 1] - sig.q_ns[k]) / (sig.send_ns[k + 1] - sig.send_ns[k]) as f64))
        .collect();
    if pts.len() < sig.min_points.max(3) {
        return None;
    }
    let rho = zero_growth_rate(&pts)?;
    let knee_rate = sig.rate[l];
    // A crossing below every rate the train probed is an extrapolation too far to trust (a
    // loaded testbed's badly paced train read 0.46 Mbit/s behind a 50 Mbit/s bucket).
    let lowest = sig.rate.iter().cloned().fold(f64::INFINITY, f64::min);
    if !(rho >= lowest && rho < knee_rate) {
        return None;
    }
    // j0: the first packet whose gap probed at least rho (packet k + 1 closes gap k).
    let j0 = (0..l).find(|&k| sig.rate[k] >= rho).map_or(0, |k| k + 1).min(l);
    let bits: f64 = sig.size[j0 + 1..=l].iter().map(|p| p.0 as f64 * 8.0).sum();
    let elapsed_s = (sig.send_ns[l] - sig.send_ns[j0]) as f64 / 1e9;
    let burst = ((bits - rho * elapsed_s) / 8.0).max(0.0);
    let largest = sig.size.iter().map(|p| p.0).max().unwrap_or(0) as f64;
    if burst < MIN_BURST_PACKETS * largest {
        return None;
    }
    let lowest = sig.q_ns[j0..=l].iter().cloned().fold(f64::INFINITY, f64::min);
    let allowed = 2.0 * sig.floor_ns + largest * 8.0 / rho * 1e9;
    if sig.q_ns[l] - lowest > allowed {
        return None;
    }
    Some(ShaperEstimate {
        rate: Rate(rho.round() as u64),
        burst: Bytes(burst.round() as u64),
        knee_rate: Rate(knee_rate.round() as u64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abw::{estimate_train, EstimatorConfig, Outcome, ProbeRecord, QuickSpec, TrainPacket};
    use crate::rng::Rng;
    use crate::units::Dur;

    /// A packet-level path: Poisson cross traffic of 1000-byte packets at `cross` bit/s joins
    /// the train in front of an optional token bucket `(rate, depth bytes)`, then a FIFO link of
    /// `link` bit/s; receive times carry uniform ±`noise_ns` timestamp noise.
    fn path(
        sched: &[TrainPacket],
        bucket: Option<(f64, f64)>,
        link: f64,
        cross: f64,
        seed: u64,
        noise_ns: f64,
    ) -> Vec<ProbeRecord> {
        let mut rng = Rng::new(seed);
        let t0 = 0.5;
        // (arrival s, bytes, train index)
        let mut arrivals: Vec<(f64, f64, Option<usize>)> =
            sched.iter().enumerate().map(|(i, p)| (t0 + p.offset.as_secs_f64(), p.size.0 as f64, Some(i))).collect();
        if cross > 0.0 {
            let mut t = 0.0;
            let end = t0 + sched.last().unwrap().offset.as_secs_f64() + 0.05;
            while t < end {
                t += rng.exponential(8000.0 / cross);
                arrivals.push((t, 1000.0, None));
            }
        }
        arrivals.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (rho, depth) = bucket.unwrap_or((f64::INFINITY, f64::INFINITY));
        let (mut tokens, mut t_tok, mut bucket_free, mut link_free) = (depth * 8.0, 0.0f64, 0.0f64, 0.0f64);
        let mut recv = vec![None; sched.len()];
        for (t, bytes, idx) in arrivals {
            let bits = bytes * 8.0;
            let start = t.max(bucket_free);
            let leave_bucket = if rho.is_finite() {
                tokens = (tokens + (start - t_tok) * rho).min(depth * 8.0);
                let wait = ((bits - tokens) / rho).max(0.0);
                tokens = tokens + wait * rho - bits;
                t_tok = start + wait;
                start + wait
            } else {
                start
            };
            bucket_free = leave_bucket;
            link_free = leave_bucket.max(link_free) + bits / link;
            if let Some(i) = idx {
                recv[i] = Some(link_free + 0.01 + rng.uniform_range(-noise_ns, noise_ns) * 1e-9);
            }
        }
        crate::abw::excursion::harness::records(sched, t0, &recv)
    }

    /// The socket client's estimator with detection on.
    fn cfg() -> EstimatorConfig {
        EstimatorConfig {
            delay_floor: Dur::from_micros(20),
            decrease_factor: crate::abw::RAMP_DECREASE_FACTOR,
            detect_shaper: true,
            ..EstimatorConfig::default()
        }
    }

    /// PathQuick's 48..1500 B train with ΔP = 12 B topped at `b_max`.
    fn train(b_max: f64) -> Vec<TrainPacket> {
        QuickSpec {
            b_max: Some(Rate(b_max as u64)),
            p_1: Some(Bytes(48)),
            p_n: Some(Bytes(1500)),
            delta_p: Some(Bytes(12)),
            max_size: Bytes(1500),
            min_size: Bytes(48),
            ..QuickSpec::default()
        }
        .solve()
        .unwrap()
        .schedule()
    }

    #[test]
    fn a_token_bucket_reads_as_its_rate_and_burst() {
        // Rates 10–100 Mbit/s, bursts 4.5–64 KB, behind a 1 Gbit/s line; the train tops at ten
        // times the token rate, so its bytes beyond the rate exceed every burst.
        for rho in [10e6, 50e6, 100e6] {
            for burst in [4_500.0, 16_000.0, 64_000.0] {
                let records = path(&train(10.0 * rho), Some((rho, burst)), 1e9, 0.0, 1, 1000.0);
                let plain = estimate_train(&records, &EstimatorConfig { detect_shaper: false, ..cfg() });
                let e = estimate_train(&records, &cfg());
                let sh = e.shaper.unwrap_or_else(|| panic!("ρ {rho} σ {burst}: no shaper, {:?}", e.outcome));
                let r = sh.rate.bps() as f64;
                assert!((r - rho).abs() <= 0.1 * rho, "ρ {rho} σ {burst}: rate {r}");
                let b = sh.burst.0 as f64;
                assert!(b >= burst / 2.0 && b <= burst * 2.0, "ρ {rho} σ {burst}: burst {b}");
                assert_eq!(e.outcome, Outcome::Estimate(sh.rate));
                // Without detection the burst inflates the knee.
                let p = plain.outcome.value().unwrap().bps() as f64;
                assert!(p > 1.2 * rho, "ρ {rho} σ {burst}: plain knee {p}");
                assert!(sh.knee_rate.bps() as f64 > 1.2 * rho);
            }
        }
    }

    #[test]
    fn a_shaper_is_found_under_cross_traffic() {
        // 50 Mbit/s bucket of 16 KB, 20 Mbit/s of Poisson cross traffic through it: the shaper
        // is found, and what is read is its token rate (the known limit of the module doc), not
        // the 30 Mbit/s the cross traffic leaves.
        let mut ok = 0;
        for seed in 1..=5 {
            let e = estimate_train(&path(&train(500e6), Some((50e6, 16_000.0)), 1e9, 20e6, seed, 1000.0), &cfg());
            if let Some(sh) = e.shaper {
                let r = sh.rate.bps() as f64;
                assert!((r - 50e6).abs() <= 0.1 * 50e6, "seed {seed}: rate {r}");
                ok += 1;
            }
        }
        assert!(ok >= 4, "found in {ok} of 5 trains");
    }

    #[test]
    fn a_plain_link_is_not_a_shaper() {
        // A FIFO link of 100 Mbit/s, idle and under 30 and 60 Mbit/s of Poisson cross traffic,
        // and a bucket of one packet (a link's own granularity): no shaper, the knee stands.
        for cross in [0.0, 30e6, 60e6] {
            for seed in 1..=6 {
                let e = estimate_train(&path(&train(200e6), None, 100e6, cross, seed, 1000.0), &cfg());
                assert_eq!(e.shaper, None, "cross {cross} seed {seed}: {:?}", e.outcome);
            }
        }
        let e = estimate_train(&path(&train(200e6), Some((100e6, 1500.0)), 1e9, 0.0, 1, 1000.0), &cfg());
        assert_eq!(e.shaper, None, "{:?}", e.outcome);
    }

    #[test]
    fn zero_growth_rate_is_the_crossing_of_the_fitted_line() {
        // growth = (r − 40 Mbit/s) / 40 Mbit/s, one outlier spike.
        let mut pts: Vec<(f64, f64)> = (0..30).map(|i| 50e6 + i as f64 * 1e6).map(|r| (r, (r - 40e6) / 40e6)).collect();
        pts[7].1 += 50.0;
        let z = zero_growth_rate(&pts).unwrap();
        assert!((z - 40e6).abs() < 1.0, "{z}");
        // A falling line has no crossing to report.
        let falling: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, -p.1)).collect();
        assert_eq!(zero_growth_rate(&falling), None);
        assert_eq!(zero_growth_rate(&pts[..1]), None);
    }
}
