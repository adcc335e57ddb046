//! The simulated world: a [`Net`] plus the endpoints that live on its nodes (bulk TCP flows, UDP
//! sources, web clients and servers), their statistics and the periodic traces.
//!
//! Built from a validated [`Scenario`]; [`World::run_until`] advances it, [`World::report`]
//! summarises it. Everything random draws from one [`Rng`] stream per flow, forked from the
//! scenario's seed, so adding a flow never changes the randomness of the others.
//!
//! Web model: a client thinks, then requests a page: for each object it sends a request packet
//! (`REQUEST_SIZE` bytes) to the server, which answers with a new TCP connection carrying the
//! object. All objects of a page are requested at once (parallel connections), or one
//! exponential `object_gap` after another when the model sets one. The page's
//! download time runs from the requests to the last byte of the last object; then the client
//! thinks again. Connection set-up is the request's one-way trip: SYN/SYN-ACK are not modelled.

use headroom_core::cc::becc::Becc;
use headroom_core::cc::reno::{Recovery, Reno, RenoConfig, SsthreshRule};
use headroom_core::cc::CongestionControl;
use headroom_core::units::{Bytes, Dur, Rate, Time};
use serde::Serialize;
use std::cell::RefCell;
use std::rc::Rc;

use headroom_core::abw::{ChirpSpec, EstimatorConfig, QuickSpec, TrainDesign};
use headroom_core::imtcp::{
    ControlConfig, EchoConfig, EchoProber, ImtcpBuffer, MPolicy, SharedImtcp, StoringRate, StoringTimer,
};

use crate::net::{Counters, Ev, Kind, Link, Net, NodeId, Packet, QueueLimit};
use crate::passive::{PassiveTap, TapState};
use crate::probe::{EstimateMethod, EstimateRow, ImtcpEchoProber, Prober, TrainProber, Verdict};
use crate::scenario::{rto_preset, ImtcpSpec, ProbeSpec, Scenario};
use crate::tcp::{Owner, TcpConn, TcpOutcome, TcpParams};
use crate::traffic::{UdpSource, WebModel};
use headroom_core::rng::Rng;

/// Size of a web request packet on the wire (an HTTP GET with headers).
pub const REQUEST_SIZE: u32 = 300;

/// The congestion controllers a scenario can name.
pub const CC_NAMES: &[&str] = &["reno", "newreno", "becc", "becc-newreno"];

/// Checks a controller name.
pub fn check_cc_name(name: &str) -> Result<(), String> {
    if CC_NAMES.contains(&name) {
        Ok(())
    } else {
        Err(format!("unknown congestion control `{name}` (known: {})", CC_NAMES.join(", ")))
    }
}

/// Builds a controller by name.
pub fn make_cc(name: &str, cfg: RenoConfig) -> Box<dyn CongestionControl> {
    match name {
        "reno" => Box::new(Reno::reno(cfg)),
        "becc" => Box::new(Becc::with_paper_constants(Recovery::Reno, cfg)),
        "becc-newreno" => Box::new(Becc::with_paper_constants(Recovery::NewReno, cfg)),
        _ => Box::new(Reno::newreno(cfg)),
    }
}

/// Size of a probe's echo on the wire.
pub const ECHO_SIZE: u32 = 40;

