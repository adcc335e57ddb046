//! Maki et al.'s TCP overlay experiments (issue 14): Fig. 3 (throughput gain of splitting at two
//! proxies, analytic and simulated), Figs. 5–7 (transfer-delay CDFs under split policies A, B, C
//! through a loaded proxy, D = 5 ms), Fig. 8 (D = 30 ms, 1 % loss toward the clients), and
//! headroom's policy D against C on the Fig. 7 and Fig. 8 workloads.
//!
//! The set-ups are the files `scenarios/overlay/fig3.toml` and `scenarios/overlay/web.toml`
//! (embedded; parsed by `headroom_sim::overlay::experiments::{Fig3Setup, WebSetup}`; the
//! choices are documented there and in docs/overlay.md). The experiments vary only what the
//! figures vary: the grid point and the split policy. Every number in the summaries is
//! computed from the run.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use headroom_core::stats::Sorted;
use headroom_core::units::Dur;
use headroom_sim::overlay::experiments::{
    fig3_point, run_web_proxy, Fig3Point, Fig3Setup, PolicyChoice, WebProxyParams, WebProxyRun, WebSetup, FIG3_FILE,
    WEB_FILE,
};
use headroom_sim::overlay::FlowRecord;

use super::{par_map, Experiment};
use crate::plot::{cdf_points, panels_svg, Chart, Series};

pub const EXPERIMENTS: &[Experiment] = &[
    Experiment {
        name: "overlay-fig3",
        about: "Maki et al. Fig. 3: throughput gain of splitting at two proxies vs one connection, P_LAN2 x D_LAN2 (Padhye + relay model, and simulation)",
        scenarios: &["scenarios/overlay/fig3.toml"],
        run: overlay_fig3,
    },
    Experiment {
        name: "overlay-fig5-7",
        about: "Maki et al. Figs. 5-7: web transfer-delay CDFs through a loaded proxy under split policies A, B, C (D = 5 ms)",
        scenarios: &["scenarios/overlay/web.toml"],
        run: overlay_fig5_7,
    },
    Experiment {
        name: "overlay-fig8",
        about: "Maki et al. Fig. 8: policy C with D = 30 ms and 1 % loss toward the clients",
        scenarios: &["scenarios/overlay/web.toml"],
        run: overlay_fig8,
    },
    Experiment {
        name: "overlay-policy-d",
        about: "Beyond Maki et al.: policy D (proxy queueing delay) against C on the Fig. 7 and Fig. 8 workloads",
        scenarios: &["scenarios/overlay/web.toml"],
        run: overlay_policy_d,
    },
];

fn web_setup() -> Result<WebSetup> {
    WebSetup::parse(WEB_FILE, "scenarios/overlay/web.toml").map_err(anyhow::Error::msg)
}

