//! The `cc` key of `[[tcp]]` and `[[web]]`: which congestion controller, with its parameters.
//!
//! ```toml
//! cc = "ledbat"                                  # a name: the controller with its defaults
//! cc = { name = "ledbat", target = "25ms" }      # a table: the name plus parameters
//! cc = { name = "nice", t = 0.2, f = 0.5 }
//! ```
//!
//! Every controller's keys are listed on its `*Keys` struct below; an unknown key, a key of
//! another controller or a value out of range is an error naming the key (the TOML reader adds
//! the line). Absent keys take the defaults of the controller's paper/RFC, which live as named
//! constants in `headroom_core::cc::<controller>`.
//!
//! Adding a controller with parameters: a variant of [`CcKind`] holding its core config, a
//! `*Keys` struct (`deny_unknown_fields`, every field optional) with `apply`, one arm in
//! [`CcKind::from_table`], [`CcKind::NAMES`], [`CcKind::name`], [`CcKind::with_defaults`] and
//! `crate::build::make_cc`.

use headroom_core::cc::imtcp_bg::{BackgroundConfig, BackgroundRtt, ImtcpBgConfig, Reduction};
use headroom_core::cc::ledbat::LedbatConfig;
use headroom_core::cc::lp::{LpConfig, LpRule};
use headroom_core::cc::nice::NiceConfig;
use headroom_core::cc::vegas::VegasConfig;
use headroom_core::units::Dur;
use serde::{Deserialize, Deserializer};

use crate::serde_units::de_opt_dur;

/// A congestion controller a scenario names, with its parameters.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum CcKind {
    /// Reno (RFC 5681): a partial ACK ends fast recovery.
    Reno,
    /// NewReno (RFC 6582), the default.
    #[default]
    NewReno,
    /// BECC's bandwidth window on Reno (Kugimoto & Amagai 1997).
    Becc,
    /// BECC on NewReno.
    BeccNewReno,
    /// TCP Vegas (Brakmo & Peterson 1995); keys `alpha`, `beta`, `gamma` (segments).
    Vegas(VegasConfig),
    /// TCP Nice (Venkataramani et al. 2002) on Vegas; keys `t`, `f`, `min_window_divisor` and
    /// Vegas's `alpha`, `beta`, `gamma`.
    Nice(NiceConfig),
    /// TCP-LP (Kuzmanovic & Knightly 2003, Linux `tcp_lp.c`); keys `threshold`,
    /// `inference_rtts`, `rule = "paper" | "linux"` (core's `LpRule`).
    Lp(LpConfig),
    /// LEDBAT (RFC 6817); keys `target`, `gain`, `base_history`, `current_filter`,
    /// `allowed_increase`, `min_cwnd`.
    Ledbat(LedbatConfig),
    /// ImTCP-bg (seed 000 §3) on Reno over ImTCP's buffer (`[[tcp]]` only); keys `rule`
    /// ("paper" | "headroom"), `delta`, `gamma`, `reduction` ("once-per-rtt" | "every-ack"),
    /// `reduction_sets_ssthresh`, `fast_regrowth`.
    ImtcpBg(ImtcpBgConfig),
    /// ImTCP's background mode (ImTCP §5.1) on Reno over ImTCP's buffer (`[[tcp]]` only); keys
    /// `g`, `gamma`, `rtt` (`"smoothed"`, the paper's reading, or `"min"`; N is the buffer's
    /// `imtcp.stream_len`).
    ImtcpBackground(BackgroundConfig),
    /// CUBIC (RFC 9438, Linux defaults); key `hystart` (Linux's HyStart, default off).
    Cubic { hystart: bool },
    /// HighSpeed TCP (RFC 3649).
    HighSpeed,
    /// TCP Westwood+ (BWE × RTT_min after a loss).
    WestwoodPlus,
    /// ImTCP's full-speed mode (ImTCP §5.2) over ImTCP's buffer (`[[tcp]]` only); key `h`.
    ImtcpFullSpeed { h: f64 },
}

