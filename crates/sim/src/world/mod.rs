//! The simulated world: a [`Net`] plus the endpoints that live on its nodes (bulk TCP flows, UDP
//! sources, web clients and servers), their statistics and the periodic traces.
//!
//! Built from a validated [`crate::scenario::Scenario`]; [`World::run_until`] advances it, [`World::report`]
//! summarises it. Everything random draws from one [`Rng`] stream per flow, forked from the
//! scenario's seed, so adding a flow never changes the randomness of the others.
//!
//! Web model: a client thinks, then requests a page: for each object it sends a request packet
//! (`REQUEST_SIZE` bytes) to the server, which answers with a new TCP connection carrying the
//! object. All objects of a page are requested at once (parallel connections), or one
//! exponential `object_gap` after another when the model sets one. The page's
//! download time runs from the requests to the last byte of the last object; then the client
//! thinks again. Connection set-up is the request's one-way trip: SYN/SYN-ACK are not modelled.
//! With `max_pages` (ImTCP-bg's N_web servers), each of that many servers serves one client at a
//! time: the client's page, then its think time; then the client queues again (FIFO) and the
//! server takes the first waiting client. At most `max_pages` pages download at once and the
//! offered load grows with the number of servers (each alternates a page and a think time).
//!
//! Modules: `build` builds the world from a scenario, this file runs its event loop, `report`
//! summarises it.

mod build;
mod report;

pub use report::{FlowKind, FlowStats, LinkReport, PacketReport, Report};

use headroom_core::cc::reno::RenoConfig;
use headroom_core::cc::CongestionControl;
use headroom_core::sack::SackBlocks;
use headroom_core::units::{Bytes, Dur, Rate, Time};

use crate::build::make_cc;
use crate::net::{Ev, Kind, Net, NodeId, Packet};
use crate::probe::{EstimateMethod, EstimateRow, Prober, Verdict};
use crate::scenario::CcKind;
use crate::tcp::{Owner, SenderBuffer, TcpConn, TcpOutcome, TcpParams};
use crate::traffic::{UdpSource, WebModel};
use headroom_core::imtcp::ImtcpBuffer;
use headroom_core::rng::Rng;

/// Size of a web request packet on the wire (an HTTP GET with headers).
pub const REQUEST_SIZE: u32 = 300;

/// Size of a probe's echo on the wire.
pub const ECHO_SIZE: u32 = 40;

struct BulkFlow {
    conn: u32,
    stat: u32,
    stop: Option<Time>,
}

struct UdpFlow {
    src: NodeId,
    dst: NodeId,
    stat: u32,
    source: UdpSource,
    next_size: u32,
    stop: Time,
}

struct WebGroup {
    clients: NodeId,
    servers: NodeId,
    stat: u32,
    model: WebModel,
    cc: CcKind,
    recover_guard: bool,
    params: TcpParams,
    stop: Time,
    /// Servers, each serving one client at a time (seed 000's N_web); `None`: no limit.
    max_pages: Option<u32>,
    /// Servers serving a client now (counted only with `max_pages`).
    busy_servers: u32,
    /// Clients ready for a page while every server is busy, in arrival order.
    waiting: std::collections::VecDeque<u32>,
}

struct ProbeFlow {
    src: NodeId,
    dst: NodeId,
    stat: u32,
    prober: Box<dyn Prober>,
    wake: Option<Time>,
}

struct WebClient {
    group: u32,
    rng: Rng,
    outstanding: u32,
    page_start: Time,
    /// The client holds one of the group's `max_pages` servers (its page, then its think time).
    holds_server: bool,
}

/// One trace row: time, series, metric, value.
#[derive(Clone, Copy, Debug)]
pub struct TraceRow {
    pub time: Time,
    pub series: u32,
    pub metric: Metric,
    pub value: f64,
}