/// Builds the prober of a `[[probe]]` entry (also used to validate it).
pub fn make_prober(p: &ProbeSpec, start: Dur, stat: u32, stop: Dur) -> Result<Box<dyn Prober>, String> {
    let (start, stop) = (Time(start.0), Time(stop.0));
    if stop <= start {
        return Err("stop must come after start".into());
    }
    let interval = p.interval;
    let mut estimator = EstimatorConfig::default();
    if let Some(f) = p.decrease_factor {
        if !(f > 1.0 && f.is_finite()) {
            return Err(format!("decrease_factor must be a number above 1, got {f}"));
        }
        estimator.decrease_factor = f;
    }
    if let Some(l) = p.busy_period {
        if l == 0 {
            return Err("busy_period must be at least 1 gap".into());
        }
        estimator.busy_period = l;
    }
    match p.method.get_ref().as_str() {
        "pathquick" => {
            let mut spec = QuickSpec::paper();
            if let Some(t) = p.t_quick {
                spec.t_quick = Some(t);
            }
            if let Some(b) = p.p_1 {
                spec.p_1 = Some(b);
            }
            if let Some(b) = p.delta_p {
                spec.delta_p = Some(b);
            }
            if let Some(n) = p.n {
                spec.n = Some(n);
                spec.p_n = None;
            }
            let design = spec.solve().map_err(|e| e.to_string())?;
            let d = TrainDesign::PathQuick(design);
            Ok(Box::new(TrainProber::new(
                d,
                estimator,
                start,
                interval.unwrap_or(Dur::from_secs(1)),
                Dur::from_secs(1),
                stop,
                stat,
            )))
        }
        "pathchirp" => {
            let mut spec = ChirpSpec::paper();
            if let Some(g) = p.gamma {
                spec.gamma = g;
            }
            if let Some(b) = p.size {
                spec.size = b;
            }
            if let Some(r) = p.b_min {
                spec.b_min = r;
            }
            if let Some(r) = p.b_max {
                spec.b_max = r;
            }
            let design = spec.design().map_err(|e| e.to_string())?;
            let d = TrainDesign::PathChirp(design);
            Ok(Box::new(TrainProber::new(
                d,
                estimator,
                start,
                interval.unwrap_or(Dur::from_secs(1)),
                Dur::from_secs(1),
                stop,
                stat,
            )))
        }
        "imtcp-echo" => {
            // The world first polls the prober at the flow's start time.
            let prober = EchoProber::new(prober_config(p, interval)).map_err(|e| e.to_string())?;
            Ok(Box::new(ImtcpEchoProber::new(prober, stat, stop)))
        }
        other => Err(format!("unknown method `{other}` (pathquick, pathchirp, imtcp-echo)")),
    }
}

fn prober_config(p: &ProbeSpec, interval: Option<Dur>) -> EchoConfig {
    let mut cfg = EchoConfig::default();
    if let Some(n) = p.stream_len {
        cfg.measurement.stream_len = n;
    }
    if let Some(r) = p.link_rate {
        cfg.measurement.link_rate = Some(r);
    }
    if let Some(i) = interval {
        cfg.interval = i;
    }
    if let Some(b) = p.size {
        cfg.probe_size = b;
    }
    cfg
}

/// The ImTCP control unit of an `imtcp = { ... }` entry.
pub fn make_imtcp(spec: &ImtcpSpec, delayed_ack: bool) -> Result<SharedImtcp, String> {
    let mut cfg = ControlConfig::default();
    if let Some(n) = spec.stream_len {
        cfg.measurement.stream_len = n;
    }
    if let Some(k) = spec.sub_ranges {
        cfg.measurement.sub_ranges = k;
    }
    if let Some(i) = spec.interval_rtts {
        cfg.interval_rtts = i;
    }
    if let Some(r) = spec.link_rate {
        cfg.measurement.link_rate = Some(r);
    }
    let n = cfg.measurement.stream_len;
    match (spec.m, spec.m_successes) {
        (Some(_), Some(_)) => return Err("give a fixed `m` or the adaptive rule's `m_successes`, not both".into()),
        (Some(m), None) if m < 2 || m > n => return Err(format!("m = {m} must be within 2..=N ({n})")),
        (Some(m), None) => cfg.m_policy = MPolicy::Fixed(m),
        (None, Some(f)) => cfg.m_policy = MPolicy::Adaptive { successes: f },
        (None, None) => {}
    }
    match (spec.storing_timer, spec.max_storing_rtts) {
        (Some(_), Some(_)) => {
            return Err("give a fixed `storing_timer` or the adaptive timer's `max_storing_rtts`, not both".into())
        }
        (Some(t), None) if t == Dur::ZERO => return Err("storing_timer must be positive".into()),
        (Some(t), None) => cfg.storing_timer = StoringTimer::Fixed(t),
        (None, Some(0.0)) => cfg.storing_timer = StoringTimer::Adaptive { max_storing_rtts: None },
        (None, Some(x)) => cfg.storing_timer = StoringTimer::Adaptive { max_storing_rtts: Some(x) },
        (None, None) => {}
    }
    match spec.storing_rate.as_deref() {
        None | Some("estimate") => {}
        Some("slower-of-estimate-and-tcp") => cfg.storing_rate = StoringRate::SlowerOfEstimateAndTcp,
        Some(other) => {
            return Err(format!("storing_rate {other:?}: expected \"estimate\" or \"slower-of-estimate-and-tcp\""))
        }
    }
    cfg.measurement.delayed_ack = delayed_ack;
    Ok(SharedImtcp::new(ImtcpBuffer::new(cfg).map_err(|e| e.to_string())?))
}

