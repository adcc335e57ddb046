//! `deserialize_with` functions that read headroom's units from scenario files: thin names for
//! the parsers in [`headroom_core::units`] (cargo feature `serde`), which hold the one syntax
//! and its rules (zero, negative numbers, case, overflow) for every file and command line.
//!
//! Rates and durations are written as strings with their unit (`rate = "3Mbps"`,
//! `mean_on = "500ms"`); a bare number other than `0` is refused because `rate = 3` could mean
//! bits, kilobits or megabits per second. Sizes accept a bare integer (bytes) or a string
//! (`"64KB"`). Every error names the offending value; the TOML deserializer adds the file
//! position and the key.
//!
//! Use as `#[serde(deserialize_with = "de_rate")]`; the `de_opt_*` variants go with
//! `#[serde(default, deserialize_with = "de_opt_dur")]`; the `*_nonzero` variants refuse zero
//! ([`headroom_core::units::positive`]); [`de_probability`] takes a loss rate in \[0, 1\].

use headroom_core::units::{de, Bytes, Dur, Rate};
use serde::{Deserialize, Deserializer};

/// A rate written with its unit: `"3Mbps"`.
pub fn de_rate<'de, D: Deserializer<'de>>(d: D) -> Result<Rate, D::Error> {
    Rate::deserialize(d)
}

/// A duration written with its unit: `"10ms"`.
pub fn de_dur<'de, D: Deserializer<'de>>(d: D) -> Result<Dur, D::Error> {
    Dur::deserialize(d)
}

/// A size: `1500` or `"64KB"`.
pub fn de_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
    Bytes::deserialize(d)
}

/// Like [`de_rate`], refusing zero.
pub fn de_rate_nonzero<'de, D: Deserializer<'de>>(d: D) -> Result<Rate, D::Error> {
    de::positive(d)
}

/// Like [`de_dur`], refusing zero.
pub fn de_dur_nonzero<'de, D: Deserializer<'de>>(d: D) -> Result<Dur, D::Error> {
    de::positive(d)
}

/// Like [`de_bytes`], refusing zero.
pub fn de_bytes_nonzero<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
    de::positive(d)
}

/// An optional rate (use with `#[serde(default)]`).
pub fn de_opt_rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Rate>, D::Error> {
    Option::deserialize(d)
}

/// An optional rate that, when given, must not be zero (use with `#[serde(default)]`).
pub fn de_opt_rate_nonzero<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Rate>, D::Error> {
    de::opt_positive(d)
}

/// An optional duration (use with `#[serde(default)]`).
pub fn de_opt_dur<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Dur>, D::Error> {
    Option::deserialize(d)
}

/// An optional size (use with `#[serde(default)]`).
pub fn de_opt_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Bytes>, D::Error> {
    Option::deserialize(d)
}

/// A loss probability in \[0, 1\] ([`headroom_core::units::probability`]).
pub fn de_probability<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    de::probability(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    struct Sample {
        #[serde(deserialize_with = "de_rate")]
        rate: Rate,
        #[serde(deserialize_with = "de_dur")]
        delay: Dur,
        #[serde(deserialize_with = "de_bytes")]
        size: Bytes,
        #[serde(default, deserialize_with = "de_opt_dur")]
        stop: Option<Dur>,
        #[serde(default, deserialize_with = "de_opt_bytes")]
        cap: Option<Bytes>,
        #[serde(default, deserialize_with = "de_opt_rate")]
        ceiling: Option<Rate>,
    }

    #[test]
    fn parses_units_and_options() {
        let s: Sample = toml::from_str("rate = \"3Mbps\"\ndelay = \"10ms\"\nsize = 1500\nstop = \"2s\"\n").unwrap();
        assert_eq!(s.rate, Rate::from_mbps(3));
        assert_eq!(s.delay, Dur::from_millis(10));
        assert_eq!(s.size, Bytes(1500));
        assert_eq!(s.stop, Some(Dur::from_secs(2)));
        assert_eq!(s.cap, None);
        assert_eq!(s.ceiling, None);
        let s: Sample = toml::from_str(
            "rate = \"1.5Gbps\"\ndelay = \"250us\"\nsize = \"64KB\"\ncap = \"10MB\"\nceiling = \"5Mbps\"",
        )
        .unwrap();
        assert_eq!(s.size, Bytes(64_000));
        assert_eq!(s.cap, Some(Bytes(10_000_000)));
        assert_eq!(s.ceiling, Some(Rate::from_mbps(5)));
    }

    #[test]
    fn errors_name_the_bad_value_and_key() {
        let e = toml::from_str::<Sample>("rate = \"3Mbq\"\ndelay = \"10ms\"\nsize = 1").unwrap_err().to_string();
        assert!(e.contains("3Mbq") && e.contains("rate") && e.contains("line 1"), "{e}");
        let e = toml::from_str::<Sample>("rate = 3\ndelay = \"10ms\"\nsize = 1").unwrap_err().to_string();
        assert!(e.contains("`3`") && e.contains("unit"), "{e}");
        let e = toml::from_str::<Sample>("rate = \"3Mbps\"\ndelay = \"10 parsecs\"\nsize = 1").unwrap_err().to_string();
        assert!(e.contains("parsecs") && e.contains("line 2"), "{e}");
        let e = toml::from_str::<Sample>("rate = \"3Mbps\"\ndelay = \"1s\"\nsize = -4").unwrap_err().to_string();
        assert!(e.contains("-4"), "{e}");
        let e =
            toml::from_str::<Sample>("rate = \"3Mbps\"\ndelay = \"1s\"\nsize = 1\nstop = 5").unwrap_err().to_string();
        assert!(e.contains("`5`") && e.contains("stop"), "{e}");
    }

    #[test]
    fn serialize_writes_what_deserialize_reads() {
        #[derive(serde::Serialize, Deserialize, PartialEq, Debug)]
        struct S {
            rate: Rate,
            delay: Dur,
            size: Bytes,
        }
        let s = S { rate: Rate(1_234_567), delay: Dur(1_500_000_001), size: Bytes(1500) };
        let text = toml::to_string(&s).unwrap();
        assert!(text.contains("rate = \"1.234567Mbps\"") && text.contains("delay = \"1.500000001s\""), "{text}");
        assert!(text.contains("size = 1500"), "{text}");
        assert_eq!(toml::from_str::<S>(&text).unwrap(), s);
    }

    #[test]
    fn nonzero_variants_refuse_zero() {
        #[derive(Deserialize, Debug)]
        struct Nz {
            #[serde(deserialize_with = "de_rate_nonzero")]
            _rate: Rate,
        }
        assert!(toml::from_str::<Nz>("_rate = \"1bps\"").is_ok());
        for zero in ["\"0Mbps\"", "0"] {
            let e = toml::from_str::<Nz>(&format!("_rate = {zero}")).unwrap_err().to_string();
            assert!(e.contains("must be positive"), "{e}");
        }
    }

    #[test]
    fn bytes_per_second_are_not_read_as_bits() {
        let s: Sample = toml::from_str("rate = \"10MBps\"\ndelay = \"0\"\nsize = \"1KiB\"\n").unwrap();
        assert_eq!(s.rate, Rate::from_mbps(80));
        assert_eq!(s.delay, Dur::ZERO);
        assert_eq!(s.size, Bytes(1024));
        let e = toml::from_str::<Sample>("rate = \"10mbps\"\ndelay = \"1s\"\nsize = 1").unwrap_err().to_string();
        assert!(e.contains("10mbps") && e.contains("line 1"), "{e}");
    }
}
