//! The overlay simulator's network: an event queue, packets that carry their payload bytes, and
//! unidirectional links with a DropTail queue and optional Bernoulli loss.
//!
//! It is separate from [`crate::net`] (whose packets are `Copy` headers without payload) so that
//! the existing scenarios stay byte-identical and so that relayed bytes are real bytes: the proxy
//! copies what it received into what it sends, and the receiver checks every byte (the bytes
//! travel as runs of the servers' keyed streams: [`super::payload`]).
//! The link model is [`crate::net`]'s: serialisation at the link rate, then `delay`; a FIFO
//! limited in waiting packets (the one in service not counted); tail drop; static shortest-path
//! routes (breadth-first, ties by link order).

use std::collections::VecDeque;

use headroom_core::rng::Rng;
use headroom_core::units::{Bytes, Dur, Rate, Time};

use super::payload::Payload;
use crate::event_heap::{EventHeap, Keyed};
use crate::wire::{earlier, Wire, WireEvent};

pub type NodeId = u16;
pub type HopId = u32;

/// TCP/IP header bytes of every packet (no options counted).
pub const HEADER: u32 = 40;

/// What a packet is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// Opens the connection; carries the size of the requested document (the request rides in
    /// the SYN, so policy B can see it).
    Syn {
        document: u64,
    },
    SynAck,
    /// Cumulative ACK `ack`, advertised window `window`, echoed timestamp.
    Ack {
        ack: u64,
        window: u64,
        echo: Option<Time>,
    },
    /// A data segment starting at byte `seq`, sent at `ts`; an empty one is a window probe.
    Data {
        seq: u64,
        ts: Time,
        bytes: Payload,
    },
}

impl Body {
    pub fn is_syn_or_synack(&self) -> bool {
        matches!(self, Body::Syn { .. } | Body::SynAck)
    }
}

/// A packet: from node `src` to node `dst`, of TCP connection `hop`.
#[derive(Clone, Debug)]
pub struct Pkt {
    pub src: NodeId,
    pub dst: NodeId,
    pub hop: HopId,
    pub body: Body,
}

impl Pkt {
    /// Bytes on the wire.
    pub fn size(&self) -> u32 {
        HEADER
            + match &self.body {
                Body::Data { bytes, .. } => bytes.len() as u32,
                _ => 0,
            }
    }
}

/// A link's description.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSpec {
    pub from: NodeId,
    pub to: NodeId,
    pub rate: Rate,
    pub delay: Dur,
    /// Waiting packets (the one in service not counted).
    pub queue: usize,
    /// Bernoulli loss probability of each packet entering the link.
    pub loss: f64,
}

struct Link {
    spec: LinkSpec,
    /// `(time, seq)` key of the free event of the link's last transmission: the link is busy
    /// while the event in progress comes before it (see [`Engine`]'s "Links' events").
    free_at: (Time, u64),
    waiting: VecDeque<Pkt>,
    rng: Rng,
    drops: u64,
    losses: u64,
    tx_packets: u64,
}

impl Link {
    /// Starts serialising `pkt` at `now`: takes from `seq` the keys of the transmission's free
    /// event and of the packet's arrival at the far node, in that order, and returns them.
    fn start(&mut self, pkt: &Pkt, now: Time, seq: &mut u64) -> ((Time, u64), (Time, u64)) {
        self.tx_packets += 1;
        let tx = Bytes(u64::from(pkt.size())).time_at(self.spec.rate);
        let free = (now + tx, *seq);
        self.free_at = free;
        let arrival = (now + tx + self.spec.delay, *seq + 1);
        *seq += 2;
        (free, arrival)
    }
}

/// Events: the network's and the endpoints' (the world dispatches the latter).
#[derive(Clone, Debug)]
pub enum Ev<E> {
    Arrive { node: NodeId, pkt: Pkt },
    Local(E),
}

/// Link counters for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkCounters {
    pub tx_packets: u64,
    pub drops: u64,
    pub losses: u64,
}