/// Trace metrics (the CSV column `metric`, shared with the testbed's traces).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    ThroughputBps,
    CwndBytes,
    RttMs,
    CeilingBytes,
    SeqBytes,
    QueuePkts,
    QueueBytes,
    Drops,
    /// The controller's own measured rate (BECC's `t_msrd_th`), bit/s.
    MeasuredRateBps,
}

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::ThroughputBps => "throughput_bps",
            Metric::CwndBytes => "cwnd_bytes",
            Metric::RttMs => "rtt_ms",
            Metric::CeilingBytes => "ceiling_bytes",
            Metric::SeqBytes => "seq_bytes",
            Metric::QueuePkts => "queue_pkts",
            Metric::QueueBytes => "queue_bytes",
            Metric::Drops => "drops",
            Metric::MeasuredRateBps => "measured_rate_bps",
        }
    }
}

/// The simulated world.
pub struct World {
    pub net: Net,
    conns: Vec<Option<TcpConn>>,
    conn_gen: Vec<u32>,
    free_conns: Vec<u32>,
    bulk: Vec<BulkFlow>,
    udp: Vec<UdpFlow>,
    web: Vec<WebGroup>,
    clients: Vec<WebClient>,
    probes: Vec<ProbeFlow>,
    /// Every available-bandwidth estimate of the run, in time order per flow.
    pub estimates: Vec<EstimateRow>,
    pub stats: Vec<FlowStats>,
    /// Trace series names: flow names first, then traced links.
    pub series: Vec<String>,
    traced_links: Vec<(u32, u32)>,
    pub trace: Vec<TraceRow>,
    trace_interval: Dur,
    trace_cwnd: bool,
    trace_rtt: bool,
    trace_seq: bool,
    trace_measured_rate: bool,
    pub end: Time,
    pub name: String,
    pub seed: u64,
}

impl World {
    #[allow(clippy::too_many_arguments)]
    fn open_conn(
        &mut self,
        src: NodeId,
        dst: NodeId,
        stat: u32,
        owner: Owner,
        params: TcpParams,
        cc: Box<dyn CongestionControl>,
        total: u64,
    ) -> u32 {
        let slot = match self.free_conns.pop() {
            Some(s) => s,
            None => {
                self.conns.push(None);
                self.conn_gen.push(0);
                (self.conns.len() - 1) as u32
            }
        };
        self.conn_gen[slot as usize] += 1;
        let gen = self.conn_gen[slot as usize];
        self.conns[slot as usize] =
            Some(TcpConn::new(slot, gen, src, dst, stat, owner, params, cc, SenderBuffer::Direct, total));
        slot
    }

    /// Installs a send buffer (ImTCP) below a bulk flow's sender, before the run starts.
    pub fn set_send_buffer(&mut self, bulk_flow: usize, buffer: Box<dyn headroom_core::cc::SendBuffer>) {
        let slot = self.bulk[bulk_flow].conn as usize;
        if let Some(c) = self.conns[slot].as_mut() {
            c.buffer = SenderBuffer::Custom(buffer);
        }
    }

    /// The connection of a bulk flow (for tests and experiment drivers).
    pub fn bulk_conn(&self, bulk_flow: usize) -> Option<&TcpConn> {
        self.conns[self.bulk[bulk_flow].conn as usize].as_ref()
    }

    fn close_conn(&mut self, slot: u32) {
        if let Some(c) = self.conns[slot as usize].take() {
            let s = &mut self.stats[c.stat as usize];
            s.packets_sent += c.counters.segments_sent;
            s.retransmits += c.counters.retransmits;
            s.fast_retransmits += c.counters.fast_retransmits;
            s.timeouts += c.counters.timeouts;
            s.acks += c.counters.acks_received;
            self.free_conns.push(slot);
        }
    }

    /// Current simulated time.
    pub fn now(&self) -> Time {
        self.net.now
    }

