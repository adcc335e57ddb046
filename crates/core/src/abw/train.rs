//! One probe train from its first packet to its verdict, as sans-IO state machines that every
//! driver runs: the simulator's `TrainProber` (sender and echo receiver in one) and the socket
//! client's `run_train` (the receiver of a train that a `headroom serve` peer sends). The
//! drivers keep their clocks and sockets; what a train's end is, which packets are lost, when
//! to judge and what to judge are decided here, once.
//!
//! # The two machines
//!
//! [`TrainSender`] paces one train: packet `i` is due at `start + offset_i` (the
//! [`TrainDesign::schedule`](super::TrainDesign::schedule): `T_quick` apart for PathQuick,
//! PathQuick paper Eq. 1–3; geometrically shrinking gaps for pathChirp, Ribeiro et al. PAM 2003
//! Eqs. 10–13). States: [`SenderState::Sending`] `{ next }` → [`SenderState::Sent`].
//!
//! [`TrainJudge`] collects one train's packets by index and judges it. Events in:
//!
//! - [`TrainJudge::on_sent`]: packet `i` left at `t` (a driver that is also the sender);
//! - [`TrainJudge::on_packet`]: packet `i` arrived at the judge at `now`; the receiver stamped it
//!   `recv_time`, and it carried the send time `send_time` if the receiver can see it;
//! - [`TrainJudge::on_end`]: the end of the train is known (the sender's END message, or a
//!   sender-side judge sent its last packet);
//! - [`TrainJudge::poll`]: time passed to `now`; applies the deadlines.
//!
//! Decisions out: [`Poll::Wait`] (call again by `until`, or on the next event) or
//! [`Poll::Done`] (stop listening); [`TrainJudge::judgement`] once judged (when and why), and
//! [`TrainJudge::verdict`] (the records and the [`TrainEstimate`]). States:
//! [`JudgeState::Collecting`] → [`JudgeState::Judged`].
//!
//! # The rules
//!
//! 1. **Collection by index.** The first copy of each index is the packet; later copies are
//!    counted as duplicates (and left out); an index outside the schedule is not part of the
//!    train. Packets may arrive in any order: reordering is read by the estimator
//!    ([`estimate_train`] counts it and leaves the packets involved out of the delay signature,
//!    because they did not share one FIFO queue with the rest, see [`super::excursion`]).
//! 2. **Judging** (`Collecting → Judged`), at the first of:
//!    - [`JudgeReason::AllReceived`]: every packet of the schedule is in. Judged at once.
//!    - [`JudgeReason::Cut`]: the cut deadline `origin + cut_after` passed
//!      ([`JudgePolicy::cut_after`]). The train is judged as if it had ended with its last
//!      packet received: the packets after it are still on their way, not lost. A train above
//!      the available bandwidth queues behind itself, so its last packets arrive late; they
//!      probe rates past the knee, where the unterminated excursion already started (PathQuick
//!      §3.4, pathChirp §2.3), so the estimate does not need them — **if** the part received
//!      shows that knee: a cut train is conclusive only when its received part holds an
//!      unterminated excursion of at least `L` gaps ([`cut_short`]); otherwise it is
//!      inconclusive, never an "above range" bound at the rate where the deadline fell. With
//!      [`JudgePolicy::cut_after_sender`] the deadline also waits for a sender that started
//!      late or fell behind, as the send times its packets carry show, and there is no cut
//!      before the first packet is in (a train that never comes is judged at the loss
//!      deadlines).
//!    - [`JudgeReason::EndOfTrain`]: the end of the train was known `end_grace` ago
//!      ([`JudgePolicy::end_grace`]), or [`JudgeReason::Drained`]: the end never came, a packet
//!      was lost before the last one in, and the last packet would have arrived `drained_slack`
//!      ago with the longest one-way delay any packet had ([`TrainJudge::drained_at`]), or
//!      [`JudgeReason::GaveUp`]:
//!      `origin + give_up_after` passed. The train is judged whole: packets not in are
//!      **lost**. A lost tail is not a cut one: the estimator reads tail loss as the bottleneck
//!      buffer overflowing (the knee is at the last received gap, see [`super::excursion`]),
//!      not as "above range".
//! 3. **After the verdict**, late packets are counted ([`TrainVerdict::after_judging`]) and
//!    left out; copies of packets already in still count as duplicates until the verdict is
//!    taken. Listening ends ([`Poll::Done`]) when the end of the train is known, or at the first
//!    of `decided_at + linger_for_end`, `end + end_grace` and `origin + give_up_after`; at once
//!    for a train judged drained (its end was lost).
//! 4. **Pacing.** A sender's report on its own pacing ([`TrainJudge::on_pacing`]) that shows the
//!    train left too far from its schedule for the estimator ([`pacing_fault`]) makes the verdict
//!    inconclusive.
//!
//! # The records judged
//!
//! One [`ProbeRecord`] per index up to the train's end (the whole schedule, or up to the last
//! packet received for a cut train). A packet's send time is the one it carried if any, else
//! the one [`TrainJudge::on_sent`] reported, else its scheduled offset as a time (`Time(offset)`,
//! on the clock of the send offsets a wire carries: zero at the train's first packet). The
//! estimate's `duplicates` include the copies counted by the judge.
//!
//! # Choices neither paper fixes
//!
//! The papers judge a train once it is over and say nothing of deadlines. The policies in use
//! ([`JudgePolicy::whole_train`] for the simulator, [`JudgePolicy::socket_receiver`] for
//! `headroom probe`) are data, so a driver states its choice instead of coding it. The two report
//! different times for a train judged with losses: [`Judgement::decided_at`] (when the deadline
//! fired; the simulator's `elapsed`) and [`Judgement::ready_at`] (when the last input that counted
//! came in; the client's `elapsed`).

use super::excursion::{estimate_train, EstimatorConfig, InconclusiveReason, Outcome, TrainEstimate};
use super::{ProbeRecord, TrainPacket};
use crate::units::{Dur, Time};
use std::fmt;

/// Where a [`TrainSender`] is in its train.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SenderState {
    /// Packet `next` is the next to send.
    Sending { next: u32 },
    /// Every packet of the schedule has been sent.
    Sent,
}

/// Paces one train: packet `i` is due at `start + schedule[i].offset`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrainSender {
    start: Time,
    state: SenderState,
}

impl TrainSender {
    /// A train whose first packet is due at `start` (an empty schedule is sent at once).
    pub fn new(start: Time, schedule: &[TrainPacket]) -> TrainSender {
        let state = if schedule.is_empty() { SenderState::Sent } else { SenderState::Sending { next: 0 } };
        TrainSender { start, state }
    }

    pub fn state(&self) -> SenderState {
        self.state
    }

    /// When the train's first packet was due.
    pub fn start(&self) -> Time {
        self.start
    }

    /// The packet due at `now`, if any: its index and its schedule entry. A driver that polls
    /// late gets the overdue packets one per call, back to back.
    pub fn poll_transmit(&mut self, now: Time, schedule: &[TrainPacket]) -> Option<(u32, TrainPacket)> {
        let SenderState::Sending { next } = self.state else { return None };
        let p = *schedule.get(next as usize)?;
        if now < self.start + p.offset {
            return None;
        }
        self.state = if next as usize + 1 >= schedule.len() {
            SenderState::Sent
        } else {
            SenderState::Sending { next: next + 1 }
        };
        Some((next, p))
    }

