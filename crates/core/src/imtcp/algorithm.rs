//! ImTCP's measurement unit: the available-bandwidth search of Man, Hasegawa & Murata (Computer
//! Communications 2005, §3.2), as a sans-IO state machine shared by the inline sender
//! ([`super::ImtcpBuffer`]) and the UDP echo driver ([`super::EchoProber`]).
//!
//! # One measurement ("round")
//!
//! 1. **Initial search range (§3.2.1).** Before any search range exists, one Cprobe stream of N
//!    packets is sent back to back; the dispersion of their ACKs (echoes) gives a rough
//!    `A_cprobe = bits(2..N) / (R_N - R_1)` and the range `(A_cprobe / 2, A_cprobe)`. The round
//!    yields no estimate.
//! 2. **Sub-ranges (§3.2.2).** The range `(B_l, B_u)` is cut into `k` sub-ranges of equal
//!    width, numbered from the top: sub-range `i` is `(B_u - w·i, B_u - w·(i-1))`, `w = (B_u -
//!    B_l) / k`. Stream 1 probes the highest rates; as `i` grows the rates fall.
//! 3. **Streams (§3.2.3).** Stream `i` has N packets; the gap before packet `j` (j = 2..N) is set
//!    so that `M / (S_j - S_{j-1}) = lo_i + (hi_i - lo_i)·(j-1)/(N-1)`: the rate sweeps the
//!    sub-range upwards, ending at its top, so the early packets see an empty queue and a knee
//!    appears where the rate passes the available bandwidth. `D_j = R_j - S_j` (R: ACK or echo
//!    arrival); Pathload's PCT/PDT test ([`super::trend`]) gives `T_i` ∈ {1, -1, 0}. When two
//!    successive streams show no trend (`T_m = T_{m+1} = -1`) the remaining streams, slower
//!    still, are not sent and count as -1.
//! 4. **Choice of sub-range (§3.2.4).** `a` ∈ 0..=k+1 maximises
//!    `Σ_{i<a} T_i - Σ_{i>a} T_i`: streams above `I_a` should show a trend, streams below none,
//!    and `I_a`'s own stream, which straddles the available bandwidth, is left out. `a = 0`
//!    means `A > B_u`, `a = k+1` means `A < B_l`.
//! 5. **Knee (§3.2.5).** On stream `a`'s packets, the points (send rate, arrival rate) of
//!    consecutive packets are fitted with two least-squares lines split where the total squared
//!    error is smallest; the highest send rate on the first line (slope ≈ 1: arrival rate = send
//!    rate) is `A`. Out of range, `A = B_u` (a = 0) or `B_l` (a = k+1).
//! 6. **Next range (§3.2.6).** An in-range `A` is stored; the next range is
//!    `A ± max(1.96·σ/√c, B_w/2)` with `σ` the standard deviation of the `c` stored values and
//!    `B_w` the minimum width. Out of range, the stored values are discarded and the range is
//!    widened towards the change (see choices).
//!
//! # Choices the paper leaves open (or the OCR lost)
//!
//! - **k = 4** by default: §4.5 says a measurement takes "at most 4 RTTs" with one stream per
//!   RTT when the window is small. Configurable.
//! - **Minimum width `B_w`** defaults to 20 % of the current value ([`MinWidth::Relative`]),
//!   because the paper's absolute value is not in the text; [`MinWidth::Absolute`] is available.
//! - **σ is the standard deviation** ("variance" in the text, but `1.96·S/√c` is the 95 %
//!   interval only with the standard deviation). With one stored value σ = 0 (width `B_w`).
//! - **Stored values** are the last `history_len` (default 32) results; the paper keeps all of
//!   them since the last discard, which would let a slow drift shrink the interval forever.
//! - **Widening rule.** The equation is lost in the OCR; the text says the range is widened "in
//!   the possible direction of the change". We keep the far bound and push the near bound out
//!   by the range's width: `a = 0` → `(B_l, B_u + (B_u - B_l))`, `a = k+1` →
//!   `(B_l - (B_u - B_l), B_u)`. The width doubles on each miss, so a large jump is caught in
//!   `O(log)` measurements. Bounds are clamped to `[min_rate, link_rate]`.
//! - **Ties in step 4** go to an in-range `a` whose own stream is unsure (`T_a = 0`), then to one
//!   whose stream shows a trend, then to one without, then out of range; equal classes prefer
//!   the `a` nearest the middle of the range.
//! - **Knee with fewer than 4 rate points** (N ≤ 4, or lost ACKs): `A` is the middle of `I_a`.
//!   The knee is clamped to `I_a`.
//! - **Delayed ACK (§3.5.1).** When enabled, only one parity of packets (the one with more ACK
//!   samples) is used: delays `D_{2j}` and rates over two-packet spans.
//! - A round whose streams produced no usable samples at all yields no estimate and leaves the
//!   range unchanged; a Cprobe without two samples is retried.
//! - Packet sizes are wire sizes (payload plus headers), given by the driver per packet.
//! - **Streams off their schedule.** The method judges stream `i` as a probe of the rates of
//!   sub-range `I_i`; that holds only if its packets left at the planned gaps. A driver on a real
//!   host learns the true send times later ([`Measurer::correct_probe_sent`], kernel transmit
//!   stamps) and can be late when its thread is not scheduled in time: packets that left more
//!   slowly than planned probed lower rates, and "no trend" there places `A` in a sub-range that
//!   was never probed. Streams whose first-to-last send span differs from the plan's by more than
//!   [`OFF_SCHEDULE`] are counted (`off_schedule`), so that a driver can report how far its
//!   estimates can be trusted; they are still judged (voiding them was tried on a loaded host
//!   and moved the estimates rather than fixing them; the cure is the driver's scheduling, e.g.
//!   `send`'s real-time priority). In the simulator packets leave on schedule.

use std::collections::VecDeque;

use super::trend::{trend_of, Trend, TrendConfig, TrendReport};
use super::Estimate;
use crate::units::{Bytes, Dur, Rate, Time};