fn overlay_fig3(dir: &Path) -> Result<String> {
    let setup = Fig3Setup::parse(FIG3_FILE, "scenarios/overlay/fig3.toml").map_err(anyhow::Error::msg)?;
    let grid: Vec<(f64, Dur)> = setup.p_lan2.iter().flat_map(|&p| setup.d_lan2.iter().map(move |&d| (p, d))).collect();
    let mut runs = par_map(&grid, |&(p, d)| Ok(fig3_point(&setup, p, d)))?;
    let points: Vec<Fig3Point> = grid.iter().map(|_| runs.take()).collect::<Result<_>>()?;
    let d_lan2_ms: Vec<u64> = setup.d_lan2.iter().map(|d| d.as_nanos() / 1_000_000).collect();
    let mut csv = String::from(
        "p_lan2,d_lan2_ms,padhye_case1_mbps,model_case2_mbps,sim_case1_mbps,sim_case2_mbps,model_gain,sim_gain\n",
    );
    for x in &points {
        writeln!(
            csv,
            "{},{},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4}",
            x.p_lan2,
            x.d_lan2.as_millis_f64(),
            x.padhye_case1 / 1e6,
            x.model_case2 / 1e6,
            x.sim_case1 / 1e6,
            x.sim_case2 / 1e6,
            x.model_gain(),
            x.sim_gain()
        )?;
    }
    std::fs::write(dir.join("fig3.csv"), &csv)?;
    let mut series = Vec::new();
    for (k, &d) in d_lan2_ms.iter().enumerate() {
        let pts = |f: fn(&Fig3Point) -> f64| -> Vec<(f64, f64)> {
            points.iter().filter(|x| x.d_lan2 == Dur::from_millis(d)).map(|x| (x.p_lan2 * 100.0, f(x))).collect()
        };
        // The model's line and the simulation's points of one delay share a colour.
        series.push(Series::line(format!("model, D_LAN2 {d} ms"), pts(Fig3Point::model_gain)).colour(k));
        series.push(Series::points(format!("sim, D_LAN2 {d} ms"), pts(Fig3Point::sim_gain)).colour(k));
    }
    let chart = Chart {
        title: "Fig. 3: Case 2 / Case 1 throughput".into(),
        x_label: "packet loss rate on LAN2, P_LAN2 (%)".into(),
        y_label: "throughput gain, split / one connection (ratio)".into(),
        series,
        ..Default::default()
    };
    std::fs::write(dir.join("fig3.svg"), chart.to_svg())?;

    let gains = |f: fn(&Fig3Point) -> f64| -> (f64, f64) {
        points.iter().map(f).fold((f64::INFINITY, 0.0f64), |(lo, hi), g| (lo.min(g), hi.max(g)))
    };
    let (mlo, mhi) = gains(Fig3Point::model_gain);
    let (slo, shi) = gains(Fig3Point::sim_gain);
    let case1_dev = |x: &Fig3Point| x.sim_case1 / x.padhye_case1 - 1.0;
    let worst1 = points.iter().max_by(|a, b| case1_dev(a).abs().total_cmp(&case1_dev(b).abs())).expect("grid");
    let case2_dev = |x: &Fig3Point| x.sim_case2 / x.model_case2 - 1.0;
    let worst2 = points.iter().max_by(|a, b| case2_dev(a).abs().total_cmp(&case2_dev(b).abs())).expect("grid");
    let within = points.iter().filter(|x| case1_dev(x).abs() <= 0.25).count();
    let mut s = String::new();
    writeln!(
        s,
        "grid: P_LAN2 {:?} x D_LAN2 {d_lan2_ms:?} ms; {} s per simulated point",
        setup.p_lan2,
        setup.duration.as_secs_f64()
    )?;
    writeln!(s, "paper: Case 2 always above Case 1, up to more than 3x")?;
    writeln!(
        s,
        "ours, model: gain {mlo:.2}-{mhi:.2}x (above 1 at {}/{} points); simulation: {slo:.2}-{shi:.2}x (above 1 at {}/{})",
        points.iter().filter(|x| x.model_gain() > 1.0).count(),
        points.len(),
        points.iter().filter(|x| x.sim_gain() > 1.0).count(),
        points.len()
    )?;
    writeln!(
        s,
        "Case 1, simulation vs Padhye: within 25 % at {within}/{} points; worst {:+.0} % at P_LAN2 {} D_LAN2 {} ms",
        points.len(),
        case1_dev(worst1) * 100.0,
        worst1.p_lan2,
        worst1.d_lan2.as_millis_f64()
    )?;
    writeln!(
        s,
        "Case 2, simulation vs relay model: worst {:+.0} % at P_LAN2 {} D_LAN2 {} ms",
        case2_dev(worst2) * 100.0,
        worst2.p_lan2,
        worst2.d_lan2.as_millis_f64()
    )?;
    Ok(s)
}

/// The curves of one run: delays (s) of split(low 10 %), split(high 10 %), split(all), non-split.
struct Curves {
    low: Vec<f64>,
    high: Vec<f64>,
    split: Vec<f64>,
    nonsplit: Vec<f64>,
    unfinished: usize,
    /// Every web transfer of the run.
    web: Vec<FlowRecord>,
}

fn curves(run: &WebProxyRun) -> Curves {
    let sizes = Sorted::new(run.web.iter().filter(|r| r.split).map(|r| r.size as f64).collect());
    let lo = sizes.quantile(0.1).unwrap_or(0.0);
    let hi = sizes.quantile(0.9).unwrap_or(f64::INFINITY);
    let done = || run.web.iter().filter_map(|r| r.delay().map(|d| (r, d.as_secs_f64())));
    Curves {
        low: done().filter(|(r, _)| r.split && (r.size as f64) <= lo).map(|x| x.1).collect(),
        high: done().filter(|(r, _)| r.split && (r.size as f64) >= hi).map(|x| x.1).collect(),
        split: done().filter(|(r, _)| r.split).map(|x| x.1).collect(),
        nonsplit: done().filter(|(r, _)| !r.split).map(|x| x.1).collect(),
        unfinished: run.web.iter().filter(|r| r.end.is_none()).count(),
        web: run.web.clone(),
    }
}

pub(crate) fn q(v: &[f64], p: f64) -> Option<f64> {
    Sorted::new(v.to_vec()).quantile(p)
}

pub(crate) fn fmt_q(v: &[f64], p: f64) -> String {
    q(v, p).map_or_else(|| "-".into(), |x| format!("{:.3}", x))
}

