//! PathQuick train design (Oshiba & Nakajima, PathQuick paper §3.3 and §4.2–4.5).
//!
//! # The train
//!
//! `N` packets equally spaced by `T_quick`; packet `i` (1-based) has size
//! `P_i = P_1 + (i-1)·ΔP` (Eq. 2) and probes the instantaneous rate `R_i = P_i / T_quick`
//! (Eq. 3). Hence:
//!
//! - train length `T_train = T_quick·(N-1)` (Eq. 1), linear in `N`;
//! - `B_max = P_N / T_quick` (Eq. 5) and `B_min = P_2 / T_quick` (Eq. 7): the first packet only
//!   opens the train, the first *gap* probes `P_2 / T_quick`;
//! - `N = (P_N(B_min+B_max) - 2·P_1·B_max) / (P_N·B_min - P_1·B_max)` (Eq. 8) and
//!   `T_train = P_N(P_N-P_1) / (P_N·B_min - P_1·B_max)` (Eq. 9);
//! - estimate time = `T_train + RTT` (§4.2: the receiver answers with one UDP packet; queuing
//!   and serialisation are neglected, as in the paper);
//! - resolution `R_i - R_{i-1} = ΔP / T_quick`, constant (Eq. 14);
//! - bytes per train `N·(P_1+P_N)/2` (§4.5).
//!
//! # Solving a partial specification
//!
//! The seven quantities (T_quick, P_1, ΔP, P_N, N, B_min, B_max) have four degrees of freedom.
//! [`QuickSpec`] takes any subset; [`QuickSpec::solve`] propagates five relations (Eqs. 1/2 as
//! `P_N = P_1+(N-1)ΔP`, Eq. 5, Eq. 7, Eq. 8 and their difference
//! `(B_max-B_min)·T_quick = (N-2)·ΔP`), each solved for its one unknown whenever the others
//! are known, until nothing changes. A subset that does not pin four independent quantities is
//! rejected as underdetermined; an over-determined subset must be consistent (relative error
//! below 10⁻⁶ before rounding).
//!
//! # Choices the paper left open
//!
//! - Sizes are IP-level bytes (the paper's `P_N = 1,489 B` is "below the 1,500-byte MTU").
//!   [`QuickSpec::max_size`] (default 1,500) and [`QuickSpec::min_size`] (default 1) bound them;
//!   a socket driver raises `min_size` to its headers.
//! - Rounding: `T_quick` to the nanosecond, `P_1` and `ΔP` to the byte, `N` *down* to an
//!   integer (so `P_N` never exceeds what was asked), then `P_N = P_1 + (N-1)·ΔP` is derived;
//!   the resulting design reports its actual `B_min`, `B_max`.
//! - At least three packets (two gaps) and `ΔP ≥ 1 B` (a constant size would be Pathload's
//!   CBR train, not PathQuick).

use super::{DesignError, TrainPacket};
use crate::units::{Bytes, Dur, Rate};

/// A (partial) PathQuick specification. Any four independent fields pin a design.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct QuickSpec {
    pub t_quick: Option<Dur>,
    pub p_1: Option<Bytes>,
    pub delta_p: Option<Bytes>,
    pub p_n: Option<Bytes>,
    pub n: Option<u32>,
    pub b_min: Option<Rate>,
    pub b_max: Option<Rate>,
    /// Largest allowed packet (IP level); 0 means the default 1,500 B.
    pub max_size: Bytes,
    /// Smallest allowed packet (IP level); 0 means the default 1 B.
    pub min_size: Bytes,
}

/// A concrete PathQuick train.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuickDesign {
    /// Spacing between consecutive packets.
    pub t_quick: Dur,
    /// Size of the first packet.
    pub p_1: Bytes,
    /// Size increment per packet.
    pub delta_p: Bytes,
    /// Number of packets.
    pub n: u32,
}

// Indices into the variable vector of the solver.
const T: usize = 0;
const P1: usize = 1;
const DP: usize = 2;
const PN: usize = 3;
const NN: usize = 4;
const BMIN: usize = 5;
const BMAX: usize = 6;
const NAMES: [&str; 7] = ["T_quick", "P_1", "ΔP", "P_N", "N", "B_min", "B_max"];

