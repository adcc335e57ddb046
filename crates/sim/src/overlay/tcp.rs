//! The overlay simulator's TCP: a connection's two halves, with SYN / SYN-ACK, a sender whose
//! bytes come from a store of bounded size (the proxy's send buffer) and a receiver whose
//! advertised window is the free space of its buffer (the proxy's receive buffer).
//!
//! Simplifications (stated so the numbers can be judged): the active opener is always the data
//! receiver (client or proxy) and the passive side the data sender; the request rides in the SYN
//! and the third packet of the handshake is a plain ACK that starts the data; every segment is
//! ACKed at once (no delayed ACK, as ns-2's default `Agent/TCPSink`); timestamps give an RTT
//! sample on every new ACK; NewReno (core's [`Reno`]) with ns-2's RTO parameters
//! ([`RtoParams::NS2`]); go-back-N after a timeout; a sender blocked by a zero window with
//! nothing in flight sends an empty window probe when its timer fires; no FIN (a transfer ends
//! with its last byte).

use std::collections::BTreeMap;

use headroom_core::cc::{AckAction, AckEvent, CongestionControl, Recovery, Reno, RenoConfig, SentEvent};
use headroom_core::rtt::RttEstimator;
use headroom_core::units::{Bytes, Dur, Time};

use super::engine::{Body, Engine, HopId, NodeId, Pkt};
use super::payload::{Payload, Run, Runs};
use super::Local;
use crate::tcp::RtoParams;

/// Segment payload size.
pub const MSS: u64 = 1460;

/// Which half of a connection a timer belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Half {
    Sender,
    Receiver,
}

/// A lazily re-armed timer: at most one pending event earlier than or at its deadline.
#[derive(Clone, Copy, Debug, Default)]
struct Timer {
    deadline: Option<Time>,
    pending: Option<Time>,
}

impl Timer {
    fn arm(&mut self, eng: &mut Engine<Local>, at: Time, hop: HopId, half: Half) {
        self.deadline = Some(at);
        if self.pending.is_none_or(|p| at < p) {
            eng.schedule(at, Local::Timer { hop, half });
            self.pending = Some(at);
        }
    }
    fn clear(&mut self) {
        self.deadline = None;
    }
    /// An event fired: is the timer due now? (Re-schedules itself when the deadline moved on.)
    fn fire(&mut self, eng: &mut Engine<Local>, hop: HopId, half: Half) -> bool {
        if self.pending == Some(eng.now) {
            self.pending = None;
        }
        match self.deadline {
            Some(d) if d <= eng.now => {
                self.deadline = None;
                true
            }
            Some(d) => {
                if self.pending.is_none_or(|p| d < p) {
                    eng.schedule(d, Local::Timer { hop, half });
                    self.pending = Some(d);
                }
                false
            }
            None => false,
        }
    }
}

fn rto_params() -> RtoParams {
    RtoParams::NS2
}

/// The passive side's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxState {
    Listen,
    SynReceived,
    Established,
}

/// The data sender of one connection.
pub struct Sender {
    pub node: NodeId,
    pub peer: NodeId,
    pub hop: HopId,
    pub state: TxState,
    /// Bytes of the whole transfer.
    pub total: u64,
    /// Bytes `[snd_una, written)`: unacknowledged and unsent (the send buffer).
    store: Runs,
    pub store_cap: u64,
    /// Bytes written into the stream so far (by the generator or the relay).
    pub written: u64,
    /// The server's content key, when this sender generates its bytes itself.
    generator: Option<u64>,
    pub snd_una: u64,
    snd_nxt: u64,
    snd_max: u64,
    peer_edge: u64,
    peer_window: u64,
    cc: Reno,
    rtt: RttEstimator,
    rto: Dur,
    timer: Timer,
    dupacks: u32,
    idle_since: Option<Time>,
    /// Time spent established, unfinished, with nothing in flight and nothing to send.
    pub idle: Dur,
    pub segments: u64,
    pub retransmits: u64,
    pub timeouts: u64,
}

