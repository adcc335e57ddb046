//! `headroom send`/`recv` on loopback (no root): modes, verification, errors.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use headroom_net::transfer::pattern::{Limit, Source};
use headroom_net::transfer::wire::{Hello, Reply, Trailer};
use headroom_net::transfer::{
    send, IntervalReport, Mode, Receiver, ReceiverConfig, SendLimit, SendOptions, SessionSummary, TransferError,
};

struct Running {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    sessions: Arc<Mutex<Vec<SessionSummary>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn receiver() -> Running {
    receiver_with(ReceiverConfig::default())
}

fn opts(limit: SendLimit) -> SendOptions {
    SendOptions { limit, interval: Some(Duration::from_millis(100)), verify: true, ..SendOptions::default() }
}

fn wait_sessions(r: &Running, n: usize) -> Vec<SessionSummary> {
    let t0 = Instant::now();
    while r.sessions.lock().unwrap().len() < n && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    r.sessions.lock().unwrap().clone()
}

#[test]
fn bytes_mode_delivers_exactly_and_verifies_clean() {
    let r = receiver();
    let mut intervals = 0;
    let rep = send(&r.addr.to_string(), &opts(SendLimit::Bytes(30_000_001)), &mut |_| intervals += 1).unwrap();
    assert_eq!(rep.bytes, 30_000_001);
    let t = rep.received.unwrap();
    assert_eq!((t.payload, t.mismatched, t.first_bad), (30_000_001, 0, None));
    let s = wait_sessions(&r, 1);
    let server = s[0].result.as_ref().unwrap();
    assert_eq!((server.sent, server.bytes), (false, 30_000_001));
}

#[test]
fn time_mode_stops_on_time_and_reports_intervals() {
    let r = receiver();
    let mut reports = Vec::new();
    let rep =
        send(&r.addr.to_string(), &opts(SendLimit::Time(Duration::from_millis(700))), &mut |i| reports.push(i.clone()))
            .unwrap();
    assert!(rep.duration >= Duration::from_millis(700) && rep.duration < Duration::from_secs(3), "{:?}", rep.duration);
    assert!((5..=8).contains(&reports.len()), "{} reports", reports.len());
    assert!(reports.iter().all(|i| i.rtt.is_some() && i.cwnd.is_some()));
    assert_eq!(rep.received.unwrap().payload, rep.bytes);
    assert!(rep.bytes > 1_000_000);
}

#[test]
fn reverse_mode_the_server_sends_with_the_asked_cc_and_the_client_verifies() {
    let r = receiver();
    let o = SendOptions { reverse: true, cc: Some("reno".into()), ..opts(SendLimit::Bytes(20_000_000)) };
    let rep = send(&r.addr.to_string(), &o, &mut |_| {}).unwrap();
    assert!(!rep.sent);
    assert_eq!(rep.bytes, 20_000_000);
    assert_eq!(rep.received.unwrap().mismatched, 0);
    let s = wait_sessions(&r, 1);
    let server = s[0].result.as_ref().unwrap();
    assert!(server.sent);
    assert_eq!(server.cc.as_deref(), Some("reno"));
    assert_eq!(server.received.unwrap().payload, 20_000_000);
}

/// A client that speaks the protocol but corrupts one byte, or swaps two pieces.
fn raw_send(addr: SocketAddr, tamper: impl Fn(&mut Vec<u8>)) -> Trailer {
    let mut s = TcpStream::connect(addr).unwrap();
    let key = 99;
    let h = Hello { reverse: false, verify: true, key, bytes: None, time_ms: None, cc: None };
    s.write_all(&h.encode().unwrap()).unwrap();
    assert_eq!(Reply::read(&mut s).unwrap(), Reply::Accepted);
    let mut src = Source::new(key, true, Limit::Bytes(1_000_000), 65_536);
    let mut data = vec![0u8; 1_100_000];
    let mut n = 0;
    loop {
        let k = src.produce(&mut data[n..]);
        if k == 0 {
            break;
        }
        n += k;
    }
    data.truncate(n);
    tamper(&mut data);
    s.write_all(&data).unwrap();
    Trailer::read(&mut s).unwrap()
}

#[test]
fn verification_catches_a_corrupted_and_a_reordered_stream() {
    let r = receiver();
    let clean = raw_send(r.addr, |_| {});
    assert_eq!((clean.payload, clean.mismatched), (1_000_000, 0));
    // One flipped bit at payload offset 500,000 (block 7 at 65,536 per block: 8 headers before).
    let bad = raw_send(r.addr, |d| d[500_000 + 8 * 8] ^= 4);
    assert_eq!((bad.mismatched, bad.first_bad), (1, Some(500_000)));
    // Two 1000-byte pieces of the first block swapped.
    let reordered = raw_send(r.addr, |d| {
        let a: Vec<u8> = d[8 + 1000..8 + 2000].to_vec();
        d.copy_within(8 + 5000..8 + 6000, 8 + 1000);
        d[8 + 5000..8 + 6000].copy_from_slice(&a);
    });
    assert!(reordered.mismatched > 1900, "{}", reordered.mismatched);
    assert_eq!(reordered.first_bad.map(|o| (1000..1010).contains(&o)), Some(true));
}

#[test]
fn errors_are_named_refused_connection_unknown_cc_bad_host_peer_abort() {
    // Nothing listens: a port just freed.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let e = send(&format!("127.0.0.1:{port}"), &opts(SendLimit::Bytes(1000)), &mut |_| {}).unwrap_err();
    assert!(matches!(e, TransferError::ConnectionRefused(_)), "{e}");
    let e = send("127.0.0.1:notaport", &opts(SendLimit::Bytes(1000)), &mut |_| {}).unwrap_err();
    assert!(matches!(e, TransferError::Unreachable(_)), "{e}");
    let r = receiver();
    let cc = SendOptions { cc: Some("no-such-cc".into()), ..opts(SendLimit::Bytes(1000)) };
    let e = send(&r.addr.to_string(), &cc, &mut |_| {}).unwrap_err();
    assert!(matches!(e, TransferError::CcRefused(ref m) if m.contains("no-such-cc")), "{e}");
    let rev = SendOptions { reverse: true, ..cc };
    let e = send(&r.addr.to_string(), &rev, &mut |_| {}).unwrap_err();
    assert!(matches!(e, TransferError::CcRefused(ref m) if m.contains("at the receiver")), "{e}");
    // A receiver that accepts, reads a little, then resets the connection.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let _ = Hello::read(&mut s).unwrap();
        s.write_all(&Reply::Accepted.encode()).unwrap();
        let mut b = vec![0u8; 100_000];
        let _ = s.read(&mut b);
        // SO_LINGER 0: close with a RST.
        let l = libc::linger { l_onoff: 1, l_linger: 0 };
        use std::os::fd::AsRawFd;
        // SAFETY: plain setsockopt with a linger struct.
        unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&l as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as u32,
            )
        };
    });
    let e = send(&addr.to_string(), &opts(SendLimit::Bytes(2_000_000_000)), &mut |_| {}).unwrap_err();
    t.join().unwrap();
    assert!(matches!(e, TransferError::PeerAborted(_)), "{e}");
}

