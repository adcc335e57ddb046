//! headroom's split-TCP proxy (a performance-enhancing proxy, RFC 3135 §2.1.1 "split
//! connections"), the real-socket counterpart of the overlay paper's proxy (Maki et al.: a TCP
//! overlay node terminates the sender's connection and opens its own to the next hop, so each
//! leg's congestion control sees only its own RTT and loss).
//!
//! Each accepted client connection is paired with a connection of the proxy's own to the
//! upstream (the next proxy of a chain or the server); two [`relay`] directions move bytes
//! between them:
//! - every byte once and in order (TCP on each leg; the relay never drops or reorders);
//! - a FIN on one side becomes a half-close (`shutdown(SHUT_WR)`) on the other, each direction
//!   independently;
//! - a reset or error on either side resets the other (SO_LINGER 0 then close);
//! - an upstream connect that fails or times out resets the client at once.
//!
//! Resources are bounded: at most `max_conns` connections are relayed (at the cap the accept
//! loop pauses and clients wait in the listen backlog — explicit mode has nowhere to bypass
//! them to; transparent mode closes its nftables gate at the cap, so new connections bypass the
//! proxy untouched), at most `max_per_source` per client address (more are reset at once), an optional
//! idle timeout, and relay buffers that exist only while data moves.
//!
//! Explicit mode forwards only to its configured upstream: the proxy parses nothing from the
//! client, so no byte can choose a destination (no open proxy).
//!
//! This crate is separate from `headroom-net` because it brings in an async runtime (tokio)
//! that the probe's timing-critical blocking code does not need, and so that the probe builds
//! and tests without it.

pub mod cpu;
pub mod policy;
pub mod relay;
pub mod sock;
pub mod stats;
pub mod transparent;

pub use relay::CopyMode;
pub use stats::{ConnRecord, DirCounters, Outcome, Stats};

use anyhow::{anyhow, bail, Context};
use headroom_core::overlay::SplitPolicy;
use policy::PolicyDriver;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::Semaphore;

/// The proxy's configuration.
pub struct ProxyConfig {
    /// Address to accept clients on.
    pub listen: SocketAddr,
    /// The only address connections are forwarded to (explicit mode; ignored when transparent).
    pub upstream: SocketAddr,
    /// Transparent mode: accept connections diverted by nftables `tproxy` (the listener gets
    /// IP_TRANSPARENT) and connect to each one's original destination. Installing the
    /// interception is [`transparent::Interception`]'s job.
    pub transparent: Option<Transparency>,
    /// Called with "split new connections now?" when policy C's answer changes (transparent
    /// mode opens or closes its nftables gate with it).
    pub gate: Option<Box<dyn Fn(bool) + Send + Sync>>,
    /// Relay buffer per direction per split connection, bytes (a pipe in splice mode: the
    /// kernel rounds it up to a power of two pages and caps it at pipe-max-size unless root).
    pub buffer: usize,
    /// SO_SNDBUF/SO_RCVBUF on both legs (None: the kernel's autotuning).
    pub socket_buffer: Option<usize>,
    pub mode: CopyMode,
    /// Most connections relayed at once.
    pub max_conns: usize,
    /// Most connections relayed at once from one client IP address.
    pub max_per_source: usize,
    /// Upstream connect timeout.
    pub connect_timeout: Duration,
    /// Reset both sides after this long without a byte either way (None: never).
    pub idle_timeout: Option<Duration>,
    /// Worker threads of the runtime.
    pub threads: usize,
    /// The split policy: which connections are split (relayed through the full relay buffers)
    /// and which are passed on (explicit mode: relayed coupled, see [`Stats::bypassed`]).
    pub policy: SplitPolicy,
    /// Bytes counted as one packet when feeding relayed bytes to the policy (policy C).
    pub packet_bytes: u64,
    /// Kernel congestion control of both legs of every connection (`TCP_CONGESTION`; None:
    /// the namespace's default). In a chain, the proxy's upstream leg sends with it.
    pub congestion: Option<String>,
    /// Send one [`ConnRecord`] per finished connection here.
    pub conn_log: Option<std::sync::mpsc::Sender<ConnRecord>>,
    /// Emulate the overlay paper's proxy CPU with this time per packet of `packet_bytes`
    /// (`10 x` per SYN and SYN-ACK) for split connections ([`cpu`]; None: off).
    pub emulate_cpu: Option<Duration>,
    /// A listening socket made by the caller, accepted on instead of binding `listen` (a
    /// worker of `headroom proxy --workers N` inherits one of the [`bind_reuseport`] group).
    pub listener: Option<std::net::TcpListener>,
}

