//! Passive bandwidth estimators watching a bulk flow (ImTCP §4.2, Fig. 10): TCP Westwood's
//! estimate and Hoe's three-ACK estimate over the sender's ACKs, TCP-Rab's over the receiver's
//! data arrivals. They only watch: the flow sends exactly what it would send without them.
//!
//! A [`TapState`] sits on the flow's connection (`TcpConn::tap`) and is shown every ACK the
//! sender receives; the world feeds TCP-Rab the receiver's arrivals
//! ([`TapState::on_data_arrival`]).
//!
//! Recording: the estimators give one sample per ACK (Westwood) or per RTT (Hoe, Rab); the tap
//! adds them up and the world records their mean once per trace interval
//! ([`TapState::take_means`]), as the paper plots averages over every 0.5 s. Nothing is
//! allocated per packet.

use headroom_core::cc::AckEvent;
use headroom_core::imtcp::{Hoe, PassiveEstimator, Rab, Westwood, WestwoodVariant};
use headroom_core::units::{Bytes, Dur, Rate, Time};

use crate::probe::EstimateMethod;

/// Westwood's filter time constant τ (the original estimator; headroom's default).
pub const WESTWOOD_TAU: Dur = Dur::from_millis(500);

/// One estimator and the sum of its samples in the current interval.
struct Watched {
    method: EstimateMethod,
    estimator: Box<dyn PassiveEstimator>,
    sum: f64,
    count: u64,
}

/// The estimators of one flow.
pub struct TapState {
    on_acks: Vec<Watched>,
    /// TCP-Rab and the sum and count of its samples in the current interval.
    rab: Option<(Rab, f64, u64)>,
}

impl TapState {
    /// Builds the estimators named in `names` (see `scenario::PASSIVE_NAMES`).
    pub fn new(names: &[String]) -> Result<TapState, String> {
        let mut on_acks: Vec<Watched> = Vec::new();
        let mut rab = None;
        for n in names {
            let (method, estimator): (EstimateMethod, Box<dyn PassiveEstimator>) = match n.as_str() {
                "westwood" => {
                    (EstimateMethod::Westwood, Box::new(Westwood::new(WestwoodVariant::Original, WESTWOOD_TAU)))
                }
                "westwood+" => (EstimateMethod::WestwoodPlus, Box::new(Westwood::plus())),
                "hoe" => (EstimateMethod::Hoe, Box::new(Hoe::new())),
                "rab" => {
                    rab = Some((Rab::new(None), 0.0, 0));
                    continue;
                }
                other => return Err(format!("unknown passive estimator `{other}`")),
            };
            if !on_acks.iter().any(|w| w.method == method) {
                on_acks.push(Watched { method, estimator, sum: 0.0, count: 0 });
            }
        }
        Ok(TapState { on_acks, rab })
    }

    /// Whether TCP-Rab watches the receiver.
    pub fn wants_arrivals(&self) -> bool {
        self.rab.is_some()
    }

    /// An ACK reached the sender.
    pub fn on_ack(&mut self, ev: &AckEvent) {
        for w in &mut self.on_acks {
            w.estimator.on_ack(ev);
            while let Some(e) = w.estimator.poll_estimate() {
                w.sum += e.value.0 as f64;
                w.count += 1;
            }
        }
    }

    /// A data segment of `wire_bytes` reached the receiver at `now`; `srtt` is the
    /// connection's smoothed RTT (the receiver knows it from the timestamps).
    pub fn on_data_arrival(&mut self, now: Time, wire_bytes: u64, srtt: Option<Dur>) {
        let Some((rab, sum, count)) = self.rab.as_mut() else { return };
        if let Some(s) = srtt {
            rab.set_srtt(s);
        }
        rab.on_data_arrival(now, Bytes(wire_bytes));
        while let Some(e) = rab.poll_estimate() {
            *sum += e.value.0 as f64;
            *count += 1;
        }
    }

    /// The mean sample of each estimator since the last call (estimators without a sample in
    /// the interval are left out), then resets the sums.
    pub fn take_means(&mut self, mut emit: impl FnMut(EstimateMethod, Rate)) {
        let mean = |sum: f64, count: u64| Rate((sum / count as f64).max(0.0).round() as u64);
        for w in &mut self.on_acks {
            if w.count > 0 {
                emit(w.method, mean(w.sum, w.count));
            }
            (w.sum, w.count) = (0.0, 0);
        }
        if let Some((_, sum, count)) = self.rab.as_mut() {
            if *count > 0 {
                emit(EstimateMethod::Rab, mean(*sum, *count));
            }
            (*sum, *count) = (0.0, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Scenario, World};

    fn run(passive: &str) -> (String, usize) {
        let src = format!(
            "duration = \"5s\"\n[[link]]\na = \"a\"\nb = \"b\"\nrate = \"10Mbps\"\ndelay = \"10ms\"\nqueue = 20\n\
             [[tcp]]\nfrom = \"a\"\nto = \"b\"\ncc = \"reno\"\n{passive}\n"
        );
        let mut w = World::new(&Scenario::parse(&src, "t").unwrap(), None).unwrap();
        w.run();
        let r = w.report();
        (serde_json::to_string(&r.flows).unwrap(), w.estimates.len())
    }

    #[test]
    fn the_estimators_watch_without_changing_what_the_flow_sends() {
        let (plain, none) = run("");
        let (watched, estimates) = run("passive = [\"westwood\", \"hoe\", \"rab\"]");
        assert_eq!(none, 0);
        assert!(estimates > 30, "{estimates} passive estimates in 5 s");
        assert_eq!(plain, watched, "the tap changed the flow");
    }
}
