//! The network half of the simulator: the event queue, the packet slab, nodes with static
//! routes, and unidirectional links with a DropTail queue.
//!
//! # Time and ordering
//! Time is integer nanoseconds ([`Time`]). Events at the same instant run in the order they were
//! scheduled (a global sequence number breaks ties), so a run is a pure function of the scenario
//! and the seed.
//!
//! # Links
//! A link serialises one packet at a time at its rate and delivers it `delay` later at the far
//! node. Packets that find the link busy wait in a FIFO limited in packets or in bytes; the
//! limit counts waiting packets only, not the one being serialised (ns-2's DropTail does the
//! same). An arriving packet that does not fit is dropped (tail drop).
//!
//! Optionally a link loses packets at random (Bernoulli, its own seeded stream) or drops
//! everything during blackout intervals; both happen as a packet enters the link.
//!
//! # Hot path
//! Packets live in a slab (`Vec<Packet>` plus a free list) and events carry their index, so the
//! heap moves 32-byte entries and nothing is allocated per packet once the slab has grown.
//!
//! Most pending events are packets propagating on links (a 50 Mbit/s, 140 ms path holds about
//! a thousand). A link's arrivals are due in the order it sent them: each starts after the
//! previous one finished serialising and every one waits the same `delay`, and the sequence
//! numbers grow, so their `(time, seq)` keys grow too. Each link therefore keeps its pending
//! arrivals in a FIFO (its lane, [`crate::wire::Wire`]) and only the first one sits in the heap; popping it puts the
//! next one in its place. The heap holds a few entries per link and connection instead of
//! every packet in flight, and since the keys are the same `(time, seq)` pairs, events come out
//! in exactly the order one heap of all of them gives. An arrival that would not keep its
//! lane in order (a link whose delay was changed mid-run) goes into the heap itself.
//!
//! The other half of the events used to be "link free" (a link finished serialising). There is
//! still one such event per transmission, with its `(time, seq)` key taken when the
//! transmission starts, but it is in the heap only while packets wait behind it
//! ([`WireEvent::Free`]): then it starts the next transmission, at its place in the order, and
//! assigns that transmission's keys as it always did. A link's free event with nobody waiting
//! only made the link idle. Now the link keeps that event's key (`free_at`) and is busy for as
//! long as the event in progress ([`Net::pop_until`]'s last key) comes before it: the same
//! answer the event would have given at the same place in the order. On a path whose first
//! and last hops are faster than the bottleneck, most links are idle when a packet arrives,
//! and their free events never reach the heap. Events are counted as before, the free events
//! that never reached the heap included ([`Net::counters`]).
//!
//! The links' entries (lane heads and free events, at most two per link) have a heap of their
//! own, apart from the endpoints' events (timers of every connection, wake-ups, samples: a web
//! scenario keeps hundreds). [`Net::pop_until`] takes the earlier of the two heaps' first
//! entries, so the order is still that of the `(time, seq)` keys, and the packet events, four
//! in five of all, sift through a heap of a few entries. Both heaps are
//! [`crate::event_heap::EventHeap`]s (why not std's: see there), and a link remembers the
//! transmission time of the last packet size it sent, which saves a 64-bit division per packet.

use std::collections::VecDeque;

use headroom_core::sack::SackBlocks;
use headroom_core::units::{Dur, Rate, Time};

use headroom_core::rng::Rng;

use crate::event_heap::{EventHeap, Keyed};
use crate::wire::{earlier, Wire, WireEvent};

pub type NodeId = u16;
pub type LinkId = u32;
pub const NO_ROUTE: LinkId = u32::MAX;

/// What a packet is, for the endpoint that receives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// TCP data segment: `seq` is the first byte, `ts` the TSval (departure time), `tsecr` the
    /// TSval of the last ACK the sender received.
    Data,
    /// TCP ACK: `seq` is the cumulative ACK, `ts` the receiver's TSval (departure time), `tsecr`
    /// the echoed TSval of the data segment (RFC 7323 `TS.Recent`).
    Ack,
    /// UDP datagram: `ts` is its departure time.
    Udp,
    /// A web request: `seq` carries the size of the requested object.
    Request,
    /// A probe packet (PathQuick, pathChirp, ImTCP echo mode): `seq` is its id.
    Probe,
    /// The echo of a probe: `seq` is the probe's id, `ts` its arrival time at the receiver.
    Echo,
}

