//! Auto-ranging: PathQuick without a hand-set `B_max` (issue 19).
//!
//! # Why one train cannot cover 1–500 Mbit/s
//!
//! A PathQuick train spans `B_min = P_2/T_quick` to `B_max = P_N/T_quick` (PathQuick paper §3.3,
//! Eqs. 5 and 7), so its range ratio is `B_max/B_min = P_N/P_2`: with 1,500-byte packets at most
//! and a smallest probe of a few dozen bytes (IP, UDP and probe headers) that is about 35. Three
//! decades need several trains; the question is only how to spend them.
//!
//! # The scheme
//!
//! 1. **Coarse train** from the smallest packet up to `top` (500 Mbit/s, or the server's cap if
//!    lower): `P_N` = the largest packet, `T_quick = P_N/top` (Eq. 5), and `N` from the busy
//!    window at a coarse σ (below): at 500 Mbit/s 67 packets, 1.6 ms, `ΔP` = 22 B, so
//!    `B_min = (P_1 + ΔP)/T_quick` ≈ `top/21`.
//! 2. If it reads *below range* (or lost packets, [`Ladder`]), the next coarse train covers the
//!    range just below (`top ← B_min` of the last one), at most [`MAX_COARSE`] coarse trains in
//!    all (500 → 23 → 1.1 Mbit/s, the last reaching down to 0.1 Mbit/s; with 1,500-byte
//!    packets the second lasts 34 ms, the third 331 ms).
//! 3. **Fine train** around the coarse result `A₀` ([`AutoRange::fine`]): rates from
//!    `B_min ≈ A₀/2` to `B_max = max(2·A₀, A₀ + 2·resolution₀)` (capped at `top`), `P_N` the
//!    largest packet (`T_quick = P_N/B_max`, Eq. 5), `P_1 = B_min·T_quick` (Eq. 7 with
//!    `P_2 ≈ P_1`), and a length chosen for accuracy (below), which fixes `ΔP` through
//!    `T_train = T_quick·(N − 1)` (Eq. 1) and `P_N = P_1 + (N − 1)·ΔP` (Eq. 2). The fine
//!    train's result is the answer. Above range on the coarse train at the top, or an
//!    inconclusive coarse train, gives a fine train topped at `top`.
//!
//! # The fine train's length: long enough for the cross traffic to average out
//!
//! A train learns about the cross traffic only while it queues: past the crossing the queue
//! grows by the probe's and the cross traffic's bits over `C`, so what the train measures is the
//! cross traffic's rate *averaged over its busy time `W`*. With Poisson cross traffic of
//! `P_x`-byte packets at rate `X` that average has the standard deviation
//! `√(8·P_x·X/W)`; for it to be `σ·C` the busy time must be `W = 8·P_x·X/(σ·C)²`. `X` and `C`
//! are unknown, but `X/C² = (C − A)/C²` is largest at `C = 2·A`, so
//! `W = 8·P_x/(4·A₀·σ²)` ([`busy_window`]) suffices whatever the capacity. The paper's design
//! (`ΔP` = 12 B over `[P_1/T_quick, 2·A₀]`) is busy for about half its length, which at 10 Mbit/s
//! and 60 % load is 90 ms against the 139 ms this rule asks for with `P_x` = 1,000 B and σ = 6 %
//! (docs/results.md, issue 19 session 5: the packet-level harness, `abw::excursion::harness_windows`).
//! The rate range below `A₀/2` never queues and is not sent: a train over `[A₀/2, 2·A₀]` is
//! busy for `(B_max − A₀)/(B_max − B_min)` = 2/3 of its length, so its length is
//! `W·(B_max − B_min)/(B_max − A₀)` = 1.5·W, at most [`MAX_FINE_LENGTH`], and never shorter than
//! the paper's `ΔP` = 12 B train over the same range (`ΔP` is at most [`FINE_DELTA_P`]).
//!
//! Both `W` and `T_quick` scale as `1/A₀`, so the rule asks for the same
//! `ΔP = (4/3)·σ²·(P_N − P_1)·P_N/P_x` at every rate: 3.75 B with `P_1 = P_N/4`, rounded down
//! to 3 B (about 375 packets). Cost: at 100 Mbit/s and 30 % load the fine train lasts 32 ms, at
//! 10 Mbit/s and 60 % load 563 ms (the harness rows in docs/results.md) — the price of a 5 %
//! standard deviation against Poisson cross traffic, which no shorter measurement can have (the
//! bound is the cross traffic's, not the estimator's). The coarse train is far shorter; the
//! estimate takes one fine train + a fraction + one RTT (one handshake; every train rides on
//! the same cookie).
//!
//! # The coarse trains' length (issue 19, session 7)
//!
//! The same reasoning sizes the coarse trains, at a coarse σ = [`COARSE_SIGMA`] (25 % of the
//! capacity): a coarse train topped at `B` lasts `busy_window(B/16, σ)` = `8·P_x/(4·(B/16)·σ²)`
//! (at most [`MAX_COARSE_LENGTH`], but never fewer than [`COARSE_PACKETS`] packets, which wins
//! when both bind: the 1.1 Mbit/s rung's 31 packets last about 331 ms), `ΔP` from Eqs. 1–2.
//! `B/16` is the bottom of the rung the train must judge (its `B_min` is about `B/21`), where
//! the window is longest. The session-6 coarse trains had 31 packets whatever the rate:
//! 0.7 ms at 500 Mbit/s and 10 ms at 36 Mbit/s, in which 90 Mbit/s of cross traffic of
//! 1,000-byte packets is eight packets and 9 Mbit/s eleven; they read 2–29× too high on the
//! testbed at 60–90 % load (docs/results.md, issue 19 session 5), a range the fine train's
//! factor 2 cannot absorb. The harness (`abw::ladder_harness`) picked σ = 25 % over 20 % and
//! 15 %: at 15 % the 10 Mbit/s idle estimate misses its time budget (a 200 ms second coarse
//! train before a 200 ms fine train), and 20 % was no more accurate (docs/results.md, issue 19
//! session 7).
//!
//! # With the capacity known (issue 19, session 9)
//!
//! Once the first coarse train has shown the capacity `C` ([`super::dispersion::capacity`],
//! [`Ladder`]), the ladder no longer needs the fit's verdict on a coarse train, nor the worst
//! case of the length rule:
//!
//! - **The ranging reading.** A coarse train that queued is read from its busy gaps with `C`
//!   known ([`super::dispersion::busy_reading`]): `A₀`, the cross traffic's mean over its busy
//!   time `W`, which deviates by `√(8·P_x·X/W)` (the busy-window reasoning above). `X = C − A₀`
//!   is read with that same error, and a reading near `C` would claim a spread near zero; so
//!   the spread is taken for a cross traffic two spreads above the one read, `σ₀² = k·(X̂ + 2σ₀)`
//!   with `k = 8·P_x/W`: `σ₀ = k + √(k² + k·X̂)` ([`reading_spread`]). The fine train spans
//!   `[min(A₀/2, A₀ − 2σ₀), max(2·A₀, A₀ + 2σ₀)]` ([`AutoRange::fine_from_reading`]): the
//!   paper's range shape (Eqs. 5 and 7 fix `T_quick` and `P_1` from its ends) around a range
//!   chosen from the reading's confidence instead of a fixed factor (idea (c) of the session's
//!   brief, `[A₀/4, 2·A₀]`, is the special case `σ₀ = A₀/8`…`3A₀/8`). Before, at 10 Mbit/s and
//!   60 % load the 34 ms second coarse train read "below range (≤ 1.43 Mbit/s)" by the fit for
//!   A = 4 in 35–43 of 200 trains, the third coarse train "above range", and the fine train
//!   over 0.6–2.2 Mbit/s answered 1.4–2.1 (p90 18.7 %); the busy gaps of that train read A
//!   within −24.8…+20.3 % of `C` in 90 % of 200 trains and within two spreads in all 200
//!   (`abw::ladder_harness::ranging_alone`; docs/results.md, issue 19 session 9).
//! - **The first train's reading** has 1.6 ms of busy gaps: `k` = 7.5 Mbit/s, `σ₀` at least
//!   15 Mbit/s. It leads to the fine train only when `σ₀ ≤ A₀/4` (then `[A₀/2, 2·A₀]` holds
//!   `A₀ ± 2σ₀`: at 100 Mbit/s idle); otherwise one more coarse train, topped at `2·C` (the
//!   factor of the rungs; or the next rung when that already covers `2·C`, as at 10 Mbit/s),
//!   is read the same way. Before, at 100 Mbit/s and 90 % load the first train's fit read
//!   41.7–467 Mbit/s for A = 10 in 35 of the 56 estimates off by more than 10 %, and the fine
//!   train around it, entirely above A, answered 11.6–150.6 % of `C` off (p90 33.6 %); at 30 %
//!   load its "below range (≤ 30.7)" sent the ladder to the 1.1–23.3 Mbit/s rung for A = 70.
//!   Where `2·C` is at or above the first train's top (`C` ≥ 250 Mbit/s under the 500 Mbit/s
//!   top) that coarse train would be the first one again, so the unsure reading leads to the
//!   fine train over its two spreads (over a full link's spreads from the bottom when the busy
//!   gaps overran `C`; issue 19, session 18). Before, the ladder fell back to the fit's verdict,
//!   whose "below range (≤ 30.7)" sent it down the rungs to a fine train at 11.9–46.5 Mbit/s
//!   and a retry above. In the packet-level harness at 500 Mbit/s (stamps ±1 µs, 200 estimates)
//!   the estimates over the time budget went from 18 to 1 at 60 % load and from 17 to 0 at 90 %,
//!   the p90 of |error| from 13.5 to 8.7 % and from 14.7 to 8.3 % of `C` (docs/results.md).
//! - **The fine train's length from the load measured** ([`fine_window`]): `W = 8·P_x·X/(σ·C)²`
//!   with `X = C − A₀` instead of the worst case `X/C² ≤ 1/(4·A₀)`, but `X` at least `C/4`
//!   (the reading's spread is of that order, so a smaller `X` is not known to be smaller; the
//!   floor also keeps the idle train as it was, `X/C² = 1/(4·C)`). Never longer than the worst
//!   case; at 90 % load (`A₀ = C/10`) a third of it (0.43 s of busy time at 10 Mbit/s against
//!   1.2 s). In the harness, with the reading's rules and without this one, the 10 Mbit/s / 90 %
//!   estimates took a median 2.0 s, 159 of 300 over budget; with it 1.2 s and 95. No busy time
//!   the worst case sizes at up to [`UNSHORTENED_WINDOW`] is shortened (session 18: at
//!   500 Mbit/s and 90 % load the rule left a 13 ms fine train whose answers spread twice as
//!   wide as the worst case's 32–64 ms ones).
//! - **Sized for one spread more cross traffic than read** ([`sized_for`], session 27): the
//!   fine train after a reading `A₀ ± σ₀` is busy for the window `X = C − A₀ + σ₀` asks, with
//!   `X` at most `3C/4` unless the reading says more. `X̂` is a reading, and the rule above
//!   holds for the true `X`: a reading above `A` sized the train for less cross traffic than
//!   there was, and those answers made the 90th percentile. The cap keeps the trains at heavy
//!   load as they were: there a reading far above `A` would otherwise make a train that
//!   overflows a small buffer. The wide train (`Ladder::wide_instead`) stays sized at its
//!   reading, whose spread (15 Mbit/s and more after the first train's 1.6 ms) would size
//!   nearly every wide train for the cap. Numbers in [`sized_for`]'s doc and docs/results.md.
//!
//! - **A reading below zero** (issue 19, session 14): a later coarse train whose busy gaps grew
//!   by more than the probe's own bits (the cross traffic over its busy time exceeded `C`,
//!   [`super::dispersion::overrun`]) reads `A₀ = 0` with the spread of a full link over that
//!   time, and the fine train starts from the smallest packet. Before, it had no reading and
//!   the ladder walked down a rung: at 100 Mbit/s and 90 % load the 4 ms second train holds
//!   about 45 cross packets (one standard deviation 13 % of `C`), read below zero in 14 of 100
//!   estimates, and the 0.4–9.3 Mbit/s rung (85 ms) then read "above range" every time. The
//!   first train's overrun (its 1.6 ms of busy gaps hold about 18 cross packets at 90 % load, a
//!   standard deviation of a fifth of `C`) only feeds the wide fine train of
//!   `Ladder::wide_instead`, whose queue bound refuses it on short round trips: in the harness at RTT 100 ms and 100 Mbit/s the
//!   estimates over budget went from 53 to 0 of 200 at 90 % load (median error 3.5 → 4.0 %,
//!   p90 7.5 → 7.2 %) and from 3 to 0 at 60 %; at RTT 10–20 ms nothing changed.
//! - **A fine train without an estimate whose delays confirm its busy reading** (session 14):
//!   "above range", or cut by the judging deadline before it showed a knee, with the capacity
//!   known and the train's delay risen by at least half of what the probe rate model predicts
//!   for its busy reading ([`super::dispersion::confirmed_reading`]): that reading is the
//!   answer, not a retry. The queue-growth fit leaves the serialisation slope free, so a
//!   train queued from its first tenth (its delay rising almost linearly) fits "no growth" as
//!   well; at 10 Mbit/s and 90 % load such a fine train (0.2–6.8 Mbit/s, its delay up by
//!   80 ms) was cut with "no knee" and retried over 0.1–3.4 Mbit/s (850 ms).
//!
//!   In the harness (300 estimates per row, RTT 20 ms at 10 Mbit/s and 10 ms at 100) the two
//!   took the estimates over the time budget at 90 % load from 57 to 8 (10 Mbit/s) and from 47
//!   to 1 (100 Mbit/s), the median error from 4.3 to 4.1 % and from 3.5 to 2.9 %, the p90 from
//!   9.8 to 8.3 % and from 8.2 to 8.1 %; the other rows kept their figures but for 10 Mbit/s /
//!   60 % (2 over budget instead of 0, median error 3.5 → 3.1 %). At RTT 100 ms (200 per row)
//!   10 Mbit/s / 90 % went from 71 to 22 over budget and p90 11.0 → 8.2 %; 100 Mbit/s / 90 %
//!   from 45 to 53 with these two alone (52 of the 53 took three trains, the only estimates
//!   that miss the budget there), and to 0 with the first train's overrun above
//!   (docs/results.md).
//! - **A ranging train read with and without the delay box's stalls** (session 25). A stall in
//!   a coarse train's busy gaps reads as cross traffic. In the first train at 500 Mbit/s
//!   (1.6 ms) one stall of a few hundred µs takes `A₀` down by hundreds of Mbit/s: the box
//!   catches up by about 22 µs a gap, and the train ends first. The fine train around that
//!   reading then lies wholly below `A`, reads "above range", and a third train follows (on
//!   the testbed, a 1.56 ms stall at packet 52 of 67 left a fine train over 5–140 Mbit/s for
//!   `A` = 350). The ladder reads the train a second time without the stall's gaps
//!   ([`super::dispersion::busy_reading_without_stalls`]) and, when the readings differ, sends
//!   one fine train over both readings' ranges ([`AutoRange::fine_from_readings`]), busy for
//!   the window the lower reading asks. It keeps the reading with the stall: after a stall the
//!   box forwards the packets it read late at the link's rate, gaps that carry no cross
//!   traffic, so the reading without it is biased high under load. The train cannot tell
//!   which of the two is right; holding both costs a wider train in the estimates that
//!   stalled (numbers in docs/results.md, issue 19 session 25).
//!
//! Tried and dropped (the harness at 300 estimates per row, docs/results.md): the same reading
//! for a fine train that read "below range" (p90 at 10 Mbit/s / 90 % 10.0 → 11.9 %); a fine
//! train over `[bound, C]` after a lower coarse train read "above range" (10 Mbit/s / 90 %:
//! twice the estimates over budget, the wide train overflowing the 100-packet buffer); the
//! plain spread `√(k·X̂)` (the first train's reading near `C` then passed as sure at 10 Mbit/s
//! and 30–90 % load: p90 31 and 72 % at 60 and 90 %); a second coarse train topped at `2·C`
//! at 10 Mbit/s too (39.6 ms against the rung's 33.9: the idle time 385 → 388 ms).
//!
//! # Choices the issue left open
//!
//! - The coarse train is a PathQuick train too (equal spacing, growing sizes), not a
//!   packet-pair or a chirp, so the same estimator judges it.
//! - The factor 2 of the fine range, the coarse `N` and the ladder depth are ours, stated above.
//! - The margin of the fine train's length against its reading ([`sized_for`]: one spread of
//!   cross traffic more than read, at most `3C/4`) is ours: the paper sizes its train by hand,
//!   and the length rule above is ours too.
//! - The fine train's lower end `A₀/2`, the target σ = [`TARGET_SIGMA`] of the capacity and the
//!   cross packet [`CROSS_PACKET`] = 1,500 B (the MTU: smaller cross packets average out faster,
//!   so the rule is conservative for them) are ours; the paper fixes the range by hand and `ΔP`
//!   = 12 B.

use super::dispersion::VoteTolerance;
use super::pathquick::{QuickDesign, QuickSpec};
use super::train::CutShort;
use super::{DesignError, InconclusiveReason, Outcome, ProbeRecord, TrainEstimate};
use crate::units::{Bytes, Dur, Rate};

/// Packets of a coarse train at least (the session-6 coarse train had exactly this many).
pub const COARSE_PACKETS: u32 = 31;
/// The coarse trains' target standard deviation, as a fraction of the capacity: each is made
/// as long as [`busy_window`] asks at this σ for an available bandwidth of a sixteenth of its
/// top (module doc, "The coarse trains' length").
pub const COARSE_SIGMA: f64 = 0.25;
/// The longest coarse train.
pub const MAX_COARSE_LENGTH: Dur = Dur(200_000_000);
/// Coarse trains at most before the fine train.
pub const MAX_COARSE: u32 = 3;
/// The lowest top of a fine train: 1 Mbit/s, the bottom of the issue's range (a train topped at
/// 1 Mbit/s with 1,500-byte packets lasts 1.45 s, under `headroom serve`'s 2 s cap).
pub const MIN_FINE_TOP: Rate = Rate(1_000_000);
/// The highest rate auto-ranging probes unless the server caps it lower.
pub const DEFAULT_TOP: Rate = Rate(500_000_000);
/// Largest size increment of a fine train (the paper's `ΔP`); the length rule may choose less,
/// and more only where this one would make the train longer than [`MAX_FINE_LENGTH`].
pub const FINE_DELTA_P: Bytes = Bytes(12);
/// The fine train's target standard deviation, as a fraction of the capacity (module doc).
pub const TARGET_SIGMA: f64 = 0.05;
/// Cross-traffic packet size the length rule assumes (module doc).
pub const CROSS_PACKET: Bytes = Bytes(1500);
/// The longest fine train (`headroom serve` refuses trains above 2 s by default).
pub const MAX_FINE_LENGTH: Dur = Dur(1_000_000_000);

