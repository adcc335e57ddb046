//! Bulk transfer over the kernel's TCP (`headroom send` / `headroom recv`), optionally with
//! ImTCP's inline measurement (`measure`) or ImTCP-bg's background limit (`background`).
//!
//! Plain threads and blocking sockets: every transfer is one connection with one loop (write,
//! or read, with a 100 ms socket timeout to look at the stop flag and the interval clock), and
//! the measured sender must decide *when* each segment-sized write happens to tens of
//! microseconds, which an async executor's timer wheel (1 ms) cannot do and a dedicated thread
//! with `ppoll` and a short spin can. The receiver runs one thread per client (bounded).
//!
//! - [`wire`]: the versioned handshake, data blocks and trailer;
//! - [`pattern`]: the keyed payload, the framed source and the checking sink;
//! - [`sock`]: socket options (`TCP_CONGESTION`, `TCP_INFO`, timestamps);
//! - [`tstamp`]: the error-queue timestamps of the measured sender;
//! - [`measure`]: the measured sender (ImTCP's buffer over the kernel's TCP);
//! - [`session`]: the sender and receiver loops, [`send`] and [`Receiver`].

pub mod measure;
pub mod pattern;
pub mod session;
pub mod sock;
pub mod tstamp;
pub mod wire;

pub use session::{
    send, send_on, IntervalReport, IntervalSink, Mode, Receiver, ReceiverConfig, SendLimit, SendOptions, SessionSink,
    SessionSummary, TransferError, TransferReport, DEFAULT_TRANSFER_PORT,
};