/// A packet on the wire. `size` includes all headers.
#[derive(Clone, Copy, Debug)]
pub struct Packet {
    pub kind: Kind,
    pub dst: NodeId,
    pub size: u32,
    /// Endpoint index: TCP connection slot, UDP flow or web client.
    pub endpoint: u32,
    /// Generation of the endpoint slot (a recycled TCP slot ignores old packets).
    pub gen: u32,
    /// Flow-statistics index (drops are charged to it).
    pub stat: u32,
    pub seq: u64,
    /// Departure stamp in the sending end's clock: a TCP segment's or ACK's TSval, a UDP
    /// datagram's or probe's departure time.
    pub ts: Time,
    /// SACK blocks of a TCP ACK (RFC 2018); empty otherwise.
    pub sack: SackBlocks,
    /// TCP only (`Time::ZERO` otherwise): TSecr, the echoed timestamp (an ACK echoes the
    /// data segment's TSval, a data segment the last ACK's).
    pub tsecr: Time,
}

/// Events of the simulation. (A link finishing a packet is handled inside [`Net`].)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ev {
    /// A packet arrives at a node.
    Arrive {
        pkt: u32,
        node: NodeId,
    },
    /// TCP retransmission timer check.
    Rto {
        conn: u32,
        gen: u32,
    },
    /// TCP delayed-ACK timer.
    DelAck {
        conn: u32,
        gen: u32,
        seq: u32,
    },
    /// TCP sender wake-up: controller timer, send-buffer release, pacing.
    Wakeup {
        conn: u32,
        gen: u32,
    },
    /// A bulk TCP flow starts or stops.
    BulkStart(u32),
    BulkStop(u32),
    /// A UDP source emits its next packet.
    UdpSend(u32),
    /// A web client requests its next page.
    WebPage(u32),
    /// A web client requests one more object of its page (with `object_gap`).
    WebObject {
        client: u32,
        size: u64,
    },
    /// A probe sender wakes up.
    ProbeWake(u32),
    /// Periodic trace sample.
    Sample,
}

/// Queue limit of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueLimit {
    Packets(u32),
    Bytes(u64),
}

/// A unidirectional link with its DropTail queue and counters.
#[derive(Debug)]
pub struct Link {
    pub name: String,
    pub from: NodeId,
    pub to: NodeId,
    pub rate: Rate,
    pub delay: Dur,
    pub limit: QueueLimit,
    queue: VecDeque<u32>,
    pub queued_bytes: u64,
    /// `(time, seq)` key of the free event of the link's last transmission: the link is busy
    /// while the event in progress comes before it.
    free_at: (u64, u64),
    /// That free event is in the heap neither now nor before (nothing waited behind it), so it
    /// has not been counted in [`Counters::events`] yet.
    free_uncounted: bool,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub drops: u64,
    /// Drops since the last trace sample.
    pub interval_drops: u64,
    pub max_queue_packets: usize,
    /// Bernoulli loss probability applied to packets entering the link (random loss).
    pub loss: f64,
    loss_rng: Rng,
    /// Packets lost at random (included in `drops`).
    pub random_losses: u64,
    /// Intervals [from, to) during which the link drops everything (a blackout).
    pub outages: Vec<(Time, Time)>,
    /// The last packet size serialised, the rate then, and its transmission time: a link mostly
    /// carries one size (data one way, ACKs the other), and this saves a division per packet.
    last_tx: (u32, Rate, Dur),
}