type Vars = [Option<f64>; 7];

fn finite(x: f64) -> Option<f64> {
    if x.is_finite() {
        Some(x)
    } else {
        None
    }
}

/// One relation between the variables (all in SI: seconds, bytes, bits/s).
struct Relation {
    vars: &'static [usize],
    /// Solves for `unknown` given that all the other `vars` are known.
    solve: fn(&Vars, usize) -> Option<f64>,
    /// Residual relative to the magnitude of the terms, when all are known.
    residual: fn(&Vars) -> f64,
}

fn g(v: &Vars, i: usize) -> f64 {
    v[i].unwrap_or(f64::NAN)
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / a.abs().max(b.abs()).max(1e-300)
}

const RELATIONS: [Relation; 5] = [
    // P_N = P_1 + (N-1)·ΔP (Eq. 2 at i = N).
    Relation {
        vars: &[PN, P1, NN, DP],
        solve: |v, u| {
            let (p1, pn, n, dp) = (g(v, P1), g(v, PN), g(v, NN), g(v, DP));
            finite(match u {
                PN => p1 + (n - 1.0) * dp,
                P1 => pn - (n - 1.0) * dp,
                DP => (pn - p1) / (n - 1.0),
                _ => (pn - p1) / dp + 1.0,
            })
        },
        residual: |v| rel(g(v, PN), g(v, P1) + (g(v, NN) - 1.0) * g(v, DP)),
    },
    // B_max = P_N / T_quick (Eq. 5).
    Relation {
        vars: &[BMAX, PN, T],
        solve: |v, u| {
            let (bmax, pn, t) = (g(v, BMAX), g(v, PN), g(v, T));
            finite(match u {
                BMAX => 8.0 * pn / t,
                PN => bmax * t / 8.0,
                _ => 8.0 * pn / bmax,
            })
        },
        residual: |v| rel(g(v, BMAX), 8.0 * g(v, PN) / g(v, T)),
    },
    // B_min = P_2 / T_quick = (P_1 + ΔP) / T_quick (Eq. 7, first form).
    Relation {
        vars: &[BMIN, P1, DP, T],
        solve: |v, u| {
            let (bmin, p1, dp, t) = (g(v, BMIN), g(v, P1), g(v, DP), g(v, T));
            finite(match u {
                BMIN => 8.0 * (p1 + dp) / t,
                P1 => bmin * t / 8.0 - dp,
                DP => bmin * t / 8.0 - p1,
                _ => 8.0 * (p1 + dp) / bmin,
            })
        },
        residual: |v| rel(g(v, BMIN), 8.0 * (g(v, P1) + g(v, DP)) / g(v, T)),
    },
    // (B_max - B_min)·T_quick = (N-2)·ΔP (difference of Eq. 5 and Eq. 7).
    Relation {
        vars: &[BMAX, BMIN, T, NN, DP],
        solve: |v, u| {
            let (bmax, bmin, t, n, dp) = (g(v, BMAX), g(v, BMIN), g(v, T), g(v, NN), g(v, DP));
            finite(match u {
                BMAX => bmin + 8.0 * (n - 2.0) * dp / t,
                BMIN => bmax - 8.0 * (n - 2.0) * dp / t,
                T => 8.0 * (n - 2.0) * dp / (bmax - bmin),
                NN => (bmax - bmin) * t / (8.0 * dp) + 2.0,
                _ => (bmax - bmin) * t / (8.0 * (n - 2.0)),
            })
        },
        residual: |v| rel((g(v, BMAX) - g(v, BMIN)) * g(v, T), 8.0 * (g(v, NN) - 2.0) * g(v, DP)),
    },
    // B_min·(N-1)·P_N = B_max·((N-2)·P_1 + P_N) (Eq. 7, second form; Eq. 8 solves it for N).
    Relation {
        vars: &[BMIN, BMAX, PN, P1, NN],
        solve: |v, u| {
            let (bmin, bmax, pn, p1, n) = (g(v, BMIN), g(v, BMAX), g(v, PN), g(v, P1), g(v, NN));
            finite(match u {
                BMIN => bmax * ((n - 2.0) * p1 + pn) / ((n - 1.0) * pn),
                BMAX => bmin * (n - 1.0) * pn / ((n - 2.0) * p1 + pn),
                PN => bmax * (n - 2.0) * p1 / (bmin * (n - 1.0) - bmax),
                P1 => pn * (bmin * (n - 1.0) - bmax) / (bmax * (n - 2.0)),
                _ => (pn * (bmin + bmax) - 2.0 * p1 * bmax) / (pn * bmin - p1 * bmax),
            })
        },
        residual: |v| {
            rel(g(v, BMIN) * (g(v, NN) - 1.0) * g(v, PN), g(v, BMAX) * ((g(v, NN) - 2.0) * g(v, P1) + g(v, PN)))
        },
    },
];