impl CcKind {
    /// Every name, in the order error messages list them.
    pub const NAMES: &'static [&'static str] = &[
        "reno",
        "newreno",
        "becc",
        "becc-newreno",
        "vegas",
        "nice",
        "lp",
        "ledbat",
        "imtcp-bg",
        "imtcp-background",
        "cubic",
        "highspeed",
        "westwood+",
        "imtcp-fullspeed",
    ];

    /// Whether the controller's recovery fits RFC 6675's SACK recovery: it stays in recovery
    /// until the recovery point is acknowledged (NewReno's rule). Reno, which leaves recovery at
    /// the first partial ACK and then grows while the scoreboard is still repairing holes, does
    /// not (no real stack pairs the two), so `reno` and `becc` run without SACK.
    pub fn fits_sack(&self) -> bool {
        !matches!(self, CcKind::Reno | CcKind::Becc)
    }

    /// Whether a flow with this controller runs with SACK when the scenario does not say.
    /// HighSpeed TCP does not (yet): on a 50 Mbit/s, 40 ms path with a 200-packet buffer its
    /// slow-start overshoot loses the fast retransmission itself, which RFC 6675 repairs only
    /// by a timeout (there is no RACK or lost-retransmission detection here), and it timed out
    /// 26 times in 20 s (27.6 Mb/s) against twice without SACK (45.0 Mb/s); `sack = true`
    /// still selects it. The controllers on ImTCP's buffer (imtcp-bg, imtcp-background) keep
    /// the plain recovery they were measured with (issue 12).
    pub fn sack_by_default(&self) -> bool {
        self.fits_sack() && !matches!(self, CcKind::HighSpeed) && !self.needs_inline_measurement()
    }

    /// Whether the controller reads ImTCP's measurement (the sender then gets ImTCP's buffer).
    pub fn needs_inline_measurement(&self) -> bool {
        matches!(self, CcKind::ImtcpBg(_) | CcKind::ImtcpBackground(_) | CcKind::ImtcpFullSpeed { .. })
    }

    /// The name scenario files and reports use.
    pub fn name(&self) -> &'static str {
        match self {
            CcKind::Reno => "reno",
            CcKind::NewReno => "newreno",
            CcKind::Becc => "becc",
            CcKind::BeccNewReno => "becc-newreno",
            CcKind::Vegas(_) => "vegas",
            CcKind::Nice(_) => "nice",
            CcKind::Lp(_) => "lp",
            CcKind::Ledbat(_) => "ledbat",
            CcKind::ImtcpBg(_) => "imtcp-bg",
            CcKind::ImtcpBackground(_) => "imtcp-background",
            CcKind::Cubic { .. } => "cubic",
            CcKind::HighSpeed => "highspeed",
            CcKind::WestwoodPlus => "westwood+",
            CcKind::ImtcpFullSpeed { .. } => "imtcp-fullspeed",
        }
    }

    /// The controller of this name with its paper's/RFC's parameters.
    pub fn with_defaults(name: &str) -> Result<CcKind, String> {
        Ok(match name {
            "reno" => CcKind::Reno,
            "newreno" => CcKind::NewReno,
            "becc" => CcKind::Becc,
            "becc-newreno" => CcKind::BeccNewReno,
            "vegas" => CcKind::Vegas(VegasConfig::default()),
            "nice" => CcKind::Nice(NiceConfig::default()),
            "lp" => CcKind::Lp(LpConfig::default()),
            "ledbat" => CcKind::Ledbat(LedbatConfig::default()),
            "imtcp-bg" => CcKind::ImtcpBg(ImtcpBgConfig::default()),
            "imtcp-background" => CcKind::ImtcpBackground(BackgroundConfig::default()),
            "cubic" => CcKind::Cubic { hystart: false },
            "highspeed" => CcKind::HighSpeed,
            "westwood+" => CcKind::WestwoodPlus,
            "imtcp-fullspeed" => CcKind::ImtcpFullSpeed { h: headroom_core::cc::imtcp_fullspeed::DEFAULT_H },
            _ => return Err(format!("unknown congestion control `{name}` (known: {})", CcKind::NAMES.join(", "))),
        })
    }

    /// `cc = { name = "...", key = value, ... }`: the name with parameters. `rest` is the table
    /// without `name`.
    pub fn from_table(name: &str, rest: toml::Table) -> Result<CcKind, String> {
        let kind = CcKind::with_defaults(name)?;
        let keys = |e: toml::de::Error| format!("cc `{name}`: {}", e.message());
        let rest = toml::Value::Table(rest);
        let kind = match kind {
            CcKind::Vegas(mut c) => {
                rest.try_into::<VegasKeys>().map_err(keys)?.apply(&mut c);
                CcKind::Vegas(c)
            }
            CcKind::Nice(mut c) => {
                rest.try_into::<NiceKeys>().map_err(keys)?.apply(&mut c);
                CcKind::Nice(c)
            }
            CcKind::Lp(mut c) => {
                rest.try_into::<LpKeys>().map_err(keys)?.apply(&mut c);
                CcKind::Lp(c)
            }
            CcKind::Ledbat(mut c) => {
                rest.try_into::<LedbatKeys>().map_err(keys)?.apply(&mut c);
                CcKind::Ledbat(c)
            }
            CcKind::ImtcpBg(mut c) => {
                rest.try_into::<ImtcpBgKeys>().map_err(keys)?.apply(&mut c);
                CcKind::ImtcpBg(c)
            }
            CcKind::ImtcpBackground(mut c) => {
                rest.try_into::<BackgroundKeys>().map_err(keys)?.apply(&mut c);
                CcKind::ImtcpBackground(c)
            }
            CcKind::ImtcpFullSpeed { h } => {
                CcKind::ImtcpFullSpeed { h: rest.try_into::<FullSpeedKeys>().map_err(keys)?.h.unwrap_or(h) }
            }
            CcKind::Cubic { hystart } => {
                CcKind::Cubic { hystart: rest.try_into::<CubicKeys>().map_err(keys)?.hystart.unwrap_or(hystart) }
            }
            CcKind::Reno
            | CcKind::NewReno
            | CcKind::Becc
            | CcKind::BeccNewReno
            | CcKind::HighSpeed
            | CcKind::WestwoodPlus => {
                if let toml::Value::Table(t) = &rest {
                    if let Some(k) = t.keys().next() {
                        return Err(format!("cc `{name}`: unknown key `{k}` (`{name}` takes no parameters here)"));
                    }
                }
                kind
            }
        };
        kind.validate().map_err(|m| format!("cc `{name}`: {m}"))?;
        Ok(kind)
    }

    /// The parameters' ranges.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            CcKind::Reno
            | CcKind::NewReno
            | CcKind::Becc
            | CcKind::BeccNewReno
            | CcKind::Cubic { .. }
            | CcKind::HighSpeed
            | CcKind::WestwoodPlus => Ok(()),
            CcKind::Vegas(c) => c.validate(),
            CcKind::Nice(c) => c.validate(),
            CcKind::Lp(c) => c.validate(),
            CcKind::Ledbat(c) => c.validate(),
            CcKind::ImtcpBg(c) => c.validate(),
            CcKind::ImtcpBackground(c) => c.validate(),
            CcKind::ImtcpFullSpeed { h } => headroom_core::cc::imtcp_fullspeed::FullSpeedRule::new(*h)
                .map(|_| ())
                .map_err(|e| format!("key `h`: {e}")),
        }
    }
}

