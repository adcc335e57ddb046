//! `headroom proxy-web` on the testbed (root only; SKIP otherwise, a failure under CI): a short
//! run under policies none and A writes the CSV, SVG and summary; the CSV's rows are the
//! transfers the summary counts; split flags follow the policy (none: nothing split; A: exactly
//! the listed sources) and agree with the servers' view; the summary's medians and p95s are
//! those of the CSV; no namespace of the run is left.

use headroom_core::stats::Sorted;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_headroom");

fn fmt_q(v: &[f64], p: f64) -> String {
    Sorted::new(v.to_vec()).quantile(p).map_or_else(|| "-".into(), |x| format!("{x:.3}"))
}

#[test]
fn proxy_web_splits_by_policy_and_its_summary_is_computed_from_its_csv() {
    if !headroom_testbed::testbed_available_for_test() {
        return;
    }
    let out = std::env::temp_dir().join(format!("hr-proxy-web-test-{}", std::process::id()));
    let r = Command::new(BIN)
        .args(["proxy-web", "--policies", "none,a", "--ftp-flows", "4", "--web-per-second", "10"])
        .args(["--web-sources", "6", "--a-share", "0.5", "--warmup", "1s", "--web-time", "3s", "--drain", "5s"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{stderr}");
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert_eq!(String::from_utf8_lossy(&r.stdout), summary);
    assert!(std::fs::read_to_string(out.join("cdf.svg")).unwrap().starts_with("<svg"));
    let csv = std::fs::read_to_string(out.join("transfers.csv")).unwrap();
    let rows: Vec<Vec<&str>> = csv.lines().skip(1).map(|l| l.split(',').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == 8), "{csv}");
    let users: Vec<&str> =
        summary.lines().find_map(|l| l.strip_prefix("policy a users: ")).unwrap().split(", ").collect();
    // Web transfers come from the web addresses only, each listed as a /32 or not at all.
    let listed = |src: &str| users.contains(&format!("{src}/32").as_str());
    let mut ids = std::collections::HashSet::new();
    for policy in ["none", "a"] {
        let mine: Vec<&Vec<&str>> = rows.iter().filter(|r| r[0] == policy).collect();
        assert!(mine.iter().all(|r| ids.insert(r[1])), "transfer ids repeat");
        let head = summary.lines().find(|l| l.starts_with(&format!("{policy}: web transfers"))).unwrap();
        let n: usize = head.split_whitespace().nth(3).unwrap().parse().unwrap();
        assert_eq!(mine.len(), n, "{head}");
        assert!(n >= 10, "{head}");
        // The proxy's records and the servers' view agree on every transfer the server saw.
        let agree = head.rsplit(' ').next().unwrap();
        let (k, m) = agree.split_once('/').unwrap();
        assert_eq!(k, m, "{head}");
        for r in &mine {
            let split = r[6] == "true";
            match policy {
                "none" => assert!(!split, "{r:?}"),
                _ if r[7].is_empty() => {}
                _ => assert_eq!(split, listed(r[3]), "{r:?} (users {users:?})"),
            }
        }
        if policy == "a" {
            assert!(mine.iter().any(|r| r[6] == "true") && mine.iter().any(|r| r[6] == "false"), "{csv}");
        }
        let delays = |split: &str| -> Vec<f64> {
            mine.iter().filter(|r| r[6] == split && !r[7].is_empty()).map(|r| r[7].parse().unwrap()).collect()
        };
        let (sp, ns) = (delays("true"), delays("false"));
        let want = format!(
            "{policy}: median / p95 delay (s): split {} / {}, non-split {} / {}",
            fmt_q(&sp, 0.5),
            fmt_q(&sp, 0.95),
            fmt_q(&ns, 0.5),
            fmt_q(&ns, 0.95)
        );
        assert!(summary.lines().any(|l| l == want), "{want}\n{summary}");
    }
    // Nothing of the run is left: its namespaces are gone.
    let prefix = stderr.lines().find_map(|l| l.strip_prefix("proxy-web: testbed prefix ")).unwrap().trim();
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&ns.stdout).contains(prefix), "namespaces of {prefix} left");
    let _ = std::fs::remove_dir_all(&out);
}
