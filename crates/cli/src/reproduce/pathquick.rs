//! The PathQuick paper's experiments (Oshiba & Nakajima): Fig. 6, estimate against true available
//! bandwidth for PathQuick and pathChirp in simulation (§4.4.1).
//!
//! Setting (Fig. 5): a 12 Mb/s bottleneck, 52 ms RTT, Poisson cross traffic of 1000-byte packets
//! from 0 to 12 Mb/s; one train per second; pathChirp with its default busy-period threshold
//! (L = 5) and decrease factor (F = 1.5); PathQuick with T_quick = 1 ms, P_1 = 1 B, ΔP = 12 B,
//! N = 125 (104–11,912 kb/s), pathChirp γ = 1.2, 1489-byte packets over the same range. We add
//! the paper's lighter PathQuick (ΔP = 24 B, N = 63, §4.5), which it says is still more accurate
//! than pathChirp. Every train is judged on its own (no smoothing), as in the paper's figure.
//! Beyond the paper, both methods are also judged with the decrease factor F = 5
//! (`pathquick-f5`, `pathchirp-f5`: the same trains' cross traffic, a different estimator).
//!
//! The true available bandwidth of a level is `12 Mb/s - offered cross traffic` (nominal; the
//! Poisson source's realised rate over a run differs by a few per cent).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use headroom_core::units::{Bytes, Dur, Rate};
use headroom_sim::probe::EstimateMethod;
use headroom_sim::scenario::ProbeMethod;
use headroom_sim::traffic::UdpPattern;
use headroom_sim::{Scenario, World};

use super::{only, par_map, Base, Experiment};
use crate::plot::{Chart, Series};

pub const EXPERIMENTS: &[Experiment] = &[Experiment {
    name: "pathquick-fig6",
    about: "PathQuick Fig. 6: estimate vs true available bandwidth, PathQuick vs pathChirp, 12 Mb/s, 52 ms RTT, Poisson cross traffic 0-12 Mb/s",
    run: pathquick_fig6,
}];

const FIG6: &str = include_str!("../../../../scenarios/pathquick/fig6.toml");
const ORIGIN: &str = "scenarios/pathquick/fig6.toml";

/// Capacity of the bottleneck (Mb/s).
pub const CAPACITY_MBPS: f64 = 12.0;
/// Trains per cross-traffic level and method.
const TRAINS: u32 = 40;

/// One probing method of the comparison: its label and the `[[probe]]` settings that select it
/// (the file's other probe settings stay).
pub struct Method {
    pub label: &'static str,
    pub method: ProbeMethod,
    /// PathQuick's size increment ΔP and packet count N (None: the file's, i.e. the paper's).
    pub delta_p: Option<Bytes>,
    pub n: Option<u32>,
    /// The estimator's decrease factor F (None: the default 1.5).
    pub decrease_factor: Option<f64>,
}

const fn method(label: &'static str, method: ProbeMethod) -> Method {
    Method { label, method, delta_p: None, n: None, decrease_factor: None }
}

pub const METHODS: [Method; 5] = [
    method("pathquick", ProbeMethod::PathQuick),
    method("pathchirp", ProbeMethod::PathChirp),
    Method { delta_p: Some(Bytes(24)), n: Some(63), ..method("pathquick-63", ProbeMethod::PathQuick) },
    // Beyond the paper: pathChirp's decrease factor F = 5 instead of 1.5 (core
    // `RAMP_DECREASE_FACTOR`; the excursion doc explains why the ramp needs it).
    Method { decrease_factor: Some(5.0), ..method("pathquick-f5", ProbeMethod::PathQuick) },
    Method { decrease_factor: Some(5.0), ..method("pathchirp-f5", ProbeMethod::PathChirp) },
];

/// One train's verdict.
pub struct TrainRow {
    pub method: &'static str,
    pub cross_mbps: f64,
    pub available_mbps: f64,
    pub time_s: f64,
    pub verdict: &'static str,
    /// The number behind the verdict (Mb/s), `None` when inconclusive.
    pub value_mbps: Option<f64>,
    pub elapsed_ms: f64,
    pub bytes: u64,
}

