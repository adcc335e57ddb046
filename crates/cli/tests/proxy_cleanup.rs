//! `headroom proxy --cleanup` with records of dead transparent proxies (root only; SKIP
//! otherwise, a failure under CI): a record whose network namespace no longer exists is dropped
//! with a printed line (session 5 left three of four such records), and one whose namespace
//! still exists — not the one `--cleanup` runs in — has its nftables table, rule and route
//! removed inside that namespace.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_headroom");
const STATE_ROOT: &str = "/run/headroom-proxy";

/// Removes what the test created (records, the namespace) even when it fails.
struct Cleanup {
    files: Vec<String>,
    netns: Option<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
        if let Some(ns) = &self.netns {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// A pid that names no process now (a child that has exited and been reaped).
fn dead_pid() -> u32 {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

fn write_record(table: &str, mark: u32, route_table: u32, netns_inode: u64) -> String {
    std::fs::create_dir_all(STATE_ROOT).unwrap();
    let path = format!("{STATE_ROOT}/{table}.json");
    let v = serde_json::json!({"table": table, "mark": mark, "route_table": route_table, "port": 9,
                               "pid": dead_pid(), "pid_start": 1u64, "netns_inode": netns_inode});
    std::fs::write(&path, v.to_string()).unwrap();
    path
}

fn in_ns(ns: &str, argv: &[&str]) -> String {
    let out = Command::new("ip").args(["netns", "exec", ns]).args(argv).output().unwrap();
    assert!(out.status.success(), "{argv:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn cleanup_drops_records_of_vanished_namespaces_and_cleans_existing_ones() {
    if !headroom_testbed::testbed_available_for_test() {
        return;
    }
    let me = std::process::id();
    let (gone, other) = (format!("hrproxy_{me:x}_gone"), format!("hrproxy_{me:x}_other"));
    let ns = format!("hrclean{me:x}");
    let mut guard = Cleanup { files: vec![], netns: None };
    // Inode 1 is never a namespace's (nsfs inodes are allocated from 0xF0000000 up).
    guard.files.push(write_record(&gone, 0x4852_7001, 26_001, 1));
    // A live namespace other than ours with a dead proxy's table, rule and route in it.
    assert!(Command::new("ip").args(["netns", "add", &ns]).status().unwrap().success());
    guard.netns = Some(ns.clone());
    in_ns(&ns, &["nft", "add", "table", "ip", &other]);
    in_ns(&ns, &["ip", "rule", "add", "fwmark", "0x48527002", "lookup", "26002", "priority", "26002"]);
    in_ns(&ns, &["ip", "link", "set", "lo", "up"]);
    in_ns(&ns, &["ip", "route", "add", "local", "0.0.0.0/0", "dev", "lo", "table", "26002"]);
    use std::os::unix::fs::MetadataExt;
    let inode = std::fs::metadata(format!("/run/netns/{ns}")).unwrap().ino();
    guard.files.push(write_record(&other, 0x4852_7002, 26_002, inode));

    let out = Command::new(BIN).args(["proxy", "--cleanup"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.lines().any(|l| l.contains(&gone) && l.contains("no longer exists")),
        "a line about the vanished namespace's record: {text}"
    );
    assert!(!std::path::Path::new(&guard.files[0]).exists(), "the vanished namespace's record is left: {text}");
    assert!(text.lines().any(|l| l.starts_with(&format!("removed {other}"))), "{text}");
    assert!(!std::path::Path::new(&guard.files[1]).exists(), "the live namespace's record is left");
    assert!(!in_ns(&ns, &["nft", "list", "tables"]).contains(&other), "its table is left");
    assert!(!in_ns(&ns, &["ip", "rule", "show"]).contains("0x48527002"), "its rule is left");
    assert_eq!(in_ns(&ns, &["ip", "route", "show", "table", "26002"]).trim(), "", "its route is left");
}
