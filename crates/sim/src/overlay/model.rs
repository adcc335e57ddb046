//! The analytic models of Fig. 3: Padhye et al.'s TCP throughput formula (Case 1, and each
//! connection of Case 2 on its own) and our implementation of Maki et al.'s relay-coupled model
//! for a chain of split connections (Case 2). Derivation: `docs/overlay.md`.

use headroom_core::rng::exp;

/// One connection's path, for the formulas.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Segment {
    /// Loss probability of a data packet.
    pub loss: f64,
    /// Round-trip time, seconds.
    pub rtt: f64,
    /// Largest window, packets (the receiver's buffer).
    pub wmax: f64,
}

/// Packets ACKed per ACK (`b`): 1, the simulator ACKs every segment.
pub const B: f64 = 1.0;
/// The smallest RTO, seconds (ns-2's `minrto_`, the simulator's setting).
pub const MIN_RTO: f64 = 0.2;

/// The retransmission timeout used in the formula: `max(MIN_RTO, RTT + 4 RTTVAR)` with the
/// variation of a steady path taken as `RTT / 8` (queues are nearly empty in these runs).
pub fn t0(rtt: f64) -> f64 {
    MIN_RTO.max(1.5 * rtt)
}

/// Padhye, Firoiu, Towsley, Kurose (SIGCOMM 1998), Eq. (31), the "full model" approximation:
///
/// `B(p) = min( Wmax/RTT, 1 / ( RTT sqrt(2bp/3) + T0 min(1, 3 sqrt(3bp/8)) p (1 + 32 p²) ) )`
///
/// in packets per second; `Wmax/RTT` alone when `p = 0`.
pub fn padhye(s: Segment) -> f64 {
    let cap = s.wmax / s.rtt;
    if s.loss <= 0.0 {
        return cap;
    }
    let p = s.loss;
    let denom = s.rtt * (2.0 * B * p / 3.0).sqrt()
        + t0(s.rtt) * (3.0 * (3.0 * B * p / 8.0).sqrt()).min(1.0) * p * (1.0 + 32.0 * p * p);
    cap.min(1.0 / denom)
}

/// The time an upstream connection stops delivering in order after a loss indication: a
/// fast-retransmit repair takes about one RTT; a timeout (probability `Q = min(1, 3/w)`, with
/// `w = sqrt(8/(3bp))` the mean window, Padhye's Eq. 25 simplified) takes `T0`.
pub fn stall(s: Segment) -> f64 {
    if s.loss <= 0.0 {
        return 0.0;
    }
    let w = (8.0 / (3.0 * B * s.loss)).sqrt().min(s.wmax);
    let q = (3.0 / w).min(1.0);
    (1.0 - q) * s.rtt + q * t0(s.rtt)
}

/// Expected idle time of the downstream connection during one upstream stall of length `r`,
/// with upstream loss events a Poisson process of rate `lambda`, the send buffer filling at
/// `a − c` between them (capped at `sb` packets) and draining at `c` (docs/overlay.md, Eq. R3):
///
/// `E[idle] = r − (u/λ)(1 − exp(−λ m / u))`, `u = (a − c)/c`, `m = min(sb / c, r)`;
/// `E[idle] = r` when `a <= c` (the buffer is empty at every loss).
pub fn expected_idle(r: f64, lambda: f64, a: f64, c: f64, sb: f64) -> f64 {
    if r <= 0.0 || lambda <= 0.0 {
        return 0.0;
    }
    if a <= c {
        return r;
    }
    let u = (a - c) / c;
    let m = (sb / c).min(r);
    (r - (u / lambda) * (1.0 - exp(-lambda * m / u))).max(0.0)
}

/// Maki et al.'s Case 2 as we implement it (§3.1.1; docs/overlay.md): the throughput (packets per
/// second) delivered by the last of the split connections `segs`, with `send_buffer` packets of
/// relay buffer at each proxy. Connection `k` is limited by (A) the upstream's rate, (B) the
/// upstream's losses draining the buffer (the average over the buffer's occupancy at upstream
/// losses, `Σ_j P_s(j) ρ_k(j)`, in closed form for exponential times between losses), (C) the
/// proxy's free buffer (its window `wmax`), and (D) its own path (Padhye). Iterated as the paper
/// does until the end-to-end rate changes by less than `eps` (relative).
pub fn relay_chain(segs: &[Segment], send_buffer: f64, eps: f64) -> f64 {
    let own: Vec<f64> = segs.iter().map(|s| padhye(*s)).collect();
    let mut rho_e = own.iter().cloned().fold(f64::INFINITY, f64::min);
    for _ in 0..100 {
        let mut rho = own[0];
        for k in 1..segs.len() {
            let up = segs[k - 1];
            // Loss events of the upstream: it carries the end-to-end rate in steady state.
            let lambda = rho_e * up.loss;
            let r = stall(up);
            // Its rate while not stalled.
            let a = rho * (1.0 + lambda * r);
            let c = own[k];
            let idle = expected_idle(r, lambda, a, c, send_buffer);
            let busy_fraction = if lambda > 0.0 { 1.0 - lambda * idle / (1.0 + lambda * r) } else { 1.0 };
            rho = rho.min(c * busy_fraction);
        }
        let done = ((rho - rho_e) / rho_e).abs() < eps;
        rho_e = rho;
        if done {
            break;
        }
    }
    rho_e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padhye_matches_the_square_root_law_at_small_loss_and_the_window_cap_without_loss() {
        let s = Segment { loss: 1e-4, rtt: 0.1, wmax: 1e6 };
        let sqrt_law = 1.0 / (0.1 * (2.0 * 1e-4 / 3.0f64).sqrt());
        assert!((padhye(s) / sqrt_law - 1.0).abs() < 0.05, "{} vs {}", padhye(s), sqrt_law);
        assert_eq!(padhye(Segment { loss: 0.0, rtt: 0.1, wmax: 20.0 }), 200.0);
        assert!(padhye(Segment { loss: 0.05, ..s }) < padhye(Segment { loss: 0.01, ..s }));
    }

    #[test]
    fn the_relay_model_lies_between_the_coupled_extremes() {
        // Three alike segments: coupling costs most when the connections' own rates are close
        // (Maki et al. §1, on their reference [17]).
        let segs = [Segment { loss: 0.01, rtt: 0.02, wmax: 1000.0 }; 3];
        let own: Vec<f64> = segs.iter().map(|s| padhye(*s)).collect();
        let min = own.iter().cloned().fold(f64::INFINITY, f64::min);
        let small = relay_chain(&segs, 2.0, 1e-6);
        let large = relay_chain(&segs, 10_000.0, 1e-6);
        assert!(small <= large && large <= min * (1.0 + 1e-9), "{small} {large} {min}");
        assert!(small < 0.99 * min, "a tiny buffer loses throughput to coupling: {small} vs {min}");
        // Idle time: all of the stall with an empty buffer, none with a buffer that outlasts it.
        assert_eq!(expected_idle(0.2, 1.0, 50.0, 100.0, 10.0), 0.2);
        assert!(expected_idle(0.2, 0.01, 1000.0, 100.0, 1e6) < 1e-3);
    }
}