pub(crate) fn cdf(v: &[f64]) -> Vec<(f64, f64)> {
    let s = Sorted::new(v.to_vec()).into_vec();
    let n = s.len() as f64;
    s.iter().enumerate().map(|(i, x)| (*x, (i + 1) as f64 / n)).collect()
}

/// One run's delay CDFs (split low / high / all, non-split) as `tag.svg`; a class without
/// transfers is left out of the plot and its legend.
fn write_cdfs(dir: &Path, tag: &str, title: &str, c: &Curves) -> Result<()> {
    let chart = Chart {
        title: title.into(),
        x_label: "transfer delay, SYN to last byte (s, log scale)".into(),
        y_label: "cumulative fraction of transfers".into(),
        series: vec![
            Series::line("split(low)", cdf(&c.low)).colour(0),
            Series::line("split(high)", cdf(&c.high)).colour(1),
            Series::line("split(all)", cdf(&c.split)).colour(2),
            Series::line("nonsplit", cdf(&c.nonsplit)).colour(3),
        ]
        .into_iter()
        .filter(|se| !se.points.is_empty())
        .collect(),
        y_range: Some((0.0, 1.0)),
        x_log: true,
        ..Default::default()
    };
    std::fs::write(dir.join(format!("{tag}.svg")), chart.to_svg())?;
    Ok(())
}

/// Runs one policy, writes its transfers and (with a `title`) its CDF plot, and returns the
/// summary lines.
fn web_run(dir: &Path, tag: &str, title: Option<&str>, p: &WebProxyParams) -> Result<(Curves, String)> {
    let run = run_web_proxy(p);
    let mut csv = String::from("start_s,size_bytes,split,delay_s\n");
    for r in &run.web {
        let d = r.delay().map_or_else(String::new, |d| format!("{:.6}", d.as_secs_f64()));
        writeln!(csv, "{:.6},{},{},{}", r.start.as_secs_f64(), r.size, r.split, d)?;
    }
    std::fs::write(dir.join(format!("{tag}.csv")), &csv)?;
    let c = curves(&run);
    if let Some(title) = title {
        write_cdfs(dir, tag, title, &c)?;
    }
    let util = run.proxy.busy.as_secs_f64() / run.duration.as_secs_f64();
    let mut s = String::new();
    writeln!(
        s,
        "{tag}: web transfers {} (split {}, non-split {}, unfinished {}); proxy CPU busy {:.0} % of the run, mean wait {:.1} ms",
        run.web.len(),
        c.split.len(),
        c.nonsplit.len(),
        c.unfinished,
        util * 100.0,
        run.proxy.total_wait.as_secs_f64() * 1e3 / run.proxy.served.max(1) as f64
    )?;
    writeln!(
        s,
        "{tag}: median / p95 delay (s): split(low) {} / {}, split(high) {} / {}, split(all) {} / {}, non-split {} / {}",
        fmt_q(&c.low, 0.5),
        fmt_q(&c.low, 0.95),
        fmt_q(&c.high, 0.5),
        fmt_q(&c.high, 0.95),
        fmt_q(&c.split, 0.5),
        fmt_q(&c.split, 0.95),
        fmt_q(&c.nonsplit, 0.5),
        fmt_q(&c.nonsplit, 0.95)
    )?;
    Ok((c, s))
}

/// Runs several policies' web runs on rayon's pool ([`par_map`]; each run is independent and
/// deterministic, so the outputs do not depend on the thread count) and returns their results in
/// the order given.
fn web_runs(dir: &Path, runs: &[(String, Option<String>, WebProxyParams)]) -> Result<Vec<(Curves, String)>> {
    let mut out = par_map(runs, |(tag, title, p)| web_run(dir, tag, title.as_deref(), p))?;
    runs.iter().map(|_| out.take()).collect()
}

/// "split slower" / "split faster" from the medians.
fn verdict(c: &Curves) -> &'static str {
    match (q(&c.split, 0.5), q(&c.nonsplit, 0.5)) {
        (Some(s), Some(n)) if s > n => "split slower than non-split",
        (Some(_), Some(_)) => "split faster than non-split",
        _ => "no comparison (one class is empty)",
    }
}

