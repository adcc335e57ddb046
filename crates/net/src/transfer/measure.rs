//! The measured sender (`headroom send --measure`): ImTCP's control unit
//! ([`headroom_core::imtcp::ImtcpBuffer`]) between the application and the kernel's TCP.
//!
//! The kernel's TCP plays ImTCP's "TCP sender": its congestion window (`TCP_INFO`
//! `snd_cwnd × snd_mss`, bounded by the peer's window) decides how many segments may be
//! outstanding, held segments included, and the driver *releases* one segment-sized piece of
//! the data stream into the ImTCP buffer whenever that window has room. The buffer decides
//! when each piece leaves; the driver then writes it at once with `sendmsg(MSG_EOR)` on a
//! `TCP_NODELAY` socket. Every piece carries `SO_TIMESTAMPING` (`TX_SCHED`, `TX_SOFTWARE`,
//! `TX_ACK`, `OPT_ID`); [`super::tstamp::PieceTracker`] matches the error-queue stamps to pieces
//! and turns them into the buffer's events: the device send time corrects the probe's send
//! time ([`headroom_core::imtcp::ImtcpBuffer::on_segment_left`]), the ACK stamps become
//! [`AckEvent`]s with ImTCP §3.5.1's delayed-ACK rule, and an increase of `tcpi_total_retrans`
//! is `on_retransmit`. What the kernel does between the write and the wire, and why each piece
//! stays one packet, is in `docs/transfer.md`.
//!
//! **Background** (`--background`): ImTCP-bg's rule ([`ImtcpBgLimit`], Eq. 1–4 of seed 000 over
//! a shadow Reno window) bounds the bytes outstanding, held pieces included, on top of the
//! kernel's window: the release condition above uses min(kernel window, limit). Bytes in
//! flight come from `TCP_INFO` (`bytes_acked` against what was released); `TCP_NOTSENT_LOWAT`
//! (16 KiB) keeps the kernel's unsent queue short, although pieces are only written when the
//! window has room anyway. The rule gets every ACK (with its kernel RTT sample), every
//! estimate, and a loss whenever `tcpi_total_retrans` rises (the shadow Reno halves, at most
//! once per RTT; [`ImtcpBgLimit`]).
//!
//! Clock: the driver's [`Time`] is `CLOCK_REALTIME` minus the start, the clock of the
//! kernel's software timestamps. Waiting: `ppoll` on the socket (an error-queue message wakes
//! it) until 80 µs before the buffer's next deadline, then a spin; timer slack 1 µs.

use std::collections::VecDeque;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use headroom_core::cc::imtcp_bg::ImtcpBgConfig;
use headroom_core::cc::{AckEvent, ImtcpBgLimit, Segment, SendBuffer};
use headroom_core::imtcp::{ControlConfig, ControlStats, ImtcpBuffer};
use headroom_core::units::{Bytes, Dur, Time};

use super::pattern::Source;
use super::session::{data_error, Drain, IntervalReport, Mode, Sent, Ticker, TransferError};
use super::sock;
use super::tstamp::{parse_errqueue_msg, ParseError, PieceTracker, TrackerEvent, TrackerStats};

/// Counters of a measured transfer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MeasureStats {
    pub pieces: u64,
    /// Segment size used (the kernel's `snd_mss` at the start).
    pub mss: u32,
    pub tracker: TrackerStats,
    pub control: ControlStats,
    /// Writes the socket did not take at once (`EAGAIN` or short).
    pub write_stalls: u64,
    /// Error-queue messages that were not readable timestamps.
    pub parse_errors: u64,
    /// Background mode: Eq. 4 reductions, losses that halved the shadow window and the last
    /// in-flight limit.
    pub reductions: u64,
    pub losses: u64,
    pub last_limit: Option<u64>,
}

const SPIN: u64 = 80_000;
const MAX_WAIT: u64 = 2_000_000;

fn now_t(epoch: u64) -> Time {
    Time(sock::realtime_ns().saturating_sub(epoch))
}

/// Drains the error queue into the tracker.
fn drain_errqueue(fd: i32, tracker: &mut PieceTracker, stats: &mut MeasureStats) -> Result<(), TransferError> {
    let mut control = [0u8; 512];
    for _ in 0..10_000 {
        // SAFETY: msghdr is plain data; control points to a live buffer of its length; no iov
        // (OPT_TSONLY: the messages carry no payload).
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len();
        // SAFETY: `msg` is initialised above and lives for the call.
        let r = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::Interrupted {
                return Ok(());
            }
            return Err(data_error(e));
        }
        match parse_errqueue_msg(&control[..msg.msg_controllen.min(control.len())]) {
            Ok(s) => tracker.on_stamp(s),
            Err(ParseError::NotATimestamp { errno, .. }) if errno != libc::ENOMSG as u32 && errno != 0 => {
                return Err(data_error(std::io::Error::from_raw_os_error(errno as i32)));
            }
            Err(_) => stats.parse_errors += 1,
        }
    }
    Ok(())
}

