//! Congestion control: the sans-IO interface that every TCP sender in headroom drives (today the
//! simulator's TCP; the inline-measurement sender on sockets and the BPF `struct_ops` ports are
//! planned), and every controller behind it:
//!
//! - [`reno`] — Reno and NewReno (RFC 5681, RFC 6582), with the variants the papers' simulators used;
//! - [`becc`] — BECC's bandwidth window on Reno (Kugimoto & Amagai 1997);
//! - [`window_rule`] — Reno's loss recovery with another growth and reduction rule, the frame of:
//!   - [`highspeed`] — HighSpeed TCP (RFC 3649);
//!   - [`cubic`] — CUBIC (RFC 9438, Linux defaults);
//!   - [`westwood`] — Westwood+ (BWE × RTT_min after a loss);
//!   - [`imtcp_fullspeed`] — ImTCP's full-speed mode (§5.2), growth from the inline estimate.
//! - [`imtcp_bg`] — ImTCP-bg (Tsugawa et al., seed 000) and ImTCP's background mode (§5.1),
//!   bounds on Reno's window from ImTCP's measurement, plus [`ImtcpBgLimit`] for drivers that do
//!   not own the window.
//! - [`vegas`] — TCP Vegas (Brakmo & Peterson 1995);
//! - [`nice`] — TCP Nice on Vegas (Venkataramani, Kokku & Dahlin 2002), background transfer;
//! - [`lp`] — TCP-LP (Kuzmanovic & Knightly 2003), background transfer, as Linux `tcp_lp.c`;
//! - [`ledbat`] — LEDBAT (RFC 6817), background transfer.
//!
//! Each controller is one file here; the planned ones (HighSpeed TCP, Westwood+, CUBIC, ImTCP's
//! full-speed mode) land beside them.
//!
//! # Division of labour
//!
//! The *sender* owns the mechanics: sequence numbers, the retransmission queue, duplicate-ACK
//! counting, the retransmission timer (RFC 6298), Karn's rule, the receive window. The
//! *controller* ([`CongestionControl`]) owns the policy: how the congestion window (`cwnd`) and the
//! slow-start threshold move, when fast retransmit happens (Reno waits for the third duplicate
//! ACK), what a partial ACK in fast recovery means (Reno leaves recovery, NewReno retransmits
//! the next hole, RFC 6582), an optional third window that caps the send window (ImTCP-bg's
//! `maxcwnd`, BECC's `bandwidth_window`) and an optional pacing rate.
//!
//! The sender feeds events:
//! - [`CongestionControl::on_ack`] for every ACK, new or duplicate, with its arrival time,
//!   the bytes newly acknowledged, an RTT sample (from the TCP timestamps option, or from Karn's
//!   rule without it), the run of duplicate ACKs, a delivery-rate sample and the ACK's
//!   timestamps option ([`AckTimestamps`]: TSval and TSecr, whence a one-way delay);
//! - [`CongestionControl::on_timeout`] when the retransmission timer fires;
//! - [`CongestionControl::on_timer`] at the instant the controller asked for with
//!   [`CongestionControl::next_timer`] (BECC's 30 ms and 1.5 s timers);
//! - [`CongestionControl::on_sent`] for every segment that leaves;
//! - [`CongestionControl::on_estimate`] for every result of the inline measurement below it
//!   (ImTCP's buffer), when the sender has one.
//!
//! and reads the decision back with [`CongestionControl::window`]: send window =
//! min(receiver window, cwnd, ceiling). A cwnd below one segment (TCP Nice lets it fall to 1/48)
//! is legal: the sender then sends one segment every `mss / cwnd` smoothed RTTs.
//!
//! Below TCP sits an optional [`SendBuffer`] (ImTCP's "ImTCP buffer"): segments released by the
//! window go into it and it decides when each one leaves; it sees every ACK's arrival time.

pub mod becc;
pub mod cubic;
pub mod highspeed;
pub mod imtcp_bg;
pub mod imtcp_fullspeed;
pub mod ledbat;
pub mod lp;
pub mod nice;
pub mod reno;
pub mod vegas;
pub mod westwood;
pub mod window_rule;

pub use becc::Becc;
pub use cubic::Cubic;
pub use highspeed::HighSpeed;
pub use imtcp_bg::{ImtcpBackground, ImtcpBg, ImtcpBgLimit};
pub use reno::{Recovery, Reno, RenoConfig, SsthreshRule};
pub use westwood::WestwoodPlus;
pub use window_rule::{RenoRecovery, WindowRule};

use crate::units::{Bytes, Dur, Rate, Time};

