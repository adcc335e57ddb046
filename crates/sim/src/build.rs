//! Factories: the simulator objects a scenario's entries name — congestion controllers and
//! probers. `scenario` translates each entry into `headroom-core`'s configurations and validates
//! it; this module turns them into the endpoints [`crate::world::World`] runs. (Dependencies go one
//! way: `scenario` → core; `build` → `scenario`, `probe`; `world` → `build`.)

use headroom_core::cc::becc::Becc;
use headroom_core::cc::imtcp_bg::{ImtcpBackground, ImtcpBg};
use headroom_core::cc::imtcp_fullspeed::ImtcpFullSpeed;
use headroom_core::cc::ledbat::Ledbat;
use headroom_core::cc::lp::Lp;
use headroom_core::cc::nice::Nice;
use headroom_core::cc::reno::{Recovery, Reno, RenoConfig};
use headroom_core::cc::vegas::Vegas;
use headroom_core::cc::{CongestionControl, Cubic, HighSpeed, WestwoodPlus};
use headroom_core::units::{Dur, Time};

use crate::probe::{ImtcpEchoProber, Prober, TrainProber};
use crate::scenario::{CcKind, ProbeDesign, ProbeSpec};

/// Builds a controller.
pub fn make_cc(kind: CcKind, cfg: RenoConfig) -> Box<dyn CongestionControl> {
    match kind {
        CcKind::Reno => Box::new(Reno::reno(cfg)),
        CcKind::NewReno => Box::new(Reno::newreno(cfg)),
        CcKind::Becc => Box::new(Becc::with_paper_constants(Recovery::Reno, cfg)),
        CcKind::BeccNewReno => Box::new(Becc::with_paper_constants(Recovery::NewReno, cfg)),
        CcKind::Cubic { hystart: false } => Box::new(Cubic::cubic(cfg)),
        CcKind::Cubic { hystart: true } => Box::new(Cubic::cubic_with_hystart(cfg)),
        CcKind::HighSpeed => Box::new(HighSpeed::highspeed(cfg)),
        CcKind::WestwoodPlus => Box::new(WestwoodPlus::westwood_plus(cfg)),
        CcKind::ImtcpFullSpeed { h } => {
            Box::new(ImtcpFullSpeed::full_speed(h, cfg).expect("validated by the scenario"))
        }
        CcKind::ImtcpBg(c) => Box::new(ImtcpBg::new(c, cfg)),
        CcKind::ImtcpBackground(c) => Box::new(ImtcpBackground::new(c, cfg)),
        CcKind::Vegas(c) => Box::new(Vegas::new(c, cfg).expect("validated by the scenario")),
        CcKind::Nice(c) => Box::new(Nice::new(c, cfg).expect("validated by the scenario")),
        CcKind::Lp(c) => Box::new(Lp::new(c, cfg).expect("validated by the scenario")),
        CcKind::Ledbat(c) => Box::new(Ledbat::new(c, cfg).expect("validated by the scenario")),
    }
}

/// Builds the prober of a `[[probe]]` entry measuring from `start` to `stop`.
pub fn make_prober(p: &ProbeSpec, start: Dur, stat: u32, stop: Dur) -> Result<Box<dyn Prober>, String> {
    let (start, stop) = (Time(start.0), Time(stop.0));
    if stop <= start {
        return Err("stop must come after start".into());
    }
    Ok(match p.design()? {
        ProbeDesign::Train { design, estimator, interval } => {
            Box::new(TrainProber::new(design, estimator, start, interval, Dur::from_secs(1), stop, stat))
        }
        // The world first polls the prober at the flow's start time.
        ProbeDesign::Echo(prober) => Box::new(ImtcpEchoProber::new(*prober, stat, stop)),
    })
}
