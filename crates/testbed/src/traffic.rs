//! Built-in traffic: UDP generator and counting receiver, UDP echo (RTT), TCP bulk sender and
//! sink, and a web-like request/response workload. No external tools (iperf3) are needed.
//!
//! All functions here do blocking I/O on sockets handed to them; they do not pick a namespace.
//! Create the sockets on a thread inside the right host (`Testbed::run_in` / `spawn_in`).
//!
//! UDP datagrams carry a 20-byte header: sequence number (u64), send time (u64, ns of
//! `CLOCK_MONOTONIC`, shared by all namespaces, so one-way delays are exact) and a flow id
//! (u32), all big-endian, padded to the configured size; a datagram with room for it then
//! carries its scheduled send time (u64), so a receiver can tell the generator's lateness.
//! Sizes and rates count IP bytes (payload + 28 bytes of IP and UDP headers), the same bytes
//! the bottleneck's tbf counts.
//!
//! The generator keeps an absolute schedule (`t_k = t_0 + sum of gaps`): a late wake-up sends
//! immediately and the next packet keeps its scheduled time, so the long-run rate does not drift.
//! It sleeps until shortly before each send time and spins the rest (see [`wait_until_ns`]).
//!
//! Random gaps and sizes are drawn with headroom's one generator and samplers
//! ([`headroom_core::rng`]), seeded by each flow's `seed`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use headroom_core::rng::Rng;
use headroom_core::{Bytes, Dur, Rate};
use headroom_net::timing::{self, ArrivalTimestamps, Pacer};

use crate::sys;

/// IP + UDP header bytes.
pub const IP_UDP_OVERHEAD: usize = 28;
/// Our datagram header bytes.
pub const UDP_HEADER: usize = 20;
/// Our header with the scheduled send time after it.
pub const UDP_HEADER_WITH_DUE: usize = UDP_HEADER + 8;
/// Smallest IP packet size the generator sends.
pub const MIN_UDP_SIZE: usize = IP_UDP_OVERHEAD + UDP_HEADER;

/// Byte and packet counters of one flow, read by samplers while the flow runs.
#[derive(Debug, Default)]
pub struct FlowCounters {
    pub bytes: AtomicU64,
    pub packets: AtomicU64,
    /// Packets known lost (UDP: sequence gaps).
    pub lost: AtomicU64,
}

/// When UDP packets leave.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pattern {
    /// Constant gaps.
    Cbr,
    /// Exponential gaps (a Poisson process; [`Rng::exponential`]).
    Poisson,
    /// CBR at the rate during `on`, silence during `off`, starting with `on`.
    OnOff { on: Dur, off: Dur },
}

/// A UDP generator's settings.
#[derive(Clone, Debug)]
pub struct UdpGen {
    pub dst: SocketAddr,
    /// Rate in IP bits per second (while on, for on/off).
    pub rate: Rate,
    /// IP packet size in bytes (>= [`MIN_UDP_SIZE`]).
    pub size: usize,
    pub pattern: Pattern,
    pub duration: Dur,
    pub seed: u64,
    pub flow_id: u32,
    /// Send from a real-time thread ([`GENERATOR_PRIORITY`], SCHED_FIFO, below the delay box)
    /// for the stream's duration, so that other load does not bunch packets together. Ignored
    /// when the mean gap is under 80 µs (the thread would spin most of the time) or without
    /// the privilege.
    pub realtime: bool,
}

/// SCHED_FIFO priority of a real-time UDP generator (below the delay box's).
pub const GENERATOR_PRIORITY: i32 = 5;

/// What the generator did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UdpSendReport {
    pub packets: u64,
    /// IP bytes.
    pub bytes: u64,
    pub send_errors: u64,
    /// The scheduled duration (rate = bytes * 8 / duration).
    pub duration: Dur,
    /// Send lateness (the time stamped into a datagram minus its scheduled send time): the sum
    /// over the packets sent, the largest, and how many left more than [`LATE_SEND`] late (a
    /// generator that waited that long sends its overdue packets in a burst, and a train
    /// crossing the bottleneck meanwhile met less cross traffic, then more, than the nominal
    /// rate).
    pub lateness_sum_ns: u64,
    pub lateness_max_ns: u64,
    pub late_sends: u64,
}

/// A send this late counts in [`UdpSendReport::late_sends`]: about the mean gap of 90 Mbit/s of
/// 1,000-byte packets (89 µs).
pub const LATE_SEND: Dur = Dur(100_000);

impl UdpSendReport {
    pub fn rate(&self) -> Rate {
        Bytes(self.bytes).per(self.duration)
    }

