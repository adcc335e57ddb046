//! Helpers shared by the integration tests that compare output directories.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every file below `dir` whose name `keep` accepts (relative path -> bytes).
pub fn files(dir: &Path, keep: impl Fn(&str) -> bool) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if keep(&p.file_name().unwrap().to_string_lossy()) {
                out.insert(p.strip_prefix(dir).unwrap().to_path_buf(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// Runs `headroom ARGS` on `threads` rayon threads; its stdout (a failure fails the test).
pub fn headroom(args: &[&str], threads: &str) -> String {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(args)
        .env("RAYON_NUM_THREADS", threads)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}
