//! `headroom proxy --transparent` on the testbed (root only; SKIP otherwise, a failure under
//! CI): the proxy runs in the left router and intercepts only what policy A selects; after
//! SIGKILL, `headroom proxy --cleanup` leaves no nftables table, rule or route behind. On the
//! chain topology, which carries IPv6, the same for both address families at once.

use headroom_core::Dur;
use headroom_testbed::bed::Netns;
use headroom_testbed::{Bottleneck, Chain, ChainSpec, Testbed, Topology};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_headroom");

fn in_ns(ns: &str, argv: &[&str]) -> String {
    let out = Command::new("ip").args(["netns", "exec", ns]).args(argv).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What of ours is installed in `ns`: nftables tables, ip rules and routes of our tables (both
/// address families).
fn leftovers(ns: &str) -> Vec<String> {
    let mut v: Vec<String> =
        in_ns(ns, &["nft", "list", "tables"]).lines().filter(|l| l.contains("hrproxy_")).map(String::from).collect();
    for family in ["-4", "-6"] {
        v.extend(in_ns(ns, &["ip", family, "rule", "show"]).lines().filter(|l| l.contains("0x4852")).map(String::from));
        v.extend(
            in_ns(ns, &["ip", family, "route", "show", "table", "all"])
                .lines()
                .filter(|l| l.starts_with("local default dev lo table"))
                .map(|l| format!("{family} {l}")),
        );
    }
    v
}

/// What a running transparent proxy installs: its table, and a rule and a route per family.
const INSTALLED: usize = 5;

fn start_proxy(ns: &str, extra: &[&str]) -> Child {
    let mut c = Command::new("ip")
        .args(["netns", "exec", ns, BIN, "proxy", "--transparent", "--policy", "a"])
        .args(extra)
        // --log-conns lines (a few; read after the proxy exits)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Ready when the table, the rules and the routes exist.
    let t = Instant::now();
    while leftovers(ns).len() < INSTALLED {
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

/// Connects from `host` (of a dumbbell or a chain) to the server and returns the peer address
/// the server saw.
fn seen_from(tb: &Netns, host: &str, server: SocketAddr) -> String {
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

#[test]
fn transparent_proxy_intercepts_ipv6_and_ipv4_by_policy_and_cleans_up_both_families() {
    if !headroom_testbed::testbed_available_for_test() {
        return;
    }
    let seg = || Bottleneck::new(None, Dur::from_millis(1));
    let chain = Chain::up(&ChainSpec::new(vec![seg(), seg()])).unwrap();
    let p1 = format!("{}p1", chain.prefix());
    let (sender4, sender6) = (chain.host("sender").unwrap().addr, chain.addr6("sender").unwrap());
    let (receiver4, receiver6) = (chain.host("receiver").unwrap().addr, chain.addr6("receiver").unwrap());
    let p1_6 = chain.addr6("p1").unwrap();
    // The server in the receiver answers each connection with the peer address it sees, on both
    // families (a dual-stack listener; IPv4 peers shown as IPv4).
    let l = chain.run_in("receiver", || Ok(TcpListener::bind("[::]:8080")?)).unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let mut b = Vec::new();
            let _ = s.read_to_end(&mut b);
            let _ = s.write_all(s.peer_addr().unwrap().ip().to_canonical().to_string().as_bytes());
        }
    });
    let (server4, server6) = (SocketAddr::new(receiver4.into(), 8080), SocketAddr::new(receiver6.into(), 8080));
    assert_eq!(seen_from(&chain, "sender", server6), sender6.to_string(), "IPv6 before the proxy");
    assert_eq!(seen_from(&chain, "sender", server4), sender4.to_string(), "IPv4 before the proxy");

    // Policy A lists the sender's IPv6 address only: IPv6 is split (the server sees p1's address
    // on its upstream segment, the proxy connecting from its own address), IPv4 passes untouched.
    let only6 = format!("{sender6}/128");
    let mut p = start_proxy(&p1, &["--users", &only6]);
    let via = seen_from(&chain, "sender", server6);
    let expected_p1 = headroom_testbed::chain::seg_addr6(2, 1);
    assert_eq!(via, expected_p1.to_string(), "IPv6 through the proxy (p1 is {p1_6} upstream)");
    assert_eq!(seen_from(&chain, "sender", server4), sender4.to_string(), "IPv4 is not listed: untouched");
    p.kill().unwrap();
    p.wait().unwrap();
    assert_eq!(leftovers(&p1).len(), INSTALLED, "a killed proxy cannot have cleaned up");
    let out = Command::new("ip").args(["netns", "exec", &p1, BIN, "proxy", "--cleanup"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(leftovers(&p1), Vec::<String>::new(), "--cleanup removes both families' rules and routes");
    assert_eq!(seen_from(&chain, "sender", server6), sender6.to_string(), "after cleanup: untouched");

    // Both families listed, full transparency: the server sees the sender's own addresses, and the
    // proxy's log shows two split connections, one per family; SIGTERM removes everything.
    let both = format!("{sender4}/32,{sender6}/128");
    let mut p = start_proxy(&p1, &["--users", &both, "--full", "--log-conns"]);
    assert_eq!(seen_from(&chain, "sender", server6), sender6.to_string());
    assert_eq!(seen_from(&chain, "sender", server4), sender4.to_string());
    // SAFETY: signalling our own child by pid.
    unsafe { libc::kill(p.id() as i32, libc::SIGTERM) };
    let st = p.wait().unwrap();
    let (mut err, mut log) = (String::new(), String::new());
    p.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    p.stdout.take().unwrap().read_to_string(&mut log).unwrap();
    assert!(st.success(), "{err}");
    let split: Vec<&str> = log.lines().filter(|l| l.contains("\"split\":true")).collect();
    assert_eq!(split.len(), 2, "one split connection per family: {log}");
    for a in [IpAddr::from(sender6), IpAddr::from(sender4)] {
        let client = SocketAddr::new(a, 0).to_string();
        let client = format!("\"client\":\"{}", client.trim_end_matches('0'));
        assert!(split.iter().any(|l| l.contains(&client)), "{client} in {split:?}");
    }
    assert_eq!(leftovers(&p1), Vec::<String>::new());
    chain.down().unwrap();
}

/// Kills the proxy if the test fails before stopping it (its table is then left for `--cleanup`).
struct Kill(Option<Child>);

impl Drop for Kill {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Connects from `host` to `server`, which writes the peer address it sees and a newline as
/// soon as it accepts; returns the open connection and that address.
fn held_from(tb: &Netns, host: &str, server: SocketAddr) -> (TcpStream, String) {
    tb.run_in(host, move || {
        let mut s = TcpStream::connect_timeout(&server, Duration::from_secs(5))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while s.read(&mut b)? == 1 && b[0] != b'\n' {
            line.push(b[0]);
        }
        Ok((s, String::from_utf8_lossy(&line).into_owned()))
    })
    .unwrap()
}

/// Whether the proxy's gate set in `ns` holds "tcp" (new connections are diverted).
fn gate_open(ns: &str) -> bool {
    let table = in_ns(ns, &["nft", "list", "tables"])
        .lines()
        .find_map(|l| l.strip_prefix("table inet ").filter(|t| t.starts_with("hrproxy_")).map(String::from))
        .expect("the proxy's table");
    in_ns(ns, &["nft", "list", "set", "inet", &table, "gate"]).contains("elements = { tcp }")
}

fn wait_gate(ns: &str, open: bool) {
    let t = Instant::now();
    while gate_open(ns) != open {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the gate did not become {}",
            if open { "open" } else { "closed" }
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn at_the_connection_cap_new_connections_bypass_the_transparent_proxy() {
    if !headroom_testbed::testbed_available_for_test() {
        return;
    }
    let tb = Testbed::up(&Topology::dumbbell(2, Bottleneck::new(None, Dur::from_millis(1)))).unwrap();
    let router = format!("{}left", tb.prefix());
    let r1 = tb.host("r1").unwrap().addr;
    let s1 = tb.host("s1").unwrap().addr;
    // The server tells each connection at once which peer address it sees, then holds it open
    // until the client closes.
    let l = tb.run_in("r1", || Ok(TcpListener::bind("0.0.0.0:8081")?)).unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let _ = s.write_all(format!("{}\n", s.peer_addr().unwrap().ip()).as_bytes());
                let _ = s.read_to_end(&mut Vec::new());
            });
        }
    });
    let server = SocketAddr::new(r1.into(), 8081);

    // A cap of one connection: the first is split; while it is open the gate is closed and the
    // next connection bypasses the proxy (the server sees the client itself) without waiting.
    let s1_prefix = format!("{s1}/32");
    let mut p = Kill(Some(start_proxy(&router, &["--users", &s1_prefix, "--max-conns", "1"])));
    wait_gate(&router, true);
    let (first, via) = held_from(&tb, "s1", server);
    assert_ne!(via, s1.to_string(), "the first connection is split (from the router's address)");
    wait_gate(&router, false);
    let t = Instant::now();
    let (second, seen) = held_from(&tb, "s1", server);
    assert_eq!(seen, s1.to_string(), "at the cap: untouched, not intercepted");
    assert!(t.elapsed() < Duration::from_secs(2), "a bypassed connection does not wait: {:?}", t.elapsed());
    // Below the cap again the gate reopens and connections are split again.
    drop(first);
    wait_gate(&router, true);
    let (third, via) = held_from(&tb, "s1", server);
    assert_ne!(via, s1.to_string(), "below the cap: split again");
    drop((second, third));

    let mut c = p.0.take().unwrap();
    // SAFETY: signalling our own child by pid.
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    let st = c.wait().unwrap();
    let mut err = String::new();
    c.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(st.success(), "{err}");
    assert!(err.contains("\"split\":2"), "two connections went through the proxy: {err}");
    assert!(err.contains("\"cap_bypass_closes\":"), "{err}");
    assert!(!err.contains("\"cap_bypass_closes\":0"), "the gate closed at the cap: {err}");
    assert_eq!(leftovers(&router), Vec::<String>::new());
    tb.down().unwrap();
}
