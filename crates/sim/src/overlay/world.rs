//! The overlay world: hosts, routers and TCP proxies joined by links; transfers that open with a
//! SYN at a client, are split (or not) by each proxy on their path, and end with their last byte.
//!
//! # The proxy node (Maki et al. §2, §3.2)
//!
//! A proxy sits on the path as a router. When a SYN passes through it, the proxy's
//! [`SplitPolicy`] decides. A connection that is not split is forwarded untouched, without CPU
//! cost (the proxy's fast path; this is our reading: the paper charges the CPU to split
//! connections, "TCP プロキシにおける処理遅延"). A split connection is terminated: the proxy
//! answers the SYN itself, opens the next connection toward the server (which the next proxy may
//! split again), ACKs data on the receiver's behalf and retransmits locally. Data is relayed
//! through two buffers of configurable size: the upstream connection's **receive buffer**
//! (its free space is the window the proxy advertises upstream) and the downstream connection's
//! **send buffer** (unacknowledged plus unsent bytes). Bytes move from the first to the second
//! whenever the second has room, so the connections are coupled both ways: when the upstream
//! connection loses packets the send buffer drains and the downstream connection idles; when the
//! downstream connection is slow the send buffer fills, the receive buffer fills and the upstream
//! window closes.
//!
//! # The processing model
//!
//! One CPU per proxy with a FIFO in front of it (optionally bounded). Every packet addressed to
//! the proxy (all packets of its split connections, both directions) costs `t`; a SYN or SYN-ACK
//! costs `10 t` (§3.2: "SYN および SYN/ACK パケットの処理時間を、通常のデータパケットの 10 倍").
//! Packets the proxy sends cost nothing more. The policy is told of every packet entering the
//! queue ([`SplitPolicy::on_packet`], [`SplitPolicy::on_syn`]; the SYNs of connections it does
//! not split count too, as the paper adds 10 for each SYN received) and of each packet's wait
//! when its service starts ([`SplitPolicy::on_queue_delay`]).

use std::collections::VecDeque;
use std::net::IpAddr;

use headroom_core::overlay::{ConnectionAttrs, SplitDecision, SplitPolicy};
use headroom_core::rng::Rng;
use headroom_core::units::{Bytes, Dur, Time};

use super::engine::{Body, Engine, Ev, HopId, LinkCounters, LinkSpec, NodeId, Pkt};
use super::payload::Runs;
use super::surge::SurgeModel;
use super::tcp::{Half, Receiver, Sender, Sink};
use super::Local;

/// A proxy's configuration.
#[derive(Clone, Debug)]
pub struct ProxySpec {
    pub node: NodeId,
    /// CPU time per data or ACK packet (`t`); SYN and SYN-ACK cost 10 `t`.
    pub per_packet: Dur,
    pub policy: SplitPolicy,
    pub receive_buffer: Bytes,
    pub send_buffer: Bytes,
    /// Packets that may wait for the CPU (`None`: unbounded).
    pub cpu_queue: Option<usize>,
}

/// What kind of transfer a flow is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowClass {
    /// A long transfer that every proxy splits (the paper's FTP flows, "すべて分割").
    Ftp,
    /// A web document: the proxy's policy decides.
    Web,
}

/// One transfer from `server` to `client`, opened by the client at `start`.
#[derive(Clone, Debug)]
pub struct FlowSpec {
    pub client: NodeId,
    pub server: NodeId,
    pub source: IpAddr,
    pub size: u64,
    pub start: Time,
    pub class: FlowClass,
}

/// A web client of the SURGE model, fetching from its own server.
#[derive(Clone, Debug)]
pub struct WebClientSpec {
    pub client: NodeId,
    pub server: NodeId,
    pub source: IpAddr,
}

/// Everything a run needs.
#[derive(Clone, Debug)]
pub struct OverlayConfig {
    pub nodes: usize,
    pub links: Vec<LinkSpec>,
    pub proxies: Vec<ProxySpec>,
    pub flows: Vec<FlowSpec>,
    pub web_clients: Vec<WebClientSpec>,
    pub surge: SurgeModel,
    /// Web clients start their first page uniformly in `[web_start, web_start + 1 s)` and start
    /// no transfer after `web_stop`.
    pub web_start: Time,
    pub web_stop: Time,
    /// The clients' receive buffer (their advertised window).
    pub client_window: Bytes,
    /// A server's send buffer (it refills it from the document).
    pub server_buffer: Bytes,
    pub seed: u64,
}