#[test]
fn the_stop_flag_ends_early_with_a_partial_verified_report() {
    let r = receiver();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        s2.store(true, Ordering::SeqCst);
    });
    let o = SendOptions { stop: Some(stop), ..opts(SendLimit::Time(Duration::from_secs(30))) };
    let rep = send(&r.addr.to_string(), &o, &mut |_| {}).unwrap();
    t.join().unwrap();
    assert!(rep.interrupted);
    assert!(rep.duration < Duration::from_secs(5));
    let tr = rep.received.unwrap();
    assert_eq!((tr.payload, tr.mismatched), (rep.bytes, 0));
}

#[test]
fn measured_sender_on_loopback_gets_kernel_timestamps_and_delivers_verified_data() {
    let r = receiver();
    // Streams of 5 pieces: ImTCP measures only while the window holds a whole stream (N × MSS),
    // and loopback's MSS is 32 KB. With the default N = 35 (1.1 MB) an idle machine's loopback,
    // whose ACKs return within microseconds, never showed such a window, and no stream was sent
    // in 5 of 6 runs on 2026-11-23; under load the ACKs came later and the test passed.
    let mut control = headroom_core::imtcp::ControlConfig::default();
    control.measurement.stream_len = 5;
    // The transfer runs 1 s, not 20 MB: 20 MB crossed loopback in about 60 ms (280–355 MB/s),
    // and a CI run under the suite's load saw no window of 5 pieces in all of them (611 pieces,
    // no stream; 12 reruns alone passed).
    let o = SendOptions { mode: Mode::Measure(Box::new(control)), ..opts(SendLimit::Time(Duration::from_secs(1))) };
    let rep = send(&r.addr.to_string(), &o, &mut |_| {}).unwrap();
    let t = rep.received.unwrap();
    assert!(rep.bytes > 20_000_000, "{} bytes in 1 s on loopback", rep.bytes);
    assert_eq!((t.payload, t.mismatched), (rep.bytes, 0));
    let m = rep.measure.unwrap();
    println!("{} bytes, {m:?}", rep.bytes);
    assert!(m.pieces > 100, "{m:?}");
    // Every piece is at most one MSS and the kernel stamped them.
    assert!(m.pieces * m.mss as u64 >= rep.bytes);
    assert!(m.tracker.stamps > m.pieces / 2, "{m:?}");
    assert_eq!(m.parse_errors, 0);
    assert!(m.control.streams_sent > 0, "{m:?}");
}