    /// Runs every event up to and including `until` (capped at the scenario's end).
    pub fn run_until(&mut self, until: Time) {
        let until = until.min(self.end);
        while let Some(ev) = self.net.pop_until(until) {
            self.dispatch(ev);
        }
        if self.net.now < until {
            self.net.now = until;
        }
    }

    /// Runs to the end of the scenario.
    pub fn run(&mut self) {
        self.run_until(self.end);
    }

    fn dispatch(&mut self, ev: Ev) {
        match ev {
            Ev::Arrive { pkt, node } => {
                if self.net.packet(pkt).dst != node {
                    self.net.forward(node, pkt);
                } else {
                    let p = self.net.deliver(pkt);
                    self.deliver(p);
                }
            }
            Ev::Rto { conn, gen } => {
                let net = &mut self.net;
                if let Some(Some(c)) = self.conns.get_mut(conn as usize) {
                    if c.gen == gen {
                        c.on_rto_event(net);
                    }
                }
            }
            Ev::DelAck { conn, gen, seq } => {
                let net = &mut self.net;
                if let Some(Some(c)) = self.conns.get_mut(conn as usize) {
                    if c.gen == gen {
                        c.on_delack(net, seq);
                    }
                }
            }
            Ev::Wakeup { conn, gen } => {
                let net = &mut self.net;
                if let Some(Some(c)) = self.conns.get_mut(conn as usize) {
                    if c.gen == gen {
                        c.on_wakeup(net);
                    }
                }
            }
            Ev::BulkStart(i) => {
                let b = &self.bulk[i as usize];
                let net = &mut self.net;
                if let Some(Some(c)) = self.conns.get_mut(b.conn as usize) {
                    c.start(net);
                }
            }
            Ev::BulkStop(i) => {
                let b = &self.bulk[i as usize];
                if let Some(Some(c)) = self.conns.get_mut(b.conn as usize) {
                    c.sending = false;
                }
            }
            Ev::UdpSend(i) => self.udp_send(i),
            Ev::WebPage(c) => self.web_page(c),
            Ev::WebObject { client, size } => self.web_request(client, size),
            Ev::ProbeWake(i) => self.probe_wake(i),
            Ev::Sample => self.sample(),
        }
    }

    fn deliver(&mut self, p: Packet) {
        match p.kind {
            Kind::Data => {
                let net = &mut self.net;
                let Some(Some(c)) = self.conns.get_mut(p.endpoint as usize) else { return };
                if c.gen != p.gen {
                    return;
                }
                let (fresh, outcome) = c.on_data(net, &p);
                let (stat, owner) = (c.stat, c.owner);
                let srtt = c.rtt.srtt();
                if let Some(tap) = c.tap.as_mut() {
                    tap.on_data_arrival(net.now, p.size as u64, srtt);
                }
                let s = &mut self.stats[stat as usize];
                s.bytes += fresh;
                s.interval_bytes += fresh;
                if outcome == TcpOutcome::ReceiverComplete {
                    if let Owner::Web(client) = owner {
                        self.object_done(client);
                    }
                }
            }
            Kind::Ack => {
                let net = &mut self.net;
                let Some(Some(c)) = self.conns.get_mut(p.endpoint as usize) else { return };
                if c.gen != p.gen {
                    return;
                }
                c.on_ack(net, &p);
                if c.sender_done() && matches!(c.owner, Owner::Web(_)) {
                    let slot = c.slot;
                    self.close_conn(slot);
                }
            }
            Kind::Udp => {
                let s = &mut self.stats[p.stat as usize];
                s.bytes += p.size as u64;
                s.interval_bytes += p.size as u64;
            }
            Kind::Probe => {
                let s = &mut self.stats[p.stat as usize];
                s.bytes += p.size as u64;
                s.interval_bytes += p.size as u64;
                let f = &self.probes[p.endpoint as usize];
                let now = self.net.now;
                let echo = Packet {
                    kind: Kind::Echo,
                    dst: f.src,
                    size: ECHO_SIZE,
                    endpoint: p.endpoint,
                    gen: 0,
                    stat: p.stat,
                    seq: p.seq,
                    ts: now,
                    tsecr: Time::ZERO,
                    sack: SackBlocks::NONE,
                };
                self.net.send(f.dst, echo);
            }
            Kind::Echo => {
                let now = self.net.now;
                self.probes[p.endpoint as usize].prober.on_echo(now, p.seq, p.ts);
                self.probe_wake(p.endpoint);
            }
            Kind::Request => {
                let client = p.endpoint;
                let g = &self.web[self.clients[client as usize].group as usize];
                let (srv, cli, stat, params, cc) = (g.servers, g.clients, g.stat, g.params, g.cc);
                let cfg = RenoConfig {
                    mss: Bytes(params.mss as u64),
                    recover_guard: g.recover_guard,
                    ..RenoConfig::default()
                };
                let cc = make_cc(cc, cfg);
                let slot = self.open_conn(srv, cli, stat, Owner::Web(client), params, cc, p.seq.max(1));
                let net = &mut self.net;
                if let Some(Some(c)) = self.conns.get_mut(slot as usize) {
                    c.start(net);
                }
            }
        }
    }

