//! The paper's set-ups as [`OverlayConfig`] builders: the three-segment path of Fig. 2 / Fig. 3
//! ([`chain`]) and the loaded proxy of Fig. 4 / Figs. 5–8 ([`web_proxy`]). Their parameters
//! are data: `scenarios/overlay/fig3.toml` ([`Fig3Setup`]) and `scenarios/overlay/web.toml`
//! ([`WebSetup`]), embedded in the binary; the experiments vary only what the figures vary (the
//! grid point, the split policy).

use std::net::{IpAddr, Ipv4Addr};

use headroom_core::overlay::SplitPolicy;
use headroom_core::units::{Bytes, Dur, Rate, Time};
use serde::Deserialize;

/// `scenarios/overlay/fig3.toml`, as embedded.
pub const FIG3_FILE: &str = include_str!("../../../../scenarios/overlay/fig3.toml");
/// `scenarios/overlay/web.toml`, as embedded.
pub const WEB_FILE: &str = include_str!("../../../../scenarios/overlay/web.toml");

/// Fig. 3's file: the grid and the path around it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fig3Setup {
    /// LAN2's loss rates.
    pub p_lan2: Vec<f64>,
    /// LAN2's one-way delays.
    pub d_lan2: Vec<Dur>,
    /// Measured time per simulated point (after the warm-up).
    pub duration: Dur,
    /// The path; its LAN2 delay and loss are replaced at each grid point, `split` and
    /// `duration` are set by [`Fig3Setup::point`].
    pub path: ChainParams,
}

fn parse_file<T: serde::de::DeserializeOwned>(src: &str, origin: &str) -> Result<T, String> {
    toml::from_str(src).map_err(|e| format!("{origin}: {}", e.message()))
}

fn check_loss(what: &str, p: f64) -> Result<(), String> {
    if (0.0..1.0).contains(&p) {
        Ok(())
    } else {
        Err(format!("{what} = {p}: a loss rate must be in [0, 1)"))
    }
}

impl Fig3Setup {
    /// Parses and checks a Fig. 3 file (`origin` names it in errors).
    pub fn parse(src: &str, origin: &str) -> Result<Fig3Setup, String> {
        let f: Fig3Setup = parse_file(src, origin)?;
        let at = |m: String| format!("{origin}: {m}");
        if f.p_lan2.is_empty() || f.d_lan2.is_empty() {
            return Err(at("`p_lan2` and `d_lan2` must each list at least one value".into()));
        }
        for &p in f.p_lan2.iter().chain(&f.path.loss) {
            check_loss("a loss rate", p).map_err(at)?;
        }
        if f.path.rate.iter().any(|r| r.0 == 0) || f.path.queue == 0 || f.duration == Dur::ZERO {
            return Err(at("rates, `queue` and `duration` must be positive".into()));
        }
        Ok(f)
    }

    /// The path at one grid point, Case 2 (`split`) or Case 1.
    pub fn point(&self, p_lan2: f64, d_lan2: Dur, split: bool) -> ChainParams {
        let mut c = self.path.clone();
        c.delay[2] = d_lan2;
        c.loss[2] = p_lan2;
        c.split = split;
        c.duration = self.duration;
        c
    }
}

use super::engine::{LinkSpec, NodeId};
use super::surge::SurgeModel;
use super::world::{FlowClass, FlowSpec, OverlayConfig, OverlayWorld, ProxySpec, WebClientSpec};

/// Fig. 2's path: sender – LAN1 – R1/P1 – WAN – R2/P2 – LAN2 – receiver. Index 0 is LAN1,
/// 1 the WAN, 2 LAN2. Loss applies to the data direction (toward the receiver) only.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainParams {
    pub delay: [Dur; 3],
    pub loss: [f64; 3],
    pub rate: [Rate; 3],
    /// Case 2 (split at R1 and R2) or Case 1 (one end-to-end connection).
    #[serde(skip)]
    pub split: bool,
    pub receive_buffer: Bytes,
    pub send_buffer: Bytes,
    pub client_window: Bytes,
    /// Link queues in packets.
    pub queue: usize,
    pub per_packet: Dur,
    pub warmup: Dur,
    #[serde(skip)]
    pub duration: Dur,
    pub seed: u64,
}

