//! The chain topology: hosts in a line, each pair of neighbours joined by its own link.
//!
//! ```text
//!  sender ─ seg1 ─ p1 ─ seg2 ─ p2 ─ seg3 ─ receiver        (any number of segments ≥ 1)
//! ```
//!
//! This is the path of the overlay paper's Fig. 2 (sender – LAN1 – P1 – WAN – P2 – LAN2 –
//! receiver, `docs/overlay.md`): the junction hosts forward IP packets like routers and are where
//! split-TCP proxies run (`headroom proxy` started inside them). Every segment is a full link of
//! the [`crate::delaybox`]: its own rate (serialisation, an exact link), drop-tail buffer, one-way
//! delay, Bernoulli loss and optional token-bucket shaper, each per direction where the
//! dumbbell's bottleneck has it — a segment is described by the same keys as `[bottleneck]`
//! ([`Bottleneck`]). *Forward* is toward the last node (the receiver).
//!
//! # How it is built
//!
//! Node `j` (0 = the first) is the namespace `<prefix><name>`. Segment `i` (1-based) joins node
//! `i−1` to node `i` through two TUN devices, both named `seg<i>`, one in each node; a delay box
//! (two threads, one per direction) moves packets between them. Addresses: segment `i` is
//! `10.9.i.0/24`, the upstream end `10.9.i.1`, the downstream end `10.9.i.2`. Node `j` routes
//! the subnets of segments beyond its neighbours through the TUN device toward them, and the
//! junctions forward (`ip_forward = 1`, `rp_filter = 0`). A host's [`Host::addr`] is its
//! address on its upstream segment (`10.9.j.2`; the first node: `10.9.1.1`), reachable from
//! every node. Where the kernel has IPv6 the segments carry it as well, the same way:
//! `fd09:0:0:i::/64`, ends `::1` and `::2`, routes and forwarding likewise ([`Chain::addr6`]). There are no veths: a node's only links are its TUN devices.
//!
//! Hygiene is the dumbbell's ([`crate::bed`]): one per-run prefix on every namespace and thread,
//! `state.json` written before anything is created (so `testbed down --stale` finds a killed
//! run), teardown on drop, error, panic and SIGINT/SIGTERM/SIGHUP, processes left in the
//! namespaces killed. TUN devices vanish with the process.

use std::fs;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use headroom_core::Bytes;
use serde::Deserialize;

use crate::bed::{self, Host, Netns};
use crate::delaybox::{CounterSnapshot, DelayBox, LineConfig};
use crate::sys;
use crate::topology::{check_host_name, Bottleneck, Buffer, Side};

/// Most segments of a chain (segment `i`'s subnet is `10.9.i.0/24`).
pub const MAX_SEGMENTS: usize = 250;

/// A chain: `segments.len() + 1` nodes in a line.
#[derive(Clone, Debug, PartialEq)]
pub struct ChainSpec {
    /// Node names, first (sender) to last (receiver).
    pub nodes: Vec<String>,
    /// Segment `i` joins `nodes[i]` and `nodes[i + 1]`; forward is toward the last node.
    pub segments: Vec<Bottleneck>,
}

impl ChainSpec {
    /// A chain of `segments` with the default names: `sender`, `p1` … `p<k−1>`, `receiver`.
    pub fn new(segments: Vec<Bottleneck>) -> ChainSpec {
        ChainSpec { nodes: default_names(segments.len()), segments }
    }

    pub fn validate(&self) -> Result<()> {
        if self.segments.is_empty() {
            bail!("a chain needs at least one [[segment]]");
        }
        if self.segments.len() > MAX_SEGMENTS {
            bail!("{} segments; at most {MAX_SEGMENTS}", self.segments.len());
        }
        if self.nodes.len() != self.segments.len() + 1 {
            bail!(
                "nodes: {} names for {} segments; a chain of k segments has k + 1 nodes",
                self.nodes.len(),
                self.segments.len()
            );
        }
        for (i, seg) in self.segments.iter().enumerate() {
            seg.validate().with_context(|| format!("[[segment]] {}", i + 1))?;
        }
        let mut seen = std::collections::HashSet::new();
        for n in &self.nodes {
            check_host_name(n)?;
            if !seen.insert(n.as_str()) {
                bail!("node name `{n}` appears twice");
            }
        }
        Ok(())
    }
}

