//! The web-page model: pages of objects and the user's think time.
//!
//! # Web traffic ([`WebModel`])
//!
//! A web client repeats: request a page of several objects, download them, think, repeat (the
//! ns-2 `PagePool/WebTraf` session model). Values used by the papers:
//!
//! - ImTCP §4.3 / §5.1 (`001_*`): "a Pareto distribution for the Web object size distribution ...
//!   1.2 as the Pareto shape parameter with 12 kb as the average object size. The number of
//!   objects in a Web page is eight." We read "12 kb" as 12 KB = 12,000 bytes (the OCR's "kb" is
//!   ambiguous; ns-2's WebTraf object sizes are in packets of 1000 B by default, and 12 packets is
//!   12 KB). Think time and inter-object gap are not stated.
//! - ImTCP-bg §4 (`000_*`, Japanese): 50 Mbps / 10 ms bottleneck, 1000-packet buffer, N_web web
//!   servers (10-50) serving 200 clients, with at most N_web pages downloading at once
//!   ("最大 N_web の Web ページが同時にダウンロードされるようにリクエストを送る"). It states no
//!   object-size, objects-per-page or think-time parameters; the group's companion ImTCP paper
//!   above supplies the first two.
//!
//! Defaults ([`WebModel::default`]) are therefore: Pareto objects, shape 1.2, mean 12 KB (scale
//! 2 KB), no cap; 8 objects per page; exponential think time with mean 1 s (the value of ns-2's
//! `tcl/ex/web-traffic.tcl` example, `interPage` Exponential 1 s, since neither paper gives one);
//! no inter-object gap (all objects of a page requested at once; ns-2's example uses `interObj`
//! Exponential 0.01 s, available as `object_gap`). Whether think time runs from the end of a
//! page's download (SURGE/"user think time") or from its request (ns-2's `interPage`) is the
//! simulator's choice; this module only draws the durations.
//!
//! **Cap on object size.** With shape 1.2 the variance is infinite: the largest of n objects grows
//! like `2 KB · n^(1/1.2)`, and sample means converge slowly and from below (10^5 objects drawn
//! with `Rng::new(1)`: mean 10,014 B, largest 15.2 MB). The papers (ns-2) used an uncapped Pareto, so the default is no cap. A cap
//! `object_cap = c` truncates each object to `min(X, c)` (no rescaling), which lowers the mean to
//! `mean − scale^α · c^(1−α) / (α − 1)`: with c = 10 MB it becomes 10.18 KB (−15%), with
//! c = 1 GB 11.27 KB (−6%); [`WebModel::mean_object_size`] computes this exactly. Use a cap for
//! short runs where one multi-megabyte object would dominate the result, and report it.

use headroom_core::rng::{self, Rng};
use headroom_core::units::{Bytes, Dur};
use serde::de::{self, Deserializer};
use serde::Deserialize;

use super::dist::{check_pareto_shape, de_pareto_shape, to_ns, CountDist};
use crate::serde_units::{de_bytes_nonzero, de_dur, de_opt_bytes, de_opt_dur};

/// One web page: the sizes of its objects in bytes, in request order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    pub object_sizes: Vec<u64>,
}

impl Page {
    /// Total bytes of the page.
    pub fn total_bytes(&self) -> Bytes {
        Bytes(self.object_sizes.iter().sum())
    }
}

/// The web-page model (see the module documentation for the values and their sources).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebModel {
    /// Mean object size (Pareto), default 12 KB.
    #[serde(deserialize_with = "de_bytes_nonzero")]
    pub object_mean: Bytes,
    /// Pareto shape of object sizes (> 1), default 1.2.
    #[serde(deserialize_with = "de_pareto_shape")]
    pub object_shape: f64,
    /// Objects larger than this are truncated to it; default none.
    #[serde(deserialize_with = "de_opt_cap")]
    pub object_cap: Option<Bytes>,
    /// Objects per page, default `Fixed(8)`.
    pub objects_per_page: CountDist,
    /// Mean of the exponential think time between pages, default 1 s.
    #[serde(deserialize_with = "de_dur")]
    pub think_time: Dur,
    /// Mean of an exponential gap between the requests of successive objects of a page; default
    /// none (all objects requested together).
    #[serde(deserialize_with = "de_opt_dur")]
    pub object_gap: Option<Dur>,
}

