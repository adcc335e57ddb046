//! The simulator's TCP: one sender and one receiver per connection, driven by events, with the
//! congestion-control policy delegated to a [`CongestionControl`] from `headroom-core` and an
//! optional [`SendBuffer`] below the sender (ImTCP's buffer).
//!
//! # Sender
//! Byte sequence numbers; every segment but a transfer's last carries `mss` bytes, so segments
//! start on multiples of `mss`. Headers are 40 bytes (IPv4 + TCP, no options counted). The send
//! window is `min(max_window, cwnd, ceiling)` applied to `snd_nxt - snd_una` (BSD style: Reno's
//! window inflation during fast recovery lets new segments out). A cwnd below one segment sends
//! one segment at a time, every `srtt * mss / cwnd` (TCP Nice's fractional window).
//!
//! Retransmission timer per RFC 6298 (core's [`RttEstimator`]):
//! `RTO = max(min_rto, SRTT + max(G, 4 RTTVAR))`, at most `max_rto`; the deadline is rounded up
//! to a multiple of the clock granularity G (a coarse BSD timer fires only on its ticks). A
//! timeout doubles the RTO (exponential backoff, kept until a new RTT sample), tells the
//! controller, and goes back to `snd_una` (go-back-N, as BSD and ns-2 do without SACK). RTT
//! samples come from the TCP timestamps option (every new ACK gives one) or, without it, from
//! one timed segment at a time, never a retransmitted one (Karn's rule).
//!
//! Retransmissions triggered by the controller (fast retransmit, NewReno's partial ACKs) go on
//! the wire directly and tell the send buffer, which may flush (ImTCP §3.5).
//!
//! **SACK** ([`TcpParams::sack`], core's [`headroom_core::sack`]): the receiver reports up to
//! three blocks (RFC 2018) and the sender keeps a scoreboard. A loss is detected by the third
//! duplicate ACK or by RFC 6675's `IsLost(snd_una)`, whichever comes first; the controller
//! decides the reduction as without SACK (it hears `IsLost` as the third duplicate ACK). During
//! the recovery, which ends when the cumulative ACK reaches the recovery point, the sender sends
//! while `pipe` is at least one segment below min(ssthresh, cwnd), choosing with `NextSeg()`
//! (lost holes, then new data, then other holes); NewReno's partial ACKs retransmit nothing
//! themselves. After a timeout, go-back-N skips SACKed segments and the window counts only
//! unSACKed data. Off by default in [`TcpParams`]; scenarios turn it on unless they say
//! `sack = false` (the papers' scenarios do).
//! The send buffer ([`SenderBuffer`], owned by the connection) is told the send window
//! ([`SendBuffer::on_window`]) each time TCP is about to release segments; when it is ImTCP's,
//! each measurement result it finishes goes to the controller ([`CongestionControl::on_estimate`]). Passive estimators
//! ([`TapState`]) watch the connection's ACKs; they change nothing it sends.
//!
//! # Receiver
//! Cumulative ACKs. In-order segments are acknowledged at once, or with delayed ACK every second
//! segment or after `delack_timeout` (or at once when half the receive window is unacknowledged:
//! BSD's window update); out-of-order, duplicate and hole-filling segments are
//! acknowledged at once (RFC 5681 §4.2), as is the last segment of a finite transfer. The ACK
//! echoes `TS.Recent`, updated from segments that start at or before the last ACK sent
//! (RFC 7323 §4.3), so a delayed ACK echoes the earlier of its two segments.
//!
//! # Timestamps
//! With `timestamps` on (the default), every segment carries TSval and TSecr (RFC 7323): a data
//! segment's TSval is its departure time, its TSecr the newest TSval of the ACKs received; an
//! ACK's TSval is its departure time at the receiver, its TSecr the receiver's `TS.Recent`. Both
//! clocks are the simulation clock: no offset, no drift, nanosecond resolution (Linux ticks in
//! milliseconds). The sender takes an RTT sample from every new ACK's TSecr and hands both
//! values to the controller ([`AckTimestamps`]): `TSval − TSecr` is the one-way delay of the
//! echoed segment plus any delayed-ACK wait, what TCP-LP and LEDBAT measure. Options add no
//! bytes to the 40-byte header (as before: outputs did not change when the TSval of ACKs was
//! added).
//!
//! Connection set-up and tear-down are not simulated: a connection starts sending at its start
//! time with its initial window.

use std::collections::{BTreeSet, VecDeque};

use headroom_core::cc::{
    AckAction, AckEvent, AckTimestamps, CongestionControl, Segment, SendBuffer, SentEvent, Window,
};
use headroom_core::imtcp::ImtcpBuffer;
use headroom_core::rtt::RttEstimator;
use headroom_core::sack::{ReceiverSack, SackBlocks, Scoreboard};
use headroom_core::units::{Bytes, Dur, Rate, Time};

use crate::net::{Ev, Kind, Net, NodeId, Packet};
use crate::passive::TapState;

/// TCP/IP header bytes added to every segment; an ACK is exactly this size.
pub const HEADER: u32 = 40;

/// Retransmission-timer parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RtoParams {
    pub min: Dur,
    pub max: Dur,
    pub initial: Dur,
    /// Clock granularity G: enters the RTO formula and quantises timer deadlines.
    pub granularity: Dur,
}