/// The busy time a train needs so that Poisson cross traffic of [`CROSS_PACKET`]-byte packets,
/// averaged over it, deviates from its mean by `sigma` of the capacity (one standard deviation),
/// for an available bandwidth near `a0`, whatever the capacity: `8·P_x/(4·A₀·σ²)` (module doc).
pub fn busy_window(a0: Rate, sigma: f64) -> Dur {
    let a0 = a0.bps().max(1) as f64;
    Dur::from_secs_f64(8.0 * CROSS_PACKET.0 as f64 / (4.0 * a0 * sigma * sigma))
}

/// The busy time a fine train needs around `a0` once the capacity `c` is known:
/// `8·P_x·X/(σ·C)²` with `X = max(C − A₀, C/4)` (module doc, "The fine train's length once
/// the capacity is known"), but never shorter than the worst case [`busy_window`] where that
/// asks for at most [`UNSHORTENED_WINDOW`]. Never longer than [`busy_window`] for `A₀ ≤ C`.
pub fn fine_window(a0: Rate, c: Rate, sigma: f64) -> Dur {
    let c_bps = c.bps().max(1) as f64;
    let x = (c_bps - a0.bps() as f64).max(c_bps / 4.0);
    let measured = Dur::from_secs_f64(8.0 * CROSS_PACKET.0 as f64 * x / (sigma * c_bps).powi(2));
    measured.max(busy_window(a0, sigma).min(UNSHORTENED_WINDOW))
}

/// [`fine_window`] shortens no busy window the worst case sizes at or below this (issue 19,
/// session 18).
///
/// Why: the load measured shortens a train at 90 % load to a third of the worst case. At
/// 10 Mbit/s that saves 0.8 s; at 500 Mbit/s (`A₀` = 50 Mbit/s, the worst case 24 ms) it saves
/// 16 ms and left the fine train 13 ms long. In the packet-level harness
/// (`abw::ladder_harness::fine_alone`, ±2 µs timestamps, the fine train re-read with the true
/// `C`) such trains read 2.7–4.5 / 6.3–17.4 % of `C` (median / p90 of |error|, `A₀` = 0.7, 1
/// and 1.4 times `A`), against 2.1–2.5 / 4.0–5.1 % for the worst case's 32–64 ms trains. The
/// spread σ the rule sizes for is one standard deviation of the cross traffic alone, which
/// leaves the issue's 90th percentile (10 % of `C`) little room; where a train costs tens of
/// milliseconds that room is cheap. The bound's value is ours: it leaves the 100 Mbit/s paths'
/// trains as they were but at light load (30 %: 14.4 → 17 ms of busy time) and every
/// 10 Mbit/s train as it was.
pub const UNSHORTENED_WINDOW: Dur = Dur(25_000_000);

/// The standard deviation of a ranging train's reading `a0` taken with the capacity `c` known
/// over `busy` seconds of busy gaps: Poisson cross traffic of [`CROSS_PACKET`]-byte packets at
/// `X = C − A₀`, averaged over `busy`, deviates by `√(8·P_x·X/busy)` (module doc).
pub fn reading_spread(a0: Rate, c: Rate, busy: Dur) -> Rate {
    let x = (c.bps() as f64 - a0.bps() as f64).max(0.0);
    let k = 8.0 * CROSS_PACKET.0 as f64 / busy.as_secs_f64().max(1e-6);
    // σ² = k·(X̂ + 2σ): the spread for a cross traffic two spreads above the one read.
    Rate((k + (k * k + k * x).sqrt()).round() as u64)
}

/// The available bandwidth a fine train around the reading `a0 ± spread` is made long enough
/// for ([`fine_window`]): one spread below the reading, so for one spread more cross traffic
/// than read, `X = C − A₀ + σ₀` — but never below `min(A₀, C/4)`, so for at most three
/// quarters of `C` unless the reading itself says more (issue 19, session 27; module doc, "With
/// the capacity known"). Without the capacity, `a0` (the worst case [`busy_window`] sizes for
/// needs no margin).
///
/// Why: the length rule holds for the true `X`, and `X̂ = C − A₀` is a reading with the
/// spread `σ₀`. A reading above `A` sized the train for less cross traffic than there was, and
/// those trains' answers made the 90th percentile. In the packet-level harness (3 seeds × 200
/// estimates a row) at 30 % load the median / p90 of |error| went 3.1 / 7.5 → 2.5 / 6.0 % of
/// `C` at 10 Mbit/s (RTT 20 ms) and 3.4 / 8.0 → 2.3 / 5.8 % (RTT 100 ms); the price is the
/// train's length (the median estimate there 431 → 675 and 667 → 916 ms). The floor: sized for
/// `A₀ − σ₀` alone, a reading far above `A` at 90 % load (`A₀` = 3.8 Mbit/s for `A` = 1 at
/// 10 Mbit/s) made a fine train of 0.7–1 s that overflowed the 100-packet buffer and was
/// retried (estimates over the time budget 17 → 39 of 600).
pub fn sized_for(a0: Rate, spread: Rate, capacity: Option<Rate>) -> Rate {
    match capacity {
        Some(c) => Rate(a0.bps().saturating_sub(spread.bps())).max(a0.min(Rate(c.bps() / 4))),
        None => a0,
    }
}

/// The planner: feed it each train's outcome, it answers the next train.
#[derive(Clone, Debug)]
pub struct AutoRange {
    top: Rate,
    smallest: Bytes,
    largest: Bytes,
    coarse_done: u32,
    fine: bool,
    /// The shaper train: fine trains of the paper's shape (from the smallest packet) with this
    /// size step, instead of the ones sized from the cross traffic (None).
    fine_delta_p: Option<Bytes>,
    sigma: f64,
    /// The coarse trains' target standard deviation (`None`: [`COARSE_PACKETS`] packets).
    coarse_sigma: Option<f64>,
    /// The bottleneck capacity once a train showed it ([`AutoRange::with_capacity`]).
    capacity: Option<Rate>,
}

/// What to do after a train.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Send this (coarse) train and report its outcome.
    Coarse(QuickDesign),
    /// Send this train; its outcome is the answer.
    Fine(QuickDesign),
}

impl AutoRange {
    /// `top`: the highest rate to probe; `smallest`/`largest`: packet sizes (IP level).
    pub fn new(top: Rate, smallest: Bytes, largest: Bytes) -> AutoRange {
        AutoRange {
            top,
            smallest,
            largest,
            coarse_done: 0,
            fine: false,
            fine_delta_p: None,
            sigma: TARGET_SIGMA,
            coarse_sigma: Some(COARSE_SIGMA),
            capacity: None,
        }
    }

    /// The bottleneck capacity, once known: the fine train's length follows the cross traffic
    /// measured against it ([`fine_window`]) instead of the worst case ([`busy_window`]).
    pub fn with_capacity(mut self, capacity: Option<Rate>) -> AutoRange {
        self.capacity = capacity;
        self
    }

    /// Fine trains of the paper's shape (from the smallest packet up) with this size step
    /// instead of the trains sized from the cross traffic: the socket client's
    /// [`super::shaper::SHAPER_DELTA_P`] when it looks for shapers (the shaper detector's
    /// burst estimate was checked on those trains; on the longer cross-traffic trains it read
    /// 168–213 KB for a 16 KB bucket, issue 19 session 5).
    pub fn with_fine_delta_p(self, delta_p: Bytes) -> AutoRange {
        AutoRange { fine_delta_p: Some(delta_p), ..self }
    }

    /// The fine train's target standard deviation as a fraction of the capacity (default
    /// [`TARGET_SIGMA`]): a smaller one asks for a longer train, `1/σ²` ([`busy_window`]).
    /// Values outside (0, 1) keep the default.
    pub fn with_target_sigma(mut self, sigma: f64) -> AutoRange {
        if sigma > 0.0 && sigma < 1.0 {
            self.sigma = sigma;
        }
        self
    }

    /// The coarse trains' target standard deviation (default [`COARSE_SIGMA`]); `None`: the
    /// session-6 coarse trains of [`COARSE_PACKETS`] packets whatever the rate.
    pub fn with_coarse_sigma(mut self, sigma: Option<f64>) -> AutoRange {
        self.coarse_sigma = sigma;
        self
    }

    /// The first train (coarse, topped at `top`).
    pub fn first(&mut self) -> Result<Next, DesignError> {
        self.coarse_done = 1;
        Ok(Next::Coarse(self.coarse(self.top)?))
    }

    /// A coarse train topped at `b_max`.
    pub fn coarse(&self, b_max: Rate) -> Result<QuickDesign, DesignError> {
        let span = self.largest.0.saturating_sub(self.smallest.0);
        let mut delta_p = Bytes((span / (COARSE_PACKETS as u64 - 1)).max(1));
        if let Some(sigma) = self.coarse_sigma {
            let t_quick = self.largest.time_at(b_max).as_secs_f64();
            let want = busy_window(Rate(b_max.bps() / 16), sigma).as_secs_f64().min(MAX_COARSE_LENGTH.as_secs_f64());
            let gaps = (want / t_quick).ceil().max(1.0);
            delta_p = Bytes(((span as f64 / gaps).floor() as u64).clamp(1, delta_p.0));
        }
        self.spec(b_max, delta_p).solve()
    }

    /// The fine train around a coarse result `a0` whose train had resolution `res0`: rates
    /// `[a0/2, max(2·a0, a0 + 2·res0)]` (the top capped at `top`), as long as [`busy_window`]
    /// asks (module doc).
    pub fn fine(&self, a0: Rate, res0: Rate) -> Result<QuickDesign, DesignError> {
        let want = (a0.bps().saturating_mul(2)).max(a0.bps().saturating_add(res0.bps().saturating_mul(2)));
        if let Some(step) = self.fine_delta_p {
            // The shaper train's step, coarser where that step would make the train longer than
            // [`MAX_FINE_LENGTH`] (at 1 Mbit/s the 3 B train would last 2.9 s, over the server's
            // 2 s cap: refused in 5 of 5 estimates at 10 Mbit/s with 9 Mbit/s of cross traffic,
            // issue 19 session 13).
            let b_max = Rate(want.min(self.top.bps()).max(1));
            let span = self.largest.0.saturating_sub(self.smallest.0) as f64;
            let step = Bytes(step.0.max(step_within_longest(span, self.largest.time_at(b_max).as_secs_f64())));
            return self.spec(b_max, step).solve();
        }
        let b_max = Rate(want.min(self.top.bps()).max(1));
        // The lower end: A₀/2, but at most a quarter of the way below the top (an A₀ at the top
        // leaves the train room to find A).
        let lo = (a0.bps() / 2).min(b_max.bps() / 4);
        self.fine_over(a0, Rate(lo), b_max)
    }

    /// A fine train from `lo` (at least the smallest packet's rate) to `b_max`, long enough for
    /// [`busy_window`] around `a0`.
    fn fine_over(&self, a0: Rate, lo: Rate, b_max: Rate) -> Result<QuickDesign, DesignError> {
        self.fine_over_sized(a0, a0, lo, b_max)
    }

    /// [`AutoRange::fine_over`] busy for the window an available bandwidth `sized` asks
    /// ([`sized_for`]), its busy share still reckoned from `a0`.
    fn fine_over_sized(&self, a0: Rate, sized: Rate, lo: Rate, b_max: Rate) -> Result<QuickDesign, DesignError> {
        // Eq. 5: the spacing that sends the largest packet at B_max.
        let t_quick = self.largest.time_at(b_max).as_secs_f64();
        let (hi, a) = (b_max.bps() as f64, (a0.bps() as f64).min(b_max.bps() as f64));
        // Eq. 7 (with P_2 ≈ P_1): the first packet probes `lo`, at least the smallest packet.
        let p_1 = Bytes(((lo.bps() as f64 * t_quick / 8.0).round() as u64).clamp(self.smallest.0, self.largest.0 / 2));
        let lo = p_1.0 as f64 * 8.0 / t_quick;
        // Busy for (B_max − A₀)/(B_max − B_min) of its length; at least a third.
        let busy_share = ((hi - a) / (hi - lo)).max(1.0 / 3.0);
        let window =
            self.capacity.map_or_else(|| busy_window(sized, self.sigma), |c| fine_window(sized, c, self.sigma));
        let length = (window.as_secs_f64() / busy_share).min(MAX_FINE_LENGTH.as_secs_f64());
        // Eqs. 1 and 2: ΔP = (P_N − P_1)·T_quick/T_train, at most the paper's.
        let span = self.largest.0.saturating_sub(p_1.0) as f64;
        // Rounded towards the longer train, except at the longest allowed.
        let exact = span * t_quick / length;
        let rounded = if length < MAX_FINE_LENGTH.as_secs_f64() { exact.floor() } else { exact.ceil() };
        // Coarser than the paper's only where its 12 B would outlast the longest fine train (a
        // top below about 1.45 Mbit/s with 48 to 1,500 B packets), which the server would refuse
        // past its 2 s cap.
        let delta_p = Bytes((rounded as u64).clamp(1, FINE_DELTA_P.0.max(step_within_longest(span, t_quick))));
        QuickSpec {
            b_max: Some(b_max),
            p_n: Some(self.largest),
            p_1: Some(p_1),
            delta_p: Some(delta_p),
            max_size: self.largest,
            min_size: self.smallest,
            ..QuickSpec::default()
        }
        .solve()
    }

    fn spec(&self, b_max: Rate, delta_p: Bytes) -> QuickSpec {
        QuickSpec {
            b_max: Some(b_max),
            p_n: Some(self.largest),
            p_1: Some(self.smallest),
            delta_p: Some(delta_p),
            max_size: self.largest,
            min_size: self.smallest,
            ..QuickSpec::default()
        }
    }

    /// After the coarse train `last` read `outcome`: the next train, or `None` after the fine
    /// train (its outcome is the answer).
    pub fn next(&mut self, last: &QuickDesign, outcome: &Outcome) -> Result<Option<Next>, DesignError> {
        if self.fine {
            return Ok(None);
        }
        let res = last.resolution();
        let fine_at = |a: Rate| -> Result<Option<Next>, DesignError> { Ok(Some(Next::Fine(self.fine(a, res)?))) };
        let next = match outcome {
            Outcome::Estimate(a) => fine_at(*a),
            Outcome::BelowRange { .. } if self.coarse_done < MAX_COARSE => {
                self.coarse_done += 1;
                return Ok(Some(Next::Coarse(self.coarse(last.b_min())?)));
            }
            // Below the lowest coarse train: a fine train over the bottom of the ladder.
            Outcome::BelowRange { at_most } => Ok(Some(Next::Fine(
                self.spec((*at_most).max(MIN_FINE_TOP), self.fine_delta_p.unwrap_or(FINE_DELTA_P)).solve()?,
            ))),
            // Above a lower coarse train (the one above it read below range): around its top.
            Outcome::AboveRange { at_least } if self.coarse_done > 1 => fine_at(*at_least),
            // A lower coarse train that said nothing (badly paced): still below the rung above,
            // so around this train's top, not the ladder's (on the testbed at 10 Mbit/s a fine
            // train at the 500 Mbit/s top after such a rung lost 779 of 884 packets, and the
            // retry after it 773 of 939; issue 19 session 10).
            Outcome::Inconclusive { .. } if self.coarse_done > 1 => fine_at(last.b_max()),
            Outcome::AboveRange { .. } | Outcome::Inconclusive { .. } => fine_at(self.top),
        };
        self.fine = true;
        next
    }
}

impl AutoRange {
    /// After a coarse train `last` read `a0` with the standard deviation `spread` (its busy gaps
    /// with the capacity known, [`super::dispersion::busy_reading`], [`reading_spread`]): the
    /// fine train over `[min(A₀/2, A₀ − 2·spread), max(2·A₀, A₀ + 2·spread)]` (the spread at
    /// least `last`'s resolution, the top at most `top`), as long as [`fine_window`] asks for
    /// one spread more cross traffic than read ([`sized_for`]). The shaper train keeps
    /// [`AutoRange::fine`]'s shape.
    pub fn fine_from_reading(&mut self, last: &QuickDesign, a0: Rate, spread: Rate) -> Result<Next, DesignError> {
        self.fine = true;
        let sized = sized_for(a0, spread, self.capacity);
        Ok(Next::Fine(self.reading_train(last, a0, spread, sized)?))
    }

    /// [`AutoRange::fine_from_reading`] for a train read twice, with and without the delay
    /// box's stalls (`super::dispersion::busy_reading_without_stalls`): one fine train over
    /// both readings' ranges, as long as the lower reading asks (its window is the longer).
    /// `also`: the second reading, `None` when it is the same as the first or there is none.
    pub fn fine_from_readings(
        &mut self,
        last: &QuickDesign,
        (a0, spread): (Rate, Rate),
        also: Option<(Rate, Rate)>,
    ) -> Result<Next, DesignError> {
        let Some((a1, spread1)) = also.filter(|_| self.fine_delta_p.is_none()) else {
            return self.fine_from_reading(last, a0, spread);
        };
        let (first, second) = (self.reading_range(last, a0, spread), self.reading_range(last, a1, spread1));
        self.fine = true;
        let (lower, lower_spread) = if a0 <= a1 { (a0, spread) } else { (a1, spread1) };
        let sized = sized_for(lower, lower_spread, self.capacity);
        Ok(Next::Fine(self.fine_over_longer(lower, sized, first.0.min(second.0), first.1.max(second.1))?))
    }

    /// The rates `[lo, b_max]` the fine train around the reading `a0 ± spread` spans
    /// ([`AutoRange::fine_from_reading`]).
    fn reading_range(&self, last: &QuickDesign, a0: Rate, spread: Rate) -> (Rate, Rate) {
        let two = spread.max(last.resolution()).bps().saturating_mul(2);
        let b_max = Rate((a0.bps().saturating_mul(2)).max(a0.bps().saturating_add(two)).min(self.top.bps()).max(1));
        let lo = (a0.bps() / 2).min(a0.bps().saturating_sub(two)).min(b_max.bps() / 4);
        (Rate(lo), b_max)
    }