impl QuickSpec {
    /// The paper's setting (§4.2.3): T_quick = 1 ms, P_1 = 1 B, ΔP = 12 B, P_N = 1,489 B.
    pub fn paper() -> QuickSpec {
        QuickSpec {
            t_quick: Some(Dur::from_millis(1)),
            p_1: Some(Bytes(1)),
            delta_p: Some(Bytes(12)),
            p_n: Some(Bytes(1489)),
            ..QuickSpec::default()
        }
    }

    fn max_size_or_default(&self) -> Bytes {
        if self.max_size.0 == 0 {
            Bytes(1500)
        } else {
            self.max_size
        }
    }

    fn min_size_or_default(&self) -> Bytes {
        if self.min_size.0 == 0 {
            Bytes(1)
        } else {
            self.min_size
        }
    }

    /// Computes the missing quantities and rounds to a concrete train (see the module doc).
    pub fn solve(&self) -> Result<QuickDesign, DesignError> {
        let mut v: Vars = [None; 7];
        v[T] = self.t_quick.map(|d| d.as_secs_f64());
        v[P1] = self.p_1.map(|b| b.0 as f64);
        v[DP] = self.delta_p.map(|b| b.0 as f64);
        v[PN] = self.p_n.map(|b| b.0 as f64);
        v[NN] = self.n.map(|n| n as f64);
        v[BMIN] = self.b_min.map(|r| r.0 as f64);
        v[BMAX] = self.b_max.map(|r| r.0 as f64);
        let given = v;
        for (i, x) in given.iter().enumerate() {
            if let Some(x) = x {
                if *x <= 0.0 {
                    return Err(DesignError(format!("{} must be positive", NAMES[i])));
                }
            }
        }
        loop {
            let mut progress = false;
            for r in RELATIONS.iter() {
                let unknown: Vec<usize> = r.vars.iter().copied().filter(|&i| v[i].is_none()).collect();
                if unknown.len() == 1 {
                    if let Some(x) = (r.solve)(&v, unknown[0]) {
                        v[unknown[0]] = Some(x);
                        progress = true;
                    }
                }
            }
            if !progress {
                break;
            }
        }
        let missing: Vec<&str> = (0..7).filter(|&i| v[i].is_none()).map(|i| NAMES[i]).collect();
        if !missing.is_empty() {
            let known: Vec<&str> = (0..7).filter(|&i| given[i].is_some()).map(|i| NAMES[i]).collect();
            return Err(DesignError(format!(
                "underdetermined PathQuick design: from {{{}}} the values of {{{}}} cannot be found \
                 (give four independent quantities)",
                known.join(", "),
                missing.join(", ")
            )));
        }
        for r in RELATIONS.iter() {
            let e = (r.residual)(&v);
            if e.is_nan() || e >= 1e-6 {
                return Err(DesignError(format!(
                    "inconsistent PathQuick design: the given values violate the relation between {{{}}}",
                    r.vars.iter().map(|&i| NAMES[i]).collect::<Vec<_>>().join(", ")
                )));
            }
        }
        for (i, x) in v.iter().enumerate() {
            let x = x.unwrap_or(f64::NAN);
            if x.is_nan() || x <= 0.0 {
                return Err(DesignError(format!(
                    "impossible PathQuick design: {} = {x:.3} is not positive (B_min must be above P_1/T_quick \
                     and below B_max)",
                    NAMES[i]
                )));
            }
        }
        let (t, p1, dp, n) = (g(&v, T), g(&v, P1).round(), g(&v, DP).round(), g(&v, NN));
        if dp < 1.0 {
            return Err(DesignError(format!(
                "impossible PathQuick design: ΔP = {:.3} B rounds below one byte",
                g(&v, DP)
            )));
        }
        let mut n = (n + 1e-6).floor();
        let max = self.max_size_or_default().0 as f64;
        if g(&v, PN) > max + 0.5 {
            return Err(DesignError(format!(
                "impossible PathQuick design: P_N = {:.0} B exceeds the largest packet (MTU) {max} B",
                g(&v, PN)
            )));
        }
        // Only rounding can push P_N above the limit now; give back the packets it added.
        while n >= 3.0 && p1 + (n - 1.0) * dp > max {
            n -= 1.0;
        }
        if n < 3.0 {
            return Err(DesignError(format!(
                "impossible PathQuick design: fewer than 3 packets fit (N = {:.2}, P_N ≤ {max} B)",
                g(&v, NN)
            )));
        }
        if n > 65_535.0 {
            return Err(DesignError(format!("impossible PathQuick design: N = {n} packets is too many")));
        }
        let d = QuickDesign {
            t_quick: Dur::from_secs_f64(t),
            p_1: Bytes(p1 as u64),
            delta_p: Bytes(dp as u64),
            n: n as u32,
        };
        d.validate(self.min_size_or_default(), self.max_size_or_default())?;
        Ok(d)
    }
}

