//! `headroom reproduce NAME...`: rerun a paper's experiment and write CSV, an SVG plot and a
//! side-by-side summary (ours against the paper's figures) into `--out` (default `out/NAME`).
//! The scenarios are embedded in the binary, so an installed `headroom` needs no checkout.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use headroom_sim::world::Metric;
use headroom_sim::{Scenario, World};

#[derive(Args, Debug)]
pub struct ReproduceArgs {
    /// Experiments to run (`list` shows them, `all` runs every one).
    #[arg(required = true)]
    pub names: Vec<String>,
    /// Output directory (one sub-directory per experiment).
    #[arg(long, default_value = "out")]
    pub out: PathBuf,
}

mod becc;
mod imtcp;
mod overlay;
mod pathquick;

/// One reproducible experiment: `run` writes its files into the directory it is given and
/// returns the side-by-side summary (ours against the paper's figures).
pub struct Experiment {
    pub name: &'static str,
    pub about: &'static str,
    pub run: fn(&Path) -> Result<String>,
}

/// Every experiment, paper by paper.
fn experiments() -> Vec<&'static Experiment> {
    becc::EXPERIMENTS
        .iter()
        .chain(imtcp::EXPERIMENTS)
        .chain(pathquick::EXPERIMENTS)
        .chain(overlay::EXPERIMENTS)
        .collect()
}

pub fn run(a: ReproduceArgs) -> Result<()> {
    if a.names.iter().any(|n| n == "list") {
        for e in experiments() {
            println!("{:<14} {}", e.name, e.about);
        }
        return Ok(());
    }
    crate::outdir::writable_dir(Some(&a.out), "--out")?;
    let chosen: Vec<&Experiment> = if a.names.iter().any(|n| n == "all") {
        experiments()
    } else {
        a.names
            .iter()
            .map(|n| {
                experiments()
                    .into_iter()
                    .find(|e| e.name == n)
                    .ok_or_else(|| anyhow::anyhow!("unknown experiment `{n}` (see `headroom reproduce list`)"))
            })
            .collect::<Result<_>>()?
    };
    for e in chosen {
        let dir = a.out.join(e.name);
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        println!("== {} — {}", e.name, e.about);
        let summary = (e.run)(&dir)?;
        std::fs::write(dir.join("summary.txt"), &summary)?;
        print!("{summary}");
        println!("(files in {})\n", dir.display());
    }
    Ok(())
}

/// Runs a scenario and writes its standard outputs; returns the world for plots.
pub fn run_scenario(dir: &Path, src: &str, origin: &str) -> Result<(World, headroom_sim::Report)> {
    let sc = Scenario::parse(src, origin)?;
    let mut w = World::new(&sc, None).map_err(anyhow::Error::msg)?;
    w.run();
    let r = w.report();
    headroom_sim::output::write_all(dir, &w, &r)?;
    Ok((w, r))
}

pub fn series_of(w: &World, name: &str, metric: Metric, scale: f64) -> Vec<(f64, f64)> {
    let Some(idx) = w.series.iter().position(|s| s == name) else { return Vec::new() };
    w.trace
        .iter()
        .filter(|r| r.series as usize == idx && r.metric == metric)
        .map(|r| (r.time.as_secs_f64(), r.value * scale))
        .collect()
}

pub fn mean_between(points: &[(f64, f64)], a: f64, b: f64) -> f64 {
    let v: Vec<f64> = points.iter().filter(|p| p.0 > a && p.0 <= b).map(|p| p.1).collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}