/// The outcome of one transfer.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowRecord {
    pub class: FlowClass,
    /// The SURGE client that fetched it (web transfers; its `k`-th record is its `k`-th file,
    /// the same file in every run of one seed, so runs can be compared transfer by transfer).
    pub web_client: Option<u32>,
    pub size: u64,
    /// Did the first proxy on the path split it?
    pub split: bool,
    pub start: Time,
    /// When the client's SYN was answered.
    pub established: Option<Time>,
    /// When the last byte reached the client.
    pub end: Option<Time>,
    pub received: u64,
    /// Bytes that differed from what the server sent (must be 0).
    pub mismatches: u64,
}

impl FlowRecord {
    /// Transfer delay: first SYN to last byte (§3.2's definition).
    pub fn delay(&self) -> Option<Dur> {
        self.end.map(|e| e.saturating_since(self.start))
    }
}

/// A proxy's counters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProxyStats {
    pub busy: Dur,
    pub served: u64,
    pub served_syn: u64,
    pub split: u64,
    pub passed: u64,
    pub cpu_drops: u64,
    pub max_queue: usize,
    pub total_wait: Dur,
}

struct Proxy {
    spec: ProxySpec,
    queue: VecDeque<(Pkt, Time)>,
    busy: bool,
    stats: ProxyStats,
}

struct Hop {
    flow: u32,
    rx: Receiver,
    tx: Option<Sender>,
    /// The connection feeding this one's sender (at a proxy).
    up: Option<HopId>,
    /// The connection this one's receiver feeds (at a proxy).
    down: Option<HopId>,
    /// Proxies that let this connection's SYN pass.
    passed: Vec<NodeId>,
}

struct Flow {
    spec: FlowSpec,
    first_hop: HopId,
    split: Option<bool>,
    established: Option<Time>,
    end: Option<Time>,
    web_client: Option<u32>,
}

struct WebClient {
    spec: WebClientSpec,
    rng: Rng,
    pending: VecDeque<u64>,
}

/// The overlay world.
pub struct OverlayWorld {
    eng: Engine<Local>,
    hops: Vec<Hop>,
    flows: Vec<Flow>,
    proxies: Vec<Proxy>,
    proxy_at: Vec<Option<usize>>,
    web: Vec<WebClient>,
    cfg: OverlayConfig,
}

impl OverlayWorld {
    pub fn new(cfg: OverlayConfig) -> OverlayWorld {
        let rng = Rng::new(cfg.seed);
        let mut eng = Engine::new(cfg.nodes, cfg.links.clone(), &rng);
        let mut proxy_at = vec![None; cfg.nodes];
        let proxies = cfg
            .proxies
            .iter()
            .enumerate()
            .map(|(i, p)| {
                proxy_at[p.node as usize] = Some(i);
                Proxy { spec: p.clone(), queue: VecDeque::new(), busy: false, stats: ProxyStats::default() }
            })
            .collect();
        let web = cfg
            .web_clients
            .iter()
            .enumerate()
            .map(|(i, c)| WebClient { spec: c.clone(), rng: rng.fork(1 + i as u64), pending: VecDeque::new() })
            .collect::<Vec<_>>();
        for (i, f) in cfg.flows.iter().enumerate() {
            eng.schedule(f.start, Local::FlowStart(i as u32));
        }
        let mut start_rng = rng.fork(0);
        for i in 0..web.len() {
            let at = cfg.web_start + Dur::from_secs_f64(start_rng.uniform());
            eng.schedule(at, Local::WebNext(i as u32));
        }
        let flows = cfg
            .flows
            .iter()
            .map(|f| Flow {
                spec: f.clone(),
                first_hop: 0,
                split: None,
                established: None,
                end: None,
                web_client: None,
            })
            .collect();
        OverlayWorld { eng, hops: Vec::new(), flows, proxies, proxy_at, web, cfg }
    }

