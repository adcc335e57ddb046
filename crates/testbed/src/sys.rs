//! The few Linux system calls the testbed needs that `std` does not offer.
//!
//! Every `unsafe` block of the crate lives here. Each one is a plain FFI call whose arguments are
//! owned, correctly sized values on the caller's stack; the safety comment of each says which
//! invariant the call relies on. Nothing here keeps raw pointers past the call.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};

use anyhow::{bail, Context, Result};

/// `CLOCK_MONOTONIC` in nanoseconds. All network namespaces of one machine share this clock, so
/// a timestamp written into a packet by a sender in one namespace can be compared with the
/// clock of a receiver in another: one-way delays are exact.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Moves the calling thread into the network namespace whose bind mount is at `path`
/// (`/run/netns/<name>`). Only this thread changes namespace; sockets it creates afterwards
/// belong to the new namespace and stay there when used from other threads.
pub fn enter_netns(path: &str) -> Result<()> {
    let f = File::open(path).with_context(|| format!("opening network namespace {path}"))?;
    // SAFETY: `f` is an open namespace file descriptor that outlives the call.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if r != 0 {
        return Err(io::Error::last_os_error()).with_context(|| format!("setns into {path}"));
    }
    Ok(())
}

/// Sets this thread's timer slack to 1 ns so that sleeps and poll timeouts end when asked, not up
/// to 50 µs later (the default slack of normal threads).
pub fn precise_timers() {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long by value and touches no memory.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// Gives the calling thread real-time priority `prio` (`SCHED_FIFO`), so that compilers and
/// other busy processes on a small machine do not delay its wake-ups. Returns whether it worked
/// (it needs root or CAP_SYS_NICE). The kernel's RT throttling (95% of each second by default)
/// still bounds what such a thread can take.
pub fn set_realtime(prio: i32) -> bool {
    try_set_realtime(prio).is_ok()
}

/// [`set_realtime`] with the system's reason when refused (`EPERM` without root, CAP_SYS_NICE
/// or a large enough `ulimit -r`): [`headroom_net::timing::try_realtime`].
pub fn try_set_realtime(prio: i32) -> io::Result<()> {
    headroom_net::timing::try_realtime(prio)
}

/// Returns the calling thread to normal scheduling (`SCHED_OTHER`).
pub fn set_normal_scheduling() {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: `p` is a valid sched_param; pid 0 is the calling thread.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &p) };
}

/// Opens a layer-3 TUN device named `name` (`IFF_TUN | IFF_NO_PI`, non-blocking) in the calling
/// thread's network namespace. The device lives as long as the returned descriptor: it is not
/// persistent, so a killed process leaves no TUN device behind.
pub fn open_tun(name: &str) -> Result<OwnedFd> {
    if name.len() >= libc::IFNAMSIZ {
        bail!("TUN device name `{name}` is longer than {} bytes", libc::IFNAMSIZ - 1);
    }
    let path = CString::new("/dev/net/tun").expect("static path has no NUL");
    // SAFETY: `path` is a valid NUL-terminated string.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error()).context("opening /dev/net/tun (is the tun module available?)");
    }
    // SAFETY: `fd` was just returned by open() and is owned by nobody else.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    ifr.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one `struct ifreq`, which `ifr` is.
    let r = unsafe { libc::ioctl(owned.as_raw_fd(), libc::TUNSETIFF as _, &mut ifr) };
    if r < 0 {
        return Err(io::Error::last_os_error()).with_context(|| format!("TUNSETIFF {name}"));
    }
    Ok(owned)
}

/// Waits until `fd` is readable or `timeout_ns` passes (nanosecond-resolution `ppoll`).
/// Returns whether it is readable.
pub fn wait_readable(fd: RawFd, timeout_ns: u64) -> io::Result<bool> {
    let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: one valid pollfd, a valid timespec, and no signal mask.
    let r = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(r > 0 && pfd.revents & libc::POLLIN != 0)
}

/// `read(2)` into `buf`; `Ok(None)` when a non-blocking descriptor has nothing to read.
pub fn read_fd(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some(n as usize))
}

