//! Receiver-side estimator: the probe rate model read through pathChirp's *excursion
//! segmentation* (Ribeiro et al., PAM 2003, §2.2–2.3; adopted by the PathQuick paper at the end
//! of §3.4 for bursty cross traffic). One function, [`estimate_train`], serves both trains.
//!
//! # The algorithm
//!
//! Input: one record per packet (index, send time, receive time or lost, size), in any order.
//!
//! 1. Sort by index, drop duplicates, count losses and reordering (a packet that arrived before
//!    some packet of lower index).
//! 2. For the received packets `0..m` (in index order) take the relative one-way delay
//!    `q_j = recv_j - send_j` (clock offsets cancel, only differences are used), and for each gap
//!    `k` (between received packets `k` and `k+1`) its send spacing `Δ_k` and the rate it probed,
//!    `r_k` = the later packet's size over its own send gap (`P_i / T_quick` for PathQuick,
//!    `P / Δ_k` for pathChirp), the gap taken as the median of its own and its two neighbours
//!    (send jitter; the first and last gaps keep their own).
//! 3. **Excursions.** An excursion starts at a packet `i` whose successor's delay is higher
//!    (`q_{i+1} > q_i`). It ends at the first `j > i` where the delay has come back down,
//!    `q_j - q_i < max_{i≤k≤j}(q_k - q_i) / F` (decrease factor `F = 1.5`). An excursion that
//!    lasted `j - i ≥ L` gaps (busy-period threshold `L = 5`) was caused by the train itself
//!    being above the available bandwidth at that moment: each gap `k` in it along which the
//!    delay increased gets the estimate `E_k = r_k`. Shorter excursions are cross-traffic
//!    bursts and mark nothing. Then the next excursion starts at the next increase after `j`.
//! 4. **The excursion that never ends.** If the last excursion, starting at `l`, has not ended
//!    when the train does, the train has reached the available bandwidth at `l` (the knee):
//!    every gap `k ≥ l` gets `E_k = r_l`.
//! 5. **Unmarked gaps** (not in a busy excursion, or not increasing in it) get `E_k = r_l` too;
//!    with no unterminated excursion, `l` is the last gap.
//! 6. The estimate is the time-weighted mean `Σ E_k Δ_k / Σ Δ_k` (pathChirp's per-chirp
//!    estimate; for PathQuick all `Δ_k = T_quick` so it is a plain mean).
//!
//! # Results that are not a number
//!
//! - **Below range**: the unterminated excursion starts at the first or second gap: the train
//!   queued from its lowest rates on (the first gap cannot show it: the queue left by the first
//!   packet is what the second gap sees); the available bandwidth is at most the reported rate.
//! - **Above range**: no unterminated excursion, or one made of the last gap alone (one rise
//!   cannot be told from a burst, and its rate is the top of the range anyway): the path
//!   absorbed even the top rates; the available bandwidth is at least the (reported) estimate.
//!   An unterminated excursion of two or more gaps is the knee, however short (pathChirp's rule;
//!   a rule in gaps such as "shorter than `L`" would, for a chirp whose last `L` gaps span
//!   `γ^L` = 2.5× in rate, call every available bandwidth above `B_max/γ^(L-1)` "above
//!   range"). A train whose *tail* was lost is not above range: tail loss is the bottleneck
//!   buffer overflowing, so the unterminated excursion is taken to start at the last received
//!   gap.
//! - **Inconclusive**: fewer than `max(3, L+1)` packets received, more than
//!   [`EstimatorConfig::max_loss_fraction`] lost, more than
//!   [`EstimatorConfig::max_reorder_fraction`] reordered (the path is not one FIFO queue, the
//!   probe rate model does not apply), or send times that do not increase.
//!
//! [`Outcome::value`] still gives the number behind a range result, for plots.
//!
//! # Choices neither paper fixes
//!
//! - **Reordered packets**: a packet that arrived before one of lower index, and the packets it
//!   overtook, are left out of the delay signature (they did not share one FIFO queue with the
//!   rest; a single swapped pair would otherwise look like a dip and an endless excursion).
//! - **Lost packets** are left out of the delay signature (pathChirp's tool instead discards
//!   the whole chirp as congested); the gap that spans a loss keeps the rate of the later
//!   packet's own gap and the spacing between the two received packets as its weight.
//! - **Serialisation of growing packets.** A PathQuick packet of `P_i` bytes spends `8·P_i/C`
//!   on every store-and-forward link of capacity `C`, so even on an idle path the delay grows
//!   linearly with `i` and step 3 would see one endless excursion from the first packet
//!   ("below range"). Before segmenting, the component of `q` linear in the packet size is
//!   removed: its slope is the per-byte delay increment shared by most gaps (the idle
//!   stretches, where it is exactly `Σ 8/C`; under self-queueing the increments grow and do not
//!   repeat; see `serialisation_slope`); nothing is removed when no such plateau exists (a
//!   train that queued from the start, or one dominated by cross-traffic noise).
//!   Equal-size trains (pathChirp) are unaffected. Switch off with
//!   [`EstimatorConfig::size_correction`].
//! - **Timestamp noise**: delay increases of at most [`EstimatorConfig::delay_floor`] are not
//!   increases, and an excursion also ends once its delay is back within the floor of its start
//!   (0 by default, i.e. pathChirp's rule; socket drivers set a few microseconds). The floor is
//!   never below 2 ns: timestamps are whole nanoseconds, and the size correction leaves
//!   sub-nanosecond residues that would otherwise read as rises (an idle path then showed an
//!   endless excursion of height zero and a PathQuick train with ΔP = 24 B "estimated"
//!   5.4 Mbit/s on an empty 12 Mbit/s link).
//! - **The decrease factor for a fine ramp.** `F = 1.5` is pathChirp's default, tuned for chirps
//!   whose gaps shrink by γ per packet. Along PathQuick's ramp (96 kbit/s more every
//!   millisecond) the queue the train itself builds past the crossing grows only as the square
//!   of the time since; its first millisecond-scale peaks are the size of one cross-traffic
//!   packet, and a one-third drop from such a peak (`F = 1.5`) ends the excursion again and
//!   again, so the unterminated one starts 1.5–2 Mbit/s above the crossing. A larger `F`
//!   ends an excursion only when the delay is back near its start. The default stays the
//!   papers' 1.5; [`RAMP_DECREASE_FACTOR`] (5) is what we measured best for PathQuick: in the
//!   simulated Fig. 6 the mean signed error over 1–8 Mbit/s fell from +1.87 to +0.19 Mbit/s and
//!   the per-level MAE from 1.8–2.5 to 0.9–1.4 (flat for `F` = 4–8; docs/pathquick.md).
//!   `headroom probe --decrease-factor`, `[[probe]] decrease_factor`.
//! - **Knee fit** (optional, [`EstimatorConfig::knee_fit`], off by default): queueing becomes
//!   visible only once the bottleneck's slack is used up — a token-bucket rate limiter's burst,
//!   or simply the resolution of "first sustained increase" — so the knee's rate `r_l` sits
//!   above the available bandwidth. Along the unterminated excursion the queue grows per unit
//!   time as `(r_k - A)/C`; the Theil–Sen line of `(Δq_k/Δ_k)` against `r_k` crosses zero at
//!   `A`, which (clamped to `[lowest rate, r_l]`) replaces `r_l` in steps 4–5.
//! - **Smoothing** ([`Smoother`], [`combine`]): the mean of the last `K` per-train values, as
//!   pathChirp's `num_inst_bw` moving mean; a majority of range results keeps its label.

use super::shaper::ShaperEstimate;
use super::ProbeRecord;
use crate::units::{Bytes, Dur, Rate};
use std::collections::VecDeque;
use std::fmt;

/// Decrease factor `F` measured best for PathQuick's linear ramp (module doc); the default
/// stays pathChirp's 1.5.
pub const RAMP_DECREASE_FACTOR: f64 = 5.0;

/// A terminated excursion that rose within one gap by more than this many times the gap's
/// send spacing, and peaked more than [`ABRUPT_HEIGHT`] delay floors above its start, is an
/// abrupt spike: a stall of the path (or one huge burst), not the train's queue. So is the
/// unterminated excursion when every rise in it that it does not give back is that abrupt and
/// it was still draining when the train ended. When the queue-growth fit's growth is made of
/// such spikes only (the fit over the other packets grows by at most the floor), the train
/// read no queue: "above range" (issue 19, session 22; in neither paper, it reads pathChirp's
/// excursions, Ribeiro et al. 2003 §2.2, with the fit of `super::growth`). A train that ended
/// inside a stall is read from the packets before the stall, growing or not (session 23).
///
/// Why: a train's own queue grows by at most its packet's serialisation per gap, and cross
/// traffic adds its arrivals during the gap: a rise of four spacings within one gap takes four
/// capacities' worth of traffic arriving at once (with 1,500-byte Poisson cross traffic at
/// 90 % of a 500 Mbit/s link, a 1,500-byte train packet rises by 24 µs per cross packet that
/// arrives in its 24 µs gap, so more than four of them, 0.2 % of gaps (Poisson, mean 0.9);
/// eight spacings would need nine, about one gap in a million). Past the crossing the train's
/// queue grows gradually and never drains, so a last excursion whose only rises are abrupt and
/// which is falling at the end is a stall still draining. On the testbed's idle 500 Mbit/s
/// link the delay box stalled: rises of 100–1,100 µs within one or two 24 µs gaps, then a
/// drain at the rate the link had spare, and the fit, least squares over every packet, took
/// the spikes as a queue. The spike's packets are those of the excursion and, for a terminated
/// one, those after its end while the delay still falls towards its start (the excursion ends
/// at a fifth of its peak with `F` = 5).
///
/// Replayed (`headroom probe-replay`) over sessions 21 and 22's testbed dumps (2,736
/// estimates, 366 of them on the idle 500 Mbit/s link): only idle 500 Mbit/s estimates
/// changed. Sixteen answers of 185–456 Mbit/s read "above range, 500" and seven first coarse
/// trains misread at 31–366 Mbit/s read "above range", so the ladder's next train is the
/// answer (the terminated spikes alone took four of these 23). Of the 366, 41 had been more
/// than 10 % of `C` off and 24 were after, the seven whose trains changed not counted. The
/// packet-level harness gave byte-identical output for two seeds without stalls; with its
/// model of the box's stalls (`ladder_harness::Stalls`, 60 a second of 100–1,000 µs) the idle
/// 500 Mbit/s estimates more than 10 % off went from 28 to 20 (RTT 10 ms) and 23 to 17
/// (RTT 100 ms) of 200, the loaded rows the same or better. A factor of 8 took one of the two
/// answers that 4 took, and without the abruptness test (tall terminated excursions only) the
/// 10 Mbit/s path's answers moved under 9 Mbit/s of cross traffic. What the rule would misread:
/// cross traffic arriving in bursts of four spacings' worth at once on a path where the
/// train's own growth stays under the floor per gap. The factors are ours.
///
/// Session 23, the stall at the end of the train. Most idle misses left ended inside a stall
/// whose drain carried a late packet or two: a rise of 20–55 µs over one or two gaps, not
/// abrupt, which the delay gave back within a few gaps. A queue past its crossing does not
/// give its growth back, so a rise the delay later falls below the start of no longer counts
/// against the spike. "Still draining" also asks that the delay has not turned up from its
/// lowest since the peak by more than the floor: a stall before the crossing drains into the
/// train's own growth, which turns it up. And a train that ended in a stall is read from the
/// fit over the packets before it, growing or not: the packets after its start show the stall,
/// not where the train crossed `A` (one answer had been 441 Mbit/s on the idle link, the fit
/// before the stall read 468). Replayed over every dump of sessions 21 and 22 (4,260
/// estimates, 630 on the idle 500 Mbit/s link): 12 changed, each closer to `A`. Eight idle
/// answers of 225–422 Mbit/s read "above range, 500", three rose (430 → 459, 441 → 468,
/// 143 → 379 Mbit/s), and one at 500 Mbit/s under 150 Mbit/s of cross traffic went from 383.5
/// to 357.4 for `A` = 350; idle estimates more than 10 % of `C` off, 44 → 34. In the
/// packet-level harness (six seeds of 200 estimates) with 15 stalls a second the idle
/// 500 Mbit/s estimates more than 10 % off went from 34 to 24 (RTT 10 ms) and 22 to 16
/// (RTT 100 ms) of 1,200, the loaded rows the same but for one estimate; with 60 a second
/// 108 → 92 and 103 → 93, and at 30 % load 150 → 155 and 130 → 134 (docs/results.md, issue 19
/// session 23).
pub const ABRUPT_RISE: f64 = 4.0;

