//! Golden determinism check: a fixed set of scenarios and experiments is run through the
//! `headroom` binary, and the SHA-256 of every output file is compared with the values committed
//! in `tests/golden.sha256`. Two runs that agree with each other are not enough: this catches a
//! change that alters results, not only one that makes runs differ.
//!
//! A change that is *meant* to alter results: rerun with `HEADROOM_BLESS=1` to rewrite the
//! file, and record each changed figure (before → after) in the commit message and in
//! `docs/results.md`.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Scenario files run with `headroom sim run FILE --out DIR` (the slow ImTCP Figs. 8 and 10 are
/// left to `reproduce all`).
const SCENARIOS: &[&str] = &[
    "scenarios/sim/dumbbell.toml",
    "scenarios/bench/dumbbell.toml",
    "scenarios/bench/web.toml",
    "scenarios/becc/fig2.toml",
    "scenarios/becc/fig10.toml",
    "scenarios/becc/fig11.toml",
    "scenarios/becc/fig12.toml",
    "scenarios/becc/fig13.toml",
    "scenarios/imtcp/fig13.toml",
    "scenarios/imtcp/table1.toml",
    "scenarios/imtcp/table2.toml",
    "scenarios/imtcp/table3.toml",
    "scenarios/imtcp/web.toml",
    "scenarios/pathquick/fig6.toml",
];

/// Experiments run with `headroom reproduce NAME --out DIR` (CSV, SVG and summary files).
const EXPERIMENTS: &[&str] = &["becc-fig2", "becc-fig10", "becc-fig12", "pathquick-fig6", "imtcp-fig16"];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// `label/file -> sha256` for every file below `dir`.
fn hash_dir(label: &str, dir: &Path, into: &mut BTreeMap<String, String>) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(!files.is_empty(), "{label}: no output files in {}", dir.display());
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        into.insert(format!("{label}/{name}"), sha256_hex(&std::fs::read(&f).unwrap()));
    }
}

fn run(args: &[&str], cwd: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_headroom")).args(args).current_dir(cwd).output().unwrap();
    assert!(
        out.status.success(),
        "headroom {} failed:\n{}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn outputs_match_the_committed_sha256() {
    let root = repo_root();
    let tmp = std::env::temp_dir().join(format!("headroom-golden-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let mut got = BTreeMap::new();
    for sc in SCENARIOS {
        let label = sc.trim_start_matches("scenarios/").trim_end_matches(".toml").replace('/', "-");
        let out = tmp.join(&label);
        run(&["sim", "run", sc, "--out", out.to_str().unwrap()], &root);
        hash_dir(&format!("sim/{label}"), &out, &mut got);
    }
    for name in EXPERIMENTS {
        let out = tmp.join("reproduce");
        run(&["reproduce", name, "--out", out.to_str().unwrap()], &root);
        hash_dir(&format!("reproduce/{name}"), &out.join(name), &mut got);
    }
    let _ = std::fs::remove_dir_all(&tmp);

    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden.sha256");
    let text: String = got.iter().map(|(k, v)| format!("{v}  {k}\n")).collect();
    if std::env::var("HEADROOM_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&file, &text).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&file).expect("tests/golden.sha256 (create it with HEADROOM_BLESS=1)");
    let want: BTreeMap<String, String> = committed
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (hash, name) = l.split_once("  ").expect("`<sha256>  <label/file>` lines");
            (name.to_string(), hash.to_string())
        })
        .collect();
    let mut problems = Vec::new();
    for (name, hash) in &want {
        match got.get(name) {
            None => problems.push(format!("missing output {name}")),
            Some(h) if h != hash => problems.push(format!("changed: {name}")),
            Some(_) => {}
        }
    }
    for name in got.keys().filter(|k| !want.contains_key(*k)) {
        problems.push(format!("new output {name}"));
    }
    assert!(
        problems.is_empty(),
        "simulator outputs differ from tests/golden.sha256:\n  {}\nIf the change is intended, rerun with \
         HEADROOM_BLESS=1 and record each changed figure in the commit message and docs/results.md.",
        problems.join("\n  ")
    );
}
