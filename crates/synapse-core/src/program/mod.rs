//! The program layer: a user's P4 program, compiled once by the control
//! plane (`synapse_vmt.p4.compile`, from p4c's BMv2 JSON and the entries),
//! executed here per packet.
//!
//! Python reads and validates the program and its entries and hands this
//! layer a compact description: header layouts, the parser as a table of
//! states, tables as key schemas over PHV fields, actions as op lists,
//! conditionals, next-table choices, the deparser, the externs' state. The
//! executor runs it over frames and reports, per packet, the keyed tables
//! it visited with its key and the entry it matched there ([`Visits`]);
//! the simulator then replays those visits as routes to decide *when*
//! (timing, PMUs, misses). BMv2 simple_switch is the semantic reference.
//!
//! - [`flow`]: simple_switch's packet flow around the pipelines (clones,
//!   resubmit, recirculation, multicast, the egress pass, drops).
//! - [`hash`]: BMv2's hash algorithms and the bytes a calculation hashes.
//! - [`meter`]: BMv2's two-rate three-colour meters.
//! - [`selector`]: an action selector's choice of a group member.
//! - [`visits`]: what the executor reports of a batch of packets, the
//!   interface between the executor and whatever consumes its output (route
//!   interning and the routed simulator, per-table counters, tests).

pub mod flow;
pub mod hash;
pub mod meter;
pub mod run;
pub mod selector;
pub mod visits;

pub use visits::Visits;
