//! BECC, the Bandwidth Estimation-based Congestion Control algorithm (Kugimoto & Amagai,
//! "帯域見積りに基づく輻輳回避アルゴリズム", IPSJ Journal 1997): a third window, the
//! *bandwidth window* `snd_swnd` = maximum ACK rate × minimum RTT, on top of Reno.
//!
//! # The problem (§2)
//!
//! With a maximum window far above the path's bandwidth-delay product, Reno's `cwnd` grows past
//! the bottleneck's buffer, loses many segments of one window, stalls in fast recovery and waits
//! for the retransmission timer (1–1.5 s on the 1997 BSD stack). The cycle repeats: the
//! *intermittent transfer* (間欠転送現象). On a 45 Mb/s path with a 10 ms RTT the paper's Fig. 2
//! saturates at about 41 Mb/s for maximum windows of 90–200 KB and collapses to about 12 Mb/s
//! above 200 KB.
//!
//! # The algorithm
//!
//! **Send window (§3.1, §3.4).** `win = min3(snd_wnd, snd_cwnd, snd_swnd)`: receiver window,
//! congestion window, bandwidth window. Here `snd_swnd` is [`Window::ceiling`]; the composed
//! [`Reno`] owns `snd_cwnd` unchanged. `snd_swnd` is unlimited when the connection starts: BECC
//! needs the ACKs of a first congestion episode to estimate anything (§3.4, first paragraph).
//!
//! **Estimator (§3.2, eq. 1).** Every ACK adds the increase of the ACK number to `t_acked`. A
//! timer `swnd_timer()` runs every `ms_period` = 30 ms and
//! 1. `t_maxacked = max(t_maxacked, t_acked)` — the available bandwidth is
//!    `t_maxacked / ms_period`;
//! 2. `t_msrd_th = α · t_msrd_th + (1 − α) · t_acked / ms_period` with α = 0.75 by shifts
//!    (eq. 1), in bytes/s: the smoothed *actual transfer rate* (実転送レート);
//! 3. `t_acked = 0`.
//!
//! **Minimum RTT (§3.3).** `t_minrtt = min(t_minrtt, t_rtt)` over the timestamp-option RTT
//! samples, measured with a 1 ms clock (`tcp_now` in ms): an RTT sample is the difference of two
//! readings of that clock, so it is `⌊now/g⌋ − ⌊sent/g⌋` ticks of granularity `g`
//! ([`BeccConfig::rtt_granularity`]).
//!
//! **Window on congestion (§3.4, "輻輳を契機とした…").** On the *fourth* duplicate ACK (Reno's
//! fast retransmit happened on the third): `snd_swnd = t_maxacked / ms_period × t_minrtt`, then
//! `t_maxacked = 0` for the next estimate, and the update mode becomes `NOT_UPDATE`. The paper's
//! own numbers (§4.1.1): `t_maxacked` = 270 900 bytes, `t_minrtt` = 14 ms → 126 420 bytes.
//!
//! **Periodic update (§3.4, "定期的な帯域ウィンドウの更新").** Once set, `snd_swnd` would pin the
//! sender to an old estimate: the ACK rate cannot show bandwidth the window does not use. So
//! `swnd_update()` runs every 1.5 s and probes, by mode:
//! - `UPDATE_START`: `pre_snd_swnd = snd_swnd`; `snd_swnd ×= 1.25` (`x + (x >> 2)`, the
//!   shift-and-add factor closest to the 1.2 the authors found the smallest detectable);
//!   `expct_th = 1.125 × t_msrd_th` (`x + (x >> 3)`); mode `UPDATING`.
//! - `UPDATING`: if `t_msrd_th > expct_th` there is room: `pre_snd_swnd = snd_swnd`,
//!   `snd_swnd ×= 1.25`, `expct_th ×= 1.125` (the previous expectation, not the current rate),
//!   stay `UPDATING`. Otherwise the path is full: `snd_swnd = pre_snd_swnd`, mode
//!   `UPDATE_START`.
//! - `NOT_UPDATE`: only `mode = UPDATE_START`, nothing else.
//!
//! `NOT_UPDATE` is set in `tcp_input()` on the fourth duplicate ACK (a new window was just
//! decided) and in `tcp_output()` whenever `snd_swnd > snd_cwnd` (the congestion window limits,
//! so probing the bandwidth window is pointless). Hence an update tick while `snd_swnd > snd_cwnd`
//! does nothing except return to `UPDATE_START`, and the first probe after a loss comes one to
//! two update periods later.
//!
//! # Sans-IO mapping
//!
//! - `tcp_input()` ↔ [`CongestionControl::on_ack`]; `tcp_output()` ↔ the end of every
//!   [`CongestionControl::on_ack`], [`CongestionControl::on_sent`] and
//!   [`CongestionControl::on_timeout`], where the `snd_swnd > snd_cwnd` check runs (BSD calls
//!   `tcp_output()` after processing ACKs during a bulk transfer).
//! - The two timers are a fixed grid anchored at the first event the controller sees (or at
//!   [`Becc::start`]): rate ticks at `anchor + k·ms_period`, update ticks at
//!   `anchor + k·update_period`. [`CongestionControl::next_timer`] returns the earliest due tick.
//! - **Late timers.** Every entry point first runs, in time order, every tick due at or before its
//!   `now` (a rate tick before an update tick due at the same instant; a tick before an ACK
//!   arriving at the same instant). ACK bytes therefore always land in the period that contains
//!   their arrival time, whether `on_timer` was called on time, late, several times, or not at
//!   all: the outcome does not depend on the driver's timer accuracy or on the order in which it
//!   delivers simultaneous events. A port without per-connection timers (a BPF `struct_ops`
//!   port, `bpf/becc.bpf.c`) runs the same catch-up from the ACK path alone.
//!
//! # Integer arithmetic
//!
//! All state is `u32` (as a kernel `tcp_sock` extension would be), except the two timer
//! deadlines. α, ×1.25 and ×1.125 are shifts; the window is `t_maxacked · t_minrtt / ms_period`
//! in 64-bit arithmetic (multiplying first; the paper's division first gives the same result
//! for its example). No floating point anywhere.
//!
//! # Choices the paper leaves open (configurable where they are policy)
//!
//! - **Timer phase**: both timers anchored at the first event (paper: not stated).
//! - **Tie rule**: `t_msrd_th > expct_th` grows; equality falls back (paper: "larger" / "smaller").
//! - **Empty estimate**: a fourth duplicate ACK with `t_maxacked == 0` (no rate tick since the
//!   last clear) or without any RTT sample leaves `snd_swnd` unchanged and does not clear
//!   anything (a literal zero window would deadlock the connection).
//! - **Floor**: the window is at least [`BeccConfig::min_swnd_segments`] segments (2).
//! - **One window per loss episode** ([`BeccConfig::once_per_loss_episode`], default on): after a
//!   set, further fourth duplicate ACKs are ignored until the cumulative ACK passes `snd_max` of
//!   the set (the RFC 6582 "recover" idea). Reno leaves recovery on each partial ACK, and after a
//!   timeout go-back-N makes the receiver repeat duplicate ACKs for data it already holds; with
//!   the literal rule (option off) each such series would overwrite the window with a
//!   `t_maxacked` measured during recovery. The paper reports that the window in force after the
//!   first timeout is the one computed before the first fast retransmit (§4.1.1: 126 420 bytes),
//!   which is what the guard guarantees. `NOT_UPDATE` is set on every fourth duplicate ACK either
//!   way.
//! - **Timeouts**: the paper adds nothing: Reno handles the timeout, `snd_swnd` and the
//!   estimator are kept; `cwnd` = 1 segment then makes `snd_swnd > snd_cwnd`, so no update runs
//!   until slow start has caught up with the bandwidth window.
//! - **A late probe after `NOT_UPDATE`**: when `snd_swnd` has just grown past `snd_cwnd` during
//!   `UPDATING`, the paper's rule keeps the grown value (`pre_snd_swnd` is not restored); so do we.
//! - **Gaps**: a gap of more than 2^20 rate periods (8.7 h at 30 ms) is not replayed tick by
//!   tick: the first overdue tick runs, then the rate estimate is zeroed (what the skipped empty
//!   periods would converge to) and the grid jumps forward.
//!
//! # The Linux kernel port (`bpf/becc.bpf.c`)
//!
//! `headroom cc load becc` registers the same algorithm as a BPF `tcp_congestion_ops`, with the
//! same constants and integer arithmetic. Where it differs, and why (details in that file's
//! header):
//! - the timer grid runs on the socket's own clock (`tp->tcp_mstamp`) from the ACK path only, and
//!   replays at most 64 ticks per ACK (a BPF loop must be bounded): a longer idle gap (~1.9 s) is
//!   skipped as this file skips gaps over 2^20 ticks;
//! - the window is set when Linux enters fast recovery (`set_state(TCP_CA_Recovery)`), the ACK
//!   before the paper's fourth duplicate ACK (Linux's CA interface has no duplicate-ACK count);
//! - bytes acknowledged are the advance of `snd_una` (the kernel reports packets);
//! - the bandwidth window caps `snd_cwnd` itself (a BPF controller cannot set another window), so
//!   "`snd_swnd > snd_cwnd`" becomes "cwnd below `snd_swnd / mss`" (in this file Reno's cwnd grows
//!   above the ceiling, as BSD's did);
//! - state: 56 bytes in `icsk_ca_priv` (two u64 deadlines, nine u32 including `prior_una`, two u8).
//!
//! # State size
//!
//! The paper adds six `unsigned long` and four `int` to the TCP control block: 40 bytes (§4.2.1).
//! [`BeccState`] holds eight `u32` (`snd_swnd`, `pre_snd_swnd`, `t_acked`, `t_maxacked`,
//! `t_msrd_th`, `expct_th`, `t_minrtt`, the episode guard), one byte of mode and flags, and two
//! 64-bit timer deadlines that a kernel keeps in its timer wheel: see [`Becc::state_size`].
//! The constants ([`BeccConfig`]) are per-system, not per-connection, and the composed [`Reno`]
//! is the stack's own congestion state.

