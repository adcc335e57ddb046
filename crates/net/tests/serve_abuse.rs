//! `headroom serve` under abuse by clients that passed the cookie check (loopback only).
//! Every loop is bounded in count and time.

use headroom_core::abw::{Method, QuickDesign, TrainDesign};
use headroom_core::units::{Bytes, Dur, Rate};
use headroom_net::wire::{Cap, CapKind, Msg, RejectReason, TrainParams};
use headroom_net::{estimate_addr, EstimateOptions, ProbeError, Server, ServerConfig, ServerHandle};
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

fn serve(config: ServerConfig) -> ServerHandle {
    Server::bind("127.0.0.1:0", config).unwrap().spawn().unwrap()
}

/// A verified client: a socket that completed the handshake, with its nonce and cookie.
struct Verified {
    sock: UdpSocket,
    nonce: u64,
    cookie: [u8; 16],
}

fn handshake(server: SocketAddr, nonce: u64) -> Verified {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.connect(server).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut out = Vec::new();
    Msg::Hello { nonce }.encode(&mut out);
    sock.send(&out).unwrap();
    let mut buf = [0u8; 2048];
    let n = sock.recv(&mut buf).expect("challenge");
    match Msg::decode(&buf[..n]).unwrap() {
        Msg::Challenge { nonce: got, cookie, .. } if got == nonce => Verified { sock, nonce, cookie },
        other => panic!("expected a challenge, got {other:?}"),
    }
}

/// The first answer other than an address-validation TOKEN (which precedes an admitted train).
fn answer(sock: &UdpSocket) -> Option<Msg> {
    let mut buf = [0u8; 2048];
    loop {
        let n = sock.recv(&mut buf).ok()?;
        match Msg::decode(&buf[..n]).ok()? {
            Msg::Token { .. } => continue,
            m => return Some(m),
        }
    }
}

/// Sends START and returns the first answer (PROBE, END or REJECT) within `wait`, if any.
fn start(v: &Verified, train: u32, params: TrainParams, wait: Duration) -> Option<Msg> {
    let mut out = Vec::new();
    Msg::Start { nonce: v.nonce, cookie: v.cookie, train, params }.encode(&mut out);
    v.sock.send(&out).unwrap();
    v.sock.set_read_timeout(Some(wait)).unwrap();
    answer(&v.sock)
}

fn small_train() -> TrainDesign {
    TrainDesign::PathQuick(QuickDesign { t_quick: Dur::from_millis(2), p_1: Bytes(48), delta_p: Bytes(40), n: 30 })
}

/// The attack: T_quick = 2^63 ns, N = 3. `T_quick·(N-1)` wraps to 0 in u64, so the
/// train passed the length and rate caps and its second packet was scheduled 292 years out;
/// `max_clients` such trains locked every later client out.
#[test]
fn huge_spacing_is_refused_and_cannot_lock_clients_out() {
    let server = serve(ServerConfig { max_concurrent: 4, ..ServerConfig::default() });
    let addr = server.local_addr();
    let evil =
        TrainParams { method: Method::PathQuick, spacing: Dur(1 << 63), step: 12, size: 100, count: 3, burst: 0 };
    for i in 0..8u64 {
        let v = handshake(addr, 1000 + i);
        match start(&v, i as u32, evil, Duration::from_secs(1)) {
            // The REJECT names the cap that refused and its value.
            Some(Msg::Reject { reason: RejectReason::OverCap, cap: Some(c), .. }) => {
                assert_eq!(c, Cap { kind: CapKind::TrainLength, value: Dur::from_secs(2).0 });
            }
            other => panic!("START {i} with T_quick = 2^63 ns: expected an over-cap REJECT, got {other:?}"),
        }
    }
    let opts =
        EstimateOptions { design: Some(small_train()), timeout: Duration::from_secs(2), ..EstimateOptions::default() };
    let e = estimate_addr(addr, &opts);
    assert!(e.is_ok(), "a well-behaved client after the attack: {e:?}");
}