/// The minimum width `B_w` of a search range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MinWidth {
    /// A fixed width.
    Absolute(Rate),
    /// A fraction of the measured value.
    Relative(f64),
}

/// Parameters of the measurement algorithm.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasurementConfig {
    /// `k`: number of sub-ranges (streams per measurement).
    pub sub_ranges: usize,
    /// `N`: packets per stream (paper default 35).
    pub stream_len: usize,
    /// `B_w`: minimum width of the search range.
    pub min_width: MinWidth,
    /// Normal quantile of the confidence interval (1.96 for 95 %).
    pub confidence_z: f64,
    /// How many stored results the confidence interval uses.
    pub history_len: usize,
    /// PCT/PDT thresholds.
    pub trend: TrendConfig,
    /// Physical bandwidth of the sender's link: the highest upper bound (None: unbounded).
    pub link_rate: Option<Rate>,
    /// The lowest lower bound of a search range.
    pub min_rate: Rate,
    /// Use every other packet (receiver with delayed ACKs, §3.5.1).
    pub delayed_ack: bool,
    /// Gain γ of the smoothed estimate `Ā = (1-γ)Ā + γA` (ImTCP-bg uses 1/8).
    pub smoothing_gain: f64,
    /// Skip Cprobe and start from this range.
    pub initial_range: Option<(Rate, Rate)>,
}

impl Default for MeasurementConfig {
    fn default() -> Self {
        MeasurementConfig {
            sub_ranges: 4,
            stream_len: 35,
            min_width: MinWidth::Relative(0.2),
            confidence_z: 1.96,
            history_len: 32,
            trend: TrendConfig::default(),
            link_rate: None,
            min_rate: Rate::from_kbps(100),
            delayed_ack: false,
            smoothing_gain: 0.125,
            initial_range: None,
        }
    }
}

/// Error in a [`MeasurementConfig`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ConfigError {}

impl MeasurementConfig {
    /// Checks the parameters (called by every constructor).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.sub_ranges == 0 {
            return Err(ConfigError("k (sub_ranges) must be at least 1".into()));
        }
        if self.stream_len < 2 {
            return Err(ConfigError("N (stream_len) must be at least 2".into()));
        }
        if self.delayed_ack && self.stream_len < 3 {
            return Err(ConfigError("N must be at least 3 with delayed ACKs".into()));
        }
        if !(self.confidence_z.is_finite() && self.confidence_z >= 0.0) {
            return Err(ConfigError("confidence_z must be a non-negative number".into()));
        }
        if self.history_len == 0 {
            return Err(ConfigError("history_len must be at least 1".into()));
        }
        if !(self.smoothing_gain > 0.0 && self.smoothing_gain <= 1.0) {
            return Err(ConfigError("smoothing_gain must be in (0, 1]".into()));
        }
        match self.min_width {
            MinWidth::Relative(f) if !(f.is_finite() && f > 0.0) => {
                return Err(ConfigError("relative minimum width must be positive".into()))
            }
            MinWidth::Absolute(r) if r.0 == 0 => {
                return Err(ConfigError("absolute minimum width must be positive".into()))
            }
            _ => {}
        }
        if let Some((lo, hi)) = self.initial_range {
            if lo >= hi {
                return Err(ConfigError(format!("initial range ({lo}, {hi}) is empty")));
            }
        }
        if self.min_rate.0 == 0 {
            return Err(ConfigError("min_rate must be positive (a zero lower bound means infinite gaps)".into()));
        }
        if let Some(l) = self.link_rate {
            if l <= self.min_rate {
                return Err(ConfigError("link_rate must exceed min_rate".into()));
            }
        }
        Ok(())
    }
}

/// A search range `(B_l, B_u)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchRange {
    pub lower: Rate,
    pub upper: Rate,
}

impl SearchRange {
    fn lo(&self) -> f64 {
        self.lower.0 as f64
    }
    fn hi(&self) -> f64 {
        self.upper.0 as f64
    }
    /// Sub-range `i` (1-based, from the top): `(lo, hi)` in bit/s.
    pub fn sub_range(&self, i: usize, k: usize) -> (f64, f64) {
        let w = (self.hi() - self.lo()) / k as f64;
        (self.hi() - w * i as f64, self.hi() - w * (i as f64 - 1.0))
    }
}

/// Identifies a stream: the measurement round and the stream's index in it (0 = Cprobe,
/// 1..=k = the sub-ranges from the top).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamKey {
    pub round: u64,
    pub index: usize,
}

/// What a stream is for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StreamKind {
    /// Cprobe's back-to-back train (§3.2.1).
    Cprobe,
    /// The sweep of one sub-range `(lower, upper)`.
    Sweep { lower: Rate, upper: Rate },
}

/// The sending plan of one stream: N packets and the rate of each gap.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamPlan {
    pub key: StreamKey,
    pub kind: StreamKind,
    /// Packets in the stream (N).
    pub packets: usize,
    /// `rates[j-2]` is the rate `M / (S_j - S_{j-1})` for packet `j` = 2..=N; `None` for
    /// back-to-back (Cprobe; the link paces them).
    pub rates: Vec<Option<Rate>>,
}

impl StreamPlan {
    /// Gap between packet `j-1` and packet `j` (1-based, `j >= 2`) when packet `j` is `bytes`
    /// long on the wire. Zero for back-to-back packets.
    pub fn gap_before(&self, j: usize, bytes: Bytes) -> Dur {
        if j < 2 {
            return Dur::ZERO;
        }
        match self.rates.get(j - 2).copied().flatten() {
            Some(r) if r.0 > 0 => bytes.time_at(r),
            _ => Dur::ZERO,
        }
    }
    /// Planned duration of the stream for packets of `bytes`.
    pub fn duration(&self, bytes: Bytes) -> Dur {
        (2..=self.packets).map(|j| self.gap_before(j, bytes)).fold(Dur::ZERO, |a, b| a + b)
    }
}

