//! Driving a core split policy ([`headroom_core::overlay::SplitPolicy`]) from the real proxy.
//!
//! The policy is sans-IO; this driver feeds it what the proxy sees, on the proxy's monotonic
//! clock (core `Time` = nanoseconds since the proxy started):
//! - every accepted client connection is a SYN ([`SplitPolicy::on_syn`], weight 10 in core);
//!   the upstream's SYN-ACK of a split connection is another;
//! - data packets: a user-space proxy does not see packets, so the relayed bytes (both
//!   directions) are counted as packets of `packet_bytes` (the MSS, 1448 B by default), fed
//!   every [`TICK`] so that they fall in the right second of policy C's `SampleLoad(T)`;
//! - the decision is asked at accept, with the client's address (policy A) and no document
//!   size: policy B cannot know the size of a TCP byte stream when the connection starts (the
//!   decision precedes the first byte; in HTTP the size comes in the response, after the
//!   upstream connection exists), so B follows its `UnknownSize` setting.

use headroom_core::overlay::{ConnectionAttrs, SplitDecision, SplitPolicy};
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
    use headroom_core::overlay::{SourcePrefix, SplitUsers, SplitWhileLowLoad};
    use headroom_core::units::Dur;

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
}