pub const CHAIN_SENDER: NodeId = 0;
pub const CHAIN_P1: NodeId = 1;
pub const CHAIN_P2: NodeId = 2;
pub const CHAIN_RECEIVER: NodeId = 3;

fn duplex(a: NodeId, b: NodeId, rate: Rate, delay: Dur, queue: usize, loss_ab: f64) -> [LinkSpec; 2] {
    [
        LinkSpec { from: a, to: b, rate, delay, queue, loss: loss_ab },
        LinkSpec { from: b, to: a, rate, delay, queue, loss: 0.0 },
    ]
}

/// One long transfer along Fig. 2's path.
pub fn chain(p: &ChainParams, size: u64) -> OverlayConfig {
    let mut links = Vec::new();
    for (i, (a, b)) in
        [(CHAIN_SENDER, CHAIN_P1), (CHAIN_P1, CHAIN_P2), (CHAIN_P2, CHAIN_RECEIVER)].into_iter().enumerate()
    {
        links.extend(duplex(a, b, p.rate[i], p.delay[i], p.queue, p.loss[i]));
    }
    let proxies = if p.split {
        [CHAIN_P1, CHAIN_P2]
            .into_iter()
            .map(|node| ProxySpec {
                node,
                per_packet: p.per_packet,
                policy: SplitPolicy::All,
                receive_buffer: p.receive_buffer,
                send_buffer: p.send_buffer,
                cpu_queue: None,
            })
            .collect()
    } else {
        Vec::new()
    };
    OverlayConfig {
        nodes: 4,
        links,
        proxies,
        flows: vec![FlowSpec {
            client: CHAIN_RECEIVER,
            server: CHAIN_SENDER,
            source: IpAddr::V4(Ipv4Addr::new(10, 2, 0, 1)),
            size,
            start: Time::ZERO,
            class: FlowClass::Ftp,
        }],
        web_clients: Vec::new(),
        surge: SurgeModel::default(),
        web_start: Time::MAX,
        web_stop: Time::ZERO,
        client_window: p.client_window,
        server_buffer: Bytes(1 << 20),
        seed: p.seed,
    }
}

/// The long transfer's goodput (bit/s) at the receiver between `warmup` and `warmup + duration`.
pub fn chain_throughput(p: &ChainParams) -> f64 {
    let mut w = OverlayWorld::new(chain(p, u64::MAX / 4));
    let t0 = Time::ZERO + p.warmup;
    w.run_until(t0);
    let b0 = w.received(0);
    w.run_until(t0 + p.duration);
    let b1 = w.received(0);
    (b1 - b0) as f64 * 8.0 / p.duration.as_secs_f64()
}

/// Addresses: FTP client `i` is 10.0.i/256.i%256, web client `i` is 10.1.i/256.i%256.
pub fn client_address(web: bool, i: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, u8::from(web), (i / 256) as u8, (i % 256) as u8))
}

/// One point of Fig. 3: analytic and simulated throughput (bit/s) of both cases.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fig3Point {
    pub p_lan2: f64,
    pub d_lan2: Dur,
    pub padhye_case1: f64,
    pub model_case2: f64,
    pub sim_case1: f64,
    pub sim_case2: f64,
}

impl Fig3Point {
    pub fn model_gain(&self) -> f64 {
        self.model_case2 / self.padhye_case1
    }
    pub fn sim_gain(&self) -> f64 {
        self.sim_case2 / self.sim_case1
    }
}

/// The analytic side of a Fig. 3 point (bit/s): Padhye for Case 1 over the whole path, and the
/// relay-coupled model for Case 2 over its three connections.
pub fn fig3_models(p: &ChainParams) -> (f64, f64) {
    use super::model::{padhye, relay_chain, Segment};
    let mss_bits = super::tcp::MSS as f64 * 8.0;
    let rtt = |d: Dur| 2.0 * d.as_secs_f64();
    let pkts = |b: Bytes| b.0 as f64 / super::tcp::MSS as f64;
    let survive: f64 = p.loss.iter().map(|l| 1.0 - l).product();
    let whole =
        Segment { loss: 1.0 - survive, rtt: p.delay.iter().map(|d| rtt(*d)).sum(), wmax: pkts(p.client_window) };
    let segs = [
        Segment { loss: p.loss[0], rtt: rtt(p.delay[0]), wmax: pkts(p.receive_buffer) },
        Segment { loss: p.loss[1], rtt: rtt(p.delay[1]), wmax: pkts(p.receive_buffer) },
        Segment { loss: p.loss[2], rtt: rtt(p.delay[2]), wmax: pkts(p.client_window) },
    ];
    (padhye(whole) * mss_bits, relay_chain(&segs, pkts(p.send_buffer), 1e-6) * mss_bits)
}

