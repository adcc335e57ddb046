//! The transfer protocol, version 2 (`headroom send` ↔ `headroom recv`, one TCP connection).
//!
//! ```text
//! HELLO    client → server  "HRTX" version u16 flags u16 key u64 bytes u64 time_ms u64
//!                           cc_len u8 cc [cc_len]                     (33 + cc_len bytes)
//!          flags: 1 = reverse (the server sends), 2 = verify (keyed payload)
//!          bytes / time_ms: the reverse sender's limits (0: none; at least one is set)
//!          cc: the reverse sender's congestion control ("" = the kernel's default)
//! REPLY    server → client  "HRTX" version u16 status u8 msg_len u16 msg [msg_len]
//!          status 0 = accepted; otherwise refused with a human-readable message
//! DATA     sender → receiver: blocks `len u32, 0u32, payload [len]`, ended by a block of len 0
//! PROGRESS receiver → sender "HRTP" payload u64 (12 bytes), while data flows, see below
//! TRAILER  receiver → sender "HRTE" payload u64 mismatched u64 first_bad u64 has_bad u8 (29 bytes)
//! ```
//!
//! PROGRESS (new in version 2) is the receiver's running count of payload received. Through
//! split-TCP proxies the sender's last byte is acknowledged by the first proxy long before the
//! receiver has it (on the testbed chain, 80 s after a 10 s send), so the sender, waiting for
//! the TRAILER, needs to tell a receiver still getting data from a dead one: it waits as long
//! as PROGRESS records keep showing more payload, and reports them meanwhile. The receiver
//! writes one at most once a second, without blocking (`MSG_DONTWAIT`), and only when all it
//! wrote before has been acknowledged (`SIOCOUTQ` = 0): the sender reads nothing until its
//! last byte is written, so an unbounded stream of records would fill its receive buffer and
//! then the receiver's send buffer, and a blocking write there would deadlock the transfer.
//! A full buffer closes the sender's window, the last record stays unacknowledged, and the
//! receiver stops writing records until the sender reads them.//!
//! Integers are big-endian. Framing the data makes a clean end distinguishable from a peer that
//! died (a process that exits also closes with a FIN): only the zero-length block ends a
//! transfer. The payload of block after block is one stream; with `verify` its byte at offset
//! `i` is [`super::pattern`]'s keyed byte `i`, so a corrupted, lost, duplicated or reordered byte
//! is counted as a mismatch.

use std::io::{self, Read, Write};

pub const MAGIC: [u8; 4] = *b"HRTX";
pub const TRAILER_MAGIC: [u8; 4] = *b"HRTE";
pub const PROGRESS_MAGIC: [u8; 4] = *b"HRTP";
pub const VERSION: u16 = 2;
/// Longest congestion-control name (the kernel's `TCP_CA_NAME_MAX` is 16).
pub const MAX_CC_LEN: usize = 16;
pub const FLAG_REVERSE: u16 = 1;
pub const FLAG_VERIFY: u16 = 2;
pub const BLOCK_HEADER_LEN: usize = 8;
/// Largest payload of one data block.
pub const MAX_BLOCK: u32 = 1 << 20;
pub const TRAILER_LEN: usize = 29;
pub const PROGRESS_LEN: usize = 12;

/// What the client asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub reverse: bool,
    pub verify: bool,
    pub key: u64,
    /// The reverse sender's byte limit.
    pub bytes: Option<u64>,
    /// The reverse sender's time limit in milliseconds.
    pub time_ms: Option<u64>,
    /// The reverse sender's congestion control.
    pub cc: Option<String>,
}

/// The server's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Accepted,
    Refused(String),
}

/// The receiver's account of the payload, sent after the end block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Trailer {
    pub payload: u64,
    pub mismatched: u64,
    pub first_bad: Option<u64>,
}

/// What the receiver sends back after the handshake: progress while data flows, then the
/// account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Account {
    /// Payload received so far.
    Progress(u64),
    Trailer(Trailer),
}

/// Encodes a PROGRESS record.
pub fn progress(payload: u64) -> [u8; PROGRESS_LEN] {
    let mut b = [0u8; PROGRESS_LEN];
    b[0..4].copy_from_slice(&PROGRESS_MAGIC);
    b[4..12].copy_from_slice(&payload.to_be_bytes());
    b
}

