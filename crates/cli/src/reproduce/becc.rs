//! The BECC paper's experiments (Kugimoto & Amagai 1997): Figs. 2, 10, 11, 12, 13.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{bail, Result};
use headroom_sim::scenario::CcKind;
use headroom_sim::world::Metric;
use headroom_sim::{sweep, Scenario};

use super::{mean_between, par_map, run_scenario, run_world, series_of, Experiment};
use crate::plot::{Chart, Series};

pub const EXPERIMENTS: &[Experiment] = &[
    Experiment {
        name: "becc-fig2",
        about: "BECC Fig. 2: Reno throughput vs maximum window, 45 Mb/s, 10 ms (intermittent transfer)",
        run: becc_fig2,
    },
    Experiment {
        name: "becc-fig10",
        about: "BECC Fig. 10: BECC vs Reno, maximum window 30-350 KB, 45 Mb/s",
        run: becc_fig10,
    },
    Experiment {
        name: "becc-fig11",
        about: "BECC Fig. 11: BECC vs Reno, maximum window 30-350 KB, 10 Mb/s",
        run: becc_fig11,
    },
    Experiment {
        name: "becc-fig12",
        about: "BECC Fig. 12: tracking a 20 Mb/s UDP load switched off at 10 s and on at 20 s",
        run: becc_fig12,
    },
    Experiment { name: "becc-fig13", about: "BECC Fig. 13: two BECC flows", run: becc_fig13 },
];

const FIG2: &str = include_str!("../../../../scenarios/becc/fig2.toml");
const FIG10: &str = include_str!("../../../../scenarios/becc/fig10.toml");
const FIG11: &str = include_str!("../../../../scenarios/becc/fig11.toml");
const FIG12: &str = include_str!("../../../../scenarios/becc/fig12.toml");
const FIG13: &str = include_str!("../../../../scenarios/becc/fig13.toml");

/// One sweep point: the maximum window, and per controller (in the order asked for) the flow's
/// throughput and retransmission timeouts.
struct SweepRow {
    max_window_kb: f64,
    throughput_mbps: Vec<f64>,
    timeouts: Vec<u64>,
}

fn kb(v: &toml::Value) -> f64 {
    headroom_core::units::parse_bytes(&sweep::label(v)).map(|b| b.0 as f64 / 1000.0).unwrap_or(f64::NAN)
}

/// Runs the scenario's `[sweep]` once per controller: every `[[tcp]]` entry of each sweep point
/// gets the controller (a typed edit, whatever the file names), and every run is checked to have
/// run it.
fn window_sweep(src: &str, origin: &str, ccs: &[CcKind]) -> Result<Vec<SweepRow>> {
    let sc = Scenario::parse(src, origin)?;
    let Some(sw) = sc.sweep else { bail!("{origin}: no [sweep]") };
    if sc.tcp.is_empty() {
        bail!("{origin}: no [[tcp]] flow to give the controllers");
    }
    let points = sweep::scenarios(src, origin, &sw.key, &sw.values)?;
    let mut rows: Vec<SweepRow> = points
        .iter()
        .map(|(v, _)| SweepRow { max_window_kb: kb(v), throughput_mbps: Vec::new(), timeouts: Vec::new() })
        .collect();
    let mut runs = Vec::new();
    for &cc in ccs {
        for (v, point) in &points {
            let mut point = point.clone();
            for t in &mut point.tcp {
                t.cc = cc;
            }
            point.check_edited(&format!("{origin} [{} = {v}, cc = {cc}]", sw.key))?;
            runs.push((cc, point));
        }
    }
    let mut results = par_map(&runs, |(cc, point)| {
        let (_, report) = run_world(point)?;
        let flow = &report.flows[0];
        if flow.cc.as_deref() != Some(cc.name()) {
            bail!("{origin}: asked for {cc}, the run used {:?}", flow.cc);
        }
        Ok((flow.throughput_mbps, flow.timeouts))
    })?;
    for _ in ccs {
        for row in &mut rows {
            let (tput, timeouts) = results.take()?;
            row.throughput_mbps.push(tput);
            row.timeouts.push(timeouts);
        }
    }
    Ok(rows)
}

