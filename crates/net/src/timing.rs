//! Sender pacing and receiver timestamps.
//!
//! - **Sending on time**: [`Pacer::wait_until`] sleeps coarsely until a margin before the
//!   deadline, then busy-waits on the monotonic clock (`Instant`, `CLOCK_MONOTONIC` on Linux).
//!   The margin follows the timer's wake-up latency as this thread sees it ([`Pacer`]). The
//!   achieved error of every packet is recorded in [`SpacingStats`] and reported.
//! - **Receiving**: [`enable_rx_timestamps`] turns on `SO_TIMESTAMPNS`, and
//!   [`recv_timestamped`] reads a datagram with `recvmsg(2)` and returns the kernel's receive
//!   time (`CLOCK_REALTIME`, nanoseconds), so the receiver's scheduling delays do not enter the
//!   delay signature. Without a kernel timestamp the user-space clock is used and reported.

use headroom_core::units::{Dur, Time};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The shortest stretch before a deadline that is busy-waited rather than slept.
pub const SPIN_MARGIN: Duration = Duration::from_micros(200);

/// The longest: a wake-up later than this is not waited out by spinning (at 1 Mbit/s with
/// 1,500-byte packets the pacer then spins a sixth of each 12 ms gap).
pub const MAX_SPIN_MARGIN: Duration = Duration::from_millis(2);

/// What the margin keeps above the latest oversleep.
pub const SPIN_SLACK: Duration = Duration::from_micros(50);

/// Packets sent later than this after their deadline count as late.
pub const LATE_THRESHOLD: Duration = Duration::from_micros(50);

/// Sends on time: sleeps until [`Pacer::margin`] before a deadline, then spins.
///
/// The margin adapts to the timer's wake-up latency: after every sleep it becomes at least the
/// oversleep just seen plus [`SPIN_SLACK`] (at once), and otherwise decays by 1 % per sleep
/// towards [`SPIN_MARGIN`], within [`MAX_SPIN_MARGIN`]. A fixed 200 µs margin was not enough on
/// a shared VM: there, 2,000 sleeps of 800 µs at SCHED_FIFO overslept by a median 55 µs, a
/// 99th percentile of 118 µs and a 99.9th of 723 µs, and `probe-bench --pacing-grid` found
/// 7 of 15 trains at 1 Mbit/s and 6 of 15 at 10 Mbit/s badly paced (worst packets 2–3.4 ms
/// late; docs/results.md, issue 19 session 10). One late wake-up raises the margin for the
/// next ~150 sleeps, the rest of a train at least, at the cost of spinning that much longer
/// per packet.
#[derive(Clone, Debug)]
pub struct Pacer {
    margin: Duration,
    floor: Duration,
    cap: Duration,
}

impl Default for Pacer {
    fn default() -> Self {
        Pacer::with_floor(SPIN_MARGIN)
    }
}

impl Pacer {
    /// A pacer whose margin never drops below `floor` (the testbed's traffic generator spins
    /// only the last 20 µs of a real-time thread's wait while wake-ups are prompt).
    pub fn with_floor(floor: Duration) -> Pacer {
        let floor = floor.min(MAX_SPIN_MARGIN);
        Pacer { margin: floor, floor, cap: MAX_SPIN_MARGIN }
    }

    /// The margin at most `cap` (at least the floor). A real-time thread that spins through
    /// nearly all of its time is throttled by the kernel (`sched_rt_runtime_us`: 950 ms of every
    /// second): the testbed's Poisson generator at 100 Mbit/s (80 µs mean gap) stalled for
    /// 30–36 ms at a time with the 2 ms cap. With the cap at the mean gap `g` of exponential
    /// gaps it spins `1 − 1/e` = 63 % of its time at most, and its stalls were 4.5–17.7 ms as
    /// before (4 runs of the testbed test `poisson_generator_rate_is_within_2_percent`).
    pub fn with_cap(mut self, cap: Duration) -> Pacer {
        self.cap = cap.clamp(self.floor, MAX_SPIN_MARGIN);
        self.margin = self.margin.min(self.cap);
        self
    }

    /// The stretch before a deadline that is spun now.
    pub fn margin(&self) -> Duration {
        self.margin
    }

    /// Sleeps, then spins, until `deadline`; returns the instant it returned.
    pub fn wait_until(&mut self, deadline: Instant) -> Instant {
        loop {
            let now = Instant::now();
            if now >= deadline {
                return now;
            }
            self.toward(deadline - now);
        }
    }

