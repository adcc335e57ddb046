//! Policies A, B and C of Maki et al. §3.2, and policy C's load estimator.

use super::{ConnectionAttrs, PassReason, SplitDecision};
use crate::units::{Bytes, Dur, Time};
use std::net::IpAddr;

/// What a SYN adds to `SampleLoad` (§3.2: "SYN processing takes 10 times a data packet, so
/// SampleLoad(T) is increased by 10"). We count a SYN as 10 in total, not 1 + 10.
pub(crate) const SYN_WEIGHT: u64 = 10;

/// A source-address prefix (`addr/len`): policy A's "user" is every client in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourcePrefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl SourcePrefix {
    /// `addr/len`; `None` when `len` exceeds the address's width (32 or 128).
    pub fn new(addr: IpAddr, len: u8) -> Option<SourcePrefix> {
        let width = if addr.is_ipv4() { 32 } else { 128 };
        (len <= width).then_some(SourcePrefix { addr, len })
    }

    /// Is `ip` inside this prefix? Addresses of the other family never are.
    pub fn contains(&self, ip: IpAddr) -> bool {
        fn masked(a: u128, b: u128, len: u8, width: u8) -> bool {
            if len == 0 {
                return true;
            }
            let shift = u32::from(width - len);
            (a >> shift) == (b >> shift)
        }
        match (self.addr, ip) {
            (IpAddr::V4(p), IpAddr::V4(a)) => masked(u32::from(p).into(), u32::from(a).into(), self.len, 32),
            (IpAddr::V6(p), IpAddr::V6(a)) => masked(u128::from(p), u128::from(a), self.len, 128),
            _ => false,
        }
    }
}

/// Policy A (§3.2, "一部のユーザの接続のみ分割"): split only the connections of a configured
/// set of users. The paper splits the connections of 300 users without saying how users are
/// chosen or named; we name them by source prefixes (a `/32` is one host).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitUsers {
    pub users: Vec<SourcePrefix>,
}

impl SplitUsers {
    pub fn decide(&self, conn: &ConnectionAttrs) -> SplitDecision {
        if self.users.iter().any(|p| p.contains(conn.source)) {
            SplitDecision::Split
        } else {
            SplitDecision::Pass(PassReason::UserNotListed)
        }
    }
}

/// What policy B does with a connection whose document size is not known at the SYN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnknownSize {
    Split,
    Pass,
}

/// Policy B (§3.2, "ドキュメントサイズの大きい接続のみ分割"): split only documents of at least
/// `threshold` bytes (2000 in the paper, which picked it so that the small documents' transfer
/// time would grow). The paper's simulator knows every size; a real proxy usually does not, hence
/// `unknown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitLargeDocuments {
    pub threshold: Bytes,
    pub unknown: UnknownSize,
}

impl SplitLargeDocuments {
    /// The paper's setting: 2000 bytes; unknown sizes pass.
    pub fn paper() -> SplitLargeDocuments {
        SplitLargeDocuments { threshold: Bytes(2000), unknown: UnknownSize::Pass }
    }

    pub fn decide(&self, conn: &ConnectionAttrs) -> SplitDecision {
        match conn.document_size {
            Some(size) if size >= self.threshold => SplitDecision::Split,
            Some(size) => SplitDecision::Pass(PassReason::SmallDocument { size, threshold: self.threshold }),
            None => match self.unknown {
                UnknownSize::Split => SplitDecision::Split,
                UnknownSize::Pass => SplitDecision::Pass(PassReason::SizeUnknown),
            },
        }
    }
}

/// Policy C's load `L(T)` in packets per second (§3.2):
///
/// ```text
/// L(1) = SampleLoad(1)
/// L(T) = 7/8 L(T-1) + 1/8 SampleLoad(T)      T = 2, 3, ...
/// ```
///
/// `SampleLoad(T)` is the number of packets that arrived in `(T-1, T]` seconds, counting each SYN
/// as `SYN_WEIGHT`. Seconds are counted from `origin` (the proxy's start). A second in which
/// nothing arrives has `SampleLoad = 0`: the estimate decays by 7/8 per idle second. Open choice:
/// until the first second is over there is no `L(1)`; [`LoadEstimator::load`] then returns the
/// count so far in that second, a lower bound of `SampleLoad(1)`.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadEstimator {
    origin: Time,
    /// The second being counted: `(current - 1, current]` after `origin`, `current >= 1`.
    current: u64,
    /// Packets counted so far in the current second.
    sample: u64,
    /// `L(current - 1)`, `None` while `current == 1`.
    load: Option<f64>,
}