fn mean_where(rows: &[SweepRow], k: usize, keep: impl Fn(f64) -> bool) -> f64 {
    let v: Vec<f64> = rows.iter().filter(|r| keep(r.max_window_kb)).map(|r| r.throughput_mbps[k]).collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn write_sweep(dir: &Path, file: &str, title: &str, ccs: &[CcKind], rows: &[SweepRow]) -> Result<()> {
    let mut csv = String::from("max_window_kb");
    for cc in ccs {
        let _ = write!(csv, ",{cc}_mbps,{cc}_timeouts");
    }
    csv.push('\n');
    for r in rows {
        let _ = write!(csv, "{}", r.max_window_kb);
        for k in 0..ccs.len() {
            let _ = write!(csv, ",{:.3},{}", r.throughput_mbps[k], r.timeouts[k]);
        }
        csv.push('\n');
    }
    std::fs::write(dir.join(format!("{file}.csv")), csv)?;
    let chart = Chart {
        title: title.into(),
        x_label: "maximum window (KB)".into(),
        y_label: "throughput (Mb/s)".into(),
        series: ccs
            .iter()
            .enumerate()
            .map(|(k, cc)| {
                Series::line(cc.to_string(), rows.iter().map(|r| (r.max_window_kb, r.throughput_mbps[k])).collect())
            })
            .collect(),
        ..Default::default()
    };
    std::fs::write(dir.join(format!("{file}.svg")), chart.to_svg())?;
    Ok(())
}

fn becc_fig2(dir: &Path) -> Result<String> {
    let rows = window_sweep(FIG2, "scenarios/becc/fig2.toml", &[CcKind::Reno])?;
    write_sweep(dir, "fig2", "BECC Fig. 2: Reno, 45 Mb/s, 10 ms RTT", &[CcKind::Reno], &rows)?;
    let mut s = String::new();
    let _ = writeln!(s, "{:<26} {:>12} {:>12}", "Reno throughput", "paper", "headroom");
    let _ = writeln!(
        s,
        "{:<26} {:>12} {:>12.1}",
        "windows 90-200 KB (Mb/s)",
        "~41",
        mean_where(&rows, 0, |w| (90.0..=200.0).contains(&w))
    );
    let _ =
        writeln!(s, "{:<26} {:>12} {:>12.1}", "windows > 200 KB (Mb/s)", "~12", mean_where(&rows, 0, |w| w > 200.0));
    Ok(s)
}

fn becc_sweep_fig(
    dir: &Path,
    src: &str,
    origin: &str,
    file: &str,
    title: &str,
    paper_reno: &str,
    paper_becc: &str,
) -> Result<String> {
    let ccs = [CcKind::Reno, CcKind::Becc];
    let rows = window_sweep(src, origin, &ccs)?;
    write_sweep(dir, file, title, &ccs, &rows)?;
    let mut s = String::new();
    let _ = writeln!(s, "{:<34} {:>10} {:>10}", "windows beyond 220 KB (Mb/s)", "paper", "headroom");
    let _ = writeln!(s, "{:<34} {:>10} {:>10.1}", "Reno", paper_reno, mean_where(&rows, 0, |w| w > 220.0));
    let _ = writeln!(s, "{:<34} {:>10} {:>10.1}", "BECC", paper_becc, mean_where(&rows, 1, |w| w > 220.0));
    let _ = writeln!(
        s,
        "{:<34} {:>10} {:>10.1}",
        "both, windows <= 200 KB: Reno",
        "alike",
        mean_where(&rows, 0, |w| w <= 200.0)
    );
    let _ = writeln!(
        s,
        "{:<34} {:>10} {:>10.1}",
        "both, windows <= 200 KB: BECC",
        "alike",
        mean_where(&rows, 1, |w| w <= 200.0)
    );
    Ok(s)
}

fn becc_fig10(dir: &Path) -> Result<String> {
    becc_sweep_fig(dir, FIG10, "scenarios/becc/fig10.toml", "fig10", "BECC Fig. 10: 45 Mb/s, 10 ms RTT", "~12", "~30")
}

fn becc_fig11(dir: &Path) -> Result<String> {
    becc_sweep_fig(
        dir,
        FIG11,
        "scenarios/becc/fig11.toml",
        "fig11",
        "BECC Fig. 11: 10 Mb/s, 10 ms RTT",
        "lower",
        "higher",
    )
}

fn becc_fig12(dir: &Path) -> Result<String> {
    let (w, r) = run_scenario(dir, FIG12, "scenarios/becc/fig12.toml")?;
    let becc = series_of(&w, "becc", Metric::ThroughputBps, 1e-6);
    let udp: Vec<(f64, f64)> = series_of(&w, "udp-0-10s", Metric::ThroughputBps, 1e-6)
        .iter()
        .zip(series_of(&w, "udp-from-20s", Metric::ThroughputBps, 1e-6))
        .map(|(a, b)| (a.0, a.1 + b.1))
        .collect();
    let window = series_of(&w, "becc", Metric::CeilingBytes, 8.0 / 1e6 / 0.010);
    let chart = Chart {
        title: "BECC Fig. 12: 20 Mb/s UDP on 0-10 s and from 20 s".into(),
        x_label: "time (s)".into(),
        y_label: "rate (Mb/s)".into(),
        series: vec![
            Series::line("BECC throughput", becc.clone()),
            Series::line("UDP load", udp),
            Series::line("bw window / 10 ms", window),
        ],
        y_range: Some((0.0, 50.0)),
        ..Default::default()
    };
    std::fs::write(dir.join("fig12.svg"), chart.to_svg())?;
    let mut s = String::new();
    let _ = writeln!(s, "{:<30} {:>20} {:>10}", "BECC throughput (Mb/s)", "paper", "headroom");
    let _ =
        writeln!(s, "{:<30} {:>20} {:>10.1}", "0-10 s (UDP on)", "~15 measured rate", mean_between(&becc, 0.5, 10.0));
    let _ = writeln!(s, "{:<30} {:>20} {:>10.1}", "10-20 s (UDP off)", "rises", mean_between(&becc, 10.0, 20.0));
    let _ = writeln!(
        s,
        "{:<30} {:>20} {:>10.1}",
        "20-40 s (UDP on)",
        "one stall, recovers",
        mean_between(&becc, 20.0, 40.0)
    );
    let _ = writeln!(
        s,
        "timeouts: {}; BECC state per connection: {} bytes (paper: 40)",
        r.flows[0].timeouts,
        r.flows[0].cc_state_bytes.unwrap_or(0)
    );
    Ok(s)
}

fn becc_fig13(dir: &Path) -> Result<String> {
    let (w, r) = run_scenario(dir, FIG13, "scenarios/becc/fig13.toml")?;
    let a = series_of(&w, "becc1", Metric::ThroughputBps, 1e-6);
    let b = series_of(&w, "becc2", Metric::ThroughputBps, 1e-6);
    let chart = Chart {
        title: "BECC Fig. 13: two BECC flows, 45 Mb/s".into(),
        x_label: "time (s)".into(),
        y_label: "throughput (Mb/s)".into(),
        series: vec![Series::line("becc1", a.clone()), Series::line("becc2 (from 5 s)", b.clone())],
        y_range: Some((0.0, 50.0)),
        ..Default::default()
    };
    std::fs::write(dir.join("fig13.svg"), chart.to_svg())?;
    let (ma, mb) = (mean_between(&a, 5.0, 60.0), mean_between(&b, 5.0, 60.0));
    let jain = (ma + mb).powi(2) / (2.0 * (ma * ma + mb * mb));
    let mut s = String::new();
    let _ =
        writeln!(s, "two BECC flows from 5 s to 60 s: {ma:.1} + {mb:.1} = {:.1} Mb/s, Jain index {jain:.3}", ma + mb);
    let _ = writeln!(
        s,
        "timeouts: {} and {} (paper: a few congestion episodes, then stable)",
        r.flows[0].timeouts, r.flows[1].timeouts
    );
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_sweep_runs_the_controllers_it_names_whatever_the_file_says() {
        let origin = "scenarios/becc/fig2.toml";
        let ccs = [CcKind::Reno, CcKind::Becc];
        let rows = window_sweep(FIG2, origin, &ccs).unwrap();
        assert!(!rows.is_empty());
        assert!(rows.iter().all(|r| r.throughput_mbps.len() == 2 && r.timeouts.len() == 2));
        // BECC's bandwidth window changes the result somewhere in the sweep (not Reno twice).
        assert!(rows.iter().any(|r| r.throughput_mbps[0] != r.throughput_mbps[1]));
        // A file whose flow names another controller gives the same rows: the controller is
        // set on the typed scenario (a text replacement of `cc = "reno"` would have found
        // nothing to replace and compared NewReno with NewReno).
        let edited = FIG2.replace("cc = \"reno\"", "cc = \"newreno\"");
        let again = window_sweep(&edited, origin, &ccs).unwrap();
        for (a, b) in rows.iter().zip(&again) {
            assert_eq!(a.throughput_mbps, b.throughput_mbps);
            assert_eq!(a.timeouts, b.timeouts);
        }
    }
}