/// The fig6 scenario with `cross` Mb/s (a whole number) of Poisson cross traffic (none at 0),
/// the probe settings of `m` and time for `trains` trains.
fn scenario(base: &Base, m: &Method, cross: u64, trains: u32) -> Result<Scenario> {
    base.edited(|sc| {
        sc.duration = Dur::from_secs(u64::from(trains) + 1);
        let probe = only(&mut sc.probe, "probe")?;
        *probe.method.get_mut() = m.method;
        probe.delta_p = m.delta_p.or(probe.delta_p);
        probe.n = m.n.or(probe.n);
        probe.decrease_factor = m.decrease_factor.or(probe.decrease_factor);
        match &mut only(&mut sc.udp, "udp")?.pattern {
            _ if cross == 0 => sc.udp.clear(),
            UdpPattern::Poisson { rate } => *rate = Rate::from_mbps(cross),
            other => anyhow::bail!("expected Poisson cross traffic, found {other:?}"),
        }
        Ok(())
    })
}

/// Runs `trains` trains of one method at one cross-traffic level (whole Mb/s).
pub fn run_level(m: &Method, cross: u64, trains: u32, seed: u64) -> Result<Vec<TrainRow>> {
    let sc = scenario(&Base::load(FIG6, ORIGIN)?, m, cross, trains)?;
    let cross = cross as f64;
    let method = m.label;
    let mut w = World::new(&sc, Some(seed)).map_err(anyhow::Error::msg)?;
    w.run();
    let available = (CAPACITY_MBPS - cross).max(0.0);
    Ok(w.estimates
        .iter()
        .filter(|e| matches!(e.method, EstimateMethod::PathQuick | EstimateMethod::PathChirp))
        .map(|e| TrainRow {
            method,
            cross_mbps: cross,
            available_mbps: available,
            time_s: e.time.as_secs_f64(),
            verdict: e.verdict.name(),
            value_mbps: e.value.map(|v| v.as_mbps()),
            elapsed_ms: e.elapsed.as_secs_f64() * 1e3,
            bytes: e.bytes,
        })
        .collect())
}

/// Per level and method: trains, mean absolute error, median estimate, share of range verdicts,
/// inconclusive count, mean elapsed time, bytes per train.
pub struct LevelSummary {
    pub method: &'static str,
    pub available_mbps: f64,
    pub trains: usize,
    pub mae_mbps: f64,
    pub median_mbps: f64,
    pub above: usize,
    pub below: usize,
    pub inconclusive: usize,
    /// Trains whose number lies within ±[`CLOSE_MBPS`] of the true available bandwidth (an
    /// inconclusive train has no number and is not counted).
    pub within: usize,
    pub elapsed_ms: f64,
    pub bytes: u64,
}

/// The paper's error band (§4.4.1: "概ね ± 2 Mbps" for A of 9 Mb/s and below).
pub const CLOSE_MBPS: f64 = 2.0;

pub fn summarise(rows: &[TrainRow], method: &'static str, available: f64) -> LevelSummary {
    let of: Vec<&TrainRow> =
        rows.iter().filter(|r| r.method == method && (r.available_mbps - available).abs() < 1e-9).collect();
    let mut values: Vec<f64> = of.iter().filter_map(|r| r.value_mbps).collect();
    values.sort_by(f64::total_cmp);
    let mae = values.iter().map(|v| (v - available).abs()).sum::<f64>() / values.len().max(1) as f64;
    let median = if values.is_empty() { f64::NAN } else { values[values.len() / 2] };
    LevelSummary {
        method,
        available_mbps: available,
        trains: of.len(),
        mae_mbps: if values.is_empty() { f64::NAN } else { mae },
        median_mbps: median,
        above: of.iter().filter(|r| r.verdict == "above_range").count(),
        below: of.iter().filter(|r| r.verdict == "below_range").count(),
        inconclusive: of.iter().filter(|r| r.verdict == "inconclusive").count(),
        within: values.iter().filter(|v| (*v - available).abs() <= CLOSE_MBPS).count(),
        elapsed_ms: of.iter().map(|r| r.elapsed_ms).sum::<f64>() / of.len().max(1) as f64,
        bytes: of.first().map(|r| r.bytes).unwrap_or(0),
    }
}

