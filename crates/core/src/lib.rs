//! headroom's algorithms, *sans-IO*: plain state machines fed with events (segment sent at t, ACK
//! at t with an RTT sample, loss, timer) that return decisions (send now or at t, cwnd, pacing
//! rate, estimate). No sockets, no clocks, no threads: the simulator (`headroom-sim`) and the
//! socket drivers (`headroom-net`) drive this code; the kernel ports are planned.
//!
//! # Where things are
//!
//! - [`cc`] — the congestion-control interface ([`CongestionControl`], [`SendBuffer`]) and every
//!   controller, one file each ([`cc::reno`], [`cc::becc`]).
//! - [`abw`] — available-bandwidth estimation from probe trains: PathQuick and pathChirp designs,
//!   the excursion estimator, and the train judge that every driver runs.
//! - [`imtcp`] — ImTCP's inline measurement: the measurement algorithm, the control unit below
//!   TCP, echo mode and the passive estimators it is compared with.
//! - [`overlay`] — split policies for TCP overlay proxies (Maki et al.'s A, B, C and headroom's D):
//!   which new connections a proxy terminates and relays.
//! - Shared helpers, written once: [`units`] (time, bytes, rates and their parsers), [`rtt`]
//!   (RFC 6298's estimator), [`rng`] (the bit-exact random-number generator and its samplers) and
//!   [`stats`] (median, quantiles, mean, Jain's index).

pub mod abw;
pub mod cc;
pub mod imtcp;
pub mod math;
pub mod overlay;
pub mod rng;
pub mod rtt;
pub mod sack;
pub mod stats;
pub mod units;

pub use cc::{
    AckAction, AckEvent, CongestionControl, PassThrough, Recovery, Reno, RenoConfig, Segment, SendBuffer, SentEvent,
    SsthreshRule, Window,
};
pub use units::{Bytes, Dur, Rate, Time};