impl std::fmt::Display for CcKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for CcKind {
    type Err = String;
    fn from_str(s: &str) -> Result<CcKind, String> {
        CcKind::with_defaults(s)
    }
}

impl<'de> Deserialize<'de> for CcKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<CcKind, D::Error> {
        use serde::de::Error;
        match toml::Value::deserialize(d)? {
            toml::Value::String(s) => s.parse().map_err(D::Error::custom),
            toml::Value::Table(mut t) => {
                let name = match t.remove("name") {
                    Some(toml::Value::String(s)) => s,
                    Some(other) => {
                        return Err(D::Error::custom(format!("cc: `name` must be a string, got {}", other.type_str())))
                    }
                    None => return Err(D::Error::custom("cc: a table needs `name` (e.g. cc = { name = \"ledbat\" })")),
                };
                CcKind::from_table(&name, t).map_err(D::Error::custom)
            }
            other => Err(D::Error::custom(format!(
                "cc: expected a name (\"ledbat\") or a table ({{ name = \"ledbat\", target = \"25ms\" }}), got {}",
                other.type_str()
            ))),
        }
    }
}

/// Vegas's keys.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct VegasKeys {
    alpha: Option<u32>,
    beta: Option<u32>,
    gamma: Option<u32>,
}

impl VegasKeys {
    fn apply(self, c: &mut VegasConfig) {
        if let Some(a) = self.alpha {
            c.alpha = a;
        }
        if let Some(b) = self.beta {
            c.beta = b;
        }
        if let Some(g) = self.gamma {
            c.gamma = g;
        }
    }
}

