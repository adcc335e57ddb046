//! Available-bandwidth estimation from one probe train: PathQuick and its baseline pathChirp.
//!
//! # The idea (probe rate model)
//!
//! A sender emits a short train of UDP packets whose *instantaneous* rate grows from packet to
//! packet. While the rate probed by a packet is below the available bandwidth of the path, the
//! bottleneck queue does not grow because of the train and the receiver sees the packets
//! spaced as they were sent; once the rate exceeds the available bandwidth the train queues
//! behind itself and the one-way delay of each packet grows. The rate at which that growth
//! starts (the *knee*) is the estimate (Oshiba & Nakajima, "Real-time end-to-end available
//! bandwidth estimation for QoS of multimedia communication" — the PathQuick paper — §2.2 and
//! §3.4, Eq. 4).
//!
//! Two ways to sweep the rate:
//!
//! - **PathQuick** ([`pathquick`]): `N` packets *equally spaced* by `T_quick`, sizes growing
//!   linearly, `P_i = P_1 + (i-1)·ΔP` (Eq. 2), so packet `i` probes `R_i = P_i / T_quick` (Eq. 3):
//!   a constant resolution `ΔP / T_quick` (Eq. 14) and a train length linear in `N` (Eq. 1).
//! - **pathChirp** ([`pathchirp`], Ribeiro et al., PAM 2003): `M` equal packets whose spacing
//!   shrinks geometrically by the spread factor `γ`, so the rate grows exponentially (Eqs. 10–13).
//!
//! Both trains are read by the same receiver-side estimator ([`excursion`]): pathChirp's
//! *excursion segmentation* of the queuing-delay signature, which the PathQuick paper adopts
//! for bursty cross traffic (end of §3.4).
//!
//! # API for drivers (simulator, sockets)
//!
//! 1. Design a train: [`pathquick::QuickSpec::solve`] or [`pathchirp::ChirpSpec::design`], or
//!    wrap either in a [`TrainDesign`].
//! 2. [`TrainDesign::schedule`] yields one [`TrainPacket`] per packet: its send offset from the
//!    train start and its size (bytes at the IP level, the paper's `P_i`).
//! 3. The driver paces the packets with a [`train::TrainSender`] (or lets a peer send them) and
//!    feeds what it sees (packet sent, packet received, end of train, time passing) to a
//!    [`train::TrainJudge`], which collects the packets by index, decides when the train is
//!    judged (all packets in, the cut deadline, or the loss deadline of its
//!    [`train::JudgePolicy`]) and builds one [`ProbeRecord`] per packet (index, send time,
//!    receive time or `None` when lost, size). Its [`train::TrainVerdict`] holds the
//!    [`excursion::TrainEstimate`] of [`excursion::estimate_train`], whose [`Outcome`] is an
//!    estimate, "above range", "below range" or "inconclusive". (A driver with records of its
//!    own may call [`excursion::estimate_train`] directly.)
//! 4. Optionally smooth several trains with [`excursion::Smoother`].

pub mod autorange;
pub mod compare;
pub mod dispersion;
pub mod excursion;
pub mod growth;
#[cfg(test)]
mod ladder_harness;
pub mod pathchirp;
pub mod pathquick;
pub mod shaper;
pub mod train;

use crate::units::{Bytes, Dur, Rate, Time};
use std::fmt;

pub use excursion::{
    estimate_train, EstimatorConfig, Excursion, InconclusiveReason, Outcome, Smoother, TrainEstimate,
    RAMP_DECREASE_FACTOR,
};
pub use pathchirp::{ChirpDesign, ChirpSpec};
pub use pathquick::{QuickDesign, QuickSpec};
pub use train::{
    JudgePolicy, JudgeReason, JudgeState, Judgement, PacketFate, Poll, SenderState, TrainJudge, TrainSender,
    TrainVerdict,
};

/// Which probe train.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// Equally spaced packets of linearly growing size.
    PathQuick,
    /// Equal packets with exponentially shrinking spacing.
    PathChirp,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::PathQuick => "pathquick",
            Method::PathChirp => "pathchirp",
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Method {
    type Err = DesignError;
    fn from_str(s: &str) -> Result<Method, DesignError> {
        match s.to_ascii_lowercase().as_str() {
            "pathquick" | "quick" => Ok(Method::PathQuick),
            "pathchirp" | "chirp" => Ok(Method::PathChirp),
            _ => Err(DesignError(format!("unknown method `{s}` (use pathquick or pathchirp)"))),
        }
    }
}