/// What kind of flow a statistics row describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FlowKind {
    Tcp,
    Udp,
    Web,
    Probe,
}

impl FlowKind {
    /// The kind as written in tables and CSV files (the same as in `summary.json`).
    pub fn name(self) -> &'static str {
        match self {
            FlowKind::Tcp => "tcp",
            FlowKind::Udp => "udp",
            FlowKind::Web => "web",
            FlowKind::Probe => "probe",
        }
    }
}

/// Per-flow statistics (a web population is one row).
#[derive(Clone, Debug, Serialize)]
pub struct FlowStats {
    pub name: String,
    pub kind: FlowKind,
    pub cc: Option<String>,
    /// Bytes that reached the receiver for the first time (TCP payload; UDP whole packets).
    pub bytes: u64,
    pub start_s: f64,
    pub stop_s: f64,
    pub throughput_mbps: f64,
    pub packets_sent: u64,
    pub drops: u64,
    pub retransmits: u64,
    pub fast_retransmits: u64,
    pub timeouts: u64,
    pub acks: u64,
    pub pages: u64,
    pub mean_page_time_s: Option<f64>,
    /// Smallest RTT seen (TCP), ms.
    pub min_rtt_ms: Option<f64>,
    /// Bytes of congestion-control state per connection.
    pub cc_state_bytes: Option<usize>,
    #[serde(skip)]
    interval_bytes: u64,
    #[serde(skip)]
    pub page_times: Vec<(Time, Dur)>,
}

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
    cc: String,
    recover_guard: bool,
    params: TcpParams,
    stop: Time,
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
    /// ImTCP control units installed below bulk flows, by flow-statistics index.
    inline: Vec<(u32, SharedImtcp)>,
    /// Passive estimators watching bulk flows, by flow-statistics index.
    passive: Vec<(u32, Rc<RefCell<TapState>>)>,
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
    pub end: Time,
    pub name: String,
    pub seed: u64,
}

fn node_index(names: &[String], n: &str) -> NodeId {
    names.iter().position(|x| x == n).expect("validated node name") as NodeId
}

