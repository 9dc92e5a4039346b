//! Hash functions of the data plane. The VMU hashes a key with Bob Jenkins'
//! lookup3, as the paper's HLS code does (`xf::database::hashlookup3_core`).

pub mod lookup3;
