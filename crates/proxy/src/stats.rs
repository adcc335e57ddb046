//! Global and per-connection counters of the proxy.

use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Global counters, updated by every connection task (relaxed atomics: each value is exact,
/// a snapshot of several values is not taken at one instant).
#[derive(Default, Debug)]
pub struct Stats {
    /// Connections accepted from clients (including those refused afterwards).
    pub accepted: AtomicU64,
    /// Connections being relayed now.
    pub active: AtomicU64,
    /// Connections relayed split (the proxy terminates the client's TCP and opens its own).
    pub split: AtomicU64,
    /// Connections the split policy did not select. Explicit mode cannot hand them on
    /// untouched (the client addressed the proxy): they are relayed *coupled*, with a one-page
    /// relay buffer and no enlarged socket buffers, so that the end-to-end flow control holds.
    pub bypassed: AtomicU64,
    /// Connections reset at once because their source already had `max_per_source` open.
    pub refused_per_source: AtomicU64,
    /// Times the accept loop paused because `max_conns` connections were open (the client
    /// waits in the kernel's listen backlog: explicit mode cannot bypass).
    pub cap_pauses: AtomicU64,
    /// Transparent mode: times the nftables gate was closed because `max_conns` connections
    /// were open (new connections then bypass the proxy: the kernel forwards them untouched).
    pub cap_bypass_closes: AtomicU64,
    /// Upstream connects that failed or timed out (the client got a RST).
    pub upstream_failed: AtomicU64,
    /// Connections that ended with a reset (propagated to the other side).
    pub resets: AtomicU64,
    /// Connections closed by the idle timeout (both sides reset).
    pub idle_timeouts: AtomicU64,
    /// Connections that ended with a FIN in both directions.
    pub completed: AtomicU64,
    /// Bytes relayed client → upstream.
    pub bytes_up: AtomicU64,
    /// Bytes relayed upstream → client.
    pub bytes_down: AtomicU64,
    /// Bytes held in relay buffers (pipes or user-space buffers) now, all connections.
    pub buffered: AtomicU64,
    /// Largest value `buffered` reached.
    pub buffered_peak: AtomicU64,
    /// Total time the upstream-bound direction waited for data from the client with an empty
    /// relay buffer (the upstream leg idle because the client leg had nothing to deliver), ns.
    pub upstream_idle_ns: AtomicU64,
    /// Total time the upstream-bound direction waited for the upstream to accept data (the
    /// relay buffer full: the coupling pushing back on the client leg), ns.
    pub upstream_blocked_ns: AtomicU64,
    /// `--emulate-cpu`: service time reserved on the emulated CPU (its busy time), ns.
    pub cpu_busy_ns: AtomicU64,
    /// `--emulate-cpu`: time jobs waited in the emulated CPU's queue before service, ns.
    pub cpu_wait_ns: AtomicU64,
    /// `--emulate-cpu`: jobs served (SYNs, SYN-ACKs, relayed chunks).
    pub cpu_jobs: AtomicU64,
}

impl Stats {
    pub(crate) fn add_buffered(&self, n: usize) {
        let now = self.buffered.fetch_add(n as u64, Relaxed) + n as u64;
        self.buffered_peak.fetch_max(now, Relaxed);
    }
    pub(crate) fn sub_buffered(&self, n: usize) {
        self.buffered.fetch_sub(n as u64, Relaxed);
    }

    /// All counters as one JSON object (the `--stats` line without its time stamp).
    pub fn to_json(&self) -> Value {
        let g = |a: &AtomicU64| a.load(Relaxed);
        json!({
            "accepted": g(&self.accepted),
            "active": g(&self.active),
            "split": g(&self.split),
            "bypassed": g(&self.bypassed),
            "refused_per_source": g(&self.refused_per_source),
            "cap_pauses": g(&self.cap_pauses),
            "cap_bypass_closes": g(&self.cap_bypass_closes),
            "upstream_failed": g(&self.upstream_failed),
            "resets": g(&self.resets),
            "idle_timeouts": g(&self.idle_timeouts),
            "completed": g(&self.completed),
            "bytes_up": g(&self.bytes_up),
            "bytes_down": g(&self.bytes_down),
            "buffered_bytes": g(&self.buffered),
            "buffered_peak_bytes": g(&self.buffered_peak),
            "upstream_idle_ms": g(&self.upstream_idle_ns) as f64 / 1e6,
            "upstream_blocked_ms": g(&self.upstream_blocked_ns) as f64 / 1e6,
            "cpu_busy_ms": g(&self.cpu_busy_ns) as f64 / 1e6,
            "cpu_wait_ms": g(&self.cpu_wait_ns) as f64 / 1e6,
            "cpu_jobs": g(&self.cpu_jobs),
        })
    }
}

/// How a relayed connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// FIN both ways.
    Closed,
    /// One side reset (or failed); the other side was reset.
    Reset,
    /// No byte moved either way for the idle timeout; both sides reset.
    IdleTimeout,
    /// The upstream connect failed; the client was reset.
    UpstreamFailed,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Closed => "closed",
            Outcome::Reset => "reset",
            Outcome::IdleTimeout => "idle_timeout",
            Outcome::UpstreamFailed => "upstream_failed",
        }
    }
}

/// Counters of one direction of one connection.
#[derive(Default, Debug, Clone, Copy)]
pub struct DirCounters {
    pub bytes: u64,
    /// Time waiting for the source with an empty relay buffer.
    pub starved: Duration,
    /// Time waiting for the destination to take data (relay buffer not empty).
    pub blocked: Duration,
    /// Most bytes held in this direction's relay buffer at once.
    pub peak_buffered: usize,
}

/// One finished connection (the `--log-conns` line).
#[derive(Debug, Clone)]
pub struct ConnRecord {
    pub id: u64,
    pub client: SocketAddr,
    pub upstream: SocketAddr,
    pub split: bool,
    pub outcome: Outcome,
    pub duration: Duration,
    pub up: DirCounters,
    pub down: DirCounters,
}

impl ConnRecord {
    pub fn to_json(&self) -> Value {
        let d = |c: &DirCounters| {
            json!({
                "bytes": c.bytes,
                "starved_ms": c.starved.as_secs_f64() * 1e3,
                "blocked_ms": c.blocked.as_secs_f64() * 1e3,
                "peak_buffered_bytes": c.peak_buffered,
            })
        };
        json!({
            "conn": self.id,
            "client": self.client.to_string(),
            "upstream": self.upstream.to_string(),
            "split": self.split,
            "outcome": self.outcome.name(),
            "duration_ms": self.duration.as_secs_f64() * 1e3,
            "up": d(&self.up),
            "down": d(&self.down),
        })
    }
}
