//! The imtcp experiments (being written).

use super::Experiment;

pub const EXPERIMENTS: &[Experiment] = &[];
