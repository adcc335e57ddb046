//! `--emulate-cpu T`: the overlay paper's proxy CPU, emulated (Maki et al. §3.2; the model is
//! core's [`FifoCpu`]: one CPU, a FIFO queue in front, `T` per relayed packet and `10 T` per
//! accepted SYN and per upstream SYN-ACK).
//!
//! This is an emulation, not a measurement of the proxy's own cost: every split connection's
//! events reserve their service time on one shared virtual busy-until clock and wait (a tokio
//! sleep) until their reservation has been served before going on —
//! - an accepted client connection (its SYN): before the proxy connects upstream;
//! - the upstream's SYN-ACK: before the first byte is relayed;
//! - every relayed chunk of `n` bytes (`n / packet_bytes` packets): before it is written on.
//!
//! So relayed throughput is bounded by `packet_bytes / T` and a loaded proxy delays every split
//! connection by its queue, as in the paper's simulation, while the real process stays far from
//! saturating the machine's CPU (on a 2-core testbed the real proxy cannot be overloaded without
//! starving the emulated links themselves). Connections that are not split cost nothing here
//! (transparent mode never sees them; explicit mode relays them coupled, the simulator's fast
//! path). The sleep's granularity (tokio's timer, 1 ms) adds up to 1 ms to a job's end, never
//! capacity: the clock is virtual, a late wake-up does not move the next reservation.
//!
//! Every job's wait in the queue (known when it is reserved: the clock is virtual) is fed to the
//! split policy ([`PolicyDriver::on_queue_delay`]): policy D's input, as the simulator feeds its
//! proxy CPU's waits (`headroom_sim::overlay::world`); the other policies ignore it.

use crate::policy::PolicyDriver;
use crate::stats::Stats;
use headroom_core::overlay::FifoCpu;
use headroom_core::units::{Dur, Time};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The emulated CPU shared by every connection of one proxy.
pub struct EmulatedCpu {
    model: Mutex<FifoCpu>,
    origin: Instant,
    /// The policy that is told every job's wait.
    policy: Arc<Mutex<PolicyDriver>>,
}

impl EmulatedCpu {
    /// A CPU spending `per_packet` per packet of `packet_bytes`, telling `policy` every job's
    /// wait.
    pub fn new(per_packet: Duration, packet_bytes: u64, policy: Arc<Mutex<PolicyDriver>>) -> EmulatedCpu {
        let t = Dur(u64::try_from(per_packet.as_nanos()).unwrap_or(u64::MAX));
        EmulatedCpu { model: Mutex::new(FifoCpu::new(t, packet_bytes)), origin: Instant::now(), policy }
    }

    /// Reserves a job now, `job` giving its cost and the packets it counts; returns when the job
    /// ends (the caller waits until then).
    fn reserve(&self, job: impl FnOnce(&FifoCpu) -> (Dur, u64), stats: &Stats) -> Instant {
        let now = Instant::now();
        let t = Time(u64::try_from(now.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX));
        let (cost, end, waited, packets) = {
            let mut m = self.model.lock().expect("emulated cpu lock");
            let (c, packets) = job(&m);
            let waited0 = m.waited;
            let end = m.serve(t, c);
            (c, end, m.waited - waited0, packets)
        };
        stats.cpu_busy_ns.fetch_add(cost.as_nanos(), Relaxed);
        stats.cpu_wait_ns.fetch_add(waited.as_nanos(), Relaxed);
        stats.cpu_jobs.fetch_add(1, Relaxed);
        let start = now + Duration::from_nanos(waited.as_nanos());
        let spacing = Dur(cost.as_nanos() / packets.max(1));
        self.policy.lock().expect("policy lock").on_queue_delay(start, waited, packets, spacing);
        self.origin + Duration::from_nanos(end.as_nanos())
    }

    async fn wait(end: Instant) {
        if end > Instant::now() {
            tokio::time::sleep_until(end.into()).await;
        }
    }

    /// A SYN or SYN-ACK of a split connection: `10 T`.
    pub async fn syn(&self, stats: &Stats) {
        Self::wait(self.reserve(|m| (m.syn_cost(), 1), stats)).await;
    }

    /// `bytes` relayed bytes: `bytes / packet_bytes` packets of `T`.
    pub async fn data(&self, bytes: usize, stats: &Stats) {
        let n = bytes as u64;
        // The packets the chunk counts for policy D's per-packet average: rounded, at least one.
        let packets = |m: &FifoCpu| ((n + m.packet_bytes / 2) / m.packet_bytes).max(1);
        Self::wait(self.reserve(|m| (m.data_cost(n), packets(m)), stats)).await;
    }
}
