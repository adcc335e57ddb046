//! headroom's congestion controllers for the Linux kernel and their loader.
//!
//! The controllers are C files in `bpf/` at the workspace root (one per controller, each
//! explaining its algorithm in a header comment): BECC (`becc.bpf.c`), TCP-LP (`tcp_lp.bpf.c`)
//! and LEDBAT (`ledbat.bpf.c`). `build.rs` compiles them with clang against a `vmlinux.h` made
//! from the running kernel's BTF; this crate embeds the objects and registers them as BPF
//! `struct_ops` (`tcp_congestion_ops`, `SEC(".struct_ops.link")`, `TCP_CONG_NON_RESTRICTED`), so
//! that any socket can select one with `setsockopt(TCP_CONGESTION, name)`.
//!
//! **Names.** A controller registers under the name in its object (`becc`, `lp`, `ledbat`) or
//! under any other name of at most 15 characters: the loader rewrites the `name` field of the
//! `struct_ops` map's initial value (libbpf's copy of the C struct) before loading. Tests use
//! [`unique_name`] so that runs never collide.
//!
//! **Lifetime.** A [`Registered`] controller stays registered while the value lives (its BPF
//! link is held); dropping it unregisters the controller. [`Registered::pin`] pins the link in
//! bpffs ([`PIN_DIR`]) so that it outlives the process; [`unpin`] removes the pin, which
//! unregisters it once no socket and no process holds it.
//!
//! **Never the system default.** Nothing here writes `net.ipv4.tcp_congestion_control`: a BPF
//! controller made the system default would leak a kernel reference when the sysctl is refused.
use std::ffi::OsStr;
use std::fmt;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use libbpf_rs::{Link, MapCore, MapFlags, MapType, Object, ObjectBuilder, PrintLevel};

/// `TCP_CA_NAME_MAX` (16) minus the terminating NUL.
pub const MAX_NAME_LEN: usize = 15;
/// Where `headroom cc load --pin` pins the controllers' links.
pub const PIN_DIR: &str = "/sys/fs/bpf/headroom/cc";
/// The kernel's list of registered congestion controllers.
pub const AVAILABLE_SYSCTL: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
const BTF_PATH: &str = "/sys/kernel/btf/vmlinux";

static BECC_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/becc.bpf.o"));
static LP_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/tcp_lp.bpf.o"));
static LEDBAT_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ledbat.bpf.o"));

/// One of headroom's kernel congestion controllers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Controller {
    /// BECC (Kugimoto & Amagai 1997): Reno capped by a bandwidth window.
    Becc,
    /// TCP-LP (Kuzmanovic & Knightly 2003), as Linux's `tcp_lp.c`.
    Lp,
    /// LEDBAT (RFC 6817) with a TARGET chosen at load time.
    Ledbat,
}

impl Controller {
    pub const ALL: [Controller; 3] = [Controller::Becc, Controller::Lp, Controller::Ledbat];

    /// The name in the object, and the default registered name.
    pub fn name(self) -> &'static str {
        match self {
            Controller::Becc => "becc",
            Controller::Lp => "lp",
            Controller::Ledbat => "ledbat",
        }
    }

    /// A short tag for [`unique_name`].
    fn tag(self) -> &'static str {
        match self {
            Controller::Becc => "becc",
            Controller::Lp => "lp",
            Controller::Ledbat => "lbat",
        }
    }

    /// One line about the controller.
    pub fn describe(self) -> &'static str {
        match self {
            Controller::Becc => "BECC: Reno + bandwidth window (Kugimoto & Amagai, IPSJ 1997)",
            Controller::Lp => "TCP-LP: low priority from one-way delay (Kuzmanovic & Knightly 2003; Linux tcp_lp.c)",
            Controller::Ledbat => "LEDBAT: background transport, queueing delay steered to TARGET (RFC 6817)",
        }
    }

    /// The controller called `name` (its default name).
    pub fn parse(name: &str) -> Option<Controller> {
        Controller::ALL.into_iter().find(|c| c.name() == name)
    }

    fn object(self) -> &'static [u8] {
        match self {
            Controller::Becc => BECC_OBJ,
            Controller::Lp => LP_OBJ,
            Controller::Ledbat => LEDBAT_OBJ,
        }
    }
}

