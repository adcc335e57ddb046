//! ImTCP's full-speed mode (issue 13; Man, Hasegawa & Murata, seed 001 §5.2): Fig. 15, the
//! window of full-speed ImTCP, HighSpeed TCP and Reno on a 500 Mbit/s path, and Fig. 16,
//! throughput through a lossy 2 Mbit/s hop against the loss rate for full-speed ImTCP (h = 100),
//! Westwood+ and Reno. The paper gives neither figure's numbers, only their claims; the
//! scenario files say what it leaves open and what headroom chose. Every claim line is
//! computed from the runs.
//!
//! Reno here is NewReno without SACK (the paper's ns-2 "Reno" is the simulator's `reno`, whose
//! recovery ends at the first partial ACK; full-speed ImTCP and HighSpeed are built on NewReno's
//! recovery in headroom, so NewReno is the like-for-like baseline). Runs go on rayon's pool;
//! each is a function of its scenario alone, so the output does not depend on the threads.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use headroom_core::stats;
use headroom_sim::scenario::CcKind;
use headroom_sim::world::Metric;
use headroom_sim::Scenario;

use super::{holds, only, par_map, run_world, series_of, Base, Experiment};
use crate::plot::{Chart, Series};

pub const EXPERIMENTS: &[Experiment] = &[
    Experiment { name: "imtcp-fig15", about: "ImTCP Fig. 15: window over time of full-speed ImTCP, HighSpeed TCP and Reno alone on a 500 Mbit/s, 100 ms path", scenarios: &["scenarios/imtcp/fig15.toml"], run: fig15 },
    Experiment { name: "imtcp-fig16", about: "ImTCP Fig. 16: throughput through a lossy 2 Mbit/s hop against the loss rate, full-speed ImTCP (h = 100), Westwood+, Reno", scenarios: &["scenarios/imtcp/fig16.toml"], run: fig16 },
];

const FIG15: &str = include_str!("../../../../scenarios/imtcp/fig15.toml");
const FIG16: &str = include_str!("../../../../scenarios/imtcp/fig16.toml");

/// The controllers a figure compares: its label and the `cc` of the file's one `[[tcp]]`.
struct Contender {
    label: &'static str,
    cc: CcKind,
}

fn contenders(peer_label: &'static str, peer: CcKind) -> [Contender; 3] {
    [
        Contender {
            label: "imtcp full-speed",
            cc: CcKind::ImtcpFullSpeed { h: headroom_core::cc::imtcp_fullspeed::DEFAULT_H },
        },
        Contender { label: peer_label, cc: peer },
        Contender { label: "reno", cc: CcKind::NewReno },
    ]
}

/// The file with its one flow running `cc`; ImTCP's buffer (the `imtcp` table) only where the
/// controller reads the measurement, so HighSpeed, Westwood+ and Reno send as they would alone.
fn with_controller(base: &Base, cc: CcKind, edit: impl FnOnce(&mut Scenario)) -> Result<Scenario> {
    base.edited(|sc| {
        let tcp = only(&mut sc.tcp, "tcp")?;
        if !cc.needs_inline_measurement() {
            tcp.imtcp = None;
        }
        tcp.cc = cc;
        edit(sc);
        Ok(())
    })
}

/// What Fig. 15 takes from one run.
struct WindowRun {
    cwnd: Vec<(f64, f64)>,
    throughput: Vec<(f64, f64)>,
    mbps: f64,
    drops: u64,
    timeouts: u64,
}

