//! pathChirp train design (Ribeiro et al., "pathChirp: efficient available bandwidth estimation
//! for network paths", PAM 2003), in the notation of the PathQuick paper §4.2.2 and §4.4.2.
//!
//! # The chirp
//!
//! `M` packets of equal size `P_chirp`. The first gap is `T_chirp = P_chirp / B_min` (Eq. 10)
//! and every following gap is `γ` times shorter (γ, the *spread factor*, 1.2 by default), so gap
//! `k` (between packets `k` and `k+1`, 1-based) probes `B_min·γ^{k-1}` and the last one
//! `B_max = γ^{M-2}·B_min` (Eq. 11). Hence `M = (log B_max - log B_min)/log γ + 2` (Eq. 12) and
//! the train length is the geometric sum `T_chirp·(1-(1/γ)^{M-1})/(1-1/γ)` (Eq. 13). The
//! per-gap resolution grows like `γ^i` (Eq. 15); the paper's mean resolution is Eq. 16.
//!
//! # Choices the paper left open
//!
//! - `M` must be an integer: the smallest `M` whose top rate reaches `B_max` within 1 % of one
//!   spread step (`M = ⌈M_exact − 0.01⌉`). For the paper's range (104–11,912 kbps, γ = 1.2),
//!   `M_exact = 28.003` and `M = 28` as in the paper; the top rate is then 11,905 kbps.
//! - The analytic curve of Fig. 4 (and the "3rd packet at 389 ms, 4th at 486 ms" of §4.3.2) uses
//!   the real-valued `M` of Eq. 12 inside Eq. 13: [`train_length_eq13`]. A concrete chirp uses the
//!   integer `M`: [`ChirpDesign::train_length`]. Both give 682 ms for the paper's range.
//! - Offsets are rounded to the nanosecond.

use super::{DesignError, TrainPacket};
use crate::units::{Bytes, Dur, Rate};

/// A pathChirp specification.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChirpSpec {
    /// Spread factor γ > 1.
    pub gamma: f64,
    /// Packet size (IP level).
    pub size: Bytes,
    pub b_min: Rate,
    pub b_max: Rate,
    /// Largest allowed packet; 0 means 1,500 B.
    pub max_size: Bytes,
}

/// A concrete chirp.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChirpDesign {
    pub gamma: f64,
    pub size: Bytes,
    /// Rate of the first gap.
    pub b_min: Rate,
    /// Number of packets.
    pub m: u32,
    /// First gap `P_chirp / B_min` (Eq. 10).
    pub t_chirp: Dur,
}

impl ChirpSpec {
    /// The paper's pathChirp (§4.2.3): γ = 1.2, P = 1,489 B, same range as PathQuick.
    pub fn paper() -> ChirpSpec {
        ChirpSpec {
            gamma: 1.2,
            size: Bytes(1489),
            b_min: Rate::from_kbps(104),
            b_max: Rate::from_kbps(11_912),
            max_size: Bytes(0),
        }
    }

    pub fn design(&self) -> Result<ChirpDesign, DesignError> {
        if !(self.gamma > 1.0 && self.gamma.is_finite()) {
            return Err(DesignError(format!("impossible chirp: spread factor γ = {} must exceed 1", self.gamma)));
        }
        let max = if self.max_size.0 == 0 { Bytes(1500) } else { self.max_size };
        if self.size.0 == 0 || self.size > max {
            return Err(DesignError(format!(
                "impossible chirp: packet size {} B outside 1..={} B (MTU)",
                self.size.0, max.0
            )));
        }
        if self.b_min.0 == 0 || self.b_max <= self.b_min {
            return Err(DesignError(format!(
                "impossible chirp: range {}–{} is empty or negative",
                self.b_min, self.b_max
            )));
        }
        let m_exact = m_eq12(self.gamma, self.b_min.0 as f64, self.b_max.0 as f64);
        let m = (m_exact - 0.01).ceil().max(3.0);
        if m > 65_535.0 {
            return Err(DesignError(format!("impossible chirp: M = {m} packets is too many")));
        }
        Ok(ChirpDesign {
            gamma: self.gamma,
            size: self.size,
            b_min: self.b_min,
            m: m as u32,
            t_chirp: self.size.time_at(self.b_min),
        })
    }
}

/// Eq. 12 as a real number.
pub fn m_eq12(gamma: f64, b_min: f64, b_max: f64) -> f64 {
    (b_max.ln() - b_min.ln()) / gamma.ln() + 2.0
}

/// Eq. 13 with the real-valued `M` of Eq. 12: the train length (seconds) of a chirp of
/// `size` bytes covering `[b_min, b_max]` bits/s — the pathChirp curve of the paper's Fig. 4.
pub fn train_length_eq13(size: f64, gamma: f64, b_min: f64, b_max: f64) -> f64 {
    let m = m_eq12(gamma, b_min, b_max);
    let t_chirp = 8.0 * size / b_min;
    t_chirp * (1.0 - (1.0 / gamma).powf(m - 1.0)) / (1.0 - 1.0 / gamma)
}