    /// When the next packet is due; `None` once the train is sent.
    pub fn next_send(&self, schedule: &[TrainPacket]) -> Option<Time> {
        match self.state {
            SenderState::Sending { next } => schedule.get(next as usize).map(|p| self.start + p.offset),
            SenderState::Sent => None,
        }
    }
}

/// The judging deadlines, as data (see the module doc, rule 2 and 3). Durations counted from
/// the judge's `origin` unless said otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JudgePolicy {
    /// Cut deadline: judge at `origin + cut_after` with the packets in by then, the train cut
    /// after the last one ([`JudgeReason::Cut`]). `None`: wait for the whole train.
    pub cut_after: Option<Dur>,
    /// With a cut deadline: also wait for the sender. The cut is moved to no earlier than
    /// `cut_after_sender` past the predicted arrival of the train's last packet, predicted from
    /// the send times the packets carry (see [`TrainJudge::predicted_last_arrival`]), so a sender
    /// that started late or fell behind its schedule does not get its train cut.
    pub cut_after_sender: Option<Dur>,
    /// Once the end of the train is known, wait this long for stragglers, then judge the whole
    /// train with the missing packets lost ([`JudgeReason::EndOfTrain`]).
    pub end_grace: Dur,
    /// Judge the whole train, missing packets lost, at `origin + give_up_after`
    /// ([`JudgeReason::GaveUp`]) even if its end never became known. `None`: no such deadline
    /// (the driver must then report the end, or the judge may wait forever).
    pub give_up_after: Option<Dur>,
    /// After the verdict, keep listening this long for the end of the train (whose message may
    /// carry the sender's own report).
    pub linger_for_end: Dur,
    /// Without the end of the train, and with a packet lost before the last one in: judge the
    /// whole train, missing packets lost, this long after its last packet would have arrived
    /// with the longest one-way delay any of its packets had ([`TrainJudge::drained_at`],
    /// [`JudgeReason::Drained`]). `None`: wait for the end or `give_up_after`.
    pub drained_slack: Option<Dur>,
}

/// How long a socket receiver waits after the END for datagrams still queued in its socket.
pub const SOCKET_END_GRACE: Dur = Dur::from_millis(2);
/// How long a socket receiver waits after the verdict for the END (the server's spacing report).
pub const SOCKET_LINGER_FOR_END: Dur = Dur::from_millis(50);
/// A socket receiver's [`JudgePolicy::drained_slack`].
pub const SOCKET_DRAINED_SLACK: Dur = Dur::from_millis(10);

impl JudgePolicy {
    /// The simulator's policy: no cut; the whole train is judged once every packet is in, or
    /// `collect_timeout` after its last packet was sent, missing packets lost.
    pub fn whole_train(collect_timeout: Dur) -> JudgePolicy {
        JudgePolicy {
            cut_after: None,
            cut_after_sender: None,
            end_grace: collect_timeout,
            give_up_after: None,
            linger_for_end: Dur::ZERO,
            drained_slack: None,
        }
    }

    /// `headroom probe`'s policy, counted from the START request: judge when every packet is in,
    /// or cut at `cut_after` (handshake RTT + train length + slack); the whole train, missing
    /// packets lost, [`SOCKET_END_GRACE`] after the END or at `give_up_after`; after the verdict
    /// listen up to [`SOCKET_LINGER_FOR_END`] for the END.
    pub fn socket_receiver(cut_after: Option<Dur>, give_up_after: Dur) -> JudgePolicy {
        JudgePolicy {
            cut_after,
            cut_after_sender: None,
            end_grace: SOCKET_END_GRACE,
            give_up_after: Some(give_up_after),
            linger_for_end: SOCKET_LINGER_FOR_END,
            drained_slack: Some(SOCKET_DRAINED_SLACK),
        }
    }
}

/// Why a train was judged when it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JudgeReason {
    /// Every packet of the schedule arrived.
    AllReceived,
    /// The cut deadline passed: the train ends with its last packet received.
    Cut,
    /// The end of the train was known `end_grace` ago: missing packets are lost.
    EndOfTrain,
    /// `give_up_after` passed: missing packets are lost.
    GaveUp,
    /// The end of the train never came, a packet before the last one in was lost, and the last
    /// packet would have arrived by now with the longest one-way delay any of its packets had
    /// ([`TrainJudge::drained_at`]): missing packets are lost.
    Drained,
}

/// When and why a train was judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Judgement {
    pub reason: JudgeReason,
    /// The time of the event or poll that judged the train.
    pub decided_at: Time,
    /// When the verdict's inputs were complete: the last packet for
    /// [`JudgeReason::AllReceived`], the cut deadline for [`JudgeReason::Cut`], the last packet
    /// or end of train that came in (or `origin`, if none did) for a train judged with losses.
    pub ready_at: Time,
}

/// Where a [`TrainJudge`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JudgeState {
    /// Packets are being collected.
    Collecting,
    /// The train is judged; late packets are only counted.
    Judged(Judgement),
}

/// What became of one arriving packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketFate {
    /// The first copy, in time: part of the train.
    Accepted,
    /// A copy of a packet already in.
    Duplicate,
    /// The first copy, after the train was judged: counted, left out.
    AfterJudging,
    /// Its index is not in the schedule.
    NotInTrain,
}

/// What the driver should do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Poll {
    /// Keep listening; poll again at `until` at the latest (`None`: only on the next event).
    Wait { until: Option<Time> },
    /// Nothing more to wait for.
    Done,
}

/// The judged train.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainVerdict {
    pub judgement: Judgement,
    pub estimate: TrainEstimate,
    /// The records judged (see the module doc), for re-estimating with other configurations.
    pub records: Vec<ProbeRecord>,
    /// Packets whose first copy arrived after the verdict.
    pub after_judging: u32,
    /// The capacity burst's records ([`TrainJudge::with_burst`]; empty without one): indices
    /// from the schedule's length on, each the size of the train's last packet.
    pub burst: Vec<ProbeRecord>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    scheduled: TrainPacket,
    sent_at: Option<Time>,
    /// (send time carried by the packet, receive time).
    received: Option<(Option<Time>, Time)>,
}

impl Slot {
    /// Its record as packet `index` (the module doc, "The records judged").
    fn record(&self, index: usize) -> ProbeRecord {
        let fallback = self.sent_at.unwrap_or(Time(self.scheduled.offset.0));
        ProbeRecord {
            index: index as u32,
            send_time: self.received.and_then(|r| r.0).unwrap_or(fallback),
            recv_time: self.received.map(|r| r.1),
            size: self.scheduled.size,
        }
    }
}

/// Collects one train by index and judges it (see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct TrainJudge {
    slots: Vec<Slot>,
    /// The capacity burst after the train ([`TrainJudge::with_burst`]).
    burst: Vec<Slot>,
    burst_received: u32,
    origin: Time,
    policy: JudgePolicy,
    estimator: EstimatorConfig,
    state: JudgeState,
    received: u32,
    duplicates: u32,
    after_judging: u32,
    /// The last packet accepted or end of train seen before the verdict.
    last_input: Time,
    end_seen: Option<Time>,
    /// Earliest judge-clock instant at which a packet's send offset 0 would have arrived:
    /// `min(now − send_time)` over the accepted packets that carried a send time.
    anchor: Option<Time>,
    /// How far the sender was behind its schedule: `max(send_time − scheduled offset)`.
    slip: Dur,
    /// The longest `now − send_time` over the accepted packets that carried a send time.
    longest_transit: Option<Time>,
    /// The highest index accepted (train packets only).
    highest: Option<u32>,
    pacing: Option<PacingReport>,
}

