//! Kernel transmit timestamps of the measured sender's pieces (`SO_TIMESTAMPING`).
//!
//! Every piece is one `sendmsg` of at most one MSS with `MSG_EOR`, so the kernel keeps it in
//! its own skb and the skb's `OPT_ID` key is the byte offset of the piece's last byte, counted
//! from the call that enabled timestamping (with `SOF_TIMESTAMPING_OPT_ID_TCP`; the key is a
//! `u32` and wraps every 4 GiB). The error queue then carries, per piece:
//!
//! - `SCM_TSTAMP_SCHED` when the packet enters the qdisc layer and `SCM_TSTAMP_SND` when the
//!   driver hands it to the device: the **send time** (SND when present, it is later and
//!   closer to the wire);
//! - `SCM_TSTAMP_ACK` when an ACK covering the whole skb is processed: the **ACK arrival**.
//!
//! Each error-queue message has a `SCM_TIMESTAMPING` control message (three timespecs,
//! software in the first) and an `IP_RECVERR`/`IPV6_RECVERR` one (`struct sock_extended_err`
//! with `ee_errno = ENOMSG`, `ee_origin = SO_EE_ORIGIN_TIMESTAMPING`, `ee_info` = the stamp
//! type, `ee_data` = the key). [`parse_errqueue_msg`] reads one message's control bytes.
//!
//! **Merged and missing timestamps.** One ACK that covers several pieces (the receiver's
//! delayed ACK, GRO, a stretch ACK) produces one `ACK` stamp per piece, taken a few hundred
//! nanoseconds apart in the same softirq; ImTCP §3.5.1 gives an ACK's arrival time only to the
//! segment that ends exactly at the cumulative ACK. [`PieceTracker`] therefore groups `ACK`
//! stamps closer than [`ACK_MERGE_NS`] into one ACK ending at the group's last piece. Two
//! writes the kernel merged into one skb (no `MSG_EOR` support, or a retransmission collapse)
//! leave the first piece without stamps; an ACK stamp for a later piece acknowledges every
//! earlier piece cumulatively, so stamps that never come (error queue overflow, merged skbs)
//! cost samples, never the accounting. A piece stamped as sent twice (a retransmission) gives
//! no RTT sample (Karn).

use std::collections::VecDeque;

use headroom_core::units::{Dur, Time};

/// `ee_info` values (include/uapi/linux/errqueue.h).
pub const SCM_TSTAMP_SND: u32 = 0;
pub const SCM_TSTAMP_SCHED: u32 = 1;
pub const SCM_TSTAMP_ACK: u32 = 2;
const SO_EE_ORIGIN_TIMESTAMPING: u8 = 4;
/// `SO_TIMESTAMPING_OLD` = `SCM_TIMESTAMPING` on x86-64, and `SO_TIMESTAMPING_NEW`.
const SCM_TIMESTAMPING_OLD: i32 = 37;
const SCM_TIMESTAMPING_NEW: i32 = 65;
const IP_RECVERR: i32 = 11;
const IPV6_RECVERR: i32 = 25;
const SOL_IP: i32 = 0;
const SOL_IPV6: i32 = 41;
const SOL_SOCKET: i32 = 1;
const CMSG_HDR: usize = 16;

/// ACK stamps closer together than this come from one ACK (§3.5.1 above). One ACK's stamps are
/// taken in one pass over the retransmission queue (hundreds of ns apart); two ACKs are at
/// least one packet's transmission time apart at the bottleneck (12 µs at 1 Gbit/s).
pub const ACK_MERGE_NS: u64 = 5_000;

/// Which moment a stamp records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StampKind {
    Sched,
    Sent,
    Acked,
}

/// One transmit timestamp from the error queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxStamp {
    pub kind: StampKind,
    /// `OPT_ID` key: offset of the skb's last byte (mod 2³²).
    pub key: u32,
    /// `CLOCK_REALTIME`, ns.
    pub time_ns: u64,
}

/// Why a message could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    Truncated,
    /// An error-queue message that is not a timestamp (a real ICMP error, for instance).
    NotATimestamp {
        errno: u32,
        origin: u8,
    },
    /// Timestamp without its extended error, or the reverse.
    Incomplete,
    UnknownStampType(u32),
}

