//! Root tests of kernel BECC on an emulated path (testbed namespaces, 10 Mbit/s, 10 ms RTT):
//! the congestion window stays within the bandwidth window BECC computed (read back through the
//! `becc_view` socket-storage map and TCP_INFO), and with a maximum window below the path's BDP
//! BECC never sets a bandwidth window and moves what Reno moves.
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use headroom_bpf::{load, unique_name, Controller, LoadOptions, Registered};
use headroom_core::{Dur, Rate};
use headroom_testbed::traffic::{self, FlowCounters};
use headroom_testbed::{Bottleneck, Buffer, Testbed, Topology};

static SERIAL: Mutex<()> = Mutex::new(());

fn path() -> Topology {
    let mut b = Bottleneck::new(Some(Rate::from_mbps(10)), Dur::from_millis(5));
    b.buffer = Buffer::Packets(20);
    Topology::dumbbell(1, b)
}

fn tcp_info(s: &TcpStream) -> libc::tcp_info {
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    assert_eq!(r, 0, "TCP_INFO: {}", std::io::Error::last_os_error());
    info
}

/// One bulk transfer of `secs` from s1 to r1 with `cc`; the receiver's window is clamped to
/// `max_window` bytes. `each` runs every 5 ms on the sending socket. Returns the bytes received
/// during the `secs` (the connection is then reset, not drained).
fn transfer(tb: &Testbed, cc: &str, max_window: u32, secs: u64, mut each: impl FnMut(&TcpStream)) -> u64 {
    let dst: SocketAddr = (tb.host("r1").unwrap().addr, 5201).into();
    let listener = tb.run_in("r1", move || traffic::tcp_listen_max_window(5201, max_window)).unwrap();
    let counters = Arc::new(FlowCounters::default());
    let c2 = counters.clone();
    let sink = std::thread::spawn(move || {
        let (c, _) = listener.accept().unwrap();
        let _ = traffic::tcp_sink(c, Some(&c2));
    });
    let cc2 = cc.to_owned();
    let s = Arc::new(tb.run_in("s1", move || traffic::tcp_connect(dst, &cc2)).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let (s2, stop2) = (s.clone(), stop.clone());
    let sender =
        std::thread::spawn(move || traffic::tcp_bulk_send(&s2, Dur::from_secs(3600), None, Some(&stop2)).unwrap());
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        each(&s);
        std::thread::sleep(Duration::from_millis(5));
    }
    let got = counters.bytes.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap();
    // Reset instead of draining the send buffer.
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as u32,
        )
    };
    drop(s);
    sink.join().unwrap();
    got
}

fn setup() -> Option<(std::sync::MutexGuard<'static, ()>, Testbed, Registered)> {
    if !headroom_testbed::testbed_available_for_test() {
        return None;
    }
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tb = Testbed::up(&path()).expect("testbed up");
    let name = unique_name(Controller::Becc);
    let reg = load(Controller::Becc, &LoadOptions { name: Some(name), ..Default::default() }).expect("load becc");
    Some((guard, tb, reg))
}

#[test]
fn becc_cwnd_stays_within_the_bandwidth_window_it_computed() {
    let Some((_g, tb, becc)) = setup() else { return };
    // Maximum window 256 KB, twenty times the 12.5 KB BDP: Reno would overflow the 20-packet buffer.
    let (mut samples, mut capped, mut over) = (0u32, 0u32, Vec::new());
    let mut last_view = None;
    transfer(&tb, becc.name(), 256 << 10, 4, |s| {
        let before = becc.becc_view(s.as_raw_fd()).unwrap();
        let info = tcp_info(s);
        let after = becc.becc_view(s.as_raw_fd()).unwrap();
        samples += 1;
        let swnd = |v: Option<headroom_bpf::BeccView>| v.and_then(|v| v.snd_swnd);
        if let (Some(a), Some(b)) = (swnd(before), swnd(after)) {
            // Only in the Open state: during recovery the kernel's PRR governs cwnd.
            if info.tcpi_ca_state == 0 {
                capped += 1;
                let cwnd_bytes = info.tcpi_snd_cwnd as u64 * info.tcpi_snd_mss as u64;
                if cwnd_bytes > a.max(b) as u64 {
                    over.push((cwnd_bytes, a, b));
                }
            }
        }
        last_view = after;
    });
    let v = last_view.expect("BECC published its state");
    eprintln!("BECC at the end: {v:?}; window in force in {capped} of {samples} samples");
    assert!(v.sets >= 1, "a loss set the bandwidth window: {v:?}");
    assert!(capped > samples / 4, "the window was in force for most of the run ({capped} of {samples} samples)");
    assert!(
        over.is_empty(),
        "cwnd above the bandwidth window in {} samples: {:?}",
        over.len(),
        &over[..over.len().min(5)]
    );
    // The estimate is of the path's order: 10 Mbit/s x (10 ms + queueing) = 12.5 KB and more.
    let swnd = v.snd_swnd.unwrap();
    assert!((6_000..=80_000).contains(&swnd), "bandwidth window {swnd} bytes for a 12.5 KB BDP ({v:?})");
    let minrtt = v.t_minrtt_us.unwrap();
    assert!((10_000..=14_000).contains(&minrtt), "t_minrtt {minrtt} µs on a 10 ms path");
}

