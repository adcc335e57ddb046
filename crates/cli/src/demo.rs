//! `headroom demo`: what headroom is for, in under a minute, without root, on simulated paths.
//!
//! Three short sections, each a deterministic simulation (seeded; the same `--seed` gives
//! byte-identical files whatever the number of threads), each with a table and a one-line
//! conclusion computed from the run:
//!
//! 1. `estimate`: how much bandwidth is free? PathQuick (Oshiba & Nakajima, seed 003) against
//!    pathChirp on the PathQuick paper's Fig. 6 path (12 Mb/s, 52 ms RTT, Poisson cross
//!    traffic), at three cross-traffic levels: the estimates against the true available
//!    bandwidth, and the time each estimate takes (the `pathquick-fig6` reproduction's runs,
//!    fewer trains).
//! 2. `inline`: ImTCP (seed 001) measures the available bandwidth with a TCP transfer's own
//!    data packets while the transfer runs (`scenarios/demo/inline.toml`: the true available
//!    bandwidth steps 40 -> 20 -> 40 Mb/s).
//! 3. `background`: a background transfer in the spare bandwidth. ImTCP-bg (seed 000) and Reno
//!    as the background flow beside web traffic (`scenarios/imtcp-bg/web.toml`, shortened):
//!    how much of the spare bandwidth each takes and what it costs the web pages.
//!
//! It writes each section's CSV, SVG and summary into `--out` (one directory per section) and a
//! self-contained `report.html` (with `report.md`) by the reproductions' report writer; the
//! last line printed is the report's path.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use headroom_core::stats;
use headroom_core::units::Dur;
use headroom_sim::probe::{EstimateMethod, Verdict};
use headroom_sim::scenario::CcKind;
use headroom_sim::traffic::UdpPattern;
use headroom_sim::world::{FlowKind, Metric};
use headroom_sim::Scenario;

use crate::plot::{panels_svg, Chart, Series};
use crate::reproduce::{imtcp_bg, par_map, pathquick, report, run_world, series_of, Base, Experiment, Outcome};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Output directory: one sub-directory per section, and report.html / report.md.
    #[arg(long, default_value = "out/demo")]
    pub out: PathBuf,
    /// Base seed of the simulations (the same seed gives byte-identical files).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// The sections, in the order they are shown. `run` takes the base seed through [`SEED`].
const SECTIONS: &[Experiment] = &[
    Experiment {
        name: "estimate",
        about: "1. How much bandwidth is free? PathQuick and pathChirp estimate the available bandwidth of a 12 Mb/s path (52 ms RTT) with Poisson cross traffic of 3, 6 and 9 Mb/s",
        scenarios: &[],
        run: estimate,
    },
    Experiment {
        name: "inline",
        about: "2. Measuring inside a transfer: ImTCP estimates the available bandwidth with a TCP transfer's own data packets while cross traffic steps the truth 40 -> 20 -> 40 Mb/s (50 Mb/s, 20 ms)",
        scenarios: &[],
        run: inline,
    },
    Experiment {
        name: "background",
        about: "3. Using the spare bandwidth without hurting anyone: one background transfer (ImTCP-bg, or Reno) beside web traffic on a 50 Mb/s path",
        scenarios: &[],
        run: background,
    },
];

/// The base seed of this run (set once by [`run`] before the sections run; the sections'
/// signature is the reproductions' `fn(&Path)`).
static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

fn seed() -> u64 {
    SEED.get().copied().unwrap_or(1)
}

const PAGE: report::Page = report::Page {
    title: "headroom demo: measure a path's available bandwidth, and use it",
    intro: "headroom measures the available bandwidth of a network path (the capacity its other traffic leaves unused) and transfers data according to it. \
            Everything below ran in headroom's packet-level simulator, on the embedded scenarios, with fixed seeds: rerunning `headroom demo` gives the same numbers. \
            Each section's conclusion is computed from its run; its CSV files hold every estimate.",
    command: demo_command,
    heading: demo_heading,
    wall_time: false,
};