impl ProxyConfig {
    /// Defaults: 1 MiB relay buffers, splice, autotuned sockets, 10,000 connections, 1,000 per
    /// source, 5 s connect timeout, no idle timeout, two threads, split everything.
    pub fn new(listen: SocketAddr, upstream: SocketAddr) -> ProxyConfig {
        ProxyConfig {
            listen,
            upstream,
            transparent: None,
            gate: None,
            buffer: 1 << 20,
            socket_buffer: None,
            mode: CopyMode::Splice,
            max_conns: 10_000,
            max_per_source: 1_000,
            connect_timeout: Duration::from_secs(5),
            idle_timeout: None,
            threads: 2,
            policy: SplitPolicy::All,
            packet_bytes: 1448,
            congestion: None,
            conn_log: None,
            emulate_cpu: None,
            listener: None,
        }
    }
}

/// How transparent the transparent mode is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transparency {
    /// Connect to the original destination from the proxy's own address.
    Destination,
    /// Also connect from the client's own address and port number range (IP_TRANSPARENT on
    /// the upstream socket): the server sees the client. Replies must route through the proxy.
    Full,
}

/// The one-page relay buffer of a connection that is not split (coupled relaying).
const COUPLED_BUFFER: usize = 4096;

/// A running proxy: its runtime lives in a background thread until [`ProxyHandle::stop`] or drop.
pub struct ProxyHandle {
    local: SocketAddr,
    stats: Arc<Stats>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ProxyHandle {
    /// The address the proxy accepts on (the real port when `listen` had port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }
    /// Stops accepting and drops every relayed connection.
    pub fn stop(mut self) {
        self.shutdown();
    }
    fn shutdown(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ProxyHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Binds the listening socket and starts relaying in a background runtime.
pub fn spawn(mut cfg: ProxyConfig) -> anyhow::Result<ProxyHandle> {
    if cfg.buffer == 0 || cfg.max_conns == 0 || cfg.max_per_source == 0 || cfg.threads == 0 {
        bail!("buffer, max connections, max per source and threads must be positive");
    }
    if let Some(cc) = &cfg.congestion {
        // Refuse an unknown name now rather than on every connection.
        check_congestion(cc)?;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.threads)
        .thread_name("headroom-proxy")
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let listener = match cfg.listener.take() {
        Some(l) => rt.block_on(async {
            l.set_nonblocking(true)?;
            TcpListener::from_std(l)
        })?,
        None => rt.block_on(async { bind_listener(cfg.listen, cfg.transparent.is_some(), false) })?,
    };
    let local = listener.local_addr()?;
    if cfg.transparent.is_none() && would_loop(local, cfg.upstream) {
        bail!("upstream {} is the proxy's own listening address: it would relay to itself", cfg.upstream);
    }
    let stats = Arc::new(Stats::default());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
    let st = stats.clone();
    let driver = Arc::new(Mutex::new(PolicyDriver::new(
        std::mem::replace(&mut cfg.policy, SplitPolicy::All),
        Instant::now(),
        cfg.packet_bytes,
    )));
    let cpu = cfg.emulate_cpu.map(|t| Arc::new(cpu::EmulatedCpu::new(t, cfg.packet_bytes, driver.clone())));
    let cfg = Arc::new(cfg);
    let thread = std::thread::Builder::new().name("headroom-proxy-main".into()).spawn(move || {
        rt.block_on(async move {
            tokio::select! {
                _ = accept_loop(listener, cfg, st, driver, cpu) => {}
                _ = stop_rx => {}
            }
        });
        rt.shutdown_timeout(Duration::from_millis(200));
    })?;
    Ok(ProxyHandle { local, stats, stop: Some(stop_tx), thread: Some(thread) })
}

/// Whether this kernel has congestion control `cc` (an error naming those available if not).
pub fn check_congestion(cc: &str) -> anyhow::Result<()> {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").context("a socket to check --cc")?;
    sock::set_congestion(&probe, cc).with_context(|| {
        let avail = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap_or_default();
        format!("congestion control {cc:?} is not available here (available: {})", avail.trim())
    })
}

fn would_loop(local: SocketAddr, upstream: SocketAddr) -> bool {
    if local.port() != upstream.port() {
        return false;
    }
    local.ip() == upstream.ip()
        || (local.ip().is_unspecified() && (upstream.ip().is_loopback() || upstream.ip().is_unspecified()))
}

/// `n` listening sockets on one address with SO_REUSEPORT (a reuseport group): the kernel
/// spreads new connections among them by a hash of the 4-tuple, so each can be accepted on by
/// its own process (`headroom proxy --workers N`, like nginx's workers). The first binds
/// `addr` (port 0: the kernel picks one), the others its actual address. Refuses an address
/// that is the upstream's (see [`spawn`]).
pub fn bind_reuseport(addr: SocketAddr, n: usize, upstream: SocketAddr) -> anyhow::Result<Vec<std::net::TcpListener>> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().context("a runtime to bind")?;
    rt.block_on(async {
        let mut v: Vec<std::net::TcpListener> = Vec::with_capacity(n);
        for _ in 0..n {
            let at = v.first().map_or(Ok(addr), |l| l.local_addr())?;
            v.push(bind_listener(at, false, true)?.into_std()?);
        }
        let local = v.first().context("no listener")?.local_addr()?;
        if would_loop(local, upstream) {
            bail!("upstream {upstream} is the proxy's own listening address: it would relay to itself");
        }
        Ok(v)
    })
}

/// The listening socket. A transparent listener on the unspecified IPv4 address (the default)
/// listens on `[::]` with IPV6_V6ONLY off instead, so that both address families' diverted
/// connections reach it (the nftables table is `inet`); it stays IPv4 where the kernel has no
/// IPv6.
fn bind_listener(addr: SocketAddr, transparent: bool, reuseport: bool) -> anyhow::Result<TcpListener> {
    let dual = transparent && addr.ip() == IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED);
    let v6 = if dual { TcpSocket::new_v6().ok() } else { None };
    let (s, addr) = match v6 {
        Some(s) => {
            sock::set_dual_stack(&s).context("IPV6_V6ONLY")?;
            (s, SocketAddr::new(std::net::Ipv6Addr::UNSPECIFIED.into(), addr.port()))
        }
        _ if addr.is_ipv4() => (TcpSocket::new_v4()?, addr),
        _ => (TcpSocket::new_v6()?, addr),
    };
    s.set_reuseaddr(true)?;
    if reuseport {
        s.set_reuseport(true)?;
    }
    if transparent {
        sock::set_transparent(&s, addr.is_ipv6()).context("IP_TRANSPARENT (needs CAP_NET_ADMIN)")?;
    }
    s.bind(addr).with_context(|| format!("binding {addr}"))?;
    Ok(s.listen(4096)?)
}

/// An IPv4 client of a dual-stack listener appears as `::ffff:a.b.c.d`; policies, limits,
/// records and onward connections use the IPv4 address.
fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

/// Per-source connection counts.
type SourceCounts = Arc<Mutex<HashMap<IpAddr, usize>>>;

/// Decrements the source's count when the connection ends.
struct SourceSlot {
    counts: SourceCounts,
    ip: IpAddr,
}

impl Drop for SourceSlot {
    fn drop(&mut self) {
        let mut m = self.counts.lock().expect("source counts lock");
        if let Some(c) = m.get_mut(&self.ip) {
            *c -= 1;
            if *c == 0 {
                m.remove(&self.ip);
            }
        }
    }
}

type Driver = Arc<Mutex<PolicyDriver>>;

async fn accept_loop(
    listener: TcpListener,
    cfg: Arc<ProxyConfig>,
    stats: Arc<Stats>,
    driver: Driver,
    cpu: Option<Arc<cpu::EmulatedCpu>>,
) {
    let slots = Arc::new(Semaphore::new(cfg.max_conns));
    // Connections being served (each holds a slot; the accept loop also holds one while it
    // waits for the next client, so the semaphore's count is one off for the gate).
    let held = Arc::new(AtomicU64::new(0));
    let max = cfg.max_conns as u64;
    // Wakes the gate task at once when the last slot is taken or the first one freed.
    let cap_changed = Arc::new(tokio::sync::Notify::new());
    {
        // Feed relayed bytes to the policy as packets (policy C's SampleLoad), and keep
        // transparent mode's nftables gate at the policy's answer, closed while the proxy is at
        // its connection cap: at the cap new connections bypass it (the kernel forwards them
        // untouched) instead of waiting in the listen backlog. Connections diverted before the
        // gate closed (the `nft` command takes milliseconds) wait there for a free slot.
        let (driver, stats, held, cap_changed) = (driver.clone(), stats.clone(), held.clone(), cap_changed.clone());
        let cfg = cfg.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(policy::TICK);
            let mut gate_open = None;
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = cap_changed.notified() => {}
                }
                let total = stats.bytes_up.load(Relaxed) + stats.bytes_down.load(Relaxed);
                let policy_open = {
                    let mut d = driver.lock().expect("policy lock");
                    d.feed_bytes(Instant::now(), total);
                    d.would_split(Instant::now())
                };
                let at_cap = held.load(Relaxed) >= max;
                let open = policy_open && !at_cap;
                if gate_open != Some(open) {
                    if policy_open && at_cap && cfg.gate.is_some() {
                        stats.cap_bypass_closes.fetch_add(1, Relaxed);
                    }
                    gate_open = Some(open);
                    if cfg.gate.is_some() {
                        let cfg = cfg.clone();
                        let _ = tokio::task::spawn_blocking(move || (cfg.gate.as_ref().expect("checked"))(open)).await;
                    }
                }
            }
        });
    }
    let sources: SourceCounts = Arc::default();
    let mut next_id = 0u64;
    loop {
        let permit = match slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                stats.cap_pauses.fetch_add(1, Relaxed);
                match slots.clone().acquire_owned().await {
                    Ok(p) => p,
                    Err(_) => return,
                }
            }
        };
        let (client, peer) = match listener.accept().await {
            Ok((client, peer)) => (client, canonical(peer)),
            Err(e) => {
                // EMFILE/ENFILE/ECONNABORTED: back off instead of spinning.
                if e.raw_os_error() != Some(libc::ECONNABORTED) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                continue;
            }
        };
        stats.accepted.fetch_add(1, Relaxed);
        let now = Instant::now();
        let slot = {
            let mut m = sources.lock().expect("source counts lock");
            let c = m.entry(peer.ip()).or_insert(0);
            if *c >= cfg.max_per_source {
                None
            } else {
                *c += 1;
                Some(SourceSlot { counts: sources.clone(), ip: peer.ip() })
            }
        };
        let Some(slot) = slot else {
            stats.refused_per_source.fetch_add(1, Relaxed);
            let _ = sock::set_reset_on_close(&client);
            drop(client);
            continue;
        };
        let split = {
            let mut d = driver.lock().expect("policy lock");
            if cfg.transparent.is_some() {
                // nftables already chose: only selected connections reach the proxy.
                d.on_syn(now);
                true
            } else {
                d.on_new_connection(now, peer.ip()).is_split()
            }
        };
        next_id += 1;
        let id = next_id;
        let (cfg, stats, driver) = (cfg.clone(), stats.clone(), driver.clone());
        if held.fetch_add(1, Relaxed) + 1 == max && cfg.gate.is_some() {
            cap_changed.notify_one();
        }
        let (held, cap_changed) = (held.clone(), cap_changed.clone());
        // Only split connections use the (emulated) CPU: the simulator's fast path for the others.
        let cpu = if split { cpu.clone() } else { None };
        tokio::spawn(async move {
            let rec = serve(client, peer, split, id, &cfg, &stats, &driver, cpu.as_deref()).await;
            drop(slot);
            drop(permit);
            if held.fetch_sub(1, Relaxed) == max && cfg.gate.is_some() {
                cap_changed.notify_one();
            }
            // Straight into the (unbounded, never blocking) std channel: a slow log reader
            // cannot stall a connection task, and a record sent before the proxy stops is not
            // lost in the runtime's shutdown (it was, through an intermediate task).
            if let Some(log) = &cfg.conn_log {
                let _ = log.send(rec);
            }
        });
    }
}