use std::fmt;

use crate::cc::reno::{Recovery, Reno, RenoConfig};
use crate::cc::{AckAction, AckEvent, CongestionControl, SentEvent, Window};
use crate::units::{Bytes, Dur, Rate, Time};

/// `snd_swnd` before the first congestion: no limit.
const SWND_UNLIMITED: u32 = u32::MAX;
/// `t_minrtt` before the first RTT sample.
const RTT_NONE: u32 = u32::MAX;
/// Longest gap replayed tick by tick (see the module doc, "Gaps").
const MAX_CATCH_UP_TICKS: u64 = 1 << 20;

/// The mode of the periodic bandwidth-window update `swnd_update()` (§3.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum UpdateMode {
    /// The next update tick may enlarge the bandwidth window.
    UpdateStart = 0,
    /// The window was enlarged; the next tick compares the rate with the expectation.
    Updating = 1,
    /// No update: a fourth duplicate ACK just set the window, or `snd_swnd > snd_cwnd`.
    NotUpdate = 2,
}

/// BECC's constants. [`Default`] gives the paper's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BeccConfig {
    /// Period of `swnd_timer()`, over which `t_acked` is summed (§3.2: 30 ms).
    pub ms_period: Dur,
    /// Period of `swnd_update()` (§3.4: 1.5 s).
    pub update_period: Dur,
    /// α = 1 − 2^−`msrd_shift` in eq. (1) (§3.2: α = 0.75 → 2).
    pub msrd_shift: u8,
    /// The bandwidth window grows by `x + (x >> swnd_grow_shift)` per probe (§3.4: ×1.25 → 2).
    pub swnd_grow_shift: u8,
    /// The expected rate grows by `x + (x >> expct_grow_shift)` (§3.4: ×1.125 → 3).
    pub expct_grow_shift: u8,
    /// The duplicate ACK that sets the bandwidth window (§3.4: the fourth).
    pub dupack_trigger: u32,
    /// Resolution of the clock that timestamps RTT samples (§3.3: 1 ms); zero: exact (1 µs).
    pub rtt_granularity: Dur,
    /// Smallest bandwidth window in segments (the paper is silent; 2).
    pub min_swnd_segments: u32,
    /// Set the window at most once per loss episode (see the module doc; the paper is silent).
    pub once_per_loss_episode: bool,
}

impl Default for BeccConfig {
    fn default() -> Self {
        BeccConfig {
            ms_period: Dur::from_millis(30),
            update_period: Dur::from_millis(1500),
            msrd_shift: 2,
            swnd_grow_shift: 2,
            expct_grow_shift: 3,
            dupack_trigger: 4,
            rtt_granularity: Dur::from_millis(1),
            min_swnd_segments: 2,
            once_per_loss_episode: true,
        }
    }
}

/// A [`BeccConfig`] that cannot run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BeccConfigError {
    /// `ms_period` must be between 1 µs and `u32::MAX` µs.
    MsPeriod(Dur),
    /// `update_period` must be at least 1 µs.
    UpdatePeriod(Dur),
    /// A shift must be between 1 and 31.
    Shift { name: &'static str, value: u8 },
    /// The trigger must be at least one duplicate ACK.
    DupackTrigger(u32),
    /// The RTT clock granularity must be below `u32::MAX` µs.
    RttGranularity(Dur),
}

impl fmt::Display for BeccConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BeccConfigError::MsPeriod(d) => {
                write!(f, "BECC ms_period must be between 1 µs and {} µs, got {} ns", u32::MAX, d.0)
            }
            BeccConfigError::UpdatePeriod(d) => write!(f, "BECC update_period must be at least 1 µs, got {} ns", d.0),
            BeccConfigError::Shift { name, value } => write!(f, "BECC {name} must be between 1 and 31, got {value}"),
            BeccConfigError::DupackTrigger(n) => write!(f, "BECC dupack_trigger must be at least 1, got {n}"),
            BeccConfigError::RttGranularity(d) => write!(f, "BECC rtt_granularity is too large: {} ns", d.0),
        }
    }
}

impl std::error::Error for BeccConfigError {}

