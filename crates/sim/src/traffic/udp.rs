//! UDP sources: when each packet leaves and how big it is.
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

use headroom_core::rng::Rng;
use headroom_core::units::{Dur, Rate, Time};
use serde::Deserialize;

use super::dist::{check_pareto_shape, de_pareto_shape, to_ns, SizeDist};
use crate::serde_units::{de_dur, de_dur_nonzero, de_rate_nonzero};

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

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_core::rng;

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
}