impl LoadEstimator {
    pub fn new(origin: Time) -> LoadEstimator {
        LoadEstimator { origin, current: 1, sample: 0, load: None }
    }

    /// The second `(T-1, T]` that `now` falls in (`T >= 1`); instants before `origin` count in the
    /// first second.
    fn second_of(&self, now: Time) -> u64 {
        let ns = now.saturating_since(self.origin).as_nanos();
        let sec = Dur::from_secs(1).as_nanos();
        ns.div_ceil(sec).max(1)
    }

    /// Close every whole second before the one `now` falls in.
    fn advance(&mut self, now: Time) {
        let t = self.second_of(now);
        if t <= self.current {
            return;
        }
        // Close the current second with its sample.
        let sample = self.sample as f64;
        let mut l = match self.load {
            None => sample,
            Some(prev) => 7.0 / 8.0 * prev + sample / 8.0,
        };
        // Idle whole seconds in between: SampleLoad = 0 each.
        let idle = t - self.current - 1;
        if idle > 0 {
            l *= (7.0f64 / 8.0).powi(i32::try_from(idle).unwrap_or(i32::MAX));
        }
        self.load = Some(l);
        self.current = t;
        self.sample = 0;
    }

    /// `count` packets (a SYN counts `SYN_WEIGHT`) arrived at `now`. Events must come in time
    /// order; a late one is counted in the current second.
    pub fn on_packets(&mut self, now: Time, count: u64) {
        self.advance(now);
        self.sample += count;
    }

    /// `L(T)` for the last whole second before `now` (packets per second), or the count so far
    /// when the first second is not over.
    pub fn load(&mut self, now: Time) -> f64 {
        self.advance(now);
        self.load.unwrap_or(self.sample as f64)
    }
}

/// Policy C (§3.2, "TCP プロキシの負荷が低い場合にのみ分割"): split when
/// `L(T) < 0.9 / t`, `t` the CPU time per data packet — the CPU is less than 90 % busy. The
/// `utilisation` (0.9 in the paper) is a field.
#[derive(Clone, Debug, PartialEq)]
pub struct SplitWhileLowLoad {
    pub per_packet: Dur,
    pub utilisation: f64,
    pub(crate) load: LoadEstimator,
}

impl SplitWhileLowLoad {
    /// Policy C for a CPU spending `per_packet` per data packet, with the paper's 90 %.
    pub fn paper(per_packet: Dur, origin: Time) -> SplitWhileLowLoad {
        SplitWhileLowLoad { per_packet, utilisation: 0.9, load: LoadEstimator::new(origin) }
    }

    /// `utilisation / t`, the load (packets per second) at and above which C stops splitting.
    pub fn limit_pps(&self) -> f64 {
        self.utilisation / self.per_packet.as_secs_f64()
    }

    /// The current `L(T)`.
    pub fn load_pps(&mut self, now: Time) -> f64 {
        self.load.load(now)
    }