impl TrainJudge {
    /// A judge for a train of `schedule`; `origin` is the instant the policy's deadlines count
    /// from (the train's scheduled start, or the request for it), on the judge's clock (the
    /// `now` of the events).
    pub fn new(schedule: &[TrainPacket], origin: Time, policy: JudgePolicy, estimator: EstimatorConfig) -> TrainJudge {
        TrainJudge {
            slots: schedule.iter().map(|&scheduled| Slot { scheduled, sent_at: None, received: None }).collect(),
            burst: Vec::new(),
            burst_received: 0,
            origin,
            policy,
            estimator,
            state: JudgeState::Collecting,
            received: 0,
            duplicates: 0,
            after_judging: 0,
            last_input: origin,
            end_seen: None,
            anchor: None,
            slip: Dur::ZERO,
            longest_transit: None,
            highest: None,
            pacing: None,
        }
    }

    /// The sender follows the train with `packets` more of its last packet's size, sent back
    /// to back, indices from the schedule's length on (a capacity burst:
    /// [`super::dispersion::burst_capacity`]). They are not judged with the train; the train is
    /// complete ([`JudgeReason::AllReceived`]) only when they are in too, so a driver reads the
    /// burst before it asks for the next train, and the next train does not meet the burst's
    /// queue.
    pub fn with_burst(mut self, packets: u32) -> TrainJudge {
        let last =
            self.slots.last().map_or(TrainPacket { offset: Dur::ZERO, size: crate::units::Bytes(0) }, |s| s.scheduled);
        self.burst = (0..packets).map(|_| Slot { scheduled: last, sent_at: None, received: None }).collect();
        self
    }

    pub fn state(&self) -> JudgeState {
        self.state
    }

    pub fn origin(&self) -> Time {
        self.origin
    }

    /// When and why the train was judged, once it is.
    pub fn judgement(&self) -> Option<Judgement> {
        match self.state {
            JudgeState::Collecting => None,
            JudgeState::Judged(j) => Some(j),
        }
    }

    /// Packets accepted so far.
    pub fn received(&self) -> u32 {
        self.received
    }

    /// When the end of the train became known.
    pub fn end_seen(&self) -> Option<Time> {
        self.end_seen
    }

    /// Nothing of the train came in: no packet and no end.
    pub fn silent(&self) -> bool {
        self.received == 0 && self.end_seen.is_none()
    }

    /// Packet `index` was sent at `at` (its record's send time unless it carries one).
    pub fn on_sent(&mut self, index: u32, at: Time) {
        if let Some(s) = self.slots.get_mut(index as usize) {
            s.sent_at = Some(at);
        }
    }

    /// Packet `index` arrived at the judge at `now`, stamped `recv_time` by the receiver and
    /// carrying `send_time` (`None` when the receiver cannot see it: [`TrainJudge::on_sent`]'s
    /// time stands in). Judges the train at once when it was the last one missing.
    pub fn on_packet(&mut self, now: Time, index: u32, send_time: Option<Time>, recv_time: Time) -> PacketFate {
        let judged = matches!(self.state, JudgeState::Judged(_));
        let n = self.slots.len();
        let in_burst = (index as usize).checked_sub(n).filter(|&j| j < self.burst.len());
        let slot = match in_burst {
            Some(j) => &mut self.burst[j],
            None => match self.slots.get_mut(index as usize) {
                Some(slot) => slot,
                None => return PacketFate::NotInTrain,
            },
        };
        if slot.received.is_some() {
            self.duplicates += 1;
            return PacketFate::Duplicate;
        }
        if judged {
            self.after_judging += 1;
            return PacketFate::AfterJudging;
        }
        slot.received = Some((send_time, recv_time));
        if in_burst.is_some() {
            self.burst_received += 1;
            self.last_input = now;
            self.judge_if_complete(now);
            return PacketFate::Accepted;
        }
        if let Some(st) = send_time {
            let a = Time(now.0.saturating_sub(st.0));
            self.anchor = Some(self.anchor.map_or(a, |x| x.min(a)));
            self.longest_transit = Some(self.longest_transit.map_or(a, |x| x.max(a)));
            self.slip = self.slip.max(st.saturating_since(Time(slot.scheduled.offset.0)));
        }
        self.received += 1;
        self.highest = Some(self.highest.map_or(index, |h| h.max(index)));
        self.last_input = now;
        self.judge_if_complete(now);
        PacketFate::Accepted
    }

    /// Every packet of the train and of its burst is in: judged at once.
    fn judge_if_complete(&mut self, now: Time) {
        if self.received as usize == self.slots.len() && self.burst_received as usize == self.burst.len() {
            self.judge(JudgeReason::AllReceived, now, now);
        }
    }

    /// The end of the train is known at `now` (the first report counts).
    pub fn on_end(&mut self, now: Time) {
        if self.end_seen.is_none() {
            self.end_seen = Some(now);
        }
        if self.state == JudgeState::Collecting {
            self.last_input = now;
        }
    }

    /// The sender's report on its own pacing (rule 4 of the module doc); the first counts.
    pub fn on_pacing(&mut self, report: PacingReport) {
        self.pacing.get_or_insert(report);
    }

    /// When the train's last packet would arrive, on the judge's clock, if it left as late as
    /// the latest packet in says the sender is behind its schedule and met the least one-way
    /// delay seen so far; `None` until a packet carrying its send time is in.
    pub fn predicted_last_arrival(&self) -> Option<Time> {
        let last = self.slots.last()?.scheduled.offset;
        Some(self.anchor? + last + self.slip)
    }

    fn judge(&mut self, reason: JudgeReason, decided_at: Time, ready_at: Time) {
        self.state = JudgeState::Judged(Judgement { reason, decided_at, ready_at });
    }

    /// The cut deadline: `origin + cut_after`, moved later to follow the sender (see
    /// [`JudgePolicy::cut_after_sender`]).
    pub fn cut_at(&self) -> Option<Time> {
        let floor = self.origin + self.policy.cut_after?;
        match (self.policy.cut_after_sender, self.predicted_last_arrival()) {
            (Some(slack), Some(p)) => Some(floor.max(p + slack)),
            // Following the sender, and nothing of the train is in yet: a sender that has not
            // started (a loaded server's pacer) is waited for; the loss deadlines still apply.
            (Some(_), None) => None,
            (None, _) => Some(floor),
        }
    }

    fn give_up_at(&self) -> Option<Time> {
        self.policy.give_up_after.map(|d| self.origin + d)
    }

    fn end_grace_at(&self) -> Option<Time> {
        self.end_seen.map(|e| e + self.policy.end_grace)
    }

