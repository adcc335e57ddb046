//! The delay box: the bottleneck *link* (serialisation at its rate, a drop-tail queue),
//! propagation delay and random loss, from two TUN devices.
//!
//! This kernel has no netem, so, like mahimahi's `mm-delay` and `mm-link`, the testbed moves
//! packets through user space. The left router routes everything for the right side into its TUN device `dbox`;
//! the right router routes everything for the left side into its own `dbox`. One thread per
//! direction reads packets from one TUN device and writes them into the other:
//!
//! 1. On arrival (the `read` that returns the packet) the packet is stamped `t_arr` from
//!    `CLOCK_MONOTONIC`, dropped with probability `loss` (Bernoulli, [`Rng::bernoulli`] of headroom's one
//!    generator, so a seed reproduces the same drop pattern), or else queued with release time
//!    `t_dep + delay + extra(src) + extra(dst)` (`extra` is a host's access-link delay).
//!    Without a link rate `t_dep = t_arr`. With a rate `C` the box is an exact link, as every
//!    network simulator models one: the packet's serialisation starts when the link is free,
//!    `t_start = max(t_arr, t_dep(previous))`, and ends `t_dep = t_start + size·8/C` later
//!    (`size` in IP bytes; the division's remainder is carried to the next packet so a long
//!    flood keeps the exact rate). Before that the packet waits in the link's drop-tail queue:
//!    it is dropped on arrival if the packets (or bytes) still waiting for the link, those with
//!    `t_start > t_arr`, already fill the buffer — the packet in transmission has left the
//!    queue, as in Linux qdiscs and ns-2.
//! 2. Packets leave in release-time order (a binary heap; ties in arrival order, so packets of
//!    one flow, which all get the same delay, are never reordered).
//! 3. Between packets the thread sleeps in `ppoll` on the input device with a 1 ns timer slack,
//!    waking up `spin` before the next release and spinning the rest, which gives
//!    microsecond-accurate release without burning a core when idle. The threads run at
//!    SCHED_FIFO priority 10, so compilers or test traffic on a 2-core machine do not delay
//!    releases by milliseconds.
//! 4. With `arrival_spin` set (`headroom probe-bench` sets [`DEFAULT_ARRIVAL_SPIN`], 300 µs; the
//!    testbed's default is zero, below), for that long after each arrival the thread polls
//!    the input instead of sleeping, so the next packet of a train is stamped when it arrives.
//!    An arrival stamp is only as exact as the read that takes it: a thread asleep in `ppoll`
//!    reads a packet one wake-up later, a few to tens of µs on a VM and different for every
//!    packet, and the link then serialised each packet from a time it did not arrive at. Paced
//!    trains at half the rate, whose delay should not vary, varied by a median 4–13 µs with the
//!    box asleep and 0.4–1.5 µs polling, at 100–500 Mbit/s (`headroom testbed bench-link
//!    --paced`, [`crate::linkcheck::arrival_delays`]; a flood never lets the box sleep, which is
//!    why the floods did not show it). At 500 Mbit/s, where a 1,500-byte packet lasts 24 µs,
//!    that jitter queued trains far below the rate: the idle link's PathQuick estimates were a
//!    median 29 % off with the box asleep and 0.1 % polling (18 each, two A/B runs;
//!    docs/results.md, issue 19 session 17). The first packet after a pause still wakes the
//!    thread and is stamped late by one wake-up (the packets behind it then queue behind it
//!    for as long), and a stream sparser than the window (packets more than 300 µs apart: under
//!    40 Mbit/s of 1,500-byte packets) is read one wake-up late per packet as before, an error
//!    small beside its packet time (1.2 ms at 10 Mbit/s). Polling takes the core, so it has a
//!    budget ([`PollBudget`]): at most a quarter of the line's time, saved up to 200 ms
//!    ([`POLL_SHARE`], [`POLL_CREDIT`]). A probe train (a few to a hundred milliseconds, every
//!    few hundred) is polled throughout; a bulk TCP transfer, whose packets come every few
//!    hundred microseconds for seconds, leaves three quarters of the core to the namespaces'
//!    senders, and a sender the kernel placed on the box's own core is not held back for
//!    long ([`ArrivalPoll`] backs off when packets arrive right after each window). Without
//!    the budget, a `send --measure` flow through a 50 Mbit/s link beside
//!    15 Mbit/s of cross traffic moved 27.4–32.8 Mbit/s with 19–31 estimates, against 33.0–33.2
//!    with 33–34 with the box asleep, and 33.0–33.3 with 33 with the budget (three runs each,
//!    `headroom send-bench --parts measure --levels 15Mbps --seconds 4 --no-sim`; session 11
//!    had found the same of a box that spun through most gaps; docs/results.md). With the
//!    budget and the back-off, ImTCP's inline measurement in that flow still took 29–30
//!    estimates against 33 with the box asleep, its stream shapes disturbed by the box's
//!    intermittent polling; so polling is off unless a testbed asks for it
//!    (`Bottleneck::arrival_spin`, for the dumbbell's forward line only: the reverse line and
//!    a chain's lines carry ACKs and relayed TCP).
//!
//! So a packet first waits in the bottleneck queue, then is serialised at the bottleneck rate,
//! then propagates: the order of a real link, with no token bucket's burst (issue 19: a tbf is a
//! *shaper*, it lets `burst` bytes through at the veth's speed). A shaper, when configured, is a
//! tbf on the left router's `dbox`, in front of the link. The TUN txqueuelen is raised to 10 000 because a TUN
//! device drops (not queues) when its ring of `txqueuelen` packets is full.
//!
//! **In-link cross traffic.** A link can carry a virtual Poisson source (`cross = { rate,
//! packet }` of [`crate::topology::InLinkCross`], per direction, changeable while the box runs
//! with [`DelayBox::set_cross`]): packets of `packet` IP bytes whose arrival times at the link are
//! a Poisson process of mean rate `rate` (exponential gaps of mean `8·packet/rate`, drawn with
//! [`Rng::exponential`] from their own generator and seed, so a seed gives the same schedule).
//! They enter the drop-tail queue exactly as real packets do (they count toward the buffer in
//! packets or bytes, and are dropped on arrival when it is full), are serialised at the link's
//! rate (so real packets behind them wait), and are discarded at the link's output instead of
//! being written to the far TUN device. They are processed lazily: before a real packet is
//! admitted, every virtual arrival up to its arrival time is admitted first, in time order, and
//! the loop catches up to the clock between reads; so the source costs a few arithmetic
//! operations per virtual packet and puts nothing on the wire, where a user-space generator
//! between testbed hosts (`traffic::PoissonCross`) cannot send hundreds of Mbit/s of Poisson
//! traffic beside a probe and the box on a 2-core machine. What it models: one-hop persistent
//! cross traffic that enters the path at the bottleneck and leaves right after it, the
//! topology of the PathQuick paper's testbed (Fig. 8: the cross traffic shares only the
//! bottleneck) and of pathChirp's experiments (Ribeiro et al. 2003, §4: cross traffic
//! enters and leaves at the bottleneck link's ends). What it does not model: anything the cross
//! traffic meets before the bottleneck (its own sender's pacing errors, its kernel and TUN
//! path and the box's read batching, which make a real generator's arrivals burstier than
//! Poisson), nor any effect of the cross traffic on the reverse direction (no ACKs). The
//! virtual packets are counted apart (`cross_sent`, `cross_bytes`, `cross_drops`), never in
//! `packets_in`, `queue_drops` or `idle_starts`.
//!
//! Choices mahimahi leaves open and this box makes: loss is applied on arrival (a lost packet
//! never occupies the delay line); the box's own queue holds at most `MAX_HELD` packets (more
//! would mean a delay-bandwidth product over 1.5 GB) and counts `overflow` drops beyond it; the
//! lateness of every release (actual write time minus scheduled release) is recorded, which is
//! the box's added-delay error.

