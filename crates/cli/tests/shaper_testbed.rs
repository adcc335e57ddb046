//! Shaper awareness on the namespace testbed (root only; prints `SKIP: <reason>` otherwise, fails
//! under CI): issue 19's goal on one small case of `headroom probe-bench`. A `tbf` shaper of
//! 10 Mbit/s with a 64 KB bucket in front of a 200 Mbit/s exact link (the grid's cell where
//! auto-ranging's first coarse train, 52 KB, drains the bucket before the shaper train: the
//! burst reads what was left, 28 KB, unless the client adds those tokens back,
//! `shaper::burst_after_earlier_trains`), 5 ms each way, no cross
//! traffic, five auto-ranged estimates (no `--bmax`) with `--detect-shaper` (the fine train with
//! the shaper size step, as the shaper grid uses; with the default fine train a quiet
//! fresh-clone run saw the shaper in only 2 of 5 estimates, so detection by default is checked
//! for what it must not do — report false shapers — by `probe_testbed`): the median token rate reported within
//! 10 % of 10 Mbit/s and the median burst within a factor of two of 64 KB, from at least three
//! estimates that reported a shaper (medians: a loaded 2-core machine's pacer stalls a train
//! now and then). The testbed is `probe-bench`'s, taken down by it on every exit, also on error.
//!
//! The delay box must be faithful for the answer to say anything about the detector: on a VM
//! that steals time the box released packets 79–529 µs late on average, in batches, and the
//! bucket's line then strays by more than a tenth of a packet time (10 Mbit/s: 120 µs); three
//! runs with a mean lateness of 247 and 529 µs saw the shaper in 0 of 5, one with 79 µs in 5 of 5
//! (issue 19, session 12). So a run whose box lagged more than [`MAX_BOX_LATENESS_US`] on
//! average is run again, up to [`RUNS`] runs; the last run is judged whatever its box did, and
//! the test names a lagging box beside a miss.

use std::process::Command;

/// `headroom probe-bench ARGS --csv FILE`: its stdout and the CSV (a failure fails the test).
fn bench(args: &[&str]) -> (String, String) {
    let csv = std::env::temp_dir().join(format!("headroom-shaper-testbed-{}.csv", std::process::id()));
    let out =
        Command::new(env!("CARGO_BIN_EXE_headroom")).arg("probe-bench").args(args).arg("--csv").arg(&csv).output();
    let out = out.expect("run headroom probe-bench");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "probe-bench failed: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&csv).expect("the bench's CSV");
    let _ = std::fs::remove_file(&csv);
    (stdout, text)
}

/// A box that releases packets later than this on average (µs) batches the bucket's line
/// beyond what the detector reads as tokens (module doc).
const MAX_BOX_LATENESS_US: f64 = 150.0;

/// Runs of the bench at most, while the box lags. (Three were not enough: a session-13 suite
/// run met a box 625, 372 and 539 µs late in three runs in a row, about a minute, and saw the
/// shaper in 1, 2 and 2 of 5; the test passed when run again minutes later.)
const RUNS: usize = 5;

#[test]
fn a_token_bucket_shaper_reads_as_its_rate_and_burst_on_the_testbed() {
    if !headroom_testbed::testbed_available_for_test() {
        return;
    }
    let case =
        "--rate 200Mbps --shaper-rate 10Mbps --shaper-burst 64KB --delay 5ms --buffer 1000pkts --levels 0 --trains 5 --detect-shaper";
    for run in 1..=RUNS {
        let (stdout, text) = bench(&case.split(' ').collect::<Vec<_>>());
        // PathQuick's estimates as the client made them: (shaper rate Mbit/s, burst B), if
        // reported; and the box's mean release lateness over the level.
        let mut lines = text.lines();
        let names: Vec<&str> = lines.next().unwrap().split(',').collect();
        let field = |row: &[&str], name: &str| row[names.iter().position(|n| *n == name).unwrap()].to_string();
        let rows: Vec<Vec<&str>> = lines
            .map(|l| l.split(',').collect::<Vec<_>>())
            .filter(|row| field(row, "method") == "pathquick" && field(row, "client_default") == "true")
            .collect();
        assert_eq!(rows.len(), 5, "{text}");
        let lateness: f64 = field(&rows[0], "box_lateness_mean_us").parse().expect("the box's lateness");
        let estimates: Vec<(Option<f64>, Option<f64>)> = rows
            .iter()
            .map(|row| (field(row, "shaper_rate_mbps").parse().ok(), field(row, "shaper_burst_bytes").parse().ok()))
            .collect();
        let middle = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let rates: Vec<f64> = estimates.iter().filter_map(|e| e.0).collect();
        let bursts: Vec<f64> = estimates.iter().filter_map(|e| e.1).collect();
        eprintln!(
            "run {run}: shaper reported by {} of 5 estimates: rates {rates:?} Mbit/s, bursts {bursts:?} B; the box's release lateness mean {lateness:.1} us\n{stdout}",
            rates.len()
        );
        if lateness > MAX_BOX_LATENESS_US && run < RUNS {
            eprintln!("the delay box lagged ({lateness:.1} us > {MAX_BOX_LATENESS_US} us on average): running again");
            continue;
        }
        let lagged = if lateness > MAX_BOX_LATENESS_US {
            format!(" (the delay box lagged in every run: {lateness:.1} us on average in the last)")
        } else {
            String::new()
        };
        assert!(rates.len() >= 3, "a shaper in only {} of 5 estimates{lagged}\n{stdout}", rates.len());
        let (r, b) = (middle(rates), middle(bursts));
        assert!((r - 10.0).abs() <= 1.0, "median token rate {r:.2} Mbit/s, not within 10 % of 10{lagged}\n{stdout}");
        assert!((32_000.0..=128_000.0).contains(&b), "median burst {b:.0} B, not within 2x of 64 KB{lagged}\n{stdout}");
        return;
    }
}