impl ChirpDesign {
    /// Send offset of packet `i` (1-based): `T_chirp·Σ_{j=2}^{i} γ^{-(j-2)}`.
    fn offset_secs(&self, i: u32) -> f64 {
        let r = 1.0 / self.gamma;
        let k = i.saturating_sub(1) as i32;
        self.t_chirp.as_secs_f64() * (1.0 - r.powi(k)) / (1.0 - r)
    }

    /// Send offsets and sizes of the `M` packets.
    pub fn schedule(&self) -> Vec<TrainPacket> {
        (1..=self.m).map(|i| TrainPacket { offset: Dur::from_secs_f64(self.offset_secs(i)), size: self.size }).collect()
    }

    /// Rate probed by gap `k` (1-based, between packets `k` and `k+1`): `B_min·γ^{k-1}`.
    pub fn gap_rate(&self, k: u32) -> Rate {
        self.b_min.mul_f64(self.gamma.powi(k.saturating_sub(1) as i32))
    }

    /// Rate of the last gap, `γ^{M-2}·B_min` (Eq. 11).
    pub fn top_rate(&self) -> Rate {
        self.gap_rate(self.m - 1)
    }

    /// Eq. 13 with the integer `M`.
    pub fn train_length(&self) -> Dur {
        Dur::from_secs_f64(self.offset_secs(self.m))
    }

    pub fn estimate_time(&self, rtt: Dur) -> Dur {
        self.train_length() + rtt
    }

    /// Mean resolution, Eq. 16: `P(γ-1)/(T_chirp·γ³) · (1/M)·Σ_{i=1}^{M} γ^i`.
    pub fn mean_resolution_eq16(&self) -> Rate {
        let g = self.gamma;
        let m = self.m as f64;
        let sum = g * (g.powf(m) - 1.0) / (g - 1.0);
        let per = self.size.per(self.t_chirp).0 as f64 * (g - 1.0) / g.powi(3);
        Rate((per * sum / m).round() as u64)
    }

    /// `M·P_chirp` (§4.5).
    pub fn bytes(&self) -> Bytes {
        Bytes(self.m as u64 * self.size.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_chirp() {
        let d = ChirpSpec::paper().design().unwrap();
        assert_eq!(d.m, 28);
        assert!((m_eq12(1.2, 104e3, 11_912e3) - 28.003).abs() < 1e-3);
        assert_eq!(d.t_chirp.as_nanos(), 114_538_462); // 1489·8 / 104 kbps
        let t = d.train_length().as_millis_f64();
        assert!((t - 682.2).abs() < 0.05, "{t}");
        let t13 = train_length_eq13(1489.0, 1.2, 104e3, 11_912e3) * 1e3;
        assert!((t13 - 682.2).abs() < 0.05, "{t13}");
        assert_eq!(d.bytes(), Bytes(41_692));
        let top = d.top_rate().as_kbps();
        assert!((top - 11_905.4).abs() < 0.5, "{top}");
        let s = d.schedule();
        assert_eq!(s.len(), 28);
        assert_eq!(s[0].offset, Dur::ZERO);
        assert_eq!(s[1].offset, d.t_chirp);
        // Eq. 16 evaluated exactly (the paper prints 416.7 kbps; see docs/pathquick.md).
        let res = d.mean_resolution_eq16().as_kbps();
        assert!((res - 422.6).abs() < 0.1, "{res}");
    }

    #[test]
    fn fig4_curve_points_of_section_4_3_2() {
        // B_max on PathQuick's rate grid: 200 kbps → 389 ms, 296 kbps → 486 ms.
        let t3 = train_length_eq13(1489.0, 1.2, 104e3, 200e3) * 1e3;
        let t4 = train_length_eq13(1489.0, 1.2, 104e3, 296e3) * 1e3;
        assert!((t3 - 389.4).abs() < 0.1, "{t3}");
        assert!((t4 - 486.0).abs() < 0.1, "{t4}");
    }

    #[test]
    fn rejects_bad_chirps() {
        let bad = [
            ChirpSpec { gamma: 1.0, ..ChirpSpec::paper() },
            ChirpSpec { gamma: f64::NAN, ..ChirpSpec::paper() },
            ChirpSpec { size: Bytes(9000), ..ChirpSpec::paper() },
            ChirpSpec { b_max: Rate::from_kbps(50), ..ChirpSpec::paper() },
            ChirpSpec { b_min: Rate::ZERO, ..ChirpSpec::paper() },
        ];
        for s in bad {
            assert!(s.design().is_err(), "{s:?}");
        }
    }
}