/// One ACK as the sender saw it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AckEvent {
    /// Arrival time of the ACK at the sender.
    pub now: Time,
    /// Cumulative acknowledgement (next byte expected by the receiver).
    pub ack: u64,
    /// Bytes newly acknowledged by this ACK (0 for a duplicate ACK).
    pub newly_acked: Bytes,
    /// Consecutive duplicate ACKs including this one (0 when this ACK acknowledged new data).
    pub dup_acks: u32,
    /// RTT sample carried by this ACK (TCP timestamps echo, or Karn-valid sample).
    pub rtt: Option<Dur>,
    /// Smoothed RTT of the sender after this sample (RFC 6298 `SRTT`).
    pub srtt: Option<Dur>,
    /// Smallest RTT sample seen on the connection.
    pub min_rtt: Option<Dur>,
    /// Delivery-rate sample: bytes delivered between the send of the acknowledged segment and
    /// this ACK, divided by the elapsed time (None when not measurable).
    pub delivery_rate: Option<Rate>,
    /// Bytes in flight after this ACK was processed.
    pub in_flight: Bytes,
    /// Highest sequence number sent so far (`snd_max`); NewReno's `recover` point.
    pub snd_max: u64,
    /// Sender maximum segment size.
    pub mss: Bytes,
    /// The ACK's TCP timestamps option (RFC 7323), `None` without the option: what Linux hands
    /// its controllers as `rx_opt.rcv_tsval` / `rx_opt.rcv_tsecr` (TCP-LP's and LEDBAT's
    /// one-way delay).
    pub timestamps: Option<AckTimestamps>,
}

/// The timestamps option of an ACK (RFC 7323 §3), in each end's own clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AckTimestamps {
    /// TSval: the receiver's clock when it sent this ACK.
    pub tsval: Time,
    /// TSecr: the sender's clock when it sent the segment this ACK echoes (`TS.Recent`: for a
    /// delayed ACK, the earlier of the two segments it acknowledges; RFC 7323 §4.3).
    pub tsecr: Time,
}

impl AckTimestamps {
    /// `TSval − TSecr` in nanoseconds: the one-way delay of the echoed segment plus the time
    /// the receiver held its ACK (delayed ACK) plus the offset between the two clocks (signed:
    /// with an offset it may be negative). Delay-based controllers use only its differences
    /// from a minimum, in which a constant offset cancels.
    pub fn one_way_delay_ns(&self) -> i64 {
        self.tsval.0 as i64 - self.tsecr.0 as i64
    }
}

/// What the controller asks the sender to do about an ACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckAction {
    /// Nothing beyond sending whatever the new window allows.
    None,
    /// Enter fast recovery: retransmit the first unacknowledged segment now.
    FastRetransmit,
    /// A partial ACK during recovery (NewReno): retransmit the first unacknowledged segment and
    /// stay in recovery.
    RetransmitHole,
}

/// The windows the controller decides.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    /// Congestion window in bytes; may be smaller than one segment.
    pub cwnd: Bytes,
    /// Slow-start threshold.
    pub ssthresh: Bytes,
    /// A third window capping the send window (ImTCP-bg maxcwnd, BECC bandwidth window);
    /// `None` means unlimited.
    pub ceiling: Option<Bytes>,
    /// Pacing rate; `None` sends as fast as the window allows (ACK clocking).
    pub pacing_rate: Option<Rate>,
}

impl Window {
    /// The send window: min(receiver window, cwnd, ceiling).
    pub fn send_window(&self, receiver_window: Bytes) -> Bytes {
        let w = self.cwnd.min(receiver_window);
        match self.ceiling {
            Some(c) => w.min(c),
            None => w,
        }
    }
}

/// A segment leaving the sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SentEvent {
    pub now: Time,
    pub seq: u64,
    pub len: Bytes,
    pub retransmission: bool,
    pub in_flight: Bytes,
}