fn de_opt_cap<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Bytes>, D::Error> {
    let cap = de_opt_bytes(d)?;
    if cap == Some(Bytes(0)) {
        return Err(de::Error::custom("invalid object_cap `0`: must be positive"));
    }
    Ok(cap)
}

impl Default for WebModel {
    /// ImTCP §4.3: Pareto objects (shape 1.2, mean 12 KB), 8 per page; think time 1 s.
    fn default() -> WebModel {
        WebModel {
            object_mean: Bytes(12_000),
            object_shape: 1.2,
            object_cap: None,
            objects_per_page: CountDist::Fixed(8),
            think_time: Dur::from_secs(1),
            object_gap: None,
        }
    }
}

impl WebModel {
    /// Draws the next page.
    pub fn sample_page(&self, rng: &mut Rng) -> Page {
        let n = self.objects_per_page.sample(rng);
        let object_sizes = (0..n).map(|_| self.sample_object(rng)).collect();
        Page { object_sizes }
    }

    /// Draws one object size in bytes (>= 1, at most the cap).
    pub fn sample_object(&self, rng: &mut Rng) -> u64 {
        let x = rng.pareto(self.object_shape, self.object_mean.as_u64() as f64);
        let size = to_ns(x).max(1); // same rounding as durations: half up, saturating
        match self.object_cap {
            Some(cap) => size.min(cap.as_u64().max(1)),
            None => size,
        }
    }

    /// Draws a think time (exponential with mean `think_time`).
    pub fn think_time(&self, rng: &mut Rng) -> Dur {
        Dur(to_ns(rng.exponential(self.think_time.as_nanos() as f64)))
    }

    /// Draws the gap before requesting the next object of a page (zero without `object_gap`).
    pub fn object_gap(&self, rng: &mut Rng) -> Dur {
        match self.object_gap {
            Some(mean) => Dur(to_ns(rng.exponential(mean.as_nanos() as f64))),
            None => Dur::ZERO,
        }
    }

    /// The mean object size in bytes, accounting for the cap:
    /// `mean − scale^α c^(1−α) / (α − 1)` for a cap `c` above the scale.
    pub fn mean_object_size(&self) -> f64 {
        let alpha = self.object_shape;
        let mean = self.object_mean.as_u64() as f64;
        let scale = mean * (alpha - 1.0) / alpha;
        match self.object_cap {
            None => mean,
            Some(cap) => {
                let c = cap.as_u64() as f64;
                if c <= scale {
                    c
                } else {
                    mean - rng::exp(alpha * rng::ln(scale) + (1.0 - alpha) * rng::ln(c)) / (alpha - 1.0)
                }
            }
        }
    }

    /// The mean number of objects per page.
    pub fn mean_objects_per_page(&self) -> f64 {
        self.objects_per_page.mean()
    }

