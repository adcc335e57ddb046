//! Units that cannot be mixed up: [`Time`] (an instant, integer nanoseconds since the start of a
//! run), [`Dur`] (a span of integer nanoseconds), [`Bytes`] and [`Rate`] (bits per second).
//!
//! Every quantity that crosses a module boundary in headroom carries one of these types, so a
//! delay can never be added to a byte count and a rate in bytes can never be read as bits. The
//! conversions that the algorithms need (`Bytes / Dur -> Rate`, `Rate * Dur -> Bytes`,
//! `Bytes / Rate -> Dur`) are methods with the unit in their name.
//!
//! # Arithmetic: saturating, never wrapping
//!
//! The values are `u64` counts, and no operation on them wraps around or panics, in debug or
//! release builds: `+` saturates at the largest value (`Dur::MAX`, about 584 years), `-` stops at
//! zero, the constructors (`Dur::from_millis`, `Rate::from_mbps`, ...) and conversions
//! (`Bytes::bits`, `Rate::bytes_in`, `Bytes::per`, `Bytes::time_at`) saturate at `u64::MAX`, and
//! the `*_f64` conversions use Rust's saturating float-to-integer casts (negative and NaN give
//! zero). A simulation never comes near these limits, so its results are the same as with plain
//! arithmetic; a saturated value is a sign of a nonsensical input, and it is the *parser*'s job
//! to refuse such inputs: parsing never saturates, it fails (see below).
//!
//! # Parsing: one syntax for every file and command line
//!
//! [`Dur`], [`Rate`] and [`Bytes`] implement [`FromStr`] (and, with the `serde` cargo feature,
//! `Deserialize`/`Serialize`); the simulator's scenarios, the testbed's topology files and the
//! command line all read them through it. A value is a decimal number, optionally followed by
//! whitespace and a unit: `10ms`, `1.5 s`, `45Mbps`, `64KB`, `1_000_000bps`.
//!
//! - **Numbers** are plain decimals (digits, one optional `.`, `_` as a digit separator). They
//!   are converted exactly (no floating point) and rounded to the nearest whole base unit
//!   (nanosecond, bit per second, byte), halves up. A non-zero value that rounds to zero
//!   (`0.4ns`) is an error, as are exponents (`1e30s`), signs (`-3ms`, `+3ms`) and a value
//!   that does not fit in a `u64` of the base unit (`99999999999999999999Gbps`): parsing fails
//!   instead of saturating.
//! - **Durations**: `ns`, `us` (or `µs`), `ms`, `s`, `min`. Case matters (`MS` is refused).
//! - **Rates** count bits per second: `bps`, `kbps`, `Mbps`, `Gbps`, `Tbps` (also `bit/s`,
//!   `b/s` and tc's `kbit`, `Mbit`, ... with the same prefixes). The prefix is decimal: `k` and
//!   `K` both mean 1000. An upper-case `B` means **bytes** per second and multiplies by 8:
//!   `10MBps` and `10MB/s` are 80 Mbit/s, never 10 Mbit/s. Lower-case `m` and `g` prefixes
//!   (`mbps`, `gbit`) are refused: in SI `m` is milli, and in tc `mbps` means megabytes per
//!   second, so any reading would surprise someone.
//! - **Sizes** count bytes: a bare number, or `B`, `KB` (also `kB`), `MB`, `GB`, `TB` (powers of
//!   1000), `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024). Bits (`kb`, `Mb`) are refused.
//! - **A bare number** is a size in bytes; for durations and rates it is refused (`rate = 3`
//!   could mean bits, kilobits or megabits per second) except `0`, which is zero in any unit.
//! - **Zero** parses everywhere (`0s`, `0bps`, `0`): whether zero makes sense is the reader's
//!   business, not the syntax's. A reader for which it does not refuses it with [`positive`]
//!   ([`parse_positive`] for command-line options, `de::positive` / `de::opt_positive` for serde
//!   fields), the one implementation of that check and its message. Today these are: the
//!   simulator's link rates (`rate`, `rate_ba`), UDP source rates, ON periods and web object
//!   sizes; the testbed's bottleneck, host and flow rates and `[run] sample`; the command line's
//!   probe rates, packet sizes, timeouts and budget, and `testbed bench-delaybox --rates/--step`.
//!   A zero delay, OFF period or start time is accepted.
//! - **Loss probabilities** are plain numbers in \[0, 1\], checked by [`probability`] for the
//!   simulator's links and the testbed's bottleneck alike.
//!
//! Every error message quotes the offending text and lists the accepted units.
//!
//! `Display` writes a value that parses back to the same value (exact decimals, no rounding):
//! `1.5s`, `250us`, `45Mbps`, `1500B`.

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::str::FromStr;

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