    /// [`JudgePolicy::drained_slack`] after the moment the train's last packet would have
    /// arrived had it left as late as the latest packet in says the sender is behind its
    /// schedule ([`TrainJudge::predicted_last_arrival`]) and met the longest one-way delay any
    /// packet in had, instead of the least; `None` once the end of the train is known (the
    /// end's grace applies), before a packet carrying its send time is in, and while the
    /// packets in have no gap: only a train that lost a packet before its last one in shows a
    /// buffer that overflows, where the END is lost too. A train whose packets stop without a
    /// gap is more likely held by its sender (a stalled server), which sends the rest and the
    /// END later.
    ///
    /// Why (issue 19, session 24): the server's END, a small datagram behind the train, is lost
    /// where the train overflows a drop-tail buffer, and the client then waited for the
    /// give-up deadline, its train length + 2 s. On the testbed's 10 Mbit/s and Fig. 8 paths at
    /// 90 % load the estimates took 1.6–2.0 s longer than their trains on average
    /// (`probe-bench`'s call time against its train time). A packet accepted into the buffer
    /// leaves it within the buffer's delay, which a train that lost packets has met; while the
    /// tail keeps coming each arrival raises the longest delay, so the deadline stays `slack`
    /// ahead of the latest arrival, and it passes only after a silence of `slack` past the
    /// predicted end. Neither paper says when a train is over; the slack is ours (the cut
    /// deadline's).
    pub fn drained_at(&self) -> Option<Time> {
        if self.end_seen.is_some() {
            return None;
        }
        let slack = self.policy.drained_slack?;
        if self.received > self.highest? {
            return None;
        }
        let (anchor, longest) = (self.anchor?, self.longest_transit?);
        Some(self.predicted_last_arrival()? + longest.saturating_since(anchor) + slack)
    }

    /// The first of the end's grace and the give-up deadline, if either is known yet.
    fn end_or_give_up_at(&self) -> Option<Time> {
        min_opt(self.give_up_at(), self.end_grace_at())
    }

    /// The deadline at which the whole train is judged with losses, if one is known yet.
    fn loss_deadline(&self) -> Option<Time> {
        min_opt(self.end_or_give_up_at(), self.drained_at())
    }

    /// The end of listening after the verdict.
    fn listen_until(&self) -> Option<Time> {
        // A train judged drained had its end lost: nothing more is waited for.
        let linger = self.judgement().map(|j| match j.reason {
            JudgeReason::Drained => j.decided_at,
            _ => j.decided_at + self.policy.linger_for_end,
        });
        min_opt(self.end_or_give_up_at(), linger)
    }

    /// The next moment [`TrainJudge::poll`] has something to decide, if any.
    pub fn wake(&self) -> Option<Time> {
        match self.state {
            JudgeState::Collecting => min_opt(self.loss_deadline(), self.cut_at()),
            JudgeState::Judged(_) if self.end_seen.is_some() => None,
            JudgeState::Judged(_) => self.listen_until(),
        }
    }

    /// Time is `now`: judges the train if a deadline passed (the cut before the loss deadline
    /// when both did), then says whether to keep listening.
    pub fn poll(&mut self, now: Time) -> Poll {
        if self.state == JudgeState::Collecting {
            if let Some(cut) = self.cut_at().filter(|&c| now >= c) {
                self.judge(JudgeReason::Cut, now, cut);
            } else if self.loss_deadline().is_some_and(|d| now >= d) {
                let reason = if self.end_grace_at().is_some_and(|e| now >= e) {
                    JudgeReason::EndOfTrain
                } else if self.give_up_at().is_some_and(|g| now >= g) {
                    JudgeReason::GaveUp
                } else {
                    JudgeReason::Drained
                };
                self.judge(reason, now, self.last_input);
            }
        }
        match self.state {
            JudgeState::Collecting => Poll::Wait { until: self.wake() },
            JudgeState::Judged(_) if self.end_seen.is_some() => Poll::Done,
            JudgeState::Judged(_) => match self.listen_until() {
                Some(t) if now >= t => Poll::Done,
                until => Poll::Wait { until },
            },
        }
    }

    /// The records and the estimate, once judged (see the module doc); `None` before.
    pub fn verdict(&self) -> Option<TrainVerdict> {
        let judgement = self.judgement()?;
        let len = match judgement.reason {
            JudgeReason::Cut => self.slots.iter().rposition(|s| s.received.is_some()).map_or(0, |i| i + 1),
            _ => self.slots.len(),
        };
        let records: Vec<ProbeRecord> = self.slots[..len].iter().enumerate().map(|(i, s)| s.record(i)).collect();
        let n = self.slots.len();
        let burst = self.burst.iter().enumerate().map(|(j, s)| s.record(n + j)).collect();
        let schedule: Vec<TrainPacket> = self.slots.iter().map(|s| s.scheduled).collect();
        let mut estimate = judge_records(&schedule, &records, self.pacing, &self.estimator);
        estimate.duplicates += self.duplicates;
        Some(TrainVerdict { judgement, estimate, records, after_judging: self.after_judging, burst })
    }
}

/// The estimate of a train of `schedule` from the `records` judged (the first
/// `records.len()` packets: fewer than the schedule when the train was cut), with the sender's
/// `pacing` report when it came: [`estimate_train`], then rule 2's cut ([`cut_short`]) and
/// rule 4's pacing ([`pacing_fault`]). What [`TrainJudge::verdict`] answers, and what a
/// recorded train is judged with again (`headroom probe-replay`).
pub fn judge_records(
    schedule: &[TrainPacket],
    records: &[ProbeRecord],
    pacing: Option<PacingReport>,
    estimator: &EstimatorConfig,
) -> TrainEstimate {
    let mut estimate = estimate_train(records, estimator);
    if records.len() < schedule.len() {
        if let Some(reason) = cut_short(&estimate, records.len(), schedule.len(), estimator.busy_period) {
            estimate.outcome = Outcome::Inconclusive { reason };
        }
    }
    // A shaper's token rate is read from the receive side, where the shaper's busy queue
    // paces the packets whatever the sender did (`super::shaper`): bad pacing does not void it.
    if let Some(fault) = pacing.and_then(|p| pacing_fault(schedule, &p)) {
        if estimate.shaper.is_none() {
            estimate.outcome = Outcome::Inconclusive { reason: InconclusiveReason::BadlyPaced(fault) };
        }
    }
    estimate
}

/// Why a cut train's part says nothing ([`cut_short`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CutShort {
    /// No knee in the part received ("above range" so far).
    NoKnee,
    /// The knee's excursion, from packet `knee`, had not lasted `busy_period` gaps.
    ExcursionTooShort { knee: u32, busy_period: u32 },
}

impl fmt::Display for CutShort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CutShort::NoKnee => write!(f, "no knee in the part received"),
            CutShort::ExcursionTooShort { knee, busy_period } => {
                write!(f, "the excursion from packet {knee} had not lasted {busy_period} gaps")
            }
        }
    }
}

