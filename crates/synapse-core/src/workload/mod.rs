//! Workloads: rule-set generators, header traces and flow-level traffic.
//!
//! - [`seed`]: ClassBench parameter files (the statistics of real sets).
//! - [`rulegen`]: ClassBench-style filter sets for the acl, fw and ipc types.
//! - [`stats`]: the distributions of a rule set, to compare with a seed.
//! - [`tracegen`]: headers that fall inside rules, with Pareto locality.
//! - [`flowsize`], [`caida`]: flow-size distributions (built-in CAIDA CDFs).
//! - [`profile`]: time-varying flow arrival rates (Fig. 8 shapes).
//! - [`attack`]: attack traffic (cache flooding) mixed into the flows.
//! - [`forge`]: attack frames for P4 programs, templates with fields patched in.
//! - [`traffic`]: packet arrivals of flows, Poisson at a rate proportional to size.

pub mod rulegen;
pub mod seed;
pub mod stats;
pub mod tracegen;

pub mod attack;
pub mod caida;
pub mod flowsize;
pub mod forge;
pub mod profile;
pub mod traffic;

pub use flowsize::FlowSizeDist;
pub use profile::Profile;
pub use traffic::{flows_for_rate, Arrival, Traffic, TrafficConfig};
