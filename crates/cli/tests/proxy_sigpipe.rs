//! `headroom proxy` survives a client that resets while the proxy is splicing data to it:
//! splice(2) into a reset socket raises SIGPIPE, and the CLI's main() restores SIGPIPE's
//! default (die) for printing; the proxy ignores it again (found by `headroom proxy-web`, whose
//! FTP clients close mid-stream and killed the proxy silently).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_headroom");

#[test]
fn a_client_that_closes_mid_stream_does_not_kill_the_proxy() {
    // The upstream sends 1000 bytes, pauses, then streams until it fails.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let _ = s.write_all(&[1u8; 1000]);
                std::thread::sleep(Duration::from_millis(300));
                let buf = vec![1u8; 64 * 1024];
                while s.write_all(&buf).is_ok() {}
            });
        }
    });
    let mut c = Command::new(BIN)
        .args(["proxy", "--listen", "127.0.0.1:0", "--to", &upstream.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(c.stderr.take().unwrap()).read_line(&mut line).unwrap();
    let listen = line.split_whitespace().find(|w| w.starts_with("127.0.0.1:")).unwrap().to_string();
    for _ in 0..5 {
        let mut s = TcpStream::connect(&listen).unwrap();
        let mut b = vec![0u8; 1000];
        s.read_exact(&mut b).unwrap();
        // Close with nothing unread: a FIN, the proxy's client socket goes to CLOSE_WAIT; the
        // streamed data then draws a RST, which sets EPIPE on that socket for the next splice.
        drop(s);
        std::thread::sleep(Duration::from_millis(600));
        assert!(c.try_wait().unwrap().is_none(), "the proxy died after a client closed mid-stream");
    }
    let _ = c.kill();
    let _ = c.wait();
}