/// `x` as a `u64`, or `u64::MAX` when it does not fit.
fn saturate(x: u128) -> u64 {
    u64::try_from(x).unwrap_or(u64::MAX)
}

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
    /// Saturates at [`Dur::MAX`].
    pub const fn from_micros(us: u64) -> Dur {
        Dur(us.saturating_mul(1_000))
    }
    /// Saturates at [`Dur::MAX`].
    pub const fn from_millis(ms: u64) -> Dur {
        Dur(ms.saturating_mul(1_000_000))
    }
    /// Saturates at [`Dur::MAX`].
    pub const fn from_secs(s: u64) -> Dur {
        Dur(s.saturating_mul(1_000_000_000))
    }
    /// Negative and NaN give zero, beyond `u64::MAX` ns gives [`Dur::MAX`].
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
    /// Saturates at [`Dur::MAX`].
    pub fn round_up_to(self, granularity: Dur) -> Dur {
        if granularity.0 == 0 {
            return self;
        }
        Dur(self.0.div_ceil(granularity.0).saturating_mul(granularity.0))
    }
}

impl Bytes {
    pub const ZERO: Bytes = Bytes(0);
    pub fn as_u64(self) -> u64 {
        self.0
    }
    /// The number of bits, saturating at `u64::MAX`.
    pub fn bits(self) -> u64 {
        self.0.saturating_mul(8)
    }
    /// The rate at which these bytes pass in `d` (zero for an empty span; saturates).
    pub fn per(self, d: Dur) -> Rate {
        if d.0 == 0 {
            return Rate(0);
        }
        Rate(saturate((self.0 as u128 * 8 * 1_000_000_000) / d.0 as u128))
    }
    /// The time these bytes take to serialise at `r` (rounded up to a whole nanosecond;
    /// [`Dur::MAX`] at a zero rate; saturates).
    pub fn time_at(self, r: Rate) -> Dur {
        if r.0 == 0 {
            return Dur::MAX;
        }
        // In 64 bits when the product fits (any packet; the 128-bit division is slower), the
        // same quotient either way.
        match self.0.checked_mul(8 * 1_000_000_000) {
            Some(bits_ns) => Dur(bits_ns.div_ceil(r.0)),
            None => Dur(saturate((self.0 as u128 * 8 * 1_000_000_000).div_ceil(r.0 as u128))),
        }
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
    /// Saturates at `u64::MAX` bit/s.
    pub const fn from_kbps(k: u64) -> Rate {
        Rate(k.saturating_mul(1_000))
    }
    /// Saturates at `u64::MAX` bit/s.
    pub const fn from_mbps(m: u64) -> Rate {
        Rate(m.saturating_mul(1_000_000))
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
    /// Computed in 128 bits; saturates at `u64::MAX` bytes.
    pub fn bytes_in(self, d: Dur) -> Bytes {
        Bytes(saturate((self.0 as u128 * d.0 as u128) / 8_000_000_000))
    }
    pub fn mul_f64(self, k: f64) -> Rate {
        Rate((self.0 as f64 * k).max(0.0).round() as u64)
    }
}

macro_rules! additive {
    ($t:ident) => {
        /// Saturates at the largest value.
        impl Add for $t {
            type Output = $t;
            fn add(self, o: $t) -> $t {
                $t(self.0.saturating_add(o.0))
            }
        }
        /// Stops at zero.
        impl Sub for $t {
            type Output = $t;
            fn sub(self, o: $t) -> $t {
                $t(self.0.saturating_sub(o.0))
            }
        }
        impl AddAssign for $t {
            fn add_assign(&mut self, o: $t) {
                *self = *self + o
            }
        }
        impl SubAssign for $t {
            fn sub_assign(&mut self, o: $t) {
                *self = *self - o
            }
        }
    };
}
additive!(Dur);
additive!(Bytes);
additive!(Rate);

/// Saturates at [`Time::MAX`].
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
/// Stops at [`Time::ZERO`].
impl Sub<Dur> for Time {
    type Output = Time;
    fn sub(self, d: Dur) -> Time {
        Time(self.0.saturating_sub(d.0))
    }
}
/// Zero when `o` is later (as [`Time::saturating_since`]).
impl Sub for Time {
    type Output = Dur;
    fn sub(self, o: Time) -> Dur {
        self.saturating_since(o)
    }
}

/// Writes `n / 10^digits` exactly, without trailing zeros: `fixed(1500, 3)` is `1.5`.
fn fixed(f: &mut fmt::Formatter<'_>, n: u64, digits: u32) -> fmt::Result {
    let scale = 10u64.pow(digits);
    let (int, frac) = (n / scale, n % scale);
    if frac == 0 {
        return write!(f, "{int}");
    }
    let frac = format!("{frac:0width$}", width = digits as usize);
    write!(f, "{int}.{}", frac.trim_end_matches('0'))
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.as_secs_f64())
    }
}
impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (digits, unit) = match self.0 {
            1_000_000_000.. => (9, "s"),
            1_000_000.. => (6, "ms"),
            1_000.. => (3, "us"),
            _ => (0, "ns"),
        };
        fixed(f, self.0, digits)?;
        f.write_str(unit)
    }
}
impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}B", self.0)
    }
}
impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (digits, unit) = match self.0 {
            1_000_000.. => (6, "Mbps"),
            1_000.. => (3, "kbps"),
            _ => (0, "bps"),
        };
        fixed(f, self.0, digits)?;
        f.write_str(unit)
    }
}

