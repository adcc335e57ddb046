//! `headroom serve`: answers probe clients with PathQuick or pathChirp trains.
//!
//! # Safety against abuse
//!
//! - **Stateless challenge.** A HELLO (64 bytes) gets a CHALLENGE (40 bytes) carrying a cookie:
//!   a keyed hash of the sender's address and port, the client's nonce and a 30-second epoch
//!   (two SipHash instances keyed at random when the server starts). Nothing is stored. A train
//!   is sent only for a START that echoes a valid cookie (this or the previous epoch), which
//!   proves the client receives at the address the train goes to; a spoofed source never sees
//!   the cookie. No reply is ever larger than the unverified datagram that caused it.
//! - **Caps** ([`ServerConfig`]): highest probed rate, packet size, packets and length of a
//!   train, bytes of a train, trains per client IP per window, one train in flight per client
//!   address, and concurrent clients. A verified client over a cap gets a REJECT.
//! - **Garbage** (wrong magic/version/type/length, bad cookie, unexpected message types) is
//!   dropped silently and counted in [`ServerStats`].
//!
//! # Threads
//!
//! One receive thread (handshakes and admission) and one pacing thread that sends every train
//! in flight from a single schedule: it sleeps until shortly before the earliest deadline, then
//! busy-waits ([`crate::timing::wait_until`]), so concurrent trains interleave without one
//! spinning thread per client. A packet that leaves more than 20 µs late shifts the rest of its
//! train (the designed spacing is kept; no catch-up bursts); the probe carries its actual send
//! time and the lateness is reported in END.

use crate::timing::{wait_until, SpacingStats};
use crate::wire::{encode_probe, ip_udp_overhead, Msg, RejectReason, TrainParams, PROBE_HEADER_LEN};
use headroom_core::abw::TrainDesign;
use headroom_core::units::{Bytes, Dur, Rate};
use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hash, Hasher};
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
    /// Highest rate any gap of a train may probe.
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
        }
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
    pub rejected: AtomicU64,
    pub probes_sent: AtomicU64,
    pub send_errors: AtomicU64,
}

impl ServerStats {
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

const COOKIE_EPOCH: Duration = Duration::from_secs(30);

struct CookieKey {
    a: RandomState,
    b: RandomState,
    origin: Instant,
}

impl CookieKey {
    fn new() -> CookieKey {
        CookieKey { a: RandomState::new(), b: RandomState::new(), origin: Instant::now() }
    }

    fn epoch(&self) -> u64 {
        (self.origin.elapsed().as_secs() / COOKIE_EPOCH.as_secs()) + 1
    }

    fn cookie_at(&self, peer: SocketAddr, nonce: u64, epoch: u64) -> [u8; 16] {
        let one = |s: &RandomState| {
            let mut h = s.build_hasher();
            peer.hash(&mut h);
            nonce.hash(&mut h);
            epoch.hash(&mut h);
            h.finish()
        };
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&one(&self.a).to_be_bytes());
        out[8..].copy_from_slice(&one(&self.b).to_be_bytes());
        out
    }

    fn cookie(&self, peer: SocketAddr, nonce: u64) -> [u8; 16] {
        self.cookie_at(peer, nonce, self.epoch())
    }

    fn valid(&self, peer: SocketAddr, nonce: u64, cookie: &[u8; 16]) -> bool {
        let e = self.epoch();
        // Compare without early exit on the first differing byte.
        let eq = |c: [u8; 16]| c.iter().zip(cookie).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0;
        eq(self.cookie_at(peer, nonce, e)) || eq(self.cookie_at(peer, nonce, e.saturating_sub(1)))
    }
}

/// Admission state, shared by the receive and pacing threads.
#[derive(Default)]
struct Admission {
    in_flight: HashSet<SocketAddr>,
    recent: HashMap<IpAddr, (Instant, u32)>,
}

