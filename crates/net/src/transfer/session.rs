//! The sender and receiver loops: [`send`] (client), [`Receiver`] (server).

use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use headroom_core::cc::imtcp_bg::ImtcpBgConfig;
use headroom_core::imtcp::{ControlConfig, Estimate};
use headroom_core::units::{Bytes, Dur, Rate};

use super::pattern::{Limit, Sink, Source};
use super::sock;
use super::wire::{self, Account, Hello, Reply, Trailer};

/// `headroom recv`'s port.
pub const DEFAULT_TRANSFER_PORT: u16 = 5301;
/// Payload bytes per data block.
pub const BLOCK: u32 = 128 * 1024;
/// Socket timeout of the loops: how often they look at the stop flag and the clock.
const TICK: Duration = Duration::from_millis(100);
/// How long a sender waits for the receiver's trailer after the end block *without progress*.
/// Through split-TCP proxies (`headroom proxy`) the sender's last byte is acknowledged by the
/// first proxy, and the trailer comes only after the receiver has got everything the proxies
/// buffered: on the testbed chain with a 1 % loss, 50 ms last segment that was 80 s after a
/// 10 s send. So the wait has no fixed end: it lasts while the receiver's PROGRESS records
/// ([`wire`]) show more payload, and fails after this long without one that does
/// ([`SendOptions::account_wait`]; the server's reverse sender uses this default).
pub const STALL_WAIT: Duration = Duration::from_secs(60);
/// How often a receiver sends its PROGRESS record (at most).
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// How much the sender sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendLimit {
    Bytes(u64),
    Time(Duration),
}

/// How the sender writes.
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    /// As fast as the kernel's TCP takes it.
    Bulk,
    /// ImTCP's inline measurement (`super::measure`).
    Measure(Box<ControlConfig>),
    /// Inline measurement and ImTCP-bg's limit on bytes in flight (`super::measure`).
    Background(Box<ControlConfig>, ImtcpBgConfig),
}

/// What `headroom send` asks for.
#[derive(Clone, Debug)]
pub struct SendOptions {
    pub limit: SendLimit,
    pub interval: Option<Duration>,
    /// The server sends, this side receives.
    pub reverse: bool,
    /// The sender's kernel congestion control.
    pub cc: Option<String>,
    pub verify: bool,
    pub mode: Mode,
    pub connect_timeout: Duration,
    /// Set (e.g. by SIGINT) to end the transfer early with a partial report.
    pub stop: Option<Arc<AtomicBool>>,
    /// Sender: how long to wait for the receiver's account after the last byte *without new
    /// progress from it* (see [`STALL_WAIT`], the default).
    pub account_wait: Duration,
    /// Plain sender ([`Mode::Bulk`], not `reverse`): cap the kernel's pacing rate
    /// ([`sock::set_max_pacing_rate`], `SO_MAX_PACING_RATE`), which turns on TCP's internal
    /// pacing: a constant-rate background at most this fast (`send --max-rate`).
    pub max_pacing_rate: Option<Rate>,
    /// Plain sender: at most this many bytes written and not yet acknowledged by the peer's
    /// TCP (sent or still queued in the socket), a fixed in-flight limit enforced by the
    /// writer from `TCP_INFO` `bytes_acked` (`send --max-in-flight`): a window-limited
    /// background, whose rate falls as the path's queue grows (W / RTT).
    pub max_in_flight: Option<Bytes>,
}

impl Default for SendOptions {
    fn default() -> Self {
        SendOptions {
            limit: SendLimit::Time(Duration::from_secs(10)),
            interval: Some(Duration::from_secs(1)),
            reverse: false,
            cc: None,
            verify: false,
            mode: Mode::Bulk,
            connect_timeout: Duration::from_secs(5),
            stop: None,
            account_wait: STALL_WAIT,
            max_pacing_rate: None,
            max_in_flight: None,
        }
    }
}

