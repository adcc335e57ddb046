//! `headroom probe-replay`: the trains of a `headroom probe-bench --dump` judged again offline,
//! and auto-ranging's ladder replayed on them (issue 19).
//!
//! A testbed run is slow and noisy: no two runs meet the same cross traffic. A dump keeps every
//! packet the client judged (send offset carried by the probe, kernel receive stamp), each
//! train's pacing as the server reported it, and the session's round trip. The estimator and
//! the ladder are sans-IO state machines ([`headroom_core::abw::train::judge_records`],
//! [`Ladder`]), so the same records can be fed to them again, here, without a network:
//!
//! - **Judged again.** Each recorded train is judged as the client judged it: the records it
//!   had (fewer than the design's packets when the train was cut at the judging deadline), the
//!   server's pacing report, the estimator of the bench's options (`--bmax`, `--target-sigma`,
//!   `--detect-shaper`, `--no-detect-shaper`, `--knee-fit` as given to `probe-bench`). A
//!   fixed-range train (`--bmax`) is re-read from its own gaps as the client re-reads it
//!   ([`headroom_net::client::reread`]).
//! - **Replayed.** Auto-ranging's ladder is built as the client built it
//!   ([`headroom_net::client::auto_range_plan`], the dump's round trip) and fed the recorded
//!   trains in turn. Each train the ladder asks for is checked against the recorded one (its
//!   packet sizes, and no more packets recorded than it has): where they differ, the code that
//!   replays is not the code that ran, and the replay stops there ("diverged"): what that
//!   train would have read is not in the dump. The ladder's top is [`DEFAULT_TOP`]: a server
//!   whose caps lowered it (not recorded in the dump) shows as a divergence at the first train.
//!
//! Each estimate's line gives the recorded answer and the replayed one, and whether they agree
//! (same verdict, same value to the dump's 0.1 kbit/s). Same code and same dump: every estimate
//! agrees (the root test `probe_testbed` checks it). Changed code: the lines say where the new
//! ladder takes another turn, or which answers the new judge reads differently.

use std::collections::BTreeSet;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use headroom_core::abw::autorange::{Ladder, LadderStep, DEFAULT_TOP};
use headroom_core::abw::train::{judge_records, PacingReport};
use headroom_core::abw::{Method, Outcome, ProbeRecord, QuickDesign, TrainDesign};
use headroom_core::units::{Bytes, Dur, Rate, Time};
use headroom_net::client::{auto_range_plan, design_for, reread};
use headroom_net::wire::{ip_udp_overhead, PROBE_HEADER_LEN};
use serde::Deserialize;

use crate::probe_bench::ClientChoice;

#[derive(Args, Debug)]
pub struct ProbeReplayArgs {
    /// The dump: `headroom probe-bench --dump FILE`.
    pub dump: PathBuf,
    /// Only the estimates at this cross-traffic level (Mbit/s, as in the dump's first column).
    #[arg(long)]
    pub level: Option<f64>,
    /// Only this estimate (its number in the dump's `estimate` column).
    #[arg(long)]
    pub estimate: Option<usize>,
    /// Every train: the design the ladder asked for, the verdict recorded and replayed (with its
    /// reason), the knee, and the capacity the ladder knows after it.
    #[arg(long, short)]
    pub verbose: bool,
    /// The client's options as given to `probe-bench` (`--bmax`: the fixed range, one train
    /// per estimate, no ladder).
    #[command(flatten)]
    pub client: ClientChoice,
}

/// One line of the dump (`probe_bench::DUMP_HEADER`).
#[derive(Debug, Deserialize)]
struct DumpRow {
    cross_mbps: f64,
    method: String,
    estimate: usize,
    train: usize,
    role: String,
    verdict: String,
    value_mbps: Option<f64>,
    index: u32,
    size: u64,
    send_ns: u64,
    recv_ns: Option<u64>,
    late: u32,
    spacing_error_mean_ns: u64,
    spacing_error_max_ns: u64,
    round_trip_ns: u64,
}

/// One recorded train: as the client judged it.
#[derive(Debug)]
struct RecordedTrain {
    role: String,
    /// The recorded verdict's kind (`Outcome::kind`) and value (Mbit/s, 4 decimals).
    verdict: String,
    value: Option<f64>,
    records: Vec<ProbeRecord>,
    pacing: PacingReport,
}

