//! Passive bandwidth estimators that ImTCP is compared with (§2, §4.2, Fig. 10), run over the
//! same ACK events (or, for TCP-Rab, the same data arrivals at the receiver). They only watch;
//! they never change what TCP sends.
//!
//! - [`Westwood`] — TCP Westwood's bandwidth estimate. Default: the **original** estimator
//!   (Mascolo, Casetti, Gerla, Sanadidi, Wang, MobiCom 2001), which the ImTCP paper cites \[14\]:
//!   every ACK gives a sample `b_k = d_k / (t_k - t_{k-1})`, `d_k` the bytes it acknowledges
//!   (a duplicate ACK counts one segment, later deducted from the cumulative ACK that covers it,
//!   the paper's "accounting"), filtered by the time-varying Tustin low-pass filter
//!   `b̂_k = α_k b̂_{k-1} + (1 - α_k)(b_k + b_{k-1})/2`, `α_k = (2τ - Δ_k)/(2τ + Δ_k)`
//!   (α clamped at 0 when an ACK gap exceeds 2τ). [`WestwoodVariant::Plus`] gives Westwood+
//!   (Mascolo et al. 2004) as Linux `tcp_westwood.c` computes it: one sample per RTT window
//!   (a window closes at the first ACK more than max(latest RTT sample, 50 ms) after it opened),
//!   bytes acknowledged in the window over its duration, filtered twice with gain 1/8:
//!   `b̂_ns = 7/8 b̂_ns + 1/8 b`, then `b̂ = 7/8 b̂ + 1/8 b̂_ns` (both start at the first sample).
//!   This one estimator serves the passive comparison and the Westwood+ congestion controller
//!   ([`crate::cc::westwood`]).
//! - [`Hoe`] — Hoe's start-up estimate (SIGCOMM 1996): the least-squares slope of the
//!   cumulative ACK number against the arrival time of three consecutive ACKs. Hoe measures
//!   once, at connection start; as the ImTCP paper does for its comparison, headroom repeats it
//!   every RTT (on the first three new ACKs after each SRTT boundary).
//! - [`Rab`] — TCP-Rab's receiver-side estimate (reference \[15\] of the ImTCP paper): the receiver
//!   measures the arrival rate of data segments, free of the ACK path's noise. headroom's
//!   reading: one sample per `period` (default: the sender's SRTT when the driver gives it, else
//!   100 ms), bytes received after the period's first segment over the time from the first to
//!   the last arrival, smoothed with gain 1/8. The original's window advertisement to the sender
//!   is not modelled (only the estimate is compared).
//!
//! Every estimator exposes its current value and a stream of [`Estimate`]s (one per sample, the
//! search range set to zero: there is none).

use std::collections::VecDeque;

use super::Estimate;
use crate::cc::AckEvent;
use crate::units::{Bytes, Dur, Rate, Time};

/// A passive estimator over ACK events.
pub trait PassiveEstimator {
    /// Short name for reports ("westwood", "westwood+", "hoe", "rab").
    fn name(&self) -> &'static str;
    /// Every ACK the sender receives (new or duplicate).
    fn on_ack(&mut self, ev: &AckEvent);
    /// The current estimate.
    fn estimate(&self) -> Option<Rate>;
    /// Next sample not yet drained.
    fn poll_estimate(&mut self) -> Option<Estimate>;
}

const MAX_QUEUED: usize = 4096;

fn push(q: &mut VecDeque<Estimate>, time: Time, value: f64) {
    if q.len() >= MAX_QUEUED {
        q.pop_front();
    }
    q.push_back(Estimate {
        time,
        value: Rate(value.max(0.0).round() as u64),
        search_range: (Rate::ZERO, Rate::ZERO),
        in_range: true,
    });
}

/// Which Westwood estimator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WestwoodVariant {
    /// Per-ACK samples, Tustin filter (MobiCom 2001).
    Original,
    /// Per-RTT samples, 7/8 EWMA (Westwood+).
    Plus,
}

/// TCP Westwood's bandwidth estimator.
#[derive(Clone, Debug)]
pub struct Westwood {
    variant: WestwoodVariant,
    /// Filter time constant τ (Original).
    tau: Dur,
    last_ack_time: Option<Time>,
    last_sample: f64,
    filtered: Option<f64>,
    /// Westwood+: the first filter's output (Linux's `bw_ns_est`).
    non_smoothed: f64,
    /// Westwood+: the latest RTT sample (Linux's `w->rtt`).
    latest_rtt: Option<Dur>,
    /// Bytes credited to duplicate ACKs not yet covered by a cumulative ACK.
    accounted: u64,
    /// Westwood+: start of the current RTT window.
    window_start: Option<Time>,
    /// Bytes not yet in a sample (Westwood+: this RTT's; original: ACKs at one instant).
    pending_bytes: u64,
    out: VecDeque<Estimate>,
}