use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use headroom_core::rng::Rng;
use headroom_core::{Dur, Rate};

use crate::sys;
use crate::topology::{Buffer, InLinkCross};

/// SCHED_FIFO priority of the delay lines (low among real-time priorities: above every normal
/// process, below kernel threads that use RT priorities).
pub const REALTIME_PRIORITY: i32 = 10;
/// Default spin before a release (the RT thread wakes from ppoll within a few µs).
pub const DEFAULT_SPIN_NS: u64 = 20_000;
/// The time a line polls its input after an arrival instead of sleeping, where a testbed asks
/// for polling (module doc, step 4; `headroom probe-bench` does): longer than the gaps of a
/// train at 40 Mbit/s and above.
pub const DEFAULT_ARRIVAL_SPIN: Dur = Dur(300_000);
/// An arrival this soon after a poll window ran out empty means the polling held back the
/// sender on the box's own core ([`ArrivalPoll`]).
pub const STARVED_GAP: Dur = Dur(200_000);
/// How long the line sleeps after every packet once it found it held a sender back.
pub const POLL_BACKOFF: Dur = Dur(20_000_000);
/// Windows in a row that ran out empty with an arrival right after: a sender held back
/// ([`ArrivalPoll`]). One such window is a probe train's last packet and the message the server
/// sends after it.
pub const HELD_BACK_WINDOWS: u32 = 3;
/// The share of a line's time it may spend polling for arrivals ([`PollBudget`]).
pub const POLL_SHARE: f64 = 0.25;
/// The polling time a line may save up ([`PollBudget`]).
pub const POLL_CREDIT: Dur = Dur(200_000_000);
/// Packets the delay line holds at most per direction.
pub const MAX_HELD: usize = 1 << 20;
/// Longest sleep between checks of the stop flag.
const IDLE_NS: u64 = 20_000_000;
/// Packets read in a row before releasing due packets again.
const READ_BATCH: usize = 64;
/// Sub-stream of the line's seed that seeds in-link cross traffic given without a seed (plus
/// the source's version, so every new source draws a new schedule).
const CROSS_STREAM: u64 = 0xc055_0000;

/// One direction's configuration.
#[derive(Clone, Debug, Default)]
pub struct LineConfig {
    pub delay: Dur,
    pub loss: f64,
    pub seed: u64,
    /// Extra one-way delay of packets from or to these hosts.
    pub extra: HashMap<Ipv4Addr, Dur>,
    /// Spin this long before a release instead of sleeping; zero means [`DEFAULT_SPIN_NS`].
    pub spin: Dur,
    /// Poll the input this long after each arrival instead of sleeping (module doc, step 4);
    /// zero (the default) sleeps right after every packet.
    pub arrival_spin: Dur,
    /// Run the line's thread at real-time priority [`REALTIME_PRIORITY`] (SCHED_FIFO) so that
    /// other load on the machine does not delay releases.
    pub realtime: bool,
    /// The link's rate: serialise every packet at this rate (`None`: no serialisation).
    pub rate: Option<Rate>,
    /// The link's drop-tail queue (used only with a `rate`).
    pub buffer: Option<Buffer>,
    /// In-link Poisson cross traffic from the start (used only with a `rate`; module doc).
    pub cross: Option<InLinkCross>,
}

/// Number of lateness histogram buckets: bucket `i` counts releases late by `[2^(i-1), 2^i)` µs
/// (bucket 0: under 1 µs); the last bucket is open-ended.
pub const LATE_BUCKETS: usize = 16;

/// Live counters of one direction (shared with readers while the box runs).
#[derive(Debug, Default)]
pub struct Counters {
    pub packets_in: AtomicU64,
    pub bytes_in: AtomicU64,
    pub packets_out: AtomicU64,
    pub bytes_out: AtomicU64,
    /// Dropped by the configured Bernoulli loss.
    pub lost: AtomicU64,
    /// Dropped because the delay line was full (`MAX_HELD`): the box's own drops.
    pub overflow: AtomicU64,
    /// Writes into the output TUN device that failed: the box's own drops.
    pub write_errors: AtomicU64,
    /// Dropped by the link's drop-tail queue (the emulated bottleneck's congestion drops).
    pub queue_drops: AtomicU64,
    /// Packets that found the link idle (serialised from their arrival): 1 for a flood that
    /// kept the link busy, more when the input left gaps (the packets came in slower than the rate).
    pub idle_starts: AtomicU64,
    /// Packets and IP bytes waiting for the link now (gauges).
    pub backlog_pkts: AtomicU64,
    pub backlog_bytes: AtomicU64,
    pub late_sum_ns: AtomicU64,
    pub late_max_ns: AtomicU64,
    pub late_hist: [AtomicU64; LATE_BUCKETS],
    /// In-link cross traffic (module doc): virtual packets the link accepted and serialised,
    /// their IP bytes, and those its full queue dropped on arrival.
    pub cross_sent: AtomicU64,
    pub cross_bytes: AtomicU64,
    pub cross_drops: AtomicU64,
    /// Time the line spent polling its input after arrivals (module doc, step 4), and the
    /// arrivals after which it slept because its [`PollBudget`] was spent.
    pub poll_ns: AtomicU64,
    pub poll_budget_out: AtomicU64,
    /// Times the line found its polling held a sender back and slept for [`POLL_BACKOFF`].
    pub poll_backoffs: AtomicU64,
}