/// One recorded PathQuick estimate: its trains in the order sent.
#[derive(Debug)]
struct RecordedEstimate {
    cross_mbps: f64,
    estimate: usize,
    round_trip: Dur,
    trains: Vec<RecordedTrain>,
}

/// What replaying one estimate gave.
#[derive(Debug, PartialEq)]
enum Replayed {
    /// The ladder asked for every recorded train, then answered with train `train`.
    Answer { train: usize, outcome: Outcome },
    /// The ladder asked, before recorded train `train`, for something else (`why`).
    Diverged { train: usize, why: String },
}

pub fn run(a: ProbeReplayArgs) -> Result<()> {
    let text = std::fs::read_to_string(&a.dump).with_context(|| format!("cannot read {}", a.dump.display()))?;
    let (estimates, chirps) =
        parse_dump(&text).with_context(|| format!("{} is not a probe-bench dump", a.dump.display()))?;
    let chosen: Vec<&RecordedEstimate> = estimates
        .iter()
        .filter(|e| a.level.is_none_or(|l| (e.cross_mbps - l).abs() < 1e-6))
        .filter(|e| a.estimate.is_none_or(|n| e.estimate == n))
        .collect();
    if chosen.is_empty() {
        bail!(
            "no PathQuick estimate in {} matches{}{} ({} in the dump)",
            a.dump.display(),
            a.level.map(|l| format!(" --level {l}")).unwrap_or_default(),
            a.estimate.map(|n| format!(" --estimate {n}")).unwrap_or_default(),
            estimates.len()
        );
    }
    let client = a.client;
    println!(
        "{}: {} PathQuick estimates replayed ({} pathChirp estimates left alone), {}",
        a.dump.display(),
        chosen.len(),
        chirps,
        match client.bmax {
            Some(b) => format!("the fixed range up to {:.3} Mbit/s", b.as_mbps()),
            None => "auto-ranging's ladder".to_string(),
        }
    );
    let (mut agree, mut differ, mut diverged) = (0, 0, 0);
    for e in chosen {
        let mut lines = Vec::new();
        let replayed = replay(e, &client, a.verbose.then_some(&mut lines))?;
        let last = e.trains.last().expect("an estimate has a train");
        let recorded = show(&last.verdict, last.value);
        let tag = match agreement(&replayed, e) {
            Agreement::Same => {
                agree += 1;
                "same"
            }
            Agreement::Differs => {
                differ += 1;
                "DIFFERS"
            }
            Agreement::Diverged => {
                diverged += 1;
                "DIVERGED"
            }
        };
        let replayed_text = match &replayed {
            Replayed::Answer { train, outcome } => format!("train {train}: {}", show_outcome(outcome)),
            Replayed::Diverged { train, why } => format!("before train {train}: {why}"),
        };
        println!(
            "cross {:>7.2} estimate {:>3}: {} trains, recorded {recorded}; replayed {replayed_text} [{tag}]",
            e.cross_mbps,
            e.estimate,
            e.trains.len()
        );
        for l in lines {
            println!("    {l}");
        }
    }
    println!("{agree} agree, {differ} differ, {diverged} diverged");
    Ok(())
}

/// How a replay compares with the recorded estimate.
#[derive(Debug, PartialEq, Eq)]
enum Agreement {
    /// The same trains, and the same answer from the last of them.
    Same,
    /// The same trains, another answer (or the answer from another train).
    Differs,
    /// The ladder asked for another train than the one recorded.
    Diverged,
}

fn agreement(r: &Replayed, e: &RecordedEstimate) -> Agreement {
    let last = e.trains.last().expect("an estimate has a train");
    match r {
        Replayed::Answer { train, outcome } => {
            if *train + 1 == e.trains.len() && same_verdict(outcome, &last.verdict, last.value) {
                Agreement::Same
            } else {
                Agreement::Differs
            }
        }
        Replayed::Diverged { .. } => Agreement::Diverged,
    }
}

