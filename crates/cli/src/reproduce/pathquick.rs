//! The pathquick experiments (being written).

use super::Experiment;

pub const EXPERIMENTS: &[Experiment] = &[];