fn overlay_fig5_7(dir: &Path) -> Result<String> {
    let mut s = String::new();
    let setup = web_setup()?;
    let base = setup.fig5_7(PolicyChoice::None);
    writeln!(
        s,
        "t = {} per packet (10 t per SYN / SYN-ACK); choice of t: see the split-none and split-all lines",
        base.per_packet
    )?;
    let runs = [
        ("split-none", "reference: no web connection split", PolicyChoice::None, ""),
        ("split-all", "reference: every web connection split", PolicyChoice::All, ""),
        ("fig5-policy-a", "Fig. 5: policy A (300 users)", PolicyChoice::Users(300), "split slower"),
        ("fig6-policy-b", "Fig. 6: policy B (>= 2000 bytes)", PolicyChoice::LargeDocuments, "split slower"),
        ("fig7-policy-c", "Fig. 7: policy C (L(T) < 0.9/t)", PolicyChoice::LowLoad, "split faster"),
    ];
    let jobs: Vec<_> =
        runs.iter().map(|&(tag, title, pol, _)| (tag.into(), Some(title.into()), setup.fig5_7(pol))).collect();
    for ((tag, _, _, paper), (c, lines)) in runs.iter().zip(web_runs(dir, &jobs)?) {
        s.push_str(&lines);
        if !paper.is_empty() {
            writeln!(s, "{tag}: paper: {paper} than non-split; ours: {}", verdict(&c))?;
        }
    }
    Ok(s)
}

/// Median non-split delay over median split delay (how much faster split connections are).
fn advantage(c: &Curves) -> Option<f64> {
    Some(q(&c.nonsplit, 0.5)? / q(&c.split, 0.5)?)
}

fn overlay_fig8(dir: &Path) -> Result<String> {
    let mut s = String::new();
    let setup = web_setup()?;
    let jobs = [
        ("fig7-policy-c".into(), Some("Fig. 7: policy C, D = 5 ms".into()), setup.fig5_7(PolicyChoice::LowLoad)),
        (
            "fig8-policy-c".into(),
            Some("Fig. 8: policy C, D = 30 ms, 1 % loss".into()),
            setup.fig8(PolicyChoice::LowLoad),
        ),
    ];
    let [(c7, l7), (c8, l8)]: [(Curves, String); 2] =
        web_runs(dir, &jobs)?.try_into().map_err(|_| anyhow::anyhow!("internal: two runs expected"))?;
    s.push_str(&l7);
    s.push_str(&l8);
    let f = |x: Option<f64>| x.map_or_else(|| "-".into(), |v| format!("{v:.2}"));
    writeln!(
        s,
        "paper: the gap in favour of split connections grows from Fig. 7 to Fig. 8; ours: median non-split / split = {} (Fig. 7) -> {} (Fig. 8): {}",
        f(advantage(&c7)),
        f(advantage(&c8)),
        match (advantage(&c7), advantage(&c8)) {
            (Some(a), Some(b)) if b > 1.0 && b > a => "grows",
            // A ratio below 1 means split connections are the slower ones: there is no gap in
            // their favour to grow, whichever way the ratio moves.
            (Some(_), Some(b)) if b <= 1.0 => "not reproduced: split connections are slower at Fig. 8 too (ratio below 1)",
            (Some(_), Some(_)) => "does not grow",
            _ => "no comparison",
        }
    )?;
    Ok(s)
}

/// Policy D's queueing-delay target.
pub const D_TARGET: Dur = Dur::from_millis(1);

/// The seeds policy D and C are compared over (the workload's seed; seed 1 is the figures').
const D_SEEDS: [u64; 3] = [1, 2, 3];

/// The finished web transfers of two runs of one seed, paired by (SURGE client, its `k`-th
/// file): `(record in a, record in b)`, and how many pairs had different sizes (must be 0: a
/// client's files are the same in every run of one seed).
fn paired<'a>(a: &'a [FlowRecord], b: &'a [FlowRecord]) -> (Vec<(&'a FlowRecord, &'a FlowRecord)>, usize) {
    use std::collections::HashMap;
    let keyed = |v: &'a [FlowRecord]| -> Vec<((u32, usize), &'a FlowRecord)> {
        let mut k: HashMap<u32, usize> = HashMap::new();
        v.iter()
            .filter_map(|r| {
                let c = r.web_client?;
                let n = k.entry(c).or_insert(0);
                *n += 1;
                Some(((c, *n), r))
            })
            .collect()
    };
    let kb: HashMap<_, _> = keyed(b).into_iter().collect();
    let mut pairs = Vec::new();
    let mut mismatched = 0;
    for (k, ra) in keyed(a) {
        let Some(&rb) = kb.get(&k) else { continue };
        if ra.size != rb.size {
            mismatched += 1;
        } else if ra.end.is_some() && rb.end.is_some() {
            pairs.push((ra, rb));
        }
    }
    (pairs, mismatched)
}

/// Delay differences `b - a` (ms) of paired transfers.
fn diffs_ms(pairs: &[(&FlowRecord, &FlowRecord)]) -> Vec<f64> {
    let s = |r: &FlowRecord| r.delay().map_or(0.0, |d| d.as_secs_f64());
    pairs.iter().map(|(a, b)| (s(b) - s(a)) * 1e3).collect()
}