impl World {
    /// Builds the world of a validated scenario; `seed` overrides the scenario's.
    pub fn new(sc: &Scenario, seed: Option<u64>) -> Result<World, String> {
        let seed = seed.unwrap_or(sc.seed);
        let names = sc.node_names();
        let mut links = Vec::new();
        let root = Rng::new(seed);
        // Streams 1..=n go to flows and clients; links draw from streams counted down from the top.
        let mut link_stream = u64::MAX;
        for l in &sc.links {
            let outages: Vec<(Time, Time)> = l.outages()?.into_iter().map(|(a, b)| (Time(a.0), Time(b.0))).collect();
            let limit = match (l.queue, l.queue_bytes) {
                (_, Some(b)) => QueueLimit::Bytes(b.0),
                (Some(p), None) => QueueLimit::Packets(p),
                (None, None) => QueueLimit::Packets(1000),
            };
            let (a, b) = (node_index(&names, l.a.get_ref()), node_index(&names, l.b.get_ref()));
            links.push(
                Link::new(format!("{}->{}", l.a.get_ref(), l.b.get_ref()), a, b, l.rate, l.delay, limit)
                    .with_loss(l.loss, root.fork(link_stream))
                    .with_outages(outages.clone()),
            );
            links.push(
                Link::new(
                    format!("{}->{}", l.b.get_ref(), l.a.get_ref()),
                    b,
                    a,
                    l.rate_ba.unwrap_or(l.rate),
                    l.delay_ba.unwrap_or(l.delay),
                    limit,
                )
                .with_loss(l.loss_ba, root.fork(link_stream - 1))
                .with_outages(outages),
            );
            link_stream -= 2;
        }
        let net = Net::new(names.clone(), links);
        let end = Time(sc.duration.0);
        let mut w = World {
            net,
            conns: Vec::new(),
            conn_gen: Vec::new(),
            free_conns: Vec::new(),
            bulk: Vec::new(),
            udp: Vec::new(),
            web: Vec::new(),
            clients: Vec::new(),
            probes: Vec::new(),
            inline: Vec::new(),
            passive: Vec::new(),
            estimates: Vec::new(),
            stats: Vec::new(),
            series: Vec::new(),
            traced_links: Vec::new(),
            trace: Vec::new(),
            trace_interval: sc.trace.interval,
            trace_cwnd: sc.trace.cwnd,
            trace_rtt: sc.trace.rtt,
            trace_seq: sc.trace.seq,
            end,
            name: sc.name.clone().unwrap_or_else(|| "scenario".into()),
            seed,
        };
        let mut stream = 0u64;
        let check_route = |net: &Net, a: NodeId, b: NodeId, what: &str| {
            if net.reachable(a, b) && net.reachable(b, a) {
                Ok(())
            } else {
                Err(format!("{what}: no route between `{}` and `{}`", names[a as usize], names[b as usize]))
            }
        };
        for (i, t) in sc.tcp.iter().enumerate() {
            let (src, dst) =
                (node_index(&w.net.node_names, t.from.get_ref()), node_index(&w.net.node_names, t.to.get_ref()));
            check_route(&w.net, src, dst, &format!("tcp[{i}]"))?;
            let mut rto = match &t.rto {
                Some(p) => rto_preset(p.get_ref())?,
                None => TcpParams::default().rto,
            };
            if let Some(v) = t.rto_min {
                rto.min = v;
            }
            if let Some(v) = t.rto_granularity {
                rto.granularity = v;
            }
            if let Some(v) = t.rto_initial {
                rto.initial = v;
            }
            let max_window = t.max_window.map_or(1 << 30, |b| b.0);
            let params = TcpParams {
                // A window smaller than one segment sends window-sized segments (BSD does).
                mss: t.mss.unwrap_or(1460).min(max_window.max(1) as u32),
                max_window,
                delayed_ack: t.delayed_ack,
                delack_timeout: t.delack_timeout.unwrap_or(Dur::from_millis(100)),
                timestamps: t.timestamps.unwrap_or(true),
                rto,
            };
            for k in 0..t.count {
                let base = t.name.clone().unwrap_or_else(|| format!("tcp{i}"));
                let name = if t.count > 1 { format!("{base}.{k}") } else { base };
                let stat = w.add_stat(name, FlowKind::Tcp, Some(t.cc.get_ref().clone()));
                let rule = match t.ssthresh_rule.as_ref().map(|r| r.get_ref().as_str()) {
                    Some("window") => SsthreshRule::Window { receiver_window: Bytes(params.max_window) },
                    _ => SsthreshRule::FlightSize,
                };
                let cfg = RenoConfig {
                    mss: Bytes(params.mss as u64),
                    initial_window: t.initial_window.unwrap_or(2),
                    initial_ssthresh: None,
                    ssthresh_rule: rule,
                    bsd_increase: t.bsd_increase,
                    recover_guard: t.recover_guard,
                };
                let cc = make_cc(t.cc.get_ref(), cfg);
                w.stats[stat as usize].cc_state_bytes = Some(cc.state_size());
                let bulk_idx = w.bulk.len() as u32;
                let conn =
                    w.open_conn(src, dst, stat, Owner::Bulk(bulk_idx), params, cc, t.bytes.map_or(u64::MAX, |b| b.0));
                if let Some(spec) = &t.imtcp {
                    let shared = make_imtcp(spec, params.delayed_ack).map_err(|e| format!("tcp[{i}].imtcp: {e}"))?;
                    if let Some(c) = w.conns[conn as usize].as_mut() {
                        c.buffer = Some(Box::new(shared.clone()));
                        c.window_listener = Some(shared.clone());
                    }
                    w.inline.push((stat, shared));
                }
                if !t.passive.is_empty() {
                    let names: Vec<String> = t.passive.iter().map(|p| p.get_ref().clone()).collect();
                    let state =
                        Rc::new(RefCell::new(TapState::new(&names).map_err(|e| format!("tcp[{i}].passive: {e}"))?));
                    if let Some(c) = w.conns[conn as usize].as_mut() {
                        let inner = c.buffer.take();
                        c.buffer = Some(Box::new(PassiveTap::new(inner, state.clone())));
                    }
                    w.passive.push((stat, state));
                }
                let start = Time(t.start.unwrap_or(Dur::ZERO).0);
                let stop = t.stop.map(|d| Time(d.0));
                w.bulk.push(BulkFlow { conn, stat, stop });
                w.stats[stat as usize].start_s = start.as_secs_f64();
                w.net.schedule(start, Ev::BulkStart(bulk_idx));
                if let Some(s) = stop {
                    w.net.schedule(s, Ev::BulkStop(bulk_idx));
                }
            }
        }
        for (i, u) in sc.udp.iter().enumerate() {
            let (src, dst) =
                (node_index(&w.net.node_names, u.from.get_ref()), node_index(&w.net.node_names, u.to.get_ref()));
            check_route(&w.net, src, dst, &format!("udp[{i}]"))?;
            for k in 0..u.count {
                let base = u.name.clone().unwrap_or_else(|| format!("udp{i}"));
                let name = if u.count > 1 { format!("{base}.{k}") } else { base };
                let stat = w.add_stat(name, FlowKind::Udp, None);
                stream += 1;
                let start = Time(u.start.unwrap_or(Dur::ZERO).0);
                let stop = u.stop.map_or(end, |d| Time(d.0));
                let mut source = UdpSource::new(u.pattern.clone(), u.size.clone(), root.fork(stream), start);
                let (t0, size) = source.next();
                let idx = w.udp.len() as u32;
                w.udp.push(UdpFlow { src, dst, stat, source, next_size: size, stop });
                w.stats[stat as usize].start_s = start.as_secs_f64();
                if t0 < stop {
                    w.net.schedule(t0, Ev::UdpSend(idx));
                }
            }
        }
        for (i, ws) in sc.web.iter().enumerate() {
            let (clients, servers) = (
                node_index(&w.net.node_names, ws.clients.get_ref()),
                node_index(&w.net.node_names, ws.servers.get_ref()),
            );
            check_route(&w.net, clients, servers, &format!("web[{i}]"))?;
            let name = ws.name.clone().unwrap_or_else(|| format!("web{i}"));
            let stat = w.add_stat(name, FlowKind::Web, Some(ws.cc.get_ref().clone()));
            let params = TcpParams { mss: ws.mss.unwrap_or(1460), delayed_ack: ws.delayed_ack, ..TcpParams::default() };
            let g = w.web.len() as u32;
            let start = Time(ws.start.unwrap_or(Dur::ZERO).0);
            w.web.push(WebGroup {
                clients,
                servers,
                stat,
                model: ws.model.clone(),
                cc: ws.cc.get_ref().clone(),
                recover_guard: ws.recover_guard,
                params,
                stop: ws.stop.map_or(end, |d| Time(d.0)),
            });
            w.stats[stat as usize].start_s = start.as_secs_f64();
            for _ in 0..ws.count {
                stream += 1;
                let mut rng = root.fork(stream);
                // Desynchronise the clients: each starts after one think time.
                let first = start + ws.model.think_time(&mut rng);
                let c = w.clients.len() as u32;
                w.clients.push(WebClient { group: g, rng, outstanding: 0, page_start: Time::ZERO });
                w.net.schedule(first, Ev::WebPage(c));
            }
        }
        for (i, p) in sc.probe.iter().enumerate() {
            let (src, dst) =
                (node_index(&w.net.node_names, p.from.get_ref()), node_index(&w.net.node_names, p.to.get_ref()));
            check_route(&w.net, src, dst, &format!("probe[{i}]"))?;
            let name = p.name.clone().unwrap_or_else(|| format!("probe{i}"));
            let stat = w.add_stat(name, FlowKind::Probe, Some(p.method.get_ref().clone()));
            let start = p.start.unwrap_or(Dur::ZERO);
            let stop = p.stop.unwrap_or(sc.duration);
            let prober = make_prober(p, start, stat, stop).map_err(|e| format!("probe[{i}]: {e}"))?;
            w.stats[stat as usize].start_s = start.as_secs_f64();
            let idx = w.probes.len() as u32;
            w.probes.push(ProbeFlow { src, dst, stat, prober, wake: Some(Time(start.0)) });
            w.net.schedule(Time(start.0), Ev::ProbeWake(idx));
        }
        for q in &sc.trace.queues {
            let li = w
                .net
                .links
                .iter()
                .position(|l| &l.name == q.get_ref())
                .ok_or_else(|| format!("trace.queues: no link `{}`", q.get_ref()))?;
            let s = w.series.len() as u32;
            w.series.push(q.get_ref().clone());
            w.traced_links.push((li as u32, s));
        }
        w.net.schedule(Time(w.trace_interval.0), Ev::Sample);
        Ok(w)
    }

