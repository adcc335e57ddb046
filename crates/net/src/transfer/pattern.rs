//! The data stream: the keyed pseudo-random payload, the sender's framed [`Source`] and the
//! receiver's [`Sink`] that parses the blocks and checks the payload.
//!
//! Payload byte `i` is byte `i mod 8` (little-endian) of `splitmix64(key ⊕ ⌊i/8⌋ · φ)`: it depends
//! on the key and on the byte's offset only, so the receiver can check any byte it gets
//! without state, and a corrupted, lost, duplicated or reordered piece shows as mismatches at
//! its offsets. Without verification the payload is zeros and the receiver only counts.

use super::wire::{BLOCK_HEADER_LEN, MAX_BLOCK};

const PHI: u64 = 0x9E37_79B9_7F4A_7C15;

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(PHI);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn word(key: u64, w: u64) -> [u8; 8] {
    splitmix64(key ^ w.wrapping_mul(PHI)).to_le_bytes()
}

/// Fills `buf` with the keyed payload starting at payload offset `offset`.
pub fn fill(key: u64, offset: u64, buf: &mut [u8]) {
    let mut i = 0;
    let mut off = offset;
    while i < buf.len() {
        let w = word(key, off / 8);
        let start = (off % 8) as usize;
        let n = (8 - start).min(buf.len() - i);
        buf[i..i + n].copy_from_slice(&w[start..start + n]);
        i += n;
        off += n as u64;
    }
}

/// Counts the bytes of `buf` that differ from the keyed payload at `offset`; returns the count
/// and the offset of the first differing byte.
pub fn check(key: u64, offset: u64, buf: &[u8]) -> (u64, Option<u64>) {
    let mut bad = 0u64;
    let mut first = None;
    let mut i = 0;
    let mut off = offset;
    while i < buf.len() {
        let w = word(key, off / 8);
        let start = (off % 8) as usize;
        let n = (8 - start).min(buf.len() - i);
        for k in 0..n {
            if buf[i + k] != w[start + k] {
                bad += 1;
                first.get_or_insert(off + k as u64);
            }
        }
        i += n;
        off += n as u64;
    }
    (bad, first)
}

/// How much payload a sender sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Bytes(u64),
    /// Until [`Source::finish`] is called.
    Open,
}

/// The sender's framed stream: produces the next bytes of blocks + end block on demand.
#[derive(Clone, Debug)]
pub struct Source {
    key: u64,
    verify: bool,
    block: u32,
    limit: Limit,
    /// Payload produced so far.
    payload: u64,
    /// Bytes of the current block still to produce (payload), and of its header.
    in_block: u64,
    header: [u8; BLOCK_HEADER_LEN],
    header_left: usize,
    finishing: bool,
    done: bool,
}

impl Source {
    /// `block`: payload bytes per block (at most [`MAX_BLOCK`]).
    pub fn new(key: u64, verify: bool, limit: Limit, block: u32) -> Source {
        Source {
            key,
            verify,
            block: block.clamp(1, MAX_BLOCK),
            limit,
            payload: 0,
            in_block: 0,
            header: [0; BLOCK_HEADER_LEN],
            header_left: 0,
            finishing: false,
            done: false,
        }
    }

    /// Payload bytes produced so far.
    pub fn payload(&self) -> u64 {
        self.payload
    }

    /// Ends the stream after the current block (time limit reached, or interrupted).
    pub fn finish(&mut self) {
        self.finishing = true;
    }

    /// Every byte, end block included, has been produced.
    pub fn is_done(&self) -> bool {
        self.done
    }

    fn start_block(&mut self) {
        let left = match self.limit {
            Limit::Bytes(b) => b - self.payload,
            Limit::Open => u64::MAX,
        };
        let len = if self.finishing { 0 } else { left.min(self.block as u64) as u32 };
        self.header[..4].copy_from_slice(&len.to_be_bytes());
        self.header[4..].copy_from_slice(&0u32.to_be_bytes());
        self.header_left = BLOCK_HEADER_LEN;
        self.in_block = len as u64;
    }

    /// Writes the next bytes of the stream into `buf`; returns how many (0: done).
    pub fn produce(&mut self, buf: &mut [u8]) -> usize {
        let mut n = 0;
        while n < buf.len() && !self.done {
            if self.header_left == 0 && self.in_block == 0 {
                self.start_block();
            }
            if self.header_left > 0 {
                let from = BLOCK_HEADER_LEN - self.header_left;
                let k = self.header_left.min(buf.len() - n);
                buf[n..n + k].copy_from_slice(&self.header[from..from + k]);
                self.header_left -= k;
                n += k;
                if self.header_left == 0 && self.in_block == 0 {
                    self.done = true;
                }
                continue;
            }
            let k = (self.in_block.min((buf.len() - n) as u64)) as usize;
            if self.verify {
                fill(self.key, self.payload, &mut buf[n..n + k]);
            } else {
                buf[n..n + k].fill(0);
            }
            self.payload += k as u64;
            self.in_block -= k as u64;
            n += k;
        }
        n
    }
}

/// What went wrong in the framing (a corrupted header is corruption too).
#[derive(Debug, PartialEq, Eq)]
pub struct FramingError(pub String);