impl Westwood {
    /// The original estimator with filter time constant `tau` (headroom's default 0.5 s).
    pub fn original(tau: Dur) -> Westwood {
        Westwood::new(WestwoodVariant::Original, tau)
    }
    /// Westwood+.
    pub fn plus() -> Westwood {
        Westwood::new(WestwoodVariant::Plus, Dur::ZERO)
    }
    pub fn new(variant: WestwoodVariant, tau: Dur) -> Westwood {
        Westwood {
            variant,
            tau: if tau.0 == 0 { Dur::from_millis(500) } else { tau },
            last_ack_time: None,
            last_sample: 0.0,
            filtered: None,
            non_smoothed: 0.0,
            latest_rtt: None,
            accounted: 0,
            window_start: None,
            pending_bytes: 0,
            out: VecDeque::new(),
        }
    }

    /// Bytes this ACK newly delivers, with duplicate-ACK accounting.
    fn delivered(&mut self, ev: &AckEvent) -> u64 {
        if ev.newly_acked.0 == 0 {
            self.accounted += ev.mss.0;
            return ev.mss.0;
        }
        let acked = ev.newly_acked.0;
        if self.accounted >= acked {
            self.accounted -= acked;
            // a cumulative ACK after dupACKs: at least one segment arrived
            ev.mss.0.min(acked)
        } else {
            let d = acked - self.accounted;
            self.accounted = 0;
            d
        }
    }
}

impl PassiveEstimator for Westwood {
    fn name(&self) -> &'static str {
        match self.variant {
            WestwoodVariant::Original => "westwood",
            WestwoodVariant::Plus => "westwood+",
        }
    }

    fn on_ack(&mut self, ev: &AckEvent) {
        let d = self.delivered(ev);
        match self.variant {
            WestwoodVariant::Original => {
                let Some(prev) = self.last_ack_time.replace(ev.now) else {
                    return;
                };
                let dt = ev.now.saturating_since(prev).as_secs_f64();
                if dt <= 0.0 {
                    // ACKs at the same instant: fold the bytes into the next sample
                    self.last_ack_time = Some(prev);
                    self.pending_bytes += d;
                    return;
                }
                let bits = ((d + std::mem::take(&mut self.pending_bytes)) * 8) as f64;
                let b = bits / dt;
                let tau = self.tau.as_secs_f64();
                let alpha = ((2.0 * tau - dt) / (2.0 * tau + dt)).max(0.0);
                let f = match self.filtered {
                    None => b,
                    Some(prev_f) => alpha * prev_f + (1.0 - alpha) * (b + self.last_sample) / 2.0,
                };
                self.last_sample = b;
                self.filtered = Some(f);
                push(&mut self.out, ev.now, f);
            }
            WestwoodVariant::Plus => {
                let start = *self.window_start.get_or_insert(ev.now);
                self.pending_bytes += d;
                if let Some(r) = ev.rtt {
                    self.latest_rtt = Some(r);
                }
                let Some(rtt) = self.latest_rtt else {
                    return;
                };
                let dt = ev.now.saturating_since(start);
                if dt > rtt.max(Dur::from_millis(50)) {
                    let b = (self.pending_bytes * 8) as f64 / dt.as_secs_f64();
                    let f = match self.filtered {
                        None => {
                            self.non_smoothed = b;
                            b
                        }
                        Some(prev) => {
                            self.non_smoothed = 0.875 * self.non_smoothed + 0.125 * b;
                            0.875 * prev + 0.125 * self.non_smoothed
                        }
                    };
                    self.filtered = Some(f);
                    self.pending_bytes = 0;
                    self.window_start = Some(ev.now);
                    push(&mut self.out, ev.now, f);
                }
            }
        }
    }

    fn estimate(&self) -> Option<Rate> {
        self.filtered.map(|f| Rate(f.max(0.0).round() as u64))
    }

    fn poll_estimate(&mut self) -> Option<Estimate> {
        self.out.pop_front()
    }
}

/// Hoe's three-ACK estimate, repeated every RTT.
#[derive(Clone, Debug, Default)]
pub struct Hoe {
    /// Start of the current RTT period.
    period_start: Option<Time>,
    /// (arrival time, cumulative ACK) of the ACKs collected in this period.
    acks: Vec<(Time, u64)>,
    last: Option<f64>,
    out: VecDeque<Estimate>,
}

impl Hoe {
    pub fn new() -> Hoe {
        Hoe::default()
    }
}