/// The least peak of an abrupt spike, in delay floors ([`ABRUPT_RISE`]).
pub const ABRUPT_HEIGHT: f64 = 2.0;

/// A queue-growth fit whose crossing lies within this share of the train's gaps, and whose
/// growth a straight line in the packet sizes takes to within the delay floor, is the train's
/// serialisation and the delay box's stalls, not a queue: "above range" (issue 19, session 21;
/// session 19 had the rule for a crossing at the second gap only).
///
/// Why: a queue that starts half way in grows as a parabola over the other half, so a quarter
/// or more of its rise stays beyond the best line, milliseconds for any real queue; a fast
/// link's serialisation is a line. On the testbed's idle 500 Mbit/s link the answer train
/// (126–500 Mbit/s, 9 ms) rises about 20 µs by its serialisation; with its first packet
/// 38–76 µs late and stalls of 80–300 µs that return to the floor the fit put the crossing at
/// 134–279 Mbit/s, 2–41 % of the way in, and those were the answers. Replayed over the
/// session's 222 idle 500 Mbit/s estimates (`headroom probe-replay`, against session 20's
/// rules), ten answers of 134–279 Mbit/s read "above range, 500"; one moved from 469.9 to
/// 456.0 and two asked for another train. Under load, of 222 answers at 150 Mbit/s of cross
/// traffic four moved (341 → 326, 326 → 348, 335 → 361 and 317 → 324 for `A` = 350) and one
/// asked for another train; the packet-level harness's rows moved by at most 0.2 points. A
/// share of 0.3 took eight of the ten and left the harness the same. The share is ours.
pub const EARLY_CROSSING: f64 = 0.5;

/// Parameters of the estimator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EstimatorConfig {
    /// pathChirp's decrease factor `F`.
    pub decrease_factor: f64,
    /// pathChirp's busy-period threshold `L` (gaps).
    pub busy_period: usize,
    /// Delay changes up to this size are timestamp noise.
    pub delay_floor: Dur,
    /// Above this fraction of lost packets the train is inconclusive.
    pub max_loss_fraction: f64,
    /// Above this fraction of reordered packets the train is inconclusive.
    pub max_reorder_fraction: f64,
    /// Remove the delay component linear in packet size (see the module doc).
    pub size_correction: bool,
    /// Refine the knee by fitting the queue growth along the unterminated excursion (see the
    /// module doc). Off by default: neither paper does it.
    pub knee_fit: bool,
    /// Look for a token-bucket shaper's late knee and report its token rate
    /// (`super::shaper`). Off by default: neither paper does it.
    pub detect_shaper: bool,
    /// Read the verdict from the queue-growth fit over the whole delay signature
    /// (`super::growth`) instead of the first sustained rise. Off by default: neither paper
    /// does it.
    pub growth_fit: bool,
}

impl Default for EstimatorConfig {
    fn default() -> Self {
        EstimatorConfig {
            decrease_factor: 1.5,
            busy_period: 5,
            delay_floor: Dur::ZERO,
            max_loss_fraction: 0.2,
            max_reorder_fraction: 0.1,
            size_correction: true,
            knee_fit: false,
            detect_shaper: false,
            growth_fit: false,
        }
    }
}

/// The verdict on one train (or on several, after [`combine`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The available bandwidth.
    Estimate(Rate),
    /// The available bandwidth is at least this (the train never saturated the path).
    AboveRange { at_least: Rate },
    /// The available bandwidth is at most this (the train queued from its first gap).
    BelowRange { at_most: Rate },
    /// No estimate, and why.
    Inconclusive { reason: InconclusiveReason },
}

/// Why a train gave no estimate. A type, not a sentence, so that callers decide on the cause
/// (auto-ranging retries a badly paced train, not a lossy one); [`fmt::Display`] gives the
/// sentence users see.
#[derive(Clone, Debug, PartialEq)]
pub enum InconclusiveReason {
    /// Fewer packets arrived than the estimator needs (three, and one more than `L`).
    TooFewReceived { received: u32, packets: u32, need: u32 },
    /// More than [`EstimatorConfig::max_loss_fraction`] of the packets were lost.
    Lost { lost: u32, packets: u32 },
    /// More than [`EstimatorConfig::max_reorder_fraction`] arrived out of order: not one FIFO.
    Reordered { reordered: u32, packets: u32 },
    /// Too few packets left once those around an inversion are set aside.
    TooFewInOrder { usable: u32, packets: u32, need: u32 },
    /// The send times of two consecutive received packets do not increase.
    SendTimesNotIncreasing { earlier: u32, later: u32 },
    /// A gap of zero length, whose rate is infinite.
    SameSendInstant,
    /// Cut by the judging deadline after packet `at` of `packets` before the part received
    /// showed a lasting knee (rule 2, [`super::train::cut_short`]).
    Cut { at: u32, packets: u32, why: super::train::CutShort },
    /// The sender's pacing report voids the train (rule 4, [`super::train::pacing_fault`]).
    BadlyPaced(super::train::PacingFault),
    /// [`combine`] over trains none of which had a value.
    NoneConclusive { trains: u32 },
    /// A train that never queued yet lost packets: auto-ranging treats it as lossy.
    AboveRangeWithLosses,
}

impl fmt::Display for InconclusiveReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use InconclusiveReason::*;
        match self {
            TooFewReceived { received, packets, need } => {
                write!(f, "{received} of {packets} packets received, need at least {need}")
            }
            Lost { lost, packets } => write!(f, "{lost} of {packets} packets lost"),
            Reordered { reordered, packets } => {
                write!(f, "{reordered} of {packets} packets reordered: not a single FIFO path")
            }
            TooFewInOrder { usable, packets, need } => {
                write!(f, "{usable} of {packets} packets usable after reordering, need at least {need}")
            }
            SendTimesNotIncreasing { earlier, later } => {
                write!(f, "send times do not increase between packets {earlier} and {later}")
            }
            SameSendInstant => write!(f, "two packets sent at the same instant"),
            Cut { at, packets, why } => write!(
                f,
                "train cut at packet {at} of {packets} by the judging deadline ({why}); the rest probes higher rates"
            ),
            BadlyPaced(fault) => write!(f, "{fault}"),
            NoneConclusive { trains } => write!(f, "none of {trains} trains was conclusive"),
            AboveRangeWithLosses => write!(f, "above range with losses"),
        }
    }
}

impl Outcome {
    /// The number behind the verdict (the bound for range results); `None` if inconclusive.
    pub fn value(&self) -> Option<Rate> {
        match self {
            Outcome::Estimate(r) => Some(*r),
            Outcome::AboveRange { at_least } => Some(*at_least),
            Outcome::BelowRange { at_most } => Some(*at_most),
            Outcome::Inconclusive { .. } => None,
        }
    }

    /// `estimate`, `above_range`, `below_range` or `inconclusive`.
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Estimate(_) => "estimate",
            Outcome::AboveRange { .. } => "above_range",
            Outcome::BelowRange { .. } => "below_range",
            Outcome::Inconclusive { .. } => "inconclusive",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Estimate(r) => write!(f, "{:.3} Mbit/s", r.as_mbps()),
            Outcome::AboveRange { at_least } => {
                write!(f, "above range (≥ {:.3} Mbit/s)", at_least.as_mbps())
            }
            Outcome::BelowRange { at_most } => {
                write!(f, "below range (≤ {:.3} Mbit/s)", at_most.as_mbps())
            }
            Outcome::Inconclusive { reason } => write!(f, "inconclusive ({reason})"),
        }
    }
}

/// One excursion of the delay signature, in packet indices of the train.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Excursion {
    /// Index of the packet where the delay started to rise.
    pub start: u32,
    /// Index of the packet where it came back down; `None` for the unterminated one.
    pub end: Option<u32>,
    /// Lasted at least `L` gaps (or never ended).
    pub busy: bool,
    /// Highest delay above the start.
    pub peak: Dur,
}

/// Everything the estimator found in one train.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainEstimate {
    pub outcome: Outcome,
    /// Lowest and highest rate probed by the received gaps (zero when none).
    pub probed: (Rate, Rate),
    /// Packets in the train (highest index + 1).
    pub packets: u32,
    pub received: u32,
    pub lost: u32,
    pub reordered: u32,
    pub duplicates: u32,
    /// Index of the packet where the unterminated excursion (the knee) starts.
    pub knee: Option<u32>,
    /// With [`EstimatorConfig::knee_fit`]: the fitted zero-growth rate that replaced the knee's.
    pub knee_fit: Option<Rate>,
    /// With [`EstimatorConfig::detect_shaper`]: the token-bucket shaper the train revealed
    /// (`super::shaper`); the outcome is then its token rate.
    pub shaper: Option<ShaperEstimate>,
    /// With [`EstimatorConfig::growth_fit`]: the fit that gave the verdict.
    pub growth_fit: Option<super::growth::GrowthFit>,
    pub excursions: Vec<Excursion>,
    /// Slope removed per byte of packet size, in ns/B (see the module doc).
    pub size_slope_ns_per_byte: f64,
}

impl TrainEstimate {
    /// An inconclusive estimate with these (packets, received, lost, reordered, duplicates).
    pub(crate) fn inconclusive(reason: InconclusiveReason, counts: (u32, u32, u32, u32, u32)) -> TrainEstimate {
        TrainEstimate {
            outcome: Outcome::Inconclusive { reason },
            probed: (Rate::ZERO, Rate::ZERO),
            packets: counts.0,
            received: counts.1,
            lost: counts.2,
            reordered: counts.3,
            duplicates: counts.4,
            knee: None,
            knee_fit: None,
            shaper: None,
            growth_fit: None,
            excursions: Vec::new(),
            size_slope_ns_per_byte: 0.0,
        }
    }
}

/// Delay changes up to this many nanoseconds are timestamp rounding (see `estimate_train`).
const QUANTUM_NS: f64 = 2.0;

fn rate_bps(size: Bytes, gap_ns: i128) -> f64 {
    if gap_ns <= 0 {
        return f64::INFINITY;
    }
    size.0 as f64 * 8.0 * 1e9 / gap_ns as f64
}