/// A quantile of one curve: (name, the curve, the quantile).
type Metric = (&'static str, fn(&Curves) -> &[f64], f64);

fn overlay_policy_d(dir: &Path) -> Result<String> {
    let mut s = String::new();
    writeln!(s, "policy D: {}", d_rule())?;
    let setup = web_setup()?;
    type Params = fn(&WebSetup, PolicyChoice) -> WebProxyParams;
    let figs: [(&str, Params); 2] = [("fig7", WebSetup::fig5_7), ("fig8", WebSetup::fig8)];
    let mut jobs = Vec::new();
    for (fig, params) in figs {
        for seed in D_SEEDS {
            // C and D, then the same workload with no connection split: the reference that
            // replays each policy's non-split transfers where no split changes anything.
            for (name, pol) in [("c", PolicyChoice::LowLoad), ("d", d_choice()), ("none", PolicyChoice::None)] {
                let p = WebProxyParams { seed, ..params(&setup, pol) };
                // One figure for all seeds (below), not one per run.
                jobs.push((format!("{fig}-policy-{name}-seed{seed}"), None, p));
            }
        }
    }
    let mut results = web_runs(dir, &jobs)?.into_iter();
    let metrics: [Metric; 4] = [
        ("split median", |c| &c.split, 0.5),
        ("split p95", |c| &c.split, 0.95),
        ("non-split median", |c| &c.nonsplit, 0.5),
        ("non-split p95", |c| &c.nonsplit, 0.95),
    ];
    let mut panels = Vec::new();
    for (fig, _) in figs {
        let mut pairs = Vec::new();
        let mut nones = Vec::new();
        for seed in D_SEEDS {
            let (c, lc) = results.next().context("internal: a run is missing")?;
            let (d, ld) = results.next().context("internal: a run is missing")?;
            let (none, _) = results.next().context("internal: a run is missing")?;
            s.push_str(&lc);
            s.push_str(&ld);
            pairs.push((seed, c, d));
            nones.push(none);
        }
        panels.push(seeds_panel(fig, &pairs));
        for (name, of, p) in metrics {
            let cells: Vec<String> = pairs
                .iter()
                .map(|(seed, c, d)| {
                    let (x, y) = (q(of(c), p), q(of(d), p));
                    let f = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.3}"));
                    format!("seed {seed} C {} D {}", f(x), f(y))
                })
                .collect();
            let wins = pairs.iter().filter(|(_, c, d)| better(of(d), of(c), p)).count();
            writeln!(s, "{fig} {name} (s): {}; D lower in {wins}/{}", cells.join(", "), pairs.len())?;
        }
        for (seed, c, d) in &pairs {
            let all = metrics.iter().all(|&(_, of, p)| better(of(d), of(c), p));
            let (both, mismatched) = paired(&c.web, &d.web);
            let nonsplit: Vec<_> = both.iter().filter(|(x, y)| !x.split && !y.split).copied().collect();
            let dn = diffs_ms(&nonsplit);
            let da = diffs_ms(&both);
            writeln!(
                s,
                "{fig} seed {seed}: D beats C (lower median and p95 for split and non-split alike): {}; transfers non-split under both: {}, delay D - C median {} ms, p5 {} ms, p95 {} ms, within 1 ms {} ({} size mismatches)",
                super::holds(all),
                nonsplit.len(),
                fmt_ms(q(&dn, 0.5)),
                fmt_ms(q(&dn, 0.05)),
                fmt_ms(q(&dn, 0.95)),
                share(dn.iter().filter(|x| x.abs() < 1.0).count(), dn.len()),
                mismatched
            )?;
            let delays = |r: &[(&FlowRecord, &FlowRecord)], second: bool| -> Vec<f64> {
                r.iter().filter_map(|(x, y)| if second { y } else { x }.delay().map(|d| d.as_secs_f64())).collect()
            };
            let (ac, ad) = (delays(&both, false), delays(&both, true));
            writeln!(
                s,
                "{fig} seed {seed}: every transfer finished under both ({}): median / p95 C {} / {}, D {} / {}; faster under D by > 1 ms {}, slower {}",
                both.len(),
                fmt_q(&ac, 0.5),
                fmt_q(&ac, 0.95),
                fmt_q(&ad, 0.5),
                fmt_q(&ad, 0.95),
                share(da.iter().filter(|x| **x < -1.0).count(), da.len()),
                share(da.iter().filter(|x| **x > 1.0).count(), da.len())
            )?;
        }
        let mut kept = 0;
        // Per policy (C, D): seeds whose p95 lies below, within, above the subsets' 5-95 % range.
        let mut place = [[0usize; 3]; 2];
        for ((seed, c, d), none) in pairs.iter().zip(&nones) {
            let tail = nonsplit_tail(fig, *seed, c, d, none);
            s.push_str(&tail.lines);
            kept += usize::from(tail.order_kept);
            for (k, o) in tail.place.iter().enumerate() {
                if let Some(o) = o {
                    place[k][(*o as i8 + 1) as usize] += 1;
                }
            }
        }
        let n = pairs.len();
        let cell = |p: [usize; 3]| format!("below {}/{n}, within {}/{n}, above {}/{n}", p[0], p[1], p[2]);
        writeln!(
            s,
            "{fig} non-split p95: the same transfers without any split keep the order of C's and D's p95 in {kept}/{n} seeds; against random subsets of that run of the same size (5-95 % range), C's p95 lies {}, D's {}: {}",
            cell(place[0]),
            cell(place[1]),
            if place[1][2] == 0 {
                "its non-split p95 is never above what random draws of as many of the workload's transfers give: it shows which transfers D leaves unsplit, not slower connections"
            } else {
                "its non-split p95 is above what random draws of as many of the workload's transfers give in some seeds"
            }
        )?;
    }
    let title = format!("Policy D against C, seeds {}-{} pooled, with the spread of the seeds", D_SEEDS[0], D_SEEDS[2]);
    std::fs::write(dir.join("policy-d.svg"), panels_svg(&title, &panels))?;
    Ok(s)
}

