//! Traffic models: packet-size distributions, UDP sending patterns and the web-page model.
//!
//! These are plain generators. They own no clock and send nothing: a [`UdpSource`] answers "when
//! does the next packet leave and how big is it", a [`WebModel`] answers "what does the next page
//! consist of and how long does the user think". The simulator turns the answers into events.
//! Every generator draws from its own [`Rng`](headroom_core::rng::Rng) (a
//! [`Rng::fork`](headroom_core::rng::Rng::fork) of the run's generator), so a run
//! is a pure function of its seed.
//!
//! The code is split along its seams: [`dist`] (packet-size and count distributions and their
//! scenario syntax), [`udp`] (UDP sending patterns and the source that follows them) and [`web`]
//! (the web-page model). Their items are re-exported here, so `traffic::X` names each.
//!
//! # Scenario syntax (TOML)
//!
//! ```toml
//! sizes = 1000                                    # Fixed
//! sizes = "internet_mix"                          # InternetMix (also "imix")
//! sizes = { kind = "uniform", min = 300, max = 600 }
//! sizes = { kind = "empirical", points = [[40, 7], [576, 4], [1500, 1]] }
//! pattern = { kind = "cbr", rate = "3Mbps" }
//! pattern = { kind = "poisson", rate = "3Mbps" }
//! pattern = { kind = "exp_on_off", rate = "20Mbps", mean_on = "500ms", mean_off = "500ms" }
//! pattern = { kind = "pareto_on_off", rate = "20Mbps", mean_on = "500ms", mean_off = "500ms", shape = 1.5 }
//! [web]                       # every key optional; these are the defaults
//! object_mean = "12KB"
//! object_shape = 1.2
//! # object_cap = "10MB"
//! objects_per_page = 8        # or { kind = "geometric", mean = 8 } / { kind = "poisson", mean = 8 }
//! think_time = "1s"
//! # object_gap = "10ms"
//! ```

pub mod dist;
pub mod udp;
pub mod web;

pub use dist::{CountDist, SizeDist, INTERNET_MIX, MAX_COUNT_MEAN};
pub use udp::{UdpPattern, UdpSource};
pub use web::{Page, WebModel};
