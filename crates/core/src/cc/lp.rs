//! TCP-LP (Kuzmanovic & Knightly, "TCP-LP: A Distributed Algorithm for Low Priority Data
//! Transfer", INFOCOM 2003), following Linux `net/ipv4/tcp_lp.c`.

/// `δ`: early congestion when the smoothed one-way delay exceeds `min + δ·(max − min)` (§III-B;
/// Linux: 15 %).
pub const THRESHOLD: f64 = 0.15;
/// The one-way-delay smoothing gain is `1 / 2^SMOOTHING_SHIFT` (Linux: 7/8 old + 1/8 new).
pub const SMOOTHING_SHIFT: u32 = 3;
/// The inference window lasts this many RTTs after an early-congestion reduction (§III-C; Linux 3).
pub const INFERENCE_RTTS: u32 = 3;

/// Parameters of [`Lp`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LpConfig {
    pub threshold: f64,
    pub inference_rtts: u32,
}

impl Default for LpConfig {
    fn default() -> Self {
        LpConfig { threshold: THRESHOLD, inference_rtts: INFERENCE_RTTS }
    }
}

impl LpConfig {
    /// 0 < threshold < 1, inference window of at least one RTT.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.threshold > 0.0 && self.threshold < 1.0) {
            return Err(format!("threshold must be within (0, 1), got {}", self.threshold));
        }
        if self.inference_rtts == 0 {
            return Err("inference_rtts must be at least 1".into());
        }
        Ok(())
    }
}
