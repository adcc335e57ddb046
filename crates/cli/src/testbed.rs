//! `headroom testbed ...` (being written).
use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum TestbedCmd {
    /// Remove what this or a killed run left behind.
    Down {
        #[arg(long)]
        stale: bool,
    },
}

pub fn run(_cmd: TestbedCmd) -> anyhow::Result<()> {
    anyhow::bail!("headroom testbed is not built yet")
}
