//! Payload bytes as runs of the servers' keyed streams.
//!
//! Every byte a server sends is byte `i` of its flow's stream `key`, whose value is
//! [`content`]`(key, i)`. Instead of carrying and copying each byte (a 1460-byte segment
//! was generated, copied into the packet, copied again at every proxy and checked byte by byte
//! at the client: two fifths of an overlay run's time), a segment carries the runs of stream
//! bytes it holds ([`Run`]: stream, first index, length) and buffers hold runs ([`Runs`]).
//! Relaying still moves exactly the bytes the proxy received, in the order it received them, and
//! the client still checks that byte `n` of its transfer is byte `n` of its server's stream:
//! a run that says so is right as a whole; any other run is compared byte by byte, so the count
//! of mismatched bytes is the one a byte-by-byte comparison of the values gives.

use std::collections::VecDeque;

/// Byte `i` of the stream identified by `key`: what the server sends and the client checks.
pub fn content(key: u64, i: u64) -> u8 {
    let x = (i ^ key.wrapping_mul(0x9E37_79B9_7F4A_7C15)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x >> 56) as u8
}

/// Bytes `from..from + len` of the stream `key`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub key: u64,
    pub from: u64,
    pub len: u64,
}

impl Run {
    /// The bytes `skip..skip + len` of this run.
    fn part(self, skip: u64, len: u64) -> Run {
        Run { key: self.key, from: self.from + skip, len }
    }

    /// Bytes of this run that differ from bytes `at..at + len` of the stream `key` (compared
    /// byte by byte only when the run is not that very stretch of that stream).
    pub fn mismatches(self, key: u64, at: u64) -> u64 {
        if self.key == key && self.from == at {
            return 0;
        }
        (0..self.len).filter(|&j| content(self.key, self.from + j) != content(key, at + j)).count() as u64
    }
}

/// A sequence of bytes held as runs; a run that continues the last one (same stream, next
/// index) is merged into it, so a relayed stream stays one run however it was segmented.
#[derive(Clone, Debug, Default)]
pub struct Runs {
    runs: VecDeque<Run>,
    len: u64,
}

impl Runs {
    /// Bytes held.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `r` after the bytes held.
    pub fn push(&mut self, r: Run) {
        if r.len == 0 {
            return;
        }
        self.len += r.len;
        if let Some(last) = self.runs.back_mut() {
            if last.key == r.key && last.from + last.len == r.from {
                last.len += r.len;
                return;
            }
        }
        self.runs.push_back(r);
    }

    /// Drops the first `n` bytes (all of them if fewer are held).
    pub fn drain_front(&mut self, mut n: u64) {
        while n > 0 {
            let Some(first) = self.runs.front_mut() else { break };
            let k = n.min(first.len);
            first.from += k;
            first.len -= k;
            self.len -= k;
            n -= k;
            if first.len == 0 {
                self.runs.pop_front();
            }
        }
    }

    /// The runs of bytes `start..end` (clamped to the bytes held), in order.
    pub fn range(&self, start: u64, end: u64) -> impl Iterator<Item = Run> + '_ {
        clip(self.runs.iter(), start, end)
    }

    /// A copy of bytes `start..end` as a segment's payload.
    pub fn payload(&self, start: u64, end: u64) -> Payload {
        let mut p = Payload::EMPTY;
        for r in self.range(start, end) {
            p.push(r);
        }
        p
    }
}

/// The bytes of one segment: one run, or (when the bytes it was cut from came from several
/// places, which a correct relay never produces) several.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Payload {
    first: Run,
    more: Vec<Run>,
}

impl Payload {
    /// No bytes (a window probe).
    pub const EMPTY: Payload = Payload { first: Run { key: 0, from: 0, len: 0 }, more: Vec::new() };

    /// Bytes `from..from + len` of the stream `key`.
    pub fn of(key: u64, from: u64, len: u64) -> Payload {
        Payload { first: Run { key, from, len }, more: Vec::new() }
    }

    /// Bytes carried.
    pub fn len(&self) -> u64 {
        self.first.len + self.more.iter().map(|r| r.len).sum::<u64>()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn push(&mut self, r: Run) {
        if self.first.len == 0 {
            self.first = r;
        } else {
            self.more.push(r);
        }
    }

    /// The runs of the bytes from `skip` on, in order.
    pub fn runs_from(&self, skip: u64) -> impl Iterator<Item = Run> + '_ {
        clip(std::iter::once(&self.first).chain(&self.more), skip, u64::MAX)
    }
}

/// The parts of `runs` (consecutive stretches of one byte sequence) that hold bytes
/// `start..end` of that sequence, in order.
fn clip<'a>(runs: impl Iterator<Item = &'a Run> + 'a, start: u64, end: u64) -> impl Iterator<Item = Run> + 'a {
    let mut at = 0;
    runs.filter_map(move |r| {
        let (lo, hi) = (at, at + r.len);
        at = hi;
        let (a, b) = (start.max(lo), end.min(hi));
        (a < b).then(|| r.part(a - lo, b - a))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_merge_drain_and_cut_like_the_bytes_they_stand_for() {
        let mut b = Runs::default();
        b.push(Run { key: 7, from: 0, len: 1000 });
        b.push(Run { key: 7, from: 1000, len: 460 });
        b.push(Run { key: 9, from: 5, len: 100 });
        assert_eq!(b.len(), 1560);
        assert_eq!(b.range(0, b.len()).count(), 2, "a continuation merges, another stream does not");
        let p = b.payload(1400, 1500);
        assert_eq!(p.len(), 100);
        let runs: Vec<Run> = p.runs_from(10).collect();
        assert_eq!(runs, [Run { key: 7, from: 1410, len: 50 }, Run { key: 9, from: 5, len: 40 }]);
        b.drain_front(1470);
        assert_eq!(b.len(), 90);
        assert_eq!(b.payload(0, 1000), Payload::of(9, 15, 90), "clamped to the bytes held");
    }

    #[test]
    fn a_run_counts_the_bytes_whose_values_differ() {
        assert_eq!(Run { key: 3, from: 100, len: 50 }.mismatches(3, 100), 0);
        let shifted = Run { key: 3, from: 101, len: 500 };
        let by_byte = (0..500).filter(|&j| content(3, 101 + j) != content(3, 100 + j)).count() as u64;
        assert_eq!(shifted.mismatches(3, 100), by_byte);
        assert!(by_byte > 400, "a shifted stream shows: {by_byte}");
        assert!(Run { key: 4, from: 100, len: 500 }.mismatches(3, 100) > 400, "another stream shows");
    }
}