    /// Sends what the prober has due, collects its estimates, and sets its next wake-up.
    fn probe_wake(&mut self, i: u32) {
        let now = self.net.now;
        let f = &mut self.probes[i as usize];
        if f.wake == Some(now) {
            f.wake = None;
        }
        while let Some((id, size)) = f.prober.poll_transmit(now) {
            self.stats[f.stat as usize].packets_sent += 1;
            self.net.send(
                f.src,
                Packet {
                    kind: Kind::Probe,
                    dst: f.dst,
                    size: size.max(1),
                    endpoint: i,
                    gen: 0,
                    stat: f.stat,
                    seq: id,
                    ts: now,
                    tsecr: Time::ZERO,
                    sack: SackBlocks::NONE,
                },
            );
        }
        while let Some(e) = f.prober.poll_estimate(now) {
            self.estimates.push(e);
        }
        if let Some(t) = f.prober.next_wakeup() {
            let t = t.max(now);
            if f.wake.is_none_or(|w| t < w) && t <= self.end {
                f.wake = Some(t);
                self.net.schedule(t, Ev::ProbeWake(i));
            }
        }
    }

    /// The connections of the bulk flows, in scenario order: they are opened first, in that
    /// order, and never closed, so they hold the lowest slots.
    fn bulk_conns_mut(&mut self) -> impl Iterator<Item = &mut TcpConn> {
        self.conns.iter_mut().flatten().filter(|c| matches!(c.owner, Owner::Bulk(_)))
    }

    /// Records the ImTCP control units' finished measurements.
    fn drain_inline_estimates(&mut self) {
        let mut rows = Vec::new();
        for c in self.bulk_conns_mut() {
            let stat = c.stat;
            let Some(unit) = c.imtcp_mut() else { continue };
            while let Some(e) = unit.poll_estimate() {
                let verdict = Verdict::in_range(e.in_range);
                rows.push(estimate_row(e.time, stat, EstimateMethod::Imtcp, e.value, verdict, e.search_range));
            }
        }
        self.estimates.append(&mut rows);
    }

    /// Records the passive estimators' mean samples of the interval ending now.
    fn drain_passive_estimates(&mut self) {
        let now = self.net.now;
        let mut rows = Vec::new();
        for c in self.bulk_conns_mut() {
            let stat = c.stat;
            let Some(tap) = c.tap.as_mut() else { continue };
            tap.take_means(|method, value| {
                rows.push(estimate_row(now, stat, method, value, Verdict::Estimate, (Rate::ZERO, Rate::ZERO)))
            });
        }
        self.estimates.append(&mut rows);
    }