impl Sender {
    pub fn new(node: NodeId, peer: NodeId, hop: HopId, total: u64, store_cap: u64, generator: Option<u64>) -> Sender {
        let cfg = RenoConfig { initial_window: 2, ..RenoConfig::default() };
        Sender {
            node,
            peer,
            hop,
            state: TxState::Listen,
            total,
            store: Runs::default(),
            store_cap,
            written: 0,
            generator,
            snd_una: 0,
            snd_nxt: 0,
            snd_max: 0,
            peer_edge: 0,
            peer_window: 0,
            cc: Reno::new(Recovery::NewReno, cfg),
            rtt: RttEstimator::new(),
            rto: rto_params().initial,
            timer: Timer::default(),
            dupacks: 0,
            idle_since: None,
            idle: Dur::ZERO,
            segments: 0,
            retransmits: 0,
            timeouts: 0,
        }
    }

    pub fn done(&self) -> bool {
        self.snd_una >= self.total
    }

    /// Free space of the send buffer.
    pub fn room(&self) -> u64 {
        (self.store_cap.min(self.total - self.snd_una)).saturating_sub(self.store.len())
    }

    /// The relay writes bytes into the send buffer (at most [`Sender::room`]).
    pub fn write(&mut self, bytes: Run) {
        self.store.push(bytes);
        self.written += bytes.len;
    }

    /// A server fills its send buffer with the next bytes of its stream.
    fn top_up(&mut self) {
        if let Some(key) = self.generator {
            self.write(Run { key, from: self.written, len: self.room() });
        }
    }

    fn arm_rto(&mut self, eng: &mut Engine<Local>) {
        let g = rto_params().granularity.as_nanos().max(1);
        let at = Time((eng.now + self.rto).as_nanos().div_ceil(g) * g);
        self.timer.arm(eng, at, self.hop, Half::Sender);
    }

    fn send(&self, eng: &mut Engine<Local>, body: Body) {
        eng.forward(self.node, Pkt { src: self.node, dst: self.peer, hop: self.hop, body });
    }

    /// A SYN (new or retransmitted) arrived.
    pub fn on_syn(&mut self, eng: &mut Engine<Local>) {
        if self.state == TxState::Established {
            return;
        }
        self.state = TxState::SynReceived;
        self.send(eng, Body::SynAck);
        self.arm_rto(eng);
    }

    /// An ACK arrived.
    pub fn on_ack(&mut self, eng: &mut Engine<Local>, ack: u64, window: u64, echo: Option<Time>) {
        let now = eng.now;
        if self.state == TxState::SynReceived {
            self.state = TxState::Established;
            self.timer.clear();
            self.rto = rto_params().initial;
            self.peer_edge = ack + window;
            self.peer_window = window;
            self.try_send(eng);
            return;
        }
        if self.state != TxState::Established {
            return;
        }
        let window_changed = window != self.peer_window;
        self.peer_window = window;
        self.peer_edge = self.peer_edge.max(ack + window);
        let mut rtt = None;
        let newly = if ack > self.snd_una {
            let n = ack - self.snd_una;
            self.store.drain_front(n);
            self.snd_una = ack;
            self.snd_nxt = self.snd_nxt.max(ack);
            self.dupacks = 0;
            if let Some(ts) = echo {
                let r = now.saturating_since(ts);
                self.rtt.on_sample(r);
                let p = rto_params();
                self.rto = self.rtt.rto(p.granularity, p.min, p.max).unwrap_or(self.rto);
                rtt = Some(r);
            }
            n
        } else {
            if ack == self.snd_una && self.snd_una < self.snd_max && !window_changed {
                self.dupacks += 1;
            }
            0
        };
        if newly == 0 && self.dupacks == 0 {
            // A pure window update: nothing for the controller.
            self.try_send(eng);
            return;
        }
        let ev = AckEvent {
            now,
            ack,
            newly_acked: Bytes(newly),
            dup_acks: self.dupacks,
            rtt,
            srtt: self.rtt.srtt(),
            min_rtt: self.rtt.min_rtt(),
            delivery_rate: None,
            in_flight: Bytes(self.snd_max.saturating_sub(self.snd_una)),
            snd_max: self.snd_max,
            mss: Bytes(MSS),
            // The overlay engine's segments carry no TCP timestamps (no controller here reads
            // one-way delay).
            timestamps: None,
        };
        match self.cc.on_ack(&ev) {
            AckAction::None => {}
            AckAction::FastRetransmit | AckAction::RetransmitHole => self.retransmit_first(eng),
        }
        if self.snd_una >= self.snd_max {
            self.timer.clear();
        } else if newly > 0 {
            self.arm_rto(eng);
        }
        self.try_send(eng);
    }

