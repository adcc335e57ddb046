//! The proxy's processing model (Maki et al. §3.2): one CPU with a FIFO queue in front of it,
//! `t` per data packet and `10 t` per SYN and per SYN-ACK ("SYN および SYN/ACK パケットの処理
//! 時間を、通常のデータパケットの 10 倍とする") — the same weights as policy C's `SampleLoad`.
//!
//! [`FifoCpu`] is the model as a virtual *busy-until* clock: a job arriving at `now` starts at
//! `max(now, busy_until)` and ends `cost` later, FIFO, unbounded. The real proxy's
//! `--emulate-cpu` (`headroom_proxy::cpu`) reserves every relayed chunk and every connection
//! event here and holds the bytes until the job's end, so overload shows as delay on a machine
//! whose real CPU the proxy cannot saturate without starving the rest of the testbed.
//!
//! Choices the paper leaves open: a user-space proxy relays byte chunks, not packets, so a chunk
//! of `n` bytes costs `n / packet_bytes` packets, fractionally (the same count policy C is fed,
//! see `headroom_proxy::policy`); ACKs are not charged (a split connection's ACKs are the
//! kernel's, below the proxy).

use super::policies::SYN_WEIGHT;
use crate::units::{Dur, Time};

/// One CPU with a FIFO queue, as a virtual clock (module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct FifoCpu {
    /// `t`, the time per data packet.
    pub per_packet: Dur,
    /// Bytes counted as one packet.
    pub packet_bytes: u64,
    busy_until: Time,
    /// Total service time given (the CPU's busy time).
    pub busy: Dur,
    /// Total time jobs waited before their service started.
    pub waited: Dur,
    /// Jobs served.
    pub jobs: u64,
}

impl FifoCpu {
    pub fn new(per_packet: Dur, packet_bytes: u64) -> FifoCpu {
        FifoCpu {
            per_packet,
            packet_bytes: packet_bytes.max(1),
            busy_until: Time::ZERO,
            busy: Dur::ZERO,
            waited: Dur::ZERO,
            jobs: 0,
        }
    }

    /// The service time of `bytes` relayed bytes: `bytes / packet_bytes` packets of `t`.
    pub fn data_cost(&self, bytes: u64) -> Dur {
        Dur((u128::from(bytes) * u128::from(self.per_packet.as_nanos()) / u128::from(self.packet_bytes)) as u64)
    }

    /// The service time of a SYN or a SYN-ACK: `10 t`.
    pub fn syn_cost(&self) -> Dur {
        Dur(self.per_packet.as_nanos() * SYN_WEIGHT)
    }

    /// A job of `cost` arrives at `now`: returns when the CPU finishes it. Arrivals must come in
    /// time order (a late one is served as if it arrived at the current clock).
    pub fn serve(&mut self, now: Time, cost: Dur) -> Time {
        let start = if self.busy_until > now { self.busy_until } else { now };
        self.waited += start.saturating_since(now);
        self.busy += cost;
        self.jobs += 1;
        self.busy_until = start + cost;
        self.busy_until
    }

    /// When the CPU will have served every job given so far.
    pub fn busy_until(&self) -> Time {
        self.busy_until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_are_t_per_packet_and_ten_t_per_syn() {
        let c = FifoCpu::new(Dur::from_micros(100), 1000);
        assert_eq!(c.data_cost(1000), Dur::from_micros(100));
        assert_eq!(c.data_cost(2500), Dur::from_micros(250));
        assert_eq!(c.data_cost(0), Dur::ZERO);
        assert_eq!(c.syn_cost(), Dur::from_millis(1));
    }

    #[test]
    fn jobs_queue_fifo_and_an_idle_cpu_starts_at_once() {
        let mut c = FifoCpu::new(Dur::from_millis(1), 1000);
        let ms = |m: u64| Time(m * 1_000_000);
        // Three jobs of 2 ms at t = 0: they end at 2, 4, 6 ms.
        assert_eq!(c.serve(ms(0), Dur::from_millis(2)), ms(2));
        assert_eq!(c.serve(ms(0), Dur::from_millis(2)), ms(4));
        assert_eq!(c.serve(ms(1), Dur::from_millis(2)), ms(6));
        assert_eq!(c.waited, Dur::from_millis(2 + 3));
        // Idle from 6 to 10 ms: the next job starts when it arrives.
        assert_eq!(c.serve(ms(10), Dur::from_millis(1)), ms(11));
        assert_eq!(c.busy, Dur::from_millis(7));
        assert_eq!(c.jobs, 4);
        assert_eq!(c.busy_until(), ms(11));
        // Whatever the arrival pattern, n packets take at least n t of virtual time.
        let mut c = FifoCpu::new(Dur::from_micros(50), 1448);
        let mut end = Time::ZERO;
        for k in 0..1000u64 {
            end = c.serve(Time(k * 10_000), c.data_cost(1448));
        }
        assert!(end >= Time(1000 * 50_000), "{end:?}");
    }
}