    /// Mean send lateness over the packets sent (zero when none was).
    pub fn mean_lateness(&self) -> Dur {
        Dur(self.lateness_sum_ns.checked_div(self.packets).unwrap_or(0))
    }
}

/// Sends as configured on `sock` (created in the sender's namespace). `stop` ends early.
pub fn udp_send(
    sock: &UdpSocket,
    g: &UdpGen,
    counters: Option<&FlowCounters>,
    stop: Option<&AtomicBool>,
) -> Result<UdpSendReport> {
    if g.size < MIN_UDP_SIZE || g.size > 65_000 {
        bail!("UDP packet size {} outside {MIN_UDP_SIZE}..=65000", g.size);
    }
    if g.rate.0 == 0 {
        bail!("UDP rate must be positive");
    }
    sys::precise_timers();
    // A real-time thread that spun through most of every gap would hold a core for the whole
    // stream; above this packet rate the generator stays a normal thread.
    let gap_ns = (g.size as f64 * 8.0 * 1e9) / g.rate.0 as f64;
    let rt = g.realtime && gap_ns >= (4 * SPIN_BEFORE_SEND_RT_NS) as f64 && sys::set_realtime(GENERATOR_PRIORITY);
    let spin = if rt { SPIN_BEFORE_SEND_RT_NS } else { SPIN_BEFORE_SEND_NS };
    let r = udp_send_loop(sock, g, counters, stop, spin);
    if rt {
        sys::set_normal_scheduling();
    }
    r
}

fn udp_send_loop(
    sock: &UdpSocket,
    g: &UdpGen,
    counters: Option<&FlowCounters>,
    stop: Option<&AtomicBool>,
    spin: u64,
) -> Result<UdpSendReport> {
    sys::set_socket_buffers(sock.as_raw_fd(), 4 << 20);
    let mut buf = vec![0u8; g.size - IP_UDP_OVERHEAD];
    buf[16..20].copy_from_slice(&g.flow_id.to_be_bytes());
    let gap_ns = (g.size as f64 * 8.0 * 1e9) / g.rate.0 as f64;
    let mut rng = Rng::new(g.seed);
    let t0 = sys::now_ns();
    let end = t0 + g.duration.0;
    let mut next = t0 as f64;
    let mut rep = UdpSendReport { duration: g.duration, ..Default::default() };
    let mut seq = 0u64;
    let mut pacer = Pacer::with_floor(Duration::from_nanos(spin)).with_cap(Duration::from_nanos(gap_ns as u64));
    loop {
        if let Pattern::OnOff { on, off } = g.pattern {
            let period = (on.0 + off.0) as f64;
            let phase = (next - t0 as f64) % period;
            if phase >= on.0 as f64 {
                next += period - phase;
            }
        }
        if next >= end as f64 || stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            break;
        }
        let due = next as u64;
        wait_until_ns(&mut pacer, due);
        buf[0..8].copy_from_slice(&seq.to_be_bytes());
        let sent_at = sys::now_ns();
        buf[8..16].copy_from_slice(&sent_at.to_be_bytes());
        if let Some(at) = buf.get_mut(UDP_HEADER..UDP_HEADER_WITH_DUE) {
            at.copy_from_slice(&due.to_be_bytes());
        }
        match sock.send_to(&buf, g.dst) {
            Ok(_) => {
                rep.packets += 1;
                rep.bytes += g.size as u64;
                let late = sent_at.saturating_sub(due);
                rep.lateness_sum_ns += late;
                rep.lateness_max_ns = rep.lateness_max_ns.max(late);
                rep.late_sends += (late > LATE_SEND.0) as u64;
                if let Some(c) = counters {
                    c.packets.fetch_add(1, Ordering::Relaxed);
                    c.bytes.fetch_add(g.size as u64, Ordering::Relaxed);
                }
            }
            Err(_) => rep.send_errors += 1,
        }
        seq += 1;
        next += match g.pattern {
            Pattern::Poisson => rng.exponential(gap_ns),
            _ => gap_ns,
        };
    }
    Ok(rep)
}

/// Timer wake-ups of a normal thread on a loaded VM come tens of µs late; sleeping until this
/// much before a send time and spinning the rest keeps sub-100 µs gaps intact.
pub const SPIN_BEFORE_SEND_NS: u64 = 80_000;
/// The same for a real-time thread, which wakes within a few µs.
pub const SPIN_BEFORE_SEND_RT_NS: u64 = 20_000;