impl QuickDesign {
    /// Checks sizes against `[min_size, max_size]` and the spacing against zero.
    pub fn validate(&self, min_size: Bytes, max_size: Bytes) -> Result<(), DesignError> {
        if self.t_quick.0 == 0 {
            return Err(DesignError("impossible PathQuick design: T_quick is zero".into()));
        }
        if self.n < 3 {
            return Err(DesignError(format!("impossible PathQuick design: N = {} < 3 packets", self.n)));
        }
        if self.delta_p.0 == 0 {
            return Err(DesignError("impossible PathQuick design: ΔP = 0 probes a single rate".into()));
        }
        if self.p_1 < min_size {
            return Err(DesignError(format!(
                "impossible PathQuick design: P_1 = {} B is below the smallest packet {} B",
                self.p_1.0, min_size.0
            )));
        }
        if self.p_n() > max_size {
            return Err(DesignError(format!(
                "impossible PathQuick design: P_N = {} B exceeds the largest packet (MTU) {} B",
                self.p_n().0,
                max_size.0
            )));
        }
        Ok(())
    }

    /// Size of packet `i`, 1-based (Eq. 2).
    pub fn p_i(&self, i: u32) -> Bytes {
        Bytes(self.p_1.0 + (i.max(1) as u64 - 1) * self.delta_p.0)
    }

    /// Size of the last packet.
    pub fn p_n(&self) -> Bytes {
        self.p_i(self.n)
    }

    /// Rate probed by packet `i`, 1-based (Eq. 3).
    pub fn rate_of(&self, i: u32) -> Rate {
        self.p_i(i).per(self.t_quick)
    }

    /// Lowest rate probed: `P_2 / T_quick` (Eq. 7).
    pub fn b_min(&self) -> Rate {
        self.rate_of(2)
    }

    /// Highest rate probed: `P_N / T_quick` (Eq. 5).
    pub fn b_max(&self) -> Rate {
        self.rate_of(self.n)
    }

    /// `T_quick·(N-1)` (Eq. 1).
    pub fn train_length(&self) -> Dur {
        Dur(self.t_quick.0 * (self.n as u64 - 1))
    }

    /// Train length plus one RTT for the answer (§4.2).
    pub fn estimate_time(&self, rtt: Dur) -> Dur {
        self.train_length() + rtt
    }