/// Why a duration, rate or size could not be parsed (or was refused): the message quotes the
/// offending text and lists the accepted units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseUnitError(pub String);
impl fmt::Display for ParseUnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ParseUnitError {}

/// A quantity with a text form: what the generic checks ([`positive`]) and the serde helpers
/// need to know about [`Dur`], [`Rate`] and [`Bytes`].
pub trait Quantity: Copy + Eq + Default + fmt::Display + FromStr<Err = ParseUnitError> {
    /// What the quantity is called in messages: `duration`, `rate`, `size`.
    const NAME: &'static str;
    /// The accepted units, for messages.
    const UNITS: &'static str;
    /// A unit for examples in messages.
    const EXAMPLE_UNIT: &'static str;
    /// The quantity from a bare integer, as files may write it: bytes for a size; only `0` for
    /// a duration or a rate (whose unit a bare number would leave open).
    fn from_bare(n: u64) -> Result<Self, ParseUnitError> {
        if n == 0 {
            return Ok(Self::default());
        }
        let why = format_args!("write the unit, e.g. \"{n}{}\" (units: {})", Self::EXAMPLE_UNIT, Self::UNITS);
        Err(unit_error::<Self>(&n.to_string(), why))
    }
}

const DUR_UNITS: &str = "ns, us, ms, s or min";
const RATE_UNITS: &str =
    "bits per second: bps, kbps, Mbps, Gbps (or bit/s, kbit, Mbit, ...); bytes per second: Bps, kBps, MBps, GBps";
const BYTES_UNITS: &str = "B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024)";

fn unit_error<T: Quantity>(text: &str, why: impl fmt::Display) -> ParseUnitError {
    ParseUnitError(format!("invalid {} `{text}`: {why}", T::NAME))
}

impl Quantity for Dur {
    const NAME: &'static str = "duration";
    const UNITS: &'static str = DUR_UNITS;
    const EXAMPLE_UNIT: &'static str = "ms";
}
impl Quantity for Rate {
    const NAME: &'static str = "rate";
    const UNITS: &'static str = RATE_UNITS;
    const EXAMPLE_UNIT: &'static str = "Mbps";
}
impl Quantity for Bytes {
    const NAME: &'static str = "size";
    const UNITS: &'static str = BYTES_UNITS;
    const EXAMPLE_UNIT: &'static str = "B";
    fn from_bare(n: u64) -> Result<Bytes, ParseUnitError> {
        Ok(Bytes(n))
    }
}

