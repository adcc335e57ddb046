//! One judging of a probe train: the same packet timings fed through the simulator's
//! `TrainProber` and through the socket client's `TrainReceiver` (what `headroom probe` runs
//! between its socket reads) give the same verdict and value, because both drive core's
//! `abw::train` machines.

use headroom_core::abw::{EstimatorConfig, JudgePolicy, Outcome, Poll, QuickDesign, TrainDesign};
use headroom_core::units::{Bytes, Dur, Time};
use headroom_net::wire::Msg;
use headroom_net::TrainReceiver;
use headroom_sim::probe::{EstimateRow, Prober, TrainProber, Verdict};

const MS: u64 = 1_000_000;

/// 30 packets, 2 ms apart, 48..1208 B (352 kbit/s .. 4.8 Mbit/s).
fn design() -> TrainDesign {
    TrainDesign::PathQuick(QuickDesign { t_quick: Dur::from_millis(2), p_1: Bytes(48), delta_p: Bytes(40), n: 30 })
}

/// What happens to packet `i` on the way: its arrival time at the receiver (`None`: lost), and
/// how many copies arrive.
struct Path {
    /// Receive time of each packet sent at its scheduled offset (train start at 0).
    recv: Vec<Option<Time>>,
    copies: Vec<u32>,
    /// When the server's END (sent after the last packet, through the same queue) arrives.
    end: Time,
}

/// One FIFO bottleneck of `capacity_bps`, 10 ms of propagation: the train queues behind itself
/// once its rate exceeds the capacity (the knee).
fn bottleneck(capacity_bps: u64) -> Path {
    let s = design().schedule();
    let mut free = 0u64;
    let recv = s
        .iter()
        .map(|p| {
            free = free.max(p.offset.0) + p.size.0 * 8 * 1_000_000_000 / capacity_bps;
            Some(Time(free + 10 * MS))
        })
        .collect();
    Path { recv, copies: vec![1; s.len()], end: Time(free + 10 * MS + 100_000) }
}

/// The simulator's code path: a `TrainProber` starting at 0, its probes echoed 1 ms after they
/// reach the receiver. Returns the estimate row.
fn through_simulator(path: &Path) -> EstimateRow {
    let mut prober = TrainProber::new(
        design(),
        EstimatorConfig::default(),
        Time::ZERO,
        Dur::from_secs(1),
        Dur::from_secs(1),
        Time(10_000 * MS),
        0,
    );
    // Echoes due: (arrival at the prober, probe id, arrival at the receiver).
    let mut echoes: Vec<(Time, u64, Time)> = Vec::new();
    for _ in 0..10_000 {
        let next_echo = echoes.iter().map(|e| e.0).min();
        let now = match (prober.next_wakeup(), next_echo) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b).expect("the prober always has something to wait for"),
        };
        if let Some(k) = echoes.iter().position(|e| e.0 == now) {
            let (at, id, received_at) = echoes.remove(k);
            prober.on_echo(at, id, received_at);
        } else if let Some((id, _size)) = prober.poll_transmit(now) {
            let i = (id & 0xffff_ffff) as usize;
            // Only the first train travels (the next one starts when the first is judged).
            if id >> 32 == 1 {
                assert_eq!(now, Time(design().schedule()[i].offset.0), "sent on schedule");
                for c in 0..path.copies[i] {
                    if let Some(r) = path.recv[i] {
                        echoes.push((r + Dur::from_millis(1) + Dur(c as u64), id, r));
                    }
                }
            }
        }
        if let Some(row) = prober.poll_estimate(now) {
            return row;
        }
    }
    panic!("the simulator's prober never judged the train");
}

/// The socket client's code path: a `TrainReceiver` fed the datagrams a server would send (its
/// clock starting at START, 0.5 ms before the train), END behind the last packet.
fn through_client(path: &Path) -> headroom_net::TrainReport {
    let d = design();
    let s = d.schedule();
    let policy = JudgePolicy::socket_receiver(None, Dur::from_secs(2));
    let mut rx = TrainReceiver::new(7, &s, policy, EstimatorConfig::default());
    let start = Dur::from_micros(500);
    let mut events: Vec<(Time, Msg)> = Vec::new();
    for (i, p) in s.iter().enumerate() {
        if let Some(r) = path.recv[i] {
            for c in 0..path.copies[i] {
                let msg = Msg::Probe { train: 7, index: i as u16, count: s.len() as u16, send_offset_ns: p.offset.0 };
                events.push((r + start + Dur(c as u64), msg));
            }
        }
    }
    events.push((
        path.end + start,
        Msg::End { train: 7, sent: 30, late: 0, spacing_err_mean_ns: 0, spacing_err_max_ns: 0 },
    ));
    events.sort_by_key(|e| e.0);
    let mut events = events.into_iter().peekable();
    let mut now = Time::ZERO;
    loop {
        match rx.poll(now) {
            Poll::Done => break,
            Poll::Wait { until } => {
                let until = until.expect("the client always has a deadline");
                match events.peek() {
                    Some((t, _)) if *t <= until => {
                        let (t, msg) = events.next().unwrap();
                        now = t;
                        // The receive timestamp on the receiver's clock: the train's own time.
                        rx.on_message(now, &msg, Time(t.0 - start.0), true).unwrap();
                    }
                    _ => now = until,
                }
            }
        }
    }
    rx.finish(Time::ZERO).expect("a train came in").0
}

fn same_verdict(path: &Path) -> (EstimateRow, headroom_net::TrainReport) {
    let row = through_simulator(path);
    let report = through_client(path);
    let outcome = &report.estimate.outcome;
    assert_eq!(row.verdict, Verdict::of(outcome), "simulator {row:?}, client {outcome:?}");
    assert_eq!(row.value, outcome.value(), "simulator {row:?}, client {outcome:?}");
    (row, report)
}

#[test]
fn same_timings_same_verdict_in_the_simulator_and_the_client() {
    // A knee at 2 Mbit/s: both read the same estimate.
    let path = bottleneck(2_000_000);
    let (row, report) = same_verdict(&path);
    assert_eq!(row.verdict, Verdict::Estimate);
    let v = row.value.unwrap().as_mbps();
    assert!(v > 1.0 && v < 3.0, "{v} Mbit/s for a 2 Mbit/s bottleneck");
    assert_eq!((report.estimate.received, report.estimate.lost), (30, 0));
    // Judged when the last packet arrived, in both.
    let last = path.recv[29].unwrap();
    assert_eq!(row.time, last + Dur::from_millis(1), "the simulator judges at the last echo");
    assert_eq!(report.elapsed.as_nanos() as u64, last.0 + 500_000, "the client at the last packet");

    // A wide path: above range in both.
    let (row, _) = same_verdict(&bottleneck(100_000_000));
    assert_eq!(row.verdict, Verdict::AboveRange);

    // Losses, a duplicate and a reordered pair: still one verdict. The train is judged with the
    // losses once its end is known (the simulator waits its 1 s, the client 2 ms after END).
    let mut path = bottleneck(2_000_000);
    path.recv[5] = None;
    path.recv[29] = None;
    path.copies[8] = 2;
    path.recv.swap(12, 13);
    let (row, report) = same_verdict(&path);
    assert_eq!((report.estimate.lost, report.estimate.duplicates, report.estimate.reordered), (2, 1, 1));
    assert!(!matches!(report.estimate.outcome, Outcome::Inconclusive { .. }), "{:?}", report.estimate.outcome);
    assert_eq!(row.time, Time(58 * MS) + Dur::from_secs(1), "the simulator judges 1 s after its last send");
}