/// One interval of a transfer.
#[derive(Clone, Debug, PartialEq)]
pub struct IntervalReport {
    pub start: Duration,
    pub end: Duration,
    /// Payload bytes: acknowledged by the peer's TCP (sender), or received (receiver).
    pub bytes: u64,
    pub rate: Rate,
    /// Sender only: smoothed RTT, congestion window, retransmitted segments in the interval.
    pub rtt: Option<Dur>,
    pub cwnd: Option<Bytes>,
    pub retransmits: u32,
    /// Measured sender: the estimates finished in this interval and the smoothed `Ā`.
    pub estimates: Vec<Estimate>,
    pub smoothed: Option<Rate>,
    /// Background sender: ImTCP-bg's in-flight limit at the end of the interval.
    pub limit: Option<Bytes>,
    /// Sender, after its last byte was written and while it waits for the receiver's account:
    /// the payload the receiver reports it has got (its latest PROGRESS record). `bytes` goes
    /// on counting what the next hop acknowledges, which through a split-TCP proxy is ahead of
    /// the receiver.
    pub receiver_payload: Option<u64>,
}

/// The end of a transfer.
#[derive(Clone, Debug, PartialEq)]
pub struct TransferReport {
    /// This side sent (false: it received, `--reverse`).
    pub sent: bool,
    /// The sender's congestion control (this side's when it sent).
    pub cc: Option<String>,
    /// Payload bytes this side sent (written) or received.
    pub bytes: u64,
    /// Sender: bytes the peer's TCP had acknowledged when the sending loop ended (`TCP_INFO`
    /// `bytes_acked`: the payload and its 8-byte block headers, 0.006 % over the payload with
    /// 128-KiB blocks). `bytes` counts what was *written*, which includes the socket's
    /// send queue at the end (with a time limit, up to the autotuned send buffer): its rate
    /// reads high by that queue over the duration; [`TransferReport::acked_rate`] does not.
    pub acked: Option<u64>,
    /// Sender: the socket's pacing cap at the end (`SO_MAX_PACING_RATE`), when one was set.
    pub pacing_cap: Option<Rate>,
    pub duration: Duration,
    pub rate: Rate,
    /// The receiver's account (payload received, mismatched bytes); None when the transfer
    /// ended before it came (interrupted receiver side).
    pub received: Option<Trailer>,
    pub verified: bool,
    /// Retransmitted segments (sender side).
    pub retransmits: u32,
    pub interrupted: bool,
    pub estimates: Vec<Estimate>,
    /// Counters of the measured sender.
    pub measure: Option<super::measure::MeasureStats>,
}

/// Why a transfer failed.
#[derive(Debug)]
pub enum TransferError {
    /// No address, or none answered in time / was reachable.
    Unreachable(String),
    /// The host answered with a reset: nothing listens on the port.
    ConnectionRefused(String),
    /// The kernel (here or at the reverse sender) refused the congestion control.
    CcRefused(String),
    /// The peer refused the transfer (version, busy, bad request).
    PeerRefused(String),
    /// The peer reset or closed the connection before the end of the transfer.
    PeerAborted(String),
    /// The peer sent something that is not the protocol.
    Protocol(String),
    /// Bad options.
    Invalid(String),
    Io(io::Error),
}

impl TransferReport {
    /// Sender: acknowledged bytes over the duration (see [`TransferReport::acked`]).
    pub fn acked_rate(&self) -> Option<Rate> {
        self.acked.map(|a| rate_of(a, self.duration))
    }
}

impl std::fmt::Display for TransferError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TransferError::Unreachable(m) => write!(f, "cannot reach {m}"),
            TransferError::ConnectionRefused(m) => {
                write!(f, "connection refused by {m} (is `headroom recv` running there?)")
            }
            TransferError::CcRefused(m) => f.write_str(m),
            TransferError::PeerRefused(m) => write!(f, "the receiver refused the transfer: {m}"),
            TransferError::PeerAborted(m) => write!(f, "the peer aborted the transfer: {m}"),
            TransferError::Protocol(m) => write!(f, "protocol error: {m}"),
            TransferError::Invalid(m) => f.write_str(m),
            TransferError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for TransferError {}

/// Maps an I/O error in the data phase.
pub(crate) fn data_error(e: io::Error) -> TransferError {
    match e.kind() {
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionAborted => {
            TransferError::PeerAborted(format!("connection reset ({e})"))
        }
        io::ErrorKind::UnexpectedEof => {
            TransferError::PeerAborted("the peer closed the connection before the end of the transfer".into())
        }
        io::ErrorKind::InvalidData => TransferError::Protocol(e.to_string()),
        _ => TransferError::Io(e),
    }
}

fn stopped(stop: &Option<Arc<AtomicBool>>) -> bool {
    stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst))
}

