//! One unit syntax everywhere (`headroom_core::units`): every scenario file in the repository
//! still loads with it, and a bad unit on the command line or in a file is a clear error and a
//! non-zero exit, never a panic.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn headroom(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_headroom")).args(args).current_dir(root()).output().expect("run");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into())
}

fn toml_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            toml_files(&p, found);
        } else if p.extension().is_some_and(|x| x == "toml") {
            found.push(p);
        }
    }
}

/// Sim scenarios load with `headroom_sim::Scenario::load` (and every value of their `[sweep]`
/// too), testbed files with `headroom_testbed::Scenario::load`.
#[test]
fn every_scenario_file_loads() {
    let mut files = Vec::new();
    toml_files(&root().join("scenarios"), &mut files);
    files.sort();
    let (mut sim, mut testbed, mut sweep_values) = (0, 0, 0);
    for f in &files {
        let dir = f.parent().unwrap();
        // Testbed files (dumbbells and chains; crosscheck runs dumbbell testbed files).
        if dir.ends_with("testbed") || dir.ends_with("crosscheck") {
            let text = std::fs::read_to_string(f).unwrap();
            if headroom_testbed::chain::ChainScenario::is_chain(&text) {
                headroom_testbed::chain::ChainScenario::load(f).unwrap_or_else(|e| panic!("{}: {e:#}", f.display()));
            } else {
                headroom_testbed::Scenario::load(f).unwrap_or_else(|e| panic!("{}: {e:#}", f.display()));
            }
            testbed += 1;
            continue;
        }
        // The overlay experiments' set-ups (not simulator scenarios: the overlay engine's own).
        if dir.ends_with("overlay") {
            use headroom_sim::overlay::experiments::{Fig3Setup, WebSetup};
            let text = std::fs::read_to_string(f).unwrap();
            let origin = f.display().to_string();
            let parsed = if f.ends_with("fig3.toml") {
                Fig3Setup::parse(&text, &origin).map(|_| ())
            } else {
                WebSetup::parse(&text, &origin).map(|_| ())
            };
            parsed.unwrap_or_else(|e| panic!("{e}"));
            continue;
        }
        let sc = headroom_sim::Scenario::load(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        sim += 1;
        if let Some(sw) = &sc.sweep {
            let src = std::fs::read_to_string(f).unwrap();
            for v in &sw.values {
                headroom_sim::sweep::with_value(&src, &f.display().to_string(), &sw.key, v)
                    .unwrap_or_else(|e| panic!("{}: {} = {v}: {e}", f.display(), sw.key));
                sweep_values += 1;
            }
        }
    }
    // The repository's files at the time of writing: 16 simulator scenarios, 2 testbed files.
    assert!(
        sim >= 16 && testbed >= 2 && sweep_values > 20,
        "{sim} sim, {testbed} testbed, {sweep_values} sweep values"
    );
}

/// The testbed file and a simulator scenario read the same text as the same value.
#[test]
fn testbed_and_simulator_read_units_alike() {
    let tb = headroom_testbed::Scenario::load(&root().join("scenarios/testbed/dumbbell.toml")).unwrap();
    let text = std::fs::read_to_string(root().join("scenarios/testbed/dumbbell.toml")).unwrap();
    let rate_line = text.lines().find(|l| l.trim_start().starts_with("rate")).expect("a rate line");
    let rate_text = rate_line.split('"').nth(1).unwrap();
    let sim = format!(
        "duration = \"1s\"\n[[link]]\na = \"x\"\nb = \"y\"\nrate = \"{rate_text}\"\ndelay = \"0\"\nloss = {}\n",
        tb.bottleneck.loss
    );
    let sc = headroom_sim::Scenario::parse(&sim, "t.toml").unwrap();
    assert_eq!(Some(sc.links[0].rate), tb.bottleneck.rate);
    assert_eq!(sc.links[0].loss, tb.bottleneck.loss);
}

#[test]
fn bad_units_on_the_command_line_exit_non_zero_with_a_clear_message() {
    let cases: &[(&[&str], &[&str])] = &[
        (&["design", "--t-quick", "10parsecs"], &["--t-quick", "10parsecs", "unknown time unit", "ms"]),
        (&["design", "--budget", "0s"], &["--budget", "must be positive"]),
        (&["design", "--rtt=-5ms"], &["--rtt", "negative"]),
        (&["design", "--pn", "12kb"], &["--pn", "12kb", "bits", "KiB"]),
        (&["design", "--pn", "99999999999999999999999"], &["--pn", "too large"]),
        (&["probe", "127.0.0.1", "--bmax", "10mbps"], &["--bmax", "10mbps", "ambiguous", "Mbps"]),
        (&["probe", "127.0.0.1", "--bmax", "1e30Mbps"], &["--bmax", "exponent"]),
        (&["probe", "127.0.0.1", "--bmax", "12"], &["--bmax", "write the unit"]),
        (&["serve", "--max-rate", "0Mbps"], &["--max-rate", "must be positive"]),
        (&["testbed", "bench-delaybox", "--rates", "100Mbps,fast"], &["--rates", "fast", "bps"]),
        (&["testbed", "bench-delaybox", "--step", "0s"], &["--step", "must be positive"]),
    ];
    for (args, needles) in cases {
        let (code, err) = headroom(args);
        assert_eq!(code, 2, "{args:?} should be a usage error: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        for n in *needles {
            assert!(err.contains(n), "{args:?}: the message lacks {n:?}: {err}");
        }
    }
}

#[test]
fn bad_units_in_a_scenario_file_exit_non_zero_with_a_clear_message() {
    let src = std::fs::read_to_string(root().join("scenarios/sim/dumbbell.toml")).unwrap();
    let dir = std::env::temp_dir().join(format!("headroom-units-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let first_rate = src.lines().find(|l| l.trim_start().starts_with("rate = ")).expect("a rate line");
    let cases = [
        (first_rate.replace("Mbps", "mbps"), "ambiguous"),
        (first_rate.replace("Mbps", "Mbpx"), "unknown rate unit"),
        ("rate = \"-3Mbps\"".to_string(), "negative"),
        ("rate = \"0Mbps\"".to_string(), "must be positive"),
        ("rate = \"99999999999999999999Gbps\"".to_string(), "too large"),
    ];
    for (i, (line, needle)) in cases.iter().enumerate() {
        let f = dir.join(format!("bad{i}.toml"));
        std::fs::write(&f, src.replacen(first_rate, line, 1)).unwrap();
        let (code, err) = headroom(&["sim", "run", f.to_str().unwrap()]);
        assert_eq!(code, 1, "{line}: {err}");
        assert!(err.contains(needle) && err.contains("line ") && !err.contains("panicked"), "{line}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