/// Splits `text` into an exact decimal (`mantissa / 10^scale`) and the unit after it.
fn split_number<T: Quantity>(text: &str) -> Result<(u128, u32, &str), ParseUnitError> {
    let s = text.trim();
    if s.is_empty() {
        return Err(unit_error::<T>(text, format_args!("empty; write a number and a unit ({})", T::UNITS)));
    }
    if s.starts_with('-') {
        return Err(unit_error::<T>(text, "must not be negative"));
    }
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    let unit = unit.trim_start();
    if !num.chars().any(|c| c.is_ascii_digit()) || num.matches('.').count() > 1 {
        return Err(unit_error::<T>(
            text,
            format_args!("does not start with a number (write e.g. `1.5` then {})", T::UNITS),
        ));
    }
    if unit.starts_with(['e', 'E']) && unit[1..].starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+') {
        return Err(unit_error::<T>(text, "exponents are not accepted; write the digits"));
    }
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    let frac = frac.trim_end_matches(['0', '_']);
    let too_large = || unit_error::<T>(text, "too large");
    let mut mantissa: u128 = 0;
    let mut scale = 0u32;
    for (c, is_frac) in int.chars().map(|c| (c, false)).chain(frac.chars().map(|c| (c, true))) {
        if c == '_' {
            continue;
        }
        let d = c.to_digit(10).expect("only digits and `_` left") as u128;
        mantissa = mantissa.checked_mul(10).and_then(|m| m.checked_add(d)).ok_or_else(too_large)?;
        if is_frac {
            scale += 1;
        }
    }
    if scale > 30 {
        return Err(unit_error::<T>(text, "more than 30 decimal places"));
    }
    Ok((mantissa, scale, unit))
}

/// `mantissa / 10^scale * factor` rounded to the nearest integer (halves up), as a `u64`.
fn scaled<T: Quantity>(text: &str, (mantissa, scale): (u128, u32), factor: u64) -> Result<u64, ParseUnitError> {
    let too_large = || unit_error::<T>(text, format_args!("too large (at most {} of the base unit)", u64::MAX));
    let product = mantissa.checked_mul(factor as u128).ok_or_else(too_large)?;
    let div = 10u128.pow(scale);
    let (q, r) = (product / div, product % div);
    let v = if r >= div - r { q + 1 } else { q };
    let v = u64::try_from(v).map_err(|_| too_large())?;
    if v == 0 && mantissa != 0 {
        return Err(unit_error::<T>(text, "rounds to zero (below the resolution of 1ns, 1bps or 1B)"));
    }
    Ok(v)
}

/// Parses a quantity whose unit has already been looked up: `factor(unit)` gives the base units
/// per unit, or `None` for an unknown unit.
fn parse_with<T: Quantity>(
    text: &str,
    wrap: fn(u64) -> T,
    factor: impl Fn(&str) -> Result<u64, String>,
) -> Result<T, ParseUnitError> {
    let (mantissa, scale, unit) = split_number::<T>(text)?;
    if unit.is_empty() {
        let v = scaled::<T>(text, (mantissa, scale), 1)?;
        return T::from_bare(v).map_err(|_| unit_error::<T>(text, format_args!("write the unit ({})", T::UNITS)));
    }
    let k = factor(unit).map_err(|why| unit_error::<T>(text, why))?;
    scaled::<T>(text, (mantissa, scale), k).map(wrap)
}

impl FromStr for Dur {
    type Err = ParseUnitError;
    /// `10ms`, `1.5s`, `250us`, `100ns`, `2min`; see the [module documentation](self).
    fn from_str(s: &str) -> Result<Dur, ParseUnitError> {
        parse_with(s, Dur, |unit| match unit {
            "ns" => Ok(1),
            "us" | "µs" | "μs" => Ok(1_000),
            "ms" => Ok(1_000_000),
            "s" => Ok(1_000_000_000),
            "min" => Ok(60_000_000_000),
            _ => Err(format!("unknown time unit `{unit}` (use {DUR_UNITS})")),
        })
    }
}

