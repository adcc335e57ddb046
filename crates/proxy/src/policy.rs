//! Driving a core split policy ([`headroom_core::overlay::SplitPolicy`]) from the real proxy.
//!
//! The policy is sans-IO; this driver feeds it what the proxy sees, on the proxy's monotonic
//! clock (core `Time` = nanoseconds since the proxy started):
//! - every accepted client connection is a SYN ([`SplitPolicy::on_syn`], weight 10 in core);
//!   the upstream's SYN-ACK of a split connection is another;
//! - data packets: a user-space proxy does not see packets, so the relayed bytes (both
//!   directions) are counted as packets of `packet_bytes` (the MSS, 1448 B by default), fed
//!   every [`TICK`] so that they fall in the right second of policy C's `SampleLoad(T)`;
//! - queueing delays (policy D, [`SplitPolicy::on_queue_delay`]): with `--emulate-cpu`, the wait
//!   of every job of the emulated CPU (`crate::cpu`), computed by core's `FifoCpu` when the job
//!   is reserved (its virtual clock knows then when the service will start). The simulator feeds
//!   one wait per packet at the packet's service start; a relayed chunk is one job here, so it
//!   is fed as the packets it counts (`bytes / packet_bytes` rounded, at least one; a SYN or
//!   SYN-ACK is one), each with the job's wait, timestamped at its packet's service start
//!   within the job. Open choice: the packets of a chunk are not charged the wait behind each
//!   other (they reached the socket buffer over the time the chunk accumulated, which no packet
//!   clock here sees). The timestamps matter for D's idle reset, which must count from the end
//!   of the CPU's last service, not from the reservation of a long job. Without the emulated CPU
//!   the proxy has no per-packet queue it can observe (its queues are the kernel's socket
//!   buffers and the scheduler's run queue), so the CLI refuses policy D without
//!   `--emulate-cpu`;
//! - the decision is asked at accept, with the client's address (policy A) and no document
//!   size: policy B cannot know the size of a TCP byte stream when the connection starts (the
//!   decision precedes the first byte; in HTTP the size comes in the response, after the
//!   upstream connection exists), so B follows its `UnknownSize` setting.

use headroom_core::overlay::{ConnectionAttrs, SplitDecision, SplitPolicy};
use headroom_core::units::Dur;
use headroom_core::units::Time;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// How often relayed bytes are fed to the policy as packets.
pub const TICK: Duration = Duration::from_millis(100);

pub struct PolicyDriver {
    policy: SplitPolicy,
    origin: Instant,
    packet_bytes: u64,
    /// Relayed bytes already fed as packets.
    fed_bytes: u64,
}

impl PolicyDriver {
    pub fn new(policy: SplitPolicy, origin: Instant, packet_bytes: u64) -> PolicyDriver {
        PolicyDriver { policy, origin, packet_bytes: packet_bytes.max(1), fed_bytes: 0 }
    }

    fn time(&self, now: Instant) -> Time {
        Time(u64::try_from(now.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX))
    }

    /// Feeds the bytes relayed since the last call (`total_bytes` is the running total) as
    /// whole packets at `now`; the remainder waits for the next call.
    pub fn feed_bytes(&mut self, now: Instant, total_bytes: u64) {
        let t = self.time(now);
        let packets = total_bytes.saturating_sub(self.fed_bytes) / self.packet_bytes;
        for _ in 0..packets {
            self.policy.on_packet(t);
        }
        self.fed_bytes += packets * self.packet_bytes;
    }

    /// A client's SYN at `now` that nftables already selected (transparent mode).
    pub fn on_syn(&mut self, now: Instant) {
        let t = self.time(now);
        self.policy.on_syn(t);
    }

