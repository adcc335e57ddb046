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
//!   sample so far, kept by the rule itself (so a driver can feed it samples only).
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
}

impl Default for ImtcpBgConfig {
    fn default() -> Self {
        ImtcpBgConfig { gamma: 1.0 / 8.0, delta: 1.5, reduction: Reduction::OncePerRtt, reduction_sets_ssthresh: false }
    }
}

impl ImtcpBgConfig {
    /// Checks the ranges the paper gives: 0 < γ ≤ 1, δ ≥ 1.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.gamma > 0.0 && self.gamma <= 1.0) {
            return Err(format!("gamma must be within (0, 1], got {}", self.gamma));
        }
        if !(self.delta >= 1.0 && self.delta.is_finite()) {
            return Err(format!("delta must be a number of at least 1, got {}", self.delta));
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
    rtt_cur: Option<Dur>,
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
            rtt_cur: None,
            quiet_until: Time::ZERO,
            reductions: 0,
        }
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
    /// An RTT sample at `now`. Returns `Some(RTT_min / RTT_cur)` when Eq. 3 holds and a
    /// reduction is due (Eq. 4: multiply the window by it).
    pub fn on_rtt(&mut self, now: Time, rtt: Dur) -> Option<f64> {
        let rtt = rtt.max(Dur(1));
        let min = self.rtt_min.map_or(rtt, |m| m.min(rtt));
        self.rtt_min = Some(min);
        self.rtt_cur = Some(rtt);
        let ratio = rtt.0 as f64 / min.0 as f64;
        if ratio <= self.cfg.delta || now < self.quiet_until {
            return None;
        }
        if self.cfg.reduction == Reduction::OncePerRtt {
            self.quiet_until = now + rtt;
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
/// shadow Reno window (slow start, then one segment per RTT; no loss handling, the kernel does
/// that) scaled by Eq. 4 and clamped to `maxcwnd`. The driver keeps at most
/// [`ImtcpBgLimit::inflight_limit`] bytes outstanding; the real window is then
/// min(kernel cwnd, limit).
#[derive(Clone, Debug)]
pub struct ImtcpBgLimit {
    rule: ImtcpBgRule,
    mss: u64,
    window: u64,
    slow_start: bool,
}

impl ImtcpBgLimit {
    /// `initial_window` is the shadow window before any ACK (e.g. the kernel's initial window).
    pub fn new(cfg: ImtcpBgConfig, mss: Bytes, initial_window: Bytes) -> ImtcpBgLimit {
        let mss = mss.0.max(1);
        ImtcpBgLimit { rule: ImtcpBgRule::new(cfg), mss, window: initial_window.0.max(2 * mss), slow_start: true }
    }
    pub fn rule(&self) -> &ImtcpBgRule {
        &self.rule
    }
    /// A measurement result.
    pub fn on_estimate(&mut self, a: Rate) {
        self.rule.on_estimate(a);
        self.window = clamp(self.window, self.rule.maxcwnd(), self.mss);
    }
    /// An ACK at `now` acknowledging `newly_acked` bytes, with its RTT sample if any. Returns
    /// the in-flight limit after it.
    pub fn on_ack(&mut self, now: Time, newly_acked: Bytes, rtt: Option<Dur>) -> Bytes {
        if newly_acked.0 > 0 {
            if self.slow_start {
                self.window += newly_acked.0.min(self.mss);
            } else {
                self.window += (self.mss * self.mss / self.window.max(1)).max(1);
            }
        }
        if let Some(k) = rtt.and_then(|r| self.rule.on_rtt(now, r)) {
            self.window = ((self.window as f64 * k) as u64).max(2 * self.mss);
            if self.rule.cfg.reduction_sets_ssthresh {
                self.slow_start = false;
            }
        }
        let bound = self.rule.maxcwnd();
        if bound.is_some_and(|b| self.window >= b.0) {
            self.slow_start = false;
        }
        self.window = clamp(self.window, bound, self.mss);
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
}

impl Default for BackgroundConfig {
    fn default() -> Self {
        BackgroundConfig { g: 0.8, gamma: 1.0 / 8.0, stream_len: 35 }
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
}

impl BackgroundRule {
    pub fn new(cfg: BackgroundConfig) -> BackgroundRule {
        BackgroundRule { cfg, a_bar: Smoothed { gamma: cfg.gamma, value: None }, max_cwnd: None }
    }
    /// A measurement result with the sender's smoothed RTT and segment size at that time.
    pub fn on_estimate(&mut self, a: Rate, srtt: Dur, mss: Bytes) {
        self.a_bar.update(a);
        let Some(a_bar) = self.a_bar.rate() else { return };
        let bound = a_bar.bytes_in(srtt).0 as f64 * self.cfg.g;
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
        self.maxcwnd()
    }
    fn reduction_sets_ssthresh(&self) -> bool {
        self.cfg.reduction_sets_ssthresh
    }
}

impl WindowBound for BackgroundRule {
    fn name(&self) -> &'static str {
        "imtcp-background"
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
        Bounded::with_rule(ImtcpBgRule::new(cfg), reno)
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
    fn background_mode_caps_at_g_rtt_a_only_above_m_n() {
        let cfg = BackgroundConfig { g: 0.5, gamma: 1.0, stream_len: 5 };
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
}