fn default_names(segments: usize) -> Vec<String> {
    let mut v = vec!["sender".to_string()];
    v.extend((1..segments).map(|j| format!("p{j}")));
    v.push("receiver".to_string());
    v
}

/// A chain scenario file (`scenarios/testbed/chain*.toml`): `[[segment]]` tables with the keys
/// of `[bottleneck]`, and optionally `nodes = [...]`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainScenario {
    #[serde(default)]
    pub name: Option<String>,
    /// Node names, first to last (default `sender`, `p1` …, `receiver`).
    #[serde(default)]
    pub nodes: Option<Vec<String>>,
    #[serde(rename = "segment")]
    pub segments: Vec<Bottleneck>,
}

impl ChainScenario {
    /// Parses TOML text; `origin` (a file name) prefixes error messages.
    pub fn parse(text: &str, origin: &str) -> Result<ChainScenario> {
        let s: ChainScenario = toml::from_str(text).map_err(|e| anyhow!("{origin}: {e}"))?;
        s.spec().validate().with_context(|| origin.to_string())?;
        Ok(s)
    }

    pub fn load(path: &Path) -> Result<ChainScenario> {
        let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        ChainScenario::parse(&text, &path.display().to_string())
    }

    pub fn spec(&self) -> ChainSpec {
        ChainSpec {
            nodes: self.nodes.clone().unwrap_or_else(|| default_names(self.segments.len())),
            segments: self.segments.clone(),
        }
    }

    /// Whether a scenario text describes a chain (has `[[segment]]`) rather than a dumbbell.
    pub fn is_chain(text: &str) -> bool {
        toml::from_str::<toml::Table>(text).is_ok_and(|t| t.contains_key("segment"))
    }
}

/// The address of segment `i`'s (1-based) upstream (`end = 1`) or downstream (`end = 2`) end.
fn seg_addr(i: usize, end: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 9, i as u8, end)
}

/// The IPv6 address of the same end: `fd09:0:0:i::end` (segment `i`'s subnet `fd09:0:0:i::/64`).
pub fn seg_addr6(i: usize, end: u8) -> Ipv6Addr {
    Ipv6Addr::new(0xfd09, 0, 0, i as u16, 0, 0, 0, end.into())
}

fn seg_dev(i: usize) -> String {
    format!("seg{i}")
}

/// A running chain. Dropping it tears everything down; the node accessors (`host`, `hosts`,
/// `command`, `run_in`, ...) are [`Netns`]'s, with the nodes as hosts.
pub struct Chain {
    run: Netns,
    /// Whether the segments carry IPv6 too (the kernel has IPv6).
    ipv6: bool,
}

impl std::ops::Deref for Chain {
    type Target = Netns;
    fn deref(&self) -> &Netns {
        &self.run
    }
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain").field("prefix", &self.prefix()).field("nodes", &self.hosts()).finish()
    }
}

impl Chain {
    /// Builds `spec`. On any error, whatever was created is removed before returning.
    pub fn up(spec: &ChainSpec) -> Result<Chain> {
        bed::check_support()?;
        spec.validate()?;
        let prefix = bed::new_prefix();
        let nodes: Vec<Host> = spec
            .nodes
            .iter()
            .enumerate()
            .map(|(j, name)| Host {
                name: name.clone(),
                netns: format!("{prefix}{name}"),
                addr: if j == 0 { seg_addr(1, 1) } else { seg_addr(j, 2) },
                side: Side::Chain,
            })
            .collect();
        let namespaces: Vec<String> = nodes.iter().map(|h| h.netns.clone()).collect();
        let first = namespaces[0].clone();
        let run = Netns::record(prefix, nodes, namespaces, (&first, &seg_dev(1)))?;
        let ipv6 = Path::new("/proc/sys/net/ipv6/conf/all/disable_ipv6").exists();
        let mut chain = Chain { run, ipv6 };
        // On error `chain` is dropped here, which removes what was built.
        chain.build(spec)?;
        Ok(chain)
    }

    /// Node `name`'s IPv6 address on its upstream segment (`fd09:0:0:j::2`; the first node:
    /// `fd09:0:0:1::1`), as [`Host::addr`] is its IPv4 one; an error when the kernel has no IPv6.
    pub fn addr6(&self, name: &str) -> Result<Ipv6Addr> {
        if !self.ipv6 {
            bail!("this kernel has no IPv6: the chain carries IPv4 only");
        }
        let j = self.hosts().iter().position(|h| h.name == name).with_context(|| format!("no node {name:?}"))?;
        Ok(if j == 0 { seg_addr6(1, 1) } else { seg_addr6(j, 2) })
    }