impl FromStr for Rate {
    type Err = ParseUnitError;
    /// `45Mbps`, `1.5Gbps`, `104kbps`, `800bps`, `10MBps` (= 80 Mbit/s); see the
    /// [module documentation](self).
    fn from_str(s: &str) -> Result<Rate, ParseUnitError> {
        parse_with(s, Rate, |unit| {
            let unknown = || format!("unknown rate unit `{unit}` (use {RATE_UNITS})");
            const BITS: [&str; 5] = ["bps", "bit/s", "bits/s", "b/s", "bit"];
            const BYTES: [&str; 4] = ["Bps", "B/s", "byte/s", "bytes/s"];
            let (prefix, per_unit) = if let Some(p) = BITS.iter().find_map(|b| unit.strip_suffix(b)) {
                (p, 1)
            } else if let Some(p) = BYTES.iter().find_map(|b| unit.strip_suffix(b)) {
                (p, 8)
            } else {
                return Err(unknown());
            };
            let k: u64 = match prefix {
                "" => 1,
                "k" | "K" => 1_000,
                "M" => 1_000_000,
                "G" => 1_000_000_000,
                "T" => 1_000_000_000_000,
                "m" | "g" => {
                    return Err(format!(
                        "`{unit}` is ambiguous (milli? megabytes as in tc?); write {}{} for bits per second",
                        prefix.to_ascii_uppercase(),
                        &unit[prefix.len()..]
                    ))
                }
                _ => return Err(unknown()),
            };
            Ok(k * per_unit)
        })
    }
}

impl FromStr for Bytes {
    type Err = ParseUnitError;
    /// `1500`, `1500B`, `64KB`, `1.5MB`, `64KiB`; see the [module documentation](self).
    fn from_str(s: &str) -> Result<Bytes, ParseUnitError> {
        parse_with(s, Bytes, |unit| match unit {
            "B" => Ok(1),
            "KB" | "kB" => Ok(1_000),
            "MB" => Ok(1_000_000),
            "GB" => Ok(1_000_000_000),
            "TB" => Ok(1_000_000_000_000),
            "KiB" => Ok(1 << 10),
            "MiB" => Ok(1 << 20),
            "GiB" => Ok(1 << 30),
            "TiB" => Ok(1 << 40),
            _ if unit.ends_with('b') || unit.ends_with("bit") => {
                Err(format!("`{unit}` counts bits; a size is in bytes (use {BYTES_UNITS})"))
            }
            _ => Err(format!("unknown size unit `{unit}` (use {BYTES_UNITS})")),
        })
    }
}

/// Parses a duration such as `10ms`, `1.5s`, `250us`, `100ns` (same as `s.parse::<Dur>()`).
pub fn parse_dur(s: &str) -> Result<Dur, ParseUnitError> {
    s.parse()
}

/// Parses a bit rate such as `45Mbps`, `1.5Gbps`, `104kbps` (same as `s.parse::<Rate>()`).
pub fn parse_rate(s: &str) -> Result<Rate, ParseUnitError> {
    s.parse()
}

/// Parses a size such as `1500`, `64KB`, `64KiB` (same as `s.parse::<Bytes>()`).
pub fn parse_bytes(s: &str) -> Result<Bytes, ParseUnitError> {
    s.parse()
}

/// `v` itself, or an error if it is zero: the one check for "must be positive" on a parsed
/// quantity (see the module documentation for where zero is refused).
pub fn positive<T: Quantity>(v: T) -> Result<T, ParseUnitError> {
    if v == T::default() {
        return Err(unit_error::<T>(&v.to_string(), "must be positive"));
    }
    Ok(v)
}

/// Parses `s` and refuses zero ([`positive`]); a `value_parser` for command-line options.
pub fn parse_positive<T: Quantity>(s: &str) -> Result<T, ParseUnitError> {
    positive(s.parse()?).map_err(|_| unit_error::<T>(s, "must be positive"))
}

/// `p` itself if it is a probability in \[0, 1\] (a loss rate): the one check of loss
/// probabilities, used by the simulator's links and the testbed's bottleneck.
pub fn probability(p: f64) -> Result<f64, ParseUnitError> {
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(ParseUnitError(format!("invalid loss `{p}`: not a probability in [0, 1]")))
    }
}

