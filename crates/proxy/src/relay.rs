//! Relaying one direction of a split connection: read from one socket into the relay buffer,
//! write the buffer to the other socket, carry the FIN on as a half-close.
//!
//! Two ways to hold the relay buffer:
//! - [`CopyMode::Splice`]: a pipe per direction; bytes move socket → pipe → socket with
//!   `splice(2)` by page reference, never copied through user space. The pipe is created when
//!   the first byte arrives (checked with a peek: see `data_waiting`), so an idle connection
//!   holds no pipe.
//! - [`CopyMode::Copy`]: a user-space buffer per direction, allocated when the first byte
//!   arrives (`read`/`write`).
//!
//! Both fill the buffer only when it is empty and then drain it completely. With splice this
//! is required for correctness: `splice` into a pipe returns EAGAIN both when the socket is
//! empty and when the pipe has no free slot, and only an empty pipe makes EAGAIN mean "the
//! socket is empty" (so that tokio's readiness may be cleared). The socket's receive buffer
//! keeps filling in the kernel while the relay drains, so the alternation does not idle the
//! client leg.

use crate::cpu::EmulatedCpu;
use crate::sock::Pipe;
use crate::stats::{DirCounters, Stats};
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;
use tokio::io::Interest;
use tokio::net::TcpStream;

/// How the relay buffer is held (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyMode {
    Splice,
    Copy,
}

impl std::str::FromStr for CopyMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "splice" => Ok(CopyMode::Splice),
            "copy" => Ok(CopyMode::Copy),
            _ => Err(format!("{s:?} is not a copy mode (splice or copy)")),
        }
    }
}

/// What one direction shares with the rest of the connection.
pub struct DirCtx<'a> {
    pub stats: &'a Stats,
    /// Global byte counter of this direction (`bytes_up` or `bytes_down`).
    pub global_bytes: &'a AtomicU64,
    /// Milliseconds since the connection's start at the last byte moved (idle timeout).
    pub last_activity_ms: &'a AtomicU64,
    pub start: Instant,
    /// Relay buffer size in bytes.
    pub buffer: usize,
    pub mode: CopyMode,
    /// The emulated CPU every chunk must be served by before it is written on (split
    /// connections with `--emulate-cpu`; see [`crate::cpu`]).
    pub cpu: Option<&'a EmulatedCpu>,
}

/// Relays `src` → `dst` until `src`'s end of stream, then shuts `dst` down for writing.
/// Returns this direction's counters; an error (a reset, a failed write) ends the direction.
pub async fn relay(src: &TcpStream, dst: &TcpStream, ctx: &DirCtx<'_>, c: &mut DirCounters) -> io::Result<()> {
    let r = match ctx.mode {
        CopyMode::Splice => relay_with(PipeBuffer { pipe: None, size: ctx.buffer }, src, dst, ctx, c).await,
        CopyMode::Copy => {
            relay_with(UserBuffer { buf: Vec::new(), size: ctx.buffer, filled: 0 }, src, dst, ctx, c).await
        }
    };
    if r.is_ok() {
        crate::sock::shutdown_write(dst)?;
    }
    r
}

/// A relay buffer: filled from a socket only when empty, drained completely.
trait RelayBuffer {
    /// Non-blocking read of up to the buffer's size from `src`; WouldBlock when nothing is there.
    fn fill(&mut self, src: &TcpStream) -> io::Result<usize>;
    /// Non-blocking write of the last `held` bytes filled to `dst`.
    fn drain(&mut self, dst: &TcpStream, held: usize) -> io::Result<usize>;
}

/// Before a direction's buffer exists: true if bytes are waiting in `src`, false at its end of
/// stream, WouldBlock (readiness cleared) if neither. tokio can report a new connection
/// readable with nothing there; creating the buffer on that made every idle connection hold a
/// pipe — two more descriptors, so four per connection instead of two (half as many idle
/// connections per RLIMIT_NOFILE), and the pipe's kernel memory — or, in copy mode, a 1 MiB
/// allocation (measured in session 6: 200 pipe descriptors for 100 idle connections).
fn data_waiting(src: &TcpStream) -> io::Result<bool> {
    Ok(src.try_io(Interest::READABLE, || crate::sock::peek(src))? > 0)
}

