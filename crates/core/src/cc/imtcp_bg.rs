//! Background transfer on ImTCP's inline measurement: **ImTCP-bg** (Tsugawa, Hasegawa & Murata,
//! "インライン計測に基づく TCP によるバックグラウンド転送方式", IEICE technical report; headroom's
//! seed `000`, §3) and **ImTCP's background mode** (Man, Hasegawa & Murata, Computer
//! Communications 2005, §5.1; seed `001`).
//!
//! A background transfer must (1) not disturb the foreground traffic and (2) use the bandwidth the
//! foreground leaves (seed 000 §2). Both rules here put an upper bound on Reno's congestion
//! window computed from the available bandwidth `A` that ImTCP's buffer measures below the
//! sender ([`crate::imtcp::ImtcpBuffer`]).
//!
//! # ImTCP-bg (seed 000 §3)
//!
//! 1. **Smoothing (Eq. 1).** Every measurement result `A_cur` updates
//!    `Ā = (1 − γ)·Ā + γ·A_cur`, γ = 1/8; the first result initialises `Ā`.
//! 2. **Upper bound (Eq. 2).** `maxcwnd = Ā × RTT_min`, `RTT_min` the smallest RTT sample seen
//!    on the connection.
//! 3. **Queue detection (Eq. 3).** The bottleneck queue is judged to be building when
//!    `RTT_cur / RTT_min > δ` (δ ≥ 1; the paper uses 1.5 and studies 1.2). This corrects the
//!    overestimate that several ImTCP flows measuring at once suffer (§3.2: TCP's bursts keep
//!    each flow's packets together, so every flow measures what one flow alone would).
//! 4. **Reduction (Eq. 4).** Then `cwnd ← cwnd × RTT_min / RTT_cur`, leaving `maxcwnd` unchanged.
//!
//! Otherwise the window is Reno's (§3.1: "送信側 TCP が持つ輻輳ウィンドウサイズの上限値を動的に
//! 設定する"; the transfer is plain TCP Reno below the bound).
//!
//! **Choices the paper leaves open**, and the readings taken here:
//! - *How the bound applies.* `⟨maxcwnd⟩` is ns-2's `maxcwnd_` (the paper's simulator, ns-2, and
//!   its ⟨variable⟩ notation): `opencwnd()` clamps `cwnd_` to it whenever the window grows. Here
//!   Reno's window is clamped to `maxcwnd` after every ACK outside fast recovery, and `maxcwnd`
//!   is also the [`Window::ceiling`] (so the send window never exceeds it, fast recovery's
//!   inflation included). No bound before the first measurement result: Reno's slow start runs
//!   until then (Eq. 3 still applies).
//! - *`RTT_cur`* is the latest RTT sample (from the ACK being processed); `RTT_min` the smallest
//!   sample so far, kept by the rule itself (so a driver can feed it samples only). Opt-in
//!   [`RttCur::MinOfLast`] reads `RTT_cur` as the smallest of the last few samples: on a real
//!   host single ACKs arrive late (scheduling, the receiver's delayed ACKs) and each such
//!   sample would otherwise fire Eq. 4 on an empty queue (measured on the testbed, 50 Mbit/s,
//!   20 ms, the background sender alone: 13 reductions in 15 s with the latest sample, the
//!   window far below the BDP; 2-9 with the minimum of four).
//! - *Room for the measurement* (headroom's options, off in the paper's rule). Eq. 2 can put
//!   `maxcwnd` below one measurement stream (N segments); ImTCP's buffer then cannot form a
//!   stream, no new result comes, and `Ā`, hence the bound, never moves again (seen on the
//!   testbed: a first result of 18 Mbit/s during slow start gave 46 KB < N·MSS = 51 KB, and the
//!   sender stayed at 14 Mbit/s on an idle 50 Mbit/s path). `measurement_floor` keeps the
//!   bound at least one stream (as seed 001 §5.1 keeps its bound above `m·N`, "so that ImTCP
//!   can continue performing measurements"); `measurement_allowance` adds one stream to
//!   `Ā·RTT_min`, because the buffer holds up to a stream of the window while storing it.
//!   Neither changes Eq. 3-4: with a foreground that fills the queue, Eq. 4 still cuts the
//!   window below the floor. Both need the segment size ([`ImtcpBgRule::with_mss`]).
//! - *How often Eq. 4 fires.* At most once per RTT: after a reduction the rule waits `RTT_cur`
//!   before the next one. Applied on every ACK, the window's worth of ACKs that carry the same
//!   queue reading would compound the same reduction dozens of times before it can show.
//!   [`Reduction::EveryAck`] keeps the per-ACK reading for comparison.
//! - *Slow start after a reduction.* Eq. 4 changes `cwnd` only, so Reno keeps its `ssthresh`
//!   (unlimited before the first loss): below it the window regrows by slow start, up to
//!   `maxcwnd`. [`ImtcpBgConfig::reduction_sets_ssthresh`] makes Eq. 4 also set `ssthresh`
//!   (linear regrowth), for comparison.
//! - Eq. 4 is not applied during fast recovery (the window is Reno's inflated recovery window,
//!   rescaled anyway when recovery ends) and never takes the window below two segments.
//!
//! # ImTCP background mode (seed 001 §5.1)
//!
//! "When g·RTT·A > m·N we set MaxCwnd = g·RTT·A", 0 < g < 1, N the packets of one measurement
//! stream. Readings: `m·N` is the size of one stream in bytes (`m` = the segment size M, the only
//! reading whose units agree; the text's point is that the bound must leave room "for ImTCP to
//! continue performing measurements well"); `RTT` is the smoothed RTT (RFC 6298's SRTT) and `A`
//! the smoothed result `Ā` (γ = 1/8, as ImTCP reports it), both taken when a result arrives.
//! When `g·RTT·Ā ≤ m·N` the assignment does not happen: `MaxCwnd` keeps its last value
//! (none before the first assignment), so the bound never forces the window below one stream.
//! The bound clamps Reno's window as ImTCP-bg's does.
//!
//! headroom's option [`BackgroundRtt::Min`] (`rtt = "min"`) reads `RTT` as the smallest RTT seen,
//! ImTCP-bg's `RTT_min` (seed 000 Eq. 2). With the smoothed RTT the bound grows with the queue a
//! competing flow builds: beside one Reno flow on a 50 Mbit/s path with a 1000-packet buffer,
//! Reno's queue pushed the RTT to about 222 ms and the bound (g = 0.8) to 554 KB against a
//! 237 KB window, so it no longer bound and Reno kept 84 % of the path (issues 12 and 14 audit,
//! session 7). With `RTT_min` the bound is g × the path's own bandwidth-delay product whatever
//! the queue.
//!
//! # Drivers
//!
//! The controllers ([`ImtcpBg`], [`ImtcpBackground`]) are [`CongestionControl`]s: the sender
//! that owns ImTCP's buffer passes each new measurement result to
//! [`CongestionControl::on_estimate`] (the simulator does so right after the buffer saw the ACK
//! that finished the measurement). A driver that does **not** own the congestion window (a
//! real socket whose kernel runs its own congestion control, throttled from user space by a
//! bytes-in-flight limit) uses [`ImtcpBgLimit`]: the same rule over a shadow Reno window, fed
//! ACKs, RTT samples and estimates, returning the in-flight limit.