#[test]
fn becc_is_reno_when_the_maximum_window_is_below_the_bdp() {
    let Some((_g, tb, becc)) = setup() else { return };
    // 8 KB maximum window < 12.5 KB BDP: no queue, no loss, no bandwidth window. Both senders
    // are window-limited, so each moves 8 KB per RTT; what differs between two runs is the
    // emulated path's timing on a loaded machine (a single 2 s pair once read 0.957 under CI).
    // So the pairs alternate, three rounds, and the medians are compared.
    let mut views = Vec::new();
    let (mut got_becc, mut got_reno) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        got_becc.push(transfer(&tb, becc.name(), 8 << 10, 2, |s| views.push(becc.becc_view(s.as_raw_fd()).unwrap())));
        got_reno.push(transfer(&tb, "reno", 8 << 10, 2, |_| {}));
    }
    assert!(views.iter().all(|v| v.is_none_or(|v| v.snd_swnd.is_none() && v.sets == 0)), "no window set: {views:?}");
    let median = |v: &mut Vec<u64>| {
        v.sort_unstable();
        v[v.len() / 2]
    };
    let (becc_median, reno_median) = (median(&mut got_becc), median(&mut got_reno));
    let ratio = becc_median as f64 / reno_median as f64;
    // 8 KB per 10 ms: 6.5 Mbit/s, 1.6 MB in 2 s.
    assert!((1_000_000..2_000_000).contains(&reno_median), "Reno moved {got_reno:?} bytes");
    // A bandwidth window set by mistake would be below 8 KB and cost far more than 5 %.
    assert!((0.95..=1.05).contains(&ratio), "BECC {got_becc:?} vs Reno {got_reno:?} bytes (median ratio {ratio:.3})");
}

#[test]
fn testbed_scenario_flows_select_headroom_kernel_controllers_by_cc() {
    if !headroom_testbed::testbed_available_for_test() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let before = std::fs::read_to_string(headroom_bpf::AVAILABLE_SYSCTL).unwrap();
    let mut text = String::from(
        "[bottleneck]\nrate = \"30Mbps\"\nbuffer = \"60pkts\"\ndelay = \"5ms\"\n[run]\nduration = \"2s\"\nsample = \"200ms\"\n",
    );
    for (i, cc) in ["becc", "lp", "ledbat"].iter().enumerate() {
        let k = i + 1;
        text += &format!("[[host]]\nname = \"s{k}\"\nside = \"left\"\n[[host]]\nname = \"r{k}\"\nside = \"right\"\n");
        text += &format!("[[flow]]\nname = \"{cc}\"\nkind = \"tcp\"\nfrom = \"s{k}\"\nto = \"r{k}\"\ncc = \"{cc}\"\n");
    }
    let s = headroom_testbed::Scenario::parse(&text, "inline").unwrap();
    let out = headroom_testbed::scenario::run(&s, &AtomicBool::new(false)).unwrap();
    for f in &out.flows {
        eprintln!("{}: {:.2} Mbit/s; {}", f.name, f.throughput.as_mbps(), f.detail);
        // The sender ran with the run's registered name (h<pid><n>_<tag>), not a kernel built-in.
        assert!(f.detail.starts_with("cc h"), "{}: {}", f.name, f.detail);
        // Moved data; no rate is asserted: TCP-LP yields to the other two by design (a fresh-clone
        // CI run measured it at 0.97 Mbit/s beside BECC and LEDBAT on this 30 Mbit/s path).
        assert!(f.throughput.as_mbps() > 0.1, "{} moved data", f.name);
    }
    assert_eq!(out.flows.len(), 3);
    assert_eq!(std::fs::read_to_string(headroom_bpf::AVAILABLE_SYSCTL).unwrap(), before, "unregistered after the run");
}