/// The network: time, the event queue, links and routes.
///
/// # Links' events
/// The order of events is that of their `(time, seq)` keys (`seq` counts the events scheduled),
/// and a transmission takes two keys when it starts: its link's free event, then the packet's
/// arrival at the far node. As in [`crate::net`] (see its "Hot path"), neither needs a place in
/// the endpoints' heap; both are in a [`Wire`]:
/// - a link's arrivals are due in the order it sent them (each transmission starts after the
///   previous one ended and every packet waits the same `delay`, which never changes here), so
///   each link keeps them in a FIFO (its lane) and only the lane's first one sits in a small
///   heap of the links' own;
/// - a free event with no packet waiting behind it would only make its link idle: the link
///   keeps the event's key (`free_at`) and is busy while the event in progress (`cur`) comes
///   before it, which is the answer the event would have given at its place in the order. Only
///   when a packet waits does the free event enter the links' heap, where it starts the next
///   transmission at that same place.
///
/// [`Engine::pop_until`] takes the earlier of the two heaps' first entries, so events run in
/// exactly the order one heap of every event gave.
pub struct Engine<E> {
    pub now: Time,
    /// `(time, seq)` key of the event in progress; after [`Engine::pop_until`] found nothing more
    /// due, `(until, u64::MAX)`.
    cur: (Time, u64),
    /// Endpoint events (timers, CPU, flow starts).
    heap: EventHeap<E>,
    /// Each link's pending arrivals and, while packets wait, its free event.
    wire: Wire<Pkt>,
    seq: u64,
    links: Vec<Link>,
    nodes: usize,
    routes: Vec<Option<u32>>,
    /// Events run: those popped from the heaps (a link's free event with nobody waiting, which
    /// never enters them, is not counted).
    pub events: u64,
}

impl<E: Copy> Engine<E> {
    /// `nodes` nodes joined by `links`; link `i`'s random losses draw from `rng.fork(i)`.
    pub fn new(nodes: usize, links: Vec<LinkSpec>, rng: &Rng) -> Engine<E> {
        let links: Vec<Link> = links
            .into_iter()
            .enumerate()
            .map(|(i, spec)| Link {
                spec,
                free_at: (Time::ZERO, 0),
                waiting: VecDeque::new(),
                rng: rng.fork(1000 + i as u64),
                drops: 0,
                losses: 0,
                tx_packets: 0,
            })
            .collect();
        // Breadth-first search from every destination over the reversed links (adjacency lists
        // in link order, so ties go to the lower link index).
        let mut into: Vec<Vec<u32>> = vec![Vec::new(); nodes];
        for (li, l) in links.iter().enumerate() {
            into[l.spec.to as usize].push(li as u32);
        }
        let mut routes = vec![None; nodes * nodes];
        for dst in 0..nodes {
            let mut seen = vec![false; nodes];
            seen[dst] = true;
            let mut frontier = VecDeque::from([dst]);
            while let Some(v) = frontier.pop_front() {
                for &li in &into[v] {
                    let u = links[li as usize].spec.from as usize;
                    if !seen[u] {
                        seen[u] = true;
                        routes[u * nodes + dst] = Some(li);
                        frontier.push_back(u);
                    }
                }
            }
        }
        Engine {
            now: Time::ZERO,
            cur: (Time::ZERO, 0),
            heap: EventHeap::with_capacity(64),
            wire: Wire::new(links.len()),
            seq: 0,
            links,
            nodes,
            routes,
            events: 0,
        }
    }

    /// Schedules the endpoints' event `ev` at `at` (not before now).
    pub fn schedule(&mut self, at: Time, ev: E) {
        self.heap.push(Keyed { time: at.max(self.now).0, seq: self.seq, ev });
        self.seq += 1;
    }

    /// The next event at or before `until`. Free events of links with packets waiting are
    /// handled here, at their place in the order.
    pub fn pop_until(&mut self, until: Time) -> Option<Ev<E>> {
        loop {
            let Some((key, wire_first)) = earlier(self.wire.peek_key(), self.heap.peek_key()) else {
                return self.idle_until(until);
            };
            let key = (Time(key.0), key.1);
            if key.0 > until {
                return self.idle_until(until);
            }
            self.now = key.0;
            self.cur = key;
            self.events += 1;
            if !wire_first {
                return self.heap.pop().map(|e| Ev::Local(e.ev));
            }
            match self.wire.peek()? {
                WireEvent::Arrival(li) => {
                    let pkt = self.wire.pop_arrival(li).expect("a lane's entry is in the heap only while it has one");
                    return Some(Ev::Arrive { node: self.links[li as usize].spec.to, pkt });
                }
                WireEvent::Free(li) => {
                    // The link finished serialising: the first waiting packet starts; its free
                    // event takes this one's place while more wait behind it.
                    let link = &mut self.links[li as usize];
                    let pkt = link.waiting.pop_front().expect("a free event is in the heap only while packets wait");
                    let (free, arrival) = link.start(&pkt, self.now, &mut self.seq);
                    let next = (!link.waiting.is_empty()).then_some((free.0 .0, free.1));
                    self.wire.replace_free(li, next);
                    self.schedule_arrival(li, arrival, pkt);
                }
            }
        }
    }

