//! Probe endpoints: measurement traffic that is not TCP. A sender-side [`Prober`] emits probe
//! packets; the receiving node echoes each one at once in a 40-byte packet that carries the
//! probe's arrival time, so the sender learns both timestamps of every probe (what a PathQuick
//! or pathChirp receiver reports) and the echo's arrival (what ImTCP's echo mode, §4.1.1, uses).
//!
//! Two probers drive `headroom-core`'s sans-IO estimators:
//! - [`TrainProber`]: one PathQuick or pathChirp train every `interval`; the train is judged
//!   by [`estimate_train`] once its last echo arrived or `collect_timeout` passed, so a lost
//!   packet shows as lost and not as a delay.
//! - [`EchoProber`] (ImTCP's measurement algorithm fed by echoed UDP streams).

use headroom_core::abw::{estimate_train, EstimatorConfig, Outcome, ProbeRecord, TrainDesign, TrainPacket};
use headroom_core::imtcp::EchoProber;
use headroom_core::units::{Dur, Rate, Time};

/// One estimate from any measurement method (also ImTCP inline, see `world`).
#[derive(Clone, Debug, PartialEq)]
pub struct EstimateRow {
    pub time: Time,
    /// Index of the flow-statistics row of the measuring flow.
    pub stat: u32,
    pub method: &'static str,
    /// The value, `None` when the method could not give one.
    pub value: Option<Rate>,
    /// "estimate", "above_range", "below_range", "inconclusive", "out_of_range".
    pub verdict: &'static str,
    pub range: (Rate, Rate),
    /// Time from the first probe packet to the estimate.
    pub elapsed: Dur,
    /// Probe bytes sent for this estimate.
    pub bytes: u64,
}

/// What the simulator asks of a probe sender.
pub trait Prober {
    fn method(&self) -> &'static str;
    /// The next probe due at `now`: its id and wire size.
    fn poll_transmit(&mut self, now: Time) -> Option<(u64, u32)>;
    fn next_wakeup(&self) -> Option<Time>;
    /// The echo of probe `id` arrived at `now`; the probe reached the receiver at `received_at`.
    fn on_echo(&mut self, now: Time, id: u64, received_at: Time);
    fn poll_estimate(&mut self, now: Time) -> Option<EstimateRow>;
}

/// PathQuick / pathChirp: one train every `interval`.
pub struct TrainProber {
    design: TrainDesign,
    schedule: Vec<TrainPacket>,
    estimator: EstimatorConfig,
    interval: Dur,
    collect_timeout: Dur,
    stop: Time,
    /// Start of the current train, and the index of its next packet.
    train_start: Time,
    next_index: usize,
    next_train: Time,
    train_no: u64,
    records: Vec<ProbeRecord>,
    echoes: usize,
    judge_at: Option<Time>,
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
            interval,
            collect_timeout,
            stop,
            train_start: start,
            next_index: usize::MAX,
            next_train: start,
            train_no: 0,
            records: Vec::new(),
            echoes: 0,
            judge_at: None,
            ready: None,
            stat,
        }
    }

    fn judge(&mut self, now: Time) {
        let est = estimate_train(&self.records, &self.estimator);
        let (value, verdict) = match est.outcome {
            Outcome::Estimate(r) => (Some(r), "estimate"),
            Outcome::AboveRange { at_least } => (Some(at_least), "above_range"),
            Outcome::BelowRange { at_most } => (Some(at_most), "below_range"),
            Outcome::Inconclusive { .. } => (None, "inconclusive"),
        };
        self.ready = Some(EstimateRow {
            time: now,
            stat: self.stat,
            method: self.method(),
            value,
            verdict,
            range: self.design.probed_range(),
            elapsed: now - self.train_start,
            bytes: self.design.bytes().0,
        });
        self.judge_at = None;
        self.records.clear();
    }
}

impl Prober for TrainProber {
    fn method(&self) -> &'static str {
        self.design.method().name()
    }

    fn poll_transmit(&mut self, now: Time) -> Option<(u64, u32)> {
        if let Some(t) = self.judge_at {
            if now >= t {
                self.judge(now);
            }
        }
        if self.next_index == usize::MAX {
            if now < self.next_train || self.judge_at.is_some() || now >= self.stop {
                return None;
            }
            self.train_start = self.next_train;
            self.next_index = 0;
            self.echoes = 0;
            self.train_no += 1;
            self.records.clear();
        }
        let p = self.schedule[self.next_index];
        if now < self.train_start + p.offset {
            return None;
        }
        let index = self.next_index as u32;
        self.records.push(ProbeRecord { index, send_time: now, recv_time: None, size: p.size });
        self.next_index += 1;
        if self.next_index == self.schedule.len() {
            self.next_index = usize::MAX;
            self.next_train = self.train_start + self.interval.max(self.design.train_length());
            self.judge_at = Some(now + self.collect_timeout);
        }
        Some((self.train_no << 32 | index as u64, p.size.0 as u32))
    }

    fn next_wakeup(&self) -> Option<Time> {
        if let Some(t) = self.judge_at {
            return Some(t);
        }
        if self.next_index == usize::MAX {
            (self.next_train < self.stop).then_some(self.next_train)
        } else {
            Some(self.train_start + self.schedule[self.next_index].offset)
        }
    }

    fn on_echo(&mut self, now: Time, id: u64, received_at: Time) {
        if id >> 32 != self.train_no {
            return; // an echo of an earlier, already judged train
        }
        let index = (id & 0xffff_ffff) as u32;
        if let Some(r) = self.records.iter_mut().find(|r| r.index == index) {
            if r.recv_time.is_none() {
                r.recv_time = Some(received_at);
                self.echoes += 1;
            }
        }
        if self.next_index == usize::MAX && self.echoes == self.schedule.len() && self.judge_at.is_some() {
            self.judge(now);
        }
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
    fn method(&self) -> &'static str {
        "imtcp-echo"
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
            method: "imtcp-echo",
            value: Some(e.value),
            verdict: if e.in_range { "estimate" } else { "out_of_range" },
            range: e.search_range,
            elapsed,
            bytes: std::mem::take(&mut self.bytes),
        })
    }
}