fn rate_of(bytes: u64, d: Duration) -> Rate {
    let s = d.as_secs_f64();
    if s > 0.0 {
        Rate::from_bps((bytes as f64 * 8.0 / s) as u64)
    } else {
        Rate::ZERO
    }
}

/// Interval reports from counters.
pub(crate) struct Ticker {
    interval: Option<Duration>,
    t0: Instant,
    next: Duration,
    last_at: Duration,
    last_bytes: u64,
    last_retrans: u32,
}

impl Ticker {
    pub(crate) fn new(interval: Option<Duration>, t0: Instant) -> Ticker {
        Ticker {
            interval,
            t0,
            next: interval.unwrap_or(Duration::MAX),
            last_at: Duration::ZERO,
            last_bytes: 0,
            last_retrans: 0,
        }
    }
    pub(crate) fn due(&self, now: Instant) -> bool {
        self.interval.is_some() && now.duration_since(self.t0) >= self.next
    }
    pub(crate) fn until_due(&self, now: Instant) -> Duration {
        self.next.saturating_sub(now.duration_since(self.t0))
    }
    /// The report since the last one; `bytes` and `retrans` are running totals.
    pub(crate) fn report(&mut self, now: Instant, bytes: u64, info: Option<&sock::TcpInfo>) -> IntervalReport {
        let end = now.duration_since(self.t0);
        let retrans = info.map_or(0, |i| i.total_retrans);
        let r = IntervalReport {
            start: self.last_at,
            end,
            bytes: bytes - self.last_bytes.min(bytes),
            rate: rate_of(bytes - self.last_bytes.min(bytes), end - self.last_at),
            rtt: info.map(|i| Dur::from_micros(i.rtt as u64)),
            cwnd: info.map(|i| Bytes(i.cwnd_bytes())),
            retransmits: retrans.saturating_sub(self.last_retrans),
            estimates: Vec::new(),
            smoothed: None,
            limit: None,
            receiver_payload: None,
        };
        self.last_at = end;
        self.last_bytes = bytes;
        self.last_retrans = retrans;
        if let Some(iv) = self.interval {
            while self.next <= end {
                self.next += iv;
            }
        }
        r
    }
}

fn connect(host: &str, timeout: Duration) -> Result<TcpStream, TransferError> {
    let target = if host.parse::<std::net::Ipv6Addr>().is_ok() {
        format!("[{host}]:{DEFAULT_TRANSFER_PORT}")
    } else if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:{DEFAULT_TRANSFER_PORT}")
    };
    let addrs: Vec<SocketAddr> = target
        .to_socket_addrs()
        .map_err(|e| TransferError::Unreachable(format!("{target}: cannot resolve ({e})")))?
        .collect();
    let mut last = None;
    for a in &addrs {
        match TcpStream::connect_timeout(a, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some((a, e)),
        }
    }
    match last {
        Some((a, e)) if e.kind() == io::ErrorKind::ConnectionRefused => {
            Err(TransferError::ConnectionRefused(a.to_string()))
        }
        Some((a, e)) if e.kind() == io::ErrorKind::TimedOut || e.kind() == io::ErrorKind::WouldBlock => {
            Err(TransferError::Unreachable(format!("{a}: no answer within {:.1} s", timeout.as_secs_f64())))
        }
        Some((a, e)) => Err(TransferError::Unreachable(format!("{a}: {e}"))),
        None => Err(TransferError::Unreachable(format!("{target}: no address"))),
    }
}

fn key() -> u64 {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        return std::process::id() as u64 ^ Instant::now().elapsed().as_nanos() as u64;
    }
    u64::from_ne_bytes(b)
}

/// `headroom send HOST`: connects to `HOST` (`host`, `host:port`, default port
/// [`DEFAULT_TRANSFER_PORT`]) and transfers; `on_interval` gets every interval report.
pub fn send(
    host: &str,
    opts: &SendOptions,
    on_interval: &mut dyn FnMut(&IntervalReport),
) -> Result<TransferReport, TransferError> {
    validate(opts)?;
    let stream = connect(host, opts.connect_timeout)?;
    send_on(stream, opts, on_interval)
}

