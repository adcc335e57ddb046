//! `deserialize_with` functions that read headroom's units from scenario files.
//!
//! Rates and durations are written as strings with their unit (`rate = "3Mbps"`,
//! `mean_on = "500ms"`) and parsed by [`headroom_core::units::parse_rate`] and
//! [`parse_dur`](headroom_core::units::parse_dur); a bare number is refused because `rate = 3`
//! could mean bits, kilobits or megabits per second. Sizes accept a bare integer (bytes) or a
//! string (`"64KB"`). Every error names the offending value; the TOML deserializer adds the file
//! position and the key.
//!
//! Use as `#[serde(deserialize_with = "de_rate")]`; the `de_opt_*` variants go with
//! `#[serde(default, deserialize_with = "de_opt_dur")]`; the `*_nonzero` variants refuse zero.

use std::fmt;

use headroom_core::units::{parse_bytes, parse_dur, parse_rate, Bytes, Dur, Rate};
use serde::de::{self, Deserialize, Deserializer, Visitor};

struct RateVisitor;
impl Visitor<'_> for RateVisitor {
    type Value = Rate;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a bit rate string such as \"3Mbps\", \"100kbps\" or \"1.5Gbps\"")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Rate, E> {
        parse_rate(v).map_err(|e| E::custom(format_args!("invalid rate {e}")))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Rate, E> {
        Err(E::custom(format_args!("invalid rate `{v}`: write the unit, e.g. \"{v}Mbps\" or \"{v}bps\"")))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Rate, E> {
        self.visit_i64(v as i64)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Rate, E> {
        Err(E::custom(format_args!("invalid rate `{v}`: write the unit, e.g. \"{v}Mbps\"")))
    }
}

struct DurVisitor;
impl Visitor<'_> for DurVisitor {
    type Value = Dur;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a duration string such as \"10ms\", \"1.5s\" or \"250us\"")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Dur, E> {
        parse_dur(v).map_err(|e| E::custom(format_args!("invalid duration {e}")))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dur, E> {
        Err(E::custom(format_args!("invalid duration `{v}`: write the unit, e.g. \"{v}ms\" or \"{v}s\"")))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dur, E> {
        self.visit_i64(v as i64)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Dur, E> {
        Err(E::custom(format_args!("invalid duration `{v}`: write the unit, e.g. \"{v}s\"")))
    }
}

struct BytesVisitor;
impl Visitor<'_> for BytesVisitor {
    type Value = Bytes;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a size: an integer number of bytes or a string such as \"64KB\" or \"1.5MB\"")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Bytes, E> {
        parse_bytes(v).map_err(|e| E::custom(format_args!("invalid size {e}")))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Bytes, E> {
        u64::try_from(v).map(Bytes).map_err(|_| E::custom(format_args!("invalid size `{v}`: must not be negative")))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Bytes, E> {
        Ok(Bytes(v))
    }
}

/// A rate written with its unit: `"3Mbps"`.
pub fn de_rate<'de, D: Deserializer<'de>>(d: D) -> Result<Rate, D::Error> {
    d.deserialize_any(RateVisitor)
}

/// A duration written with its unit: `"10ms"`.
pub fn de_dur<'de, D: Deserializer<'de>>(d: D) -> Result<Dur, D::Error> {
    d.deserialize_any(DurVisitor)
}

/// A size: `1500` or `"64KB"`.
pub fn de_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
    d.deserialize_any(BytesVisitor)
}

/// Like [`de_rate`], refusing `"0bps"`.
pub fn de_rate_nonzero<'de, D: Deserializer<'de>>(d: D) -> Result<Rate, D::Error> {
    let r = de_rate(d)?;
    if r.bps() == 0 {
        return Err(de::Error::custom("invalid rate `0bps`: must be positive"));
    }
    Ok(r)
}

/// Like [`de_dur`], refusing a zero duration.
pub fn de_dur_nonzero<'de, D: Deserializer<'de>>(d: D) -> Result<Dur, D::Error> {
    let v = de_dur(d)?;
    if v.as_nanos() == 0 {
        return Err(de::Error::custom("invalid duration `0s`: must be positive"));
    }
    Ok(v)
}

/// Like [`de_bytes`], refusing zero.
pub fn de_bytes_nonzero<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
    let v = de_bytes(d)?;
    if v.as_u64() == 0 {
        return Err(de::Error::custom("invalid size `0`: must be positive"));
    }
    Ok(v)
}

struct RateDe(Rate);
impl<'de> Deserialize<'de> for RateDe {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        de_rate(d).map(RateDe)
    }
}
struct DurDe(Dur);
impl<'de> Deserialize<'de> for DurDe {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        de_dur(d).map(DurDe)
    }
}
struct BytesDe(Bytes);
impl<'de> Deserialize<'de> for BytesDe {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        de_bytes(d).map(BytesDe)
    }
}

/// An optional rate (use with `#[serde(default)]`).
pub fn de_opt_rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Rate>, D::Error> {
    Ok(Option::<RateDe>::deserialize(d)?.map(|v| v.0))
}

/// An optional duration (use with `#[serde(default)]`).
pub fn de_opt_dur<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Dur>, D::Error> {
    Ok(Option::<DurDe>::deserialize(d)?.map(|v| v.0))
}

/// An optional size (use with `#[serde(default)]`).
pub fn de_opt_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Bytes>, D::Error> {
    Ok(Option::<BytesDe>::deserialize(d)?.map(|v| v.0))
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
    fn nonzero_variants_refuse_zero() {
        #[derive(Deserialize, Debug)]
        struct Nz {
            #[serde(deserialize_with = "de_rate_nonzero")]
            _rate: Rate,
        }
        assert!(toml::from_str::<Nz>("_rate = \"1bps\"").is_ok());
        let e = toml::from_str::<Nz>("_rate = \"0Mbps\"").unwrap_err().to_string();
        assert!(e.contains("must be positive"), "{e}");
    }
}