    /// The connection of the bulk flow whose statistics row is `stat`.
    fn bulk_conn_of_stat(&self, stat: u32) -> Option<&TcpConn> {
        self.bulk.iter().find(|b| b.stat == stat).and_then(|b| self.conns[b.conn as usize].as_ref())
    }

    /// The ImTCP control unit of the bulk flow whose statistics row is `stat`, if it has one.
    pub fn inline_measurement(&self, stat: u32) -> Option<&ImtcpBuffer> {
        self.bulk_conn_of_stat(stat)?.imtcp()
    }

    /// The same, to drain its samples ([`ImtcpBuffer::take_first_packet_waits`]).
    pub fn inline_measurement_mut(&mut self, stat: u32) -> Option<&mut ImtcpBuffer> {
        let b = self.bulk.iter().find(|b| b.stat == stat)?;
        self.conns[b.conn as usize].as_mut()?.imtcp_mut()
    }

    fn udp_send(&mut self, i: u32) {
        let now = self.net.now;
        let f = &mut self.udp[i as usize];
        let p = Packet {
            kind: Kind::Udp,
            dst: f.dst,
            size: f.next_size,
            endpoint: i,
            gen: 0,
            stat: f.stat,
            seq: 0,
            ts: now,
            tsecr: Time::ZERO,
            sack: SackBlocks::NONE,
        };
        let src = f.src;
        let (t, size) = f.source.next();
        f.next_size = size;
        let stop = f.stop;
        self.stats[f.stat as usize].packets_sent += 1;
        self.net.send(src, p);
        if t < stop {
            self.net.schedule(t.max(now), Ev::UdpSend(i));
        }
    }

    /// A client is ready for its next page (first page, or its think time ended).
    fn web_page(&mut self, c: u32) {
        let client = &mut self.clients[c as usize];
        let group = client.group as usize;
        let g = &mut self.web[group];
        let Some(limit) = g.max_pages else {
            self.start_page(c);
            return;
        };
        // Seed 000's N_web servers: the client gives its server back and queues for the next
        // free one; free servers take the waiting clients in arrival order.
        if client.holds_server {
            client.holds_server = false;
            g.busy_servers -= 1;
        }
        g.waiting.push_back(c);
        while self.web[group].busy_servers < limit {
            let Some(next) = self.web[group].waiting.pop_front() else { break };
            self.web[group].busy_servers += 1;
            self.clients[next as usize].holds_server = true;
            self.start_page(next);
        }
    }

    fn start_page(&mut self, c: u32) {
        let now = self.net.now;
        let client = &mut self.clients[c as usize];
        let g = &self.web[client.group as usize];
        if now >= g.stop {
            return;
        }
        let page = g.model.sample_page(&mut client.rng);
        client.outstanding = page.object_sizes.len() as u32;
        client.page_start = now;
        let (src, dst, stat) = (g.clients, g.servers, g.stat);
        if page.object_sizes.is_empty() {
            let think = g.model.think_time(&mut client.rng);
            self.net.schedule(now + think, Ev::WebPage(c));
            return;
        }
        // Objects are requested together, or one `object_gap` (exponential) after another.
        let mut at = now;
        for size in page.object_sizes {
            if at == now {
                self.net.send(
                    src,
                    Packet {
                        kind: Kind::Request,
                        dst,
                        size: REQUEST_SIZE,
                        endpoint: c,
                        gen: 0,
                        stat,
                        seq: size,
                        ts: now,
                        tsecr: Time::ZERO,
                        sack: SackBlocks::NONE,
                    },
                );
            } else {
                self.net.schedule(at, Ev::WebObject { client: c, size });
            }
            if g.model.object_gap.is_some() {
                at += g.model.object_gap(&mut client.rng);
            }
        }
    }