impl BeccConfig {
    /// Checks that the constants can run.
    pub fn validate(&self) -> Result<(), BeccConfigError> {
        let us = self.ms_period.0 / 1000;
        if us == 0 || us > u32::MAX as u64 {
            return Err(BeccConfigError::MsPeriod(self.ms_period));
        }
        if self.update_period.0 < 1000 {
            return Err(BeccConfigError::UpdatePeriod(self.update_period));
        }
        for (name, value) in [
            ("msrd_shift", self.msrd_shift),
            ("swnd_grow_shift", self.swnd_grow_shift),
            ("expct_grow_shift", self.expct_grow_shift),
        ] {
            if !(1..=31).contains(&value) {
                return Err(BeccConfigError::Shift { name, value });
            }
        }
        if self.dupack_trigger == 0 {
            return Err(BeccConfigError::DupackTrigger(self.dupack_trigger));
        }
        if self.rtt_granularity.0 / 1000 >= u32::MAX as u64 {
            return Err(BeccConfigError::RttGranularity(self.rtt_granularity));
        }
        Ok(())
    }
}

/// BECC's per-connection state: what the paper adds to the TCP control block, plus the two
/// timer deadlines. Field names are the paper's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BeccState {
    /// Next `swnd_timer()` instant (ns); `Time(0)` until anchored.
    next_rate_tick: Time,
    /// Next `swnd_update()` instant (ns).
    next_update: Time,
    /// Bandwidth window in bytes; [`SWND_UNLIMITED`] before the first congestion.
    snd_swnd: u32,
    /// Bandwidth window before the last enlargement.
    pre_snd_swnd: u32,
    /// Bytes acknowledged in the current `ms_period`.
    t_acked: u32,
    /// Largest `t_acked` since the last time the window was set.
    t_maxacked: u32,
    /// Smoothed actual transfer rate, bytes/s (eq. 1).
    t_msrd_th: u32,
    /// Rate expected after an enlargement, bytes/s.
    expct_th: u32,
    /// Minimum RTT in µs, quantised to the RTT clock; [`RTT_NONE`] before a sample.
    t_minrtt: u32,
    /// Low 32 bits of `snd_max` when the window was last set (the loss-episode guard).
    swnd_recover: u32,
    /// Bits 0–1: [`UpdateMode`]; bit 2: `swnd_recover` is valid.
    mode_flags: u8,
}

const MODE_MASK: u8 = 0b11;
const RECOVER_VALID: u8 = 0b100;

impl BeccState {
    fn new() -> BeccState {
        BeccState {
            next_rate_tick: Time(0),
            next_update: Time(0),
            snd_swnd: SWND_UNLIMITED,
            pre_snd_swnd: SWND_UNLIMITED,
            t_acked: 0,
            t_maxacked: 0,
            t_msrd_th: 0,
            expct_th: 0,
            t_minrtt: RTT_NONE,
            swnd_recover: 0,
            // §3.4: "the update algorithm starts in UPDATE_START".
            mode_flags: UpdateMode::UpdateStart as u8,
        }
    }

    fn mode(&self) -> UpdateMode {
        match self.mode_flags & MODE_MASK {
            0 => UpdateMode::UpdateStart,
            1 => UpdateMode::Updating,
            _ => UpdateMode::NotUpdate,
        }
    }

    fn set_mode(&mut self, m: UpdateMode) {
        self.mode_flags = (self.mode_flags & !MODE_MASK) | m as u8;
    }

    fn recover_valid(&self) -> bool {
        self.mode_flags & RECOVER_VALID != 0
    }

    fn set_recover_valid(&mut self, v: bool) {
        if v {
            self.mode_flags |= RECOVER_VALID;
        } else {
            self.mode_flags &= !RECOVER_VALID;
        }
    }
}

/// `x + (x >> shift)`, saturating below `limit`.
fn grow(x: u32, shift: u8, limit: u32) -> u32 {
    x.saturating_add(x >> shift).min(limit)
}