/// The dump's PathQuick estimates, in the order recorded, and how many pathChirp estimates
/// it held besides.
fn parse_dump(text: &str) -> Result<(Vec<RecordedEstimate>, usize)> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    // A dump from before the replay existed has no pacing or round-trip columns.
    let header = reader.headers().context("line 1")?.clone();
    let since_replay = ["late", "spacing_error_mean_ns", "spacing_error_max_ns", "round_trip_ns"];
    if header.iter().any(|h| h == "send_ns") && !since_replay.iter().all(|c| header.iter().any(|h| h == *c)) {
        bail!(
            "line 1: no {} columns: the dump was written by a headroom older than probe-replay; \
             run `headroom probe-bench --dump` again",
            since_replay.join(", ")
        );
    }
    let mut estimates: Vec<RecordedEstimate> = Vec::new();
    let mut chirps: BTreeSet<(u64, usize)> = BTreeSet::new();
    for (line, row) in reader.deserialize::<DumpRow>().enumerate() {
        let row = row.with_context(|| format!("line {}", line + 2))?;
        let at = || format!("line {}", line + 2);
        let method = match row.method.as_str() {
            "pathquick" => Method::PathQuick,
            "pathchirp" => Method::PathChirp,
            m => bail!("{}: unknown method {m:?}", at()),
        };
        if method == Method::PathChirp {
            chirps.insert((row.cross_mbps.to_bits(), row.estimate));
            continue;
        }
        let record = ProbeRecord {
            index: row.index,
            send_time: Time(row.send_ns),
            recv_time: row.recv_ns.map(Time),
            size: Bytes(row.size),
        };
        let new_estimate =
            estimates.last().is_none_or(|e| e.cross_mbps != row.cross_mbps || e.estimate != row.estimate);
        if new_estimate {
            if row.train != 0 {
                bail!("{}: estimate {} begins with train {}, not 0", at(), row.estimate, row.train);
            }
            estimates.push(RecordedEstimate {
                cross_mbps: row.cross_mbps,
                estimate: row.estimate,
                round_trip: Dur(row.round_trip_ns),
                trains: Vec::new(),
            });
        }
        let e = estimates.last_mut().expect("pushed above");
        let trains = e.trains.len();
        if row.train == trains {
            if row.index != 0 {
                bail!(
                    "{}: train {} of estimate {} begins at packet {}, not 0",
                    at(),
                    row.train,
                    row.estimate,
                    row.index
                );
            }
            e.trains.push(RecordedTrain {
                role: row.role.clone(),
                verdict: row.verdict.clone(),
                value: row.value_mbps,
                records: Vec::new(),
                pacing: PacingReport {
                    late: row.late,
                    mean_error: Dur(row.spacing_error_mean_ns),
                    max_error: Dur(row.spacing_error_max_ns),
                },
            });
        } else if row.train + 1 != trains {
            bail!(
                "{}: train {} of estimate {} after train {}",
                at(),
                row.train,
                row.estimate,
                trains.saturating_sub(1)
            );
        }
        let t = e.trains.last_mut().expect("pushed above");
        if row.index as usize != t.records.len() {
            bail!(
                "{}: packet {} of train {} follows packet {}",
                at(),
                row.index,
                row.train,
                t.records.len() as i64 - 1
            );
        }
        t.records.push(record);
    }
    Ok((estimates, chirps.len()))
}