fn receiver_with(cfg: ReceiverConfig) -> Running {
    let rx = Receiver::bind("127.0.0.1:0", cfg).unwrap();
    let addr = rx.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let sessions = Arc::new(Mutex::new(Vec::new()));
    let (s2, ss) = (stop.clone(), sessions.clone());
    let thread = std::thread::spawn(move || {
        rx.serve(
            s2,
            Arc::new(|_, _: &IntervalReport| {}),
            Arc::new(move |s: &SessionSummary| ss.lock().unwrap().push(s.clone())),
        )
        .unwrap();
    });
    Running { addr, stop, sessions, thread: Some(thread) }
}

/// The receiver serves several clients at once (three 1-s sends finish together, where one at a
/// time would take 3 s), and refuses a client beyond `max_clients` with "busy".
#[test]
fn the_receiver_serves_clients_at_once_and_refuses_beyond_max_clients() {
    let r = receiver_with(ReceiverConfig { max_clients: 3, ..ReceiverConfig::default() });
    let t0 = Instant::now();
    let senders: Vec<_> = (0..3)
        .map(|_| {
            let addr = r.addr.to_string();
            std::thread::spawn(move || send(&addr, &opts(SendLimit::Time(Duration::from_secs(1))), &mut |_| {}))
        })
        .collect();
    for t in senders {
        let rep = t.join().unwrap().unwrap();
        assert_eq!(rep.received.unwrap().mismatched, 0);
    }
    assert!(t0.elapsed() < Duration::from_millis(2500), "three 1-s sends took {:?}", t0.elapsed());
    assert_eq!(wait_sessions(&r, 3).iter().filter(|s| s.result.is_ok()).count(), 3);

    let one = receiver_with(ReceiverConfig { max_clients: 1, ..ReceiverConfig::default() });
    let addr = one.addr.to_string();
    let first = std::thread::spawn(move || send(&addr, &opts(SendLimit::Time(Duration::from_secs(2))), &mut |_| {}));
    // The first session is counted once its HELLO is read; wait for its first bytes.
    std::thread::sleep(Duration::from_millis(500));
    let e = send(&one.addr.to_string(), &opts(SendLimit::Bytes(1000)), &mut |_| {}).unwrap_err();
    assert!(matches!(e, TransferError::PeerRefused(ref m) if m.contains("busy")), "{e}");
    assert!(first.join().unwrap().is_ok());
}