/// A copy of [`Counters`] at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CounterSnapshot {
    pub packets_in: u64,
    pub bytes_in: u64,
    pub packets_out: u64,
    pub bytes_out: u64,
    pub lost: u64,
    pub overflow: u64,
    pub write_errors: u64,
    pub queue_drops: u64,
    pub idle_starts: u64,
    pub backlog_pkts: u64,
    pub backlog_bytes: u64,
    pub late_sum_ns: u64,
    pub late_max_ns: u64,
    pub late_hist: [u64; LATE_BUCKETS],
    pub cross_sent: u64,
    pub cross_bytes: u64,
    pub cross_drops: u64,
    pub poll_ns: u64,
    pub poll_budget_out: u64,
    pub poll_backoffs: u64,
}

impl Counters {
    pub fn snapshot(&self) -> CounterSnapshot {
        let mut late_hist = [0; LATE_BUCKETS];
        for (d, s) in late_hist.iter_mut().zip(self.late_hist.iter()) {
            *d = s.load(Ordering::Relaxed);
        }
        CounterSnapshot {
            packets_in: self.packets_in.load(Ordering::Relaxed),
            bytes_in: self.bytes_in.load(Ordering::Relaxed),
            packets_out: self.packets_out.load(Ordering::Relaxed),
            bytes_out: self.bytes_out.load(Ordering::Relaxed),
            lost: self.lost.load(Ordering::Relaxed),
            overflow: self.overflow.load(Ordering::Relaxed),
            write_errors: self.write_errors.load(Ordering::Relaxed),
            queue_drops: self.queue_drops.load(Ordering::Relaxed),
            idle_starts: self.idle_starts.load(Ordering::Relaxed),
            backlog_pkts: self.backlog_pkts.load(Ordering::Relaxed),
            backlog_bytes: self.backlog_bytes.load(Ordering::Relaxed),
            late_sum_ns: self.late_sum_ns.load(Ordering::Relaxed),
            late_max_ns: self.late_max_ns.load(Ordering::Relaxed),
            late_hist,
            cross_sent: self.cross_sent.load(Ordering::Relaxed),
            cross_bytes: self.cross_bytes.load(Ordering::Relaxed),
            cross_drops: self.cross_drops.load(Ordering::Relaxed),
            poll_ns: self.poll_ns.load(Ordering::Relaxed),
            poll_budget_out: self.poll_budget_out.load(Ordering::Relaxed),
            poll_backoffs: self.poll_backoffs.load(Ordering::Relaxed),
        }
    }
}

impl CounterSnapshot {
    /// Counter increase from `earlier` to `self` (the maximum lateness and the backlog gauges
    /// are kept as they are).
    pub fn since(&self, earlier: &CounterSnapshot) -> CounterSnapshot {
        let mut late_hist = [0; LATE_BUCKETS];
        for (i, d) in late_hist.iter_mut().enumerate() {
            *d = self.late_hist[i] - earlier.late_hist[i];
        }
        CounterSnapshot {
            packets_in: self.packets_in - earlier.packets_in,
            bytes_in: self.bytes_in - earlier.bytes_in,
            packets_out: self.packets_out - earlier.packets_out,
            bytes_out: self.bytes_out - earlier.bytes_out,
            lost: self.lost - earlier.lost,
            overflow: self.overflow - earlier.overflow,
            write_errors: self.write_errors - earlier.write_errors,
            queue_drops: self.queue_drops - earlier.queue_drops,
            idle_starts: self.idle_starts - earlier.idle_starts,
            backlog_pkts: self.backlog_pkts,
            backlog_bytes: self.backlog_bytes,
            late_sum_ns: self.late_sum_ns - earlier.late_sum_ns,
            late_max_ns: self.late_max_ns,
            late_hist,
            cross_sent: self.cross_sent - earlier.cross_sent,
            cross_bytes: self.cross_bytes - earlier.cross_bytes,
            cross_drops: self.cross_drops - earlier.cross_drops,
            poll_ns: self.poll_ns - earlier.poll_ns,
            poll_budget_out: self.poll_budget_out - earlier.poll_budget_out,
            poll_backoffs: self.poll_backoffs - earlier.poll_backoffs,
        }
    }
    /// Drops of the box itself (not the configured loss).
    pub fn own_drops(&self) -> u64 {
        self.overflow + self.write_errors
    }
    pub fn mean_lateness(&self) -> Dur {
        Dur(self.late_sum_ns.checked_div(self.packets_out).unwrap_or(0))
    }
    /// Upper bound of the histogram bucket holding quantile `q` of the release lateness.
    pub fn lateness_quantile_bound(&self, q: f64) -> Dur {
        let total: u64 = self.late_hist.iter().sum();
        if total == 0 {
            return Dur::ZERO;
        }
        let want = (q * total as f64).ceil() as u64;
        let mut acc = 0;
        for (i, n) in self.late_hist.iter().enumerate() {
            acc += n;
            if acc >= want {
                return Dur::from_micros(1u64 << i);
            }
        }
        Dur::from_micros(1u64 << (LATE_BUCKETS - 1))
    }
}

struct Held {
    release: u64,
    seq: u64,
    packet: Vec<u8>,
}
impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        self.release == o.release && self.seq == o.seq
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    // Reversed: BinaryHeap is a max-heap and we want the earliest release on top.
    fn cmp(&self, o: &Self) -> CmpOrdering {
        (o.release, o.seq).cmp(&(self.release, self.seq))
    }
}

/// In-link cross traffic's counts (module doc): virtual packets accepted and serialised, their
/// IP bytes, and virtual packets the full queue dropped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CrossCounts {
    pub sent: u64,
    pub bytes: u64,
    pub dropped: u64,
}

/// The virtual Poisson source of a link (module doc, "In-link cross traffic").
#[derive(Clone, Debug)]
struct VirtualSource {
    /// Mean gap between arrivals, ns: `8·packet/rate`.
    mean_gap_ns: f64,
    size: u64,
    rng: Rng,
    /// The next arrival (ns), and the fraction of a nanosecond the schedule carries beyond it
    /// (so rounding to whole nanoseconds does not bias the rate).
    next: u64,
    frac: f64,
}

impl VirtualSource {
    /// Draws the next gap.
    fn step(&mut self) {
        let gap = self.rng.exponential(self.mean_gap_ns) + self.frac;
        let whole = gap.floor();
        self.frac = gap - whole;
        self.next += whole as u64;
    }
}