/// Fig. 3 at one `(P_LAN2, D_LAN2)` of `setup`'s path.
pub fn fig3_point(setup: &Fig3Setup, p_lan2: f64, d_lan2: Dur) -> Fig3Point {
    let c1 = setup.point(p_lan2, d_lan2, false);
    let c2 = ChainParams { split: true, ..c1.clone() };
    let (padhye_case1, model_case2) = fig3_models(&c1);
    Fig3Point {
        p_lan2,
        d_lan2,
        padhye_case1,
        model_case2,
        sim_case1: chain_throughput(&c1),
        sim_case2: chain_throughput(&c2),
    }
}

/// The split policy of a Figs. 5–8 run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum PolicyChoice {
    /// Policy A: the web clients `0..users` (their addresses, as source prefixes).
    Users(u32),
    /// Policy B: documents of at least 2000 bytes.
    LargeDocuments,
    /// Policy C: `L(T) < 0.9 / t`.
    LowLoad,
    /// Policy D: smoothed CPU queueing delay below `target`.
    ShortQueue {
        target: Dur,
    },
    All,
    #[default]
    None,
}

/// Figs. 4–8's set-up (our reading of Fig. 4, whose values are in the figure only): FTP and web
/// servers on 100 Mbit/s, 1 ms links to router R1; R1 – proxy – R2 at 1 Gbit/s, 1 ms; clients on
/// links of delay `D` behind R2 (FTP clients 256 kbit/s, web clients 10 Mbit/s), losing
/// `client_loss` of the data packets toward the clients.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebProxyParams {
    pub ftp_flows: u32,
    pub web_pairs: u32,
    pub d: Dur,
    pub client_loss: f64,
    pub per_packet: Dur,
    #[serde(skip)]
    pub policy: PolicyChoice,
    pub ftp_access: Rate,
    pub web_access: Rate,
    pub buffers: Bytes,
    pub web_start: Dur,
    pub web_stop: Dur,
    pub end: Dur,
    pub seed: u64,
}

/// `scenarios/overlay/web.toml`: the Figs. 5–7 set-up and what Fig. 8 changes.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSetup {
    /// The Figs. 5–7 set-up; its `policy` is set per run by [`WebSetup::fig5_7`].
    pub fig5_7: WebProxyParams,
    pub fig8: Fig8Changes,
}

/// What Fig. 8 changes.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fig8Changes {
    pub d: Dur,
    pub client_loss: f64,
}

impl WebSetup {
    /// Parses and checks a web set-up file (`origin` names it in errors).
    pub fn parse(src: &str, origin: &str) -> Result<WebSetup, String> {
        let f: WebSetup = parse_file(src, origin)?;
        let at = |m: String| format!("{origin}: {m}");
        check_loss("fig5_7.client_loss", f.fig5_7.client_loss).map_err(at)?;
        check_loss("fig8.client_loss", f.fig8.client_loss).map_err(at)?;
        let w = &f.fig5_7;
        if w.ftp_access.0 == 0 || w.web_access.0 == 0 || w.buffers.0 == 0 {
            return Err(at("access rates and `buffers` must be positive".into()));
        }
        if !(w.web_start <= w.web_stop && w.web_stop <= w.end) {
            return Err(at("need web_start <= web_stop <= end".into()));
        }
        Ok(f)
    }

    /// Figs. 5–7 under `policy`.
    pub fn fig5_7(&self, policy: PolicyChoice) -> WebProxyParams {
        WebProxyParams { policy, ..self.fig5_7.clone() }
    }

    /// Fig. 8 under `policy`.
    pub fn fig8(&self, policy: PolicyChoice) -> WebProxyParams {
        WebProxyParams { d: self.fig8.d, client_loss: self.fig8.client_loss, ..self.fig5_7(policy) }
    }
}

