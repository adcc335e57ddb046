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

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use headroom_core::rng::Rng;
use headroom_core::units::{Bytes, Dur, Rate, Time};

use super::payload::Payload;

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
    busy: bool,
    waiting: VecDeque<Pkt>,
    rng: Rng,
    drops: u64,
    losses: u64,
    tx_packets: u64,
}

/// Events: the network's and the endpoints' (the world dispatches the latter).
#[derive(Clone, Debug)]
pub enum Ev<E> {
    LinkFree(u32),
    Arrive { node: NodeId, pkt: Pkt },
    Local(E),
}

/// What the heap holds: a packet's arrival names its slot in [`Engine`]'s packet store, so a
/// heap entry stays a few words long (sifting whole packets through the heap was a fifth of the
/// run time); the order is the `(time, seq)` key either way.
enum Queued<E> {
    LinkFree(u32),
    Arrive { node: NodeId, slot: u32 },
    Local(E),
}

struct Entry<E> {
    time: Time,
    seq: u64,
    ev: Queued<E>,
}
impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        self.time == o.time && self.seq == o.seq
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    fn cmp(&self, o: &Self) -> Ordering {
        (o.time, o.seq).cmp(&(self.time, self.seq))
    }
}

/// Link counters for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkCounters {
    pub tx_packets: u64,
    pub drops: u64,
    pub losses: u64,
}

/// The network: time, the event queue, links and routes.
pub struct Engine<E> {
    pub now: Time,
    heap: BinaryHeap<Entry<E>>,
    seq: u64,
    /// Packets on their way (propagating), by slot; `free` lists the empty slots.
    in_flight: Vec<Option<Pkt>>,
    free: Vec<u32>,
    links: Vec<Link>,
    nodes: usize,
    routes: Vec<Option<u32>>,
    pub events: u64,
}

impl<E> Engine<E> {
    /// `nodes` nodes joined by `links`; link `i`'s random losses draw from `rng.fork(i)`.
    pub fn new(nodes: usize, links: Vec<LinkSpec>, rng: &Rng) -> Engine<E> {
        let links: Vec<Link> = links
            .into_iter()
            .enumerate()
            .map(|(i, spec)| Link {
                spec,
                busy: false,
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
            heap: BinaryHeap::new(),
            seq: 0,
            in_flight: Vec::new(),
            free: Vec::new(),
            links,
            nodes,
            routes,
            events: 0,
        }
    }

    pub fn schedule(&mut self, at: Time, ev: Ev<E>) {
        let ev = match ev {
            Ev::LinkFree(l) => Queued::LinkFree(l),
            Ev::Local(e) => Queued::Local(e),
            Ev::Arrive { node, pkt } => {
                let slot = match self.free.pop() {
                    Some(s) => {
                        self.in_flight[s as usize] = Some(pkt);
                        s
                    }
                    None => {
                        self.in_flight.push(Some(pkt));
                        (self.in_flight.len() - 1) as u32
                    }
                };
                Queued::Arrive { node, slot }
            }
        };
        self.heap.push(Entry { time: at.max(self.now), seq: self.seq, ev });
        self.seq += 1;
    }

    /// The next event at or before `until`.
    pub fn pop_until(&mut self, until: Time) -> Option<Ev<E>> {
        if self.heap.peek()?.time > until {
            return None;
        }
        let e = self.heap.pop()?;
        self.now = e.time;
        self.events += 1;
        Some(match e.ev {
            Queued::LinkFree(l) => Ev::LinkFree(l),
            Queued::Local(x) => Ev::Local(x),
            Queued::Arrive { node, slot } => {
                self.free.push(slot);
                let pkt = self.in_flight[slot as usize].take().expect("a queued arrival's packet is stored");
                Ev::Arrive { node, pkt }
            }
        })
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
        if !link.busy {
            link.busy = true;
            self.transmit(li, pkt);
        } else if link.waiting.len() < link.spec.queue {
            link.waiting.push_back(pkt);
        } else {
            link.drops += 1;
        }
    }

    fn transmit(&mut self, li: u32, pkt: Pkt) {
        let link = &mut self.links[li as usize];
        link.tx_packets += 1;
        let tx = Bytes(u64::from(pkt.size())).time_at(link.spec.rate);
        let (to, delay) = (link.spec.to, link.spec.delay);
        let now = self.now;
        self.schedule(now + tx, Ev::LinkFree(li));
        self.schedule(now + tx + delay, Ev::Arrive { node: to, pkt });
    }

    /// A link finished serialising.
    pub fn link_free(&mut self, li: u32) {
        let link = &mut self.links[li as usize];
        match link.waiting.pop_front() {
            Some(p) => self.transmit(li, p),
            None => link.busy = false,
        }
    }

    pub fn link_counters(&self, li: usize) -> LinkCounters {
        let l = &self.links[li];
        LinkCounters { tx_packets: l.tx_packets, drops: l.drops, losses: l.losses }
    }
}