struct TrainJob {
    peer: SocketAddr,
    train: u32,
    schedule: Vec<headroom_core::abw::TrainPacket>,
    overhead: u64,
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

impl Server {
    pub fn bind(addr: impl ToSocketAddrs, config: ServerConfig) -> io::Result<Server> {
        let sock = UdpSocket::bind(addr)?;
        Ok(Server { sock, config })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// Starts the receive and pacing threads.
    pub fn spawn(self) -> io::Result<ServerHandle> {
        let local = self.sock.local_addr()?;
        self.sock.set_read_timeout(Some(Duration::from_millis(50)))?;
        let stats = Arc::new(ServerStats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let admission = Arc::new(Mutex::new(Admission::default()));
        let (jobs_tx, jobs_rx) = mpsc::channel::<TrainJob>();
        let pacer_sock = self.sock.try_clone()?;
        let mut threads = Vec::new();
        {
            let (stats, stop, admission) = (stats.clone(), stop.clone(), admission.clone());
            threads.push(
                std::thread::Builder::new()
                    .name("headroom-pacer".into())
                    .spawn(move || pacer(pacer_sock, jobs_rx, stats, stop, admission))?,
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

/// Checks a verified client's train against the caps; returns the schedule or the reason.
fn admit_design(params: &TrainParams, config: &ServerConfig, overhead: u64) -> Result<TrainDesign, RejectReason> {
    let design = params.design().map_err(|_| RejectReason::BadDesign)?;
    if params.count > config.max_packets {
        return Err(RejectReason::OverCap);
    }
    let schedule = design.schedule();
    let smallest = schedule.iter().map(|p| p.size).min().unwrap_or(Bytes::ZERO);
    let largest = schedule.iter().map(|p| p.size).max().unwrap_or(Bytes::ZERO);
    if smallest.0 < overhead + PROBE_HEADER_LEN as u64 {
        return Err(RejectReason::BadDesign);
    }
    if largest > config.max_size
        || design.train_length() > config.max_train_length
        || design.bytes() > config.max_train_bytes
    {
        return Err(RejectReason::OverCap);
    }
    let top = headroom_core::abw::gap_rates(&schedule).into_iter().max().unwrap_or(Rate::ZERO);
    if top > config.max_rate {
        return Err(RejectReason::OverCap);
    }
    Ok(design)
}

fn receiver(
    sock: UdpSocket,
    config: ServerConfig,
    jobs: Sender<TrainJob>,
    stats: Arc<ServerStats>,
    stop: Arc<AtomicBool>,
    admission: Arc<Mutex<Admission>>,
) {
    let key = CookieKey::new();
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
                Msg::Challenge {
                    nonce,
                    cookie: key.cookie(peer, nonce),
                    max_rate_bps: config.max_rate.bps(),
                    max_packets: config.max_packets,
                    max_size: config.max_size.0.min(u16::MAX as u64) as u16,
                }
                .encode(&mut out);
                debug_assert!(out.len() <= n);
                let _ = sock.send_to(&out, peer);
            }
            Msg::Start { nonce, cookie, train, params } => {
                if !key.valid(peer, nonce, &cookie) {
                    bump(&stats.bad_cookies);
                    continue;
                }
                let overhead = ip_udp_overhead(peer.is_ipv6());
                // For TooMany: when this client's window resets (else the fixed 500 ms).
                let mut retry_after = Duration::from_millis(500);
                let verdict = admit_design(&params, &config, overhead).and_then(|design| {
                    let mut adm = admission.lock().unwrap_or_else(|p| p.into_inner());
                    if adm.in_flight.contains(&peer) {
                        return Err(RejectReason::InFlight);
                    }
                    if adm.in_flight.len() >= config.max_concurrent {
                        return Err(RejectReason::Busy);
                    }
                    let now = Instant::now();
                    if adm.recent.len() > 10_000 {
                        let w = config.window;
                        adm.recent.retain(|_, (t, _)| now.duration_since(*t) < w);
                    }
                    let entry = adm.recent.entry(peer.ip()).or_insert((now, 0));
                    if now.duration_since(entry.0) >= config.window {
                        *entry = (now, 0);
                    }
                    if entry.1 >= config.trains_per_window {
                        retry_after = config.window.saturating_sub(now.duration_since(entry.0));
                        return Err(RejectReason::TooMany);
                    }
                    entry.1 += 1;
                    adm.in_flight.insert(peer);
                    Ok(design)
                });
                match verdict {
                    Ok(design) => {
                        bump(&stats.trains_started);
                        let job = TrainJob { peer, train, schedule: design.schedule(), overhead };
                        if jobs.send(job).is_err() {
                            return;
                        }
                    }
                    Err(reason) => {
                        bump(&stats.rejected);
                        let retry_after_ms = retry_after.as_millis().clamp(1, u16::MAX as u128) as u16;
                        Msg::Reject { train, reason, retry_after_ms }.encode(&mut out);
                        let _ = sock.send_to(&out, peer);
                    }
                }
            }
            _ => {
                bump(&stats.unexpected);
            }
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
}

impl Active {
    fn new(job: TrainJob, start: Instant) -> Active {
        Active { job, start, slip: Duration::ZERO, next: 0, spacing: SpacingStats::default() }
    }

    fn deadline(&self) -> Instant {
        self.start + self.slip + Duration::from_nanos(self.job.schedule[self.next].offset.0)
    }
}

/// Lateness from which the rest of a train is shifted rather than sent in a hurry.
const SLIP_THRESHOLD: Duration = Duration::from_micros(20);

fn pacer(
    sock: UdpSocket,
    jobs: Receiver<TrainJob>,
    stats: Arc<ServerStats>,
    stop: Arc<AtomicBool>,
    admission: Arc<Mutex<Admission>>,
) {
    crate::timing::reduce_timer_slack();
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
        let Some((i, deadline)) = active.iter().enumerate().map(|(i, a)| (i, a.deadline())).min_by_key(|x| x.1) else {
            continue;
        };
        // Do not oversleep new arrivals: wait at most 5 ms before polling the queue again.
        let now = Instant::now();
        if deadline > now + Duration::from_millis(5) {
            std::thread::sleep(Duration::from_millis(4));
            continue;
        }
        let sent_at = wait_until(deadline);
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
        match sock.send_to(pkt, a.job.peer) {
            Ok(_) => {
                stats.probes_sent.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                stats.send_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        a.next += 1;
        if a.next == a.job.schedule.len() {
            let done = active.swap_remove(i);
            Msg::End {
                train: done.job.train,
                sent: done.spacing.packets.min(u16::MAX as u32) as u16,
                late: done.spacing.late.min(u16::MAX as u32) as u16,
                spacing_err_mean_ns: done.spacing.mean_error().0.min(u32::MAX as u64) as u32,
                spacing_err_max_ns: done.spacing.max_error_ns.min(u32::MAX as u64) as u32,
            }
            .encode(&mut out);
            let _ = sock.send_to(&out, done.job.peer);
            stats.trains_completed.fetch_add(1, Ordering::Relaxed);
            let mut adm = admission.lock().unwrap_or_else(|p| p.into_inner());
            adm.in_flight.remove(&done.job.peer);
        }
    }
}
