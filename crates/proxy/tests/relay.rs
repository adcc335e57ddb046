//! The proxy's correctness on loopback (no root): bytes, half-close, resets, failures, limits.

use headroom_proxy::{spawn, CopyMode, ProxyConfig, ProxyHandle};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// FNV-1a, order-sensitive: equal digests and lengths mean the same bytes in the same order
/// (up to a 2^-64 collision).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Digest(u64, u64);

impl Digest {
    fn new() -> Digest {
        Digest(0xcbf2_9ce4_8422_2325, 0)
    }
    fn update(&mut self, b: &[u8]) {
        for &x in b {
            self.0 = (self.0 ^ u64::from(x)).wrapping_mul(0x100_0000_01b3);
        }
        self.1 += b.len() as u64;
    }
}

/// xorshift64*: the test data and sizes.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn fill(&mut self, b: &mut [u8]) {
        for c in b.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
}

fn timeouts(s: &TcpStream) {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
}

/// An upstream that runs `f` on each accepted connection in its own thread.
fn upstream<F>(f: F) -> SocketAddr
where
    F: Fn(TcpStream) + Send + Sync + Clone + 'static,
{
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    // std listens with a backlog of 128; the proxy may connect many at once (the flood test
    // sends 200) faster than this thread accepts, and a SYN dropped from a full queue is
    // retried only after 1 s, past the 500 ms connect timeout set below. Linux lets a
    // second listen() raise the backlog.
    // SAFETY: listen() on a socket this function owns and keeps open.
    assert_eq!(unsafe { libc::listen(std::os::fd::AsRawFd::as_raw_fd(&l), 4096) }, 0);
    let a = l.local_addr().unwrap();
    thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            timeouts(&s);
            let f = f.clone();
            thread::spawn(move || f(s));
        }
    });
    a
}

fn proxy(up: SocketAddr, tweak: impl FnOnce(&mut ProxyConfig)) -> ProxyHandle {
    let mut c = ProxyConfig::new("127.0.0.1:0".parse().unwrap(), up);
    c.connect_timeout = Duration::from_millis(500);
    tweak(&mut c);
    spawn(c).unwrap()
}

fn connect(p: &ProxyHandle) -> TcpStream {
    let s = TcpStream::connect(p.local_addr()).unwrap();
    timeouts(&s);
    s
}

/// An echo upstream: every byte back, then FIN after the client's FIN.
fn echo(mut s: TcpStream) {
    let mut b = vec![0; 65536];
    loop {
        match s.read(&mut b) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if s.write_all(&b[..n]).is_err() {
                    return;
                }
            }
        }
    }
    let _ = s.shutdown(Shutdown::Write);
}

/// Sends `len` random bytes (seeded) through `s` and reads the echo; returns (sent, echoed).
fn echo_round(s: TcpStream, len: usize, seed: u64) -> (Digest, Digest) {
    let mut w = s.try_clone().unwrap();
    let writer = thread::spawn(move || {
        let mut rng = Rng(seed | 1);
        let mut d = Digest::new();
        let mut left = len;
        let mut buf = vec![0; 100_000];
        while left > 0 {
            // Uneven write sizes.
            let n = left.min(1 + (rng.next() % buf.len() as u64) as usize);
            rng.fill(&mut buf[..n]);
            d.update(&buf[..n]);
            w.write_all(&buf[..n]).unwrap();
            left -= n;
        }
        w.shutdown(Shutdown::Write).unwrap();
        d
    });
    let mut r = s;
    let mut d = Digest::new();
    let mut buf = vec![0; 77_777];
    loop {
        let n = r.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        d.update(&buf[..n]);
    }
    (writer.join().unwrap(), d)
}

/// Echoes connections of random sizes (the first empty) through a proxy until `total_each_way`
/// bytes have been sent, `parallel` connections at a time, and checks every connection's bytes
/// both ways by length and an order-sensitive digest, and the proxy's byte counters.
fn every_byte_once_and_in_order(mode: CopyMode, total_each_way: usize, max_size: u64, parallel: usize) {
    let up = upstream(echo);
    let p = proxy(up, |c| {
        c.mode = mode;
        c.buffer = 256 * 1024;
    });
    let mut rng = Rng(0x5eed);
    let mut sizes = vec![0];
    while sizes.iter().sum::<usize>() < total_each_way {
        sizes.push((rng.next() % max_size) as usize);
    }
    let total: usize = sizes.iter().sum();
    for (k, chunk) in sizes.chunks(parallel).enumerate() {
        let hs: Vec<_> = chunk
            .iter()
            .enumerate()
            .map(|(i, &len)| {
                let s = connect(&p);
                let seed = 77 + (k * parallel + i) as u64 + len as u64;
                thread::spawn(move || (len, echo_round(s, len, seed)))
            })
            .collect();
        for h in hs {
            let (len, (sent, got)) = h.join().unwrap();
            assert_eq!(sent.1, len as u64);
            assert_eq!(sent, got, "echo of {len} bytes differs");
        }
    }
    let st = p.stats();
    assert_eq!(st.bytes_up.load(Relaxed), total as u64);
    assert_eq!(st.bytes_down.load(Relaxed), total as u64);
    let n = sizes.len() as u64;
    assert_eq!(st.split.load(Relaxed), n);
    wait_for(|| st.completed.load(Relaxed) == n && st.active.load(Relaxed) == 0 && st.buffered.load(Relaxed) == 0);
}