/// Nice's keys (Vegas's too).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NiceKeys {
    alpha: Option<u32>,
    beta: Option<u32>,
    gamma: Option<u32>,
    t: Option<f64>,
    f: Option<f64>,
    min_window_divisor: Option<u32>,
}

impl NiceKeys {
    fn apply(self, c: &mut NiceConfig) {
        VegasKeys { alpha: self.alpha, beta: self.beta, gamma: self.gamma }.apply(&mut c.vegas);
        if let Some(t) = self.t {
            c.t = t;
        }
        if let Some(f) = self.f {
            c.f = f;
        }
        if let Some(d) = self.min_window_divisor {
            c.min_window_divisor = d;
        }
    }
}

/// TCP-LP's keys.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LpKeys {
    threshold: Option<f64>,
    inference_rtts: Option<u32>,
    rule: Option<LpRuleKey>,
}

/// `rule = "paper" | "linux"`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum LpRuleKey {
    Paper,
    Linux,
}

impl LpKeys {
    fn apply(self, c: &mut LpConfig) {
        if let Some(t) = self.threshold {
            c.threshold = t;
        }
        if let Some(i) = self.inference_rtts {
            c.inference_rtts = i;
        }
        match self.rule {
            None => {}
            Some(LpRuleKey::Paper) => c.rule = LpRule::Paper,
            Some(LpRuleKey::Linux) => c.rule = LpRule::Linux,
        }
    }
}

/// ImTCP-bg's keys. `rule` picks the preset the other keys then adjust.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ImtcpBgKeys {
    rule: Option<ImtcpBgRuleKey>,
    delta: Option<f64>,
    gamma: Option<f64>,
    reduction: Option<ReductionKey>,
    reduction_sets_ssthresh: Option<bool>,
    fast_regrowth: Option<bool>,
}

/// `rule = "paper" | "headroom"`: seed 000's Eqs. 1-4 as written ([`ImtcpBgConfig::default`]),
/// or the rule `headroom send --background` runs on real sockets ([`ImtcpBgConfig::headroom`]:
/// `RTT_cur` the smallest of the last four samples, one measurement stream added to `maxcwnd`,
/// Eq. 4 setting `ssthresh`). The stream is `DEFAULT_STREAM_LEN` segments here; the flow's
/// `imtcp.stream_len` replaces it when set (`world::build`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum ImtcpBgRuleKey {
    Paper,
    Headroom,
}

/// `reduction = "once-per-rtt" | "every-ack"` (core's [`Reduction`]).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum ReductionKey {
    OncePerRtt,
    EveryAck,
}

/// Segments of one ImTCP stream when the flow's `imtcp` key does not set `stream_len` (N, ImTCP
/// §3.3: 35).
pub const DEFAULT_STREAM_LEN: usize = 35;