/// `Mode::Background` through the library without root (the example's path): verified data,
/// and the in-flight limit in every interval report and in the counters.
#[test]
fn background_mode_on_loopback_reports_its_limit_and_delivers_verified_data() {
    let r = receiver();
    let mut control = headroom_core::imtcp::ControlConfig::default();
    control.measurement.stream_len = 5;
    control.measurement.delayed_ack = true;
    let bg = headroom_core::cc::imtcp_bg::ImtcpBgConfig::headroom(5);
    // By time, not bytes: on a quiet machine 8 MB crossed loopback before the first 100-ms
    // interval report.
    let o = SendOptions {
        mode: Mode::Background(Box::new(control), bg),
        ..opts(SendLimit::Time(Duration::from_millis(1000)))
    };
    let mut limits = Vec::new();
    let rep = send(&r.addr.to_string(), &o, &mut |i| limits.push(i.limit)).unwrap();
    let t = rep.received.unwrap();
    assert_eq!((t.payload, t.mismatched), (rep.bytes, 0));
    assert!(rep.bytes > 100_000, "{} B in 1 s", rep.bytes);
    assert!(!limits.is_empty() && limits.iter().all(|l| l.is_some_and(|b| b.0 > 0)), "{limits:?}");
    assert!(rep.measure.unwrap().last_limit.is_some());
    // `bytes_acked` counts the 8-byte block headers too (34 KB in 560 MB here): at most 0.1 %
    // above the payload written, and more than the payload the receiver had not yet read.
    assert!(
        rep.acked.is_some_and(|a| a as f64 <= rep.bytes as f64 * 1.001 + 1024.0 && a > rep.bytes / 2),
        "acked {:?} of {} B",
        rep.acked,
        rep.bytes
    );
}

/// `max_pacing_rate` (`send --max-rate`, `SO_MAX_PACING_RATE`) holds a plain sender near its
/// cap on loopback, which otherwise carries gigabits: TCP's internal pacing without fq.
#[test]
fn a_pacing_cap_holds_the_sender_to_its_rate() {
    let r = receiver();
    let cap = headroom_core::units::Rate::from_bps(16_000_000);
    let o = SendOptions {
        max_pacing_rate: Some(cap),
        cc: Some("cubic".into()),
        ..opts(SendLimit::Time(Duration::from_secs(2)))
    };
    let rep = send(&r.addr.to_string(), &o, &mut |_| {}).unwrap();
    assert_eq!(rep.pacing_cap, Some(cap));
    let got = rep.acked_rate().unwrap().as_mbps();
    // Loopback's 64-KB MSS makes the pacing coarse (skbs of two segments, 128 KB, at least)
    // and the initial window leaves unpaced: a loose bound, which gigabits of loopback fail.
    assert!((8.0..=16.0 * 1.25).contains(&got), "{got} Mbit/s acknowledged under a 16 Mbit/s cap");
    assert_eq!(rep.received.unwrap().mismatched, 0);
    // The cap is for a plain sender only.
    let measure =
        SendOptions { mode: Mode::Measure(Box::default()), max_pacing_rate: Some(cap), ..opts(SendLimit::Bytes(1000)) };
    let e = send(&r.addr.to_string(), &measure, &mut |_| {}).unwrap_err();
    assert!(matches!(e, TransferError::Invalid(ref m) if m.contains("--max-rate")), "{e}");
    let reverse = SendOptions { reverse: true, max_pacing_rate: Some(cap), ..opts(SendLimit::Bytes(1000)) };
    assert!(matches!(send(&r.addr.to_string(), &reverse, &mut |_| {}), Err(TransferError::Invalid(_))));
}

/// `max_in_flight` (`send --max-in-flight`): a window-limited plain sender still delivers every
/// byte verified (the writer waits for ACKs, it never drops or reorders), and the limit is for a
/// plain sender only.
#[test]
fn an_in_flight_limit_delivers_verified_data_and_is_refused_with_measure() {
    let r = receiver();
    let w = headroom_core::units::Bytes(16 * 1024);
    let o = SendOptions { max_in_flight: Some(w), ..opts(SendLimit::Bytes(4_000_000)) };
    let rep = send(&r.addr.to_string(), &o, &mut |_| {}).unwrap();
    let t = rep.received.unwrap();
    assert_eq!((t.payload, t.mismatched), (4_000_000, 0));
    let measure =
        SendOptions { mode: Mode::Measure(Box::default()), max_in_flight: Some(w), ..opts(SendLimit::Bytes(1000)) };
    let e = send(&r.addr.to_string(), &measure, &mut |_| {}).unwrap_err();
    assert!(matches!(e, TransferError::Invalid(ref m) if m.contains("--max-in-flight")), "{e}");
}