    pub fn now(&self) -> Time {
        self.eng.now
    }

    /// Runs every event up to `until`.
    pub fn run_until(&mut self, until: Time) {
        while let Some(ev) = self.eng.pop_until(until) {
            match ev {
                Ev::Arrive { node, pkt } => self.on_arrive(node, pkt),
                Ev::Local(Local::Timer { hop, half }) => self.on_timer(hop, half),
                Ev::Local(Local::CpuDone(p)) => self.cpu_done(p as usize),
                Ev::Local(Local::FlowStart(f)) => self.start_flow(f),
                Ev::Local(Local::WebNext(c)) => self.web_next(c),
            }
        }
        self.eng.now = self.eng.now.max(until);
    }

    fn on_timer(&mut self, hop: HopId, half: Half) {
        let h = &mut self.hops[hop as usize];
        match half {
            Half::Sender => {
                if let Some(tx) = h.tx.as_mut() {
                    tx.on_timer(&mut self.eng);
                }
            }
            Half::Receiver => h.rx.on_timer(&mut self.eng),
        }
    }

    fn new_hop(&mut self, flow: u32, node: NodeId, peer: NodeId, document: u64, cap: u64, sink: Sink) -> HopId {
        let id = self.hops.len() as HopId;
        self.hops.push(Hop {
            flow,
            rx: Receiver::new(node, peer, id, document, cap, sink),
            tx: None,
            up: None,
            down: None,
            passed: Vec::new(),
        });
        id
    }

    fn start_flow(&mut self, f: u32) {
        let spec = self.flows[f as usize].spec.clone();
        let key = u64::from(f) + 1;
        let h = self.new_hop(
            f,
            spec.client,
            spec.server,
            spec.size,
            self.cfg.client_window.0,
            Sink::Check { key, mismatches: 0 },
        );
        self.flows[f as usize].first_hop = h;
        self.hops[h as usize].rx.open(&mut self.eng);
    }

    fn web_next(&mut self, c: u32) {
        let now = self.eng.now;
        if now >= self.cfg.web_stop {
            return;
        }
        let surge = self.cfg.surge.clone();
        let w = &mut self.web[c as usize];
        if w.pending.is_empty() {
            w.pending.extend(surge.page(&mut w.rng));
        }
        let Some(size) = w.pending.pop_front() else { return };
        let spec = FlowSpec {
            client: w.spec.client,
            server: w.spec.server,
            source: w.spec.source,
            size,
            start: now,
            class: FlowClass::Web,
        };
        let f = self.flows.len() as u32;
        self.flows.push(Flow { spec, first_hop: 0, split: None, established: None, end: None, web_client: Some(c) });
        self.start_flow(f);
    }

    fn on_arrive(&mut self, node: NodeId, mut pkt: Pkt) {
        if let Some(pi) = self.proxy_at[node as usize] {
            if pkt.dst == node {
                self.cpu_enqueue(pi, pkt);
                return;
            }
            if let Body::Syn { document } = pkt.body {
                let h = pkt.hop as usize;
                if !self.hops[h].passed.contains(&node) {
                    let flow = &self.flows[self.hops[h].flow as usize];
                    let now = self.eng.now;
                    let proxy = &mut self.proxies[pi];
                    let decision = match flow.spec.class {
                        FlowClass::Ftp => SplitDecision::Split,
                        FlowClass::Web => proxy.spec.policy.decide(
                            now,
                            &ConnectionAttrs { source: flow.spec.source, document_size: Some(Bytes(document)) },
                        ),
                    };
                    let first = self.hops[h].rx.node == flow.spec.client;
                    if first {
                        self.flows[self.hops[h].flow as usize].split.get_or_insert(decision.is_split());
                    }
                    if decision.is_split() {
                        proxy.stats.split += 1;
                        self.hops[h].rx.peer = node;
                        pkt.dst = node;
                        self.cpu_enqueue(pi, pkt);
                        return;
                    }
                    proxy.stats.passed += 1;
                    proxy.spec.policy.on_syn(now);
                    self.hops[h].passed.push(node);
                }
            }
            self.eng.forward(node, pkt);
            return;
        }
        if pkt.dst == node {
            self.endpoint(node, pkt);
        } else {
            self.eng.forward(node, pkt);
        }
    }

