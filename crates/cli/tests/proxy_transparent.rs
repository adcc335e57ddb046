//! `headroom proxy --transparent` on the testbed (root only; SKIP otherwise, a failure under
//! CI): the proxy runs in the left router and intercepts only what policy A selects; after
//! SIGKILL, `headroom proxy --cleanup` leaves no nftables table, rule or route behind.

use headroom_core::Dur;
use headroom_testbed::{Bottleneck, Testbed, Topology};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_headroom");

fn in_ns(ns: &str, argv: &[&str]) -> String {
    let out = Command::new("ip").args(["netns", "exec", ns]).args(argv).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What of ours is installed in `ns`: nftables tables, ip rules and routes of our tables.
fn leftovers(ns: &str) -> Vec<String> {
    let mut v: Vec<String> =
        in_ns(ns, &["nft", "list", "tables"]).lines().filter(|l| l.contains("hrproxy_")).map(String::from).collect();
    v.extend(in_ns(ns, &["ip", "rule", "show"]).lines().filter(|l| l.contains("0x4852")).map(String::from));
    v.extend(
        in_ns(ns, &["ip", "route", "show", "table", "all"])
            .lines()
            .filter(|l| l.starts_with("local default dev lo table"))
            .map(String::from),
    );
    v
}

fn start_proxy(ns: &str, extra: &[&str]) -> Child {
    let mut c = Command::new("ip")
        .args(["netns", "exec", ns, BIN, "proxy", "--transparent", "--policy", "a"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Ready when the table exists.
    let t = Instant::now();
    while leftovers(ns).len() < 3 {
        assert!(t.elapsed() < Duration::from_secs(10), "the proxy installed nothing");
        if let Some(st) = c.try_wait().unwrap() {
            let mut e = String::new();
            c.stderr.take().unwrap().read_to_string(&mut e).unwrap();
            panic!("the proxy exited ({st}): {e}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    c
}

/// Connects from `host` to the server and returns the peer address the server saw.
fn seen_from(tb: &Testbed, host: &str, server: SocketAddr) -> String {
    tb.run_in(host, move || {
        let mut s = TcpStream::connect_timeout(&server, Duration::from_secs(5))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(b"who am i")?;
        s.shutdown(std::net::Shutdown::Write)?;
        let mut r = String::new();
        s.read_to_string(&mut r)?;
        Ok(r)
    })
    .unwrap()
}

#[test]
fn transparent_proxy_intercepts_only_policy_a_sources_and_cleanup_removes_everything() {
    if !headroom_testbed::testbed_available_for_test() {
        return;
    }
    let tb = Testbed::up(&Topology::dumbbell(2, Bottleneck::new(None, Dur::from_millis(1)))).unwrap();
    let router = format!("{}left", tb.prefix());
    let r1 = tb.host("r1").unwrap().addr;
    let (s1, s2) = (tb.host("s1").unwrap().addr, tb.host("s2").unwrap().addr);
    // The server answers each connection with the peer address it sees.
    let l = tb.run_in("r1", || Ok(TcpListener::bind("0.0.0.0:8080")?)).unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let mut b = Vec::new();
            let _ = s.read_to_end(&mut b);
            let _ = s.write_all(s.peer_addr().unwrap().ip().to_string().as_bytes());
        }
    });
    let server = SocketAddr::new(r1.into(), 8080);
    assert_eq!(seen_from(&tb, "s1", server), s1.to_string(), "before the proxy");

    // Policy A splits s1 only. The proxy connects onward from the router's own address.
    let s1_prefix = format!("{s1}/32");
    let mut p = start_proxy(&router, &["--users", &s1_prefix]);
    let via_s1 = seen_from(&tb, "s1", server);
    assert_ne!(via_s1, s1.to_string(), "s1 is listed: its connection must come from the proxy");
    assert!(via_s1.starts_with("10.1."), "the proxy's router address, got {via_s1}");
    assert_eq!(seen_from(&tb, "s2", server), s2.to_string(), "s2 is not listed: untouched");
    // SIGKILL: the rules stay, --cleanup removes them (and only stale ones).
    p.kill().unwrap();
    p.wait().unwrap();
    assert!(!leftovers(&router).is_empty(), "a killed proxy cannot have cleaned up");
    let out = Command::new("ip").args(["netns", "exec", &router, BIN, "proxy", "--cleanup"]).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("removed hrproxy_"));
    assert_eq!(leftovers(&router), Vec::<String>::new());
    assert_eq!(seen_from(&tb, "s1", server), s1.to_string(), "after cleanup nothing is intercepted");

    // Full transparency: the server sees the client's own address, through the proxy; SIGTERM
    // removes everything.
    let mut p = start_proxy(&router, &["--users", &s1_prefix, "--full", "--log-conns"]);
    assert_eq!(seen_from(&tb, "s1", server), s1.to_string());
    // SAFETY: signalling our own child by pid.
    unsafe { libc::kill(p.id() as i32, libc::SIGTERM) };
    let st = p.wait().unwrap();
    let mut err = String::new();
    p.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(st.success(), "{err}");
    assert!(err.contains("\"split\":1"), "the s1 connection went through the proxy: {err}");
    assert_eq!(leftovers(&router), Vec::<String>::new());
    tb.down().unwrap();
}