fn fig15(dir: &Path) -> Result<String> {
    let base = Base::load(FIG15, "scenarios/imtcp/fig15.toml")?;
    let who = contenders("highspeed", CcKind::HighSpeed);
    let scs: Vec<Scenario> = who.iter().map(|c| with_controller(&base, c.cc, |_| ())).collect::<Result<_>>()?;
    let mut results = par_map(&scs, |sc| {
        let (w, r) = run_world(sc)?;
        let f = &r.flows[0];
        Ok(WindowRun {
            cwnd: series_of(&w, "tcp", Metric::CwndBytes, 1.0 / 1500.0),
            throughput: series_of(&w, "tcp", Metric::ThroughputBps, 1e-6),
            mbps: f.throughput_mbps,
            drops: f.drops,
            timeouts: f.timeouts,
        })
    })?;
    let runs: Vec<WindowRun> = (0..who.len()).map(|_| results.take()).collect::<Result<_>>()?;
    let link_mbps = 500.0;
    let bdp_segments = 500e6 * 0.1 / 8.0 / 1500.0;
    let mut csv = String::from("controller,time_s,cwnd_segments,throughput_mbps\n");
    // The table as CSV (the report's verdicts read it).
    let mut table = String::from("controller,throughput_mbps,drops,timeouts,max_cwnd_segments,fill_time_s\n");
    let mut s = String::from(
        "ImTCP Fig. 15: one flow alone, 500 Mbit/s bottleneck, 100 ms RTT, 1000-packet buffer, 120 s, seed 1\n",
    );
    let _ = writeln!(s, "(BDP {bdp_segments:.0} segments of 1500 B; Reno = NewReno without SACK)");
    let _ = writeln!(
        s,
        "{:<18} {:>8} {:>8} {:>8} {:>10} {:>14}",
        "controller", "Mbit/s", "drops", "RTOs", "max cwnd", "first >=90 %"
    );
    // The first trace interval at which the flow carries 90 % of the link: how long it takes to
    // fill the path.
    let fill_time =
        |r: &WindowRun| r.throughput.iter().find(|p| p.1 >= 0.9 * link_mbps).map(|p| p.0).unwrap_or(f64::INFINITY);
    for (c, r) in who.iter().zip(&runs) {
        let max_cwnd = r.cwnd.iter().map(|p| p.1).fold(0.0, f64::max);
        let _ = writeln!(
            s,
            "{:<18} {:>8.1} {:>8} {:>8} {:>10.0} {:>14}",
            c.label,
            r.mbps,
            r.drops,
            r.timeouts,
            max_cwnd,
            seconds(fill_time(r))
        );
        let fill = fill_time(r);
        let fill = if fill.is_finite() { format!("{fill:.1}") } else { String::new() };
        let _ = writeln!(table, "{},{:.3},{},{},{max_cwnd:.0},{fill}", c.label, r.mbps, r.drops, r.timeouts);
        for ((t, w), (_, x)) in r.cwnd.iter().zip(&r.throughput) {
            let _ = writeln!(csv, "{},{t:.1},{w:.1},{x:.3}", c.label);
        }
    }
    std::fs::write(dir.join("fig15.csv"), csv)?;
    std::fs::write(dir.join("runs.csv"), table)?;
    let chart = Chart {
        title: "ImTCP Fig. 15: window over time, 500 Mbit/s, 100 ms".into(),
        x_label: "time (s)".into(),
        y_label: "congestion window (segments)".into(),
        series: who.iter().zip(&runs).map(|(c, r)| Series::line(c.label, r.cwnd.clone())).collect(),
        ..Default::default()
    };
    std::fs::write(dir.join("fig15.svg"), chart.to_svg())?;
    let (full, hs, reno) = (&runs[0], &runs[1], &runs[2]);
    let _ = writeln!(s, "paper: Reno needs a long time to reach a large window; HSTCP grows fast but loses often,");
    let _ = writeln!(s, "       so its throughput is lower than expected; full-speed ImTCP's throughput is the best");
    let _ = writeln!(s, "claims:");
    let _ = writeln!(
        s,
        "  full-speed ImTCP's throughput above HSTCP's and Reno's ({:.1} vs {:.1} and {:.1} Mbit/s): {}",
        full.mbps,
        hs.mbps,
        reno.mbps,
        holds(full.mbps > hs.mbps && full.mbps > reno.mbps)
    );
    let _ = writeln!(
        s,
        "  Reno fills the path last (90 % of the link first reached: Reno {}, HSTCP {}, full-speed {}): {}",
        seconds(fill_time(reno)),
        seconds(fill_time(hs)),
        seconds(fill_time(full)),
        holds(fill_time(reno) > fill_time(hs) && fill_time(reno) > fill_time(full))
    );
    let _ = writeln!(
        s,
        "  HSTCP loses more packets than full-speed ImTCP ({} vs {} drops): {}",
        hs.drops,
        full.drops,
        holds(hs.drops > full.drops)
    );
    Ok(s)
}

fn seconds(t: f64) -> String {
    if t.is_finite() {
        format!("{t:.1} s")
    } else {
        "never".to_string()
    }
}

/// Fig. 16's loss rates (fraction of the data packets the 2 Mbit/s hop drops at random).
const LOSS_RATES: [f64; 8] = [0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1];
/// Seeds per point (the random loss and nothing else differs between them).
const SEEDS: [u64; 5] = [1, 2, 3, 4, 5];