    fn cpu_enqueue(&mut self, pi: usize, pkt: Pkt) {
        let now = self.eng.now;
        let p = &mut self.proxies[pi];
        if pkt.body.is_syn_or_synack() {
            p.spec.policy.on_syn(now);
        } else {
            p.spec.policy.on_packet(now);
        }
        if p.spec.cpu_queue.is_some_and(|limit| p.queue.len() > limit) {
            p.stats.cpu_drops += 1;
            return;
        }
        p.queue.push_back((pkt, now));
        p.stats.max_queue = p.stats.max_queue.max(p.queue.len());
        if !p.busy {
            self.start_service(pi);
        }
    }

    fn start_service(&mut self, pi: usize) {
        let now = self.eng.now;
        let p = &mut self.proxies[pi];
        let Some((pkt, arrived)) = p.queue.front() else {
            p.busy = false;
            return;
        };
        let syn = pkt.body.is_syn_or_synack();
        let cost = if syn { Dur(p.spec.per_packet.as_nanos() * 10) } else { p.spec.per_packet };
        let waited = now.saturating_since(*arrived);
        p.busy = true;
        p.stats.busy += cost;
        p.stats.served += 1;
        p.stats.served_syn += u64::from(syn);
        p.stats.total_wait += waited;
        p.spec.policy.on_queue_delay(now, waited);
        self.eng.schedule(now + cost, Local::CpuDone(pi as u16));
    }

    fn cpu_done(&mut self, pi: usize) {
        let node = self.proxies[pi].spec.node;
        if let Some((pkt, _)) = self.proxies[pi].queue.pop_front() {
            self.endpoint(node, pkt);
        }
        self.start_service(pi);
    }

    /// A packet reached the endpoint it is addressed to (a host, or a proxy after its CPU).
    fn endpoint(&mut self, node: NodeId, pkt: Pkt) {
        let h = pkt.hop as usize;
        match pkt.body {
            Body::Syn { document } => {
                if self.hops[h].tx.is_none() {
                    let flow = self.hops[h].flow;
                    let tx = match self.proxy_at[node as usize] {
                        Some(pi) => {
                            let (rb, sb) =
                                (self.proxies[pi].spec.receive_buffer.0, self.proxies[pi].spec.send_buffer.0);
                            let server = self.flows[flow as usize].spec.server;
                            let up = self.new_hop(flow, node, server, document, rb, Sink::Relay(Runs::default()));
                            self.hops[up as usize].down = Some(h as HopId);
                            self.hops[h].up = Some(up);
                            self.hops[up as usize].rx.open(&mut self.eng);
                            Sender::new(node, pkt.src, h as HopId, document, sb, None)
                        }
                        None => Sender::new(
                            node,
                            pkt.src,
                            h as HopId,
                            document,
                            self.cfg.server_buffer.0,
                            Some(u64::from(flow) + 1),
                        ),
                    };
                    self.hops[h].tx = Some(tx);
                }
                if let Some(tx) = self.hops[h].tx.as_mut() {
                    tx.on_syn(&mut self.eng);
                }
            }
            Body::SynAck => {
                self.hops[h].rx.on_synack(&mut self.eng);
                let f = self.hops[h].flow as usize;
                if self.flows[f].first_hop as usize == h {
                    self.flows[f].established.get_or_insert(self.eng.now);
                }
            }
            Body::Ack { ack, window, echo } => {
                if let Some(tx) = self.hops[h].tx.as_mut() {
                    tx.on_ack(&mut self.eng, ack, window, echo);
                }
                if let Some(up) = self.hops[h].up {
                    self.relay(up as usize, h);
                }
            }
            Body::Data { seq, ts, bytes } => {
                let fresh = self.hops[h].rx.on_data(&mut self.eng, seq, ts, bytes);
                if let Some(down) = self.hops[h].down {
                    self.relay(h, down as usize);
                } else if fresh > 0 && self.hops[h].rx.complete() {
                    self.complete(self.hops[h].flow);
                }
            }
        }
    }