/// Reads one error-queue message's control bytes (the `msg_control` that `recvmsg` filled, up
/// to `msg_controllen`).
pub fn parse_errqueue_msg(control: &[u8]) -> Result<TxStamp, ParseError> {
    let mut time_ns = None;
    let mut ee: Option<(u32, u8, u32, u32)> = None;
    let mut at = 0usize;
    while at + CMSG_HDR <= control.len() {
        let len = u64::from_ne_bytes(control[at..at + 8].try_into().expect("8 bytes")) as usize;
        let level = i32::from_ne_bytes(control[at + 8..at + 12].try_into().expect("4 bytes"));
        let ty = i32::from_ne_bytes(control[at + 12..at + 16].try_into().expect("4 bytes"));
        if len < CMSG_HDR || at + len > control.len() {
            return Err(ParseError::Truncated);
        }
        let data = &control[at + CMSG_HDR..at + len];
        match (level, ty) {
            (SOL_SOCKET, SCM_TIMESTAMPING_OLD | SCM_TIMESTAMPING_NEW) => {
                if data.len() < 16 {
                    return Err(ParseError::Truncated);
                }
                let sec = i64::from_ne_bytes(data[0..8].try_into().expect("8 bytes"));
                let nsec = i64::from_ne_bytes(data[8..16].try_into().expect("8 bytes"));
                time_ns = Some(sec.max(0) as u64 * 1_000_000_000 + nsec.clamp(0, 999_999_999) as u64);
            }
            (SOL_IP, IP_RECVERR) | (SOL_IPV6, IPV6_RECVERR) => {
                if data.len() < 16 {
                    return Err(ParseError::Truncated);
                }
                let errno = u32::from_ne_bytes(data[0..4].try_into().expect("4 bytes"));
                let origin = data[4];
                let info = u32::from_ne_bytes(data[8..12].try_into().expect("4 bytes"));
                let key = u32::from_ne_bytes(data[12..16].try_into().expect("4 bytes"));
                ee = Some((errno, origin, info, key));
            }
            _ => {}
        }
        at += (len + 7) & !7;
    }
    let (errno, origin, info, key) = ee.ok_or(ParseError::Incomplete)?;
    if errno != libc::ENOMSG as u32 || origin != SO_EE_ORIGIN_TIMESTAMPING {
        return Err(ParseError::NotATimestamp { errno, origin });
    }
    let time_ns = time_ns.ok_or(ParseError::Incomplete)?;
    let kind = match info {
        SCM_TSTAMP_SND => StampKind::Sent,
        SCM_TSTAMP_SCHED => StampKind::Sched,
        SCM_TSTAMP_ACK => StampKind::Acked,
        other => return Err(ParseError::UnknownStampType(other)),
    };
    Ok(TxStamp { kind, key, time_ns })
}

/// A piece written to the socket: bytes `[start, end)` of the data stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    end: u64,
    sched: Option<Time>,
    sent: Option<Time>,
    sends: u32,
}

/// An ACK as the measurement sees it: the cumulative ACK reached `ack` (the end of a piece) at
/// `at`; `rtt` is that piece's ACK time minus its send time (None after a retransmission).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PieceAck {
    pub ack: u64,
    pub at: Time,
    pub rtt: Option<Dur>,
    /// Pieces this ACK covered.
    pub pieces: u32,
    /// No later piece had left when this ACK came: the receiver had nothing to pair the last
    /// piece with, so its ACK may have waited for the delayed-ACK timer (up to 40 ms on
    /// Linux) and `rtt` may include that wait.
    pub tail: bool,
}

/// What the tracker tells the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrackerEvent {
    /// The piece ending at `end` left at `at` (its first send; scheduled time if the device
    /// stamp is missing — reported when its ACK comes, or at its send stamp).
    Left {
        end: u64,
        at: Time,
    },
    Ack(PieceAck),
}

/// Counts of the timestamp plumbing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrackerStats {
    pub stamps: u64,
    /// Stamps whose key is no piece's last byte (e.g. a piece merged into a later write).
    pub unmatched: u64,
    /// Pieces acknowledged without their own ACK stamp.
    pub missing_ack: u64,
    /// Pieces acknowledged without a send stamp.
    pub missing_send: u64,
    /// Pieces stamped as sent more than once (retransmitted).
    pub resent: u64,
    /// ACKs that covered several pieces (merged into one [`PieceAck`]).
    pub merged_acks: u64,
}

