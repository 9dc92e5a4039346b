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
//! - [`learn`]: tables written from the data plane (PNA add-on-miss, aging).
//! - [`selector`]: an action selector's choice of a group member.
//! - [`visits`]: what the executor reports of a batch of packets, the
//!   interface between the executor and whatever consumes its output (route
//!   interning and the routed simulator, per-table counters, tests).
//! - [`run`]: [`RunPacket`], the executor's face, and what it reports
//!   besides the visits ([`Outcome`], [`Outputs`]).
//! - [`ir`]: the description as serde reads it.
//! - [`exec`]: linking a description into a [`Program`], and the
//!   [`Executor`] that runs packets through it; built from
//!   [`phv`] (the packet header vector and bit I/O), [`expr`] (expressions
//!   as stack code, BMv2's value semantics), [`action`] (primitives as ops),
//!   [`externs`] (the one dispatch point for externs and calculations),
//!   [`parser`], [`table`] (keys and lookup structures), [`control`]
//!   (pipelines, conditionals, next-table choices) and [`deparser`].
//! - [`capture`]: pcap and pcapng files (gzip'd or not) read in chunks.
//! - [`intern`]: routes (a packet's visits of simulated tables with its
//!   key at each) and keys, deduplicated.
//! - [`stream`]: a capture through the executor into the routed
//!   simulator in bounded memory, with per-table counters.
//! - [`pcapout`]: output packets, one pcap per egress port.
//! - [`precomputed`]: an executor replaying visits computed elsewhere
//!   (the Python interpreter's).
//! - [`codegen`]: which programs per-program generated code can take.
//! - [`gencrate`]: a program's generated code built as a library crate
//!   with cargo, cached; [`cdylib`]: that library loaded, its C interface
//!   (batches across the boundary), and the check against the interpreter.
//! - [`native`]: code specialised to one program (the router), as a
//!   generator would emit it: the ceiling of per-program code generation.
//! - [`standin`]: a tiny fixed program, for tests and benchmarks of the
//!   consumers.

pub mod action;
pub mod capture;
pub mod cdylib;
pub mod codegen;
pub mod control;
pub mod deparser;
pub mod exec;
pub mod expr;
pub mod externs;
pub mod flow;
pub mod gencrate;
pub mod hash;
pub mod intern;
pub mod ir;
pub mod learn;
pub mod meter;
pub mod native;
pub mod parser;
pub mod pcapout;
pub mod phv;
pub mod precomputed;
pub mod run;
pub mod selector;
pub mod standin;
pub mod stream;
pub mod table;
pub mod visits;

pub use capture::{Capture, CaptureError, Frames, OnTruncated};
pub use exec::{Executor, Program};
pub use intern::Interner;
pub use pcapout::PcapOut;
pub use precomputed::Precomputed;
pub use run::{Outcome, Outputs, RunPacket};
pub use stream::{Clock, Counters, Port, RouteSink, StageTimes, Stream};
pub use visits::Visits;