use crate::cc::reno::{Reno, RenoConfig};
use crate::cc::{AckAction, AckEvent, CongestionControl, SentEvent, Window};
use crate::units::{Bytes, Dur, Rate, Time};

/// When Eq. 4 may fire again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    /// At most once per RTT (`RTT_cur` after the previous reduction): the default.
    OncePerRtt,
    /// On every ACK whose RTT sample satisfies Eq. 3 (the literal reading).
    EveryAck,
}

/// Which RTT is `RTT_cur` in Eq. 3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RttCur {
    /// The latest sample (the paper's reading): the default.
    Latest,
    /// The smallest of the last `n` samples (1 ≤ n ≤ [`RTT_CUR_MAX_SAMPLES`]): a queue has to
    /// show in `n` successive ACKs before Eq. 3 holds, so one late ACK (scheduling jitter on
    /// a real host, an ACK the receiver delayed) is not read as a building queue, while a
    /// real queue, which delays every packet behind it, is seen after `n` ACKs.
    MinOfLast(u8),
}

/// Most samples [`RttCur::MinOfLast`] may look at.
pub const RTT_CUR_MAX_SAMPLES: u8 = 8;

/// Parameters of ImTCP-bg (seed 000 §3, §4).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ImtcpBgConfig {
    /// γ of Eq. 1 (1/8).
    pub gamma: f64,
    /// δ of Eq. 3 (1.5; the paper also studies 1.2).
    pub delta: f64,
    pub reduction: Reduction,
    /// Eq. 4 also sets `ssthresh` to the reduced window (leaves slow start). Off in the paper's
    /// rule (only `cwnd` changes).
    pub reduction_sets_ssthresh: bool,
    /// headroom's option beyond the paper: Eq. 4 sets `ssthresh` to `maxcwnd`, so the window
    /// regrows by slow start up to the bound once the queue drained (instead of Reno's one
    /// segment per RTT after the first loss). Off in the paper's rule.
    pub fast_regrowth: bool,
    /// `RTT_cur` of Eq. 3 ([`RttCur::Latest`] in the paper).
    pub rtt_cur: RttCur,
    /// headroom's option beyond the paper: `maxcwnd` is never below this many segments, one
    /// measurement stream (ImTCP's N) in practice, so that ImTCP can still form streams and
    /// new results keep coming (seed 001 §5.1 keeps its bound above `m·N` for the same
    /// reason). Eq. 4 still scales the window below it while the queue builds. `None` in
    /// the paper's rule.
    pub measurement_floor: Option<u32>,
    /// headroom's option beyond the paper: this many segments (one stream, N) are added to
    /// `maxcwnd`. ImTCP's buffer sits below the window and holds up to one stream of it while
    /// it stores the stream, so a window of exactly `Ā·RTT_min` leaves the path idle during
    /// every storing episode: measured on the testbed (50 Mbit/s, 20 ms, alone), the limit sat
    /// near the BDP and the sender moved 22-33 Mbit/s. The allowance also keeps the bound
    /// above one stream (it implies the floor). `None` in the paper's rule.
    pub measurement_allowance: Option<u32>,
}

impl Default for ImtcpBgConfig {
    fn default() -> Self {
        ImtcpBgConfig {
            gamma: 1.0 / 8.0,
            delta: 1.5,
            reduction: Reduction::OncePerRtt,
            reduction_sets_ssthresh: false,
            fast_regrowth: false,
            rtt_cur: RttCur::Latest,
            measurement_floor: None,
            measurement_allowance: None,
        }
    }
}

impl ImtcpBgConfig {
    /// headroom's rule for a real sender (`headroom send --background`), for streams of
    /// `stream_len` segments: the paper's Eqs. 1-4 with `RTT_cur` the smallest of the last four
    /// samples ([`RttCur::MinOfLast`]), one stream added to the bound
    /// (`measurement_allowance`) and Eq. 4 setting `ssthresh` (`reduction_sets_ssthresh`,
    /// linear regrowth). Why, measured side by side on the testbed (50 Mbit/s, 20 ms RTT,
    /// 100-packet buffer, a kernel-CUBIC bulk foreground, 15-s runs, `headroom send-bench
    /// --parts background`; docs/results.md): the paper's rule reached 86.6 % of the link alone
    /// but left the foreground 86.1 % of its throughput (after an Eq. 4 reduction it regrows by
    /// slow start, doubling every RTT while the foreground keeps the queue full); with linear
    /// regrowth the foreground kept 98.0 % but the sender alone reached 82.0 % (a window of
    /// `Ā·RTT_min` idles the path while ImTCP stores a stream); with the allowance as well,
    /// 94.9 % kept and 88.5 % alone. Eq. 4 itself is unchanged.
    pub fn headroom(stream_len: usize) -> ImtcpBgConfig {
        ImtcpBgConfig {
            rtt_cur: RttCur::MinOfLast(4),
            measurement_allowance: Some(stream_len.max(1) as u32),
            reduction_sets_ssthresh: true,
            ..ImtcpBgConfig::default()
        }
    }

