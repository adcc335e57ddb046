//! Distributions of packet sizes and of counts, and the rules for their parameters.
//!
//! # Packet sizes ([`SizeDist`])
//!
//! Sizes are IP packet sizes in bytes (headers included), as in ns-2's `packetSize_`.
//!
//! ImTCP §4.1 (Cao, Hasegawa, Murata 2005, `001_*`) builds its UDP cross traffic from "various
//! packet sizes ... according to the monitored results in the Internet reported in Ref. \[17\]"; the
//! OCR of the paper lost its reference list, so the exact mix is not recoverable. We use the
//! classic trimodal "simple IMIX" derived from the 1998-2000 backbone measurements (Claffy, Miller
//! and Thompson, INET'98; NLANR/CAIDA packet-length histograms):
//!
//! | IP size | weight | share  |
//! |--------:|-------:|-------:|
//! |   40 B  |   7    | 58.33% |
//! |  576 B  |   4    | 33.33% |
//! | 1500 B  |   1    |  8.33% |
//!
//! mean = (7·40 + 4·576 + 1500)/12 = 4084/12 = 340.33 B. For comparison CAIDA's NASA-Ames
//! Internet eXchange histogram (May 1999, 127 M packets) reports quartiles 40 B and 576 B and a
//! 95th percentile of 1500 B, which this mix reproduces, and a mean of 413 B, which it
//! undershoots (the real distribution has mass between the modes). Scenarios wanting another mix
//! write it as `Empirical`.
//!
//! # Counts ([`CountDist`])
//!
//! Objects per web page: fixed, geometric on 1, 2, … or one plus a Poisson count (see
//! [`CountDist`]). Every draw goes to a sampler of [`headroom_core::rng`]; no sampling is written
//! here.

use std::fmt;

use serde::de::{self, value::MapAccessDeserializer, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use headroom_core::rng::Rng;

/// The trimodal Internet packet-size mix: `(IP size in bytes, integer weight)`. See the module
/// documentation for its source.
pub const INTERNET_MIX: [(u32, u32); 3] = [(40, 7), (576, 4), (1500, 1)];

/// A distribution of IP packet sizes in bytes.
#[derive(Clone, Debug, PartialEq)]
pub enum SizeDist {
    /// Every packet has this size.
    Fixed(u32),
    /// Uniform on the integers `min..=max` ([`Rng::uniform_int`]).
    Uniform { min: u32, max: u32 },
    /// [`INTERNET_MIX`]: 40 B 7/12, 576 B 4/12, 1500 B 1/12 ([`Rng::weighted`], exact shares).
    InternetMix,
    /// `(size, weight)` points; weights need not sum to one ([`Rng::empirical`]).
    Empirical(Vec<(u32, f64)>),
}

impl SizeDist {
    /// Draws one packet size.
    pub fn sample(&self, rng: &mut Rng) -> u32 {
        match self {
            SizeDist::Fixed(s) => *s,
            SizeDist::Uniform { min, max } => rng.uniform_int(u64::from(*min), u64::from(*max)) as u32,
            SizeDist::InternetMix => rng.weighted(&INTERNET_MIX).unwrap_or(INTERNET_MIX[INTERNET_MIX.len() - 1].0),
            // No positive weight (rejected by `validate`): size 0.
            SizeDist::Empirical(points) => rng.empirical(points).unwrap_or(0),
        }
    }

    /// The mean size in bytes.
    pub fn mean(&self) -> f64 {
        match self {
            SizeDist::Fixed(s) => f64::from(*s),
            SizeDist::Uniform { min, max } => (f64::from(*min) + f64::from(*max)) / 2.0,
            SizeDist::InternetMix => {
                let total: u32 = INTERNET_MIX.iter().map(|p| p.1).sum();
                let bytes: u32 = INTERNET_MIX.iter().map(|p| p.0 * p.1).sum();
                f64::from(bytes) / f64::from(total)
            }
            SizeDist::Empirical(points) => {
                let total: f64 = points.iter().map(|p| p.1.max(0.0)).sum();
                if total <= 0.0 {
                    return 0.0;
                }
                points.iter().map(|p| f64::from(p.0) * p.1.max(0.0)).sum::<f64>() / total
            }
        }
    }

    /// Checks a programmatically built distribution (deserialized ones are already checked).
    pub fn validate(&self) -> Result<(), String> {
        match self {
            SizeDist::Fixed(0) => Err("packet size 0: must be at least 1 byte".into()),
            SizeDist::Fixed(_) | SizeDist::InternetMix => Ok(()),
            SizeDist::Uniform { min, max } => {
                if *min == 0 {
                    Err(format!("uniform packet sizes: min = {min} must be at least 1 byte"))
                } else if min > max {
                    Err(format!("uniform packet sizes: min = {min} is above max = {max}"))
                } else {
                    Ok(())
                }
            }
            SizeDist::Empirical(points) => {
                if points.is_empty() {
                    return Err("empirical packet sizes: `points` is empty".into());
                }
                for &(size, weight) in points {
                    if size == 0 {
                        return Err("empirical packet sizes: size 0 is not a packet".into());
                    }
                    if !weight.is_finite() || weight < 0.0 {
                        return Err(format!(
                            "empirical packet sizes: weight {weight} of size {size} must be a finite number >= 0"
                        ));
                    }
                }
                if points.iter().all(|p| p.1 == 0.0) {
                    return Err("empirical packet sizes: all weights are zero".into());
                }
                Ok(())
            }
        }
    }
}

/// The table form of [`SizeDist`] in scenario files.
#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum SizeDistTable {
    Fixed {
        size: u32,
    },
    Uniform {
        min: u32,
        max: u32,
    },
    #[serde(alias = "imix")]
    InternetMix {},
    Empirical {
        points: Vec<(u32, f64)>,
    },
}

