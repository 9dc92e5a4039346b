//! Externs: the one place where a primitive the program calls by name
//! (`count`, `execute_meter`, `register_read`, `modify_field_with_hash_based_offset`,
//! `clone_ingress_pkt_to_egress`, ...) and a checksum's calculation
//! algorithm (`csum16`, `crc32`, ...) are given their meaning.
//!
//! [`Extern::compile`] decides, once per call site, what a primitive does;
//! [`Extern::run`] does it per packet; [`calculate`] computes a named
//! algorithm over a bit string (the deparser's checksum updates call it).
//! Today's repertoire follows the interpreter (`synapse_vmt.p4.exprs`):
//!
//! - effects outside the PHV (counters, clones, digests, logs, resubmit,
//!   recirculate, truncate, assertions) run as no-ops, as in the
//!   interpreter;
//! - `execute_meter` marks every packet GREEN (0), as BMv2 does for a
//!   meter without configured rates;
//! - anything else (registers, hashes, random numbers) is **unsupported**:
//!   its first field argument is marked *synthesized* (taint): a table
//!   keying on it, or a conditional reading it, makes the packet inexact
//!   and is counted by name; the field keeps its value;
//! - no calculation algorithm is implemented yet: a checksum update is
//!   skipped and counted by name.
//!
//! Adding an extern is one arm in [`Extern::compile`] (what state it needs,
//! which argument it writes) and one in [`Extern::run`].

use serde_json::Value;

use super::exec::State;
use super::expr::{Code, Expr, Scope};
use super::phv::mask;

/// Primitives whose effects are outside the PHV (not modelled yet): no-ops.
pub const NO_OPS: &[&str] = &[
    "count",
    "count_direct",
    "clone_ingress_pkt_to_egress",
    "clone_egress_pkt_to_egress",
    "clone_ingress_pkt_to_ingress",
    "generate_digest",
    "log_msg",
    "recirculate",
    "resubmit",
    "truncate",
    "assume",
    "assert",
    "no_op",
    "_drop_bridge",
    "modify_field_with_shortest_path",
];

/// An argument of an extern call, resolved against the PHV.
#[derive(Clone, Debug)]
pub enum Arg {
    /// A field: its slot, first cell, reset group and width.
    Field { slot: u32, cell: u32, group: u32, width: u32 },
    Expr(Expr),
    Header(u32),
    /// Any other named object (`counter_array`, `register_array`,
    /// `calculation`, ...): its type and name.
    Name(String, String),
}

/// What one extern call site does.
#[derive(Clone, Debug)]
pub enum Extern {
    NoOp,
    /// Writes 0 (GREEN) into a field.
    MeterGreen { cell: u32, group: u32 },
    /// Not executed: the field argument (if any) is marked synthesized.
    Unsupported { reason: u32, taints: Option<u32> },
}

impl Extern {
    /// Resolves one argument of a call (`["f", slot]`, `["e", expr]`, `["h", header]`, `["n", type, name]`).
    pub fn arg(v: &Value, code: &mut Code, sc: &Scope, what: &str) -> Result<Arg, String> {
        let a = v.as_array().ok_or_else(|| format!("{what}: expected an argument array, found {v}"))?;
        let tag = a.first().and_then(|x| x.as_str()).unwrap_or("");
        let int = |i: usize| a.get(i).and_then(|x| x.as_u64()).ok_or_else(|| format!("{what}: expected an integer in {v}"));
        Ok(match tag {
            "f" => {
                let s = sc.lay.slot(int(1)?, what)?;
                Arg::Field { slot: s as u32, cell: sc.lay.value_cell(s), group: sc.lay.group[s], width: sc.lay.width[s] }
            }
            "e" => Arg::Expr(code.compile(a.get(1).ok_or_else(|| format!("{what}: expected an expression"))?, sc, what)?.0),
            "h" => Arg::Header(int(1)? as u32),
            "n" => Arg::Name(
                a.get(1).and_then(|x| x.as_str()).unwrap_or("").to_string(),
                a.get(2).map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string)).unwrap_or_default(),
            ),
            _ => return Err(format!("{what}: expected an argument [\"f\"|\"e\"|\"h\"|\"n\", ...], found {v}")),
        })
    }

    /// The field a call of `name` with `args` marks synthesized, if it is
    /// not executed (the taint analysis asks before anything is compiled).
    pub fn taints(name: &str, args: &[Value]) -> Option<u32> {
        if NO_OPS.contains(&name) || Self::meter_output(name, args).is_some() {
            return None;
        }
        args.iter().find_map(|a| {
            let a = a.as_array()?;
            (a.first()?.as_str()? == "f").then(|| a.get(1)?.as_u64().map(|s| s as u32)).flatten()
        })
    }

    fn meter_output(name: &str, args: &[Value]) -> Option<u64> {
        if name != "execute_meter" {
            return None;
        }
        let a = args.get(2)?.as_array()?;
        (a.first()?.as_str()? == "f").then(|| a.get(1)?.as_u64()).flatten()
    }

    /// What the call `name(args)` does at this call site.
    pub fn compile(name: &str, args: &[Arg], raw: &[Value], code: &mut Code) -> Extern {
        if NO_OPS.contains(&name) {
            return Extern::NoOp;
        }
        if Self::meter_output(name, raw).is_some() {
            if let Some(Arg::Field { cell, group, .. }) = args.get(2) {
                return Extern::MeterGreen { cell: *cell, group: *group };
            }
        }
        let taints = args.iter().find_map(|a| match a {
            Arg::Field { slot, .. } => Some(*slot),
            _ => None,
        });
        Extern::Unsupported { reason: code.reasons.id(&format!("unsupported extern {name}")), taints }
    }

    /// Runs the call for one packet (`params`: the action data; `frame`:
    /// the packet's bytes, for externs that read them).
    #[inline]
    pub fn run(&self, _code: &Code, st: &mut State, _params: &[u128], _frame: &[u8]) {
        match self {
            Extern::NoOp => {}
            Extern::MeterGreen { cell, group } => {
                st.phv.cells[*cell as usize] = 0;
                st.phv.mark(*group);
            }
            Extern::Unsupported { reason, taints } => {
                st.note(*reason);
                if let Some(s) = taints {
                    st.set_taint(*s, true);
                }
            }
        }
    }
}

/// The calculation `algo` over the `bits` first bits of `input` (a bit
/// string, most significant bit first), truncated to `width` bits; None
/// when the algorithm is not implemented.
pub fn calculate(algo: &str, input: &[u8], bits: usize, width: u32) -> Option<u128> {
    let _ = (input, bits);
    let v: Option<u128> = match algo {
        _ => None,
    };
    v.map(|x| x & mask(width))
}