    /// Checks the ranges the paper gives: 0 < γ ≤ 1, δ ≥ 1.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.gamma > 0.0 && self.gamma <= 1.0) {
            return Err(format!("gamma must be within (0, 1], got {}", self.gamma));
        }
        if !(self.delta >= 1.0 && self.delta.is_finite()) {
            return Err(format!("delta must be a number of at least 1, got {}", self.delta));
        }
        if let RttCur::MinOfLast(n) = self.rtt_cur {
            if !(1..=RTT_CUR_MAX_SAMPLES).contains(&n) {
                return Err(format!("RTT_cur: the minimum of 1 to {RTT_CUR_MAX_SAMPLES} samples, got {n}"));
            }
        }
        if self.measurement_floor == Some(0) || self.measurement_allowance == Some(0) {
            return Err("measurement floor or allowance: at least one segment".into());
        }
        Ok(())
    }
}

/// Exponentially weighted moving average of measurement results (Eq. 1).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Smoothed {
    gamma: f64,
    value: Option<f64>,
}

impl Smoothed {
    fn update(&mut self, a: Rate) {
        let a = a.0 as f64;
        self.value = Some(match self.value {
            None => a,
            Some(s) => (1.0 - self.gamma) * s + self.gamma * a,
        });
    }
    fn rate(&self) -> Option<Rate> {
        self.value.map(|v| Rate(v.max(0.0).round() as u64))
    }
}

/// The ImTCP-bg rule (Eqs. 1–4) without a window of its own: fed estimates and RTT samples, it
/// gives `maxcwnd` and says when (and by how much) to scale the window.
#[derive(Clone, Debug)]
pub struct ImtcpBgRule {
    cfg: ImtcpBgConfig,
    a_bar: Smoothed,
    rtt_min: Option<Dur>,
    /// The last samples, newest at `recent_len - 1` (as many as [`RttCur`] looks at).
    recent: [Dur; RTT_CUR_MAX_SAMPLES as usize],
    recent_len: usize,
    /// `measurement_floor` in bytes (set by [`ImtcpBgRule::with_mss`]).
    floor: Option<Bytes>,
    /// `measurement_allowance` in bytes.
    allowance: Option<Bytes>,
    /// No reduction before this instant ([`Reduction::OncePerRtt`]).
    quiet_until: Time,
    reductions: u64,
}

impl ImtcpBgRule {
    pub fn new(cfg: ImtcpBgConfig) -> ImtcpBgRule {
        ImtcpBgRule {
            cfg,
            a_bar: Smoothed { gamma: cfg.gamma, value: None },
            rtt_min: None,
            recent: [Dur(0); RTT_CUR_MAX_SAMPLES as usize],
            recent_len: 0,
            floor: None,
            allowance: None,
            quiet_until: Time::ZERO,
            reductions: 0,
        }
    }
    /// The rule for a sender of `mss`-byte segments (sets the measurement floor's bytes).
    pub fn with_mss(cfg: ImtcpBgConfig, mss: Bytes) -> ImtcpBgRule {
        let mut r = ImtcpBgRule::new(cfg);
        r.floor = cfg.measurement_floor.map(|n| Bytes(n as u64 * mss.0.max(1)));
        r.allowance = cfg.measurement_allowance.map(|n| Bytes(n as u64 * mss.0.max(1)));
        r
    }
    pub fn config(&self) -> ImtcpBgConfig {
        self.cfg
    }
    /// A measurement result `A_cur` (Eq. 1).
    pub fn on_estimate(&mut self, a: Rate) {
        self.a_bar.update(a);
    }
    /// `Ā`.
    pub fn smoothed(&self) -> Option<Rate> {
        self.a_bar.rate()
    }
    pub fn rtt_min(&self) -> Option<Dur> {
        self.rtt_min
    }
    /// Reductions (Eq. 4) so far.
    pub fn reductions(&self) -> u64 {
        self.reductions
    }
    /// `maxcwnd = Ā × RTT_min` (Eq. 2); `None` before the first result or RTT sample.
    pub fn maxcwnd(&self) -> Option<Bytes> {
        Some(self.a_bar.rate()?.bytes_in(self.rtt_min?))
    }
    /// The bound on the window: `maxcwnd`, plus the measurement allowance and raised to the
    /// measurement floor when they are set.
    pub fn window_bound(&self) -> Option<Bytes> {
        let m = self.maxcwnd()? + self.allowance.unwrap_or(Bytes::ZERO);
        Some(self.floor.map_or(m, |f| m.max(f)))
    }
    /// `RTT_cur` ([`RttCur`]) after the samples so far.
    pub fn rtt_cur(&self) -> Option<Dur> {
        self.recent[..self.recent_len].iter().copied().min()
    }
    /// An RTT sample at `now`. Returns `Some(RTT_min / RTT_cur)` when Eq. 3 holds and a
    /// reduction is due (Eq. 4: multiply the window by it).
    pub fn on_rtt(&mut self, now: Time, rtt: Dur) -> Option<f64> {
        let rtt = rtt.max(Dur(1));
        let min = self.rtt_min.map_or(rtt, |m| m.min(rtt));
        self.rtt_min = Some(min);
        let keep = match self.cfg.rtt_cur {
            RttCur::Latest => 1,
            RttCur::MinOfLast(n) => (n as usize).clamp(1, self.recent.len()),
        };
        if self.recent_len == keep {
            self.recent.copy_within(1..keep, 0);
            self.recent_len -= 1;
        }
        self.recent[self.recent_len] = rtt;
        self.recent_len += 1;
        let cur = self.rtt_cur().unwrap_or(rtt);
        let ratio = cur.0 as f64 / min.0 as f64;
        if ratio <= self.cfg.delta || now < self.quiet_until {
            return None;
        }
        if self.cfg.reduction == Reduction::OncePerRtt {
            self.quiet_until = now + cur;
        }
        self.reductions += 1;
        Some(1.0 / ratio)
    }
}

/// Clamps `cwnd` (bytes) to an optional bound, never below two segments.
fn clamp(cwnd: u64, bound: Option<Bytes>, mss: u64) -> u64 {
    match bound {
        Some(b) => cwnd.min(b.0.max(2 * mss)),
        None => cwnd,
    }
}

