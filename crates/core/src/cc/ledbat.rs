//! LEDBAT (RFC 6817, "Low Extra Delay Background Transport").

use crate::units::Dur;

/// TARGET: the queueing delay LEDBAT aims at (§2.5.1: "MUST be 100 milliseconds or less").
pub const TARGET: Dur = Dur::from_millis(100);
/// GAIN: window change per RTT at an off-target of one TARGET (§2.5.2: "MUST be set to 1 or less").
pub const GAIN: f64 = 1.0;
/// BASE_HISTORY: minute minima kept for the base delay (§2.5.2: "SHOULD be 10").
pub const BASE_HISTORY: usize = 10;
/// CURRENT_FILTER: delay samples the current-delay filter takes the minimum of (§3.4.2 leaves
/// it open; ns-3 uses 4).
pub const CURRENT_FILTER: usize = 4;
/// ALLOWED_INCREASE: cwnd may exceed the flight size by this many segments (§2.5.1: "SHOULD be 1").
pub const ALLOWED_INCREASE: u32 = 1;
/// MIN_CWND in segments (§2.5.1: "SHOULD be 2").
pub const MIN_CWND: u32 = 2;
/// INIT_CWND in segments (§2.5.1: "SHOULD be 2").
pub const INIT_CWND: u32 = 2;

/// Parameters of [`Ledbat`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LedbatConfig {
    pub target: Dur,
    pub gain: f64,
    pub base_history: usize,
    pub current_filter: usize,
    pub allowed_increase: u32,
    pub min_cwnd: u32,
}

impl Default for LedbatConfig {
    fn default() -> Self {
        LedbatConfig {
            target: TARGET,
            gain: GAIN,
            base_history: BASE_HISTORY,
            current_filter: CURRENT_FILTER,
            allowed_increase: ALLOWED_INCREASE,
            min_cwnd: MIN_CWND,
        }
    }
}

impl LedbatConfig {
    /// The RFC's MUSTs: 0 < TARGET ≤ 100 ms, 0 < GAIN ≤ 1, ALLOWED_INCREASE ≥ 1; and at least
    /// one base-history slot, one filter sample and one segment of MIN_CWND.
    pub fn validate(&self) -> Result<(), String> {
        if self.target == Dur::ZERO || self.target > TARGET {
            return Err(format!("target must be within (0, 100ms] (RFC 6817 §2.5.1), got {}", self.target));
        }
        if !(self.gain > 0.0 && self.gain <= 1.0) {
            return Err(format!("gain must be within (0, 1] (RFC 6817 §2.5.2), got {}", self.gain));
        }
        if self.base_history == 0 || self.current_filter == 0 {
            return Err("base_history and current_filter must be at least 1".into());
        }
        if self.allowed_increase == 0 {
            return Err("allowed_increase must be at least 1 (RFC 6817 §2.5.1)".into());
        }
        if self.min_cwnd == 0 {
            return Err("min_cwnd must be at least 1 segment".into());
        }
        Ok(())
    }
}