/// What [`nonsplit_tail`] measured in one seed.
struct NonsplitTail {
    lines: String,
    /// Do the same transfers, replayed in the run without any split, keep the order of C's and
    /// D's non-split p95?
    order_kept: bool,
    /// Where C's (`[0]`) and D's (`[1]`) non-split p95 lies against the 5-95 % range of the p95
    /// of random subsets of the same size: below (`Less`), within, above; `None` without data.
    place: [Option<std::cmp::Ordering>; 2],
}

/// Random subsets drawn per policy and seed by [`nonsplit_tail`].
const SUBSETS: usize = 1000;

/// Why the non-split p95 of C and D differ (issue 14, session 7). A non-split connection never
/// waits for the proxy's CPU, so a policy changes the non-split curve only by which transfers it
/// leaves unsplit. Per seed, three lines:
/// - *replay*: the p95 of the very transfers each policy left unsplit, taken from the run in
///   which no connection is split (`none`), beside their p95 in the policy's run and the share of
///   them whose delay is the same within 1 ms; the p95 of every transfer of the `none` run; and
///   p94 / p96 of each non-split set (the p95 sits where the transfers without a loss end and
///   those that waited for a retransmission begin, so a percent more or fewer slow transfers
///   moves it far);
/// - *chance*: the p95 of [`SUBSETS`] random subsets of the `none` run's finished transfers, as
///   many as each policy's non-split set holds (drawn without replacement, a fixed seed: the
///   output stays byte-identical), and the percentile of those at which the policy's own p95
///   lies;
/// - *composition*: D's non-split set split into the transfers C left unsplit too, those C split,
///   and those C's run never reached (its clients, slowed by split delays, fetched fewer files),
///   with each set's document sizes (p50 / p90).
fn nonsplit_tail(fig: &str, seed: u64, c: &Curves, d: &Curves, none: &Curves) -> NonsplitTail {
    let f = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.3}"));
    // The policy's finished non-split transfers, replayed in the `none` run.
    let replay = |run: &Curves| -> (Vec<f64>, String) {
        let (both, _) = paired(&run.web, &none.web);
        let nonsplit: Vec<_> = both.iter().filter(|(x, _)| !x.split).copied().collect();
        let again: Vec<f64> = nonsplit.iter().filter_map(|(_, y)| y.delay().map(|d| d.as_secs_f64())).collect();
        let same = diffs_ms(&nonsplit).iter().filter(|x| x.abs() < 1.0).count();
        (again, share(same, nonsplit.len()))
    };
    let (rc, sc) = replay(c);
    let (rd, sd) = replay(d);
    let (pc, pd) = (q(&c.nonsplit, 0.95), q(&d.nonsplit, 0.95));
    let (xc, xd) = (q(&rc, 0.95), q(&rd, 0.95));
    let order_kept = matches!((pc, pd, xc, xd), (Some(a), Some(b), Some(x), Some(y)) if (a < b) == (x < y));
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{fig} seed {seed}: non-split p95 C {} D {}; the same transfers in the run with no connection split: C's {} ({} of them within 1 ms of their delay under C), D's {} ({} within 1 ms), every transfer of that run {}; order kept: {}; p94 / p96 C {} / {}, D {} / {}",
        f(pc),
        f(pd),
        f(xc),
        sc,
        f(xd),
        sd,
        f(q(&none.nonsplit, 0.95)),
        super::holds(order_kept),
        f(q(&c.nonsplit, 0.94)),
        f(q(&c.nonsplit, 0.96)),
        f(q(&d.nonsplit, 0.94)),
        f(q(&d.nonsplit, 0.96)),
    );
    // Chance: where each policy's p95 lies among the p95 of random subsets of its size.
    let mut rng = headroom_core::rng::Rng::new(seed).fork(14);
    let mut place = [None; 2];
    let mut cells = Vec::new();
    for (k, (name, set)) in [("C", &c.nonsplit), ("D", &d.nonsplit)].into_iter().enumerate() {
        let Some(own) = q(set, 0.95) else { continue };
        let spread = subset_p95s(&none.nonsplit, set.len(), &mut rng);
        let at = spread.iter().filter(|x| **x <= own).count() as f64 / spread.len().max(1) as f64;
        let (lo, hi) = (q(&spread, 0.05), q(&spread, 0.95));
        place[k] = match (lo, hi) {
            (Some(lo), _) if own < lo => Some(std::cmp::Ordering::Less),
            (_, Some(hi)) if own > hi => Some(std::cmp::Ordering::Greater),
            (Some(_), Some(_)) => Some(std::cmp::Ordering::Equal),
            _ => None,
        };
        cells.push(format!(
            "{name}'s {} transfers: p95 of the subsets {} (5 %) - {} (95 %), {name}'s own at percentile {:.0}",
            set.len(),
            f(lo),
            f(hi),
            100.0 * at
        ));
    }
    let _ = writeln!(
        s,
        "{fig} seed {seed}: random subsets of that run's transfers as large as each non-split set ({SUBSETS} each): {}",
        cells.join("; ")
    );
    // D's non-split set by what C did with the same transfer.
    let (both, _) = paired(&c.web, &d.web);
    let mut groups: [Vec<&FlowRecord>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    for r in d.web.iter().filter(|r| !r.split && r.end.is_some()) {
        let under_c = both.iter().find(|(_, y)| std::ptr::eq(*y, r)).map(|(x, _)| x.split);
        groups[match under_c {
            Some(false) => 0,
            Some(true) => 1,
            None => 2,
        }]
        .push(r);
    }
    let p95 = |v: &[&FlowRecord]| {
        f(q(&v.iter().filter_map(|r| r.delay().map(|d| d.as_secs_f64())).collect::<Vec<_>>(), 0.95))
    };
    let sizes = |v: &[&FlowRecord]| {
        let z: Vec<f64> = v.iter().map(|r| r.size as f64).collect();
        let k = |p| q(&z, p).map_or_else(|| "-".into(), |x| format!("{:.0}", x / 1e3));
        format!("{} / {} KB", k(0.5), k(0.9))
    };
    fn set(run: &Curves) -> Vec<&FlowRecord> {
        run.web.iter().filter(|r| !r.split && r.end.is_some()).collect()
    }
    let _ = writeln!(
        s,
        "{fig} seed {seed}: D's non-split set {} = {} non-split under C too (p95 {}) + {} split under C (p95 under D {}) + {} C's run did not reach (p95 {}); sizes p50 / p90: C's set {}, D's set {}, split under C {}",
        d.nonsplit.len(),
        groups[0].len(),
        p95(&groups[0]),
        groups[1].len(),
        p95(&groups[1]),
        groups[2].len(),
        p95(&groups[2]),
        sizes(&set(c)),
        sizes(&set(d)),
        sizes(&groups[1]),
    );
    NonsplitTail { lines: s, order_kept, place }
}