impl Link {
    pub fn new(name: String, from: NodeId, to: NodeId, rate: Rate, delay: Dur, limit: QueueLimit) -> Link {
        Link {
            name,
            from,
            to,
            rate,
            delay,
            limit,
            queue: VecDeque::new(),
            queued_bytes: 0,
            free_at: (0, 0),
            free_uncounted: false,
            tx_packets: 0,
            tx_bytes: 0,
            drops: 0,
            interval_drops: 0,
            max_queue_packets: 0,
            loss: 0.0,
            loss_rng: Rng::new(0),
            random_losses: 0,
            outages: Vec::new(),
            last_tx: (0, rate, Dur::ZERO),
        }
    }
    /// Sets random loss with its own deterministic random stream.
    pub fn with_loss(mut self, loss: f64, rng: Rng) -> Link {
        self.loss = loss;
        self.loss_rng = rng;
        self
    }
    /// Adds blackout intervals.
    pub fn with_outages(mut self, outages: Vec<(Time, Time)>) -> Link {
        self.outages = outages;
        self
    }
    fn down_at(&self, t: Time) -> bool {
        self.outages.iter().any(|&(a, b)| a <= t && t < b)
    }
    pub fn queued_packets(&self) -> usize {
        self.queue.len()
    }
    fn fits(&self, size: u32) -> bool {
        match self.limit {
            QueueLimit::Packets(n) => self.queue.len() < n as usize,
            QueueLimit::Bytes(b) => self.queued_bytes + size as u64 <= b,
        }
    }
}

/// Counters for packet conservation and speed reports.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counters {
    pub created: u64,
    pub delivered: u64,
    pub dropped: u64,
    pub events: u64,
}

/// Nodes, links, packets in flight and the event queue.
pub struct Net {
    pub now: Time,
    /// `(time, seq)` key of the event in progress; after [`Net::pop_until`] found nothing more
    /// due, `(until, u64::MAX)`: every event up to `until` has run.
    cur: (u64, u64),
    /// Endpoint and traffic events (timers, wake-ups, samples, ...).
    heap: EventHeap<Ev>,
    /// The links' entries and each link's pending arrivals (packet slots): at most one lane
    /// head and one free event per link in its heap, so a pop sifts through a few levels, not
    /// through every pending timer (see the module's "Hot path").
    wire: Wire<u32>,
    next_seq: u64,
    pkts: Vec<Packet>,
    free_pkts: Vec<u32>,
    pub links: Vec<Link>,
    pub node_names: Vec<String>,
    /// `routes[node * n + dst]` = first link from `node` toward `dst`.
    routes: Vec<LinkId>,
    counters: Counters,
    /// Drops charged to each flow-statistics index.
    pub drops_by_stat: Vec<u64>,
}

impl Net {
    pub fn new(node_names: Vec<String>, links: Vec<Link>) -> Net {
        let n = node_names.len();
        let mut net = Net {
            now: Time::ZERO,
            cur: (0, 0),
            heap: EventHeap::with_capacity(64),
            wire: Wire::new(links.len()),
            next_seq: 0,
            pkts: Vec::with_capacity(1024),
            free_pkts: Vec::new(),
            links,
            node_names,
            routes: vec![NO_ROUTE; n * n],
            counters: Counters::default(),
            drops_by_stat: Vec::new(),
        };
        net.compute_routes();
        net
    }

    /// Static routes: for every destination, a breadth-first search over reversed links gives
    /// each node the first link of a shortest path in hops (ties broken by link order, so the
    /// result is deterministic).
    fn compute_routes(&mut self) {
        let n = self.node_names.len();
        for dst in 0..n {
            let mut dist = vec![usize::MAX; n];
            dist[dst] = 0;
            let mut frontier = VecDeque::from([dst]);
            while let Some(v) = frontier.pop_front() {
                for (li, l) in self.links.iter().enumerate() {
                    let u = l.from as usize;
                    if l.to as usize == v && dist[u] == usize::MAX {
                        dist[u] = dist[v] + 1;
                        self.routes[u * n + dst] = li as LinkId;
                        frontier.push_back(u);
                    }
                }
            }
        }
    }