async fn connect_upstream(
    cfg: &ProxyConfig,
    split: bool,
    to: SocketAddr,
    from: Option<IpAddr>,
) -> std::io::Result<TcpStream> {
    let s = if to.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    if let (true, Some(b)) = (split, cfg.socket_buffer) {
        sock::set_socket_buffers(&s, b)?;
    }
    if let Some(cc) = &cfg.congestion {
        sock::set_congestion(&s, cc)?;
    }
    if let Some(ip) = from {
        sock::set_transparent(&s, to.is_ipv6())?;
        s.bind(SocketAddr::new(ip, 0))?;
    }
    match tokio::time::timeout(cfg.connect_timeout, s.connect(to)).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "upstream connect timed out")),
    }
}

/// Relays one client connection to the upstream; returns its record.
#[allow(clippy::too_many_arguments)]
async fn serve(
    client: TcpStream,
    peer: SocketAddr,
    split: bool,
    id: u64,
    cfg: &ProxyConfig,
    stats: &Stats,
    driver: &Driver,
    cpu: Option<&cpu::EmulatedCpu>,
) -> ConnRecord {
    let start = Instant::now();
    // Transparent: the accepted socket's local address is the original destination.
    let (to, from) = match cfg.transparent {
        None => (cfg.upstream, None),
        Some(t) => {
            let dst = client.local_addr().map(canonical).unwrap_or(cfg.upstream);
            (dst, (t == Transparency::Full).then_some(peer.ip()))
        }
    };
    let mut rec = ConnRecord {
        id,
        client: peer,
        upstream: to,
        split,
        outcome: Outcome::Closed,
        duration: Duration::ZERO,
        up: DirCounters::default(),
        down: DirCounters::default(),
    };
    // A client that addressed the transparent listener itself has no destination to go to.
    let self_addressed = cfg.transparent.is_some() && to.port() == cfg.listen.port() && cfg.listen.port() != 0;
    let connected = if self_addressed {
        Err(std::io::Error::other("connection addressed to the proxy itself"))
    } else {
        // The client's SYN is processed before the proxy sends its own upstream.
        if let Some(c) = cpu {
            c.syn(stats).await;
        }
        connect_upstream(cfg, split, to, from).await
    };
    let upstream = match connected {
        Ok(u) => u,
        Err(_) => {
            stats.upstream_failed.fetch_add(1, Relaxed);
            let _ = sock::set_reset_on_close(&client);
            rec.outcome = Outcome::UpstreamFailed;
            rec.duration = start.elapsed();
            return rec;
        }
    };
    if split {
        driver.lock().expect("policy lock").on_syn_ack(Instant::now());
    }
    // The upstream's SYN-ACK is processed before the first byte is relayed.
    if let Some(c) = cpu {
        c.syn(stats).await;
    }
    stats.active.fetch_add(1, Relaxed);
    if split {
        stats.split.fetch_add(1, Relaxed);
    } else {
        stats.bypassed.fetch_add(1, Relaxed);
    }
    if let (true, Some(b)) = (split, cfg.socket_buffer) {
        let _ = sock::set_socket_buffers(&client, b);
    }
    if let Some(cc) = &cfg.congestion {
        let _ = sock::set_congestion(&client, cc);
    }
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let last = AtomicU64::new(0);
    let buffer = if split { cfg.buffer } else { COUPLED_BUFFER };
    let up_ctx = relay::DirCtx {
        stats,
        global_bytes: &stats.bytes_up,
        last_activity_ms: &last,
        start,
        buffer,
        mode: cfg.mode,
        cpu,
    };
    let down_ctx = relay::DirCtx { global_bytes: &stats.bytes_down, ..up_ctx };
    let (mut up, mut down) = (DirCounters::default(), DirCounters::default());
    let both = async {
        tokio::try_join!(
            relay::relay(&client, &upstream, &up_ctx, &mut up),
            relay::relay(&upstream, &client, &down_ctx, &mut down)
        )
    };
    let outcome = tokio::select! {
        r = both => if r.is_ok() { Outcome::Closed } else { Outcome::Reset },
        _ = idle_watch(cfg.idle_timeout, &last, start) => Outcome::IdleTimeout,
    };
    if outcome != Outcome::Closed {
        // Propagate: the side that reset is gone; the other gets a RST on close.
        let _ = sock::set_reset_on_close(&client);
        let _ = sock::set_reset_on_close(&upstream);
    }
    match outcome {
        Outcome::Closed => stats.completed.fetch_add(1, Relaxed),
        Outcome::IdleTimeout => stats.idle_timeouts.fetch_add(1, Relaxed),
        _ => stats.resets.fetch_add(1, Relaxed),
    };
    stats.upstream_idle_ns.fetch_add(up.starved.as_nanos() as u64, Relaxed);
    stats.upstream_blocked_ns.fetch_add(up.blocked.as_nanos() as u64, Relaxed);
    stats.active.fetch_sub(1, Relaxed);
    rec.outcome = outcome;
    rec.duration = start.elapsed();
    rec.up = up;
    rec.down = down;
    rec
}

/// Completes when no byte moved for `timeout`; never when `timeout` is None.
async fn idle_watch(timeout: Option<Duration>, last_ms: &AtomicU64, start: Instant) {
    let Some(t) = timeout else {
        return std::future::pending().await;
    };
    loop {
        let last = start + Duration::from_millis(last_ms.load(Relaxed));
        let deadline = last + t;
        if Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep_until(deadline.into()).await;
    }
}

/// Parses `HOST:PORT` into one socket address (the first the resolver gives).
pub fn resolve(s: &str) -> anyhow::Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    s.to_socket_addrs()
        .with_context(|| format!("{s:?} is not HOST:PORT"))?
        .next()
        .ok_or_else(|| anyhow!("{s:?} resolves to no address"))
}