#[derive(Clone, Copy, Debug)]
struct ProbePacket {
    sent: Time,
    bytes: Bytes,
    arrival: Option<Time>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum StreamState {
    NotSent,
    Sending,
    Sent,
    Closed,
}

#[derive(Clone, Debug)]
struct StreamRecord {
    state: StreamState,
    packets: Vec<Option<ProbePacket>>,
    report: Option<TrendReport>,
}

impl StreamRecord {
    fn new(n: usize) -> Self {
        StreamRecord { state: StreamState::NotSent, packets: vec![None; n], report: None }
    }
}

#[derive(Clone, Debug)]
enum RoundKind {
    Cprobe,
    Search(SearchRange),
}

#[derive(Clone, Debug)]
struct Round {
    id: u64,
    kind: RoundKind,
    /// streams[0] is Cprobe's in a Cprobe round; streams[i-1] is stream i in a search round.
    streams: Vec<StreamRecord>,
}

impl Round {
    /// The record of stream `key` if it belongs to this round.
    fn record_mut(&mut self, key: StreamKey) -> Option<&mut StreamRecord> {
        if self.id != key.round {
            return None;
        }
        let slot = match self.kind {
            RoundKind::Cprobe => (key.index == 0).then_some(0)?,
            RoundKind::Search(_) => key.index.checked_sub(1)?,
        };
        self.streams.get_mut(slot)
    }
}

/// Why a round ended without an estimate, or how it ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoundOutcome {
    /// Cprobe gave the initial range.
    InitialRange,
    /// An estimate inside the search range.
    InRange,
    /// `A > B_u` (a = 0) or `A < B_l` (a = k+1): temporary estimate, range widened.
    OutOfRange,
    /// No usable samples: nothing learned.
    NoResult,
}

/// Counters of the measurement unit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MeasurementStats {
    pub rounds: u64,
    pub estimates: u64,
    pub in_range: u64,
    pub out_of_range: u64,
    pub no_result: u64,
    pub aborted: u64,
    pub early_stops: u64,
    pub cprobes: u64,
    /// Search streams whose packets left off their schedule (first-to-last span more than
    /// [`OFF_SCHEDULE`] from the plan's): a quality signal for drivers on real hosts.
    pub off_schedule: u64,
}

/// The measurement unit: search range, stored values, the current round and the output stream.
#[derive(Clone, Debug)]
pub struct Measurer {
    cfg: MeasurementConfig,
    range: Option<SearchRange>,
    history: VecDeque<f64>,
    round: Option<Round>,
    next_round: u64,
    estimates: VecDeque<Estimate>,
    smoothed: Option<f64>,
    last: Option<Estimate>,
    last_trends: Vec<Trend>,
    stats: MeasurementStats,
}

/// Bound on the queued estimates nobody drained (oldest dropped first).
const MAX_QUEUED_ESTIMATES: usize = 4096;

impl Measurer {
    pub fn new(cfg: MeasurementConfig) -> Result<Measurer, ConfigError> {
        cfg.validate()?;
        let range = cfg.initial_range.map(|(l, u)| SearchRange { lower: l, upper: u });
        Ok(Measurer {
            cfg,
            range,
            history: VecDeque::new(),
            round: None,
            next_round: 1,
            estimates: VecDeque::new(),
            smoothed: None,
            last: None,
            last_trends: Vec::new(),
            stats: MeasurementStats::default(),
        })
    }

    pub fn config(&self) -> &MeasurementConfig {
        &self.cfg
    }
    /// The range the next (or current) round searches; None before Cprobe.
    pub fn search_range(&self) -> Option<SearchRange> {
        self.range
    }
    /// Smoothed estimate `Ā`.
    pub fn smoothed(&self) -> Option<Rate> {
        self.smoothed.map(|s| Rate(s.max(0.0).round() as u64))
    }
    /// The latest estimate.
    pub fn last_estimate(&self) -> Option<Estimate> {
        self.last
    }
    /// Next estimate not yet drained.
    pub fn poll_estimate(&mut self) -> Option<Estimate> {
        self.estimates.pop_front()
    }
    pub fn stats(&self) -> MeasurementStats {
        self.stats
    }
    /// `T_i` of the last finished search round (for diagnostics and tests).
    pub fn last_trends(&self) -> &[Trend] {
        &self.last_trends
    }
    /// Whether a round is under way.
    pub fn in_round(&self) -> bool {
        self.round.is_some()
    }
    /// Id of the current round.
    pub fn round_id(&self) -> Option<u64> {
        self.round.as_ref().map(|r| r.id)
    }

    fn begin_round(&mut self) {
        let id = self.next_round;
        self.next_round += 1;
        self.stats.rounds += 1;
        let n = self.cfg.stream_len;
        let round = match self.range {
            None => {
                self.stats.cprobes += 1;
                Round { id, kind: RoundKind::Cprobe, streams: vec![StreamRecord::new(n)] }
            }
            Some(r) => Round {
                id,
                kind: RoundKind::Search(r),
                streams: (0..self.cfg.sub_ranges).map(|_| StreamRecord::new(n)).collect(),
            },
        };
        self.round = Some(round);
    }

    /// The next stream to send, starting a new round if none is under way; `None` when the
    /// current round needs no more streams (all sent, or stopped early) — then wait for its
    /// arrivals and call [`Self::finish_round`]. Idempotent until the stream is reported sent.
    pub fn next_stream(&mut self) -> Option<StreamPlan> {
        if self.round.is_none() {
            self.begin_round();
        }
        let k = self.cfg.sub_ranges;
        let n = self.cfg.stream_len;
        let idx = self.pending_stream()?;
        let round = self.round.as_ref()?;
        match round.kind {
            RoundKind::Cprobe => Some(StreamPlan {
                key: StreamKey { round: round.id, index: 0 },
                kind: StreamKind::Cprobe,
                packets: n,
                rates: vec![self.cfg.link_rate; n - 1],
            }),
            RoundKind::Search(range) => {
                let i = idx + 1;
                let (lo, hi) = range.sub_range(i, k);
                let rates = (2..=n).map(|j| Some(Rate(sweep_rate(lo, hi, j, n) as u64))).collect();
                Some(StreamPlan {
                    key: StreamKey { round: round.id, index: i },
                    kind: StreamKind::Sweep { lower: Rate(lo.round() as u64), upper: Rate(hi.round() as u64) },
                    packets: n,
                    rates,
                })
            }
        }
    }