/// The exact link of one direction: fed arrival times and sizes, it answers each packet's
/// departure (end of serialisation) or a drop (module doc, step 1), with the in-link cross
/// traffic's virtual packets in the same queue. Pure bookkeeping, no clock.
#[derive(Debug)]
pub struct Link {
    bps: u64,
    buffer: Buffer,
    /// When the last accepted packet's serialisation ends.
    free_at: u64,
    /// Remainder (in bit·ns units, below `bps`) of the last serialisation time's division.
    carry: u64,
    /// Serialisation start and size of the accepted packets that have not started yet.
    waiting: VecDeque<(u64, u64)>,
    waiting_bytes: u64,
    /// Accepted real packets that found the link idle.
    idle_starts: u64,
    cross: Option<VirtualSource>,
    cross_counts: CrossCounts,
}

impl Link {
    pub fn new(rate: Rate, buffer: Buffer) -> Link {
        Link {
            bps: rate.bps().max(1),
            buffer,
            free_at: 0,
            carry: 0,
            waiting: VecDeque::new(),
            waiting_bytes: 0,
            idle_starts: 0,
            cross: None,
            cross_counts: CrossCounts::default(),
        }
    }

    /// From `now` on, in-link cross traffic `cross` (or none) with seed `cross.seed`, or
    /// `default_seed` when it has none. The virtual arrivals of the previous source up to `now`
    /// are admitted first; the new source's first arrival is an exponential gap after `now`.
    pub fn set_cross(&mut self, cross: Option<InLinkCross>, default_seed: u64, now: u64) {
        self.catch_up(now);
        self.cross = cross.filter(|c| c.rate.bps() > 0).map(|c| {
            let mut v = VirtualSource {
                mean_gap_ns: (c.packet.0 * 8) as f64 * 1e9 / c.rate.bps() as f64,
                size: c.packet.0,
                rng: Rng::new(c.seed.unwrap_or(default_seed)),
                next: now,
                frac: 0.0,
            };
            v.step();
            v
        });
    }

    /// Admits every virtual arrival up to `t` (module doc), then forgets the packets whose
    /// serialisation has started by `t`. Call with non-decreasing times.
    pub fn catch_up(&mut self, t: u64) {
        while let Some(next) = self.cross.as_ref().map(|v| v.next).filter(|&n| n <= t) {
            let Some(v) = self.cross.as_mut() else { break };
            let size = v.size;
            v.step();
            match self.enqueue(next, size) {
                Some(_) => {
                    self.cross_counts.sent += 1;
                    self.cross_counts.bytes += size;
                }
                None => self.cross_counts.dropped += 1,
            }
        }
        self.advance(t);
    }

    /// In-link cross traffic so far (as of the last [`Link::catch_up`] or [`Link::admit`]).
    pub fn cross_counts(&self) -> CrossCounts {
        self.cross_counts
    }

    /// Forgets the packets whose serialisation has started by `now`.
    fn advance(&mut self, now: u64) {
        while let Some(&(start, size)) = self.waiting.front() {
            if start > now {
                break;
            }
            self.waiting.pop_front();
            self.waiting_bytes -= size;
        }
    }

    /// Accepted real packets that found the link idle (their serialisation started on arrival).
    pub fn idle_starts(&self) -> u64 {
        self.idle_starts
    }

    /// Packets and bytes waiting for the link, virtual ones included (as of the last
    /// [`Link::catch_up`] or [`Link::admit`]).
    pub fn backlog(&self) -> (u64, u64) {
        (self.waiting.len() as u64, self.waiting_bytes)
    }

    /// A real packet of `size` IP bytes arrives at `t_arr` (ns): its departure time, or `None`
    /// when the drop-tail queue is full. The virtual arrivals up to `t_arr` come first.
    pub fn admit(&mut self, t_arr: u64, size: usize) -> Option<u64> {
        self.catch_up(t_arr);
        let idle = self.free_at <= t_arr;
        let dep = self.enqueue(t_arr, size as u64)?;
        self.idle_starts += idle as u64;
        Some(dep)
    }

    /// Any packet, real or virtual, arriving at `t_arr` after [`Link::advance`]`(t_arr)`: the
    /// end of its serialisation, or `None` when the buffer is full.
    fn enqueue(&mut self, t_arr: u64, size: u64) -> Option<u64> {
        self.advance(t_arr);
        let full = match self.buffer {
            Buffer::Packets(n) => self.waiting.len() as u64 >= n as u64,
            Buffer::Bytes(b) => self.waiting_bytes + size > b.0,
        };
        if full {
            return None;
        }
        let start = if self.free_at > t_arr {
            self.free_at
        } else {
            self.carry = 0;
            t_arr
        };
        let bit_ns = size * 8 * 1_000_000_000 + self.carry;
        self.carry = bit_ns % self.bps;
        self.free_at = start + bit_ns / self.bps;
        if start > t_arr {
            self.waiting.push_back((start, size));
            self.waiting_bytes += size;
        }
        Some(self.free_at)
    }
}

/// One direction of the box.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Left to right (toward the last node of a chain).
    Forward,
    Reverse,
}

/// A line's in-link cross traffic, changeable while it runs: the line thread checks `version`
/// once per loop, takes `cross` when it changed, then sets `applied` to that version and
/// signals `taken` (also signalled when the box stops).
#[derive(Debug, Default)]
struct CrossControl {
    version: AtomicU64,
    applied: Mutex<u64>,
    taken: Condvar,
    cross: Mutex<Option<InLinkCross>>,
}

/// How long [`DelayBox::set_cross`] waits at most for the line to take a new source.
const CROSS_SWITCH_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

fn ipv4_addrs(p: &[u8]) -> Option<(Ipv4Addr, Ipv4Addr)> {
    if p.len() >= 20 && p[0] >> 4 == 4 {
        Some((Ipv4Addr::new(p[12], p[13], p[14], p[15]), Ipv4Addr::new(p[16], p[17], p[18], p[19])))
    } else {
        None
    }
}

/// The two running delay lines.
pub struct DelayBox {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// Left to right.
    pub forward: Arc<Counters>,
    /// Right to left.
    pub reverse: Arc<Counters>,
    cross: [Arc<CrossControl>; 2],
}

impl DelayBox {
    /// Starts the two directions: `left` and `right` are the TUN devices in the left and right
    /// routers. `name` prefixes the thread names.
    pub fn start(
        name: &str,
        left: OwnedFd,
        right: OwnedFd,
        forward: LineConfig,
        reverse: LineConfig,
    ) -> std::io::Result<DelayBox> {
        let stop = Arc::new(AtomicBool::new(false));
        let left = Arc::new(left);
        let right = Arc::new(right);
        let fc = Arc::new(Counters::default());
        let rc = Arc::new(Counters::default());
        let control = |cfg: &LineConfig| {
            Arc::new(CrossControl {
                version: AtomicU64::new(1),
                applied: Mutex::new(0),
                taken: Condvar::new(),
                cross: Mutex::new(cfg.cross),
            })
        };
        let cross = [control(&forward), control(&reverse)];
        let mut threads = Vec::new();
        for (dir, input, output, cfg, counters, ctl) in [
            ("f", left.clone(), right.clone(), forward, fc.clone(), cross[0].clone()),
            ("r", right, left, reverse, rc.clone(), cross[1].clone()),
        ] {
            let stop = stop.clone();
            let t = std::thread::Builder::new()
                .name(format!("{name}dly{dir}"))
                .spawn(move || run_line(&input, &output, cfg, &counters, &ctl, &stop))?;
            threads.push(t);
        }
        Ok(DelayBox { stop, threads, forward: fc, reverse: rc, cross })
    }