/// The same attack with every spacing from 2^40 ns up, and N at its u16 maximum: each product
/// and sum on the received fields must be checked, none may wrap into the caps.
#[test]
fn wrapping_products_are_refused() {
    let server = serve(ServerConfig { max_concurrent: 2, ..ServerConfig::default() });
    let addr = server.local_addr();
    let mut nonce = 5000;
    for (spacing, step, size, count) in [
        (u64::MAX, 1, 100, 3),
        (1u64 << 62, 1, 100, 5),
        (u64::MAX / 2 + 1, u32::MAX, u16::MAX, u16::MAX),
        (1_000_000, u32::MAX, 100, 3), // P_N = 100 + 2·(2^32-1) wraps in u32 but not u64: over the size cap
    ] {
        nonce += 1;
        let v = handshake(addr, nonce);
        let p = TrainParams { method: Method::PathQuick, spacing: Dur(spacing), step, size, count, burst: 0 };
        match start(&v, 1, p, Duration::from_secs(1)) {
            Some(Msg::Reject { reason: RejectReason::OverCap, .. }) => {}
            other => panic!("{p:?}: expected an over-cap REJECT, got {other:?}"),
        }
    }
    let opts = EstimateOptions { design: Some(small_train()), ..EstimateOptions::default() };
    match estimate_addr(addr, &opts) {
        Ok(_) => {}
        Err(e @ ProbeError::Rejected { .. }) => panic!("locked out: {e}"),
        Err(e) => panic!("{e}"),
    }
}

/// `--max-rate` bounds the server's total sending rate, not only each train's: trains whose
/// peak rates add up past the cap are not in flight at once.
#[test]
fn total_rate_across_clients_is_capped() {
    // 4.8 Mbit/s peak each (small_train), 10 Mbit/s cap: two fit, a third does not.
    let server = serve(ServerConfig { max_rate: Rate::from_mbps(10), ..ServerConfig::default() });
    let addr = server.local_addr();
    let params = TrainParams::from_design(&small_train()).unwrap();
    let clients: Vec<Verified> = (0..3).map(|i| handshake(addr, 9000 + i)).collect();
    let mut out = Vec::new();
    for (i, v) in clients.iter().enumerate() {
        Msg::Start { nonce: v.nonce, cookie: v.cookie, train: i as u32, params }.encode(&mut out);
        v.sock.send(&out).unwrap();
    }
    let first = |v: &Verified| {
        v.sock.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        answer(&v.sock)
    };
    let answers: Vec<Option<Msg>> = clients.iter().map(first).collect();
    assert!(matches!(answers[0], Some(Msg::Probe { .. })), "{:?}", answers[0]);
    assert!(matches!(answers[1], Some(Msg::Probe { .. })), "{:?}", answers[1]);
    match &answers[2] {
        Some(Msg::Reject { reason: RejectReason::Busy, retry_after_ms, .. }) => {
            assert!(*retry_after_ms > 0 && *retry_after_ms <= 100, "retry after {retry_after_ms} ms");
        }
        other => panic!("third train at 14.4 Mbit/s total against 10 Mbit/s: expected Busy, got {other:?}"),
    }
    // Once the first two are over, the third client is served.
    std::thread::sleep(Duration::from_millis(150));
    match start(&clients[2], 7, params, Duration::from_secs(1)) {
        Some(Msg::Probe { .. }) => {}
        other => panic!("after the others ended: {other:?}"),
    }
}

/// The client says which cap refused, with its value. (An explicit train is sent as given: the
/// client fits only the trains it designs itself to the announced caps.)
#[test]
fn the_client_names_the_refusing_cap() {
    let server = serve(ServerConfig { max_rate: Rate::from_mbps(5), ..ServerConfig::default() });
    let default = EstimateOptions::default();
    let explicit = headroom_net::client::design_for(&default, false).unwrap();
    let opts = EstimateOptions { design: Some(explicit), ..default };
    match estimate_addr(server.local_addr(), &opts) {
        Err(e @ ProbeError::Rejected { cap: Some(Cap { kind: CapKind::Rate, value: 5_000_000 }), .. }) => {
            let text = e.to_string();
            assert!(text.contains("highest probed rate 5"), "{text}");
        }
        other => panic!("expected a rate-cap refusal, got {other:?}"),
    }
}

