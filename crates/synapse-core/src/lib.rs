//! # synapse-core: the data plane of Synapse
//!
//! Synapse makes the match tables of a programmable data plane elastic
//! (Lahmer et al., "Synapse: Virtualizing Match Tables in Programmable
//! Hardware"). Each logical table is a **VMT** (virtual matching table) whose
//! **VMU** hashes a key to one of a set of **PMU**s (physical matching units:
//! small fully associative **CAM** caches). A miss goes to the **ELU**
//! (external lookup unit), which walks the table's whole rule set in off-chip
//! **HBM** and returns answers in order through its **ORB** (outstanding
//! request buffer). A control plane (the Python package `synapse_vmt`) moves
//! PMUs between tables as traffic shifts.
//!
//! ```text
//!   PHV ─► VMU: hash ─► lookup table ─► interconnect ─► PMU (CAM, LRU)
//!           ▲                                            │ hit │ miss
//!           │  response consumer (PHV FIFO) ◄────────────┘     ▼
//!           └──────────────────────────────── fill ◄── ELU: ORB, trie ─► HBM
//! ```
//!
//! Layers, bottom up:
//! - [`rules`]: keys, P4 match kinds, rules, the ClassBench formats.
//! - [`classify`]: classifiers — the linear oracle, the ELU's structures.
//! - [`workload`]: rule, trace and traffic generators.
//! - [`hash`]: lookup3, the VMU's hash.
//! - [`hw`]: the hardware components (cam, pmu, vmu, elu, hbm, interconnect).
//! - [`pipeline`]: the CFG of tables a PHV crosses.
//! - [`program`]: a user's P4 program, compiled by the control plane,
//!   executed per packet.
//! - [`sim`]: the engine, statistics and the [`sim::Simulator`].

pub mod classify;
pub mod hash;
pub mod hw;
pub mod pipeline;
pub mod program;
pub mod rules;
pub mod sim;
pub mod workload;

#[cfg(test)]
pub(crate) mod testdata;