impl<'de> Deserialize<'de> for SizeDist {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SizeDist;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "a packet size in bytes, \"internet_mix\", or a table with kind = \"fixed\", \"uniform\", \"internet_mix\" or \"empirical\"",
                )
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<SizeDist, E> {
                fixed(v.into(), "packet size", SizeDist::Fixed, SizeDist::validate)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<SizeDist, E> {
                fixed(v.into(), "packet size", SizeDist::Fixed, SizeDist::validate)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<SizeDist, E> {
                match v {
                    "internet_mix" | "imix" => Ok(SizeDist::InternetMix),
                    _ => Err(E::custom(format_args!(
                        "unknown packet-size distribution `{v}` (a size in bytes, \"internet_mix\", or a table with `kind`)"
                    ))),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<SizeDist, A::Error> {
                let dist = match SizeDistTable::deserialize(MapAccessDeserializer::new(map))? {
                    SizeDistTable::Fixed { size } => SizeDist::Fixed(size),
                    SizeDistTable::Uniform { min, max } => SizeDist::Uniform { min, max },
                    SizeDistTable::InternetMix {} => SizeDist::InternetMix,
                    SizeDistTable::Empirical { points } => SizeDist::Empirical(points),
                };
                validated(dist, SizeDist::validate)
            }
        }
        d.deserialize_any(V)
    }
}

/// A distribution of counts >= 1 (objects per web page).
#[derive(Clone, Debug, PartialEq)]
pub enum CountDist {
    /// Always this many (>= 1).
    Fixed(u32),
    /// Geometric on 1, 2, 3, ... with the given mean (>= 1): P(k) = p (1-p)^(k-1), p = 1/mean
    /// ([`Rng::geometric`]).
    Geometric { mean: f64 },
    /// 1 + Poisson(mean - 1): at least one, with the given mean (>= 1) ([`Rng::poisson`]).
    Poisson { mean: f64 },
}

/// Largest mean accepted for [`CountDist`] (sampling costs O(mean) for `Poisson`).
pub const MAX_COUNT_MEAN: f64 = 100_000.0;

impl CountDist {
    /// Draws one count (>= 1).
    pub fn sample(&self, rng: &mut Rng) -> u32 {
        match *self {
            CountDist::Fixed(n) => n.max(1),
            CountDist::Geometric { mean } => rng.geometric(mean).min(u64::from(u32::MAX)) as u32,
            CountDist::Poisson { mean } => {
                let lambda = if mean.is_finite() { (mean - 1.0).min(MAX_COUNT_MEAN) } else { 0.0 };
                u32::try_from(rng.poisson(lambda)).unwrap_or(u32::MAX).saturating_add(1)
            }
        }
    }

    /// The mean count.
    pub fn mean(&self) -> f64 {
        match *self {
            CountDist::Fixed(n) => f64::from(n.max(1)),
            CountDist::Geometric { mean } | CountDist::Poisson { mean } => mean.max(1.0),
        }
    }

    /// Checks a programmatically built distribution (deserialized ones are already checked).
    pub fn validate(&self) -> Result<(), String> {
        match *self {
            CountDist::Fixed(0) => Err("objects per page: 0, must be at least 1".into()),
            CountDist::Fixed(_) => Ok(()),
            CountDist::Geometric { mean } | CountDist::Poisson { mean } => {
                if mean.is_finite() && (1.0..=MAX_COUNT_MEAN).contains(&mean) {
                    Ok(())
                } else {
                    Err(format!("objects per page: mean {mean} must be between 1 and {MAX_COUNT_MEAN}"))
                }
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum CountDistTable {
    Fixed { count: u32 },
    Geometric { mean: f64 },
    Poisson { mean: f64 },
}

impl<'de> Deserialize<'de> for CountDist {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CountDist;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a count, or a table with kind = \"fixed\", \"geometric\" or \"poisson\" and `mean`")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<CountDist, E> {
                fixed(v.into(), "count", CountDist::Fixed, CountDist::validate)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<CountDist, E> {
                fixed(v.into(), "count", CountDist::Fixed, CountDist::validate)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<CountDist, A::Error> {
                let dist = match CountDistTable::deserialize(MapAccessDeserializer::new(map))? {
                    CountDistTable::Fixed { count } => CountDist::Fixed(count),
                    CountDistTable::Geometric { mean } => CountDist::Geometric { mean },
                    CountDistTable::Poisson { mean } => CountDist::Poisson { mean },
                };
                validated(dist, CountDist::validate)
            }
        }
        d.deserialize_any(V)
    }
}

/// A bare integer of a scenario file as the `Fixed` variant of a distribution (built by `make`,
/// checked by `validate`); `what` names the value in the errors ("packet size -3 is negative").
fn fixed<T, E: de::Error>(
    v: i128,
    what: &str,
    make: fn(u32) -> T,
    validate: fn(&T) -> Result<(), String>,
) -> Result<T, E> {
    if v < 0 {
        return Err(E::custom(format_args!("{what} {v} is negative")));
    }
    let n = u32::try_from(v).map_err(|_| E::custom(format_args!("{what} {v} is too large")))?;
    validated(make(n), validate)
}

/// `dist` if `validate` accepts it, its message as a deserialisation error otherwise.
fn validated<T, E: de::Error>(dist: T, validate: fn(&T) -> Result<(), String>) -> Result<T, E> {
    validate(&dist).map_err(E::custom)?;
    Ok(dist)
}

/// `shape` of a Pareto distribution: finite and > 1 (so that the mean exists).
pub(super) fn de_pareto_shape<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let shape = f64::deserialize(d)?;
    check_pareto_shape(shape).map_err(de::Error::custom)?;
    Ok(shape)
}

pub(super) fn check_pareto_shape(shape: f64) -> Result<(), String> {
    if shape.is_finite() && shape > 1.0 {
        Ok(())
    } else {
        Err(format!("invalid Pareto shape {shape}: must be greater than 1 (the mean is infinite otherwise)"))
    }
}

/// Nanoseconds (non-negative, rounded half up, saturating) from an f64 count of nanoseconds.
pub(super) fn to_ns(x: f64) -> u64 {
    if x.is_nan() || x <= 0.0 {
        0
    } else {
        // `as` saturates at u64::MAX
        (x + 0.5) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_distribution_means() {
        let mut rng = Rng::new(7);
        let n = 600_000;
        let mix = SizeDist::InternetMix;
        assert!((mix.mean() - 4084.0 / 12.0).abs() < 1e-9);
        let mut counts = std::collections::BTreeMap::new();
        let mut sum = 0u64;
        for _ in 0..n {
            let s = mix.sample(&mut rng);
            sum += u64::from(s);
            *counts.entry(s).or_insert(0u32) += 1;
        }
        assert_eq!(counts.keys().copied().collect::<Vec<_>>(), vec![40, 576, 1500]);
        let share = |s| f64::from(counts[&s]) / n as f64;
        assert!((share(40) - 7.0 / 12.0).abs() < 0.003);
        assert!((share(576) - 4.0 / 12.0).abs() < 0.003);
        assert!((share(1500) - 1.0 / 12.0).abs() < 0.002);
        let mean = sum as f64 / n as f64;
        assert!((mean / mix.mean() - 1.0).abs() < 0.01, "imix mean {mean}");

        let uni = SizeDist::Uniform { min: 300, max: 600 };
        let xs: Vec<u32> = (0..n).map(|_| uni.sample(&mut rng)).collect();
        assert!(xs.iter().all(|s| (300..=600).contains(s)));
        assert!(xs.contains(&300) && xs.contains(&600));
        let mean = xs.iter().map(|s| f64::from(*s)).sum::<f64>() / n as f64;
        assert!((mean - 450.0).abs() < 1.0, "uniform mean {mean}");

        let emp = SizeDist::Empirical(vec![(100, 1.0), (200, 0.0), (1000, 3.0)]);
        assert!((emp.mean() - 775.0).abs() < 1e-9);
        let xs: Vec<u32> = (0..n).map(|_| emp.sample(&mut rng)).collect();
        assert!(!xs.contains(&200));
        let mean = xs.iter().map(|s| f64::from(*s)).sum::<f64>() / n as f64;
        assert!((mean / 775.0 - 1.0).abs() < 0.01, "empirical mean {mean}");
        assert_eq!(SizeDist::Fixed(1460).sample(&mut rng), 1460);
    }

    #[test]
    fn bare_integers_become_fixed_or_a_named_error() {
        let size = |v: i64| SizeDist::deserialize(toml::Value::Integer(v)).map_err(|e| e.to_string());
        let count = |v: i64| CountDist::deserialize(toml::Value::Integer(v)).map_err(|e| e.to_string());
        assert_eq!(size(1500), Ok(SizeDist::Fixed(1500)));
        assert_eq!(count(3), Ok(CountDist::Fixed(3)));
        for (got, needle) in [
            (size(-3).err(), "packet size -3 is negative"),
            (size(5_000_000_000).err(), "packet size 5000000000 is too large"),
            (size(0).err(), "at least 1 byte"),
            (count(-1).err(), "count -1 is negative"),
            (count(1 << 40).err(), "is too large"),
            (count(0).err(), "at least 1"),
        ] {
            let e = got.expect(needle);
            assert!(e.contains(needle), "{e}");
        }
    }
}
