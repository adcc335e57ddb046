//! `headroom serve`: answers probe clients with PathQuick or pathChirp trains.
//!
//! # Safety against abuse
//!
//! - **Stateless challenge.** A HELLO (64 bytes) gets a CHALLENGE (40 bytes) carrying a cookie:
//!   a MAC (HMAC-SHA-256, keyed from the OS random source when the server starts) of the
//!   sender's address and port, the client's nonce and a 30-second epoch. Nothing is stored. A train
//!   is sent only for a START that echoes a valid cookie (this or the previous epoch), which
//!   proves the client receives at the address the train goes to; a spoofed source never sees
//!   the cookie. No reply is ever larger than the unverified datagram that caused it.
//! - **Address-validation tokens** (continuous monitoring): with each admitted train the client
//!   gets a TOKEN, a MAC of its IP address (not the port: a NAT may rebind it, as QUIC's
//!   NEW_TOKEN allows) and the issue time, valid for [`ServerConfig::token_lifetime`]. A
//!   TOKEN_START echoing a valid token is admitted like a START (same caps), saving the
//!   HELLO/CHALLENGE round trip; an invalid or expired token gets a CHALLENGE for the request's
//!   nonce (QUIC's Retry), 40 bytes against the request's 57. The token proves the client
//!   received at that IP address within the lifetime, as the cookie proves it now.
//! - **Caps** ([`ServerConfig`]): highest probed rate (of each gap, and summed over the trains
//!   in flight: [`Admission`]), packet size, packets and length of a
//!   train, bytes of a train, trains per client IP per window, one train in flight per client
//!   address, and concurrent clients. A verified client over a cap gets a REJECT. Every
//!   product and sum on the received fields is checked ([`check_train`]); nothing wraps into a
//!   cap, and each cap (packets, wall time, bytes, sizes, rate of every gap) stands on its own.
//! - **Expiry.** A train still running at twice its declared length plus [`EXPIRY_GRACE`] is
//!   ended and its client's slot freed, so no train can hold a slot forever.
//! - **Garbage** (wrong magic/version/type/length, bad cookie, unexpected message types) is
//!   dropped silently and counted in [`ServerStats`].
//!
//! # Threads
//!
//! One receive thread (handshakes and admission) and one pacing thread that sends every train
//! in flight from a single schedule: it sleeps until shortly before the earliest deadline, then
//! busy-waits ([`crate::timing::Pacer::wait_until`]), so concurrent trains interleave without one
//! spinning thread per client. A packet that leaves more than 20 µs late shifts the rest of its
//! train (the designed spacing is kept; no catch-up bursts); the probe carries its actual send
//! time and the lateness is reported in END.

use crate::timing::{Pacer, SpacingStats};
use crate::wire::{
    encode_probe, ip_udp_overhead, ipv6_on_the_wire, AddressToken, Cap, CapKind, Msg, RejectReason, TrainParams,
    MAX_BURST, PROBE_HEADER_LEN,
};
use headroom_core::abw::{Method, TrainDesign, TrainPacket};
use headroom_core::units::{Bytes, Dur, Rate};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Limits the server enforces.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Highest rate any gap of a train may probe, and the most the trains in flight may send
    /// at once (the sum of their highest gap rates; see [`Admission`]).
    pub max_rate: Rate,
    /// Largest probe packet (IP level).
    pub max_size: Bytes,
    pub max_packets: u16,
    pub max_train_length: Dur,
    pub max_train_bytes: Bytes,
    /// Trains per client IP per [`ServerConfig::window`].
    pub trains_per_window: u32,
    pub window: Duration,
    /// Clients with a train in flight at once.
    pub max_concurrent: usize,
    /// One line on stderr per client session (`headroom serve -v`): the client's address, the
    /// train's method and packets, and how it ended (sent, expired, or refused and why).
    pub log_sessions: bool,
    /// How long an address-validation token stays valid after it is issued (a fresh one comes
    /// with every train, so a client probing more often than this never shakes hands again).
    pub token_lifetime: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_rate: Rate::from_mbps(1000),
            max_size: Bytes(1500),
            max_packets: 2000,
            max_train_length: Dur::from_secs(2),
            max_train_bytes: Bytes(2_000_000),
            trains_per_window: 50,
            window: Duration::from_secs(10),
            max_concurrent: 64,
            log_sessions: false,
            token_lifetime: DEFAULT_TOKEN_LIFETIME,
        }
    }
}

impl ServerConfig {
    /// Refuses caps that would make the server refuse every train (a zero rate, size, packet
    /// count, length, byte count, window budget or client count) or that the wire cannot carry.
    pub fn validate(&self) -> Result<(), String> {
        let zero = |what: &str, flag: &str| Err(format!("{what} is 0: no train could be served (check {flag})"));
        if self.max_rate.bps() == 0 {
            return zero("the rate cap", "--max-rate");
        }
        if self.max_concurrent == 0 {
            return zero("the number of concurrent clients", "--max-clients");
        }
        if self.trains_per_window == 0 {
            return zero("the trains per client per window", "--trains-per-10s");
        }
        if self.max_packets < 3 {
            return Err(format!("at most {} packets per train: a train has at least 3", self.max_packets));
        }
        let smallest = ip_udp_overhead(true) + PROBE_HEADER_LEN as u64;
        if self.max_size.0 < smallest || self.max_size.0 > u16::MAX as u64 {
            return Err(format!(
                "largest packet {} B: must be between {smallest} B (headers) and {} B (--max-size)",
                self.max_size.0,
                u16::MAX
            ));
        }
        if self.token_lifetime.as_millis() > u32::MAX as u128 {
            return Err("the token lifetime must be below 49 days".into());
        }
        if self.max_train_length.0 == 0 || self.max_train_bytes.0 == 0 || self.window.is_zero() {
            return Err("train length, train bytes and the rate window must be above 0".into());
        }
        Ok(())
    }
}