/// ACK stamps taken as one ACK.
#[derive(Clone, Copy, Debug)]
struct AckGroup {
    end: u64,
    first_ns: u64,
    last_ns: u64,
    pieces: u32,
    rtt: Option<Dur>,
    tail: bool,
}

/// Matches `OPT_ID` keys to the pieces written, and ACK stamps to ACKs (see the module doc).
/// Times are driver [`Time`]s: `CLOCK_REALTIME` ns minus `epoch_ns`.
#[derive(Clone, Debug)]
pub struct PieceTracker {
    epoch_ns: u64,
    /// Stream offset of key 0.
    base: u64,
    pieces: VecDeque<Piece>,
    /// Open group of ACK stamps.
    group: Option<AckGroup>,
    acked: u64,
    out: VecDeque<TrackerEvent>,
    stats: TrackerStats,
}

impl PieceTracker {
    /// `base`: stream offset of the first byte written after timestamping was enabled.
    pub fn new(epoch_ns: u64, base: u64) -> PieceTracker {
        PieceTracker {
            epoch_ns,
            base,
            pieces: VecDeque::new(),
            group: None,
            acked: base,
            out: VecDeque::new(),
            stats: TrackerStats::default(),
        }
    }

    pub fn stats(&self) -> TrackerStats {
        self.stats
    }

    /// Pieces written and not yet acknowledged by a stamp.
    pub fn outstanding(&self) -> usize {
        self.pieces.len()
    }

    fn time(&self, ns: u64) -> Time {
        Time(ns.saturating_sub(self.epoch_ns))
    }

    /// A piece ending at stream offset `end` was written (in order).
    pub fn on_write(&mut self, end: u64) {
        self.pieces.push_back(Piece { end, sched: None, sent: None, sends: 0 });
    }

    /// The stream offset just past the byte that `key` names.
    fn end_of(&self, key: u32) -> u64 {
        // Unwrap the 32-bit key around the newest piece written.
        let newest = self.pieces.back().map_or(self.acked, |p| p.end);
        let rel_newest = newest.saturating_sub(self.base);
        let hi = rel_newest & !0xFFFF_FFFF;
        let mut rel = hi | key as u64;
        if rel + 1 > rel_newest && rel >= 1 << 32 {
            rel -= 1 << 32;
        }
        self.base + rel + 1
    }

    /// One stamp from the error queue.
    pub fn on_stamp(&mut self, s: TxStamp) {
        self.stats.stamps += 1;
        let end = self.end_of(s.key);
        let t = self.time(s.time_ns);
        let Ok(i) = self.pieces.binary_search_by_key(&end, |p| p.end) else {
            self.stats.unmatched += 1;
            return;
        };
        match s.kind {
            StampKind::Sched => {
                let p = &mut self.pieces[i];
                if p.sched.is_none() {
                    p.sched = Some(t);
                }
            }
            StampKind::Sent => {
                let p = &mut self.pieces[i];
                p.sends += 1;
                if p.sends == 2 {
                    self.stats.resent += 1;
                }
                if p.sent.is_none() {
                    p.sent = Some(t);
                    self.out.push_back(TrackerEvent::Left { end, at: t });
                }
            }
            StampKind::Acked => self.on_ack_stamp(i, s.time_ns),
        }
    }

    fn on_ack_stamp(&mut self, i: usize, ns: u64) {
        // Every piece up to i is acknowledged cumulatively.
        let mut covered = 0u32;
        let mut last = None;
        for k in 0..=i {
            let p = self.pieces.pop_front().expect("index within the queue");
            if k < i {
                self.stats.missing_ack += 1;
            }
            if p.sent.is_none() && p.sched.is_none() {
                self.stats.missing_send += 1;
            } else if p.sent.is_none() {
                // Only the scheduled stamp: take it as the send time.
                let at = p.sched.expect("checked");
                self.out.push_back(TrackerEvent::Left { end: p.end, at });
            }
            covered += 1;
            last = Some(p);
        }
        let p = last.expect("at least one piece");
        let t = self.time(ns);
        let tail = self.pieces.front().is_none_or(|q| q.sent.or(q.sched).is_none_or(|s| s >= t));
        let rtt = match (p.sends, p.sent.or(p.sched)) {
            (0 | 1, Some(s)) if t >= s => Some(t.saturating_since(s)),
            _ => None,
        };
        match &mut self.group {
            Some(g) if ns.saturating_sub(g.last_ns) <= ACK_MERGE_NS => {
                g.end = p.end;
                g.last_ns = ns;
                g.pieces += covered;
                g.rtt = rtt;
                g.tail = tail;
            }
            _ => {
                self.close_group();
                self.group = Some(AckGroup { end: p.end, first_ns: ns, last_ns: ns, pieces: covered, rtt, tail });
            }
        }
    }