    fn segment(&mut self, eng: &mut Engine<Local>, seq: u64, len: u64) {
        let off = seq - self.snd_una;
        let bytes = self.store.payload(off, off + len);
        let retransmission = seq < self.snd_max;
        self.segments += 1;
        if retransmission {
            self.retransmits += 1;
        }
        self.cc.on_sent(&SentEvent {
            now: eng.now,
            seq,
            len: Bytes(len),
            retransmission,
            in_flight: Bytes(self.snd_max.saturating_sub(self.snd_una)),
        });
        self.send(eng, Body::Data { seq, ts: eng.now, bytes });
    }

    fn retransmit_first(&mut self, eng: &mut Engine<Local>) {
        let len = MSS.min(self.written - self.snd_una);
        if len > 0 && self.snd_una < self.snd_max {
            self.segment(eng, self.snd_una, len);
        }
    }

    /// Sends what the windows and the buffer allow.
    pub fn try_send(&mut self, eng: &mut Engine<Local>) {
        if self.state != TxState::Established {
            return;
        }
        self.top_up();
        let mut blocked_by_peer = false;
        while self.snd_nxt < self.written {
            let len = MSS.min(self.written - self.snd_nxt);
            let cwnd_edge = self.snd_una + self.cc.window().cwnd.0.max(MSS);
            if self.snd_nxt + len > cwnd_edge {
                break;
            }
            if self.snd_nxt + len > self.peer_edge {
                blocked_by_peer = true;
                break;
            }
            let seq = self.snd_nxt;
            self.segment(eng, seq, len);
            self.snd_nxt += len;
            self.snd_max = self.snd_max.max(self.snd_nxt);
            if self.timer.deadline.is_none() {
                self.arm_rto(eng);
            }
        }
        if blocked_by_peer && self.snd_una == self.snd_max && self.timer.deadline.is_none() {
            // Persist: probe the zero window when the timer fires.
            self.arm_rto(eng);
        }
        self.track_idle(eng.now);
    }

    fn track_idle(&mut self, now: Time) {
        let idle = self.state == TxState::Established
            && !self.done()
            && self.snd_una == self.snd_max
            && self.snd_nxt >= self.written;
        match (idle, self.idle_since) {
            (true, None) => self.idle_since = Some(now),
            (false, Some(s)) => {
                self.idle += now.saturating_since(s);
                self.idle_since = None;
            }
            _ => {}
        }
    }

    /// The sender's timer fired.
    pub fn on_timer(&mut self, eng: &mut Engine<Local>) {
        if !self.timer.fire(eng, self.hop, Half::Sender) {
            return;
        }
        match self.state {
            TxState::Listen => {}
            TxState::SynReceived => {
                self.rto = Dur(self.rto.as_nanos().saturating_mul(2)).min(rto_params().max);
                self.send(eng, Body::SynAck);
                self.arm_rto(eng);
            }
            TxState::Established => {
                self.rto = Dur(self.rto.as_nanos().saturating_mul(2)).min(rto_params().max);
                if self.snd_una < self.snd_max {
                    self.timeouts += 1;
                    self.cc.on_timeout(eng.now, Bytes(self.snd_max - self.snd_una));
                    self.snd_nxt = self.snd_una;
                    self.dupacks = 0;
                    self.arm_rto(eng);
                    self.try_send(eng);
                } else if self.snd_nxt < self.written {
                    // Zero-window probe.
                    self.send(eng, Body::Data { seq: self.snd_nxt, ts: eng.now, bytes: Payload::EMPTY });
                    self.arm_rto(eng);
                }
            }
        }
    }

    /// Closes the idle-time account at the end of a run.
    pub fn finish(&mut self, now: Time) {
        if let Some(s) = self.idle_since.take() {
            self.idle += now.saturating_since(s);
        }
    }
}

/// Where a receiver's in-order bytes go.
pub enum Sink {
    /// The client: every byte is compared with its server's stream `key`
    /// ([`Run::mismatches`]) and the bytes that differ are counted.
    Check { key: u64, mismatches: u64 },
    /// The proxy: the receive buffer the relay drains into the next connection's send buffer.
    Relay(Runs),
}

/// The active opener's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxState {
    Closed,
    SynSent,
    Established,
}

