//! Units that cannot be mixed up: [`Time`] (an instant, integer nanoseconds since the start of a
//! run), [`Dur`] (a span of integer nanoseconds), [`Bytes`] and [`Rate`] (bits per second).
//!
//! Every quantity that crosses a module boundary in headroom carries one of these types, so a
//! delay can never be added to a byte count and a rate in bytes can never be read as bits. The
//! conversions that the algorithms need (`Bytes / Dur -> Rate`, `Rate * Dur -> Bytes`,
//! `Bytes / Rate -> Dur`) are methods with the unit in their name.

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};

/// An instant: nanoseconds since the start of a run (simulated time, or a monotonic clock's
/// origin chosen by the I/O driver).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub u64);

/// A span of time in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dur(pub u64);

/// A number of bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(pub u64);

/// A bit rate in bits per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(pub u64);

impl Time {
    pub const ZERO: Time = Time(0);
    pub const MAX: Time = Time(u64::MAX);
    pub fn from_secs_f64(s: f64) -> Time {
        Time((s * 1e9).round() as u64)
    }
    pub fn as_nanos(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-9
    }
    /// Time elapsed since `earlier`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Time) -> Dur {
        Dur(self.0.saturating_sub(earlier.0))
    }
}

impl Dur {
    pub const ZERO: Dur = Dur(0);
    pub const MAX: Dur = Dur(u64::MAX);
    pub const fn from_nanos(n: u64) -> Dur {
        Dur(n)
    }
    pub const fn from_micros(us: u64) -> Dur {
        Dur(us * 1_000)
    }
    pub const fn from_millis(ms: u64) -> Dur {
        Dur(ms * 1_000_000)
    }
    pub const fn from_secs(s: u64) -> Dur {
        Dur(s * 1_000_000_000)
    }
    pub fn from_secs_f64(s: f64) -> Dur {
        Dur((s.max(0.0) * 1e9).round() as u64)
    }
    pub fn as_nanos(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-9
    }
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 * 1e-6
    }
    pub fn mul_f64(self, k: f64) -> Dur {
        Dur((self.0 as f64 * k).max(0.0).round() as u64)
    }
    pub fn saturating_sub(self, o: Dur) -> Dur {
        Dur(self.0.saturating_sub(o.0))
    }
    /// Rounds up to a multiple of `granularity` (a clock tick); zero granularity is exact.
    pub fn round_up_to(self, granularity: Dur) -> Dur {
        if granularity.0 == 0 {
            return self;
        }
        Dur(self.0.div_ceil(granularity.0) * granularity.0)
    }
}

impl Bytes {
    pub const ZERO: Bytes = Bytes(0);
    pub fn as_u64(self) -> u64 {
        self.0
    }
    pub fn bits(self) -> u64 {
        self.0 * 8
    }
    /// The rate at which these bytes pass in `d` (zero for an empty span).
    pub fn per(self, d: Dur) -> Rate {
        if d.0 == 0 {
            return Rate(0);
        }
        Rate(((self.0 as u128 * 8 * 1_000_000_000) / d.0 as u128) as u64)
    }
    /// The time these bytes take to serialise at `r` (rounded up to a whole nanosecond).
    pub fn time_at(self, r: Rate) -> Dur {
        if r.0 == 0 {
            return Dur::MAX;
        }
        Dur((self.0 as u128 * 8 * 1_000_000_000).div_ceil(r.0 as u128) as u64)
    }
    pub fn saturating_sub(self, o: Bytes) -> Bytes {
        Bytes(self.0.saturating_sub(o.0))
    }
}

impl Rate {
    pub const ZERO: Rate = Rate(0);
    pub const fn from_bps(b: u64) -> Rate {
        Rate(b)
    }
    pub const fn from_kbps(k: u64) -> Rate {
        Rate(k * 1_000)
    }
    pub const fn from_mbps(m: u64) -> Rate {
        Rate(m * 1_000_000)
    }
    pub fn from_mbps_f64(m: f64) -> Rate {
        Rate((m * 1e6).max(0.0).round() as u64)
    }
    pub fn bps(self) -> u64 {
        self.0
    }
    pub fn as_mbps(self) -> f64 {
        self.0 as f64 * 1e-6
    }
    pub fn as_kbps(self) -> f64 {
        self.0 as f64 * 1e-3
    }
    /// Bytes that pass in `d` at this rate (rounded down): the bandwidth-delay product.
    pub fn bytes_in(self, d: Dur) -> Bytes {
        Bytes(((self.0 as u128 * d.0 as u128) / 8_000_000_000) as u64)
    }
    pub fn mul_f64(self, k: f64) -> Rate {
        Rate((self.0 as f64 * k).max(0.0).round() as u64)
    }
}

macro_rules! additive {
    ($t:ident) => {
        impl Add for $t {
            type Output = $t;
            fn add(self, o: $t) -> $t {
                $t(self.0 + o.0)
            }
        }
        impl Sub for $t {
            type Output = $t;
            fn sub(self, o: $t) -> $t {
                $t(self.0 - o.0)
            }
        }
        impl AddAssign for $t {
            fn add_assign(&mut self, o: $t) {
                self.0 += o.0
            }
        }
        impl SubAssign for $t {
            fn sub_assign(&mut self, o: $t) {
                self.0 -= o.0
            }
        }
    };
}
additive!(Dur);
additive!(Bytes);
additive!(Rate);