/// Waits until `CLOCK_MONOTONIC` reaches `due`: sleeps, then spins the last stretch, at least
/// `pacer`'s floor and more after late wake-ups ([`Pacer`]; the generator caps it at its mean
/// gap). With a fixed 20 µs spin a real-time generator on a shared VM (wake-ups a median 55 µs
/// late) sent 100 Mbit/s of Poisson traffic with a median gap of 0.41–0.43 of the mean instead
/// of ln 2 = 0.69 and 18–21 % of its gaps under 10 µs (exponential: 11.7 %): most packets left
/// late, the next ones in a catch-up burst. With the adaptive margin: 0.63–0.65 and 9–11 %
/// (testbed test `poisson_generator_rate_is_within_2_percent`, 4 runs each, issue 19 session 10).
pub fn wait_until_ns(pacer: &mut Pacer, due: u64) {
    pacer.wait(|| {
        let now = sys::now_ns();
        (now < due).then(|| Duration::from_nanos(due - now))
    });
}

/// What a UDP receiver saw.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UdpRecvReport {
    pub packets: u64,
    /// IP bytes (payload + 28).
    pub bytes: u64,
    /// Highest sequence number + 1 (the sender sent at least this many).
    pub expected: u64,
    /// Arrival time of the first and last packet (ns, `CLOCK_MONOTONIC`).
    pub first_ns: u64,
    pub last_ns: u64,
    /// One-way delays in ns, in arrival order.
    pub delays_ns: Vec<u64>,
    /// Arrival times in ns, in arrival order (kept when asked for).
    pub arrivals_ns: Vec<u64>,
    /// Send time − scheduled send time in ns, in arrival order (kept with the arrival times,
    /// for datagrams that carry their schedule).
    pub lateness_ns: Vec<u64>,
}

impl UdpRecvReport {
    pub fn lost(&self) -> u64 {
        self.expected.saturating_sub(self.packets)
    }
    pub fn loss_rate(&self) -> f64 {
        if self.expected == 0 {
            0.0
        } else {
            self.lost() as f64 / self.expected as f64
        }
    }
    /// Rate between first and last arrival.
    pub fn rate(&self) -> Rate {
        if self.packets < 2 {
            return Rate::ZERO;
        }
        // n packets span n-1 gaps; count the bytes of the last n-1 packets.
        let per = self.bytes / self.packets;
        Bytes(self.bytes - per).per(Dur(self.last_ns - self.first_ns))
    }
}

/// Receives until `stop` is set or nothing arrives for `idle` after the first packet (or
/// `deadline_ns` passes). Set `keep_arrivals` to record every arrival time.
pub fn udp_receive(
    sock: &UdpSocket,
    counters: Option<&FlowCounters>,
    stop: &AtomicBool,
    idle: Duration,
    keep_arrivals: bool,
) -> Result<UdpRecvReport> {
    sys::set_socket_buffers(sock.as_raw_fd(), 8 << 20);
    sock.set_read_timeout(Some(Duration::from_millis(20)))?;
    let mut buf = vec![0u8; 65_536];
    let mut rep = UdpRecvReport::default();
    let mut last_seen = std::time::Instant::now();
    loop {
        match sock.recv(&mut buf) {
            Ok(n) if n >= UDP_HEADER => {
                let now = sys::now_ns();
                last_seen = std::time::Instant::now();
                let seq = u64::from_be_bytes(buf[0..8].try_into().unwrap_or_default());
                let sent = u64::from_be_bytes(buf[8..16].try_into().unwrap_or_default());
                if rep.packets == 0 {
                    rep.first_ns = now;
                }
                rep.last_ns = now;
                rep.packets += 1;
                rep.bytes += (n + IP_UDP_OVERHEAD) as u64;
                let before = rep.expected;
                rep.expected = rep.expected.max(seq + 1);
                rep.delays_ns.push(now.saturating_sub(sent));
                if keep_arrivals {
                    rep.arrivals_ns.push(now);
                    if n >= UDP_HEADER_WITH_DUE {
                        let due =
                            u64::from_be_bytes(buf[UDP_HEADER..UDP_HEADER_WITH_DUE].try_into().unwrap_or_default());
                        rep.lateness_ns.push(sent.saturating_sub(due));
                    }
                }
                if let Some(c) = counters {
                    c.packets.fetch_add(1, Ordering::Relaxed);
                    c.bytes.fetch_add((n + IP_UDP_OVERHEAD) as u64, Ordering::Relaxed);
                    if seq > before {
                        c.lost.fetch_add(seq - before, Ordering::Relaxed);
                    }
                }
            }
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(e).context("UDP receive"),
        }
        if stop.load(Ordering::Relaxed) || (rep.packets > 0 && last_seen.elapsed() >= idle) {
            break;
        }
    }
    Ok(rep)
}

/// Length of a [`udp_ping`] probe: its number, its send time and the echo's hold time, 8 bytes
/// each (big-endian), then padding.
const PING_LEN: usize = 32;