/// The data receiver of one connection (client or proxy).
pub struct Receiver {
    pub node: NodeId,
    /// Where its packets go: the server, or the proxy that split the connection.
    pub peer: NodeId,
    pub hop: HopId,
    pub state: RxState,
    pub document: u64,
    pub rcv_nxt: u64,
    ooo: BTreeMap<u64, Payload>,
    /// Receive buffer size: the advertised window is what of it the sink has not drained.
    pub cap: u64,
    pub sink: Sink,
    last_edge: u64,
    timer: Timer,
    rto: Dur,
}

impl Receiver {
    pub fn new(node: NodeId, peer: NodeId, hop: HopId, document: u64, cap: u64, sink: Sink) -> Receiver {
        Receiver {
            node,
            peer,
            hop,
            state: RxState::Closed,
            document,
            rcv_nxt: 0,
            ooo: BTreeMap::new(),
            cap,
            sink,
            last_edge: 0,
            timer: Timer::default(),
            rto: rto_params().initial,
        }
    }

    fn send(&self, eng: &mut Engine<Local>, body: Body) {
        eng.forward(self.node, Pkt { src: self.node, dst: self.peer, hop: self.hop, body });
    }

    /// Sends the SYN.
    pub fn open(&mut self, eng: &mut Engine<Local>) {
        self.state = RxState::SynSent;
        self.send(eng, Body::Syn { document: self.document });
        let at = eng.now + self.rto;
        self.timer.arm(eng, at, self.hop, Half::Receiver);
    }

    pub fn window(&self) -> u64 {
        let held = match &self.sink {
            Sink::Check { .. } => 0,
            Sink::Relay(buf) => buf.len(),
        };
        self.cap.saturating_sub(held)
    }

    fn ack(&mut self, eng: &mut Engine<Local>, echo: Option<Time>) {
        let window = self.window();
        self.last_edge = self.rcv_nxt + window;
        self.send(eng, Body::Ack { ack: self.rcv_nxt, window, echo });
    }

    pub fn on_synack(&mut self, eng: &mut Engine<Local>) {
        if self.state == RxState::SynSent {
            self.state = RxState::Established;
            self.timer.clear();
        }
        self.ack(eng, None);
    }

    /// Bytes `skip..` of `bytes` are the next in order: checked (client) or buffered (proxy).
    fn deliver(&mut self, bytes: &Payload, skip: u64) {
        for r in bytes.runs_from(skip) {
            match &mut self.sink {
                Sink::Check { key, mismatches } => *mismatches += r.mismatches(*key, self.rcv_nxt),
                Sink::Relay(buf) => buf.push(r),
            }
            self.rcv_nxt += r.len;
        }
    }

    /// A data segment arrived; returns the bytes newly delivered in order.
    pub fn on_data(&mut self, eng: &mut Engine<Local>, seq: u64, ts: Time, bytes: Payload) -> u64 {
        let before = self.rcv_nxt;
        let end = seq + bytes.len();
        if !bytes.is_empty() && end > self.rcv_nxt {
            if seq <= self.rcv_nxt {
                self.deliver(&bytes, self.rcv_nxt - seq);
                while let Some((&s, _)) = self.ooo.first_key_value() {
                    if s > self.rcv_nxt {
                        break;
                    }
                    let (s, b) = self.ooo.pop_first().expect("non-empty");
                    if s + b.len() > self.rcv_nxt {
                        self.deliver(&b, self.rcv_nxt - s);
                    }
                }
            } else {
                self.ooo.entry(seq).or_insert(bytes);
            }
        }
        self.ack(eng, Some(ts));
        self.rcv_nxt - before
    }

    /// The sink drained its buffer: advertise the larger window when it moved by a segment.
    pub fn window_update(&mut self, eng: &mut Engine<Local>) {
        if self.state == RxState::Established && self.rcv_nxt + self.window() >= self.last_edge + MSS {
            self.ack(eng, None);
        }
    }

    /// The receiver's timer fired (SYN retransmission).
    pub fn on_timer(&mut self, eng: &mut Engine<Local>) {
        if !self.timer.fire(eng, self.hop, Half::Receiver) {
            return;
        }
        if self.state == RxState::SynSent {
            self.rto = Dur(self.rto.as_nanos().saturating_mul(2)).min(rto_params().max);
            self.send(eng, Body::Syn { document: self.document });
            let at = eng.now + self.rto;
            self.timer.arm(eng, at, self.hop, Half::Receiver);
        }
    }

    pub fn complete(&self) -> bool {
        self.rcv_nxt >= self.document
    }
}
