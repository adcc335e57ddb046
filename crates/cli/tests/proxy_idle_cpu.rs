//! An idle `headroom proxy` sleeps: its main loop waits for signals with a deadline that moves
//! on, with or without `--stats` (a deadline left in the past once made it spin a core).

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_headroom");

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = s.rsplit_once(')').unwrap().1.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

#[test]
fn an_idle_proxy_uses_almost_no_cpu() {
    let upstream = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    for extra in [&[][..], &["--stats", "1s"][..]] {
        let mut c = Command::new(BIN)
            .args(["proxy", "--listen", "127.0.0.1:0", "--to", &upstream.to_string()])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let t0 = cpu_ticks(c.id());
        std::thread::sleep(Duration::from_secs(3));
        let used = cpu_ticks(c.id()) - t0;
        let _ = c.kill();
        let _ = c.wait();
        // A sleeping proxy wakes ~15 times a second for microseconds; a spinning one gets at
        // least its share of a core even on a loaded machine (tens of ticks in 3 s).
        assert!(used <= 3, "idle proxy {extra:?} used {used} clock ticks of CPU in 3 s");
    }
}
