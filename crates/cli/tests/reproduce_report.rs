//! `headroom reproduce ... --report`: the experiments' files are the same whatever the number of
//! threads (rayon), and the report holds every figure the run drew, with no point outside its
//! axes (the report writer refuses such a figure), and the verdict rows' numbers of the CSV.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn run(out: &Path, threads: &str, names: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["reproduce", "--report", "--out", out.to_str().unwrap()])
        .args(names)
        .env("RAYON_NUM_THREADS", threads)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// Every file below `dir` (relative path -> bytes), the report's own files left out.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if !p.file_name().unwrap().to_string_lossy().starts_with("report.") {
                out.insert(p.strip_prefix(dir).unwrap().to_path_buf(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn one_or_two_threads_give_the_same_files_and_the_report_has_every_figure() {
    let tmp = std::env::temp_dir().join(format!("headroom-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let names = ["becc-fig2", "becc-fig12"];
    let (a, b) = (tmp.join("t1"), tmp.join("t2"));
    let out1 = run(&a, "1", &names);
    run(&b, "2", &names);
    let (fa, fb) = (files(&a), files(&b));
    assert!(fa.len() > 5, "{:?}", fa.keys());
    assert_eq!(fa.keys().collect::<Vec<_>>(), fb.keys().collect::<Vec<_>>());
    for (k, v) in &fa {
        assert!(fb[k] == *v, "{} differs between 1 and 2 threads", k.display());
    }
    assert!(out1.contains("report.html"), "{out1}");
    let html = std::fs::read_to_string(a.join("report.html")).unwrap();
    let md = std::fs::read_to_string(a.join("report.md")).unwrap();
    let svgs: Vec<&PathBuf> = fa.keys().filter(|p| p.extension().is_some_and(|e| e == "svg")).collect();
    assert!(svgs.len() >= 2, "{svgs:?}");
    for p in svgs {
        let id = p.to_string_lossy().replace('\\', "/");
        assert!(html.contains(&format!("<figure id=\"{id}\">")), "{id} not in report.html");
        assert!(html.contains(std::str::from_utf8(&fa[p]).unwrap()), "{id}'s SVG not inlined");
        assert!(md.contains(&format!("]({id})")), "{id} not in report.md");
    }
    assert!(
        !html.contains("http://")
            || html.matches("http://").count() == html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count()
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