/// Counters, readable while the server runs.
#[derive(Debug, Default)]
pub struct ServerStats {
    pub datagrams: AtomicU64,
    pub malformed: AtomicU64,
    pub hellos: AtomicU64,
    pub bad_cookies: AtomicU64,
    pub unexpected: AtomicU64,
    pub trains_started: AtomicU64,
    pub trains_completed: AtomicU64,
    /// Trains ended early because they outlived their declared length ([`EXPIRY_GRACE`]).
    pub trains_expired: AtomicU64,
    pub rejected: AtomicU64,
    pub probes_sent: AtomicU64,
    pub send_errors: AtomicU64,
    /// Address-validation tokens sent (one per admitted train).
    pub tokens_issued: AtomicU64,
    /// TOKEN_STARTs whose token was valid (trains without a handshake).
    pub token_starts: AtomicU64,
    /// TOKEN_STARTs whose token was expired, forged or another address's (answered with a
    /// CHALLENGE).
    pub bad_tokens: AtomicU64,
}

impl ServerStats {
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

const COOKIE_EPOCH: Duration = Duration::from_secs(30);
/// [`ServerConfig::token_lifetime`]'s default: ten minutes (our choice; QUIC leaves it to the
/// server). Long enough for any monitoring interval worth having, short enough that an address
/// given up (a DHCP lease, a NAT binding) is not trusted for long.
pub const DEFAULT_TOKEN_LIFETIME: Duration = Duration::from_secs(600);

/// The cookie MAC: HMAC-SHA-256 (RFC 2104, FIPS 180-4) truncated to 16 bytes, keyed with 32
/// bytes from the OS random source (`getrandom`), over the peer's address family, address and
/// port, the client's nonce and the epoch. A standard MAC from maintained crates (`hmac`,
/// `sha2`), unlike std's `RandomState`, whose algorithm and seeding std does not promise.
struct CookieKey {
    key: [u8; 32],
    origin: Instant,
}

impl CookieKey {
    fn new() -> io::Result<CookieKey> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| io::Error::other(format!("no OS randomness for the cookie key: {e}")))?;
        Ok(CookieKey::with_key(key))
    }

    fn with_key(key: [u8; 32]) -> CookieKey {
        CookieKey { key, origin: Instant::now() }
    }

    fn epoch(&self) -> u64 {
        (self.origin.elapsed().as_secs() / COOKIE_EPOCH.as_secs()) + 1
    }

    /// HMAC-SHA-256 under the key over `domain`, the address family and address of `ip`, then
    /// `fields`; the first 16 bytes.
    fn tag(&self, domain: &[u8], ip: IpAddr, fields: &[&[u8]]) -> [u8; 16] {
        use hmac::{Hmac, Mac};
        let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(domain);
        match ip {
            IpAddr::V4(a) => {
                mac.update(&[4]);
                mac.update(&a.octets());
            }
            IpAddr::V6(a) => {
                mac.update(&[6]);
                mac.update(&a.octets());
            }
        }
        for f in fields {
            mac.update(f);
        }
        let tag = mac.finalize().into_bytes();
        let mut out = [0u8; 16];
        out.copy_from_slice(&tag[..16]);
        out
    }

    fn cookie_at(&self, peer: SocketAddr, nonce: u64, epoch: u64) -> [u8; 16] {
        self.tag(b"", peer.ip(), &[&peer.port().to_be_bytes(), &nonce.to_be_bytes(), &epoch.to_be_bytes()])
    }

    /// The tag of an address-validation token for `ip` issued at `issued_ms` (server clock):
    /// the MAC over a domain byte `T` (no cookie input starts with it: the cookie's first byte
    /// is the family, 4 or 6), the address family and address, and the issue time.
    fn token_tag(&self, ip: IpAddr, issued_ms: u64) -> [u8; 16] {
        self.tag(b"T", ip, &[&issued_ms.to_be_bytes()])
    }

    /// Milliseconds on the server's clock (since the key was made).
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    /// A token for `ip` issued at `now_ms`.
    fn token_at(&self, ip: IpAddr, now_ms: u64) -> AddressToken {
        AddressToken { issued_ms: now_ms, tag: self.token_tag(ip, now_ms) }
    }

    /// Whether `token` was issued by this key to `ip` no more than `lifetime` before `now_ms`
    /// (and not in the future).
    fn token_valid_at(&self, ip: IpAddr, token: &AddressToken, now_ms: u64, lifetime: Duration) -> bool {
        let age_ok = now_ms.checked_sub(token.issued_ms).is_some_and(|age| age as u128 <= lifetime.as_millis());
        age_ok && same_tag(&self.token_tag(ip, token.issued_ms), &token.tag)
    }

    fn cookie(&self, peer: SocketAddr, nonce: u64) -> [u8; 16] {
        self.cookie_at(peer, nonce, self.epoch())
    }

    fn valid(&self, peer: SocketAddr, nonce: u64, cookie: &[u8; 16]) -> bool {
        let e = self.epoch();
        same_tag(&self.cookie_at(peer, nonce, e), cookie)
            || same_tag(&self.cookie_at(peer, nonce, e.saturating_sub(1)), cookie)
    }
}

/// Compares two MAC tags without early exit on the first differing byte.
fn same_tag(a: &[u8; 16], b: &[u8; 16]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Why a START was refused: the wire reason, the cap that refused (when one did) and when to
/// try again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub reason: RejectReason,
    pub cap: Option<Cap>,
    pub retry_after: Duration,
}

impl Refusal {
    fn over(kind: CapKind, value: u64) -> Refusal {
        Refusal { reason: RejectReason::OverCap, cap: Some(Cap { kind, value }), retry_after: Duration::ZERO }
    }