fn wait_for(cond: impl Fn() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < Duration::from_secs(10), "condition not reached in 10 s");
        thread::sleep(Duration::from_millis(5));
    }
}

/// The 1 GB: 512 MiB each way (1 GiB through the proxy in total) over connections of
/// 0-8 MB (about 130 of them), 16 at a time.
#[test]
fn splice_relays_every_byte_once_and_in_order() {
    every_byte_once_and_in_order(CopyMode::Splice, 512 << 20, 8_000_000, 16);
}

/// ~96 MB each way over connections of 0-4 MB, 8 at a time.
#[test]
fn copy_relays_every_byte_once_and_in_order() {
    every_byte_once_and_in_order(CopyMode::Copy, 96_000_000, 4_000_000, 8);
}

#[test]
fn client_half_close_reaches_upstream_which_can_still_answer() {
    let up = upstream(|mut s| {
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap(); // ends at the client's FIN
        s.write_all(format!("got {} bytes", got.len()).as_bytes()).unwrap();
    });
    let p = proxy(up, |_| {});
    let mut s = connect(&p);
    s.write_all(&[7; 1000]).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert_eq!(answer, "got 1000 bytes");
}

#[test]
fn upstream_half_close_reaches_client_which_can_still_send() {
    let (tx, rx) = mpsc::channel();
    let up = upstream(move |mut s| {
        s.write_all(b"hello").unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        tx.send(got).unwrap();
    });
    let p = proxy(up, |_| {});
    let mut s = connect(&p);
    let mut hello = Vec::new();
    s.read_to_end(&mut hello).unwrap(); // EOF while our direction is still open
    assert_eq!(hello, b"hello");
    s.write_all(&[1; 300_000]).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let got = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(got.len(), 300_000);
}

fn reset(s: TcpStream) {
    let l = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: setsockopt on a live socket with a correctly sized struct.
    let r = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&s),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0);
    drop(s);
}

/// Reads until an error or EOF; returns the error kind (None for EOF).
fn read_until_end(s: &mut TcpStream) -> Option<ErrorKind> {
    let mut b = [0; 4096];
    loop {
        match s.read(&mut b) {
            Ok(0) => return None,
            Ok(_) => {}
            Err(e) => return Some(e.kind()),
        }
    }
}

#[test]
fn client_reset_resets_the_upstream() {
    let (tx, rx) = mpsc::channel();
    let up = upstream(move |mut s| tx.send(read_until_end(&mut s)).unwrap());
    let p = proxy(up, |_| {});
    let mut s = connect(&p);
    s.write_all(b"some data").unwrap();
    thread::sleep(Duration::from_millis(50));
    reset(s);
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), Some(ErrorKind::ConnectionReset));
    wait_for(|| p.stats().resets.load(Relaxed) == 1);
}

#[test]
fn upstream_reset_resets_the_client() {
    let up = upstream(|mut s| {
        let mut b = [0; 4];
        s.read_exact(&mut b).unwrap();
        reset(s);
    });
    let p = proxy(up, |_| {});
    let mut s = connect(&p);
    s.write_all(b"ping").unwrap();
    assert_eq!(read_until_end(&mut s), Some(ErrorKind::ConnectionReset));
}

#[test]
fn refused_upstream_resets_the_client_promptly() {
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    }; // nothing listens there now
    let p = proxy(dead, |_| {});
    let t = Instant::now();
    let mut s = connect(&p);
    assert_eq!(read_until_end(&mut s), Some(ErrorKind::ConnectionReset));
    assert!(t.elapsed() < Duration::from_millis(400), "took {:?}", t.elapsed());
    assert_eq!(p.stats().upstream_failed.load(Relaxed), 1);
}

#[test]
fn unreachable_upstream_resets_the_client_at_the_connect_timeout() {
    // An upstream that never completes a handshake: a listener that never accepts, with its
    // backlog filled, drops further SYNs (loopback's "unreachable").
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    let mut fill = Vec::new();
    for _ in 0..300 {
        match TcpStream::connect_timeout(&a, Duration::from_millis(50)) {
            Ok(s) => fill.push(s),
            Err(_) => break,
        }
    }
    let p = proxy(a, |c| c.connect_timeout = Duration::from_millis(300));
    let t = Instant::now();
    let mut s = connect(&p);
    assert_eq!(read_until_end(&mut s), Some(ErrorKind::ConnectionReset));
    let e = t.elapsed();
    assert!(e >= Duration::from_millis(250) && e < Duration::from_secs(3), "took {e:?}");
    drop(l);
}

