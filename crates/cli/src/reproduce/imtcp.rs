//! The ImTCP paper's experiments (Man, Hasegawa & Murata, Computer Communications 2005, §4):
//! Fig. 8, Tables 1-3, Fig. 10, §4.3 (Fig. 11) and Fig. 13, rerun in the simulator. Each
//! writes a CSV and an SVG and returns the paper's figures next to ours.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{bail, Context, Result};
use headroom_core::stats::{self, Sorted};
use headroom_core::units::{Dur, Rate};
use headroom_sim::probe::{EstimateMethod, Verdict};
use headroom_sim::scenario::{CcKind, ImtcpSpec};
use headroom_sim::tcp::HEADER;
use headroom_sim::traffic::UdpPattern;
use headroom_sim::world::FlowKind;
use headroom_sim::{Report, Scenario, World};

use super::{only, par_map, run_scenario, run_world, Base, Experiment};
use crate::plot::{cdf_points, panels_svg, Chart, Series};

pub const EXPERIMENTS: &[Experiment] = &[
    Experiment { name: "imtcp-fig8", about: "ImTCP Fig. 8: echo mode, N = 3, 5, 35, available bandwidth 60-40-60-20-60 Mb/s over 300 s", scenarios: &["scenarios/imtcp/fig8.toml"], run: imtcp_fig8 },
    Experiment { name: "imtcp-table1", about: "ImTCP Table 1: measurement results in 80 s at 3 Mb/s available, N = 5, 6, 17, fixed or adaptive m", scenarios: &["scenarios/imtcp/table1.toml"], run: imtcp_table1 },
    Experiment { name: "imtcp-table2", about: "ImTCP Table 2 and Fig. 9: measurement results in 80 s at 4 and 7 Mb/s available and the CDF of the first stream packet's waiting time, storing timer 40/10/4 ms or adaptive", scenarios: &["scenarios/imtcp/table2.toml"], run: imtcp_table2 },
    Experiment { name: "imtcp-fig10", about: "ImTCP Fig. 10: ImTCP vs Westwood, Hoe and TCP-Rab under cross traffic 1/2/3", scenarios: &["scenarios/imtcp/fig10.toml"], run: imtcp_fig10 },
    Experiment { name: "imtcp-web", about: "ImTCP §4.3 / Fig. 11: ImTCP or Reno with Pareto web traffic on 50 Mb/s, throughput and page download times", scenarios: &["scenarios/imtcp/web.toml"], run: imtcp_web },
    Experiment { name: "imtcp-table3", about: "ImTCP Table 3: 2/10/24 ImTCP or Reno flows on 50/60/70 Mb/s, Jain index and total throughput", scenarios: &["scenarios/imtcp/table3.toml"], run: imtcp_table3 },
    Experiment { name: "imtcp-fig13", about: "ImTCP Fig. 13: ImTCP/Reno throughput ratio vs measurement interval 0, 12, 15, 20 RTTs", scenarios: &["scenarios/imtcp/fig13.toml"], run: imtcp_fig13 },
];

const FIG8: &str = include_str!("../../../../scenarios/imtcp/fig8.toml");
const TABLE1: &str = include_str!("../../../../scenarios/imtcp/table1.toml");
const TABLE2: &str = include_str!("../../../../scenarios/imtcp/table2.toml");
const FIG10: &str = include_str!("../../../../scenarios/imtcp/fig10.toml");
const WEB: &str = include_str!("../../../../scenarios/imtcp/web.toml");
const TABLE3: &str = include_str!("../../../../scenarios/imtcp/table3.toml");
const FIG13: &str = include_str!("../../../../scenarios/imtcp/fig13.toml");

/// The ImTCP settings of the file's single `[[tcp]]` entry.
fn imtcp_of(sc: &mut Scenario) -> Result<&mut ImtcpSpec> {
    only(&mut sc.tcp, "tcp")?.imtcp.as_mut().context("the [[tcp]] entry has no `imtcp` settings")
}

/// The rate of the file's single `[[udp]]` cross-traffic source (Poisson).
fn poisson_rate(sc: &mut Scenario) -> Result<&mut Rate> {
    match &mut only(&mut sc.udp, "udp")?.pattern {
        UdpPattern::Poisson { rate } => Ok(rate),
        other => bail!("expected Poisson cross traffic, found {other:?}"),
    }
}

/// (time s, Mb/s, in range) of every estimate of `method`.
fn estimates_of(w: &World, method: &str) -> Vec<(f64, f64, bool)> {
    w.estimates
        .iter()
        .filter(|e| e.method.name() == method)
        .filter_map(|e| e.value.map(|v| (e.time.as_secs_f64(), v.0 as f64 / 1e6, e.verdict == Verdict::Estimate)))
        .collect()
}

/// [`stats::mean`], NaN (printed as such) for no values.
fn mean(v: &[f64]) -> f64 {
    stats::mean(v).unwrap_or(f64::NAN)
}

/// Fig. 8's and Fig. 10's available bandwidth (Mb/s) at `t` seconds.
fn available_fig8(t: f64) -> f64 {
    match t {
        t if t < 50.0 => 60.0,
        t if t < 100.0 => 40.0,
        t if t < 150.0 => 60.0,
        t if t < 210.0 => 20.0,
        _ => 60.0,
    }
}

