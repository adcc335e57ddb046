//! `--emulate-cpu` on loopback (no root): relayed throughput is bounded by packet_size / T for
//! all connections together (one shared FIFO CPU), a connection's SYN and SYN-ACK cost 10 T
//! each before its first byte, and connections that are not split cost nothing; policy D is fed
//! the emulated CPU's waits (it stops splitting while they are long, and splits again once the
//! CPU has been idle).
//!
//! The emulated CPU is a virtual clock, so its bounds are hard lower bounds on elapsed time
//! whatever the machine's load; the upper bounds are generous (a loaded machine only adds).

use headroom_core::overlay::{SplitPolicy, SplitWhileShortQueue};
use headroom_core::units::Dur;
use headroom_proxy::{spawn, ProxyConfig, ProxyHandle};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering::Relaxed;
use std::thread;
use std::time::{Duration, Instant};

const PACKET: u64 = 1448;

/// A server that reads an 8-byte size and sends that many bytes, then closes.
fn server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            thread::spawn(move || {
                let mut req = [0u8; 8];
                s.read_exact(&mut req).unwrap();
                let mut left = u64::from_be_bytes(req);
                let buf = vec![7u8; 64 * 1024];
                while left > 0 {
                    let n = left.min(buf.len() as u64) as usize;
                    s.write_all(&buf[..n]).unwrap();
                    left -= n as u64;
                }
            });
        }
    });
    a
}

fn proxy(up: SocketAddr, t: Duration, policy: SplitPolicy) -> ProxyHandle {
    let mut c = ProxyConfig::new("127.0.0.1:0".parse().unwrap(), up);
    c.emulate_cpu = Some(t);
    c.packet_bytes = PACKET;
    c.policy = policy;
    spawn(c).unwrap()
}

/// Downloads `size` bytes through `p`; returns (time to the first byte, time to the last),
/// both from the start of connect.
fn download(p: SocketAddr, size: u64) -> (Duration, Duration) {
    let t0 = Instant::now();
    let mut s = TcpStream::connect(p).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(&size.to_be_bytes()).unwrap();
    let mut buf = vec![0u8; 256 * 1024];
    let (mut got, mut first) = (0u64, None);
    while got < size {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed after {got} of {size} bytes");
        first.get_or_insert_with(|| t0.elapsed());
        got += n as u64;
    }
    (first.unwrap(), t0.elapsed())
}

/// The CPU time the proxy must have reserved: 10 T per SYN and SYN-ACK, T per relayed packet.
fn expected_busy(conns: u64, bytes: u64, t: Duration) -> Duration {
    t * 20 * conns as u32 + Duration::from_nanos((u128::from(bytes) * t.as_nanos() / u128::from(PACKET)) as u64)
}

#[test]
fn relayed_throughput_is_bounded_by_packet_size_over_t_for_all_connections_together() {
    let t = Duration::from_millis(1);
    let p = proxy(server(), t, SplitPolicy::All);
    let addr = p.local_addr();
    // Three downloads at once share the one CPU: together they take at least their total cost.
    let size = 250 * PACKET; // 250 ms of CPU each
    let t0 = Instant::now();
    let hs: Vec<_> = (0..3).map(|_| thread::spawn(move || download(addr, size))).collect();
    let each: Vec<(Duration, Duration)> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    let all = t0.elapsed();
    let st = p.stats();
    // The relay counts a chunk once its write returns, which can be after the client has read
    // it: give the counters a moment (bounded) to catch up with the bytes delivered.
    let settle = Instant::now();
    while st.bytes_down.load(Relaxed) < 3 * size && settle.elapsed() < Duration::from_secs(5) {
        thread::sleep(Duration::from_millis(10));
    }
    let relayed = st.bytes_up.load(Relaxed) + st.bytes_down.load(Relaxed);
    assert_eq!(st.bytes_down.load(Relaxed), 3 * size);
    let floor = expected_busy(3, relayed, t);
    // The reservations: exact up to one nanosecond of rounding per chunk.
    let busy = Duration::from_nanos(st.cpu_busy_ns.load(Relaxed));
    let jobs = st.cpu_jobs.load(Relaxed);
    assert!(busy <= floor && floor - busy <= Duration::from_nanos(jobs), "busy {busy:?}, expected {floor:?}");
    assert!(all >= floor, "3 x {size} B through one emulated CPU in {all:?} < {floor:?}");
    assert!(all <= floor * 2 + Duration::from_secs(2), "{all:?} for a CPU cost of {floor:?}");
    // Each alone would need a third of that: together they were held back by the shared queue.
    let slowest = each.iter().map(|e| e.1).max().unwrap();
    assert!(slowest >= expected_busy(3, 3 * size, t) - t * 20, "{slowest:?}");
    // Relayed rate: at most packet_size / T.
    let rate = (3 * size) as f64 / all.as_secs_f64();
    assert!(rate <= PACKET as f64 / t.as_secs_f64() * 1.0001, "{rate} B/s");
    p.stop();
}