    /// Sleeps, then spins, until `left` says no time is left (`None`): the same wait on a
    /// clock of the caller's (the testbed's `CLOCK_MONOTONIC` nanoseconds).
    pub fn wait(&mut self, mut left: impl FnMut() -> Option<Duration>) {
        while let Some(l) = left() {
            self.toward(l);
        }
    }

    /// One step of a wait with `left` to go: a sleep up to the margin, or a spin.
    fn toward(&mut self, left: Duration) {
        if left > self.margin {
            self.sleep(left - self.margin);
        } else {
            std::hint::spin_loop();
        }
    }

    /// Sleeps about `d` (the caller's own coarse waits) and learns from the wake-up.
    pub fn sleep(&mut self, d: Duration) {
        let asleep = Instant::now();
        std::thread::sleep(d);
        self.woke(asleep.elapsed().saturating_sub(d));
    }

    /// A sleep overslept by `late`.
    pub fn woke(&mut self, late: Duration) {
        let decayed = self.margin.mul_f64(0.99);
        self.margin = (late + SPIN_SLACK).max(decayed).clamp(self.floor, self.cap);
    }
}

/// Asks the kernel to wake this thread from sleeps within 1 µs of the requested time (the
/// default timer slack is 50 µs). Best effort: failure only costs precision.
pub fn reduce_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and affects only this thread.
    unsafe {
        libc::prctl(
            libc::PR_SET_TIMERSLACK,
            1000 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        );
    }
}

/// Achieved send-time error of a train.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpacingStats {
    pub packets: u32,
    pub sum_abs_error_ns: u64,
    pub max_error_ns: u64,
    /// Packets more than [`LATE_THRESHOLD`] late.
    pub late: u32,
}

impl SpacingStats {
    /// Records one packet sent at `actual` for `deadline`.
    pub fn record(&mut self, deadline: Instant, actual: Instant) {
        let err = if actual >= deadline { actual - deadline } else { deadline - actual };
        let ns = err.as_nanos().min(u64::MAX as u128) as u64;
        self.packets += 1;
        self.sum_abs_error_ns += ns;
        self.max_error_ns = self.max_error_ns.max(ns);
        if actual > deadline + LATE_THRESHOLD {
            self.late += 1;
        }
    }

    pub fn mean_error(&self) -> Dur {
        if self.packets == 0 {
            Dur::ZERO
        } else {
            Dur(self.sum_abs_error_ns / self.packets as u64)
        }
    }
}

/// Turns on kernel receive timestamps (`SO_TIMESTAMPNS`) for `sock`.
pub fn enable_rx_timestamps(sock: &UdpSocket) -> io::Result<()> {
    set_int_option(sock, libc::SO_TIMESTAMPNS, 1)
}

/// The receive buffer a probe client asks for: room for the longest train the server sends
/// (a 563-packet, 1,500-byte fine train is 845 KB of payload; the kernel also charges each
/// packet's buffer overhead) with a margin.
///
/// The default (`net.core.rmem_default`, 212,992 B here) holds a few dozen 1,500-byte packets.
/// A 500 Mbit/s train outruns the client's receiving thread while the pacer and the bottleneck
/// compete for the same cores, and the kernel drops what does not fit (`Udp: RcvbufErrors`):
/// on the testbed at 500 Mbit/s, 100 of the probe packets lost at idle and 21 at 300 Mbit/s of
/// cross traffic were exactly that counter's rise (docs/results.md, issue 19 session 9).
pub const PROBE_RECEIVE_BUFFER: usize = 4 << 20;

/// Asks for a receive buffer of `bytes` on `sock`: `SO_RCVBUFFORCE` (with `CAP_NET_ADMIN`,
/// beyond `net.core.rmem_max`), else `SO_RCVBUF` (which the kernel caps at `rmem_max`). Returns
/// the size the kernel reports afterwards (twice the usable size: it counts its bookkeeping).
pub fn request_receive_buffer(sock: &UdpSocket, bytes: usize) -> io::Result<usize> {
    let want = bytes.min(libc::c_int::MAX as usize) as libc::c_int;
    if set_int_option(sock, libc::SO_RCVBUFFORCE, want).is_err() {
        set_int_option(sock, libc::SO_RCVBUF, want)?;
    }
    receive_buffer(sock)
}

