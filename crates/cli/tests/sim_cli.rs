//! `headroom sim ...` as a user runs it: exit codes, files written, error messages.

use std::process::Command;

fn headroom(args: &[&str]) -> (i32, String, String) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(env!("CARGO_BIN_EXE_headroom")).args(args).current_dir(root).output().expect("run headroom");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn sim_run_prints_a_table_and_writes_outputs() {
    let dir = std::env::temp_dir().join(format!("headroom-cli-{}", std::process::id()));
    let (code, out, err) = headroom(&["sim", "run", "scenarios/sim/dumbbell.toml", "--out", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "stderr: {err}");
    assert!(out.contains("short-rtt") && out.contains("poisson") && out.contains("Mbps"), "{out}");
    for f in ["summary.json", "flows.csv", "trace.csv"] {
        let text = std::fs::read_to_string(dir.join(f)).unwrap();
        assert!(text.len() > 100, "{f} is too short");
    }
    let trace = std::fs::read_to_string(dir.join("trace.csv")).unwrap();
    assert!(trace.starts_with("time_s,flow,metric,value\n"));
    assert!(trace.contains(",r1->r2,queue_pkts,"));
    let (code, json, _) = headroom(&["sim", "run", "scenarios/sim/dumbbell.toml", "--json", "--seed", "3"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&json).expect("--json prints JSON");
    assert_eq!(v["seed"], 3);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_fails_cleanly() {
    let (code, _, err) = headroom(&["sim", "run", "scenarios/does-not-exist.toml"]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot read scenario") && !err.contains("panicked"), "{err}");

    let bad = std::env::temp_dir().join(format!("headroom-bad-{}.toml", std::process::id()));
    std::fs::write(
        &bad,
        "duration = \"10s\"\n[[link]]\na = \"x\"\nb = \"y\"\nrate = \"10Mbps\"\ndelay = \"1ms\"\nflavour = 1\n",
    )
    .unwrap();
    let (code, _, err) = headroom(&["sim", "run", bad.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("line 7") && err.contains("flavour") && !err.contains("panicked"), "{err}");
    std::fs::write(&bad, [0xffu8, 0xfe, 0x00, 0x12]).unwrap();
    let (code, _, err) = headroom(&["sim", "run", bad.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(!err.contains("panicked"), "{err}");
    let _ = std::fs::remove_file(&bad);
}

#[test]
fn sweep_prints_one_row_per_value() {
    let (code, out, err) =
        headroom(&["sim", "sweep", "scenarios/becc/fig2.toml", "--key", "tcp.max_window", "--values", "32KB,128KB"]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<&str> = out.lines().filter(|l| l.contains("KB")).collect();
    assert_eq!(rows.len(), 2, "{out}");
    let (code, _, err) =
        headroom(&["sim", "sweep", "scenarios/becc/fig2.toml", "--key", "tcp.no_such_key.x", "--values", "1"]);
    assert_eq!(code, 1);
    assert!(err.contains("no_such_key"), "{err}");
}