#[test]
fn a_syn_and_a_syn_ack_cost_ten_packets_each_and_unsplit_connections_nothing() {
    // T = 20 ms: connection set-up costs 2 x 10 T = 400 ms before the first byte moves; the
    // 8-byte request and the one-byte answer cost 9 / 1448 of T.
    let t = Duration::from_millis(20);
    let up = server();
    let p = proxy(up, t, SplitPolicy::All);
    let (first, _) = download(p.local_addr(), 1);
    let setup = t * 20;
    assert!(first >= setup, "first byte after {first:?} < {setup:?}");
    assert!(first <= setup + Duration::from_secs(1), "{first:?}");
    let st = p.stats();
    assert_eq!(st.cpu_jobs.load(Relaxed), 4, "SYN, SYN-ACK, the request, the answer");
    let busy = Duration::from_nanos(st.cpu_busy_ns.load(Relaxed));
    let want = expected_busy(1, 9, t); // the 8-byte request and the 1-byte answer
    assert!(busy <= want && want - busy <= Duration::from_nanos(4), "{busy:?}, expected {want:?}");
    p.stop();

    // Not split (explicit mode relays it coupled): the fast path, no CPU.
    let p = proxy(up, t, SplitPolicy::None);
    let (first, _) = download(p.local_addr(), 100 * PACKET);
    assert!(first < setup, "an unsplit connection waited {first:?} for the CPU");
    assert_eq!(p.stats().bypassed.load(Relaxed), 1);
    assert_eq!(p.stats().cpu_jobs.load(Relaxed), 0);
    p.stop();
}

#[test]
fn policy_d_stops_splitting_while_the_emulated_cpu_queue_is_long_and_splits_again_when_idle() {
    // T = 1 ms: three downloads of 300 packets at once keep the CPU busy for at least 0.9 s and
    // each relayed chunk waits behind the others' (tens of ms); D's target is 2 ms.
    let t = Duration::from_millis(1);
    let d = SplitWhileShortQueue::new(Dur::from_millis(2), SplitWhileShortQueue::IDLE_RESET);
    let p = proxy(server(), t, SplitPolicy::ShortQueue(d));
    let addr = p.local_addr();
    let size = 300 * PACKET;
    let load: Vec<_> = (0..3).map(|_| thread::spawn(move || download(addr, size))).collect();
    let st = p.stats();
    // Once the queue has built up (the three have their first bytes and more are waiting), a
    // new connection is not split: explicit mode relays it coupled (`bypassed`).
    let t0 = Instant::now();
    while st.split.load(Relaxed) < 3 || st.cpu_wait_ns.load(Relaxed) < 200_000_000 {
        assert!(t0.elapsed() < Duration::from_secs(20), "the three were not split or the queue never built up");
        thread::sleep(Duration::from_millis(5));
    }
    download(addr, 1000);
    assert_eq!(st.bypassed.load(Relaxed), 1, "D split a connection while the CPU's waits were long");
    assert_eq!(st.split.load(Relaxed), 3);
    for h in load {
        h.join().unwrap();
    }
    // The CPU idle for more than D's idle reset: split again.
    thread::sleep(Duration::from_millis(200));
    download(addr, 1000);
    assert_eq!(st.split.load(Relaxed), 4, "D did not split on an idle CPU");
    assert_eq!(st.bypassed.load(Relaxed), 1);
    p.stop();
}