    /// Nothing more is due by `until`: every event up to it has run.
    fn idle_until(&mut self, until: Time) -> Option<Ev<E>> {
        self.cur = self.cur.max((until, u64::MAX));
        None
    }

    /// Puts `pkt`, now at `node`, on the next link toward its destination (dropped silently
    /// when there is no route: scenario validation rules that out).
    pub fn forward(&mut self, node: NodeId, pkt: Pkt) {
        let Some(li) = self.routes[node as usize * self.nodes + pkt.dst as usize] else { return };
        let link = &mut self.links[li as usize];
        if link.spec.loss > 0.0 && link.rng.bernoulli(link.spec.loss) {
            link.losses += 1;
            return;
        }
        if link.free_at <= self.cur {
            // Idle: the free event of its last transmission, if any, has had its turn.
            let (_, arrival) = link.start(&pkt, self.now, &mut self.seq);
            self.schedule_arrival(li, arrival, pkt);
        } else if link.waiting.len() < link.spec.queue {
            if link.waiting.is_empty() {
                // The first packet to wait: the free event now has work to do in the heap.
                let (time, seq) = link.free_at;
                self.wire.push_free(li, (time.0, seq));
            }
            link.waiting.push_back(pkt);
        } else {
            link.drops += 1;
        }
    }

    /// Puts the arrival `(time, seq)` of `pkt` over link `li` in the link's lane.
    fn schedule_arrival(&mut self, li: u32, (at, seq): (Time, u64), pkt: Pkt) {
        if self.wire.push_arrival(li, at.0, seq, pkt).is_err() {
            unreachable!("fixed link delays keep every lane in order");
        }
    }

    pub fn link_counters(&self, li: usize) -> LinkCounters {
        let l = &self.links[li];
        LinkCounters { tx_packets: l.tx_packets, drops: l.drops, losses: l.losses }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(len: u64) -> Pkt {
        Pkt { src: 0, dst: 1, hop: 0, body: Body::Data { seq: 0, ts: Time::ZERO, bytes: Payload::of(1, 0, len) } }
    }

    #[test]
    fn a_link_is_busy_until_its_free_event_has_had_its_turn() {
        // 12 Mbit/s: 1460 + 40 bytes take exactly 1 ms. A packet handed to the link at 1 ms by an
        // event scheduled before the first packet's transmission finds the link busy (its free
        // event comes later in the order) and waits; by one scheduled after it, finds it idle.
        // With a queue of 0 the waiting packet is dropped, which shows which case happened.
        let spec =
            LinkSpec { from: 0, to: 1, rate: Rate::from_mbps(12), delay: Dur::from_millis(5), queue: 0, loss: 0.0 };
        for (local_first, drops) in [(true, 1), (false, 0)] {
            let mut eng: Engine<()> = Engine::new(2, vec![spec.clone()], &Rng::new(1));
            let at = Time::ZERO + Dur::from_millis(1);
            if local_first {
                eng.schedule(at, ());
            }
            eng.forward(0, data(1460));
            if !local_first {
                eng.schedule(at, ());
            }
            let mut arrivals = Vec::new();
            while let Some(ev) = eng.pop_until(Time::MAX) {
                match ev {
                    Ev::Local(()) => eng.forward(0, data(1460)),
                    Ev::Arrive { node, .. } => arrivals.push((node, eng.now)),
                }
            }
            assert_eq!(eng.link_counters(0).drops, drops, "local first: {local_first}");
            let ms = |m| Time::ZERO + Dur::from_millis(m);
            let expected = if local_first { vec![(1, ms(6))] } else { vec![(1, ms(6)), (1, ms(7))] };
            assert_eq!(arrivals, expected, "local first: {local_first}");
        }
    }

    #[test]
    fn waiting_packets_leave_one_after_another_in_order() {
        let spec =
            LinkSpec { from: 0, to: 1, rate: Rate::from_mbps(12), delay: Dur::from_millis(5), queue: 10, loss: 0.0 };
        let mut eng: Engine<()> = Engine::new(2, vec![spec], &Rng::new(1));
        for k in 0..4 {
            let mut p = data(1460);
            p.hop = k;
            eng.forward(0, p);
        }
        let mut got = Vec::new();
        while let Some(Ev::Arrive { pkt, .. }) = eng.pop_until(Time::MAX) {
            got.push((pkt.hop, eng.now.as_nanos() / 1_000_000));
        }
        assert_eq!(got, [(0, 6), (1, 7), (2, 8), (3, 9)]);
        assert_eq!(eng.link_counters(0).tx_packets, 4);
    }
}