#[test]
fn a_stalled_peer_does_not_stall_other_connections() {
    // The upstream's first connection never reads; the others count their bytes.
    let (tx, rx) = mpsc::channel();
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let up = upstream(move |mut s| {
        if seen.fetch_add(1, Relaxed) == 0 {
            thread::sleep(Duration::from_secs(8));
            return;
        }
        let mut n = 0u64;
        let mut b = vec![0; 65536];
        loop {
            match s.read(&mut b) {
                Ok(0) | Err(_) => break,
                Ok(k) => n += k as u64,
            }
        }
        tx.send(n).unwrap();
    });
    // One worker thread: a blocked connection task must not hold it.
    let p = proxy(up, |c| c.threads = 1);
    let mut a = connect(&p);
    a.set_nonblocking(true).unwrap();
    let chunk = vec![0u8; 1 << 16];
    let mut pushed = 0usize;
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(500) {
        match a.write(&chunk) {
            Ok(n) => pushed += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => thread::sleep(Duration::from_millis(5)),
            Err(e) => panic!("{e}"),
        }
    }
    assert!(pushed > 0);
    wait_for(|| p.stats().buffered.load(Relaxed) > 0); // the stalled direction holds its buffer
    let t = Instant::now();
    let hs: Vec<_> = (0..4)
        .map(|_| {
            let mut b = connect(&p);
            thread::spawn(move || {
                b.write_all(&vec![3u8; 8 << 20]).unwrap();
                b.shutdown(Shutdown::Write).unwrap();
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    for _ in 0..4 {
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), 8 << 20);
    }
    assert!(t.elapsed() < Duration::from_secs(5), "took {:?}", t.elapsed());
    drop(a);
}

#[test]
fn per_source_limit_resets_the_excess_and_serves_other_sources() {
    let up = upstream(|mut s| {
        let _ = read_until_end(&mut s);
    });
    let p = proxy(up, |c| c.max_per_source = 5);
    // A half-open flood from 127.0.0.1: connections that send nothing.
    let flood: Vec<TcpStream> = (0..40).map(|_| connect(&p)).collect();
    wait_for(|| p.stats().accepted.load(Relaxed) == 40);
    assert_eq!(p.stats().refused_per_source.load(Relaxed), 35);
    wait_for(|| p.stats().active.load(Relaxed) == 5);
    let resets = flood.into_iter().filter_map(|mut s| read_nonblocking_error(&mut s)).count();
    assert_eq!(resets, 35);
    // Another source is still served.
    let mut s2 = bind_connect("127.0.0.2", p.local_addr());
    s2.write_all(b"hi").unwrap();
    wait_for(|| p.stats().bytes_up.load(Relaxed) >= 2);
}

/// A reset already received shows as an error on a non-blocking read.
fn read_nonblocking_error(s: &mut TcpStream) -> Option<ErrorKind> {
    s.set_nonblocking(true).unwrap();
    let t = Instant::now();
    loop {
        match s.read(&mut [0; 16]) {
            Err(e) if e.kind() == ErrorKind::WouldBlock && t.elapsed() < Duration::from_millis(200) => {
                thread::sleep(Duration::from_millis(5))
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return None,
            Err(e) => return Some(e.kind()),
            Ok(_) => return None,
        }
    }
}

fn bind_connect(src: &str, to: SocketAddr) -> TcpStream {
    use std::os::fd::FromRawFd;
    // SAFETY: a fresh socket, bound and connected with plain syscalls, then owned by TcpStream.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let mut a: libc::sockaddr_in = std::mem::zeroed();
        a.sin_family = libc::AF_INET as libc::sa_family_t;
        a.sin_addr.s_addr = u32::from_ne_bytes(src.parse::<std::net::Ipv4Addr>().unwrap().octets());
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert_eq!(libc::bind(fd, (&a as *const libc::sockaddr_in).cast(), len), 0);
        let SocketAddr::V4(t) = to else { panic!("v4 only") };
        a.sin_port = t.port().to_be();
        a.sin_addr.s_addr = u32::from_ne_bytes(t.ip().octets());
        assert_eq!(libc::connect(fd, (&a as *const libc::sockaddr_in).cast(), len), 0);
        let s = TcpStream::from_raw_fd(fd);
        timeouts(&s);
        s
    }
}

#[test]
fn garbage_flood_is_relayed_as_data_to_the_configured_upstream_only() {
    // No open proxy: an HTTP CONNECT (or anything) is data for the configured upstream; no
    // other address is ever contacted.
    let bystander = TcpListener::bind("127.0.0.1:0").unwrap();
    bystander.set_nonblocking(true).unwrap();
    let (tx, rx) = mpsc::channel();
    let up = upstream(move |mut s| {
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        tx.send(got).unwrap();
    });
    let p = proxy(up, |_| {});
    let connect_line = format!("CONNECT {} HTTP/1.1\r\n\r\n", bystander.local_addr().unwrap());
    let mut rng = Rng(99);
    let t = Instant::now();
    let n = 200;
    for i in 0..n {
        let mut s = connect(&p);
        let mut g = vec![0; (rng.next() % 3000) as usize];
        rng.fill(&mut g);
        if i % 2 == 0 {
            g = connect_line.clone().into_bytes();
        }
        s.write_all(&g).unwrap();
        if i % 3 == 0 {
            reset(s);
        } else {
            s.shutdown(Shutdown::Write).unwrap();
        }
    }
    // Connections reset before the proxy accepted them may never reach the upstream; every
    // FIN-closed CONNECT line must arrive verbatim.
    let fin_connects = (0..n).filter(|i| i % 2 == 0 && i % 3 != 0).count();
    let mut connects = 0;
    let mut received = 0;
    while received < n {
        let Ok(got) = rx.recv_timeout(Duration::from_secs(2)) else { break };
        received += 1;
        connects += usize::from(got == connect_line.as_bytes());
    }
    // Every connection the proxy accepted reached the upstream (a dropped upstream SYN would
    // reset the client and lose its CONNECT line).
    let failed = p.stats().upstream_failed.load(Relaxed);
    assert!(connects >= fin_connects && failed == 0, "{connects} of {fin_connects}, {failed} upstream connects failed");
    assert!(bystander.accept().is_err(), "the proxy contacted another address");
    wait_for(|| p.stats().active.load(Relaxed) == 0);
    assert!(t.elapsed() < Duration::from_secs(15));
    assert!(p.stats().accepted.load(Relaxed) <= n as u64);
}

#[test]
fn at_the_connection_cap_clients_wait_in_the_backlog_then_proceed() {
    let up = upstream(|mut s| {
        let _ = read_until_end(&mut s);
        let _ = s.write_all(b"bye");
    });
    let p = proxy(up, |c| c.max_conns = 3);
    let held: Vec<TcpStream> = (0..3).map(|_| connect(&p)).collect();
    wait_for(|| p.stats().active.load(Relaxed) == 3);
    let mut late = connect(&p); // the kernel completes the handshake; the proxy does not accept yet
    late.write_all(b"x").unwrap();
    late.shutdown(Shutdown::Write).unwrap();
    thread::sleep(Duration::from_millis(200));
    assert_eq!(p.stats().accepted.load(Relaxed), 3);
    assert!(p.stats().cap_pauses.load(Relaxed) >= 1);
    drop(held);
    let mut bye = String::new();
    late.read_to_string(&mut bye).unwrap();
    assert_eq!(bye, "bye");
}

#[test]
fn idle_connections_are_reset_after_the_idle_timeout() {
    let (tx, rx) = mpsc::channel();
    let up = upstream(move |mut s| tx.send(read_until_end(&mut s)).unwrap());
    let p = proxy(up, |c| c.idle_timeout = Some(Duration::from_millis(300)));
    let mut s = connect(&p);
    let t = Instant::now();
    assert_eq!(read_until_end(&mut s), Some(ErrorKind::ConnectionReset));
    assert!(t.elapsed() >= Duration::from_millis(250));
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), Some(ErrorKind::ConnectionReset));
    assert_eq!(p.stats().idle_timeouts.load(Relaxed), 1);
}

#[test]
fn a_chain_of_two_proxies_relays_and_policy_none_relays_coupled() {
    let up = upstream(echo);
    let p2 = proxy(up, |c| c.policy = headroom_core::overlay::SplitPolicy::None);
    let p1 = proxy(p2.local_addr(), |_| {});
    let (sent, got) = echo_round(connect(&p1), 3_000_000, 5);
    assert_eq!(sent, got);
    assert_eq!(p1.stats().split.load(Relaxed), 1);
    assert_eq!(p2.stats().bypassed.load(Relaxed), 1);
    assert_eq!(p2.stats().split.load(Relaxed), 0);
    // Coupled relaying holds at most one page per direction.
    assert!(p2.stats().buffered_peak.load(Relaxed) <= 2 * 4096);
}

#[test]
fn upstream_equal_to_the_listening_address_is_refused() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    drop(l);
    let mut c = ProxyConfig::new(a, a);
    c.threads = 1;
    let e = spawn(c).err().expect("a self-loop must be refused").to_string();
    assert!(e.contains("relay to itself"), "{e}");
}