/// A congestion controller: a state machine fed with the sender's events.
pub trait CongestionControl {
    /// Short name ("reno", "newreno", "becc", ...).
    fn name(&self) -> &'static str;
    /// Called for every ACK (new or duplicate).
    fn on_ack(&mut self, ev: &AckEvent) -> AckAction;
    /// The retransmission timer fired; `in_flight` is what was outstanding.
    fn on_timeout(&mut self, now: Time, in_flight: Bytes);
    /// A segment left the sender.
    fn on_sent(&mut self, _ev: &SentEvent) {}
    /// The controller's own timer, at the instant returned by [`Self::next_timer`].
    fn on_timer(&mut self, _now: Time) {}
    /// When the controller next wants [`Self::on_timer`]; `None` for never.
    fn next_timer(&self) -> Option<Time> {
        None
    }
    /// A new available-bandwidth measurement result `A` from the inline measurement below the
    /// sender (ImTCP's buffer), delivered by the sender that owns both as soon as the
    /// measurement finishes (ImTCP-bg, ImTCP's background mode); others ignore it.
    fn on_estimate(&mut self, _now: Time, _available: Rate) {}
    /// The current windows.
    fn window(&self) -> Window;
    /// Whether the controller is in fast recovery.
    fn in_recovery(&self) -> bool;
    /// Bytes of per-connection state this controller keeps (reported by experiments).
    fn state_size(&self) -> usize {
        std::mem::size_of_val(self)
    }
    /// The controller's own measure of the rate the path delivers, if it keeps one (BECC's
    /// smoothed actual transfer rate `t_msrd_th`, the curve of the BECC paper's Fig. 12); traced
    /// by the simulator with `[trace] measured_rate = true`.
    fn measured_rate(&self) -> Option<Rate> {
        None
    }
}

impl<T: CongestionControl + ?Sized> CongestionControl for Box<T> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn on_ack(&mut self, ev: &AckEvent) -> AckAction {
        (**self).on_ack(ev)
    }
    fn on_timeout(&mut self, now: Time, in_flight: Bytes) {
        (**self).on_timeout(now, in_flight)
    }
    fn on_sent(&mut self, ev: &SentEvent) {
        (**self).on_sent(ev)
    }
    fn on_timer(&mut self, now: Time) {
        (**self).on_timer(now)
    }
    fn next_timer(&self) -> Option<Time> {
        (**self).next_timer()
    }
    fn on_estimate(&mut self, now: Time, available: Rate) {
        (**self).on_estimate(now, available)
    }
    fn window(&self) -> Window {
        (**self).window()
    }
    fn in_recovery(&self) -> bool {
        (**self).in_recovery()
    }
    fn state_size(&self) -> usize {
        (**self).state_size()
    }
    fn measured_rate(&self) -> Option<Rate> {
        (**self).measured_rate()
    }
}

/// A data segment as the send buffer sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub seq: u64,
    pub len: Bytes,
    pub retransmission: bool,
}

/// A sender-side packet buffer below TCP (ImTCP §3.1's "ImTCP buffer", a FIFO).
///
/// TCP *releases* a segment into the buffer when its window allows; the buffer decides when the
/// segment actually leaves. It may hold segments and send them at times it chooses (to shape
/// them into probe streams) and it sees every ACK's arrival time. The driver loop is:
///
/// 1. before letting segments go, tell the buffer TCP's send window with
///    [`SendBuffer::on_window`] (min(receiver window, cwnd, ceiling), see [`Window::send_window`]);
/// 2. [`SendBuffer::release`] each segment TCP lets go;
/// 3. at any time, repeatedly [`SendBuffer::poll_transmit`] and send what it returns;
/// 4. wake up at [`SendBuffer::next_wakeup`] and poll again;
/// 5. report ACK arrivals with [`SendBuffer::on_ack`] and fast retransmits / timeouts with
///    [`SendBuffer::on_retransmit`].
///
/// The buffer must never lose a segment: everything released is eventually returned.
pub trait SendBuffer {
    /// TCP's send window at `now`, told before the sender releases segments (each time it
    /// evaluates its window). ImTCP §3.3 stores nothing while the window is below a stream's N
    /// segments; a buffer that ignores the window keeps this default.
    fn on_window(&mut self, _now: Time, _send_window: Bytes) {}
    /// TCP released a segment at `now`.
    fn release(&mut self, now: Time, seg: Segment);
    /// The next segment to transmit now, if any is due.
    fn poll_transmit(&mut self, now: Time) -> Option<Segment>;
    /// When the buffer next wants to be polled (`None`: only after the next event).
    fn next_wakeup(&self) -> Option<Time>;
    /// An ACK arrived.
    fn on_ack(&mut self, _ev: &AckEvent) {}
    /// TCP retransmits (fast retransmit or timeout); ImTCP flushes and pauses measuring.
    fn on_retransmit(&mut self, _now: Time) {}
    /// Segments currently held.
    fn held(&self) -> usize;
}

/// The transparent buffer: every segment leaves as soon as it is released.
#[derive(Debug, Default)]
pub struct PassThrough {
    queue: std::collections::VecDeque<Segment>,
}

impl SendBuffer for PassThrough {
    fn release(&mut self, _now: Time, seg: Segment) {
        self.queue.push_back(seg);
    }
    fn poll_transmit(&mut self, _now: Time) -> Option<Segment> {
        self.queue.pop_front()
    }
    fn next_wakeup(&self) -> Option<Time> {
        None
    }
    fn held(&self) -> usize {
        self.queue.len()
    }
}
