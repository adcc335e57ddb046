//! Transparent interception: nftables `tproxy` and a policy-routing rule, owned by one proxy.
//!
//! On start the proxy installs (in its network namespace)
//!
//! ```text
//! table inet hrproxy_<pid hex>_<rand hex> {
//!   set users4 { type ipv4_addr; flags interval; }     # policy A's prefixes, per family
//!   set users6 { type ipv6_addr; flags interval; }
//!   set gate  { type inet_proto; }                      # holds "tcp" while new connections are split
//!   chain divert {
//!     type filter hook prerouting priority mangle; policy accept;
//!     meta l4proto tcp socket transparent 1 meta mark set MARK accept     # the proxy's own sockets
//!     meta l4proto tcp ct mark MARK tproxy to :PORT meta mark set MARK accept   # rest of a diverted flow
//!     [ip saddr @users4 | ip6 saddr @users6] [tcp dport {PORTS}] meta l4proto @gate
//!       tcp flags & (fin|syn|rst|ack) == syn ct mark set MARK tproxy to :PORT meta mark set MARK accept
//!   }
//! }
//! ip -4 rule add fwmark MARK lookup RT priority RT ; ip -4 route add local 0.0.0.0/0 dev lo table RT
//! ip -6 rule add fwmark MARK lookup RT priority RT ; ip -6 route add local ::/0 dev lo table RT
//! ```
//!
//! Both address families are intercepted (an `inet` table): IPv4 and IPv6 connections reach one
//! dual-stack listener (`[::]:PORT`, IPV6_V6ONLY off, transparent), IPv4 ones as v4-mapped
//! addresses that the proxy turns back into IPv4. With policy A, a family none of whose
//! prefixes is listed is not intercepted at all (one selection rule per listed family). In a
//! namespace with IPv6 disabled only the IPv4 rule and route are installed.
//!
//! Only SYNs are selected (the conntrack mark then carries the rest of a selected flow, such as
//! the handshake's last ACK, to the listener), so a connection is split or not for its whole life: one whose SYN
//! passed while the gate was closed (policy C overloaded, "none", B with unknown sizes passed,
//! A's non-listed sources) is never intercepted and is forwarded by the kernel untouched; a
//! split one keeps reaching the proxy's socket through the `socket transparent` rule.
//!
//! Before installing anything the proxy records what it will create in
//! `/run/headroom-proxy/<table>.json` (with its pid, its start time and its network namespace's
//! inode); it removes the table, rule and route and that file on exit, error and signal.
//! [`cleanup_stale`] (`headroom proxy --cleanup`) removes what crashed (SIGKILLed) proxies
//! recorded, and nothing else; records of namespaces that no longer exist are dropped.

use anyhow::{bail, Context, Result};
use serde_json::json;
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where proxies record what they installed.
pub const STATE_ROOT: &str = "/run/headroom-proxy";

/// What one proxy installed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interception {
    pub table: String,
    pub mark: u32,
    pub route_table: u32,
    pub port: u16,
    pid: u32,
    pid_start: u64,
    /// Inode of the network namespace (`/proc/self/ns/net`).
    netns_inode: u64,
}

/// Which new connections the nftables rule diverts.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// Policy A: only these source prefixes (None: any source).
    pub users: Option<Vec<(IpAddr, u8)>>,
    /// Only these destination ports (empty: any).
    pub ports: Vec<u16>,
    /// Whether the gate starts open (false for "none").
    pub open: bool,
}