    /// Would a connection from an unlisted source with no known size be split now? Policy C's
    /// answer for transparent mode's gate (A's choice is made by nftables' source set; the
    /// others do not change with time).
    pub fn would_split(&mut self, now: Instant) -> bool {
        let t = self.time(now);
        match &self.policy {
            SplitPolicy::Users(_) => true,
            _ => self
                .policy
                .decide(
                    t,
                    &ConnectionAttrs { source: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), document_size: None },
                )
                .is_split(),
        }
    }

    /// A job of the (emulated) CPU whose service starts at `start` after waiting `waited` in the
    /// queue, standing for `packets` packets served `spacing` apart: fed to the policy as one
    /// sample of `waited` per packet, each at its packet's service start (see the module
    /// documentation).
    pub fn on_queue_delay(&mut self, start: Instant, waited: Dur, packets: u64, spacing: Dur) {
        let first = self.time(start);
        for i in 0..packets.max(1) {
            self.policy.on_queue_delay(first + Dur(spacing.0.saturating_mul(i)), waited);
        }
    }

    /// A SYN-ACK from the upstream (a split connection's second leg opened).
    pub fn on_syn_ack(&mut self, now: Instant) {
        let t = self.time(now);
        self.policy.on_syn(t);
    }

    /// A client's SYN at `now`: counts it, then decides.
    pub fn on_new_connection(&mut self, now: Instant, source: IpAddr) -> SplitDecision {
        let t = self.time(now);
        self.policy.on_syn(t);
        self.policy.decide(t, &ConnectionAttrs { source, document_size: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_core::overlay::{SourcePrefix, SplitUsers, SplitWhileLowLoad, SplitWhileShortQueue};

    #[test]
    fn policy_a_splits_listed_prefixes_only() {
        let p = SplitPolicy::Users(SplitUsers {
            users: vec![SourcePrefix::new("127.0.0.2".parse().unwrap(), 32).unwrap()],
        });
        let o = Instant::now();
        let mut d = PolicyDriver::new(p, o, 1448);
        assert!(d.on_new_connection(o, "127.0.0.2".parse().unwrap()).is_split());
        assert!(!d.on_new_connection(o, "127.0.0.1".parse().unwrap()).is_split());
    }

    #[test]
    fn policy_c_stops_splitting_when_relayed_bytes_and_syns_exceed_the_limit() {
        // t = 1 ms: the limit is 0.9 / t = 900 packets per second.
        let o = Instant::now();
        let mut d =
            PolicyDriver::new(SplitPolicy::LowLoad(SplitWhileLowLoad::paper(Dur::from_millis(1), Time(0))), o, 1000);
        assert!(d.on_new_connection(o, "127.0.0.1".parse().unwrap()).is_split());
        // Second 1: 2,000,000 bytes = 2000 packets of 1000 B; L(1) = 2000 + 10 > 900.
        d.feed_bytes(o + Duration::from_millis(500), 2_000_500);
        let later = o + Duration::from_millis(1500);
        assert!(!d.on_new_connection(later, "127.0.0.1".parse().unwrap()).is_split());
        // The 500 B remainder is kept for the next feed, not lost or counted twice.
        d.feed_bytes(later, 2_001_000);
        assert_eq!(d.fed_bytes, 2_001_000);
        // Idle seconds decay L by 7/8 each: after 20 idle seconds it is far below 900.
        assert!(d.on_new_connection(o + Duration::from_secs(22), "127.0.0.1".parse().unwrap()).is_split());
    }

    #[test]
    fn policy_d_stops_splitting_while_fed_waits_are_long_and_resumes_when_they_are_short() {
        let o = Instant::now();
        let d_policy = SplitWhileShortQueue::new(Dur::from_millis(2), SplitWhileShortQueue::IDLE_RESET);
        let mut d = PolicyDriver::new(SplitPolicy::ShortQueue(d_policy), o, 1448);
        let ms = |m: u64| o + Duration::from_millis(m);
        let src = "10.0.0.1".parse().unwrap();
        assert!(d.on_new_connection(o, src).is_split());
        assert!(d.would_split(o));
        // One job of 20 packets that waited 10 ms: 20 samples, the average goes above 2 ms
        // (it would stay at 10/8 = 1.25 ms as a single sample).
        let us = Dur::from_micros(250);
        d.on_queue_delay(ms(1), Dur::from_millis(10), 20, us);
        assert!(!d.on_new_connection(ms(2), src).is_split());
        assert!(!d.would_split(ms(2)));
        // Short waits bring it back under the target.
        for k in 0..10 {
            d.on_queue_delay(ms(3 + k), Dur::ZERO, 10, us);
        }
        assert!(d.would_split(ms(13)));
        // A long wait again: a job of 400 packets of 250 us served from 20 ms to 120 ms. Its
        // service is not idleness: 60 ms after its start (past the 50 ms reset counted from the
        // reservation) it still does not split; 50 ms after its last packet it splits again.
        d.on_queue_delay(ms(20), Dur::from_millis(50), 400, us);
        assert!(!d.would_split(ms(21)));
        assert!(!d.on_new_connection(ms(80), src).is_split());
        assert!(!d.would_split(ms(120 + 45)));
        assert!(d.on_new_connection(ms(120 + 51), src).is_split());
    }
}