    fn build(&mut self, spec: &ChainSpec) -> Result<()> {
        let k = spec.segments.len();
        let ipv6 = self.ipv6;
        let namespaces = self.run.namespaces().to_vec();
        let root: Vec<String> = namespaces.iter().map(|ns| format!("netns add {ns}")).collect();
        bed::ip_batch(None, &root)?;
        for (j, ns) in namespaces.iter().enumerate() {
            let router = j > 0 && j < k;
            bed::write_sysctls(ns, router, ipv6 && router)?;
        }
        // The TUN devices, opened from inside each node: (upstream end, downstream end) per segment.
        let nss = namespaces.clone();
        let tuns = std::thread::spawn(move || -> Result<Vec<_>> {
            (1..=k)
                .map(|i| {
                    let dev = seg_dev(i);
                    sys::enter_netns(&bed::ns_path(&nss[i - 1]))?;
                    let up = sys::open_tun(&dev)?;
                    sys::enter_netns(&bed::ns_path(&nss[i]))?;
                    Ok((up, sys::open_tun(&dev)?))
                })
                .collect()
        })
        .join()
        .map_err(|_| anyhow!("TUN setup thread panicked"))??;
        for (j, ns) in namespaces.iter().enumerate() {
            let mut lines = vec!["link set lo up".to_string()];
            // j's own segments: j (toward the sender, j is its downstream end) and j + 1
            let own: Vec<(usize, u8)> =
                [(j, 2u8), (j + 1, 1u8)].into_iter().filter(|(i, _)| (1..=k).contains(i)).collect();
            for &(i, end) in &own {
                let dev = seg_dev(i);
                lines.push(format!("addr add {}/24 dev {dev}", seg_addr(i, end)));
                if ipv6 {
                    // nodad: usable at once (a point-to-point TUN has no neighbours to ask).
                    lines.push(format!("addr add {}/64 dev {dev} nodad", seg_addr6(i, end)));
                }
                lines.push(format!("link set {dev} txqueuelen {} up", bed::TUN_TXQUEUELEN));
            }
            for m in 1..=k {
                // Toward the sender through segment j, toward the receiver through j + 1.
                let via = if m < j {
                    Some((j, 2))
                } else if m > j + 1 {
                    Some((j + 1, 1))
                } else {
                    None
                };
                if let Some((s, end)) = via {
                    lines.push(format!("route add 10.9.{m}.0/24 dev {} src {}", seg_dev(s), seg_addr(s, end)));
                    if ipv6 {
                        let net = seg_addr6(m, 0);
                        lines.push(format!("route add {net}/64 dev {} src {}", seg_dev(s), seg_addr6(s, end)));
                    }
                }
            }
            bed::ip_batch(Some(ns), &lines)?;
        }
        for (i, (seg, (up, down))) in spec.segments.iter().zip(tuns).enumerate() {
            let i = i + 1;
            let dev = seg_dev(i);
            let (up_ns, down_ns) = (&namespaces[i - 1], &namespaces[i]);
            // The link's queue is in the delay box; the qdiscs only hand packets to it (a
            // shaper's tbf queues in front of the forward link).
            match seg.shaper {
                Some(sh) => bed::add_rate_limit(up_ns, &dev, sh.rate, seg.buffer, Some(Bytes(sh.burst_bytes())))?,
                None => bed::set_fifo(up_ns, &dev, Buffer::Packets(bed::TUN_TXQUEUELEN))?,
            }
            bed::set_fifo(down_ns, &dev, Buffer::Packets(bed::TUN_TXQUEUELEN))?;
            // Each segment and direction draws its own loss pattern from the segment's seed.
            let seed = seg.seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let line = |delay, loss, seed, rate, cross| LineConfig {
                delay,
                loss,
                seed,
                extra: Default::default(),
                spin: headroom_core::Dur::ZERO,
                // A chain runs two lines per segment; polling after arrivals in all of them
                // would take every core of a small machine under a relayed bulk transfer
                // (delaybox module doc, step 4). The chain carries TCP, whose arrivals are not
                // probe trains.
                arrival_spin: headroom_core::Dur::ZERO,
                realtime: true,
                rate,
                buffer: Some(seg.buffer),
                cross,
            };
            let fwd = line(seg.delay, seg.loss, seed, seg.rate, seg.cross);
            let rev = line(seg.reverse_delay(), seg.reverse_loss, seed ^ 0x5eed, seg.reverse_rate, seg.reverse_cross);
            let name = format!("{}{i}", self.run.prefix());
            self.run.boxes.push(
                DelayBox::start(&name, up, down, fwd, rev)
                    .with_context(|| format!("starting segment {i}'s delay box"))?,
            );
        }
        Ok(())
    }

