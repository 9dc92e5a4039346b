//! Workloads: rule-set generators, header traces and flow-level traffic.
//!
//! - [`seed`]: ClassBench parameter files (the statistics of real sets).
//! - [`rulegen`]: ClassBench-style filter sets for the acl, fw and ipc types.
//! - [`stats`]: the distributions of a rule set, to compare with a seed.
//! - [`tracegen`]: headers that fall inside rules, with Pareto locality.

pub mod rulegen;
pub mod seed;
pub mod stats;
pub mod tracegen;