    /// The train [`AutoRange::fine_from_reading`] sends, busy for the window `sized` asks,
    /// without moving the planner on.
    fn reading_train(
        &self,
        last: &QuickDesign,
        a0: Rate,
        spread: Rate,
        sized: Rate,
    ) -> Result<QuickDesign, DesignError> {
        if self.fine_delta_p.is_some() {
            return self.fine(a0, last.resolution());
        }
        let (lo, b_max) = self.reading_range(last, a0, spread);
        self.fine_over_longer(a0, sized, lo, b_max)
    }

    /// [`AutoRange::fine_over_sized`], but never shorter than the train sized at `a0` itself:
    /// ΔP is rounded towards the longer train below [`MAX_FINE_LENGTH`] and towards the shorter
    /// one at it, so a window that crosses the longest can make the train shorter than a
    /// smaller window would (at 5 Mbit/s and 60 % load: 1.25 s against 1.43 s, median estimate
    /// time in the packet-level harness, issue 19 session 27).
    fn fine_over_longer(&self, a0: Rate, sized: Rate, lo: Rate, b_max: Rate) -> Result<QuickDesign, DesignError> {
        let at_reading = self.fine_over_sized(a0, a0, lo, b_max)?;
        match self.fine_over_sized(a0, sized, lo, b_max)? {
            longer if longer.train_length() >= at_reading.train_length() => Ok(longer),
            _ => Ok(at_reading),
        }
    }

    /// After the fine train `fine` read `outcome`: one more fine train when it read a bound or
    /// was inconclusive (the coarse train was off by more than the factor 2 of the fine range; on the testbed at
    /// 100 Mbit/s with 30 Mbit/s of Poisson cross traffic the 0.7 ms coarse train, which sees
    /// two or three cross packets, read from 48 to 133 Mbit/s; with 90 Mbit/s, 55–155 Mbit/s for
    /// A = 10), `None` otherwise. Above range: a train topped at four times the last top (at
    /// most `top`); below range: a wide train from the smallest packet up to the bound (the
    /// coarse reading can be ten times too high under heavy load, and a second train only twice
    /// as low read "below range" again in 5 of 9 estimates on the testbed, issue 19 session 5),
    /// as long as [`busy_window`] asks for half the bound; inconclusive: the same wide train
    /// below the fine train's `A₀` (the socket client asks only when the train lost more than
    /// the estimator allows, a buffer overflow, not when it was badly paced). The retry's outcome is the answer, whatever it is.
    pub fn retry(&self, fine: &QuickDesign, outcome: &Outcome) -> Result<Option<QuickDesign>, DesignError> {
        let res = fine.resolution();
        match outcome {
            Outcome::AboveRange { .. } if fine.b_max() < self.top => {
                Ok(Some(self.fine(Rate(fine.b_max().bps().saturating_mul(2)), res)?))
            }
            Outcome::BelowRange { at_most } if *at_most > MIN_FINE_TOP => {
                Ok(Some(self.fine_over(Rate(at_most.bps() / 2), Rate::ZERO, *at_most)?))
            }
            // Mostly a train far above the capacity that overflowed the buffer (more than 20 %
            // lost: at 10 Mbit/s with 6–9 Mbit/s of cross traffic the 10 ms coarse train read
            // 9–29 Mbit/s and the fine train around it lost 51–213 packets in 6 of 18
            // estimates, issue 19 session 5): the wide train below the fine train's `A₀`.
            Outcome::Inconclusive { .. } => {
                let a0 = Rate(fine.b_max().bps() / 2).max(MIN_FINE_TOP);
                Ok(Some(self.fine_over(Rate(a0.bps() / 2), Rate::ZERO, a0)?))
            }
            _ => Ok(None),
        }
    }
}

/// The smallest size step (bytes) that keeps a train spanning `span` bytes of packet size, one
/// packet every `t_quick` seconds, within [`MAX_FINE_LENGTH`] (Eqs. 1 and 2:
/// `T_train = (P_N − P_1)/ΔP · T_quick`).
fn step_within_longest(span: f64, t_quick: f64) -> u64 {
    (span * t_quick / MAX_FINE_LENGTH.as_secs_f64()).ceil() as u64
}

/// How long `design` probes above `a`: the time of its gaps whose rate exceeds `a` (Eq. 3), the
/// busy time a reading of an available bandwidth `a` averages over.
pub fn busy_time(design: &QuickDesign, a: Rate) -> Dur {
    Dur(design.t_quick.0 * (2..=design.n).filter(|&i| design.rate_of(i) > a).count() as u64)
}

/// The bits `design` leaves queued at a FIFO whose cross traffic leaves `a` (the fluid probe
/// rate model: each gap probing `r_i > a` adds `(r_i − a)·T_quick`).
pub fn queue_built(design: &QuickDesign, a: Rate) -> f64 {
    let t = design.t_quick.as_secs_f64();
    (2..=design.n).map(|i| ((design.rate_of(i).bps() as f64 - a.bps() as f64) * t).max(0.0)).sum()
}

/// The queue a train built by its last received packet (its highest one-way delay above its
/// lowest), at most 2 s: a train judged at its deadline leaves at least this much of its tail
/// queued. At 10 Mbit/s with 3 Mbit/s of cross traffic a fine train designed from a coarse
/// reading twice too high filled the 100-packet buffer, and the retry sent at once read
/// "below range, 0.22 Mbit/s" in 2 of 9 estimates (issue 19, session 5).
pub fn built_queue(records: &[ProbeRecord]) -> Dur {
    let delays = records.iter().filter_map(|r| r.recv_time.map(|t| t.0 as i128 - r.send_time.0 as i128));
    let (lo, hi) = delays.fold((i128::MAX, i128::MIN), |(lo, hi), d| (lo.min(d), hi.max(d)));
    Dur(if hi > lo { (hi - lo).min(2_000_000_000) as u64 } else { 0 })
}

/// How many times the queue a train built ([`built_queue`]) its backlog is given to drain after
/// the train lost packets ([`overflow_drain`]).
///
/// A full buffer drains at the available bandwidth `A = C − X`, not at `C`: at 90 % load ten
/// times the buffer's delay. The queue a train saw understates the buffer's delay when the
/// buffer already held cross traffic as the train began (its lowest delay included it). The
/// factor is ours, chosen in the packet-level harness at 90 % load (200 estimates, seed 0;
/// docs/results.md, issue 19 session 24), against the old client's 2 s wait for the lost END:
/// at 10 Mbit/s with a 100-packet buffer and RTT 20 ms (2 s: p90 of |error| 7.2 % of `C`, 6
/// estimates over the time budget, wall time 2.7 s) 10 gave 11.2 %, 15 over, 1.1 s; 25 gave
/// 8.1 %, 4, 1.2 s; 40 gave 7.5 %, 6, 1.5 s; 80 gave 7.7 %, 5, 2.2 s; on the PathQuick paper's
/// Fig. 8 path (100 Mbit/s, 100 packets, RTT 0.4 ms; 2 s: 7.8 %, 4, 2.1 s) 9.6 %, 10, 0.11 s;
/// 8.9 %, 4, 0.14 s; 8.5 %, 4, 0.17 s; 8.3 %, 1, 0.24 s. At RTT 100 ms, 40 put 14–21 estimates
/// of 200 over the budget against 6–12 (three seeds), 80 put 8–13. (That sweep judged every
/// train without its END as drained and counted the wait from the verdict; with the gap rule of
/// `super::train::TrainJudge::drained_at` and the wait counted from the train's inputs, 80
/// gave 7.6 %, 7, 2.3 s and 6.9 %, 3, 0.23 s.)
pub const OVERFLOW_DRAIN_FACTOR: u64 = 80;

/// The longest [`overflow_drain`]: the give-up deadline's 2 s, which the client used to wait for
/// an END that the full buffer had dropped.
pub const LONGEST_OVERFLOW_DRAIN: Dur = Dur::from_secs(2);

/// The wait before the next train after a train, `records`, that lost packets: the queue it
/// built ([`built_queue`]) times [`OVERFLOW_DRAIN_FACTOR`], at most [`LONGEST_OVERFLOW_DRAIN`].
///
/// Why (issue 19, session 24): the server's END, a small datagram behind the train, is lost in
/// the full buffer, and until the judge read such a train as drained without it
/// (`super::train::TrainJudge::drained_at`) the client waited 2 s for it, during which the
/// backlog drained. Without that wait and without this one, the next train met the full
/// buffer: in the packet-level harness at 10 Mbit/s with 9 Mbit/s of cross traffic and a
/// 100-packet buffer (RTT 20 ms) the estimates over the time budget went from 6 to 32 of 200
/// and the p90 of |error| from 7.2 to 11.4 % of `C`. The driver counts the wait from the
/// train's inputs: a judge that waited for the END has spent that much of it.
pub fn overflow_drain(records: &[ProbeRecord]) -> Dur {
    let q = built_queue(records);
    Dur(q.0.saturating_mul(OVERFLOW_DRAIN_FACTOR)).min(LONGEST_OVERFLOW_DRAIN)
}

/// Where a [`Ladder`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rung {
    Coarse,
    Fine,
    Retry,
}

/// The whole auto-ranging estimate as a sans-IO state machine: which train to send next, how
/// to judge it, and which train's verdict is the answer. `headroom probe` drives it over
/// sockets, the no-testbed harness (`abw::ladder_harness`) over a packet-level path.
///
/// 1. Coarse trains ([`AutoRange::first`], [`AutoRange::next`]), each judged **whole**: its
///    tail is the queue it built, and the next train must not meet it (at 10 Mbit/s the
///    500 Mbit/s coarse train leaves 19 ms of its own packets queued). A coarse train that
///    emptied a token bucket (its estimate names a shaper) is the answer: its rate is the
///    fitted token rate, and a fine train around it would carry too few bytes beyond the rate
///    to empty the bucket again. A coarse train that **overflowed the buffer** reads "below
///    range": inconclusive after losing more than the estimator's loss limit, or "above range"
///    with any packet lost (a train that never queued cannot overflow a buffer). Only a train
///    far above the available bandwidth overflows it (the cross traffic alone at 90 % load
///    fills 100 packets with probability about 0.9¹⁰⁰); in the no-testbed harness at 10 Mbit/s
///    with 9 Mbit/s of cross traffic, coarse trains that lost 7–22 of 31 packets were
///    "inconclusive", and the fine train at the 500 Mbit/s top that followed read
///    171–176 Mbit/s (issue 19, session 7). An estimate with losses stays an estimate. A coarse
///    train judged inconclusive without overflowing (badly paced: on a shared VM the first
///    train's 24 µs gaps are at the pacer's limit) still shows the capacity and a reading from
///    its receive gaps when it queued; the first train that shows neither is sent once more, and
///    a lower rung judged so leads to a fine train around its own top, not the ladder's (issue
///    19, session 10).
/// 2. The fine train, cut at the client's deadline. It is the answer unless it read a bound,
///    or was inconclusive after losing more than the estimator's loss limit (a buffer
///    overflow; "above range" with a packet lost counts as one, retried below, not above: on
///    the testbed at 10 Mbit/s with 6 Mbit/s of cross traffic a fine train of 3.6–14 Mbit/s
///    read "above range" with 42 packets lost, and the retry four times higher overflowed) or
///    after being **cut** with no knee in the part received (its tail was queued
///    more than the deadline's slack behind it, so the train went above the available
///    bandwidth, and the knee lies below its range: the harness's fine trains designed from
///    coarse readings 2–3× too high, at 10 Mbit/s and 60–90 % load), or inconclusive whole
///    without overflowing (badly paced: it says nothing about the range, so the same train is
///    sent again; a sender or a path that stalls spoils one train, not every one: on the
///    testbed at 100 Mbit/s idle with the delay box 271 µs late on average, 5 of 12 answers
///    were "inconclusive", issue 19 session 13). Then
/// 3. one retry ([`AutoRange::retry`], or the same train), asked for after the queue the fine
///    train built has drained ([`built_queue`]); its verdict is the answer, whatever it is.
///
/// **After a train that lost packets** (issue 19, session 24) the next train, and the next
/// estimate ([`Ladder::backlog_drain`]), wait for the full buffer's backlog to drain
/// ([`overflow_drain`]).
///
/// **The capacity** (issue 19, session 8): the first coarse train that queued (an estimate or
/// "below range", no shaper) gives the bottleneck capacity from its receive gaps
/// ([`super::dispersion::capacity`]; the 500 Mbit/s train lasts 1.6 ms and arrives far faster
/// than a 10 or 100 Mbit/s link drains). With it, a later coarse train's estimate is re-read
/// from its busy gaps and taken at most `C` (at 10 Mbit/s with 6 Mbit/s of cross traffic the
/// fit read 20–23 Mbit/s on the 34 ms coarse train, and the fine train around it overflowed),
/// and the answer's estimate is re-read from its busy gaps ([`Ladder::refined`],
/// [`super::dispersion::refine`]): the fit takes `A` and `1/C` from the same noisy delays and
/// has twice the error it would have with `C` known. A fit at the top of a train that lost
/// packets, with no busy gap above it before the loss, gives way to the train's confirmed
/// reading ([`super::dispersion::refine_answer`], session 15).
///
/// **The capacity burst** (issue 19, session 20): the first coarse train is followed by
/// [`CAPACITY_BURST`] packets of its largest size sent back to back ([`LadderStep::Train`]'s
/// `burst`; the server sends them as fast as its socket takes them, mostly 4–6 µs apart on
/// the testbed). They arrive at the bottleneck within microseconds of each other, so few cross
/// packets come between them at any load, and their receive gaps are the capacity's
/// ([`super::dispersion::burst_capacity`]). The first train's own largest packets are 24 µs
/// apart, one 1,500-byte packet's time at 500 Mbit/s: under 450 Mbit/s of cross traffic most
/// of its gaps hold a cross packet, and its vote read 137–308 Mbit/s for the 500 Mbit/s link in
/// the testbed's three-train estimates at RTT 100 ms (docs/results.md, issue 19 session 19).
/// The fine train was then designed around a reading clamped at that capacity, lay above `A`,
/// read "below range", and a third train (a round trip more) gave the answer. The driver waits
/// for the burst before it asks for the next train ([`super::train::TrainJudge::with_burst`]),
/// so that train does not meet the burst's queue, and gives its records to [`Ladder::on_burst`].
/// The first train's capacity is the burst's where the burst shows one, else the train's own
/// vote as before.
///
/// Cost: 15 KB more in the first train's round (10 of 1,500 bytes), which drains in 0.24 ms at
/// 500 Mbit/s, 1.2 ms at 100 and 12 ms at 10, and adds that to every estimate. The count is
/// ours: in the packet-level harness (`abw::ladder_harness`, 200 estimates per row, three
/// draws of the cross traffic, the burst's packets 2 µs apart) 16 packets put 10–17 of 200
/// estimates over the time budget on the Fig. 8 path (100 Mbit/s, a 100-packet buffer, RTT
/// 0.4 ms) at 90 % load against 1–2 without a burst (the burst and the cross traffic that
/// queues behind it while it drains at 90 % load fill the small buffer before the second
/// train); 10 put 2–6, and 3–5 with the packets 5 µs apart as on the testbed. A majority of the
/// burst's spans must agree, so 10 packets (9 spans) stand 4 spoiled ones (docs/results.md,
/// issue 19 session 20).
///
/// **With the capacity known** (issue 19, session 9; module doc): a coarse train that queued is
/// read from its busy gaps whatever the fit said, and the fine train spans two spreads of that
/// reading either way; the first train's reading only when it is sure enough, else one coarse
/// train around `C`. The fine train's length follows the cross traffic read against `C`.
#[derive(Clone, Debug)]
pub struct Ladder {
    plan: AutoRange,
    max_loss_fraction: f64,
    rung: Rung,
    sent: usize,
    /// The capacity from the first coarse train that queued ([`super::dispersion::capacity`]).
    capacity: Option<Rate>,
    /// Which vote read it.
    capacity_vote: Option<VoteTolerance>,
    /// A fine train's capacity replaced the coarse trains' (`Ladder::adopt_train_capacity`):
    /// the fine trains were designed around a reading taken with a wrong one.
    adopted: bool,
    /// The answer re-read from its busy gaps with that capacity ([`super::dispersion::refine`]).
    refined: Option<Outcome>,
    /// The round trip to the server, when known ([`Ladder::with_round_trip`]).
    round_trip: Option<Dur>,
    /// Which train is the first coarse train: 0, or 1 once it was sent again after an
    /// inconclusive verdict.
    first: usize,
    /// The capacity burst after the first coarse train, as received ([`Ladder::on_burst`]).
    burst: Vec<ProbeRecord>,
    /// The wait before the next train for the backlog a train that lost packets left
    /// ([`overflow_drain`]).
    drain_wait: Dur,
}

/// Packets of the capacity burst that follows the first coarse train (its largest packet,
/// back to back; [`Ladder`]'s doc, "The capacity burst").
pub const CAPACITY_BURST: u32 = 10;

/// A fine train that read "below range" without losing a packet is answered by its confirmed
/// busy reading ([`super::dispersion::confirmed_reading`]) when that reading is at least this
/// many times the bound, instead of being retried below (issue 19, session 21).
///
/// Why: under heavy load the queue-growth fit reads a delay that rises almost linearly over
/// the train as "below range" (it leaves the serialisation slope free, `super::growth`). On the
/// testbed's 100 Mbit/s link at RTT 100 ms with 90 Mbit/s of Poisson cross traffic, 9 of 30
/// fine trains (about 3–90 Mbit/s, 50–63 ms) read "below range, ≤ 2.8–3.5 Mbit/s" for
/// `A` = 10; the retry over 0.1–3.5 Mbit/s (410–510 ms and a round trip) read "above range"
/// at its top, and the answer was 2.8–3.5 Mbit/s. Those fine trains' busy readings were
/// 6.1–15.1 Mbit/s (−3.9 to +5.1 % of `C`). A train truly above `A` reads about `A`, below
/// its bound, from its busy gaps: a reading twice the bound contradicts the fit. The factor
/// is ours. In the packet-level harness (`super::ladder_harness`, 200 estimates per row, two
/// draws of the cross traffic) it changed only the 90 % rows beyond noise: 100 Mbit/s at
/// RTT 100 ms 4.4 / 7.2 → 3.2 / 6.9 and 4.0 / 7.2 → 2.7 / 6.8 % of `C` (median / p90), over the
/// budget 3 → 1 each; 500 Mbit/s at RTT 100 ms 3.0 / 8.4 → 2.2 / 6.1 and 3.2 / 8.8 → 2.7 / 6.2,
/// over the budget 16 → 9 and 14 → 11. 1.5 did about as well; confirming every lossless
/// "below range" (the factor 1) had made the 10 Mbit/s / 30 % p90 worse (session 15).
pub const BELOW_RANGE_OVERRULED: f64 = 2.0;