/// The per-byte delay slope of the idle stretches of a growing-size train (ns per byte), or 0.
///
/// On an idle stretch every gap adds the same `ΔP·Σ 8/C` of serialisation delay, so the
/// per-byte increments `(q_{k+1}-q_k)/(P_{k+1}-P_k)` repeat one value; under self-queueing they
/// grow from gap to gap and never repeat; cross traffic scatters them. The slope is the value
/// shared by the most gaps (within ±h, `h = max(floor/2, 0.5 µs)` over the size step), provided
/// at least `max(L, 5 %)` gaps share it; otherwise nothing is removed.
fn serialisation_slope(q: &[i128], size: &[Bytes], floor: Dur, l_busy: usize) -> f64 {
    let mut per_byte: Vec<(f64, f64)> = Vec::new(); // (slope, tolerance) per gap
    let h = (floor.0 as f64 / 2.0).max(500.0);
    for k in 0..q.len().saturating_sub(1) {
        let dp = size[k + 1].0 as f64 - size[k].0 as f64;
        if dp > 0.0 {
            per_byte.push(((q[k + 1] - q[k]) as f64 / dp, h / dp));
        }
    }
    if per_byte.is_empty() {
        return 0.0;
    }
    per_byte.sort_by(|a, b| a.0.total_cmp(&b.0));
    let tol = per_byte.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let need = l_busy.max((per_byte.len() as f64 * 0.05).ceil() as usize).max(2);
    let (mut best, mut best_n, mut lo) = (0.0, 0usize, 0usize);
    for hi in 0..per_byte.len() {
        while per_byte[hi].0 - per_byte[lo].0 > 2.0 * tol {
            lo += 1;
        }
        let n = hi + 1 - lo;
        if n > best_n {
            best_n = n;
            best = per_byte[lo..=hi].iter().map(|p| p.0).sum::<f64>() / n as f64;
        }
    }
    if best_n >= need {
        best.max(0.0)
    } else {
        0.0
    }
}

/// The top rate of a growing-size train sent at one spacing (PathQuick's `P_N / T_quick`):
/// its largest packet over its median spacing, bit/s. The largest gap rate can be a pacing
/// slip: one packet sent late makes a long gap and a short one, and where two such slips meet
/// the median of three still takes a short gap (21 µs against 24 µs on the testbed: 567 Mbit/s
/// for a 500 Mbit/s train, reported as the idle path's available bandwidth).
fn ramp_top(size: &[Bytes], own: &[i128]) -> f64 {
    let mut gaps: Vec<i128> = own.to_vec();
    gaps.sort_unstable();
    let largest = size.iter().map(|b| b.0).max().unwrap_or(0);
    match gaps.get(gaps.len() / 2) {
        Some(&g) if g > 0 => rate_bps(Bytes(largest), g),
        _ => 0.0,
    }
}

/// Packets in abrupt spikes ([`ABRUPT_RISE`]): for each `terminated` excursion `(start, end,
/// peak)` (positions in `q`, the size-corrected delays) that peaked more than [`ABRUPT_HEIGHT`]
/// floors above its start and rose in one gap `k` by more than `ABRUPT_RISE · weight[k]`, its
/// packets after the start, and those after its end while the delay keeps falling and is
/// still more than the floor above the start. The `unterminated` excursion `(start, peak)` is
/// a spike too, to the train's end, when it is as high, every rise in it (a run of gaps each
/// up by more than the floor) is abrupt over the run's time or later given back (the delay
/// falls to the run's start or below), and its last packet is more than the floor below its
/// peak and within the floor of its lowest delay since the peak: a stall draining when the
/// train ended.
fn abrupt_spikes(
    q: &[f64],
    weight: &[f64],
    terminated: &[(usize, usize, f64)],
    unterminated: Option<(usize, f64)>,
    floor: f64,
) -> Vec<bool> {
    let m = q.len();
    let mut spike = vec![false; m];
    for &(i, j, peak) in terminated {
        let abrupt = (i..j).any(|k| q[k + 1] - q[k] > ABRUPT_RISE * weight[k]);
        if peak > ABRUPT_HEIGHT * floor && abrupt {
            let mut e = j;
            while e + 1 < m && q[e] - q[i] > floor && q[e] < q[e - 1] + floor {
                e += 1;
            }
            spike[i + 1..e].iter_mut().for_each(|s| *s = true);
        }
    }
    if let Some((u, peak)) = unterminated {
        let mut rises = 0;
        let mut gradual = false;
        let mut k = u;
        while k + 1 < m {
            if q[k + 1] - q[k] <= floor {
                k += 1;
                continue;
            }
            let from = k;
            while k + 1 < m && q[k + 1] - q[k] > floor {
                k += 1;
            }
            rises += 1;
            let slow = q[k] - q[from] <= ABRUPT_RISE * weight[from..k].iter().sum::<f64>();
            // A rise the delay gives back entirely later on is no growth of a queue past its
            // crossing: the stall's drain with a late packet or two in it.
            let given_back = q[k + 1..].iter().any(|&v| v <= q[from]);
            gradual |= slow && !given_back;
        }
        // Falling at the end: more than the floor below the peak, and not turned up from the
        // lowest delay since the peak by more than the floor (a drain that a crossing ended).
        let top = (u + 1..m).max_by(|&a, &b| q[a].total_cmp(&q[b])).unwrap_or(u);
        let lowest_since = q[top..].iter().copied().fold(f64::INFINITY, f64::min);
        let draining = q[m - 1] - q[u] < peak - floor && q[m - 1] <= lowest_since + floor;
        if peak > ABRUPT_HEIGHT * floor && rises > 0 && !gradual && draining {
            spike[u + 1..].iter_mut().for_each(|s| *s = true);
        }
    }
    spike
}