fn run(argv: &[&str], stdin: Option<&str>) -> Result<String> {
    let mut c = Command::new(argv[0]);
    c.args(&argv[1..]).stdout(Stdio::piped()).stderr(Stdio::piped());
    c.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    let mut child = c.spawn().with_context(|| format!("running {} (install nftables/iproute2)", argv[0]))?;
    if let Some(s) = stdin {
        child.stdin.take().context("stdin")?.write_all(s.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!("`{}` failed: {}", argv.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

fn netns_inode(path: &str) -> Option<u64> {
    netns_inode_of(Path::new(path))
}

fn random_u32() -> u32 {
    let mut b = [0u8; 4];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut f, &mut b);
    }
    u32::from_ne_bytes(b)
}

impl Interception {
    fn state_path(&self) -> PathBuf {
        Path::new(STATE_ROOT).join(format!("{}.json", self.table))
    }

    /// Installs the interception for a transparent listener on `port`.
    pub fn install(port: u16, sel: &Selection) -> Result<Interception> {
        let pid = std::process::id();
        let r = random_u32();
        // Marks and routing tables in 0x4852xxxx / 10000..26383: unlikely to meet another
        // tool's, and checked against the rules present. The rule's priority is the table
        // number, which must stay below the main table's rule (32766) to be consulted first.
        let me = Interception {
            table: format!("hrproxy_{pid:x}_{:x}", r >> 8),
            mark: 0x4852_0000 | (r & 0x7fff),
            route_table: 10_000 + (r & 0x3fff),
            port,
            pid,
            pid_start: process_start_time(pid).context("reading /proc/self/stat")?,
            netns_inode: netns_inode("/proc/self/ns/net").context("reading /proc/self/ns/net")?,
        };
        let rules = run(&["ip", "rule", "show"], None)?;
        if rules.contains(&format!("lookup {} ", me.route_table)) || rules.contains(&format!("0x{:x}", me.mark)) {
            bail!("routing table {} or mark 0x{:x} already in use; try again", me.route_table, me.mark);
        }
        std::fs::create_dir_all(STATE_ROOT)?;
        let state = json!({"table": me.table, "mark": me.mark, "route_table": me.route_table, "port": port,
                           "pid": pid, "pid_start": me.pid_start, "netns_inode": me.netns_inode});
        std::fs::write(me.state_path(), state.to_string())?;
        if let Err(e) = me.apply(sel) {
            me.remove();
            return Err(e);
        }
        Ok(me)
    }

    fn apply(&self, sel: &Selection) -> Result<()> {
        let mut ports = String::new();
        if !sel.ports.is_empty() {
            let p: Vec<String> = sel.ports.iter().map(u16::to_string).collect();
            ports = format!("tcp dport {{ {} }} ", p.join(", "));
        }
        // One selection rule per address family that policy A lists (both without a list).
        // (match, tproxy's family: nft wants it named once the rule names one).
        let selects: Vec<(&str, &str)> = match &sel.users {
            None => vec![("", "")],
            Some(users) => {
                let mut v = Vec::new();
                if users.iter().any(|(a, _)| a.is_ipv4()) {
                    v.push(("ip saddr @users4 ", "ip "));
                }
                if users.iter().any(|(a, _)| a.is_ipv6()) {
                    v.push(("ip6 saddr @users6 ", "ip6 "));
                }
                v
            }
        };
        let mut script = format!(
            "add table inet {t}\n\
             add set inet {t} users4 {{ type ipv4_addr; flags interval; }}\n\
             add set inet {t} users6 {{ type ipv6_addr; flags interval; }}\n\
             add set inet {t} gate {{ type inet_proto; }}\n\
             add chain inet {t} divert {{ type filter hook prerouting priority mangle; policy accept; }}\n\
             add rule inet {t} divert meta l4proto tcp socket transparent 1 meta mark set {mark} accept\n\
             add rule inet {t} divert meta l4proto tcp ct mark {mark} tproxy to :{port} meta mark set {mark} accept\n",
            t = self.table,
            mark = self.mark,
            port = self.port,
        );
        for (m, f) in selects {
            script.push_str(&format!(
                "add rule inet {t} divert {m}{ports}meta l4proto @gate tcp flags & (fin|syn|rst|ack) == syn \
                 ct mark set {mark} tproxy {f}to :{port} meta mark set {mark} accept\n",
                t = self.table,
                mark = self.mark,
                port = self.port,
            ));
        }
        for (family, set) in [(true, "users4"), (false, "users6")] {
            let elems: Vec<String> = sel
                .users
                .iter()
                .flatten()
                .filter(|(a, _)| a.is_ipv4() == family)
                .map(|(a, l)| format!("{a}/{l}"))
                .collect();
            if !elems.is_empty() {
                script.push_str(&format!("add element inet {} {set} {{ {} }}\n", self.table, elems.join(", ")));
            }
        }
        if sel.open {
            script.push_str(&format!("add element inet {} gate {{ tcp }}\n", self.table));
        }
        run(&["nft", "-f", "-"], Some(&script))?;
        let (mark, rt) = (format!("0x{:x}", self.mark), self.route_table.to_string());
        run(&["ip", "-4", "rule", "add", "fwmark", &mark, "lookup", &rt, "priority", &rt], None)?;
        run(&["ip", "-4", "route", "add", "local", "0.0.0.0/0", "dev", "lo", "table", &rt], None)?;
        if ipv6_enabled() {
            run(&["ip", "-6", "rule", "add", "fwmark", &mark, "lookup", &rt, "priority", &rt], None)?;
            run(&["ip", "-6", "route", "add", "local", "::/0", "dev", "lo", "table", &rt], None)?;
        }
        Ok(())
    }

    /// Opens or closes the gate: whether new connections are diverted (policy C).
    pub fn set_gate(&self, open: bool) -> Result<()> {
        let verb = if open { "add" } else { "delete" };
        let r = run(&["nft", verb, "element", "inet", &self.table, "gate", "{ tcp }"], None);
        match r {
            // Deleting an absent element / adding a present one is not an error here.
            Err(e) if e.to_string().contains("No such file") || e.to_string().contains("exists") => Ok(()),
            r => r.map(|_| ()),
        }
    }

    /// Removes the table, the rule, the route and the state file (each best effort).
    pub fn remove(&self) {
        remove_recorded(&self.table, self.mark, self.route_table, None);
        let _ = std::fs::remove_file(self.state_path());
    }
}

/// Whether this namespace has IPv6 (the kernel's and not disabled by sysctl).
fn ipv6_enabled() -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv6/conf/all/disable_ipv6").is_ok_and(|v| v.trim() == "0")
}

fn remove_recorded(table: &str, mark: u32, route_table: u32, netns: Option<&Path>) {
    // In another namespace the commands run under `nsenter --net=PATH`.
    let enter = netns.map(|p| format!("--net={}", p.display()));
    let run_in = |argv: &[&str]| {
        let mut v: Vec<&str> = enter.as_deref().map_or(vec![], |e| vec!["nsenter", e]);
        v.extend_from_slice(argv);
        let _ = run(&v, None);
    };
    // `ip` is the family of records written before IPv6 support (an IPv4-only table).
    for family in ["inet", "ip"] {
        run_in(&["nft", "delete", "table", family, table]);
    }
    let (mark, rt) = (format!("0x{mark:x}"), route_table.to_string());
    for family in ["-4", "-6"] {
        run_in(&["ip", family, "rule", "del", "fwmark", &mark, "lookup", &rt, "priority", &rt]);
        run_in(&["ip", family, "route", "flush", "table", &rt]);
    }
}

/// Where a network namespace can be entered, found by its inode: a task in it
/// (`/proc/PID/task/TID/ns/net`), a descriptor open on it (`/proc/PID/fd/N` → `net:[INODE]`),
/// or a bind mount of it (`ip netns add` keeps one in /run/netns; any nsfs mount in
/// /proc/self/mountinfo). None: no longer exists (or is pinned only by a mount of another mount
/// namespace, which this process cannot see). Bounded by the processes and mounts present.
fn find_netns(inode: u64) -> Option<PathBuf> {
    let is_it = |p: &Path| netns_inode_of(p) == Some(inode);
    if let Ok(mi) = std::fs::read_to_string("/proc/self/mountinfo") {
        for l in mi.lines() {
            // "ID PARENT MAJ:MIN ROOT MOUNTPOINT ... - FSTYPE SOURCE ..."; ROOT is "net:[N]".
            let f: Vec<&str> = l.split(' ').collect();
            if f.len() > 4 && f[3] == format!("net:[{inode}]") {
                let p = PathBuf::from(f[4].replace("\\040", " "));
                if is_it(&p) {
                    return Some(p);
                }
            }
        }
    }
    let procs = std::fs::read_dir("/proc").ok()?;
    let target = format!("net:[{inode}]");
    for e in procs.flatten() {
        let pid = e.file_name();
        if !pid.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let base = e.path();
        for t in std::fs::read_dir(base.join("task")).into_iter().flatten().flatten() {
            let p = t.path().join("ns/net");
            if is_it(&p) {
                return Some(p);
            }
        }
        for fd in std::fs::read_dir(base.join("fd")).into_iter().flatten().flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == target.as_str()) {
                return Some(fd.path());
            }
        }
    }
    None
}

