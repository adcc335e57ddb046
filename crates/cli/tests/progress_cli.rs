//! `headroom sim run` draws its progress bar only when both stdout and stderr are terminals, and
//! the bar never changes what is printed or written. Terminals come from util-linux `script`
//! (the test prints `SKIP` without it).

use std::path::Path;
use std::process::Command;

/// Runs `sh -c cmd` under `script`, which gives it a pseudo-terminal; returns what the terminal showed.
fn on_a_terminal(cmd: &str) -> Option<String> {
    let out = Command::new("script").args(["-qec", cmd, "/dev/null"]).output().ok()?;
    assert!(out.status.success(), "script -c {cmd}: {}", String::from_utf8_lossy(&out.stderr));
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn the_bar_shows_on_a_terminal_only_and_changes_no_output() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::temp_dir().join(format!("headroom-progress-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // the benchmark dumbbell, 200 simulated seconds; the bar is asked for from the start
    // (HEADROOM_PROGRESS_AFTER=0), so the test does not depend on how fast the simulator is
    let src = std::fs::read_to_string(root.join("scenarios/bench/dumbbell.toml")).unwrap();
    let long: String = src
        .lines()
        .map(|l| if l.starts_with("duration") { "duration = \"200s\"" } else { l })
        .collect::<Vec<_>>()
        .join("\n");
    let file = dir.join("long.toml");
    std::fs::write(&file, long).unwrap();
    let bin = env!("CARGO_BIN_EXE_headroom");
    let plain = Command::new(bin)
        .args(["sim", "run", file.to_str().unwrap()])
        .env("HEADROOM_PROGRESS_AFTER", "0")
        .output()
        .unwrap();
    assert!(plain.status.success());
    assert!(!String::from_utf8_lossy(&plain.stderr).contains("simulated"), "a bar without a terminal");

    let redirected = dir.join("stdout.txt");
    let Some(shown) = on_a_terminal(&format!(
        "HEADROOM_PROGRESS_AFTER=0 {bin} sim run {} > {}",
        file.display(),
        redirected.display()
    )) else {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "SKIP: util-linux `script` is not installed");
        let _ = std::fs::remove_dir_all(&dir);
        return;
    };
    assert!(
        !shown.contains("simulated"),
        "a bar on stderr while stdout goes to a file: {:?}",
        &shown[..shown.len().min(200)]
    );
    assert_eq!(std::fs::read(&redirected).unwrap(), plain.stdout, "stdout changed");

    let shown = on_a_terminal(&format!("HEADROOM_PROGRESS_AFTER=0 {bin} sim run {}", file.display())).unwrap();
    assert!(shown.contains("100.0%") && shown.contains("s simulated"), "no bar on a terminal: {shown:?}");
    let summary = String::from_utf8_lossy(&plain.stdout).replace('\n', "\r\n");
    assert!(shown.contains(&summary), "the summary differs on a terminal");
    let _ = std::fs::remove_dir_all(&dir);
}