    fn bad_design(cap: Option<Cap>) -> Refusal {
        Refusal { reason: RejectReason::BadDesign, cap, retry_after: Duration::ZERO }
    }
}

/// A train the caps admit: what the pacer sends and what admission accounts for.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckedTrain {
    pub design: TrainDesign,
    pub schedule: Vec<TrainPacket>,
    /// Offset of the last packet.
    pub length: Dur,
    pub bytes: Bytes,
    /// Highest rate of any gap (later packet's size over the gap).
    pub peak_rate: Rate,
    /// Packets of the capacity burst after the train (`wire`'s module doc), each the size of
    /// the train's last packet.
    pub burst: u8,
}

/// Checks a verified client's train against the caps, with checked arithmetic on every
/// product and sum of the received fields (nothing wraps into a cap), and returns the schedule
/// the pacer will send. Each cap is checked on its own: packets, length (wall time), bytes,
/// packet sizes, and the rate of every gap of the schedule as built (a gap that rounds to zero
/// nanoseconds probes an unbounded rate and is refused).
///
/// A capacity burst ([`TrainParams::burst`]) goes out at the speed of the socket, whatever the
/// rate cap: it is bounded by [`MAX_BURST`] packets instead (16 of 1,500 bytes, 24 KB), and
/// its packets and bytes count against the train's caps.
pub fn check_train(params: &TrainParams, config: &ServerConfig, overhead: u64) -> Result<CheckedTrain, Refusal> {
    // Caps on the raw fields, before any arithmetic on them.
    if params.burst > MAX_BURST {
        return Err(Refusal::bad_design(None));
    }
    if params.count as u32 + params.burst as u32 > config.max_packets as u32 {
        return Err(Refusal::over(CapKind::Packets, config.max_packets as u64));
    }
    let max_len = config.max_train_length;
    if params.spacing > max_len {
        // The first gap alone (T_quick, or T_chirp for pathChirp) is longer than a train may be.
        return Err(Refusal::over(CapKind::TrainLength, max_len.0));
    }
    let min_size = overhead + PROBE_HEADER_LEN as u64;
    if (params.size as u64) < min_size {
        return Err(Refusal::bad_design(Some(Cap { kind: CapKind::MinPacketSize, value: min_size })));
    }
    if params.size as u64 > config.max_size.0 {
        return Err(Refusal::over(CapKind::PacketSize, config.max_size.0));
    }
    let design = params.design().map_err(|_| Refusal::bad_design(None))?;
    if let TrainDesign::PathQuick(q) = &design {
        // The core computes T_quick·(i-1) and P_1 + (i-1)·ΔP unchecked: bound them here first.
        let gaps = q.n as u64 - 1;
        let length = q.t_quick.0.checked_mul(gaps).filter(|&l| l <= max_len.0);
        if length.is_none() {
            return Err(Refusal::over(CapKind::TrainLength, max_len.0));
        }
        let p_n = q.delta_p.0.checked_mul(gaps).and_then(|x| x.checked_add(q.p_1.0));
        if p_n.is_none_or(|p| p > config.max_size.0) {
            return Err(Refusal::over(CapKind::PacketSize, config.max_size.0));
        }
    }
    let schedule = design.schedule();
    if schedule.len() != params.count as usize {
        return Err(Refusal::bad_design(None));
    }
    // The schedule as the pacer will send it.
    let mut bytes = 0u64;
    let mut peak = 0u128;
    for (k, p) in schedule.iter().enumerate() {
        if p.size.0 < min_size {
            return Err(Refusal::bad_design(Some(Cap { kind: CapKind::MinPacketSize, value: min_size })));
        }
        if p.size > config.max_size {
            return Err(Refusal::over(CapKind::PacketSize, config.max_size.0));
        }
        bytes = bytes.checked_add(p.size.0).ok_or(Refusal::over(CapKind::TrainBytes, config.max_train_bytes.0))?;
        if k > 0 {
            let gap = p.offset.0.saturating_sub(schedule[k - 1].offset.0);
            if gap == 0 {
                return Err(Refusal::over(CapKind::Rate, config.max_rate.bps()));
            }
            peak = peak.max(p.size.0 as u128 * 8 * 1_000_000_000 / gap as u128);
        }
    }
    let length = schedule.last().map_or(Dur::ZERO, |p| p.offset);
    let last_size = schedule.last().map_or(0, |p| p.size.0);
    bytes = bytes
        .checked_add(last_size * params.burst as u64)
        .ok_or(Refusal::over(CapKind::TrainBytes, config.max_train_bytes.0))?;
    if length > max_len {
        return Err(Refusal::over(CapKind::TrainLength, max_len.0));
    }
    if bytes > config.max_train_bytes.0 {
        return Err(Refusal::over(CapKind::TrainBytes, config.max_train_bytes.0));
    }
    if peak > config.max_rate.bps() as u128 {
        return Err(Refusal::over(CapKind::Rate, config.max_rate.bps()));
    }
    Ok(CheckedTrain {
        design,
        schedule,
        length,
        bytes: Bytes(bytes),
        peak_rate: Rate(peak as u64),
        burst: params.burst,
    })
}

/// How long past its declared length a train may run before it is expired: pacing under load
/// slips (see the module doc), but a train that takes more than twice its length plus this is
/// no longer a measurement.
pub const EXPIRY_GRACE: Duration = Duration::from_secs(1);

/// When an admitted train of `length` must be over at the latest.
fn expires_at(admitted: Instant, length: Dur) -> Instant {
    admitted + Duration::from_nanos(length.0).saturating_mul(2) + EXPIRY_GRACE
}

struct InFlight {
    /// Identifies this admission (a client's next train has another).
    serial: u64,
    /// When the train is planned to be over (admission + declared length).
    ends: Instant,
    expires: Instant,
    /// The train's highest gap rate, counted against [`ServerConfig::max_rate`] while in flight.
    peak_rate: Rate,
}