fn netns_inode_of(p: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).ok().map(|m| m.ino())
}

/// What [`cleanup_stale`] did with one dead proxy's record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cleaned {
    /// Its table, rule and route were removed (in this network namespace, or in the other one
    /// it was recorded in, entered with `nsenter --net=PATH`), and its record.
    Removed { table: String, netns: Option<PathBuf> },
    /// Its network namespace no longer exists: whatever it installed went with it; the record
    /// was dropped.
    NamespaceGone { table: String, netns_inode: u64 },
}

impl std::fmt::Display for Cleaned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cleaned::Removed { table, netns: None } => write!(f, "removed {table}"),
            Cleaned::Removed { table, netns: Some(p) } => {
                write!(f, "removed {table} (in network namespace {})", p.display())
            }
            Cleaned::NamespaceGone { table, netns_inode } => write!(
                f,
                "dropped the record of {table}: its network namespace (inode {netns_inode}) no longer exists, nothing left to remove"
            ),
        }
    }
}

/// Cleans up after crashed proxies (owner gone, or its pid now names another process), from
/// what they recorded in `/run/headroom-proxy`: in this network namespace and in any other
/// that still exists (entered with nsenter) their table, rule and route are removed; a record
/// whose namespace no longer exists is dropped (a namespace's tables, rules and routes vanish
/// with it). Records of live proxies are not touched.
///
/// (Before session 6 a record of another namespace was always left "for a cleanup run inside
/// it", so the records of namespaces already gone — a testbed torn down after its proxy was
/// killed — stayed forever: 3 of 4 records were left in one run.)
pub fn cleanup_stale() -> Result<Vec<Cleaned>> {
    let mut done = Vec::new();
    let Ok(dir) = std::fs::read_dir(STATE_ROOT) else { return Ok(done) };
    let here = netns_inode("/proc/self/ns/net");
    for e in dir.flatten() {
        let path = e.path();
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
        let (Some(table), Some(mark), Some(rt), Some(pid), Some(start), Some(ns)) = (
            v["table"].as_str(),
            v["mark"].as_u64(),
            v["route_table"].as_u64(),
            v["pid"].as_u64(),
            v["pid_start"].as_u64(),
            v["netns_inode"].as_u64(),
        ) else {
            continue;
        };
        let alive = process_start_time(pid as u32) == Some(start);
        if alive {
            continue;
        }
        let table = table.to_string();
        if here == Some(ns) {
            remove_recorded(&table, mark as u32, rt as u32, None);
            done.push(Cleaned::Removed { table, netns: None });
        } else if let Some(p) = find_netns(ns) {
            remove_recorded(&table, mark as u32, rt as u32, Some(&p));
            done.push(Cleaned::Removed { table, netns: Some(p) });
        } else {
            done.push(Cleaned::NamespaceGone { table, netns_inode: ns });
        }
        let _ = std::fs::remove_file(&path);
    }
    Ok(done)
}
