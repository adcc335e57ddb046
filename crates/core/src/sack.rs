//! Selective acknowledgements: the receiver's SACK blocks (RFC 2018) and the sender's
//! scoreboard and loss-recovery rules (RFC 6675), sans-IO.
//!
//! # Receiver ([`ReceiverSack`])
//! The receiver reports up to [`MAX_BLOCKS`] blocks of contiguous data it holds above the
//! cumulative ACK (three: a TCP header with timestamps has room for three). RFC 2018 §4: the
//! first block contains the segment that triggered this ACK; the others repeat the most recently
//! reported blocks, so that a block survives the loss of a few ACKs. headroom keeps the starts of
//! the most recently arrived out-of-order segments in order of arrival and reports the blocks
//! that contain them, newest first, then fills the remaining places with the highest blocks.
//! (The arrival order of blocks stands in for RFC 2018's "most recently reported".)
//!
//! # Sender ([`Scoreboard`])
//! The scoreboard is the set of byte ranges above `snd_una` that the receiver has SACKed, kept
//! as disjoint sorted ranges. On it RFC 6675 defines (with `DupThresh` = 3):
//! - `IsLost(seq)`: `DupThresh` discontiguous SACKed ranges above `seq`, or more than
//!   `(DupThresh − 1) × SMSS` SACKed bytes above it ([`Scoreboard::is_lost`]);
//! - `SetPipe()`: the data in the network, every segment between `snd_una` and `HighData` that
//!   is not SACKed counts once if it is not lost, and once more if it was retransmitted
//!   ([`Scoreboard::pipe`]);
//! - `NextSeg()`: what to send next during recovery: (1) the first unSACKed segment above
//!   `HighRxt` that is lost; (2) new data; (3) the first unSACKed segment above `HighRxt` below
//!   the highest SACKed byte ([`Scoreboard::next_seg`]).
//!
//! Choices RFC 6675 leaves open: the rescue retransmission (rule 4) is not made; segments are
//! whole (the simulator's segments start on multiples of the MSS, so a SACK block never splits
//! one); the scoreboard is kept across a retransmission timeout (RFC 2018 §8 lets a sender clear
//! it in case the receiver reneges; headroom's receivers never renege, and Linux keeps it too),
//! so go-back-N after a timeout skips what the receiver already holds.

/// SACK blocks an ACK carries at most.
pub const MAX_BLOCKS: usize = 3;
/// RFC 6675's `DupThresh`.
pub const DUP_THRESH: u64 = 3;

/// Up to [`MAX_BLOCKS`] SACK blocks `[start, end)`, most important first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SackBlocks {
    len: u8,
    blocks: [(u64, u64); MAX_BLOCKS],
}

impl SackBlocks {
    pub const NONE: SackBlocks = SackBlocks { len: 0, blocks: [(0, 0); MAX_BLOCKS] };

    /// Appends a block; ignored when full or empty.
    pub fn push(&mut self, start: u64, end: u64) {
        if (self.len as usize) < MAX_BLOCKS && end > start {
            self.blocks[self.len as usize] = (start, end);
            self.len += 1;
        }
    }
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.blocks[..self.len as usize].iter().copied()
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn len(&self) -> usize {
        self.len as usize
    }
}

/// The receiver's side: the data it holds above the cumulative ACK, and which of it arrived
/// most recently.
#[derive(Clone, Debug, Default)]
pub struct ReceiverSack {
    /// Ranges held above `rcv_nxt` (the same range arithmetic as the sender's scoreboard).
    held: Scoreboard,
    /// Starts of the most recently arrived out-of-order segments, newest first.
    recent: Vec<u64>,
}

impl ReceiverSack {
    pub fn new() -> ReceiverSack {
        ReceiverSack::default()
    }

    /// A segment `[seq, end)` arrived above the cumulative ACK `rcv_nxt` (out of order).
    pub fn on_out_of_order(&mut self, seq: u64, end: u64) {
        self.held.insert(seq, end);
        self.recent.retain(|&s| s != seq);
        self.recent.insert(0, seq);
        self.recent.truncate(4 * MAX_BLOCKS);
    }

    /// The blocks for an ACK with cumulative ACK `rcv_nxt` (data below it is forgotten).
    pub fn blocks(&mut self, rcv_nxt: u64) -> SackBlocks {
        self.held.on_ack(rcv_nxt, &SackBlocks::NONE);
        self.recent.retain(|&s| s >= rcv_nxt);
        let mut out = SackBlocks::NONE;
        let recent = self.recent.iter().filter_map(|&seq| self.held.range_containing(seq));
        for b in recent.chain(self.held.ranges().iter().rev().copied()) {
            if out.len() == MAX_BLOCKS {
                break;
            }
            if !out.iter().any(|o| o == b) {
                out.push(b.0, b.1);
            }
        }
        out
    }
}