    fn close_group(&mut self) {
        if let Some(g) = self.group.take() {
            if g.pieces > 1 {
                self.stats.merged_acks += 1;
            }
            self.acked = g.end;
            let at = self.time(g.first_ns);
            self.out.push_back(TrackerEvent::Ack(PieceAck {
                ack: g.end,
                at,
                rtt: g.rtt,
                pieces: g.pieces,
                tail: g.tail,
            }));
        }
    }

    /// Closes the open ACK group if no stamp of the same ACK can still come (`now_ns` is
    /// more than [`ACK_MERGE_NS`] after its last stamp), then drains the events.
    pub fn poll(&mut self, now_ns: u64) -> Option<TrackerEvent> {
        if self.out.is_empty() {
            if let Some(g) = self.group {
                if now_ns.saturating_sub(g.last_ns) > ACK_MERGE_NS {
                    self.close_group();
                }
            }
        }
        self.out.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One error-queue message laid out as the kernel writes it on x86-64: `SCM_TIMESTAMPING`
    /// (3 × 16-byte timespec) then `IP_RECVERR` (`sock_extended_err`, 16 bytes, followed by the
    /// zeroed offender address the kernel appends: a `sockaddr_in`, 16 bytes).
    fn kernel_msg(info: u32, key: u32, sec: i64, nsec: i64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&(16u64 + 48).to_ne_bytes());
        b.extend_from_slice(&1i32.to_ne_bytes());
        b.extend_from_slice(&37i32.to_ne_bytes());
        b.extend_from_slice(&sec.to_ne_bytes());
        b.extend_from_slice(&nsec.to_ne_bytes());
        b.extend_from_slice(&[0u8; 32]);
        b.extend_from_slice(&(16u64 + 32).to_ne_bytes());
        b.extend_from_slice(&0i32.to_ne_bytes());
        b.extend_from_slice(&11i32.to_ne_bytes());
        b.extend_from_slice(&42u32.to_ne_bytes()); // ENOMSG
        b.extend_from_slice(&[4, 0, 0, 0]); // origin TIMESTAMPING, type, code, pad
        b.extend_from_slice(&info.to_ne_bytes());
        b.extend_from_slice(&key.to_ne_bytes());
        b.extend_from_slice(&[0u8; 16]);
        b
    }

