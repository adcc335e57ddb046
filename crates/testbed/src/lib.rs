//! Emulated networks from Linux network namespaces, for headroom's real-network tests and the
//! `headroom testbed` command.
//!
//! # Topology
//!
//! A dumbbell. Each host is a network namespace with one veth (`eth0`, address `10.1.k.2/24` on
//! the left, `10.2.k.2/24` on the right, default route to its router at `.1`). The routers
//! (namespaces `<prefix>left`, `<prefix>right`) forward between access links and the bottleneck:
//!
//! ```text
//!  s1 ─┐                                                                 ┌─ r1
//!  s2 ─┼─ left ── [optional tbf shaper] → dbox ⇄ delay box (link, delay, loss) ⇄ dbox ── right ─┼─ r2
//!  c1 ─┘                                                                 └─ c2
//! ```
//!
//! The bottleneck is an exact link in the [`delaybox`] (user space, mahimahi style, since this
//! kernel has no netem): a drop-tail buffer, serialisation at the rate, propagation delay and
//! random loss. A token-bucket shaper (`shaper = { rate, burst }`, a `tbf` with the buffer as
//! its `pfifo`/`bfifo` child) can sit in front of it on the left router's TUN device `dbox`. The reverse
//! direction has its own optional rate, delay and loss. Access links can have a rate (tbf on both
//! veth ends) and an extra delay (added by the delay box to the host's packets).
//!
//! # Rust API
//!
//! ```no_run
//! use headroom_testbed::{Testbed, Topology, Bottleneck};
//! use headroom_core::{Dur, Rate};
//! # fn main() -> anyhow::Result<()> {
//! if let Some(why) = headroom_testbed::unsupported_reason() {
//!     println!("SKIP: {why}");
//!     return Ok(());
//! }
//! let topo = Topology::dumbbell(1, Bottleneck::new(Some(Rate::from_mbps(50)), Dur::from_millis(26)));
//! let tb = Testbed::up(&topo)?;                      // namespaces s1, r1 (prefixed), routers, delay box
//! let r1 = tb.host("r1")?.addr;                      // 10.2.1.2
//! tb.exec("s1", &["ip", "route"])?;                  // a command inside s1 (`ip netns exec`)
//! let listener = tb.run_in("r1", || Ok(std::net::TcpListener::bind("0.0.0.0:5001")?))?;
//! let sender = tb.spawn_in("s1", move || {           // a thread inside s1
//!     let s = headroom_testbed::traffic::tcp_connect((r1, 5001).into(), "cubic")?;
//!     headroom_testbed::traffic::tcp_bulk_send(&s, Dur::from_secs(2), None, None)
//! })?;
//! let (conn, _) = listener.accept()?;
//! let got = headroom_testbed::traffic::tcp_sink(conn, None)?;
//! sender.join().unwrap()?;
//! println!("{got} bytes; queue {:?}", tb.queue_stats()?);
//! tb.down()?;                                        // or just drop it
//! # Ok(()) }
//! ```
//!
//! - [`Testbed::up`] builds a [`Topology`] (from Rust or from a [`Scenario`] file) and returns
//!   handles: `Testbed::host` gives each [`Host`]'s namespace name and address.
//! - `Testbed::exec` / `Testbed::command` run programs in a host; `Testbed::run_in` /
//!   `Testbed::spawn_in` run Rust closures on a thread that entered the host's namespace
//!   (sockets created there belong to the host and can be used from any thread).
//! - [`Testbed::queue_stats`], [`Testbed::delaybox_counters`], [`Testbed::tun_drops`] read the
//!   bottleneck.
//! - [`traffic`] has the built-in UDP generator (CBR, Poisson, on/off) and counting receiver,
//!   UDP ping/echo, TCP bulk sender (any kernel congestion control) and sink, and the web-like
//!   workload; [`measure`] samples them into `time_s,flow,metric,value` CSV rows.
//!
//! # Hygiene
//!
//! Every name carries the run's prefix `hr<pid hex><n hex><rand hex>-`; links and TUN devices
//! only exist inside the run's namespaces. Dropping the [`Testbed`] (normal exit, error, panic
//! unwinding) removes everything. The first `up` installs SIGINT/SIGTERM/SIGHUP handlers that
//! remove every live testbed of the process and exit with 128+signal. A SIGKILLed run leaves
//! namespaces behind, recorded in `/run/headroom-testbed/<prefix>/state.json`; [`down_stale`]
//! (`headroom testbed down --stale`) removes exactly the namespaces recorded by runs whose owner
//! process is gone. A namespace named like ours that no state file records is never removed
//! ([`bed::unrecorded_namespaces`] lists them).
//!
//! Tests need root; [`unsupported_reason`] says why a machine cannot run them.

