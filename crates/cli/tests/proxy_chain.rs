//! The testbed's chain topology with two explicit proxies (root only; SKIP otherwise, a failure
//! under CI): sender – seg1 – p1 – seg2 – p2 – seg3 – receiver, each segment its own link;
//! `headroom proxy` in p1 and p2; a transfer end-to-end and one through both proxies arrive
//! complete and in order, and nothing of the chain is left afterwards.

use headroom_core::{Dur, Rate};
use headroom_testbed::{Bottleneck, Chain, ChainSpec};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_headroom");

/// An order-sensitive checksum (FNV-1a, 64 bit).
fn fnv(h: &mut u64, data: &[u8]) {
    for &b in data {
        *h ^= b as u64;
        *h = h.wrapping_mul(0x100_0000_01b3);
    }
}

/// The byte at offset `i` of the test stream (not periodic at any power of two).
fn byte_at(i: u64) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8 ^ (i / 7919) as u8
}

/// Starts `headroom proxy` in `node` and waits until it listens (its first stderr line).
fn start_proxy(chain: &Chain, node: &str, listen: &str, to: SocketAddr) -> Child {
    let mut c = chain
        .command(node, BIN)
        .unwrap()
        .args(["proxy", "--listen", listen, "--to", &to.to_string(), "--cc", "reno"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(c.stderr.take().unwrap()).read_line(&mut line).unwrap();
    assert!(line.contains("->"), "proxy in {node} did not start: {line}");
    c
}

/// Sends `len` bytes of the test stream from `node` to `to`; returns the checksum sent.
fn send(chain: &Chain, node: &str, to: SocketAddr, len: u64) -> std::thread::JoinHandle<anyhow::Result<u64>> {
    chain
        .spawn_in(node, move || {
            let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(5))?;
            let mut h = 0xcbf2_9ce4_8422_2325u64;
            let mut buf = vec![0u8; 64 * 1024];
            let mut off = 0u64;
            while off < len {
                let n = (len - off).min(buf.len() as u64) as usize;
                for (k, b) in buf[..n].iter_mut().enumerate() {
                    *b = byte_at(off + k as u64);
                }
                fnv(&mut h, &buf[..n]);
                s.write_all(&buf[..n])?;
                off += n as u64;
            }
            s.shutdown(std::net::Shutdown::Write)?;
            // the far end closes after it has read everything
            let mut rest = Vec::new();
            s.read_to_end(&mut rest)?;
            Ok(h)
        })
        .unwrap()
}

/// Accepts one connection and reads it to the end: (bytes, checksum, peer address).
fn receive(l: &TcpListener) -> (u64, u64, SocketAddr) {
    let (mut c, peer) = l.accept().unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = c.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        fnv(&mut h, &buf[..n]);
        total += n as u64;
    }
    (total, h, peer)
}

#[test]
fn a_three_segment_chain_carries_a_transfer_through_two_proxies_and_leaves_nothing() {
    if !headroom_testbed::testbed_available_for_test() {
        return;
    }
    let seg = |ms, loss| Bottleneck { loss, ..Bottleneck::new(Some(Rate::from_mbps(100)), Dur::from_millis(ms)) };
    // LAN1, WAN (the lossy, long one), LAN2
    let chain = Chain::up(&ChainSpec::new(vec![seg(1, 0.0), seg(10, 0.005), seg(2, 0.0)])).unwrap();
    let names: Vec<&str> = chain.nodes().iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["sender", "p1", "p2", "receiver"]);
    let addr = |n: &str| chain.node(n).unwrap().addr;
    let l = chain.run_in("receiver", || Ok(TcpListener::bind("0.0.0.0:9100")?)).unwrap();
    let len = 6_000_000u64;

    // End to end: the junctions route; the receiver sees the sender's own address.
    let t = send(&chain, "sender", SocketAddr::new(addr("receiver").into(), 9100), len);
    let (got, h, peer) = receive(&l);
    let sent = t.join().unwrap().unwrap();
    assert_eq!((got, h), (len, sent), "end-to-end transfer");
    assert_eq!(peer.ip(), std::net::IpAddr::from(addr("sender")));

    // Split at p1 and p2: sender -> p1:9000 -> p2:9000 -> receiver:9100.
    let mut p2 = start_proxy(&chain, "p2", "0.0.0.0:9000", SocketAddr::new(addr("receiver").into(), 9100));
    let mut p1 = start_proxy(&chain, "p1", "0.0.0.0:9000", SocketAddr::new(addr("p2").into(), 9000));
    let (fwd_before, _) = chain.segment_counters(2).unwrap();
    let t = send(&chain, "sender", SocketAddr::new(addr("p1").into(), 9000), len);
    let (got, h, peer) = receive(&l);
    let sent = t.join().unwrap().unwrap();
    assert_eq!((got, h), (len, sent), "transfer through two proxies");
    // the receiver's peer is p2's end of segment 3, not the sender
    assert_eq!(peer.ip().to_string(), "10.9.3.1");
    let (fwd, _) = chain.segment_counters(2).unwrap();
    let wan = fwd.since(&fwd_before);
    assert!(wan.bytes_out >= len, "the WAN carried the data: {wan:?}");
    assert!(wan.lost > 0, "the WAN's 0.5 % loss dropped packets, which the split legs repaired: {wan:?}");
    assert!(p1.try_wait().unwrap().is_none() && p2.try_wait().unwrap().is_none(), "proxies still run");

    // Teardown kills the proxies with the namespaces and removes the state.
    let prefix = chain.prefix().to_string();
    let namespaces = chain.namespaces().to_vec();
    chain.down().unwrap();
    for c in [&mut p1, &mut p2] {
        let st = c.wait().unwrap();
        assert!(!st.success(), "the proxy was killed by the teardown: {st}");
    }
    for ns in &namespaces {
        assert!(!Path::new(&format!("/run/netns/{ns}")).exists(), "{ns} left behind");
    }
    assert!(!Path::new(headroom_testbed::bed::STATE_ROOT).join(&prefix).exists(), "state of {prefix} left");
}