impl ImtcpBgKeys {
    fn apply(self, c: &mut ImtcpBgConfig) {
        match self.rule {
            None => {}
            Some(ImtcpBgRuleKey::Paper) => *c = ImtcpBgConfig::default(),
            Some(ImtcpBgRuleKey::Headroom) => *c = ImtcpBgConfig::headroom(DEFAULT_STREAM_LEN),
        }
        if let Some(d) = self.delta {
            c.delta = d;
        }
        if let Some(g) = self.gamma {
            c.gamma = g;
        }
        match self.reduction {
            None => {}
            Some(ReductionKey::OncePerRtt) => c.reduction = Reduction::OncePerRtt,
            Some(ReductionKey::EveryAck) => c.reduction = Reduction::EveryAck,
        }
        if let Some(b) = self.reduction_sets_ssthresh {
            c.reduction_sets_ssthresh = b;
        }
        if let Some(b) = self.fast_regrowth {
            c.fast_regrowth = b;
        }
    }
}

/// ImTCP background mode's keys.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BackgroundKeys {
    g: Option<f64>,
    gamma: Option<f64>,
    /// `"smoothed"` (the paper's reading, default) or `"min"` (headroom's option).
    rtt: Option<BackgroundRttKey>,
}

/// The values of the background mode's `rtt` key.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum BackgroundRttKey {
    Smoothed,
    Min,
}

impl BackgroundKeys {
    fn apply(self, c: &mut BackgroundConfig) {
        match self.rtt {
            None => {}
            Some(BackgroundRttKey::Smoothed) => c.rtt = BackgroundRtt::Smoothed,
            Some(BackgroundRttKey::Min) => c.rtt = BackgroundRtt::Min,
        }
        if let Some(g) = self.g {
            c.g = g;
        }
        if let Some(x) = self.gamma {
            c.gamma = x;
        }
    }
}

/// CUBIC's keys.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CubicKeys {
    hystart: Option<bool>,
}

/// The full-speed mode's keys.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FullSpeedKeys {
    h: Option<f64>,
}

/// LEDBAT's keys.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LedbatKeys {
    #[serde(default, deserialize_with = "de_opt_dur")]
    target: Option<Dur>,
    gain: Option<f64>,
    base_history: Option<usize>,
    current_filter: Option<usize>,
    allowed_increase: Option<u32>,
    min_cwnd: Option<u32>,
}

