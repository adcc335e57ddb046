//! ImTCP — inline available-bandwidth measurement inside a TCP sender (Cao Le Thanh Man, Go
//! Hasegawa, Masayuki Murata, "ImTCP: TCP with an inline measurement mechanism for available
//! bandwidth", Computer Communications 2005/2006; headroom's seed `001`).
//!
//! # The idea
//!
//! A FIFO under the TCP sender (the "ImTCP buffer", §3.1) briefly holds the data segments TCP
//! releases and lets them go as *probe streams* whose sending rates sweep a search range; the
//! ACK arrival times tell whether each stream's one-way delays grew (Pathload's trend test), so
//! where in the range the available bandwidth lies. No probe traffic is added. A measurement
//! takes one to a few RTTs; the search range follows the 95 % confidence interval of recent
//! results, so a stable path is measured finely and a change is caught by widening the range.
//!
//! # Modules
//!
//! - [`trend`] — Pathload's PCT/PDT trend test with its thresholds and grey zone.
//! - [`algorithm`] — the measurement unit (§3.2): Cprobe's initial range, k sub-ranges, the
//!   N-packet sweeping streams, early stop, the choice of sub-range, the two-line knee
//!   regression, the confidence-interval search range and its widening. Sans-IO: it plans
//!   streams and is told when each packet left and when its ACK/echo came back.
//! - [`control`] — the control unit (§3.3–3.5): the STORE PACKET / SEND STREAM / EMPTY BUFFER /
//!   PASS PACKET state machine as a [`crate::cc::SendBuffer`] ([`ImtcpBuffer`]).
//! - [`echo`] — echo mode (§4.1.1): the same algorithm over UDP probes echoed by the receiver
//!   ([`EchoProber`]).
//! - [`passive`] — passive estimators over the same ACKs for comparison (Fig. 10): TCP
//!   Westwood (original and Westwood+), Hoe's method, TCP-Rab's receiver-side estimate.
//!
//! # Using it from a driver
//!
//! **Inline (TCP).** Create `ImtcpBuffer::new(ControlConfig { .. })` and give it to the TCP
//! sender as its `SendBuffer`; the sender owns it, and whoever reads the estimates (a
//! controller, the simulator's world, an application) reads them through the sender (in
//! `headroom-sim`: `TcpConn::buffer` holds it as `SenderBuffer::Imtcp`). The sender must:
//! 1. call `on_window(now, send_window)` before releasing segments (otherwise the window is
//!    inferred from the ACKs, which is wrong after a timeout, see [`control`]);
//! 2. call `release(now, seg)` for every segment its window lets go (retransmissions that go
//!    through the buffer have `seg.retransmission = true`);
//! 3. then call `poll_transmit(now)` until it returns `None`, putting each segment on the wire;
//! 4. arm a wake-up at `next_wakeup()` (clamped to now) and poll again then;
//! 5. call `on_ack(&ev)` for every ACK *before* letting TCP release new segments for it, with
//!    `ev.rtt` (RTT sample of that ACK), `ev.in_flight` (= snd_max − snd_una, held segments
//!    included) and `ev.mss` filled; call `on_retransmit(now)` on fast retransmit and timeout.
//!
//! At any instant process ACKs and releases before polling. Results: `poll_estimate()` drains
//! the [`Estimate`] stream (one per finished measurement); `smoothed()` is the EWMA (γ = 1/8)
//! that ImTCP-bg and the full-speed mode read; `stats()` counts streams, failures, timeouts,
//! and hold times; `take_first_packet_waits()` drains the Fig. 9 samples.
//!
//! **Echo mode.** Create `EchoProber::new(EchoConfig { .. })`. Loop: send a datagram of
//! `p.size` bytes carrying `p.id` for every `p` returned by `poll_transmit(now)`; wake at
//! `next_wakeup()`; when the receiver's echo of `id` arrives call `on_echo(now, id)`; drain
//! `poll_estimate()`.
//!
//! **Passive.** Feed the same `AckEvent`s to [`passive::Westwood`] and [`passive::Hoe`]
//! (`on_ack`), and the receiver's data arrivals to [`passive::Rab::on_data_arrival`]; read
//! `estimate()` or drain `poll_estimate()`.

pub mod algorithm;
pub mod control;
pub mod echo;
pub mod passive;
pub mod trend;

#[cfg(test)]
pub(crate) mod testpath;

pub use algorithm::{
    ConfigError, MeasurementConfig, MeasurementStats, Measurer, MinWidth, RoundOutcome, SearchRange, StreamKey,
    StreamKind, StreamPlan,
};
pub use control::{
    ControlConfig, ControlState, ControlStats, FirstPacketWait, ImtcpBuffer, MPolicy, PassReason, StoringRate,
    StoringTimer,
};
pub use echo::{EchoConfig, EchoProber, Probe, StreamSpacing};
pub use passive::{Hoe, PassiveEstimator, Rab, Westwood, WestwoodVariant};
pub use trend::{Trend, TrendConfig, TrendReport};

use crate::units::{Rate, Time};

/// One available-bandwidth measurement result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// When the measurement finished.
    pub time: Time,
    /// The measured available bandwidth `A`.
    pub value: Rate,
    /// The search range `(B_l, B_u)` this measurement searched (zero for passive estimators).
    pub search_range: (Rate, Rate),
    /// False when `A` fell outside the search range and `value` is the temporary bound
    /// (`B_u` or `B_l`, §3.2.5).
    pub in_range: bool,
}