/// Admission state, shared by the receive and pacing threads.
///
/// **The server's total rate.** [`ServerConfig::max_rate`] bounds each gap of each train and
/// also the sum over clients: a train is admitted only if its highest gap rate plus those of
/// the trains in flight stays within the cap; otherwise the client is told Busy (cap
/// [`CapKind::TotalRate`]) with a retry time of when the first train in flight is planned to
/// end. The pacer shifts the rest of a train after a packet more than 20 µs late, so a gap is
/// at most 20 µs shorter than designed (2 % at a 1 ms gap); shifting after any lateness would
/// lengthen loaded trains past the client's judging deadline.
/// Admission rather than a token bucket over all probe bytes: a bucket would delay or drop the
/// packets of a train already running, which changes the rates it probes (the measurement),
/// while refusing at START leaves every admitted train exactly as designed. The price is that
/// the sum of peaks is conservative (a PathQuick train sends at its peak only at its end).
#[derive(Default)]
pub struct Admission {
    in_flight: HashMap<SocketAddr, InFlight>,
    recent: HashMap<IpAddr, (Instant, u32)>,
    serial: u64,
}

impl Admission {
    /// Admits `train` for `peer` at `now` or says why not; returns the admission's serial, to
    /// [`Admission::release`] it by. Trains past their expiry are forgotten first, so a client
    /// whose train never ends cannot hold a slot.
    pub fn admit(
        &mut self,
        peer: SocketAddr,
        now: Instant,
        train: &CheckedTrain,
        config: &ServerConfig,
    ) -> Result<u64, Refusal> {
        self.in_flight.retain(|_, f| f.expires > now);
        let busy = |cap| Refusal { reason: RejectReason::Busy, cap, retry_after: Duration::from_millis(500) };
        // The per-window budget first: its answer holds for the rest of the window, where "in
        // flight" or "busy" would send the client back in 500 ms to be refused again (and which
        // of the two a client saw depended on whether its last train's release had run yet).
        if self.recent.len() > 10_000 {
            let w = config.window;
            self.recent.retain(|_, (t, _)| now.saturating_duration_since(*t) < w);
        }
        let entry = self.recent.entry(peer.ip()).or_insert((now, 0));
        if now.saturating_duration_since(entry.0) >= config.window {
            *entry = (now, 0);
        }
        if entry.1 >= config.trains_per_window {
            return Err(Refusal {
                reason: RejectReason::TooMany,
                cap: Some(Cap { kind: CapKind::TrainsPerWindow, value: config.trains_per_window as u64 }),
                retry_after: config.window.saturating_sub(now.saturating_duration_since(entry.0)),
            });
        }
        if self.in_flight.contains_key(&peer) {
            return Err(Refusal { reason: RejectReason::InFlight, ..busy(None) });
        }
        if self.in_flight.len() >= config.max_concurrent {
            return Err(busy(Some(Cap { kind: CapKind::Clients, value: config.max_concurrent as u64 })));
        }
        // The server's total rate: the highest gap rates of all trains in flight add up to at
        // most the cap (see [`Admission`]'s doc for why admission rather than a token bucket).
        let total = self.in_flight.values().fold(train.peak_rate.bps(), |sum, f| sum.saturating_add(f.peak_rate.bps()));
        if total > config.max_rate.bps() {
            let first_end = self.in_flight.values().map(|f| f.ends).min().unwrap_or(now);
            let wait = first_end.saturating_duration_since(now).max(Duration::from_millis(1));
            return Err(Refusal {
                retry_after: wait,
                ..busy(Some(Cap { kind: CapKind::TotalRate, value: config.max_rate.bps() }))
            });
        }
        let entry = self.recent.get_mut(&peer.ip()).expect("inserted above");
        entry.1 += 1;
        self.serial += 1;
        let ends = now + Duration::from_nanos(train.length.0);
        let f =
            InFlight { serial: self.serial, ends, expires: expires_at(now, train.length), peak_rate: train.peak_rate };
        self.in_flight.insert(peer, f);
        Ok(self.serial)
    }

    /// Frees `peer`'s slot if it still holds admission `serial`.
    pub fn release(&mut self, peer: SocketAddr, serial: u64) {
        if self.in_flight.get(&peer).is_some_and(|f| f.serial == serial) {
            self.in_flight.remove(&peer);
        }
    }

    /// Clients holding a slot.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }
}

struct TrainJob {
    peer: SocketAddr,
    train: u32,
    method: Method,
    serial: u64,
    schedule: Vec<TrainPacket>,
    /// The capacity burst's packets, sent back to back after the schedule.
    burst: u8,
    overhead: u64,
    expires: Instant,
}

/// A bound, not yet running server.
pub struct Server {
    sock: UdpSocket,
    config: ServerConfig,
}