/// Sleeps until `until` (driver time) or until an error-queue message (or POLLOUT when asked).
fn wait(fd: i32, epoch: u64, until: Time, want_out: bool) -> Result<(), TransferError> {
    loop {
        let now = now_t(epoch);
        if now >= until {
            return Ok(());
        }
        let left = until.0 - now.0;
        if left > SPIN {
            let ev = if want_out { libc::POLLOUT } else { 0 };
            let r = sock::poll_fd(fd, ev, left - SPIN).map_err(TransferError::Io)?;
            if r != 0 {
                return Ok(());
            }
        } else {
            std::hint::spin_loop();
        }
    }
}

/// The measured sending loop (see the module doc).
pub(crate) fn transmit(
    stream: &mut TcpStream,
    mut source: Source,
    time: Option<Duration>,
    stop: &Option<Arc<AtomicBool>>,
    interval: Option<Duration>,
    mode: &Mode,
    on_interval: &mut dyn FnMut(&IntervalReport),
) -> Result<Sent, TransferError> {
    let fd = stream.as_raw_fd();
    let (cfg, background): (&ControlConfig, Option<ImtcpBgConfig>) = match mode {
        Mode::Measure(c) => (c, None),
        Mode::Background(c, bg) => (c, Some(*bg)),
        Mode::Bulk => return Err(TransferError::Invalid("the measured sender needs --measure or --background".into())),
    };
    if background.is_some() {
        // Keep the kernel's unsent queue short: the limit below decides what is outstanding,
        // and data parked in the kernel would escape it (it is counted, but not recallable).
        let _ = sock::setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, 16 * 1024);
    }
    crate::timing::reduce_timer_slack();
    stream.set_nodelay(true).map_err(TransferError::Io)?;
    let info0 = sock::tcp_info(fd).map_err(TransferError::Io)?;
    let mss = info0.snd_mss.max(536);
    let mut cfg = cfg.clone();
    // IP + TCP headers, plus the timestamp option when negotiated (TCPI_OPT_TIMESTAMPS).
    cfg.header_bytes = Bytes(40 + if info0.options & 1 != 0 { 12 } else { 0 });
    let mut buffer = ImtcpBuffer::new(cfg).map_err(|e| TransferError::Invalid(e.to_string()))?;
    // With OPT_ID_TCP the first key is the first byte written from now on; without it, the
    // first unacknowledged byte: start the stream coordinates there.
    let id_tcp = sock::enable_tx_timestamps(fd).map_err(TransferError::Io)?;
    let shift = if id_tcp { 0 } else { sock::outq(fd).map_err(TransferError::Io)? };
    let epoch = sock::realtime_ns();
    let t0 = Instant::now();
    let mut tracker = PieceTracker::new(epoch, 0);
    let mut limit = background.map(|c| ImtcpBgLimit::new(c, Bytes(mss as u64), Bytes(info0.cwnd_bytes())));
    let mut stats = MeasureStats { mss, ..MeasureStats::default() };
    let acked_base = info0.bytes_acked;
    let mut ticker = Ticker::new(interval, t0);
    let mut released_end = shift;
    let mut last_ack = shift;
    let mut unwritten: VecDeque<Vec<u8>> = VecDeque::new();
    let mut partial: Option<(Vec<u8>, usize)> = None;
    let mut source_done = false;
    let mut finishing = false;
    let mut interrupted = false;
    let mut retrans = info0.total_retrans;
    let mut estimates = Vec::new();
    let mut interval_estimates = Vec::new();
    let mut piece = vec![0u8; mss as usize];
    let mut finish_deadline = None;
    loop {
        let now = now_t(epoch);
        let wall = Instant::now();
        if !interrupted && stop.as_ref().is_some_and(|s| s.load(std::sync::atomic::Ordering::SeqCst)) {
            interrupted = true;
        }
        if !finishing && (interrupted || time.is_some_and(|t| wall.duration_since(t0) >= t)) {
            finishing = true;
            source.finish();
            finish_deadline = Some(wall + Duration::from_secs(30));
        }
        if finish_deadline.is_some_and(|d| wall > d) {
            return Err(TransferError::PeerAborted("the receiver stopped reading".into()));
        }
        // 1. Kernel events: timestamps, then the window and retransmissions.
        drain_errqueue(fd, &mut tracker, &mut stats)?;
        let info = sock::tcp_info(fd).map_err(TransferError::Io)?;
        let srtt = (info.rtt > 0).then(|| Dur::from_micros(info.rtt as u64));
        while let Some(ev) = tracker.poll(sock::realtime_ns()) {
            match ev {
                TrackerEvent::Left { end, at } => buffer.on_segment_left(end, at),
                TrackerEvent::Ack(a) => {
                    // A lone tail piece's ACK may have waited for the receiver's delayed-ACK
                    // timer: its RTT sample would read as queueing (Eq. 3) and inflate the
                    // storing timer's RTTVAR, so neither gets it.
                    let rtt = if a.tail && a.pieces == 1 { None } else { a.rtt };
                    let ev = AckEvent {
                        now: a.at,
                        ack: a.ack,
                        newly_acked: Bytes(a.ack.saturating_sub(last_ack)),
                        dup_acks: 0,
                        rtt,
                        srtt,
                        min_rtt: (info.min_rtt > 0).then(|| Dur::from_micros(info.min_rtt as u64)),
                        delivery_rate: None,
                        in_flight: Bytes(released_end.saturating_sub(a.ack)),
                        snd_max: released_end,
                        mss: Bytes(mss as u64),
                        // ImTCP's buffer reads RTTs, not TCP timestamps.
                        timestamps: None,
                    };
                    last_ack = last_ack.max(a.ack);
                    buffer.on_ack(&ev);
                    if let Some(l) = limit.as_mut() {
                        l.on_ack(a.at, ev.newly_acked, rtt);
                    }
                }
            }
        }
        if info.total_retrans > retrans {
            retrans = info.total_retrans;
            buffer.on_retransmit(now);
            if let Some(l) = limit.as_mut() {
                l.on_loss(now, srtt);
            }
        }
        while let Some(e) = buffer.poll_estimate() {
            if let Some(l) = limit.as_mut() {
                l.on_estimate(e.value);
            }
            estimates.push(e);
            interval_estimates.push(e);
        }
        if ticker.due(wall) {
            let mut r = ticker.report(wall, info.bytes_acked.saturating_sub(acked_base), Some(&info));
            r.estimates = std::mem::take(&mut interval_estimates);
            r.smoothed = buffer.smoothed();
            r.limit = limit.as_ref().map(|l| l.inflight_limit());
            on_interval(&r);
        }
        // 2. TCP's window releases pieces into the ImTCP buffer (held pieces count as in flight).
        let mut window = info.cwnd_bytes();
        if info.snd_wnd > 0 {
            window = window.min(info.snd_wnd as u64);
        }
        // Background: ImTCP-bg's limit on bytes in flight, over the kernel's own window.
        if let Some(l) = &limit {
            window = window.min(l.inflight_limit().0);
        }
        buffer.on_window(now, Bytes(window));
        let acked = shift + info.bytes_acked.saturating_sub(acked_base);
        while !source_done && released_end.saturating_sub(acked) + mss as u64 <= window.max(mss as u64) {
            let n = source.produce(&mut piece);
            if n == 0 {
                source_done = true;
                break;
            }
            buffer.release(now, Segment { seq: released_end, len: Bytes(n as u64), retransmission: false });
            released_end += n as u64;
            unwritten.push_back(piece[..n].to_vec());
        }
        // 3. Write what the buffer lets go.
        let mut blocked = false;
        loop {
            if let Some((bytes, off)) = partial.take() {
                match write_piece(fd, &bytes[off..]) {
                    Ok(n) if off + n == bytes.len() => {}
                    Ok(n) => {
                        partial = Some((bytes, off + n));
                        blocked = true;
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            let Some(seg) = buffer.poll_transmit(now) else { break };
            let bytes = unwritten.pop_front().expect("the buffer returns only released segments");
            debug_assert_eq!(bytes.len() as u64, seg.len.0);
            tracker.on_write(seg.seq + seg.len.0);
            stats.pieces += 1;
            match write_piece(fd, &bytes)? {
                n if n == bytes.len() => {}
                n => {
                    stats.write_stalls += 1;
                    partial = Some((bytes, n));
                    blocked = true;
                    break;
                }
            }
        }
        if source_done && buffer.held() == 0 && partial.is_none() {
            break;
        }
        // 4. Sleep until the buffer's next deadline, a kernel event, or 2 ms.
        let mut until = Time(now.0 + MAX_WAIT);
        if let Some(w) = buffer.next_wakeup() {
            until = until.min(w.max(now));
        }
        if interval.is_some() {
            until = until.min(Time(now.0 + ticker.until_due(wall).as_nanos() as u64));
        }
        if tracker.outstanding() > 0 {
            // An ACK group may need closing (tstamp::ACK_MERGE_NS).
            until = until.min(Time(now.0 + 50_000));
        }
        wait(fd, epoch, until, blocked)?;
    }
    // Leftover estimates and the last ACKs are not needed for the transfer itself.
    stats.tracker = tracker.stats();
    stats.control = buffer.stats();
    if let Some(l) = &limit {
        stats.reductions = l.rule().reductions();
        stats.losses = l.losses();
        stats.last_limit = Some(l.inflight_limit().0);
    }
    while let Some(e) = buffer.poll_estimate() {
        estimates.push(e);
    }
    let duration = t0.elapsed();
    Ok(Sent {
        payload: source.payload(),
        acked: sock::tcp_info(fd).map_or(0, |i| i.bytes_acked.saturating_sub(acked_base)),
        duration,
        interrupted,
        estimates,
        measure: Some(stats),
        drain: Drain { ticker, acked_base },
    })
}

/// One `sendmsg(MSG_EOR)`: returns the bytes the socket took (0 on EAGAIN).
fn write_piece(fd: i32, bytes: &[u8]) -> Result<usize, TransferError> {
    // SAFETY: `bytes` is readable for its length.
    let r = unsafe {
        libc::send(fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_EOR | libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
    };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(data_error(e));
    }
    Ok(r as usize)
}