/// ImTCP-bg for a driver that does not own the congestion window (module doc, "Drivers"): a
/// shadow Reno window scaled by Eq. 4 and clamped to the bound, as [`ImtcpBg`] does to its own
/// Reno. The driver keeps at most [`ImtcpBgLimit::inflight_limit`] bytes outstanding; the real
/// window is then min(kernel cwnd, limit).
///
/// The shadow is Reno's window without Reno's repair (the kernel retransmits):
/// - **Growth counts bytes** (RFC 3465): slow start adds the bytes acknowledged, at most two
///   segments per ACK (L = 2); congestion avoidance adds one segment per window of bytes
///   acknowledged. A real receiver acknowledges every second segment, and a sender that adds
///   one segment (or `mss²/cwnd`) per ACK would grow at half Reno's rate: measured on the
///   testbed, the shadow then took about 70 RTTs to regrow from an Eq. 4 reduction to the
///   path's BDP.
/// - **`ssthresh`** is unlimited until the driver reports a loss ([`ImtcpBgLimit::on_loss`],
///   a retransmission by the kernel): then the window halves and `ssthresh` with it, at most
///   once per RTT (Reno's one reduction per window of data). So, as in [`ImtcpBg`] and the
///   paper's ns-2 Reno, the window regrows by slow start after Eq. 4 until the first loss,
///   and linearly after it. `reduction_sets_ssthresh` and `fast_regrowth` act as in
///   [`ImtcpBg`]. (Before, the shadow left slow start for good the first time it reached
///   `maxcwnd`, which no Reno does.)
#[derive(Clone, Debug)]
pub struct ImtcpBgLimit {
    rule: ImtcpBgRule,
    mss: u64,
    window: u64,
    ssthresh: u64,
    /// Bytes acknowledged in congestion avoidance not yet turned into growth.
    ca_acked: u64,
    /// No loss reduction before this instant.
    loss_quiet_until: Time,
    losses: u64,
}

impl ImtcpBgLimit {
    /// `initial_window` is the shadow window before any ACK (e.g. the kernel's initial window).
    pub fn new(cfg: ImtcpBgConfig, mss: Bytes, initial_window: Bytes) -> ImtcpBgLimit {
        let mss = mss.0.max(1);
        ImtcpBgLimit {
            rule: ImtcpBgRule::with_mss(cfg, Bytes(mss)),
            mss,
            window: initial_window.0.max(2 * mss),
            ssthresh: u64::MAX,
            ca_acked: 0,
            loss_quiet_until: Time::ZERO,
            losses: 0,
        }
    }
    pub fn rule(&self) -> &ImtcpBgRule {
        &self.rule
    }
    /// Losses that halved the shadow window.
    pub fn losses(&self) -> u64 {
        self.losses
    }
    /// A measurement result.
    pub fn on_estimate(&mut self, a: Rate) {
        self.rule.on_estimate(a);
        self.window = clamp(self.window, self.rule.window_bound(), self.mss);
    }
    /// A loss the kernel repairs (its retransmission counter rose) at `now`: Reno halves its
    /// window once per RTT (`srtt`, or the smallest RTT seen when there is no SRTT).
    pub fn on_loss(&mut self, now: Time, srtt: Option<Dur>) {
        if now < self.loss_quiet_until {
            return;
        }
        self.loss_quiet_until = now + srtt.or(self.rule.rtt_min()).unwrap_or(Dur::ZERO);
        self.losses += 1;
        self.window = (self.window / 2).max(2 * self.mss);
        self.ssthresh = self.window;
        self.ca_acked = 0;
    }
    /// An ACK at `now` acknowledging `newly_acked` bytes, with its RTT sample if any. Returns
    /// the in-flight limit after it.
    pub fn on_ack(&mut self, now: Time, newly_acked: Bytes, rtt: Option<Dur>) -> Bytes {
        if newly_acked.0 > 0 {
            if self.window < self.ssthresh {
                self.window += newly_acked.0.min(2 * self.mss);
            } else {
                self.ca_acked += newly_acked.0;
                if self.ca_acked >= self.window {
                    self.ca_acked -= self.window;
                    self.window += self.mss;
                }
            }
        }
        if let Some(k) = rtt.and_then(|r| self.rule.on_rtt(now, r)) {
            self.window = ((self.window as f64 * k) as u64).max(2 * self.mss);
            if self.rule.cfg.reduction_sets_ssthresh {
                self.ssthresh = self.window;
            }
            if let Some(b) = self.rule.window_bound().filter(|_| self.rule.cfg.fast_regrowth) {
                self.ssthresh = b.0;
            }
        }
        self.window = clamp(self.window, self.rule.window_bound(), self.mss);
        self.inflight_limit()
    }
    /// Bytes the driver may keep in flight.
    pub fn inflight_limit(&self) -> Bytes {
        Bytes(self.window)
    }
}

/// Parameters of ImTCP's background mode (seed 001 §5.1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BackgroundConfig {
    /// g, 0 < g < 1.
    pub g: f64,
    /// γ of the smoothed estimate (1/8).
    pub gamma: f64,
    /// N, packets of one measurement stream (ImTCP's default 35).
    pub stream_len: usize,
    /// Which RTT the bound `g·RTT·Ā` takes (module doc).
    pub rtt: BackgroundRtt,
}

/// The `RTT` of the background mode's bound `g·RTT·Ā` (module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BackgroundRtt {
    /// The smoothed RTT when the result arrives (the paper's reading, the default).
    #[default]
    Smoothed,
    /// The smallest RTT seen (headroom's option, as ImTCP-bg's `RTT_min`).
    Min,
}

impl Default for BackgroundConfig {
    fn default() -> Self {
        BackgroundConfig { g: 0.8, gamma: 1.0 / 8.0, stream_len: 35, rtt: BackgroundRtt::Smoothed }
    }
}

impl BackgroundConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !(self.g > 0.0 && self.g < 1.0) {
            return Err(format!("g must be within (0, 1), got {}", self.g));
        }
        if !(self.gamma > 0.0 && self.gamma <= 1.0) {
            return Err(format!("gamma must be within (0, 1], got {}", self.gamma));
        }
        if self.stream_len == 0 {
            return Err("stream_len (N) must be at least 1".into());
        }
        Ok(())
    }
}

/// The background-mode rule: `MaxCwnd = g·RTT·Ā` when that exceeds `M·N` (module doc).
#[derive(Clone, Debug)]
pub struct BackgroundRule {
    cfg: BackgroundConfig,
    a_bar: Smoothed,
    max_cwnd: Option<Bytes>,
    rtt_min: Option<Dur>,
}