    fn add_stat(&mut self, name: String, kind: FlowKind, cc: Option<String>) -> u32 {
        self.stats.push(FlowStats {
            name: name.clone(),
            kind,
            cc,
            bytes: 0,
            start_s: 0.0,
            stop_s: 0.0,
            throughput_mbps: 0.0,
            packets_sent: 0,
            drops: 0,
            retransmits: 0,
            fast_retransmits: 0,
            timeouts: 0,
            acks: 0,
            pages: 0,
            mean_page_time_s: None,
            min_rtt_ms: None,
            cc_state_bytes: None,
            interval_bytes: 0,
            page_times: Vec::new(),
        });
        self.series.push(name);
        (self.stats.len() - 1) as u32
    }

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
        self.conns[slot as usize] = Some(TcpConn::new(slot, gen, src, dst, stat, owner, params, cc, None, total));
        slot
    }

    /// Installs a send buffer (ImTCP) below a bulk flow's sender, before the run starts.
    pub fn set_send_buffer(&mut self, bulk_flow: usize, buffer: Box<dyn headroom_core::cc::SendBuffer>) {
        let slot = self.bulk[bulk_flow].conn as usize;
        if let Some(c) = self.conns[slot].as_mut() {
            c.buffer = Some(buffer);
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
            Ev::LinkFree(l) => self.net.link_free(l),
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
                if !self.passive.is_empty() {
                    if let Some((_, tap)) = self.passive.iter().find(|(s, _)| *s == stat) {
                        tap.borrow_mut().on_data_arrival(net.now, p.size as u64, c.rtt.srtt());
                    }
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
                let (srv, cli, stat, params, ccname) = (g.servers, g.clients, g.stat, g.params, g.cc.clone());
                let cfg = RenoConfig {
                    mss: Bytes(params.mss as u64),
                    recover_guard: g.recover_guard,
                    ..RenoConfig::default()
                };
                let cc = make_cc(&ccname, cfg);
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

    fn drain_inline_estimates(&mut self) {
        for (stat, shared) in &self.inline {
            while let Some(e) = shared.poll_estimate() {
                self.estimates.push(EstimateRow {
                    time: e.time,
                    stat: *stat,
                    method: EstimateMethod::Imtcp,
                    value: Some(e.value),
                    verdict: Verdict::in_range(e.in_range),
                    range: e.search_range,
                    elapsed: Dur::ZERO,
                    bytes: 0,
                });
            }
        }
    }

    /// Records the passive estimators' mean samples of the interval ending now.
    fn drain_passive_estimates(&mut self) {
        let now = self.net.now;
        for (stat, tap) in &self.passive {
            let stat = *stat;
            let estimates = &mut self.estimates;
            tap.borrow_mut().take_means(|method, value| {
                estimates.push(EstimateRow {
                    time: now,
                    stat,
                    method,
                    value: Some(value),
                    verdict: Verdict::Estimate,
                    range: (Rate::ZERO, Rate::ZERO),
                    elapsed: Dur::ZERO,
                    bytes: 0,
                })
            });
        }
    }

    /// The ImTCP control unit of bulk flow `k` (in scenario order), if it has one.
    pub fn inline_measurement(&self, stat: u32) -> Option<&SharedImtcp> {
        self.inline.iter().find(|(s, _)| *s == stat).map(|(_, m)| m)
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

    fn web_page(&mut self, c: u32) {
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
            Packet { kind: Kind::Request, dst, size: REQUEST_SIZE, endpoint: c, gen: 0, stat, seq: size, ts: now },
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

    /// Final per-flow statistics (call after the run).
    pub fn report(&mut self) -> Report {
        let end = self.net.now;
        self.drain_inline_estimates();
        for p in &self.probes {
            self.stats[p.stat as usize].stop_s = self.end.as_secs_f64();
        }
        for b in &self.bulk {
            let s = &mut self.stats[b.stat as usize];
            let stop = b.stop.unwrap_or(end).min(end);
            s.stop_s = stop.as_secs_f64();
            if let Some(c) = self.conns[b.conn as usize].as_ref() {
                s.packets_sent = c.counters.segments_sent;
                s.retransmits = c.counters.retransmits;
                s.fast_retransmits = c.counters.fast_retransmits;
                s.timeouts = c.counters.timeouts;
                s.acks = c.counters.acks_received;
                s.min_rtt_ms = c.rtt.min_rtt().map(|r| r.as_millis_f64());
                if let Some(done) = c.completed {
                    s.stop_s = done.as_secs_f64();
                }
            }
        }
        for u in &self.udp {
            self.stats[u.stat as usize].stop_s = u.stop.min(end).as_secs_f64();
        }
        for g in &self.web {
            let s = &mut self.stats[g.stat as usize];
            s.stop_s = g.stop.min(end).as_secs_f64();
            if !s.page_times.is_empty() {
                let sum: f64 = s.page_times.iter().map(|(_, d)| d.as_secs_f64()).sum();
                s.mean_page_time_s = Some(sum / s.page_times.len() as f64);
            }
        }
        // Web connections still open count towards their population's totals.
        let open: Vec<u32> =
            self.conns.iter().flatten().filter(|c| matches!(c.owner, Owner::Web(_))).map(|c| c.slot).collect();
        for slot in open {
            self.close_conn(slot);
        }
        for (i, s) in self.stats.iter_mut().enumerate() {
            s.drops = self.net.drops_by_stat.get(i).copied().unwrap_or(0);
            let span = (s.stop_s - s.start_s).max(1e-9);
            s.throughput_mbps = s.bytes as f64 * 8.0 / span / 1e6;
        }
        let links = self
            .net
            .links
            .iter()
            .map(|l| LinkReport {
                name: l.name.clone(),
                rate_mbps: l.rate.as_mbps(),
                tx_packets: l.tx_packets,
                utilisation: (l.tx_bytes as f64 * 8.0) / (l.rate.0 as f64 * end.as_secs_f64().max(1e-9)),
                drops: l.drops,
                max_queue_packets: l.max_queue_packets as u64,
            })
            .collect();
        Report {
            scenario: self.name.clone(),
            seed: self.seed,
            duration_s: end.as_secs_f64(),
            flows: self.stats.clone(),
            links,
            packets: PacketReport::from(self.net.counters, self.net.packets_in_network()),
        }
    }

    /// Packets through a link so far (benchmark figure).
    pub fn link_packets(&self, name: &str) -> Option<u64> {
        self.net.links.iter().find(|l| l.name == name).map(|l| l.tx_packets)
    }
}

/// Per-link figures of a report.
#[derive(Clone, Debug, Serialize)]
pub struct LinkReport {
    pub name: String,
    pub rate_mbps: f64,
    pub tx_packets: u64,
    pub utilisation: f64,
    pub drops: u64,
    pub max_queue_packets: u64,
}

/// Packet conservation: created = delivered + dropped + in the network.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct PacketReport {
    pub created: u64,
    pub delivered: u64,
    pub dropped: u64,
    pub in_network: u64,
    pub events: u64,
}

impl PacketReport {
    fn from(c: Counters, in_network: u64) -> PacketReport {
        PacketReport { created: c.created, delivered: c.delivered, dropped: c.dropped, in_network, events: c.events }
    }
}

/// The JSON summary of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub scenario: String,
    pub seed: u64,
    pub duration_s: f64,
    pub flows: Vec<FlowStats>,
    pub links: Vec<LinkReport>,
    pub packets: PacketReport,
}