/// Replays `e` with the client's options; with `lines`, one line per train.
fn replay(e: &RecordedEstimate, client: &ClientChoice, mut lines: Option<&mut Vec<String>>) -> Result<Replayed> {
    let options = client.options(Method::PathQuick, None);
    let first = &e.trains[0].records;
    let smallest = first.iter().map(|r| r.size).min().unwrap_or(Bytes::ZERO);
    let v6 = smallest.0 == ip_udp_overhead(true) + PROBE_HEADER_LEN as u64;
    let mut say = |s: String| {
        if let Some(l) = lines.as_deref_mut() {
            l.push(s);
        }
    };
    if !options.auto_range {
        let train = design_for(&options, v6)?;
        let TrainDesign::PathQuick(design) = train else {
            bail!("--bmax designs a PathQuick train");
        };
        if e.trains.len() != 1 {
            return Ok(Replayed::Diverged {
                train: 1,
                why: format!("a fixed range sends one train, the dump has {}", e.trains.len()),
            });
        }
        if let Some(why) = mismatch(&design, &e.trains[0].records) {
            return Ok(Replayed::Diverged { train: 0, why });
        }
        let t = &e.trains[0];
        let estimate = judge_records(&design.schedule(), &t.records, Some(t.pacing), &options.estimator);
        say(train_line(0, &design, t, &estimate.outcome, estimate.knee, None));
        // Re-read from its own gaps, as the client answers a fixed-range train.
        let outcome = reread(&options, &train, &estimate, &t.records, None).unwrap_or(estimate.outcome);
        return Ok(Replayed::Answer { train: 0, outcome });
    }
    let largest = options.max_size;
    let plan = auto_range_plan(&options, DEFAULT_TOP, smallest, largest);
    let mut ladder = Ladder::from_plan(plan, options.estimator.max_loss_fraction).with_round_trip(e.round_trip);
    let mut step = ladder.first()?;
    for (k, t) in e.trains.iter().enumerate() {
        let (design, burst) = match step {
            LadderStep::Answer(i) => {
                return Ok(Replayed::Diverged { train: k, why: format!("the ladder answered with train {i}") })
            }
            LadderStep::Train { design, burst, .. } => (design, burst),
        };
        // A train asked with a capacity burst was recorded with it, after the train's packets
        // (a dump from before the burst has none: the ladder reads the capacity from the train).
        let (records, burst_records) = if burst > 0 {
            t.records.split_at(t.records.len().min(design.n as usize))
        } else {
            (&t.records[..], &[][..])
        };
        if let Some(why) = mismatch(&design, records) {
            return Ok(Replayed::Diverged { train: k, why });
        }
        let estimate = judge_records(&design.schedule(), records, Some(t.pacing), &options.estimator);
        ladder.on_burst(burst_records);
        step = ladder.on_verdict(&design, &estimate, records)?;
        say(train_line(k, &design, t, &estimate.outcome, estimate.knee, ladder.capacity()));
        if let LadderStep::Answer(i) = step {
            let outcome = ladder.refined().cloned().unwrap_or(estimate.outcome);
            if k + 1 < e.trains.len() {
                say(format!("the ladder answers after train {k}; the dump has {} more", e.trains.len() - k - 1));
            }
            return Ok(Replayed::Answer { train: i, outcome });
        }
    }
    let LadderStep::Train { design, .. } = step else { unreachable!("answers return above") };
    Ok(Replayed::Diverged {
        train: e.trains.len(),
        why: format!("the ladder asks for one more train ({})", describe(&design)),
    })
}

/// Why the recorded `records` are not a train of `design` (`None`: they are).
fn mismatch(design: &QuickDesign, records: &[ProbeRecord]) -> Option<String> {
    let schedule = design.schedule();
    if records.len() > schedule.len() {
        return Some(format!("{} recorded packets, the ladder's train has {}", records.len(), schedule.len()));
    }
    let differs = records.iter().zip(&schedule).position(|(r, p)| r.size != p.size);
    differs.map(|i| {
        format!(
            "packet {i} is {} B in the dump, {} B in the ladder's train ({})",
            records[i].size.0,
            schedule[i].size.0,
            describe(design)
        )
    })
}

fn describe(d: &QuickDesign) -> String {
    format!(
        "{} packets, {:.2}-{:.2} Mbit/s, {:.1} ms",
        d.n,
        d.b_min().as_mbps(),
        d.b_max().as_mbps(),
        d.train_length().as_secs_f64() * 1e3
    )
}

fn train_line(
    k: usize,
    design: &QuickDesign,
    t: &RecordedTrain,
    replayed: &Outcome,
    knee: Option<u32>,
    capacity: Option<Rate>,
) -> String {
    let received = t.records.iter().filter(|r| r.recv_time.is_some()).count();
    format!(
        "train {k} {} [{}], {} of {} judged, {received} received: recorded {}; judged again {replayed}, knee {}; capacity {}",
        t.role,
        describe(design),
        t.records.len(),
        design.n,
        show(&t.verdict, t.value),
        knee.map_or("-".to_string(), |k| k.to_string()),
        capacity.map_or("unknown".to_string(), |c| format!("{:.2} Mbit/s", c.as_mbps()))
    )
}