/// Estimates the available bandwidth from one train (see the module doc).
pub fn estimate_train(records: &[ProbeRecord], cfg: &EstimatorConfig) -> TrainEstimate {
    let mut sorted: Vec<ProbeRecord> = records.to_vec();
    sorted.sort_by_key(|r| (r.index, r.recv_time.is_none()));
    let mut duplicates = 0u32;
    let mut by_index: Vec<ProbeRecord> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match by_index.last() {
            Some(last) if last.index == r.index => duplicates += 1,
            _ => by_index.push(r),
        }
    }
    let packets = by_index.last().map(|r| r.index + 1).unwrap_or(0);
    let rx: Vec<&ProbeRecord> = by_index.iter().filter(|r| r.recv_time.is_some()).collect();
    let received = rx.len() as u32;
    let lost = packets - received;
    let mut reordered = 0u32;
    let mut latest: Option<u64> = None;
    for r in &rx {
        let t = r.recv_time.map(|t| t.0).unwrap_or(0);
        match latest {
            Some(l) if t < l => reordered += 1,
            _ => latest = Some(t),
        }
    }
    let counts = (packets, received, lost, reordered, duplicates);
    let l_busy = cfg.busy_period.max(1);
    let need = 3.max(l_busy + 1);
    if (received as usize) < need {
        return TrainEstimate::inconclusive(
            InconclusiveReason::TooFewReceived { received, packets, need: need as u32 },
            counts,
        );
    }
    if lost as f64 > cfg.max_loss_fraction * packets as f64 {
        return TrainEstimate::inconclusive(InconclusiveReason::Lost { lost, packets }, counts);
    }
    if reordered as f64 > cfg.max_reorder_fraction * packets as f64 {
        return TrainEstimate::inconclusive(InconclusiveReason::Reordered { reordered, packets }, counts);
    }

    // Packets on either side of an inversion (one that arrived before a lower index, and those
    // it overtook) did not queue in one FIFO with the rest: leave them out of the signature.
    let mut out_of_order = vec![false; rx.len()];
    let mut latest: Option<(u64, usize)> = None;
    for j in 0..rx.len() {
        let t = rx[j].recv_time.map(|t| t.0).unwrap_or(0);
        match latest {
            Some((l, _)) if t < l => {
                out_of_order[j] = true;
                for i in 0..j {
                    if rx[i].recv_time.map(|x| x.0).unwrap_or(0) > t {
                        out_of_order[i] = true;
                    }
                }
            }
            _ => latest = Some((t, j)),
        }
    }
    let rx: Vec<&ProbeRecord> = rx.iter().zip(&out_of_order).filter(|(_, o)| !**o).map(|(r, _)| *r).collect();
    if rx.len() < need {
        return TrainEstimate::inconclusive(
            InconclusiveReason::TooFewInOrder { usable: rx.len() as u32, packets, need: need as u32 },
            counts,
        );
    }

    // Delay signature of the received packets and the gaps between them.
    let m = rx.len();
    let send: Vec<i128> = rx.iter().map(|r| r.send_time.0 as i128).collect();
    let size: Vec<Bytes> = rx.iter().map(|r| r.size).collect();
    let q_raw: Vec<i128> =
        rx.iter().map(|r| r.recv_time.map(|t| t.0 as i128).unwrap_or(0) - r.send_time.0 as i128).collect();
    let mut weight = Vec::with_capacity(m - 1);
    let mut rate = Vec::with_capacity(m - 1);
    let mut own = Vec::with_capacity(m - 1);
    for k in 0..m - 1 {
        let dt = send[k + 1] - send[k];
        if dt <= 0 {
            let (earlier, later) = (rx[k].index, rx[k + 1].index);
            return TrainEstimate::inconclusive(InconclusiveReason::SendTimesNotIncreasing { earlier, later }, counts);
        }
        weight.push(dt as f64);
        let later = rx[k + 1].index;
        let own_gap = if later == rx[k].index + 1 {
            dt
        } else {
            // A loss in between: the later packet's own gap, from the lost predecessor's send
            // time if the caller knows it, else the spacing spread evenly.
            let prev =
                by_index.binary_search_by_key(&(later - 1), |r| r.index).ok().map(|p| by_index[p].send_time.0 as i128);
            match prev {
                Some(p) if send[k + 1] > p => send[k + 1] - p,
                _ => dt / (later - rx[k].index) as i128,
            }
        };
        own.push(own_gap);
    }
    // The rate a gap probed: the later packet's size over the median of its own gap and its two
    // neighbours. A packet sent late lengthens one gap and shortens the next; the median keeps
    // that jitter out of the rates. The window is centred on the gap; the first and last gaps,
    // which have one neighbour only, keep their own gap (a window shifted inwards would give a
    // chirp's last gap the rate of the one before it, a whole spread step low).
    for k in 0..m - 1 {
        let g = if k == 0 || k + 1 == own.len() {
            own[k]
        } else {
            let mut w = [own[k - 1], own[k], own[k + 1]];
            w.sort_unstable();
            w[1]
        };
        rate.push(rate_bps(size[k + 1], g));
    }
    if rate.iter().any(|r| !r.is_finite()) {
        return TrainEstimate::inconclusive(InconclusiveReason::SameSendInstant, counts);
    }

    // Remove the delay component linear in packet size (module doc).
    let slope = if cfg.size_correction { serialisation_slope(&q_raw, &size, cfg.delay_floor, l_busy) } else { 0.0 };
    let q: Vec<f64> = (0..m).map(|j| q_raw[j] as f64 - slope * size[j].0 as f64).collect();

    // Excursion segmentation.
    // Timestamps are whole nanoseconds: every `q` carries two roundings, and removing a
    // fractional size slope leaves sub-nanosecond residues. A "rise" of that size is arithmetic,
    // not queueing (on an idle path it would start an endless excursion of zero height).
    let floor = (cfg.delay_floor.0 as f64).max(QUANTUM_NS);
    let f = if cfg.decrease_factor > 1.0 { cfg.decrease_factor } else { 1.5 };
    let gaps = m - 1;
    let rises = |k: usize| q[k + 1] - q[k] > floor;
    let next_rise = |from: usize| (from..gaps).find(|&k| rises(k)).unwrap_or(gaps);
    let mut marks: Vec<Option<f64>> = vec![None; gaps];
    let mut excursions = Vec::new();
    let mut unterminated: Option<usize> = None;
    // Terminated excursions by position: (start, end, peak above the start), for
    // `abrupt_spikes`.
    let mut terminated: Vec<(usize, usize, f64)> = Vec::new();
    let mut unterminated_peak = 0.0;
    let mut i = next_rise(0);
    while i < gaps {
        let mut peak = 0.0f64;
        let mut end = None;
        for j in i + 1..m {
            let d = q[j] - q[i];
            peak = peak.max(d);
            if d < peak / f || (floor > 0.0 && d <= floor) {
                end = Some(j);
                break;
            }
        }
        match end {
            Some(j) => {
                terminated.push((i, j, peak));
                let busy = j - i >= l_busy;
                if busy {
                    for k in i..j {
                        if rises(k) {
                            marks[k] = Some(rate[k]);
                        }
                    }
                }
                excursions.push(Excursion {
                    start: rx[i].index,
                    end: Some(rx[j].index),
                    busy,
                    peak: Dur(peak.max(0.0) as u64),
                });
                i = next_rise(j);
            }
            None => {
                excursions.push(Excursion {
                    start: rx[i].index,
                    end: None,
                    busy: true,
                    peak: Dur(peak.max(0.0) as u64),
                });
                unterminated = Some(i);
                unterminated_peak = peak;
                break;
            }
        }
    }
    let tail_lost = rx[m - 1].index + 1 < packets;
    let knee = unterminated.or(if tail_lost { Some(gaps - 1) } else { None });
    let l = knee.unwrap_or(gaps - 1);
    let mut knee_rate = rate[l];
    let mut knee_fit = None;
    if cfg.knee_fit && knee.is_some() {
        // Queue growth per unit time along the unterminated excursion, against the rate probed:
        // (Δq_k / Δ_k) = (r_k - A) / C for a FIFO of capacity C (or a token bucket of rate C
        // once its burst is spent); the zero crossing of the fitted line is A.
        let pts: Vec<(f64, f64)> = (l..gaps)
            .filter(|&k| rx[k + 1].index == rx[k].index + 1)
            .map(|k| (rate[k], (q[k + 1] - q[k]) / weight[k]))
            .collect();
        if pts.len() >= l_busy.max(3) {
            // Theil–Sen (robust to the spikes cross-traffic bursts put into single gaps).
            if let Some(zero) = super::shaper::zero_growth_rate(&pts) {
                let lowest = rate.iter().cloned().fold(f64::INFINITY, f64::min);
                knee_rate = zero.clamp(lowest, rate[l]);
                knee_fit = Some(Rate(knee_rate.round() as u64));
            }
        }
    }
    // A token-bucket shaper's late knee (super::shaper): its token rate is the answer.
    let shaper = match knee {
        Some(k) if cfg.detect_shaper && unterminated.is_some() => {
            let recv: Vec<i128> = (0..m).map(|j| send[j] + q_raw[j]).collect();
            let sig = super::shaper::Signature {
                send_ns: &send,
                recv_ns: &recv,
                size: &size,
                rate: &rate,
                knee: k,
                floor_ns: floor,
                min_points: l_busy,
            };
            super::shaper::detect(&sig)
        }
        _ => None,
    };
    let mut num = 0.0;
    let mut den = 0.0;
    for k in 0..gaps {
        let e = if k >= l { knee_rate } else { marks[k].unwrap_or(knee_rate) };
        num += e * weight[k];
        den += weight[k];
    }
    let raw = Rate((num / den).round() as u64);
    let lo = rate.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = rate.iter().cloned().fold(0.0, f64::max);
    // An unterminated excursion of any length is the knee (pathChirp's rule); only one that
    // consists of the last gap alone is too short to say anything, and its rate is the top of
    // the range anyway. (Counting L gaps here instead would call every available bandwidth
    // above `B_max / γ^(L-1)` "above range" for a chirp: 5.7 Mbit/s of the paper's 11.9.)
    let outcome = match knee {
        Some(k) if k <= 1 => Outcome::BelowRange { at_most: raw },
        Some(k) if !tail_lost && k + 1 >= gaps => Outcome::AboveRange { at_least: raw },
        Some(_) => Outcome::Estimate(raw),
        None => Outcome::AboveRange { at_least: raw },
    };
    // The queue-growth fit over every received packet (super::growth).
    let sizes: Vec<f64> = size.iter().map(|b| b.0 as f64).collect();
    let varying = sizes.iter().any(|&v| v != sizes[0]);
    let growth_fit = if cfg.growth_fit {
        let q_raw: Vec<f64> = q_raw.iter().map(|&v| (v - q_raw[0]) as f64).collect();
        let all = super::growth::fit(&q_raw, varying.then_some(&sizes[..]), &rate, &weight);
        // Growth made of abrupt spikes that came back down is no queue (`ABRUPT_RISE`).
        let spikes = abrupt_spikes(&q, &weight, &terminated, unterminated.map(|u| (u, unterminated_peak)), floor);
        match all {
            Some(g) if g.growth > floor && spikes.iter().any(|&s| s) => {
                let keep: Vec<bool> = spikes.iter().map(|&s| !s).collect();
                // A train that ended inside a stall is read from the packets before it.
                let ended_in_a_stall = spikes.last() == Some(&true);
                match super::growth::fit_kept(&q_raw, varying.then_some(&sizes[..]), &rate, &weight, Some(&keep)) {
                    Some(without) if without.growth <= floor || ended_in_a_stall => Some(without),
                    _ => all,
                }
            }
            _ => all,
        }
    } else {
        None
    };
    let outcome = match (shaper, growth_fit) {
        (Some(sh), _) => Outcome::Estimate(sh.rate),
        // On equal-size trains the excursions' "below range" stands: the fit cannot place a
        // knee before the train. On growing-size trains the fit, whose serialisation slope is
        // tied to the growth, tells a train queued from its first gap (below range) from one
        // whose serialisation the excursions could not remove: where no plateau of equal
        // per-byte increments exists (timestamp noise of the size of the increments: ±30 µs
        // against 38 µs on the testbed's second coarse train at 10 Mbit/s), every gap rose and
        // the excursions read "below range" on an idle link (issue 19, session 5).
        //
        // Both read "below range" when the excursions rose from the first gap and the fit puts
        // the crossing within the first `L` gaps: the fit weighs the late packets' large
        // delays most, and a pacer that sent the first gaps late (55 µs instead of 24 µs on
        // the testbed, 2 of 9 idle estimates at 10 Mbit/s) makes them probe too little for
        // the model; the fit then read 24–26 Mbit/s for a 500 Mbit/s coarse train on a
        // 10 Mbit/s link, whose queue grew from the first packet.
        (None, Some(g))
            if matches!(outcome, Outcome::BelowRange { .. }) && (!varying || g.rate <= rate[l_busy.min(gaps - 1)]) =>
        {
            outcome
        }
        (None, Some(g)) => {
            let fitted = Rate(g.rate.round() as u64);
            // Growth from the first gaps (a crossing within `EARLY_CROSSING` of them) that a
            // straight line in the packet sizes takes to within the floor is the train's
            // serialisation, not its queue (`super::growth`'s module doc, "Verdicts").
            let from_the_start = gaps > 1 && g.rate <= rate[1];
            let early = gaps > 1 && g.rate <= rate[((gaps as f64 * EARLY_CROSSING) as usize).min(gaps - 1)];
            if g.growth <= floor || (early && g.beyond_serialisation <= floor) {
                let top = if varying { ramp_top(&size, &own) } else { hi };
                Outcome::AboveRange { at_least: Rate(top.round() as u64) }
            } else if from_the_start {
                Outcome::BelowRange { at_most: Rate(rate[1].round() as u64) }
            } else {
                Outcome::Estimate(fitted)
            }
        }
        (None, None) => outcome,
    };
    TrainEstimate {
        outcome,
        probed: (Rate(lo.round() as u64), Rate(hi.round() as u64)),
        packets,
        received,
        lost,
        reordered,
        duplicates,
        knee: knee.map(|k| rx[k].index),
        knee_fit,
        shaper,
        growth_fit,
        excursions,
        size_slope_ns_per_byte: slope,
    }
}

/// Combines several trains: the mean of their values, labelled by the majority when more than
/// half are the same range result; inconclusive when no train has a value.
pub fn combine(outcomes: &[Outcome]) -> Outcome {
    let values: Vec<Rate> = outcomes.iter().filter_map(|o| o.value()).collect();
    if values.is_empty() {
        return Outcome::Inconclusive { reason: InconclusiveReason::NoneConclusive { trains: outcomes.len() as u32 } };
    }
    let mean = Rate(values.iter().map(|r| r.0 as u128).sum::<u128>() as u64 / values.len() as u64);
    let above = outcomes.iter().filter(|o| matches!(o, Outcome::AboveRange { .. })).count();
    let below = outcomes.iter().filter(|o| matches!(o, Outcome::BelowRange { .. })).count();
    if 2 * above > values.len() {
        Outcome::AboveRange { at_least: mean }
    } else if 2 * below > values.len() {
        Outcome::BelowRange { at_most: mean }
    } else {
        Outcome::Estimate(mean)
    }
}

/// pathChirp-style moving mean over the last `window` conclusive trains.
#[derive(Clone, Debug)]
pub struct Smoother {
    window: usize,
    recent: VecDeque<Outcome>,
}

impl Smoother {
    pub fn new(window: usize) -> Smoother {
        Smoother { window: window.max(1), recent: VecDeque::new() }
    }

    /// Adds one train's outcome (inconclusive ones are skipped) and returns the smoothed verdict.
    pub fn push(&mut self, o: &Outcome) -> Outcome {
        if o.value().is_some() {
            self.recent.push_back(o.clone());
            while self.recent.len() > self.window {
                self.recent.pop_front();
            }
        }
        self.current()
    }