    /// The index of the current round's next stream to send: the first one not sent (or being
    /// sent), unless the round stopped early before it. `None` without a round.
    fn pending_stream(&self) -> Option<usize> {
        let round = self.round.as_ref()?;
        let idx =
            round.streams.iter().position(|s| s.state == StreamState::NotSent || s.state == StreamState::Sending)?;
        if matches!(round.kind, RoundKind::Search(_)) && early_stop_point(&round.streams).is_some_and(|m| idx > m) {
            return None;
        }
        Some(idx)
    }

    fn record_mut(&mut self, key: StreamKey) -> Option<&mut StreamRecord> {
        self.round.as_mut()?.record_mut(key)
    }

    /// Packet `j` (1-based) of stream `key` left at `now`, `bytes` long on the wire.
    pub fn on_probe_sent(&mut self, key: StreamKey, j: usize, now: Time, bytes: Bytes) {
        if let Some(rec) = self.record_mut(key) {
            if rec.state == StreamState::NotSent {
                rec.state = StreamState::Sending;
            }
            if let Some(slot) = j.checked_sub(1).and_then(|i| rec.packets.get_mut(i)) {
                *slot = Some(ProbePacket { sent: now, bytes, arrival: None });
            }
        }
    }

    /// Packet `j` of stream `key` really left at `at` (a driver that learns the wire time later
    /// than it handed the packet over, e.g. from a kernel transmit timestamp). Ignored when
    /// the packet is unknown or `at` is after its recorded arrival.
    pub fn correct_probe_sent(&mut self, key: StreamKey, j: usize, at: Time) {
        if let Some(rec) = self.record_mut(key) {
            if let Some(Some(p)) = j.checked_sub(1).and_then(|i| rec.packets.get_mut(i)) {
                if p.arrival.is_none_or(|a| at <= a) {
                    p.sent = at;
                }
            }
        }
    }

    /// The ACK (echo) of packet `j` of stream `key` arrived at `now`.
    pub fn on_probe_arrival(&mut self, key: StreamKey, j: usize, now: Time) {
        if let Some(rec) = self.record_mut(key) {
            if let Some(Some(p)) = j.checked_sub(1).and_then(|i| rec.packets.get_mut(i)) {
                if p.arrival.is_none() && now >= p.sent {
                    p.arrival = Some(now);
                }
            }
        }
    }

    /// All N packets of stream `key` have left.
    pub fn on_stream_sent(&mut self, key: StreamKey) {
        if let Some(rec) = self.record_mut(key) {
            rec.state = StreamState::Sent;
        }
    }

    /// Stream `key` could not be formed: forget its packets; it will be planned again.
    pub fn on_stream_failed(&mut self, key: StreamKey) {
        let n = self.cfg.stream_len;
        if let Some(rec) = self.record_mut(key) {
            *rec = StreamRecord::new(n);
        }
    }

    /// No more arrivals are expected for stream `key`: run its trend test now (it may allow an
    /// early stop).
    pub fn close_stream(&mut self, key: StreamKey) {
        let Some(round) = self.round.as_mut() else { return };
        let kind = round.kind.clone();
        let Some(rec) = round.record_mut(key) else { return };
        if rec.state != StreamState::Sent {
            return;
        }
        let judged = judge(&self.cfg, &kind, key.index, &rec.packets);
        rec.report = Some(judged.report);
        rec.state = StreamState::Closed;
        self.stats.off_schedule += u64::from(judged.off_schedule);
    }

    /// Whether the current round still needs a stream sent (what [`Self::next_stream`] would
    /// return a plan for, without building the plan).
    pub fn needs_stream(&self) -> bool {
        self.pending_stream().is_some()
    }

    /// Drops the current round (TCP retransmission: the ACK timing is meaningless).
    pub fn abort_round(&mut self) {
        if self.round.take().is_some() {
            self.stats.aborted += 1;
        }
    }

    /// Ends the current round at `now`: trends, sub-range, knee, next range, estimate.
    pub fn finish_round(&mut self, now: Time) -> RoundOutcome {
        let Some(mut round) = self.round.take() else {
            return RoundOutcome::NoResult;
        };
        for (idx, s) in round.streams.iter_mut().enumerate() {
            if s.state == StreamState::Sent
                || (s.state == StreamState::Sending && s.packets.iter().any(|p| p.is_some()))
            {
                let index = if matches!(round.kind, RoundKind::Cprobe) { 0 } else { idx + 1 };
                let judged = judge(&self.cfg, &round.kind, index, &s.packets);
                s.report = Some(judged.report);
                self.stats.off_schedule += u64::from(judged.off_schedule);
                s.state = StreamState::Closed;
            }
        }
        match round.kind {
            RoundKind::Cprobe => self.finish_cprobe(&round),
            RoundKind::Search(range) => self.finish_search(now, &round, range),
        }
    }

    fn finish_cprobe(&mut self, round: &Round) -> RoundOutcome {
        let samples = select_samples(&round.streams[0].packets, self.cfg.delayed_ack);
        if samples.len() < 2 {
            self.stats.no_result += 1;
            return RoundOutcome::NoResult;
        }
        let (first, last) = (samples[0], samples[samples.len() - 1]);
        let bits: u64 =
            round.streams[0].packets[first.0 + 1..=last.0].iter().map(|p| p.map_or(0, |p| p.bytes.bits())).sum();
        let dt = last.1.arrival.unwrap_or(last.1.sent).saturating_since(first.1.arrival.unwrap_or(first.1.sent));
        if dt.0 == 0 || bits == 0 {
            self.stats.no_result += 1;
            return RoundOutcome::NoResult;
        }
        let a = bits as f64 / dt.as_secs_f64();
        let lower = self.clamp_lower(a / 2.0);
        let upper = self.clamp_upper(a).max(lower + 1.0);
        self.range = Some(SearchRange { lower: rate(lower), upper: rate(upper) });
        RoundOutcome::InitialRange
    }