impl BackgroundRule {
    pub fn new(cfg: BackgroundConfig) -> BackgroundRule {
        BackgroundRule { cfg, a_bar: Smoothed { gamma: cfg.gamma, value: None }, max_cwnd: None, rtt_min: None }
    }
    /// An RTT sample (kept for [`BackgroundRtt::Min`]).
    pub fn on_rtt(&mut self, rtt: Dur) {
        self.rtt_min = Some(self.rtt_min.map_or(rtt, |m| m.min(rtt)));
    }
    /// A measurement result with the sender's smoothed RTT and segment size at that time.
    pub fn on_estimate(&mut self, a: Rate, srtt: Dur, mss: Bytes) {
        self.a_bar.update(a);
        let Some(a_bar) = self.a_bar.rate() else { return };
        let rtt = match self.cfg.rtt {
            BackgroundRtt::Smoothed => srtt,
            BackgroundRtt::Min => self.rtt_min.unwrap_or(srtt),
        };
        let bound = a_bar.bytes_in(rtt).0 as f64 * self.cfg.g;
        if bound > (mss.0 * self.cfg.stream_len as u64) as f64 {
            self.max_cwnd = Some(Bytes(bound as u64));
        }
    }
    /// `MaxCwnd`; `None` until the condition first held.
    pub fn max_cwnd(&self) -> Option<Bytes> {
        self.max_cwnd
    }
    pub fn smoothed(&self) -> Option<Rate> {
        self.a_bar.rate()
    }
}

/// A bound on Reno's window computed from ImTCP's measurement: what [`Bounded`] asks of it.
pub trait WindowBound {
    /// Controller name.
    fn name(&self) -> &'static str;
    /// An ACK's RTT sample; `Some(k)`: multiply the window by `k` (a reduction).
    fn on_rtt(&mut self, _now: Time, _rtt: Dur) -> Option<f64> {
        None
    }
    /// A measurement result, with the sender's smoothed RTT and segment size at that time.
    fn on_estimate(&mut self, a: Rate, srtt: Option<Dur>, mss: Bytes);
    /// The current bound (`None`: unlimited).
    fn bound(&self) -> Option<Bytes>;
    /// Whether a reduction also sets `ssthresh` to the reduced window.
    fn reduction_sets_ssthresh(&self) -> bool {
        false
    }
    /// Whether a reduction sets `ssthresh` to the bound (regrowth by slow start).
    fn fast_regrowth(&self) -> bool {
        false
    }
}

impl WindowBound for ImtcpBgRule {
    fn name(&self) -> &'static str {
        "imtcp-bg"
    }
    fn on_rtt(&mut self, now: Time, rtt: Dur) -> Option<f64> {
        ImtcpBgRule::on_rtt(self, now, rtt)
    }
    fn on_estimate(&mut self, a: Rate, _srtt: Option<Dur>, _mss: Bytes) {
        ImtcpBgRule::on_estimate(self, a)
    }
    fn bound(&self) -> Option<Bytes> {
        self.window_bound()
    }
    fn reduction_sets_ssthresh(&self) -> bool {
        self.cfg.reduction_sets_ssthresh
    }
    fn fast_regrowth(&self) -> bool {
        self.cfg.fast_regrowth
    }
}

impl WindowBound for BackgroundRule {
    fn name(&self) -> &'static str {
        "imtcp-background"
    }
    fn on_rtt(&mut self, _now: Time, rtt: Dur) -> Option<f64> {
        BackgroundRule::on_rtt(self, rtt);
        None
    }
    fn on_estimate(&mut self, a: Rate, srtt: Option<Dur>, mss: Bytes) {
        if let Some(srtt) = srtt {
            BackgroundRule::on_estimate(self, a, srtt, mss)
        }
    }
    fn bound(&self) -> Option<Bytes> {
        self.max_cwnd()
    }
}

/// Reno bounded by a [`WindowBound`]: the window is clamped to the bound after every ACK outside
/// fast recovery, the bound is also the send window's ceiling, and a reduction the bound asks
/// for scales the window (module doc).
#[derive(Clone, Debug)]
pub struct Bounded<B> {
    reno: Reno,
    rule: B,
    mss: u64,
    srtt: Option<Dur>,
}

/// ImTCP-bg (seed 000 §3): Reno bounded by [`ImtcpBgRule`].
pub type ImtcpBg = Bounded<ImtcpBgRule>;
/// ImTCP's background mode (seed 001 §5.1): Reno bounded by [`BackgroundRule`].
pub type ImtcpBackground = Bounded<BackgroundRule>;

impl ImtcpBg {
    pub fn new(cfg: ImtcpBgConfig, reno: RenoConfig) -> ImtcpBg {
        Bounded::with_rule(ImtcpBgRule::with_mss(cfg, reno.mss), reno)
    }
}

impl ImtcpBackground {
    pub fn new(cfg: BackgroundConfig, reno: RenoConfig) -> ImtcpBackground {
        Bounded::with_rule(BackgroundRule::new(cfg), reno)
    }
}

impl<B: WindowBound> Bounded<B> {
    pub fn with_rule(rule: B, reno: RenoConfig) -> Bounded<B> {
        Bounded { reno: Reno::reno(reno), rule, mss: reno.mss.0.max(1), srtt: None }
    }
    pub fn rule(&self) -> &B {
        &self.rule
    }
    pub fn cwnd(&self) -> Bytes {
        self.reno.cwnd()
    }
    /// Overrides Reno's window (tests, experiment drivers).
    pub fn set_cwnd(&mut self, cwnd: Bytes) {
        self.reno.set_cwnd(cwnd);
    }
}