fn show(kind: &str, value: Option<f64>) -> String {
    match value {
        Some(v) => format!("{kind} {v:.4}"),
        None => kind.to_string(),
    }
}

fn show_outcome(o: &Outcome) -> String {
    show(o.kind(), o.value().map(|v| v.as_mbps()))
}

/// Does `o` read as the dump's `kind` and `value` (written with 4 decimals of Mbit/s)?
fn same_verdict(o: &Outcome, kind: &str, value: Option<f64>) -> bool {
    let mine = o.value().map(|v| format!("{:.4}", v.as_mbps()));
    o.kind() == kind && mine == value.map(|v| format!("{v:.4}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = crate::probe_bench::DUMP_HEADER;

    fn line(estimate: usize, train: usize, index: u32, size: u64, recv: &str) -> String {
        format!(
            "6,pathquick,{estimate},{train},coarse,estimate,5.0000,3,{index},{size},{},{recv},0,100,200,20000000\n",
            index as u64 * 1000
        )
    }

    #[test]
    fn a_dump_is_read_into_estimates_trains_and_records() {
        let mut text = HEADER.to_string();
        for i in 0..3 {
            text += &line(0, 0, i, 48 + 12 * i as u64, &(1_000_000 + i as u64 * 2000).to_string());
        }
        text += &line(0, 1, 0, 48, "");
        text += "6,pathchirp,0,0,answer,estimate,5.0000,3,0,48,0,1,0,0,0,20000000\n";
        let (estimates, chirps) = parse_dump(&text).unwrap();
        assert_eq!((estimates.len(), chirps), (1, 1));
        let e = &estimates[0];
        assert_eq!((e.trains.len(), e.round_trip), (2, Dur::from_millis(20)));
        assert_eq!(e.trains[0].records.len(), 3);
        assert_eq!(e.trains[0].records[2].size, Bytes(72));
        assert_eq!(e.trains[0].records[2].recv_time, Some(Time(1_004_000)));
        assert_eq!(e.trains[1].records[0].recv_time, None, "an empty receive time is a lost packet");
        assert_eq!(e.trains[0].pacing, PacingReport { late: 0, mean_error: Dur(100), max_error: Dur(200) });
    }

    /// The dump of one auto-ranged estimate on an idle FIFO of `c` bit/s, as the client would
    /// write it: each train the ladder asks for, its packets through the FIFO (a receive time
    /// for every packet), judged and fed back.
    fn idle_fifo_dump(c: f64) -> String {
        let options = ClientChoice::default().options(Method::PathQuick, None);
        let plan = auto_range_plan(&options, DEFAULT_TOP, Bytes(48), Bytes(1500));
        let rtt = Dur::from_millis(20);
        let mut ladder = Ladder::from_plan(plan, options.estimator.max_loss_fraction).with_round_trip(rtt);
        let mut step = ladder.first().unwrap();
        let mut trains: Vec<(Vec<ProbeRecord>, Outcome)> = Vec::new();
        while let LadderStep::Train { design, .. } = step {
            let mut free = 0.0f64;
            let records: Vec<ProbeRecord> = design
                .schedule()
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    free = free.max(p.offset.0 as f64) + p.size.0 as f64 * 8.0 / c * 1e9;
                    ProbeRecord {
                        index: i as u32,
                        send_time: Time(p.offset.0),
                        recv_time: Some(Time(5_000_000 + free.round() as u64)),
                        size: p.size,
                    }
                })
                .collect();
            let estimate = judge_records(&design.schedule(), &records, None, &options.estimator);
            step = ladder.on_verdict(&design, &estimate, &records).unwrap();
            trains.push((records, estimate.outcome));
        }
        let LadderStep::Answer(answer) = step else { unreachable!() };
        if let Some(refined) = ladder.refined() {
            trains[answer].1 = refined.clone();
        }
        let mut text = HEADER.to_string();
        for (k, (records, outcome)) in trains.iter().enumerate() {
            let role = if k == answer { "answer" } else { "coarse" };
            let value = outcome.value().map(|v| format!("{:.4}", v.as_mbps())).unwrap_or_default();
            for r in records {
                text += &format!(
                    "0,pathquick,0,{k},{role},{},{value},,{},{},{},{},0,0,0,{}\n",
                    outcome.kind(),
                    r.index,
                    r.size.0,
                    r.send_time.0,
                    r.recv_time.unwrap().0,
                    rtt.0
                );
            }
        }
        text
    }

    /// `text` with `change` applied to every packet line's fields.
    fn edit(text: &str, change: impl Fn(&mut Vec<String>)) -> String {
        let mut lines = text.lines();
        let mut out = format!("{}\n", lines.next().unwrap());
        for l in lines {
            let mut f: Vec<String> = l.split(',').map(str::to_string).collect();
            change(&mut f);
            out += &(f.join(",") + "\n");
        }
        out
    }

    fn replayed(text: &str) -> (Replayed, RecordedEstimate) {
        let (mut estimates, _) = parse_dump(text).unwrap();
        let e = estimates.remove(0);
        (replay(&e, &ClientChoice::default(), None).unwrap(), e)
    }

    #[test]
    fn a_recorded_estimate_replays_to_its_answer_and_a_changed_one_does_not() {
        let text = idle_fifo_dump(10e6);
        let (r, e) = replayed(&text);
        assert!(e.trains.len() >= 2, "a coarse train and a fine one: {text}");
        assert_eq!(agreement(&r, &e), Agreement::Same, "{r:?} against {:?}", e.trains.last());
        let Replayed::Answer { outcome, .. } = &r else { unreachable!() };
        let a = outcome.value().unwrap().as_mbps();
        assert!((a - 10.0).abs() < 1.0, "the idle 10 Mbit/s FIFO reads {a}");

        // The answer's train received at half the pace: judged again, it reads otherwise.
        let answer = e.trains.len() - 1;
        let slow = edit(&text, |f| {
            if f[3] == answer.to_string() {
                let recv: u64 = f[11].parse().unwrap();
                f[11] = (5_000_000 + 2 * (recv - 5_000_000)).to_string();
            }
        });
        let (r, e) = replayed(&slow);
        assert_ne!(agreement(&r, &e), Agreement::Same, "{r:?}");

        // A packet of the first train recorded with another size: not the ladder's train.
        let resized = edit(&text, |f| {
            if f[3] == "0" && f[8] == "5" {
                f[9] = (f[9].parse::<u64>().unwrap() + 1).to_string();
            }
        });
        assert_ne!(resized, text);
        let (r, _) = replayed(&resized);
        assert!(matches!(&r, Replayed::Diverged { train: 0, why } if why.starts_with("packet 5 ")), "{r:?}");

        // The answer's train missing: the ladder asks for it.
        let cut: String = text
            .lines()
            .filter(|l| l.split(',').nth(3) != Some(&answer.to_string()))
            .map(|l| l.to_string() + "\n")
            .collect();
        let (r, e) = replayed(&cut);
        assert!(matches!(&r, Replayed::Diverged { why, .. } if why.contains("one more train")), "{r:?}");
        assert_eq!(agreement(&r, &e), Agreement::Diverged);
    }

    #[test]
    fn a_malformed_dump_is_an_error_that_says_where() {
        let bad = [
            (format!("{HEADER}6,pathquick,0,0,coarse,estimate,x,3,0,48,0,1,0,0,0,0\n"), "line 2"),
            (format!("{HEADER}{}", line(0, 1, 0, 48, "1")), "begins with train 1"),
            (
                format!("{HEADER}{}{}", line(0, 0, 0, 48, "1"), line(0, 0, 2, 48, "1")),
                "packet 2 of train 0 follows packet 0",
            ),
            (format!("{HEADER}{}", line(0, 0, 0, 48, "1").replace("pathquick", "pathload")), "unknown method"),
            ("cross_mbps,method\n6,pathquick\n".to_string(), "line 2"),
            // Session 14's dump: no pacing columns.
            (
                "cross_mbps,method,estimate,train,role,verdict,value_mbps,knee,index,size,send_ns,recv_ns\n\
                 6,pathquick,0,0,coarse,estimate,5.0,3,0,48,0,1\n"
                    .to_string(),
                "run `headroom probe-bench --dump` again",
            ),
        ];
        for (text, says) in bad {
            let err = format!("{:#}", parse_dump(&text).unwrap_err());
            assert!(err.contains(says), "{err:?} should say {says:?}");
        }
    }
}