/// The sender's record of SACKed data above `snd_una` (RFC 6675 §3).
#[derive(Clone, Debug, Default)]
pub struct Scoreboard {
    /// Disjoint SACKed ranges `[start, end)`, sorted.
    ranges: Vec<(u64, u64)>,
}

impl Scoreboard {
    pub fn new() -> Scoreboard {
        Scoreboard::default()
    }

    /// Records an ACK: the cumulative ACK `snd_una` and its SACK blocks.
    pub fn on_ack(&mut self, snd_una: u64, blocks: &SackBlocks) {
        for (s, e) in blocks.iter() {
            let (s, e) = (s.max(snd_una), e);
            if e > s {
                self.insert(s, e);
            }
        }
        self.ranges.retain(|&(_, e)| e > snd_una);
        if let Some(first) = self.ranges.first_mut() {
            first.0 = first.0.max(snd_una);
        }
    }

    /// Adds the range `[s, e)`, merging it with those it touches.
    pub fn insert(&mut self, s: u64, e: u64) {
        let i = self.ranges.partition_point(|&(_, re)| re < s);
        let mut j = i;
        let (mut ns, mut ne) = (s, e);
        while j < self.ranges.len() && self.ranges[j].0 <= e {
            ns = ns.min(self.ranges[j].0);
            ne = ne.max(self.ranges[j].1);
            j += 1;
        }
        self.ranges.splice(i..j, [(ns, ne)]);
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The SACKed ranges, lowest first.
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }

    /// Whether the byte `seq` was SACKed.
    pub fn is_sacked(&self, seq: u64) -> bool {
        let i = self.ranges.partition_point(|&(_, e)| e <= seq);
        self.ranges.get(i).is_some_and(|&(s, _)| s <= seq)
    }

    /// The SACKed range that contains `seq`.
    pub fn range_containing(&self, seq: u64) -> Option<(u64, u64)> {
        let i = self.ranges.partition_point(|&(_, e)| e <= seq);
        self.ranges.get(i).copied().filter(|&(s, _)| s <= seq)
    }

    /// SACKed bytes in all.
    pub fn sacked_bytes(&self) -> u64 {
        self.ranges.iter().map(|&(s, e)| e - s).sum()
    }

    /// SACKed bytes below `seq`.
    pub fn sacked_below(&self, seq: u64) -> u64 {
        self.ranges.iter().take_while(|r| r.0 < seq).map(|&(s, e)| e.min(seq) - s).sum()
    }

    /// The highest SACKed byte + 1 (0 when nothing is SACKed).
    pub fn highest_sacked(&self) -> u64 {
        self.ranges.last().map_or(0, |r| r.1)
    }

    /// RFC 6675 `IsLost(seq)`.
    pub fn is_lost(&self, seq: u64, mss: u64) -> bool {
        let i = self.ranges.partition_point(|&(_, e)| e <= seq);
        let mut bytes = 0;
        let mut count = 0;
        for &(s, e) in &self.ranges[i..] {
            bytes += e - s.max(seq + 1);
            count += 1;
            if count >= DUP_THRESH || bytes > (DUP_THRESH - 1) * mss {
                return true;
            }
        }
        false
    }

    /// RFC 6675 `SetPipe()` over the segments from `snd_una` to `high_data`; a segment at or
    /// below `high_rxt` was retransmitted in this recovery. `seg_len(seq)` gives the length of
    /// the segment starting at `seq`.
    pub fn pipe(&self, snd_una: u64, high_data: u64, high_rxt: u64, mss: u64, seg_len: impl Fn(u64) -> u64) -> u64 {
        // One pass up the segments; the SACKed bytes and ranges starting above each segment are
        // the totals less those of the ranges already passed.
        let total_bytes: u64 = self.ranges.iter().map(|&(s, e)| e - s).sum();
        let (mut passed_bytes, mut passed) = (0u64, 0usize);
        let mut pipe = 0;
        let mut seq = snd_una;
        while seq < high_data {
            let len = seg_len(seq).max(1);
            while passed < self.ranges.len() && self.ranges[passed].0 <= seq {
                passed_bytes += self.ranges[passed].1 - self.ranges[passed].0;
                passed += 1;
            }
            if !self.is_sacked(seq) {
                let (above_bytes, above_ranges) = (total_bytes - passed_bytes, (self.ranges.len() - passed) as u64);
                let lost = above_ranges >= DUP_THRESH || above_bytes > (DUP_THRESH - 1) * mss;
                if !lost {
                    pipe += len;
                }
                if seq < high_rxt {
                    pipe += len;
                }
            }
            seq += len;
        }
        pipe
    }

