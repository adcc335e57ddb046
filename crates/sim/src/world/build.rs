//! Building the world of a validated [`Scenario`]: links, then bulk TCP flows, UDP sources, web
//! populations, probes and traced queues, each drawing from its own random stream.

use headroom_core::cc::reno::{RenoConfig, SsthreshRule};
use headroom_core::units::{Bytes, Dur, Time};

use super::{BulkFlow, FlowKind, FlowStats, ProbeFlow, UdpFlow, WebClient, WebGroup, World};
use crate::build::{make_cc, make_prober};
use crate::net::{Ev, Link, Net, NodeId, QueueLimit};
use crate::passive::TapState;
use crate::scenario::{rto_preset, CcKind, ImtcpSpec, Scenario};
use crate::tcp::{Owner, SenderBuffer, TcpParams};
use crate::traffic::UdpSource;
use headroom_core::rng::Rng;

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
            estimates: Vec::new(),
            stats: Vec::new(),
            series: Vec::new(),
            traced_links: Vec::new(),
            trace: Vec::new(),
            trace_interval: sc.trace.interval,
            trace_cwnd: sc.trace.cwnd,
            trace_rtt: sc.trace.rtt,
            trace_seq: sc.trace.seq,
            trace_measured_rate: sc.trace.measured_rate,
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
            let sack = sack_for(t.cc, t.sack, &format!("tcp[{i}]"))?;
            let max_window = t.max_window.map_or(1 << 30, |b| b.0);
            let params = TcpParams {
                // A window smaller than one segment sends window-sized segments (BSD does).
                mss: t.mss.unwrap_or(1460).min(max_window.max(1) as u32),
                max_window,
                delayed_ack: t.delayed_ack,
                delack_timeout: t.delack_timeout.unwrap_or(Dur::from_millis(100)),
                timestamps: t.timestamps.unwrap_or(true),
                sack,
                rto,
            };
            for k in 0..t.count {
                let base = t.name.clone().unwrap_or_else(|| format!("tcp{i}"));
                let name = if t.count > 1 { format!("{base}.{k}") } else { base };
                let stat = w.add_stat(name, FlowKind::Tcp, Some(t.cc.to_string()));
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
                // The background mode's m·N is one of the buffer's streams: N from its `imtcp` key;
                // so is the measurement allowance of ImTCP-bg's headroom rule.
                let kind = match (t.cc, t.imtcp.as_ref().and_then(|s| s.stream_len)) {
                    (CcKind::ImtcpBackground(mut c), Some(n)) => {
                        c.stream_len = n;
                        CcKind::ImtcpBackground(c)
                    }
                    (CcKind::ImtcpBg(mut c), Some(n)) if c.measurement_allowance.is_some() => {
                        c.measurement_allowance = Some(n as u32);
                        CcKind::ImtcpBg(c)
                    }
                    (k, _) => k,
                };
                let cc = make_cc(kind, cfg);
                w.stats[stat as usize].cc_state_bytes = Some(cc.state_size());
                let bulk_idx = w.bulk.len() as u32;
                let conn =
                    w.open_conn(src, dst, stat, Owner::Bulk(bulk_idx), params, cc, t.bytes.map_or(u64::MAX, |b| b.0));
                if let Some(c) = w.conns[conn as usize].as_mut() {
                    // Controllers that read ImTCP's measurement get its buffer with the paper's
                    // defaults when the entry has no `imtcp` key.
                    let default_unit = ImtcpSpec::default();
                    let spec = t.imtcp.as_ref().or(t.cc.needs_inline_measurement().then_some(&default_unit));
                    if let Some(spec) = spec {
                        let unit = spec.control_unit(params.delayed_ack).map_err(|e| format!("tcp[{i}].imtcp: {e}"))?;
                        c.buffer = SenderBuffer::Imtcp(Box::new(unit));
                    }
                    if !t.passive.is_empty() {
                        let names: Vec<String> = t.passive.iter().map(|p| p.get_ref().clone()).collect();
                        c.tap = Some(TapState::new(&names).map_err(|e| format!("tcp[{i}].passive: {e}"))?);
                    }
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
            let stat = w.add_stat(name, FlowKind::Web, Some(ws.cc.to_string()));
            let params = TcpParams {
                mss: ws.mss.unwrap_or(1460),
                delayed_ack: ws.delayed_ack,
                sack: sack_for(ws.cc, ws.sack, &format!("web[{i}]"))?,
                ..TcpParams::default()
            };
            let g = w.web.len() as u32;
            let start = Time(ws.start.unwrap_or(Dur::ZERO).0);
            w.web.push(WebGroup {
                clients,
                servers,
                stat,
                model: ws.model.clone(),
                cc: ws.cc,
                recover_guard: ws.recover_guard,
                params,
                stop: ws.stop.map_or(end, |d| Time(d.0)),
                max_pages: ws.max_pages,
                busy_servers: 0,
                waiting: std::collections::VecDeque::new(),
            });
            w.stats[stat as usize].start_s = start.as_secs_f64();
            for _ in 0..ws.count {
                stream += 1;
                let mut rng = root.fork(stream);
                // Desynchronise the clients: each starts after one think time.
                let first = start + ws.model.think_time(&mut rng);
                let c = w.clients.len() as u32;
                w.clients.push(WebClient {
                    group: g,
                    rng,
                    outstanding: 0,
                    page_start: Time::ZERO,
                    holds_server: false,
                });
                w.net.schedule(first, Ev::WebPage(c));
            }
        }
        for (i, p) in sc.probe.iter().enumerate() {
            let (src, dst) =
                (node_index(&w.net.node_names, p.from.get_ref()), node_index(&w.net.node_names, p.to.get_ref()));
            check_route(&w.net, src, dst, &format!("probe[{i}]"))?;
            let name = p.name.clone().unwrap_or_else(|| format!("probe{i}"));
            let stat = w.add_stat(name, FlowKind::Probe, Some(p.method.get_ref().name().to_string()));
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
}

/// The `sack` a flow runs with: as asked, or by default where the controller fits it
/// ([`CcKind::fits_sack`]); asking for SACK with a controller that does not fit is an error.
fn sack_for(cc: CcKind, asked: Option<bool>, what: &str) -> Result<bool, String> {
    match asked {
        Some(true) if !cc.fits_sack() => Err(format!(
            "{what}: sack = true needs a controller with NewReno's recovery; `{cc}` leaves recovery at the first \
             partial ACK (use `newreno`, `becc-newreno`, `cubic`, ... or sack = false)"
        )),
        Some(v) => Ok(v),
        None => Ok(cc.sack_by_default()),
    }
}