/// Builds the Figs. 4–8 world's configuration.
pub fn web_proxy(p: &WebProxyParams) -> OverlayConfig {
    use headroom_core::overlay::{
        SourcePrefix, SplitLargeDocuments, SplitUsers, SplitWhileLowLoad, SplitWhileShortQueue,
    };
    const R1: NodeId = 0;
    const PROXY: NodeId = 1;
    const R2: NodeId = 2;
    let ms = Dur::from_millis(1);
    let mut links = Vec::new();
    links.extend(duplex(R1, PROXY, Rate::from_mbps(1000), ms, 5000, 0.0));
    links.extend(duplex(PROXY, R2, Rate::from_mbps(1000), ms, 5000, 0.0));
    let mut next: NodeId = 3;
    let mut host = |links: &mut Vec<LinkSpec>, router: NodeId, rate: Rate, delay: Dur, loss: f64| {
        let n = next;
        next += 1;
        // Loss applies toward the host (the data direction for clients).
        links.extend(duplex(router, n, rate, delay, 100, loss));
        n
    };
    let mut flows = Vec::new();
    let mut start_rng = headroom_core::rng::Rng::new(p.seed).fork(7);
    for i in 0..p.ftp_flows {
        let server = host(&mut links, R1, Rate::from_mbps(100), ms, 0.0);
        let client = host(&mut links, R2, p.ftp_access, p.d, p.client_loss);
        flows.push(FlowSpec {
            client,
            server,
            source: client_address(false, i),
            size: u64::MAX / 4,
            start: Time::ZERO + Dur::from_secs_f64(start_rng.uniform()),
            class: FlowClass::Ftp,
        });
    }
    let mut web_clients = Vec::new();
    for i in 0..p.web_pairs {
        let server = host(&mut links, R1, Rate::from_mbps(100), ms, 0.0);
        let client = host(&mut links, R2, p.web_access, p.d, p.client_loss);
        web_clients.push(WebClientSpec { client, server, source: client_address(true, i) });
    }
    let policy = match p.policy {
        PolicyChoice::Users(n) => SplitPolicy::Users(SplitUsers {
            users: (0..n).filter_map(|i| SourcePrefix::new(client_address(true, i), 32)).collect(),
        }),
        PolicyChoice::LargeDocuments => SplitPolicy::LargeDocuments(SplitLargeDocuments::paper()),
        PolicyChoice::LowLoad => SplitPolicy::LowLoad(SplitWhileLowLoad::paper(p.per_packet, Time::ZERO)),
        PolicyChoice::ShortQueue { target } => {
            SplitPolicy::ShortQueue(SplitWhileShortQueue::new(target, SplitWhileShortQueue::IDLE_RESET))
        }
        PolicyChoice::All => SplitPolicy::All,
        PolicyChoice::None => SplitPolicy::None,
    };
    OverlayConfig {
        nodes: next as usize,
        links,
        proxies: vec![ProxySpec {
            node: PROXY,
            per_packet: p.per_packet,
            policy,
            receive_buffer: p.buffers,
            send_buffer: p.buffers,
            cpu_queue: None,
        }],
        flows,
        web_clients,
        surge: SurgeModel::default(),
        web_start: Time::ZERO + p.web_start,
        web_stop: Time::ZERO + p.web_stop,
        client_window: p.buffers,
        server_buffer: p.buffers,
        seed: p.seed,
    }
}

/// What one Figs. 5–8 run gives: every web transfer started in the measured window, and the
/// proxy's counters.
pub struct WebProxyRun {
    pub web: Vec<super::FlowRecord>,
    pub proxy: super::ProxyStats,
    pub duration: Dur,
    pub events: u64,
}

pub fn run_web_proxy(p: &WebProxyParams) -> WebProxyRun {
    let mut w = OverlayWorld::new(web_proxy(p));
    let end = Time::ZERO + p.end;
    w.run_until(end);
    let web = w.records().into_iter().filter(|r| r.class == FlowClass::Web).collect();
    WebProxyRun { web, proxy: w.proxy_stats().remove(0), duration: p.end, events: w.events() }
}