    pub fn current(&self) -> Outcome {
        combine(&self.recent.iter().cloned().collect::<Vec<_>>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abw::{ChirpSpec, QuickSpec, TrainPacket};
    use crate::units::Time;

    /// A fluid single-bottleneck path: capacity `c` bit/s, fluid cross traffic `x(t)` bit/s,
    /// instantaneous cross-traffic bursts `(time s, bits)`, store-and-forward serialisation at
    /// the bottleneck, 20 ms propagation, receiver clock offset 5 s. Returns one record per
    /// packet, in order.
    fn fluid_path(
        schedule: &[TrainPacket],
        c: f64,
        x: &dyn Fn(f64) -> f64,
        bursts: &[(f64, f64)],
        buffer_bits: f64,
    ) -> Vec<ProbeRecord> {
        let start = 1.0; // train starts at t = 1 s on the sender clock
        let mut events: Vec<(f64, Option<usize>, f64)> = schedule
            .iter()
            .enumerate()
            .map(|(i, p)| (start + p.offset.as_secs_f64(), Some(i), p.size.0 as f64 * 8.0))
            .collect();
        events.extend(bursts.iter().map(|&(t, b)| (start + t, None, b)));
        events.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
        let mut backlog = 0.0;
        let mut t_prev = start;
        let mut out = vec![None; schedule.len()];
        for (t, who, bits) in events {
            // Between events the queue drains at c and fills at x (integrated in small steps).
            let steps = 20;
            let dt = (t - t_prev) / steps as f64;
            for s in 0..steps {
                let tm = t_prev + (s as f64 + 0.5) * dt;
                backlog = (backlog + (x(tm) - c) * dt).max(0.0);
            }
            t_prev = t;
            match who {
                Some(i) => {
                    if backlog + bits > buffer_bits {
                        out[i] = None; // dropped
                        continue;
                    }
                    backlog += bits;
                    let delay = backlog / c + 0.020;
                    out[i] = Some(t + delay + 5.0);
                }
                None => backlog += bits,
            }
        }
        super::harness::records(schedule, start, &out)
    }

    /// A packet-level FIFO of capacity `c` bit/s with Poisson cross traffic of 1000-byte
    /// packets at `x` bit/s (the PathQuick paper's Fig. 6 setting), infinite buffer, 26 ms
    /// propagation. The cross traffic starts 2 s before the train (steady state); `seed` picks
    /// the arrival sequence. Returns one record per probe packet.
    fn poisson_path(schedule: &[TrainPacket], c: f64, x: f64, seed: u64) -> Vec<ProbeRecord> {
        super::harness::noisy_path(schedule, c, x, 0.0, seed)
    }

    fn quick() -> Vec<TrainPacket> {
        QuickSpec::paper().solve().unwrap().schedule()
    }

    fn chirp() -> Vec<TrainPacket> {
        ChirpSpec::paper().design().unwrap().schedule()
    }

    fn est(records: &[ProbeRecord]) -> TrainEstimate {
        estimate_train(records, &EstimatorConfig::default())
    }

    #[test]
    fn no_queueing_is_above_range() {
        // 100 Mbit/s idle bottleneck: the train never queues (only serialisation grows).
        let r = est(&fluid_path(&quick(), 100e6, &|_| 0.0, &[], f64::INFINITY));
        match r.outcome {
            Outcome::AboveRange { at_least } => {
                assert!(at_least.as_kbps() > 11_000.0, "{at_least}")
            }
            o => panic!("expected above range, got {o:?}"),
        }
        assert_eq!(r.received, 125);
        assert!(r.size_slope_ns_per_byte > 79.0 && r.size_slope_ns_per_byte < 81.0, "{}", r.size_slope_ns_per_byte);
        // Without the size correction the growing packets look like self-queueing.
        let cfg = EstimatorConfig { size_correction: false, ..EstimatorConfig::default() };
        let raw = estimate_train(&fluid_path(&quick(), 100e6, &|_| 0.0, &[], f64::INFINITY), &cfg);
        assert!(matches!(raw.outcome, Outcome::BelowRange { .. }), "{:?}", raw.outcome);
    }

    #[test]
    fn clean_knee_pathquick() {
        // 12 Mbit/s bottleneck with constant cross traffic: A = 12 - x.
        for x in [2e6, 4.5e6, 6e6, 9e6] {
            let a = 12e6 - x;
            let r = est(&fluid_path(&quick(), 12e6, &move |_| x, &[], f64::INFINITY));
            let v = match r.outcome {
                Outcome::Estimate(v) => v.bps() as f64,
                o => panic!("x = {x}: expected an estimate, got {o:?}"),
            };
            // Within two resolution steps (2 × 96 kbps).
            assert!((v - a).abs() <= 2.0 * 96e3 + 1.0, "x = {x}: estimate {v} vs {a}");
            assert!(r.knee.is_some());
        }
    }

    #[test]
    fn clean_knee_pathchirp() {
        for x in [3e6, 6e6, 9e6] {
            let a = 12e6 - x;
            let r = est(&fluid_path(&chirp(), 12e6, &move |_| x, &[], f64::INFINITY));
            let v = match r.outcome {
                Outcome::Estimate(v) => v.bps() as f64,
                o => panic!("x = {x}: expected an estimate, got {o:?}"),
            };
            // Within one spread step (γ = 1.2).
            assert!(v <= a * 1.2 + 1.0 && v >= a / 1.2 - 1.0, "x = {x}: estimate {v} vs {a}");
        }
    }

    #[test]
    fn below_range_when_path_is_saturated() {
        // Cross traffic leaves 50 kbit/s, below B_min = 104 kbit/s.
        let r = est(&fluid_path(&quick(), 12e6, &|_| 12e6 - 50e3, &[], f64::INFINITY));
        assert!(matches!(r.outcome, Outcome::BelowRange { .. }), "{:?}", r.outcome);
        assert!(r.knee.unwrap() <= 1, "{:?}", r.knee);
    }

    #[test]
    fn bursty_excursions_do_not_fool_the_knee() {
        let a = 6e6;
        // A short burst (one 1000-byte cross packet at 20 ms) causes a short excursion that
        // ends within L packets: it must change nothing.
        let clean = est(&fluid_path(&quick(), 12e6, &|_| 6e6, &[], f64::INFINITY)).outcome.value().unwrap();
        let spiky = est(&fluid_path(&quick(), 12e6, &|_| 6e6, &[(0.0205, 8000.0)], f64::INFINITY));
        assert_eq!(spiky.outcome.value().unwrap(), clean);
        assert!(spiky.excursions.iter().any(|e| !e.busy && e.end.is_some()), "{:?}", spiky.excursions);
        // An on/off burst that saturates the link from 10 to 25 ms (x = 12 Mbit/s) makes a busy
        // excursion before the knee: the naive "first increase" reading would say ~1 Mbit/s;
        // the segmentation keeps the estimate near A (the busy gaps pull it down a little).
        let onoff = move |t: f64| {
            if (1.010..1.025).contains(&t) {
                12e6
            } else {
                6e6
            }
        };
        let r = est(&fluid_path(&quick(), 12e6, &onoff, &[], f64::INFINITY));
        let v = r.outcome.value().unwrap().bps() as f64;
        assert!(r.excursions.iter().any(|e| e.busy && e.end.is_some()), "{:?}", r.excursions);
        assert!((v - a).abs() < 0.15 * a, "estimate {v} vs {a}");
        assert!(r.knee.unwrap() > 50, "knee at {:?}", r.knee);
    }

    #[test]
    fn losses_are_explicit() {
        let base = fluid_path(&quick(), 12e6, &|_| 6e6, &[], f64::INFINITY);
        let clean = est(&base).outcome.value().unwrap().bps() as f64;
        // A few random losses below the knee: same estimate within one resolution step.
        let mut some = base.clone();
        for i in [7usize, 19, 33, 34, 48] {
            some[i].recv_time = None;
        }
        let r = est(&some);
        assert_eq!(r.lost, 5);
        assert!((r.outcome.value().unwrap().bps() as f64 - clean).abs() <= 96e3, "{:?}", r.outcome);
        // A small buffer overflows after the knee: tail losses, still an estimate near A.
        let small = fluid_path(&quick(), 12e6, &|_| 6e6, &[], 10_000.0 * 8.0);
        let r = est(&small);
        assert!(r.lost > 0, "no loss with a small buffer");
        assert!(matches!(r.outcome, Outcome::Estimate(_)), "{:?}", r.outcome);
        assert!((r.outcome.value().unwrap().bps() as f64 - 6e6).abs() <= 2.0 * 96e3);
        // Heavy loss: inconclusive, not a number.
        let mut heavy = base.clone();
        for rec in heavy.iter_mut().step_by(3) {
            rec.recv_time = None;
        }
        let r = est(&heavy);
        assert!(matches!(r.outcome, Outcome::Inconclusive { .. }), "{:?}", r.outcome);
        assert_eq!(r.lost, 42);
        // Nothing received.
        let none: Vec<ProbeRecord> = base.iter().map(|r| ProbeRecord { recv_time: None, ..*r }).collect();
        assert!(matches!(est(&none).outcome, Outcome::Inconclusive { .. }));
        assert!(matches!(est(&[]).outcome, Outcome::Inconclusive { .. }));
    }

    #[test]
    fn order_of_records_and_reordering() {
        let base = fluid_path(&quick(), 12e6, &|_| 6e6, &[], f64::INFINITY);
        let clean = est(&base);
        // Records in any order, with duplicates: same result.
        let mut shuffled = base.clone();
        shuffled.reverse();
        shuffled.swap(3, 90);
        shuffled.push(base[10]);
        let r = est(&shuffled);
        assert_eq!(r.outcome, clean.outcome);
        assert_eq!(r.duplicates, 1);
        assert_eq!(r.reordered, 0);
        // Two packets that overtook each other on the path: counted, estimate kept.
        let mut swapped = base.clone();
        let (a, b) = (swapped[20].recv_time, swapped[21].recv_time);
        swapped[20].recv_time = b.map(|t| Time(t.0 + 1000));
        swapped[21].recv_time = a;
        let r = est(&swapped);
        assert_eq!(r.reordered, 1);
        assert!((r.outcome.value().unwrap().bps() as f64 - 6e6).abs() <= 2.0 * 96e3, "{:?}", r.outcome);
        // Massive reordering: inconclusive.
        let mut mixed = base.clone();
        for k in (0..120).step_by(4) {
            let t = mixed[k].recv_time;
            mixed[k].recv_time = mixed[k + 3].recv_time;
            mixed[k + 3].recv_time = t;
        }
        assert!(matches!(est(&mixed).outcome, Outcome::Inconclusive { .. }));
    }

    #[test]
    fn send_jitter_does_not_make_absurd_rates() {
        // Packets 30, 45 and 100 leave 600 µs late (the sender was preempted), the next ones on
        // time: one 1.6 ms gap and one 0.4 ms gap each (a 0.4 ms gap probes 2.5× the nominal
        // rate). The knee is near packet 62 (A = 6 Mbit/s); by packet 100 the queue is deep.
        let mut sched = quick();
        for i in [30usize, 45, 100] {
            sched[i].offset += Dur::from_micros(600);
        }
        let r = est(&fluid_path(&sched, 12e6, &|_| 6e6, &[], f64::INFINITY));
        let v = r.outcome.value().unwrap().bps() as f64;
        assert!((v - 6e6).abs() <= 3.0 * 96e3, "{v}");
        assert!(r.probed.1.bps() < 13_000_000, "probed up to {}", r.probed.1);
    }

    #[test]
    fn knee_fit_sees_through_a_token_bucket() {
        // A 6 Mbit/s token bucket with a 3000-byte burst and no cross traffic: queueing shows
        // only once the burst is spent, ~22 packets after R_i = 6 Mbit/s.
        let sched = quick();
        let (rate, depth) = (6e6, 3000.0 * 8.0);
        let (mut tokens, mut t_prev, mut free_at) = (depth, 1.0f64, 0.0f64);
        let records: Vec<ProbeRecord> = sched
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let t = 1.0 + p.offset.as_secs_f64();
                let bits = p.size.0 as f64 * 8.0;
                // Leaves when the queue ahead is gone and the bucket holds its bits.
                let start = t.max(free_at);
                tokens = (tokens + (start - t_prev) * rate).min(depth);
                let wait = ((bits - tokens) / rate).max(0.0);
                let leave = start + wait;
                tokens = tokens + wait * rate - bits;
                t_prev = leave;
                free_at = leave;
                ProbeRecord {
                    index: i as u32,
                    send_time: Time::from_secs_f64(t),
                    recv_time: Some(Time::from_secs_f64(leave + 0.01)),
                    size: p.size,
                }
            })
            .collect();
        let plain = est(&records).outcome.value().unwrap().bps() as f64;
        let cfg = EstimatorConfig { knee_fit: true, ..EstimatorConfig::default() };
        let fitted = estimate_train(&records, &cfg);
        let v = fitted.outcome.value().unwrap().bps() as f64;
        assert!(plain - rate > 1.0e6, "the bucket should bias the plain knee: {plain}");
        assert!((v - rate).abs() < 0.3e6, "fitted {v}, plain {plain}");
        assert!(fitted.knee_fit.is_some());
        // On a plain FIFO the fit stays within a resolution step of the truth.
        let r = estimate_train(&fluid_path(&quick(), 12e6, &|_| 6e6, &[], f64::INFINITY), &cfg);
        assert!((r.outcome.value().unwrap().bps() as f64 - 6e6).abs() <= 96e3 + 1.0, "{:?}", r.outcome);
    }

