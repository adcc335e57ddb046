//! `headroom reproduce NAME...`: rerun a paper's experiment and write CSV, an SVG plot and a
//! side-by-side summary (ours against the paper's figures) into `--out` (default `out/NAME`).
//! The scenarios are embedded in the binary, so an installed `headroom` needs no checkout.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use headroom_sim::world::Metric;
use headroom_sim::{Scenario, World};
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;

#[derive(Args, Debug)]
pub struct ReproduceArgs {
    /// Experiments to run (`list` shows them, `all` runs every one).
    #[arg(required = true)]
    pub names: Vec<String>,
    /// Output directory (one sub-directory per experiment).
    #[arg(long, default_value = "out")]
    pub out: PathBuf,
    /// Also write `report.md` and a self-contained `report.html` into `--out`.
    #[arg(long)]
    pub report: bool,
}

mod becc;
mod imtcp;
pub(crate) mod imtcp_bg;
mod imtcp_fullspeed;
pub(crate) mod overlay;
pub(crate) mod pathquick;
pub(crate) mod report;

/// One reproducible experiment: `run` writes its files into the directory it is given and
/// returns the side-by-side summary (ours against the paper's figures).
pub struct Experiment {
    pub name: &'static str,
    pub about: &'static str,
    /// The scenario files (in the repository, embedded in the binary) the experiment's runs are
    /// built on; empty where the set-up is built in code.
    pub scenarios: &'static [&'static str],
    pub run: fn(&Path) -> Result<String>,
}

/// Every experiment, paper by paper.
fn experiments() -> Vec<&'static Experiment> {
    becc::EXPERIMENTS
        .iter()
        .chain(imtcp::EXPERIMENTS)
        .chain(imtcp_fullspeed::EXPERIMENTS)
        .chain(imtcp_bg::EXPERIMENTS)
        .chain(pathquick::EXPERIMENTS)
        .chain(overlay::EXPERIMENTS)
        .collect()
}

/// Experiments on the namespace testbed (root): listed, run only when named (never by `all`,
/// which stays the simulator's and needs no privileges), one at a time after the simulator's
/// (their timing must not share the CPUs with simulator runs).
fn testbed_experiments() -> Vec<&'static Experiment> {
    pathquick::TESTBED_EXPERIMENTS.iter().collect()
}

pub fn run(a: ReproduceArgs) -> Result<()> {
    if a.names.iter().any(|n| n == "list") {
        for e in experiments() {
            println!("{:<14} {}", e.name, e.about);
        }
        for e in testbed_experiments() {
            println!("{:<14} {} [root; not in `all`]", e.name, e.about);
        }
        return Ok(());
    }
    crate::outdir::writable_dir(Some(&a.out), "--out")?;
    let (chosen, testbed): (Vec<&Experiment>, Vec<&Experiment>) = if a.names.iter().any(|n| n == "all") {
        (experiments(), Vec::new())
    } else {
        let mut sim = Vec::new();
        let mut bed = Vec::new();
        for n in &a.names {
            if let Some(e) = experiments().into_iter().find(|e| e.name == n) {
                sim.push(e);
            } else if let Some(e) = testbed_experiments().into_iter().find(|e| e.name == n) {
                bed.push(e);
            } else {
                anyhow::bail!("unknown experiment `{n}` (see `headroom reproduce list`)");
            }
        }
        (sim, bed)
    };
    if let (Some(e), Some(why)) =
        (testbed.first(), headroom_testbed::unsupported_reason().filter(|_| !testbed.is_empty()))
    {
        anyhow::bail!("{} runs on the namespace testbed, which needs root: {why}", e.name);
    }
    let started = Instant::now();
    let mut outcomes = run_parallel(&chosen, &a.out).into_iter().collect::<Result<Vec<_>>>()?;
    for e in &testbed {
        let t = Instant::now();
        let dir = a.out.join(e.name);
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let summary = (e.run)(&dir).with_context(|| format!("experiment {}", e.name))?;
        std::fs::write(dir.join("summary.txt"), &summary)?;
        outcomes.push(Outcome { summary, dir, wall: t.elapsed() });
    }
    let chosen: Vec<&Experiment> = chosen.into_iter().chain(testbed).collect();
    for (e, o) in chosen.iter().zip(&outcomes) {
        println!("== {} — {}", e.name, e.about);
        print!("{}", o.summary);
        println!("(files in {})", o.dir.display());
        println!("wall time {:.1} s\n", o.wall.as_secs_f64());
    }
    println!("reproduce: {} experiment(s) in {:.1} s wall", chosen.len(), started.elapsed().as_secs_f64());
    if a.report {
        let runs: Vec<(&Experiment, &Outcome)> = chosen.iter().copied().zip(&outcomes).collect();
        let path = report::write(&a.out, &runs)?;
        println!("report: {} (and report.md beside it)", path.display());
    }
    Ok(())
}