fn validate(opts: &SendOptions) -> Result<(), TransferError> {
    if opts.reverse && opts.mode != Mode::Bulk {
        return Err(TransferError::Invalid(
            "--measure and --background are sender modes; with --reverse the server sends".into(),
        ));
    }
    if matches!(opts.limit, SendLimit::Bytes(0)) || matches!(opts.limit, SendLimit::Time(d) if d.is_zero()) {
        return Err(TransferError::Invalid("the byte or time limit must be positive".into()));
    }
    // --max-rate and --max-in-flight shape a plain sender only.
    let plain = !opts.reverse && opts.mode == Mode::Bulk;
    if opts.max_pacing_rate.is_some() && !plain {
        return Err(TransferError::Invalid(
            "--max-rate caps the kernel's pacing of a plain sender: not with --reverse (the server sends) \
             nor with --measure/--background (pacing would reshape the measurement streams)"
                .into(),
        ));
    }
    if opts.max_in_flight.is_some() && !plain {
        return Err(TransferError::Invalid(
            "--max-in-flight limits a plain sender: not with --reverse (the server sends) nor with \
             --measure/--background (--background has its own limit)"
                .into(),
        ));
    }
    if opts.max_in_flight.is_some_and(|b| b.0 == 0) {
        return Err(TransferError::Invalid("--max-in-flight must be positive".into()));
    }
    if opts.max_pacing_rate.is_some_and(|r| r.0 < 8) {
        return Err(TransferError::Invalid("--max-rate must be at least 1 byte per second".into()));
    }
    if opts.interval.is_some_and(|i| i < Duration::from_millis(10)) {
        return Err(TransferError::Invalid("--interval must be at least 10 ms".into()));
    }
    match &opts.mode {
        Mode::Bulk => {}
        Mode::Measure(c) => ImtcpCheck::check(c)?,
        Mode::Background(c, bg) => {
            ImtcpCheck::check(c)?;
            bg.validate().map_err(|e| TransferError::Invalid(format!("background: {e}")))?;
        }
    }
    Ok(())
}

struct ImtcpCheck;
impl ImtcpCheck {
    fn check(c: &ControlConfig) -> Result<(), TransferError> {
        headroom_core::imtcp::ImtcpBuffer::new(c.clone())
            .map(|_| ())
            .map_err(|e| TransferError::Invalid(format!("measurement: {e}")))
    }
}