/// Timestamp noise of one receive gap for the capacity vote: the socket client's delay floor
/// (`EstimateOptions::for_method(PathQuick)`).
pub const DISPERSION_NOISE: Dur = Dur(20_000);

/// What a [`Ladder`] asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum LadderStep {
    /// Wait `wait`, then send `design`, followed by a capacity burst of `burst` packets of its
    /// last size (0: none; the records go to [`Ladder::on_burst`]); judge it whole (`whole`)
    /// or at the client's deadline.
    Train { design: QuickDesign, whole: bool, wait: Dur, burst: u32 },
    /// The answer is the verdict of this train (0-based, in the order sent).
    Answer(usize),
}

impl Ladder {
    /// A ladder with `plan`'s trains; `max_loss_fraction`: the estimator's loss limit.
    pub fn from_plan(plan: AutoRange, max_loss_fraction: f64) -> Ladder {
        Ladder {
            plan,
            max_loss_fraction,
            rung: Rung::Coarse,
            sent: 0,
            capacity: None,
            capacity_vote: None,
            adopted: false,
            refined: None,
            round_trip: None,
            first: 0,
            burst: Vec::new(),
            drain_wait: Dur::ZERO,
        }
    }

    /// The capacity the coarse trains' dispersion showed, if any, or the fine train's where it
    /// replaced that one (`Ladder::adopt_train_capacity`): the one the answer was read with.
    pub fn capacity(&self) -> Option<Rate> {
        self.capacity
    }

    /// After [`LadderStep::Answer`]: the answer train's outcome re-read with the capacity
    /// (`None`: no capacity was found, or the answer is not an estimate; its own outcome
    /// stands).
    pub fn refined(&self) -> Option<&Outcome> {
        self.refined.as_ref()
    }

    /// The answer is train `this`, judged `estimate` from `records`.
    fn answer(
        &mut self,
        this: usize,
        design: &QuickDesign,
        estimate: &TrainEstimate,
        records: &[ProbeRecord],
    ) -> LadderStep {
        self.adopt_train_capacity(records);
        self.refined = self
            .capacity
            .and_then(|c| super::dispersion::refine_answer(estimate, records, c, design.b_min(), DISPERSION_NOISE));
        // Designed around a reading taken with a wrong capacity, the train may lie wholly above
        // `A`: its confirmed reading below its range, where the fit's answer stood.
        if self.adopted && self.refined.as_ref().is_none_or(|o| *o == estimate.outcome) {
            if let Some(a) =
                self.capacity.and_then(|c| super::dispersion::confirmed_below(estimate, records, c, DISPERSION_NOISE))
            {
                self.refined = Some(Outcome::Estimate(a));
            }
        }
        LadderStep::Answer(this)
    }

    /// A fine train `records` (the answer, or a train retried) replaces the coarse trains'
    /// capacity where only the vote at the timestamp noise read that one and the train's own
    /// narrow votes agree on another (issue 19, session 18); the answer is re-read with it, and
    /// [`Ladder::capacity`] reports it (the socket client refines a monitored path's later trains
    /// with that one).
    ///
    /// Why: the vote at 20 µs cannot see a capacity above about 200 Mbit/s in the first coarse
    /// train and reads about two thirds of it ([`super::dispersion::NARROW_PAIRS`]); where that
    /// train's narrow votes did not agree, the answer train (hundreds of packets, its busy gaps
    /// spaced by the capacity) may show it. The session's 500 Mbit/s testbed dumps replayed
    /// (`headroom probe-replay`, 45 estimates per level): the p90 of |error| went from 9.04 to
    /// 6.18 % of `C` at 150 Mbit/s of cross traffic and from 8.92 to 6.88 % at 300, the other
    /// levels and the 10 and 100 Mbit/s paths' dumps unchanged. In the packet-level harness
    /// (500 Mbit/s, stamps ±1 µs, 200 per row) 30 % load 3.0 / 7.9 → 2.8 / 7.5 % and 60 %
    /// 3.2 / 8.7 → 2.9 / 6.4 %.
    fn adopt_train_capacity(&mut self, records: &[ProbeRecord]) {
        if self.capacity_vote != Some(VoteTolerance::Noise) {
            return;
        }
        if let Some(own @ (_, VoteTolerance::Narrow)) = super::dispersion::capacity_vote(records, DISPERSION_NOISE) {
            self.set_capacity(Some(own));
            self.adopted = true;
        }
    }

    /// The capacity the ladder reads with, and which vote read it; the planner sizes its fine
    /// trains with the same one.
    fn set_capacity(&mut self, vote: Option<(Rate, VoteTolerance)>) {
        (self.capacity, self.capacity_vote) = (vote.map(|v| v.0), vote.map(|v| v.1));
        self.plan.capacity = self.capacity;
    }

    fn train(&mut self, design: QuickDesign, whole: bool, wait: Dur) -> LadderStep {
        let wait = wait.max(std::mem::take(&mut self.drain_wait));
        self.sent += 1;
        // The first coarse train (and the same train sent again) carries the burst.
        let burst = if self.capacity.is_none() && self.sent - 1 == self.first { CAPACITY_BURST } else { 0 };
        LadderStep::Train { design, whole, wait, burst }
    }

    /// The capacity burst that followed the last train sent, as received (indices from the
    /// train's length on; the lost ones without a receive time): given before that train's
    /// [`Ladder::on_verdict`].
    pub fn on_burst(&mut self, burst: &[ProbeRecord]) {
        self.burst = burst.to_vec();
    }

    /// The capacity from the burst behind `records`' last packet
    /// ([`super::dispersion::burst_capacity`]), or from the train's own gaps
    /// ([`super::dispersion::capacity_vote`]) when the burst shows none.
    fn first_capacity(&mut self, records: &[ProbeRecord]) -> Option<(Rate, VoteTolerance)> {
        let burst = std::mem::take(&mut self.burst);
        let behind: Vec<ProbeRecord> = records.last().into_iter().copied().chain(burst).collect();
        super::dispersion::burst_capacity(&behind, DISPERSION_NOISE)
            .or_else(|| super::dispersion::capacity_vote(records, DISPERSION_NOISE))
    }

    /// A fine train read "above range", or "below range" (without losses: a reading at least
    /// [`BELOW_RANGE_OVERRULED`] times the bound), or cut by the judging deadline before it
    /// showed a knee, with the capacity known and its delays confirming its busy reading
    /// ([`super::dispersion::confirmed_reading`]): that reading. Not
    /// for a train that lost more than the estimator allows, or that was badly paced (its gaps
    /// did not probe their rates), or a shaper's.
    ///
    /// "Below range" with losses (issue 19, session 15): a buffer that filled flattens the
    /// delays, and the fit reads a queue that grew from the first gap. On the Fig. 8 path
    /// (100 Mbit/s, 100 packets, RTT 0.4 ms) at 90 % load such fine trains were retried from the
    /// smallest packet, and the retry read "above range" at its top (2–3 Mbit/s for A = 10) in
    /// 11 of 24 testbed estimates; 9 of those fine trains had a confirmed reading, 3.6–30 Mbit/s,
    /// 6 of them within 5 of 10 (`headroom probe-replay` on the bench's dumps). In the harness
    /// at 90 % load the median error fell at every path (Fig. 8's 5.4 → 3.4 % of `C`,
    /// 10 Mbit/s 4.1 → 3.3 %; p90 8.1 → 8.8 % and 9.6 → 10.6 % on the two small-buffer paths,
    /// 8.0 → 7.6 % at 10 Mbit/s; docs/results.md). Without losses "below range" gives way only
    /// to a confirmed reading at least [`BELOW_RANGE_OVERRULED`] times its bound (session 21):
    /// confirming any reading within the range made the 10 Mbit/s / 30 % p90 worse.
    fn confirmed(
        &self,
        design: &QuickDesign,
        estimate: &TrainEstimate,
        records: &[ProbeRecord],
        cut: bool,
    ) -> Option<Rate> {
        let c = self.capacity?;
        let candidate = match &estimate.outcome {
            Outcome::AboveRange { .. } | Outcome::BelowRange { .. } => true,
            Outcome::Inconclusive { reason } => {
                cut && matches!(reason, InconclusiveReason::Cut { why: CutShort::NoKnee, .. })
            }
            _ => false,
        };
        if !candidate || self.lost_too_many(estimate) || estimate.shaper.is_some() {
            return None;
        }
        let lowest = match estimate.outcome {
            Outcome::BelowRange { at_most } if estimate.lost == 0 => {
                Rate((at_most.bps() as f64 * BELOW_RANGE_OVERRULED).round() as u64)
            }
            _ => design.b_min(),
        };
        super::dispersion::confirmed_reading(records, c, design.b_min(), DISPERSION_NOISE)
            .filter(|a| *a >= lowest && *a <= design.b_max())
    }

    /// Was the judged train inconclusive for a reason other than overflowing the buffer (badly
    /// paced, mostly)? Its verdict says nothing; its receive gaps may still show the capacity
    /// and, with it, a reading.
    fn said_nothing(&self, e: &TrainEstimate) -> bool {
        matches!(e.outcome, Outcome::Inconclusive { .. }) && !self.overflowed(e)
    }

    /// Did the judged train overflow the buffer? "Above range" with any packet lost (a train
    /// that never queued cannot have lost to a full queue of its own), or more losses than the
    /// estimator's limit.
    fn overflowed(&self, e: &TrainEstimate) -> bool {
        match e.outcome {
            Outcome::AboveRange { .. } => e.lost > 0,
            _ => self.lost_too_many(e),
        }
    }

    /// More losses than the estimator allows.
    fn lost_too_many(&self, e: &TrainEstimate) -> bool {
        e.lost as f64 > self.max_loss_fraction * e.packets as f64
    }

    /// The coarse train `this` (0-based), `design`, judged `estimate` from `records`, read with
    /// the capacity known ([`super::dispersion::busy_reading`]): `A₀` and its spread
    /// ([`reading_spread`]). A later coarse train's reading gives the fine train two spreads
    /// either way ([`AutoRange::fine_from_reading`]); the first train's (1.6 ms of busy gaps)
    /// only when its spread is at most `A₀/4`, so that `[A₀/2, 2·A₀]` holds `A₀ ± 2` spreads;
    /// otherwise one coarse train around the capacity (topped at `2·C`, or the next rung down
    /// when that covers it). `None`: no capacity, a shaper, a train that never queued, or too
    /// few busy gaps: the fit's verdict leads, as before.
    ///
    /// A train that overflowed the buffer is read too, from its busy gaps before the first loss
    /// (where [`super::dispersion::busy_reading`] stops): it queued before it overflowed. Until
    /// session 15 an overflow read "below range" and the ladder walked down a rung; on the
    /// PathQuick paper's Fig. 8 path (100 Mbit/s, a 100-packet buffer, RTT 0.4 ms) at 90 % load the 4 ms
    /// second coarse train lost packets in most estimates, and the 85 ms rung below it put 72 of
    /// 300 harness estimates over the time budget (4 with the reading; docs/results.md).
    fn ranging_reading(
        &mut self,
        this: usize,
        design: &QuickDesign,
        estimate: &TrainEstimate,
        records: &[ProbeRecord],
    ) -> Result<Option<Next>, DesignError> {
        let queued = matches!(estimate.outcome, Outcome::Estimate(_) | Outcome::BelowRange { .. })
            || self.said_nothing(estimate)
            || self.overflowed(estimate);
        let Some(c) = self.capacity.filter(|_| queued && estimate.shaper.is_none()) else {
            return Ok(None);
        };
        // Busy gaps that carried more cross traffic than C: `A₀` = 0 with the spread of a full
        // link over that time (`super::dispersion::overrun`), whatever the fit said (requiring
        // its "below range" too, 20 instead of 1 estimate in 300 missed the time budget at
        // 100 Mbit/s / 90 % in the harness: on a 4 ms train the fit read 50–185 Mbit/s for
        // A = 10, and the fine train above it read below range).
        let overrun = || {
            super::dispersion::overrun(records, c, design.b_min())
                .map(|busy| (Rate::ZERO, reading_spread(Rate::ZERO, c, busy)))
        };
        let reading = super::dispersion::busy_reading(records, c, design.b_min())
            .map(|(a, busy)| (a.min(c), reading_spread(a.min(c), c, busy)))
            .or_else(|| if this != self.first { overrun() } else { None });
        // The same gaps without the delay box's stalls: the fine train holds both readings.
        let without_stalls = super::dispersion::busy_reading_without_stalls(records, c, design.b_min())
            .map(|(a, busy)| (a.min(c), reading_spread(a.min(c), c, busy)))
            .filter(|r| Some(*r) != reading);
        let sure = |(a0, spread): &(Rate, Rate)| spread.bps() <= a0.bps() / 4;
        match reading {
            Some(read) if this != self.first || sure(&read) => {
                Ok(Some(self.plan.fine_from_readings(design, read, without_stalls)?))
            }
            _ if this == self.first && c.bps().saturating_mul(2) < design.b_max().bps() => {
                let top = if c.bps() * 2 <= design.b_min().bps() { design.b_min() } else { Rate(c.bps() * 2) };
                let coarse = self.plan.coarse(top)?;
                // The first train's overrun only for the wide train, whose queue bound refuses
                // it on short round trips (issue 19 session 14: at RTT 100 ms and 90 % load an
                // overrun of the first train's 1.6 ms paid the coarse train's round trip).
                let first = reading.or_else(overrun);
                if let Some(wide) = first.and_then(|(a0, spread)| self.wide_instead(design, a0, spread, c, &coarse)) {
                    self.plan.fine = true;
                    return Ok(Some(Next::Fine(wide)));
                }
                self.plan.coarse_done += 1;
                Ok(Some(Next::Coarse(coarse)))
            }
            // The capacity at or above half the first train's top: a coarse train topped at
            // `2·C` would be the first train again, so the fine train spans the first reading's
            // two spreads (or, when its busy gaps overran, the spreads of a full link).
            _ if this == self.first => match reading.or_else(overrun) {
                Some(read) => Ok(Some(self.plan.fine_from_readings(design, read, without_stalls)?)),
                None => Ok(None),
            },
            _ => Ok(None),
        }
    }

    /// The first train's reading `a0 ± spread` was not sure, and the ladder would send
    /// `coarse` around the capacity `c` next, then a fine train (two more round trips): the
    /// fine train over the first reading's two spreads at once ([`AutoRange::fine_from_reading`]
    /// applied to the first train), when the round trip is known and that train
    /// - ends sooner than `coarse` + a round trip + the fine train after it (that fine train
    ///   estimated from `coarse`'s expected reading: [`reading_spread`] over the time its rates
    ///   lie above `a0`), and
    /// - builds a queue of at most a quarter of the round trip at `c` if `A = a0`
    ///   ([`queue_built`]).
    ///
    /// The queue bound is ours: the buffer is unknown, and a buffer of the path's
    /// bandwidth-delay product (the usual sizing) then holds four times the queue expected; it
    /// also bounds the delay the probe adds to other traffic by a fraction of its round trip.
    /// At RTT 10 ms and 100 Mbit/s the second coarse train costs little and the bound mostly
    /// refuses the wide train (the packet-level harness: docs/results.md, issue 19 session 10);
    /// at RTT 100 ms it saves a round trip at 30–90 % load.
    fn wide_instead(
        &self,
        first: &QuickDesign,
        a0: Rate,
        spread: Rate,
        c: Rate,
        coarse: &QuickDesign,
    ) -> Option<QuickDesign> {
        let rtt = self.round_trip?;
        // Both sized for the reading itself: the first train's spread (15 Mbit/s or more) would
        // size nearly every wide train for three quarters of C ([`sized_for`]).
        let wide = self.plan.reading_train(first, a0, spread, a0).ok()?;
        let then = self.plan.reading_train(coarse, a0, reading_spread(a0, c, busy_time(coarse, a0)), a0).ok()?;
        let ladder = coarse.train_length() + rtt + then.train_length();
        let queue = queue_built(&wide, a0) / c.bps().max(1) as f64;
        (wide.train_length() < ladder && queue <= rtt.as_secs_f64() / 4.0).then_some(wide)
    }

    /// After [`LadderStep::Answer`]: how long the path needs before another train when the last
    /// train lost packets ([`overflow_drain`]; zero otherwise). A driver that probes the path
    /// again (the next estimate) waits that long first.
    pub fn backlog_drain(&self) -> Dur {
        self.drain_wait
    }

    /// The round trip to the server (the handshake's), which every further train costs: with it
    /// the ladder may answer with one train fewer (`Ladder::wide_instead`).
    pub fn with_round_trip(mut self, rtt: Dur) -> Ladder {
        self.round_trip = Some(rtt);
        self
    }

    /// The first train.
    pub fn first(&mut self) -> Result<LadderStep, DesignError> {
        let next = self.plan.first()?;
        Ok(self.step(next))
    }

    fn step(&mut self, next: Next) -> LadderStep {
        match next {
            Next::Coarse(d) => self.train(d, true, Dur::ZERO),
            Next::Fine(d) => {
                self.rung = Rung::Fine;
                self.train(d, false, Dur::ZERO)
            }
        }
    }

