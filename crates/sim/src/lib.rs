//! A deterministic packet-level discrete-event simulator for headroom's experiments: links with
//! DropTail queues and static routes ([`net`]), TCP driven by `headroom-core`'s controllers
//! ([`tcp`]), UDP and web traffic models ([`traffic`]), scenarios as TOML files ([`scenario`]),
//! the world that runs them ([`world`]), sweeps ([`sweep`]) and outputs ([`output`]).
//!
//! The same scenario and seed give byte-identical outputs: time is integer nanoseconds, ties
//! between simultaneous events are broken by scheduling order, and every random draw comes from a
//! per-flow stream of a seeded PRNG.

pub mod build;
pub mod event_heap;
pub mod limits;
pub mod net;
pub mod output;
pub mod overlay;
pub mod passive;
pub mod probe;
pub mod scenario;
pub mod serde_units;
pub mod sweep;
pub mod tcp;
pub mod traffic;
pub mod wire;
pub mod world;

pub use scenario::{Scenario, ScenarioError};
pub use world::{Report, World};