/// The p95 of [`SUBSETS`] random subsets of `n` values of `pool`, each drawn without
/// replacement (a partial Fisher-Yates shuffle).
fn subset_p95s(pool: &[f64], n: usize, rng: &mut headroom_core::rng::Rng) -> Vec<f64> {
    let n = n.min(pool.len());
    let mut v = pool.to_vec();
    (0..SUBSETS)
        .filter_map(|_| {
            for i in 0..n {
                let j = i + rng.below((v.len() - i) as u64) as usize;
                v.swap(i, j);
            }
            q(&v[..n], 0.95)
        })
        .collect()
}

/// A class of transfers: (name, its delays in a run's curves).
type Class = (&'static str, fn(&Curves) -> &[f64]);

/// One workload's panel of `policy-d.svg`: per policy, the split and the non-split transfers'
/// delay CDF over every seed pooled, and the spread of the seeds' CDFs as a band.
fn seeds_panel(fig: &str, pairs: &[(u64, Curves, Curves)]) -> Chart {
    let mut lines = Vec::new();
    let mut bands = Vec::new();
    let classes: [Class; 2] = [("split", |c| &c.split), ("non-split", |c| &c.nonsplit)];
    for (p, policy) in ["C", "D"].iter().enumerate() {
        for (k, (class, of)) in classes.iter().enumerate() {
            let per_seed: Vec<Sorted> =
                pairs.iter().map(|(_, c, d)| Sorted::new(of(if p == 0 { c } else { d }).to_vec())).collect();
            let pooled: Sorted = per_seed.iter().flat_map(|t| t.iter().copied()).collect();
            let colour = 2 * p + k;
            lines.push(Series::line(format!("policy {policy}, {class}"), cdf_points(&pooled)).colour(colour));
            let label = format!("policy {policy}, {class}: spread of the {} seeds", per_seed.len());
            bands.push(Series::cdf_spread(label, &per_seed).colour(colour));
        }
    }
    lines.extend(bands);
    Chart {
        title: if fig == "fig7" {
            "(a) Fig. 7's workload (D = 5 ms)"
        } else {
            "(b) Fig. 8's workload (D = 30 ms, 1 % loss)"
        }
        .into(),
        x_label: "transfer delay, SYN to last byte (s, log scale)".into(),
        y_label: "cumulative fraction of transfers".into(),
        series: lines,
        y_range: Some((0.0, 1.0)),
        x_log: true,
        ..Default::default()
    }
}

fn fmt_ms(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |v| format!("{v:+.1}"))
}