    /// Checks a programmatically built model (deserialized ones are already checked).
    pub fn validate(&self) -> Result<(), String> {
        if self.object_mean.as_u64() == 0 {
            return Err("web: object_mean must be positive".into());
        }
        if self.object_cap == Some(Bytes(0)) {
            return Err("web: object_cap must be positive".into());
        }
        check_pareto_shape(self.object_shape)?;
        self.objects_per_page.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn web_page_object_counts_and_sizes() {
        let mut rng = Rng::new(8);
        let model = WebModel::default();
        let pages: Vec<Page> = (0..20_000).map(|_| model.sample_page(&mut rng)).collect();
        assert!(pages.iter().all(|p| p.object_sizes.len() == 8));
        // Uncapped shape 1.2: every object >= scale = 2000 B; median = scale * 2^(1/1.2).
        let mut all: Vec<u64> = pages.iter().flat_map(|p| p.object_sizes.iter().copied()).collect();
        assert!(all.iter().all(|s| *s >= 2000));
        all.sort_unstable();
        let median = all[all.len() / 2] as f64;
        assert!((median / (2000.0 * 2f64.powf(1.0 / 1.2)) - 1.0).abs() < 0.02, "median {median}");

        // Capped: finite variance, so the sample mean converges to the analytic capped mean.
        let capped = WebModel { object_cap: Some(Bytes(1_000_000)), ..WebModel::default() };
        let expect = capped.mean_object_size();
        assert!(expect < 12_000.0 && expect > 8_000.0, "capped mean {expect}");
        let n = 400_000;
        let xs: Vec<u64> = (0..n).map(|_| capped.sample_object(&mut rng)).collect();
        assert!(xs.iter().all(|s| *s <= 1_000_000));
        let mean = xs.iter().sum::<u64>() as f64 / n as f64;
        assert!((mean / expect - 1.0).abs() < 0.02, "sample {mean} vs analytic {expect}");

        // Geometric and Poisson objects per page.
        for dist in [CountDist::Geometric { mean: 8.0 }, CountDist::Poisson { mean: 8.0 }] {
            let m = WebModel { objects_per_page: dist.clone(), ..WebModel::default() };
            let counts: Vec<usize> = (0..100_000).map(|_| m.sample_page(&mut rng).object_sizes.len()).collect();
            assert!(counts.iter().all(|c| *c >= 1));
            let mean = counts.iter().sum::<usize>() as f64 / counts.len() as f64;
            assert!((mean / 8.0 - 1.0).abs() < 0.01, "{dist:?}: mean {mean}");
            let var = counts.iter().map(|c| (*c as f64 - mean).powi(2)).sum::<f64>() / counts.len() as f64;
            // Geometric on 1.. with mean 8: variance (1-p)/p^2 = 56; shifted Poisson: 7.
            let want = if matches!(dist, CountDist::Geometric { .. }) { 56.0 } else { 7.0 };
            assert!((var / want - 1.0).abs() < 0.05, "{dist:?}: var {var}");
        }

        // Think time and object gap.
        let thinks: Vec<f64> = (0..200_000).map(|_| model.think_time(&mut rng).as_secs_f64()).collect();
        let mean = thinks.iter().sum::<f64>() / thinks.len() as f64;
        assert!((mean - 1.0).abs() < 0.01, "think mean {mean}");
        assert_eq!(model.object_gap(&mut rng), Dur::ZERO);
        let gapped = WebModel { object_gap: Some(Dur::from_millis(10)), ..WebModel::default() };
        let mean = (0..200_000).map(|_| gapped.object_gap(&mut rng).as_secs_f64()).sum::<f64>() / 200_000.0;
        assert!((mean / 0.01 - 1.0).abs() < 0.01, "gap mean {mean}");
    }

    #[test]
    fn capped_mean_formula_matches_the_documented_figures() {
        let m = |cap| WebModel { object_cap: Some(Bytes(cap)), ..WebModel::default() }.mean_object_size();
        assert!((m(10_000_000) - 10_180.0).abs() < 5.0, "{}", m(10_000_000));
        assert!((m(1_000_000_000) - 11_275.0).abs() < 5.0, "{}", m(1_000_000_000));
        assert_eq!(m(1000), 1000.0);
        assert_eq!(WebModel::default().mean_object_size(), 12_000.0);
    }

    #[test]
    fn toml_web_model_parses_with_defaults_and_rejects_unknown_keys() {
        let w: WebModel = toml::from_str("").unwrap();
        assert_eq!(w, WebModel::default());
        let w: WebModel = toml::from_str(
            "object_mean = \"20KB\"\nobject_shape = 1.5\nobject_cap = \"10MB\"\nobjects_per_page = { kind = \"geometric\", mean = 4 }\nthink_time = \"2s\"\nobject_gap = \"10ms\"",
        )
        .unwrap();
        assert_eq!(
            w,
            WebModel {
                object_mean: Bytes(20_000),
                object_shape: 1.5,
                object_cap: Some(Bytes(10_000_000)),
                objects_per_page: CountDist::Geometric { mean: 4.0 },
                think_time: Dur::from_secs(2),
                object_gap: Some(Dur::from_millis(10)),
            }
        );
        let w: WebModel = toml::from_str("objects_per_page = 3").unwrap();
        assert_eq!(w.objects_per_page, CountDist::Fixed(3));
        let w: WebModel = toml::from_str("objects_per_page = { kind = \"poisson\", mean = 8 }").unwrap();
        assert_eq!(w.objects_per_page, CountDist::Poisson { mean: 8.0 });

        for (text, needle) in [
            ("think = \"1s\"", "think"),
            ("object_shape = 0.9", "greater than 1"),
            ("object_cap = 0", "object_cap"),
            ("objects_per_page = 0", "at least 1"),
            ("objects_per_page = { kind = \"geometric\", mean = 0.5 }", "0.5"),
            ("think_time = \"1 fortnight\"", "fortnight"),
            ("object_mean = \"12kb\"", "12kb"),
        ] {
            let e = toml::from_str::<WebModel>(text).expect_err(text).to_string();
            assert!(e.contains(needle), "error for {text:?} lacks {needle:?}: {e}");
        }
    }
}