    fn finish_search(&mut self, now: Time, round: &Round, range: SearchRange) -> RoundOutcome {
        let k = self.cfg.sub_ranges;
        let stop = early_stop_point(&round.streams);
        let mut t = Vec::with_capacity(k);
        let mut any_samples = false;
        for (idx, s) in round.streams.iter().enumerate() {
            let v = match (&s.report, stop) {
                (Some(r), _) => {
                    any_samples |= r.pct.is_some();
                    r.trend
                }
                (None, Some(m)) if idx > m => Trend::NotIncreasing,
                _ => Trend::Unsure,
            };
            t.push(v);
        }
        if stop.is_some_and(|m| m + 1 < k) {
            self.stats.early_stops += 1;
        }
        self.last_trends = t.clone();
        if !any_samples {
            self.stats.no_result += 1;
            return RoundOutcome::NoResult;
        }
        let a = choose_sub_range(&t);
        let (value, outcome) = if a == 0 {
            (range.hi(), RoundOutcome::OutOfRange)
        } else if a == k + 1 {
            (range.lo(), RoundOutcome::OutOfRange)
        } else {
            let (lo, hi) = range.sub_range(a, k);
            let pts = rate_points(&round.streams[a - 1].packets, self.cfg.delayed_ack);
            let knee = knee_of(&pts).unwrap_or((lo + hi) / 2.0);
            (knee.clamp(lo, hi), RoundOutcome::InRange)
        };
        // Step 6: the next search range.
        let next = match outcome {
            RoundOutcome::InRange => {
                self.history.push_back(value);
                while self.history.len() > self.cfg.history_len {
                    self.history.pop_front();
                }
                let half = self.half_width(value);
                let lower = self.clamp_lower(value - half);
                let upper = self.clamp_upper(value + half).max(lower + 1.0);
                SearchRange { lower: rate(lower), upper: rate(upper) }
            }
            _ => {
                self.history.clear();
                let w = range.hi() - range.lo();
                let (lower, upper) = if a == 0 {
                    (range.lo(), self.clamp_upper(range.hi() + w))
                } else {
                    (self.clamp_lower(range.lo() - w), range.hi())
                };
                SearchRange { lower: rate(lower), upper: rate(upper.max(lower + 1.0)) }
            }
        };
        self.range = Some(next);
        let est = Estimate {
            time: now,
            value: rate(value),
            search_range: (range.lower, range.upper),
            in_range: outcome == RoundOutcome::InRange,
        };
        self.publish(est);
        if outcome == RoundOutcome::InRange {
            self.stats.in_range += 1;
        } else {
            self.stats.out_of_range += 1;
        }
        outcome
    }

    fn publish(&mut self, est: Estimate) {
        let v = est.value.0 as f64;
        let g = self.cfg.smoothing_gain;
        self.smoothed = Some(match self.smoothed {
            None => v,
            Some(s) => (1.0 - g) * s + g * v,
        });
        self.last = Some(est);
        self.stats.estimates += 1;
        if self.estimates.len() >= MAX_QUEUED_ESTIMATES {
            self.estimates.pop_front();
        }
        self.estimates.push_back(est);
    }

    /// `max(z·σ/√c, B_w/2)` for the current history and value.
    fn half_width(&self, value: f64) -> f64 {
        let c = self.history.len();
        let ci = if c >= 2 {
            let mean = self.history.iter().sum::<f64>() / c as f64;
            let var = self.history.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (c as f64 - 1.0);
            self.cfg.confidence_z * var.sqrt() / (c as f64).sqrt()
        } else {
            0.0
        };
        let bw = match self.cfg.min_width {
            MinWidth::Absolute(r) => r.0 as f64,
            MinWidth::Relative(f) => f * value,
        };
        ci.max(bw / 2.0)
    }

    fn clamp_lower(&self, x: f64) -> f64 {
        x.max(self.cfg.min_rate.0 as f64)
    }
    fn clamp_upper(&self, x: f64) -> f64 {
        match self.cfg.link_rate {
            Some(l) => x.min(l.0 as f64),
            None => x,
        }
    }
}

fn rate(x: f64) -> Rate {
    Rate(x.max(0.0).round() as u64)
}

/// The 0-based index `m` of the first stream such that streams `m` and `m+1` were both closed
/// without trend: streams after `m + 1` need not be sent.
fn early_stop_point(streams: &[StreamRecord]) -> Option<usize> {
    let flat = |s: &StreamRecord| s.report.is_some_and(|r| r.trend == Trend::NotIncreasing);
    (0..streams.len().saturating_sub(1)).find(|&m| flat(&streams[m]) && flat(&streams[m + 1])).map(|m| m + 1)
}

/// Packets with an arrival, as (index, packet); with delayed ACKs only the parity with more
/// samples.
fn select_samples(packets: &[Option<ProbePacket>], delayed_ack: bool) -> Vec<(usize, ProbePacket)> {
    let all: Vec<(usize, ProbePacket)> =
        packets.iter().enumerate().filter_map(|(i, p)| p.filter(|p| p.arrival.is_some()).map(|p| (i, p))).collect();
    if !delayed_ack {
        return all;
    }
    let even = all.iter().filter(|(i, _)| i % 2 == 0).count();
    let parity = if even * 2 >= all.len() { 0 } else { 1 };
    all.into_iter().filter(|(i, _)| i % 2 == parity).collect()
}

fn stream_delays(packets: &[Option<ProbePacket>], delayed_ack: bool) -> Vec<f64> {
    select_samples(packets, delayed_ack)
        .iter()
        .filter_map(|(_, p)| p.arrival.map(|r| r.0 as f64 * 1e-9 - p.sent.0 as f64 * 1e-9))
        .collect()
}

