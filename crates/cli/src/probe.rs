//! `headroom probe` and `headroom serve` (being written).
use clap::Args;

#[derive(Args, Debug)]
pub struct ProbeArgs {
    /// Server address HOST[:PORT].
    pub target: String,
}

#[derive(Args, Debug)]
pub struct ServeArgs {}

pub fn run_probe(_a: ProbeArgs) -> anyhow::Result<()> {
    anyhow::bail!("headroom probe is not built yet")
}

pub fn run_serve(_a: ServeArgs) -> anyhow::Result<()> {
    anyhow::bail!("headroom serve is not built yet")
}