    /// Whether `dst` can be reached from `src`.
    pub fn reachable(&self, src: NodeId, dst: NodeId) -> bool {
        src == dst || self.routes[src as usize * self.node_names.len() + dst as usize] != NO_ROUTE
    }

    #[inline]
    pub fn schedule(&mut self, at: Time, ev: Ev) {
        debug_assert!(at >= self.now, "event scheduled in the past");
        self.heap.push(Keyed { time: at.0, seq: self.next_seq, ev });
        self.next_seq += 1;
    }

    /// Schedules packet `pkt`'s arrival over link `li` at `at`: in the link's lane when that
    /// keeps the lane in order (always, unless the link's delay changed), else in the heap.
    #[inline]
    fn schedule_arrival(&mut self, li: LinkId, at: Time, seq: u64, pkt: u32) {
        debug_assert!(at >= self.now, "event scheduled in the past");
        if let Err(pkt) = self.wire.push_arrival(li, at.0, seq, pkt) {
            let node = self.links[li as usize].to;
            self.heap.push(Keyed { time: at.0, seq, ev: Ev::Arrive { pkt, node } });
        }
    }

    /// The next event, if any is due at or before `until`. Free events of links with packets
    /// waiting are handled here, in their place in the order.
    #[inline]
    pub fn pop_until(&mut self, until: Time) -> Option<Ev> {
        loop {
            let first = earlier(self.wire.peek_key(), self.heap.peek_key());
            let Some((key, wire_first)) = first.filter(|f| f.0 .0 <= until.0) else {
                self.cur = self.cur.max((until.0, u64::MAX));
                return None;
            };
            self.now = Time(key.0);
            self.cur = key;
            self.counters.events += 1;
            if !wire_first {
                return self.heap.pop().map(|e| e.ev);
            }
            match self.wire.peek()? {
                WireEvent::Arrival(li) => {
                    let Some(pkt) = self.wire.pop_arrival(li) else {
                        // Not reached: a lane's entry is in the heap only while the lane has one.
                        self.wire.discard_top();
                        continue;
                    };
                    return Some(Ev::Arrive { pkt, node: self.links[li as usize].to });
                }
                WireEvent::Free(li) => {
                    // The link finished serialising: the first waiting packet starts. Its free
                    // event takes this one's place while more wait behind it.
                    let link = &mut self.links[li as usize];
                    let Some(idx) = link.queue.pop_front() else {
                        // Not reached: a free event is in the heap only while packets wait.
                        self.wire.discard_top();
                        continue;
                    };
                    let size = self.pkts[idx as usize].size;
                    link.queued_bytes -= size as u64;
                    let (free, arrival) = start_tx(link, size, self.now, &mut self.next_seq, &mut self.counters);
                    let waiting = !link.queue.is_empty();
                    if waiting {
                        link.free_uncounted = false;
                    }
                    self.wire.replace_free(li, waiting.then_some(free));
                    self.schedule_arrival(li, arrival.0, arrival.1, idx);
                }
            }
        }
    }

    pub fn packet(&self, idx: u32) -> &Packet {
        &self.pkts[idx as usize]
    }

    pub fn free(&mut self, idx: u32) {
        self.free_pkts.push(idx);
    }

    /// Packets that exist (in queues, on links, or waiting in an event).
    pub fn packets_in_network(&self) -> u64 {
        (self.pkts.len() - self.free_pkts.len()) as u64
    }

    /// Injects a new packet at node `at`.
    pub fn send(&mut self, at: NodeId, p: Packet) {
        self.counters.created += 1;
        let idx = match self.free_pkts.pop() {
            Some(i) => {
                self.pkts[i as usize] = p;
                i
            }
            None => {
                self.pkts.push(p);
                (self.pkts.len() - 1) as u32
            }
        };
        self.forward(at, idx);
    }