/// A running server; dropping it stops it.
pub struct ServerHandle {
    local: SocketAddr,
    stats: Arc<ServerStats>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// SCHED_FIFO priority of a real-time server (`headroom serve --realtime`,
/// [`Server::spawn_realtime_if_permitted`]): above ordinary tasks, below the kernel's own
/// real-time threads (which use 50 and up) and the middle of 1–99.
pub const REALTIME_PRIORITY: i32 = 10;

impl Server {
    /// Binds the socket; caps that make no sense ([`ServerConfig::validate`]) are an
    /// `InvalidInput` error.
    pub fn bind(addr: impl ToSocketAddrs, config: ServerConfig) -> io::Result<Server> {
        config.validate().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let sock = UdpSocket::bind(addr)?;
        Ok(Server { sock, config })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// [`Server::spawn`] with the threads at SCHED_FIFO [`REALTIME_PRIORITY`] where the system
    /// permits it (root, `CAP_SYS_NICE` or an `RLIMIT_RTPRIO` of at least that), at normal
    /// priority otherwise. The caller's own thread keeps its scheduling: the threads are started
    /// from a helper thread that switched (threads inherit their creator's policy). Other load
    /// on the machine then does not delay the packets (`headroom serve --realtime` insists on
    /// it instead; the loopback tests use this).
    pub fn spawn_realtime_if_permitted(self) -> io::Result<ServerHandle> {
        std::thread::spawn(move || {
            let _ = crate::timing::try_realtime(REALTIME_PRIORITY);
            self.spawn()
        })
        .join()
        .map_err(|_| io::Error::other("the thread starting the server panicked"))?
    }

    /// Starts the receive and pacing threads.
    pub fn spawn(self) -> io::Result<ServerHandle> {
        let local = self.sock.local_addr()?;
        CookieKey::new()?;
        self.sock.set_read_timeout(Some(Duration::from_millis(50)))?;
        let stats = Arc::new(ServerStats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let admission = Arc::new(Mutex::new(Admission::default()));
        let (jobs_tx, jobs_rx) = mpsc::channel::<TrainJob>();
        let pacer_sock = self.sock.try_clone()?;
        let mut threads = Vec::new();
        {
            let (stats, stop, admission) = (stats.clone(), stop.clone(), admission.clone());
            let log = self.config.log_sessions;
            threads.push(
                std::thread::Builder::new()
                    .name("headroom-pacer".into())
                    .spawn(move || pacer(pacer_sock, jobs_rx, stats, stop, admission, log))?,
            );
        }
        {
            let (stats, stop) = (stats.clone(), stop.clone());
            let config = self.config.clone();
            let sock = self.sock;
            threads.push(
                std::thread::Builder::new()
                    .name("headroom-serve".into())
                    .spawn(move || receiver(sock, config, jobs_tx, stats, stop, admission))?,
            );
        }
        Ok(ServerHandle { local, stats, stop, threads })
    }
}

impl ServerHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }

    /// Stops both threads and waits for them.
    pub fn shutdown(mut self) {
        self.stop_threads();
    }

    /// Blocks until the server stops (never, unless a thread dies).
    pub fn wait(mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    fn stop_threads(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop_threads();
    }
}

fn receiver(
    sock: UdpSocket,
    config: ServerConfig,
    jobs: Sender<TrainJob>,
    stats: Arc<ServerStats>,
    stop: Arc<AtomicBool>,
    admission: Arc<Mutex<Admission>>,
) {
    let key = match CookieKey::new() {
        Ok(k) => k,
        Err(_) => return, // spawn() checked the random source; nothing to serve without it
    };
    let mut buf = vec![0u8; 65_536];
    let mut out = Vec::with_capacity(64);
    let bump = |c: &AtomicU64| c.fetch_add(1, Ordering::Relaxed);
    while !stop.load(Ordering::Relaxed) {
        let (n, peer) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => continue,
            Err(_) => continue, // e.g. ICMP errors reported on the socket
        };
        bump(&stats.datagrams);
        let msg = match Msg::decode(&buf[..n]) {
            Ok(m) => m,
            Err(_) => {
                bump(&stats.malformed);
                continue;
            }
        };
        match msg {
            Msg::Hello { nonce } => {
                bump(&stats.hellos);
                challenge(&mut out, &key, peer, nonce, &config);
                debug_assert!(out.len() <= n);
                let _ = sock.send_to(&out, peer);
            }
            Msg::Start { nonce, cookie, train, params } => {
                if !key.valid(peer, nonce, &cookie) {
                    bump(&stats.bad_cookies);
                    continue;
                }
                if !admit_train(&sock, &mut out, peer, train, &params, &config, &key, &jobs, &stats, &admission) {
                    return;
                }
            }
            Msg::TokenStart { token, nonce, train, params } => {
                if !key.token_valid_at(peer.ip(), &token, key.now_ms(), config.token_lifetime) {
                    // QUIC's Retry: prove the address now, with a reply smaller than the request.
                    bump(&stats.bad_tokens);
                    challenge(&mut out, &key, peer, nonce, &config);
                    debug_assert!(out.len() <= n);
                    let _ = sock.send_to(&out, peer);
                    continue;
                }
                bump(&stats.token_starts);
                if !admit_train(&sock, &mut out, peer, train, &params, &config, &key, &jobs, &stats, &admission) {
                    return;
                }
            }
            _ => {
                bump(&stats.unexpected);
            }
        }
    }
}

/// Encodes the CHALLENGE for `peer`'s `nonce` into `out`.
fn challenge(out: &mut Vec<u8>, key: &CookieKey, peer: SocketAddr, nonce: u64, config: &ServerConfig) {
    Msg::Challenge {
        nonce,
        cookie: key.cookie(peer, nonce),
        max_rate_bps: config.max_rate.bps(),
        max_packets: config.max_packets,
        max_size: config.max_size.0.min(u16::MAX as u64) as u16,
    }
    .encode(out);
}

/// A verified client's train: checked against the caps and admitted (then a fresh
/// address-validation token goes to the client and the train to the pacer) or refused with a
/// REJECT. `false` when the pacer is gone (the server is stopping).
#[allow(clippy::too_many_arguments)]
fn admit_train(
    sock: &UdpSocket,
    out: &mut Vec<u8>,
    peer: SocketAddr,
    train: u32,
    params: &TrainParams,
    config: &ServerConfig,
    key: &CookieKey,
    jobs: &Sender<TrainJob>,
    stats: &ServerStats,
    admission: &Mutex<Admission>,
) -> bool {
    let bump = |c: &AtomicU64| c.fetch_add(1, Ordering::Relaxed);
    let overhead = ip_udp_overhead(ipv6_on_the_wire(peer));
    let now = Instant::now();
    let verdict = check_train(params, config, overhead).and_then(|t| {
        let mut adm = admission.lock().unwrap_or_else(|p| p.into_inner());
        adm.admit(peer, now, &t, config).map(|serial| (t, serial))
    });
    match verdict {
        Ok((t, serial)) => {
            bump(&stats.trains_started);
            // The token first: it is small and leaves before the train's lead-in is over.
            let lifetime_ms = config.token_lifetime.as_millis().min(u32::MAX as u128) as u32;
            Msg::Token { token: key.token_at(peer.ip(), key.now_ms()), lifetime_ms }.encode(out);
            if sock.send_to(out, peer).is_ok() {
                bump(&stats.tokens_issued);
            }
            let expires = expires_at(now, t.length);
            let job = TrainJob {
                peer,
                train,
                method: params.method,
                serial,
                schedule: t.schedule,
                burst: t.burst,
                overhead,
                expires,
            };
            jobs.send(job).is_ok()
        }
        Err(refusal) => {
            bump(&stats.rejected);
            if config.log_sessions {
                let cap = refusal.cap.map_or(String::new(), |c| format!(" (cap: {c})"));
                eprintln!(
                    "session {peer} train {train}: {} refused: {}{cap}",
                    params.method,
                    refusal.reason.describe()
                );
            }
            let retry_after_ms = refusal.retry_after.as_millis().clamp(1, u16::MAX as u128) as u16;
            Msg::Reject { train, reason: refusal.reason, retry_after_ms, cap: refusal.cap }.encode(out);
            let _ = sock.send_to(out, peer);
            true
        }
    }
}

struct Active {
    job: TrainJob,
    start: Instant,
    /// Accumulated slip: after a packet leaves late, the rest of the train moves with it, so
    /// the designed spacing (the probed rates) survives and late packets never go out as a
    /// catch-up burst.
    slip: Duration,
    next: usize,
    spacing: SpacingStats,
    /// Packets of the capacity burst sent.
    burst_sent: u32,
}

impl Active {
    fn new(job: TrainJob, start: Instant) -> Active {
        Active { job, start, slip: Duration::ZERO, next: 0, spacing: SpacingStats::default(), burst_sent: 0 }
    }