    /// The nodes, first (sender) to last (receiver).
    pub fn nodes(&self) -> &[Host] {
        self.hosts()
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Result<&Host> {
        self.host(name)
    }

    /// Delay-box counters of segment `i` (1-based): (forward, reverse).
    pub fn segment_counters(&self, i: usize) -> Result<(CounterSnapshot, CounterSnapshot)> {
        let b = self.run.boxes.get(i.wrapping_sub(1)).ok_or_else(|| anyhow!("no segment {i}"))?;
        Ok((b.forward.snapshot(), b.reverse.snapshot()))
    }

    /// Tears everything down now (Drop does the same, ignoring errors).
    pub fn down(self) -> Result<()> {
        self.run.down()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_core::{Dur, Rate};

    const FILE: &str = r#"
name = "fig2"
[[segment]]
rate = "100Mbps"
delay = "5ms"
loss = 0.001
[[segment]]
rate = "100Mbps"
delay = "20ms"
buffer = "500pkts"
[[segment]]
delay = "50ms"
loss = 0.01
reverse_loss = 0.0
"#;

    #[test]
    fn a_chain_file_parses_with_default_names() {
        assert!(ChainScenario::is_chain(FILE));
        assert!(!ChainScenario::is_chain("[bottleneck]\nrate = \"1Mbps\"\n"));
        let s = ChainScenario::parse(FILE, "c.toml").unwrap();
        let spec = s.spec();
        assert_eq!(spec.nodes, ["sender", "p1", "p2", "receiver"]);
        assert_eq!(spec.segments[0].rate, Some(Rate::from_mbps(100)));
        assert_eq!(spec.segments[1].buffer, Buffer::Packets(500));
        assert_eq!(spec.segments[2].delay, Dur::from_millis(50));
        assert_eq!(spec.segments[2].rate, None);
        assert_eq!(spec.segments[2].loss, 0.01);
    }

    #[test]
    fn bad_chains_are_refused_by_name() {
        let e = format!(
            "{:#}",
            ChainScenario::parse(&FILE.replace("delay = \"5ms\"", "dealy = \"5ms\""), "c").unwrap_err()
        );
        assert!(e.contains("dealy") && e.contains("line"), "{e}");
        let e = format!("{:#}", ChainScenario::parse(&format!("nodes = [\"a\", \"b\"]\n{FILE}"), "c").unwrap_err());
        assert!(e.contains("2 names for 3 segments"), "{e}");
        let e = format!(
            "{:#}",
            ChainScenario::parse(&format!("nodes = [\"a\", \"b\", \"b\", \"c\"]\n{FILE}"), "c").unwrap_err()
        );
        assert!(e.contains("`b` appears twice"), "{e}");
        let e = format!("{:#}", ChainScenario::parse("name = \"x\"\n", "c").unwrap_err());
        assert!(e.contains("segment"), "{e}");
        assert!(ChainSpec::new(Vec::new()).validate().is_err());
    }

    #[test]
    fn the_shipped_chain_file_is_the_overlay_path() {
        let s = ChainScenario::parse(include_str!("../../../scenarios/testbed/chain.toml"), "chain.toml").unwrap();
        let spec = s.spec();
        assert_eq!(spec.nodes, default_names(3));
        let delays: Vec<u64> = spec.segments.iter().map(|b| b.delay.as_nanos() / 1_000_000).collect();
        assert_eq!(delays, [5, 20, 50]);
    }

    #[test]
    fn addresses_and_names() {
        assert_eq!(default_names(1), ["sender", "receiver"]);
        assert_eq!(seg_addr(3, 2), Ipv4Addr::new(10, 9, 3, 2));
        assert_eq!(seg_dev(12), "seg12");
    }
}