/// Echoes every datagram back to its sender until `stop` is set. A [`udp_ping`] probe goes back
/// with bytes 16..24 set to how long the echo held it: from the kernel's arrival stamp
/// (`SO_TIMESTAMPNS`) to just before the reply is sent, so the pinger can take the echo's own
/// scheduling out of the round trip (as TWAMP's reflector reports its receive and send times).
/// The hold is 0 when the kernel gave no arrival stamp.
pub fn udp_echo(sock: &UdpSocket, stop: &AtomicBool) -> Result<()> {
    sock.set_read_timeout(Some(Duration::from_millis(20)))?;
    timing::enable_rx_timestamps(sock).context("UDP echo: SO_TIMESTAMPNS")?;
    let mut buf = vec![0u8; 65_536];
    while !stop.load(Ordering::Relaxed) {
        match timing::recv_from_timestamped(sock, &mut buf) {
            Ok((n, Some(from), arrived, kernel)) => {
                if n == PING_LEN {
                    let hold = if kernel { timing::realtime_now().0.saturating_sub(arrived.0) } else { 0 };
                    buf[16..24].copy_from_slice(&hold.to_be_bytes());
                }
                let _ = sock.send_to(&buf[..n], from);
            }
            Ok((_, None, _, _)) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(e).context("UDP echo"),
        }
    }
    Ok(())
}

/// Sends `count` probes `interval` apart to a [`udp_echo`] and returns the round-trip times of
/// those that came back (lost probes are skipped), measured from the wall clock just before the
/// send to the kernel's arrival stamp of the reply, less the time the echo held the probe: the
/// path's round trip without either end's wake-up delays. Arrival stamping is held on for the
/// whole run ([`ArrivalTimestamps`]); a reply without a kernel stamp is timed when it is read.
pub fn udp_ping(sock: &UdpSocket, dst: SocketAddr, count: u32, interval: Duration) -> Result<Vec<Dur>> {
    sys::precise_timers();
    let _stamping = ArrivalTimestamps::on(Duration::from_secs(1)).context("ping: arrival timestamps")?;
    timing::enable_rx_timestamps(sock).context("ping: SO_TIMESTAMPNS")?;
    sock.set_read_timeout(Some(Duration::from_millis(5)))?;
    let mut rtts = Vec::new();
    let mut buf = [0u8; 64];
    let start = sys::now_ns();
    let mut next_send = start;
    let mut sent = 0u32;
    let give_up = start + count as u64 * interval.as_nanos() as u64 + 2_000_000_000;
    while sys::now_ns() < give_up && (sent < count || rtts.len() < count as usize) {
        let now = sys::now_ns();
        if sent < count && now >= next_send {
            let mut p = [0u8; PING_LEN];
            p[0..8].copy_from_slice(&(sent as u64).to_be_bytes());
            p[8..16].copy_from_slice(&timing::realtime_now().0.to_be_bytes());
            sock.send_to(&p, dst).context("ping send")?;
            sent += 1;
            next_send += interval.as_nanos() as u64;
        }
        match timing::recv_timestamped(sock, &mut buf) {
            Ok((n, arrived, _)) if n == PING_LEN => {
                let field = |r: std::ops::Range<usize>| u64::from_be_bytes(buf[r].try_into().unwrap_or_default());
                let (sent_at, hold) = (field(8..16), field(16..24));
                rtts.push(Dur(arrived.0.saturating_sub(sent_at).saturating_sub(hold)));
            }
            _ => {}
        }
        if sent == count && rtts.len() == count as usize {
            break;
        }
    }
    Ok(rtts)
}

/// A TCP listener on `port` whose connections never advertise more than about `max_window`
/// bytes (a TCP "maximum window" as the 1990s stacks set it with the socket buffer):
/// TCP_WINDOW_CLAMP and a receive buffer of `max_window` (the kernel doubles it for overhead),
/// both set before listen() so that they bound the first window too.
pub fn tcp_listen_max_window(port: u16, max_window: u32) -> Result<TcpListener> {
    use std::os::fd::FromRawFd;
    let w = i32::try_from(max_window).context("max window too large")?;
    // SAFETY: a fresh socket owned by the returned listener; plain socket calls on it.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error()).context("socket");
        }
        let l = TcpListener::from_raw_fd(fd);
        sys::setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
        sys::setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_WINDOW_CLAMP, w)?;
        if sys::setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, w).is_err() {
            sys::setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, w)?;
        }
        let mut a: libc::sockaddr_in = std::mem::zeroed();
        a.sin_family = libc::AF_INET as libc::sa_family_t;
        a.sin_port = port.to_be();
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if libc::bind(fd, (&a as *const libc::sockaddr_in).cast(), len) != 0 || libc::listen(fd, 16) != 0 {
            return Err(std::io::Error::last_os_error()).with_context(|| format!("listening on port {port}"));
        }
        Ok(l)
    }
}