impl LedbatKeys {
    fn apply(self, c: &mut LedbatConfig) {
        if let Some(t) = self.target {
            c.target = t;
        }
        if let Some(g) = self.gain {
            c.gain = g;
        }
        if let Some(b) = self.base_history {
            c.base_history = b;
        }
        if let Some(n) = self.current_filter {
            c.current_filter = n;
        }
        if let Some(a) = self.allowed_increase {
            c.allowed_increase = a;
        }
        if let Some(m) = self.min_cwnd {
            c.min_cwnd = m;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Entry {
        cc: CcKind,
    }
    #[derive(Debug, Deserialize)]
    struct File {
        tcp: Vec<Entry>,
    }

    /// A `[[tcp]]` entry's `cc` as the scenario reader sees it.
    fn scenario_with(cc: &str) -> Result<File, String> {
        toml::from_str(&format!("[[tcp]]\nfrom = \"a\"\ncc = {cc}\n")).map_err(|e| e.to_string())
    }

    #[test]
    fn names_round_trip_and_unknown_names_are_listed() {
        for n in CcKind::NAMES {
            assert_eq!(n.parse::<CcKind>().unwrap().name(), *n);
        }
        assert_eq!("becc-newreno".parse::<CcKind>(), Ok(CcKind::BeccNewReno));
        let e = "Reno".parse::<CcKind>().unwrap_err();
        assert!(e.contains("`Reno`") && e.contains("reno, newreno, becc, becc-newreno, vegas"), "{e}");
    }

    #[test]
    fn a_name_gives_the_defaults_and_a_table_sets_parameters() {
        let sc = scenario_with("\"ledbat\"").unwrap();
        assert_eq!(sc.tcp[0].cc, CcKind::Ledbat(LedbatConfig::default()));
        let sc = scenario_with("{ name = \"ledbat\", target = \"25ms\", gain = 0.5 }").unwrap();
        let want = LedbatConfig { target: Dur::from_millis(25), gain: 0.5, ..LedbatConfig::default() };
        assert_eq!(sc.tcp[0].cc, CcKind::Ledbat(want));
        let sc = scenario_with("{ name = \"nice\", t = 0.2, alpha = 1, beta = 3 }").unwrap();
        let CcKind::Nice(c) = sc.tcp[0].cc else { panic!("{:?}", sc.tcp[0].cc) };
        assert_eq!((c.t, c.f, c.vegas.alpha, c.vegas.beta, c.vegas.gamma), (0.2, 0.5, 1, 3, 1));
        let sc = scenario_with("{ name = \"lp\", inference_rtts = 5 }").unwrap();
        assert_eq!(sc.tcp[0].cc, CcKind::Lp(LpConfig { inference_rtts: 5, ..LpConfig::default() }));
        let sc = scenario_with("{ name = \"lp\", rule = \"linux\" }").unwrap();
        assert_eq!(sc.tcp[0].cc, CcKind::Lp(LpConfig { rule: LpRule::Linux, ..LpConfig::default() }));
        assert_eq!(scenario_with("{ name = \"reno\" }").unwrap().tcp[0].cc, CcKind::Reno);
        // ImTCP-bg's rule preset, then the keys that adjust it, in any order.
        let sc = scenario_with("{ name = \"imtcp-bg\", rule = \"headroom\" }").unwrap();
        assert_eq!(sc.tcp[0].cc, CcKind::ImtcpBg(ImtcpBgConfig::headroom(DEFAULT_STREAM_LEN)));
        let sc = scenario_with("{ name = \"imtcp-bg\", delta = 1.2, rule = \"headroom\" }").unwrap();
        assert_eq!(sc.tcp[0].cc, CcKind::ImtcpBg(ImtcpBgConfig { delta: 1.2, ..ImtcpBgConfig::headroom(35) }));
        let sc = scenario_with("{ name = \"imtcp-bg\", rule = \"paper\", reduction = \"every-ack\" }").unwrap();
        let want = ImtcpBgConfig { reduction: Reduction::EveryAck, ..ImtcpBgConfig::default() };
        assert_eq!(sc.tcp[0].cc, CcKind::ImtcpBg(want));
    }

    #[test]
    fn unknown_keys_bad_values_and_bad_shapes_are_errors_naming_them() {
        for (cc, needle) in [
            ("{ name = \"ledbat\", targte = \"25ms\" }", "targte"),
            ("{ name = \"vegas\", t = 0.1 }", "`t`"),
            ("{ name = \"reno\", gain = 1.0 }", "`gain`"),
            ("{ name = \"ledbat\", target = \"200ms\" }", "target"),
            ("{ name = \"ledbat\", gain = 2.0 }", "gain"),
            ("{ name = \"vegas\", alpha = 5, beta = 4 }", "alpha"),
            ("{ name = \"nice\", f = 0.0 }", "f must be"),
            ("{ name = \"lp\", threshold = 1.5 }", "threshold"),
            ("{ name = \"lp\", rule = \"bsd\" }", "`paper`"),
            ("{ name = \"imtcp-bg\", rule = \"fast\" }", "`headroom`"),
            ("{ name = \"imtcp-bg\", reduction = \"sometimes\" }", "`once-per-rtt`"),
            ("{ target = \"25ms\" }", "needs `name`"),
            ("{ name = 3 }", "`name` must be a string"),
            ("{ name = \"bbr\" }", "unknown congestion control `bbr`"),
            ("3", "expected a name"),
        ] {
            let e = scenario_with(cc).unwrap_err();
            assert!(e.contains(needle), "{cc}: {e}");
            assert!(e.contains("line "), "{cc}: the error gives the line: {e}");
        }
    }
}