/// The receive buffer the kernel reports for `sock` (`SO_RCVBUF`: twice the usable size).
pub fn receive_buffer(sock: &UdpSocket) -> io::Result<usize> {
    let mut got: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt with a valid fd, a pointer to a live c_int and its size.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &mut got as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    if rc == 0 {
        Ok(got.max(0) as usize)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `setsockopt(SOL_SOCKET, option, value)` for an integer option.
fn set_int_option(sock: &UdpSocket, option: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: setsockopt with a valid fd, a pointer to a live c_int and its exact size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            option,
            &value as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Switches the calling thread (and the threads it starts later) to SCHED_FIFO `priority`; an
/// error where the system does not permit it (it needs root, `CAP_SYS_NICE` or an
/// `RLIMIT_RTPRIO` of at least `priority`).
pub fn try_realtime(priority: i32) -> io::Result<()> {
    let p = libc::sched_param { sched_priority: priority };
    // SAFETY: `p` is a valid sched_param; pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The wall clock now, as the same kind of [`Time`] as kernel timestamps.
pub fn realtime_now() -> Time {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    Time(d.as_nanos().min(u64::MAX as u128) as u64)
}

/// Receives one datagram on a (connected) socket. Returns its length and the kernel receive
/// timestamp, or the user-space wall clock with `false` when the kernel gave none. Honours the
/// socket's read timeout (`WouldBlock`/`TimedOut` errors).
pub fn recv_timestamped(sock: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, Time, bool)> {
    recv_from_timestamped(sock, buf).map(|(n, _, t, kernel)| (n, t, kernel))
}

/// [`recv_timestamped`] on any socket: also the sender's address (`None` for a family other than
/// IPv4 and IPv6).
pub fn recv_from_timestamped(sock: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, Option<SocketAddr>, Time, bool)> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr() as *mut libc::c_void, iov_len: buf.len() };
    // u64 alignment is enough for cmsghdr + timespec.
    let mut control = [0u64; 16];
    // SAFETY: sockaddr_storage and msghdr are plain data; zeroed is a valid initial value.
    let mut from: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = &mut from as *mut libc::sockaddr_storage as *mut libc::c_void;
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: the fd is valid; msg points to `from`, to one iovec over `buf` and to `control`,
    // all live and writable for the sizes given.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: CMSG_* walk the control buffer the kernel filled, bounded by msg_controllen; the
    // timespec is read unaligned from the cmsg data.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                stamp = Some(Time(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    let from = match from.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the kernel wrote a sockaddr_in (family AF_INET) into the storage, which is
            // large and aligned enough for it.
            let a = unsafe { *(&from as *const libc::sockaddr_storage as *const libc::sockaddr_in) };
            Some(SocketAddr::from((u32::from_be(a.sin_addr.s_addr).to_be_bytes(), u16::from_be(a.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, a sockaddr_in6 (family AF_INET6).
            let a = unsafe { *(&from as *const libc::sockaddr_storage as *const libc::sockaddr_in6) };
            let ip = std::net::Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some(SocketAddr::V6(std::net::SocketAddrV6::new(
                ip,
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    };
    Ok(match stamp {
        Some(t) => (n as usize, from, t, true),
        None => (n as usize, from, realtime_now(), false),
    })
}

/// Keeps the kernel's arrival timestamps switched on while it lives, and made sure they are.
///
/// `SO_TIMESTAMPNS` on the machine's first such socket switches arrival stamping on through a
/// static key the kernel flips later, from a work queue (`net_enable_timestamp` with jump
/// labels), and off again, as late, when the last such socket closes. Until the key is flipped a
/// datagram gets no stamp on arrival, and `recvmsg` stamps it when it is *read*: a user-space
/// time that still arrives as a kernel timestamp. `headroom testbed bench-link` met it on the
/// loaded 2-core machine: the first 118 packets of a 500 Mbit/s flood stamped 2 µs apart (the
/// receiver's read loop), 45 ms after the rest (docs/results.md, issue 19's audit, session 8).
pub struct ArrivalTimestamps {
    _sock: UdpSocket,
}

impl ArrivalTimestamps {
    /// Switches arrival stamping on and waits, at most `timeout`, until a datagram sent to
    /// itself on loopback is stamped before it is read.
    pub fn on(timeout: Duration) -> io::Result<ArrivalTimestamps> {
        let sock = UdpSocket::bind("127.0.0.1:0")?;
        enable_rx_timestamps(&sock)?;
        sock.connect(sock.local_addr()?)?;
        sock.set_read_timeout(Some(Duration::from_millis(200)))?;
        let deadline = Instant::now() + timeout;
        let mut buf = [0u8; 8];
        loop {
            sock.send(&[0])?;
            // arrival (loopback: within the send call) and the read 1 ms apart
            std::thread::sleep(Duration::from_millis(1));
            let before_read = realtime_now();
            let (_, stamp, kernel) = recv_timestamped(&sock, &mut buf)?;
            if kernel && stamp < before_read {
                return Ok(ArrivalTimestamps { _sock: sock });
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the kernel did not stamp datagrams on arrival within {timeout:?}"),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrival_timestamps_are_taken_on_arrival_not_when_read() {
        let _on = ArrivalTimestamps::on(Duration::from_secs(5)).expect("arrival stamps");
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_rx_timestamps(&rx).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let sent = realtime_now();
        tx.send_to(b"x", rx.local_addr().unwrap()).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let before_read = realtime_now();
        let mut buf = [0u8; 8];
        let (_, t, kernel) = recv_timestamped(&rx, &mut buf).unwrap();
        assert!(kernel);
        assert!(t >= sent && t < before_read, "stamped {t}, sent {sent}, read from {before_read}");
    }

    #[test]
    fn pacing_error_is_small_and_measured() {
        reduce_timer_slack();
        // On a shared 2-core machine a round can be preempted throughout (one round under a
        // load of 10 had a 1.25 ms median): the smallest median of three rounds is judged.
        let mut medians = Vec::new();
        let mut pacer = Pacer::default();
        for _ in 0..3 {
            let start = Instant::now();
            let mut stats = SpacingStats::default();
            let mut errors = Vec::new();
            for i in 1..=50u32 {
                let deadline = start + Duration::from_micros(300 * i as u64);
                let actual = pacer.wait_until(deadline);
                assert!(actual >= deadline);
                stats.record(deadline, actual);
                errors.push((actual - deadline).as_nanos() as u64);
            }
            assert_eq!(stats.packets, 50);
            assert_eq!(stats.max_error_ns, *errors.iter().max().unwrap());
            assert_eq!(stats.sum_abs_error_ns, errors.iter().sum::<u64>());
            errors.sort();
            medians.push(errors[25]);
        }
        let best = *medians.iter().min().unwrap();
        assert!(best < 50_000, "median errors {medians:?} ns");
    }

    #[test]
    fn the_spin_margin_rises_with_a_late_wake_up_at_once_and_decays_slowly() {
        let mut p = Pacer::default();
        assert_eq!(p.margin(), SPIN_MARGIN);
        p.woke(Duration::from_micros(10));
        assert_eq!(p.margin(), SPIN_MARGIN, "a prompt wake-up keeps the least margin");
        p.woke(Duration::from_micros(700));
        assert_eq!(p.margin(), Duration::from_micros(750));
        p.woke(Duration::from_micros(5));
        assert_eq!(p.margin(), Duration::from_micros(750).mul_f64(0.99));
        for _ in 0..100 {
            p.woke(Duration::ZERO);
        }
        let m = p.margin().as_secs_f64() * 1e6;
        assert!((270.0..=300.0).contains(&m), "{m} µs after 100 prompt wake-ups");
        for _ in 0..200 {
            p.woke(Duration::ZERO);
        }
        assert_eq!(p.margin(), SPIN_MARGIN);
        p.woke(Duration::from_millis(30));
        assert_eq!(p.margin(), MAX_SPIN_MARGIN, "never more than the cap");
        // A lower floor: prompt wake-ups bring it down there.
        let mut p = Pacer::with_floor(Duration::from_micros(20));
        assert_eq!(p.margin(), Duration::from_micros(20));
        p.woke(Duration::from_micros(100));
        assert_eq!(p.margin(), Duration::from_micros(150));
        for _ in 0..300 {
            p.woke(Duration::ZERO);
        }
        assert_eq!(p.margin(), Duration::from_micros(50), "the slack above a prompt wake-up");
        // The caller's clock: a wait that is over at once, and one of 300 µs.
        p.wait(|| None);
        let t = Instant::now();
        let due = t + Duration::from_micros(300);
        p.wait(|| due.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()));
        assert!(t.elapsed() >= Duration::from_micros(300));
    }

    #[test]
    fn kernel_timestamps_on_loopback() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.connect(tx.local_addr().unwrap()).unwrap();
        enable_rx_timestamps(&rx).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let before = realtime_now();
        tx.send_to(b"hello", rx.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 64];
        let (n, t, kernel) = recv_timestamped(&rx, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello");
        assert!(kernel, "no SO_TIMESTAMPNS control message");
        assert!(t >= before && t <= realtime_now(), "{t} not within the call");
    }
}