/// Opens a TCP connection from the local address `src` (any port) to `dst`, giving up after
/// `timeout` (SO_SNDTIMEO bounds a blocking connect on Linux). For clients that must come from
/// one of several addresses of their host.
pub fn tcp_connect_from(src: std::net::Ipv4Addr, dst: std::net::SocketAddrV4, timeout: Duration) -> Result<TcpStream> {
    use std::os::fd::FromRawFd;
    let sin = |a: std::net::SocketAddrV4| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*a.ip()).to_be() },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: a fresh socket owned by the returned stream (closed by it on every error path);
    // bind and connect read a live sockaddr_in of the length passed.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error()).context("socket");
        }
        let s = TcpStream::from_raw_fd(fd);
        s.set_write_timeout(Some(timeout))?;
        let from = sin(std::net::SocketAddrV4::new(src, 0));
        if libc::bind(fd, (&from as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error()).with_context(|| format!("binding {src}"));
        }
        let to = sin(dst);
        if libc::connect(fd, (&to as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error()).with_context(|| format!("connecting {src} -> {dst}"));
        }
        s.set_write_timeout(None)?;
        Ok(s)
    }
}

/// Opens a TCP connection to `dst` with kernel congestion control `cc`.
pub fn tcp_connect(dst: SocketAddr, cc: &str) -> Result<TcpStream> {
    // std has no unconnected TcpStream, so TCP_CONGESTION is set right after the handshake,
    // before any data: Linux then re-initialises the new algorithm's state for this socket.
    let s = TcpStream::connect_timeout(&dst, Duration::from_secs(3)).with_context(|| format!("connecting to {dst}"))?;
    sys::set_tcp_congestion(s.as_raw_fd(), cc)?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Writes as fast as TCP allows for `duration` (or until `stop`); returns bytes written. An
/// error once `stop` is raised ends the send normally: whoever raised it may close the receiving
/// end at once (proxy-fig3 shuts its sinks down then), and a write blocked at that moment gets
/// the reset (session 8: `proxy-fig3` failed with "TCP bulk send: Broken pipe" at a lossy point).
pub fn tcp_bulk_send(
    s: &TcpStream,
    duration: Dur,
    counters: Option<&FlowCounters>,
    stop: Option<&AtomicBool>,
) -> Result<u64> {
    let buf = vec![0x5au8; 128 * 1024];
    let end = sys::now_ns() + duration.0;
    s.set_write_timeout(Some(Duration::from_millis(50)))?;
    let mut w = s;
    let mut total = 0u64;
    while sys::now_ns() < end && !stop.is_some_and(|x| x.load(Ordering::Relaxed)) {
        match w.write(&buf) {
            Ok(n) => {
                total += n as u64;
                if let Some(c) = counters {
                    c.bytes.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) if stop.is_some_and(|x| x.load(Ordering::Relaxed)) => return Ok(total),
            Err(e) => return Err(e).context("TCP bulk send"),
        }
    }
    let _ = s.shutdown(std::net::Shutdown::Write);
    Ok(total)
}

/// Reads one connection to its end, counting bytes (goodput); returns the total.
pub fn tcp_sink(mut s: TcpStream, counters: Option<&FlowCounters>) -> Result<u64> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => {
                total += n as u64;
                if let Some(c) = counters {
                    c.bytes.fetch_add(n as u64, Ordering::Relaxed);
                    c.packets.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(total),
            Err(e) => return Err(e).context("TCP sink"),
        }
    }
}

/// Web server: every request is an 8-byte big-endian object size; the reply is that many bytes.
/// Serves connections until `stop`.
pub fn web_serve(listener: TcpListener, stop: Arc<AtomicBool>) -> Result<()> {
    listener.set_nonblocking(true)?;
    let mut workers = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                s.set_nodelay(true)?;
                workers.push(std::thread::spawn(move || {
                    let _ = serve_objects(s);
                }));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(e).context("web accept"),
        }
    }
    Ok(())
}

fn serve_objects(mut s: TcpStream) -> Result<()> {
    let body = vec![0x61u8; 64 * 1024];
    let mut req = [0u8; 8];
    while s.read_exact(&mut req).is_ok() {
        let mut left = u64::from_be_bytes(req);
        while left > 0 {
            let n = left.min(body.len() as u64) as usize;
            s.write_all(&body[..n])?;
            left -= n as u64;
        }
    }
    Ok(())
}