/// Serde support (cargo feature `serde`): `Deserialize` from the strings above and from bare
/// integers as [`Quantity::from_bare`] allows (a size in bytes; `0` for durations and rates);
/// `Serialize` as the `Display` string (sizes as an integer of bytes), which reads back the same.
#[cfg(feature = "serde")]
mod serde_impls {
    use super::{Bytes, Dur, ParseUnitError, Quantity, Rate};
    use serde::de::{self, Deserialize, Deserializer, Visitor};
    use serde::{Serialize, Serializer};
    use std::fmt;
    use std::marker::PhantomData;

    struct QuantityVisitor<T>(PhantomData<T>);

    fn custom<E: de::Error>(e: ParseUnitError) -> E {
        E::custom(e)
    }

    impl<T: Quantity> Visitor<'_> for QuantityVisitor<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "a {} such as \"{}\" (units: {})", T::NAME, T::default(), T::UNITS)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
            v.parse().map_err(custom)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
            T::from_bare(v).map_err(custom)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
            match u64::try_from(v) {
                Ok(v) => self.visit_u64(v),
                Err(_) => Err(E::custom(format_args!("invalid {} `{v}`: must not be negative", T::NAME))),
            }
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
            Err(E::custom(format_args!(
                "invalid {} `{v}`: write it as a string with its unit, e.g. \"{v}{}\" (units: {})",
                T::NAME,
                T::EXAMPLE_UNIT,
                T::UNITS
            )))
        }
    }

    macro_rules! serde_quantity {
        ($t:ident) => {
            impl<'de> Deserialize<'de> for $t {
                fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
                    d.deserialize_any(QuantityVisitor(PhantomData))
                }
            }
        };
    }
    serde_quantity!(Dur);
    serde_quantity!(Rate);
    serde_quantity!(Bytes);

    impl Serialize for Dur {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_str(self)
        }
    }
    impl Serialize for Rate {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_str(self)
        }
    }
    impl Serialize for Bytes {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_u64(self.0)
        }
    }
}

/// `deserialize_with` helpers (cargo feature `serde`) for the checks that go with a field
/// rather than a type: `#[serde(deserialize_with = "de::positive")]`,
/// `#[serde(default, deserialize_with = "de::opt_positive")]`, and
/// `#[serde(default, deserialize_with = "de::probability")]` for a loss rate.
#[cfg(feature = "serde")]
pub mod de {
    use super::Quantity;
    use serde::{de::Error, Deserialize, Deserializer};