    /// From now on, in-link cross traffic `cross` (or none) in direction `dir` (module doc; a
    /// line without a rate ignores it, [`crate::topology::InLinkCross::check`] refuses that).
    /// The line takes it at its next loop (within a few microseconds while it forwards packets,
    /// at most `IDLE_NS` when idle), and this waits for that, so that the counters read after
    /// it returns count the old source's packets up to the switch and none of the new one's
    /// before it. `false` when the line did not take it within `CROSS_SWITCH_WAIT` (stopped).
    pub fn set_cross(&self, dir: Direction, cross: Option<InLinkCross>) -> bool {
        let ctl = &self.cross[(dir == Direction::Reverse) as usize];
        if let Ok(mut c) = ctl.cross.lock() {
            *c = cross;
        }
        let version = ctl.version.fetch_add(1, Ordering::AcqRel) + 1;
        let Ok(applied) = ctl.applied.lock() else { return false };
        let waited = ctl.taken.wait_timeout_while(applied, CROSS_SWITCH_WAIT, |applied| {
            *applied < version && !self.stop.load(Ordering::Relaxed)
        });
        waited.is_ok_and(|(applied, _)| *applied >= version)
    }

    /// Stops both directions and waits for them (drops the TUN devices with the last fd).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for ctl in &self.cross {
            // Wakes a set_cross waiting for a line that will not take its source. The lock
            // orders the store before the waiter's next look at the flag.
            drop(ctl.applied.lock());
            ctl.taken.notify_all();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for DelayBox {
    fn drop(&mut self) {
        self.stop();
    }
}

fn store_cross_counts(l: &Link, c: &Counters) {
    let x = l.cross_counts();
    c.cross_sent.store(x.sent, Ordering::Relaxed);
    c.cross_bytes.store(x.bytes, Ordering::Relaxed);
    c.cross_drops.store(x.dropped, Ordering::Relaxed);
}

/// How much polling for arrivals a line may still do (module doc, step 4): a credit that grows
/// at `share` of the time that passes, up to `depth`, and shrinks by the time spent polling. So a
/// line that polls without end polls `share` of the time, and one that rested for `depth/share`
/// may poll `depth` at once.
#[derive(Clone, Debug)]
pub struct PollBudget {
    share: f64,
    depth: f64,
    credit: f64,
    last: u64,
}

impl PollBudget {
    /// A full budget at `now` (ns).
    pub fn new(share: f64, depth: Dur, now: u64) -> PollBudget {
        let depth = depth.0 as f64;
        PollBudget { share, depth, credit: depth, last: now }
    }

    /// Accounts the time since the last call; `polled` says the line spent it polling. Returns
    /// that time (ns).
    pub fn account(&mut self, now: u64, polled: bool) -> u64 {
        let dt = now.saturating_sub(self.last);
        self.last = now.max(self.last);
        self.credit = (self.credit + dt as f64 * self.share).min(self.depth);
        if polled {
            self.credit -= dt as f64;
        }
        dt
    }

    /// Whether there is credit left to poll.
    pub fn may_poll(&self) -> bool {
        self.credit > 0.0
    }
}

/// Whether a line polls its input now (module doc, step 4): within `window` of the last
/// arrival, with [`PollBudget`] credit, and not backing off.
///
/// Backing off: a real-time thread that polls holds its core, and a sender of normal priority
/// that the kernel placed on that core then sends nothing until the window runs out. Its next
/// packet arrives right after (within [`STARVED_GAP`]), and so on: a burst of 50 packets from
/// one `send` loop came in one per window, 15 ms for what the sender does in microseconds, and
/// the testbed's drop-tail test received 15–21 packets instead of 11–13. [`HELD_BACK_WINDOWS`]
/// windows in a row that ran out empty, each with an arrival right after, are that sender's
/// signature; the line then sleeps after every packet for [`POLL_BACKOFF`]. A single one is
/// common: `probe-bench` counted 28–46 per level (a train's last packet, then the server's END
/// after it), and backing off on it left the next train unpolled. A train sent from the other
/// core arrives while the line polls, and the window after its last packet is followed by the
/// next train milliseconds later. A stream just sparser than the window (one packet every
/// 300–500 µs) looks the same and loses polling it did not use.
#[derive(Clone, Debug)]
pub struct ArrivalPoll {
    window: u64,
    budget: PollBudget,
    last_arrival: Option<u64>,
    /// When the last window ran out without an arrival.
    ran_out: Option<u64>,
    /// Windows in a row that ran out with an arrival right after.
    held_back: u32,
    quiet_until: u64,
    polling: bool,
}

/// What [`ArrivalPoll::decide`] saw since its last call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PollStep {
    /// Poll now.
    pub poll: bool,
    /// Nanoseconds spent polling since the last call.
    pub polled_ns: u64,
    /// The window of a recent arrival was not polled for want of budget.
    pub budget_out: bool,
}

impl ArrivalPoll {
    /// Polling `window` after each arrival with `budget`; nothing arrived yet.
    pub fn new(window: Dur, budget: PollBudget) -> ArrivalPoll {
        ArrivalPoll {
            window: window.0,
            budget,
            last_arrival: None,
            ran_out: None,
            held_back: 0,
            quiet_until: 0,
            polling: false,
        }
    }

    /// A packet was read at `t`. True when it completes a held-back sender's signature (the
    /// back-off starts).
    pub fn on_arrival(&mut self, t: u64) -> bool {
        match self.ran_out.take() {
            Some(end) if t.saturating_sub(end) < STARVED_GAP.0 => self.held_back += 1,
            // read while polling (the window had its arrival), or long after it ran out
            _ => self.held_back = 0,
        }
        let backoff = self.held_back >= HELD_BACK_WINDOWS;
        if backoff {
            self.quiet_until = t + POLL_BACKOFF.0;
            self.held_back = 0;
        }
        self.last_arrival = Some(t);
        backoff
    }