    /// Moves what fits from `up`'s receive buffer into `down`'s send buffer.
    fn relay(&mut self, up: usize, down: usize) {
        let Some(room) = self.hops[down].tx.as_ref().map(Sender::room) else { return };
        let Sink::Relay(buf) = &mut self.hops[up].rx.sink else { return };
        let n = buf.len().min(room);
        if n == 0 {
            return;
        }
        // The two hops are distinct entries of `hops`: borrow both at once and move the runs.
        let (lo, hi) = self.hops.split_at_mut(up.max(down));
        let (up_hop, down_hop) = if up < down { (&mut lo[up], &mut hi[0]) } else { (&mut hi[0], &mut lo[down]) };
        let (Sink::Relay(buf), Some(tx)) = (&mut up_hop.rx.sink, down_hop.tx.as_mut()) else { return };
        for r in buf.range(0, n) {
            tx.write(r);
        }
        buf.drain_front(n);
        tx.try_send(&mut self.eng);
        self.hops[up].rx.window_update(&mut self.eng);
    }

    fn complete(&mut self, f: u32) {
        let now = self.eng.now;
        let flow = &mut self.flows[f as usize];
        if flow.end.is_some() {
            return;
        }
        flow.end = Some(now);
        if let Some(c) = flow.web_client {
            let w = &mut self.web[c as usize];
            let gap = if w.pending.is_empty() {
                self.cfg.surge.inactive_off(&mut w.rng)
            } else {
                self.cfg.surge.active_off(&mut w.rng)
            };
            self.eng.schedule(now + gap, Local::WebNext(c));
        }
    }

    /// One record per transfer started so far.
    pub fn records(&self) -> Vec<FlowRecord> {
        self.flows
            .iter()
            .filter(|f| {
                !self.hops.is_empty() && (f.first_hop as usize) < self.hops.len() && f.spec.start <= self.eng.now
            })
            .map(|f| {
                let rx = &self.hops[f.first_hop as usize].rx;
                let mismatches = match rx.sink {
                    Sink::Check { mismatches, .. } => mismatches,
                    Sink::Relay(_) => 0,
                };
                FlowRecord {
                    class: f.spec.class,
                    web_client: f.web_client,
                    size: f.spec.size,
                    split: f.split.unwrap_or(false),
                    start: f.spec.start,
                    established: f.established,
                    end: f.end,
                    received: rx.rcv_nxt,
                    mismatches,
                }
            })
            .collect()
    }

    /// Bytes the client of static flow `f` has received in order so far.
    pub fn received(&self, f: usize) -> u64 {
        self.hops.get(self.flows[f].first_hop as usize).map_or(0, |h| h.rx.rcv_nxt)
    }

    pub fn proxy_stats(&self) -> Vec<ProxyStats> {
        self.proxies.iter().map(|p| p.stats.clone()).collect()
    }

    /// Idle time of every sender located at `node` (the proxy's downstream connections), with
    /// the open idle periods closed at the current time.
    pub fn sender_idle_at(&mut self, node: NodeId) -> Dur {
        let now = self.eng.now;
        let mut total = Dur::ZERO;
        for h in &mut self.hops {
            if let Some(tx) = h.tx.as_mut().filter(|t| t.node == node) {
                tx.finish(now);
                total += tx.idle;
            }
        }
        total
    }

    /// (segments, retransmissions, timeouts) of the senders at `node`.
    pub fn sender_counters_at(&self, node: NodeId) -> (u64, u64, u64) {
        self.hops
            .iter()
            .filter_map(|h| h.tx.as_ref())
            .filter(|t| t.node == node)
            .fold((0, 0, 0), |a, t| (a.0 + t.segments, a.1 + t.retransmits, a.2 + t.timeouts))
    }

    pub fn link_counters(&self, li: usize) -> LinkCounters {
        self.eng.link_counters(li)
    }

    pub fn events(&self) -> u64 {
        self.eng.events
    }
}

impl OverlayWorld {
    /// Bytes acknowledged to the senders at `node` (summed).
    pub fn sender_acked_at(&self, node: NodeId) -> u64 {
        self.hops.iter().filter_map(|h| h.tx.as_ref()).filter(|t| t.node == node).map(|t| t.snd_una).sum()
    }
}
