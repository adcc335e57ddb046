//! headroom on real sockets.
//!
//! The available-bandwidth probe (PathQuick and pathChirp trains, `headroom_core::abw`):
//! - [`server`]: `headroom serve`, sends trains to clients that proved their address;
//! - [`client`]: [`estimate`], the library call an application makes before sending media;
//! - [`wire`]: the versioned wire format (see `docs/pathquick.md`);
//! - [`transfer`]: `headroom send`/`recv`, bulk TCP transfer with ImTCP's inline measurement;
//! - [`timing`]: sender pacing (sleep + busy-wait) and kernel receive timestamps.

pub mod client;
pub mod server;
pub mod timing;
pub mod transfer;
pub mod wire;

pub use client::{
    estimate, estimate_addr, estimate_addrs, first_estimate, Bound, Estimate, EstimateOptions, Handshake, ProbeError,
    ProbeSession, Quality, Refused, TrainReceiver, TrainReport, DEFAULT_PORT,
};
pub use server::{Server, ServerConfig, ServerHandle, ServerStats};
