//! `down --stale` removes exactly what a dead owner's state file records, and nothing named like
//! ours that no state file records (root only; prints `SKIP: <reason>` otherwise).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use headroom_testbed::bed::STATE_ROOT;
use headroom_testbed::RunState;

fn netns_exists(name: &str) -> bool {
    Path::new("/run/netns").join(name).exists()
}

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).stdin(Stdio::null()).status().expect("running ip");
    assert!(st.success(), "ip {args:?} failed");
}

/// Removes everything the test made, also when an assertion failed.
struct Cleanup {
    namespaces: Vec<String>,
    state_dirs: Vec<PathBuf>,
    children: Vec<Child>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in &self.namespaces {
            if netns_exists(ns) {
                let _ = Command::new("ip").args(["netns", "del", ns]).status();
            }
        }
        for d in &self.state_dirs {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// A prefix unique to this test run, in the testbed's own `hr<hex>-` shape.
fn unique_prefix(tag: u32) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("hr{:x}{tag:x}{:04x}-", std::process::id(), nanos & 0xffff)
}

#[test]
fn down_stale_leaves_unrecorded_namespaces_and_their_processes_alone() {
    if let Some(why) = headroom_testbed::unsupported_reason() {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "SKIP: {why}");
        return;
    }
    let foreign = format!("{}x", unique_prefix(0xa));
    let recorded_prefix = unique_prefix(0xb);
    let recorded = format!("{recorded_prefix}s1");
    let state_dir = Path::new(STATE_ROOT).join(&recorded_prefix);
    let mut guard = Cleanup {
        namespaces: vec![foreign.clone(), recorded.clone()],
        state_dirs: vec![state_dir.clone()],
        children: vec![],
    };

    // Somebody else's namespace that merely looks like ours, with a process in it.
    ip(&["netns", "add", &foreign]);
    let sleeper = Command::new("ip")
        .args(["netns", "exec", &foreign, "sleep", "60"])
        .stdin(Stdio::null())
        .spawn()
        .expect("starting sleep in the foreign namespace");
    guard.children.push(sleeper);

    // A run whose owner is dead: its pid belongs to a child that has exited and been reaped.
    let mut dead = Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    ip(&["netns", "add", &recorded]);
    let state = RunState {
        prefix: recorded_prefix.clone(),
        pid: dead_pid,
        pid_start: 1,
        namespaces: vec![recorded.clone()],
        hosts: vec![],
        bottleneck_netns: recorded.clone(),
        bottleneck_dev: "dbox".into(),
    };
    std::fs::create_dir_all(&state_dir).unwrap();
    std::fs::write(state_dir.join("state.json"), serde_json::to_vec_pretty(&state).unwrap()).unwrap();

    let removed = headroom_testbed::down_stale().unwrap();

    assert!(netns_exists(&foreign), "down_stale removed {foreign}, which no state file records (removed {removed:?})");
    assert!(
        guard.children[0].try_wait().unwrap().is_none(),
        "down_stale killed the process running in the unrecorded namespace {foreign}"
    );
    assert!(
        headroom_testbed::bed::unrecorded_namespaces().contains(&foreign),
        "the unrecorded namespace is not reported"
    );
    assert!(removed.contains(&recorded_prefix), "the dead run {recorded_prefix} was not removed: {removed:?}");
    assert!(!netns_exists(&recorded), "the dead run's namespace {recorded} is still there");
    assert!(!state_dir.exists(), "the dead run's state directory is still there");
    drop(guard);
    assert!(!netns_exists(&foreign));
}