/// Why a train cut after `judged` of its `packets` packets says nothing (rule 2's "enough"):
/// `None` when the part received already holds the answer.
///
/// The gaps of a train probe rising rates (PathQuick Eq. 1: `r_i = P_i / T_quick` grows with
/// `i`; pathChirp's gaps shrink), so the packets after the cut probe the rates the part
/// received did not. The part received holds the answer only when it shows the knee: an
/// unterminated excursion that has lasted at least `L` gaps (pathChirp's busy-period threshold,
/// Ribeiro et al. §2.3: shorter excursions are not read as the available bandwidth being
/// exceeded; one cut after fewer gaps may be a burst of cross traffic that would have ended).
/// Without it ("above range", or a knee fewer than `L` gaps before the cut) the cut train is
/// inconclusive: its "at least" bound is the rate where the deadline fell, not a property of
/// the path. A knee at the first gap ("below range") is read the same way as any other.
pub fn cut_short(
    estimate: &TrainEstimate,
    judged: usize,
    packets: usize,
    busy_period: usize,
) -> Option<InconclusiveReason> {
    let why = match (&estimate.outcome, estimate.knee) {
        (Outcome::Inconclusive { .. }, _) => return None,
        (Outcome::AboveRange { .. }, _) | (_, None) => CutShort::NoKnee,
        (_, Some(knee)) if (judged as u64) < knee as u64 + 1 + busy_period.max(1) as u64 => {
            CutShort::ExcursionTooShort { knee, busy_period: busy_period.max(1) as u32 }
        }
        _ => return None,
    };
    Some(InconclusiveReason::Cut { at: judged as u32, packets: packets as u32, why })
}

/// The sender's report on its own pacing (`headroom serve`'s END message).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacingReport {
    /// Packets that left later than the sender's lateness threshold.
    pub late: u32,
    /// Mean send-time error over the train's packets.
    pub mean_error: Dur,
    pub max_error: Dur,
}

/// Why the sender's pacing voids a train ([`pacing_fault`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacingFault {
    /// `late` of `packets` left more than the sender's lateness threshold late (more than
    /// [`MAX_LATE_FRACTION`]).
    LatePackets { late: u32, packets: u32 },
    /// The mean send-time error without the worst packet, `mean`, is more than
    /// [`MAX_MEAN_ERROR_OF_GAP`] of the smallest designed gap `spacing`.
    MeanError { mean: Dur, spacing: Dur },
}

impl fmt::Display for PacingFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PacingFault::LatePackets { late, packets } => write!(
                f,
                "badly paced train: {late} of {packets} packets left late (more than {:.0} %)",
                MAX_LATE_FRACTION * 100.0
            ),
            PacingFault::MeanError { mean, spacing } => write!(
                f,
                "badly paced train: mean send-time error {:.1} µs (without the worst packet) is more than {:.0} % of \
                 the {:.1} µs packet spacing",
                mean.0 as f64 / 1e3,
                MAX_MEAN_ERROR_OF_GAP * 100.0,
                spacing.0 as f64 / 1e3
            ),
        }
    }
}

/// Above this fraction of late packets a train is badly paced (see [`pacing_fault`]).
pub const MAX_LATE_FRACTION: f64 = 0.1;
/// Above this mean send-time error, as a fraction of the smallest designed gap, a train is
/// badly paced (see [`pacing_fault`]).
pub const MAX_MEAN_ERROR_OF_GAP: f64 = 0.1;

/// Why a train was paced too badly to be judged (rule 4), `None` if it was not.
///
/// The estimator reads each gap's rate from the packets' actual send times, with the median of
/// three neighbouring gaps ([`estimate_train`]): one late packet stretches one gap and is voted
/// out by its two neighbours; at a third of the gaps late, the median fails. The limit used is
/// [`MAX_LATE_FRACTION`] (10 %), a margin below that third. Beyond isolated packets, a mean
/// error `e` stretches the gaps on average, so the rates probed are `T / (T + e)` of the
/// design's: at a mean error of [`MAX_MEAN_ERROR_OF_GAP`] of the smallest gap `T` (`T_quick`
/// for PathQuick, the last gap of a chirp) the train probes about 10 % below its designed
/// range, and a late packet also lets a busy queue drain for `e` more, which ends excursions
/// whose height is below `e`. The mean is taken without the worst packet (`(mean·n − max) /
/// (n − 1)`), which is one late packet, already counted by the first limit. Neither paper bounds the sender's error; these limits are this
/// crate's choice.
pub fn pacing_fault(schedule: &[TrainPacket], report: &PacingReport) -> Option<PacingFault> {
    let packets = schedule.len().max(1) as f64;
    let smallest_gap = schedule.windows(2).map(|w| w[1].offset.0.saturating_sub(w[0].offset.0)).min()?;
    if report.late as f64 > MAX_LATE_FRACTION * packets {
        return Some(PacingFault::LatePackets { late: report.late, packets: schedule.len() as u32 });
    }
    // The mean without the worst packet: one outlier is a late packet, counted above.
    let others = (report.mean_error.0 as f64 * packets - report.max_error.0 as f64).max(0.0) / (packets - 1.0).max(1.0);
    if others > MAX_MEAN_ERROR_OF_GAP * smallest_gap as f64 {
        return Some(PacingFault::MeanError { mean: Dur(others.round() as u64), spacing: Dur(smallest_gap) });
    }
    None
}