impl PassiveEstimator for Hoe {
    fn name(&self) -> &'static str {
        "hoe"
    }

    fn on_ack(&mut self, ev: &AckEvent) {
        if ev.newly_acked.0 == 0 {
            return;
        }
        let rtt = ev.srtt.or(ev.rtt).unwrap_or(Dur::from_millis(100));
        let start = *self.period_start.get_or_insert(ev.now);
        if ev.now.saturating_since(start) >= rtt {
            self.period_start = Some(ev.now);
            self.acks.clear();
        }
        if self.acks.len() >= 3 {
            return;
        }
        self.acks.push((ev.now, ev.ack));
        if self.acks.len() == 3 {
            // least-squares slope of ack number (bytes) over time
            let t0 = self.acks[0].0;
            let xs: Vec<f64> = self.acks.iter().map(|a| a.0.saturating_since(t0).as_secs_f64()).collect();
            let ys: Vec<f64> = self.acks.iter().map(|a| a.1.saturating_sub(self.acks[0].1) as f64 * 8.0).collect();
            let mx = xs.iter().sum::<f64>() / 3.0;
            let my = ys.iter().sum::<f64>() / 3.0;
            let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
            let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
            if sxx > 0.0 {
                let b = sxy / sxx;
                self.last = Some(b);
                push(&mut self.out, ev.now, b);
            }
        }
    }

    fn estimate(&self) -> Option<Rate> {
        self.last.map(|f| Rate(f.max(0.0).round() as u64))
    }

    fn poll_estimate(&mut self) -> Option<Estimate> {
        self.out.pop_front()
    }
}

/// TCP-Rab's receiver-side estimate: arrival rate of data segments per period.
#[derive(Clone, Debug)]
pub struct Rab {
    period: Option<Dur>,
    sender_srtt: Option<Dur>,
    first: Option<Time>,
    last: Option<Time>,
    bytes_after_first: u64,
    filtered: Option<f64>,
    out: VecDeque<Estimate>,
}

impl Rab {
    /// `period`: fixed sampling period; `None` follows the SRTT given by
    /// [`Rab::set_srtt`] (or the ACKs, when the estimator also sees them), 100 ms before that.
    pub fn new(period: Option<Dur>) -> Rab {
        Rab {
            period,
            sender_srtt: None,
            first: None,
            last: None,
            bytes_after_first: 0,
            filtered: None,
            out: VecDeque::new(),
        }
    }
    /// The connection's RTT (the receiver learns it from the timestamps option).
    pub fn set_srtt(&mut self, srtt: Dur) {
        self.sender_srtt = Some(srtt);
    }
    /// A data segment of `bytes` (on the wire) arrived at the receiver at `now`.
    pub fn on_data_arrival(&mut self, now: Time, bytes: Bytes) {
        let period = self.period.or(self.sender_srtt).unwrap_or(Dur::from_millis(100));
        let Some(first) = self.first else {
            self.first = Some(now);
            self.last = Some(now);
            return;
        };
        if now.saturating_since(first) >= period {
            if let Some(last) = self.last {
                let dt = last.saturating_since(first).as_secs_f64();
                if dt > 0.0 && self.bytes_after_first > 0 {
                    let b = (self.bytes_after_first * 8) as f64 / dt;
                    let f = match self.filtered {
                        None => b,
                        Some(prev) => 0.875 * prev + 0.125 * b,
                    };
                    self.filtered = Some(f);
                    push(&mut self.out, now, f);
                }
            }
            self.first = Some(now);
            self.last = Some(now);
            self.bytes_after_first = 0;
            return;
        }
        self.bytes_after_first += bytes.0;
        self.last = Some(now);
    }
}