    /// At `now`, with the next release `release_soon` (within the release spin, which spins
    /// anyway): poll or sleep?
    pub fn decide(&mut self, now: u64, release_soon: bool) -> PollStep {
        let elapsed = self.budget.account(now, self.polling);
        let polled_ns = if self.polling { elapsed } else { 0 };
        let recent = self.last_arrival.is_some_and(|t| now.saturating_sub(t) < self.window);
        if self.polling && !recent {
            self.ran_out = Some(now);
        }
        let wanted = recent && !release_soon && now >= self.quiet_until;
        let poll = wanted && self.budget.may_poll();
        let budget_out = wanted && !poll;
        if budget_out {
            // counted once per arrival
            self.last_arrival = None;
        }
        self.polling = poll;
        PollStep { poll, polled_ns, budget_out }
    }
}

fn run_line(input: &OwnedFd, output: &OwnedFd, cfg: LineConfig, c: &Counters, ctl: &CrossControl, stop: &AtomicBool) {
    sys::precise_timers();
    if cfg.realtime {
        sys::set_realtime(REALTIME_PRIORITY);
    }
    let (inp, out) = (input.as_raw_fd(), output.as_raw_fd());
    let delay = cfg.delay.as_nanos();
    let spin = if cfg.spin.0 == 0 { DEFAULT_SPIN_NS } else { cfg.spin.as_nanos() };
    let mut rng = Rng::new(cfg.seed);
    let mut heap: BinaryHeap<Held> = BinaryHeap::new();
    let mut pool: Vec<Vec<u8>> = Vec::new();
    let mut scratch = vec![0u8; 65_536];
    let mut seq = 0u64;
    let mut link = cfg.rate.map(|r| Link::new(r, cfg.buffer.unwrap_or(Buffer::Packets(1000))));
    let mut cross_version = 0;
    let mut arrivals = ArrivalPoll::new(cfg.arrival_spin, PollBudget::new(POLL_SHARE, POLL_CREDIT, sys::now_ns()));
    while !stop.load(Ordering::Relaxed) {
        // 0. a new in-link cross-traffic source; each one draws its own stream, unless seeded
        let version = ctl.version.load(Ordering::Acquire);
        if version != cross_version {
            cross_version = version;
            let cross = ctl.cross.lock().map(|c| *c).unwrap_or(None);
            if let Some(l) = link.as_mut() {
                l.set_cross(cross, Rng::new(cfg.seed).fork(CROSS_STREAM + version).next_u64(), sys::now_ns());
                store_cross_counts(l, c);
            }
            if let Ok(mut applied) = ctl.applied.lock() {
                *applied = version;
            }
            ctl.taken.notify_all();
        }
        // 1. take in what has arrived
        for _ in 0..READ_BATCH {
            let n = match sys::read_fd(inp, &mut scratch) {
                Ok(Some(n)) if n > 0 => n,
                _ => break,
            };
            let t_arr = sys::now_ns();
            if arrivals.on_arrival(t_arr) {
                c.poll_backoffs.fetch_add(1, Ordering::Relaxed);
            }
            c.packets_in.fetch_add(1, Ordering::Relaxed);
            c.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
            if cfg.loss > 0.0 && rng.bernoulli(cfg.loss) {
                c.lost.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if heap.len() >= MAX_HELD {
                c.overflow.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let t_dep = match link.as_mut() {
                None => t_arr,
                Some(l) => match l.admit(t_arr, n) {
                    Some(t) => {
                        c.idle_starts.store(l.idle_starts(), Ordering::Relaxed);
                        t
                    }
                    None => {
                        c.queue_drops.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                },
            };
            let p = &scratch[..n];
            let mut d = delay;
            if !cfg.extra.is_empty() {
                if let Some((src, dst)) = ipv4_addrs(p) {
                    d += cfg.extra.get(&src).map_or(0, |x| x.0) + cfg.extra.get(&dst).map_or(0, |x| x.0);
                }
            }
            let mut packet = pool.pop().unwrap_or_default();
            packet.clear();
            packet.extend_from_slice(p);
            heap.push(Held { release: t_dep + d, seq, packet });
            seq += 1;
        }
        // 2. release what is due
        let mut now = sys::now_ns();
        if let Some(l) = link.as_mut() {
            l.catch_up(now);
            let (pkts, bytes) = l.backlog();
            c.backlog_pkts.store(pkts, Ordering::Relaxed);
            c.backlog_bytes.store(bytes, Ordering::Relaxed);
            store_cross_counts(l, c);
        }
        while heap.peek().is_some_and(|h| h.release <= now) {
            let Some(h) = heap.pop() else { break };
            // lateness is taken when the write starts: the write itself runs the receiving
            // router's input path, which is the emulated network's time, not the box's error
            let late = sys::now_ns().saturating_sub(h.release);
            match sys::write_fd(out, &h.packet) {
                Ok(_) => {
                    c.packets_out.fetch_add(1, Ordering::Relaxed);
                    c.bytes_out.fetch_add(h.packet.len() as u64, Ordering::Relaxed);
                    c.late_sum_ns.fetch_add(late, Ordering::Relaxed);
                    c.late_max_ns.fetch_max(late, Ordering::Relaxed);
                    let us = late / 1_000;
                    let bucket = if us == 0 { 0 } else { (64 - us.leading_zeros() as usize).min(LATE_BUCKETS - 1) };
                    c.late_hist[bucket].fetch_add(1, Ordering::Relaxed);
                }
                Err(_) => {
                    c.write_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            if pool.len() < 4096 {
                pool.push(h.packet);
            }
            now = sys::now_ns();
        }
        // 3. wait for the next arrival or release: poll the input for `arrival_spin` after an
        // arrival (the next one is stamped as it comes), else sleep until `spin` before the
        // next release
        let wait = heap.peek().map_or(IDLE_NS, |h| h.release.saturating_sub(now)).min(IDLE_NS);
        let step = arrivals.decide(now, wait <= spin);
        c.poll_ns.fetch_add(step.polled_ns, Ordering::Relaxed);
        c.poll_budget_out.fetch_add(step.budget_out as u64, Ordering::Relaxed);
        if wait > spin && !step.poll {
            let _ = sys::wait_readable(inp, wait - spin);
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_releases_earliest_first_and_ties_in_arrival_order() {
        let mut h = BinaryHeap::new();
        for (release, seq) in [(5, 0), (3, 1), (5, 2), (1, 3)] {
            h.push(Held { release, seq, packet: vec![] });
        }
        let order: Vec<_> = std::iter::from_fn(|| h.pop().map(|x| (x.release, x.seq))).collect();
        assert_eq!(order, vec![(1, 3), (3, 1), (5, 0), (5, 2)]);
    }

    #[test]
    fn the_link_serialises_at_its_rate_and_carries_the_remainder() {
        // 1000 B at 3 Mbit/s = 2666.67 µs: a flood of three packets leaves 8000 µs after the
        // first arrival in total, not 3 × 2666 µs
        let mut l = Link::new(Rate::from_mbps(3), Buffer::Packets(10));
        let deps: Vec<u64> = (0..3).map(|_| l.admit(1_000, 1000).unwrap()).collect();
        assert_eq!(deps, vec![1_000 + 2_666_666, 1_000 + 5_333_333, 1_000 + 8_000_000]);
        assert_eq!(l.backlog(), (2, 2000), "the first packet is on the wire, two wait");
        assert_eq!(l.idle_starts(), 1, "one flood: the link idle for its first packet only");
        // an idle link starts the next packet on its arrival
        assert_eq!(l.admit(100_000_000, 1000), Some(100_000_000 + 2_666_666));
        assert_eq!(l.backlog(), (0, 0));
        assert_eq!(l.idle_starts(), 2, "a gap in the input");
    }

    #[test]
    fn the_link_drops_when_the_waiting_packets_or_bytes_fill_the_buffer() {
        let mut l = Link::new(Rate::from_mbps(8), Buffer::Packets(2));
        // 1000 B at 8 Mbit/s = 1 ms; all arrive at 0: one in service, two wait, the 4th drops
        let got: Vec<Option<u64>> = (0..4).map(|_| l.admit(0, 1000)).collect();
        assert_eq!(got, vec![Some(1_000_000), Some(2_000_000), Some(3_000_000), None]);
        // at 1 ms the second starts, which frees a place
        assert_eq!(l.admit(1_000_000, 1000), Some(4_000_000));
        let mut b = Link::new(Rate::from_mbps(8), Buffer::Bytes(headroom_core::Bytes(2500)));
        let got: Vec<bool> = [1000, 1000, 1000, 500, 100].iter().map(|&n| b.admit(0, n).is_some()).collect();
        assert_eq!(got, vec![true, true, true, true, false], "waiting bytes 1000+1000+500 = 2500 fill it");
    }

    /// `rate` Mbit/s of 1000-byte in-link cross traffic with `seed`.
    fn cross(mbps: u64, seed: u64) -> Option<InLinkCross> {
        Some(InLinkCross { rate: Rate::from_mbps(mbps), packet: headroom_core::Bytes(1000), seed: Some(seed) })
    }

    /// Real packets of `size` bytes at Poisson times (mean gap `mean_gap_ns`, their own seed)
    /// through `link` until `end` ns: per packet, its arrival and departure (`None`: dropped),
    /// and the backlog after it.
    fn probe(link: &mut Link, size: usize, mean_gap_ns: f64, end: u64) -> Vec<(u64, Option<u64>, (u64, u64))> {
        let mut rng = Rng::new(99);
        let mut t = 0.0;
        let mut out = Vec::new();
        loop {
            t += rng.exponential(mean_gap_ns);
            if t as u64 > end {
                return out;
            }
            let dep = link.admit(t as u64, size);
            out.push((t as u64, dep, link.backlog()));
        }
    }

    #[test]
    fn in_link_cross_traffic_keeps_the_link_busy_rate_over_c_and_delays_real_packets_as_m_d_1() {
        // 5 Mbit/s of 1000-byte Poisson arrivals into a 10 Mbit/s link: utilisation ρ = 0.5,
        // service S = 800 µs. Sparse 40-byte real packets at Poisson times see the time
        // averages (PASTA): the link idle with probability 1 − ρ, and a mean wait of the
        // Pollaczek–Khinchine formula for M/D/1, W = ρ·S / (2(1 − ρ)) = 400 µs. Regular (CBR)
        // arrivals at the same rate would never queue (W = 0).
        let c = 10_000_000.0;
        let mut l = Link::new(Rate::from_mbps(10), Buffer::Packets(1000));
        l.set_cross(cross(5, 1), 0, 0);
        let end = 200_000_000_000; // 200 s
        let probes = probe(&mut l, 40, 10e6, end);
        l.catch_up(end);
        let x = l.cross_counts();
        let offered = (x.sent + x.dropped) as f64 * 8000.0 / (end as f64 / 1e9);
        let busy = x.bytes as f64 * 8.0 / c / (end as f64 / 1e9);
        let idle = probes.iter().filter(|(t, d, _)| d.is_some_and(|d| d - t <= 32_000)).count() as f64;
        let idle = idle / probes.len() as f64;
        let waits: Vec<f64> = probes.iter().map(|(t, d, _)| (d.unwrap() - t - 32_000) as f64).collect();
        let w = waits.iter().sum::<f64>() / waits.len() as f64;
        println!(
            "offered {offered:.0} bit/s, busy {busy:.4}, probes {} found it idle {idle:.4}, mean wait {w:.0} ns",
            probes.len()
        );
        assert_eq!(x.dropped, 0, "a 1000-packet buffer at ρ = 0.5 never fills");
        assert!((offered / 5e6 - 1.0).abs() < 0.02, "offered {offered:.0} bit/s for 5 Mbit/s");
        assert!((busy - 0.5).abs() < 0.01, "busy fraction {busy:.4} for ρ = 0.5");
        assert!((idle - 0.5).abs() < 0.02, "probes found the link idle {idle:.4} of the time");
        assert!((w / 400_000.0 - 1.0).abs() < 0.06, "mean wait {w:.0} ns, M/D/1: 400 000 ns");
    }

    #[test]
    fn a_full_queue_drops_virtual_and_real_packets_alike() {
        // 15 Mbit/s of cross traffic into 10 Mbit/s: the queue is mostly full; Poisson real
        // packets (0.8 Mbit/s) and the virtual ones meet the same full queue as often (PASTA),
        // in a packet buffer and in a byte buffer alike, and the queue never holds more
        for buffer in [Buffer::Packets(20), Buffer::Bytes(headroom_core::Bytes(20_000))] {
            let mut l = Link::new(Rate::from_mbps(10), buffer);
            l.set_cross(cross(15, 2), 0, 0);
            let end = 100_000_000_000;
            let probes = probe(&mut l, 1000, 10e6, end);
            l.catch_up(end);
            let x = l.cross_counts();
            let virt = x.dropped as f64 / (x.sent + x.dropped) as f64;
            let real = probes.iter().filter(|p| p.1.is_none()).count() as f64 / probes.len() as f64;
            let most = probes.iter().map(|p| p.2).max().unwrap();
            println!(
                "{buffer:?}: virtual drop fraction {virt:.4}, real {real:.4} of {}, largest backlog {most:?}",
                probes.len()
            );
            assert!(virt > 0.25, "virtual drop fraction {virt:.4}");
            assert!((virt - real).abs() < 0.03, "virtual {virt:.4} and real {real:.4} drop fractions differ");
            assert!(most.0 <= 20 && most.1 <= 20_000, "backlog {most:?} beyond the buffer");
            // the link never idles: it carried its rate (real and virtual bytes), within a packet
            let real_bytes = probes.iter().filter(|p| p.1.is_some()).count() as u64 * 1000;
            let carried = (x.bytes + real_bytes) as f64 * 8.0 / 100.0;
            assert!((carried / 1e7 - 1.0).abs() < 0.001, "carried {carried:.0} bit/s");
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_schedule_and_none_stops_it() {
        let run = |seed: u64| {
            let mut l = Link::new(Rate::from_mbps(10), Buffer::Packets(50));
            l.set_cross(cross(8, seed), 0, 1_000);
            let deps: Vec<Option<u64>> = (1..=2_000u64).map(|k| l.admit(k * 1_000_000, 500)).collect();
            (deps, l.cross_counts())
        };
        let (a, b, c) = (run(3), run(3), run(4));
        assert_eq!(a, b, "same seed, same departures and counts");
        assert_ne!(a.0, c.0, "another seed, another schedule");
        assert!(a.1.sent > 1_500, "2 s at 8 Mbit/s of 1000 B: about 2000 virtual packets, got {:?}", a.1);
        // without a seed the line's default seed is used; `None` stops the source
        let mut l = Link::new(Rate::from_mbps(10), Buffer::Packets(50));
        l.set_cross(Some(InLinkCross::new(Rate::from_mbps(8), headroom_core::Bytes(1000))), 7, 0);
        l.catch_up(1_000_000_000);
        let before = l.cross_counts();
        l.set_cross(None, 7, 1_000_000_000);
        l.catch_up(2_000_000_000);
        assert!(before.sent > 800);
        assert_eq!(l.cross_counts(), before, "no virtual packet after the source stopped");
        assert_eq!(l.admit(3_000_000_000, 1000), Some(3_000_000_000 + 800_000), "an idle link again");
    }

    #[test]
    fn polling_without_end_gets_its_share_and_a_rest_refills_the_credit() {
        const MS: u64 = 1_000_000;
        let mut b = PollBudget::new(0.25, Dur::from_millis(200), 0);
        // Poll in 100 µs steps until the credit is out: 200 ms saved plus a quarter of the
        // time spent, 200/(1 − 0.25) = 266.7 ms.
        let mut t = 0;
        while b.may_poll() {
            t += 100_000;
            b.account(t, true);
        }
        assert!((266 * MS..=267 * MS).contains(&t), "polled {t} ns on a full credit");
        // Then it polls a quarter of the time: over 1 s, 250 ms.
        let (mut polled, end) = (0, t + 1_000 * MS);
        while t < end {
            let p = b.may_poll();
            t += 100_000;
            b.account(t, p);
            polled += p as u64 * 100_000;
        }
        assert!((249 * MS..=251 * MS).contains(&polled), "polled {polled} ns of 1 s");
        // 800 ms of rest (a quarter of it, 200 ms, is the depth) and the credit is full again.
        b.account(t + 800 * MS, false);
        let start = t + 800 * MS;
        t = start;
        while b.may_poll() {
            t += 100_000;
            b.account(t, true);
        }
        assert!((266 * MS..=267 * MS).contains(&(t - start)), "polled {} ns after the rest", t - start);
    }

    /// Runs `arrivals` (ns) through an [`ArrivalPoll`] with a 300 µs window and a full budget,
    /// deciding every microsecond up to `end`: the times it polled (µs) and its back-offs.
    fn poll_over(arrivals: &[u64], end: u64) -> (Vec<u64>, u32) {
        let mut p = ArrivalPoll::new(Dur::from_micros(300), PollBudget::new(1.0, Dur::from_secs(10), 0));
        let (mut polled, mut backoffs, mut next) = (Vec::new(), 0, 0);
        for us in 0..end / 1_000 {
            let t = us * 1_000;
            while next < arrivals.len() && arrivals[next] <= t {
                backoffs += p.on_arrival(t) as u32;
                next += 1;
            }
            if p.decide(t, false).poll {
                polled.push(us);
            }
        }
        (polled, backoffs)
    }

    #[test]
    fn a_train_is_polled_through_and_a_held_back_sender_makes_the_line_back_off() {
        const US: u64 = 1_000;
        // A train every 24 µs for 1 ms, the next 300 ms later: polled from its first packet to
        // 300 µs after its last, and again for the next; no back-off.
        let mut train: Vec<u64> = (0..42).map(|k| k * 24 * US).collect();
        train.extend((0..42).map(|k| 300_000 * US + k * 24 * US));
        let (polled, backoffs) = poll_over(&train, 302_000 * US);
        assert_eq!(backoffs, 0);
        let last = 41 * 24;
        assert!(polled.contains(&0) && polled.contains(&(last + 299)) && !polled.contains(&(last + 300)));
        assert_eq!(polled.iter().filter(|&&u| u < 300_000).count() as u64, last + 300);
        assert!(polled.contains(&300_000));
        // A sender held back on the box's core: each packet 10 µs after the last window ran out.
        // The fourth packet completes the signature (three windows in a row); from then on the
        // line sleeps (20 ms), so the rest of the burst comes at the sender's pace.
        let held: Vec<u64> = (0..8).map(|k| k * 310 * US).collect();
        let (polled, backoffs) = poll_over(&held, 5_000 * US);
        assert_eq!(backoffs, 1);
        assert_eq!(polled.len(), 900, "three windows polled: {} µs", polled.len());
        // One such window (a train's last packet, then the server's END) is no signature.
        let end_after_train: Vec<u64> = vec![0, 24 * US, 48 * US, 358 * US, 10_000 * US];
        let (polled, backoffs) = poll_over(&end_after_train, 11_000 * US);
        assert_eq!(backoffs, 0);
        assert!(polled.contains(&10_000), "the next train is polled");
        // A stream of one packet every 600 µs is polled after each packet: no back-off.
        let sparse: Vec<u64> = (0..5).map(|k| k * 600 * US).collect();
        assert_eq!(poll_over(&sparse, 3_000 * US), ((0..5).flat_map(|k| k * 600..k * 600 + 300).collect(), 0));
    }

    #[test]
    fn lateness_quantiles() {
        let mut s = CounterSnapshot::default();
        s.late_hist[0] = 90;
        s.late_hist[3] = 10;
        assert_eq!(s.lateness_quantile_bound(0.5), Dur::from_micros(1));
        assert_eq!(s.lateness_quantile_bound(0.99), Dur::from_micros(8));
    }
}
