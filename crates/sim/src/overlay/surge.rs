//! SURGE's web workload (Barford & Crovella, "Generating representative Web workloads for network
//! and server performance evaluation", ACM SIGMETRICS 1998 — reference \[20\] of Maki et al.), as
//! one user per web client: a page is a base file plus embedded files, fetched one after
//! another (HTTP/1.0, one connection each) separated by *active OFF* times; between pages the
//! user is idle for an *inactive OFF* time.
//!
//! Distributions (Barford & Crovella 1998, Table 2 — the values as published there; the library
//! search available to us found the paper's abstract, which names the six components, but not
//! the table's text, so the numbers below are quoted from the paper as we know it and should be
//! checked against it):
//!
//! | component            | model                    | parameters                      |
//! |----------------------|--------------------------|---------------------------------|
//! | file size, body      | lognormal                | μ = 9.357, σ = 1.318 (ln bytes) |
//! | file size, tail      | Pareto                   | k = 133 KB, α = 1.1             |
//! | embedded references  | Pareto                   | k = 1, α = 2.43                 |
//! | active OFF time      | Weibull                  | scale 1.46 s, shape 0.382       |
//! | inactive OFF time    | Pareto                   | k = 1 s, α = 1.5                |
//!
//! Choices: a size is drawn from the lognormal body and, when it exceeds the tail's `k`, redrawn
//! from the Pareto tail (so the body holds below `k` and the tail above it); sizes are capped at
//! `size_cap` (2 MB by default: with α = 1.1 a 20 s run would otherwise be dominated by a handful
//! of multi-megabyte documents); the number of files of a page is `⌊X⌋` with `X` the embedded
//! Pareto (so at least the base file), at most `max_files`. SURGE's file popularity (Zipf) and
//! temporal locality decide *which* file is fetched, which does not matter for transfer delay
//! here (no caching), so they are not modelled.

use headroom_core::rng::{exp, ln, Rng};
use headroom_core::units::Dur;

#[derive(Clone, Debug, PartialEq)]
pub struct SurgeModel {
    pub body_mu: f64,
    pub body_sigma: f64,
    pub tail_k: f64,
    pub tail_alpha: f64,
    pub size_cap: u64,
    pub embedded_alpha: f64,
    pub max_files: u32,
    pub active_off_scale: f64,
    pub active_off_shape: f64,
    pub inactive_off_k: f64,
    pub inactive_off_alpha: f64,
}

impl Default for SurgeModel {
    fn default() -> Self {
        SurgeModel {
            body_mu: 9.357,
            body_sigma: 1.318,
            tail_k: 133_000.0,
            tail_alpha: 1.1,
            size_cap: 2_000_000,
            embedded_alpha: 2.43,
            max_files: 50,
            active_off_scale: 1.46,
            active_off_shape: 0.382,
            inactive_off_k: 1.0,
            inactive_off_alpha: 1.5,
        }
    }
}

/// Pareto with scale `k` and shape `alpha` by inversion.
fn pareto_k(rng: &mut Rng, k: f64, alpha: f64) -> f64 {
    k * exp(-ln(1.0 - rng.uniform()) / alpha)
}

/// Standard normal (Marsaglia's polar method: only `ln` and `sqrt`, both bit-exact here).
fn normal(rng: &mut Rng) -> f64 {
    loop {
        let u = 2.0 * rng.uniform() - 1.0;
        let v = 2.0 * rng.uniform() - 1.0;
        let s = u * u + v * v;
        if s > 0.0 && s < 1.0 {
            return u * (-2.0 * ln(s) / s).sqrt();
        }
    }
}

impl SurgeModel {
    /// One file size in bytes (at least 1).
    pub fn file_size(&self, rng: &mut Rng) -> u64 {
        let body = exp(self.body_mu + self.body_sigma * normal(rng));
        let x = if body > self.tail_k { pareto_k(rng, self.tail_k, self.tail_alpha) } else { body };
        (x.round() as u64).clamp(1, self.size_cap)
    }

    /// The file sizes of one page, base file first.
    pub fn page(&self, rng: &mut Rng) -> Vec<u64> {
        let files = (pareto_k(rng, 1.0, self.embedded_alpha).floor() as u32).clamp(1, self.max_files);
        (0..files).map(|_| self.file_size(rng)).collect()
    }

    /// Time between two files of a page (Weibull by inversion).
    pub fn active_off(&self, rng: &mut Rng) -> Dur {
        let e = -ln(1.0 - rng.uniform());
        let x = if e > 0.0 { self.active_off_scale * exp(ln(e) / self.active_off_shape) } else { 0.0 };
        Dur::from_secs_f64(x.min(3600.0))
    }

    /// Time between pages.
    pub fn inactive_off(&self, rng: &mut Rng) -> Dur {
        Dur::from_secs_f64(pareto_k(rng, self.inactive_off_k, self.inactive_off_alpha).min(3600.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn surge_sizes_follow_the_lognormal_body_and_pareto_tail() {
        let m = SurgeModel::default();
        let mut rng = Rng::new(7);
        let n = 100_000;
        let mut xs: Vec<u64> = (0..n).map(|_| m.file_size(&mut rng)).collect();
        xs.sort_unstable();
        // Median of the lognormal body: e^9.357 = 11,794 B.
        let median = xs[n / 2] as f64;
        assert!((median / 11_794.0 - 1.0).abs() < 0.03, "median {median}");
        // P(X > 133 KB) = P(Z > (ln 133000 - 9.357)/1.318) = 3.2 %.
        let tail = xs.iter().filter(|&&x| x > 133_000).count() as f64 / n as f64;
        assert!((tail - 0.032).abs() < 0.004, "tail {tail}");
        let pages: Vec<usize> = (0..10_000).map(|_| m.page(&mut rng).len()).collect();
        assert!(pages.iter().all(|&p| (1..=50).contains(&p)));
        // P(files >= 2) = P(X >= 2) = 2^-2.43 = 0.186.
        let multi = pages.iter().filter(|&&p| p >= 2).count() as f64 / 10_000.0;
        assert!((multi - 0.186).abs() < 0.015, "{multi}");
    }
}