/// (send rate, arrival rate) in bit/s between consecutive samples, in send order.
fn rate_points(packets: &[Option<ProbePacket>], delayed_ack: bool) -> Vec<(f64, f64)> {
    let s = select_samples(packets, delayed_ack);
    s.windows(2)
        .filter_map(|w| {
            let (i1, p1) = w[0];
            let (i2, p2) = w[1];
            let bits: u64 = packets[i1 + 1..=i2].iter().map(|p| p.map_or(0, |p| p.bytes.bits())).sum();
            let ds = p2.sent.saturating_since(p1.sent).as_secs_f64();
            let dr = p2.arrival?.saturating_since(p1.arrival?).as_secs_f64();
            (ds > 0.0 && dr > 0.0 && bits > 0).then(|| (bits as f64 / ds, bits as f64 / dr))
        })
        .collect()
}

/// How far a stream's send span may differ from its plan before it counts as off schedule: 5 %,
/// the smallest sub-range width relative to `A` with the default minimum width.
pub const OFF_SCHEDULE: f64 = 0.05;

/// A stream's trend test (step 3), and whether the stream left off its plan by more than
/// [`OFF_SCHEDULE`] (search streams only: Cprobe's plan is the link rate, not a sweep).
struct Judged {
    report: TrendReport,
    off_schedule: bool,
}

fn judge(cfg: &MeasurementConfig, kind: &RoundKind, index: usize, packets: &[Option<ProbePacket>]) -> Judged {
    let off_schedule = match kind {
        RoundKind::Search(range) => {
            let (lo, hi) = range.sub_range(index, cfg.sub_ranges);
            schedule_error(packets, lo, hi).is_some_and(|e| e.abs() > OFF_SCHEDULE)
        }
        RoundKind::Cprobe => false,
    };
    Judged { report: trend_of(&stream_delays(packets, cfg.delayed_ack), &cfg.trend), off_schedule }
}

/// The planned rate of packet `j` (2..=n) of a stream sweeping `(lo, hi)` (step 3), as
/// [`Measurer::next_stream`] plans it.
fn sweep_rate(lo: f64, hi: f64, j: usize, n: usize) -> f64 {
    (lo + (hi - lo) * (j as f64 - 1.0) / (n as f64 - 1.0)).max(1.0).round()
}

/// How far the span between a stream's first and last sent packets is from its plan:
/// `actual / planned − 1` (positive: the packets left more slowly than planned, i.e. probed
/// lower rates). None with fewer than two packets sent.
fn schedule_error(packets: &[Option<ProbePacket>], lo: f64, hi: f64) -> Option<f64> {
    let n = packets.len();
    let first = packets.iter().position(|p| p.is_some())?;
    let last = packets.iter().rposition(|p| p.is_some())?;
    if last <= first {
        return None;
    }
    let planned: f64 = (first + 1..=last)
        .map(|i| packets[i].map_or(0.0, |p| p.bytes.bits() as f64) / sweep_rate(lo, hi, i + 1, n))
        .sum();
    let (a, b) = (packets[first]?.sent, packets[last]?.sent);
    let actual = b.saturating_since(a).as_secs_f64();
    (planned > 0.0).then(|| actual / planned - 1.0)
}

/// Step 4: the `a` in 0..=k+1 maximising `Σ_{i<a} T_i - Σ_{i>a} T_i` (ties: see module doc).
pub fn choose_sub_range(t: &[Trend]) -> usize {
    let k = t.len();
    let score = |a: usize| -> i32 {
        let above: i32 = t.iter().take(a.saturating_sub(1)).map(|x| x.score()).sum();
        let below: i32 = t.iter().skip(a.min(k)).map(|x| x.score()).sum();
        above - below
    };
    let class = |a: usize| -> u8 {
        if a == 0 || a == k + 1 {
            return 3;
        }
        match t[a - 1] {
            Trend::Unsure => 0,
            Trend::Increasing => 1,
            Trend::NotIncreasing => 2,
        }
    };
    let mid = (k as f64 + 1.0) / 2.0;
    (0..=k + 1)
        .max_by(|&x, &y| {
            score(x)
                .cmp(&score(y))
                .then(class(y).cmp(&class(x)))
                .then((y as f64 - mid).abs().total_cmp(&(x as f64 - mid).abs()))
        })
        .unwrap_or(0)
}

/// Least-squares line through `pts`: returns the sum of squared residuals.
fn line_sse(pts: &[(f64, f64)]) -> f64 {
    let n = pts.len() as f64;
    if pts.len() < 2 {
        return 0.0;
    }
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let syy: f64 = pts.iter().map(|p| (p.1 - my).powi(2)).sum();
    if sxx <= 0.0 {
        return syy;
    }
    (syy - sxy * sxy / sxx).max(0.0)
}