/// [`send`] over a connected stream (a library user's own connection to a `headroom recv`).
pub fn send_on(
    mut stream: TcpStream,
    opts: &SendOptions,
    on_interval: &mut dyn FnMut(&IntervalReport),
) -> Result<TransferReport, TransferError> {
    validate(opts)?;
    let fd = stream.as_raw_fd();
    let _ = stream.set_nodelay(true);
    if let (Some(cc), false) = (&opts.cc, opts.reverse) {
        sock::set_congestion(fd, cc).map_err(|e| TransferError::CcRefused(e.0))?;
    }
    let key = key();
    let hello = Hello {
        reverse: opts.reverse,
        verify: opts.verify,
        key,
        bytes: match opts.limit {
            SendLimit::Bytes(b) => Some(b),
            SendLimit::Time(_) => None,
        },
        time_ms: match opts.limit {
            SendLimit::Time(d) => Some(d.as_millis().max(1) as u64),
            SendLimit::Bytes(_) => None,
        },
        cc: if opts.reverse { opts.cc.clone() } else { None },
    };
    let hello = hello.encode().map_err(|e| TransferError::Invalid(e.to_string()))?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(TransferError::Io)?;
    wire::write_all(&mut stream, &hello).map_err(data_error)?;
    match Reply::read(&mut stream) {
        Ok(Reply::Accepted) => {}
        Ok(Reply::Refused(m)) if m.starts_with("congestion control") => {
            return Err(TransferError::CcRefused(format!("at the receiver: {m}")))
        }
        Ok(Reply::Refused(m)) => return Err(TransferError::PeerRefused(m)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::TimedOut => {
            return Err(TransferError::Protocol("no reply from the receiver within 10 s".into()))
        }
        Err(e) => return Err(data_error(e)),
    }
    let _ = stream.set_nodelay(opts.mode != Mode::Bulk);
    if let Some(r) = opts.max_pacing_rate {
        sock::set_max_pacing_rate(fd, r).map_err(|e| TransferError::Invalid(format!("--max-rate: {e}")))?;
    }
    if opts.reverse {
        let (sink, duration, interrupted) =
            receive(&mut stream, Sink::new(key, opts.verify), &opts.stop, opts.interval, on_interval)?;
        let trailer = Trailer { payload: sink.payload, mismatched: sink.mismatched, first_bad: sink.first_bad };
        if !interrupted {
            let _ = wire::write_all(&mut stream, &trailer.encode());
        }
        return Ok(receiver_report(&sink, duration, interrupted, opts.verify, opts.cc.clone()));
    }
    let source = Source::new(
        key,
        opts.verify,
        match opts.limit {
            SendLimit::Bytes(b) => Limit::Bytes(b),
            SendLimit::Time(_) => Limit::Open,
        },
        BLOCK,
    );
    let time = match opts.limit {
        SendLimit::Time(d) => Some(d),
        SendLimit::Bytes(_) => None,
    };
    let mut out = match &opts.mode {
        Mode::Bulk => transmit(
            &mut stream,
            source,
            time,
            &opts.stop,
            opts.interval,
            opts.max_in_flight.map(|b| b.0),
            on_interval,
        )?,
        mode => super::measure::transmit(&mut stream, source, time, &opts.stop, opts.interval, mode, on_interval)?,
    };
    let received = read_trailer(&mut stream, &opts.stop, opts.account_wait, Some(&mut out.drain), on_interval)?;
    Ok(sender_report(fd, out, received, opts.verify))
}

fn sender_report(fd: i32, out: Sent, received: Option<Trailer>, verified: bool) -> TransferReport {
    TransferReport {
        sent: true,
        cc: sock::congestion(fd).ok(),
        bytes: out.payload,
        acked: Some(out.acked),
        pacing_cap: sock::tcp_info(fd)
            .ok()
            .filter(|i| i.max_pacing_rate != u64::MAX)
            .map(|i| Rate::from_bps(i.max_pacing_rate.saturating_mul(8))),
        duration: out.duration,
        rate: rate_of(out.payload, out.duration),
        received,
        verified,
        retransmits: sock::tcp_info(fd).map_or(0, |i| i.total_retrans),
        interrupted: out.interrupted,
        estimates: out.estimates,
        measure: out.measure,
    }
}

/// The receiving side's report: its own sink is the account.
fn receiver_report(
    sink: &Sink,
    duration: Duration,
    interrupted: bool,
    verified: bool,
    cc: Option<String>,
) -> TransferReport {
    TransferReport {
        sent: false,
        cc,
        bytes: sink.payload,
        acked: None,
        pacing_cap: None,
        duration,
        rate: rate_of(sink.payload, duration),
        received: Some(Trailer { payload: sink.payload, mismatched: sink.mismatched, first_bad: sink.first_bad }),
        verified,
        retransmits: 0,
        interrupted,
        estimates: Vec::new(),
        measure: None,
    }
}

/// What a sender loop did.
pub(crate) struct Sent {
    pub payload: u64,
    /// Bytes the peer's TCP had acknowledged when the loop ended (payload and block headers).
    pub acked: u64,
    pub duration: Duration,
    pub interrupted: bool,
    pub estimates: Vec<Estimate>,
    pub measure: Option<super::measure::MeasureStats>,
    /// The interval reports go on while the sender waits for the receiver's account.
    pub drain: Drain,
}

/// What the sender's interval reports need after its loop ended: the ticker and the
/// acknowledged-bytes baseline.
pub(crate) struct Drain {
    pub ticker: Ticker,
    pub acked_base: u64,
}

/// How long the window-limited writer sleeps when its limit is full (it has no event for an
/// ACK; at 50 Mbit/s this is 3 KB of data).
const IN_FLIGHT_POLL_NS: u64 = 500_000;

/// The plain sender: blocks as fast as the socket takes them; with `max_in_flight`, writes only
/// while the bytes written and not yet acknowledged stay below it.
fn transmit(
    stream: &mut TcpStream,
    mut source: Source,
    time: Option<Duration>,
    stop: &Option<Arc<AtomicBool>>,
    interval: Option<Duration>,
    max_in_flight: Option<u64>,
    on_interval: &mut dyn FnMut(&IntervalReport),
) -> Result<Sent, TransferError> {
    let fd = stream.as_raw_fd();
    stream.set_write_timeout(Some(TICK)).map_err(TransferError::Io)?;
    let t0 = Instant::now();
    let base_acked = sock::tcp_info(fd).map(|i| i.bytes_acked).unwrap_or(0);
    let mut ticker = Ticker::new(interval, t0);
    let mut buf = vec![0u8; BLOCK as usize + 64];
    // buf[off..have] is produced and not yet written.
    let (mut off, mut have) = (0usize, 0usize);
    let mut interrupted = false;
    let mut finish_deadline = None;
    // Bytes written to the socket since `base_acked` was read (block framing included, as in
    // `bytes_acked`).
    let mut written = 0u64;
    loop {
        let now = Instant::now();
        if !interrupted && stopped(stop) {
            interrupted = true;
        }
        if (interrupted || time.is_some_and(|t| now.duration_since(t0) >= t)) && finish_deadline.is_none() {
            source.finish();
            finish_deadline = Some(now + Duration::from_secs(30));
        }
        if finish_deadline.is_some_and(|d| now > d) {
            return Err(TransferError::PeerAborted("the receiver stopped reading".into()));
        }
        if ticker.due(now) {
            let info = sock::tcp_info(fd).ok();
            let acked = info.map_or(0, |i| i.bytes_acked.saturating_sub(base_acked));
            on_interval(&ticker.report(now, acked, info.as_ref()));
        }
        if off == have {
            have = source.produce(&mut buf);
            off = 0;
            if have == 0 {
                break;
            }
        }
        let mut end = have;
        if let Some(w) = max_in_flight {
            let acked = sock::tcp_info(fd).map_err(TransferError::Io)?.bytes_acked.saturating_sub(base_acked);
            let room = w.saturating_sub(written.saturating_sub(acked));
            if room == 0 {
                sock::poll_fd(fd, 0, IN_FLIGHT_POLL_NS).map_err(TransferError::Io)?;
                continue;
            }
            end = have.min(off + room as usize);
        }
        match std::io::Write::write(stream, &buf[off..end]) {
            Ok(0) => return Err(TransferError::PeerAborted("connection closed".into())),
            Ok(n) => {
                off += n;
                written += n as u64;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(data_error(e)),
        }
    }
    let duration = t0.elapsed();
    Ok(Sent {
        payload: source.payload(),
        acked: sock::tcp_info(fd).map_or(0, |i| i.bytes_acked.saturating_sub(base_acked)),
        duration,
        interrupted,
        estimates: Vec::new(),
        measure: None,
        drain: Drain { ticker, acked_base: base_acked },
    })
}

/// After the end block: the receiver's trailer (None if interrupted again while waiting).
/// PROGRESS records before it extend the wait (see [`STALL_WAIT`]); with `drain`, interval
/// reports go on meanwhile and carry the receiver's count.
pub(crate) fn read_trailer(
    stream: &mut TcpStream,
    stop: &Option<Arc<AtomicBool>>,
    stall_wait: Duration,
    mut drain: Option<&mut Drain>,
    on_interval: &mut dyn FnMut(&IntervalReport),
) -> Result<Option<Trailer>, TransferError> {
    stream.set_read_timeout(Some(TICK)).map_err(TransferError::Io)?;
    let fd = stream.as_raw_fd();
    let start = Instant::now();
    let mut last_progress = start;
    let mut receiver_payload: Option<u64> = None;
    let was_stopped = stopped(stop);
    let mut b = [0u8; 4096];
    let mut have = 0;
    loop {
        while let Some((record, len)) =
            Account::decode(&b[..have]).map_err(|e| TransferError::Protocol(e.to_string()))?
        {
            b.copy_within(len..have, 0);
            have -= len;
            match record {
                Account::Trailer(t) => return Ok(Some(t)),
                Account::Progress(p) => {
                    if receiver_payload.is_none_or(|r| p > r) {
                        last_progress = Instant::now();
                    }
                    receiver_payload = Some(p);
                }
            }
        }
        let now = Instant::now();
        if let Some(d) = drain.as_deref_mut() {
            if d.ticker.due(now) {
                let info = sock::tcp_info(fd).ok();
                let acked = info.map_or(0, |i| i.bytes_acked.saturating_sub(d.acked_base));
                let mut r = d.ticker.report(now, acked, info.as_ref());
                r.receiver_payload = receiver_payload;
                on_interval(&r);
            }
        }
        match stream.read(&mut b[have..]) {
            Ok(0) => return Err(data_error(io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => have += n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                ) =>
            {
                if last_progress.elapsed() > stall_wait {
                    let has = receiver_payload.map_or("no progress report".to_string(), |p| format!("{p} B"));
                    return Err(TransferError::Protocol(format!(
                        "no account from the receiver, and no progress for {:.1} s ({:.1} s since the last \
                         byte was sent; the receiver has {has})",
                        stall_wait.as_secs_f64(),
                        start.elapsed().as_secs_f64()
                    )));
                }
                // A second interrupt while waiting gives up on the receiver's account.
                if !was_stopped && stopped(stop) && start.elapsed() > Duration::from_secs(2) {
                    return Ok(None);
                }
            }
            Err(e) => return Err(data_error(e)),
        }
    }
}

/// The receiving loop: until the end block (or the stop flag). Returns the sink, the time
/// from the first byte, and whether it was interrupted.
fn receive(
    stream: &mut TcpStream,
    mut sink: Sink,
    stop: &Option<Arc<AtomicBool>>,
    interval: Option<Duration>,
    on_interval: &mut dyn FnMut(&IntervalReport),
) -> Result<(Sink, Duration, bool), TransferError> {
    stream.set_read_timeout(Some(TICK)).map_err(TransferError::Io)?;
    let t0 = Instant::now();
    let mut ticker = Ticker::new(interval, t0);
    let mut buf = vec![0u8; 256 * 1024];
    let mut progress_due = t0 + PROGRESS_EVERY;
    while !sink.ended {
        if stopped(stop) {
            return Ok((sink, t0.elapsed(), true));
        }
        let now = Instant::now();
        if ticker.due(now) {
            on_interval(&ticker.report(now, sink.payload, None));
        }
        if now >= progress_due {
            progress_due = now + PROGRESS_EVERY;
            send_progress(stream, sink.payload);
        }
        match stream.read(&mut buf) {
            Ok(0) => return Err(data_error(io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => {
                sink.consume(&buf[..n]).map_err(|e| TransferError::Protocol(e.0))?;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(data_error(e)),
        }
    }
    Ok((sink, t0.elapsed(), false))
}

/// One PROGRESS record, if it cannot block (the rule in [`wire`]): only when everything
/// written before has been acknowledged, with `MSG_DONTWAIT`. A record that is not written
/// whole is impossible with an empty send queue; a failure only skips this record.
fn send_progress(stream: &TcpStream, payload: u64) {
    let fd = stream.as_raw_fd();
    if sock::outq(fd).ok() != Some(0) {
        return;
    }
    let record = wire::progress(payload);
    // SAFETY: sends from a live buffer of `record.len()` bytes on an open socket.
    let _ = unsafe { libc::send(fd, record.as_ptr().cast(), record.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
}

/// `headroom recv`'s settings.
#[derive(Clone, Debug)]
pub struct ReceiverConfig {
    /// Most transfers at once; more are refused ("busy").
    pub max_clients: usize,
    /// Serve one transfer, then return.
    pub one_off: bool,
    /// Interval reports of each session (passed to the callback).
    pub interval: Option<Duration>,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig { max_clients: 32, one_off: false, interval: None }
    }
}

/// The end of one session at the server.
#[derive(Clone, Debug)]
pub struct SessionSummary {
    pub peer: SocketAddr,
    /// The session's result: the client sent (forward) or received (reverse).
    pub result: Result<TransferReport, String>,
}

/// A session's interval reports, with the client's address.
pub type IntervalSink = Arc<dyn Fn(SocketAddr, &IntervalReport) + Send + Sync>;
/// A session's end.
pub type SessionSink = Arc<dyn Fn(&SessionSummary) + Send + Sync>;

/// `headroom recv`: accepts transfers until stopped.
pub struct Receiver {
    listener: TcpListener,
    cfg: ReceiverConfig,
}

impl Receiver {
    pub fn bind(addr: impl ToSocketAddrs, cfg: ReceiverConfig) -> io::Result<Receiver> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(Receiver { listener, cfg })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` is set (or after one transfer with `one_off`). `on_event` gets each
    /// session's interval reports (with its peer) and summary, from the session's thread.
    pub fn serve(self, stop: Arc<AtomicBool>, on_interval: IntervalSink, on_session: SessionSink) -> io::Result<()> {
        let active = Arc::new(AtomicUsize::new(0));
        let mut threads: Vec<std::thread::JoinHandle<()>> = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            threads.retain(|t| !t.is_finished());
            let (mut stream, peer) = match self.listener.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let _ = sock::poll_fd(self.listener.as_raw_fd(), libc::POLLIN, 100_000_000)?;
                    continue;
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted) => continue,
                Err(e) => return Err(e),
            };
            stream.set_nonblocking(false)?;
            if active.load(Ordering::SeqCst) >= self.cfg.max_clients {
                let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
                let _ = wire::write_all(
                    &mut stream,
                    &Reply::Refused(format!("busy: {} transfers at once", self.cfg.max_clients)).encode(),
                );
                continue;
            }
            active.fetch_add(1, Ordering::SeqCst);
            let (active2, stop2, oi, os, interval) =
                (active.clone(), stop.clone(), on_interval.clone(), on_session.clone(), self.cfg.interval);
            let one_off = self.cfg.one_off;
            let t = std::thread::spawn(move || {
                let result = serve_one(stream, peer, &stop2, interval, &*oi);
                // A client that never said HELLO (a port scan, a refused --cc) is no session.
                let counted = !matches!(&result, Err(SessionError::NoHello));
                if counted {
                    os(&SessionSummary { peer, result: result.map_err(|e| e.to_string()) });
                    if one_off {
                        stop2.store(true, Ordering::SeqCst);
                    }
                }
                active2.fetch_sub(1, Ordering::SeqCst);
            });
            threads.push(t);
        }
        for t in threads {
            let _ = t.join();
        }
        Ok(())
    }
}

enum SessionError {
    NoHello,
    Failed(TransferError),
}

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionError::NoHello => f.write_str("no HELLO"),
            SessionError::Failed(e) => write!(f, "{e}"),
        }
    }
}

fn serve_one(
    mut stream: TcpStream,
    peer: SocketAddr,
    stop: &Arc<AtomicBool>,
    interval: Option<Duration>,
    on_interval: &(dyn Fn(SocketAddr, &IntervalReport) + Send + Sync),
) -> Result<TransferReport, SessionError> {
    let fd = stream.as_raw_fd();
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| SessionError::Failed(TransferError::Io(e)))?;
    let hello = match Hello::read(&mut stream) {
        Ok(h) => h,
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Err(SessionError::NoHello),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            let _ = wire::write_all(&mut stream, &Reply::Refused(e.to_string()).encode());
            return Err(SessionError::Failed(TransferError::Protocol(e.to_string())));
        }
        Err(e) => return Err(SessionError::Failed(data_error(e))),
    };
    if let (true, Some(cc)) = (hello.reverse, &hello.cc) {
        if let Err(e) = sock::set_congestion(fd, cc) {
            let _ = wire::write_all(&mut stream, &Reply::Refused(e.0.clone()).encode());
            return Err(SessionError::Failed(TransferError::CcRefused(e.0)));
        }
    }
    wire::write_all(&mut stream, &Reply::Accepted.encode()).map_err(|e| SessionError::Failed(data_error(e)))?;
    let stop_flag = Some(stop.clone());
    let mut cb = |r: &IntervalReport| on_interval(peer, r);
    if hello.reverse {
        let limit = match (hello.bytes, hello.time_ms) {
            (Some(b), _) => Limit::Bytes(b),
            (None, _) => Limit::Open,
        };
        let source = Source::new(hello.key, hello.verify, limit, BLOCK);
        let time = hello.time_ms.map(Duration::from_millis);
        let mut out =
            transmit(&mut stream, source, time, &stop_flag, interval, None, &mut cb).map_err(SessionError::Failed)?;
        let received = read_trailer(&mut stream, &None, STALL_WAIT, Some(&mut out.drain), &mut cb)
            .map_err(SessionError::Failed)?;
        return Ok(sender_report(fd, out, received, hello.verify));
    }
    let (sink, duration, interrupted) =
        receive(&mut stream, Sink::new(hello.key, hello.verify), &stop_flag, interval, &mut cb)
            .map_err(SessionError::Failed)?;
    let trailer = Trailer { payload: sink.payload, mismatched: sink.mismatched, first_bad: sink.first_bad };
    if !interrupted {
        wire::write_all(&mut stream, &trailer.encode()).map_err(|e| SessionError::Failed(data_error(e)))?;
    }
    Ok(receiver_report(&sink, duration, interrupted, hello.verify, None))
}