    fn deadline(&self) -> Instant {
        self.start + self.slip + Duration::from_nanos(self.job.schedule[self.next].offset.0)
    }
}

fn pacer(
    sock: UdpSocket,
    jobs: Receiver<TrainJob>,
    stats: Arc<ServerStats>,
    stop: Arc<AtomicBool>,
    admission: Arc<Mutex<Admission>>,
    log: bool,
) {
    crate::timing::reduce_timer_slack();
    let mut pacer = Pacer::default();
    let mut active: Vec<Active> = Vec::new();
    let mut buf = vec![0u8; 65_536];
    let mut out = Vec::with_capacity(32);
    // A new train starts a little after it is picked up so its first gap is not stolen by the
    // bookkeeping of others.
    let lead_in = Duration::from_micros(300);
    while !stop.load(Ordering::Relaxed) {
        // Pick up new trains: block when idle, poll otherwise.
        if active.is_empty() {
            match jobs.recv_timeout(Duration::from_millis(50)) {
                Ok(job) => active.push(Active::new(job, Instant::now() + lead_in)),
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        while let Ok(job) = jobs.try_recv() {
            active.push(Active::new(job, Instant::now() + lead_in));
        }
        // Trains that outlived their declared length (twice over, plus a grace) end here.
        let now = Instant::now();
        let mut k = 0;
        while k < active.len() {
            if now > active[k].job.expires {
                let done = active.swap_remove(k);
                stats.trains_expired.fetch_add(1, Ordering::Relaxed);
                finish(&sock, &mut out, done, &admission, log.then_some("expired"));
            } else {
                k += 1;
            }
        }
        let Some((i, deadline)) = active.iter().enumerate().map(|(i, a)| (i, a.deadline())).min_by_key(|x| x.1) else {
            continue;
        };
        // Do not oversleep new arrivals: wait at most 4 ms before polling the queue again,
        // and never past the spin margin before the deadline.
        let now = Instant::now();
        let poll = Duration::from_millis(4);
        if deadline > now + poll + pacer.margin() {
            pacer.sleep(poll);
            continue;
        }
        let sent_at = pacer.wait_until(deadline);
        let a = &mut active[i];
        let p = a.job.schedule[a.next];
        let offset = sent_at.duration_since(a.start).as_nanos() as u64;
        let payload = (p.size.0.saturating_sub(a.job.overhead) as usize).max(PROBE_HEADER_LEN);
        let count = a.job.schedule.len() as u16;
        let pkt = encode_probe(&mut buf, payload, a.job.train, a.next as u16, count, offset);
        a.spacing.record(deadline, sent_at);
        if sent_at > deadline + SLIP_THRESHOLD {
            a.slip += sent_at - deadline;
        }
        send_probe(&sock, pkt, a.job.peer, &stats);
        a.next += 1;
        if a.next == a.job.schedule.len() {
            // The capacity burst: the last packet's size again, back to back, no pacing.
            for j in 0..a.job.burst as usize {
                let offset = a.start.elapsed().as_nanos() as u64;
                let pkt = encode_probe(&mut buf, payload, a.job.train, (a.next + j) as u16, count, offset);
                a.burst_sent += send_probe(&sock, pkt, a.job.peer, &stats) as u32;
            }
            let done = active.swap_remove(i);
            stats.trains_completed.fetch_add(1, Ordering::Relaxed);
            finish(&sock, &mut out, done, &admission, log.then_some("sent"));
        }
    }
}

/// Sends one probe packet and counts it (sent, or a send error); whether it went out.
fn send_probe(sock: &UdpSocket, pkt: &[u8], peer: SocketAddr, stats: &ServerStats) -> bool {
    let sent = sock.send_to(pkt, peer).is_ok();
    let counter = if sent { &stats.probes_sent } else { &stats.send_errors };
    counter.fetch_add(1, Ordering::Relaxed);
    sent
}

/// Lateness from which the rest of a train is shifted rather than sent in a hurry. A gap is
/// thus never more than this shorter than designed.
const SLIP_THRESHOLD: Duration = Duration::from_micros(20);

/// Frees a train's client slot, then sends its END (what was sent, and how well paced); with
/// `log`, writes the session's line (`ended` says how the train ended).
///
/// The slot is freed first: a client sends its next START as soon as the END arrives, and with
/// the END first, a pacing thread preempted between the two (a loaded machine) had the receive
/// thread refuse that START as still in flight, a 500 ms wait (issue 19 session 13: with two
/// CPU hogs beside it, 2 of 3 runs of the loopback test `caps_are_enforced` lost their second
/// train to it; a CI run failed that test too).
fn finish(sock: &UdpSocket, out: &mut Vec<u8>, done: Active, admission: &Mutex<Admission>, log: Option<&str>) {
    admission.lock().unwrap_or_else(|p| p.into_inner()).release(done.job.peer, done.job.serial);
    if let Some(ended) = log {
        eprintln!(
            "session {} train {}: {} {}/{} packets {ended}, {} late, spacing error mean {} max {} ns",
            done.job.peer,
            done.job.train,
            done.job.method,
            done.spacing.packets,
            done.job.schedule.len(),
            done.spacing.late,
            done.spacing.mean_error(),
            done.spacing.max_error_ns
        );
    }
    Msg::End {
        train: done.job.train,
        sent: (done.spacing.packets + done.burst_sent).min(u16::MAX as u32) as u16,
        late: done.spacing.late.min(u16::MAX as u32) as u16,
        spacing_err_mean_ns: done.spacing.mean_error().0.min(u32::MAX as u64) as u32,
        spacing_err_max_ns: done.spacing.max_error_ns.min(u32::MAX as u64) as u32,
    }
    .encode(out);
    let _ = sock.send_to(out, done.job.peer);
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_core::abw::Method;

    fn quick(spacing: u64, step: u32, size: u16, count: u16) -> TrainParams {
        TrainParams { method: Method::PathQuick, spacing: Dur(spacing), step, size, count, burst: 0 }
    }

    fn refused_by(p: &TrainParams, config: &ServerConfig) -> Option<CapKind> {
        check_train(p, config, 28).err().and_then(|r| r.cap).map(|c| c.kind)
    }

    #[test]
    fn wrapping_train_length_is_refused() {
        let c = ServerConfig::default();
        // 2^63·2 wraps to 0 in u64.
        assert_eq!(refused_by(&quick(1 << 63, 12, 100, 3), &c), Some(CapKind::TrainLength));
        // Just under the length cap, and just over it, by one nanosecond.
        let len = c.max_train_length.0;
        assert!(check_train(&quick(len / 2, 1, 100, 3), &c, 28).is_ok());
        assert_eq!(refused_by(&quick(len / 2 + 1, 1, 100, 3), &c), Some(CapKind::TrainLength));
        // ΔP·(N-1) beyond u64 is a size refusal, not a wrap.
        assert_eq!(refused_by(&quick(1000, u32::MAX, 100, 3), &c), Some(CapKind::PacketSize));
    }

    #[test]
    fn every_cap_refuses_on_its_own() {
        let c = ServerConfig { max_packets: 100, ..ServerConfig::default() };
        // 1 ms spacing, 48..1208 B.
        let ok = quick(1_000_000, 40, 48, 30);
        let t = check_train(&ok, &c, 28).unwrap();
        assert_eq!(t.length, Dur::from_millis(29));
        assert_eq!(t.schedule.len(), 30);
        assert_eq!(t.peak_rate, Bytes(48 + 29 * 40).per(Dur::from_millis(1)));
        assert_eq!(refused_by(&quick(1_000_000, 40, 48, 101), &c), Some(CapKind::Packets));
        let c2 = ServerConfig { max_rate: Rate::from_mbps(9), ..c.clone() };
        assert_eq!(refused_by(&ok, &c2), Some(CapKind::Rate));
        let c3 = ServerConfig { max_train_bytes: Bytes(1000), ..c.clone() };
        assert_eq!(refused_by(&ok, &c3), Some(CapKind::TrainBytes));
        let c4 = ServerConfig { max_size: Bytes(1000), ..c.clone() };
        assert_eq!(refused_by(&ok, &c4), Some(CapKind::PacketSize));
        let c5 = ServerConfig { max_train_length: Dur::from_millis(20), ..c.clone() };
        assert_eq!(refused_by(&ok, &c5), Some(CapKind::TrainLength));
        assert_eq!(refused_by(&quick(1_000_000, 40, 47, 30), &c), Some(CapKind::MinPacketSize));
    }

    #[test]
    fn chirp_gaps_that_round_to_zero_are_refused() {
        // γ = 10 over 40 packets: the gaps shrink by 10× each and round to 0 ns.
        let p = TrainParams {
            method: Method::PathChirp,
            spacing: Dur(1_000_000),
            step: 10_000_000,
            size: 100,
            count: 40,
            burst: 0,
        };
        let c = ServerConfig { max_rate: Rate(u64::MAX), ..ServerConfig::default() };
        assert_eq!(refused_by(&p, &c), Some(CapKind::Rate));
    }

    #[test]
    fn an_expired_train_frees_its_slot() {
        let c = ServerConfig { max_concurrent: 1, ..ServerConfig::default() };
        let t = check_train(&quick(1_000_000, 40, 48, 30), &c, 28).unwrap();
        let (a, b): (SocketAddr, SocketAddr) = ("127.0.0.1:1".parse().unwrap(), "127.0.0.2:1".parse().unwrap());
        let mut adm = Admission::default();
        let t0 = Instant::now();
        let sa = adm.admit(a, t0, &t, &c).unwrap();
        let busy = adm.admit(b, t0 + Duration::from_millis(10), &t, &c).unwrap_err();
        assert_eq!(busy.reason, RejectReason::Busy);
        assert_eq!(busy.cap, Some(Cap { kind: CapKind::Clients, value: 1 }));
        // `a`'s train never ended: after twice its length plus the grace, `b` gets the slot.
        let later = expires_at(t0, t.length) + Duration::from_millis(1);
        let sb = adm.admit(b, later, &t, &c).unwrap();
        // `a`'s late release does not free `b`'s slot.
        adm.release(a, sa);
        assert_eq!(adm.in_flight(), 1);
        adm.release(b, sb);
        assert_eq!(adm.in_flight(), 0);
    }

    #[test]
    fn the_sum_of_peak_rates_in_flight_is_capped() {
        // 1 ms spacing, 48..1208 B: peak 9.664 Mbit/s; three fit under 30 Mbit/s, a fourth does not.
        let c = ServerConfig { max_rate: Rate::from_mbps(30), ..ServerConfig::default() };
        let t = check_train(&quick(1_000_000, 40, 48, 30), &c, 28).unwrap();
        let mut adm = Admission::default();
        let t0 = Instant::now();
        let peers: Vec<SocketAddr> = (1..=4).map(|i| format!("127.0.0.{i}:9").parse().unwrap()).collect();
        let serials: Vec<u64> = peers[..3].iter().map(|&p| adm.admit(p, t0, &t, &c).unwrap()).collect();
        let r = adm.admit(peers[3], t0, &t, &c).unwrap_err();
        assert_eq!(r.reason, RejectReason::Busy);
        assert_eq!(r.cap, Some(Cap { kind: CapKind::TotalRate, value: 30_000_000 }));
        // Retry when the first train in flight is planned to end (its 29 ms).
        assert_eq!(r.retry_after, Duration::from_millis(29));
        adm.release(peers[0], serials[0]);
        assert!(adm.admit(peers[3], t0, &t, &c).is_ok());
    }

    #[test]
    fn nonsensical_caps_are_refused_at_start() {
        let bad = [
            ServerConfig { max_rate: Rate::ZERO, ..ServerConfig::default() },
            ServerConfig { max_concurrent: 0, ..ServerConfig::default() },
            ServerConfig { trains_per_window: 0, ..ServerConfig::default() },
            ServerConfig { max_size: Bytes(10), ..ServerConfig::default() },
            ServerConfig { max_packets: 2, ..ServerConfig::default() },
        ];
        for c in bad {
            let e = Server::bind("127.0.0.1:0", c.clone()).err().unwrap_or_else(|| panic!("{c:?} accepted"));
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        }
        let e = ServerConfig { max_rate: Rate::ZERO, ..ServerConfig::default() }.validate().unwrap_err();
        assert!(e.contains("--max-rate"), "{e}");
        assert!(ServerConfig::default().validate().is_ok());
    }

    #[test]
    fn cookie_is_hmac_sha256() {
        // Known answer from Python's hmac module: key 0..31, message 4 ‖ 127.0.0.1 ‖ port 7447
        // ‖ nonce 42 ‖ epoch 3, all big-endian; first 16 bytes of the tag.
        let key: [u8; 32] = std::array::from_fn(|i| i as u8);
        let k = CookieKey::with_key(key);
        let c = k.cookie_at("127.0.0.1:7447".parse().unwrap(), 42, 3);
        let hex: String = c.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "be8f57dd9662d9f918005bbed8e34eea");
        // Two servers' keys differ (OS randomness), so their cookies do.
        let (a, b) = (CookieKey::new().unwrap(), CookieKey::new().unwrap());
        let peer = "127.0.0.1:1".parse().unwrap();
        assert_ne!(a.cookie(peer, 1), b.cookie(peer, 1));
        assert!(a.valid(peer, 1, &a.cookie(peer, 1)));
        assert!(!a.valid(peer, 2, &a.cookie(peer, 1)));
    }

    #[test]
    fn tokens_are_bound_to_the_address_the_key_and_the_lifetime() {
        let key = CookieKey::with_key([7; 32]);
        let life = Duration::from_secs(600);
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let t = key.token_at(ip, 1_000);
        // Accepted from issue to the end of its lifetime, on any port of the address.
        assert!(key.token_valid_at(ip, &t, 1_000, life));
        assert!(key.token_valid_at(ip, &t, 601_000, life));
        // Expired one millisecond later; not valid before it was issued.
        assert!(!key.token_valid_at(ip, &t, 601_001, life));
        assert!(!key.token_valid_at(ip, &t, 999, life));
        // Another address (same family, the other family), another key, a changed issue time
        // (extending a token's life) or a flipped tag bit: refused.
        assert!(!key.token_valid_at("192.0.2.2".parse().unwrap(), &t, 2_000, life));
        assert!(!key.token_valid_at("::ffff:192.0.2.1".parse().unwrap(), &t, 2_000, life));
        assert!(!CookieKey::with_key([8; 32]).token_valid_at(ip, &t, 2_000, life));
        assert!(!key.token_valid_at(ip, &AddressToken { issued_ms: 500_000, ..t }, 700_000, life));
        let mut forged = t;
        forged.tag[15] ^= 1;
        assert!(!key.token_valid_at(ip, &forged, 2_000, life));
        // A token is not a cookie: the domain byte separates the two MACs.
        assert_ne!(t.tag, key.cookie_at(SocketAddr::new(ip, 0), 1_000, 0));
    }
}