pub mod bed;
pub mod bench;
pub mod chain;
pub mod delaybox;
pub mod linkcheck;
pub mod measure;
pub mod scenario;
pub mod sys;
pub mod topology;
pub mod traffic;

/// For tests that need the testbed (root, network namespaces, `tc`): `true` when they can run
/// here. Otherwise it prints `SKIP: <reason>` (to the stderr handle, so libtest's capture lets it
/// through) and returns `false` — except under CI (`CI` set to `true` or `1`), where a skip is a
/// failure: it panics with the reason, so a broken namespace set-up can never pass as green.
pub fn testbed_available_for_test() -> bool {
    available_for_test(unsupported_reason())
}

/// [`testbed_available_for_test`] with the caller's own reason not to run (`None`: it can run),
/// for tests that need more than the testbed (BTF, ...).
pub fn available_for_test(unsupported: Option<String>) -> bool {
    match skip_verdict(unsupported, std::env::var("CI").ok().as_deref()) {
        SkipVerdict::Run => true,
        SkipVerdict::Skip(why) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "SKIP: {why}");
            false
        }
        SkipVerdict::Fail(why) => panic!("{why}"),
    }
}

/// What a root-only test does ([`testbed_available_for_test`]).
#[derive(Debug, PartialEq, Eq)]
pub enum SkipVerdict {
    Run,
    Skip(String),
    Fail(String),
}

/// The rule behind [`testbed_available_for_test`]: run when supported; skip with the reason
/// elsewhere; fail under CI (`ci` is the `CI` variable's value).
pub fn skip_verdict(unsupported: Option<String>, ci: Option<&str>) -> SkipVerdict {
    match (unsupported, ci) {
        (None, _) => SkipVerdict::Run,
        (Some(why), Some("true" | "1")) => {
            SkipVerdict::Fail(format!("CI is set, and under CI a skipped root test is a failure: {why}"))
        }
        (Some(why), _) => SkipVerdict::Skip(why),
    }
}

pub use bed::{down_all, down_stale, find_host, list_runs, unsupported_reason, Host, QueueStats, RunState, Testbed};
pub use chain::{Chain, ChainScenario, ChainSpec};
pub use delaybox::{CounterSnapshot, Direction};
pub use topology::{Bottleneck, Buffer, FlowKind, HostSpec, InLinkCross, Scenario, Shaper, Side, Topology};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_is_a_failure_under_ci_only() {
        assert_eq!(skip_verdict(None, Some("true")), SkipVerdict::Run);
        assert_eq!(skip_verdict(Some("not root".into()), None), SkipVerdict::Skip("not root".into()));
        assert_eq!(skip_verdict(Some("not root".into()), Some("false")), SkipVerdict::Skip("not root".into()));
        assert!(
            matches!(skip_verdict(Some("not root".into()), Some("true")), SkipVerdict::Fail(w) if w.contains("not root"))
        );
        assert!(matches!(skip_verdict(Some("no tc".into()), Some("1")), SkipVerdict::Fail(_)));
    }
}
