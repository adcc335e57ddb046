//! The delay box: propagation delay and random loss for the bottleneck, from two TUN devices.
//!
//! This kernel has no netem, so, like mahimahi's `mm-delay`, the testbed moves packets through
//! user space. The left router routes everything for the right side into its TUN device `dbox`;
//! the right router routes everything for the left side into its own `dbox`. One thread per
//! direction reads packets from one TUN device and writes them into the other:
//!
//! 1. On arrival (the `read` that returns the packet) the packet is stamped `t_arr` from
//!    `CLOCK_MONOTONIC`, dropped with probability `loss` (Bernoulli, [`Rng::bernoulli`] of headroom's one
//!    generator, so a seed reproduces the same drop pattern), or else queued with release time
//!    `t_arr + delay + extra(src) + extra(dst)` (`extra` is a host's access-link delay).
//! 2. Packets leave in release-time order (a binary heap; ties in arrival order, so packets of
//!    one flow, which all get the same delay, are never reordered).
//! 3. Between packets the thread sleeps in `ppoll` on the input device with a 1 ns timer slack,
//!    waking up `spin` before the next release and spinning the rest, which gives
//!    microsecond-accurate release without burning a core when idle. The threads run at
//!    SCHED_FIFO priority 10, so compilers or test traffic on a 2-core machine do not delay
//!    releases by milliseconds.
//!
//! The rate limiter (tbf) sits on the left router's `dbox` *before* the delay box, so a packet
//! first waits in the bottleneck queue, then is serialised at the bottleneck rate, then
//! propagates: the order of a real link. The TUN txqueuelen is raised to 10 000 because a TUN
//! device drops (not queues) when its ring of `txqueuelen` packets is full.
//!
//! Choices mahimahi leaves open and this box makes: loss is applied on arrival (a lost packet
//! never occupies the delay line); the box's own queue holds at most `MAX_HELD` packets (more
//! would mean a delay-bandwidth product over 1.5 GB) and counts `overflow` drops beyond it; the
//! lateness of every release (actual write time minus scheduled release) is recorded, which is
//! the box's added-delay error.

use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, HashMap};
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use headroom_core::rng::Rng;
use headroom_core::Dur;

use crate::sys;

/// SCHED_FIFO priority of the delay lines (low among real-time priorities: above every normal
/// process, below kernel threads that use RT priorities).
pub const REALTIME_PRIORITY: i32 = 10;
/// Default spin before a release (the RT thread wakes from ppoll within a few µs).
pub const DEFAULT_SPIN_NS: u64 = 20_000;
/// Packets the delay line holds at most per direction.
pub const MAX_HELD: usize = 1 << 20;
/// Longest sleep between checks of the stop flag.
const IDLE_NS: u64 = 20_000_000;
/// Packets read in a row before releasing due packets again.
const READ_BATCH: usize = 64;

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
    /// Run the line's thread at real-time priority [`REALTIME_PRIORITY`] (SCHED_FIFO) so that
    /// other load on the machine does not delay releases.
    pub realtime: bool,
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
    pub late_sum_ns: AtomicU64,
    pub late_max_ns: AtomicU64,
    pub late_hist: [AtomicU64; LATE_BUCKETS],
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
    pub late_sum_ns: u64,
    pub late_max_ns: u64,
    pub late_hist: [u64; LATE_BUCKETS],
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
            late_sum_ns: self.late_sum_ns.load(Ordering::Relaxed),
            late_max_ns: self.late_max_ns.load(Ordering::Relaxed),
            late_hist,
        }
    }
}

impl CounterSnapshot {
    /// Counter increase from `earlier` to `self` (the maximum lateness is kept as is).
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
            late_sum_ns: self.late_sum_ns - earlier.late_sum_ns,
            late_max_ns: self.late_max_ns,
            late_hist,
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
        let mut threads = Vec::new();
        for (dir, input, output, cfg, counters) in
            [("f", left.clone(), right.clone(), forward, fc.clone()), ("r", right, left, reverse, rc.clone())]
        {
            let stop = stop.clone();
            let t = std::thread::Builder::new()
                .name(format!("{name}dly{dir}"))
                .spawn(move || run_line(&input, &output, cfg, &counters, &stop))?;
            threads.push(t);
        }
        Ok(DelayBox { stop, threads, forward: fc, reverse: rc })
    }

    /// Stops both directions and waits for them (drops the TUN devices with the last fd).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
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

fn run_line(input: &OwnedFd, output: &OwnedFd, cfg: LineConfig, c: &Counters, stop: &AtomicBool) {
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
    while !stop.load(Ordering::Relaxed) {
        // 1. take in what has arrived
        for _ in 0..READ_BATCH {
            let n = match sys::read_fd(inp, &mut scratch) {
                Ok(Some(n)) if n > 0 => n,
                _ => break,
            };
            let t_arr = sys::now_ns();
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
            heap.push(Held { release: t_arr + d, seq, packet });
            seq += 1;
        }
        // 2. release what is due
        let mut now = sys::now_ns();
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
        // 3. wait for the next arrival or release
        let wait = heap.peek().map_or(IDLE_NS, |h| h.release.saturating_sub(now)).min(IDLE_NS);
        if wait > spin {
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
    fn lateness_quantiles() {
        let mut s = CounterSnapshot::default();
        s.late_hist[0] = 90;
        s.late_hist[3] = 10;
        assert_eq!(s.lateness_quantile_bound(0.5), Dur::from_micros(1));
        assert_eq!(s.lateness_quantile_bound(0.99), Dur::from_micros(8));
    }
}
