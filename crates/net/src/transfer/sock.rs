//! Socket options of the transfer: `TCP_CONGESTION`, `TCP_NODELAY`, `TCP_NOTSENT_LOWAT`,
//! `SO_TIMESTAMPING`, `SO_MAX_PACING_RATE`, `TCP_INFO`, `SIOCOUTQ`.

use std::io;
use std::os::fd::RawFd;

use headroom_core::units::Rate;

fn setsockopt_bytes(fd: RawFd, level: i32, opt: i32, val: &[u8]) -> io::Result<()> {
    // SAFETY: `val` is readable for its length; the kernel copies it.
    let r = unsafe { libc::setsockopt(fd, level, opt, val.as_ptr().cast(), val.len() as libc::socklen_t) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub fn setsockopt_int(fd: RawFd, level: i32, opt: i32, val: i32) -> io::Result<()> {
    setsockopt_bytes(fd, level, opt, &val.to_ne_bytes())
}

/// Why a congestion control was refused, in words.
#[derive(Debug)]
pub struct CcRefused(pub String);

impl std::fmt::Display for CcRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for CcRefused {}

/// Selects the socket's kernel congestion control by name (`TCP_CONGESTION`).
pub fn set_congestion(fd: RawFd, name: &str) -> Result<(), CcRefused> {
    setsockopt_bytes(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_bytes()).map_err(|e| {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default().trim().to_string();
        let why = match e.raw_os_error() {
            Some(libc::ENOENT) => format!(
                "is not available in this kernel (available: {})",
                read("/proc/sys/net/ipv4/tcp_available_congestion_control")
            ),
            Some(libc::EPERM) => format!(
                "is not allowed for this user (allowed without CAP_NET_ADMIN: {})",
                read("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
            ),
            _ => format!("was refused: {e}"),
        };
        CcRefused(format!("congestion control `{name}` {why}"))
    })
}

/// Caps the socket's pacing rate (`SO_MAX_PACING_RATE`, bytes per second as a 64-bit value,
/// accepted since Linux 4.19). Setting it also turns on TCP's *internal* pacing
/// (`sk_pacing_status` = `SK_PACING_NEEDED`, net/core/sock.c), so no `fq` qdisc is needed:
/// `tcp_write_xmit` holds each skb until `tcp_wstamp_ns`, which advances by `len / rate`
/// (net/ipv4/tcp_output.c, `tcp_update_skb_after_send`). The rate is
/// min(this cap, the congestion control's own pacing rate: 2 × cwnd / SRTT in slow start,
/// 1.2 × cwnd / SRTT after it, `tcp_update_pacing_rate`), counted over the skb's length
/// without headers; TSO autosizing then bundles about 1 ms of data per skb (at least 2
/// segments), so the wire sees pairs of back-to-back packets at low rates, not single ones.
pub fn set_max_pacing_rate(fd: RawFd, rate: Rate) -> io::Result<()> {
    let bytes_per_s: u64 = (rate.0 / 8).max(1);
    setsockopt_bytes(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, &bytes_per_s.to_ne_bytes())
}

/// The socket's congestion control name.
pub fn congestion(fd: RawFd) -> io::Result<String> {
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: `buf` is writable for `len` bytes.
    let r = unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, buf.as_mut_ptr().cast(), &mut len) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let s = &buf[..len as usize];
    let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
    Ok(String::from_utf8_lossy(&s[..end]).into_owned())
}

/// The kernel's `struct tcp_info` (include/uapi/linux/tcp.h) up to `tcpi_snd_wnd`. The kernel
/// copies `min(optlen, sizeof)` bytes; an older kernel leaves the tail zero.
#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
pub struct TcpInfo {
    pub state: u8,
    pub ca_state: u8,
    pub retransmits: u8,
    pub probes: u8,
    pub backoff: u8,
    pub options: u8,
    pub wscale: u8,
    pub flags: u8,
    pub rto: u32,
    pub ato: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    /// Packets sent and not yet acknowledged (`packets_out`).
    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub fackets: u32,
    pub last_data_sent: u32,
    pub last_ack_sent: u32,
    pub last_data_recv: u32,
    pub last_ack_recv: u32,
    pub pmtu: u32,
    pub rcv_ssthresh: u32,
    /// Smoothed RTT, µs.
    pub rtt: u32,
    pub rttvar: u32,
    pub snd_ssthresh: u32,
    /// Congestion window, packets.
    pub snd_cwnd: u32,
    pub advmss: u32,
    pub reordering: u32,
    pub rcv_rtt: u32,
    pub rcv_space: u32,
    pub total_retrans: u32,
    pub pacing_rate: u64,
    pub max_pacing_rate: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub segs_out: u32,
    pub segs_in: u32,
    /// Bytes written and not yet sent.
    pub notsent_bytes: u32,
    /// Minimum RTT, µs.
    pub min_rtt: u32,
    pub data_segs_in: u32,
    pub data_segs_out: u32,
    pub delivery_rate: u64,
    pub busy_time: u64,
    pub rwnd_limited: u64,
    pub sndbuf_limited: u64,
    pub delivered: u32,
    pub delivered_ce: u32,
    pub bytes_sent: u64,
    pub bytes_retrans: u64,
    pub dsack_dups: u32,
    pub reord_seen: u32,
    pub rcv_ooopack: u32,
    /// The peer's receive window, bytes.
    pub snd_wnd: u32,
}

impl TcpInfo {
    /// Congestion window in bytes.
    pub fn cwnd_bytes(&self) -> u64 {
        self.snd_cwnd as u64 * self.snd_mss as u64
    }
}

/// Reads `TCP_INFO`.
pub fn tcp_info(fd: RawFd) -> io::Result<TcpInfo> {
    let mut raw = TcpInfo::default();
    let mut len = std::mem::size_of::<TcpInfo>() as libc::socklen_t;
    // SAFETY: `raw` is a plain repr(C) struct writable for `len` bytes.
    let r =
        unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, (&mut raw as *mut TcpInfo).cast(), &mut len) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(raw)
}

/// Bytes in the send queue not yet acknowledged, unsent included (`SIOCOUTQ`).
pub fn outq(fd: RawFd) -> io::Result<u64> {
    let mut v: libc::c_int = 0;
    // SAFETY: SIOCOUTQ writes one int.
    let r = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut v) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v.max(0) as u64)
}