fn min_opt(a: Option<Time>, b: Option<Time>) -> Option<Time> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abw::{Outcome, QuickDesign, TrainDesign};
    use crate::units::Bytes;

    /// 30 packets, 2 ms apart, 48..1208 B: 58 ms long.
    fn schedule() -> Vec<TrainPacket> {
        TrainDesign::PathQuick(QuickDesign { t_quick: Dur::from_millis(2), p_1: Bytes(48), delta_p: Bytes(40), n: 30 })
            .schedule()
    }

    const MS: u64 = 1_000_000;

    /// Packet `i` of the schedule as received over an idle path: 10 ms of delay plus its
    /// serialisation at 100 Mbit/s, receiver clock 5 s ahead.
    fn recv_of(p: &TrainPacket) -> Time {
        Time(p.offset.0 + 10 * MS + p.size.0 * 80 + 5_000 * MS)
    }

    fn receiver(cut_after: Option<Dur>) -> TrainJudge {
        TrainJudge::new(
            &schedule(),
            Time::ZERO,
            JudgePolicy::socket_receiver(cut_after, Dur::from_secs(2)),
            EstimatorConfig::default(),
        )
    }

    /// Feeds packets `which` in that order, each arriving at the judge when its receive time
    /// says (5 s clock offset removed); returns the fates.
    fn feed(j: &mut TrainJudge, which: impl IntoIterator<Item = usize>) -> Vec<PacketFate> {
        let s = schedule();
        which
            .into_iter()
            .map(|i| {
                let p = &s[i];
                let at = recv_of(p);
                j.on_packet(Time(at.0 - 5_000 * MS), i as u32, Some(Time(p.offset.0)), at)
            })
            .collect()
    }

    #[test]
    fn judged_at_once_when_all_packets_are_in() {
        let mut j = receiver(Some(Dur::from_millis(80)));
        assert_eq!(j.poll(Time::ZERO), Poll::Wait { until: Some(Time(80 * MS)) });
        feed(&mut j, 0..29);
        assert_eq!(j.state(), JudgeState::Collecting);
        let last_at = Time(recv_of(&schedule()[29]).0 - 5_000 * MS);
        feed(&mut j, [29]);
        let judged = j.judgement().expect("judged by the last packet");
        assert_eq!(judged, Judgement { reason: JudgeReason::AllReceived, decided_at: last_at, ready_at: last_at });
        assert!(last_at < Time(80 * MS), "before the cut deadline");
        // Judged, but still listening for the END (at most the linger).
        assert_eq!(j.poll(last_at), Poll::Wait { until: Some(last_at + SOCKET_LINGER_FOR_END) });
        j.on_end(last_at + Dur::from_millis(1));
        assert_eq!(j.poll(last_at + Dur::from_millis(1)), Poll::Done);
        let v = j.verdict().unwrap();
        assert_eq!((v.estimate.packets, v.estimate.received, v.estimate.lost), (30, 30, 0));
        assert_eq!(v.records.len(), 30);
        assert!(matches!(v.estimate.outcome, Outcome::AboveRange { .. }), "{:?}", v.estimate.outcome);
    }

    #[test]
    fn duplicates_are_counted_and_left_out() {
        let mut j = receiver(None);
        let fates = feed(&mut j, [0, 1, 2, 2, 3, 1]);
        use PacketFate::*;
        assert_eq!(fates, vec![Accepted, Accepted, Accepted, Duplicate, Accepted, Duplicate]);
        assert_eq!(j.received(), 4);
        let s = schedule();
        assert_eq!(j.on_packet(Time(70 * MS), 30, None, Time(0)), NotInTrain);
        feed(&mut j, 4..30);
        let v = j.verdict().unwrap();
        assert_eq!(v.judgement.reason, JudgeReason::AllReceived);
        assert_eq!(v.estimate.duplicates, 2);
        assert_eq!(v.estimate.received, 30);
        // A copy after the verdict is still a duplicate until the verdict is taken.
        assert_eq!(j.on_packet(Time(90 * MS), 7, Some(Time(s[7].offset.0)), recv_of(&s[7])), Duplicate);
        assert_eq!(j.verdict().unwrap().estimate.duplicates, 3);
    }

    #[test]
    fn reordered_packets_are_collected_by_index() {
        let mut j = receiver(None);
        // Packet 11 overtakes packet 10: it arrives (and is stamped) first.
        let s = schedule();
        feed(&mut j, 0..10);
        let (t10, t11) = (recv_of(&s[10]), recv_of(&s[11]));
        assert_eq!(j.on_packet(Time(40 * MS), 11, Some(Time(s[11].offset.0)), t10), PacketFate::Accepted);
        assert_eq!(j.on_packet(Time(41 * MS), 10, Some(Time(s[10].offset.0)), t11), PacketFate::Accepted);
        feed(&mut j, 12..30);
        let v = j.verdict().expect("all in");
        assert_eq!(v.estimate.reordered, 1);
        assert_eq!(v.estimate.lost, 0);
        let idx: Vec<u32> = v.records.iter().map(|r| r.index).collect();
        assert_eq!(idx, (0..30).collect::<Vec<u32>>());
        assert_eq!(v.records[10].recv_time, Some(t11));
    }

    #[test]
    fn a_lost_tail_is_lost_and_a_cut_tail_is_not_judged() {
        let s = schedule();
        // The simulator's policy: the sender judges 1 s after its last send; the tail of five
        // packets never comes back: it is lost.
        let mut sim =
            TrainJudge::new(&s, Time::ZERO, JudgePolicy::whole_train(Dur::from_secs(1)), EstimatorConfig::default());
        let mut tx = TrainSender::new(Time::ZERO, &s);
        let mut now = Time::ZERO;
        while let Some(t) = tx.next_send(&s) {
            now = t;
            let (i, _) = tx.poll_transmit(now, &s).unwrap();
            sim.on_sent(i, now);
        }
        assert_eq!(tx.state(), SenderState::Sent);
        sim.on_end(now);
        for (i, p) in s.iter().enumerate().take(25) {
            sim.on_packet(Time(recv_of(p).0 - 5_000 * MS), i as u32, None, recv_of(p));
        }
        let deadline = now + Dur::from_secs(1);
        assert_eq!(sim.poll(deadline - Dur(1)), Poll::Wait { until: Some(deadline) });
        assert_eq!(sim.poll(deadline), Poll::Done);
        let j = sim.judgement().unwrap();
        assert_eq!(j.reason, JudgeReason::EndOfTrain);
        assert_eq!(j.decided_at, deadline);
        let v = sim.verdict().unwrap();
        assert_eq!((v.estimate.packets, v.estimate.received, v.estimate.lost), (30, 25, 5));
        assert_eq!(v.records[0].send_time, Time::ZERO, "the send time reported by on_sent");
        // The client's policy with a cut at 60 ms: the same five packets are still on their
        // way at the deadline; packet 7 was lost in the middle and stays lost.
        let mut rx = receiver(Some(Dur::from_millis(60)));
        feed(&mut rx, (0..25).filter(|&i| i != 7));
        assert_eq!(rx.poll(Time(60 * MS) - Dur(1)), Poll::Wait { until: Some(Time(60 * MS)) });
        assert!(matches!(rx.poll(Time(61 * MS)), Poll::Wait { .. }), "lingers for the END");
        let j = rx.judgement().unwrap();
        assert_eq!(j, Judgement { reason: JudgeReason::Cut, decided_at: Time(61 * MS), ready_at: Time(60 * MS) });
        // A packet of the tail arrives after the verdict: counted, not judged.
        assert_eq!(feed(&mut rx, [25]), vec![PacketFate::AfterJudging]);
        let v = rx.verdict().unwrap();
        assert_eq!((v.estimate.packets, v.estimate.received, v.estimate.lost), (25, 24, 1));
        assert_eq!(v.after_judging, 1);
        assert_eq!(v.records[7].recv_time, None);
        assert_eq!(v.records[7].send_time, Time(s[7].offset.0), "a lost packet keeps its scheduled offset");
        // Listening ends at the linger.
        assert_eq!(rx.poll(Time(61 * MS) + SOCKET_LINGER_FOR_END), Poll::Done);
    }

    #[test]
    fn a_capacity_burst_is_waited_for_and_recorded_apart_from_the_train() {
        // Three burst packets behind the 30-packet train, 10 µs apart after the last one.
        let s = schedule();
        let last = s[29];
        let burst_at = |j: u64| recv_of(&last) + Dur(j * 10_000 + 10_000);
        let mut j = receiver(None).with_burst(3);
        feed(&mut j, 0..30);
        assert_eq!(j.state(), JudgeState::Collecting, "the train is in, its burst is not");
        let arrive = |j: &mut TrainJudge, k: u32| {
            let at = burst_at(k as u64);
            j.on_packet(Time(at.0 - 5_000 * MS), 30 + k, Some(Time(last.offset.0 + k as u64 * 2_000)), at)
        };
        assert_eq!(arrive(&mut j, 0), PacketFate::Accepted);
        assert_eq!(arrive(&mut j, 0), PacketFate::Duplicate);
        assert_eq!(arrive(&mut j, 2), PacketFate::Accepted);
        assert_eq!(j.on_packet(Time(90 * MS), 33, None, Time(0)), PacketFate::NotInTrain, "past the burst");
        assert_eq!(j.received(), 30, "burst packets are not the train's");
        assert_eq!(arrive(&mut j, 1), PacketFate::Accepted);
        let v = j.verdict().expect("judged when the burst's last packet came");
        let done = Time(burst_at(1).0 - 5_000 * MS);
        assert_eq!(v.judgement, Judgement { reason: JudgeReason::AllReceived, decided_at: done, ready_at: done });
        assert_eq!(v.records.len(), 30, "the train is judged on its own packets");
        assert_eq!(v.estimate.packets, 30);
        assert_eq!(v.estimate.duplicates, 1);
        let burst: Vec<(u32, Bytes, Option<Time>)> = v.burst.iter().map(|r| (r.index, r.size, r.recv_time)).collect();
        assert_eq!(
            burst,
            vec![
                (30, last.size, Some(burst_at(0))),
                (31, last.size, Some(burst_at(1))),
                (32, last.size, Some(burst_at(2)))
            ]
        );
        // A burst packet lost: the train is judged at the END's grace, the burst packet without
        // a receive time, and the train itself lost nothing.
        let mut j = receiver(None).with_burst(2);
        feed(&mut j, 0..30);
        arrive(&mut j, 0);
        j.on_end(Time(80 * MS));
        assert_eq!(j.poll(Time(80 * MS) + SOCKET_END_GRACE), Poll::Done);
        let v = j.verdict().unwrap();
        assert_eq!(v.judgement.reason, JudgeReason::EndOfTrain);
        assert_eq!(v.estimate.lost, 0);
        assert_eq!(v.burst.iter().map(|r| r.recv_time.is_some()).collect::<Vec<_>>(), vec![true, false]);
        // Without a burst, packet 30 is not part of the train.
        let mut j = receiver(None);
        assert_eq!(j.on_packet(Time(90 * MS), 30, None, Time(0)), PacketFate::NotInTrain);
    }

    #[test]
    fn a_train_whose_end_was_lost_is_judged_once_its_last_packet_would_have_drained() {
        // Packets 10, 26–29 and the END lost (a full buffer): judged `SOCKET_DRAINED_SLACK`
        // after packet 29 would have arrived with the longest one-way delay seen (packet 25's),
        // not at the 2 s give-up deadline, and nothing is waited for after that.
        let s = schedule();
        let lossy = |j: &mut TrainJudge| {
            feed(j, 0..10);
            feed(j, 11..26);
        };
        let mut j = receiver(None);
        lossy(&mut j);
        let delay = |i: usize| recv_of(&s[i]).0 - 5_000 * MS - s[i].offset.0;
        let last_would_arrive = Time(s[29].offset.0 + delay(0));
        let drained = last_would_arrive + Dur(delay(25) - delay(0)) + SOCKET_DRAINED_SLACK;
        assert_eq!(j.drained_at(), Some(drained));
        assert_eq!(j.poll(Time(70 * MS)), Poll::Wait { until: Some(drained) });
        assert_eq!(j.poll(drained), Poll::Done);
        let packet_25 = Time(s[25].offset.0 + delay(25));
        assert_eq!(
            j.judgement(),
            Some(Judgement { reason: JudgeReason::Drained, decided_at: drained, ready_at: packet_25 })
        );
        assert_eq!(j.verdict().unwrap().estimate.lost, 5);
        // Without a gap before the last packet in, the tail may be held by a stalled sender:
        // the END (or the give-up deadline) is waited for.
        let mut j = receiver(None);
        feed(&mut j, 0..26);
        assert_eq!(j.drained_at(), None);
        assert_eq!(j.poll(Time(70 * MS)), Poll::Wait { until: Some(Time(2_000 * MS)) });
        // A tail that keeps coming, later and later, moves the deadline with it.
        let mut j = receiver(None);
        feed(&mut j, 0..29);
        let late = Time(90 * MS);
        j.on_packet(late, 29, Some(Time(s[29].offset.0)), Time(late.0 + 5_000 * MS));
        assert_eq!(j.judgement().map(|x| x.reason), Some(JudgeReason::AllReceived));
        let mut j = receiver(None);
        feed(&mut j, 0..10);
        feed(&mut j, 11..28);
        j.on_packet(late, 28, Some(Time(s[28].offset.0)), Time(late.0 + 5_000 * MS));
        let moved = Time(s[29].offset.0 + delay(0)) + Dur(late.0 - s[28].offset.0 - delay(0)) + SOCKET_DRAINED_SLACK;
        assert_eq!(j.drained_at(), Some(moved));
        assert!(moved > late, "the deadline follows the latest arrival");
        // With the END seen, its grace applies instead.
        let mut j = receiver(None);
        lossy(&mut j);
        j.on_end(Time(61 * MS));
        assert_eq!(j.drained_at(), None);
        assert_eq!(j.poll(Time(61 * MS)), Poll::Wait { until: Some(Time(61 * MS) + SOCKET_END_GRACE) });
    }

    #[test]
    fn the_end_or_the_give_up_deadline_judge_with_losses() {
        // END seen at 70 ms with packet 29 missing: judged whole SOCKET_END_GRACE later, ready
        // at the END.
        let mut j = receiver(None);
        feed(&mut j, 0..29);
        j.on_end(Time(70 * MS));
        let until = Time(70 * MS) + SOCKET_END_GRACE;
        assert_eq!(j.poll(Time(71 * MS)), Poll::Wait { until: Some(until) });
        assert_eq!(j.poll(until), Poll::Done);
        let judged = j.judgement().unwrap();
        assert_eq!(judged, Judgement { reason: JudgeReason::EndOfTrain, decided_at: until, ready_at: Time(70 * MS) });
        assert_eq!(j.verdict().unwrap().estimate.lost, 1);
        // Nothing at all: given up at 2 s, and silent.
        let mut j = receiver(Some(Dur::from_secs(5)));
        assert_eq!(j.poll(Time(MS)), Poll::Wait { until: Some(Time(2_000 * MS)) });
        assert_eq!(j.poll(Time(2_000 * MS)), Poll::Done);
        assert_eq!(j.judgement().unwrap().reason, JudgeReason::GaveUp);
        assert!(j.silent());
        let v = j.verdict().unwrap();
        assert!(matches!(v.estimate.outcome, Outcome::Inconclusive { .. }));
    }

    #[test]
    fn the_sender_paces_and_catches_up() {
        let s = schedule();
        let mut tx = TrainSender::new(Time(MS), &s);
        assert_eq!(tx.poll_transmit(Time(MS) - Dur(1), &s), None);
        assert_eq!(tx.poll_transmit(Time(MS), &s).map(|p| p.0), Some(0));
        assert_eq!(tx.next_send(&s), Some(Time(3 * MS)));
        // Polled late: the overdue packets leave one per call.
        assert_eq!(tx.poll_transmit(Time(8 * MS), &s).map(|p| p.0), Some(1));
        assert_eq!(tx.poll_transmit(Time(8 * MS), &s).map(|p| p.0), Some(2));
        assert_eq!(tx.poll_transmit(Time(8 * MS), &s).map(|p| p.0), Some(3));
        assert_eq!(tx.poll_transmit(Time(8 * MS), &s), None);
        assert_eq!(tx.state(), SenderState::Sending { next: 4 });
        assert_eq!(TrainSender::new(Time::ZERO, &[]).state(), SenderState::Sent);
    }

    /// Feeds packet `i` arriving with an extra delay `q` (queueing, or a late sender) and
    /// carrying send time `offset + slip`.
    fn arrive(j: &mut TrainJudge, i: usize, q: Dur, slip: Dur) -> PacketFate {
        let p = schedule()[i];
        let at = recv_of(&p) + q + slip;
        j.on_packet(Time(at.0 - 5_000 * MS), i as u32, Some(Time(p.offset.0) + slip), at)
    }

    /// Feeds the packets that arrive by `until` in arrival order, then polls at `until`.
    fn arrive_until(j: &mut TrainJudge, until: Time, delay: impl Fn(usize) -> (Dur, Dur)) {
        let s = schedule();
        for (i, p) in s.iter().enumerate() {
            let (q, slip) = delay(i);
            if Time(recv_of(p).0 - 5_000 * MS) + q + slip <= until {
                arrive(j, i, q, slip);
            }
        }
        j.poll(until);
    }

    #[test]
    fn a_cut_train_without_a_knee_is_inconclusive() {
        // Idle path, cut at 50 ms: packets 0..19 are in, the rest (probing the higher rates)
        // still on their way. Before the rule this was "above range (≥ 2.8 Mbit/s)".
        let mut j = receiver(Some(Dur::from_millis(50)));
        arrive_until(&mut j, Time(50 * MS), |_| (Dur::ZERO, Dur::ZERO));
        assert_eq!(j.judgement().unwrap().reason, JudgeReason::Cut);
        let v = j.verdict().unwrap();
        assert!(v.records.len() < 30, "cut: {}", v.records.len());
        match &v.estimate.outcome {
            Outcome::Inconclusive { reason } => {
                let expected =
                    InconclusiveReason::Cut { at: v.records.len() as u32, packets: 30, why: CutShort::NoKnee };
                assert_eq!(*reason, expected);
                assert!(reason.to_string().starts_with("train cut at packet"), "{reason}");
            }
            o => panic!("a cut train without a knee gave {o:?}"),
        }
    }

    #[test]
    fn a_cut_train_with_a_knee_keeps_its_estimate_unless_the_knee_is_too_recent() {
        // The queue grows by 300 µs a packet from packet 12 on: the knee is at 12.
        let queue = |i: usize| (Dur(i.saturating_sub(12) as u64 * 300_000), Dur::ZERO);
        let mut j = receiver(Some(Dur::from_millis(62)));
        arrive_until(&mut j, Time(62 * MS), queue);
        let v = j.verdict().unwrap();
        assert_eq!(v.judgement.reason, JudgeReason::Cut);
        assert!(v.records.len() >= 12 + 1 + 5 && v.records.len() < 30, "{}", v.records.len());
        assert!(matches!(v.estimate.outcome, Outcome::Estimate(_)), "{:?}", v.estimate.outcome);
        assert_eq!(v.estimate.knee, Some(12));
        // Cut four gaps after the knee: fewer than L = 5, so it may be a burst that would end.
        let mut j = receiver(Some(Dur::from_millis(44)));
        arrive_until(&mut j, Time(44 * MS), queue);
        let v = j.verdict().unwrap();
        assert_eq!(v.records.len(), 17);
        match &v.estimate.outcome {
            Outcome::Inconclusive { reason } => {
                let why = CutShort::ExcursionTooShort { knee: 12, busy_period: 5 };
                assert_eq!(*reason, InconclusiveReason::Cut { at: 17, packets: 30, why });
                assert!(reason.to_string().contains("had not lasted 5 gaps"), "{reason}");
            }
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn the_cut_waits_for_a_late_sender() {
        // The sender starts 30 ms late and falls 5 ms further behind at packet 10; the cut
        // floor (80 ms) would fall at packet ~19. Following the sender it waits for the train.
        let late = |i: usize| (Dur::from_millis(30), if i >= 10 { Dur::from_millis(5) } else { Dur::ZERO });
        let policy = JudgePolicy {
            cut_after_sender: Some(Dur::from_millis(10)),
            ..JudgePolicy::socket_receiver(Some(Dur::from_millis(80)), Dur::from_secs(2))
        };
        let mut j = TrainJudge::new(&schedule(), Time::ZERO, policy, EstimatorConfig::default());
        assert_eq!(j.cut_at(), None, "nothing in yet: no cut, the sender has not started");
        arrive(&mut j, 0, late(0).0, late(0).1);
        // Packet 0 arrived at 40.004 ms with offset 0: the last (58 ms) is due at 98 ms + 10 ms.
        assert_eq!(j.predicted_last_arrival(), Some(Time(98 * MS + 48 * 80)));
        arrive_until(&mut j, Time(200 * MS), late);
        let v = j.verdict().unwrap();
        assert_eq!(v.judgement.reason, JudgeReason::AllReceived);
        assert_eq!(v.records.len(), 30);
        // The same train against the fixed floor alone is cut, and so says nothing.
        let mut j = receiver(Some(Dur::from_millis(80)));
        arrive_until(&mut j, Time(80 * MS), late);
        assert_eq!(j.judgement().unwrap().reason, JudgeReason::Cut);
        assert!(matches!(j.verdict().unwrap().estimate.outcome, Outcome::Inconclusive { .. }));
        // A sender that starts after the floor (120 ms late): before, the judge was cut with
        // nothing in (a silent train, reported as a timeout); now it waits for the train.
        let very_late = |_: usize| (Dur::from_millis(120), Dur::ZERO);
        let mut j = TrainJudge::new(&schedule(), Time::ZERO, policy, EstimatorConfig::default());
        assert_eq!(j.poll(Time(100 * MS)), Poll::Wait { until: Some(Time(2_000 * MS)) });
        arrive_until(&mut j, Time(300 * MS), very_late);
        assert_eq!(j.verdict().unwrap().judgement.reason, JudgeReason::AllReceived);
    }

    #[test]
    fn a_badly_paced_train_is_inconclusive() {
        let s = schedule();
        // 3 of 30 late; without the 4 ms outlier the others' mean is 200 µs, 10 % of 2 ms.
        let ok = PacingReport { late: 3, mean_error: Dur(326_666), max_error: Dur::from_millis(4) };
        assert_eq!(pacing_fault(&s, &ok), None, "tolerated");
        let late = PacingReport { late: 4, ..ok };
        assert_eq!(pacing_fault(&s, &late), Some(PacingFault::LatePackets { late: 4, packets: 30 }));
        assert!(pacing_fault(&s, &late).unwrap().to_string().contains("4 of 30 packets left late"));
        let slow = PacingReport { mean_error: Dur(326_700), ..ok };
        match pacing_fault(&s, &slow) {
            Some(PacingFault::MeanError { mean, spacing }) => {
                assert_eq!(spacing, Dur::from_millis(2));
                // (326,700 · 30 − 4,000,000) / 29 ns
                assert_eq!(mean, Dur(200_034));
            }
            f => panic!("{f:?}"),
        }
        assert!(pacing_fault(&s, &slow).unwrap().to_string().contains("mean send-time error 200.0 µs"));
        // Through the judge: the whole train in, then the END's report.
        let mut j = receiver(None);
        feed(&mut j, 0..30);
        assert!(matches!(j.verdict().unwrap().estimate.outcome, Outcome::AboveRange { .. }));
        j.on_pacing(late);
        match j.verdict().unwrap().estimate.outcome {
            Outcome::Inconclusive { reason } => {
                assert_eq!(reason, InconclusiveReason::BadlyPaced(PacingFault::LatePackets { late: 4, packets: 30 }))
            }
            o => panic!("{o:?}"),
        }
    }
}
