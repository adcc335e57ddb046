//! Probe endpoints: measurement traffic that is not TCP. A sender-side [`Prober`] emits probe
//! packets; the receiving node echoes each one at once in a 40-byte packet that carries the
//! probe's arrival time, so the sender learns both timestamps of every probe (what a PathQuick
//! or pathChirp receiver reports) and the echo's arrival (what ImTCP's echo mode, §4.1.1, uses).
//!
//! Two probers drive `headroom-core`'s sans-IO estimators:
//! - [`TrainProber`]: one PathQuick or pathChirp train every `interval`, paced and judged by
//!   core's `abw::train` machines (the ones `headroom probe` runs): judged once its last echo
//!   arrived or `collect_timeout` after its last packet left, so a lost packet shows as lost
//!   and not as a delay.
//! - [`EchoProber`] (ImTCP's measurement algorithm fed by echoed UDP streams).

use headroom_core::abw::{
    EstimatorConfig, JudgePolicy, Method, Outcome, TrainDesign, TrainJudge, TrainPacket, TrainSender,
};
use headroom_core::imtcp::EchoProber;
use headroom_core::units::{Dur, Rate, Time};

/// Which method gave an estimate (the `method` column of `estimates.csv`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EstimateMethod {
    /// PathQuick probe trains.
    PathQuick,
    /// pathChirp probe trains.
    PathChirp,
    /// ImTCP's measurement algorithm fed by echoed UDP streams (ImTCP §4.1.1).
    ImtcpEcho,
    /// ImTCP's inline measurement inside a bulk TCP flow.
    Imtcp,
    /// Passive: TCP Westwood's estimate (the original filter).
    Westwood,
    /// Passive: TCP Westwood+'s estimate.
    WestwoodPlus,
    /// Passive: Hoe's three-ACK estimate.
    Hoe,
    /// Passive: TCP-Rab's estimate at the receiver.
    Rab,
}

impl EstimateMethod {
    /// The name in scenarios and output files.
    pub fn name(self) -> &'static str {
        match self {
            EstimateMethod::PathQuick => "pathquick",
            EstimateMethod::PathChirp => "pathchirp",
            EstimateMethod::ImtcpEcho => "imtcp-echo",
            EstimateMethod::Imtcp => "imtcp",
            EstimateMethod::Westwood => "westwood",
            EstimateMethod::WestwoodPlus => "westwood+",
            EstimateMethod::Hoe => "hoe",
            EstimateMethod::Rab => "rab",
        }
    }
}

impl From<Method> for EstimateMethod {
    fn from(m: Method) -> EstimateMethod {
        match m {
            Method::PathQuick => EstimateMethod::PathQuick,
            Method::PathChirp => EstimateMethod::PathChirp,
        }
    }
}

impl std::fmt::Display for EstimateMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What an estimate says (the `verdict` column of `estimates.csv`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// A value.
    Estimate,
    /// A probe train never saturated the path: the value is a lower bound.
    AboveRange,
    /// A probe train queued from its first gap: the value is an upper bound.
    BelowRange,
    /// No value.
    Inconclusive,
    /// ImTCP's value fell outside its search range.
    OutOfRange,
}