impl PassiveEstimator for Rab {
    fn name(&self) -> &'static str {
        "rab"
    }
    /// Rab lives at the receiver; from the sender's ACKs it only learns the SRTT.
    fn on_ack(&mut self, ev: &AckEvent) {
        if let Some(s) = ev.srtt {
            self.sender_srtt = Some(s);
        }
    }
    fn estimate(&self) -> Option<Rate> {
        self.filtered.map(|f| Rate(f.max(0.0).round() as u64))
    }
    fn poll_estimate(&mut self) -> Option<Estimate> {
        self.out.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(now_us: u64, ack: u64, newly: u64) -> AckEvent {
        AckEvent {
            now: Time(now_us * 1000),
            ack,
            newly_acked: Bytes(newly),
            srtt: Some(Dur::from_millis(20)),
            mss: Bytes(1460),
            ..Default::default()
        }
    }

    /// ACKs of 1460 bytes every 1 ms: 11.68 Mbit/s.
    fn steady(e: &mut dyn PassiveEstimator, n: u64) {
        for i in 1..=n {
            e.on_ack(&ack(i * 1000, i * 1460, 1460));
        }
    }

    #[test]
    fn westwood_original_converges_to_the_ack_rate() {
        let mut w = Westwood::original(Dur::from_millis(100));
        steady(&mut w, 2000);
        let v = w.estimate().unwrap().as_mbps();
        assert!((v - 11.68).abs() < 0.05, "{v}");
        assert!(w.poll_estimate().is_some());
        // the filter lags: right after a halving of the rate, it is still above the new rate
        for i in 1..=50 {
            w.on_ack(&ack(2_000_000 + i * 2000, (2000 + i) * 1460, 1460));
        }
        let v2 = w.estimate().unwrap().as_mbps();
        assert!(v2 > 5.84 + 0.5 && v2 < 11.68, "{v2}");
    }

    #[test]
    fn westwood_counts_dupacks_once() {
        let mut w = Westwood::original(Dur::from_millis(100));
        steady(&mut w, 100);
        // two duplicate ACKs (each credited one segment), then a cumulative ACK of three
        // segments: only the third segment is new
        let base = 100 * 1460;
        w.on_ack(&AckEvent { dup_acks: 1, ..ack(101_000, base, 0) });
        w.on_ack(&AckEvent { dup_acks: 2, ..ack(102_000, base, 0) });
        assert_eq!(w.accounted, 2 * 1460);
        assert_eq!(w.delivered(&ack(103_000, base + 3 * 1460, 3 * 1460)), 1460);
        assert_eq!(w.accounted, 0);
    }

    #[test]
    fn westwood_plus_samples_once_per_rtt_and_filters_twice() {
        let mut w = Westwood::plus();
        let with_rtt = |mut ev: AckEvent| {
            ev.rtt = Some(Dur::from_millis(20));
            ev
        };
        for i in 1..=1000u64 {
            w.on_ack(&with_rtt(ack(i * 1000, i * 1460, 1460)));
        }
        let n = std::iter::from_fn(|| w.poll_estimate()).count();
        // 1 s of ACKs, RTT 20 ms raised to the 50 ms floor, a window closing at the first ACK
        // after 50 ms (51 ms): 19 samples
        assert_eq!(n, 19);
        assert!((w.estimate().unwrap().as_mbps() - 11.68).abs() < 0.3);
        // Run on until a window closes, then halve the ACK rate: after one window at the new
        // rate the once-filtered value has moved 1/8 of the step, the twice-filtered one 1/64.
        let (mut i, mut t) = (1000u64, 1_000_000u64);
        while w.poll_estimate().is_none() {
            i += 1;
            t += 1000;
            w.on_ack(&with_rtt(ack(t, i * 1460, 1460)));
        }
        let (ns_before, before) = (w.non_smoothed, w.filtered.unwrap());
        while w.poll_estimate().is_none() {
            i += 1;
            t += 2000;
            w.on_ack(&with_rtt(ack(t, i * 1460, 1460)));
        }
        // 26 ACKs of 1460 bytes in 52 ms: 5.84 Mbit/s.
        let b = 5.84e6;
        let ns_after = 0.875 * ns_before + 0.125 * b;
        assert!((w.non_smoothed - ns_after).abs() < 1.0, "{} vs {ns_after}", w.non_smoothed);
        let after = w.filtered.unwrap();
        assert!((after - (0.875 * before + 0.125 * ns_after)).abs() < 1.0);
        // The twice-filtered estimate moved only about 1/64 of the 5.84 Mbit/s step.
        assert!((before - after) / (before - b) < 0.02, "{before} -> {after}");
    }

    #[test]
    fn hoe_three_ack_slope_every_rtt() {
        let mut h = Hoe::new();
        steady(&mut h, 200);
        let v = h.estimate().unwrap().as_mbps();
        assert!((v - 11.68).abs() < 0.01, "{v}");
        // one sample per 20 ms RTT over 200 ms
        let n = std::iter::from_fn(|| h.poll_estimate()).count();
        assert!((9..=11).contains(&n), "{n}");
    }

    #[test]
    fn rab_measures_receiver_arrival_rate() {
        let mut r = Rab::new(Some(Dur::from_millis(50)));
        for i in 0..1000u64 {
            // 1500-byte segments every 0.5 ms: 24 Mbit/s
            r.on_data_arrival(Time(i * 500_000), Bytes(1500));
        }
        let v = r.estimate().unwrap().as_mbps();
        assert!((v - 24.0).abs() < 0.1, "{v}");
        assert_eq!(r.name(), "rab");
    }
}