    #[test]
    fn smoothing_over_trains() {
        let mut s = Smoother::new(3);
        assert!(matches!(s.current(), Outcome::Inconclusive { .. }));
        s.push(&Outcome::Estimate(Rate::from_mbps(4)));
        s.push(&Outcome::Inconclusive { reason: InconclusiveReason::SameSendInstant });
        s.push(&Outcome::Estimate(Rate::from_mbps(6)));
        assert_eq!(s.current(), Outcome::Estimate(Rate::from_mbps(5)));
        s.push(&Outcome::Estimate(Rate::from_mbps(8)));
        s.push(&Outcome::Estimate(Rate::from_mbps(10)));
        assert_eq!(s.current(), Outcome::Estimate(Rate::from_mbps(8)));
        let above = [
            Outcome::AboveRange { at_least: Rate::from_mbps(12) },
            Outcome::AboveRange { at_least: Rate::from_mbps(12) },
            Outcome::Estimate(Rate::from_mbps(9)),
        ];
        assert_eq!(combine(&above), Outcome::AboveRange { at_least: Rate::from_mbps(11) });
    }

    #[test]
    fn chirp_knee_near_the_top_is_an_estimate() {
        // A knee a few gaps before the end of a chirp is a knee, not "above range": with
        // γ = 1.2 the last L = 5 gaps span 2.5× in rate (4.8–11.9 Mbit/s), so a gap-count rule
        // would call A = 6 or 9 Mbit/s on a 12 Mbit/s link above a range that reaches 11.9.
        for x in [3e6, 6e6] {
            let r = est(&fluid_path(&chirp(), 12e6, &move |_| x, &[], f64::INFINITY));
            assert!(matches!(r.outcome, Outcome::Estimate(_)), "x = {x}: {:?}", r.outcome);
        }
        // An idle path: above range, and the bound is the top rate, not the one before it.
        let r = est(&fluid_path(&chirp(), 100e6, &|_| 0.0, &[], f64::INFINITY));
        match r.outcome {
            Outcome::AboveRange { at_least } => assert!(at_least.as_mbps() > 11.5, "{at_least}"),
            o => panic!("expected above range, got {o:?}"),
        }
        assert!(r.probed.1.as_mbps() > 11.5, "{:?}", r.probed);
        // Poisson cross traffic of 1000-byte packets (the paper's Fig. 6), A = 6 of 12 Mbit/s:
        // most chirps give an estimate, and their median is within two spread steps of A.
        let mut above = 0;
        let mut values = Vec::new();
        for seed in 0..40 {
            let r = est(&poisson_path(&chirp(), 12e6, 6e6, seed));
            if matches!(r.outcome, Outcome::AboveRange { .. }) {
                above += 1;
            }
            values.extend(r.outcome.value().map(|v| v.as_mbps()));
        }
        values.sort_by(f64::total_cmp);
        let median = values[values.len() / 2];
        assert!(above <= 12, "{above} of 40 chirps above range at A = 6 Mbit/s");
        assert!(median > 6.0 / 1.44 && median < 6.0 * 1.44, "median {median}");
        // PathQuick on the same path: estimates, not range results.
        for seed in 0..10 {
            let r = est(&poisson_path(&quick(), 12e6, 6e6, seed));
            assert!(matches!(r.outcome, Outcome::Estimate(_)), "seed {seed}: {:?}", r.outcome);
        }
    }

    #[test]
    fn ramp_decrease_factor_removes_the_detection_lag() {
        // PathQuick under Poisson cross traffic of 1000-byte packets on 12 Mbit/s: with
        // pathChirp's F = 1.5 the knee is found well after the crossing (upward bias); with
        // F = 5 the median comes back to the truth, and the spread does not grow.
        let ramp = EstimatorConfig { decrease_factor: RAMP_DECREASE_FACTOR, ..EstimatorConfig::default() };
        for x in [3e6, 6e6, 9e6] {
            let truth = (12e6 - x) / 1e6;
            let (mut paper, mut tuned) = (Vec::new(), Vec::new());
            for seed in 0..41 {
                let records = poisson_path(&quick(), 12e6, x, 100 + seed);
                paper.extend(est(&records).outcome.value().map(|v| v.as_mbps() - truth));
                tuned.extend(estimate_train(&records, &ramp).outcome.value().map(|v| v.as_mbps() - truth));
            }
            let median = |v: &mut Vec<f64>| {
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            let mae = |v: &[f64]| v.iter().map(|e| e.abs()).sum::<f64>() / v.len() as f64;
            let (mp, mt) = (median(&mut paper), median(&mut tuned));
            assert!(mp > 0.8, "A = {truth}: F = 1.5 median error {mp:+.2} (expected the lag)");
            assert!(mt.abs() < 0.8, "A = {truth}: F = 5 median error {mt:+.2}");
            assert!(mae(&tuned) < mae(&paper), "A = {truth}: MAE {} vs {}", mae(&tuned), mae(&paper));
        }
    }

    #[test]
    fn idle_store_and_forward_path_is_above_range() {
        // Three store-and-forward links (100, 12, 100 Mbit/s), no cross traffic, timestamps in
        // whole nanoseconds as a simulator or a kernel gives them. After the size correction the
        // delays differ only by rounding residues; those must not read as rises (they once made
        // the ΔP = 24 B design "estimate" 5.4 Mbit/s here).
        let mut light = QuickSpec::paper();
        light.delta_p = Some(Bytes(24));
        light.n = Some(63);
        light.p_n = None;
        for sched in [quick(), light.solve().unwrap().schedule(), chirp()] {
            let rates = [100e6, 12e6, 100e6];
            let mut free = [0u64; 3];
            let records: Vec<ProbeRecord> = sched
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let send = 1_000_000_000 + p.offset.0;
                    let mut t = send;
                    for l in 0..3 {
                        let tx = (p.size.0 as f64 * 8.0 / rates[l] * 1e9).round() as u64;
                        free[l] = free[l].max(t) + tx;
                        t = free[l] + 1_000_000;
                    }
                    ProbeRecord { index: i as u32, send_time: Time(send), recv_time: Some(Time(t)), size: p.size }
                })
                .collect();
            let r = est(&records);
            match r.outcome {
                Outcome::AboveRange { at_least } => {
                    assert!(at_least.as_mbps() > 11.5, "{at_least}")
                }
                o => panic!("{} packets: expected above range, got {o:?} ({:?})", sched.len(), r.excursions),
            }
        }
    }
}

/// The queue-growth fit decides "below range" itself on growing-size trains (issue 19,
/// session 5).
#[cfg(test)]
mod growth_fit_verdicts {
    use super::harness::noisy_path;
    use super::*;
    use crate::abw::autorange::AutoRange;
    use crate::abw::TrainPacket;

    fn fit_config() -> EstimatorConfig {
        EstimatorConfig {
            delay_floor: Dur::from_micros(20),
            decrease_factor: RAMP_DECREASE_FACTOR,
            growth_fit: true,
            ..EstimatorConfig::default()
        }
    }

    #[test]
    fn a_coarse_train_crossing_an_idle_link_with_timestamp_noise_is_an_estimate() {
        // The testbed's second coarse train on an idle 10 Mbit/s link: 36 Mbit/s top, 375 µs
        // spacing, 48-byte steps; each step adds 38 µs of serialisation, the receive times
        // wander by ±30 µs, so no serialisation plateau is found and the excursions saw one
        // endless rise from the first gap ("below range" in 4 of 9 idle estimates on the
        // testbed). The available bandwidth is 10 Mbit/s, inside the train's range.
        let plan = AutoRange::new(Rate::from_mbps(500), Bytes(48), Bytes(1500));
        let first = plan.coarse(Rate::from_mbps(500)).unwrap();
        let second = plan.coarse(first.b_min()).unwrap();
        let sched = second.schedule();
        let mut below = 0;
        for seed in 0..20 {
            let r = estimate_train(&noisy_path(&sched, 10e6, 0.0, 30_000.0, seed), &fit_config());
            match r.outcome {
                Outcome::Estimate(a) => assert!((a.as_mbps() - 10.0).abs() < 2.0, "seed {seed}: {a}"),
                Outcome::BelowRange { .. } => below += 1,
                o => panic!("seed {seed}: {o:?}"),
            }
        }
        assert_eq!(below, 0, "trains read below range on an idle link inside their range");
    }

    #[test]
    fn a_coarse_train_whose_first_gaps_were_sent_late_is_still_below_range() {
        // The 500 Mbit/s coarse train on an idle 10 Mbit/s link, its first two gaps 55 µs
        // instead of 24 µs (the testbed's pacer; the rest of the train shifted). The session-6
        // coarse train (31 packets): the session-7 one (67 packets, 22-byte steps) read
        // 17 Mbit/s here for seed 1, in range, and the fine train around it covers A.
        let plan = AutoRange::new(Rate::from_mbps(500), Bytes(48), Bytes(1500)).with_coarse_sigma(None);
        let mut sched = plan.coarse(Rate::from_mbps(500)).unwrap().schedule();
        for (i, p) in sched.iter_mut().enumerate().skip(1) {
            p.offset = Dur(p.offset.0 + 31_000 * i.min(2) as u64);
        }
        for seed in 0..20 {
            let r = estimate_train(&noisy_path(&sched, 10e6, 0.0, 10_000.0, seed), &fit_config());
            assert!(matches!(r.outcome, Outcome::BelowRange { .. }), "seed {seed}: {:?}", r.outcome);
        }
    }

    #[test]
    fn an_idle_fast_links_serialisation_with_a_few_stalls_is_not_a_queue_from_the_start() {
        // The testbed's 126–500 Mbit/s train (376 packets, 3-byte steps every 24 µs) on the
        // idle 500 Mbit/s link (session 18): its delays rise by its serialisation, 20 µs from
        // the first packet to the last, and the box stalled three times for 30–40 µs. The fit
        // put the crossing at the lowest rate, with a growth of 20.3 µs (just over the floor)
        // and a serialisation slope of 1/(83 Gbit/s): the whole rise taken as queue. What a
        // straight line in the sizes cannot take is a few µs: above range, not "below 127
        // Mbit/s", after which the ladder's answer train read 4.6 Mbit/s.
        let records = harness::recorded(include_str!("fixtures/fifo500_idle_serialisation.csv"));
        let g = above_the_top(&records);
        assert!(g.growth > 20_000.0 && g.beyond_serialisation < 10_000.0, "{g:?}");
        // A train that did queue from its first gap keeps its verdict: the same train on the
        // 500 Mbit/s link with 430 Mbit/s of Poisson cross traffic (A = 70 Mbit/s).
        for (seed, r) in through_cross(&records, 430e6).iter().enumerate() {
            let g = r.growth_fit.expect("the fit ran");
            assert!(g.beyond_serialisation > 200_000.0, "seed {seed}: {g:?}");
            assert!(matches!(r.outcome, Outcome::BelowRange { .. }), "seed {seed}: {:?}", r.outcome);
        }
    }