/// `write(2)` of one whole packet.
pub fn write_fd(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes.
    let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

fn setsockopt_bytes(fd: RawFd, level: i32, opt: i32, val: &[u8]) -> io::Result<()> {
    // SAFETY: `val` is valid for reads of its length, which is passed along.
    let r = unsafe { libc::setsockopt(fd, level, opt, val.as_ptr().cast(), val.len() as libc::socklen_t) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub fn setsockopt_int(fd: RawFd, level: i32, opt: i32, val: i32) -> io::Result<()> {
    setsockopt_bytes(fd, level, opt, &val.to_ne_bytes())
}

/// Selects the kernel congestion control of one TCP socket (`TCP_CONGESTION`), e.g. `cubic`,
/// `reno`, `bbr` (see `/proc/sys/net/ipv4/tcp_available_congestion_control`).
pub fn set_tcp_congestion(fd: RawFd, name: &str) -> Result<()> {
    setsockopt_bytes(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_bytes()).with_context(|| {
        let avail = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap_or_default();
        format!("congestion control `{name}` is not available (available: {})", avail.trim())
    })
}

/// Sets a socket's receive and send buffers beyond `rmem_max`/`wmem_max` (root only; falls back
/// to the capped variants otherwise).
pub fn set_socket_buffers(fd: RawFd, bytes: i32) {
    if setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, bytes).is_err() {
        let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, bytes);
    }
    if setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, bytes).is_err() {
        let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, bytes);
    }
}

/// The prefix of the kernel's `struct tcp_info` (include/uapi/linux/tcp.h) up to
/// `tcpi_delivery_rate`. The kernel copies `min(optlen, sizeof)` bytes, so an older kernel leaves
/// the tail zero.
#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
struct RawTcpInfo {
    state_bytes: [u8; 8],
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
}

/// What the testbed reads from `TCP_INFO` of a sender socket.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TcpInfo {
    /// Smoothed RTT in microseconds.
    pub rtt_us: u32,
    /// Minimum RTT seen, microseconds (0 on kernels before 4.6).
    pub min_rtt_us: u32,
    /// Congestion window in bytes (`snd_cwnd * snd_mss`).
    pub cwnd_bytes: u64,
    /// Total retransmitted segments.
    pub total_retrans: u32,
    /// Bytes acknowledged by the peer.
    pub bytes_acked: u64,
    /// Data segments sent, retransmissions included (0 on kernels before 4.6).
    pub data_segs_out: u32,
}

/// Reads `TCP_INFO` of a TCP socket.
pub fn tcp_info(fd: RawFd) -> io::Result<TcpInfo> {
    let mut raw = RawTcpInfo::default();
    let mut len = std::mem::size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: `raw` is writable for `len` bytes and `len` is a valid socklen_t the kernel updates.
    let r = unsafe {
        libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, (&mut raw as *mut RawTcpInfo).cast(), &mut len)
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(TcpInfo {
        rtt_us: raw.rtt,
        min_rtt_us: raw.min_rtt,
        cwnd_bytes: raw.snd_cwnd as u64 * raw.snd_mss as u64,
        total_retrans: raw.total_retrans,
        bytes_acked: raw.bytes_acked,
        data_segs_out: raw.data_segs_out,
    })
}

/// Sends `sig` to `pid`; `false` if the process does not exist.
pub fn kill(pid: i32, sig: i32) -> bool {
    // SAFETY: kill() has no memory arguments.
    unsafe { libc::kill(pid, sig) == 0 }
}

static SIGNAL_PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = SIGNAL_PIPE_WRITE.load(Ordering::Relaxed);
    if fd >= 0 {
        let b = sig as u8;
        // SAFETY: write(2) is async-signal-safe; `b` lives for the call.
        unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
    }
}

/// Installs handlers for SIGINT, SIGTERM and SIGHUP that write the signal number into a pipe
/// (the self-pipe trick) and returns the pipe's read end. The caller's thread reads it outside
/// signal context and does the real work (tearing testbeds down).
pub fn install_signal_pipe() -> Result<File> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is an array of two ints as pipe2 requires.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error()).context("pipe2");
    }
    SIGNAL_PIPE_WRITE.store(fds[1], Ordering::Relaxed);
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: sigaction is plain old data; zero is a valid starting value. The handler only
        // calls write(2), which is async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error()).context("sigaction");
            }
        }
    }
    // SAFETY: fds[0] is the freshly created read end, owned by nobody else.
    Ok(unsafe { File::from_raw_fd(fds[0]) })
}

/// Whether this process may create network namespaces: a throwaway thread calls
/// `unshare(CLONE_NEWNET)` (which moves only that thread) and exits.
pub fn can_create_netns() -> io::Result<()> {
    std::thread::spawn(|| {
        // SAFETY: unshare() takes flags by value; only the calling (throwaway) thread changes.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    })
    .join()
    .unwrap_or_else(|_| Err(io::Error::other("probe thread panicked")))
}

/// Whether the effective user is root.
pub fn is_root() -> bool {
    // SAFETY: geteuid() cannot fail and has no arguments.
    unsafe { libc::geteuid() == 0 }
}
