//! PathQuick on the namespace testbed (root only; prints `SKIP: <reason>` otherwise, fails under CI): the
//! issue-4 goal at one level of `headroom probe-bench` with the issue-4 fixed range (`--bmax
//! 12Mbps`). A 12 Mbit/s bottleneck (the testbed's exact link since issue 19), 26 ms each way,
//! 6 Mbit/s of Poisson UDP cross traffic (1000-byte packets): PathQuick's median estimate
//! within ±1.5 Mbit/s of the 6 Mbit/s available, and its median time per estimate within
//! train length + RTT + 20 ms. With the client's defaults, shaper detection included (it must
//! not read a shaper on this plain path). Both tests also replay the bench's `--dump` with
//! `headroom probe-replay`, which must give back every answer the client gave.

use std::process::Command;

#[test]
fn pathquick_meets_its_accuracy_and_time_goal_on_the_testbed() {
    if !headroom_testbed::testbed_available_for_test() {
        return;
    }
    // Up to RUNS runs: another only when fewer than 8 of the 9 trains gave an estimate (a
    // train the server's pacer sent late on a loaded machine is judged inconclusive; a suite
    // run at b2323ce had a 5 ms pacing stall). The replay's verbose lines say why each train
    // was judged as it was.
    const RUNS: usize = 2;
    let mut run = 0;
    let (stdout, text) = loop {
        run += 1;
        let (stdout, text, replay) = bench_and_replay(
            "fixed",
            &["--levels", "6Mbps", "--trains", "9", "--bmax", "12Mbps"],
            &["--bmax", "12Mbps", "-v"],
        );
        // The dump judged again offline gives every answer the client gave.
        assert!(replay.contains("9 agree, 0 differ, 0 diverged"), "{replay}");
        let n = client_rows(&text).iter().filter(|r| r[col(&text, "estimate_mbps")].parse::<f64>().is_ok()).count();
        if n >= 8 || run == RUNS {
            assert!(n >= 8, "too few estimates in {run} runs: {text}\n{replay}");
            break (stdout, text);
        }
        eprintln!("run {run}: {n} of 9 trains gave an estimate, once more:\n{replay}");
    };
    let rows = client_rows(&text);
    assert_eq!(rows.len(), 9, "{text}");
    let [value, time, length, shaper] =
        ["estimate_mbps", "train_time_ms", "train_length_ms", "shaper_rate_mbps"].map(|name| col(&text, name));
    let estimates: Vec<f64> = rows.iter().filter_map(|r| r[value].parse().ok()).collect();
    // No shaper on this path (detection is on by default).
    assert!(rows.iter().all(|r| r[shaper].is_empty()), "a false shaper: {text}");
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let error = median(estimates) - 6.0;
    let times: Vec<f64> = rows.iter().map(|r| r[time].parse().unwrap()).collect();
    let budget = rows[0][length].parse::<f64>().unwrap() + 52.0 + 20.0;
    let t = median(times);
    eprintln!("PathQuick at A = 6 Mbit/s: median error {error:+.2} Mbit/s, median time {t:.1} ms (budget {budget:.0} ms)\n{stdout}");
    assert!(error.abs() <= 1.5, "median error {error:+.2} Mbit/s\n{stdout}");
    assert!(t <= budget, "median time {t:.1} ms over the {budget:.0} ms budget\n{stdout}");
}

/// The bench CSV's PathQuick rows judged as the client judges (`client_default`).
fn client_rows(text: &str) -> Vec<Vec<&str>> {
    let (method, default) = (col(text, "method"), col(text, "client_default"));
    text.lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|r| r[method] == "pathquick" && r[default] == "true")
        .collect()
}

/// The index of column `name` in the bench CSV `text`.
fn col(text: &str, name: &str) -> usize {
    text.lines().next().unwrap().split(',').position(|h| h == name).unwrap_or_else(|| panic!("no column {name}"))
}

/// `headroom ARGS` (built by `args`): its stdout (a failure fails the test).
fn headroom(args: impl FnOnce(&mut Command) -> &mut Command) -> String {
    let out = args(&mut Command::new(env!("CARGO_BIN_EXE_headroom"))).output().expect("run headroom");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "headroom failed: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// `headroom probe-bench BENCH --csv F --dump D`, then `headroom probe-replay D REPLAY`: the
/// bench's stdout, its CSV and the replay's stdout (the files are removed, also on failure).
fn bench_and_replay(name: &str, bench: &[&str], replay: &[&str]) -> (String, String, String) {
    let dir = std::env::temp_dir().join(format!("headroom-probe-testbed-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (csv, dump) = (dir.join("bench.csv"), dir.join("bench.dump"));
    let run = std::panic::catch_unwind(|| {
        let stdout = headroom(|c| c.arg("probe-bench").args(bench).arg("--csv").arg(&csv).arg("--dump").arg(&dump));
        let text = std::fs::read_to_string(&csv).expect("the bench's CSV");
        (stdout, text, headroom(|c| c.arg("probe-replay").arg(&dump).args(replay)))
    });
    let _ = std::fs::remove_dir_all(&dir);
    run.unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// Auto-ranging (no `--bmax`) on a 10 Mbit/s exact link, 10 ms each way, 6 Mbit/s of Poisson
/// cross traffic: five estimates, their median error within 10 % of the capacity (issue 19's
/// goal is 5 % over the grid's 12 and more estimates per cell, `docs/results.md`; five on a
/// shared machine get the margin), and the ladder replayed from the dump
/// (`headroom probe-replay`) asking for every train the client sent and answering as it did.
#[test]
fn auto_ranging_finds_the_available_bandwidth_and_replays_from_its_dump() {
    if !headroom_testbed::testbed_available_for_test() {
        return;
    }
    let (stdout, text, replay) = bench_and_replay(
        "autorange",
        &["--rate", "10Mbps", "--delay", "10ms", "--levels", "6Mbps", "--trains", "5"],
        &[],
    );
    assert!(replay.contains("5 agree, 0 differ, 0 diverged"), "{replay}");
    let value = col(&text, "estimate_mbps");
    let mut errors: Vec<f64> =
        client_rows(&text).iter().map(|r| r[value].parse::<f64>().map_or(100.0, |v| (v - 4.0).abs() * 10.0)).collect();
    assert_eq!(errors.len(), 5, "{text}");
    errors.sort_by(f64::total_cmp);
    let median = errors[2];
    eprintln!("auto-ranged PathQuick at A = 4 of 10 Mbit/s: |errors| {errors:?} % of C\n{replay}");
    assert!(median <= 10.0, "median |error| {median:.1} % of the capacity\n{stdout}");
}