/// One packet of a train: when it leaves, relative to the first packet, and how big it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrainPacket {
    /// Send offset from the first packet of the train (the first packet has offset zero).
    pub offset: Dur,
    /// Size of the packet at the IP level (the paper's `P_i`).
    pub size: Bytes,
}

/// What the receiver knows about one probe packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeRecord {
    /// Position in the train, 0-based.
    pub index: u32,
    /// When the sender sent it (sender clock; for a lost packet, the scheduled time is fine).
    pub send_time: Time,
    /// When the receiver got it (receiver clock), `None` if it never arrived. The two clocks
    /// need not share an origin: only differences of one-way delays are used.
    pub recv_time: Option<Time>,
    /// Size at the IP level.
    pub size: Bytes,
}

/// A train design that cannot be built, with the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesignError(pub String);

impl fmt::Display for DesignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for DesignError {}

/// Either train, ready to schedule.
#[derive(Clone, Debug, PartialEq)]
pub enum TrainDesign {
    PathQuick(QuickDesign),
    PathChirp(ChirpDesign),
}

impl TrainDesign {
    pub fn method(&self) -> Method {
        match self {
            TrainDesign::PathQuick(_) => Method::PathQuick,
            TrainDesign::PathChirp(_) => Method::PathChirp,
        }
    }

    /// Per-packet send offsets and sizes, first packet at offset zero.
    pub fn schedule(&self) -> Vec<TrainPacket> {
        match self {
            TrainDesign::PathQuick(d) => d.schedule(),
            TrainDesign::PathChirp(d) => d.schedule(),
        }
    }

    /// Number of packets.
    pub fn packets(&self) -> u32 {
        match self {
            TrainDesign::PathQuick(d) => d.n,
            TrainDesign::PathChirp(d) => d.m,
        }
    }

    /// Lowest and highest rate probed by the train.
    pub fn probed_range(&self) -> (Rate, Rate) {
        match self {
            TrainDesign::PathQuick(d) => (d.b_min(), d.b_max()),
            TrainDesign::PathChirp(d) => (d.b_min, d.top_rate()),
        }
    }

    /// Time from the first to the last packet's send.
    pub fn train_length(&self) -> Dur {
        match self {
            TrainDesign::PathQuick(d) => d.train_length(),
            TrainDesign::PathChirp(d) => d.train_length(),
        }
    }

    /// Bytes of one train.
    pub fn bytes(&self) -> Bytes {
        match self {
            TrainDesign::PathQuick(d) => d.bytes(),
            TrainDesign::PathChirp(d) => d.bytes(),
        }
    }
}

/// The rate probed by each gap of a schedule: `rates[k]` belongs to the gap between packet `k`
/// and `k + 1` and is the later packet's size over the gap (`R_{k+1} = P_{k+1} / T_quick` for
/// PathQuick, `P / Δ_k` for pathChirp).
pub fn gap_rates(schedule: &[TrainPacket]) -> Vec<Rate> {
    schedule.windows(2).map(|w| w[1].size.per(w[1].offset.saturating_sub(w[0].offset))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gap_rates_follow_both_designs() {
        let quick = QuickSpec::paper().solve().unwrap();
        let rates = gap_rates(&quick.schedule());
        assert_eq!(rates.len(), 124);
        assert_eq!(rates[0], Rate::from_kbps(104));
        assert_eq!(*rates.last().unwrap(), Rate::from_kbps(11_912));
        let chirp = ChirpSpec::paper().design().unwrap();
        let rates = gap_rates(&chirp.schedule());
        assert_eq!(rates.len(), 27);
        // Exponential growth by γ per gap (integer-ns rounding of the offsets aside).
        for w in rates.windows(2) {
            let g = w[1].bps() as f64 / w[0].bps() as f64;
            assert!((g - 1.2).abs() < 1e-3, "spread {g}");
        }
        assert!("pathquick".parse::<Method>().is_ok());
        assert!("bogus".parse::<Method>().is_err());
    }
}