struct PipeBuffer {
    pipe: Option<Pipe>,
    size: usize,
}

impl RelayBuffer for PipeBuffer {
    fn fill(&mut self, src: &TcpStream) -> io::Result<usize> {
        if self.pipe.is_none() {
            if !data_waiting(src)? {
                return Ok(0);
            }
            self.pipe = Some(Pipe::new(self.size)?);
        }
        let p = self.pipe.as_ref().expect("created above");
        src.try_io(Interest::READABLE, || p.fill_from(src.as_raw_fd(), p.capacity))
    }
    fn drain(&mut self, dst: &TcpStream, held: usize) -> io::Result<usize> {
        let p = self.pipe.as_ref().expect("drained after a fill");
        dst.try_io(Interest::WRITABLE, || p.drain_to(dst.as_raw_fd(), held))
    }
}

struct UserBuffer {
    buf: Vec<u8>,
    size: usize,
    filled: usize,
}

impl RelayBuffer for UserBuffer {
    fn fill(&mut self, src: &TcpStream) -> io::Result<usize> {
        if self.buf.is_empty() {
            if !data_waiting(src)? {
                return Ok(0);
            }
            self.buf = vec![0; self.size];
        }
        self.filled = src.try_read(&mut self.buf)?;
        Ok(self.filled)
    }
    fn drain(&mut self, dst: &TcpStream, held: usize) -> io::Result<usize> {
        dst.try_write(&self.buf[self.filled - held..self.filled])
    }
}

async fn relay_with(
    mut b: impl RelayBuffer,
    src: &TcpStream,
    dst: &TcpStream,
    ctx: &DirCtx<'_>,
    c: &mut DirCounters,
) -> io::Result<()> {
    let mut guard = BufferedGuard { stats: ctx.stats, held: 0 };
    loop {
        // Fill: the buffer is empty here.
        let t0 = Instant::now();
        let n = loop {
            src.readable().await?;
            match b.fill(src) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        };
        c.starved += t0.elapsed();
        if n == 0 {
            return Ok(());
        }
        taken(ctx, c, n);
        guard.held = n;
        if let Some(cpu) = ctx.cpu {
            cpu.data(n, ctx.stats).await;
        }
        // Drain.
        let t1 = Instant::now();
        while guard.held > 0 {
            match b.drain(dst, guard.held) {
                Ok(m) => {
                    guard.held -= m;
                    moved(ctx, c, m);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => dst.writable().await?,
                Err(e) => return Err(e),
            }
        }
        c.blocked += t1.elapsed();
    }
}

/// Counts `n` bytes moved out of the buffer.
fn moved(ctx: &DirCtx<'_>, c: &mut DirCounters, n: usize) {
    c.bytes += n as u64;
    ctx.global_bytes.fetch_add(n as u64, Relaxed);
    ctx.stats.sub_buffered(n);
    ctx.last_activity_ms.store(ctx.start.elapsed().as_millis() as u64, Relaxed);
}

/// Counts `n` bytes taken into the buffer.
fn taken(ctx: &DirCtx<'_>, c: &mut DirCounters, n: usize) {
    ctx.stats.add_buffered(n);
    c.peak_buffered = c.peak_buffered.max(n);
    ctx.last_activity_ms.store(ctx.start.elapsed().as_millis() as u64, Relaxed);
}

/// Removes what is still counted as buffered when a direction ends (on an error).
struct BufferedGuard<'a> {
    stats: &'a Stats,
    held: usize,
}

impl Drop for BufferedGuard<'_> {
    fn drop(&mut self) {
        self.stats.sub_buffered(self.held);
    }
}
