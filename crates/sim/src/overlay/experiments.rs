//! The paper's set-ups as [`OverlayConfig`] builders: the three-segment path of Fig. 2 / Fig. 3
//! ([`chain`]) and the loaded proxy of Fig. 4 / Figs. 5–8 ([`web_proxy`]).

use std::net::{IpAddr, Ipv4Addr};

use headroom_core::overlay::SplitPolicy;
use headroom_core::units::{Bytes, Dur, Rate, Time};

use super::engine::{LinkSpec, NodeId};
use super::surge::SurgeModel;
use super::world::{FlowClass, FlowSpec, OverlayConfig, OverlayWorld, ProxySpec};

/// Fig. 2's path: sender – LAN1 – R1/P1 – WAN – R2/P2 – LAN2 – receiver. Index 0 is LAN1,
/// 1 the WAN, 2 LAN2. Loss applies to the data direction (toward the receiver) only.
#[derive(Clone, Debug, PartialEq)]
pub struct ChainParams {
    pub delay: [Dur; 3],
    pub loss: [f64; 3],
    pub rate: [Rate; 3],
    /// Case 2 (split at R1 and R2) or Case 1 (one end-to-end connection).
    pub split: bool,
    pub receive_buffer: Bytes,
    pub send_buffer: Bytes,
    pub client_window: Bytes,
    /// Link queues in packets.
    pub queue: usize,
    pub per_packet: Dur,
    pub warmup: Dur,
    pub duration: Dur,
    pub seed: u64,
}

impl ChainParams {
    /// Our Fig. 3 baseline (the paper's values are in its figure, not its text): 100 Mbit/s
    /// segments, LAN1 5 ms / 0.1 %, WAN 20 ms / 0.1 %, LAN2 varied; 256 KB relay buffers; a
    /// 1 MB client window (loss, not the window, limits the rate); a free CPU.
    pub fn fig3(p_lan2: f64, d_lan2: Dur, split: bool) -> ChainParams {
        ChainParams {
            delay: [Dur::from_millis(5), Dur::from_millis(20), d_lan2],
            loss: [0.001, 0.001, p_lan2],
            rate: [Rate::from_mbps(100); 3],
            split,
            receive_buffer: Bytes(256 * 1024),
            send_buffer: Bytes(256 * 1024),
            client_window: Bytes(1 << 20),
            queue: 1000,
            per_packet: Dur::ZERO,
            warmup: Dur::from_secs(5),
            duration: Dur::from_secs(200),
            seed: 1,
        }
    }
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
