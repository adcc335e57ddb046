//! headroom's algorithms, *sans-IO*: plain state machines fed with events (segment sent at t, ACK
//! at t with an RTT sample, loss, timer) that return decisions (send now or at t, cwnd, pacing
//! rate, estimate). No sockets, no clocks, no threads: the simulator (`headroom-sim`), the socket
//! drivers (`headroom-net`) and the kernel ports all drive this code.

pub mod cc;
pub mod reno;
pub mod units;

pub use cc::{AckAction, AckEvent, CongestionControl, PassThrough, Segment, SendBuffer, SentEvent, Window};
pub use reno::{Recovery, Reno, RenoConfig, SsthreshRule};
pub use units::{Bytes, Dur, Rate, Time};

pub mod abw;
pub mod becc;
pub mod imtcp;