/// The receiver's parser and checker.
#[derive(Clone, Debug)]
pub struct Sink {
    key: u64,
    verify: bool,
    header: [u8; BLOCK_HEADER_LEN],
    header_have: usize,
    in_block: u64,
    pub payload: u64,
    pub mismatched: u64,
    pub first_bad: Option<u64>,
    pub ended: bool,
}

impl Sink {
    pub fn new(key: u64, verify: bool) -> Sink {
        Sink {
            key,
            verify,
            header: [0; BLOCK_HEADER_LEN],
            header_have: 0,
            in_block: 0,
            payload: 0,
            mismatched: 0,
            first_bad: None,
            ended: false,
        }
    }

    /// Consumes received bytes; returns how many belonged to the stream (bytes after the end
    /// block are left to the caller: the trailer in reverse mode).
    pub fn consume(&mut self, mut buf: &[u8]) -> Result<usize, FramingError> {
        let total = buf.len();
        while !buf.is_empty() && !self.ended {
            if self.in_block == 0 {
                let k = (BLOCK_HEADER_LEN - self.header_have).min(buf.len());
                self.header[self.header_have..self.header_have + k].copy_from_slice(&buf[..k]);
                self.header_have += k;
                buf = &buf[k..];
                if self.header_have < BLOCK_HEADER_LEN {
                    break;
                }
                self.header_have = 0;
                let len = u32::from_be_bytes(self.header[..4].try_into().expect("4 bytes"));
                let pad = u32::from_be_bytes(self.header[4..].try_into().expect("4 bytes"));
                if pad != 0 || len > MAX_BLOCK {
                    return Err(FramingError(format!(
                        "corrupted block header at payload offset {} (length {len}, reserved {pad:#x})",
                        self.payload
                    )));
                }
                if len == 0 {
                    self.ended = true;
                }
                self.in_block = len as u64;
                continue;
            }
            let k = self.in_block.min(buf.len() as u64) as usize;
            if self.verify {
                let (bad, first) = check(self.key, self.payload, &buf[..k]);
                self.mismatched += bad;
                if self.first_bad.is_none() {
                    self.first_bad = first;
                }
            }
            self.payload += k as u64;
            self.in_block -= k as u64;
            buf = &buf[k..];
        }
        Ok(total - buf.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(limit: Limit, block: u32, verify: bool, chunk: usize) -> Vec<u8> {
        let mut s = Source::new(42, verify, limit, block);
        let mut out = Vec::new();
        let mut buf = vec![0u8; chunk];
        for _ in 0..100_000 {
            let n = s.produce(&mut buf);
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        assert!(s.is_done());
        out
    }

    #[test]
    fn the_stream_parses_back_whatever_the_chunking_and_checks_clean() {
        for (chunk, rchunk) in [(1, 7), (13, 1), (1000, 4096), (4096, 3)] {
            let data = stream(Limit::Bytes(10_007), 1000, true, chunk);
            assert_eq!(data.len(), 10_007 + 11 * BLOCK_HEADER_LEN + BLOCK_HEADER_LEN);
            let mut sink = Sink::new(42, true);
            for c in data.chunks(rchunk) {
                sink.consume(c).unwrap();
            }
            assert!(sink.ended);
            assert_eq!((sink.payload, sink.mismatched, sink.first_bad), (10_007, 0, None));
        }
    }

    #[test]
    fn corruption_and_reordering_are_counted_at_their_offsets() {
        let data = stream(Limit::Bytes(5000), 1000, true, 512);
        // Flip one payload byte: payload offset 1234 is in block 2 (after two headers).
        let mut c = data.clone();
        c[1234 + 2 * BLOCK_HEADER_LEN] ^= 0x10;
        let mut sink = Sink::new(42, true);
        sink.consume(&c).unwrap();
        assert_eq!((sink.mismatched, sink.first_bad), (1, Some(1234)));
        // Swap two 16-byte pieces inside block 0.
        let mut r = data.clone();
        let (a, b) = (BLOCK_HEADER_LEN + 100, BLOCK_HEADER_LEN + 300);
        let tmp: Vec<u8> = r[a..a + 16].to_vec();
        r.copy_within(b..b + 16, a);
        r[b..b + 16].copy_from_slice(&tmp);
        let mut sink = Sink::new(42, true);
        sink.consume(&r).unwrap();
        assert!(sink.mismatched >= 30, "{}", sink.mismatched);
        assert_eq!(sink.first_bad, Some(100));
        // The wrong key fails everywhere (up to chance equal bytes).
        let mut sink = Sink::new(43, true);
        sink.consume(&data).unwrap();
        assert!(sink.mismatched > 4900);
        // A corrupted header is a framing error.
        let mut h = data;
        h[BLOCK_HEADER_LEN + 1000 + 5] = 1;
        assert!(Sink::new(42, true).consume(&h).is_err());
    }

    #[test]
    fn an_open_stream_ends_after_the_current_block_when_finished() {
        let mut s = Source::new(1, false, Limit::Open, 100);
        let mut buf = [0u8; 150];
        assert_eq!(s.produce(&mut buf), 150);
        s.finish();
        let mut rest = Vec::new();
        loop {
            let n = s.produce(&mut buf);
            if n == 0 {
                break;
            }
            rest.extend_from_slice(&buf[..n]);
        }
        // 150 = header + 100 + header + 34; rest = 66 of block 2 + end header.
        assert_eq!(rest.len(), 66 + BLOCK_HEADER_LEN);
        assert_eq!(s.payload(), 200);
    }
}