/// A web-like client's settings: pages of `objects` objects with Pareto sizes ([`Rng::pareto`]
/// with `object_shape` and `object_mean`, rounded to bytes and held to `1..=`[`MAX_OBJECT`]),
/// fetched in turn over one persistent connection, separated by exponential think times with
/// mean `think` ([`Rng::exponential`]).
#[derive(Clone, Debug)]
pub struct WebClient {
    pub server: SocketAddr,
    pub objects: u32,
    pub object_mean: Bytes,
    pub object_shape: f64,
    pub think: Dur,
    pub duration: Dur,
    pub seed: u64,
}

/// One page download.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PageTime {
    /// When the page finished (ns, `CLOCK_MONOTONIC`).
    pub done_ns: u64,
    pub time: Dur,
    pub bytes: u64,
}

/// Largest object (Pareto samples are capped here so one page cannot outlast a run).
pub const MAX_OBJECT: u64 = 20_000_000;

/// Runs the client until `duration` (the page in progress then finishes); returns page times.
pub fn web_client(
    c: &WebClient,
    counters: Option<&FlowCounters>,
    on_page: &mut dyn FnMut(PageTime),
) -> Result<Vec<PageTime>> {
    let mut s = TcpStream::connect_timeout(&c.server, Duration::from_secs(3))
        .with_context(|| format!("connecting to {}", c.server))?;
    s.set_nodelay(true)?;
    let mut rng = Rng::new(c.seed);
    let end = sys::now_ns() + c.duration.0;
    let mut pages = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while sys::now_ns() < end {
        let t0 = sys::now_ns();
        let mut page_bytes = 0;
        for _ in 0..c.objects {
            let size = (rng.pareto(c.object_shape, c.object_mean.0 as f64).round() as u64).clamp(1, MAX_OBJECT);
            s.write_all(&size.to_be_bytes())?;
            let mut left = size;
            while left > 0 {
                let n = s.read(&mut buf[..left.min(65_536) as usize])?;
                if n == 0 {
                    bail!("web server closed the connection");
                }
                left -= n as u64;
                if let Some(k) = counters {
                    k.bytes.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
            page_bytes += size;
        }
        let done = sys::now_ns();
        let p = PageTime { done_ns: done, time: Dur(done - t0), bytes: page_bytes };
        if let Some(k) = counters {
            k.packets.fetch_add(1, Ordering::Relaxed);
        }
        on_page(p);
        pages.push(p);
        let think = rng.exponential(c.think.0 as f64);
        let wake = (done + think as u64).min(end);
        let now = sys::now_ns();
        if wake > now {
            std::thread::sleep(Duration::from_nanos(wake - now));
        }
    }
    Ok(pages)
}

/// Poisson UDP cross traffic between two testbed hosts, running on their threads until
/// [`PoissonCross::stop`]: a receiver on `to` that drains `port`, and a generator on `from`
/// sending `size`-byte datagrams at `rate` (real-time priority). The benchmarks' cross traffic.
pub struct PoissonCross {
    stop: Arc<AtomicBool>,
    receiver: Option<std::thread::JoinHandle<Result<UdpRecvReport>>>,
    sender: Option<std::thread::JoinHandle<Result<UdpSendReport>>>,
}

impl PoissonCross {
    /// Starts it; a zero `rate` starts nothing (and [`PoissonCross::stop`] has nothing to stop).
    pub fn start(
        tb: &crate::Testbed,
        (from, to): (&str, &str),
        port: u16,
        rate: Rate,
        size: usize,
        (seed, flow_id): (u64, u32),
    ) -> Result<PoissonCross> {
        let mut cross = PoissonCross { stop: Arc::new(AtomicBool::new(false)), receiver: None, sender: None };
        if rate == Rate::ZERO {
            return Ok(cross);
        }
        let dst = SocketAddr::new(tb.host(to)?.addr.into(), port);
        let rx_sock = tb.run_in(to, move || Ok(UdpSocket::bind(("0.0.0.0", port))?))?;
        let st = cross.stop.clone();
        cross.receiver =
            Some(tb.spawn_in(to, move || udp_receive(&rx_sock, None, &st, Duration::from_secs(3600), false))?);
        let st = cross.stop.clone();
        let gen = UdpGen {
            dst,
            rate,
            size,
            pattern: Pattern::Poisson,
            duration: Dur::from_secs(3600),
            seed,
            flow_id,
            realtime: true,
        };
        cross.sender = Some(tb.spawn_in(from, move || {
            let sock = UdpSocket::bind(("0.0.0.0", 0))?;
            udp_send(&sock, &gen, None, Some(&st))
        })?);
        Ok(cross)
    }

    /// Stops both threads and reports the first error either had.
    pub fn stop(self) -> Result<()> {
        self.finish().map(|_| ())
    }

    /// Stops both threads: what the generator sent (IP packets and bytes) and what the receiver
    /// got, or the first error either had. Zeros when nothing ran.
    pub fn finish(self) -> Result<(UdpSendReport, UdpRecvReport)> {
        self.stop.store(true, Ordering::SeqCst);
        let sent = match self.sender.map(|t| t.join()) {
            None => UdpSendReport::default(),
            Some(Ok(r)) => r.context("cross traffic")?,
            Some(Err(_)) => bail!("a cross-traffic thread panicked"),
        };
        let got = match self.receiver.map(|t| t.join()) {
            None => UdpRecvReport::default(),
            Some(Ok(r)) => r.context("cross traffic")?,
            Some(Err(_)) => bail!("a cross-traffic thread panicked"),
        };
        Ok((sent, got))
    }
}

/// Where a benchmark's Poisson cross traffic comes from (`headroom probe-bench
/// --cross-source`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CrossSource {
    /// A UDP generator between two testbed hosts ([`PoissonCross`]): real packets through the
    /// kernels, the TUN devices and the delay box, as many as the machine can send.
    #[default]
    Generator,
    /// The delay box's virtual source in the forward link ([`crate::delaybox`], "In-link cross
    /// traffic"): no packets on the wire, any rate below the link's.
    InLink,
}

impl CrossSource {
    pub fn name(self) -> &'static str {
        match self {
            CrossSource::Generator => "generator",
            CrossSource::InLink => "in-link",
        }
    }
}