    fn web_request(&mut self, c: u32, size: u64) {
        let g = &self.web[self.clients[c as usize].group as usize];
        let (src, dst, stat) = (g.clients, g.servers, g.stat);
        let now = self.net.now;
        self.net.send(
            src,
            Packet {
                kind: Kind::Request,
                dst,
                size: REQUEST_SIZE,
                endpoint: c,
                gen: 0,
                stat,
                seq: size,
                ts: now,
                tsecr: Time::ZERO,
                sack: SackBlocks::NONE,
            },
        );
    }

    fn object_done(&mut self, c: u32) {
        let now = self.net.now;
        let client = &mut self.clients[c as usize];
        client.outstanding = client.outstanding.saturating_sub(1);
        if client.outstanding > 0 {
            return;
        }
        let g = &self.web[client.group as usize];
        let s = &mut self.stats[g.stat as usize];
        s.pages += 1;
        s.page_times.push((client.page_start, now - client.page_start));
        let think = g.model.think_time(&mut client.rng);
        self.net.schedule(now + think, Ev::WebPage(c));
    }

    fn sample(&mut self) {
        let now = self.net.now;
        self.drain_inline_estimates();
        self.drain_passive_estimates();
        let secs = self.trace_interval.as_secs_f64();
        for (i, s) in self.stats.iter_mut().enumerate() {
            let bps = s.interval_bytes as f64 * 8.0 / secs;
            s.interval_bytes = 0;
            self.trace.push(TraceRow { time: now, series: i as u32, metric: Metric::ThroughputBps, value: bps });
        }
        for b in &self.bulk {
            let Some(c) = self.conns[b.conn as usize].as_ref() else { continue };
            let series = b.stat;
            let win = c.cc.window();
            if self.trace_cwnd {
                self.trace.push(TraceRow { time: now, series, metric: Metric::CwndBytes, value: win.cwnd.0 as f64 });
                if let Some(ceiling) = win.ceiling {
                    self.trace.push(TraceRow {
                        time: now,
                        series,
                        metric: Metric::CeilingBytes,
                        value: ceiling.0.min(1 << 40) as f64,
                    });
                }
            }
            if self.trace_rtt {
                if let Some(r) = c.rtt.latest() {
                    self.trace.push(TraceRow { time: now, series, metric: Metric::RttMs, value: r.as_millis_f64() });
                }
            }
            if self.trace_seq {
                self.trace.push(TraceRow { time: now, series, metric: Metric::SeqBytes, value: c.snd_una as f64 });
            }
            if self.trace_measured_rate {
                if let Some(r) = c.cc.measured_rate() {
                    self.trace.push(TraceRow { time: now, series, metric: Metric::MeasuredRateBps, value: r.0 as f64 });
                }
            }
        }
        for &(li, series) in &self.traced_links {
            let l = &mut self.net.links[li as usize];
            self.trace.push(TraceRow {
                time: now,
                series,
                metric: Metric::QueuePkts,
                value: l.queued_packets() as f64,
            });
            self.trace.push(TraceRow { time: now, series, metric: Metric::QueueBytes, value: l.queued_bytes as f64 });
            self.trace.push(TraceRow { time: now, series, metric: Metric::Drops, value: l.interval_drops as f64 });
            l.interval_drops = 0;
        }
        let next = now + self.trace_interval;
        if next <= self.end {
            self.net.schedule(next, Ev::Sample);
        }
    }

    /// Packets through a link so far (benchmark figure).
    pub fn link_packets(&self, name: &str) -> Option<u64> {
        self.net.links.iter().find(|l| l.name == name).map(|l| l.tx_packets)
    }
}

/// An estimate that is not a probe train's (ImTCP inline, passive estimators): no probe bytes,
/// no train duration.
fn estimate_row(
    time: Time,
    stat: u32,
    method: EstimateMethod,
    value: Rate,
    verdict: Verdict,
    range: (Rate, Rate),
) -> EstimateRow {
    EstimateRow { time, stat, method, value: Some(value), verdict, range, elapsed: Dur::ZERO, bytes: 0 }
}
