//! TCP Nice (Venkataramani, Kokku & Dahlin, "TCP Nice: A Mechanism for Background
//! Transfers", OSDI 2002) on the Vegas base.

use crate::cc::vegas::VegasConfig;

/// `t`: an RTT sample is "congested" when above `minRTT + t·(maxRTT − minRTT)` (§3.1: 0.1).
pub const T: f64 = 0.1;
/// `f`: halve when more than `f·W` of one window's ACKs were congested (§3.1: 0.5).
pub const F: f64 = 0.5;
/// The window may fall to `1 / MIN_WINDOW_DIVISOR` segment (§3.1: 1/48).
pub const MIN_WINDOW_DIVISOR: u32 = 48;

/// Parameters of [`Nice`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NiceConfig {
    pub vegas: VegasConfig,
    pub t: f64,
    pub f: f64,
    pub min_window_divisor: u32,
}

impl Default for NiceConfig {
    fn default() -> Self {
        NiceConfig { vegas: VegasConfig::default(), t: T, f: F, min_window_divisor: MIN_WINDOW_DIVISOR }
    }
}

impl NiceConfig {
    /// 0 < t < 1, 0 < f ≤ 1, divisor ≥ 1, and Vegas's own rule.
    pub fn validate(&self) -> Result<(), String> {
        self.vegas.validate()?;
        if !(self.t > 0.0 && self.t < 1.0) {
            return Err(format!("t must be within (0, 1), got {}", self.t));
        }
        if !(self.f > 0.0 && self.f <= 1.0) {
            return Err(format!("f must be within (0, 1], got {}", self.f));
        }
        if self.min_window_divisor == 0 {
            return Err("min_window_divisor must be at least 1".into());
        }
        Ok(())
    }
}