/// What one experiment left: its summary (also in `summary.txt`), its directory and wall time.
pub struct Outcome {
    pub summary: String,
    pub dir: PathBuf,
    pub wall: Duration,
}

/// Runs the experiments on rayon's pool (each one's own runs in parallel too), with a progress
/// bar on a terminal; the outcomes come back in the experiments' order whatever the threads.
fn run_parallel(chosen: &[&Experiment], out: &Path) -> Vec<Result<Outcome>> {
    let bar = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(chosen.len() as u64);
        bar.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} experiments {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    let outcomes = chosen
        .par_iter()
        .map(|e| {
            let t = Instant::now();
            let dir = out.join(e.name);
            std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            let summary = (e.run)(&dir).with_context(|| format!("experiment {}", e.name))?;
            std::fs::write(dir.join("summary.txt"), &summary)?;
            bar.inc(1);
            bar.set_message(e.name);
            Ok(Outcome { summary, dir, wall: t.elapsed() })
        })
        .collect();
    bar.finish_and_clear();
    outcomes
}

/// Runs a scenario and writes its standard outputs; returns the world for plots.
pub fn run_scenario(dir: &Path, src: &str, origin: &'static str) -> Result<(World, headroom_sim::Report)> {
    let (w, r) = run_world(&Base::load(src, origin)?.sc)?;
    headroom_sim::output::write_all(dir, &w, &r)?;
    Ok((w, r))
}

/// Runs `f` on every item on rayon's pool (the threads of `RAYON_NUM_THREADS`, or one per
/// core) and returns the results in the items' order, so the files written from them do not
/// depend on the number of threads. The first error (in item order) is returned.
pub fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> Result<R> + Sync + Send) -> Result<Results<R>> {
    let out: Result<Vec<R>> = items.par_iter().map(f).collect();
    Ok(Results(out?.into_iter()))
}

/// The results of [`par_map`], taken in the order the runs were listed.
pub struct Results<R>(std::vec::IntoIter<R>);

impl<R> Results<R> {
    /// The next run's result (an error, not a panic, if the runs were listed short).
    pub fn take(&mut self) -> Result<R> {
        self.0.next().context("internal: fewer results than the experiment listed runs")
    }
}

/// Runs a scenario (its own seed) without writing its standard outputs.
pub fn run_world(sc: &Scenario) -> Result<(World, headroom_sim::Report)> {
    let mut w = World::new(sc, None).map_err(anyhow::Error::msg)?;
    w.run();
    let r = w.report();
    Ok((w, r))
}

/// An experiment's embedded scenario file, parsed and validated. Experiments change it through
/// the typed [`Scenario`] ([`Base::edited`]), never by editing its text, so a changed file
/// cannot silently turn an edit into a no-op.
pub struct Base {
    pub origin: &'static str,
    pub sc: Scenario,
}

impl Base {
    pub fn load(src: &str, origin: &'static str) -> Result<Base> {
        Ok(Base { origin, sc: Scenario::parse(src, origin)? })
    }

    /// A copy changed by `edit` and checked again as a file would be.
    pub fn edited(&self, edit: impl FnOnce(&mut Scenario) -> Result<()>) -> Result<Scenario> {
        let mut sc = self.sc.clone();
        edit(&mut sc).with_context(|| format!("{}: the experiment cannot make its change", self.origin))?;
        sc.check_edited(&format!("{} (as changed by the experiment)", self.origin))?;
        Ok(sc)
    }
}

/// The single entry of a scenario list (`[[tcp]]`, `[[probe]]`, ...) that an experiment changes;
/// an error when the file has none or several.
pub fn only<'a, T>(items: &'a mut [T], what: &str) -> Result<&'a mut T> {
    match items {
        [one] => Ok(one),
        _ => anyhow::bail!("expected exactly one `[[{what}]]` entry, found {}", items.len()),
    }
}

pub fn series_of(w: &World, name: &str, metric: Metric, scale: f64) -> Vec<(f64, f64)> {
    let Some(idx) = w.series.iter().position(|s| s == name) else { return Vec::new() };
    w.trace
        .iter()
        .filter(|r| r.series as usize == idx && r.metric == metric)
        .map(|r| (r.time.as_secs_f64(), r.value * scale))
        .collect()
}

/// A claim line's verdict: "yes" when it holds, "NO" (visible in a column of yeses) when not.
pub fn holds(ok: bool) -> &'static str {
    if ok {
        "yes"
    } else {
        "NO"
    }
}

pub fn mean_between(points: &[(f64, f64)], a: f64, b: f64) -> f64 {
    let v: Vec<f64> = points.iter().filter(|p| p.0 > a && p.0 <= b).map(|p| p.1).collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}
