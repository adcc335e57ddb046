//! Traffic models: packet-size distributions, UDP sending patterns and the web-page model.
//!
//! These are plain generators. They own no clock and send nothing: a [`UdpSource`] answers "when
//! does the next packet leave and how big is it", a [`WebModel`] answers "what does the next page
//! consist of and how long does the user think". The simulator turns the answers into events.
//! Every generator draws from its own [`Rng`] (a [`Rng::fork`] of the run's generator), so a run
//! is a pure function of its seed.
//!
//! # Packet sizes ([`SizeDist`])
//!
//! Sizes are IP packet sizes in bytes (headers included), as in ns-2's `packetSize_`.
//!
//! ImTCP §4.1 (Cao, Hasegawa, Murata 2005, `001_*`) builds its UDP cross traffic from "various
//! packet sizes ... according to the monitored results in the Internet reported in Ref. [17]"; the
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
//! # UDP patterns ([`UdpPattern`])
//!
//! - `Cbr`: packet *k* leaves at `start + ceil(8·(s_0 + … + s_{k-1}) / rate)` (in ns). Computing
//!   each departure from the cumulative bit count, in integers, makes the long-run rate exact
//!   (no drift from rounding each gap) for fixed and variable sizes alike.
//! - `Poisson`: exponential gaps with mean `8·E[size]/rate`, independent of the sizes; the
//!   fractional nanoseconds of each gap are carried to the next, so rounding adds no bias.
//! - `ExpOnOff`, `ParetoOnOff`: ns-2's `Application/Traffic/Exponential` and `.../Pareto`:
//!   during an ON period ("burst_time") packets leave back to back at `rate` (spacing
//!   `8·size/rate`), then the source is silent for an OFF period ("idle_time"); ON and OFF lengths
//!   are exponential, or Pareto with the same `shape` for both (as ns-2's POO_Traffic). The
//!   configured `rate` is the peak rate; [`UdpPattern::mean_rate`] is
//!   `rate · mean_on / (mean_on + mean_off)`.
//!
//!   Choice left open by ns-2: ns-2 draws the burst *length in packets*
//!   (`int(Exp(burst_time/interval) + 0.5)`, at least one), which biases the mean rate upward
//!   when bursts are a few packets long. We instead run a CBR schedule on an "ON clock" that only
//!   advances during ON periods and map it to real time by inserting the OFF periods: a packet is
//!   sent in the ON period in which its CBR slot begins. The long-run mean rate is then exactly
//!   `rate · E[on] / (E[on] + E[off])` whatever the burst and packet sizes, and a burst shorter
//!   than one packet time still carries its share of bits (spread over later bursts). The first
//!   ON period starts at the source's start time.
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
//!
//! # Scenario syntax (TOML)
//!
//! ```toml
//! sizes = 1000                                    # Fixed
//! sizes = "internet_mix"                          # InternetMix (also "imix")
//! sizes = { kind = "uniform", min = 300, max = 600 }
//! sizes = { kind = "empirical", points = [[40, 7], [576, 4], [1500, 1]] }
//! pattern = { kind = "cbr", rate = "3Mbps" }
//! pattern = { kind = "poisson", rate = "3Mbps" }
//! pattern = { kind = "exp_on_off", rate = "20Mbps", mean_on = "500ms", mean_off = "500ms" }
//! pattern = { kind = "pareto_on_off", rate = "20Mbps", mean_on = "500ms", mean_off = "500ms", shape = 1.5 }
//! [web]                       # every key optional; these are the defaults
//! object_mean = "12KB"
//! object_shape = 1.2
//! # object_cap = "10MB"
//! objects_per_page = 8        # or { kind = "geometric", mean = 8 } / { kind = "poisson", mean = 8 }
//! think_time = "1s"
//! # object_gap = "10ms"
//! ```

use std::fmt;