impl RtoParams {
    /// ns-2's defaults (`minrto_ = 0.2 s`, `tcpTick_ = 0.01 s`, `rtxcur_init_ = 3 s`).
    pub const NS2: RtoParams = RtoParams {
        min: Dur::from_millis(200),
        max: Dur::from_secs(60),
        initial: Dur::from_secs(3),
        granularity: Dur::from_millis(10),
    };
    /// RFC 6298 as written: 1 s minimum and initial RTO, fine clock.
    pub const RFC6298: RtoParams = RtoParams {
        min: Dur::from_secs(1),
        max: Dur::from_secs(60),
        initial: Dur::from_secs(1),
        granularity: Dur::from_millis(1),
    };
    /// Linux: 200 ms minimum, 1 s initial, 1 ms clock (HZ=1000).
    pub const LINUX: RtoParams = RtoParams {
        min: Dur::from_millis(200),
        max: Dur::from_secs(120),
        initial: Dur::from_secs(1),
        granularity: Dur::from_millis(1),
    };
    /// 4.4BSD, the stack of BECC's 1997 testbed: 500 ms slow-timer ticks, 1 s minimum (2 ticks).
    pub const BSD: RtoParams = RtoParams {
        min: Dur::from_secs(1),
        max: Dur::from_secs(64),
        initial: Dur::from_secs(3),
        granularity: Dur::from_millis(500),
    };
}

/// Per-connection parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TcpParams {
    pub mss: u32,
    /// Maximum send window (the receiver's advertised window).
    pub max_window: u64,
    pub delayed_ack: bool,
    pub delack_timeout: Dur,
    pub timestamps: bool,
    /// Selective acknowledgements (RFC 2018) with RFC 6675 loss recovery.
    pub sack: bool,
    pub rto: RtoParams,
}

impl Default for TcpParams {
    fn default() -> Self {
        TcpParams {
            mss: 1460,
            max_window: 1 << 30,
            delayed_ack: false,
            delack_timeout: Dur::from_millis(100),
            timestamps: true,
            sack: false,
            rto: RtoParams::NS2,
        }
    }
}

/// Who opened a connection (what to tell when it completes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    Bulk(u32),
    Web(u32),
}

/// Counters of one connection.
#[derive(Clone, Copy, Debug, Default)]
pub struct TcpCounters {
    pub segments_sent: u64,
    pub retransmits: u64,
    pub fast_retransmits: u64,
    pub timeouts: u64,
    pub acks_received: u64,
    pub acks_sent: u64,
}

/// What sits below a connection's sender. The connection is its one owner; the world reads an
/// ImTCP unit's estimates and counters through the connection ([`TcpConn::imtcp`]), which is
/// why ImTCP is a variant of its own rather than one more `Box<dyn SendBuffer>`.
#[derive(Default)]
pub enum SenderBuffer {
    /// No buffer: each segment goes on the wire as the window releases it.
    #[default]
    Direct,
    /// ImTCP's control unit (ImTCP §3.3), boxed: it is large and most connections have none.
    Imtcp(Box<ImtcpBuffer>),
    /// Any other buffer (tests, experiment drivers).
    Custom(Box<dyn SendBuffer>),
}

impl SenderBuffer {
    /// The buffer as the sender drives it; `None` for [`SenderBuffer::Direct`].
    pub fn as_dyn_mut(&mut self) -> Option<&mut dyn SendBuffer> {
        match self {
            SenderBuffer::Direct => None,
            SenderBuffer::Imtcp(b) => Some(b.as_mut()),
            SenderBuffer::Custom(b) => Some(b.as_mut()),
        }
    }

    fn as_dyn(&self) -> Option<&dyn SendBuffer> {
        match self {
            SenderBuffer::Direct => None,
            SenderBuffer::Imtcp(b) => Some(b.as_ref()),
            SenderBuffer::Custom(b) => Some(b.as_ref()),
        }
    }

    /// Segments held (0 without a buffer).
    pub fn held(&self) -> usize {
        self.as_dyn().map_or(0, |b| b.held())
    }
}

/// One TCP connection: sender at `src`, receiver at `dst`.
pub struct TcpConn {
    pub slot: u32,
    pub gen: u32,
    pub src: NodeId,
    pub dst: NodeId,
    pub stat: u32,
    pub owner: Owner,
    pub params: TcpParams,
    pub cc: Box<dyn CongestionControl>,
    /// The send buffer below the sender; told TCP's send window before every round of releases
    /// (ImTCP §3.3 stores nothing while the window is below N; without the window it infers it
    /// from the ACKs, which after a timeout's cumulative ACK is the pre-timeout flight, not the
    /// collapsed cwnd).
    pub buffer: SenderBuffer,
    /// Passive estimators watching this connection's ACKs and its receiver's arrivals.
    pub tap: Option<TapState>,
    /// Bytes to transfer (`u64::MAX` for an endless bulk flow).
    pub total: u64,
    /// False once a bulk flow's stop time passed: no new data.
    pub sending: bool,
    pub snd_una: u64,
    pub snd_nxt: u64,
    pub snd_max: u64,
    dupacks: u32,
    /// RFC 6298's estimator (SRTT, RTTVAR, smallest and latest sample).
    pub rtt: RttEstimator,
    rto: Dur,
    rto_deadline: Option<Time>,
    rto_event: Option<Time>,
    karn: Option<(u64, Time)>,
    delivered: u64,
    /// (end sequence, bytes delivered when sent, send time) of segments in flight.
    sent_log: VecDeque<(u64, u64, Time)>,
    last_send: Time,
    /// The newest TSval of the receiver's ACKs (echoed as the data segments' TSecr).
    ack_tsval: Time,
    wakeup_event: Option<Time>,
    /// Partial ACKs seen in the current fast recovery (RFC 6582's timer rule).
    partial_acks: u32,
    /// With SACK: what the receiver reported holding above `snd_una`.
    scoreboard: Scoreboard,
    /// With SACK: the current RFC 6675 loss recovery.
    sack_recovery: Option<SackRecovery>,
    /// ImTCP measurement results already passed to the controller.
    estimates_fed: u64,
    // Receiver.
    pub rcv_nxt: u64,
    ooo: BTreeSet<u64>,
    /// With SACK: the receiver's blocks.
    rcv_sack: ReceiverSack,
    delack_pending: bool,
    delack_seq: u32,
    ts_recent: Time,
    last_ack_sent: u64,
    pub counters: TcpCounters,
    /// Instants of the first 64 retransmission timeouts (to check backoff).
    pub timeout_log: Vec<Time>,
    pub started: Time,
    pub completed: Option<Time>,
}