/// Step 5: the two-line regression. Points are (send rate, arrival rate); they are sorted by
/// send rate, every split leaving at least two points on each line is tried, and the highest
/// send rate on the lower line of the best split is the knee. `None` with fewer than 4 points.
pub fn knee_of(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 4 {
        return None;
    }
    let mut pts = points.to_vec();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let best = (2..=pts.len() - 2)
        .map(|p| (p, line_sse(&pts[..p]) + line_sse(&pts[p..])))
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    Some(pts[best.0 - 1].0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::imtcp::testpath::FluidPath;

    #[test]
    fn sub_ranges_from_the_top() {
        let r = SearchRange { lower: Rate::from_mbps(40), upper: Rate::from_mbps(80) };
        assert_eq!(r.sub_range(1, 4), (70e6, 80e6));
        assert_eq!(r.sub_range(4, 4), (40e6, 50e6));
    }

    #[test]
    fn sub_range_choice_follows_the_trend_boundary() {
        use Trend::*;
        // A between streams 2 and 3 (stream 2 unsure): a = 2
        assert_eq!(choose_sub_range(&[Increasing, Unsure, NotIncreasing, NotIncreasing]), 2);
        assert_eq!(choose_sub_range(&[Increasing, Increasing, Unsure, NotIncreasing]), 3);
        // all streams increasing: A below the range
        assert_eq!(choose_sub_range(&[Increasing; 4]), 5);
        // none increasing: A above the range
        assert_eq!(choose_sub_range(&[NotIncreasing; 4]), 0);
        // one stray trend among flat streams does not pull `a` to the bottom
        assert_eq!(choose_sub_range(&[Increasing, NotIncreasing, Increasing, NotIncreasing]), 3);
        // tie between a = 1 (T_1 = 1) and a = 2 (T_2 = -1): the stream with the trend
        assert_eq!(choose_sub_range(&[Increasing, NotIncreasing, NotIncreasing, NotIncreasing]), 1);
    }

    #[test]
    fn knee_of_a_clean_fifo_response() {
        // FIFO with capacity 100 and fluid cross traffic 40: arrival = x below 60,
        // C x / (x + X) above.
        let pts: Vec<(f64, f64)> = (0..34)
            .map(|j| {
                let x = 50e6 + 20e6 * j as f64 / 33.0;
                let y = if x <= 60e6 { x } else { 100e6 * x / (x + 40e6) };
                (x, y)
            })
            .collect();
        let k = knee_of(&pts).unwrap();
        assert!((k - 60e6).abs() < 1.0e6, "knee {k}");
    }

    #[test]
    fn knee_with_noise_and_too_few_points() {
        let mut s = 12345u64;
        let pts: Vec<(f64, f64)> = (0..34)
            .map(|j| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
                let n = ((s >> 33) as f64 / (1u64 << 31) as f64 - 1.0) * 0.5e6;
                let x = 30e6 + 20e6 * j as f64 / 33.0;
                let y = if x <= 42e6 { x } else { 42e6 - (x - 42e6) * 0.5 };
                (x, y + n)
            })
            .collect();
        let k = knee_of(&pts).unwrap();
        assert!((k - 42e6).abs() < 1.5e6, "knee {k}");
        assert_eq!(knee_of(&pts[..3]), None);
    }

    fn measurer(cfg: MeasurementConfig) -> Measurer {
        Measurer::new(cfg).expect("valid config")
    }

    /// Feeds a whole round through a fluid FIFO (capacity `cap`, available `avail`, Mbit/s),
    /// echoes returning over an uncongested path; each stream starts when the previous one's
    /// echoes are back.
    fn run_round(m: &mut Measurer, now: Time, avail: f64, cap: f64) -> RoundOutcome {
        run_late_round(m, now, avail, cap, 1.0)
    }

    /// [`run_round`] with every stream's packets really leaving `stretch` times as far apart
    /// as planned (a late sender), told by [`Measurer::correct_probe_sent`].
    fn run_late_round(m: &mut Measurer, now: Time, avail: f64, cap: f64, stretch: f64) -> RoundOutcome {
        let bytes = Bytes(1500);
        let mut path = FluidPath::new(cap, cap - avail, Dur::from_millis(20), Dur::from_millis(20));
        let mut t = now;
        while let Some(plan) = m.next_stream() {
            let mut last = t;
            let start = t;
            for j in 1..=plan.packets {
                t += plan.gap_before(j, bytes);
                m.on_probe_sent(plan.key, j, t, bytes);
                let left = start + Dur((t.saturating_since(start).0 as f64 * stretch) as u64);
                m.correct_probe_sent(plan.key, j, left);
                last = path.send(left, bytes) + path.ret_delay;
                m.on_probe_arrival(plan.key, j, last);
            }
            m.on_stream_sent(plan.key);
            m.close_stream(plan.key);
            t = last;
        }
        m.finish_round(t)
    }

    #[test]
    fn converges_and_tracks_on_synthetic_rounds() {
        let cfg = MeasurementConfig {
            initial_range: Some((Rate::from_mbps(50), Rate::from_mbps(100))),
            ..Default::default()
        };
        let mut m = measurer(cfg);
        let mut now = Time::ZERO;
        for _ in 0..6 {
            run_round(&mut m, now, 60.0, 100.0);
            now += Dur::from_millis(300);
        }
        let e = m.last_estimate().unwrap();
        assert!(e.in_range);
        assert!((e.value.as_mbps() - 60.0).abs() < 6.0, "{e:?}");
        // step to 20: out of range below, widening until found
        let mut found = false;
        for _ in 0..8 {
            run_round(&mut m, now, 20.0, 100.0);
            now += Dur::from_millis(300);
            let e = m.last_estimate().unwrap();
            if e.in_range && (e.value.as_mbps() - 20.0).abs() < 2.0 {
                found = true;
                break;
            }
        }
        assert!(found, "{:?} {:?}", m.last_estimate(), m.search_range());
        assert!(m.stats().out_of_range >= 1);
    }

    #[test]
    fn streams_that_leave_late_are_counted_off_schedule() {
        let cfg = MeasurementConfig {
            initial_range: Some((Rate::from_mbps(50), Rate::from_mbps(100))),
            ..Default::default()
        };
        let mut m = measurer(cfg);
        run_round(&mut m, Time::ZERO, 60.0, 100.0);
        assert_eq!(m.stats().off_schedule, 0, "packets on their plan");
        // 4 % late: within OFF_SCHEDULE
        run_late_round(&mut m, Time::from_secs_f64(1.0), 60.0, 100.0, 1.04);
        assert_eq!(m.stats().off_schedule, 0, "4 % is within the tolerance");
        // 20 % late: every stream sent (at least the two an early stop needs)
        run_late_round(&mut m, Time::from_secs_f64(2.0), 60.0, 100.0, 1.2);
        let late = m.stats().off_schedule;
        assert!((2..=4).contains(&late), "{late} of at most 4 streams");
        // 20 % early (a burst) too
        run_late_round(&mut m, Time::from_secs_f64(3.0), 60.0, 100.0, 0.8);
        assert!(m.stats().off_schedule >= late + 2, "{:?}", m.stats());
    }

    #[test]
    fn confidence_interval_update() {
        let cfg = MeasurementConfig {
            initial_range: Some((Rate::from_mbps(50), Rate::from_mbps(70))),
            min_width: MinWidth::Absolute(Rate::from_mbps(2)),
            ..Default::default()
        };
        let mut m = measurer(cfg);
        // one value: width is the minimum width
        m.history.push_back(60e6);
        assert_eq!(m.half_width(60e6), 1e6);
        // spread values: 1.96 σ / √c
        m.history = [50e6, 60e6, 70e6].into_iter().collect();
        let sd = 10e6f64; // sample standard deviation of 50, 60, 70
        let expect = 1.96 * sd / 3f64.sqrt();
        assert!((m.half_width(60e6) - expect).abs() < 1.0);
    }

    #[test]
    fn out_of_range_widens_toward_the_change_and_discards_history() {
        let cfg =
            MeasurementConfig { initial_range: Some((Rate::from_mbps(50), Rate::from_mbps(70))), ..Default::default() };
        let mut m = measurer(cfg);
        m.history.push_back(60e6);
        // every stream flat: A above the range
        run_round(&mut m, Time::ZERO, 95.0, 100.0);
        let e = m.last_estimate().unwrap();
        assert!(!e.in_range);
        assert_eq!(e.value, Rate::from_mbps(70));
        assert!(m.history.is_empty());
        assert_eq!(m.search_range(), Some(SearchRange { lower: Rate::from_mbps(50), upper: Rate::from_mbps(90) }));
        // every stream increasing: A below the range
        let cfg =
            MeasurementConfig { initial_range: Some((Rate::from_mbps(50), Rate::from_mbps(70))), ..Default::default() };
        let mut m = measurer(cfg);
        run_round(&mut m, Time::ZERO, 10.0, 100.0);
        assert_eq!(m.last_estimate().unwrap().value, Rate::from_mbps(50));
        assert_eq!(m.search_range(), Some(SearchRange { lower: Rate::from_mbps(30), upper: Rate::from_mbps(70) }));
    }

    #[test]
    fn early_stop_after_two_trendless_streams() {
        let cfg = MeasurementConfig {
            sub_ranges: 6,
            initial_range: Some((Rate::from_mbps(10), Rate::from_mbps(70))),
            ..Default::default()
        };
        let mut m = measurer(cfg);
        // A = 95 > every sub-range: streams 1 and 2 flat, the rest need not be sent
        let mut sent = 0;
        while let Some(plan) = m.next_stream() {
            sent += 1;
            let mut t = Time::ZERO;
            for j in 1..=plan.packets {
                t += plan.gap_before(j, Bytes(1500));
                m.on_probe_sent(plan.key, j, t, Bytes(1500));
                m.on_probe_arrival(plan.key, j, t + Dur::from_millis(50));
            }
            m.on_stream_sent(plan.key);
            m.close_stream(plan.key);
        }
        assert_eq!(sent, 2);
        assert_eq!(m.finish_round(Time::from_secs_f64(1.0)), RoundOutcome::OutOfRange);
        assert_eq!(m.last_trends().len(), 6);
        assert!(m.last_trends().iter().all(|t| *t == Trend::NotIncreasing));
        assert_eq!(m.stats().early_stops, 1);
    }

    #[test]
    fn cprobe_sets_the_initial_range() {
        let mut m = measurer(MeasurementConfig::default());
        let plan = m.next_stream().unwrap();
        assert_eq!(plan.kind, StreamKind::Cprobe);
        // 35 packets dispersed at 80 Mbps by the bottleneck
        let spacing = Bytes(1500).time_at(Rate::from_mbps(80));
        for j in 1..=plan.packets {
            m.on_probe_sent(plan.key, j, Time::ZERO, Bytes(1500));
            m.on_probe_arrival(plan.key, j, Time::ZERO + Dur::from_millis(40) + Dur(spacing.0 * j as u64));
        }
        m.on_stream_sent(plan.key);
        assert!(m.next_stream().is_none());
        assert_eq!(m.finish_round(Time::from_secs_f64(0.1)), RoundOutcome::InitialRange);
        let r = m.search_range().unwrap();
        assert!((r.upper.as_mbps() - 80.0).abs() < 0.5 && (r.lower.as_mbps() - 40.0).abs() < 0.5, "{r:?}");
        assert!(m.poll_estimate().is_none());
    }

    #[test]
    fn stream_plan_sweeps_the_sub_range_upwards() {
        let cfg = MeasurementConfig {
            initial_range: Some((Rate::from_mbps(40), Rate::from_mbps(80))),
            stream_len: 5,
            ..Default::default()
        };
        let mut m = measurer(cfg);
        let p = m.next_stream().unwrap();
        assert_eq!(p.key.index, 1);
        let r: Vec<f64> = p.rates.iter().map(|r| r.unwrap().as_mbps()).collect();
        assert_eq!(r, vec![72.5, 75.0, 77.5, 80.0]);
        assert_eq!(p.gap_before(2, Bytes(1500)), Bytes(1500).time_at(Rate::from_mbps_f64(72.5)));
    }

    #[test]
    fn bad_config_is_rejected() {
        assert!(Measurer::new(MeasurementConfig { sub_ranges: 0, ..Default::default() }).is_err());
        assert!(Measurer::new(MeasurementConfig { stream_len: 1, ..Default::default() }).is_err());
        assert!(Measurer::new(MeasurementConfig { smoothing_gain: 0.0, ..Default::default() }).is_err());
        assert!(Measurer::new(MeasurementConfig { min_rate: Rate::ZERO, ..Default::default() }).is_err());
        assert!(Measurer::new(MeasurementConfig {
            initial_range: Some((Rate::from_mbps(5), Rate::from_mbps(5))),
            ..Default::default()
        })
        .is_err());
    }
}
