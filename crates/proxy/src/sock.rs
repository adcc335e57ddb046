//! Socket options and the pipe used for zero-copy relaying, over raw file descriptors (libc).

use std::io;
use std::os::fd::{AsRawFd, RawFd};

fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` points to a live T of the size passed; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(fd, level, name, (value as *const T).cast(), std::mem::size_of::<T>() as libc::socklen_t)
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// SO_LINGER with a zero timeout: closing the socket sends a RST instead of a FIN. This is how
/// a reset on one side of the relay is propagated to the other side.
pub fn set_reset_on_close(s: &impl AsRawFd) -> io::Result<()> {
    let l = libc::linger { l_onoff: 1, l_linger: 0 };
    setsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_LINGER, &l)
}

/// IP_TRANSPARENT (IPv4 socket) or IPV6_TRANSPARENT (IPv6 socket, which also covers the IPv4
/// connections of a dual-stack listener: both set the socket's one "transparent" flag): a
/// listener accepts connections to any address diverted by `tproxy`; an upstream socket may bind
/// a foreign (the client's) address. Needs CAP_NET_ADMIN.
pub fn set_transparent(s: &impl AsRawFd, ipv6: bool) -> io::Result<()> {
    let one: libc::c_int = 1;
    if ipv6 {
        setsockopt(s.as_raw_fd(), libc::SOL_IPV6, libc::IPV6_TRANSPARENT, &one)
    } else {
        setsockopt(s.as_raw_fd(), libc::SOL_IP, libc::IP_TRANSPARENT, &one)
    }
}

/// IPV6_V6ONLY off: an IPv6 listener on `[::]` also accepts IPv4 connections (as v4-mapped
/// addresses), whatever `net.ipv6.bindv6only` says.
pub fn set_dual_stack(s: &impl AsRawFd) -> io::Result<()> {
    let zero: libc::c_int = 0;
    setsockopt(s.as_raw_fd(), libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, &zero)
}

/// SO_SNDBUF and SO_RCVBUF (both; the kernel doubles the value and turns autotuning off).
pub fn set_socket_buffers(s: &impl AsRawFd, bytes: usize) -> io::Result<()> {
    let v = libc::c_int::try_from(bytes).map_err(|_| io::Error::other("socket buffer too large"))?;
    setsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, &v)?;
    setsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, &v)
}

/// TCP_CONGESTION: the kernel congestion control of this socket (`cubic`, `reno`, ...).
pub fn set_congestion(s: &impl AsRawFd, name: &str) -> io::Result<()> {
    // SAFETY: `name` is a live byte slice of the length passed; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// recv(MSG_PEEK | MSG_DONTWAIT) of one byte: Ok(1) when data is waiting, Ok(0) at the end of
/// the stream, WouldBlock when there is nothing yet; the data stays in the socket.
pub fn peek(s: &impl AsRawFd) -> io::Result<usize> {
    let mut b = 0u8;
    // SAFETY: recv into one live byte; MSG_PEEK leaves the data queued.
    let n = unsafe { libc::recv(s.as_raw_fd(), (&mut b as *mut u8).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// shutdown(SHUT_WR): the FIN that carries a half-close onward. ENOTCONN (the peer already
/// gone) is not an error here: the other direction will see the reset.
pub fn shutdown_write(s: &impl AsRawFd) -> io::Result<()> {
    // SAFETY: plain syscall on a descriptor the caller owns.
    let r = unsafe { libc::shutdown(s.as_raw_fd(), libc::SHUT_WR) };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ENOTCONN) {
        Ok(())
    } else {
        Err(e)
    }
}

/// A non-blocking pipe: the kernel-side relay buffer of one direction in splice mode. Data
/// moves socket → pipe → socket by page reference (`splice(2)`), never through user space.
pub struct Pipe {
    r: RawFd,
    w: RawFd,
    /// Capacity in bytes as the kernel set it (F_SETPIPE_SZ rounds up to a power of two pages).
    pub capacity: usize,
}

impl Pipe {
    /// A pipe whose capacity is at least `bytes` (limited by /proc/sys/fs/pipe-max-size for
    /// non-root; the kernel's answer is kept in `capacity`).
    pub fn new(bytes: usize) -> io::Result<Pipe> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: fds has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut p = Pipe { r: fds[0], w: fds[1], capacity: 0 };
        let want = libc::c_int::try_from(bytes.max(4096)).unwrap_or(libc::c_int::MAX);
        // SAFETY: fcntl on our own pipe descriptor.
        let got = unsafe { libc::fcntl(p.w, libc::F_SETPIPE_SZ, want) };
        let got = if got < 0 {
            // Above pipe-max-size without CAP_SYS_RESOURCE: keep the default size.
            // SAFETY: as above.
            unsafe { libc::fcntl(p.w, libc::F_GETPIPE_SZ) }
        } else {
            got
        };
        if got <= 0 {
            return Err(io::Error::last_os_error());
        }
        p.capacity = got as usize;
        Ok(p)
    }

    /// Moves up to `len` bytes from socket `from` into the pipe. Ok(0) is end of stream.
    pub fn fill_from(&self, from: RawFd, len: usize) -> io::Result<usize> {
        splice(from, self.w, len)
    }

    /// Moves up to `len` bytes from the pipe into socket `to`.
    pub fn drain_to(&self, to: RawFd, len: usize) -> io::Result<usize> {
        splice(self.r, to, len)
    }
}

fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: splice between descriptors we own; null offsets (sockets and pipes have none).
    let n = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        // SAFETY: we own both descriptors and close them once.
        unsafe {
            libc::close(self.r);
            libc::close(self.w);
        }
    }
}

/// Raises RLIMIT_NOFILE (each relayed connection holds two sockets and, while data moves in
/// splice mode, up to four pipe ends): to 1,048,576 where permitted (root), else the soft limit
/// to the hard limit. Returns the new soft limit.
pub fn raise_nofile_limit() -> io::Result<u64> {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return Err(io::Error::last_os_error());
        }
        let big = libc::rlimit { rlim_cur: 1 << 20, rlim_max: r.rlim_max.max(1 << 20) };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &big) == 0 {
            return Ok(big.rlim_cur);
        }
        r.rlim_cur = r.rlim_max;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &r) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(r.rlim_cur)
}