impl fmt::Display for Controller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How to load a controller.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// Register under this name instead of [`Controller::name`].
    pub name: Option<String>,
    /// LEDBAT's TARGET (RFC 6817; default 100 ms); only for [`Controller::Ledbat`].
    pub ledbat_target: Option<Duration>,
}

/// Why a controller could not be registered.
#[derive(Debug)]
pub enum LoadError {
    /// Loading BPF `struct_ops` needs root (CAP_BPF, CAP_NET_ADMIN, CAP_SYS_ADMIN).
    NotRoot,
    /// The kernel has no BTF (`/sys/kernel/btf/vmlinux`), which `struct_ops` needs.
    NoBtf,
    /// The name is not 1–15 characters of `[A-Za-z0-9_.-]`.
    BadName(String),
    /// A congestion controller of that name is already registered.
    AlreadyRegistered(String),
    /// The verifier rejected a program; `log` is libbpf's output, with the verifier's log.
    Verifier { controller: Controller, log: String },
    /// Anything else, with libbpf's messages.
    Other(String),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::NotRoot => write!(
                f,
                "registering a BPF congestion controller needs root (CAP_BPF, CAP_NET_ADMIN and CAP_SYS_ADMIN)"
            ),
            LoadError::NoBtf => write!(
                f,
                "{BTF_PATH} is missing: this kernel has no BTF (CONFIG_DEBUG_INFO_BTF), which BPF struct_ops needs"
            ),
            LoadError::BadName(n) => {
                write!(f, "invalid congestion control name {n:?}: 1 to {MAX_NAME_LEN} characters of A-Z a-z 0-9 _ . -")
            }
            LoadError::AlreadyRegistered(n) => write!(
                f,
                "a congestion controller named {n:?} is already registered (see `headroom cc list`; \
                 unload it or choose another name with --prefix)"
            ),
            LoadError::Verifier { controller, log } => {
                write!(f, "the kernel's verifier rejected {controller}:\n{log}")
            }
            LoadError::Other(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for LoadError {}

/// A controller registered with the kernel; unregistered when dropped (unless pinned).
pub struct Registered {
    controller: Controller,
    name: String,
    link: Option<Link>,
    obj: Object,
}

impl fmt::Debug for Registered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registered").field("controller", &self.controller).field("name", &self.name).finish()
    }
}

/// BECC's state for one socket, as published by `becc.bpf.c` whenever the bandwidth window or
/// the update mode changes (not on every ACK).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BeccView {
    /// `snd_swnd` in bytes; `None` while unlimited.
    pub snd_swnd: Option<u32>,
    pub pre_snd_swnd: Option<u32>,
    /// `t_minrtt` in µs.
    pub t_minrtt_us: Option<u32>,
    /// `t_msrd_th`, bytes/s.
    pub t_msrd_th: u32,
    /// `expct_th`, bytes/s.
    pub expct_th: u32,
    /// 0 UPDATE_START, 1 UPDATING, 2 NOT_UPDATE.
    pub mode: u32,
    /// Windows set on entering recovery.
    pub sets: u32,
    /// Publications so far.
    pub changes: u32,
}

impl Registered {
    pub fn controller(&self) -> Controller {
        self.controller
    }

    /// The name sockets select it by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Pins the link at `PIN_DIR/<name>` (mounting bpffs on `/sys/fs/bpf` if needed): the
    /// controller then stays registered after this process exits, until [`unpin`].
    pub fn pin(&mut self) -> Result<PathBuf, String> {
        ensure_bpffs()?;
        std::fs::create_dir_all(PIN_DIR).map_err(|e| format!("creating {PIN_DIR}: {e}"))?;
        let path = pin_path(&self.name);
        let link = self.link.as_mut().ok_or("not attached")?;
        link.pin(&path).map_err(|e| format!("pinning {}: {e}", path.display()))?;
        Ok(path)
    }

