//! Test-only model of a path: one FIFO bottleneck of capacity `C` shared with constant-rate
//! fluid cross traffic `X` (available bandwidth `C - X`), fixed propagation delays, and an
//! uncongested return path. Exact for a fluid cross traffic: a packet of `L` bits entering at `t`
//! with backlog `Q(t)` leaves at `t + (Q(t) + L) / C`; between packets the backlog drains at
//! `C - X` (or grows at `X - C`).

use crate::rng::Rng;
use crate::units::{Bytes, Dur, Time};

pub(crate) struct FluidPath {
    /// Bottleneck capacity, bit/s.
    pub capacity: f64,
    /// Cross traffic rate, bit/s.
    pub cross: f64,
    /// Propagation delay sender -> receiver (through the bottleneck).
    pub fwd_delay: Dur,
    /// Propagation delay receiver -> sender.
    pub ret_delay: Dur,
    backlog: f64,
    last: Time,
    /// Packet cross traffic (Poisson arrivals, Internet size mix) instead of a fluid.
    packets: Option<CrossPackets>,
}

/// Poisson cross traffic with the simple Internet packet-size mix (7/12 of 40 B, 4/12 of
/// 576 B, 1/12 of 1500 B; mean 340 B).
pub(crate) struct CrossPackets {
    rng: Rng,
    next: f64,
}

impl CrossPackets {
    /// An Internet-mix size (40, 576 and 1500 bytes in the ratio 7:4:1), in bits.
    fn size_bits(&mut self) -> f64 {
        8.0 * self.rng.weighted(&[(40.0, 7), (576.0, 4), (1500.0, 1)]).unwrap_or(1500.0)
    }
}

impl FluidPath {
    pub fn new(capacity_mbps: f64, cross_mbps: f64, fwd_delay: Dur, ret_delay: Dur) -> FluidPath {
        FluidPath {
            capacity: capacity_mbps * 1e6,
            cross: cross_mbps * 1e6,
            fwd_delay,
            ret_delay,
            backlog: 0.0,
            last: Time::ZERO,
            packets: None,
        }
    }

    /// The same path with packet cross traffic of the same mean rate (seeded).
    pub fn with_packet_cross(mut self, seed: u64) -> FluidPath {
        self.packets = Some(CrossPackets { rng: Rng::new(seed), next: 0.0 });
        self
    }

    fn advance(&mut self, t: Time) {
        if let Some(mut cp) = self.packets.take() {
            let now = t.as_secs_f64();
            let mut last = self.last.as_secs_f64();
            let mean_bits = 8.0 * (7.0 * 40.0 + 4.0 * 576.0 + 1500.0) / 12.0;
            while cp.next <= now {
                self.backlog = (self.backlog - self.capacity * (cp.next - last).max(0.0)).max(0.0);
                self.backlog += cp.size_bits();
                last = cp.next.max(last);
                let rate = self.cross / mean_bits;
                cp.next += if rate > 0.0 { cp.rng.exponential(1.0 / rate) } else { f64::INFINITY };
            }
            self.backlog = (self.backlog - self.capacity * (now - last).max(0.0)).max(0.0);
            self.last = self.last.max(t);
            self.packets = Some(cp);
            return;
        }
        if t > self.last {
            let dt = (t - self.last).as_secs_f64();
            self.backlog = (self.backlog + (self.cross - self.capacity) * dt).max(0.0);
            self.last = t;
        }
    }

    /// Changes the cross traffic rate from `t` on.
    pub fn set_cross(&mut self, t: Time, cross_mbps: f64) {
        self.advance(t);
        self.cross = cross_mbps * 1e6;
    }

    /// A packet leaves the sender at `t`; returns its arrival time at the receiver.
    pub fn send(&mut self, t: Time, bytes: Bytes) -> Time {
        self.advance(t);
        let bits = bytes.bits() as f64;
        let depart = t + Dur::from_secs_f64((self.backlog + bits) / self.capacity);
        self.backlog += bits;
        depart + self.fwd_delay
    }
}