    /// The last train sent, `design`, was judged: `estimate` from `records`.
    pub fn on_verdict(
        &mut self,
        design: &QuickDesign,
        estimate: &TrainEstimate,
        records: &[ProbeRecord],
    ) -> Result<LadderStep, DesignError> {
        let this = self.sent - 1;
        if estimate.lost > 0 {
            self.drain_wait = overflow_drain(records);
        }
        match self.rung {
            Rung::Coarse => {
                if estimate.shaper.is_some() && matches!(estimate.outcome, Outcome::Estimate(_)) {
                    return Ok(LadderStep::Answer(this));
                }
                // A coarse train that queued (an estimate, or below range) shows the capacity; so
                // may one judged inconclusive without overflowing (badly paced: its receive gaps
                // behind a busy queue do not depend on the pacing).
                if self.capacity.is_none()
                    && estimate.shaper.is_none()
                    && (matches!(estimate.outcome, Outcome::Estimate(_) | Outcome::BelowRange { .. })
                        || self.said_nothing(estimate))
                {
                    let vote = self.first_capacity(records);
                    self.set_capacity(vote);
                }
                // With the capacity known, a coarse train that queued is read from its busy gaps
                // whatever the fit said ("The ranging reading" in the module doc).
                if let Some(next) = self.ranging_reading(this, design, estimate, records)? {
                    return Ok(self.step(next));
                }
                // The first train judged inconclusive without overflowing (badly paced) and no
                // reading from its gaps: it says nothing, and a fine train at the top on its word
                // overflows any slow path. It is sent once more (1.6 ms and a round trip).
                if this == 0 && self.said_nothing(estimate) {
                    self.first = 1;
                    return Ok(self.train(*design, true, Dur::ZERO));
                }
                let outcome = match estimate.outcome {
                    Outcome::Inconclusive { .. } | Outcome::AboveRange { .. } if self.overflowed(estimate) => {
                        Outcome::BelowRange { at_most: design.b_min() }
                    }
                    // With the capacity known, the coarse reading from its busy gaps, at most C.
                    // (At 10 Mbit/s with 6 Mbit/s of cross traffic the 34 ms second coarse train
                    // read 20–23 Mbit/s by the fit, and the fine trains around it overflowed.)
                    Outcome::Estimate(_) => match self.capacity {
                        Some(c) => match super::dispersion::refine(&estimate.outcome, records, c, estimate.probed) {
                            Outcome::Estimate(a) => Outcome::Estimate(a.min(c)),
                            o => o,
                        },
                        None => estimate.outcome.clone(),
                    },
                    ref o => o.clone(),
                };
                let next = self.plan.next(design, &outcome)?.unwrap_or(Next::Fine(*design));
                Ok(self.step(next))
            }
            Rung::Fine => {
                self.adopt_train_capacity(records);
                let cut = records.len() < design.n as usize;
                // No estimate, but the train queued as its busy reading says: that reading is
                // the answer, not a retry (`super::dispersion::confirmed_reading`).
                if let Some(a) = self.confirmed(design, estimate, records, cut) {
                    self.refined = Some(Outcome::Estimate(a));
                    return Ok(LadderStep::Answer(this));
                }
                let retry = match estimate.outcome {
                    // Badly paced, whole: the same train once more (step 2).
                    Outcome::Inconclusive { .. } if !self.overflowed(estimate) && !cut => Some(*design),
                    // A train that never queued cannot overflow a buffer: retried below.
                    Outcome::AboveRange { .. } if self.overflowed(estimate) => self
                        .plan
                        .retry(design, &Outcome::Inconclusive { reason: InconclusiveReason::AboveRangeWithLosses })?,
                    ref o => self.plan.retry(design, o)?,
                };
                Ok(match retry {
                    Some(again) => {
                        self.rung = Rung::Retry;
                        self.train(again, false, built_queue(records))
                    }
                    None => self.answer(this, design, estimate, records),
                })
            }
            Rung::Retry => Ok(self.answer(this, design, estimate, records)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abw::train::PacingFault;

    fn planner() -> AutoRange {
        AutoRange::new(DEFAULT_TOP, Bytes(60), Bytes(1500))
    }

    #[test]
    fn the_coarse_trains_are_busy_for_the_coarse_window_of_their_rung() {
        let mut p = planner();
        let Next::Coarse(d) = p.first().unwrap() else { panic!("first train is coarse") };
        assert_eq!(d.t_quick.0, 24_000, "1500 B at 500 Mbit/s");
        assert!(d.b_max() <= DEFAULT_TOP && d.b_max().as_mbps() > 490.0, "{}", d.b_max());
        let mut top = d.b_max();
        let mut c = d;
        for rung in 0..MAX_COARSE {
            // Long enough for the window at the rung's sixteenth (the session-6 trains: 0.7 ms
            // at 500 Mbit/s, 10 ms at 36 Mbit/s, against 1.5 and 21 ms asked for here).
            let want = busy_window(Rate(top.bps() / 16), COARSE_SIGMA).min(MAX_COARSE_LENGTH);
            let len = c.train_length();
            assert!(len.as_secs_f64() >= 0.97 * want.as_secs_f64(), "rung {rung}: {len:?} < {want:?} ({c:?})");
            assert!(c.n >= COARSE_PACKETS && (len <= MAX_COARSE_LENGTH || c.n == COARSE_PACKETS), "rung {rung}: {c:?}");
            assert!(c.b_min().bps() * 10 < top.bps(), "rung {rung} covers less than a factor 10: {c:?}");
            top = c.b_min();
            c = p.coarse(top).unwrap();
        }
        // The first train stays short: under 2 ms at 500 Mbit/s.
        let Next::Coarse(d) = planner().first().unwrap() else { panic!() };
        assert!(d.train_length() < Dur::from_millis(2), "{:?}", d.train_length());
        // The session-6 trains on request.
        let old = planner().with_coarse_sigma(None).coarse(DEFAULT_TOP).unwrap();
        assert_eq!(old.n, COARSE_PACKETS);
    }

    /// A train the sender's report voided: 10 µs of mean error on 24 µs gaps.
    fn badly_paced() -> Outcome {
        let fault = PacingFault::MeanError { mean: Dur(10_000), spacing: Dur(24_000) };
        Outcome::Inconclusive { reason: InconclusiveReason::BadlyPaced(fault) }
    }

    fn estimate_of(outcome: Outcome, packets: u32, lost: u32) -> TrainEstimate {
        TrainEstimate {
            outcome,
            ..TrainEstimate::inconclusive(InconclusiveReason::SameSendInstant, (packets, packets - lost, lost, 0, 0))
        }
    }

    /// Received as sent, 1 ms later: no capacity shows.
    fn as_sent(d: &QuickDesign) -> Vec<ProbeRecord> {
        fluid_records(d, 1e9, 1e9)
    }

    fn records_of(d: &QuickDesign, judged: usize) -> Vec<ProbeRecord> {
        d.schedule()
            .iter()
            .take(judged)
            .enumerate()
            .map(|(i, p)| ProbeRecord {
                index: i as u32,
                send_time: crate::units::Time(p.offset.0),
                recv_time: Some(crate::units::Time(p.offset.0 + 1_000_000 + 100_000 * i as u64)),
                size: p.size,
            })
            .collect()
    }

    #[test]
    fn a_coarse_train_that_overflowed_or_lost_packets_above_range_reads_below_range() {
        let down = |outcome: &Outcome, lost: fn(u32) -> u32| -> bool {
            let mut l = Ladder::from_plan(planner(), 0.2);
            let LadderStep::Train { design: c1, whole: true, .. } = l.first().unwrap() else { panic!() };
            let e = estimate_of(outcome.clone(), c1.n, lost(c1.n));
            match l.on_verdict(&c1, &e, &as_sent(&c1)).unwrap() {
                LadderStep::Train { design, whole, .. } => {
                    assert_eq!(whole, design.b_max().bps() <= c1.b_min().bps() + 1000, "{outcome:?}: {design:?}");
                    whole
                }
                s => panic!("{outcome:?}: {s:?}"),
            }
        };
        let above = Outcome::AboveRange { at_least: Rate::from_mbps(490) };
        let lost = Outcome::Inconclusive { reason: InconclusiveReason::Lost { lost: 1, packets: 3 } };
        let estimate = Outcome::Estimate(Rate::from_mbps(400));
        // "Above range" is no range when packets were lost: the buffer overflowed.
        assert!(down(&above, |_| 1), "above range with a loss");
        assert!(!down(&above, |_| 0), "above range, nothing lost: the fine train at the top");
        // Inconclusive after losing more than the loss limit: an overflow, below range.
        assert!(down(&lost, |n| n / 3), "overflowed");
        // Inconclusive otherwise (badly paced): sent once more, then the fine train at the top
        // (an_inconclusive_first_train_is_sent_again_and_an_inconclusive_lower_rung_leads_around_its_top).
        // An estimate with a loss stays an estimate (the fine train around it).
        assert!(!down(&estimate, |_| 1), "estimate");
    }

    #[test]
    fn a_train_that_lost_packets_leaves_the_next_one_and_the_next_estimate_waiting_for_its_backlog() {
        // The first coarse train lost every third packet, its delays up by 100 µs a packet: the
        // next train waits OVERFLOW_DRAIN_FACTOR times the queue it built.
        let lossy = |d: &QuickDesign, step: u64| -> Vec<ProbeRecord> {
            let mut r = records_of(d, d.n as usize);
            for (i, x) in r.iter_mut().enumerate() {
                x.recv_time = x.recv_time.map(|t| crate::units::Time(t.0 + (step - 100_000) * i as u64));
                if i % 3 == 2 {
                    x.recv_time = None;
                }
            }
            r
        };
        let below = Outcome::BelowRange { at_most: Rate::from_mbps(23) };
        let next_wait = |step: u64, lost: bool| {
            let mut l = Ladder::from_plan(planner(), 0.2);
            let LadderStep::Train { design: c1, .. } = l.first().unwrap() else { panic!() };
            let records = if lost { lossy(&c1, step) } else { records_of(&c1, c1.n as usize) };
            let e = estimate_of(below.clone(), c1.n, if lost { c1.n / 3 } else { 0 });
            let LadderStep::Train { wait, .. } = l.on_verdict(&c1, &e, &records).unwrap() else { panic!() };
            (wait, built_queue(&records))
        };
        let (wait, queue) = next_wait(100_000, true);
        assert_eq!(queue, Dur(100_000 * 64), "the last packet received is 64");
        assert_eq!(wait, Dur(queue.0 * OVERFLOW_DRAIN_FACTOR));
        // At most LONGEST_OVERFLOW_DRAIN; and nothing lost, no wait.
        assert_eq!(next_wait(1_000_000, true).0, LONGEST_OVERFLOW_DRAIN);
        assert_eq!(next_wait(100_000, false).0, Dur::ZERO);
        // The answer train lost packets: the next estimate waits (`Ladder::backlog_drain`).
        let mut l = Ladder::from_plan(planner(), 0.2);
        let LadderStep::Train { design: c1, .. } = l.first().unwrap() else { panic!() };
        let e = estimate_of(Outcome::AboveRange { at_least: Rate::from_mbps(490) }, c1.n, 0);
        let LadderStep::Train { design: fine, whole: false, .. } = l.on_verdict(&c1, &e, &as_sent(&c1)).unwrap() else {
            panic!()
        };
        let records = lossy(&fine, 20_000);
        let e = estimate_of(Outcome::Estimate(Rate::from_mbps(300)), fine.n, fine.n / 3);
        assert!(matches!(l.on_verdict(&fine, &e, &records).unwrap(), LadderStep::Answer(1)));
        assert_eq!(l.backlog_drain(), overflow_drain(&records));
        assert!(l.backlog_drain() > Dur::ZERO);
    }

    #[test]
    fn a_fine_train_cut_with_no_knee_is_retried_below_and_a_whole_one_is_the_answer() {
        let mut l = Ladder::from_plan(planner(), 0.2);
        let LadderStep::Train { design: c1, .. } = l.first().unwrap() else { panic!() };
        let e = estimate_of(Outcome::Estimate(Rate::from_mbps(100)), c1.n, 0);
        let LadderStep::Train { design: fine, whole: false, .. } = l.on_verdict(&c1, &e, &as_sent(&c1)).unwrap() else {
            panic!()
        };
        // Cut: the train went above A, the knee lies below its range.
        let mut cut = l.clone();
        let judged = fine.n as usize * 2 / 3;
        let why = CutShort::NoKnee;
        let cut_no_knee =
            Outcome::Inconclusive { reason: InconclusiveReason::Cut { at: judged as u32, packets: fine.n, why } };
        let e = estimate_of(cut_no_knee.clone(), judged as u32, 0);
        let step = cut.on_verdict(&fine, &e, &records_of(&fine, judged)).unwrap();
        let LadderStep::Train { design: retry, whole: false, wait, .. } = step else { panic!("{step:?}") };
        assert!(retry.b_max() < fine.b_max() && retry.b_min() < fine.b_min(), "{retry:?} after {fine:?}");
        assert!(wait > Dur::ZERO, "the retry waits for the queue the cut train built");
        assert_eq!(cut.on_verdict(&retry, &e, &records_of(&retry, 10)).unwrap(), LadderStep::Answer(2));
        // Above range with a loss: an overflow, retried below; without one, above.
        for (lost, below) in [(1, true), (0, false)] {
            let mut l2 = l.clone();
            let e = estimate_of(Outcome::AboveRange { at_least: fine.b_max() }, fine.n, lost);
            let step = l2.on_verdict(&fine, &e, &records_of(&fine, fine.n as usize)).unwrap();
            let LadderStep::Train { design: retry, .. } = step else { panic!("{step:?}") };
            assert_eq!(retry.b_max() < fine.b_max(), below, "{lost} lost: {retry:?} after {fine:?}");
        }
        // Whole and inconclusive without losses (badly paced): the same train once more, after
        // the queue it built; that one is the answer, whatever it says.
        let e = estimate_of(badly_paced(), fine.n, 0);
        let step = l.on_verdict(&fine, &e, &records_of(&fine, fine.n as usize)).unwrap();
        let LadderStep::Train { design: again, whole: false, .. } = step else { panic!("{step:?}") };
        assert_eq!(again, fine);
        assert_eq!(l.on_verdict(&fine, &e, &records_of(&fine, fine.n as usize)).unwrap(), LadderStep::Answer(2));
    }

    #[test]
    fn a_coarse_train_that_queued_gives_the_capacity_which_bounds_the_next_reading_and_refines_the_answer() {
        // A first coarse train at 10 Mbit/s: every gap busy, dispersed at C.
        let mut l = Ladder::from_plan(planner(), 0.2);
        let LadderStep::Train { design: c1, .. } = l.first().unwrap() else { panic!() };
        let mut free = 0u64;
        let recs: Vec<ProbeRecord> = c1
            .schedule()
            .iter()
            .enumerate()
            .map(|(i, p)| {
                free = free.max(p.offset.0) + p.size.0 * 800; // 10 Mbit/s: 800 ns per byte
                ProbeRecord {
                    index: i as u32,
                    send_time: crate::units::Time(p.offset.0),
                    recv_time: Some(crate::units::Time(free)),
                    size: p.size,
                }
            })
            .collect();
        let below = estimate_of(Outcome::BelowRange { at_most: c1.b_min() }, c1.n, 0);
        let LadderStep::Train { design: c2, .. } = l.on_verdict(&c1, &below, &recs).unwrap() else { panic!() };
        let c = l.capacity().expect("the capacity from the queued coarse train");
        assert!((c.as_mbps() - 10.0).abs() < 0.1, "{c}");
        // The second coarse train's fit read 22 Mbit/s (its records say nothing more here): the
        // fine train around it is designed for at most C, not 2 × 22.
        let e = estimate_of(Outcome::Estimate(Rate::from_mbps(22)), c2.n, 0);
        let LadderStep::Train { design: fine, .. } = l.on_verdict(&c2, &e, &records_of(&c2, 0)).unwrap() else {
            panic!()
        };
        assert!(fine.b_max().as_mbps() <= 20.2, "{fine:?}");
        // The answer is refined from its busy gaps: a train judged 5 Mbit/s whose gaps above
        // 5.5 Mbit/s grew by exactly (r − 7 Mbit/s)/C reads 7.
        let fr = fluid_records(&fine, c.bps() as f64, 7e6);
        let mut e = estimate_of(Outcome::Estimate(Rate::from_mbps(5)), fine.n, 0);
        e.probed = (fine.b_min(), fine.b_max());
        assert_eq!(l.on_verdict(&fine, &e, &fr).unwrap(), LadderStep::Answer(2));
        let Some(Outcome::Estimate(a)) = l.refined() else { panic!("{:?}", l.refined()) };
        assert!((a.as_mbps() - 7.0).abs() < 0.2, "{a}");
    }

    #[test]
    fn an_estimate_leads_to_a_fine_train_twice_as_high_then_the_answer() {
        let mut p = planner();
        let Next::Coarse(c) = p.first().unwrap() else { panic!() };
        let next = p.next(&c, &Outcome::Estimate(Rate::from_mbps(100))).unwrap();
        let Some(Next::Fine(f)) = next else { panic!("{next:?}") };
        assert!((f.b_max().as_mbps() - 200.0).abs() < 2.0, "{}", f.b_max());
        assert!(f.delta_p <= FINE_DELTA_P, "{:?}", f.delta_p);
        assert!(f.resolution().as_mbps() < 0.02 * 100.0, "resolution {}", f.resolution());
        assert!((f.b_min().as_mbps() - 50.0).abs() < 2.0, "from A₀/2: {}", f.b_min());
        assert_eq!(p.next(&f, &Outcome::Estimate(Rate::from_mbps(97))).unwrap(), None);
    }

    #[test]
    fn the_busy_window_averages_poisson_cross_traffic_to_the_target_sigma() {
        // The worst case of the rule: C = 2·A, X = A, Poisson packets of CROSS_PACKET bytes.
        let a = Rate::from_mbps(5);
        let (c, x) = (10e6, 5e6);
        let w = busy_window(a, TARGET_SIGMA).as_secs_f64();
        assert!((w - 0.24).abs() < 1e-6, "8·1500 B/(4·5 Mbit/s·0.05²) = 0.24 s, got {w}");
        let mut rng = crate::rng::Rng::new(7);
        let bits = CROSS_PACKET.0 as f64 * 8.0;
        let rates: Vec<f64> = (0..400)
            .map(|_| {
                let (mut t, mut n) = (rng.exponential(bits / x), 0.0);
                while t < w {
                    n += 1.0;
                    t += rng.exponential(bits / x);
                }
                n * bits / w
            })
            .collect();
        let mean = rates.iter().sum::<f64>() / rates.len() as f64;
        let sd = (rates.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (rates.len() - 1) as f64).sqrt();
        assert!((sd / c / TARGET_SIGMA - 1.0).abs() < 0.15, "sd {:.3} of C against σ {TARGET_SIGMA}", sd / c);
    }

    #[test]
    fn the_fine_train_is_busy_for_the_window_and_never_coarser_than_the_papers() {
        let p = planner();
        for mbps in [1u64, 4, 7, 40, 70, 200, 400] {
            let a0 = Rate::from_mbps(mbps);
            let f = p.fine(a0, Rate::from_mbps(1)).unwrap();
            let (lo, hi, a) = (f.b_min().as_mbps(), f.b_max().as_mbps(), a0.as_mbps());
            let busy = f.train_length().as_secs_f64() * (hi - a) / (hi - lo);
            let len = f.train_length().as_secs_f64();
            assert!(
                busy >= 0.97 * busy_window(a0, TARGET_SIGMA).as_secs_f64()
                    || len >= MAX_FINE_LENGTH.as_secs_f64() * 0.97,
                "A₀ {mbps}: busy {busy:.4} s against {:?} ({f:?})",
                busy_window(a0, TARGET_SIGMA)
            );
            assert!(len <= MAX_FINE_LENGTH.as_secs_f64() * 1.01, "A₀ {mbps}: {len} s");
            assert!(f.delta_p <= FINE_DELTA_P && lo < a && hi >= (2.0 * a).min(500.0) * 0.99, "A₀ {mbps}: {f:?}");
            let paper = p.spec(f.b_max(), FINE_DELTA_P).solve().unwrap();
            assert!(f.resolution() <= paper.resolution(), "A₀ {mbps}: {} vs {}", f.resolution(), paper.resolution());
        }
        // Half the σ, four times the busy time (until the cap).
        let a0 = Rate::from_mbps(70);
        let (f5, f25) =
            (p.fine(a0, Rate::ZERO).unwrap(), p.clone().with_target_sigma(0.025).fine(a0, Rate::ZERO).unwrap());
        let ratio = f25.train_length().as_secs_f64() / f5.train_length().as_secs_f64();
        assert!((3.0..=5.5).contains(&ratio), "{ratio}: {f5:?} {f25:?}");
    }

    #[test]
    fn the_shaper_train_keeps_its_step_unless_it_would_outlast_the_longest_fine_train() {
        let p = planner().with_fine_delta_p(Bytes(3));
        // 100 Mbit/s: the step asked for (485 packets, topped at 200 Mbit/s: 29 ms).
        let f = p.fine(Rate::from_mbps(100), Rate::ZERO).unwrap();
        assert_eq!(f.delta_p, Bytes(3), "{f:?}");
        // 4 Mbit/s: 0.7 s, it fits.
        assert_eq!(p.fine(Rate::from_mbps(4), Rate::ZERO).unwrap().delta_p, Bytes(3));
        // 1 Mbit/s: 3 B would send for 2.9 s; the step grows until the train fits in the longest
        // fine train.
        for mbps in [1u64, 2] {
            let f = p.fine(Rate::from_mbps(mbps), Rate::ZERO).unwrap();
            let len = f.train_length();
            assert!(
                len <= MAX_FINE_LENGTH && f.delta_p > Bytes(3) && f.delta_p <= FINE_DELTA_P,
                "{mbps}: {len:?} {f:?}"
            );
            // ... and no coarser than it needs: one byte less would not fit.
            let finer = p.spec(f.b_max(), Bytes(f.delta_p.0 - 1)).solve().unwrap();
            assert!(finer.train_length() > MAX_FINE_LENGTH, "{mbps}: {finer:?}");
        }
    }

    #[test]
    fn below_a_megabit_the_fine_train_coarsens_its_step_to_stay_within_the_longest() {
        // The wide train below a bound of 0.77 Mbit/s: with the paper's 12 B it lasted 1.96 s
        // on the testbed (10 Mbit/s, 9 Mbit/s of cross traffic), a few more would pass the
        // server's 2 s cap.
        let p = planner();
        for kbps in [300u64, 500, 770] {
            let at_most = Rate(kbps * 1000);
            let f = p.fine_over(Rate(at_most.bps() / 2), Rate::ZERO, at_most).unwrap();
            let len = f.train_length();
            assert!(len <= MAX_FINE_LENGTH && f.delta_p > FINE_DELTA_P, "{kbps} kbit/s: {len:?} {f:?}");
            let finer = p.spec(f.b_max(), Bytes(f.delta_p.0 - 1)).solve().unwrap();
            assert!(finer.train_length() > MAX_FINE_LENGTH, "{kbps} kbit/s: {finer:?}");
        }
    }

    #[test]
    fn a_low_coarse_estimate_keeps_two_coarse_resolutions_of_headroom() {
        let mut p = planner();
        let Next::Coarse(c) = p.first().unwrap() else { panic!() };
        let a0 = c.b_min();
        let Some(Next::Fine(f)) = p.next(&c, &Outcome::Estimate(a0)).unwrap() else { panic!() };
        assert!(f.b_max().bps() + 1000 >= a0.bps() + 2 * c.resolution().bps(), "{} vs {}", f.b_max(), a0);
    }

    #[test]
    fn below_range_walks_down_the_ladder_to_one_megabit() {
        let mut p = planner();
        let Next::Coarse(c1) = p.first().unwrap() else { panic!() };
        let below = |d: &QuickDesign| Outcome::BelowRange { at_most: d.b_min() };
        let Some(Next::Coarse(c2)) = p.next(&c1, &below(&c1)).unwrap() else { panic!() };
        let (hi, lo) = (c2.b_max().as_mbps(), c1.b_min().as_mbps());
        assert!((hi / lo - 1.0).abs() < 0.02, "the next coarse train tops where the last began: {hi} vs {lo}");
        let Some(Next::Coarse(c3)) = p.next(&c2, &below(&c2)).unwrap() else { panic!() };
        assert!(c3.b_min().as_mbps() < 1.0, "the ladder reaches below 1 Mbit/s: {}", c3.b_min());
        let Some(Next::Fine(f)) = p.next(&c3, &below(&c3)).unwrap() else { panic!("no fourth coarse train") };
        assert_eq!(f.b_max().as_mbps().round(), 1.0, "the fine train tops at 1 Mbit/s: {}", f.b_max());
        assert!(f.train_length() < crate::units::Dur::from_secs(2), "{:?}", f.train_length());
    }

    #[test]
    fn above_a_lower_coarse_train_the_fine_train_centres_on_its_top() {
        let mut p = planner();
        let Next::Coarse(c1) = p.first().unwrap() else { panic!() };
        let Some(Next::Coarse(c2)) = p.next(&c1, &Outcome::BelowRange { at_most: c1.b_min() }).unwrap() else {
            panic!()
        };
        let Some(Next::Fine(f)) = p.next(&c2, &Outcome::AboveRange { at_least: c2.b_max() }).unwrap() else { panic!() };
        // A is between the second train's top and the first's bottom (36 Mbit/s): the fine train
        // covers it, not the 500 Mbit/s top
        assert!(f.b_max() >= c1.b_min() && f.b_max().as_mbps() < 100.0, "{}", f.b_max());
    }

    #[test]
    fn above_range_and_inconclusive_probe_finely_up_to_the_top() {
        for o in [Outcome::AboveRange { at_least: DEFAULT_TOP }, badly_paced()] {
            let mut p = planner();
            let Next::Coarse(c) = p.first().unwrap() else { panic!() };
            let Some(Next::Fine(f)) = p.next(&c, &o).unwrap() else { panic!() };
            assert!(f.b_max() <= DEFAULT_TOP && f.b_max().as_mbps() > 490.0, "{}", f.b_max());
        }
    }

    #[test]
    fn an_inconclusive_first_train_is_sent_again_and_an_inconclusive_lower_rung_leads_around_its_top() {
        // The first train badly paced (inconclusive, nothing lost): sent once more, not
        // answered with a fine train at the 500 Mbit/s top.
        let mut l = Ladder::from_plan(planner(), 0.2);
        let LadderStep::Train { design: c1, .. } = l.first().unwrap() else { panic!() };
        let paced_badly = estimate_of(badly_paced(), c1.n, 0);
        let step = l.on_verdict(&c1, &paced_badly, &as_sent(&c1)).unwrap();
        // Sent again with its capacity burst: the first train's burst said nothing either.
        assert_eq!(step, LadderStep::Train { design: c1, whole: true, wait: Dur::ZERO, burst: CAPACITY_BURST });
        // Once only: a second inconclusive verdict leads on as before (the fine train at the top).
        let step = l.on_verdict(&c1, &paced_badly, &as_sent(&c1)).unwrap();
        let LadderStep::Train { design: fine, whole: false, .. } = step else { panic!("{step:?}") };
        assert!(fine.b_max().as_mbps() > 490.0, "{fine:?}");
        // Sent again, the first train's reading is still the first train's (a later coarse
        // train's reading would lead to the fine train whatever its spread): at 100 Mbit/s with
        // a cross packet after every fifth probe packet, one coarse train around C comes next.
        let mut l = Ladder::from_plan(planner(), 0.2);
        let LadderStep::Train { design: c1, .. } = l.first().unwrap() else { panic!() };
        l.on_verdict(&c1, &paced_badly, &as_sent(&c1)).unwrap();
        let below = estimate_of(Outcome::BelowRange { at_most: c1.b_min() }, c1.n, 0);
        let step = l.on_verdict(&c1, &below, &fifo_records(&c1, 100e6, 5)).unwrap();
        let LadderStep::Train { design: ct, whole: true, .. } = step else { panic!("{step:?}") };
        assert!((ct.b_max().as_mbps() - 200.0).abs() < 3.0, "{ct:?}");
        // A badly paced first train that queued needs no second try: its gaps show C and the
        // ladder goes on from its reading (the same coarse train around C).
        let mut l = Ladder::from_plan(planner(), 0.2);
        let LadderStep::Train { design: c1, .. } = l.first().unwrap() else { panic!() };
        let step = l.on_verdict(&c1, &paced_badly, &fifo_records(&c1, 100e6, 5)).unwrap();
        let LadderStep::Train { design: ct, whole: true, .. } = step else { panic!("{step:?}") };
        assert!((ct.b_max().as_mbps() - 200.0).abs() < 3.0, "{ct:?}");
        assert!((l.capacity().unwrap().as_mbps() - 100.0).abs() < 1.0, "{:?}", l.capacity());
        // A lower rung that said nothing: below the rung above it, so around its own top.
        let mut p = planner();
        let Next::Coarse(c1) = p.first().unwrap() else { panic!() };
        let Some(Next::Coarse(c2)) = p.next(&c1, &Outcome::BelowRange { at_most: c1.b_min() }).unwrap() else {
            panic!()
        };
        let Some(Next::Fine(f)) = p.next(&c2, &badly_paced()).unwrap() else { panic!() };
        assert!(f.b_max().as_mbps() <= 2.1 * c2.b_max().as_mbps() && f.b_min() < c2.b_max(), "{f:?} after {c2:?}");
    }

    #[test]
    fn a_fine_train_that_read_a_bound_is_retried_once_beyond_it() {
        let p = planner();
        let f = p.fine(Rate::from_mbps(30), Rate::from_mbps(16)).unwrap();
        let up = p.retry(&f, &Outcome::AboveRange { at_least: f.b_max() }).unwrap().expect("above: retried");
        assert!((up.b_max().as_mbps() / f.b_max().as_mbps() - 4.0).abs() < 0.1, "{} vs {}", up.b_max(), f.b_max());
        let down = p.retry(&f, &Outcome::BelowRange { at_most: f.b_min() }).unwrap().expect("below: retried");
        assert!(
            down.b_max() < f.b_max() && down.b_max().bps() + 1000 >= f.b_min().bps(),
            "{} vs {}",
            down.b_max(),
            f.b_min()
        );
        // wide: from the smallest packet, down to a twentieth of the bound
        assert!(down.p_1 == Bytes(60) && down.b_min().bps() * 20 < f.b_min().bps(), "{down:?}");
        assert_eq!(p.retry(&f, &Outcome::Estimate(Rate::from_mbps(20))).unwrap(), None);
        // inconclusive (a buffer overflowed by a train far above A): wide, below the old A₀
        let lost = p
            .retry(&f, &Outcome::Inconclusive { reason: InconclusiveReason::Lost { lost: 60, packets: 376 } })
            .unwrap();
        let lost = lost.expect("inconclusive: retried");
        assert!(lost.b_max().bps() <= f.b_max().bps() / 2 + 1000 && lost.p_1 == Bytes(60), "{lost:?} after {f:?}");
        let top = p.fine(DEFAULT_TOP, Rate::from_mbps(16)).unwrap();
        assert_eq!(
            p.retry(&top, &Outcome::AboveRange { at_least: top.b_max() }).unwrap(),
            None,
            "nothing above the top"
        );
    }

    #[test]
    fn the_queue_a_train_built_is_its_delay_range_over_received_packets() {
        use crate::units::Time;
        let rec = |i: u32, send_ms: u64, recv_ms: Option<u64>| ProbeRecord {
            index: i,
            send_time: Time(send_ms * 1_000_000),
            recv_time: recv_ms.map(|r| Time(r * 1_000_000)),
            size: Bytes(100),
        };
        let train = [rec(0, 0, Some(10)), rec(1, 1, Some(16)), rec(2, 2, None), rec(3, 3, Some(43))];
        assert_eq!(built_queue(&train), Dur::from_millis(30));
        assert_eq!(built_queue(&train[..1]), Dur::ZERO);
        assert_eq!(built_queue(&[rec(0, 0, None)]), Dur::ZERO);
        let stuck = [rec(0, 0, Some(1)), rec(1, 1, Some(10_000))];
        assert_eq!(built_queue(&stuck), Dur::from_secs(2), "capped");
    }

    #[test]
    fn with_the_capacity_known_the_fine_train_is_sized_for_the_cross_traffic_measured() {
        let c = Rate::from_mbps(10);
        let known = planner().with_capacity(Some(c));
        for mbps in [1u64, 4, 7, 10] {
            let a0 = Rate::from_mbps(mbps);
            let (w, worst) = (fine_window(a0, c, TARGET_SIGMA), busy_window(a0, TARGET_SIGMA));
            // 8·P_x·X/(σ·C)² with X = max(C − A₀, C/4): never longer than the worst case X/C² ≤ 1/(4·A₀).
            let x = (10.0 - mbps as f64).max(2.5) * 1e6;
            let want = 8.0 * 1500.0 * x / (TARGET_SIGMA * 1e7).powi(2);
            assert!((w.as_secs_f64() / want - 1.0).abs() < 1e-6, "A₀ {mbps}: {w:?}");
            assert!(w <= worst, "A₀ {mbps}: {w:?} > {worst:?}");
            // The fine train follows it (busy for 2/3 of its length, at most MAX_FINE_LENGTH).
            let len = |w: Dur| (1.5 * w.as_secs_f64()).min(MAX_FINE_LENGTH.as_secs_f64());
            let (f, old) = (known.fine(a0, Rate::ZERO).unwrap(), planner().fine(a0, Rate::ZERO).unwrap());
            let ratio = f.train_length().as_secs_f64() / old.train_length().as_secs_f64();
            let expect = len(w) / len(worst);
            assert!(ratio <= 1.0 + 1e-9 && (ratio / expect - 1.0).abs() < 0.15, "A₀ {mbps}: {ratio} vs {expect}");
        }
        // At 90 % load (A₀ = C/10) the busy time is a third: X/C² = 0.9/C, not 1/(4·A₀) = 2.5/C
        // (0.43 s against 1.2 s); the train 0.65 s against the old one's 1 s cap.
        let a0 = Rate::from_mbps(1);
        let (f, old) = (known.fine(a0, Rate::ZERO).unwrap(), planner().fine(a0, Rate::ZERO).unwrap());
        assert!((fine_window(a0, c, TARGET_SIGMA).as_secs_f64() - 0.432).abs() < 1e-3);
        assert!(f.train_length().as_secs_f64() < 0.72 * old.train_length().as_secs_f64(), "{f:?} vs {old:?}");
        // Idle (A₀ = C): the worst case's window at C, as before.
        let (f, old) = (known.fine(c, Rate::ZERO).unwrap(), planner().fine(c, Rate::ZERO).unwrap());
        assert_eq!(f.train_length(), old.train_length());
        // No shorter than the worst case where that is at most UNSHORTENED_WINDOW: at 500 Mbit/s
        // and 90 % load 24 ms (the load measured would ask for 8.6 ms), at 30 % load 3.4 ms
        // (2.9 ms); at 100 Mbit/s and 90 % load the worst case's 120 ms is shortened to 43 ms.
        let (c, ms) = (Rate::from_mbps(500), |d: Dur| d.as_secs_f64() * 1e3);
        for a0 in [Rate::from_mbps(50), Rate::from_mbps(350)] {
            let (w, worst) = (fine_window(a0, c, TARGET_SIGMA), busy_window(a0, TARGET_SIGMA));
            assert!(worst <= UNSHORTENED_WINDOW && w == worst, "A₀ {a0}: {} against {} ms", ms(w), ms(worst));
        }
        let w = fine_window(Rate::from_mbps(10), Rate::from_mbps(100), TARGET_SIGMA);
        assert!((ms(w) - 43.2).abs() < 0.1, "{} ms", ms(w));
    }

    #[test]
    fn a_fine_train_after_a_reading_is_sized_for_one_spread_more_cross_traffic_up_to_three_quarters_of_c() {
        let c = Rate::from_mbps(10);
        let mbit = |x: f64| Rate((x * 1e6) as u64);
        // 30 % load read with a 1.5 Mbit/s spread: sized for A = 5.5 (X = 4.5, not 3).
        assert_eq!(sized_for(mbit(7.0), mbit(1.5), Some(c)), mbit(5.5));
        // One spread below would be under C/4: sized for C/4 (X at most 3C/4).
        assert_eq!(sized_for(mbit(3.8), mbit(2.0), Some(c)), mbit(2.5));
        // A reading under C/4 already asks for more: as read; so does a spread above the reading.
        assert_eq!(sized_for(mbit(1.0), mbit(0.6), Some(c)), mbit(1.0));
        assert_eq!(sized_for(mbit(1.0), mbit(3.0), Some(c)), mbit(1.0));
        // Without the capacity the worst case needs no margin.
        assert_eq!(sized_for(mbit(7.0), mbit(1.5), None), mbit(7.0));

        // The fine train after the reading 7 ± 1.5 is busy for the window 5.5 asks (X = 4.5),
        // over the same rates as a train sized at the reading itself.
        let p = planner().with_capacity(Some(c));
        let last = p.coarse(Rate(23_333_333)).unwrap();
        let Next::Fine(f) = p.clone().fine_from_reading(&last, mbit(7.0), mbit(1.5)).unwrap() else { panic!() };
        let at_reading = p.reading_train(&last, mbit(7.0), mbit(1.5), mbit(7.0)).unwrap();
        assert_eq!(f.b_max(), at_reading.b_max());
        assert!((f.b_min().as_mbps() / at_reading.b_min().as_mbps() - 1.0).abs() < 0.01, "{f:?}");
        let busy = |d: &QuickDesign| busy_time(d, mbit(7.0)).as_secs_f64();
        let want = fine_window(mbit(5.5), c, TARGET_SIGMA).as_secs_f64();
        // (At least: ΔP is a whole number of bytes, rounded towards the longer train.)
        assert!(busy(&f) >= want, "busy {} s for {want} s", busy(&f));
        assert!(busy(&at_reading) < want, "sized at the reading: busy {} s", busy(&at_reading));
        // Two readings (with and without a stall): sized from the lower one and its spread.
        let Next::Fine(both) =
            p.clone().fine_from_readings(&last, (mbit(7.0), mbit(1.5)), Some((mbit(8.0), mbit(1.0)))).unwrap()
        else {
            panic!()
        };
        assert!(busy(&both) >= want, "busy {} s for {want} s", busy(&both));

        // Never shorter than the train sized at the reading, where the longer window crosses
        // the longest fine train (ΔP rounds towards the shorter train there): at 5 Mbit/s.
        let c = Rate::from_mbps(5);
        let p = planner().with_capacity(Some(c));
        let last = p.coarse(Rate(23_333_333)).unwrap();
        let mut crossed = 0;
        for a0 in (2..=20).map(|q| mbit(q as f64 / 4.0)) {
            for spread in (1..=8).map(|q| mbit(q as f64 / 4.0)) {
                let Next::Fine(f) = p.clone().fine_from_reading(&last, a0, spread).unwrap() else { panic!() };
                let at_reading = p.reading_train(&last, a0, spread, a0).unwrap();
                assert!(f.train_length() >= at_reading.train_length(), "{a0} ± {spread}: {f:?} {at_reading:?}");
                let (lo, top) = p.reading_range(&last, a0, spread);
                let sized = p.fine_over_sized(a0, sized_for(a0, spread, Some(c)), lo, top);
                crossed += sized.is_ok_and(|s| s.train_length() < at_reading.train_length()) as u32;
            }
        }
        assert!(crossed > 0, "no reading whose longer window made a shorter train: the guard is untested");
    }

    /// A train's records through a fluid FIFO of capacity `c` (bit/s) whose cross traffic leaves
    /// `a`: the queue grows by `s·(r − a)/c` per gap while the probe rate `r` is above `a`.
    fn fluid_records(d: &QuickDesign, c: f64, a: f64) -> Vec<ProbeRecord> {
        let sched = d.schedule();
        let mut q = 0.0f64;
        sched
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if i > 0 {
                    let s = (p.offset.0 - sched[i - 1].offset.0) as f64;
                    q = (q + s * (p.size.0 as f64 * 8.0 / s * 1e9 - a) / c).max(0.0);
                }
                ProbeRecord {
                    index: i as u32,
                    send_time: crate::units::Time(p.offset.0),
                    recv_time: Some(crate::units::Time(p.offset.0 + 1_000_000 + q as u64)),
                    size: p.size,
                }
            })
            .collect()
    }

    /// A train's records through a FIFO of `c` bit/s, a 1,000-byte cross packet arriving just
    /// after every `every`-th probe packet.
    fn fifo_records(d: &QuickDesign, c: f64, every: usize) -> Vec<ProbeRecord> {
        fifo_records_after(d, c, |i| i % every == 0)
    }

    /// [`fifo_records`] with a cross packet after each probe packet `i` that `cross_after(i)`.
    fn fifo_records_after(d: &QuickDesign, c: f64, cross_after: impl Fn(usize) -> bool) -> Vec<ProbeRecord> {
        fifo_records_with(d, c, 8000.0, cross_after)
    }

    /// [`fifo_records_after`] with cross packets of `cross_bits`.
    fn fifo_records_with(
        d: &QuickDesign,
        c: f64,
        cross_bits: f64,
        cross_after: impl Fn(usize) -> bool,
    ) -> Vec<ProbeRecord> {
        let mut free = 0.0f64;
        d.schedule()
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let at = p.offset.0 as f64;
                free = free.max(at) + p.size.0 as f64 * 8.0 / c * 1e9;
                let rec = ProbeRecord {
                    index: i as u32,
                    send_time: crate::units::Time(p.offset.0),
                    recv_time: Some(crate::units::Time(1_000_000 + free as u64)),
                    size: p.size,
                };
                if cross_after(i) {
                    free = free.max(at + 1.0) + cross_bits / c * 1e9;
                }
                rec
            })
            .collect()
    }

    #[test]
    fn a_later_coarse_train_whose_busy_gaps_overran_the_capacity_leads_to_a_fine_train_from_the_bottom() {
        // 100 Mbit/s: the first coarse train gives C; the second one
        // (9.3–199 Mbit/s, 4 ms) met more cross traffic than C over its busy gaps: no reading,
        // but an overrun. The fine train from the smallest packet up, not the third rung.
        let below = |d: &QuickDesign| estimate_of(Outcome::BelowRange { at_most: d.b_min() }, d.n, 0);
        let (mut l, c2) = second_coarse_at_100();
        let step = l.on_verdict(&c2, &below(&c2), &fluid_records(&c2, 100e6, -5e6)).unwrap();
        let LadderStep::Train { design: fine, whole: false, .. } = step else { panic!("{step:?}") };
        // A₀ = 0 with the spread of a full link over ~4 ms: k = 12,000 bit/4 ms = 3 Mbit/s,
        // k + √(k² + k·C) ≈ 20.6 Mbit/s; the train tops at two spreads.
        let (lo, hi) = (fine.b_min().as_mbps(), fine.b_max().as_mbps());
        assert!(lo < 2.0 && (35.0..=50.0).contains(&hi), "[{lo}, {hi}]: {fine:?}");
        // Without an overrun (no busy gaps received) the ladder walks down to the next rung.
        let (mut l, c2) = second_coarse_at_100();
        let step = l.on_verdict(&c2, &below(&c2), &[]).unwrap();
        let LadderStep::Train { design: c3, whole: true, .. } = step else { panic!("{step:?}") };
        assert!(c3.b_max() <= c2.b_min(), "{c3:?}");
    }

    /// 100 Mbit/s: the first coarse train gives `C` and a reading that is not sure; the ladder
    /// and the second coarse train it sends.
    fn second_coarse_at_100() -> (Ladder, QuickDesign) {
        let below = |d: &QuickDesign| estimate_of(Outcome::BelowRange { at_most: d.b_min() }, d.n, 0);
        let mut l = Ladder::from_plan(planner(), 0.2);
        let LadderStep::Train { design: c1, .. } = l.first().unwrap() else { panic!() };
        // A 1,000-byte cross packet after every fourth probe packet (83 Mbit/s): its reading
        // (about 17 Mbit/s) is not sure, and the next train is a coarse one.
        let step = l.on_verdict(&c1, &below(&c1), &fifo_records(&c1, 100e6, 4)).unwrap();
        let LadderStep::Train { design: c2, whole: true, .. } = step else { panic!("{step:?}") };
        assert!((l.capacity().unwrap().as_mbps() - 100.0).abs() < 1.0, "{:?}", l.capacity());
        (l, c2)
    }

    #[test]
    fn a_later_coarse_train_that_overflowed_is_read_from_its_busy_gaps_before_the_loss() {
        // 100 Mbit/s, a small buffer: the second coarse train (9.3–199 Mbit/s) queued from
        // A = 10 Mbit/s on and lost its last fifth to the full buffer; the fit said "above
        // range" (flat delays once the buffer is full), which with losses is an overflow.
        let (mut l, c2) = second_coarse_at_100();
        let mut records = fluid_records(&c2, 100e6, 10e6);
        let lost = records.len() / 5;
        for r in records.iter_mut().rev().take(lost) {
            r.recv_time = None;
        }
        let overflowed = estimate_of(Outcome::AboveRange { at_least: c2.b_max() }, c2.n, lost as u32);
        let step = l.on_verdict(&c2, &overflowed, &records).unwrap();
        // The busy gaps before the loss read A₀ = 10: the fine train around it, not the next
        // rung down (0.4–9.3 Mbit/s, 85 ms).
        let LadderStep::Train { design: fine, whole: false, .. } = step else { panic!("{step:?}") };
        let (lo, hi) = (fine.b_min().as_mbps(), fine.b_max().as_mbps());
        assert!(lo < 10.0 && hi > 10.0 && hi < c2.b_max().as_mbps(), "[{lo}, {hi}]: {fine:?}");
    }

    /// 10 Mbit/s, the capacity known from the first coarse train, the second read `A₀` =
    /// `a0` bit/s: the ladder and the fine train it sends.
    fn fine_after_reading(a0: f64) -> (Ladder, QuickDesign) {
        let below = |d: &QuickDesign| estimate_of(Outcome::BelowRange { at_most: d.b_min() }, d.n, 0);
        let mut l = Ladder::from_plan(planner(), 0.2);
        let LadderStep::Train { design: c1, .. } = l.first().unwrap() else { panic!() };
        let LadderStep::Train { design: c2, .. } =
            l.on_verdict(&c1, &below(&c1), &fluid_records(&c1, 10e6, 10e6)).unwrap()
        else {
            panic!()
        };
        let step = l.on_verdict(&c2, &below(&c2), &fluid_records(&c2, 10e6, a0)).unwrap();
        let LadderStep::Train { design: fine, whole: false, .. } = step else { panic!("{step:?}") };
        (l, fine)
    }

    #[test]
    fn a_fit_at_the_top_of_a_train_that_lost_packets_is_re_read_when_its_delays_confirm_a_lower_reading() {
        let (l, fine) = fine_after_reading(4e6);
        // The fit read 95 % of the train's top; the train lost a packet two thirds of the way,
        // so no gap above the fit came before the loss and the busy gaps cannot correct it.
        let fit = Rate((fine.b_max().bps() as f64 * 0.95) as u64);
        let top = estimate_of(Outcome::Estimate(fit), fine.n, 1);
        let lossy = |a: f64| {
            let mut r = fluid_records(&fine, 10e6, a);
            r[fine.n as usize * 2 / 3].recv_time = None;
            r
        };
        // Queued from A = 3 Mbit/s on: the delays confirm the busy reading, which is the answer.
        let mut answered = l.clone();
        assert_eq!(answered.on_verdict(&fine, &top, &lossy(3e6)).unwrap(), LadderStep::Answer(2));
        let Some(Outcome::Estimate(a)) = answered.refined() else { panic!("{:?}", answered.refined()) };
        assert!((a.as_mbps() - 3.0).abs() < 0.1, "{a} for A = 3 Mbit/s, the fit {fit}");
        // The fit was right (A at 95 % of the top): a lower reading predicts a queue the train
        // did not build, and the fit stands.
        let mut answered = l.clone();
        assert_eq!(answered.on_verdict(&fine, &top, &lossy(fit.bps() as f64)).unwrap(), LadderStep::Answer(2));
        assert_eq!(answered.refined(), Some(&Outcome::Estimate(fit)));
        // Queued from its first packet (A below the train's lowest rate): the confirmed
        // reading below the range is the answer too (session 21).
        let a = fine.b_min().bps() as f64 / 2.0;
        let mut answered = l.clone();
        assert_eq!(answered.on_verdict(&fine, &top, &lossy(a)).unwrap(), LadderStep::Answer(2));
        let Some(Outcome::Estimate(read)) = answered.refined() else { panic!("{:?}", answered.refined()) };
        assert!((read.bps() as f64 - a).abs() < 0.01 * 10e6, "{read} for A = {a}, the fit {fit}");
    }

    #[test]
    fn a_fine_train_below_range_that_lost_packets_answers_with_its_confirmed_reading() {
        let (l, fine) = fine_after_reading(4e6);
        // Queued from A = 3 Mbit/s on and lost its last packets to the full buffer; the fit,
        // misled by the full queue's flat delays, read "below range".
        let mut queued = fluid_records(&fine, 10e6, 3e6);
        let n = queued.len();
        for r in &mut queued[n - 5..] {
            r.recv_time = None;
        }
        let below = |lost: u32| estimate_of(Outcome::BelowRange { at_most: fine.b_min() }, fine.n, lost);
        let mut answered = l.clone();
        assert_eq!(answered.on_verdict(&fine, &below(5), &queued).unwrap(), LadderStep::Answer(2));
        let Some(Outcome::Estimate(a)) = answered.refined() else { panic!("{:?}", answered.refined()) };
        assert!((a.as_mbps() - 3.0).abs() < 0.1, "{a}");
        // Nothing lost, and the busy reading at least twice the bound (session 21): the same
        // answer.
        let bound = fine.b_min().as_mbps();
        assert!(3.0 >= BELOW_RANGE_OVERRULED * bound, "the bound {bound}");
        let mut overruled = l.clone();
        let queued = fluid_records(&fine, 10e6, 3e6);
        assert_eq!(overruled.on_verdict(&fine, &below(0), &queued).unwrap(), LadderStep::Answer(2));
        let Some(Outcome::Estimate(a)) = overruled.refined() else { panic!("{:?}", overruled.refined()) };
        assert!((a.as_mbps() - 3.0).abs() < 0.1, "{a}");
        // Nothing lost and a reading less than twice the bound: "below range" stands (this fine
        // train starts below the ladder's lowest retry, so it is the answer as it was), not
        // re-read.
        let mut stands = l.clone();
        let near = 0.8 * BELOW_RANGE_OVERRULED * bound * 1e6;
        assert_eq!(
            stands.on_verdict(&fine, &below(0), &fluid_records(&fine, 10e6, near)).unwrap(),
            LadderStep::Answer(2)
        );
        assert_eq!(stands.refined(), None);
    }

    #[test]
    fn a_fine_train_without_an_estimate_whose_delays_confirm_its_busy_reading_answers_with_it() {
        // 10 Mbit/s, capacity known, the second coarse train read A₀ = 4: the fine train.
        let (l, fine) = fine_after_reading(4e6);
        // Cut by the judging deadline with no knee, though it queued from A = 3 Mbit/s on: the
        // busy reading is the answer, no retry.
        let judged = fine.n as usize * 2 / 3;
        let reason = InconclusiveReason::Cut { at: judged as u32, packets: fine.n, why: CutShort::NoKnee };
        let cut = estimate_of(Outcome::Inconclusive { reason }, judged as u32, 0);
        let mut answered = l.clone();
        let queued = fluid_records(&fine, 10e6, 3e6);
        assert_eq!(answered.on_verdict(&fine, &cut, &queued[..judged]).unwrap(), LadderStep::Answer(2));
        let Some(Outcome::Estimate(a)) = answered.refined() else { panic!("{:?}", answered.refined()) };
        assert!((a.as_mbps() - 3.0).abs() < 0.1, "{a}");
        // "Above range" by the fit, same delays: the same answer.
        let mut answered = l.clone();
        let above = estimate_of(Outcome::AboveRange { at_least: fine.b_max() }, fine.n, 0);
        assert_eq!(answered.on_verdict(&fine, &above, &queued).unwrap(), LadderStep::Answer(2));
        // A train that never queued: above range is retried higher, as before.
        let mut retried = l.clone();
        let step = retried.on_verdict(&fine, &above, &as_sent(&fine)).unwrap();
        let LadderStep::Train { design: again, .. } = step else { panic!("{step:?}") };
        assert!(again.b_max() > fine.b_max(), "{again:?}");
    }

    #[test]
    fn with_the_capacity_known_a_coarse_train_is_read_from_its_busy_gaps_and_the_fine_train_spans_two_spreads() {
        // 10 Mbit/s: the first coarse train (every gap above C) gives C; its own reading, over
        // 1.6 ms of busy gaps, is not sure enough (spread > A₀/4): the next coarse train.
        let mut l = Ladder::from_plan(planner(), 0.2);
        let LadderStep::Train { design: c1, .. } = l.first().unwrap() else { panic!() };
        let below = |d: &QuickDesign| estimate_of(Outcome::BelowRange { at_most: d.b_min() }, d.n, 0);
        let step = l.on_verdict(&c1, &below(&c1), &fluid_records(&c1, 10e6, 10e6)).unwrap();
        let LadderStep::Train { design: c2, whole: true, .. } = step else { panic!("{step:?}") };
        assert!((l.capacity().unwrap().as_mbps() - 10.0).abs() < 0.1, "{:?}", l.capacity());
        assert!(
            (c2.b_max().as_mbps() / c1.b_min().as_mbps() - 1.0).abs() < 0.02,
            "2·C is under the next rung's top: the rung"
        );
        // The second coarse train's fit read "below range" (≤ 1.4 Mbit/s); its busy gaps grew as
        // A = 4 makes them: the fine train is around 4, two spreads either way, not the third rung.
        let step = l.on_verdict(&c2, &below(&c2), &fluid_records(&c2, 10e6, 4e6)).unwrap();
        let LadderStep::Train { design: fine, whole: false, .. } = step else { panic!("{step:?}") };
        let (lo, hi) = (fine.b_min().as_mbps(), fine.b_max().as_mbps());
        // Spread over ~29 ms of busy gaps, X = 6 Mbit/s: k = 12,000 bit/29 ms ≈ 0.41 Mbit/s,
        // k + √(k² + k·X) ≈ 2.0 Mbit/s.
        assert!(lo < 1.0 && (7.5..=8.5).contains(&hi), "[{lo}, {hi}]: {fine:?}");
        assert_eq!(
            l.on_verdict(&fine, &estimate_of(Outcome::Estimate(Rate::from_mbps(4)), fine.n, 0), &[]).unwrap(),
            LadderStep::Answer(2)
        );
        // Idle (A₀ = C): the train over [C/2, 2·C] as before.
        let mut idle = Ladder::from_plan(planner(), 0.2);
        let LadderStep::Train { design: c1, .. } = idle.first().unwrap() else { panic!() };
        let LadderStep::Train { design: c2, .. } =
            idle.on_verdict(&c1, &below(&c1), &fluid_records(&c1, 10e6, 10e6)).unwrap()
        else {
            panic!()
        };
        let e = estimate_of(Outcome::Estimate(Rate::from_mbps(10)), c2.n, 0);
        let step = idle.on_verdict(&c2, &e, &fluid_records(&c2, 10e6, 10e6)).unwrap();
        let LadderStep::Train { design: fine, .. } = step else { panic!("{step:?}") };
        assert!(fine.b_max().as_mbps() <= 20.2 && fine.b_min().as_mbps() < 10.0, "{fine:?}");

        // 100 Mbit/s, idle: the first train's busy gaps (the part above C) read C with a spread
        // of 2·8·P_x/busy ≈ 19 Mbit/s ≤ A₀/4: the fine train at once, [A₀/2, 2·A₀].
        let mut l = Ladder::from_plan(planner(), 0.2);
        let LadderStep::Train { design: c1, .. } = l.first().unwrap() else { panic!() };
        let e = estimate_of(Outcome::Estimate(Rate::from_mbps(106)), c1.n, 0);
        let step = l.on_verdict(&c1, &e, &fluid_records(&c1, 100e6, 100e6)).unwrap();
        let LadderStep::Train { design: fine, whole: false, .. } = step else { panic!("{step:?}") };
        assert!(
            (fine.b_min().as_mbps() - 50.0).abs() < 2.0 && (fine.b_max().as_mbps() - 200.0).abs() < 2.0,
            "{fine:?}"
        );
        // 100 Mbit/s, A = 40: the first train's reading (X = 60 over 1.6 ms) is not sure: one
        // coarse train topped at 2·C, read the same way.
        let mut l = Ladder::from_plan(planner(), 0.2);
        let LadderStep::Train { design: c1, .. } = l.first().unwrap() else { panic!() };
        let step = l.on_verdict(&c1, &below(&c1), &fifo_records(&c1, 100e6, 5)).unwrap();
        let LadderStep::Train { design: ct, whole: true, .. } = step else { panic!("{step:?}") };
        assert!((ct.b_max().as_mbps() - 200.0).abs() < 3.0, "{ct:?}");
        let step = l.on_verdict(&ct, &below(&ct), &fluid_records(&ct, 100e6, 40e6)).unwrap();
        let LadderStep::Train { design: fine, whole: false, .. } = step else { panic!("{step:?}") };
        assert!(fine.b_min().as_mbps() < 40.0 && fine.b_max().as_mbps() > 40.0, "{fine:?}");
    }

    #[test]
    fn with_the_capacity_above_half_the_first_trains_top_an_unsure_first_reading_leads_to_the_fine_train() {
        // 500 Mbit/s, known (the first train's vote is set by hand: at 250 Mbit/s and above it
        // reads about two thirds of C from this train, docs/results.md, issue 19 session 18), a
        // cross packet of `cross` bytes after each probe packet of the first coarse train
        // (23–500 Mbit/s over 1.6 ms) with probability ½: its busy gaps read A₀ with a spread
        // above A₀/4. A coarse train topped at 2·C would be the first train again: the fine train
        // over the reading's two spreads comes next, whatever the fit said (here "below range";
        // before, the ladder walked down to the 1.1–23 Mbit/s rung).
        let first_then = |cross: f64| {
            let mut l = Ladder::from_plan(planner(), 0.2);
            let c = Rate::from_mbps(500);
            l.set_capacity(Some((c, VoteTolerance::Narrow)));
            let LadderStep::Train { design: c1, .. } = l.first().unwrap() else { panic!() };
            let below = estimate_of(Outcome::BelowRange { at_most: c1.b_min() }, c1.n, 0);
            let mut rng = crate::rng::Rng::new(3);
            let after: Vec<bool> = (0..c1.n).map(|_| rng.uniform() < 0.5).collect();
            let recs = fifo_records_with(&c1, 500e6, cross * 8.0, |i| after[i]);
            let step = l.on_verdict(&c1, &below, &recs).unwrap();
            let LadderStep::Train { design, whole, .. } = step else { panic!("{step:?}") };
            let reading = super::super::dispersion::busy_reading(&recs, c, c1.b_min());
            (design, whole, reading.map(|(a, busy)| (a, reading_spread(a, c, busy))), c1)
        };
        let (fine, whole, reading, c1) = first_then(1500.0);
        let (a0, spread) = reading.expect("the test's premise: a reading");
        assert!(spread.bps() > a0.bps() / 4, "the test's premise: an unsure reading, {a0} ± {spread}");
        assert!(!whole, "the fine train, not a coarse one: {fine:?}");
        let two = 2.0 * spread.as_mbps();
        // (B_min is P_2's rate, Eq. 7: a step above the range's lower end.)
        let lo = (a0.as_mbps() - two).min(a0.as_mbps() / 2.0).max(0.0);
        assert!(fine.b_min().as_mbps() <= 1.03 * lo + 1.0, "{fine:?}, {a0} ± {spread}");
        assert!(fine.b_max().as_mbps() >= (a0.as_mbps() + two).min(c1.b_max().as_mbps()) - 1.0, "{fine:?}");
        // Cross packets of 4,000 bytes (about 660 Mbit/s of cross traffic): the busy gaps
        // overran C. The fine train spans the spreads of a full link over them, from the bottom.
        let (wide, whole, reading, _) = first_then(4000.0);
        assert!(reading.is_none(), "the test's premise: an overrun");
        assert!(!whole && wide.b_min().as_mbps() < 30.0, "{wide:?}");
    }

    #[test]
    fn the_first_train_carries_a_capacity_burst_that_shows_a_500_mbit_capacity_at_90_percent_load() {
        // The harness's 500 Mbit/s path under 450 Mbit/s of Poisson cross traffic: the first
        // coarse train and its burst, 20 times per stamp noise; the ladder's capacity after it,
        // with the burst and (the same trains) without. Stamps within ±1 µs (the testbed's are
        // exact to about half a microsecond) and ±10 µs (the harness's default, where a burst
        // span of 48 µs and one with a cross packet, 64 µs, fall within one 20 µs vote: the
        // burst reads 369–513 Mbit/s there, the train alone 173–268).
        for (noise, within, least) in [(1e-6, 0.05, 18), (10e-6, 0.2, 16)] {
            let mut path = crate::abw::ladder_harness::Path::new(500e6, 450e6, 5000, 0.005, 17).with_stamp_noise(noise);
            let cfg = crate::abw::ladder_harness::client_estimator();
            let (mut with, mut without) = (0, 0);
            let mut t = 1.0;
            for _ in 0..20 {
                let mut l = Ladder::from_plan(planner(), 0.2);
                let LadderStep::Train { design, whole: true, burst, .. } = l.first().unwrap() else { panic!() };
                assert_eq!(burst, CAPACITY_BURST);
                let v = crate::abw::ladder_harness::run_train_with_burst(&mut path, &design, t, false, cfg, burst);
                t = v.judgement.decided_at.0 as f64 / 1e9 + 0.1;
                assert_eq!(v.burst.len(), CAPACITY_BURST as usize);
                let near = |c: Option<Rate>| c.is_some_and(|c| (c.as_mbps() / 500.0 - 1.0).abs() <= within);
                let mut alone = l.clone();
                l.on_burst(&v.burst);
                let next = l.on_verdict(&design, &v.estimate, &v.records).unwrap();
                with += near(l.capacity()) as u32;
                alone.on_verdict(&design, &v.estimate, &v.records).unwrap();
                without += near(alone.capacity()) as u32;
                // Only the first train carries one.
                if let LadderStep::Train { burst, .. } = next {
                    assert_eq!(burst, 0);
                }
            }
            let at = format!("stamps ±{} µs, within {} % of C", noise * 1e6, within * 100.0);
            assert!(with >= least, "{at} with the burst: {with} of 20");
            // On exact stamps the train's own narrow votes see C too (session 18), though on the
            // testbed the train's capacity was within 5 % of C in 67 of 207 first trains at this
            // load (docs/results.md, session 19); on noisy stamps they do not.
            if noise > 5e-6 {
                assert!(without <= 2, "the premise: the train's own gaps hide C ({at}: {without} of 20)");
            }
        }
    }

    #[test]
    fn a_capacity_the_20_us_vote_read_gives_way_to_the_answer_trains_agreeing_narrow_votes() {
        // The fine train around A = 350 on the harness's 500 Mbit/s path (30 % Poisson load,
        // stamps ±1 µs): its narrow votes agree on C (the test's premise).
        let fine = planner().with_capacity(Some(Rate::from_mbps(500))).fine(Rate::from_mbps(350), Rate::ZERO).unwrap();
        let mut path = crate::abw::ladder_harness::Path::new(500e6, 150e6, 5000, 0.005, 11).with_stamp_noise(1e-6);
        let cfg = crate::abw::ladder_harness::client_estimator();
        let v = crate::abw::ladder_harness::run_train(&mut path, &fine, 1.0, true, cfg);
        let (own, how) = super::super::dispersion::capacity_vote(&v.records, DISPERSION_NOISE).expect("a capacity");
        assert_eq!(how, VoteTolerance::Narrow, "the premise");
        assert!((own.as_mbps() - 500.0).abs() < 10.0, "the premise: {own}");
        // The first coarse train's capacity, read by the vote at 20 µs alone (two thirds of C):
        // the answer is re-read with the answer train's own.
        let mut l = Ladder::from_plan(planner(), 0.2);
        l.set_capacity(Some((Rate::from_mbps(330), VoteTolerance::Noise)));
        l.adopt_train_capacity(&v.records);
        assert_eq!(l.capacity(), Some(own));
        assert_eq!(l.plan.capacity, Some(own), "a retry is designed with it too");
        // Read by agreeing narrow votes, it stands; and no capacity stays none.
        l.set_capacity(Some((Rate::from_mbps(330), VoteTolerance::Narrow)));
        l.adopt_train_capacity(&v.records);
        assert_eq!(l.capacity(), Some(Rate::from_mbps(330)));
        l.set_capacity(None);
        l.adopt_train_capacity(&v.records);
        assert_eq!(l.capacity(), None);
    }

    #[test]
    fn a_fine_train_designed_with_a_wrong_capacity_answers_with_its_confirmed_reading_below_its_range() {
        // 500 Mbit/s at 90 % Poisson load (A = 50), stamps ±1 µs. The first train's capacity
        // came from the 20 µs vote at 220 Mbit/s, and the fine train around the reading it gave
        // spans 110–440 Mbit/s, wholly above A: its fit answers far above A, and its busy gaps
        // read with its own (narrow) capacity put A below its range. The confirmed reading is
        // the answer. (Here the fit reads "below range"; the testbed's fits read 130–424 Mbit/s
        // for such trains, docs/results.md, and the test gives the train that estimate.)
        let fine = planner().fine(Rate::from_mbps(220), Rate::ZERO).unwrap();
        let mut path = crate::abw::ladder_harness::Path::new(500e6, 450e6, 5000, 0.005, 11).with_stamp_noise(1e-6);
        let cfg = crate::abw::ladder_harness::client_estimator();
        let mut v = crate::abw::ladder_harness::run_train(&mut path, &fine, 1.0, true, cfg);
        let fit = Rate::from_mbps(375);
        v.estimate.outcome = Outcome::Estimate(fit);
        let answer = |how: VoteTolerance| {
            let mut l = Ladder::from_plan(planner(), 0.2);
            l.set_capacity(Some((Rate::from_mbps(220), how)));
            l.answer(0, &fine, &v.estimate, &v.records);
            (l.refined.clone(), l.adopted)
        };
        let (refined, adopted) = answer(VoteTolerance::Noise);
        assert!(adopted, "the premise: the fine train's narrow votes read C");
        let a = refined.and_then(|o| o.value()).expect("an answer").as_mbps();
        assert!((a - 50.0).abs() <= 15.0, "{a} Mbit/s for A = 50 (the fit: {fit})");
        // A capacity the narrow votes read from the start is not replaced, and the rule does not
        // apply: the answer is whatever the re-reading with it gives, never this reading.
        let (_, adopted) = answer(VoteTolerance::Narrow);
        assert!(!adopted);
    }

    #[test]
    fn with_a_long_round_trip_a_first_train_that_overran_leads_to_the_wide_train_from_the_bottom() {
        // 100 Mbit/s, a cross packet after each probe packet of the first coarse train with
        // probability ½ (167 Mbit/s over its 1.6 ms): its busy gaps read below zero, an
        // overrun. (At random: one after exactly every second packet spoils every two-gap span
        // the capacity vote reads, `dispersion::capacity`.) With RTT
        // 100 ms the wide fine train from the smallest packet comes at once; with 10 ms its
        // queue bound refuses it and the coarse train around C comes next, as without the rule.
        let first_then = |rtt: Dur| {
            let mut l = Ladder::from_plan(planner(), 0.2).with_round_trip(rtt);
            let LadderStep::Train { design: c1, .. } = l.first().unwrap() else { panic!() };
            let below = estimate_of(Outcome::BelowRange { at_most: c1.b_min() }, c1.n, 0);
            let mut rng = crate::rng::Rng::new(3);
            let half: Vec<bool> = (0..c1.n).map(|_| rng.uniform() < 0.5).collect();
            let recs = fifo_records_after(&c1, 100e6, |i| half[i]);
            let step = l.on_verdict(&c1, &below, &recs).unwrap();
            let LadderStep::Train { design, whole, .. } = step else { panic!("{step:?}") };
            let cap = l.capacity().expect("the capacity from the first train");
            assert!((cap.as_mbps() - 100.0).abs() < 2.0, "{cap}");
            assert!(super::super::dispersion::overrun(&recs, cap, c1.b_min()).is_some(), "the test's premise");
            (design, whole)
        };
        let (wide, whole) = first_then(Dur::from_millis(100));
        assert!(!whole, "RTT 100 ms: the wide fine train at once: {wide:?}");
        // A₀ = 0 ± 36 Mbit/s (k = 12,000 bit/1.6 ms = 7.5 Mbit/s, k + √(k² + k·C)): up to
        // two spreads, from about 3 Mbit/s.
        assert!(wide.b_min().as_mbps() < 5.0 && (60.0..=80.0).contains(&wide.b_max().as_mbps()), "{wide:?}");
        let (coarse, whole) = first_then(Dur::from_millis(10));
        assert!(whole, "RTT 10 ms: the coarse train around C: {coarse:?}");
    }

    #[test]
    fn with_a_long_round_trip_an_unsure_first_reading_leads_to_the_wide_fine_train_at_once() {
        // 100 Mbit/s, a cross packet after every fifth probe packet: the first train's reading
        // is not sure (as in the test above). Without a round trip, or with 10 ms (the wide
        // train's queue would be more than 2.5 ms at C), one coarse train around C comes next.
        let first_then = |rtt: Option<Dur>| {
            let mut l = Ladder::from_plan(planner(), 0.2);
            if let Some(rtt) = rtt {
                l = l.with_round_trip(rtt);
            }
            let LadderStep::Train { design: c1, .. } = l.first().unwrap() else { panic!() };
            let below = estimate_of(Outcome::BelowRange { at_most: c1.b_min() }, c1.n, 0);
            let step = l.on_verdict(&c1, &below, &fifo_records(&c1, 100e6, 5)).unwrap();
            let LadderStep::Train { design, whole, .. } = step else { panic!("{step:?}") };
            (design, whole, l)
        };
        let (_, whole, _) = first_then(None);
        assert!(whole, "no round trip known: the coarse train around C");
        let (_, whole, _) = first_then(Some(Dur::from_millis(10)));
        assert!(whole, "RTT 10 ms: the coarse train around C");
        // RTT 100 ms: the coarse train, a round trip and a fine train cost more than the wide
        // fine train over the first reading's two spreads, whose queue stays within 25 ms.
        let (wide, whole, mut l) = first_then(Some(Dur::from_millis(100)));
        assert!(!whole, "RTT 100 ms: the fine train at once: {wide:?}");
        let c = l.capacity().unwrap();
        let queue = queue_built(&wide, Rate::from_mbps(60)) / c.bps() as f64;
        assert!(queue <= 0.025, "{queue} s of queue at C");
        let (coarse, _, _) = first_then(None);
        assert!(wide.train_length() < coarse.train_length() + Dur::from_millis(100), "{wide:?} against {coarse:?}");
        // Its answer is the estimate: no further train.
        let e = estimate_of(Outcome::Estimate(Rate::from_mbps(60)), wide.n, 0);
        assert_eq!(l.on_verdict(&wide, &e, &fluid_records(&wide, 100e6, 60e6)).unwrap(), LadderStep::Answer(1));
        // The two quantities it weighs.
        let d = planner().coarse(Rate::from_mbps(200)).unwrap();
        assert_eq!(busy_time(&d, Rate::ZERO), d.train_length());
        assert_eq!(busy_time(&d, d.b_max()), Dur::ZERO);
        let q = queue_built(&d, Rate::from_mbps(100));
        let by_hand: f64 =
            (2..=d.n).map(|i| ((d.rate_of(i).as_mbps() - 100.0) * 1e6).max(0.0) * d.t_quick.as_secs_f64()).sum();
        assert!((q - by_hand).abs() < 1.0 && q > 0.0, "{q} against {by_hand}");
    }

    #[test]
    fn a_fine_train_over_two_readings_spans_both_and_over_one_is_the_usual_train() {
        let p = planner().with_capacity(Some(Rate::from_mbps(500)));
        let first = p.coarse(DEFAULT_TOP).unwrap();
        let low = (Rate::from_mbps(60), Rate::from_mbps(40));
        let high = (Rate::from_mbps(330), Rate::from_mbps(60));
        let alone = p.clone().fine_from_readings(&first, low, None).unwrap();
        assert_eq!(alone, p.clone().fine_from_reading(&first, low.0, low.1).unwrap());
        let Next::Fine(low_only) = alone else { panic!() };
        assert!(low_only.b_max().as_mbps() < 200.0, "{low_only:?}");
        let Next::Fine(both) = p.clone().fine_from_readings(&first, low, Some(high)).unwrap() else { panic!() };
        assert!(both.b_min() <= low.0 && both.b_max().as_mbps() >= 450.0, "{both:?}");
        // Busy for the window the lower reading asks (its cross traffic is the heavier).
        let window = fine_window(low.0, Rate::from_mbps(500), TARGET_SIGMA);
        assert!(busy_time(&both, low.0) >= window.mul_f64(0.95), "{:?} < {window:?}", busy_time(&both, low.0));
    }

    #[test]
    fn a_first_train_that_stalled_leads_to_a_fine_train_over_both_its_readings() {
        // The testbed's first coarse train at 500 Mbit/s with A = 350 (the fixture of
        // `dispersion`'s stall test): read over every gap, the 1.56 ms stall at packet 52 filled
        // the link, the fine train over that reading's spreads ended at 140 Mbit/s, read "above
        // range", and a third train was sent (issue 19, session 25).
        let recs =
            crate::abw::excursion::harness::recorded(include_str!("fixtures/fifo500_cross150_first_train_stall.csv"));
        let mut l = Ladder::from_plan(planner(), 0.2);
        let LadderStep::Train { design: c1, .. } = l.first().unwrap() else { panic!() };
        // The capacity burst behind it: 1,500-byte packets 24 µs apart.
        let last = *recs.last().unwrap();
        let burst: Vec<ProbeRecord> = (1..=10u64)
            .map(|k| ProbeRecord {
                index: last.index + k as u32,
                send_time: crate::units::Time(last.send_time.0 + 1_600 * k),
                recv_time: last.recv_time.map(|t| crate::units::Time(t.0 + 24_000 * k)),
                size: Bytes(1500),
            })
            .collect();
        l.on_burst(&burst);
        let fit = estimate_of(Outcome::Estimate(Rate::from_mbps(251)), c1.n, 0);
        let LadderStep::Train { design: fine, .. } = l.on_verdict(&c1, &fit, &recs).unwrap() else { panic!() };
        let c = l.capacity().expect("the burst's capacity");
        assert!((c.as_mbps() - 500.0).abs() < 5.0, "{c}");
        assert!(fine.b_min().as_mbps() <= 350.0 && fine.b_max().as_mbps() >= 350.0, "{fine:?}");
    }
}