/// Turns on transmit timestamps: scheduled (`TX_SCHED`), software (`TX_SOFTWARE`) and
/// acknowledged (`TX_ACK`), with `OPT_ID` keys (counted per byte from this call with
/// `OPT_ID_TCP`), timestamps only (`OPT_TSONLY`, no packet copy on the error queue). Returns
/// whether `OPT_ID_TCP` was accepted.
pub fn enable_tx_timestamps(fd: RawFd) -> io::Result<bool> {
    let base = libc::SOF_TIMESTAMPING_TX_SCHED
        | libc::SOF_TIMESTAMPING_TX_SOFTWARE
        | libc::SOF_TIMESTAMPING_TX_ACK
        | libc::SOF_TIMESTAMPING_SOFTWARE
        | libc::SOF_TIMESTAMPING_OPT_ID
        | libc::SOF_TIMESTAMPING_OPT_TSONLY;
    // OPT_ID_TCP (Linux 6.2) keys by bytes written since this call, not since snd_una.
    if setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPING, (base | libc::SOF_TIMESTAMPING_OPT_ID_TCP) as i32)
        .is_ok()
    {
        return Ok(true);
    }
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPING, base as i32).map(|_| false)
}

/// `CLOCK_REALTIME` in nanoseconds (the clock of software timestamps).
pub fn realtime_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is writable.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Waits until `fd` has an error-queue message (POLLERR) or is readable/writable as asked, at
/// most `timeout_ns`. Returns the revents.
pub fn poll_fd(fd: RawFd, events: i16, timeout_ns: u64) -> io::Result<i16> {
    let mut p = libc::pollfd { fd, events, revents: 0 };
    let ts =
        libc::timespec { tv_sec: (timeout_ns / 1_000_000_000) as i64, tv_nsec: (timeout_ns % 1_000_000_000) as i64 };
    // SAFETY: one pollfd, a valid timespec, no signal mask.
    let r = unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(p.revents)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_info_layout_matches_the_kernel_header() {
        // Offsets from include/uapi/linux/tcp.h: pacing_rate at 104, notsent_bytes at 144,
        // delivery_rate at 160, bytes_sent at 200, snd_wnd at 228.
        assert_eq!(std::mem::offset_of!(TcpInfo, pacing_rate), 104);
        assert_eq!(std::mem::offset_of!(TcpInfo, notsent_bytes), 144);
        assert_eq!(std::mem::offset_of!(TcpInfo, delivery_rate), 160);
        assert_eq!(std::mem::offset_of!(TcpInfo, bytes_sent), 200);
        assert_eq!(std::mem::offset_of!(TcpInfo, snd_wnd), 228);
    }

    #[test]
    fn the_pacing_cap_reads_back_in_tcp_info_and_stays_a_cap() {
        // A connected loopback pair: TCP_INFO's max_pacing_rate is the socket's cap (bytes/s),
        // ~0 (u64::MAX) until set; the kernel's own pacing rate never exceeds it.
        use std::os::fd::AsRawFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_s, _) = l.accept().unwrap();
        let fd = c.as_raw_fd();
        assert_eq!(tcp_info(fd).unwrap().max_pacing_rate, u64::MAX);
        set_max_pacing_rate(fd, Rate::from_bps(27_000_000)).unwrap();
        let i = tcp_info(fd).unwrap();
        assert_eq!(i.max_pacing_rate, 27_000_000 / 8);
        assert!(i.pacing_rate <= 27_000_000 / 8, "pacing rate {} above the cap", i.pacing_rate);
    }

    #[test]
    fn an_unknown_congestion_control_is_refused_with_the_available_list() {
        let s = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        use std::os::fd::AsRawFd;
        let e = set_congestion(s.as_raw_fd(), "no-such-cc").unwrap_err().to_string();
        assert!(e.contains("no-such-cc") && e.contains("not available"), "{e}");
        set_congestion(s.as_raw_fd(), "reno").unwrap();
        assert_eq!(congestion(s.as_raw_fd()).unwrap(), "reno");
    }
}