    /// `records` (a train on the idle 500 Mbit/s link) read "above range" at the 500 Mbit/s top;
    /// its growth fit.
    fn above_the_top(records: &[ProbeRecord]) -> crate::abw::growth::GrowthFit {
        let r = estimate_train(records, &fit_config());
        match r.outcome {
            Outcome::AboveRange { at_least } => assert!((at_least.as_mbps() - 500.0).abs() < 5.0, "{at_least}"),
            o => panic!("{o:?}"),
        }
        r.growth_fit.expect("the fit ran")
    }

    /// The schedule `records` were sent at, through a 500 Mbit/s link with `cross` bit/s of
    /// Poisson cross traffic and ±1 µs of receive-time noise, judged for five seeds.
    fn through_cross(records: &[ProbeRecord], cross: f64) -> Vec<TrainEstimate> {
        let t0 = records[0].send_time.0;
        let sched: Vec<TrainPacket> =
            records.iter().map(|r| TrainPacket { offset: Dur(r.send_time.0 - t0), size: r.size }).collect();
        (0..5).map(|seed| estimate_train(&noisy_path(&sched, 500e6, cross, 1_000.0, seed), &fit_config())).collect()
    }

    #[test]
    fn an_idle_fast_links_stalls_make_no_early_knee() {
        // Two answer trains (126–500 Mbit/s) on the testbed's idle 500 Mbit/s link (session
        // 21): the first packet 38 and 76 µs late, stalls of 80–300 µs that come back to the
        // floor, and the serialisation's 20 µs rise. The fit put the crossing 2 and 18 % of
        // the way in (134 and 195 Mbit/s), the growth a straight line in the sizes; above
        // range by `EARLY_CROSSING`.
        for csv in
            [include_str!("fixtures/fifo500_idle_stall_134.csv"), include_str!("fixtures/fifo500_idle_stall_195.csv")]
        {
            let records = harness::recorded(csv);
            above_the_top(&records);
            // The crossing past the second gap, the growth a straight line in the sizes. (The
            // first train's stalls are abrupt spikes too: `ABRUPT_RISE` reads it above range
            // as well, and its reported fit is the one without them.)
            let g = whole_train_fit(&records);
            assert!(g.rate > 130e6 && g.beyond_serialisation <= 20_000.0, "{g:?}");
            // A queue that starts as early is still a queue, never "above range": the same train
            // with 300 Mbit/s of Poisson cross traffic (A = 200 Mbit/s, 20 % of the way in).
            for (seed, r) in through_cross(&records, 300e6).iter().enumerate() {
                assert!(!matches!(r.outcome, Outcome::AboveRange { .. }), "seed {seed}: {:?}", r.outcome);
            }
        }
    }

    #[test]
    fn a_stalls_abrupt_spike_that_drains_back_is_no_queue() {
        // An answer train (126–500 Mbit/s) on the testbed's idle 500 Mbit/s link (session 22):
        // 312 packets at the floor, then one gap rose by 1.1 ms and the next 48 drained back at
        // 22 µs a gap. Least squares over every packet took the spike as a queue from 270 Mbit/s.
        // A queue stays a queue with a spike on it (its delay above packet 312's).
        stalled_idle_train_reads_above_range(
            include_str!("fixtures/fifo500_idle_stall_spike_270.csv"),
            300e6,
            100_000.0,
            312,
        );
        // The first coarse train of another estimate: two stalls of 120 and 180 µs that drained
        // back read 206 Mbit/s; now above range, and the ladder's next train is its answer.
        let coarse = harness::recorded(include_str!("fixtures/fifo500_idle_stall_spike_coarse.csv"));
        let e = estimate_train(&coarse, &fit_config());
        assert!(matches!(e.outcome, Outcome::AboveRange { .. }), "{:?} {:?}", e.outcome, e.growth_fit);
    }

    /// The recorded idle 500 Mbit/s train `csv`: its whole-train fit reads below `whole_below`
    /// bit/s with more than `whole_growth` ns of growth, the estimator reads "above range" with
    /// growth within the 20 µs floor, and the same schedule through 300 Mbit/s of cross traffic
    /// with the recorded delays after packet `from` added is still a queue.
    fn stalled_idle_train_reads_above_range(csv: &str, whole_below: f64, whole_growth: f64, from: usize) {
        let records = harness::recorded(csv);
        let all = whole_train_fit(&records);
        assert!(all.rate < whole_below && all.growth > whole_growth, "the whole train's fit: {all:?}");
        let g = above_the_top(&records);
        assert!(g.growth <= 20_000.0, "{g:?}");
        still_a_queue_with_the_recorded_stalls(&records, from);
    }

    #[test]
    fn a_stall_still_draining_when_the_train_ends_is_no_knee() {
        // An answer train on the idle 500 Mbit/s link at RTT 100 ms (session 22): stalls of 170
        // and 120 µs drained back, and a third of 130 µs at packet 324 was still draining at
        // the end. The whole train's fit read 185 Mbit/s.
        // A queue stays a queue with these stalls on it (their delay above packet 200's).
        let csv = include_str!("fixtures/fifo500_idle_stall_unterminated_185.csv");
        stalled_idle_train_reads_above_range(csv, 300e6, 40_000.0, 200);
    }

    #[test]
    fn a_stall_whose_drain_carries_late_packets_it_gives_back_is_no_knee() {
        // An answer train on the idle 500 Mbit/s link at RTT 10 ms (session 22, e6aaaaf's run):
        // a 170 µs stall at packet 328 drained to the end, with rises of 30 and 17 µs over one
        // gap in the drain that the delay gave back two gaps later. The fit over every packet
        // read 383 Mbit/s, and so did session 22's rule, which counted those rises as growth.
        let csv = include_str!("fixtures/fifo500_idle_stall_given_back_383.csv");
        stalled_idle_train_reads_above_range(csv, 400e6, 40_000.0, 300);
    }

    #[test]
    fn a_train_that_ended_in_a_stall_is_read_from_the_packets_before_it() {
        // Another idle answer train at RTT 10 ms (session 22): an 830 µs stall at packet 354 of
        // 376, still draining at the end. The fit over every packet read 441 Mbit/s (12 % of
        // `C` off); the fit before the stall grows by 28 µs, just over the floor, at 468.
        let records = harness::recorded(include_str!("fixtures/fifo500_idle_stall_at_the_end_441.csv"));
        let all = whole_train_fit(&records);
        assert!(all.rate < 445e6 && all.growth > 400_000.0, "the whole train's fit: {all:?}");
        let e = estimate_train(&records, &fit_config());
        match e.outcome {
            Outcome::Estimate(r) => assert!(r.as_mbps() > 460.0, "{r}"),
            Outcome::AboveRange { .. } => {}
            o => panic!("{o:?}"),
        }
        still_a_queue_with_the_recorded_stalls(&records, 330);
    }

    /// The schedule `records` (an idle 500 Mbit/s answer train) were sent at, through 300 Mbit/s
    /// of Poisson cross traffic (A = 200 Mbit/s), with each packet after `from` delayed as much
    /// more as its recorded delay exceeds packet `from`'s: still a queue, never "above range",
    /// for five draws of the cross traffic.
    fn still_a_queue_with_the_recorded_stalls(records: &[ProbeRecord], from: usize) {
        let t0 = records[0].send_time.0;
        let sched: Vec<TrainPacket> =
            records.iter().map(|r| TrainPacket { offset: Dur(r.send_time.0 - t0), size: r.size }).collect();
        let delay = |r: &ProbeRecord| r.recv_time.unwrap().0 - r.send_time.0;
        let base = delay(&records[from]);
        for seed in 0..5 {
            let mut stalled = noisy_path(&sched, 500e6, 300e6, 1_000.0, seed);
            for (r, recorded) in stalled.iter_mut().zip(records).skip(from + 1) {
                let extra = delay(recorded).saturating_sub(base);
                r.recv_time = r.recv_time.map(|t| crate::units::Time(t.0 + extra));
            }
            let e = estimate_train(&stalled, &fit_config());
            let g = e.growth_fit.expect("the fit ran");
            assert!(
                !matches!(e.outcome, Outcome::AboveRange { .. }) && g.growth > 100_000.0,
                "seed {seed}: {:?} {g:?}",
                e.outcome
            );
        }
    }

    #[test]
    fn an_unterminated_excursion_is_a_spike_only_if_it_rose_abruptly_and_drains() {
        // Floor 20 µs, 24 µs gaps; the excursion starts at packet 9 with a 150 µs rise in one gap.
        let weight = vec![24_000.0; 29];
        let spike_of = |q: &[f64]| {
            let peak = q[10..].iter().fold(0.0f64, |a, &v| a.max(v - q[9]));
            abrupt_spikes(q, &weight, &[], Some((9, peak)), 20_000.0)
        };
        // Draining 5 µs a gap to the end: a spike from packet 10 on.
        let mut q = vec![0.0; 30];
        for (k, v) in q.iter_mut().enumerate().skip(10) {
            *v = 150_000.0 - 5_000.0 * (k - 10) as f64;
        }
        let s = spike_of(&q);
        assert!(s[10..].iter().all(|&x| x) && !s[9], "{s:?}");
        // Holding its height (a queue that no longer drains): no spike.
        let held: Vec<f64> = q.iter().enumerate().map(|(k, &v)| if k >= 10 { 150_000.0 } else { v }).collect();
        assert!(spike_of(&held).iter().all(|&x| !x));
        // Draining, but rising again by 30 µs a gap over three gaps later on (growth a train
        // can make): no spike.
        let mut grown = q.clone();
        for (k, v) in grown.iter_mut().enumerate().skip(20) {
            *v += 30_000.0 * (k - 19).min(3) as f64;
        }
        assert!(spike_of(&grown).iter().all(|&x| !x));
        // Draining, with a rise of 35 µs in one gap (not abrupt) that the drain gives back in
        // the next (a late packet in a stall's drain, session 23): still a spike.
        let mut bumped = q.clone();
        bumped[21] += 40_000.0;
        assert!(spike_of(&bumped)[10..].iter().all(|&x| x));
        // The same rise held to the end: no spike.
        let mut held_rise = q.clone();
        held_rise[21..].iter_mut().for_each(|v| *v = q[20] + 35_000.0);
        assert!(spike_of(&held_rise).iter().all(|&x| !x));
        // Drained to 90 µs at packet 22, then turned up 4 µs a gap (under the floor per gap, 28 µs
        // in all; a crossing after the stall): no spike.
        let mut turned = q.clone();
        for (k, v) in turned.iter_mut().enumerate().skip(23) {
            *v = q[22] + 4_000.0 * (k - 22) as f64;
        }
        assert!(spike_of(&turned).iter().all(|&x| !x));
    }