impl Account {
    /// Decodes the record at the start of `b`: `Ok(None)` while `b` holds only part of one,
    /// else the record and its length. Anything else than a PROGRESS or a TRAILER is an error.
    pub fn decode(b: &[u8]) -> io::Result<Option<(Account, usize)>> {
        if b.len() < 4 {
            return Ok(None);
        }
        let magic: [u8; 4] = b[0..4].try_into().expect("4 bytes");
        if magic == PROGRESS_MAGIC {
            if b.len() < PROGRESS_LEN {
                return Ok(None);
            }
            let payload = u64::from_be_bytes(b[4..12].try_into().expect("8 bytes"));
            Ok(Some((Account::Progress(payload), PROGRESS_LEN)))
        } else if magic == TRAILER_MAGIC {
            if b.len() < TRAILER_LEN {
                return Ok(None);
            }
            Ok(Some((Account::Trailer(Trailer::read(&mut &b[..TRAILER_LEN])?), TRAILER_LEN)))
        } else {
            Err(bad("bad record from the receiver (neither progress nor trailer)"))
        }
    }
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

impl Hello {
    pub fn encode(&self) -> io::Result<Vec<u8>> {
        let cc = self.cc.as_deref().unwrap_or("");
        if cc.len() > MAX_CC_LEN {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("congestion control name `{cc}` is longer than {MAX_CC_LEN} bytes"),
            ));
        }
        let mut b = Vec::with_capacity(33 + cc.len());
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&VERSION.to_be_bytes());
        let flags = if self.reverse { FLAG_REVERSE } else { 0 } | if self.verify { FLAG_VERIFY } else { 0 };
        b.extend_from_slice(&flags.to_be_bytes());
        b.extend_from_slice(&self.key.to_be_bytes());
        b.extend_from_slice(&self.bytes.unwrap_or(0).to_be_bytes());
        b.extend_from_slice(&self.time_ms.unwrap_or(0).to_be_bytes());
        b.push(cc.len() as u8);
        b.extend_from_slice(cc.as_bytes());
        Ok(b)
    }

    /// Reads and checks a HELLO. A wrong magic or version is an error naming what came.
    pub fn read(r: &mut impl Read) -> io::Result<Hello> {
        let mut h = [0u8; 33];
        r.read_exact(&mut h)?;
        if h[0..4] != MAGIC {
            return Err(bad("not a headroom transfer client (bad magic)"));
        }
        let version = u16::from_be_bytes([h[4], h[5]]);
        if version != VERSION {
            return Err(bad(format!("unsupported protocol version {version} (this side speaks {VERSION})")));
        }
        let flags = u16::from_be_bytes([h[6], h[7]]);
        if flags & !(FLAG_REVERSE | FLAG_VERIFY) != 0 {
            return Err(bad(format!("unknown flags {flags:#x}")));
        }
        let u = |i: usize| u64::from_be_bytes(h[i..i + 8].try_into().expect("8 bytes"));
        let cc_len = h[32] as usize;
        if cc_len > MAX_CC_LEN {
            return Err(bad(format!("congestion control name of {cc_len} bytes (at most {MAX_CC_LEN})")));
        }
        let mut cc = vec![0u8; cc_len];
        r.read_exact(&mut cc)?;
        let cc = String::from_utf8(cc).map_err(|_| bad("congestion control name is not UTF-8"))?;
        let hello = Hello {
            reverse: flags & FLAG_REVERSE != 0,
            verify: flags & FLAG_VERIFY != 0,
            key: u(8),
            bytes: Some(u(16)).filter(|&v| v > 0),
            time_ms: Some(u(24)).filter(|&v| v > 0),
            cc: Some(cc).filter(|c| !c.is_empty()),
        };
        if hello.reverse && hello.bytes.is_none() && hello.time_ms.is_none() {
            return Err(bad("a reverse transfer needs a byte or time limit"));
        }
        Ok(hello)
    }
}