fn share(k: usize, n: usize) -> String {
    if n == 0 {
        "-".into()
    } else {
        format!("{:.0} %", 100.0 * k as f64 / n as f64)
    }
}

/// Is the `p` quantile of `a` strictly below that of `b`?
fn better(a: &[f64], b: &[f64], p: f64) -> bool {
    matches!((q(a, p), q(b, p)), (Some(x), Some(y)) if x < y)
}

/// Policy D as run by `overlay-policy-d`.
fn d_choice() -> PolicyChoice {
    PolicyChoice::ShortQueue { target: D_TARGET }
}

/// Policy D's rule, for the summary.
fn d_rule() -> String {
    format!("split while the smoothed CPU queueing delay < {D_TARGET}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_core::rng::Rng;

    #[test]
    fn random_subsets_draw_without_replacement_and_spread_only_when_smaller_than_the_pool() {
        // 100 delays 1..=100: p95 (index round(99 × 0.95) = 94) is 95.
        let pool: Vec<f64> = (1..=100).map(f64::from).collect();
        let whole = subset_p95s(&pool, 100, &mut Rng::new(1));
        assert_eq!(whole.len(), SUBSETS);
        assert!(whole.iter().all(|&x| x == 95.0), "a subset of every value is the pool itself");
        let part = subset_p95s(&pool, 20, &mut Rng::new(1));
        let (lo, hi) = part.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
        // 20 distinct values: their p95 (the 19th smallest) is at least 19 and at most 99.
        assert!(lo >= 19.0 && hi <= 99.0 && lo < hi, "{lo} - {hi}");
        assert_eq!(part, subset_p95s(&pool, 20, &mut Rng::new(1)), "same seed, same subsets");
        assert_ne!(part, subset_p95s(&pool, 20, &mut Rng::new(2)));
    }

    fn curves(split: Vec<f64>, nonsplit: Vec<f64>) -> Curves {
        Curves { low: Vec::new(), high: Vec::new(), split, nonsplit, unfinished: 0, web: Vec::new() }
    }

    #[test]
    fn policy_d_figure_has_a_band_of_the_seeds_per_policy_and_class() {
        let pairs: Vec<(u64, Curves, Curves)> = D_SEEDS
            .iter()
            .map(|&seed| {
                let k = seed as f64;
                let c = curves((1..50).map(|i| k * f64::from(i) * 0.1).collect(), vec![0.05 * k, 0.07 * k]);
                let d = curves((1..50).map(|i| k * f64::from(i) * 0.01).collect(), vec![0.05, 0.06 * k]);
                (seed, c, d)
            })
            .collect();
        let panel = seeds_panel("fig7", &pairs);
        let svg = panels_svg("t", &[panel.clone(), seeds_panel("fig8", &pairs)]);
        assert_eq!(crate::plot::bands(&svg), 8, "{svg}");
        assert!(svg.contains("policy D, non-split: spread of the 3 seeds"));
        assert_eq!(crate::plot::points_outside_axes(&svg), Ok(vec![]));
        // The pooled line holds every seed's transfers.
        let pooled = panel.series.iter().find(|s| s.label == "policy C, split").unwrap();
        assert_eq!(pooled.points.last().map(|p| p.1), Some(1.0));
        assert_eq!(pooled.points.len(), 3 * 49);
    }
}