    pub fn decide(&mut self, now: Time) -> SplitDecision {
        let load_pps = self.load.load(now);
        let limit_pps = self.limit_pps();
        if load_pps < limit_pps {
            SplitDecision::Split
        } else {
            SplitDecision::Pass(PassReason::Overloaded { load_pps, limit_pps })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::SplitPolicy;
    use super::*;
    use std::net::Ipv4Addr;

    fn conn(ip: [u8; 4], size: Option<u64>) -> ConnectionAttrs {
        ConnectionAttrs { source: IpAddr::V4(Ipv4Addr::from(ip)), document_size: size.map(Bytes) }
    }

    #[test]
    fn policy_a_splits_only_listed_prefixes() {
        let p = |a: [u8; 4], l| SourcePrefix::new(IpAddr::V4(Ipv4Addr::from(a)), l).unwrap();
        let mut pol = SplitPolicy::Users(SplitUsers { users: vec![p([10, 1, 0, 0], 16), p([192, 168, 0, 7], 32)] });
        assert!(pol.decide(Time::ZERO, &conn([10, 1, 200, 3], None)).is_split());
        assert!(pol.decide(Time::ZERO, &conn([192, 168, 0, 7], None)).is_split());
        assert_eq!(
            pol.decide(Time::ZERO, &conn([192, 168, 0, 8], None)),
            SplitDecision::Pass(PassReason::UserNotListed)
        );
        assert!(!pol.decide(Time::ZERO, &conn([10, 2, 0, 1], None)).is_split());
        assert!(SourcePrefix::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 33).is_none());
        let v6 = SourcePrefix::new("2001:db8::".parse().unwrap(), 32).unwrap();
        assert!(v6.contains("2001:db8:1::5".parse().unwrap()));
        assert!(!v6.contains("2001:db9::5".parse().unwrap()));
        assert!(!v6.contains(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    }

    #[test]
    fn policy_b_splits_documents_of_at_least_2000_bytes() {
        let b = SplitLargeDocuments::paper();
        assert!(b.decide(&conn([1, 2, 3, 4], Some(2000))).is_split());
        assert!(!b.decide(&conn([1, 2, 3, 4], Some(1999))).is_split());
        assert_eq!(b.decide(&conn([1, 2, 3, 4], None)), SplitDecision::Pass(PassReason::SizeUnknown));
        let b2 = SplitLargeDocuments { unknown: UnknownSize::Split, ..b };
        assert!(b2.decide(&conn([1, 2, 3, 4], None)).is_split());
    }

    #[test]
    fn load_estimator_follows_the_papers_recursion() {
        let mut l = LoadEstimator::new(Time::ZERO);
        let at = |s: f64| Time::from_secs_f64(s);
        // First second: 80 packets and 2 SYNs -> SampleLoad(1) = 100.
        for i in 0..80 {
            l.on_packets(at(0.01 * i as f64 + 0.001), 1);
        }
        l.on_packets(at(0.9), SYN_WEIGHT);
        l.on_packets(at(0.95), SYN_WEIGHT);
        assert_eq!(l.load(at(0.99)), 100.0, "running count before L(1) exists");
        assert_eq!(l.load(at(1.5)), 100.0, "L(1) = SampleLoad(1)");
        // Second 2: 20 packets -> L(2) = 7/8 100 + 1/8 20 = 90.
        for i in 0..20 {
            l.on_packets(at(1.5 + 0.01 * i as f64), 1);
        }
        assert_eq!(l.load(at(2.5)), 90.0);
        // Seconds 3 and 4 idle -> L(4) = 90 (7/8)^2.
        assert!((l.load(at(4.5)) - 90.0 * 49.0 / 64.0).abs() < 1e-9);
    }

    #[test]
    fn policy_c_splits_fewer_connections_as_load_rises_and_never_at_or_above_the_limit() {
        // t = 1 ms: the CPU serves 1000 packets/s; C stops at L(T) >= 900.
        let t = Dur::from_millis(1);
        let mut fractions = Vec::new();
        for rate in [200u64, 600, 850, 950, 1200, 2000] {
            let mut pol = SplitPolicy::LowLoad(SplitWhileLowLoad::paper(t, Time::ZERO));
            let mut split = 0;
            let mut asked = 0;
            // 20 s of `rate` packets per second plus one new connection (one SYN) every 50 ms;
            // the load varies a little around the offered rate because of the SYNs.
            let step = 1_000_000_000 / rate;
            let mut next_syn = 0u64;
            for k in 0..(20 * rate) {
                let now = Time(k * step);
                pol.on_packet(now);
                if now.0 >= next_syn {
                    next_syn += 50_000_000;
                    pol.on_syn(now);
                    let d = pol.decide(now, &conn([10, 0, 0, 1], Some(5000)));
                    let SplitPolicy::LowLoad(c) = &mut pol else { unreachable!() };
                    let load = c.load_pps(now);
                    if load >= c.limit_pps() {
                        assert!(!d.is_split(), "split at L = {load} >= {}", c.limit_pps());
                    } else {
                        assert!(d.is_split(), "passed at L = {load} < {}", c.limit_pps());
                    }
                    asked += 1;
                    split += u32::from(d.is_split());
                }
            }
            fractions.push(f64::from(split) / f64::from(asked));
        }
        assert!(fractions.windows(2).all(|w| w[0] >= w[1]), "{fractions:?}");
        assert_eq!(fractions[0], 1.0, "{fractions:?}");
        assert!(fractions[5] < 0.1, "{fractions:?}");
    }
}
