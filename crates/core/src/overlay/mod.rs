//! Split policies for TCP overlay proxies: which new connections a TCP proxy terminates and
//! relays over split connections, and which it forwards untouched.
//!
//! # The idea (Maki, Hasegawa, Murata, Murase, "TCP オーバレイネットワークの性能解析および評価")
//!
//! A TCP proxy terminates an end-to-end connection, ACKs data on the receiver's behalf and relays
//! it over a second connection (§2). Splitting raises long-flow throughput (§3.1, Fig. 3), but
//! every split connection costs the proxy CPU: `t` per data packet and `10 t` per SYN and
//! SYN-ACK (§3.2). When the proxy is overloaded its queue delays every split connection, and
//! short web transfers end up *slower* than unsplit ones (Figs. 5, 6). The proxy must therefore
//! choose, at each SYN, whether to split. §3.2 compares three policies, all here:
//!
//! - **A** ([`SplitUsers`]) — split only the connections of a configured set of users (300 users
//!   in the paper). Users are named by source-address prefixes, so the simulator and the real
//!   proxy run the same code.
//! - **B** ([`SplitLargeDocuments`]) — split only documents of at least 2000 bytes.
//! - **C** ([`SplitWhileLowLoad`]) — split only while the load is low: with `SampleLoad(T)` the
//!   packets arriving at the proxy in `(T-1, T]` seconds (plus 10 per SYN),
//!   `L(1) = SampleLoad(1)`, `L(T) = 7/8 L(T-1) + 1/8 SampleLoad(T)`, and a connection is split
//!   when `L(T) < 0.9 / t` (§3.2, the three unnumbered equations) — i.e. while the CPU, which can
//!   serve `1/t` packets per second, is less than 90 % busy.
//!
//! and the two references "split all" ([`SplitPolicy::All`]) and "split none"
//! ([`SplitPolicy::None`]). [`SplitWhileShortQueue`] (policy **D**, not in the paper) splits while
//! the proxy's own measured queueing delay is short; see its documentation.
//!
//! # API for drivers
//!
//! A driver (the simulator's proxy node, the real proxy) builds a [`SplitPolicy`] and feeds it
//! what the proxy sees: [`SplitPolicy::on_packet`] for every packet that reaches the proxy's CPU,
//! [`SplitPolicy::on_syn`] for every SYN, [`SplitPolicy::on_queue_delay`] for every packet the CPU
//! finishes (with the time it waited). At each new connection's SYN it asks
//! [`SplitPolicy::decide`] with the connection's [`ConnectionAttrs`] and gets a typed
//! [`SplitDecision`]. No clocks: time is whatever the driver passes in.
//!
//! # Choices the paper leaves open (made here, stated where they apply)
//!
//! - Policy C before the first whole second: there is no `L(1)` yet; we use the packets counted
//!   so far in that first second (a lower bound of `SampleLoad(1)`). See [`LoadEstimator`].
//! - Policy C, does a SYN also count as a packet? The paper says `SampleLoad` is increased by 10
//!   for a SYN "because a SYN costs 10 times a data packet"; we count a SYN as 10 in total (not 11).
//! - Policy C, the decision at a SYN arriving in `(T, T+1)` uses `L(T)`, the last whole second.
//! - Policy B when the size is unknown at the SYN (a real proxy rarely knows it): configurable,
//!   [`UnknownSize`]; the simulator always knows it.

mod cpu;
mod policies;
mod queue;

pub use cpu::FifoCpu;

pub use policies::{LoadEstimator, SourcePrefix, SplitLargeDocuments, SplitUsers, SplitWhileLowLoad, UnknownSize};
pub use queue::SplitWhileShortQueue;

use crate::units::{Bytes, Dur, Time};
use std::net::IpAddr;

/// What the proxy knows about a new connection when its SYN arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionAttrs {
    /// The client's address (the SYN's source): policy A's "user".
    pub source: IpAddr,
    /// The size of the document the connection will carry, when known (policy B).
    pub document_size: Option<Bytes>,
}

/// Why a connection is not split.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PassReason {
    /// The policy is "split none".
    SplitNone,
    /// Policy A: the source is in none of the configured prefixes.
    UserNotListed,
    /// Policy B: the document is smaller than the threshold.
    SmallDocument { size: Bytes, threshold: Bytes },
    /// Policy B: the size is unknown and [`UnknownSize::Pass`] is configured.
    SizeUnknown,
    /// Policy C: the load estimate `L(T)` (packets per second) is at or above `0.9 / t`.
    Overloaded { load_pps: f64, limit_pps: f64 },
    /// Policy D: the measured queueing delay is at or above the target.
    QueueTooLong { delay: Dur, target: Dur },
}

/// The answer to "split this new connection?".
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SplitDecision {
    /// Terminate the connection at the proxy and relay it over a new one.
    Split,
    /// Forward the connection's packets untouched, with the reason.
    Pass(PassReason),
}

impl SplitDecision {
    pub fn is_split(&self) -> bool {
        matches!(self, SplitDecision::Split)
    }
}

/// One split policy (the paper's A, B, C, the two references, and D).
#[derive(Clone, Debug)]
pub enum SplitPolicy {
    /// Split every connection.
    All,
    /// Split no connection.
    None,
    /// Policy A.
    Users(SplitUsers),
    /// Policy B.
    LargeDocuments(SplitLargeDocuments),
    /// Policy C.
    LowLoad(SplitWhileLowLoad),
    /// Policy D (not in the paper).
    ShortQueue(SplitWhileShortQueue),
}

impl SplitPolicy {
    /// A packet (data or ACK, not a SYN) reached the proxy's CPU at `now`.
    pub fn on_packet(&mut self, now: Time) {
        if let SplitPolicy::LowLoad(c) = self {
            c.load.on_packets(now, 1);
        }
    }

    /// A SYN or SYN-ACK reached the proxy's CPU at `now`.
    pub fn on_syn(&mut self, now: Time) {
        if let SplitPolicy::LowLoad(c) = self {
            c.load.on_packets(now, policies::SYN_WEIGHT);
        }
    }

    /// The proxy's CPU finished a packet at `now` that had waited `waited` in its queue.
    pub fn on_queue_delay(&mut self, now: Time, waited: Dur) {
        if let SplitPolicy::ShortQueue(d) = self {
            d.on_queue_delay(now, waited);
        }
    }

    /// Split the new connection described by `conn`, whose SYN arrived at `now`?
    pub fn decide(&mut self, now: Time, conn: &ConnectionAttrs) -> SplitDecision {
        match self {
            SplitPolicy::All => SplitDecision::Split,
            SplitPolicy::None => SplitDecision::Pass(PassReason::SplitNone),
            SplitPolicy::Users(a) => a.decide(conn),
            SplitPolicy::LargeDocuments(b) => b.decide(conn),
            SplitPolicy::LowLoad(c) => c.decide(now),
            SplitPolicy::ShortQueue(d) => d.decide(now),
        }
    }
}