/// docs/proxy.md's operator commands, literally: `testbed up scenarios/testbed/chain.toml`, a
/// `recv` and two proxies started with `testbed exec`, `send` through both, then the stop
/// command `up` itself prints. That command must name this testbed only (`testbed down` alone
/// removes every testbed on the machine, other users' included): it printed the bare form
/// before session 8. The teardown stops the processes in the nodes with SIGTERM first, so a
/// transparent proxy left running removes its record (SIGKILL left it, before session 8).
#[test]
fn the_documented_chain_commands_work_and_the_printed_stop_command_removes_only_this_testbed() {
    if !headroom_testbed::testbed_available_for_test() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut up = Kill(
        std::process::Command::new(BIN)
            .args(["testbed", "up", "scenarios/testbed/chain.toml"])
            .current_dir(&root)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(up.0.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let prefix = first.strip_prefix("testbed ").and_then(|l| l.split(' ').next()).unwrap().to_string();
    let stop = lines.map(Result::unwrap).find(|l| l.starts_with("run commands")).unwrap();
    let down = format!("`headroom testbed down --prefix {prefix}`");
    assert!(stop.contains(&down), "{stop:?} should name {down}");
    let exec = |node: &str, argv: &[&str]| {
        std::process::Command::new(BIN)
            .args(["testbed", "exec", "--prefix", &prefix, node, "--", BIN])
            .args(argv)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let _recv = Kill(exec("receiver", &["recv", "--listen", "0.0.0.0:5201"]));
    let _p2 = Kill(exec("p2", &["proxy", "--listen", "0.0.0.0:9000", "--to", "10.9.3.2:5201", "--cc", "cubic"]));
    let _p1 = Kill(exec("p1", &["proxy", "--listen", "0.0.0.0:9000", "--to", "10.9.2.2:9000", "--cc", "cubic"]));
    // A transparent proxy in p2 too (intercepting port 1 only: nothing here), left running for
    // the teardown, which must let it remove its record (SIGTERM before SIGKILL).
    let mut tp = Kill(exec("p2", &["proxy", "--transparent", "--ports", "1"]));
    let mut err = BufReader::new(tp.0.stderr.take().unwrap()).lines();
    let table = err
        .find_map(|l| l.unwrap().split("nftables table ").nth(1).map(str::to_string))
        .expect("the transparent proxy names its table");
    let record = Path::new("/run/headroom-proxy").join(format!("{table}.json"));
    assert!(record.exists(), "{} recorded", record.display());
    std::thread::sleep(Duration::from_millis(500));
    // 1 MB: the proxies' buffers drain over LAN2 (50 ms, 1 % loss) within seconds.
    let out = exec("sender", &["send", "10.9.1.2:9000", "--bytes", "1MB"]).wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("receiver got 1000000 B"), "{text}");
    let st = std::process::Command::new(BIN).args(["testbed", "down", "--prefix", &prefix]).status().unwrap();
    assert!(st.success());
    let t = std::time::Instant::now();
    while up.0.try_wait().unwrap().is_none() {
        assert!(t.elapsed() < Duration::from_secs(10), "`testbed up` still runs after the printed stop command");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!Path::new(headroom_testbed::bed::STATE_ROOT).join(&prefix).exists(), "state of {prefix} left");
    assert!(!record.exists(), "the transparent proxy was SIGKILLed by the teardown: {} left", record.display());
}

/// Stops a child process (by its pid) when dropped: SIGTERM (so that `testbed up` removes its
/// testbed), SIGKILL after 10 s; nothing is left running if a check fails.
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        // SAFETY: signalling our own child by pid.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let t = std::time::Instant::now();
        while matches!(self.0.try_wait(), Ok(None)) && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