#[test]
fn the_client_fits_its_train_to_the_announced_caps_and_says_so() {
    // The default PathQuick train probes up to 12 Mbit/s; this server allows 5 Mbit/s. Before the
    // client read the CHALLENGE's caps, the server refused the train as over its rate cap.
    let h = serve(ServerConfig { max_rate: Rate::from_mbps(5), ..ServerConfig::default() });
    let e = estimate_addr(h.local_addr(), &EstimateOptions::default())
        .unwrap_or_else(|err| panic!("a train within the caps must be served: {err}"));
    assert!(e.design.probed_range().1 <= Rate::from_mbps(5), "top rate {}", e.design.probed_range().1);
    let note = e.fitted_to_caps.expect("the client says it changed the train");
    assert!(note.contains("5Mbps"), "{note}");
    // A train that fits is sent as asked.
    let h2 = serve(ServerConfig::default());
    let e2 = estimate_addr(h2.local_addr(), &EstimateOptions::default()).unwrap();
    assert_eq!(e2.fitted_to_caps, None);
}

/// A START that asks for a capacity burst gets the train, then the burst: the last packet's
/// size again, indices from the train's count on, and an END that counts them. A burst above
/// `MAX_BURST`, or one that takes the train over the packet cap, is refused.
#[test]
fn a_capacity_burst_follows_the_train_within_the_caps() {
    let server = serve(ServerConfig { max_packets: 40, ..ServerConfig::default() });
    let v = handshake(server.local_addr(), 11);
    let params = TrainParams::from_design(&small_train()).unwrap().with_burst(5);
    let first = start(&v, 1, params, Duration::from_secs(2)).expect("the train");
    let mut probes = Vec::new();
    let mut msg = Some(first);
    let mut buf = [0u8; 2048];
    // 30 packets, 58 ms, then the burst and the END; bounded by the read timeout.
    let end = loop {
        match msg {
            Some(Msg::Probe { index, count, .. }) => probes.push((index, count)),
            Some(Msg::End { sent, .. }) => break sent,
            Some(other) => panic!("unexpected {other:?}"),
            None => panic!("no END after {} probes", probes.len()),
        }
        msg = v.sock.recv(&mut buf).ok().and_then(|n| {
            let m = Msg::decode(&buf[..n]).ok()?;
            if matches!(m, Msg::Probe { .. }) {
                // The burst's packets are the train's last size: 1,208 B at the IP level.
                let index = u16::from_be_bytes([buf[8], buf[9]]);
                if index >= 29 {
                    assert_eq!(n as u64 + 28, 1208, "packet {index}");
                }
            }
            Some(m)
        });
    };
    assert_eq!(probes.len(), 35, "{probes:?}");
    assert_eq!(probes.iter().map(|p| p.0).collect::<Vec<_>>(), (0..35).collect::<Vec<u16>>());
    assert!(probes.iter().all(|p| p.1 == 30), "every packet names the train's count");
    assert_eq!(end, 35, "the END counts the burst");
    let too_long = params.with_burst(headroom_net::wire::MAX_BURST + 1);
    match start(&v, 2, too_long, Duration::from_secs(2)) {
        Some(Msg::Reject { reason: RejectReason::BadDesign, .. }) => {}
        other => panic!("a burst above MAX_BURST: {other:?}"),
    }
    match start(&v, 3, params.with_burst(11), Duration::from_secs(2)) {
        Some(Msg::Reject { cap: Some(Cap { kind: CapKind::Packets, value: 40 }), .. }) => {}
        other => panic!("30 + 11 packets against a cap of 40: {other:?}"),
    }
}