    /// `ΔP / T_quick` (Eq. 14).
    pub fn resolution(&self) -> Rate {
        self.delta_p.per(self.t_quick)
    }

    /// `N·(P_1+P_N)/2` (§4.5).
    pub fn bytes(&self) -> Bytes {
        Bytes(self.n as u64 * (self.p_1.0 + self.p_n().0) / 2)
    }

    /// Send offsets and sizes of the `N` packets.
    pub fn schedule(&self) -> Vec<TrainPacket> {
        (1..=self.n).map(|i| TrainPacket { offset: Dur(self.t_quick.0 * (i as u64 - 1)), size: self.p_i(i) }).collect()
    }
}

/// Eq. 9 as a real function (with the factor 8 of bytes to bits): the train length (seconds) of a PathQuick train that covers
/// `[b_min, b_max]` (bits/s) with first and last packets `p_1`, `p_n` (bytes); `None` when the
/// range cannot be covered (`P_N·B_min ≤ P_1·B_max`).
pub fn train_length_eq9(p_1: f64, p_n: f64, b_min: f64, b_max: f64) -> Option<f64> {
    let den = p_n * b_min - p_1 * b_max;
    if den <= 0.0 {
        return None;
    }
    finite(8.0 * p_n * (p_n - p_1) / den)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approx(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn paper_design() {
        let d = QuickSpec::paper().solve().unwrap();
        assert_eq!(d.n, 125);
        assert_eq!(d.b_min(), Rate::from_kbps(104));
        assert_eq!(d.b_max(), Rate::from_kbps(11_912));
        assert_eq!(d.train_length(), Dur::from_millis(124));
        assert_eq!(d.estimate_time(Dur::from_millis(52)), Dur::from_millis(176));
        assert_eq!(d.resolution(), Rate::from_kbps(96));
        assert_eq!(d.bytes(), Bytes(93_125));
        let s = d.schedule();
        assert_eq!(s.len(), 125);
        assert_eq!(s[124].offset, Dur::from_millis(124));
        assert_eq!(s[124].size, Bytes(1489));
        // Eq. 9 agrees with Eq. 1 for the same range.
        let t9 = train_length_eq9(1.0, 1489.0, 104e3, 11_912e3).unwrap();
        assert!(approx(t9, 0.124, 1e-9), "{t9}");
    }

    #[test]
    fn solves_every_independent_subset_of_four() {
        // From the paper's design, give every 4-subset of the 7 quantities and check that the
        // solver either recovers the design or says the subset is underdetermined; count both.
        let full = QuickSpec {
            t_quick: Some(Dur::from_millis(1)),
            p_1: Some(Bytes(1)),
            delta_p: Some(Bytes(12)),
            p_n: Some(Bytes(1489)),
            n: Some(125),
            b_min: Some(Rate::from_kbps(104)),
            b_max: Some(Rate::from_kbps(11_912)),
            ..QuickSpec::default()
        };
        let expected = QuickSpec::paper().solve().unwrap();
        let (mut solved, mut under) = (0, 0);
        for mask in 0u32..128 {
            if mask.count_ones() != 4 {
                continue;
            }
            let pick = |bit: u32| mask & (1 << bit) != 0;
            let spec = QuickSpec {
                t_quick: full.t_quick.filter(|_| pick(0)),
                p_1: full.p_1.filter(|_| pick(1)),
                delta_p: full.delta_p.filter(|_| pick(2)),
                p_n: full.p_n.filter(|_| pick(3)),
                n: full.n.filter(|_| pick(4)),
                b_min: full.b_min.filter(|_| pick(5)),
                b_max: full.b_max.filter(|_| pick(6)),
                ..QuickSpec::default()
            };
            match spec.solve() {
                Ok(d) => {
                    assert_eq!(d, expected, "subset {mask:07b}");
                    solved += 1;
                }
                Err(e) => {
                    assert!(e.0.contains("underdetermined"), "subset {mask:07b}: {e}");
                    under += 1;
                }
            }
        }
        // 35 subsets; the dependent ones contain all of {T, P_N, B_max} (Eq. 5: 4 subsets) or are
        // {T, P_1, ΔP, B_min} (Eq. 7) or {P_1, ΔP, P_N, N} (Eq. 2): 6 of them.
        assert_eq!(solved + under, 35);
        assert_eq!(under, 6, "solved {solved}");
    }

    #[test]
    fn half_train_of_section_4_5() {
        let d = QuickSpec {
            t_quick: Some(Dur::from_millis(1)),
            p_1: Some(Bytes(1)),
            delta_p: Some(Bytes(24)),
            p_n: Some(Bytes(1489)),
            ..QuickSpec::default()
        }
        .solve()
        .unwrap();
        assert_eq!(d.n, 63);
        assert_eq!(d.bytes(), Bytes(46_935));
        assert_eq!(d.resolution(), Rate::from_kbps(192));
        assert_eq!(d.b_max(), Rate::from_kbps(11_912));
    }

    #[test]
    fn testbed_design_of_section_4_4_3() {
        // T_quick = 0.1 ms, P_1 = 32, ΔP = 12, N = 120 → P_N = 1460, B_max = 116.8 Mbps.
        let d = QuickSpec {
            t_quick: Some(Dur::from_micros(100)),
            p_1: Some(Bytes(32)),
            delta_p: Some(Bytes(12)),
            n: Some(120),
            ..QuickSpec::default()
        }
        .solve()
        .unwrap();
        assert_eq!(d.p_n(), Bytes(1460));
        assert_eq!(d.b_max(), Rate::from_kbps(116_800));
    }

    #[test]
    fn rejects_impossible_designs() {
        // Sizes above the MTU.
        let e = QuickSpec { n: Some(200), ..QuickSpec::paper() }.solve();
        assert!(e.is_err());
        let e = QuickSpec {
            t_quick: Some(Dur::from_millis(1)),
            p_1: Some(Bytes(1)),
            delta_p: Some(Bytes(12)),
            n: Some(200),
            ..QuickSpec::default()
        }
        .solve()
        .unwrap_err();
        assert!(e.0.contains("fewer than 3") || e.0.contains("MTU"), "{e}");
        // B_min below what P_1 alone probes: negative ΔP.
        let e = QuickSpec {
            b_min: Some(Rate::from_kbps(100)),
            b_max: Some(Rate::from_mbps(12)),
            p_1: Some(Bytes(100)),
            p_n: Some(Bytes(1500)),
            ..QuickSpec::default()
        }
        .solve()
        .unwrap_err();
        assert!(e.0.contains("not positive"), "{e}");
        // Inconsistent over-determination.
        let e = QuickSpec { n: Some(100), ..QuickSpec::paper() }.solve().unwrap_err();
        assert!(e.0.contains("inconsistent"), "{e}");
        // Underdetermined.
        let e = QuickSpec { b_max: Some(Rate::from_mbps(12)), ..QuickSpec::default() }.solve().unwrap_err();
        assert!(e.0.contains("underdetermined"), "{e}");
        // Header floor of a socket driver.
        let e = QuickSpec { min_size: Bytes(48), ..QuickSpec::paper() }.solve().unwrap_err();
        assert!(e.0.contains("smallest packet"), "{e}");
    }

    #[test]
    fn range_from_rates_rounds_n_down() {
        // A driver's typical request: B_min, B_max, P_1 = header floor, P_N = MTU.
        let d = QuickSpec {
            b_min: Some(Rate::from_kbps(432)),
            b_max: Some(Rate::from_mbps(12)),
            p_1: Some(Bytes(42)),
            p_n: Some(Bytes(1500)),
            ..QuickSpec::default()
        }
        .solve()
        .unwrap();
        assert_eq!(d.t_quick, Dur::from_millis(1));
        assert_eq!(d.delta_p, Bytes(12));
        assert_eq!(d.n, 122); // (1500-42)/12 + 1 = 122.5, rounded down
        assert!(d.p_n() <= Bytes(1500));
        assert_eq!(d.b_min(), Rate::from_kbps(432));
    }
}