fn pathquick_fig6(dir: &Path) -> Result<String> {
    let levels: Vec<f64> = (0..=12).map(f64::from).collect();
    let runs: Vec<(&Method, u64)> = METHODS.iter().flat_map(|m| (0..=12u64).map(move |k| (m, k))).collect();
    // The same seed for every method at a level: the same cross-traffic realisation.
    let mut results = par_map(&runs, |&(method, k)| run_level(method, k, TRAINS, 1 + k))?;
    let mut rows = Vec::new();
    for _ in &runs {
        rows.extend(results.take()?);
    }

    let mut csv =
        String::from("method,cross_mbps,available_mbps,time_s,verdict,estimate_mbps,error_mbps,elapsed_ms,bytes\n");
    for r in &rows {
        let (v, e) = match r.value_mbps {
            Some(v) => (format!("{v:.4}"), format!("{:.4}", v - r.available_mbps)),
            None => (String::new(), String::new()),
        };
        let _ = writeln!(
            csv,
            "{},{},{},{:.3},{},{v},{e},{:.2},{}",
            r.method, r.cross_mbps, r.available_mbps, r.time_s, r.verdict, r.elapsed_ms, r.bytes
        );
    }
    std::fs::write(dir.join("fig6.csv"), csv)?;

    // `shift` moves a method's column sideways so that two methods at one level stay apart.
    let scatter = |method: &str, label: &str, shift: f64| {
        let points = rows
            .iter()
            .filter(|r| r.method == method)
            .filter_map(|r| r.value_mbps.map(|v| (r.available_mbps + shift, v)))
            .collect();
        Series::points(label, points)
    };
    let ideal = || Series::reference("ideal (error 0)", vec![(0.0, 0.0), (CAPACITY_MBPS, CAPACITY_MBPS)]);
    for (file, method, title) in [
        ("fig6a.svg", "pathquick", "PathQuick Fig. 6(a): PathQuick, one estimate per train"),
        ("fig6b.svg", "pathchirp", "PathQuick Fig. 6(b): pathChirp, one estimate per chirp"),
        ("fig6-f5.svg", "pathquick-f5", "Beyond Fig. 6: PathQuick with decrease factor F = 5, one estimate per train"),
    ] {
        let chart = Chart {
            title: title.into(),
            x_label: "true available bandwidth (Mb/s)".into(),
            y_label: "estimate (Mb/s)".into(),
            series: vec![scatter(method, method, 0.0), ideal()],
            y_range: Some((0.0, 14.0)),
            ..Default::default()
        };
        std::fs::write(dir.join(file), chart.to_svg())?;
    }
    let chart = Chart {
        title: "PathQuick Fig. 6: PathQuick vs pathChirp".into(),
        x_label: "true available bandwidth (Mb/s)".into(),
        y_label: "estimate (Mb/s)".into(),
        series: vec![
            scatter("pathquick", "PathQuick (N 125)", -0.12),
            scatter("pathchirp", "pathChirp (M 28)", 0.12),
            ideal(),
        ],
        y_range: Some((0.0, 14.0)),
        ..Default::default()
    };
    std::fs::write(dir.join("fig6.svg"), chart.to_svg())?;

    let summaries: Vec<LevelSummary> = METHODS
        .iter()
        .flat_map(|m| levels.iter().map(|&x| summarise(&rows, m.label, CAPACITY_MBPS - x)).collect::<Vec<_>>())
        .collect();
    let mae_chart = Chart {
        title: "Mean absolute error per level".into(),
        x_label: "true available bandwidth (Mb/s)".into(),
        y_label: "mean absolute error (Mb/s)".into(),
        series: METHODS
            .iter()
            .map(|m| {
                let points =
                    summaries.iter().filter(|s| s.method == m.label).map(|s| (s.available_mbps, s.mae_mbps)).collect();
                Series::line(m.label, points)
            })
            .collect(),
        ..Default::default()
    };
    std::fs::write(dir.join("fig6-mae.svg"), mae_chart.to_svg())?;

    let mut s = String::new();
    let _ = writeln!(s, "{TRAINS} trains per level and method; error = estimate - (12 Mb/s - offered cross traffic); range verdicts keep their bound as the value; ±2: share of trains within ±{CLOSE_MBPS} Mb/s (inconclusive trains are outside)");
    let _ = writeln!(
        s,
        "{:<13} {:>7} {:>7} {:>7} {:>7} {:>6} {:>6} {:>6} {:>6} {:>9} {:>8}",
        "method", "A Mb/s", "trains", "MAE", "median", "±2", "above", "below", "incon", "elapsed", "bytes"
    );
    for x in &summaries {
        let _ = writeln!(
            s,
            "{:<13} {:>7.1} {:>7} {:>7.2} {:>7.2} {:>5.0}% {:>5.0}% {:>5.0}% {:>6} {:>6.0} ms {:>8}",
            x.method,
            x.available_mbps,
            x.trains,
            x.mae_mbps,
            x.median_mbps,
            100.0 * x.within as f64 / x.trains.max(1) as f64,
            100.0 * x.above as f64 / x.trains.max(1) as f64,
            100.0 * x.below as f64 / x.trains.max(1) as f64,
            x.inconclusive,
            x.elapsed_ms,
            x.bytes
        );
    }
    let mean_mae = |method: &str, keep: &dyn Fn(f64) -> bool| {
        let v: Vec<f64> = summaries
            .iter()
            .filter(|x| x.method == method && keep(x.available_mbps) && x.mae_mbps.is_finite())
            .map(|x| x.mae_mbps)
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    // The paper's claim covers "9 Mb/s and below" (§4.4.1), A = 0 included: at A = 0 (12 Mb/s of
    // cross traffic on a 12 Mb/s link) the buffer overflows and most trains are inconclusive,
    // which the share within ±2 Mb/s counts as outside.
    let below9 = |a: f64| (0.0..=9.0).contains(&a);
    let share = |method: &str| {
        let of = summaries.iter().filter(|x| x.method == method && below9(x.available_mbps));
        let (within, trains) = of.fold((0, 0), |(w, t), x| (w + x.within, t + x.trains));
        100.0 * within as f64 / trains.max(1) as f64
    };
    let worst = summaries
        .iter()
        .filter(|x| x.method == "pathquick" && below9(x.available_mbps))
        .map(|x| (x.available_mbps, 100.0 * x.within as f64 / x.trains.max(1) as f64))
        .fold((f64::NAN, f64::INFINITY), |a, b| if b.1 < a.1 { b } else { a });
    let better = |method: &str| {
        levels
            .iter()
            .filter(|&&x| {
                let a = CAPACITY_MBPS - x;
                let q = summaries.iter().find(|s| s.method == method && s.available_mbps == a).map(|s| s.mae_mbps);
                let c = summaries.iter().find(|s| s.method == "pathchirp" && s.available_mbps == a).map(|s| s.mae_mbps);
                matches!((q, c), (Some(q), Some(c)) if q < c)
            })
            .count()
    };
    let bias = |method: &str| {
        let v: Vec<f64> = rows
            .iter()
            .filter(|r| r.method == method && below9(r.available_mbps))
            .filter_map(|r| r.value_mbps.map(|v| v - r.available_mbps))
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    let levels_of = |n: usize| format!("{n:>6}/{}", levels.len());
    let beyond = "(beyond the paper)";
    let claims: [(&str, &str, String); 13] = [
        ("PathQuick trains within ±2 Mb/s, A = 0..9 Mb/s", "about ±2", format!("{:>8.0}%", share("pathquick"))),
        (
            "PathQuick trains within ±2 Mb/s, lowest level",
            "about ±2",
            format!("{:>8.0}% at A = {:.0}", worst.1, worst.0),
        ),
        ("pathChirp trains within ±2 Mb/s, A = 0..9 Mb/s", "-", format!("{:>8.0}%", share("pathchirp"))),
        ("PathQuick MAE, mean over A = 0..9 Mb/s (Mb/s)", "-", format!("{:>9.2}", mean_mae("pathquick", &below9))),
        (
            "pathChirp MAE, mean over A = 0..9 Mb/s (Mb/s)",
            "larger, esp. > 5 Mb/s",
            format!("{:>9.2}", mean_mae("pathchirp", &below9)),
        ),
        (
            "PathQuick N 63 MAE, mean over A = 0..9 Mb/s (Mb/s)",
            "below pathChirp",
            format!("{:>9.2}", mean_mae("pathquick-63", &below9)),
        ),
        ("levels where PathQuick's MAE < pathChirp's", "all", levels_of(better("pathquick"))),
        ("levels where PathQuick N 63's MAE < pathChirp's", "all", levels_of(better("pathquick-63"))),
        (
            "PathQuick F = 5 MAE, mean over A = 0..9 Mb/s (Mb/s)",
            beyond,
            format!("{:>9.2}", mean_mae("pathquick-f5", &below9)),
        ),
        ("PathQuick F = 5 trains within ±2 Mb/s, A = 0..9 Mb/s", beyond, format!("{:>8.0}%", share("pathquick-f5"))),
        ("levels where PathQuick F = 5's MAE < pathChirp's", beyond, levels_of(better("pathquick-f5"))),
        ("PathQuick mean signed error, A = 0..9 Mb/s (Mb/s)", "-", format!("{:>9.2}", bias("pathquick"))),
        ("pathChirp mean signed error, A = 0..9 Mb/s (Mb/s)", "-", format!("{:>9.2}", bias("pathchirp"))),
    ];
    let _ = writeln!(s);
    let _ = writeln!(s, "{:<58} {:>22} {:>9}", "claim", "paper", "headroom");
    for (claim, paper, ours) in claims {
        let _ = writeln!(s, "{claim:<58} {paper:>22} {ours}");
    }
    Ok(s)
}