/// An RFC 6675 loss recovery in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SackRecovery {
    /// `RecoveryPoint`: `HighData` when the recovery began; it ends when the cumulative ACK
    /// reaches it.
    recovery_point: u64,
    /// `HighRxt`: the end of the highest segment retransmitted in this recovery.
    high_rxt: u64,
    /// PRR (RFC 6937): bytes the receiver got since the recovery began (`prr_delivered`),
    /// bytes sent since (`prr_out`), the flight when it began (`RecoverFS`), and what the
    /// last ACK allows to send (`sndcnt`, spent by sends until the next ACK).
    prr_delivered: u64,
    prr_out: u64,
    recover_fs: u64,
    sndcnt: u64,
}

/// What the world must do after a connection handled an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpOutcome {
    Nothing,
    /// The receiver has every byte of a finite transfer.
    ReceiverComplete,
}

impl TcpConn {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        slot: u32,
        gen: u32,
        src: NodeId,
        dst: NodeId,
        stat: u32,
        owner: Owner,
        params: TcpParams,
        cc: Box<dyn CongestionControl>,
        buffer: SenderBuffer,
        total: u64,
    ) -> TcpConn {
        TcpConn {
            slot,
            gen,
            src,
            dst,
            stat,
            owner,
            params,
            cc,
            buffer,
            tap: None,
            total,
            sending: true,
            snd_una: 0,
            snd_nxt: 0,
            snd_max: 0,
            dupacks: 0,
            rtt: RttEstimator::new(),
            rto: params.rto.initial,
            rto_deadline: None,
            rto_event: None,
            karn: None,
            delivered: 0,
            sent_log: VecDeque::new(),
            last_send: Time::ZERO,
            ack_tsval: Time::ZERO,
            wakeup_event: None,
            partial_acks: 0,
            scoreboard: Scoreboard::new(),
            sack_recovery: None,
            estimates_fed: 0,
            rcv_nxt: 0,
            ooo: BTreeSet::new(),
            rcv_sack: ReceiverSack::new(),
            delack_pending: false,
            delack_seq: 0,
            ts_recent: Time::ZERO,
            last_ack_sent: 0,
            counters: TcpCounters::default(),
            timeout_log: Vec::new(),
            started: Time::ZERO,
            completed: None,
        }
    }

    /// The sender has every byte acknowledged.
    pub fn sender_done(&self) -> bool {
        self.total != u64::MAX && self.snd_una >= self.total
    }

    /// Bytes the receiver holds beyond `rcv_nxt` (out-of-order segments).
    pub fn out_of_order_bytes(&self) -> u64 {
        self.ooo.iter().map(|&s| self.seg_len(s)).sum()
    }

    /// The ImTCP control unit below the sender, if it has one.
    pub fn imtcp(&self) -> Option<&ImtcpBuffer> {
        match &self.buffer {
            SenderBuffer::Imtcp(b) => Some(b),
            _ => None,
        }
    }

    /// The ImTCP control unit below the sender, to drain its estimates and samples.
    pub fn imtcp_mut(&mut self) -> Option<&mut ImtcpBuffer> {
        match &mut self.buffer {
            SenderBuffer::Imtcp(b) => Some(b),
            _ => None,
        }
    }

    pub fn cwnd(&self) -> Bytes {
        self.cc.window().cwnd
    }

    fn seg_len(&self, seq: u64) -> u64 {
        (self.params.mss as u64).min(self.total - seq)
    }

    pub fn start(&mut self, net: &mut Net) {
        self.started = net.now;
        self.try_send(net);
    }

    /// Sends what the window allows.
    pub fn try_send(&mut self, net: &mut Net) {
        let now = net.now;
        let mss = self.params.mss as u64;
        if let Some(b) = self.buffer.as_dyn_mut() {
            b.on_window(now, self.cc.window().send_window(Bytes(self.params.max_window)));
        }
        if self.sack_recovery.is_some() {
            self.send_in_sack_recovery(net);
            self.drain_buffer(net);
            self.schedule_controller_timer(net);
            return;
        }
        loop {
            if self.snd_nxt >= self.total || (!self.sending && self.snd_nxt >= self.snd_max) {
                break;
            }
            let len = self.seg_len(self.snd_nxt);
            if self.params.sack && self.snd_nxt < self.snd_max && self.scoreboard.is_sacked(self.snd_nxt) {
                // Go-back-N after a timeout skips what the receiver reported holding.
                self.snd_nxt += len;
                continue;
            }
            let win = self.cc.window();
            let send_window = win.send_window(Bytes(self.params.max_window)).0;
            let outstanding = self.snd_nxt - self.snd_una - self.scoreboard.sacked_below(self.snd_nxt);
            if win.cwnd.0 < mss && send_window > 0 {
                // Fractional window: one segment at a time, every srtt * mss / cwnd (the first
                // one at once: there is no RTT to space against yet).
                if outstanding > 0 {
                    break;
                }
                if let Some(srtt) = self.rtt.srtt().filter(|_| self.counters.segments_sent > 0) {
                    let due = self.last_send + srtt.mul_f64(mss as f64 / win.cwnd.0.max(1) as f64);
                    if now < due {
                        self.arm_wakeup(net, due);
                        break;
                    }
                }
            } else if outstanding + len > send_window {
                break;
            }
            if let Some(rate) = win.pacing_rate {
                let gap = Bytes(len + HEADER as u64).time_at(rate.max(Rate(1)));
                let due = self.last_send + gap;
                if self.counters.segments_sent > 0 && now < due {
                    self.arm_wakeup(net, due);
                    break;
                }
            }
            self.send_next_segment(net);
            if self.rto_deadline.is_none() {
                self.arm_rto(net);
            }
        }
        self.drain_buffer(net);
        self.schedule_controller_timer(net);
    }

    /// Sends the segment at `snd_nxt` (new data, or go-back-N after a timeout) through the send
    /// buffer, and advances `snd_nxt`.
    fn send_next_segment(&mut self, net: &mut Net) {
        let now = net.now;
        let seq = self.snd_nxt;
        let len = self.seg_len(seq);
        let retransmission = seq < self.snd_max;
        self.snd_nxt += len;
        self.snd_max = self.snd_max.max(self.snd_nxt);
        self.last_send = now;
        if !retransmission && self.karn.is_none() && !self.params.timestamps {
            self.karn = Some((seq, now));
        }
        if retransmission {
            self.counters.retransmits += 1;
        } else {
            self.sent_log.push_back((seq + len, self.delivered, now));
        }
        let seg = Segment { seq, len: Bytes(len), retransmission };
        self.cc.on_sent(&SentEvent {
            now,
            seq,
            len: Bytes(len),
            retransmission,
            in_flight: Bytes(self.snd_max - self.snd_una),
        });
        match self.buffer.as_dyn_mut() {
            Some(b) => b.release(now, seg),
            None => self.put_on_wire(net, seg),
        }
    }

    /// RFC 6675 §5 step (C): during a SACK recovery, send while `cwnd − pipe ≥ 1 SMSS`, where
    /// `cwnd` is min(controller's `ssthresh`, its `cwnd`) (step 4.2: `cwnd = ssthresh` on entry;
    /// Reno-family controllers inflate their `cwnd` for duplicate ACKs, which the pipe already
    /// accounts for), capped by the ceiling and the receiver's window. What to send is `NextSeg()`:
    /// a lost hole, else new data, else any hole below the highest SACKed byte.
    fn send_in_sack_recovery(&mut self, net: &mut Net) {
        let mss = self.params.mss as u64;
        // The scoreboard does not change while this runs: once a rule finds nothing above
        // HighRxt it finds nothing for the rest of the call.
        let (mut lost_left, mut holes_left) = (true, true);
        while self.sack_recovery.is_some_and(|r| r.sndcnt >= self.seg_len(self.snd_una)) {
            let high_rxt = self.sack_recovery.map_or(self.snd_una, |r| r.high_rxt.max(self.snd_una));
            let new_data = self.snd_max < self.total && self.sending;
            let mut hole = None;
            if lost_left {
                hole = self.scoreboard.next_seg(high_rxt, self.snd_max, mss, false, |q| self.seg_len(q));
                lost_left = hole.is_some();
            }
            if hole.is_none() && !new_data && holes_left {
                hole = self.scoreboard.next_seg(high_rxt, self.snd_max, mss, true, |q| self.seg_len(q));
                holes_left = hole.is_some();
            }
            let len = match hole {
                Some(seq) => self.seg_len(seq),
                None => self.seg_len(self.snd_max),
            };
            if let Some(seq) = hole {
                if let Some(r) = self.sack_recovery.as_mut() {
                    r.high_rxt = seq + len;
                    r.prr_out += len;
                    r.sndcnt = r.sndcnt.saturating_sub(len);
                }
                self.retransmit(net, seq);
            } else if new_data {
                self.snd_nxt = self.snd_max;
                self.send_next_segment(net);
                if let Some(r) = self.sack_recovery.as_mut() {
                    r.prr_out += len;
                    r.sndcnt = r.sndcnt.saturating_sub(len);
                }
            } else {
                return;
            }
        }
    }

    /// Proportional Rate Reduction (RFC 6937 §3, with PRR-SSRB): how much this ACK lets the
    /// recovery send. While `pipe` is above `ssthresh` the sender sends `ssthresh / RecoverFS`
    /// of what is delivered, so the window comes down to `ssthresh` smoothly over one RTT
    /// instead of in a burst or a silence; below it, it grows back toward `ssthresh` by at
    /// most one segment more than was delivered.
    fn prr_on_ack(&mut self, delivered: u64) {
        let mss = self.params.mss as u64;
        let Some(rec) = self.sack_recovery else { return };
        let win = self.cc.window();
        let ssthresh = Window { cwnd: win.ssthresh.min(win.cwnd), ..win }.send_window(Bytes(self.params.max_window)).0;
        let high_rxt = rec.high_rxt.max(self.snd_una);
        let pipe = self.scoreboard.pipe(self.snd_una, self.snd_max, high_rxt, mss, |q| self.seg_len(q));
        let prr_delivered = rec.prr_delivered + delivered;
        let sndcnt = if pipe > ssthresh {
            let allowed = (prr_delivered as u128 * ssthresh as u128).div_ceil(rec.recover_fs.max(1) as u128) as u64;
            allowed.saturating_sub(rec.prr_out)
        } else {
            let limit = prr_delivered.saturating_sub(rec.prr_out).max(delivered) + mss;
            (ssthresh - pipe).min(limit)
        };
        if let Some(r) = self.sack_recovery.as_mut() {
            r.prr_delivered = prr_delivered;
            r.sndcnt = sndcnt;
        }
    }

    fn drain_buffer(&mut self, net: &mut Net) {
        let now = net.now;
        let mut buffer = std::mem::take(&mut self.buffer);
        let Some(b) = buffer.as_dyn_mut() else { return };
        while let Some(seg) = b.poll_transmit(now) {
            self.put_on_wire(net, seg);
        }
        let next = b.next_wakeup();
        self.buffer = buffer;
        self.feed_estimate(now);
        if let Some(t) = next {
            self.arm_wakeup(net, t.max(now));
        }
    }

    /// Passes a measurement that ImTCP's buffer just finished to the controller
    /// ([`CongestionControl::on_estimate`]): called after the buffer saw an ACK and after it was
    /// polled, the two places a measurement can end. A measurement ends at most once per such
    /// event, so the latest result is the new one. Every result is passed, in range or not
    /// (out of range, the value is the bound ImTCP reports, §3.2.5).
    fn feed_estimate(&mut self, now: Time) {
        let SenderBuffer::Imtcp(b) = &self.buffer else { return };
        let m = b.measurer();
        let count = m.stats().estimates;
        if count > self.estimates_fed {
            self.estimates_fed = count;
            if let Some(e) = m.last_estimate() {
                self.cc.on_estimate(now, e.value);
            }
        }
    }

    fn put_on_wire(&mut self, net: &mut Net, seg: Segment) {
        self.counters.segments_sent += 1;
        net.send(
            self.src,
            Packet {
                kind: Kind::Data,
                dst: self.dst,
                size: seg.len.0 as u32 + HEADER,
                endpoint: self.slot,
                gen: self.gen,
                stat: self.stat,
                seq: seg.seq,
                ts: net.now,
                tsecr: self.ack_tsval,
                sack: SackBlocks::NONE,
            },
        );
    }

    fn retransmit_first_unacked(&mut self, net: &mut Net) {
        let seq = self.snd_una;
        if seq >= self.snd_max {
            return;
        }
        self.retransmit(net, seq);
    }

    /// Retransmits the segment at `seq` directly on the wire and tells the send buffer.
    fn retransmit(&mut self, net: &mut Net, seq: u64) {
        let len = self.seg_len(seq);
        self.karn = None;
        self.counters.retransmits += 1;
        self.last_send = net.now;
        self.cc.on_sent(&SentEvent {
            now: net.now,
            seq,
            len: Bytes(len),
            retransmission: true,
            in_flight: Bytes(self.snd_max - self.snd_una),
        });
        self.put_on_wire(net, Segment { seq, len: Bytes(len), retransmission: true });
        if let Some(b) = self.buffer.as_dyn_mut() {
            b.on_retransmit(net.now);
        }
        self.drain_buffer(net);
    }

    fn arm_wakeup(&mut self, net: &mut Net, t: Time) {
        if self.wakeup_event.is_none_or(|w| t < w) {
            net.schedule(t.max(net.now), Ev::Wakeup { conn: self.slot, gen: self.gen });
            self.wakeup_event = Some(t.max(net.now));
        }
    }

    fn schedule_controller_timer(&mut self, net: &mut Net) {
        if let Some(t) = self.cc.next_timer() {
            self.arm_wakeup(net, t);
        }
    }

    /// A wake-up event: controller timers, send-buffer releases, pacing.
    pub fn on_wakeup(&mut self, net: &mut Net) {
        let now = net.now;
        if self.wakeup_event == Some(now) {
            self.wakeup_event = None;
        }
        // A controller that is late by several periods gets each due instant in turn.
        let mut guard = 0;
        while let Some(t) = self.cc.next_timer() {
            if t > now || guard > 10_000 {
                break;
            }
            self.cc.on_timer(now);
            guard += 1;
        }
        self.try_send(net);
    }

    fn arm_rto(&mut self, net: &mut Net) {
        let deadline = Time(
            (net.now + self.rto).0.div_ceil(self.params.rto.granularity.0.max(1))
                * self.params.rto.granularity.0.max(1),
        );
        self.rto_deadline = Some(deadline);
        if self.rto_event.is_none_or(|e| deadline < e) {
            net.schedule(deadline, Ev::Rto { conn: self.slot, gen: self.gen });
            self.rto_event = Some(deadline);
        }
    }

    /// The retransmission timer event (lazily re-armed: one pending event at a time).
    pub fn on_rto_event(&mut self, net: &mut Net) {
        let now = net.now;
        if self.rto_event == Some(now) {
            self.rto_event = None;
        }
        let Some(deadline) = self.rto_deadline else { return };
        if deadline > now {
            if self.rto_event.is_none_or(|e| deadline < e) {
                net.schedule(deadline, Ev::Rto { conn: self.slot, gen: self.gen });
                self.rto_event = Some(deadline);
            }
            return;
        }
        if self.snd_una >= self.snd_max {
            self.rto_deadline = None;
            return;
        }
        self.counters.timeouts += 1;
        if self.timeout_log.len() < 64 {
            self.timeout_log.push(now);
        }
        self.partial_acks = 0;
        self.sack_recovery = None;
        self.rto = Dur(self.rto.0.saturating_mul(2)).min(self.params.rto.max);
        self.cc.on_timeout(now, Bytes(self.snd_max - self.snd_una));
        self.snd_nxt = self.snd_una;
        self.dupacks = 0;
        self.karn = None;
        self.sent_log.clear();
        if let Some(b) = self.buffer.as_dyn_mut() {
            b.on_retransmit(now);
        }
        self.arm_rto(net);
        self.try_send(net);
    }

    fn update_rtt(&mut self, r: Dur) {
        self.rtt.on_sample(r);
        let p = self.params.rto;
        self.rto = self.rtt.rto(p.granularity, p.min, p.max).unwrap_or(self.rto);
    }

    /// An ACK arrived at the sender.
    pub fn on_ack(&mut self, net: &mut Net, p: &Packet) {
        let now = net.now;
        let ack = p.seq;
        self.counters.acks_received += 1;
        let sacked_before = self.scoreboard.sacked_bytes();
        if self.params.sack {
            self.scoreboard.on_ack(ack.max(self.snd_una), &p.sack);
        }
        self.ack_tsval = self.ack_tsval.max(p.ts);
        let mut rtt = None;
        let mut delivery_rate = None;
        let newly;
        if ack > self.snd_una {
            newly = ack - self.snd_una;
            self.snd_una = ack;
            if self.snd_nxt < ack {
                self.snd_nxt = ack;
            }
            self.dupacks = 0;
            if self.params.timestamps {
                rtt = Some(now.saturating_since(p.tsecr));
            } else if let Some((s, t)) = self.karn {
                if ack > s {
                    self.karn = None;
                    rtt = Some(now - t);
                }
            }
            if let Some(r) = rtt {
                self.update_rtt(r);
            }
            self.delivered += newly;
            let mut last = None;
            while let Some(&(end, _, _)) = self.sent_log.front() {
                if end > ack {
                    break;
                }
                last = self.sent_log.pop_front();
            }
            if let Some((_, delivered_then, sent_at)) = last {
                let dt = now.saturating_since(sent_at);
                if dt.0 > 0 {
                    delivery_rate = Some(Bytes(self.delivered - delivered_then).per(dt));
                }
            }
        } else if ack == self.snd_una && self.snd_max > self.snd_una {
            newly = 0;
            self.dupacks += 1;
        } else {
            return;
        }
        if self.sack_recovery.is_some_and(|r| ack >= r.recovery_point) {
            self.sack_recovery = None;
        }
        if self.sack_recovery.is_some() {
            // DeliveredData: what the cumulative ACK and the new SACK blocks report (RFC 6937).
            let delivered = (newly + self.scoreboard.sacked_bytes()).saturating_sub(sacked_before);
            self.prr_on_ack(delivered);
        }
        // RFC 6675 §5: a loss is also detected when IsLost(HighACK + 1), before the third
        // duplicate ACK (several segments SACKed by one ACK): the controller hears it as the
        // third duplicate ACK.
        let mut dup_acks = self.dupacks;
        if self.sack_recovery.is_some() {
            // One recovery per window (RFC 6675 §5: none starts before the cumulative ACK
            // passes the recovery point): the controller does not hear these as duplicates,
            // so Reno, which leaves its own recovery at the first partial ACK, does not reduce
            // again for holes the scoreboard is already repairing.
            dup_acks = 0;
        } else if self.params.sack
            && newly == 0
            && dup_acks < 3
            && !self.cc.in_recovery()
            && self.scoreboard.is_lost(self.snd_una, self.params.mss as u64)
        {
            dup_acks = 3;
            self.dupacks = 3;
        }
        let ev = AckEvent {
            now,
            ack,
            newly_acked: Bytes(newly),
            dup_acks,
            rtt,
            srtt: self.rtt.srtt(),
            min_rtt: self.rtt.min_rtt(),
            delivery_rate,
            in_flight: Bytes(self.snd_max - self.snd_una),
            snd_max: self.snd_max,
            mss: Bytes(self.params.mss as u64),
            timestamps: self.params.timestamps.then_some(AckTimestamps { tsval: p.ts, tsecr: p.tsecr }),
        };
        if let Some(t) = self.tap.as_mut() {
            t.on_ack(&ev);
        }
        if let Some(b) = self.buffer.as_dyn_mut() {
            b.on_ack(&ev);
        }
        self.feed_estimate(now);
        let action = self.cc.on_ack(&ev);
        if newly > 0 {
            // RFC 6298 (5.3): restart the timer on an ACK of new data; RFC 6582 §3.2 step 4
            // ("Impatient"): during fast recovery, only for the first partial ACK.
            if self.snd_una >= self.snd_max {
                self.rto_deadline = None;
            } else if action != AckAction::RetransmitHole || self.partial_acks == 0 {
                self.arm_rto(net);
            }
            if action == AckAction::RetransmitHole {
                self.partial_acks += 1;
            }
        }
        match action {
            AckAction::None => {}
            AckAction::FastRetransmit => {
                self.counters.fast_retransmits += 1;
                self.partial_acks = 0;
                if self.params.sack {
                    let len = self.seg_len(self.snd_una);
                    self.sack_recovery = Some(SackRecovery {
                        recovery_point: self.snd_max,
                        high_rxt: self.snd_una + len,
                        prr_delivered: 0,
                        prr_out: len,
                        recover_fs: self.snd_max - self.snd_una,
                        sndcnt: 0,
                    });
                }
                self.retransmit_first_unacked(net);
            }
            // With SACK the scoreboard, not the partial ACK, says which holes to resend.
            AckAction::RetransmitHole if self.params.sack => {}
            AckAction::RetransmitHole => self.retransmit_first_unacked(net),
        }
        if self.sender_done() {
            self.rto_deadline = None;
            return;
        }
        self.try_send(net);
    }

    /// A data segment arrived at the receiver. Returns the bytes that arrived for the first
    /// time (in order or not) and whether the transfer is now complete.
    pub fn on_data(&mut self, net: &mut Net, p: &Packet) -> (u64, TcpOutcome) {
        let seq = p.seq;
        let len = (p.size - HEADER) as u64;
        let before = self.rcv_nxt;
        let had_holes = !self.ooo.is_empty();
        let mut fresh_ooo = false;
        if seq <= self.last_ack_sent {
            self.ts_recent = p.ts;
        }
        if seq == self.rcv_nxt {
            self.rcv_nxt += len;
            while self.ooo.remove(&self.rcv_nxt) {
                self.rcv_nxt += self.seg_len(self.rcv_nxt);
            }
        } else if seq > self.rcv_nxt {
            fresh_ooo = self.ooo.insert(seq);
            if self.params.sack {
                self.rcv_sack.on_out_of_order(seq, seq + len);
            }
        }
        // New bytes: first arrival of this segment, in order or not.
        let new_bytes = if seq == before || fresh_ooo { len } else { 0 };
        let complete = self.total != u64::MAX && self.rcv_nxt >= self.total;
        let in_order = seq == before && !had_holes;
        // BSD's window update: once half the receive window is unacknowledged, an ACK goes out
        // at once (the application reads at once, so the window opened that much).
        let window_update = self.rcv_nxt - self.last_ack_sent >= self.params.max_window / 2;
        if !in_order || complete || !self.params.delayed_ack || self.delack_pending || window_update {
            self.send_ack(net);
        } else {
            self.delack_pending = true;
            self.delack_seq = self.delack_seq.wrapping_add(1);
            net.schedule(
                net.now + self.params.delack_timeout,
                Ev::DelAck { conn: self.slot, gen: self.gen, seq: self.delack_seq },
            );
        }
        let outcome = if complete && self.completed.is_none() {
            self.completed = Some(net.now);
            TcpOutcome::ReceiverComplete
        } else {
            TcpOutcome::Nothing
        };
        (new_bytes, outcome)
    }

    pub fn on_delack(&mut self, net: &mut Net, seq: u32) {
        if self.delack_pending && seq == self.delack_seq {
            self.send_ack(net);
        }
    }

    fn send_ack(&mut self, net: &mut Net) {
        self.delack_pending = false;
        self.last_ack_sent = self.rcv_nxt;
        self.counters.acks_sent += 1;
        let sack = if self.params.sack { self.rcv_sack.blocks(self.rcv_nxt) } else { SackBlocks::NONE };
        net.send(
            self.dst,
            Packet {
                kind: Kind::Ack,
                dst: self.src,
                size: HEADER,
                endpoint: self.slot,
                gen: self.gen,
                stat: self.stat,
                seq: self.rcv_nxt,
                ts: net.now,
                tsecr: self.ts_recent,
                sack,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::{Link, QueueLimit};

    /// A controller with a fixed window and an optional pacing rate.
    struct Fixed {
        cwnd: u64,
        pacing: Option<Rate>,
    }
    impl CongestionControl for Fixed {
        fn name(&self) -> &'static str {
            "fixed"
        }
        fn on_ack(&mut self, _: &AckEvent) -> AckAction {
            AckAction::None
        }
        fn on_timeout(&mut self, _: Time, _: Bytes) {}
        fn window(&self) -> Window {
            Window { cwnd: Bytes(self.cwnd), ssthresh: Bytes(u64::MAX), ceiling: None, pacing_rate: self.pacing }
        }
        fn in_recovery(&self) -> bool {
            false
        }
    }

    /// Runs one connection over a 100 Mb/s, 50 ms one-way path (with optional blackout) until
    /// `until`; returns it with the departure times of its data segments.
    fn drive(
        cc: Box<dyn CongestionControl>,
        params: TcpParams,
        outage: Option<(Time, Time)>,
        until: Time,
    ) -> (TcpConn, Vec<Time>) {
        let (c, departures, _) = drive_dropping(cc, params, outage, &[], until);
        (c, departures)
    }

    /// As [`drive`], and the first transmission of each data segment starting at a sequence
    /// number in `drop_once` is lost; also returns the sequence numbers of every segment that
    /// arrived again (retransmissions), in order.
    fn drive_dropping(
        cc: Box<dyn CongestionControl>,
        params: TcpParams,
        outage: Option<(Time, Time)>,
        drop_once: &[u64],
        until: Time,
    ) -> (TcpConn, Vec<Time>, Vec<u64>) {
        let mut dropped = BTreeSet::new();
        let mut arrived = BTreeSet::new();
        let mut resent = Vec::new();
        let mut fwd =
            Link::new("a->b".into(), 0, 1, Rate::from_mbps(100), Dur::from_millis(50), QueueLimit::Packets(1000));
        if let Some(o) = outage {
            fwd = fwd.with_outages(vec![o]);
        }
        let back =
            Link::new("b->a".into(), 1, 0, Rate::from_mbps(100), Dur::from_millis(50), QueueLimit::Packets(1000));
        let mut net = Net::new(vec!["a".into(), "b".into()], vec![fwd, back]);
        let mut c = TcpConn::new(0, 1, 0, 1, 0, Owner::Bulk(0), params, cc, SenderBuffer::Direct, u64::MAX);
        let mut departures = Vec::new();
        c.start(&mut net);
        while let Some(ev) = net.pop_until(until) {
            match ev {
                Ev::Arrive { pkt, .. } => {
                    let p = net.deliver(pkt);
                    match p.kind {
                        Kind::Data => {
                            // Left a->b (and finished serialising there) one delay ago.
                            departures.push(net.now - Dur::from_millis(50));
                            if drop_once.contains(&p.seq) && dropped.insert(p.seq) {
                                continue;
                            }
                            if !arrived.insert(p.seq) || dropped.contains(&p.seq) {
                                resent.push(p.seq);
                            }
                            c.on_data(&mut net, &p);
                        }
                        Kind::Ack => c.on_ack(&mut net, &p),
                        _ => unreachable!(),
                    }
                }
                Ev::Rto { .. } => c.on_rto_event(&mut net),
                Ev::DelAck { seq, .. } => c.on_delack(&mut net, seq),
                Ev::Wakeup { .. } => c.on_wakeup(&mut net),
                _ => unreachable!(),
            }
        }
        (c, departures, resent)
    }

    #[test]
    fn pacing_rate_spaces_segments() {
        // 1 Mb/s pacing: a 1500-byte packet every 12 ms whatever the window.
        let cc = Box::new(Fixed { cwnd: 1 << 30, pacing: Some(Rate::from_mbps(1)) });
        let (c, _) = drive(cc, TcpParams::default(), None, Time::from_secs_f64(1.0));
        let sent = c.counters.segments_sent;
        assert!((83..=85).contains(&sent), "{sent} segments in 1 s at 1 Mb/s pacing (expect ~84)");
    }

    #[test]
    fn fractional_window_sends_one_segment_every_few_rtts() {
        // cwnd = mss / 4: one segment every 4 smoothed RTTs (RTT ~100 ms) once the RTT is known.
        let cc = Box::new(Fixed { cwnd: 365, pacing: None });
        let (c, dep) = drive(cc, TcpParams::default(), None, Time::from_secs_f64(10.0));
        let gaps: Vec<f64> = dep.windows(2).skip(2).map(|w| (w[1] - w[0]).as_secs_f64()).collect();
        assert!(!gaps.is_empty());
        for g in &gaps {
            assert!((0.38..=0.45).contains(g), "gap {g:.3} s, expected ~4 RTTs: {gaps:?}");
        }
        assert!(c.counters.segments_sent >= 20 && c.counters.segments_sent <= 30, "{}", c.counters.segments_sent);
    }

    /// (`TSval − TSecr` in ns, RTT sample) of each ACK, shared with the test.
    type Samples = std::rc::Rc<std::cell::RefCell<Vec<(i64, Option<Dur>)>>>;

    /// Records the one-way delays (`TSval − TSecr`) and RTT samples of the ACKs it sees.
    struct Recorder {
        owd: Samples,
    }
    impl CongestionControl for Recorder {
        fn name(&self) -> &'static str {
            "recorder"
        }
        fn on_ack(&mut self, ev: &AckEvent) -> AckAction {
            let ts = ev.timestamps.expect("timestamps are on by default");
            self.owd.borrow_mut().push((ts.one_way_delay_ns(), ev.rtt));
            AckAction::None
        }
        fn on_timeout(&mut self, _: Time, _: Bytes) {}
        fn window(&self) -> Window {
            Window { cwnd: Bytes(2920), ssthresh: Bytes(u64::MAX), ceiling: None, pacing_rate: None }
        }
        fn in_recovery(&self) -> bool {
            false
        }
    }

    #[test]
    fn acks_carry_tsval_and_tsecr_whose_difference_is_the_one_way_delay() {
        // 50 ms each way at 100 Mb/s: data (1500 B) takes 50.12 ms forward, the ACK (40 B)
        // 50.0032 ms back. TSval − TSecr is the forward delay (the very first window's second
        // segment also waits 0.12 ms behind the first); with delayed ACKs it adds the wait for
        // the second segment or the 100 ms timer.
        let owd = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let cc = Box::new(Recorder { owd: owd.clone() });
        drive(cc, TcpParams::default(), None, Time::from_secs_f64(1.0));
        let got = owd.borrow().clone();
        assert!(got.len() > 10);
        assert_eq!(got[1].0, 50_240_000);
        for (d, rtt) in &got[2..] {
            assert_eq!(*d, 50_120_000, "one-way delay in ns");
            assert_eq!(rtt.unwrap().0, 50_120_000 + 50_003_200, "RTT from the echoed TSecr");
        }
        let owd = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let cc = Box::new(Recorder { owd: owd.clone() });
        let params = TcpParams { delayed_ack: true, ..TcpParams::default() };
        drive(cc, params, None, Time::from_secs_f64(1.0));
        let got = owd.borrow().clone();
        assert!(got.iter().all(|&(d, _)| d >= 50_120_000), "{got:?}");
        assert!(got.iter().any(|&(d, _)| d > 50_120_000), "a delayed ACK adds its wait: {got:?}");
    }

    #[test]
    fn karn_rule_ignores_retransmitted_segments() {
        // Without timestamps, the first segment is lost in a blackout and retransmitted after
        // the 1 s initial RTO: its ACK must not give a ~1.1 s RTT sample.
        let params = TcpParams { timestamps: false, rto: RtoParams::LINUX, ..TcpParams::default() };
        let cc = Box::new(Fixed { cwnd: 2920, pacing: None });
        let outage = Some((Time::ZERO, Time::from_secs_f64(0.5)));
        let (c, _) = drive(cc, params, outage, Time::from_secs_f64(5.0));
        assert!(c.counters.timeouts >= 1);
        let srtt = c.rtt.srtt().expect("later segments give samples").as_secs_f64();
        assert!((0.099..0.11).contains(&srtt), "srtt {srtt:.4} s (path RTT 100 ms)");
        assert!(c.rtt.min_rtt().unwrap().as_secs_f64() < 0.11);
    }

    #[test]
    fn sack_recovers_three_losses_in_one_window_without_a_timeout_and_never_resends_sacked_data() {
        use headroom_core::cc::{Reno, RenoConfig};
        let mss = 1460u64;
        // Segments 40, 43 and 47 of a window of about 60 are lost once.
        let drops = [40 * mss, 43 * mss, 47 * mss];
        let cfg = RenoConfig { mss: Bytes(mss), initial_ssthresh: Some(Bytes(60 * mss)), ..RenoConfig::default() };
        let run = |sack: bool| {
            let params = TcpParams { sack, ..TcpParams::default() };
            drive_dropping(Box::new(Reno::newreno(cfg)), params, None, &drops, Time::from_secs_f64(3.0))
        };
        let (c, _, resent) = run(true);
        assert_eq!(c.counters.timeouts, 0);
        assert_eq!(c.counters.fast_retransmits, 1, "one recovery for the three losses");
        assert_eq!(resent, drops.to_vec(), "exactly the three holes, each once, in order");
        assert_eq!(c.counters.retransmits, 3);
        assert!(c.snd_una > 200 * mss, "the transfer went on: {}", c.snd_una);
        // Without SACK, NewReno needs one round trip per hole (partial ACKs) and resends
        // nothing else either, but takes longer: the SACK sender is ahead after 3 s.
        let (plain, _, plain_resent) = run(false);
        assert_eq!(plain_resent, drops.to_vec());
        assert!(c.snd_una > plain.snd_una, "SACK {} vs NewReno {}", c.snd_una, plain.snd_una);
    }
}