    /// A quantity that must not be zero ([`super::positive`]).
    pub fn positive<'de, T: Quantity + Deserialize<'de>, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
        super::positive(T::deserialize(d)?).map_err(D::Error::custom)
    }

    /// An optional quantity that, when given, must not be zero.
    pub fn opt_positive<'de, T: Quantity + Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<T>, D::Error> {
        Option::<T>::deserialize(d)?.map(super::positive).transpose().map_err(D::Error::custom)
    }

    /// A loss probability in \[0, 1\] ([`super::probability`]).
    pub fn probability<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        super::probability(f64::deserialize(d)?).map_err(D::Error::custom)
    }
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
    fn clock_granularity_rounds_up() {
        assert_eq!(Dur::from_millis(201).round_up_to(Dur::from_millis(500)), Dur::from_millis(500));
        assert_eq!(Dur::from_millis(500).round_up_to(Dur::from_millis(500)), Dur::from_millis(500));
    }

    /// Every text of `cases` parses to its value.
    fn parse_to<T: Quantity + fmt::Debug>(cases: &[(&str, u64)], wrap: fn(u64) -> T) {
        for &(text, v) in cases {
            assert_eq!(text.parse::<T>(), Ok(wrap(v)), "{text}");
        }
    }

    #[test]
    fn good_durations() {
        let ms = 1_000_000;
        let cases: &[(&str, u64)] = &[
            ("10ms", 10 * ms),
            ("1.5s", 1500 * ms),
            ("250us", 250_000),
            ("250µs", 250_000),
            ("100ns", 100),
            ("2min", 120_000 * ms),
            ("0s", 0),
            ("0", 0),
            ("0.000ms", 0),
            (" 10 ms ", 10 * ms),
            ("1_000ms", 1000 * ms),
            ("0.1ms", 100_000),
            ("0.0000000015s", 2), // 1.5 ns rounds half up
            ("1.4ns", 1),
            ("18446744073.709551615s", u64::MAX),
        ];
        parse_to(cases, Dur);
    }

    #[test]
    fn good_rates() {
        let cases: &[(&str, u64)] = &[
            ("45Mbps", 45_000_000),
            ("1.5Gbps", 1_500_000_000),
            ("104kbps", 104_000),
            ("104Kbps", 104_000),
            ("800bps", 800),
            ("10Mbit/s", 10_000_000),
            ("10Mb/s", 10_000_000),
            ("10Mbit", 10_000_000),
            ("2Tbps", 2_000_000_000_000),
            ("10MBps", 80_000_000),
            ("10MB/s", 80_000_000),
            ("1kBps", 8_000),
            ("125Bps", 1000),
            ("0bps", 0),
            ("0", 0),
            ("31.25Mbps", 31_250_000),
        ];
        parse_to(cases, Rate);
    }

    #[test]
    fn good_sizes() {
        let cases: &[(&str, u64)] = &[
            ("1500", 1500),
            ("1500B", 1500),
            ("64KB", 64_000),
            ("64kB", 64_000),
            ("1.5MB", 1_500_000),
            ("31.25MB", 31_250_000),
            ("64KiB", 65_536),
            ("1MiB", 1 << 20),
            ("2GiB", 2 << 30),
            ("0", 0),
            ("0B", 0),
            (" 144 KB", 144_000),
        ];
        parse_to(cases, Bytes);
    }

    /// Every text of `cases` is refused with a message that quotes it, names the quantity and
    /// contains the case's needle.
    fn refused<T: Quantity + fmt::Debug>(cases: &[(&str, &str)]) {
        for &(text, needle) in cases {
            let e = text.parse::<T>().expect_err(text).to_string();
            assert!(e.contains(needle) && e.contains(&format!("`{text}`")), "{text:?}: {e}");
            assert!(e.starts_with(&format!("invalid {}", T::NAME)), "{e}");
        }
    }

    /// Bad inputs and a piece of text that the error must contain.
    #[test]
    fn bad_inputs_are_refused_with_a_clear_message() {
        let durs: &[(&str, &str)] = &[
            ("10 parsecs", "parsecs"),
            ("10", "write the unit"),
            ("-3ms", "negative"),
            ("+3ms", "number"),
            ("10MS", "unknown time unit `MS`"),
            ("1e30s", "exponent"),
            ("99999999999999999999s", "too large"),
            ("18446744073.709551616s", "too large"),
            ("999999999999999999999999999999999999999999s", "too large"),
            ("0.4ns", "rounds to zero"),
            ("", "empty"),
            ("ms", "number"),
            ("1.2.3s", "number"),
            ("NaN s", "number"),
            ("inf", "number"),
        ];
        refused::<Dur>(durs);
        let rates: &[(&str, &str)] = &[
            ("fast", "number"),
            ("3Mbs", "unknown rate unit `Mbs`"),
            ("3Mbq", "Mbps"),
            ("3000", "write the unit"),
            ("10mbps", "ambiguous"),
            ("10mbps", "Mbps"),
            ("1gbit", "Gbit"),
            ("10MBPS", "unknown"),
            ("10KiBps", "unknown"),
            ("-1Mbps", "negative"),
            ("99999999999999999999Gbps", "too large"),
            ("18446744073709551616bps", "too large"),
            ("3000000000GBps", "too large"),
        ];
        refused::<Rate>(rates);
        // A half rounds up: 0.5 bps is 1 bps, 0.4 bps is refused.
        assert_eq!("0.5bps".parse::<Rate>(), Ok(Rate(1)));
        assert!("0.4bps".parse::<Rate>().unwrap_err().to_string().contains("rounds to zero"));
        let sizes: &[(&str, &str)] = &[
            ("-3", "negative"),
            ("12kb", "bits"),
            ("1Mb", "bits"),
            ("64kiB", "unknown size unit"),
            ("3 apples", "KiB"),
            ("20000000000000000000", "too large"),
            ("17179869184GiB", "too large"),
        ];
        refused::<Bytes>(sizes);
    }

    #[test]
    fn display_parses_back_to_the_same_value() {
        let durs = [0, 1, 999, 1_000, 1_001, 1_500_000, 10_000_000, 1_000_000_000, 1_000_000_001, u64::MAX];
        for ns in durs {
            assert_eq!(Dur(ns).to_string().parse::<Dur>(), Ok(Dur(ns)), "{}", Dur(ns));
        }
        assert_eq!(Dur::from_millis(1500).to_string(), "1.5s");
        assert_eq!(Dur::from_micros(250).to_string(), "250us");
        for bps in [0, 7, 1_000, 104_000, 1_234_567, 45_000_000, 1_000_000_000, u64::MAX] {
            assert_eq!(Rate(bps).to_string().parse::<Rate>(), Ok(Rate(bps)), "{}", Rate(bps));
        }
        assert_eq!(Rate::from_mbps(45).to_string(), "45Mbps");
        assert_eq!(Rate(1_500).to_string(), "1.5kbps");
        for b in [0, 1500, u64::MAX] {
            assert_eq!(Bytes(b).to_string().parse::<Bytes>(), Ok(Bytes(b)));
        }
    }

    #[test]
    fn zero_and_probability_checks() {
        assert_eq!(positive(Rate(1)), Ok(Rate(1)));
        let e = positive(Rate::ZERO).unwrap_err().to_string();
        assert!(e.contains("rate `0bps`") && e.contains("must be positive"), "{e}");
        let e = parse_positive::<Dur>("0ms").unwrap_err().to_string();
        assert!(e.contains("`0ms`") && e.contains("must be positive"), "{e}");
        assert_eq!(parse_positive::<Bytes>("1KB"), Ok(Bytes(1000)));
        assert!(parse_positive::<Rate>("x").unwrap_err().to_string().contains("`x`"));
        for p in [0.0, 0.01, 1.0] {
            assert_eq!(probability(p), Ok(p));
        }
        for p in [-0.1, 1.5, f64::NAN, f64::INFINITY] {
            let e = probability(p).unwrap_err().to_string();
            assert!(e.contains("probability in [0, 1]") && e.contains(&p.to_string()), "{e}");
        }
    }

    #[test]
    fn arithmetic_saturates_instead_of_wrapping() {
        assert_eq!(Dur::MAX + Dur(1), Dur::MAX);
        assert_eq!(Dur(1) - Dur(2), Dur::ZERO);
        let mut b = Bytes(5);
        b -= Bytes(7);
        assert_eq!(b, Bytes::ZERO);
        b += Bytes(u64::MAX);
        b += Bytes(1);
        assert_eq!(b, Bytes(u64::MAX));
        assert_eq!(Bytes(u64::MAX).bits(), u64::MAX);
        assert_eq!(Bytes(3).bits(), 24);
        assert_eq!(Dur::from_millis(u64::MAX / 1000), Dur::MAX);
        assert_eq!(Dur::from_secs(u64::MAX), Dur::MAX);
        assert_eq!(Rate::from_mbps(u64::MAX), Rate(u64::MAX));
        assert_eq!(Rate(u64::MAX).bytes_in(Dur::MAX), Bytes(u64::MAX));
        assert_eq!(Bytes(u64::MAX).per(Dur(1)), Rate(u64::MAX));
        assert_eq!(Bytes(u64::MAX).time_at(Rate(1)), Dur::MAX);
        assert_eq!(Time(5) - Time(7), Dur::ZERO);
        assert_eq!(Time(5) - Dur(7), Time::ZERO);
        assert_eq!(Time::MAX + Dur(1), Time::MAX);
        assert_eq!(Dur(u64::MAX - 1).round_up_to(Dur(1 << 40)), Dur::MAX);
        assert_eq!(Dur::from_secs_f64(-1.0), Dur::ZERO);
        assert_eq!(Dur::from_secs_f64(1e30), Dur::MAX);
    }
}