    /// The queue-growth fit over every packet of `records` (all received, in order, sent at
    /// one spacing).
    fn whole_train_fit(records: &[ProbeRecord]) -> crate::abw::growth::GrowthFit {
        let delay = |r: &ProbeRecord| (r.recv_time.unwrap().0 - r.send_time.0) as f64;
        let q: Vec<f64> = records.iter().map(|r| delay(r) - delay(&records[0])).collect();
        let sizes: Vec<f64> = records.iter().map(|r| r.size.0 as f64).collect();
        let weight: Vec<f64> = records.windows(2).map(|w| (w[1].send_time.0 - w[0].send_time.0) as f64).collect();
        let rate: Vec<f64> = records[1..].iter().zip(&weight).map(|(r, w)| r.size.0 as f64 * 8e9 / w).collect();
        crate::abw::growth::fit(&q, Some(&sizes), &rate, &weight).unwrap()
    }

    #[test]
    fn only_an_abrupt_rise_makes_a_spike() {
        // Two excursions over 24 µs gaps, floor 20 µs: one rises 150 µs in one gap, the other
        // 100 µs over ten; both drain back.
        let mut q = vec![0.0; 40];
        for k in 0..10 {
            q[5 + k] = 150_000.0 - 15_000.0 * k as f64;
            q[21 + k] = 10_000.0 * (k + 1) as f64;
            q[31 + k.min(8)] = 100_000.0 - 10_000.0 * (k + 2) as f64;
        }
        q[39] = 0.0;
        let weight = vec![24_000.0; 39];
        let spikes = abrupt_spikes(&q, &weight, &[(4, 15, 150_000.0), (20, 39, 100_000.0)], None, 20_000.0);
        assert!(spikes[5..14].iter().all(|&s| s) && !spikes[4], "{spikes:?}");
        assert!(spikes[20..].iter().all(|&s| !s), "{spikes:?}");
        // A spike lower than two floors is not one, however abrupt.
        assert!(abrupt_spikes(&q, &weight, &[(4, 15, 39_000.0)], None, 20_000.0).iter().all(|&s| !s));
    }

    #[test]
    fn an_idle_trains_top_is_its_largest_packet_over_its_spacing_not_a_pacing_slip() {
        // The same train on the same idle link, another estimate: two packets sent late made
        // gaps of 42.6 and 8.2 µs, and the median of three took 21.1 µs for the last gaps'
        // rates (567 Mbit/s). The train was sent every 24 µs: 1500 bytes over it is 500 Mbit/s.
        let records = harness::recorded(include_str!("fixtures/fifo500_idle_pacing_slip.csv"));
        let r = estimate_train(&records, &fit_config());
        assert!(r.probed.1.as_mbps() > 560.0, "the slip is in the gap rates: {:?}", r.probed);
        match r.outcome {
            Outcome::AboveRange { at_least } => assert!((at_least.as_mbps() - 500.0).abs() < 1.0, "{at_least}"),
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn a_train_queued_from_its_first_packet_is_still_below_range() {
        // The first coarse train (about 23–500 Mbit/s) on a 10 Mbit/s link with 3 Mbit/s of cross
        // traffic: every gap probes more than A = 7 Mbit/s.
        let plan = AutoRange::new(Rate::from_mbps(500), Bytes(48), Bytes(1500));
        let sched = plan.coarse(Rate::from_mbps(500)).unwrap().schedule();
        for seed in 0..20 {
            let r = estimate_train(&noisy_path(&sched, 10e6, 3e6, 10_000.0, seed), &fit_config());
            assert!(matches!(r.outcome, Outcome::BelowRange { .. }), "seed {seed}: {:?}", r.outcome);
        }
    }
}

/// An accuracy harness for the estimator on a packet-level FIFO with Poisson cross traffic and
/// timestamp noise: `cargo test --release -p headroom-core abw::excursion::harness -- --ignored --nocapture`.
#[cfg(test)]
pub(crate) mod harness {
    use super::*;
    use crate::abw::autorange::AutoRange;
    use crate::abw::TrainPacket;
    use crate::rng::Rng;
    use crate::units::Time;

    /// A train recorded on the testbed (`probe-bench --dump`, fixtures/): index, size, send and
    /// receive times (ns).
    pub fn recorded(csv: &str) -> Vec<ProbeRecord> {
        csv.lines()
            .skip(1)
            .map(|l| {
                let f: Vec<u64> = l.split(',').map(|v| v.parse().unwrap()).collect();
                ProbeRecord {
                    index: f[0] as u32,
                    size: Bytes(f[1]),
                    send_time: Time(f[2]),
                    recv_time: Some(Time(f[3])),
                }
            })
            .collect()
    }

    /// `poisson_path` with receive-time noise (uniform ±`jitter_ns`) and a link shared from t = 0.
    pub fn noisy_path(schedule: &[TrainPacket], c: f64, x: f64, jitter_ns: f64, seed: u64) -> Vec<ProbeRecord> {
        let mut rng = Rng::new(seed);
        let start = 2.0;
        let end = start + schedule.last().map(|p| p.offset.as_secs_f64()).unwrap_or(0.0);
        let mut arrivals: Vec<(f64, Option<usize>, f64)> = schedule
            .iter()
            .enumerate()
            .map(|(i, p)| (start + p.offset.as_secs_f64(), Some(i), p.size.0 as f64 * 8.0))
            .collect();
        if x > 0.0 {
            let per_sec = x / 8000.0;
            let mut t = 0.0;
            loop {
                t += rng.exponential(1.0 / per_sec);
                if t > end {
                    break;
                }
                arrivals.push((t, None, 8000.0));
            }
        }
        arrivals.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut free_at = 0.0f64;
        let mut out = vec![None; schedule.len()];
        for (t, who, bits) in arrivals {
            free_at = free_at.max(t) + bits / c;
            if let Some(i) = who {
                out[i] = Some(free_at + 0.026 + rng.uniform_range(-jitter_ns, jitter_ns) * 1e-9);
            }
        }
        records(schedule, start, &out)
    }

    /// One record per packet of `schedule` sent from `start` (s), received at `out` (s, or lost).
    pub fn records(schedule: &[TrainPacket], start: f64, out: &[Option<f64>]) -> Vec<ProbeRecord> {
        schedule
            .iter()
            .enumerate()
            .map(|(i, p)| ProbeRecord {
                index: i as u32,
                send_time: Time::from_secs_f64(start + p.offset.as_secs_f64()),
                recv_time: out[i].map(Time::from_secs_f64),
                size: p.size,
            })
            .collect()
    }

    #[test]
    #[ignore]
    fn harness() {
        let cfg = EstimatorConfig {
            delay_floor: Dur::from_micros(20),
            decrease_factor: RAMP_DECREASE_FACTOR,
            ..EstimatorConfig::default()
        };
        let plan = AutoRange::new(Rate::from_mbps(500), Bytes(48), Bytes(1500));
        for c in [10e6, 100e6] {
            for load in [0.0, 0.3, 0.6, 0.9] {
                let a = c * (1.0 - load);
                for (a0_factor, fit, dp, top) in [
                    (1.0, false, 12, 2.0),
                    (1.0, true, 12, 2.0),
                    (1.3, true, 12, 2.0),
                    (0.8, true, 12, 2.0),
                    (1.0, true, 6, 2.0),
                ] {
                    let cfg = EstimatorConfig { growth_fit: fit, ..cfg };
                    let a0 = Rate((a * a0_factor) as u64);
                    let _ = &plan;
                    let d = crate::abw::QuickSpec {
                        b_max: Some(Rate((a0.bps() as f64 * top) as u64)),
                        p_n: Some(Bytes(1500)),
                        p_1: Some(Bytes(48)),
                        delta_p: Some(Bytes(dp)),
                        max_size: Bytes(1500),
                        min_size: Bytes(48),
                        ..crate::abw::QuickSpec::default()
                    }
                    .solve()
                    .unwrap();
                    let sched = d.schedule();
                    let mut signed: Vec<f64> = (0..40)
                        .map(|s| {
                            let r = estimate_train(&noisy_path(&sched, c, c * load, 10_000.0, 100 + s), &cfg);
                            r.outcome.value().map_or(100.0, |v| 100.0 * (v.bps() as f64 - a) / c)
                        })
                        .collect();
                    let mut errs: Vec<f64> = signed.iter().map(|e| e.abs()).collect();
                    errs.sort_by(f64::total_cmp);
                    signed.sort_by(f64::total_cmp);
                    println!(
                        "C {:>4} Mbit/s load {:.1} A0 x{a0_factor} fit {fit:<5} dP {dp} top x{top}: T_quick {:>6.1} us N {:>3} top {:>6.1} len {:>5.1} ms: median |e| {:>5.1} % p90 {:>5.1} % median e {:>+5.1} %",
                        c / 1e6,
                        load,
                        d.t_quick.0 as f64 / 1e3,
                        d.n,
                        d.b_max().as_mbps(),
                        d.train_length().as_secs_f64() * 1e3,
                        errs[20],
                        errs[36],
                        signed[20]
                    );
                }
            }
        }
    }
}

/// The fine train's length rule (`autorange::busy_window`, σ = 5 % and 2.5 %) against the
/// paper's `ΔP` = 12 B train on the same packet-level path: `cargo test --release -p headroom-core
/// abw::excursion::harness_windows -- --ignored --nocapture`.
#[cfg(test)]
mod harness_windows {
    use super::harness::noisy_path;
    use super::*;
    use crate::abw::autorange::AutoRange;

    #[test]
    #[ignore]
    fn harness_windows() {
        let cfg = EstimatorConfig {
            delay_floor: Dur::from_micros(20),
            decrease_factor: RAMP_DECREASE_FACTOR,
            growth_fit: true,
            ..EstimatorConfig::default()
        };
        let plan = AutoRange::new(Rate::from_mbps(500), Bytes(48), Bytes(1500));
        for c in [10e6, 100e6, 500e6] {
            for load in [0.0, 0.3, 0.6, 0.9] {
                let a = c * (1.0 - load);
                for a0_factor in [1.0, 1.3, 0.8] {
                    let a0 = Rate((a * a0_factor) as u64);
                    let paper = crate::abw::QuickSpec {
                        b_max: Some(Rate(a0.bps() * 2)),
                        p_n: Some(Bytes(1500)),
                        p_1: Some(Bytes(48)),
                        delta_p: Some(Bytes(12)),
                        max_size: Bytes(1500),
                        min_size: Bytes(48),
                        ..crate::abw::QuickSpec::default()
                    }
                    .solve()
                    .unwrap();
                    let windowed = plan.fine(a0, Rate::ZERO).unwrap();
                    let tight = plan.clone().with_target_sigma(0.025).fine(a0, Rate::ZERO).unwrap();
                    for (name, d) in [("paper dP 12", paper), ("busy window", windowed), ("sigma 2.5 %", tight)] {
                        let sched = d.schedule();
                        let mut errs: Vec<f64> = (0..40)
                            .map(|s| {
                                let r = estimate_train(&noisy_path(&sched, c, c * load, 10_000.0, 100 + s), &cfg);
                                r.outcome.value().map_or(100.0, |v| 100.0 * (v.bps() as f64 - a).abs() / c)
                            })
                            .collect();
                        errs.sort_by(f64::total_cmp);
                        println!(
                            "C {:>3} Mbit/s load {:.1} A0 x{a0_factor:<3} {name}: {:>6.1}-{:>6.1} Mbit/s dP {:>2} N {:>4} len {:>6.1} ms: median |e| {:>5.1} % p90 {:>5.1} %",
                            c / 1e6,
                            load,
                            d.b_min().as_mbps(),
                            d.b_max().as_mbps(),
                            d.delta_p.0,
                            d.n,
                            d.train_length().as_secs_f64() * 1e3,
                            errs[20],
                            errs[36],
                        );
                    }
                }
            }
        }
    }
}