fn fig16(dir: &Path) -> Result<String> {
    let base = Base::load(FIG16, "scenarios/imtcp/fig16.toml")?;
    let who = contenders("westwood+", CcKind::WestwoodPlus);
    let mut scs = Vec::new();
    for c in &who {
        for &loss in &LOSS_RATES {
            for &seed in &SEEDS {
                scs.push(with_controller(&base, c.cc, |sc| {
                    sc.seed = seed;
                    for l in sc.links.iter_mut().filter(|l| l.loss > 0.0) {
                        l.loss = loss;
                    }
                })?);
            }
        }
    }
    let mut results = par_map(&scs, |sc| Ok(run_world(sc)?.1.flows[0].throughput_mbps))?;
    // mean[c][l]: the mean over seeds (each seed's value is in the CSV).
    let mut mean = vec![vec![0.0; LOSS_RATES.len()]; who.len()];
    // spread[c]: (loss rate in %, lowest seed's, highest seed's) per loss rate.
    let mut spread = vec![Vec::new(); who.len()];
    let mut csv = String::from("controller,loss_rate,seed,throughput_mbps\n");
    for (ci, c) in who.iter().enumerate() {
        for (li, &loss) in LOSS_RATES.iter().enumerate() {
            let mut v = Vec::new();
            for &seed in &SEEDS {
                let x = results.take()?;
                let _ = writeln!(csv, "{},{loss},{seed},{x:.4}", c.label);
                v.push(x);
            }
            mean[ci][li] = stats::mean(&v).unwrap_or(f64::NAN);
            let (lo, hi) = v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(*x), b.max(*x)));
            spread[ci].push((100.0 * loss, lo, hi));
        }
    }
    std::fs::write(dir.join("fig16.csv"), csv)?;
    let mut s = String::from(
        "ImTCP Fig. 16: one flow, 2 Mbit/s lossy hop, 100 ms RTT, 50-packet buffer, 200 s, h = 100, ImTCP N = 5\n",
    );
    let _ = writeln!(s, "(Mbit/s, mean over seeds {}-{}; each seed in fig16.csv)", SEEDS[0], SEEDS[SEEDS.len() - 1]);
    let _ = write!(s, "{:<18}", "loss rate");
    for loss in LOSS_RATES {
        let _ = write!(s, " {:>7}", format!("{}%", loss * 100.0));
    }
    let _ = writeln!(s);
    for (c, m) in who.iter().zip(&mean) {
        let _ = write!(s, "{:<18}", c.label);
        for x in m {
            let _ = write!(s, " {x:>7.3}");
        }
        let _ = writeln!(s);
    }
    let chart = Chart {
        title: "ImTCP Fig. 16: throughput through a lossy 2 Mbit/s hop".into(),
        x_label: "packet loss rate (%)".into(),
        y_label: "throughput (Mbit/s)".into(),
        series: who
            .iter()
            .zip(&mean)
            .map(|(c, m)| {
                let label = format!("{}: mean of {} seeds", c.label, SEEDS.len());
                Series::line(label, LOSS_RATES.iter().zip(m).map(|(l, x)| (100.0 * l, *x)).collect())
            })
            .chain(
                who.iter()
                    .zip(&spread)
                    .enumerate()
                    .map(|(k, (c, b))| Series::band(format!("{}: min-max of the seeds", c.label), b).colour(k)),
            )
            .collect(),
        y_range: Some((0.0, 2.0)),
        ..Default::default()
    };
    std::fs::write(dir.join("fig16.svg"), chart.to_svg())?;
    // "When the loss rate is high": from which loss rate on full-speed beats both at every
    // higher rate of the sweep.
    let beats = |li: usize| mean[0][li] > mean[1][li] && mean[0][li] > mean[2][li];
    let from = (0..LOSS_RATES.len()).rev().take_while(|&li| beats(li)).last();
    let top = LOSS_RATES.len() - 1;
    let _ =
        writeln!(s, "paper: full-speed ImTCP (h = 100) gets more than Westwood and Reno when the loss rate is high");
    let _ = writeln!(s, "claims:");
    let _ = writeln!(
        s,
        "  at the highest loss rate ({}%) full-speed above Westwood+ and Reno ({:.3} vs {:.3} and {:.3}): {}",
        LOSS_RATES[top] * 100.0,
        mean[0][top],
        mean[1][top],
        mean[2][top],
        holds(beats(top))
    );
    match from {
        Some(li) => {
            let _ = writeln!(s, "  full-speed above both at every loss rate from {}% up", LOSS_RATES[li] * 100.0);
        }
        None => {
            let _ = writeln!(s, "  full-speed is not above both at the highest loss rate");
        }
    }
    let lossless = (mean[0][0] - mean[2][0]).abs() / mean[2][0].max(f64::MIN_POSITIVE);
    let _ = writeln!(
        s,
        "  without loss full-speed within 5 % of Reno ({:.3} vs {:.3} Mbit/s): {}",
        mean[0][0],
        mean[2][0],
        holds(lossless <= 0.05)
    );
    Ok(s)
}