    /// BECC's published state for the socket `fd` (which must use this controller); `None`
    /// before BECC published anything for it.
    pub fn becc_view(&self, fd: RawFd) -> Result<Option<BeccView>, String> {
        if self.controller != Controller::Becc {
            return Err(format!("{} has no BECC view", self.controller));
        }
        let map = self.obj.maps().find(|m| m.name() == OsStr::new("becc_view")).ok_or("becc_view map missing")?;
        let v = match map.lookup(&fd.to_ne_bytes(), MapFlags::ANY) {
            Ok(Some(v)) => v,
            Ok(None) => return Ok(None),
            Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("reading becc_view: {e}")),
        };
        let w = |i: usize| u32::from_ne_bytes(v[4 * i..4 * i + 4].try_into().unwrap());
        let opt = |x: u32| (x != u32::MAX).then_some(x);
        Ok(Some(BeccView {
            snd_swnd: opt(w(0)),
            pre_snd_swnd: opt(w(1)),
            t_minrtt_us: opt(w(2)),
            t_msrd_th: w(3),
            expct_th: w(4),
            mode: w(5),
            sets: w(6),
            changes: w(7),
        }))
    }
}

/// A name unique to this process and call: `h<pid hex><counter hex>_<tag>`, at most 15 chars.
pub fn unique_name(c: Controller) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed) & 0xff;
    format!("h{:x}{n:x}_{}", std::process::id() & 0xff_ffff, c.tag())
}

/// The congestion controllers the kernel has registered.
pub fn available() -> Result<Vec<String>, String> {
    let s = std::fs::read_to_string(AVAILABLE_SYSCTL).map_err(|e| format!("reading {AVAILABLE_SYSCTL}: {e}"))?;
    Ok(s.split_whitespace().map(str::to_owned).collect())
}

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= MAX_NAME_LEN
        && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

/// The pin of the controller registered as `name`.
pub fn pin_path(name: &str) -> PathBuf {
    Path::new(PIN_DIR).join(name)
}

/// The names pinned under [`PIN_DIR`].
pub fn pinned() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(PIN_DIR)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Removes the pin of `name`, and headroom's pin folders once empty; the controller is
/// unregistered once nothing else holds it. `Ok(false)`: there was no such pin.
pub fn unpin(name: &str) -> Result<bool, String> {
    if !valid_name(name) {
        return Err(LoadError::BadName(name.into()).to_string());
    }
    let removed = match std::fs::remove_file(pin_path(name)) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(format!("removing {}: {e}", pin_path(name).display())),
    };
    // The last pin takes headroom's folders with it (`remove_dir` leaves a folder that still
    // holds another pin), so nothing of headroom's stays in bpffs.
    let dir = Path::new(PIN_DIR);
    if std::fs::remove_dir(dir).is_ok() {
        if let Some(parent) = dir.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
    Ok(removed)
}