impl<B: WindowBound + std::fmt::Debug> CongestionControl for Bounded<B> {
    fn name(&self) -> &'static str {
        self.rule.name()
    }

    fn on_ack(&mut self, ev: &AckEvent) -> AckAction {
        if ev.srtt.is_some() {
            self.srtt = ev.srtt;
        }
        let scale = ev.rtt.and_then(|r| self.rule.on_rtt(ev.now, r));
        let action = self.reno.on_ack(ev);
        if !self.reno.in_recovery() {
            let mut cwnd = self.reno.cwnd().0;
            if let Some(k) = scale {
                cwnd = ((cwnd as f64 * k) as u64).max(2 * self.mss);
                if self.rule.reduction_sets_ssthresh() {
                    self.reno.set_ssthresh(Bytes(cwnd));
                }
                if let Some(b) = self.rule.bound().filter(|_| self.rule.fast_regrowth()) {
                    self.reno.set_ssthresh(b);
                }
            }
            self.reno.set_cwnd(Bytes(clamp(cwnd, self.rule.bound(), self.mss)));
        }
        action
    }

    fn on_timeout(&mut self, now: Time, in_flight: Bytes) {
        self.reno.on_timeout(now, in_flight);
    }

    fn on_sent(&mut self, ev: &SentEvent) {
        self.reno.on_sent(ev);
    }

    fn on_estimate(&mut self, _now: Time, available: Rate) {
        self.rule.on_estimate(available, self.srtt, Bytes(self.mss));
    }

    fn window(&self) -> Window {
        let mut w = self.reno.window();
        w.ceiling = self.rule.bound().map(|b| Bytes(b.0.max(2 * self.mss)));
        w
    }

    fn in_recovery(&self) -> bool {
        self.reno.in_recovery()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;

    fn reno_cfg() -> RenoConfig {
        RenoConfig { mss: Bytes(MSS), ..RenoConfig::default() }
    }

    fn ack(now_ms: u64, ack: u64, rtt_ms: u64) -> AckEvent {
        AckEvent {
            now: Time(now_ms * 1_000_000),
            ack,
            newly_acked: Bytes(MSS),
            rtt: Some(Dur::from_millis(rtt_ms)),
            srtt: Some(Dur::from_millis(rtt_ms)),
            in_flight: Bytes(10 * MSS),
            snd_max: ack + 10 * MSS,
            mss: Bytes(MSS),
            ..Default::default()
        }
    }

    #[test]
    fn smoothing_follows_eq_1() {
        let mut r = ImtcpBgRule::new(ImtcpBgConfig::default());
        r.on_estimate(Rate::from_mbps(40));
        assert_eq!(r.smoothed(), Some(Rate::from_mbps(40)), "the first result initialises Ā");
        r.on_estimate(Rate::from_mbps(8));
        assert_eq!(r.smoothed(), Some(Rate::from_mbps(36)), "7/8 · 40 + 1/8 · 8");
        assert_eq!(r.maxcwnd(), None, "no RTT sample yet");
        r.on_rtt(Time(0), Dur::from_millis(20));
        assert_eq!(r.maxcwnd(), Some(Bytes(90_000)), "36 Mbit/s × 20 ms");
    }

    #[test]
    fn imtcp_bg_scales_cwnd_by_rtt_min_over_rtt_cur_above_delta() {
        let mut c = ImtcpBg::new(ImtcpBgConfig::default(), reno_cfg());
        c.on_ack(&ack(0, MSS, 20)); // RTT_min = 20 ms
        c.set_cwnd(Bytes(60 * MSS));
        // RTT 28 ms: ratio 1.4 ≤ δ = 1.5, Reno grows (slow start: + one segment).
        c.on_ack(&ack(10, 2 * MSS, 28));
        assert_eq!(c.cwnd(), Bytes(61 * MSS));
        // RTT 40 ms: ratio 2 > δ: cwnd (after Reno's growth, 62 segments) × 20/40.
        c.on_ack(&ack(20, 3 * MSS, 40));
        assert_eq!(c.cwnd(), Bytes(31 * MSS));
        assert_eq!(c.rule().reductions(), 1);
        assert!(c.window().ssthresh > Bytes(1 << 40), "Eq. 4 changes cwnd only");
        // Within the next RTT (40 ms) the same reading does not compound...
        c.on_ack(&ack(50, 4 * MSS, 40));
        assert_eq!(c.rule().reductions(), 1);
        assert!(c.cwnd() >= Bytes(31 * MSS));
        // ...after it, it does.
        let before = c.cwnd().0;
        c.on_ack(&ack(61, 5 * MSS, 40));
        assert_eq!(c.rule().reductions(), 2);
        assert!(c.cwnd().0 <= (before + MSS) / 2 + 1, "{} vs {before}", c.cwnd().0);
        // δ = 1.2 reacts where δ = 1.5 does not.
        let mut strict = ImtcpBg::new(ImtcpBgConfig { delta: 1.2, ..ImtcpBgConfig::default() }, reno_cfg());
        strict.on_ack(&ack(0, MSS, 20));
        strict.set_cwnd(Bytes(60 * MSS));
        strict.on_ack(&ack(10, 2 * MSS, 28));
        assert_eq!(strict.cwnd(), Bytes(61 * MSS * 20 / 28));
        // The option that ends slow start at a reduction.
        let cfg = ImtcpBgConfig { reduction_sets_ssthresh: true, ..ImtcpBgConfig::default() };
        let mut linear = ImtcpBg::new(cfg, reno_cfg());
        linear.on_ack(&ack(0, MSS, 20));
        linear.set_cwnd(Bytes(60 * MSS));
        linear.on_ack(&ack(10, 2 * MSS, 40));
        assert_eq!(linear.window().ssthresh, Bytes(30_500));
        linear.on_ack(&ack(20, 3 * MSS, 20));
        assert_eq!(linear.cwnd(), Bytes(30_500 + MSS * MSS / 30_500), "congestion avoidance after it");
    }

    #[test]
    fn imtcp_bg_never_exceeds_maxcwnd() {
        let mut c = ImtcpBg::new(ImtcpBgConfig::default(), reno_cfg());
        c.on_ack(&ack(0, MSS, 20));
        assert_eq!(c.window().ceiling, None, "no bound before the first estimate");
        // 8 Mbit/s × 20 ms = 20,000 bytes = 20 segments.
        c.on_estimate(Time(0), Rate::from_mbps(8));
        for i in 1..500 {
            c.on_ack(&ack(i, (i + 1) * MSS, 20));
            let w = c.window();
            assert!(w.cwnd <= Bytes(20 * MSS), "cwnd {} above maxcwnd at ack {i}", w.cwnd);
            assert_eq!(w.ceiling, Some(Bytes(20 * MSS)));
            assert!(w.send_window(Bytes(1 << 30)) <= Bytes(20 * MSS));
        }
        assert_eq!(c.cwnd(), Bytes(20 * MSS), "Reno grew up to the bound");
        // A reduction leaves maxcwnd unchanged.
        // Reno's slow start added one segment (21 segments) before the scaling by 20/50.
        c.on_ack(&ack(600, 600 * MSS, 50));
        assert_eq!(c.cwnd(), Bytes(8400));
        assert_eq!(c.rule().maxcwnd(), Some(Bytes(20 * MSS)));
    }

    #[test]
    fn limit_for_a_driver_without_cwnd_follows_the_same_rule() {
        let mut l = ImtcpBgLimit::new(ImtcpBgConfig::default(), Bytes(MSS), Bytes(10 * MSS));
        let t = |ms: u64| Time(ms * 1_000_000);
        // Slow start while RTT stays at the minimum.
        for i in 0..20 {
            l.on_ack(t(i), Bytes(MSS), Some(Dur::from_millis(20)));
        }
        assert_eq!(l.inflight_limit(), Bytes(30 * MSS));
        // Queue builds: 20 → 50 ms: scaled by 0.4.
        assert_eq!(l.on_ack(t(30), Bytes(MSS), Some(Dur::from_millis(50))), Bytes(31 * MSS * 2 / 5));
        // An estimate bounds it: 4 Mbit/s × 20 ms = 10,000 bytes.
        l.on_estimate(Rate::from_mbps(4));
        assert_eq!(l.inflight_limit(), Bytes(10 * MSS));
        for i in 0..100 {
            assert!(l.on_ack(t(100 + i), Bytes(MSS), Some(Dur::from_millis(20))) <= Bytes(10 * MSS));
        }
    }

    #[test]
    fn limit_counts_bytes_so_merged_acks_grow_it_as_reno() {
        let t = |ms: u64| Time(ms * 1_000_000);
        let rtt = Some(Dur::from_millis(20));
        // Slow start: one ACK of two segments adds two, as two ACKs of one do.
        let mut one = ImtcpBgLimit::new(ImtcpBgConfig::default(), Bytes(MSS), Bytes(10 * MSS));
        let mut two = one.clone();
        for i in 0..10 {
            one.on_ack(t(i), Bytes(MSS), rtt);
            one.on_ack(t(i), Bytes(MSS), rtt);
            two.on_ack(t(i), Bytes(2 * MSS), rtt);
        }
        assert_eq!(one.inflight_limit(), Bytes(30 * MSS));
        assert_eq!(two.inflight_limit(), Bytes(30 * MSS));
        // A loss halves the window once per RTT and ends slow start.
        two.on_loss(t(100), rtt);
        two.on_loss(t(110), rtt);
        assert_eq!((two.inflight_limit(), two.losses()), (Bytes(15 * MSS), 1));
        two.on_loss(t(121), rtt);
        assert_eq!((two.inflight_limit(), two.losses()), (Bytes(7500), 2));
        // Congestion avoidance: one segment per window of bytes, however the ACKs split it.
        let w = two.inflight_limit().0;
        for i in 0..w / (2 * MSS) + 1 {
            two.on_ack(t(200 + i), Bytes(2 * MSS), rtt);
        }
        assert_eq!(two.inflight_limit(), Bytes(w + MSS), "one segment after a window's worth");
        // Without a loss the window regrows by slow start after Eq. 4 (ssthresh unlimited).
        let before = one.inflight_limit().0;
        one.on_ack(t(300), Bytes(MSS), Some(Dur::from_millis(40)));
        let cut = one.inflight_limit().0;
        assert_eq!(cut, (before + MSS) / 2);
        for i in 0..5 {
            one.on_ack(t(400 + i), Bytes(2 * MSS), rtt);
        }
        assert_eq!(one.inflight_limit(), Bytes(cut + 10 * MSS));
    }

    #[test]
    fn rtt_cur_as_the_minimum_of_recent_samples_ignores_a_lone_late_ack() {
        let t = |ms: u64| Time(ms * 1_000_000);
        let ms = Dur::from_millis;
        let mut latest = ImtcpBgRule::new(ImtcpBgConfig::default());
        let mut min4 = ImtcpBgRule::new(ImtcpBgConfig { rtt_cur: RttCur::MinOfLast(4), ..ImtcpBgConfig::default() });
        for (i, r) in [20, 21, 20, 40, 21].into_iter().enumerate() {
            let a = latest.on_rtt(t(i as u64), ms(r));
            let b = min4.on_rtt(t(i as u64), ms(r));
            assert_eq!(a.is_some(), r == 40, "the paper's reading reacts to the one sample of 40 ms");
            assert_eq!(b, None, "the minimum of four does not");
        }
        // A queue that delays every packet shows after four ACKs.
        let got: Vec<bool> = (0..4).map(|i| min4.on_rtt(t(10 + i), ms(40)).is_some()).collect();
        assert_eq!(got, [false, false, false, true]);
        assert_eq!(min4.rtt_cur(), Some(ms(40)));
        assert!(ImtcpBgConfig { rtt_cur: RttCur::MinOfLast(0), ..ImtcpBgConfig::default() }.validate().is_err());
        assert!(ImtcpBgConfig { rtt_cur: RttCur::MinOfLast(9), ..ImtcpBgConfig::default() }.validate().is_err());
    }

    #[test]
    fn measurement_floor_keeps_the_bound_at_one_stream_but_not_the_reduction() {
        let cfg = ImtcpBgConfig { measurement_floor: Some(35), ..ImtcpBgConfig::default() };
        let t = |ms: u64| Time(ms * 1_000_000);
        let mut l = ImtcpBgLimit::new(cfg, Bytes(MSS), Bytes(10 * MSS));
        let mut paper = ImtcpBgLimit::new(ImtcpBgConfig::default(), Bytes(MSS), Bytes(10 * MSS));
        for x in [&mut l, &mut paper] {
            x.on_ack(t(0), Bytes(MSS), Some(Dur::from_millis(20)));
            // 4 Mbit/s × 20 ms = 10 segments: below one stream of 35.
            x.on_estimate(Rate::from_mbps(4));
            for i in 0..100 {
                x.on_ack(t(1 + i), Bytes(2 * MSS), Some(Dur::from_millis(20)));
            }
        }
        assert_eq!(paper.inflight_limit(), Bytes(10 * MSS), "the paper's bound: Ā × RTT_min");
        assert_eq!(l.inflight_limit(), Bytes(35 * MSS), "the floor: one stream");
        assert_eq!(l.rule().maxcwnd(), Some(Bytes(10 * MSS)), "Eq. 2 itself is unchanged");
        // Eq. 4 still cuts below the floor while the queue builds.
        assert_eq!(l.on_ack(t(200), Bytes(MSS), Some(Dur::from_millis(40))), Bytes(36 * MSS / 2));
        // The simulator's controller takes the same floor.
        let mut c = ImtcpBg::new(cfg, reno_cfg());
        c.on_ack(&ack(0, MSS, 20));
        c.on_estimate(Time(0), Rate::from_mbps(4));
        assert_eq!(c.window().ceiling, Some(Bytes(35 * MSS)));
        assert!(ImtcpBgConfig { measurement_floor: Some(0), ..ImtcpBgConfig::default() }.validate().is_err());
        // The allowance adds one stream to Eq. 2's bound (so it is never below one stream).
        let cfg = ImtcpBgConfig { measurement_allowance: Some(35), ..ImtcpBgConfig::default() };
        let mut a = ImtcpBgLimit::new(cfg, Bytes(MSS), Bytes(10 * MSS));
        a.on_ack(t(0), Bytes(MSS), Some(Dur::from_millis(20)));
        a.on_estimate(Rate::from_mbps(4));
        assert_eq!(a.rule().window_bound(), Some(Bytes(45 * MSS)));
        for i in 0..100 {
            a.on_ack(t(1 + i), Bytes(2 * MSS), Some(Dur::from_millis(20)));
        }
        assert_eq!(a.inflight_limit(), Bytes(45 * MSS));
    }

    #[test]
    fn headroom_rule_in_the_simulators_controller_ignores_a_late_ack_and_regrows_linearly() {
        // The rule `headroom send --background` runs, on the controller that owns its window.
        let mut c = ImtcpBg::new(ImtcpBgConfig::headroom(35), reno_cfg());
        let mut paper = ImtcpBg::new(ImtcpBgConfig::default(), reno_cfg());
        for x in [&mut c, &mut paper] {
            x.on_ack(&ack(0, MSS, 20)); // RTT_min = 20 ms
            x.set_cwnd(Bytes(60 * MSS));
        }
        // One late ACK (40 ms) between samples at the minimum: the paper's rule halves...
        for (i, r) in [20, 40, 20].into_iter().enumerate() {
            let i = i as u64 + 1;
            c.on_ack(&ack(10 * i, (i + 1) * MSS, r));
            paper.on_ack(&ack(10 * i, (i + 1) * MSS, r));
        }
        assert_eq!(paper.rule().reductions(), 1);
        assert_eq!(paper.cwnd(), Bytes(62 * MSS / 2 + MSS), "halved at the late ACK, then slow start");
        // ...the headroom rule (RTT_cur the smallest of the last four) does not.
        assert_eq!(c.rule().reductions(), 0);
        assert_eq!(c.cwnd(), Bytes(63 * MSS), "slow start went on");
        // A queue that delays four ACKs in a row: Eq. 4 with RTT_cur = 40 ms, and ssthresh follows.
        for i in 4..8 {
            c.on_ack(&ack(10 * i, (i + 1) * MSS, 40));
        }
        assert_eq!(c.rule().reductions(), 1);
        let cut = c.cwnd().0;
        assert_eq!(cut, 67 * MSS / 2, "the window after the fourth late ACK, halved");
        assert_eq!(c.window().ssthresh, Bytes(cut));
        c.on_ack(&ack(100, 9 * MSS, 20));
        assert_eq!(c.cwnd(), Bytes(cut + MSS * MSS / cut), "congestion avoidance after it");
        // The bound is Eq. 2's Ā × RTT_min plus one stream of 35 segments.
        c.on_estimate(Time(0), Rate::from_mbps(8)); // 20 segments at 20 ms
        assert_eq!(c.rule().maxcwnd(), Some(Bytes(20 * MSS)));
        assert_eq!(c.window().ceiling, Some(Bytes(55 * MSS)));
        assert!(c.cwnd() <= Bytes(55 * MSS));
    }

    #[test]
    fn background_mode_caps_at_g_rtt_a_only_above_m_n() {
        let cfg = BackgroundConfig { g: 0.5, gamma: 1.0, stream_len: 5, rtt: BackgroundRtt::Smoothed };
        let mut c = ImtcpBackground::new(cfg, reno_cfg());
        c.on_ack(&ack(0, MSS, 20));
        // g·RTT·A = 0.5 × 20 ms × 1 Mbit/s = 1,250 bytes ≤ M·N = 5,000: no bound.
        c.on_estimate(Time(0), Rate::from_mbps(1));
        assert_eq!(c.rule().max_cwnd(), None);
        assert_eq!(c.window().ceiling, None);
        // 0.5 × 20 ms × 8 Mbit/s = 10,000 bytes > 5,000: MaxCwnd = 10,000.
        c.on_estimate(Time(0), Rate::from_mbps(8));
        assert_eq!(c.rule().max_cwnd(), Some(Bytes(10_000)));
        for i in 1..200 {
            c.on_ack(&ack(i, (i + 1) * MSS, 20));
            assert!(c.cwnd() <= Bytes(10_000));
        }
        assert_eq!(c.cwnd(), Bytes(10_000));
        // A result that puts g·RTT·A below M·N leaves the bound where it was.
        c.on_estimate(Time(0), Rate::from_mbps(2));
        assert_eq!(c.rule().max_cwnd(), Some(Bytes(10_000)));
        // One above it moves the bound, down as well as up.
        c.on_estimate(Time(0), Rate::from_mbps(6));
        assert_eq!(c.rule().max_cwnd(), Some(Bytes(7_500)));
        assert!(BackgroundConfig { g: 1.0, ..cfg }.validate().is_err());
        assert!(ImtcpBgConfig { delta: 0.9, ..ImtcpBgConfig::default() }.validate().is_err());
    }

    #[test]
    fn background_mode_with_rtt_min_ignores_the_queue_in_its_bound() {
        // RTT samples of 20 ms, then 200 ms (a queue): g·RTT·Ā with g = 0.5 and Ā = 8 Mbit/s is
        // 100,000 bytes on the smoothed RTT and 10,000 on the smallest RTT seen.
        for (rtt, expected) in [(BackgroundRtt::Smoothed, 100_000), (BackgroundRtt::Min, 10_000)] {
            let cfg = BackgroundConfig { g: 0.5, gamma: 1.0, stream_len: 5, rtt };
            let mut c = ImtcpBackground::new(cfg, reno_cfg());
            c.on_ack(&ack(0, MSS, 20));
            c.on_ack(&ack(1, 2 * MSS, 200));
            c.on_estimate(Time(0), Rate::from_mbps(8));
            assert_eq!(c.rule().max_cwnd(), Some(Bytes(expected)), "{rtt:?}");
        }
    }
}
