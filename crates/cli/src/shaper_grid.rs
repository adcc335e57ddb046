//! `headroom probe-bench --shaper-grid [RATES/BURSTS]`: issue 19's shaper goal on the testbed.
//!
//! For every token rate × bucket depth of the grid, a `tbf` shaper (`shaper = { rate, burst }`
//! of `headroom_testbed`) in front of the `--rate` exact link, no cross traffic, `--trains`
//! auto-ranged estimates (no `--bmax`) with the client's defaults and `--detect-shaper` (the fine train
//! with the shaper size step `SHAPER_DELTA_P`: `EstimateOptions::shaper_train`), one testbed per cell (the
//! bench of [`crate::probe_bench`]). Printed per cell: how many estimates reported a shaper, the
//! median reported rate (every conclusive estimate, shaper seen or not) and its error against
//! the token rate, the estimates within 10 % of it, the median burst read and its ratio to the
//! bucket depth, the bursts within a factor of two, and the load average before the cell (the
//! machine is shared; its load moves the pacer). Goal of a cell: the median rate within 10 % and
//! the median burst within a factor of two (issue 19, "Behind a token-bucket shaper").

use crate::probe::EstimatorFlags;
use std::fmt::Write as _;
use std::str::FromStr;

use anyhow::{bail, Result};
use headroom_core::abw::Method;
use headroom_core::stats::median;
use headroom_core::units::{Bytes, Rate};

use crate::probe_bench::{measure, BenchRow, ClientChoice, ProbeBenchArgs};

/// Token rates and bucket depths, `RATE,RATE,.../BURST,BURST,...`.
#[derive(Clone, Debug, PartialEq)]
pub struct ShaperGrid {
    pub rates: Vec<Rate>,
    pub bursts: Vec<Bytes>,
}

/// The grid: 10–100 Mbit/s, 4.5–64 KB.
pub const DEFAULT_GRID: &str = "10Mbps,50Mbps,100Mbps/4.5KB,16KB,64KB";

impl FromStr for ShaperGrid {
    type Err = String;
    fn from_str(s: &str) -> Result<ShaperGrid, String> {
        let (r, b) = s.split_once('/').ok_or_else(|| format!("`{s}`: expected RATES/BURSTS, e.g. {DEFAULT_GRID}"))?;
        let rates = r
            .split(',')
            .map(|x| headroom_core::units::parse_positive::<Rate>(x.trim()).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        let bursts = b
            .split(',')
            .map(|x| headroom_core::units::parse_positive::<Bytes>(x.trim()).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ShaperGrid { rates, bursts })
    }
}

/// The load average (1, 5, 15 min) as `/proc/loadavg` gives it.
pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// One cell's line of the table from its PathQuick rows (the client's default judge).
pub fn cell_line(rate: Rate, burst: Bytes, rows: &[BenchRow], load: &str) -> (String, bool) {
    let of: Vec<&BenchRow> = rows.iter().filter(|r| r.method == Method::PathQuick && r.client_default).collect();
    let token = rate.as_mbps();
    let values: Vec<f64> = of.iter().filter_map(|r| r.value.map(|v| v.as_mbps())).collect();
    let within = values.iter().filter(|v| (*v - token).abs() <= 0.1 * token).count();
    let bursts: Vec<f64> = of.iter().filter_map(|r| r.shaper.map(|s| s.1 .0 as f64)).collect();
    let depth = burst.0 as f64;
    let bursts_ok = bursts.iter().filter(|b| **b >= depth / 2.0 && **b <= 2.0 * depth).count();
    let mr = median(&values).unwrap_or(f64::NAN);
    let mb = median(&bursts).unwrap_or(f64::NAN);
    let err = 100.0 * (mr - token) / token;
    let ratio = mb / depth;
    let met = err.abs() <= 10.0 && (0.5..=2.0).contains(&ratio);
    let line = format!(
        "{:>7.1} {:>8} {:>5}/{:<3} {:>9.2} {:>+8.1} {:>5}/{:<3} {:>9.0} {:>6.2} {:>5}/{:<3} {:>7}   {load}",
        token,
        burst.0,
        bursts.len(),
        of.len(),
        mr,
        err,
        within,
        of.len(),
        mb,
        ratio,
        bursts_ok,
        of.len(),
        if met { "met" } else { "MISSED" }
    );
    (line, met)
}

/// Runs the grid and prints the table.
pub fn run(a: &ProbeBenchArgs, grid: &ShaperGrid) -> Result<()> {
    if a.client.bmax.is_some() {
        bail!("--shaper-grid measures auto-ranging: leave out --bmax");
    }
    if let Some(r) = grid.rates.iter().find(|r| **r > a.rate) {
        bail!("--shaper-grid: token rate {r} above the link's --rate {} (try --rate 200Mbps)", a.rate);
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "shaper grid (issue 19): tbf in front of a {} exact link, {} each way, no cross traffic, {} auto-ranged estimates per cell, client defaults with --detect-shaper (the {}-byte fine train)",
        a.rate,
        a.delay,
        a.trains,
        headroom_core::abw::shaper::SHAPER_DELTA_P.0
    );
    let _ =
        writeln!(s, "goal per cell: median rate within 10 % of the token rate, median burst within a factor of two");
    let _ = writeln!(
        s,
        "{:>7} {:>8} {:>9} {:>9} {:>8} {:>9} {:>9} {:>6} {:>9} {:>7}   load before",
        "rate", "burst B", "seen", "median", "err %", "in 10 %", "burst", "ratio", "in 2x", "goal"
    );
    print!("{s}");
    let mut met = 0;
    let cells = grid.rates.len() * grid.bursts.len();
    for &rate in &grid.rates {
        for &burst in &grid.bursts {
            let load = load_average();
            let cell = ProbeBenchArgs {
                shaper_rate: Some(rate),
                shaper_burst: Some(burst),
                levels: vec![Rate::ZERO],
                csv: None,
                dump: None,
                shaper_grid: None,
                client: ClientChoice {
                    estimator: EstimatorFlags { detect_shaper: true, no_detect_shaper: false, ..a.client.estimator },
                    ..a.client
                },
                ..a.clone()
            };
            let (rows, _) = measure(&cell)?;
            let (line, ok) = cell_line(rate, burst, &rows, &load);
            met += ok as usize;
            println!("{line}");
        }
    }
    println!("cells meeting the goal: {met} of {cells}; load average after: {}", load_average());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_parses_and_refuses_nonsense() {
        let g: ShaperGrid = DEFAULT_GRID.parse().unwrap();
        assert_eq!(g.rates, vec![Rate::from_mbps(10), Rate::from_mbps(50), Rate::from_mbps(100)]);
        assert_eq!(g.bursts, vec![Bytes(4500), Bytes(16_000), Bytes(64_000)]);
        assert!("10Mbps".parse::<ShaperGrid>().unwrap_err().contains("RATES/BURSTS"));
        assert!("10Mbps/0B".parse::<ShaperGrid>().is_err());
        assert!("10MB/4KB".parse::<ShaperGrid>().is_err());
    }
}