    /// Moves a packet that is at `node` (not its destination) onto the next link.
    pub fn forward(&mut self, node: NodeId, idx: u32) {
        let p = self.pkts[idx as usize];
        let n = self.node_names.len();
        let li = self.routes[node as usize * n + p.dst as usize];
        if li == NO_ROUTE {
            // Scenario validation rules this out; count it as a drop rather than panic.
            self.drop_packet(idx);
            return;
        }
        let now = self.now;
        let link = &mut self.links[li as usize];
        let lost =
            (link.loss > 0.0 && link.loss_rng.bernoulli(link.loss)) || (!link.outages.is_empty() && link.down_at(now));
        if lost {
            link.random_losses += 1;
            link.drops += 1;
            link.interval_drops += 1;
            self.drop_packet(idx);
            return;
        }
        if link.free_at <= self.cur {
            // Idle: the free event of its last transmission, if any, has had its turn.
            let (_, (at, seq)) = start_tx(link, p.size, now, &mut self.next_seq, &mut self.counters);
            self.schedule_arrival(li, at, seq, idx);
        } else if link.fits(p.size) {
            if link.queue.is_empty() {
                // The first packet to wait: the free event now has work to do in the heap.
                let (time, seq) = link.free_at;
                link.free_uncounted = false;
                self.wire.push_free(li, (time, seq));
            }
            link.queue.push_back(idx);
            link.queued_bytes += p.size as u64;
            link.max_queue_packets = link.max_queue_packets.max(link.queue.len());
        } else {
            link.drops += 1;
            link.interval_drops += 1;
            self.drop_packet(idx);
        }
    }

    fn drop_packet(&mut self, idx: u32) {
        let stat = self.pkts[idx as usize].stat as usize;
        if self.drops_by_stat.len() <= stat {
            self.drops_by_stat.resize(stat + 1, 0);
        }
        self.drops_by_stat[stat] += 1;
        self.counters.dropped += 1;
        self.free(idx);
    }

    /// Packet counters, and the events run so far: those popped from the heap and the free
    /// events of links that had nobody waiting, whose turn has come (see the module's "Hot path").
    pub fn counters(&self) -> Counters {
        let idle_frees = self.links.iter().filter(|l| l.free_uncounted && l.free_at <= self.cur).count() as u64;
        Counters { events: self.counters.events + idle_frees, ..self.counters }
    }

    /// A packet reached its destination: counts it and releases its slot.
    pub fn deliver(&mut self, idx: u32) -> Packet {
        self.counters.delivered += 1;
        let p = self.pkts[idx as usize];
        self.free(idx);
        p
    }
}