impl std::fmt::Display for CrossSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for CrossSource {
    type Err = String;
    fn from_str(s: &str) -> Result<CrossSource, String> {
        match s {
            "generator" => Ok(CrossSource::Generator),
            "in-link" => Ok(CrossSource::InLink),
            _ => Err(format!("`{s}`: the cross-traffic source is `generator` or `in-link`")),
        }
    }
}

/// What cross traffic did between its start and its stop: the rate offered to the bottleneck
/// (the generator's sends; the virtual packets that arrived at the link) and the rate that
/// came through (the receiver's; the virtual packets the link serialised), in IP bits over the
/// wall-clock time it ran.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CrossReport {
    pub source: CrossSource,
    /// The configured mean rate.
    pub rate: Rate,
    pub elapsed: Dur,
    pub offered: Rate,
    pub carried: Rate,
    /// Packets offered and packets that did not come through.
    pub offered_packets: u64,
    pub lost_packets: u64,
    /// The generator's send lateness ([`UdpSendReport`]): mean, largest, and the share of its
    /// packets sent more than [`LATE_SEND`] late; `None` for the in-link source, whose virtual
    /// arrivals are never late, and for no cross traffic.
    pub generator_lateness: Option<GeneratorLateness>,
}

/// See [`CrossReport::generator_lateness`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GeneratorLateness {
    pub mean: Dur,
    pub max: Dur,
    pub late_share: f64,
}

enum Running<'a> {
    Generator(PoissonCross),
    InLink { tb: &'a crate::Testbed, before: Box<crate::CounterSnapshot> },
}

/// Poisson cross traffic of either [`CrossSource`] from `from` to `to` across the bottleneck
/// (in-link: in the forward link, the left-to-right direction), running until
/// [`CrossTraffic::stop`].
pub struct CrossTraffic<'a> {
    source: CrossSource,
    rate: Rate,
    size: usize,
    started: std::time::Instant,
    running: Running<'a>,
}