impl Reply {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&VERSION.to_be_bytes());
        match self {
            Reply::Accepted => {
                b.push(0);
                b.extend_from_slice(&0u16.to_be_bytes());
            }
            Reply::Refused(msg) => {
                let m = &msg.as_bytes()[..msg.len().min(1024)];
                b.push(1);
                b.extend_from_slice(&(m.len() as u16).to_be_bytes());
                b.extend_from_slice(m);
            }
        }
        b
    }

    pub fn read(r: &mut impl Read) -> io::Result<Reply> {
        let mut h = [0u8; 9];
        r.read_exact(&mut h)?;
        if h[0..4] != MAGIC {
            return Err(bad("the peer is not a headroom receiver (bad magic in its reply)"));
        }
        let version = u16::from_be_bytes([h[4], h[5]]);
        if version != VERSION {
            return Err(bad(format!("the receiver speaks protocol version {version}, this sender {VERSION}")));
        }
        let len = u16::from_be_bytes([h[7], h[8]]) as usize;
        if len > 1024 {
            return Err(bad("reply message too long"));
        }
        let mut m = vec![0u8; len];
        r.read_exact(&mut m)?;
        match h[6] {
            0 => Ok(Reply::Accepted),
            _ => Ok(Reply::Refused(String::from_utf8_lossy(&m).into_owned())),
        }
    }
}

impl Trailer {
    pub fn encode(&self) -> [u8; TRAILER_LEN] {
        let mut b = [0u8; TRAILER_LEN];
        b[0..4].copy_from_slice(&TRAILER_MAGIC);
        b[4..12].copy_from_slice(&self.payload.to_be_bytes());
        b[12..20].copy_from_slice(&self.mismatched.to_be_bytes());
        b[20..28].copy_from_slice(&self.first_bad.unwrap_or(0).to_be_bytes());
        b[28] = self.first_bad.is_some() as u8;
        b
    }

    pub fn read(r: &mut impl Read) -> io::Result<Trailer> {
        let mut b = [0u8; TRAILER_LEN];
        r.read_exact(&mut b)?;
        if b[0..4] != TRAILER_MAGIC {
            return Err(bad("bad trailer from the receiver"));
        }
        let u = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Ok(Trailer { payload: u(4), mismatched: u(12), first_bad: (b[28] != 0).then(|| u(20)) })
    }
}

/// Writes a whole buffer (retrying after a send timeout while `keep_going` says so).
pub fn write_all(w: &mut impl Write, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match w.write(buf) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "connection closed")),
            Ok(n) => buf = &buf[n..],
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_reply_and_trailer_round_trip_and_bad_input_is_refused() {
        let h = Hello { reverse: true, verify: true, key: 7, bytes: Some(10), time_ms: None, cc: Some("reno".into()) };
        let b = h.encode().unwrap();
        assert_eq!(Hello::read(&mut &b[..]).unwrap(), h);
        let mut wrong = b.clone();
        wrong[5] = 9;
        assert!(Hello::read(&mut &wrong[..]).unwrap_err().to_string().contains("version 9"));
        let mut no_limit = Hello { bytes: None, ..h.clone() }.encode().unwrap();
        assert!(Hello::read(&mut &no_limit[..]).is_err());
        no_limit[0] = b'X';
        assert!(Hello::read(&mut &no_limit[..]).unwrap_err().to_string().contains("magic"));
        assert!(Hello { cc: Some("x".repeat(17)), ..h }.encode().is_err());
        for r in [Reply::Accepted, Reply::Refused("no such cc".into())] {
            assert_eq!(Reply::read(&mut &r.encode()[..]).unwrap(), r);
        }
        let t = Trailer { payload: 5, mismatched: 2, first_bad: Some(0) };
        assert_eq!(Trailer::read(&mut &t.encode()[..]).unwrap(), t);
        let t = Trailer { first_bad: None, ..t };
        assert_eq!(Trailer::read(&mut &t.encode()[..]).unwrap(), t);
        // Progress records, then the trailer, decoded from one buffer and from its prefixes.
        let mut stream = progress(7).to_vec();
        stream.extend_from_slice(&progress(1 << 40));
        stream.extend_from_slice(&t.encode());
        let mut got = Vec::new();
        let mut at = 0;
        while let Some((record, len)) = Account::decode(&stream[at..]).unwrap() {
            got.push(record);
            at += len;
        }
        assert_eq!(got, [Account::Progress(7), Account::Progress(1 << 40), Account::Trailer(t)]);
        assert_eq!(at, stream.len());
        for cut in [0, 3, 4, 11] {
            assert_eq!(Account::decode(&stream[..cut]).unwrap(), None, "progress cut at {cut}");
        }
        assert_eq!(Account::decode(&stream[24..24 + TRAILER_LEN - 1]).unwrap(), None, "trailer cut");
        assert!(Account::decode(b"HRTXxxxxxxxxxxxx").is_err());
    }
}
