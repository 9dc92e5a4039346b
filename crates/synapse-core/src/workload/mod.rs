//! Workloads: rule-set generators, header traces and flow-level traffic.

pub mod caida;
pub mod flowsize;
pub mod profile;
pub mod traffic;

pub use flowsize::FlowSizeDist;
pub use profile::Profile;
pub use traffic::{flows_for_rate, Arrival, Traffic, TrafficConfig};