/// `a` is at or after `b` in 32-bit sequence space (the kernel's `!before(a, b)`).
fn seq_geq(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

/// Reno or NewReno with BECC's bandwidth window as [`Window::ceiling`].
#[derive(Clone, Debug)]
pub struct Becc {
    reno: Reno,
    cfg: BeccConfig,
    /// `ms_period` in µs (validated to fit a u32).
    ms_period_us: u64,
    /// Floor of the bandwidth window in bytes.
    min_swnd: u64,
    s: BeccState,
}

impl Becc {
    /// A BECC controller over Reno or NewReno; fails on constants that cannot run.
    pub fn new(variant: Recovery, reno_cfg: RenoConfig, cfg: BeccConfig) -> Result<Becc, BeccConfigError> {
        cfg.validate()?;
        let mss = reno_cfg.mss.0.max(1);
        Ok(Becc {
            reno: Reno::new(variant, reno_cfg),
            cfg,
            ms_period_us: cfg.ms_period.0 / 1000,
            min_swnd: mss.saturating_mul(cfg.min_swnd_segments as u64),
            s: BeccState::new(),
        })
    }

    /// BECC with the paper's constants.
    pub fn with_paper_constants(variant: Recovery, reno_cfg: RenoConfig) -> Becc {
        let cfg = BeccConfig::default();
        let mss = reno_cfg.mss.0.max(1);
        Becc {
            reno: Reno::new(variant, reno_cfg),
            cfg,
            ms_period_us: cfg.ms_period.0 / 1000,
            min_swnd: mss * cfg.min_swnd_segments as u64,
            s: BeccState::new(),
        }
    }

    /// Anchors the timer grid at `now` (otherwise the first event anchors it). No effect once
    /// anchored.
    pub fn start(&mut self, now: Time) {
        if self.s.next_rate_tick == Time(0) {
            self.s.next_rate_tick = now + self.cfg.ms_period;
            self.s.next_update = now + self.cfg.update_period;
        }
    }

    pub fn config(&self) -> &BeccConfig {
        &self.cfg
    }
    /// The composed Reno/NewReno (owner of `snd_cwnd`).
    pub fn reno(&self) -> &Reno {
        &self.reno
    }
    /// `snd_swnd`; `None` while unlimited.
    pub fn bandwidth_window(&self) -> Option<Bytes> {
        (self.s.snd_swnd != SWND_UNLIMITED).then_some(Bytes(self.s.snd_swnd as u64))
    }
    /// `pre_snd_swnd`; `None` while unlimited.
    pub fn pre_bandwidth_window(&self) -> Option<Bytes> {
        (self.s.pre_snd_swnd != SWND_UNLIMITED).then_some(Bytes(self.s.pre_snd_swnd as u64))
    }
    /// `t_msrd_th`, the smoothed actual transfer rate (Fig. 12's curve).
    pub fn measured_rate(&self) -> Rate {
        Rate(self.s.t_msrd_th as u64 * 8)
    }
    /// `expct_th`, the rate the current probe expects.
    pub fn expected_rate(&self) -> Rate {
        Rate(self.s.expct_th as u64 * 8)
    }
    /// `t_maxacked`: most bytes acknowledged in one `ms_period` since the window was last set.
    pub fn max_acked(&self) -> Bytes {
        Bytes(self.s.t_maxacked as u64)
    }
    /// `t_maxacked / ms_period`, the available-bandwidth estimate.
    pub fn available_bandwidth(&self) -> Rate {
        Rate(self.s.t_maxacked as u64 * 8 * 1_000_000 / self.ms_period_us)
    }
    /// `t_acked`: bytes acknowledged so far in the current period.
    pub fn acked_this_period(&self) -> Bytes {
        Bytes(self.s.t_acked as u64)
    }
    /// `t_minrtt` as measured by the RTT clock.
    pub fn min_rtt(&self) -> Option<Dur> {
        (self.s.t_minrtt != RTT_NONE).then(|| Dur::from_micros(self.s.t_minrtt as u64))
    }
    pub fn mode(&self) -> UpdateMode {
        self.s.mode()
    }
    /// Bytes of per-connection state of the composed Reno (BECC's own: [`Self::state_size`]).
    pub fn reno_state_size(&self) -> usize {
        std::mem::size_of::<Reno>()
    }

    /// Runs every timer tick due at or before `now`, in time order (rate tick first on a tie).
    fn advance(&mut self, now: Time) {
        if self.s.next_rate_tick == Time(0) {
            self.start(now);
            return;
        }
        loop {
            let rate_due = self.s.next_rate_tick;
            let update_due = self.s.next_update;
            if rate_due.min(update_due) > now {
                return;
            }
            if rate_due <= update_due {
                self.swnd_timer();
                self.s.next_rate_tick = rate_due + self.cfg.ms_period;
                let behind = now.saturating_since(self.s.next_rate_tick).0 / self.cfg.ms_period.0;
                if behind > MAX_CATCH_UP_TICKS {
                    self.skip_idle_gap(now);
                }
            } else {
                self.swnd_update();
                self.s.next_update = update_due + self.cfg.update_period;
            }
        }
    }

    /// A gap too long to replay: empty periods drive `t_msrd_th` to zero; move the grid on.
    fn skip_idle_gap(&mut self, now: Time) {
        let p = self.cfg.ms_period.0;
        let u = self.cfg.update_period.0;
        self.s.t_acked = 0;
        self.s.t_msrd_th = 0;
        // Keep the grid's phase: the first due instants after `now`.
        let r = self.s.next_rate_tick.0;
        self.s.next_rate_tick = Time(r + (now.0 - r) / p * p + p);
        let n = self.s.next_update.0;
        if n <= now.0 {
            self.s.next_update = Time(n + (now.0 - n) / u * u + u);
        }
        // A probe in flight cannot be judged on an idle path: abandon it.
        if self.s.mode() == UpdateMode::Updating {
            self.s.snd_swnd = self.s.pre_snd_swnd;
            self.s.set_mode(UpdateMode::UpdateStart);
        }
    }

    /// `swnd_timer()` (§3.2): close one `ms_period`.
    fn swnd_timer(&mut self) {
        let s = &mut self.s;
        s.t_maxacked = s.t_maxacked.max(s.t_acked);
        // t_acked / ms_period in bytes/s.
        let sample = (s.t_acked as u64 * 1_000_000 / self.ms_period_us).min(u32::MAX as u64) as u32;
        // Eq. (1) with α = 1 − 2^−k: x ← x − (x >> k) + (sample >> k).
        let k = self.cfg.msrd_shift;
        s.t_msrd_th = s.t_msrd_th - (s.t_msrd_th >> k) + (sample >> k);
        s.t_acked = 0;
    }

    /// `swnd_update()` (§3.4): the 1.5 s probe.
    fn swnd_update(&mut self) {
        let s = &mut self.s;
        let limit = SWND_UNLIMITED - 1;
        match s.mode() {
            UpdateMode::NotUpdate => s.set_mode(UpdateMode::UpdateStart),
            UpdateMode::UpdateStart => {
                if s.snd_swnd == SWND_UNLIMITED {
                    // Nothing to probe before the first window (tcp_output() would have set
                    // NOT_UPDATE anyway: an unlimited window exceeds any cwnd).
                    return;
                }
                s.pre_snd_swnd = s.snd_swnd;
                s.snd_swnd = grow(s.snd_swnd, self.cfg.swnd_grow_shift, limit);
                s.expct_th = grow(s.t_msrd_th, self.cfg.expct_grow_shift, u32::MAX);
                s.set_mode(UpdateMode::Updating);
            }
            UpdateMode::Updating => {
                if s.t_msrd_th > s.expct_th {
                    s.pre_snd_swnd = s.snd_swnd;
                    s.snd_swnd = grow(s.snd_swnd, self.cfg.swnd_grow_shift, limit);
                    s.expct_th = grow(s.expct_th, self.cfg.expct_grow_shift, u32::MAX);
                } else {
                    s.snd_swnd = s.pre_snd_swnd;
                    s.set_mode(UpdateMode::UpdateStart);
                }
            }
        }
    }

    /// The RTT as the paper's `tcp_now` clock would measure it, in µs.
    fn quantised_rtt_us(&self, now: Time, rtt: Dur) -> u32 {
        let g = self.cfg.rtt_granularity.0;
        let us = if g < 1000 {
            (rtt.0 / 1000).max(1)
        } else {
            // ⌊now/g⌋ − ⌊sent/g⌋, with `sent` possibly before the time origin.
            let (now, g) = (now.0 as i128, g as i128);
            let sent = now - rtt.0 as i128;
            let ticks = (now.div_euclid(g) - sent.div_euclid(g)).max(1);
            (ticks * g / 1000) as u64
        };
        us.min((RTT_NONE - 1) as u64) as u32
    }

    /// The fourth duplicate ACK (§3.4): set `snd_swnd` from the two estimates.
    fn on_congestion(&mut self, ev: &AckEvent) {
        self.s.set_mode(UpdateMode::NotUpdate);
        if self.cfg.once_per_loss_episode && self.s.recover_valid() {
            return;
        }
        if self.s.t_maxacked == 0 || self.s.t_minrtt == RTT_NONE {
            return;
        }
        let w = self.s.t_maxacked as u64 * self.s.t_minrtt as u64 / self.ms_period_us;
        let w = w.max(self.min_swnd).min((SWND_UNLIMITED - 1) as u64);
        self.s.snd_swnd = w as u32;
        self.s.t_maxacked = 0;
        self.s.swnd_recover = ev.snd_max as u32;
        self.s.set_recover_valid(true);
    }

    /// The check BECC adds to `tcp_output()`: probing is pointless while cwnd limits.
    fn output_check(&mut self) {
        if self.s.snd_swnd as u64 > self.reno.cwnd().0 {
            self.s.set_mode(UpdateMode::NotUpdate);
        }
    }
}

impl CongestionControl for Becc {
    fn name(&self) -> &'static str {
        match self.reno.variant() {
            Recovery::Reno => "becc",
            Recovery::NewReno => "becc-newreno",
        }
    }

    fn on_ack(&mut self, ev: &AckEvent) -> AckAction {
        self.advance(ev.now);
        if self.s.recover_valid() && seq_geq(ev.ack as u32, self.s.swnd_recover) {
            self.s.set_recover_valid(false);
        }
        if let Some(rtt) = ev.rtt {
            let q = self.quantised_rtt_us(ev.now, rtt);
            self.s.t_minrtt = self.s.t_minrtt.min(q);
        }
        self.s.t_acked = self.s.t_acked.saturating_add(ev.newly_acked.0.min(u32::MAX as u64) as u32);
        let action = self.reno.on_ack(ev);
        if ev.newly_acked.0 == 0 && ev.dup_acks == self.cfg.dupack_trigger {
            self.on_congestion(ev);
        }
        self.output_check();
        action
    }

    fn on_timeout(&mut self, now: Time, in_flight: Bytes) {
        self.advance(now);
        self.reno.on_timeout(now, in_flight);
        self.output_check();
    }

    fn on_sent(&mut self, ev: &SentEvent) {
        self.advance(ev.now);
        self.reno.on_sent(ev);
        self.output_check();
    }

    fn on_timer(&mut self, now: Time) {
        self.advance(now);
    }

    fn next_timer(&self) -> Option<Time> {
        if self.s.next_rate_tick == Time(0) {
            return None;
        }
        Some(self.s.next_rate_tick.min(self.s.next_update))
    }

    fn window(&self) -> Window {
        let mut w = self.reno.window();
        if let Some(b) = self.bandwidth_window() {
            w.ceiling = Some(w.ceiling.map_or(b, |c| c.min(b)));
        }
        w
    }

    fn in_recovery(&self) -> bool {
        self.reno.in_recovery()
    }

    /// BECC's own per-connection state ([`BeccState`]); the composed Reno adds
    /// [`Becc::reno_state_size`].
    fn state_size(&self) -> usize {
        std::mem::size_of::<BeccState>()
    }

    /// `t_msrd_th` (eq. 1), the curve of Fig. 12.
    fn measured_rate(&self) -> Option<Rate> {
        Some(Rate(self.s.t_msrd_th as u64 * 8))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;
    const MS: u64 = 1_000_000;

    fn reno_cfg(initial_window: u32) -> RenoConfig {
        RenoConfig { mss: Bytes(MSS), initial_window, ..RenoConfig::default() }
    }

    /// BECC over Reno, anchored at t = 0: rate ticks at 30, 60, … ms, updates at 1.5, 3, … s.
    fn becc(initial_window: u32, cfg: BeccConfig) -> Becc {
        let mut b = Becc::new(Recovery::Reno, reno_cfg(initial_window), cfg).expect("valid config");
        b.start(Time(0));
        b
    }

    /// A small scripted sender: cumulative ACK state plus an RTT sample on every ACK.
    struct Script {
        ack: u64,
        snd_max: u64,
        rtt: Dur,
    }

    impl Script {
        fn new(rtt_ms: u64) -> Script {
            Script { ack: 0, snd_max: 100 * MSS, rtt: Dur::from_millis(rtt_ms) }
        }
        fn new_ack(&mut self, b: &mut Becc, now: Time, bytes: u64) -> AckAction {
            self.ack += bytes;
            self.snd_max = self.snd_max.max(self.ack + 100 * MSS);
            b.on_ack(&AckEvent {
                now,
                ack: self.ack,
                newly_acked: Bytes(bytes),
                dup_acks: 0,
                rtt: Some(self.rtt),
                in_flight: Bytes(self.snd_max - self.ack),
                snd_max: self.snd_max,
                mss: Bytes(MSS),
                ..Default::default()
            })
        }
        fn dup_ack(&mut self, b: &mut Becc, now: Time, n: u32) -> AckAction {
            b.on_ack(&AckEvent {
                now,
                ack: self.ack,
                newly_acked: Bytes(0),
                dup_acks: n,
                rtt: Some(self.rtt),
                in_flight: Bytes(self.snd_max - self.ack),
                snd_max: self.snd_max,
                mss: Bytes(MSS),
                ..Default::default()
            })
        }
        /// `bytes` acknowledged in ten ACKs spread inside the rate period that starts at
        /// `period * 30 ms`.
        fn period(&mut self, b: &mut Becc, period: u64, bytes: u64) {
            let start = period * 30 * MS;
            for i in 0..10 {
                let now = Time(start + MS + i * 2 * MS);
                self.new_ack(b, now, bytes / 10 + if i == 9 { bytes % 10 } else { 0 });
            }
        }
        /// The 3rd and 4th duplicate ACKs (the first two are implied) at `now`.
        fn loss(&mut self, b: &mut Becc, now: Time) {
            for n in 1..=4 {
                self.dup_ack(b, now, n);
            }
        }
    }

    /// Drives `on_timer` at every instant `next_timer` asks for, up to `until`.
    fn run_timers(b: &mut Becc, until: Time) {
        while let Some(t) = b.next_timer() {
            if t > until {
                break;
            }
            b.on_timer(t);
        }
    }

    #[test]
    fn unlimited_at_start_and_set_on_fourth_dup_ack_to_product() {
        let mut b = becc(1000, BeccConfig::default());
        let mut s = Script::new(14);
        assert_eq!(b.window().ceiling, None, "no bandwidth window before congestion");
        s.period(&mut b, 0, 60_000);
        s.period(&mut b, 1, 90_000);
        s.period(&mut b, 2, 75_000);
        run_timers(&mut b, Time(95 * MS));
        assert_eq!(b.max_acked(), Bytes(90_000));
        assert_eq!(b.min_rtt(), Some(Dur::from_millis(14)));
        let now = Time(100 * MS);
        assert_eq!(s.dup_ack(&mut b, now, 1), AckAction::None);
        assert_eq!(s.dup_ack(&mut b, now, 2), AckAction::None);
        assert_eq!(s.dup_ack(&mut b, now, 3), AckAction::FastRetransmit, "Reno still retransmits on the 3rd");
        assert_eq!(b.window().ceiling, None, "the third duplicate ACK does not set the window");
        s.dup_ack(&mut b, now, 4);
        // 90 000 bytes / 30 ms × 14 ms.
        assert_eq!(b.window().ceiling, Some(Bytes(42_000)));
        assert_eq!(b.max_acked(), Bytes(0), "t_maxacked cleared for the next estimate");
        assert_eq!(b.mode(), UpdateMode::NotUpdate);
        assert_eq!(b.window().send_window(Bytes(1 << 30)), Bytes(42_000));
        // The paper's own example (§4.1.1): 270 900 bytes and 14 ms give 126 420 bytes.
        let mut b = becc(1000, BeccConfig::default());
        let mut s = Script::new(14);
        s.period(&mut b, 0, 270_900);
        run_timers(&mut b, Time(40 * MS));
        s.loss(&mut b, Time(45 * MS));
        assert_eq!(b.bandwidth_window(), Some(Bytes(126_420)));
    }

    #[test]
    fn rtt_is_measured_with_a_millisecond_clock() {
        let mut b = becc(1000, BeccConfig::default());
        // 14.3 ms: 15 ticks when sent at 85.9 ms and acked at 100.2 ms ...
        b.on_ack(&AckEvent { now: Time(100_200_000), rtt: Some(Dur(14_300_000)), ..Default::default() });
        assert_eq!(b.min_rtt(), Some(Dur::from_millis(15)));
        // ... 14 ticks when sent at 86.2 ms and acked at 100.5 ms.
        b.on_ack(&AckEvent { now: Time(100_500_000), rtt: Some(Dur(14_300_000)), ..Default::default() });
        assert_eq!(b.min_rtt(), Some(Dur::from_millis(14)));
        // A sub-tick RTT counts as one tick, never zero.
        b.on_ack(&AckEvent { now: Time(200_100_000), rtt: Some(Dur(50_000)), ..Default::default() });
        assert_eq!(b.min_rtt(), Some(Dur::from_millis(1)));
        // Granularity 0: exact to the microsecond.
        let mut b = becc(1000, BeccConfig { rtt_granularity: Dur::ZERO, ..BeccConfig::default() });
        b.on_ack(&AckEvent { now: Time(100_200_000), rtt: Some(Dur(14_300_000)), ..Default::default() });
        assert_eq!(b.min_rtt(), Some(Dur::from_micros(14_300)));
    }

    #[test]
    fn empty_estimate_leaves_window_unchanged() {
        let mut b = becc(1000, BeccConfig::default());
        let mut s = Script::new(10);
        // ACKs, but no rate tick has closed a period yet: t_maxacked is still 0.
        s.new_ack(&mut b, Time(5 * MS), 30_000);
        s.loss(&mut b, Time(10 * MS));
        assert_eq!(b.window().ceiling, None);
        assert_eq!(b.mode(), UpdateMode::NotUpdate);
    }

    #[test]
    fn floor_of_two_segments() {
        let mut b = becc(1000, BeccConfig::default());
        let mut s = Script::new(1);
        s.period(&mut b, 0, 100);
        run_timers(&mut b, Time(31 * MS));
        s.loss(&mut b, Time(32 * MS));
        assert_eq!(b.bandwidth_window(), Some(Bytes(2 * MSS)));
    }

    #[test]
    fn t_msrd_th_follows_equation_one() {
        let mut b = becc(1000, BeccConfig::default());
        let mut s = Script::new(10);
        // 30 000 bytes per 30 ms = 1 000 000 bytes/s, from an idle start.
        let mut expected = 0.0f64;
        for k in 0..60 {
            s.period(&mut b, k, 30_000);
            run_timers(&mut b, Time((k + 1) * 30 * MS));
            expected = 0.75 * expected + 0.25 * 1_000_000.0;
            let got = b.measured_rate().bps() as f64 / 8.0;
            assert!((got - expected).abs() <= 4.0, "period {k}: t_msrd_th {got} vs eq. (1) {expected}");
        }
        let converged = b.measured_rate().bps() / 8;
        assert!(converged.abs_diff(1_000_000) <= 4, "converged to within the shift rounding: {converged}");
        // A step down to 15 000 bytes per period: one tick moves a quarter of the way.
        let before = b.measured_rate().bps() / 8;
        s.period(&mut b, 60, 15_000);
        run_timers(&mut b, Time(61 * 30 * MS));
        let after = b.measured_rate().bps() / 8;
        assert_eq!(after, before - (before >> 2) + (500_000 >> 2));
        // Empty periods decay it geometrically.
        run_timers(&mut b, Time(62 * 30 * MS));
        assert_eq!(b.measured_rate().bps() / 8, after - (after >> 2));
        assert_eq!(b.max_acked(), Bytes(30_000), "the maximum is kept across smaller periods");
    }

    /// A path of capacity `capacity` bytes per period fed by the send window min(cwnd, swnd)
    /// over a `rtt_ms` RTT: bytes acked per period = min(window × period / RTT, capacity).
    fn fluid_period(b: &Becc, capacity: u64, rtt_ms: u64) -> u64 {
        let w = b.window().send_window(Bytes(u64::MAX / 64)).0;
        (w * 30 / rtt_ms).min(capacity)
    }

    /// Sets the window from a first loss at t ≈ 61 ms; returns the next period index.
    fn first_loss(b: &mut Becc, s: &mut Script, per_period: u64) -> u64 {
        s.period(b, 0, per_period);
        s.period(b, 1, per_period);
        run_timers(b, Time(60 * MS));
        s.loss(b, Time(61 * MS));
        // The retransmission fills the hole: the ACK passes everything sent, ending the episode.
        let passed = s.snd_max - s.ack;
        s.new_ack(b, Time(62 * MS), passed);
        2
    }

    /// Runs `periods` periods of the fluid path with a per-period capacity given by
    /// `capacity(period)`, recording the window at every update tick.
    fn run_fluid(
        b: &mut Becc,
        s: &mut Script,
        from: u64,
        periods: u64,
        rtt_ms: u64,
        capacity: impl Fn(u64) -> u64,
    ) -> Vec<(UpdateMode, u64)> {
        let mut trace = Vec::new();
        for k in from..from + periods {
            let bytes = fluid_period(b, capacity(k), rtt_ms);
            s.period(b, k, bytes);
            run_timers(b, Time((k + 1) * 30 * MS));
            if (k + 1) % 50 == 0 {
                trace.push((b.mode(), b.bandwidth_window().map_or(0, |w| w.0)));
            }
        }
        trace
    }

    #[test]
    fn update_keeps_growing_while_the_rate_rises() {
        let mut b = becc(100_000, BeccConfig::default());
        let mut s = Script::new(10);
        let k = first_loss(&mut b, &mut s, 30_000);
        // 30 000 bytes / 30 ms × 10 ms.
        assert_eq!(b.bandwidth_window(), Some(Bytes(10_000)));
        // A path with ten times the room: every probe raises the rate by 25 %.
        let trace = run_fluid(&mut b, &mut s, k, 50 * 8 - k, 10, |_| 300_000);
        let windows: Vec<u64> = trace.iter().map(|t| t.1).collect();
        // 1.5 s: NOT_UPDATE → UPDATE_START; 3 s: probe; then a probe at every tick.
        assert_eq!(trace[0], (UpdateMode::UpdateStart, 10_000));
        assert_eq!(trace[1], (UpdateMode::Updating, 12_500));
        assert_eq!(&windows[2..], &[15_625, 19_531, 24_413, 30_516, 38_145, 47_681]);
        assert!(trace[1..].iter().all(|t| t.0 == UpdateMode::Updating));
        assert!(b.measured_rate().bps() / 8 > 3 * 1_000_000, "the measured rate followed the window");
    }

    #[test]
    fn update_falls_back_to_pre_when_the_rate_is_flat() {
        let mut b = becc(100_000, BeccConfig::default());
        let mut s = Script::new(10);
        let k = first_loss(&mut b, &mut s, 30_000);
        // The path is full: capacity equals what the window already delivers.
        let trace = run_fluid(&mut b, &mut s, k, 50 * 8 - k, 10, |_| 30_000);
        assert_eq!(trace[0], (UpdateMode::UpdateStart, 10_000));
        assert_eq!(trace[1], (UpdateMode::Updating, 12_500), "probe");
        assert_eq!(trace[2], (UpdateMode::UpdateStart, 10_000), "no gain: back to pre_snd_swnd");
        assert_eq!(trace[3], (UpdateMode::Updating, 12_500), "probe again");
        assert_eq!(trace[4], (UpdateMode::UpdateStart, 10_000));
        // A rate that rises once by less than the expectation (×1.125): also a fallback.
        let mut b = becc(100_000, BeccConfig::default());
        let mut s = Script::new(10);
        let k = first_loss(&mut b, &mut s, 30_000);
        let trace = run_fluid(&mut b, &mut s, k, 50 * 4 - k, 10, |_| 33_000);
        assert_eq!(trace[1], (UpdateMode::Updating, 12_500));
        assert_eq!(trace[2], (UpdateMode::UpdateStart, 10_000), "+10 % < +12.5 % expected");
    }

    #[test]
    fn rising_then_full_path_grows_then_falls_back() {
        let mut b = becc(100_000, BeccConfig::default());
        let mut s = Script::new(10);
        let k = first_loss(&mut b, &mut s, 30_000);
        // Room for 20 000 bytes of window (60 000 bytes per period). The expectation compounds
        // ×1.125 from the rate at the first probe, so it lags the rate that ×1.25 windows
        // deliver: the window overshoots the path (24 413 → 30 516 → 38 145) until the
        // expectation (2.03 MB/s at 12 s) passes the saturated rate (2.0 MB/s), then falls back
        // to pre_snd_swnd and probes from there every other tick.
        let trace = run_fluid(&mut b, &mut s, k, 50 * 10 - k, 10, |_| 60_000);
        let windows: Vec<u64> = trace.iter().map(|t| t.1).collect();
        assert_eq!(windows, vec![10_000, 12_500, 15_625, 19_531, 24_413, 30_516, 38_145, 30_516, 38_145, 30_516]);
        assert_eq!(trace[7].0, UpdateMode::UpdateStart);
        assert_eq!(trace[8].0, UpdateMode::Updating);
    }

    #[test]
    fn no_update_while_bandwidth_window_exceeds_cwnd() {
        // A large estimate (900 000 bytes per period, 10 ms): snd_swnd = 300 000 bytes, while
        // Reno's cwnd restarts from ssthresh = 50 000 and grows in congestion avoidance: the rate
        // keeps rising with cwnd, but the bandwidth window is never probed.
        let mut b = becc(100_000, BeccConfig::default());
        let mut s = Script::new(10);
        let k = first_loss(&mut b, &mut s, 900_000);
        assert_eq!(b.bandwidth_window(), Some(Bytes(300_000)));
        let start_rate_cwnd = b.reno().cwnd().0;
        let trace = run_fluid(&mut b, &mut s, k, 50 * 8 - k, 10, |_| 3_000_000);
        assert!(b.reno().cwnd().0 > start_rate_cwnd + 20_000, "the rate rose with cwnd");
        assert!(b.reno().cwnd().0 < 300_000, "the scenario keeps cwnd below the bandwidth window");
        assert!(trace.iter().all(|t| t.1 == 300_000 && t.0 != UpdateMode::Updating), "never probed: {trace:?}");
        assert_eq!(b.window().send_window(Bytes(1 << 30)), b.reno().cwnd(), "cwnd limits");
        // The same script with a large cwnd does probe (the test above can fail).
        let mut b = becc(100_000, BeccConfig::default());
        let mut s = Script::new(10);
        let k = first_loss(&mut b, &mut s, 30_000);
        let trace = run_fluid(&mut b, &mut s, k, 50 * 8 - k, 10, |_| 300_000);
        assert!(trace.iter().any(|t| t.1 > 10_000));
    }

    #[test]
    fn probe_interrupted_by_cwnd_keeps_grown_window() {
        let mut b = becc(100_000, BeccConfig::default());
        let mut s = Script::new(10);
        let k = first_loss(&mut b, &mut s, 30_000);
        run_fluid(&mut b, &mut s, k, 101 - k, 10, |_| 300_000);
        // 3.03 s: probing (12 500). A timeout shrinks cwnd to one segment.
        assert_eq!(b.mode(), UpdateMode::Updating);
        b.on_timeout(Time(3_040 * MS), Bytes(50_000));
        assert_eq!(b.mode(), UpdateMode::NotUpdate, "snd_swnd > snd_cwnd");
        assert_eq!(b.bandwidth_window(), Some(Bytes(12_500)), "the timeout keeps snd_swnd");
        run_timers(&mut b, Time(4_500 * MS));
        assert_eq!(b.mode(), UpdateMode::UpdateStart);
        assert_eq!(b.bandwidth_window(), Some(Bytes(12_500)), "NOT_UPDATE does not restore pre_snd_swnd");
    }

    #[test]
    fn one_window_per_loss_episode() {
        let mut b = becc(1000, BeccConfig::default());
        let mut s = Script::new(10);
        s.period(&mut b, 0, 60_000);
        run_timers(&mut b, Time(31 * MS));
        s.loss(&mut b, Time(35 * MS));
        assert_eq!(b.bandwidth_window(), Some(Bytes(20_000)));
        // Recovery: a partial ACK in the next period, then a new dup-ACK series below recover.
        s.new_ack(&mut b, Time(40 * MS), 3_000);
        run_timers(&mut b, Time(61 * MS));
        s.loss(&mut b, Time(65 * MS));
        assert_eq!(b.bandwidth_window(), Some(Bytes(20_000)), "same episode: kept");
        // Everything outstanding at the set is acknowledged: the next loss is a new episode.
        let passed = s.snd_max - s.ack;
        s.new_ack(&mut b, Time(70 * MS), passed);
        run_timers(&mut b, Time(91 * MS));
        s.loss(&mut b, Time(95 * MS));
        // t_maxacked since the clear: max(3 000, 100 000 + …) over periods 1 and 2.
        let expected = passed.max(3_000) * 10 / 30;
        assert_eq!(b.bandwidth_window(), Some(Bytes(expected)));

        // The literal rule (guard off) overwrites it inside the episode.
        let mut b = becc(1000, BeccConfig { once_per_loss_episode: false, ..BeccConfig::default() });
        let mut s = Script::new(10);
        s.period(&mut b, 0, 60_000);
        run_timers(&mut b, Time(31 * MS));
        s.loss(&mut b, Time(35 * MS));
        s.new_ack(&mut b, Time(40 * MS), 3_000);
        run_timers(&mut b, Time(61 * MS));
        s.loss(&mut b, Time(65 * MS));
        assert_eq!(b.bandwidth_window(), Some(Bytes(2_000)), "3 000 bytes / 30 ms × 10 ms, floored at 2 MSS");
    }

    #[test]
    fn updating_grows_only_when_rate_beats_expectation_strictly() {
        let mut b = becc(100_000, BeccConfig::default());
        b.s.snd_swnd = 40_000;
        b.s.set_mode(UpdateMode::UpdateStart);
        b.s.t_msrd_th = 800_000;
        b.swnd_update();
        assert_eq!((b.s.pre_snd_swnd, b.s.snd_swnd, b.s.expct_th), (40_000, 50_000, 900_000));
        assert_eq!(b.mode(), UpdateMode::Updating);
        b.s.t_msrd_th = 900_001;
        b.swnd_update();
        assert_eq!((b.s.pre_snd_swnd, b.s.snd_swnd, b.s.expct_th), (50_000, 62_500, 1_012_500));
        assert_eq!(b.mode(), UpdateMode::Updating);
        b.s.t_msrd_th = 1_012_500;
        b.swnd_update();
        assert_eq!(b.s.snd_swnd, 50_000, "equal to the expectation: back to pre_snd_swnd");
        assert_eq!(b.mode(), UpdateMode::UpdateStart);
        b.s.set_mode(UpdateMode::NotUpdate);
        b.swnd_update();
        assert_eq!((b.s.snd_swnd, b.mode()), (50_000, UpdateMode::UpdateStart), "NOT_UPDATE only changes mode");
    }

    /// Feeds the same ACK script to controllers whose timers are driven differently.
    fn scripted(b: &mut Becc, timers: impl Fn(&mut Becc, Time)) {
        let mut s = Script::new(12);
        for k in 0..200u64 {
            // A rate sequence with a burst, a loss and a quiet stretch.
            let bytes = match k {
                0..=9 => 20_000 + k * 2_000,
                10..=59 => 45_000,
                60..=79 => 0,
                _ => 40_000 + (k % 7) * 1_000,
            };
            if bytes > 0 {
                s.period(b, k, bytes);
            }
            if k == 12 {
                s.loss(b, Time(12 * 30 * MS + 25 * MS));
                let passed = s.snd_max - s.ack;
                s.new_ack(b, Time(12 * 30 * MS + 27 * MS), passed);
            }
            timers(b, Time((k + 1) * 30 * MS + 5 * MS));
        }
        timers(b, Time(200 * 30 * MS + 1));
    }

    fn snapshot(b: &Becc) -> (BeccState, Option<Time>, Window) {
        (b.s, b.next_timer(), b.window())
    }

    #[test]
    fn timers_called_late_or_never_give_the_same_state() {
        let mut on_time = becc(100_000, BeccConfig::default());
        scripted(&mut on_time, run_timers);
        // Called only every 450 ms, at an instant covering up to 15 rate ticks and an update.
        let mut late = becc(100_000, BeccConfig::default());
        scripted(&mut late, |b, until| {
            if until.0 % (450 * MS) < 30 * MS {
                b.on_timer(until);
            }
        });
        // Never called: only the ACK path catches up.
        let mut never = becc(100_000, BeccConfig::default());
        scripted(&mut never, |_, _| {});
        never.on_timer(Time(200 * 30 * MS + 1));
        late.on_timer(Time(200 * 30 * MS + 1));
        // Called repeatedly at the same instant, as a driver loop might.
        let mut repeated = becc(100_000, BeccConfig::default());
        scripted(&mut repeated, |b, until| {
            for _ in 0..3 {
                b.on_timer(until);
            }
        });
        assert!(on_time.bandwidth_window().is_some(), "the script sets a window");
        assert!(on_time.measured_rate().bps() > 0);
        assert_eq!(snapshot(&late), snapshot(&on_time));
        assert_eq!(snapshot(&never), snapshot(&on_time));
        assert_eq!(snapshot(&repeated), snapshot(&on_time));
    }

    #[test]
    fn simultaneous_rate_and_update_tick_runs_rate_first() {
        // The 50th rate tick and the first update coincide at 1.5 s.
        let mut b = becc(100_000, BeccConfig::default());
        let mut s = Script::new(10);
        s.period(&mut b, 0, 30_000);
        run_timers(&mut b, Time(31 * MS));
        s.loss(&mut b, Time(32 * MS));
        let passed = s.snd_max - s.ack;
        s.new_ack(&mut b, Time(33 * MS), passed);
        run_timers(&mut b, Time(1_499 * MS));
        assert_eq!(b.next_timer(), Some(Time(1_500 * MS)));
        b.on_timer(Time(1_500 * MS));
        // Both ran: NOT_UPDATE → UPDATE_START, and next instants are 1.53 s.
        assert_eq!(b.mode(), UpdateMode::UpdateStart);
        assert_eq!(b.next_timer(), Some(Time(1_530 * MS)));
        // At 3 s the probe's expectation uses the rate including the 3 s rate tick.
        s.period(&mut b, 99, 30_000);
        let rate_before = b.s.t_msrd_th;
        b.on_timer(Time(3_000 * MS));
        let rate_after = b.s.t_msrd_th;
        assert_ne!(rate_before, rate_after);
        assert_eq!(b.expected_rate().bps() / 8, (rate_after + (rate_after >> 3)) as u64);
    }

    #[test]
    fn ack_at_tick_instant_counts_in_the_next_period_whatever_the_order() {
        let mut a = becc(1000, BeccConfig::default());
        let mut b = becc(1000, BeccConfig::default());
        let ev = AckEvent { now: Time(30 * MS), ack: 5_000, newly_acked: Bytes(5_000), ..Default::default() };
        a.on_timer(Time(30 * MS));
        a.on_ack(&ev);
        b.on_ack(&ev);
        b.on_timer(Time(30 * MS));
        assert_eq!(a.s, b.s);
        assert_eq!(a.acked_this_period(), Bytes(5_000));
        assert_eq!(a.max_acked(), Bytes(0));
    }

    #[test]
    fn long_gap_is_skipped_without_a_long_loop() {
        let mut b = becc(100_000, BeccConfig::default());
        let mut s = Script::new(10);
        s.period(&mut b, 0, 30_000);
        let far = Time(100_000 * 1_000_000_000); // ~28 h later
        b.on_timer(far);
        let next = b.next_timer().unwrap();
        assert!(next > far && next.0 - far.0 <= 30 * MS);
        assert_eq!(b.measured_rate(), Rate(0));
        assert_eq!(b.max_acked(), Bytes(30_000), "the first overdue tick still closed its period");
        assert_eq!((next.0) % (30 * MS), 0, "grid phase kept");
    }

    #[test]
    fn send_window_is_min_of_three() {
        let mut b = becc(100, BeccConfig::default());
        let mut s = Script::new(10);
        s.period(&mut b, 0, 60_000);
        run_timers(&mut b, Time(31 * MS));
        s.loss(&mut b, Time(35 * MS));
        let w = b.window();
        assert_eq!(w.ceiling, Some(Bytes(20_000)));
        assert!(w.cwnd.0 > 20_000);
        assert_eq!(w.send_window(Bytes(1 << 20)), Bytes(20_000), "bandwidth window limits");
        assert_eq!(w.send_window(Bytes(15_000)), Bytes(15_000), "receiver window limits");
    }

    #[test]
    fn config_errors_and_state_size() {
        let bad = BeccConfig { ms_period: Dur::ZERO, ..BeccConfig::default() };
        let e = Becc::new(Recovery::Reno, RenoConfig::default(), bad).unwrap_err();
        assert!(e.to_string().contains("ms_period"), "{e}");
        let bad = BeccConfig { msrd_shift: 0, ..BeccConfig::default() };
        assert!(matches!(bad.validate(), Err(BeccConfigError::Shift { name: "msrd_shift", .. })));
        let bad = BeccConfig { dupack_trigger: 0, ..BeccConfig::default() };
        assert!(bad.validate().is_err());
        assert!(BeccConfig::default().validate().is_ok());
        let b = Becc::with_paper_constants(Recovery::NewReno, RenoConfig::default());
        assert_eq!(b.name(), "becc-newreno");
        // Eight u32, two u64 deadlines, one byte of mode/flags, padded to 8.
        assert_eq!(b.state_size(), 56);
    }
}
