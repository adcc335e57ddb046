//! TCP overlay networks (Maki, Hasegawa, Murata, Murase; issue 14): split-TCP proxies with relay
//! buffers and a CPU model, connections that open with SYN / SYN-ACK, the SURGE web workload, and
//! the analytic models of Fig. 3.
//!
//! A scenario type of its own, with its own engine ([`engine`]): packets here carry their payload
//! bytes (as runs of the servers' keyed streams, [`payload`]) so the relay can be checked byte
//! for byte, and nothing of the existing simulator (`net`, `tcp`, `world`) changes. Modules:
//! [`engine`] (events, links), [`payload`] (the bytes), [`tcp`] (the two halves
//! of a connection), [`world`] (proxies, relay, flows), [`surge`] (web workload), [`model`]
//! (Padhye's formula and the relay-coupled model of Fig. 3), [`experiments`] (the paper's
//! set-ups, used by `headroom reproduce overlay-*` and the tests).

pub mod engine;
pub mod experiments;
pub mod model;
pub mod payload;
pub mod surge;
pub mod tcp;
pub mod world;

pub use world::{FlowClass, FlowRecord, FlowSpec, OverlayConfig, OverlayWorld, ProxySpec, ProxyStats, WebClientSpec};

use engine::HopId;
use tcp::Half;

/// The overlay world's own events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Local {
    /// A connection half's timer (RTO, SYN retransmission, window probe).
    Timer { hop: HopId, half: Half },
    /// A proxy's CPU finished the packet at the head of its queue.
    CpuDone(u16),
    /// A static flow's client sends its SYN.
    FlowStart(u32),
    /// A web client requests its next file.
    WebNext(u32),
}

#[cfg(test)]
mod tests;