impl Add<Dur> for Time {
    type Output = Time;
    fn add(self, d: Dur) -> Time {
        Time(self.0.saturating_add(d.0))
    }
}
impl AddAssign<Dur> for Time {
    fn add_assign(&mut self, d: Dur) {
        self.0 = self.0.saturating_add(d.0)
    }
}
impl Sub<Dur> for Time {
    type Output = Time;
    fn sub(self, d: Dur) -> Time {
        Time(self.0 - d.0)
    }
}
impl Sub for Time {
    type Output = Dur;
    fn sub(self, o: Time) -> Dur {
        Dur(self.0 - o.0)
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.as_secs_f64())
    }
}
impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 >= 1_000_000_000 {
            write!(f, "{}s", self.as_secs_f64())
        } else if self.0 >= 1_000_000 {
            write!(f, "{}ms", self.0 as f64 / 1e6)
        } else if self.0 >= 1_000 {
            write!(f, "{}us", self.0 as f64 / 1e3)
        } else {
            write!(f, "{}ns", self.0)
        }
    }
}
impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}B", self.0)
    }
}
impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 >= 1_000_000 {
            write!(f, "{}Mbps", self.0 as f64 / 1e6)
        } else if self.0 >= 1_000 {
            write!(f, "{}kbps", self.0 as f64 / 1e3)
        } else {
            write!(f, "{}bps", self.0)
        }
    }
}

/// Error of [`parse_dur`], [`parse_rate`] and [`parse_bytes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseUnitError(pub String);
impl fmt::Display for ParseUnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ParseUnitError {}

fn split_number(s: &str) -> Result<(f64, &str), ParseUnitError> {
    let s = s.trim();
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    let num: String = num.chars().filter(|c| *c != '_').collect();
    let v: f64 = num.parse().map_err(|_| ParseUnitError(format!("`{s}` does not start with a number")))?;
    if !v.is_finite() || v < 0.0 {
        return Err(ParseUnitError(format!("`{s}` is not a non-negative finite number")));
    }
    Ok((v, unit.trim()))
}

/// Parses a duration such as `10ms`, `1.5s`, `250us`, `100ns`.
pub fn parse_dur(s: &str) -> Result<Dur, ParseUnitError> {
    let (v, unit) = split_number(s)?;
    let k = match unit {
        "s" => 1e9,
        "ms" => 1e6,
        "us" | "µs" => 1e3,
        "ns" => 1.0,
        "min" => 60e9,
        _ => return Err(ParseUnitError(format!("`{s}`: unknown time unit `{unit}` (use s, ms, us or ns)"))),
    };
    Ok(Dur((v * k).round() as u64))
}

/// Parses a bit rate such as `45Mbps`, `1.5Gbps`, `104kbps`, `800bps` (decimal prefixes).
pub fn parse_rate(s: &str) -> Result<Rate, ParseUnitError> {
    let (v, unit) = split_number(s)?;
    let k = match unit.to_ascii_lowercase().as_str() {
        "bps" | "bit/s" => 1.0,
        "kbps" | "kbit/s" | "kbit" => 1e3,
        "mbps" | "mbit/s" | "mbit" => 1e6,
        "gbps" | "gbit/s" | "gbit" => 1e9,
        _ => return Err(ParseUnitError(format!("`{s}`: unknown rate unit `{unit}` (use bps, kbps, Mbps or Gbps)"))),
    };
    Ok(Rate((v * k).round() as u64))
}

/// Parses a size such as `1500`, `1500B`, `64KB`, `1.5MB` (KB = 1000 bytes, KiB = 1024).
pub fn parse_bytes(s: &str) -> Result<Bytes, ParseUnitError> {
    let (v, unit) = split_number(s)?;
    let k = match unit {
        "" | "B" => 1.0,
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(ParseUnitError(format!("`{s}`: unknown size unit `{unit}` (use B, KB, MB, KiB, MiB)"))),
    };
    Ok(Bytes((v * k).round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_trip() {
        let r = Rate::from_mbps(45);
        let d = Dur::from_millis(10);
        assert_eq!(r.bytes_in(d), Bytes(56_250));
        assert_eq!(Bytes(56_250).per(d), r);
        assert_eq!(Bytes(1500).time_at(Rate::from_mbps(12)), Dur::from_micros(1000));
    }

    #[test]
    fn parsing_units() {
        assert_eq!(parse_dur("10ms").unwrap(), Dur::from_millis(10));
        assert_eq!(parse_dur("1.5s").unwrap(), Dur::from_millis(1500));
        assert_eq!(parse_rate("45Mbps").unwrap(), Rate::from_mbps(45));
        assert_eq!(parse_rate("104kbps").unwrap(), Rate::from_kbps(104));
        assert_eq!(parse_bytes("64KB").unwrap(), Bytes(64_000));
        assert!(parse_dur("10 parsecs").is_err());
        assert!(parse_rate("fast").is_err());
        assert!(parse_bytes("-3").is_err());
    }

    #[test]
    fn clock_granularity_rounds_up() {
        assert_eq!(Dur::from_millis(201).round_up_to(Dur::from_millis(500)), Dur::from_millis(500));
        assert_eq!(Dur::from_millis(500).round_up_to(Dur::from_millis(500)), Dur::from_millis(500));
    }
}