    /// RFC 6675 `NextSeg()` rules 1 and 3: the first unSACKed segment at or above `from`
    /// (HighRxt) and below `high_data` that is lost, or, with `rule3` (no new data to send),
    /// the first unSACKed segment below the highest SACKed byte.
    pub fn next_seg(
        &self,
        from: u64,
        high_data: u64,
        mss: u64,
        rule3: bool,
        seg_len: impl Fn(u64) -> u64,
    ) -> Option<u64> {
        let top = self.highest_sacked().min(high_data);
        let mut seq = from;
        let mut first_unsacked = None;
        while seq < top {
            if !self.is_sacked(seq) {
                if self.is_lost(seq, mss) {
                    return Some(seq);
                }
                first_unsacked.get_or_insert(seq);
            }
            seq += seg_len(seq).max(1);
        }
        if rule3 {
            first_unsacked
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;
    fn seg(_: u64) -> u64 {
        MSS
    }
    fn blocks(list: &[(u64, u64)]) -> SackBlocks {
        let mut b = SackBlocks::NONE;
        for &(s, e) in list {
            b.push(s, e);
        }
        b
    }

    #[test]
    fn scoreboard_merges_and_trims() {
        let mut sb = Scoreboard::new();
        sb.on_ack(0, &blocks(&[(3000, 5000), (7000, 8000)]));
        sb.on_ack(0, &blocks(&[(5000, 6000)]));
        assert_eq!(sb.ranges(), &[(3000, 6000), (7000, 8000)]);
        sb.on_ack(0, &blocks(&[(6000, 7000)]));
        assert_eq!(sb.ranges(), &[(3000, 8000)]);
        assert!(sb.is_sacked(3000) && sb.is_sacked(7999) && !sb.is_sacked(8000) && !sb.is_sacked(2999));
        sb.on_ack(8000, &SackBlocks::NONE);
        assert!(sb.is_empty());
    }

    #[test]
    fn is_lost_needs_three_segments_or_three_ranges_above() {
        let mut sb = Scoreboard::new();
        sb.on_ack(0, &blocks(&[(1000, 3000)]));
        assert!(!sb.is_lost(0, MSS), "two SACKed segments above: not yet");
        sb.on_ack(0, &blocks(&[(1000, 4000)]));
        assert!(sb.is_lost(0, MSS), "three SACKed segments above");
        let mut sb = Scoreboard::new();
        sb.on_ack(0, &blocks(&[(1000, 1500), (2000, 2500), (3000, 3500)]));
        assert!(sb.is_lost(0, MSS), "three discontiguous ranges");
    }

    #[test]
    fn three_holes_in_one_window_are_found_in_order_and_sacked_data_never_resent() {
        // 10 segments sent; 1, 4 and 7 lost; the rest SACKed.
        let mut sb = Scoreboard::new();
        sb.on_ack(1000, &blocks(&[(2000, 4000), (5000, 7000), (8000, 10_000)]));
        let high_data = 10_000;
        // Rule 1 alone: the holes with three SACKed segments above them (1000 and 4000; the
        // one at 7000 has only two above it, so it is not yet lost).
        let mut high_rxt = 1000;
        let mut rule1 = Vec::new();
        while let Some(s) = sb.next_seg(high_rxt, high_data, MSS, false, seg) {
            rule1.push(s);
            high_rxt = s + MSS;
        }
        assert_eq!(rule1, vec![1000, 4000]);
        // Before any retransmission: holes 1000 and 4000 are lost and count nothing; 7000 is
        // not lost and counts once.
        assert_eq!(sb.pipe(1000, high_data, 1000, MSS, seg), 1000);
        // With rule 3 (no new data to send) the last hole goes too.
        let mut high_rxt = 1000;
        let mut resent = Vec::new();
        while let Some(s) = sb.next_seg(high_rxt, high_data, MSS, true, seg) {
            resent.push(s);
            high_rxt = s + MSS;
        }
        assert_eq!(resent, vec![1000, 4000, 7000]);
        for s in &resent {
            assert!(!sb.is_sacked(*s));
        }
        // After the three retransmissions: each lost hole counts once (its retransmission),
        // the hole at 7000 twice (original, not lost, and retransmission).
        assert_eq!(sb.pipe(1000, high_data, high_rxt, MSS, seg), 4000);
    }

    #[test]
    fn receiver_reports_the_newest_block_first() {
        let mut r = ReceiverSack::new();
        for (seq, end) in [(13_000, 14_000), (10_000, 11_000), (6000, 7000), (3000, 4000), (7000, 8000)] {
            r.on_out_of_order(seq, end);
        }
        let got: Vec<_> = r.blocks(1000).iter().collect();
        // Newest arrival (7000, merged into 6000..8000) first, then 3000..4000, then the
        // 10,000 block (arrived before them), not the highest.
        assert_eq!(got, vec![(6000, 8000), (3000, 4000), (10_000, 11_000)]);
        // Data below rcv_nxt is no longer reported; the highest block fills the free place.
        let got: Vec<_> = r.blocks(5000).iter().collect();
        assert_eq!(got, vec![(6000, 8000), (10_000, 11_000), (13_000, 14_000)]);
        assert!(r.blocks(20_000).is_empty());
    }
}