const PHASES: [(f64, f64); 5] = [(0.0, 50.0), (50.0, 100.0), (100.0, 150.0), (150.0, 210.0), (210.0, 300.0)];

fn available_series(end: f64) -> Vec<(f64, f64)> {
    let mut pts = Vec::new();
    for (a, b) in PHASES {
        if a >= end {
            break;
        }
        pts.push((a, available_fig8(a)));
        pts.push((b.min(end), available_fig8(a)));
    }
    pts
}

fn imtcp_fig8(dir: &Path) -> Result<String> {
    let base = Base::load(FIG8, "scenarios/imtcp/fig8.toml")?;
    let ns = [3usize, 5, 35];
    let mut runs = Vec::new();
    let mut csv = String::from("n,time_s,estimate_mbps,in_range,available_mbps\n");
    let scs = ns
        .iter()
        .map(|&n| {
            base.edited(|sc| {
                only(&mut sc.probe, "probe")?.stream_len = Some(n);
                Ok(())
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut results = par_map(&scs, |sc| Ok(estimates_of(&run_world(sc)?.0, "imtcp-echo")))?;
    for n in ns {
        let est = results.take()?;
        for e in &est {
            let _ = writeln!(csv, "{n},{:.6},{:.3},{},{}", e.0, e.1, e.2, available_fig8(e.0));
        }
        runs.push((n, est));
    }
    std::fs::write(dir.join("fig8.csv"), csv)?;
    // One panel per N, as in the paper.
    let panels: Vec<Chart> = runs
        .iter()
        .zip(["(a)", "(b)", "(c)"])
        .map(|((n, est), tag)| Chart {
            title: format!("{tag} N = {n}"),
            x_label: "time (s)".into(),
            y_label: "available bandwidth (Mb/s)".into(),
            series: vec![
                Series::line("available bandwidth (truth)", available_series(300.0)),
                Series::points(format!("ImTCP estimate, N = {n}"), est.iter().map(|e| (e.0, e.1)).collect()),
            ],
            y_range: Some((0.0, 100.0)),
            ..Default::default()
        })
        .collect();
    std::fs::write(
        dir.join("fig8.svg"),
        panels_svg("ImTCP Fig. 8: echo-mode estimates, 100 Mb/s bottleneck", &panels),
    )?;

    let mut s = String::new();
    let _ = writeln!(s, "mean estimate per phase (Mb/s; first 5 s of each phase left out)");
    let _ = writeln!(s, "{:<12} {:>16} {:>9} {:>9} {:>9}", "phase (s)", "paper: available", "N = 3", "N = 5", "N = 35");
    for (a, b) in PHASES {
        let _ = write!(s, "{:<12} {:>16}", format!("{a:.0}-{b:.0}"), available_fig8(a));
        for (_, est) in &runs {
            let v: Vec<f64> = est.iter().filter(|e| e.0 > a + 5.0 && e.0 <= b).map(|e| e.1).collect();
            let _ = write!(s, " {:>9.1}", mean(&v));
        }
        s.push('\n');
    }
    let _ = write!(s, "{:<12} {:>16}", "mean |err|", "");
    for (_, est) in &runs {
        let v: Vec<f64> = est.iter().map(|e| (e.1 - available_fig8(e.0)).abs() / available_fig8(e.0)).collect();
        let _ = write!(s, " {:>8.1}%", 100.0 * mean(&v));
    }
    s.push('\n');
    let _ = write!(s, "{:<12} {:>16}", "results", "");
    for (_, est) in &runs {
        let _ = write!(s, " {:>9}", est.len());
    }
    s.push('\n');
    let _ = writeln!(s, "paper: N = 3 far from the available bandwidth; N >= 5 accurate (N = 35 the default)");
    Ok(s)
}

/// Number of ImTCP results of one run of `src`.
fn count_results(sc: &Scenario) -> Result<(usize, f64)> {
    let (w, r) = run_world(sc)?;
    Ok((w.estimates.iter().filter(|e| e.method == EstimateMethod::Imtcp).count(), r.flows[0].throughput_mbps))
}

fn imtcp_table1(dir: &Path) -> Result<String> {
    let base = Base::load(TABLE1, "scenarios/imtcp/table1.toml")?;
    // N and a fixed m (None: the adaptive rule) set on the file's ImTCP flow.
    let with_n_m = |n: usize, m: Option<usize>| {
        base.edited(|sc| {
            let spec = imtcp_of(sc)?;
            spec.stream_len = Some(n);
            spec.m = m;
            Ok(())
        })
    };
    // (N, paper's counts for m = 2..=7 where defined, paper's "Pro.")
    let paper: [(usize, &[u32], u32); 3] = [
        (5, &[387, 441, 424, 389], 424),
        (6, &[200, 216, 406, 392, 370], 394),
        (17, &[77, 173, 277, 279, 348, 349], 359),
    ];
    let mut csv = String::from("n,m,results,paper_results,throughput_mbps\n");
    let mut s = String::new();
    let _ = writeln!(s, "measurement results in 80 s, 3 Mb/s available: paper / headroom");
    let _ = writeln!(
        s,
        "{:<6} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}",
        "", "m = 2", "m = 3", "m = 4", "m = 5", "m = 6", "m = 7", "Pro."
    );
    let mut scs = Vec::new();
    for (n, _, _) in paper {
        for m in (2..=n.min(7)).map(Some).chain([None]) {
            scs.push(with_n_m(n, m)?);
        }
    }
    let mut results = par_map(&scs, count_results)?;
    let mut series = Vec::new();
    // Categories 0..=5: m = 2..=7; 6: the adaptive m ("Pro.").
    for (k, (n, counts, pro)) in paper.into_iter().enumerate() {
        let _ = write!(s, "{:<6}", format!("N={n}"));
        let (mut pts, mut paper_pts) = (Vec::new(), Vec::new());
        for m in 2..=7usize {
            if m > n {
                let _ = write!(s, " {:>11}", "-");
                continue;
            }
            let (c, tput) = results.take()?;
            let p = counts[m - 2];
            let _ = writeln!(csv, "{n},{m},{c},{p},{tput:.3}");
            let _ = write!(s, " {:>11}", format!("{p} / {c}"));
            pts.push(((m - 2) as f64, c as f64));
            paper_pts.push(((m - 2) as f64, p as f64));
        }
        let (c, tput) = results.take()?;
        let _ = writeln!(csv, "{n},adaptive,{c},{pro},{tput:.3}");
        let _ = writeln!(s, " {:>11}", format!("{pro} / {c}"));
        series.push(Series::line(format!("N = {n}: headroom"), pts).colour(k));
        series.push(Series::dashed(format!("N = {n}: paper"), paper_pts).colour(k));
        series.push(Series::points(format!("N = {n}, adaptive m: headroom"), vec![(5.9, c as f64)]).colour(k));
        series.push(Series::points(format!("N = {n}, adaptive m: paper"), vec![(6.1, pro as f64)]).colour(k));
    }
    std::fs::write(dir.join("table1.csv"), csv)?;
    let chart = Chart {
        title: "ImTCP Table 1: results in 80 s at 3 Mb/s available".into(),
        x_label: "packets stored before a stream is sent, m (count)".into(),
        y_label: "measurement results in 80 s (count)".into(),
        series,
        x_categories: ["2", "3", "4", "5", "6", "7", "adaptive"].map(String::from).to_vec(),
        ..Default::default()
    };
    std::fs::write(dir.join("table1.svg"), chart.to_svg())?;
    let _ = writeln!(
        s,
        "(paper: a small fixed m hurts for larger N; the adaptive m keeps the count near the best fixed m)"
    );
    Ok(s)
}

/// One run of Table 2 / Fig. 9: results, throughput, the first-packet waits (ms) and the
/// control unit's counters.
struct StoringRun {
    results: usize,
    throughput_mbps: f64,
    waits_ms: Sorted,
    /// Largest `wait - T` over the samples (ms; <= 0 when every wait is within its timer).
    worst_excess_ms: f64,
    stats: headroom_core::imtcp::ControlStats,
    /// `N`, packets per stream.
    stream_len: usize,
    /// Bytes of one data packet on the wire (segment plus headers): the paper's `M`.
    packet_bytes: u64,
}

fn storing_run(sc: &Scenario) -> Result<StoringRun> {
    let (mut w, r) = run_world(sc)?;
    let results = w.estimates.iter().filter(|e| e.method == EstimateMethod::Imtcp).count();
    let packet_bytes = w.bulk_conn(0).context("no bulk TCP flow")?.params.mss as u64 + HEADER as u64;
    let Some(unit) = w.inline_measurement_mut(0) else { bail!("flow 0 has no ImTCP control unit") };
    let stream_len = unit.measurer().config().stream_len;
    let samples = unit.take_first_packet_waits();
    let waits_ms: Sorted = samples.iter().map(|s| s.wait.as_secs_f64() * 1e3).collect();
    let worst_excess_ms = samples
        .iter()
        .map(|s| (s.wait.as_secs_f64() - s.storing_timer.as_secs_f64()) * 1e3)
        .fold(f64::NEG_INFINITY, f64::max);
    Ok(StoringRun {
        results,
        throughput_mbps: r.flows[0].throughput_mbps,
        waits_ms,
        worst_excess_ms,
        stats: unit.stats(),
        stream_len,
        packet_bytes,
    })
}

fn imtcp_table2(dir: &Path) -> Result<String> {
    let base = Base::load(TABLE2, "scenarios/imtcp/table2.toml")?;
    // (available Mb/s, cross traffic Mb/s, paper counts for 0.04 s, Pro., 0.01 s, 0.004 s)
    let cases: [(u32, u64, [u32; 4]); 2] = [(4, 96, [379, 371, 324, 105]), (7, 93, [486, 488, 423, 298])];
    // (label, fixed storing timer in ms; None: the paper's proposed adaptive timer)
    let timers: [(&str, Option<u64>); 4] =
        [("0.04 s", Some(40)), ("Pro.", None), ("0.01 s", Some(10)), ("0.004 s", Some(4))];
    let mut csv = String::from(
        "available_mbps,storing_timer,results,paper_results,throughput_mbps,streams,storing_timeouts,stream_failures\n",
    );
    let mut cdf_csv = String::from("available_mbps,setting,wait_ms,cdf\n");
    let mut s = String::new();
    let _ = writeln!(s, "measurement results in 80 s (N = 35): paper / headroom");
    let _ = write!(s, "{:<10}", "T");
    for (label, _) in timers {
        let _ = write!(s, " {:>11}", label);
    }
    s.push('\n');
    let mut series = Vec::new();
    let mut cdf_series = Vec::new();
    let mut fig9 = String::new();
    let _ = writeln!(fig9, "Fig. 9: waiting time of the first packet of each measurement stream (ms)");
    let _ = writeln!(
        fig9,
        "{:<9} {:<8} {:>7} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9}",
        "avail", "T", "streams", "median", "p90", "max", "max-T", "timeouts", "results", "Mb/s"
    );
    let mut scs = Vec::new();
    for (_, cross, _) in cases {
        for (_, t) in timers {
            scs.push(base.edited(|sc| {
                *poisson_rate(sc)? = Rate::from_mbps(cross);
                imtcp_of(sc)?.storing_timer = t.map(Dur::from_millis);
                Ok(())
            })?);
        }
    }
    let mut results = par_map(&scs, storing_run)?;
    // Paper / headroom where headroom has results; the settings where it has none.
    let mut gaps: Vec<f64> = Vec::new();
    let mut none = Vec::new();
    // Eq. (2)'s K = M/A·(N−1) per available bandwidth (ms), from the runs' own M and N.
    let mut fill_ms = Vec::new();
    for (avail, _, paper) in cases {
        let _ = write!(s, "{:<10}", format!("{avail} Mb/s"));
        let mut pts = Vec::new();
        let mut paper_pts = Vec::new();
        for (k, (label, _)) in timers.iter().enumerate() {
            let run = results.take()?;
            let c = run.results;
            let st = run.stats;
            if c > 0 {
                gaps.push(paper[k] as f64 / c as f64);
            } else {
                none.push(format!("{} at {avail} Mb/s, T = {label}", paper[k]));
            }
            if k == 0 {
                let bits = (run.packet_bytes * 8) as f64 * (run.stream_len as f64 - 1.0);
                fill_ms.push((avail, run.stream_len, run.packet_bytes, bits / (avail as f64 * 1e6) * 1e3));
            }
            let _ = writeln!(
                csv,
                "{avail},{label},{c},{},{:.3},{},{},{}",
                paper[k], run.throughput_mbps, st.streams_sent, st.storing_timeouts, st.stream_failures
            );
            let _ = write!(s, " {:>11}", format!("{} / {c}", paper[k]));
            // Ours and the paper's side by side in each category.
            pts.push((k as f64 - 0.08, c as f64));
            paper_pts.push((k as f64 + 0.08, paper[k] as f64));
            let w = &run.waits_ms;
            let n = w.len();
            let step = (n / 400).max(1);
            let mut cdf_pts: Vec<(f64, f64)> =
                w.iter().enumerate().step_by(step).map(|(i, v)| (*v, (i + 1) as f64 / n as f64)).collect();
            if let Some(last) = w.last() {
                if cdf_pts.last().is_none_or(|p| p.1 < 1.0) {
                    cdf_pts.push((*last, 1.0));
                }
            }
            for p in &cdf_pts {
                let _ = writeln!(cdf_csv, "{avail},{label},{:.4},{:.5}", p.0, p.1);
            }
            let max_excess = if n == 0 { "-".to_string() } else { format!("{:.3}", run.worst_excess_ms) };
            let _ = writeln!(
                fig9,
                "{:<9} {:<8} {:>7} {:>8.2} {:>8.2} {:>8.2} {:>9} {:>9} {:>9} {:>9.2}",
                format!("{avail} Mb/s"),
                label,
                n,
                quantile(w, 0.5),
                quantile(w, 0.9),
                w.last().copied().unwrap_or(f64::NAN),
                max_excess,
                st.storing_timeouts,
                c,
                run.throughput_mbps
            );
            if n > 0 {
                cdf_series.push(Series::line(format!("{avail} Mb/s, T = {label}"), cdf_pts));
            }
        }
        s.push('\n');
        let colour = series.len() / 2;
        series.push(Series::points(format!("{avail} Mb/s available: headroom"), pts).colour(colour));
        series.push(Series::points(format!("{avail} Mb/s available: paper"), paper_pts).colour(colour));
    }
    std::fs::write(dir.join("table2.csv"), csv)?;
    std::fs::write(dir.join("fig9.csv"), cdf_csv)?;
    let chart = Chart {
        title: "ImTCP Table 2: results in 80 s (N = 35)".into(),
        x_label: "packet storing timer T".into(),
        y_label: "measurement results in 80 s (count)".into(),
        series,
        x_categories: timers
            .iter()
            .map(|t| if t.1.is_none() { "adaptive (Pro.)".into() } else { t.0.into() })
            .collect(),
        ..Default::default()
    };
    std::fs::write(dir.join("table2.svg"), chart.to_svg())?;
    let chart = Chart {
        title: "ImTCP Fig. 9: CDF of the first stream packet's waiting time".into(),
        x_label: "waiting time of the first packet (ms)".into(),
        y_label: "cumulative fraction of streams".into(),
        series: cdf_series,
        y_range: Some((0.0, 1.0)),
        ..Default::default()
    };
    std::fs::write(dir.join("fig9.svg"), chart.to_svg())?;
    let _ =
        writeln!(s, "(paper: short fixed timers fail to form streams; the adaptive T keeps the count of T = 0.04 s)");
    let lo = gaps.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = gaps.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let _ = writeln!(
        s,
        "gap: the paper counts {lo:.1}-{hi:.0}x more results where headroom has any{}{}",
        if none.is_empty() { "" } else { "; headroom has 0 against the paper's " },
        none.join(" and ")
    );
    let fixed_ms: Vec<u64> = timers.iter().filter_map(|t| t.1).collect();
    for (avail, n, m, k) in &fill_ms {
        let shorter: Vec<String> = fixed_ms.iter().filter(|&&t| (t as f64) < *k).map(|t| format!("{t}")).collect();
        let _ = writeln!(
            s,
            "eq. (2) at {avail} Mb/s: a TCP paced by A hands the buffer N = {n} packets of M = {m} B in \
             K = M/A(N-1) = {k:.0} ms; fixed T shorter than K: {} ms",
            if shorter.is_empty() { "none".to_string() } else { shorter.join(", ") }
        );
    }
    s.push('\n');
    s.push_str(&fig9);
    let _ =
        writeln!(s, "(max-T: largest wait minus the storing timer armed for it; timeouts: storing episodes that ended");
    let _ = writeln!(
        s,
        " without a stream. Paper: T = 0.04 s gives long waits; the proposed T removes them, keeping the count)"
    );
    Ok(s)
}

/// Means of (t, v) points over 0.5 s bins ending at k·0.5 s.
fn bins(points: &[(f64, f64)], end: f64) -> Vec<(f64, f64)> {
    let n = (end / 0.5).round() as usize;
    let mut acc = vec![(0.0, 0u32); n + 1];
    for &(t, v) in points {
        let k = ((t / 0.5).ceil() as usize).min(n);
        acc[k].0 += v;
        acc[k].1 += 1;
    }
    acc.iter().enumerate().filter(|(_, a)| a.1 > 0).map(|(k, a)| (k as f64 * 0.5, a.0 / a.1 as f64)).collect()
}

fn imtcp_fig10(dir: &Path) -> Result<String> {
    let (w, r) = run_scenario(dir, FIG10, "scenarios/imtcp/fig10.toml")?;
    let methods = ["imtcp", "westwood", "hoe", "rab"];
    let binned: Vec<Vec<(f64, f64)>> = methods
        .iter()
        .map(|m| bins(&estimates_of(&w, m).iter().map(|e| (e.0, e.1)).collect::<Vec<_>>(), 300.0))
        .collect();
    let mut csv = String::from("method,time_s,mean_estimate_mbps,available_mbps\n");
    for (m, pts) in methods.iter().zip(&binned) {
        for p in pts {
            let _ = writeln!(csv, "{m},{:.1},{:.3},{}", p.0, p.1, available_fig8(p.0 - 0.25));
        }
    }
    std::fs::write(dir.join("fig10.csv"), csv)?;
    // The paper's two panels: (a) ImTCP and Westwood, (b) Hoe's method and TCP-Rab, on its
    // 0-120 Mb/s axis; the few averages beyond it are marked on the top edge.
    let names = ["ImTCP", "TCP Westwood", "Hoe's method", "TCP-Rab"];
    let panel = |title: &str, pick: [usize; 2]| Chart {
        title: title.into(),
        x_label: "time (s)".into(),
        y_label: "estimate, 0.5 s averages (Mb/s)".into(),
        series: [Series::line("available bandwidth (truth)", available_series(300.0))]
            .into_iter()
            .chain(pick.map(|k| Series::line(names[k], binned[k].clone()).colour(k + 1)))
            .collect(),
        y_range: Some((0.0, 120.0)),
        y_mark_outside: true,
        ..Default::default()
    };
    let panels = [panel("(a) ImTCP and TCP Westwood", [0, 1]), panel("(b) Hoe's method and TCP-Rab", [2, 3])];
    std::fs::write(dir.join("fig10.svg"), panels_svg("ImTCP Fig. 10: average measurement results", &panels))?;

    let mut s = String::new();
    let _ = writeln!(s, "mean of the 0.5 s averages per phase (Mb/s; first 5 s of each phase left out)");
    let _ = writeln!(
        s,
        "{:<10} {:>10} {:>8} {:>9} {:>8} {:>8}",
        "phase (s)", "available", "ImTCP", "Westwood", "Hoe", "TCP-Rab"
    );
    for (a, b) in PHASES {
        let _ = write!(s, "{:<10} {:>10}", format!("{a:.0}-{b:.0}"), available_fig8(a));
        for pts in &binned {
            let v: Vec<f64> = pts.iter().filter(|p| p.0 > a + 5.0 && p.0 <= b).map(|p| p.1).collect();
            let _ = write!(s, " {:>8.1}", mean(&v));
        }
        s.push('\n');
    }
    let _ = write!(s, "{:<21}", "mean |err| / avail");
    for pts in &binned {
        let v: Vec<f64> =
            pts.iter().map(|p| (p.1 - available_fig8(p.0 - 0.25)).abs() / available_fig8(p.0 - 0.25)).collect();
        let _ = write!(s, " {:>7.1}%", 100.0 * mean(&v));
    }
    s.push('\n');
    let _ = write!(s, "{:<21}", "20->60 at 210 s: s to");
    for pts in &binned {
        let t = pts.iter().find(|p| p.0 > 210.0 && p.1 >= 48.0).map(|p| p.0 - 210.0);
        let _ = write!(s, " {:>8}", t.map_or("never".to_string(), |t| format!("{t:.1}")));
    }
    s.push('\n');
    let _ = writeln!(s, "  (time until a 0.5 s average first reaches 80 % of the new 60 Mb/s)");
    let _ =
        writeln!(s, "the Reno flow itself: {:.1} Mb/s, {} timeouts", r.flows[0].throughput_mbps, r.flows[0].timeouts);
    let _ = writeln!(s, "paper: ImTCP follows the available bandwidth, also when it rises fast; the passive");
    let _ = writeln!(s, "methods (Westwood worst, perturbed by the ACK noise) cannot see a fast rise");
    Ok(s)
}

/// Page download times (s) of every web population of a report.
fn page_times(r: &Report) -> Vec<f64> {
    r.flows
        .iter()
        .filter(|f| f.kind == FlowKind::Web)
        .flat_map(|f| f.page_times.iter().map(|p| p.1.as_secs_f64()))
        .collect()
}

/// [`Sorted::quantile`] (nearest order statistic), NaN (printed as such) for no values.
fn quantile(sorted: &Sorted, q: f64) -> f64 {
    sorted.quantile(q).unwrap_or(f64::NAN)
}

fn imtcp_web(dir: &Path) -> Result<String> {
    let base = Base::load(WEB, "scenarios/imtcp/web.toml")?;
    let seeds = [1u64, 2, 3, 4, 5];
    let mut csv = String::from("bulk,seed,throughput_mbps,timeouts,pages,mean_page_time_s\n");
    // The paper's comparison (Reno below ImTCP, Reno alone), then the same with NewReno as the
    // bulk flow's TCP (the web traffic stays Reno).
    // (label, the bulk flow's controller, with ImTCP)
    let mut variants = Vec::new();
    for cc in [CcKind::Reno, CcKind::NewReno] {
        variants.push((format!("ImTCP ({cc})"), cc, true));
        variants.push((cc.to_string(), cc, false));
    }
    let mut scs = Vec::new();
    for (_, cc, inline) in &variants {
        for seed in seeds {
            scs.push(base.edited(|sc| {
                sc.seed = seed;
                let bulk = only(&mut sc.tcp, "tcp")?;
                bulk.cc = *cc;
                if bulk.imtcp.is_none() {
                    bail!("the bulk flow has no `imtcp` settings to compare against");
                }
                if !inline {
                    bulk.imtcp = None;
                }
                Ok(())
            })?);
        }
    }
    // The first run (ImTCP over Reno, first seed) also gives Fig. 11's small graph: ImTCP's
    // estimates against what the web traffic leaves of the 50 Mb/s bottleneck.
    let inset_of = |w: &World| {
        let est: Vec<(f64, f64)> = w
            .estimates
            .iter()
            .filter(|e| e.method == EstimateMethod::Imtcp)
            .filter_map(|e| e.value.map(|v| (e.time.as_secs_f64(), v.0 as f64 / 1e6)))
            .collect();
        let left: Vec<(f64, f64)> = super::series_of(w, "web", headroom_sim::world::Metric::ThroughputBps, 1e-6)
            .iter()
            .map(|p| (p.0, 50.0 - p.1))
            .collect();
        (est, left)
    };
    let numbered: Vec<(usize, &Scenario)> = scs.iter().enumerate().collect();
    let mut results = par_map(&numbered, |&(k, sc)| {
        let (w, r) = run_world(sc)?;
        Ok((r, (k == 0).then(|| inset_of(&w))))
    })?;
    let mut inset = None;
    let mut rows = Vec::new();
    for (label, _, _) in &variants {
        let mut tputs = Vec::new();
        let mut timeouts = Vec::new();
        let mut times = Vec::new();
        let mut per_seed = Vec::new();
        for seed in seeds {
            let (r, ins) = results.take()?;
            inset = inset.or(ins);
            let t = page_times(&r);
            let _ = writeln!(
                csv,
                "{label},{seed},{:.3},{},{},{:.4}",
                r.flows[0].throughput_mbps,
                r.flows[0].timeouts,
                t.len(),
                mean(&t)
            );
            tputs.push(r.flows[0].throughput_mbps);
            timeouts.push(r.flows[0].timeouts as f64);
            per_seed.push(Sorted::new(t.clone()));
            times.extend(t);
        }
        rows.push((label.clone(), tputs, timeouts, Sorted::new(times), per_seed));
    }
    std::fs::write(dir.join("web.csv"), csv)?;
    let mut cdf = String::from("bulk,page_time_s,cdf\n");
    let mut series = Vec::new();
    let mut bands = Vec::new();
    for (k, (label, _, _, times, per_seed)) in rows.iter().enumerate() {
        let pts = cdf_points(times);
        for p in &pts {
            let _ = writeln!(cdf, "{label},{:.4},{:.4}", p.0, p.1);
        }
        series.push(Series::line(format!("web, bulk = {label}"), pts).colour(k));
        // The spread over seeds: at each cumulative fraction, the fastest and the slowest seed's
        // page time.
        let label = format!("bulk = {label}: spread of the {} seeds", per_seed.len());
        bands.push(Series::cdf_spread(label, per_seed).colour(k));
    }
    series.extend(bands);
    std::fs::write(dir.join("page_time_cdf.csv"), cdf)?;
    let chart = Chart {
        title: "(a) page download time CDF, 5 seeds pooled, with the spread of the seeds".into(),
        x_label: "page download time (s, log scale)".into(),
        y_label: "cumulative fraction of pages".into(),
        series,
        y_range: Some((0.0, 1.0)),
        x_log: true,
        ..Default::default()
    };
    let (est, left) = inset.context("internal: no run for Fig. 11's small graph")?;
    let small = Chart {
        title: format!("(small graph) ImTCP's estimates, bulk = {}, seed {}", variants[0].0, seeds[0]),
        x_label: "time (s)".into(),
        y_label: "bandwidth (Mb/s)".into(),
        series: vec![Series::line("50 Mb/s minus web throughput, 1 s", left), Series::points("ImTCP estimate", est)],
        ..Default::default()
    };
    let title = "ImTCP Fig. 11: web page download time CDF (5 seeds pooled) and ImTCP's estimates";
    std::fs::write(dir.join("fig11.svg"), panels_svg(title, &[chart, small]))?;
    let mut s = String::new();
    let fmt = |v: &[f64]| v.iter().map(|x| format!("{x:.1}")).collect::<Vec<_>>().join(" ");
    let _ = writeln!(s, "bulk flow on 50 Mb/s with 50 web clients, 500 s, 5 seeds");
    let _ = writeln!(
        s,
        "{:<16} {:>7} {:>9} {:>9} {:>8} {:>8} {:>8}  per seed (Mb/s)",
        "bulk flow", "paper", "Mb/s", "timeouts", "p50 (s)", "p90 (s)", "p99 (s)"
    );
    for (k, (label, tputs, timeouts, times, _)) in rows.iter().enumerate() {
        let paper = match k {
            0 => "25.2",
            1 => "23.1",
            _ => "",
        };
        let _ = writeln!(
            s,
            "{:<16} {:>7} {:>9.1} {:>9.1} {:>8.3} {:>8.3} {:>8.3}  {}",
            label,
            paper,
            mean(tputs),
            mean(timeouts),
            quantile(times, 0.5),
            quantile(times, 0.9),
            quantile(times, 0.99),
            fmt(tputs)
        );
    }
    let _ = writeln!(
        s,
        "(p50/p90/p99: web page download time quantiles; paper: ImTCP about Reno's throughput, CDFs equal)"
    );
    Ok(s)
}

/// The bottleneck: the file's single link between routers `r1` and `r2`.
fn bottleneck(sc: &mut Scenario) -> Result<&mut headroom_sim::scenario::LinkSpec> {
    let mut it = sc.links.iter_mut().filter(|l| l.a.get_ref() == "r1" && l.b.get_ref() == "r2");
    match (it.next(), it.next()) {
        (Some(l), None) => Ok(l),
        _ => bail!("expected exactly one link r1 -> r2 (the bottleneck)"),
    }
}

fn imtcp_table3(dir: &Path) -> Result<String> {
    let base = Base::load(TABLE3, "scenarios/imtcp/table3.toml")?;
    // (capacity, flows, paper Jain, paper ImTCP total, paper Reno total)
    let paper: [(u32, u32, f64, f64, f64); 9] = [
        (50, 2, 0.999, 44.4, 45.6),
        (50, 10, 0.997, 46.7, 46.0),
        (50, 24, 0.986, 47.6, 46.1),
        (60, 2, 0.999, 53.2, 53.1),
        (60, 10, 0.992, 55.3, 54.0),
        (60, 24, 0.995, 56.7, 54.11),
        (70, 2, 0.999, 59.9, 60.6),
        (70, 10, 0.992, 63.7, 61.9),
        (70, 24, 0.992, 65.9, 62.0),
    ];
    let mut csv = String::from("capacity_mbps,flows,jain_imtcp,jain_reno,imtcp_total_mbps,reno_total_mbps,paper_jain,paper_imtcp_mbps,paper_reno_mbps\n");
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<14} {:>17} {:>17} {:>17} {:>11}",
        "capacity/flows", "Jain paper/ours", "ImTCP paper/ours", "Reno paper/ours", "ImTCP/Reno"
    );
    let mut scs = Vec::new();
    for (cap, n, _, _, _) in paper {
        for inline in [true, false] {
            scs.push(base.edited(|sc| {
                bottleneck(sc)?.rate = Rate::from_mbps(cap.into());
                let flows = only(&mut sc.tcp, "tcp")?;
                flows.count = n;
                if flows.imtcp.is_none() {
                    bail!("the flows have no `imtcp` settings to compare against");
                }
                if !inline {
                    flows.imtcp = None;
                }
                Ok(())
            })?);
        }
    }
    let mut results = par_map(&scs, |sc| Ok(run_world(sc)?.1))?;
    let (mut im_pts, mut re_pts, mut im_paper, mut re_paper) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (k, (cap, n, pj, pi, pr)) in paper.into_iter().enumerate() {
        let mut totals = [0.0; 2];
        let mut jains = [0.0; 2];
        for k in 0..2 {
            let r = results.take()?;
            let x: Vec<f64> = r.flows.iter().filter(|f| f.kind == FlowKind::Tcp).map(|f| f.throughput_mbps).collect();
            totals[k] = x.iter().sum();
            jains[k] = stats::jain_index(&x).unwrap_or(f64::NAN);
        }
        let _ =
            writeln!(csv, "{cap},{n},{:.4},{:.4},{:.2},{:.2},{pj},{pi},{pr}", jains[0], jains[1], totals[0], totals[1]);
        let _ = writeln!(
            s,
            "{:<14} {:>17} {:>17} {:>17} {:>11.3}",
            format!("{cap} Mb/s, {n}"),
            format!("{pj:.3} / {:.3}", jains[0]),
            format!("{pi:.1} / {:.1}", totals[0]),
            format!("{pr:.1} / {:.1}", totals[1]),
            totals[0] / totals[1]
        );
        let x = k as f64;
        // Ours and the paper's side by side in each category.
        im_pts.push((x - 0.12, totals[0] / cap as f64));
        im_paper.push((x - 0.04, pi / cap as f64));
        re_pts.push((x + 0.04, totals[1] / cap as f64));
        re_paper.push((x + 0.12, pr / cap as f64));
    }
    std::fs::write(dir.join("table3.csv"), csv)?;
    let chart = Chart {
        title: "ImTCP Table 3: utilisation of the bottleneck".into(),
        x_label: "bottleneck capacity (Mb/s) / number of flows".into(),
        y_label: "total throughput / capacity (ratio)".into(),
        series: vec![
            Series::points("ImTCP: headroom", im_pts).colour(0),
            Series::points("ImTCP: paper", im_paper).colour(0),
            Series::points("Reno: headroom", re_pts).colour(1),
            Series::points("Reno: paper", re_paper).colour(1),
        ],
        y_range: Some((0.0, 1.0)),
        x_categories: paper.iter().map(|p| format!("{}/{}", p.0, p.1)).collect(),
        ..Default::default()
    };
    std::fs::write(dir.join("table3.svg"), chart.to_svg())?;
    let _ = writeln!(s, "(Jain index over the ImTCP flows' throughputs over the whole 200 s run; paper: >= 0.986)");
    Ok(s)
}

fn imtcp_fig13(dir: &Path) -> Result<String> {
    let base = Base::load(FIG13, "scenarios/imtcp/fig13.toml")?;
    let totals = [4u32, 10, 20, 30];
    let intervals = [0.0f64, 12.0, 15.0, 20.0];
    let seeds = [1u64, 2, 3, 4];
    let mut csv = String::from("interval_rtts,connections,seed,imtcp_total_mbps,reno_total_mbps,ratio\n");
    let mut scs = Vec::new();
    for iv in intervals {
        for n in totals {
            let half = n / 2;
            for seed in seeds {
                scs.push(base.edited(|sc| {
                    sc.seed = seed;
                    let [imtcp, reno] = &mut sc.tcp[..] else { bail!("expected two [[tcp]] entries, ImTCP and Reno") };
                    imtcp.imtcp.as_mut().context("the first [[tcp]] entry has no `imtcp` settings")?.interval_rtts =
                        Some(iv);
                    if reno.imtcp.is_some() {
                        bail!("the second [[tcp]] entry should be plain Reno");
                    }
                    (imtcp.count, reno.count) = (half, half);
                    Ok(())
                })?);
            }
        }
    }
    let mut results = par_map(&scs, |sc| Ok(run_world(sc)?.1))?;
    let mut series = Vec::new();
    let mut table = Vec::new();
    for (k, iv) in intervals.into_iter().enumerate() {
        let mut pts = Vec::new();
        let mut spread = Vec::new();
        for n in totals {
            let mut ratios = Vec::new();
            for seed in seeds {
                let r = results.take()?;
                let sum = |p: &str| {
                    r.flows
                        .iter()
                        .filter(|f| f.kind == FlowKind::Tcp && f.name.starts_with(p))
                        .map(|f| f.throughput_mbps)
                        .sum::<f64>()
                };
                let (im, re) = (sum("imtcp"), sum("reno"));
                let _ = writeln!(csv, "{iv},{n},{seed},{im:.3},{re:.3},{:.4}", im / re);
                ratios.push(im / re);
            }
            pts.push((n as f64, mean(&ratios)));
            let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
            spread.push((n as f64, lo, ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max)));
        }
        table.push((iv, pts.clone()));
        series.push(Series::band(format!("{iv:.0} RTT: min-max of {} seeds", seeds.len()), &spread).colour(k));
        series.push(Series::line(format!("{iv:.0} RTT: mean"), pts).colour(k));
    }
    series
        .push(Series::reference("ratio = 1 (TCP-compatible)", vec![(totals[0] as f64, 1.0), (totals[3] as f64, 1.0)]));
    std::fs::write(dir.join("fig13.csv"), csv)?;
    let chart = Chart {
        title: "ImTCP Fig. 13: ImTCP / Reno total throughput, 50 Mb/s".into(),
        x_label: "TCP connections, half of them ImTCP (count)".into(),
        y_label: "ImTCP / Reno total throughput (ratio)".into(),
        series,
        y_range: Some((0.0, 1.5)),
        ..Default::default()
    };
    std::fs::write(dir.join("fig13.svg"), chart.to_svg())?;
    let mut s = String::new();
    let _ = writeln!(s, "ImTCP/Reno total throughput ratio (mean of {} seeds)", seeds.len());
    let _ = write!(s, "{:<14} {:>16}", "interval", "paper");
    for n in totals {
        let _ = write!(s, " {:>7}", format!("n={n}"));
    }
    s.push('\n');
    for (iv, pts) in &table {
        let paper = if *iv >= 20.0 { "~1" } else { "< 1" };
        let _ = write!(s, "{:<14} {:>16}", format!("{iv:.0} RTT"), paper);
        for p in pts {
            let _ = write!(s, " {:>7.3}", p.1);
        }
        s.push('\n');
    }
    Ok(s)
}