/// Starts serialising a packet of `size` bytes on `link` at `now`. Takes the keys of the
/// transmission's free event and of the packet's arrival at the far end from `next_seq` (in that
/// order, as when the free event was scheduled as an event) and returns them; the caller
/// schedules the arrival.
fn start_tx(
    link: &mut Link,
    size: u32,
    now: Time,
    next_seq: &mut u64,
    counters: &mut Counters,
) -> ((u64, u64), (Time, u64)) {
    if link.free_uncounted {
        // The previous transmission's free event never reached the heap; it has run.
        counters.events += 1;
    }
    if (link.last_tx.0, link.last_tx.1) != (size, link.rate) {
        link.last_tx = (size, link.rate, headroom_core::units::Bytes(size as u64).time_at(link.rate));
    }
    let tx = link.last_tx.2;
    link.tx_packets += 1;
    link.tx_bytes += size as u64;
    let free = ((now + tx).0, *next_seq);
    link.free_at = free;
    link.free_uncounted = true;
    let arrival = (now + tx + link.delay, *next_seq + 1);
    *next_seq += 2;
    (free, arrival)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(from: NodeId, to: NodeId, mbps: u64, delay_ms: u64, limit: u32) -> Link {
        Link::new(
            format!("{from}->{to}"),
            from,
            to,
            Rate::from_mbps(mbps),
            Dur::from_millis(delay_ms),
            QueueLimit::Packets(limit),
        )
    }

    fn pkt(dst: NodeId, size: u32) -> Packet {
        Packet {
            kind: Kind::Udp,
            dst,
            size,
            endpoint: 0,
            gen: 0,
            stat: 0,
            seq: 0,
            ts: Time::ZERO,
            tsecr: Time::ZERO,
            sack: SackBlocks::NONE,
        }
    }

    #[test]
    fn serialisation_and_propagation_delay() {
        // 0 -> 1 -> 2, 12 Mbps so that 1500 B take exactly 1 ms per hop.
        let mut net =
            Net::new(vec!["a".into(), "b".into(), "c".into()], vec![link(0, 1, 12, 5, 10), link(1, 2, 12, 5, 10)]);
        net.send(0, pkt(2, 1500));
        let mut arrival = None;
        while let Some(ev) = net.pop_until(Time::MAX) {
            match ev {
                Ev::Arrive { pkt, node: 2 } => {
                    net.deliver(pkt);
                    arrival = Some(net.now);
                }
                Ev::Arrive { pkt, node } => net.forward(node, pkt),
                _ => unreachable!(),
            }
        }
        assert_eq!(arrival, Some(Time(12_000_000)), "2 x (1 ms serialisation + 5 ms propagation)");
    }

    #[test]
    fn droptail_counts_waiting_packets_only() {
        let mut net = Net::new(vec!["a".into(), "b".into()], vec![link(0, 1, 12, 0, 2)]);
        for _ in 0..5 {
            net.send(0, pkt(1, 1500));
        }
        // One in service, two waiting, two dropped.
        assert_eq!(net.links[0].queued_packets(), 2);
        assert_eq!(net.counters().dropped, 2);
        assert_eq!(net.counters().created, net.counters().dropped + net.packets_in_network());
    }

    #[test]
    fn a_link_is_busy_until_its_free_event_has_had_its_turn() {
        // 12 Mbps: 1500 B take 1 ms. A packet handed to the link at exactly 1 ms, by an event
        // that comes before the first packet's free event (scheduled earlier), finds the link
        // busy and waits; by one that comes after it, finds the link idle.
        for (sample_first, waits) in [(true, 1), (false, 0)] {
            let mut net = Net::new(vec!["a".into(), "b".into()], vec![link(0, 1, 12, 5, 10)]);
            if sample_first {
                net.schedule(Time(1_000_000), Ev::Sample);
            }
            net.send(0, pkt(1, 1500));
            if !sample_first {
                net.schedule(Time(1_000_000), Ev::Sample);
            }
            let mut arrivals = Vec::new();
            while let Some(ev) = net.pop_until(Time::MAX) {
                match ev {
                    Ev::Sample => {
                        net.send(0, pkt(1, 1500));
                        assert_eq!(net.links[0].queued_packets(), waits, "sample first: {sample_first}");
                    }
                    Ev::Arrive { pkt, .. } => {
                        net.deliver(pkt);
                        arrivals.push(net.now);
                    }
                    _ => unreachable!(),
                }
            }
            // Either way the second packet starts at 1 ms and arrives at 1 + 1 + 5 ms.
            assert_eq!(arrivals, [Time(6_000_000), Time(7_000_000)]);
            // Two arrivals, one sample, and the two transmissions' free events (one ran in the
            // heap when a packet waited; the other never reached it).
            assert_eq!(net.counters().events, 5, "sample first: {sample_first}");
        }
    }

    #[test]
    fn routes_follow_shortest_path() {
        // a-b-c plus a direct a-c link: a reaches c directly.
        let net = Net::new(
            vec!["a".into(), "b".into(), "c".into()],
            vec![link(0, 1, 1, 1, 1), link(1, 2, 1, 1, 1), link(0, 2, 1, 1, 1), link(2, 0, 1, 1, 1)],
        );
        assert_eq!(net.routes[2], 2, "a reaches c over the direct link");
        assert_eq!(net.routes[3], 1, "b reaches a through c: its first link is b->c");
        assert_eq!(net.routes[4], NO_ROUTE, "no route to oneself");
        assert!(net.reachable(1, 0));
        let lone = Net::new(vec!["a".into(), "b".into()], vec![link(0, 1, 1, 1, 1)]);
        assert!(!lone.reachable(1, 0), "b has no link back to a");
    }
}