    /// The layout `kernel_msg` builds is byte for byte what this kernel writes: one piece on a
    /// loopback connection, its error-queue messages read with `recvmsg(MSG_ERRQUEUE)` and each
    /// compared with `kernel_msg` rebuilt from the parsed kind, key and time (no root needed).
    #[test]
    fn this_kernels_error_queue_messages_are_the_layout_the_tests_build() {
        use std::io::Read;
        use std::os::fd::AsRawFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut peer, _) = l.accept().unwrap();
        c.set_nodelay(true).unwrap();
        let fd = c.as_raw_fd();
        let id_tcp = super::super::sock::enable_tx_timestamps(fd).unwrap();
        let piece = [7u8; 1000];
        // SAFETY: sends from a live buffer of its length.
        let n = unsafe { libc::send(fd, piece.as_ptr().cast(), piece.len(), libc::MSG_EOR) };
        assert_eq!(n, 1000);
        let mut got = [0u8; 1000];
        peer.read_exact(&mut got).unwrap();
        let (mut kinds, t0) = (Vec::new(), std::time::Instant::now());
        while !kinds.contains(&StampKind::Acked) && t0.elapsed() < std::time::Duration::from_secs(2) {
            let mut control = [0u8; 512];
            // SAFETY: msghdr is plain data; control points to a live buffer of its length.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = control.len();
            // SAFETY: `msg` is initialised above and lives for the call.
            if unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) } < 0 {
                std::thread::sleep(std::time::Duration::from_millis(5));
                continue;
            }
            let recorded = &control[..msg.msg_controllen];
            let s = parse_errqueue_msg(recorded).unwrap();
            let info = match s.kind {
                StampKind::Sent => SCM_TSTAMP_SND,
                StampKind::Sched => SCM_TSTAMP_SCHED,
                StampKind::Acked => SCM_TSTAMP_ACK,
            };
            let (sec, nsec) = ((s.time_ns / 1_000_000_000) as i64, (s.time_ns % 1_000_000_000) as i64);
            assert_eq!(recorded, &kernel_msg(info, s.key, sec, nsec)[..], "{s:?}");
            if id_tcp {
                assert_eq!(s.key, 999, "OPT_ID_TCP keys the piece's last byte");
            }
            kinds.push(s.kind);
        }
        assert!(kinds.contains(&StampKind::Acked) && kinds.contains(&StampKind::Sched), "{kinds:?}");
    }

    #[test]
    fn a_recorded_kernel_message_parses_into_kind_key_and_time() {
        let m = kernel_msg(2, 1447, 1_763_880_000, 123_456_789);
        let s = parse_errqueue_msg(&m).unwrap();
        assert_eq!(s, TxStamp { kind: StampKind::Acked, key: 1447, time_ns: 1_763_880_000_123_456_789 });
        assert_eq!(parse_errqueue_msg(&kernel_msg(0, 5, 1, 2)).unwrap().kind, StampKind::Sent);
        assert_eq!(parse_errqueue_msg(&kernel_msg(1, 5, 1, 2)).unwrap().kind, StampKind::Sched);
        assert_eq!(parse_errqueue_msg(&kernel_msg(7, 5, 1, 2)), Err(ParseError::UnknownStampType(7)));
        // A real ICMP error (EHOSTUNREACH from origin ICMP) is not a timestamp.
        let mut icmp = kernel_msg(0, 0, 1, 2);
        icmp[80..84].copy_from_slice(&113u32.to_ne_bytes());
        icmp[84] = 2;
        assert_eq!(parse_errqueue_msg(&icmp), Err(ParseError::NotATimestamp { errno: 113, origin: 2 }));
        // Cut short, or only half of the pair.
        assert_eq!(parse_errqueue_msg(&m[..100]), Err(ParseError::Truncated));
        assert_eq!(parse_errqueue_msg(&m[..64]), Err(ParseError::Incomplete));
    }

    const MSS: u64 = 1000;

    fn tracker_with(pieces: u64) -> PieceTracker {
        let mut t = PieceTracker::new(1_000_000_000, 0);
        for k in 1..=pieces {
            t.on_write(k * MSS);
        }
        t
    }

    fn stamp(kind: StampKind, piece: u64, ns: u64) -> TxStamp {
        TxStamp { kind, key: (piece * MSS - 1) as u32, time_ns: 1_000_000_000 + ns }
    }

    fn drain(t: &mut PieceTracker, now: u64) -> Vec<TrackerEvent> {
        std::iter::from_fn(|| t.poll(1_000_000_000 + now)).collect()
    }

    #[test]
    fn keys_match_pieces_and_each_ack_gives_its_piece_an_arrival_and_rtt() {
        let mut t = tracker_with(3);
        t.on_stamp(stamp(StampKind::Sched, 1, 100));
        t.on_stamp(stamp(StampKind::Sent, 1, 110));
        t.on_stamp(stamp(StampKind::Sent, 2, 300));
        t.on_stamp(stamp(StampKind::Acked, 1, 20_110));
        t.on_stamp(stamp(StampKind::Acked, 2, 40_300));
        let ev = drain(&mut t, 100_000);
        assert_eq!(
            ev,
            vec![
                TrackerEvent::Left { end: 1000, at: Time(110) },
                TrackerEvent::Left { end: 2000, at: Time(300) },
                TrackerEvent::Ack(PieceAck {
                    ack: 1000,
                    at: Time(20_110),
                    rtt: Some(Dur(20_000)),
                    pieces: 1,
                    tail: false
                }),
                TrackerEvent::Ack(PieceAck {
                    ack: 2000,
                    at: Time(40_300),
                    rtt: Some(Dur(40_000)),
                    pieces: 1,
                    tail: true
                }),
            ]
        );
        assert_eq!(t.outstanding(), 1);
        assert_eq!(t.stats().unmatched, 0);
    }

    #[test]
    fn one_delayed_ack_over_two_pieces_is_one_ack_at_the_second_piece() {
        let mut t = tracker_with(4);
        for k in 1..=4 {
            t.on_stamp(stamp(StampKind::Sent, k, k * 1000));
        }
        // Pieces 1 and 2 acknowledged by one ACK (stamps 300 ns apart), 3 and 4 by another.
        t.on_stamp(stamp(StampKind::Acked, 1, 50_000));
        t.on_stamp(stamp(StampKind::Acked, 2, 50_300));
        // Not closed yet: another stamp of the same ACK could still come.
        let ev = drain(&mut t, 50_400);
        assert_eq!(ev.len(), 4, "{ev:?}");
        t.on_stamp(stamp(StampKind::Acked, 3, 90_000));
        t.on_stamp(stamp(StampKind::Acked, 4, 90_200));
        let ev = drain(&mut t, 200_000);
        assert_eq!(
            ev,
            vec![
                TrackerEvent::Ack(PieceAck {
                    ack: 2000,
                    at: Time(50_000),
                    rtt: Some(Dur(50_300 - 2000)),
                    pieces: 2,
                    tail: false
                }),
                TrackerEvent::Ack(PieceAck {
                    ack: 4000,
                    at: Time(90_000),
                    rtt: Some(Dur(90_200 - 4000)),
                    pieces: 2,
                    tail: true
                }),
            ]
        );
        assert_eq!(t.stats().merged_acks, 2);
    }

    #[test]
    fn missing_and_merged_stamps_cost_samples_not_accounting() {
        let mut t = tracker_with(4);
        // Piece 1 merged into piece 2's skb: no stamp of its own; piece 3 only scheduled; the
        // ACK stamp of piece 3 is lost, piece 4's covers it.
        t.on_stamp(stamp(StampKind::Sent, 2, 200));
        t.on_stamp(stamp(StampKind::Sched, 3, 300));
        t.on_stamp(stamp(StampKind::Sent, 4, 400));
        t.on_stamp(stamp(StampKind::Acked, 2, 30_000));
        t.on_stamp(stamp(StampKind::Acked, 4, 60_000));
        // A key that is no piece's last byte (middle of piece 1).
        t.on_stamp(TxStamp { kind: StampKind::Acked, key: 10, time_ns: 1_000_070_000 });
        let ev = drain(&mut t, 200_000);
        let acks: Vec<_> =
            ev.iter().filter_map(|e| if let TrackerEvent::Ack(a) = e { Some(*a) } else { None }).collect();
        assert_eq!(acks.iter().map(|a| a.ack).collect::<Vec<_>>(), vec![2000, 4000]);
        assert!(ev.contains(&TrackerEvent::Left { end: 3000, at: Time(300) }), "{ev:?}");
        let s = t.stats();
        assert_eq!((s.missing_ack, s.missing_send, s.unmatched), (2, 1, 1));
        assert_eq!(t.outstanding(), 0);
    }

    #[test]
    fn a_resent_piece_gives_no_rtt_and_keys_unwrap_past_four_gibibytes() {
        let mut t = tracker_with(1);
        t.on_stamp(stamp(StampKind::Sent, 1, 100));
        t.on_stamp(stamp(StampKind::Sent, 1, 5_000_000));
        t.on_stamp(stamp(StampKind::Acked, 1, 5_020_000));
        let ev = drain(&mut t, 9_000_000);
        assert!(matches!(ev.last(), Some(TrackerEvent::Ack(PieceAck { rtt: None, .. }))));
        assert_eq!(t.stats().resent, 1);
        // Pieces just below and above 2^32: keys wrap, ends do not.
        let mut t = PieceTracker::new(0, 0);
        let a = (1u64 << 32) - 500;
        let b = (1u64 << 32) + 500;
        t.on_write(a);
        t.on_write(b);
        t.on_stamp(TxStamp { kind: StampKind::Acked, key: (a - 1) as u32, time_ns: 10 });
        t.on_stamp(TxStamp { kind: StampKind::Acked, key: (b - 1) as u32, time_ns: 100_000 });
        let acks: Vec<u64> = std::iter::from_fn(|| t.poll(1_000_000))
            .filter_map(|e| if let TrackerEvent::Ack(a) = e { Some(a.ack) } else { None })
            .collect();
        assert_eq!(acks, vec![a, b]);
    }
}