impl<'a> CrossTraffic<'a> {
    /// Starts `rate` of `size`-byte packets (nothing for a zero rate); `seed` draws the gaps,
    /// `flow_id` marks the generator's datagrams.
    pub fn start(
        tb: &'a crate::Testbed,
        source: CrossSource,
        hosts: (&str, &str),
        port: u16,
        rate: Rate,
        size: usize,
        (seed, flow_id): (u64, u32),
    ) -> Result<CrossTraffic<'a>> {
        let running = match source {
            CrossSource::Generator => {
                Running::Generator(PoissonCross::start(tb, hosts, port, rate, size, (seed, flow_id))?)
            }
            CrossSource::InLink => {
                let cross = (rate > Rate::ZERO).then_some(crate::InLinkCross {
                    rate,
                    packet: Bytes(size as u64),
                    seed: Some(seed),
                });
                tb.set_link_cross(crate::Direction::Forward, cross)?;
                Running::InLink { tb, before: Box::new(tb.delaybox_counters().0) }
            }
        };
        Ok(CrossTraffic { source, rate, size, started: std::time::Instant::now(), running })
    }

    /// Stops it (in-link: the link carries no cross traffic afterwards) and reports what it did.
    pub fn stop(self) -> Result<CrossReport> {
        let mut generator_lateness = None;
        let (offered_packets, offered_bytes, carried_packets, carried_bytes) = match self.running {
            Running::Generator(g) => {
                let (sent, got) = g.finish()?;
                generator_lateness = (sent.packets > 0).then(|| GeneratorLateness {
                    mean: sent.mean_lateness(),
                    max: Dur(sent.lateness_max_ns),
                    late_share: sent.late_sends as f64 / sent.packets as f64,
                });
                (sent.packets, sent.bytes, got.packets, got.bytes)
            }
            Running::InLink { tb, before } => {
                tb.set_link_cross(crate::Direction::Forward, None)?;
                let x = tb.delaybox_counters().0.since(&before);
                (
                    x.cross_sent + x.cross_drops,
                    x.cross_bytes + x.cross_drops * self.size as u64,
                    x.cross_sent,
                    x.cross_bytes,
                )
            }
        };
        let elapsed = Dur(self.started.elapsed().as_nanos() as u64);
        Ok(CrossReport {
            source: self.source,
            rate: self.rate,
            elapsed,
            offered: Bytes(offered_bytes).per(elapsed),
            carried: Bytes(carried_bytes).per(elapsed),
            offered_packets,
            lost_packets: offered_packets.saturating_sub(carried_packets),
            generator_lateness,
        })
    }
}

#[cfg(test)]
mod bulk_send_tests {
    use super::*;

    /// The receiver resets the connection right after the stop is raised, while the sender is
    /// blocked in a write (the receiver never reads, so the socket buffers are full): the send
    /// ends normally. An error without the stop is still an error.
    #[test]
    fn a_reset_after_the_stop_ends_the_send_normally_and_before_it_is_an_error() {
        for stop_first in [true, false] {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let dst = l.local_addr().unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let st = stop.clone();
            let sender = std::thread::spawn(move || {
                let s = TcpStream::connect(dst)?;
                tcp_bulk_send(&s, Dur::from_secs(30), None, Some(&st))
            });
            let (peer, _) = l.accept().unwrap();
            // Let the buffers fill so that the sender waits in write().
            std::thread::sleep(Duration::from_millis(300));
            if stop_first {
                stop.store(true, Ordering::Relaxed);
            }
            let lg = libc::linger { l_onoff: 1, l_linger: 0 };
            // SAFETY: setsockopt on an open socket with a valid linger struct and its size.
            unsafe {
                libc::setsockopt(
                    peer.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    (&lg as *const libc::linger).cast(),
                    std::mem::size_of::<libc::linger>() as libc::socklen_t,
                );
            }
            drop(peer); // with SO_LINGER 0: a RST
            let r = sender.join().unwrap();
            if stop_first {
                assert!(r.is_ok(), "{r:?}");
            } else {
                assert!(r.is_err(), "a reset without a stop is an error: {r:?}");
            }
        }
    }
}

#[cfg(test)]
mod lateness_tests {
    use super::*;

    /// The generator's lateness report adds up what its datagrams carry: each one's send stamp
    /// minus its scheduled time, as a receiver reads them (loopback, 20 ms of 20 Mbit/s Poisson
    /// traffic; no bound on the lateness itself, which is the machine's).
    #[test]
    fn the_send_lateness_is_what_the_datagrams_carry() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let dst = rx.local_addr().unwrap();
        // The receiver ends 200 ms after the last datagram, having read them all.
        let receiver = std::thread::spawn(move || {
            udp_receive(&rx, None, &AtomicBool::new(false), Duration::from_millis(200), true)
        });
        let g = UdpGen {
            dst,
            rate: Rate::from_mbps(20),
            size: 1000,
            pattern: Pattern::Poisson,
            duration: Dur::from_millis(20),
            seed: 7,
            flow_id: 1,
            realtime: false,
        };
        let sent = udp_send(&UdpSocket::bind("127.0.0.1:0").unwrap(), &g, None, None).unwrap();
        let got = receiver.join().unwrap().unwrap();
        assert!(sent.packets > 20, "{sent:?}");
        assert_eq!(got.packets, sent.packets, "loopback keeps every datagram");
        assert_eq!(got.lateness_ns.iter().sum::<u64>(), sent.lateness_sum_ns);
        assert_eq!(got.lateness_ns.iter().max().copied().unwrap_or(0), sent.lateness_max_ns);
        assert_eq!(got.lateness_ns.iter().filter(|&&l| l > LATE_SEND.0).count() as u64, sent.late_sends);
        assert_eq!(sent.mean_lateness(), Dur(sent.lateness_sum_ns / sent.packets));
    }
}