use headroom_core::units::{Bytes, Dur, Rate, Time};
use serde::de::{self, value::MapAccessDeserializer, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use crate::serde_units::{de_bytes_nonzero, de_dur, de_dur_nonzero, de_opt_bytes, de_opt_dur, de_rate_nonzero};
use headroom_core::rng::{self, Rng};

/// The trimodal Internet packet-size mix: `(IP size in bytes, integer weight)`. See the module
/// documentation for its source.
pub const INTERNET_MIX: [(u32, u32); 3] = [(40, 7), (576, 4), (1500, 1)];

/// A distribution of IP packet sizes in bytes.
#[derive(Clone, Debug, PartialEq)]
pub enum SizeDist {
    /// Every packet has this size.
    Fixed(u32),
    /// Uniform on the integers `min..=max`.
    Uniform { min: u32, max: u32 },
    /// [`INTERNET_MIX`]: 40 B 7/12, 576 B 4/12, 1500 B 1/12.
    InternetMix,
    /// `(size, weight)` points; weights need not sum to one.
    Empirical(Vec<(u32, f64)>),
}

impl SizeDist {
    /// Draws one packet size.
    pub fn sample(&self, rng: &mut Rng) -> u32 {
        match self {
            SizeDist::Fixed(s) => *s,
            SizeDist::Uniform { min, max } => {
                let (lo, hi) = if min <= max { (*min, *max) } else { (*max, *min) };
                lo + rng.below(u64::from(hi - lo) + 1) as u32
            }
            SizeDist::InternetMix => {
                let total: u32 = INTERNET_MIX.iter().map(|p| p.1).sum();
                let mut pick = rng.below(u64::from(total)) as u32;
                for (size, weight) in INTERNET_MIX {
                    if pick < weight {
                        return size;
                    }
                    pick -= weight;
                }
                INTERNET_MIX[INTERNET_MIX.len() - 1].0
            }
            SizeDist::Empirical(points) => {
                let total: f64 = points.iter().map(|p| p.1.max(0.0)).sum();
                let mut pick = rng.uniform() * total;
                for &(size, weight) in points {
                    let w = weight.max(0.0);
                    if pick < w {
                        return size;
                    }
                    pick -= w;
                }
                // Rounding left `pick` past the end: the last point with positive weight.
                points.iter().rev().find(|p| p.1 > 0.0).map_or(0, |p| p.0)
            }
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
                let s = u32::try_from(v).map_err(|_| E::custom(format_args!("packet size {v} is too large")))?;
                let dist = SizeDist::Fixed(s);
                dist.validate().map_err(E::custom)?;
                Ok(dist)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<SizeDist, E> {
                match u64::try_from(v) {
                    Ok(u) => self.visit_u64(u),
                    Err(_) => Err(E::custom(format_args!("packet size {v} is negative"))),
                }
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
                dist.validate().map_err(de::Error::custom)?;
                Ok(dist)
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
    /// Geometric on 1, 2, 3, ... with the given mean (>= 1): P(k) = p (1-p)^(k-1), p = 1/mean.
    Geometric { mean: f64 },
    /// 1 + Poisson(mean - 1): at least one, with the given mean (>= 1).
    Poisson { mean: f64 },
}

/// Largest mean accepted for [`CountDist`] (sampling costs O(mean) for `Poisson`).
pub const MAX_COUNT_MEAN: f64 = 100_000.0;

impl CountDist {
    /// Draws one count (>= 1).
    pub fn sample(&self, rng: &mut Rng) -> u32 {
        match *self {
            CountDist::Fixed(n) => n.max(1),
            CountDist::Geometric { mean } => {
                if mean.is_nan() || mean <= 1.0 {
                    return 1;
                }
                let q = 1.0 - 1.0 / mean;
                let v = 1.0 - rng.uniform(); // (0, 1]
                let k = rng::ln(v) / rng::ln(q); // >= 0
                1 + (k.min(u32::MAX as f64 - 1.0)) as u32
            }
            CountDist::Poisson { mean } => {
                let lambda = if mean.is_finite() { (mean - 1.0).min(MAX_COUNT_MEAN) } else { 0.0 };
                // Count unit-rate exponential arrivals in [0, lambda).
                let mut count = 1u32;
                let mut t = rng.exponential(1.0);
                while t < lambda {
                    count += 1;
                    t += rng.exponential(1.0);
                }
                count
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
                let n = u32::try_from(v).map_err(|_| E::custom(format_args!("count {v} is too large")))?;
                let dist = CountDist::Fixed(n);
                dist.validate().map_err(E::custom)?;
                Ok(dist)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<CountDist, E> {
                match u64::try_from(v) {
                    Ok(u) => self.visit_u64(u),
                    Err(_) => Err(E::custom(format_args!("count {v} is negative"))),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<CountDist, A::Error> {
                let dist = match CountDistTable::deserialize(MapAccessDeserializer::new(map))? {
                    CountDistTable::Fixed { count } => CountDist::Fixed(count),
                    CountDistTable::Geometric { mean } => CountDist::Geometric { mean },
                    CountDistTable::Poisson { mean } => CountDist::Poisson { mean },
                };
                dist.validate().map_err(de::Error::custom)?;
                Ok(dist)
            }
        }
        d.deserialize_any(V)
    }
}

/// `shape` of a Pareto distribution: finite and > 1 (so that the mean exists).
fn de_pareto_shape<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let shape = f64::deserialize(d)?;
    check_pareto_shape(shape).map_err(de::Error::custom)?;
    Ok(shape)
}

fn check_pareto_shape(shape: f64) -> Result<(), String> {
    if shape.is_finite() && shape > 1.0 {
        Ok(())
    } else {
        Err(format!("invalid Pareto shape {shape}: must be greater than 1 (the mean is infinite otherwise)"))
    }
}

/// When a UDP source sends. `rate` is the sending rate (during ON periods for the on/off
/// patterns), in bits per second of IP packets.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum UdpPattern {
    /// Constant bit rate.
    Cbr {
        #[serde(deserialize_with = "de_rate_nonzero")]
        rate: Rate,
    },
    /// Poisson packet arrivals with mean bit rate `rate`.
    Poisson {
        #[serde(deserialize_with = "de_rate_nonzero")]
        rate: Rate,
    },
    /// Exponential ON/OFF (ns-2 `Application/Traffic/Exponential`).
    #[serde(alias = "exponential", alias = "expoo")]
    ExpOnOff {
        #[serde(deserialize_with = "de_rate_nonzero")]
        rate: Rate,
        #[serde(deserialize_with = "de_dur_nonzero")]
        mean_on: Dur,
        #[serde(deserialize_with = "de_dur")]
        mean_off: Dur,
    },
    /// Pareto ON/OFF (ns-2 `Application/Traffic/Pareto`); ON and OFF share `shape` (> 1).
    #[serde(alias = "pareto", alias = "poo")]
    ParetoOnOff {
        #[serde(deserialize_with = "de_rate_nonzero")]
        rate: Rate,
        #[serde(deserialize_with = "de_dur_nonzero")]
        mean_on: Dur,
        #[serde(deserialize_with = "de_dur")]
        mean_off: Dur,
        #[serde(deserialize_with = "de_pareto_shape")]
        shape: f64,
    },
}

impl UdpPattern {
    /// The configured sending rate (the peak rate for on/off patterns).
    pub fn rate(&self) -> Rate {
        match *self {
            UdpPattern::Cbr { rate }
            | UdpPattern::Poisson { rate }
            | UdpPattern::ExpOnOff { rate, .. }
            | UdpPattern::ParetoOnOff { rate, .. } => rate,
        }
    }

    /// The long-run mean bit rate: `rate`, or `rate · mean_on / (mean_on + mean_off)`.
    pub fn mean_rate(&self) -> Rate {
        match *self {
            UdpPattern::Cbr { rate } | UdpPattern::Poisson { rate } => rate,
            UdpPattern::ExpOnOff { rate, mean_on, mean_off }
            | UdpPattern::ParetoOnOff { rate, mean_on, mean_off, .. } => {
                let cycle = u128::from(mean_on.as_nanos()) + u128::from(mean_off.as_nanos());
                if cycle == 0 {
                    return rate;
                }
                Rate((u128::from(rate.bps()) * u128::from(mean_on.as_nanos()) / cycle) as u64)
            }
        }
    }

    /// Checks a programmatically built pattern (deserialized ones are already checked).
    pub fn validate(&self) -> Result<(), String> {
        if self.rate().bps() == 0 {
            return Err("UDP rate must be positive".into());
        }
        match *self {
            UdpPattern::ExpOnOff { mean_on, .. } | UdpPattern::ParetoOnOff { mean_on, .. }
                if mean_on.as_nanos() == 0 =>
            {
                Err("on/off UDP: mean_on must be positive".into())
            }
            UdpPattern::ParetoOnOff { shape, .. } => check_pareto_shape(shape),
            _ => Ok(()),
        }
    }
}

/// A UDP packet generator: [`UdpSource::next`] gives the departure time and size of each packet
/// in turn. See the module documentation for the exact schedules.
#[derive(Clone, Debug)]
pub struct UdpSource {
    pattern: UdpPattern,
    sizes: SizeDist,
    rng: Rng,
    start: Time,
    /// Bits of all packets handed out so far (the CBR schedule, on the ON clock for on/off).
    sent_bits: u128,
    /// On/off: ON-clock instant (ns since start) at which the current ON period ends.
    on_end: u64,
    /// On/off: total OFF time inserted so far (ns).
    off_total: u64,
    /// Poisson: the last departure (ns since start) and the carried fraction of a nanosecond.
    poisson_at: u64,
    poisson_frac: f64,
    packets: u64,
}

impl UdpSource {
    /// A source whose first ON period (or first CBR packet) starts at `start`. Invalid patterns
    /// (see [`UdpPattern::validate`]) do not panic: a zero rate never sends (departures at
    /// [`Time::MAX`]).
    pub fn new(pattern: UdpPattern, sizes: SizeDist, rng: Rng, start: Time) -> UdpSource {
        let mut source = UdpSource {
            pattern,
            sizes,
            rng,
            start,
            sent_bits: 0,
            on_end: 0,
            off_total: 0,
            poisson_at: 0,
            poisson_frac: 0.0,
            packets: 0,
        };
        source.on_end = source.draw_on();
        source
    }

    /// The pattern this source follows.
    pub fn pattern(&self) -> &UdpPattern {
        &self.pattern
    }

    /// Its packet-size distribution.
    pub fn sizes(&self) -> &SizeDist {
        &self.sizes
    }

    /// Packets handed out so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// The departure time and IP size in bytes of the next packet. Times never decrease.
    #[allow(clippy::should_implement_trait)] // an endless generator, not an iterator
    pub fn next(&mut self) -> (Time, u32) {
        let size = self.sizes.sample(&mut self.rng);
        self.packets += 1;
        let rate = self.pattern.rate().bps();
        if rate == 0 {
            return (Time::MAX, size);
        }
        let at_ns = match self.pattern {
            UdpPattern::Cbr { .. } => {
                let at = cbr_slot(self.sent_bits, rate);
                self.sent_bits += u128::from(size) * 8;
                at
            }
            UdpPattern::Poisson { .. } => {
                let mean_gap_ns = 8.0 * self.sizes.mean() * 1e9 / rate as f64;
                self.poisson_frac += self.rng.exponential(mean_gap_ns);
                let whole = self.poisson_frac as u64; // truncation: floor of a non-negative
                self.poisson_frac -= whole as f64;
                self.poisson_at = self.poisson_at.saturating_add(whole);
                self.poisson_at
            }
            UdpPattern::ExpOnOff { .. } | UdpPattern::ParetoOnOff { .. } => {
                let slot = cbr_slot(self.sent_bits, rate);
                self.sent_bits += u128::from(size) * 8;
                // Insert OFF periods until the slot falls inside an ON period.
                while slot >= self.on_end && self.on_end != u64::MAX {
                    let off = self.draw_off();
                    self.off_total = self.off_total.saturating_add(off);
                    let on = self.draw_on();
                    self.on_end = self.on_end.saturating_add(on);
                }
                slot.saturating_add(self.off_total)
            }
        };
        (self.start + Dur(at_ns), size)
    }

    fn draw_on(&mut self) -> u64 {
        match self.pattern {
            UdpPattern::ExpOnOff { mean_on, .. } => to_ns(self.rng.exponential(mean_on.as_nanos() as f64)),
            UdpPattern::ParetoOnOff { mean_on, shape, .. } => to_ns(self.rng.pareto(shape, mean_on.as_nanos() as f64)),
            _ => u64::MAX,
        }
    }

    fn draw_off(&mut self) -> u64 {
        match self.pattern {
            UdpPattern::ExpOnOff { mean_off, .. } => to_ns(self.rng.exponential(mean_off.as_nanos() as f64)),
            UdpPattern::ParetoOnOff { mean_off, shape, .. } => {
                to_ns(self.rng.pareto(shape, mean_off.as_nanos() as f64))
            }
            _ => 0,
        }
    }
}

/// `ceil(bits · 10^9 / rate)` nanoseconds, saturating.
fn cbr_slot(bits: u128, rate_bps: u64) -> u64 {
    let ns = (bits * 1_000_000_000).div_ceil(u128::from(rate_bps));
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// Nanoseconds (non-negative, rounded half up, saturating) from an f64 count of nanoseconds.
fn to_ns(x: f64) -> u64 {
    if x.is_nan() || x <= 0.0 {
        0
    } else {
        // `as` saturates at u64::MAX
        (x + 0.5) as u64
    }
}

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

    fn rate_over(source: &mut UdpSource, packets: usize) -> (f64, Vec<(Time, u32)>) {
        let out: Vec<(Time, u32)> = (0..packets).map(|_| source.next()).collect();
        for w in out.windows(2) {
            assert!(w[1].0 >= w[0].0, "times decreased: {:?} then {:?}", w[0], w[1]);
        }
        // Rate over [first departure, last departure): all bits but the last packet's.
        let bits: u64 = out[..out.len() - 1].iter().map(|p| u64::from(p.1) * 8).sum();
        let span = (out[out.len() - 1].0 - out[0].0).as_secs_f64();
        (bits as f64 / span, out)
    }

    #[test]
    fn cbr_spacing_is_exact() {
        let start = Time(5_000_000);
        let mut src = UdpSource::new(
            UdpPattern::Cbr { rate: Rate::from_mbps(3) },
            SizeDist::Fixed(1000),
            Rng::new(1).fork(1),
            start,
        );
        // 8000 bits at 3 Mbps = 2,666,666.67 ns: gaps alternate but never drift.
        let out: Vec<(Time, u32)> = (0..3001).map(|_| src.next()).collect();
        assert_eq!(out[0], (start, 1000));
        assert_eq!(out[1].0, start + Dur(2_666_667));
        assert_eq!(out[3].0, start + Dur(8_000_000));
        assert_eq!(out[3000].0, start + Dur::from_secs(8));
        for w in out.windows(2) {
            let gap = (w[1].0 - w[0].0).as_nanos();
            assert!(gap == 2_666_666 || gap == 2_666_667, "gap {gap}");
        }
        // Variable sizes: each departure is the cumulative bits over the rate.
        let mut src = UdpSource::new(
            UdpPattern::Cbr { rate: Rate::from_mbps(8) },
            SizeDist::InternetMix,
            Rng::new(2),
            Time::ZERO,
        );
        let mut bits = 0u64;
        for _ in 0..10_000 {
            let (t, size) = src.next();
            assert_eq!(t.as_nanos(), (bits * 1000).div_ceil(8));
            bits += u64::from(size) * 8;
        }
    }

    #[test]
    fn poisson_mean_rate_within_one_percent_and_exponential_gaps() {
        let mut src = UdpSource::new(
            UdpPattern::Poisson { rate: Rate::from_mbps(3) },
            SizeDist::Fixed(500),
            Rng::new(3),
            Time::ZERO,
        );
        let (rate, out) = rate_over(&mut src, 1_000_000);
        assert!((rate / 3e6 - 1.0).abs() < 0.01, "rate {rate}");
        // Coefficient of variation of exponential gaps is 1 (CBR would be 0).
        let gaps: Vec<f64> = out.windows(2).map(|w| (w[1].0 - w[0].0).as_nanos() as f64).collect();
        let m = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let sd = (gaps.iter().map(|g| (g - m).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
        assert!((sd / m - 1.0).abs() < 0.01, "cv {}", sd / m);
        assert!((m - 4e12 / 3e6).abs() / m < 0.01, "mean gap {m} ns");
    }

    #[test]
    fn exp_on_off_mean_rate_within_one_percent() {
        // Short periods (5 packets per mean burst) give ~250,000 ON/OFF cycles in 1e6 packets,
        // so the sampling error of the mean rate is ~0.15% and a 1% bias would show.
        let pattern = UdpPattern::ExpOnOff {
            rate: Rate::from_mbps(10),
            mean_on: Dur::from_millis(4),
            mean_off: Dur::from_millis(12),
        };
        assert_eq!(pattern.mean_rate(), Rate::from_kbps(2500));
        let mut src = UdpSource::new(pattern, SizeDist::Fixed(1000), Rng::new(4), Time::ZERO);
        let (rate, out) = rate_over(&mut src, 1_000_000);
        assert!((rate / 2.5e6 - 1.0).abs() < 0.01, "rate {rate}");
        // Within a burst packets are spaced exactly at the peak rate (800 us). A gap contains
        // an OFF period when an ON period ends within the 800 us slot: with exponential ON
        // periods that happens with probability 1 - exp(-0.8/4).
        let gaps: Vec<u64> = out.windows(2).map(|w| (w[1].0 - w[0].0).as_nanos()).collect();
        let at_peak = gaps.iter().filter(|g| **g == 800_000).count() as f64 / gaps.len() as f64;
        let expect = rng::exp(-0.8 / 4.0);
        assert!((at_peak - expect).abs() < 0.005, "fraction at peak spacing {at_peak} vs {expect}");
        assert!(gaps.iter().all(|g| *g >= 800_000));
    }

    #[test]
    fn pareto_on_off_mean_rate_within_one_percent() {
        // Shape 2.5 (finite variance). Heavier tails converge more slowly; see the report.
        let pattern = UdpPattern::ParetoOnOff {
            rate: Rate::from_mbps(10),
            mean_on: Dur::from_millis(10),
            mean_off: Dur::from_millis(10),
            shape: 2.5,
        };
        let mut src = UdpSource::new(pattern.clone(), SizeDist::Fixed(1000), Rng::new(5), Time::ZERO);
        let (rate, _) = rate_over(&mut src, 1_000_000);
        let mean = pattern.mean_rate().bps() as f64;
        assert_eq!(mean, 5e6);
        assert!((rate / mean - 1.0).abs() < 0.01, "rate {rate}");
    }

    #[test]
    fn on_off_with_variable_sizes_keeps_mean_rate() {
        let pattern = UdpPattern::ExpOnOff {
            rate: Rate::from_mbps(20),
            mean_on: Dur::from_millis(1), // shorter than some bursts' packets: bits carry over
            mean_off: Dur::from_millis(1),
        };
        let mut src = UdpSource::new(pattern, SizeDist::InternetMix, Rng::new(6), Time::ZERO);
        let (rate, _) = rate_over(&mut src, 1_000_000);
        assert!((rate / 10e6 - 1.0).abs() < 0.01, "rate {rate}");
    }

    #[test]
    fn sources_are_deterministic_per_seed() {
        let make = |seed| {
            UdpSource::new(
                UdpPattern::ParetoOnOff {
                    rate: Rate::from_mbps(5),
                    mean_on: Dur::from_millis(50),
                    mean_off: Dur::from_millis(50),
                    shape: 1.5,
                },
                SizeDist::Uniform { min: 300, max: 600 },
                Rng::new(seed),
                Time::ZERO,
            )
        };
        let (mut a, mut b, mut c) = (make(9), make(9), make(10));
        let xa: Vec<_> = (0..5000).map(|_| a.next()).collect();
        let xb: Vec<_> = (0..5000).map(|_| b.next()).collect();
        let xc: Vec<_> = (0..5000).map(|_| c.next()).collect();
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
        assert!(xa.iter().all(|p| (300..=600).contains(&p.1)));
    }

    #[test]
    fn zero_rate_never_sends_and_does_not_panic() {
        let mut src =
            UdpSource::new(UdpPattern::Cbr { rate: Rate::ZERO }, SizeDist::Fixed(100), Rng::new(1), Time::ZERO);
        assert_eq!(src.next().0, Time::MAX);
        assert!(UdpPattern::Cbr { rate: Rate::ZERO }.validate().is_err());
    }

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

    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    struct Flow {
        pattern: UdpPattern,
        sizes: SizeDist,
    }

    fn flow(s: &str) -> Result<Flow, String> {
        toml::from_str::<Flow>(s).map_err(|e| e.to_string())
    }

    #[test]
    fn toml_patterns_parse() {
        let f = flow("pattern = { kind = \"cbr\", rate = \"3Mbps\" }\nsizes = 1000").unwrap();
        assert_eq!(f.pattern, UdpPattern::Cbr { rate: Rate::from_mbps(3) });
        assert_eq!(f.sizes, SizeDist::Fixed(1000));
        let f = flow("pattern = { kind = \"poisson\", rate = \"100kbps\" }\nsizes = \"internet_mix\"").unwrap();
        assert_eq!(f.pattern, UdpPattern::Poisson { rate: Rate::from_kbps(100) });
        assert_eq!(f.sizes, SizeDist::InternetMix);
        let f = flow(
            "pattern = { kind = \"exp_on_off\", rate = \"20Mbps\", mean_on = \"500ms\", mean_off = \"0.5s\" }\nsizes = { kind = \"uniform\", min = 300, max = 600 }",
        )
        .unwrap();
        assert_eq!(
            f.pattern,
            UdpPattern::ExpOnOff {
                rate: Rate::from_mbps(20),
                mean_on: Dur::from_millis(500),
                mean_off: Dur::from_millis(500)
            }
        );
        assert_eq!(f.sizes, SizeDist::Uniform { min: 300, max: 600 });
        let f = flow(
            "[pattern]\nkind = \"pareto\"\nrate = \"1Mbps\"\nmean_on = \"1s\"\nmean_off = \"2s\"\nshape = 1.5\n[sizes]\nkind = \"empirical\"\npoints = [[40, 7], [576, 4], [1500, 1.5]]",
        )
        .unwrap();
        assert_eq!(
            f.pattern,
            UdpPattern::ParetoOnOff {
                rate: Rate::from_mbps(1),
                mean_on: Dur::from_secs(1),
                mean_off: Dur::from_secs(2),
                shape: 1.5
            }
        );
        assert_eq!(f.sizes, SizeDist::Empirical(vec![(40, 7.0), (576, 4.0), (1500, 1.5)]));
        let f =
            flow("pattern = { kind = \"cbr\", rate = \"1Mbps\" }\nsizes = { kind = \"fixed\", size = 64 }").unwrap();
        assert_eq!(f.sizes, SizeDist::Fixed(64));
        let f = flow("pattern = { kind = \"cbr\", rate = \"1Mbps\" }\nsizes = { kind = \"imix\" }").unwrap();
        assert_eq!(f.sizes, SizeDist::InternetMix);
    }

    #[test]
    fn toml_errors_are_clear() {
        let cases: [(&str, &[&str]); 10] = [
            // unknown key inside a pattern
            ("pattern = { kind = \"cbr\", rate = \"3Mbps\", burst = 3 }\nsizes = 1000", &["burst"]),
            // unknown kind
            ("pattern = { kind = \"vbr\", rate = \"3Mbps\" }\nsizes = 1000", &["vbr"]),
            // bad unit
            ("pattern = { kind = \"poisson\", rate = \"3Mbs\" }\nsizes = 1000", &["3Mbs", "line 1"]),
            // number without unit
            ("pattern = { kind = \"poisson\", rate = 3000 }\nsizes = 1000", &["3000", "unit"]),
            // zero rate
            ("pattern = { kind = \"cbr\", rate = \"0Mbps\" }\nsizes = 1000", &["positive"]),
            // Pareto shape <= 1
            (
                "pattern = { kind = \"pareto_on_off\", rate = \"1Mbps\", mean_on = \"1s\", mean_off = \"1s\", shape = 1.0 }\nsizes = 1000",
                &["shape", "greater than 1"],
            ),
            // missing field
            ("pattern = { kind = \"exp_on_off\", rate = \"1Mbps\", mean_on = \"1s\" }\nsizes = 1000", &["mean_off"]),
            // bad sizes
            ("pattern = { kind = \"cbr\", rate = \"1Mbps\" }\nsizes = { kind = \"uniform\", min = 600, max = 300 }", &["600", "300", "line 2"]),
            ("pattern = { kind = \"cbr\", rate = \"1Mbps\" }\nsizes = \"trimodal\"", &["trimodal"]),
            ("pattern = { kind = \"cbr\", rate = \"1Mbps\" }\nsizes = { kind = \"fixed\", size = 64, weight = 1 }", &["weight"]),
        ];
        for (text, needles) in cases {
            let e = flow(text).expect_err(text);
            for n in needles {
                assert!(e.contains(n), "error for {text:?} lacks {n:?}: {e}");
            }
        }
        let e = flow("pattern = { kind = \"cbr\", rate = \"1Mbps\" }\nsizes = 0").unwrap_err();
        assert!(e.contains("at least 1"), "{e}");
        let e = flow("pattern = { kind = \"cbr\", rate = \"1Mbps\" }\nsizes = { kind = \"empirical\", points = [] }")
            .unwrap_err();
        assert!(e.contains("empty"), "{e}");
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