fn demo_command(_: &str) -> String {
    "headroom demo".to_string()
}

fn demo_heading(_: &str) -> &'static str {
    "What the demo ran"
}

pub fn run(a: DemoArgs) -> Result<()> {
    crate::outdir::writable_dir(Some(&a.out), "--out")?;
    let _ = SEED.set(a.seed);
    anyhow::ensure!(seed() == a.seed, "internal: the demo's seed was set twice");
    println!("headroom demo: measure a path's available bandwidth, and use it (simulated, seed {})\n", a.seed);
    let mut outcomes = Vec::new();
    for e in SECTIONS {
        let dir = a.out.join(e.name);
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let summary = (e.run)(&dir).with_context(|| format!("demo section {}", e.name))?;
        std::fs::write(dir.join("summary.txt"), &summary)?;
        println!("== {}\n{summary}", e.about);
        outcomes.push(Outcome { summary, dir, wall: std::time::Duration::ZERO });
    }
    let runs: Vec<(&Experiment, &Outcome)> = SECTIONS.iter().zip(&outcomes).collect();
    let path = report::write_page(&a.out, &PAGE, &runs)?;
    println!("Open the report: {}", path.display());
    Ok(())
}

/// Median of a sorted slice (the upper one of an even count; NaN when empty).
fn median(sorted: &[f64]) -> f64 {
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Cross traffic of section 1 (Mb/s, whole numbers: the PathQuick reproduction's levels).
const CROSS_MBPS: [u64; 3] = [3, 6, 9];
/// Trains per level and method in section 1.
const TRAINS: u32 = 20;

fn estimate(dir: &Path) -> Result<String> {
    let methods: Vec<&pathquick::Method> =
        pathquick::METHODS.iter().filter(|m| m.label == "pathquick" || m.label == "pathchirp").collect();
    let runs: Vec<(&pathquick::Method, u64)> =
        methods.iter().flat_map(|m| CROSS_MBPS.iter().map(move |&k| (*m, k))).collect();
    // The same seed for both methods at a level: the same cross-traffic realisation.
    let mut results = par_map(&runs, |&(m, k)| pathquick::run_level(m, k, TRAINS, seed() + k))?;
    let mut rows = Vec::new();
    for _ in &runs {
        rows.extend(results.take()?);
    }
    let mut csv = String::from("method,available_mbps,time_s,verdict,estimate_mbps,elapsed_ms\n");
    for r in &rows {
        let v = r.value_mbps.map_or(String::new(), |v| format!("{v:.4}"));
        let _ =
            writeln!(csv, "{},{},{:.3},{},{v},{:.2}", r.method, r.available_mbps, r.time_s, r.verdict, r.elapsed_ms);
    }
    std::fs::write(dir.join("estimates.csv"), csv)?;

    // Per method and level: the estimates (read back at the CSV's precision) and their times.
    let level = |method: &str, a: f64| {
        let of: Vec<&pathquick::TrainRow> =
            rows.iter().filter(|r| r.method == method && r.available_mbps == a).collect();
        let mut v: Vec<f64> = of.iter().filter_map(|r| r.value_mbps).map(round4).collect();
        v.sort_by(f64::total_cmp);
        let within = v.iter().filter(|x| (**x - a).abs() <= pathquick::CLOSE_MBPS).count();
        let ms = of.iter().map(|r| r.elapsed_ms).sum::<f64>() / of.len().max(1) as f64;
        (v, within, of.len(), ms)
    };
    let truths: Vec<f64> = CROSS_MBPS.iter().rev().map(|&k| pathquick::CAPACITY_MBPS - k as f64).collect();
    let mut s = format!(
        "{TRAINS} trains per level and method: the median of their estimates, and the share within ±{} Mb/s of the truth\n",
        pathquick::CLOSE_MBPS
    );
    let _ = writeln!(
        s,
        "{:>14} {:>17} {:>9} {:>17} {:>9}",
        "true A (Mb/s)", "PathQuick median", "±2", "pathChirp median", "±2"
    );
    let (mut errors, mut pq_within, mut pq_trains) = (Vec::new(), 0, 0);
    for &a in &truths {
        let (pq, pw, pn, _) = level("pathquick", a);
        let (pc, cw, cn, _) = level("pathchirp", a);
        let _ = writeln!(
            s,
            "{a:>14.1} {:>17.2} {:>8.0}% {:>17.2} {:>8.0}%",
            median(&pq),
            100.0 * pw as f64 / pn.max(1) as f64,
            median(&pc),
            100.0 * cw as f64 / cn.max(1) as f64
        );
        errors.push(median(&pq) - a);
        pq_within += pw;
        pq_trains += pn;
    }
    let time = |method: &str| stats::mean(&truths.iter().map(|&a| level(method, a).3).collect::<Vec<_>>());
    let (pq_ms, pc_ms) = (time("pathquick").unwrap_or(f64::NAN), time("pathchirp").unwrap_or(f64::NAN));
    let _ = writeln!(s, "time per estimate (train and reply): PathQuick {pq_ms:.0} ms, pathChirp {pc_ms:.0} ms");
    let lo = errors.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = errors.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let _ = writeln!(
        s,
        "=> PathQuick's median estimate was {lo:+.1} to {hi:+.1} Mb/s off the true available bandwidth\n   \
         ({:.0} % of its trains within ±{} Mb/s); each estimate took {:.2} s, {:.1}x faster than pathChirp's.",
        100.0 * pq_within as f64 / pq_trains.max(1) as f64,
        pathquick::CLOSE_MBPS,
        pq_ms / 1e3,
        pc_ms / pq_ms
    );

    let shift = |method: &str| if method == "pathquick" { -0.12 } else { 0.12 };
    let scatter = |method: &'static str, label: &str| {
        let pts = rows
            .iter()
            .filter(|r| r.method == method)
            .filter_map(|r| r.value_mbps.map(|v| (r.available_mbps + shift(method), v)))
            .collect();
        Series::points(label, pts)
    };
    let chart = Chart {
        title: "PathQuick and pathChirp: estimate against the true available bandwidth".into(),
        x_label: "true available bandwidth (Mb/s)".into(),
        y_label: "estimate (Mb/s)".into(),
        series: vec![
            scatter("pathquick", "PathQuick, one estimate per train"),
            scatter("pathchirp", "pathChirp, one estimate per chirp"),
            Series::reference("ideal (estimate = truth)", vec![(0.0, 0.0), (12.0, 12.0)]),
        ],
        y_range: Some((0.0, 14.0)),
        ..Default::default()
    };
    std::fs::write(dir.join("estimate.svg"), chart.to_svg())?;
    Ok(s)
}

/// The CSV's precision (4 decimals): the printed medians are those of the written values.
fn round4(v: f64) -> f64 {
    format!("{v:.4}").parse().unwrap_or(v)
}

const INLINE: &str = include_str!("../../../scenarios/demo/inline.toml");
const INLINE_ORIGIN: &str = "scenarios/demo/inline.toml";
/// Seconds after each change of the cross traffic left out of a phase's statistics (the
/// measurement's search range needs a few estimates to move to the new value).
const SETTLE_S: f64 = 5.0;

/// The true available bandwidth of a scenario over time: the bottleneck's rate minus the mean
/// rates of the UDP sources active, as phases `(start, end, Mb/s)` between the sources' start and
/// stop times. Only constant-mean sources (CBR, Poisson) have one truth per phase.
fn phases(sc: &Scenario, bottleneck: (&str, &str)) -> Result<Vec<(f64, f64, f64)>> {
    let link = sc
        .links
        .iter()
        .find(|l| (l.a.get_ref().as_str(), l.b.get_ref().as_str()) == bottleneck)
        .with_context(|| format!("no link {} -> {}", bottleneck.0, bottleneck.1))?;
    // Whole microseconds: the phases' edges as the file states them.
    let secs = |d: Dur| (d.as_secs_f64() * 1e6).round() / 1e6;
    let end = secs(sc.duration);
    let mut cuts = vec![0.0, end];
    let mut sources = Vec::new();
    for u in &sc.udp {
        let rate = match u.pattern {
            UdpPattern::Cbr { rate } | UdpPattern::Poisson { rate } => rate.as_mbps() * f64::from(u.count),
            ref other => anyhow::bail!("cross traffic {other:?} has no constant mean rate"),
        };
        let (a, b) = (u.start.map_or(0.0, secs), u.stop.map_or(end, secs).min(end));
        cuts.extend([a, b]);
        sources.push((a, b, rate));
    }
    cuts.sort_by(f64::total_cmp);
    cuts.dedup();
    Ok(cuts
        .windows(2)
        .map(|w| {
            let cross: f64 = sources.iter().filter(|s| s.0 <= w[0] && s.1 >= w[1]).map(|s| s.2).sum();
            (w[0], w[1], link.rate.as_mbps() - cross)
        })
        .collect())
}

fn truth_at(phases: &[(f64, f64, f64)], t: f64) -> f64 {
    phases.iter().find(|p| t >= p.0 && t < p.1).or(phases.last()).map_or(f64::NAN, |p| p.2)
}

fn inline(dir: &Path) -> Result<String> {
    let base = Base::load(INLINE, INLINE_ORIGIN)?;
    let sc = base.edited(|sc| {
        sc.seed = seed();
        Ok(())
    })?;
    let phases = phases(&sc, ("r1", "r2"))?;
    let (w, r) = run_world(&sc)?;
    let transfer = r.flows.iter().find(|f| f.kind == FlowKind::Tcp).context("the scenario has no TCP transfer")?;
    let estimates: Vec<(f64, f64, bool)> = w
        .estimates
        .iter()
        .filter(|e| e.method == EstimateMethod::Imtcp)
        .filter_map(|e| e.value.map(|v| (e.time.as_secs_f64(), round4(v.as_mbps()), e.verdict == Verdict::Estimate)))
        .collect();
    let throughput = series_of(&w, &transfer.name, Metric::ThroughputBps, 1e-6);
    let mut csv = String::from("time_s,estimate_mbps,in_range,truth_mbps\n");
    for (t, v, ok) in &estimates {
        let _ = writeln!(csv, "{t:.6},{v:.4},{ok},{}", truth_at(&phases, *t));
    }
    std::fs::write(dir.join("estimates.csv"), csv)?;
    let mut csv = String::from("time_s,transfer_mbps,truth_mbps\n");
    for (t, v) in &throughput {
        let _ = writeln!(csv, "{t:.1},{v:.3},{}", truth_at(&phases, t - 1e-9));
    }
    std::fs::write(dir.join("throughput.csv"), csv)?;

    let mut s = format!(
        "one Reno transfer with ImTCP inline measurement: {} estimates in {:.0} s, no probe packets\n\
         (per phase: the estimates from {SETTLE_S:.0} s after its start on)\n",
        estimates.len(),
        sc.duration.as_secs_f64()
    );
    let _ = writeln!(
        s,
        "{:>10} {:>14} {:>10} {:>16} {:>8} {:>15}",
        "phase", "true A (Mb/s)", "estimates", "median estimate", "error", "transfer (Mb/s)"
    );
    let mut worst: f64 = 0.0;
    for &(a, b, truth) in &phases {
        let mut v: Vec<f64> = estimates.iter().filter(|e| e.0 >= a + SETTLE_S && e.0 < b).map(|e| e.1).collect();
        v.sort_by(f64::total_cmp);
        let m = median(&v);
        let err = (m - truth) / truth;
        worst = worst.max(err.abs());
        let tput = crate::reproduce::mean_between(&throughput, a, b);
        let _ = writeln!(
            s,
            "{:>10} {truth:>14.1} {:>10} {m:>16.2} {:>7.1}% {tput:>15.1}",
            format!("{a:.0}-{b:.0} s"),
            v.len(),
            100.0 * err
        );
    }
    let _ = writeln!(
        s,
        "=> ImTCP's median estimate was within {:.0} % of the true available bandwidth in every phase,\n   \
         measured with the transfer's own data packets while it moved {:.1} Mb/s on average.",
        100.0 * worst,
        transfer.throughput_mbps
    );

    let truth_line: Vec<(f64, f64)> = phases.iter().flat_map(|p| [(p.0, p.2), (p.1, p.2)]).collect();
    let chart = Chart {
        title: "ImTCP: inline estimate during a TCP transfer".into(),
        x_label: "time (s)".into(),
        y_label: "bandwidth (Mb/s)".into(),
        series: vec![
            Series::points("ImTCP estimate", estimates.iter().map(|e| (e.0, e.1)).collect()),
            Series::line("transfer throughput, 1 s averages", throughput.clone()),
            Series::reference("true available bandwidth", truth_line),
        ],
        y_range: Some((0.0, 60.0)),
        ..Default::default()
    };
    std::fs::write(dir.join("inline.svg"), chart.to_svg())?;
    Ok(s)
}

const WEB: &str = include_str!("../../../scenarios/imtcp-bg/web.toml");
const WEB_ORIGIN: &str = "scenarios/imtcp-bg/web.toml";
/// Simulated time per background run (the file's 200 s shortened to keep the demo short).
const BG_SECONDS: u64 = 100;
/// Seeds per background controller (base seed, +1, ...): the table shows their mean.
const BG_SEEDS: u64 = 3;

fn background(dir: &Path) -> Result<String> {
    let base = Base::load(WEB, WEB_ORIGIN)?;
    let controllers: [(&str, Option<CcKind>); 3] =
        [("none", None), ("reno", Some(CcKind::Reno)), ("imtcp-bg", Some(CcKind::ImtcpBg(Default::default())))];
    let mut jobs = Vec::new();
    for k in 0..BG_SEEDS {
        for (_, cc) in &controllers {
            jobs.push(base.edited(|sc| {
                sc.duration = Dur::from_secs(BG_SECONDS);
                sc.seed = seed() + k;
                match cc {
                    Some(cc) => imtcp_bg::set_background(sc, *cc),
                    None => sc.tcp.clear(),
                }
                Ok(())
            })?);
        }
    }
    let mut results = par_map(&jobs, |sc| {
        let (w, r) = run_world(sc)?;
        let bg = r
            .flows
            .iter()
            .find(|f| f.kind == FlowKind::Tcp)
            .map(|f| series_of(&w, &f.name, Metric::ThroughputBps, 1e-6));
        Ok((r, bg.unwrap_or_default()))
    })?;
    // (seed, controller, background Mb/s, spare Mb/s of the seed's run without background, page time s)
    let mut rows = Vec::new();
    let mut timelines = Vec::new();
    for k in 0..BG_SEEDS {
        let mut spare = f64::NAN;
        for (label, _) in &controllers {
            let (r, bg) = results.take()?;
            if *label == "none" {
                spare = imtcp_bg::available(&r);
            }
            rows.push((seed() + k, *label, imtcp_bg::bg_mbps(&r), spare, imtcp_bg::mean_page_time(&r)));
            if k == 0 {
                timelines.push((*label, bg));
            }
        }
    }
    let mut csv = String::from("seed,background,background_mbps,spare_mbps,mean_page_time_s\n");
    for (seed, label, bg, spare, page) in &rows {
        let _ = writeln!(csv, "{seed},{label},{bg:.3},{spare:.3},{page:.4}");
    }
    std::fs::write(dir.join("runs.csv"), csv)?;

    // Means over the seeds of the values as written (3 and 4 decimals).
    let mean_of = |label: &str, f: fn(&(u64, &str, f64, f64, f64)) -> f64| {
        let v: Vec<f64> = rows.iter().filter(|r| r.1 == label).map(f).collect();
        stats::mean(&v).unwrap_or(f64::NAN)
    };
    let spare = mean_of("none", |r| round3(r.3));
    let none_page = mean_of("none", |r| round4(r.4));
    let mut s = format!(
        "50 Mb/s, 10 ms, web traffic from 20 servers to 200 clients; {BG_SECONDS} s per run, mean of {BG_SEEDS} seeds;\n\
         spare bandwidth: what the web traffic alone leaves unused ({spare:.1} Mb/s)\n"
    );
    let _ = writeln!(
        s,
        "{:<12} {:>17} {:>14} {:>16} {:>16}",
        "background", "background (Mb/s)", "% of spare", "page time (s)", "vs no background"
    );
    let mut line = std::collections::BTreeMap::new();
    for (label, _) in &controllers {
        let bg = mean_of(label, |r| round3(r.2));
        let page = mean_of(label, |r| round4(r.4));
        let _ = writeln!(
            s,
            "{label:<12} {bg:>17.1} {:>13.0}% {page:>16.3} {:>15.2}x",
            100.0 * bg / spare,
            page / none_page
        );
        line.insert(*label, (100.0 * bg / spare, page / none_page));
    }
    let (bg, reno) = (line["imtcp-bg"], line["reno"]);
    let _ = writeln!(
        s,
        "=> ImTCP-bg used {:.0} % of the spare bandwidth and changed the web's mean page time by {:+.0} %;\n   \
         Reno as the background took {:.0} % of it and made the pages {:.1}x slower.",
        bg.0,
        100.0 * (bg.1 - 1.0),
        reno.0,
        reno.1
    );

    let spare_line: Vec<(f64, f64)> = vec![(0.0, spare), (BG_SECONDS as f64, spare)];
    let mut series: Vec<Series> = timelines
        .iter()
        .filter(|t| t.0 != "none")
        .map(|(label, pts)| Series::line(format!("{label} background, 1 s averages"), pts.clone()))
        .collect();
    series.push(Series::reference("spare bandwidth (mean of the seeds)", spare_line));
    let timeline = Chart {
        title: format!("background throughput, seed {}", seed()),
        x_label: "time (s)".into(),
        y_label: "throughput (Mb/s)".into(),
        series,
        y_range: Some((0.0, 50.0)),
        ..Default::default()
    };
    let pages = Chart {
        title: "mean web page download time, per seed".into(),
        x_label: "background transfer".into(),
        y_label: "mean page download time (s)".into(),
        series: (0..BG_SEEDS)
            .map(|k| {
                let pts = controllers
                    .iter()
                    .enumerate()
                    .filter_map(|(i, c)| rows.iter().find(|r| r.0 == seed() + k && r.1 == c.0).map(|r| (i as f64, r.4)))
                    .collect();
                Series::points(format!("seed {}", seed() + k), pts)
            })
            .collect(),
        x_categories: controllers.iter().map(|c| c.0.to_string()).collect(),
        ..Default::default()
    };
    std::fs::write(
        dir.join("background.svg"),
        panels_svg("A background transfer beside web traffic: ImTCP-bg against Reno", &[timeline, pages]),
    )?;
    Ok(s)
}

fn round3(v: f64) -> f64 {
    format!("{v:.3}").parse().unwrap_or(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_follow_the_cross_traffic_of_the_file() {
        let sc = Scenario::parse(INLINE, INLINE_ORIGIN).unwrap();
        let p = phases(&sc, ("r1", "r2")).unwrap();
        assert_eq!(p, vec![(0.0, 20.0, 40.0), (20.0, 40.0, 20.0), (40.0, 60.0, 40.0)]);
        assert_eq!(truth_at(&p, 20.0), 20.0);
        assert_eq!(truth_at(&p, 60.0), 40.0);
        assert!(phases(&sc, ("r2", "nowhere")).is_err());
    }

    #[test]
    fn the_median_is_the_middle_value() {
        assert_eq!(median(&[1.0, 2.0, 9.0]), 2.0);
        assert_eq!(median(&[1.0, 2.0, 3.0, 9.0]), 3.0);
        assert!(median(&[]).is_nan());
    }
}
