//! The summary of a run: per-flow statistics, per-link figures and packet conservation.

use headroom_core::units::{Dur, Time};
use serde::Serialize;

use super::World;
use crate::net::Counters;
use crate::tcp::Owner;

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
    pub(super) interval_bytes: u64,
    #[serde(skip)]
    pub page_times: Vec<(Time, Dur)>,
}

impl World {
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
            packets: PacketReport::from(self.net.counters(), self.net.packets_in_network()),
        }
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