impl Verdict {
    /// The name in output files.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Estimate => "estimate",
            Verdict::AboveRange => "above_range",
            Verdict::BelowRange => "below_range",
            Verdict::Inconclusive => "inconclusive",
            Verdict::OutOfRange => "out_of_range",
        }
    }

    /// The verdict of a probe train's outcome.
    pub fn of(outcome: &Outcome) -> Verdict {
        match outcome {
            Outcome::Estimate(_) => Verdict::Estimate,
            Outcome::AboveRange { .. } => Verdict::AboveRange,
            Outcome::BelowRange { .. } => Verdict::BelowRange,
            Outcome::Inconclusive { .. } => Verdict::Inconclusive,
        }
    }

    /// ImTCP's: an estimate in its search range, or out of range.
    pub fn in_range(in_range: bool) -> Verdict {
        if in_range {
            Verdict::Estimate
        } else {
            Verdict::OutOfRange
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One estimate from any measurement method (also ImTCP inline, see `world`).
#[derive(Clone, Debug, PartialEq)]
pub struct EstimateRow {
    pub time: Time,
    /// Index of the flow-statistics row of the measuring flow.
    pub stat: u32,
    pub method: EstimateMethod,
    /// The value, `None` when the method could not give one.
    pub value: Option<Rate>,
    pub verdict: Verdict,
    pub range: (Rate, Rate),
    /// Time from the first probe packet to the estimate.
    pub elapsed: Dur,
    /// Probe bytes sent for this estimate.
    pub bytes: u64,
}

/// What the simulator asks of a probe sender.
pub trait Prober {
    fn method(&self) -> EstimateMethod;
    /// The next probe due at `now`: its id and wire size.
    fn poll_transmit(&mut self, now: Time) -> Option<(u64, u32)>;
    fn next_wakeup(&self) -> Option<Time>;
    /// The echo of probe `id` arrived at `now`; the probe reached the receiver at `received_at`.
    fn on_echo(&mut self, now: Time, id: u64, received_at: Time);
    fn poll_estimate(&mut self, now: Time) -> Option<EstimateRow>;
}

/// The train a [`TrainProber`] has out.
struct Train {
    sender: TrainSender,
    judge: TrainJudge,
}

/// PathQuick / pathChirp: one train every `interval` (or back to back when the train is
/// longer), the next one not before the last is judged. Each train is paced by core's
/// [`TrainSender`] and judged by core's [`TrainJudge`] with [`JudgePolicy::whole_train`]:
/// once every echo is in, or `collect_timeout` after the last packet left, missing packets lost
/// (the same machine that `headroom probe` runs, with the client's policy).
pub struct TrainProber {
    design: TrainDesign,
    schedule: Vec<TrainPacket>,
    estimator: EstimatorConfig,
    policy: JudgePolicy,
    interval: Dur,
    stop: Time,
    /// When the next train is due.
    next_train: Time,
    /// Number of the current (or last) train, in the high half of the probe ids.
    train_no: u64,
    /// The train out, until it is judged.
    current: Option<Train>,
    ready: Option<EstimateRow>,
    stat: u32,
}

impl TrainProber {
    pub fn new(
        design: TrainDesign,
        estimator: EstimatorConfig,
        start: Time,
        interval: Dur,
        collect_timeout: Dur,
        stop: Time,
        stat: u32,
    ) -> TrainProber {
        let schedule = design.schedule();
        TrainProber {
            design,
            schedule,
            estimator,
            policy: JudgePolicy::whole_train(collect_timeout),
            interval,
            stop,
            next_train: start,
            train_no: 0,
            current: None,
            ready: None,
            stat,
        }
    }

    /// Takes the verdict of the current train if it is judged.
    fn take_verdict(&mut self, now: Time) {
        let Some(train) = &self.current else { return };
        let Some(v) = train.judge.verdict() else { return };
        let outcome = &v.estimate.outcome;
        self.ready = Some(EstimateRow {
            time: now,
            stat: self.stat,
            method: self.method(),
            value: outcome.value(),
            verdict: Verdict::of(outcome),
            range: self.design.probed_range(),
            elapsed: now - train.sender.start(),
            bytes: self.design.bytes().0,
        });
        self.current = None;
    }
}

impl Prober for TrainProber {
    fn method(&self) -> EstimateMethod {
        self.design.method().into()
    }

    fn poll_transmit(&mut self, now: Time) -> Option<(u64, u32)> {
        if let Some(train) = &mut self.current {
            train.judge.poll(now);
            self.take_verdict(now);
        }
        if self.current.is_none() {
            if now < self.next_train || now >= self.stop {
                return None;
            }
            let sender = TrainSender::new(self.next_train, &self.schedule);
            let judge = TrainJudge::new(&self.schedule, self.next_train, self.policy, self.estimator);
            self.current = Some(Train { sender, judge });
            self.train_no += 1;
        }
        let train = self.current.as_mut()?;
        let (index, p) = train.sender.poll_transmit(now, &self.schedule)?;
        train.judge.on_sent(index, now);
        if train.sender.next_send(&self.schedule).is_none() {
            train.judge.on_end(now);
            self.next_train = train.sender.start() + self.interval.max(self.design.train_length());
        }
        Some((self.train_no << 32 | index as u64, p.size.0 as u32))
    }

    fn next_wakeup(&self) -> Option<Time> {
        match &self.current {
            Some(train) => train.sender.next_send(&self.schedule).or(train.judge.wake()),
            None => (self.next_train < self.stop).then_some(self.next_train),
        }
    }

    fn on_echo(&mut self, now: Time, id: u64, received_at: Time) {
        if id >> 32 != self.train_no {
            return; // an echo of an earlier, already judged train
        }
        let Some(train) = &mut self.current else { return };
        train.judge.on_packet(now, (id & 0xffff_ffff) as u32, None, received_at);
        self.take_verdict(now);
    }

    fn poll_estimate(&mut self, _now: Time) -> Option<EstimateRow> {
        self.ready.take()
    }
}

/// ImTCP's measurement algorithm in echo mode (ImTCP §4.1.1).
pub struct ImtcpEchoProber {
    pub inner: EchoProber,
    stat: u32,
    stop: Time,
    first_probe: Option<Time>,
    bytes: u64,
}

impl ImtcpEchoProber {
    pub fn new(inner: EchoProber, stat: u32, stop: Time) -> ImtcpEchoProber {
        ImtcpEchoProber { inner, stat, stop, first_probe: None, bytes: 0 }
    }
}

impl Prober for ImtcpEchoProber {
    fn method(&self) -> EstimateMethod {
        EstimateMethod::ImtcpEcho
    }
    fn poll_transmit(&mut self, now: Time) -> Option<(u64, u32)> {
        if now >= self.stop {
            return None;
        }
        let p = self.inner.poll_transmit(now)?;
        self.first_probe.get_or_insert(now);
        self.bytes += p.size.0;
        Some((p.id, p.size.0 as u32))
    }
    fn next_wakeup(&self) -> Option<Time> {
        self.inner.next_wakeup().filter(|t| *t < self.stop)
    }
    fn on_echo(&mut self, now: Time, id: u64, _received_at: Time) {
        self.inner.on_echo(now, id);
    }
    fn poll_estimate(&mut self, now: Time) -> Option<EstimateRow> {
        let e = self.inner.poll_estimate()?;
        let elapsed = now.saturating_since(self.first_probe.take().unwrap_or(now));
        Some(EstimateRow {
            time: e.time,
            stat: self.stat,
            method: EstimateMethod::ImtcpEcho,
            value: Some(e.value),
            verdict: Verdict::in_range(e.in_range),
            range: e.search_range,
            elapsed,
            bytes: std::mem::take(&mut self.bytes),
        })
    }
}