/// Mounts bpffs on `/sys/fs/bpf` unless one is there.
pub fn ensure_bpffs() -> Result<(), String> {
    const BPF_FS_MAGIC: i64 = 0xcafe4a11;
    let dir = c"/sys/fs/bpf";
    // SAFETY: statfs on a NUL-terminated path into a zeroed struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(dir.as_ptr(), &mut st) } == 0 && st.f_type as i64 == BPF_FS_MAGIC {
        return Ok(());
    }
    // SAFETY: plain mount(2) with static NUL-terminated strings.
    let r = unsafe { libc::mount(c"bpf".as_ptr(), dir.as_ptr(), c"bpf".as_ptr(), 0, std::ptr::null()) };
    if r != 0 {
        return Err(format!(
            "mounting bpffs on /sys/fs/bpf failed ({}); mount it with `mount -t bpf bpf /sys/fs/bpf`",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// libbpf's messages during one load (the verifier's log arrives here on a rejection).
static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// libbpf's print callback is process-global: one load at a time.
static LOAD_LOCK: Mutex<()> = Mutex::new(());

fn collect_log(level: PrintLevel, msg: String) {
    if matches!(level, PrintLevel::Warn | PrintLevel::Info) {
        LOG.lock().unwrap_or_else(|e| e.into_inner()).push(msg);
    }
}

/// Rewrites the `name` field of a `struct tcp_congestion_ops` initial value.
fn rewrite_name(data: &mut [u8], old: &str, new: &str) -> Result<(), String> {
    const FIELD: usize = MAX_NAME_LEN + 1;
    let old = old.as_bytes();
    let hits: Vec<usize> = (0..data.len().saturating_sub(FIELD - 1))
        .filter(|&p| {
            data[p..p + old.len()] == *old
                && data[p + old.len()..p + FIELD].iter().all(|&b| b == 0)
                && (p == 0 || data[p - 1] == 0)
        })
        .collect();
    let [p] = hits[..] else {
        return Err(format!("found the name field {} times in the struct_ops data", hits.len()));
    };
    data[p..p + FIELD].fill(0);
    data[p..p + new.len()].copy_from_slice(new.as_bytes());
    Ok(())
}

/// Registers `c` with the kernel.
pub fn load(c: Controller, opts: &LoadOptions) -> Result<Registered, LoadError> {
    load_object(c, c.object(), c.name(), opts)
}

/// Registers the `tcp_congestion_ops` named `object_name` of the compiled struct_ops `object`
/// as [`load`] does with headroom's own (`c` labels the result and the errors). Public for the
/// tests of the loader's error paths: a deliberately invalid object must come back as
/// [`LoadError::Verifier`] with the verifier's log.
#[doc(hidden)]
pub fn load_object(
    c: Controller,
    object: &[u8],
    object_name: &str,
    opts: &LoadOptions,
) -> Result<Registered, LoadError> {
    let name = opts.name.clone().unwrap_or_else(|| c.name().to_owned());
    if !valid_name(&name) {
        return Err(LoadError::BadName(name));
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(LoadError::NotRoot);
    }
    if !Path::new(BTF_PATH).exists() {
        return Err(LoadError::NoBtf);
    }
    if available().map_err(LoadError::Other)?.contains(&name) {
        return Err(LoadError::AlreadyRegistered(name));
    }
    let _guard = LOAD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    LOG.lock().unwrap_or_else(|e| e.into_inner()).clear();
    let previous = libbpf_rs::set_print(Some((PrintLevel::Info, collect_log)));
    let result = open_load_attach(c, object, object_name, &name, opts);
    libbpf_rs::set_print(previous);
    let log = std::mem::take(&mut *LOG.lock().unwrap_or_else(|e| e.into_inner())).concat();
    result.map_err(|(stage, e)| classify(c, &name, stage, e, log))
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Stage {
    Open,
    Load,
    Attach,
}

fn open_load_attach(
    c: Controller,
    object: &[u8],
    object_name: &str,
    name: &str,
    opts: &LoadOptions,
) -> Result<Registered, (Stage, String)> {
    let err = |s: Stage| move |e: libbpf_rs::Error| (s, format!("{e:#}"));
    let mut open = ObjectBuilder::default().open_memory(object).map_err(err(Stage::Open))?;
    let target_us = ledbat_target_us(c, opts).map_err(|e| (Stage::Open, e))?;
    for mut m in open.maps_mut() {
        if m.map_type() == MapType::StructOps {
            let data = m.initial_value_mut().ok_or((Stage::Open, "struct_ops map without data".to_owned()))?;
            rewrite_name(data, object_name, name).map_err(|e| (Stage::Open, e))?;
        } else if m.name().to_string_lossy().ends_with(".rodata") {
            if let Some(us) = target_us {
                // ledbat.bpf.c's only read-only global: `const volatile __u32 ledbat_target_us`.
                let data = m.initial_value_mut().ok_or((Stage::Open, "ledbat .rodata without data".to_owned()))?;
                if data.len() != 4 {
                    return Err((Stage::Open, format!("ledbat .rodata is {} bytes, expected 4", data.len())));
                }
                data.copy_from_slice(&us.to_ne_bytes());
            }
        }
    }
    let mut obj = open.load().map_err(err(Stage::Load))?;
    let mut link = None;
    for mut m in obj.maps_mut() {
        if m.map_type() == MapType::StructOps {
            link = Some(m.attach_struct_ops().map_err(err(Stage::Attach))?);
        }
    }
    if link.is_none() {
        return Err((Stage::Open, "no struct_ops map in the object".into()));
    }
    Ok(Registered { controller: c, name: name.to_owned(), link, obj })
}

/// LEDBAT's TARGET in µs (`None` for the other controllers).
fn ledbat_target_us(c: Controller, opts: &LoadOptions) -> Result<Option<u32>, String> {
    match (c, opts.ledbat_target) {
        (Controller::Ledbat, t) => {
            let t = t.unwrap_or(Duration::from_millis(100));
            if t < Duration::from_millis(1) || t > Duration::from_secs(10) {
                return Err(format!("LEDBAT TARGET must be between 1 ms and 10 s, got {t:?}"));
            }
            Ok(Some(t.as_micros() as u32))
        }
        (_, Some(_)) => Err(format!("a TARGET applies only to ledbat, not {c}")),
        (_, None) => Ok(None),
    }
}

fn classify(c: Controller, name: &str, stage: Stage, e: String, log: String) -> LoadError {
    let lower = e.to_lowercase();
    // First: the verifier refuses an invalid access with EACCES ("Permission denied"), which
    // is not a missing privilege (`load` has checked for root already).
    if stage == Stage::Load && (log.contains("PROG LOAD LOG") || log.contains("verifier")) {
        return LoadError::Verifier { controller: c, log };
    }
    if lower.contains("permission") || lower.contains("operation not permitted") {
        return LoadError::NotRoot;
    }
    if stage == Stage::Attach && (lower.contains("file exists") || lower.contains("already exists")) {
        return LoadError::AlreadyRegistered(name.to_owned());
    }
    LoadError::Other(format!("loading {c} as {name:?}: {e}\n{log}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_unique_names_fit() {
        assert!(valid_name("becc"));
        assert!(!valid_name(""));
        assert!(!valid_name("sixteen_chars_xx"));
        assert!(!valid_name("a b"));
        let a = unique_name(Controller::Becc);
        let b = unique_name(Controller::Becc);
        assert_ne!(a, b);
        for c in Controller::ALL {
            let n = unique_name(c);
            assert!(valid_name(&n), "{n}");
        }
    }

    #[test]
    fn rewrite_name_replaces_exactly_the_name_field() {
        let mut data = vec![0u8; 64];
        data[8] = 7;
        data[16..20].copy_from_slice(b"becc");
        data[40] = 1;
        rewrite_name(&mut data, "becc", "h1f2_becc").unwrap();
        assert_eq!(&data[16..25], b"h1f2_becc");
        assert!(data[25..32].iter().all(|&b| b == 0));
        assert_eq!((data[8], data[40]), (7, 1), "the rest is untouched");
        let mut none = vec![0u8; 64];
        assert!(rewrite_name(&mut none, "becc", "x").is_err());
    }

    #[test]
    fn the_objects_are_bpf_elf() {
        for c in Controller::ALL {
            let o = c.object();
            assert_eq!(&o[..4], b"\x7fELF", "{c}");
            // e_machine EM_BPF = 247
            assert_eq!(u16::from_le_bytes([o[18], o[19]]), 247, "{c}");
        }
    }
}
