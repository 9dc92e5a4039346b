//! The program description as the control plane writes it
//! (`synapse_vmt.p4.compile`, format `synapse-p4-program` version 1): plain
//! serde types, read once; [`super::exec::Program::link`] checks them and
//! turns them into what runs. Expressions and ops stay JSON arrays here
//! (`["+", ["f", 3], ["c", "0x1"]]`): the linker reads them with the place
//! they come from, so a malformed one is an error naming it.
//!
//! Integers that can be wider than 64 bits (constants, values, masks,
//! action data) are hex strings, `"-0x.."` for a negative constant.

use serde::Deserialize;
use serde_json::Value;

/// The description's format name and version this module reads.
pub const FORMAT: &str = "synapse-p4-program";
pub const VERSION: u32 = 1;

#[derive(Deserialize, Debug, Clone)]
pub struct Description {
    pub format: String,
    pub version: u32,
    #[serde(default)]
    pub source: String,
    /// PHV slots: (name, width in bits (0: varbit), header index or -1).
    pub fields: Vec<(String, u32, i64)>,
    pub headers: Vec<HeaderDesc>,
    #[serde(default)]
    pub stacks: Vec<StackDesc>,
    #[serde(default)]
    pub unions: Vec<UnionDesc>,
    pub errors: ErrorsDesc,
    pub std: StdDesc,
    pub parser: ParserDesc,
    pub actions: Vec<ActionDesc>,
    pub nodes: Vec<NodeDesc>,
    pub pipelines: Vec<PipelineDesc>,
    #[serde(default)]
    pub deparser: Vec<u32>,
    #[serde(default)]
    pub checksums: Vec<ChecksumDesc>,
    /// Node index of each keyed table, in the order visits number them.
    pub keyed: Vec<u32>,
    /// Constructs the compiler could not lower (named for the report).
    #[serde(default)]
    pub unsupported: Vec<String>,
    /// What the externs and simple_switch's packet flow need.
    #[serde(default)]
    pub externs: ExternsDesc,
}

/// The program's stateful objects, calculations and switch configuration
/// (`synapse_vmt.p4.compile._externs`). Calculation inputs and field lists
/// are `["f", slot]`, `["c", hex, width]`, `["h", header]`, `["payload"]`.
#[derive(Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct ExternsDesc {
    pub calculations: Vec<CalcDesc>,
    pub registers: Vec<RegisterDesc>,
    pub counters: Vec<CounterDesc>,
    pub meters: Vec<MeterDesc>,
    /// (id, fields)
    pub field_lists: Vec<(u64, Vec<Value>)>,
    /// (id, name, fields)
    pub learn_lists: Vec<(u64, String, Vec<Value>)>,
    pub selectors: Vec<SelectorDesc>,
    /// (session, port or -1, multicast group or -1)
    pub mirroring: Vec<(u32, i64, i64)>,
    /// (group, [(port, rid)])
    pub mc_groups: Vec<(u32, Vec<(u32, u32)>)>,
    pub priority_queues: u64,
    pub drop_port: u64,
    pub seed: u64,
    /// `flow::Meta` names -> PHV slot (-1: none).
    pub meta: std::collections::BTreeMap<String, i64>,
    /// Slots of metadata fields (zeroed for a copy).
    pub metadata: Vec<u32>,
    pub ingress: i64,
    pub egress: i64,
    /// Whether the program reads checksum_error (the parser verifies then).
    pub verify: bool,
}

#[derive(Deserialize, Debug, Clone)]
pub struct CalcDesc {
    pub name: String,
    pub algo: String,
    pub inputs: Vec<Value>,
    /// A custom CRC's (width, poly, init, xor, refin, refout), hex values.
    #[serde(default)]
    pub crc: Option<(u8, String, String, String, bool, bool)>,
}

#[derive(Deserialize, Debug, Clone)]
pub struct RegisterDesc {
    pub name: String,
    pub size: u32,
    pub width: u32,
    /// (index, hex value) written before the first packet.
    #[serde(default)]
    pub init: Vec<(u32, String)>,
}

#[derive(Deserialize, Debug, Clone)]
pub struct CounterDesc {
    pub name: String,
    pub size: u32,
}

#[derive(Deserialize, Debug, Clone)]
pub struct MeterDesc {
    pub name: String,
    pub size: u32,
    pub packets: bool,
    /// (index or -1 for every cell, [(units per microsecond, burst)] smallest rate first)
    #[serde(default)]
    pub rates: Vec<(i64, Vec<(f64, u64)>)>,
}

#[derive(Deserialize, Debug, Clone)]
pub struct SelectorDesc {
    pub name: String,
    pub algo: String,
    pub inputs: Vec<Value>,
}

/// A table's direct meter: its name, the field its colour goes to, packets or bytes.
#[derive(Deserialize, Debug, Clone)]
pub struct DirectMeterDesc {
    pub name: String,
    pub target: u32,
    pub packets: bool,
}

#[derive(Deserialize, Debug, Clone)]
pub struct HeaderDesc {
    pub name: String,
    pub valid: u32,
    pub fields: Vec<u32>,
    pub metadata: bool,
    #[serde(default)]
    pub union: Option<u32>,
    /// Largest size in bits (varbit headers only).
    #[serde(default)]
    pub max_bits: Option<u32>,
}

#[derive(Deserialize, Debug, Clone)]
pub struct StackDesc {
    pub name: String,
    pub headers: Vec<u32>,
    /// Slot holding the index of the next element to extract.
    pub next: u32,
}

#[derive(Deserialize, Debug, Clone)]
pub struct UnionDesc {
    pub name: String,
    pub headers: Vec<u32>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(rename_all = "PascalCase")]
pub struct ErrorsDesc {
    #[serde(rename = "names")]
    pub names: std::collections::BTreeMap<String, String>,
    pub packet_too_short: u32,
    pub no_match: u32,
    pub stack_out_of_bounds: u32,
    pub header_too_short: u32,
    pub parser_timeout: u32,
}

/// Slots of `standard_metadata` the executor reads or sets (absent: None).
#[derive(Deserialize, Debug, Clone, Default)]
pub struct StdDesc {
    pub ingress_port: Option<u32>,
    pub packet_length: Option<u32>,
    pub parser_error: Option<u32>,
    pub egress_spec: Option<u32>,
    pub egress_port: Option<u32>,
    pub mcast_grp: Option<u32>,
}

#[derive(Deserialize, Debug, Clone)]
pub struct ParserDesc {
    /// Start state, -1 for a program without a parser.
    pub init: i64,
    pub states: Vec<StateDesc>,
}

#[derive(Deserialize, Debug, Clone)]
pub struct StateDesc {
    pub name: Option<String>,
    pub ops: Vec<Value>,
    /// Select key parts: `["f", slot, w]`, `["la", offset, w]`, `["sf", stack, field, w]`.
    pub key: Vec<Value>,
    /// `[value, mask, next state (-1: accept)]`, value already masked.
    pub transitions: Vec<(String, String, i64)>,
    /// Next state when no transition matches (None: reject NoMatch).
    pub default: Option<i64>,
    /// A state the compiler could not lower: every packet reaching it is
    /// rejected with this error code.
    pub reject: Option<u32>,
}

#[derive(Deserialize, Debug, Clone)]
pub struct ActionDesc {
    pub name: String,
    pub id: u32,
    /// Width of each action parameter.
    pub params: Vec<u32>,
    pub ops: Vec<Value>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(tag = "kind")]
pub enum NodeDesc {
    #[serde(rename = "table")]
    Table(TableDesc),
    #[serde(rename = "cond")]
    Cond(CondDesc),
}

#[derive(Deserialize, Debug, Clone)]
pub struct TableDesc {
    pub name: String,
    /// Index among the keyed tables (None: a keyless table, default action only).
    pub keyed: Option<u32>,
    pub key: Vec<KeyDesc>,
    pub entries: Vec<EntryDesc>,
    pub default: Option<ActionCall>,
    pub next: NextDesc,
    /// The action selector of entries pointing at groups (`g`).
    #[serde(default)]
    pub selector: Option<String>,
    /// A default pointing at a group: its members (action, data).
    #[serde(default)]
    pub default_group: Option<Vec<(u32, Vec<String>)>>,
    /// A direct counter counts the table's hits.
    #[serde(default)]
    pub counters: bool,
    #[serde(default)]
    pub meter: Option<DirectMeterDesc>,
    /// PNA add-on-miss: the data plane adds entries on a miss (`learn.rs`).
    #[serde(default)]
    pub add_on_miss: Option<AddOnMissDesc>,
}

/// An add-on-miss table's expire time profiles (µs) and its size.
#[derive(Deserialize, Debug, Clone)]
pub struct AddOnMissDesc {
    pub profiles_us: Vec<u64>,
    pub max_size: u32,
}

#[derive(Deserialize, Debug, Clone)]
pub struct KeyDesc {
    pub slot: u32,
    /// Key width: the field's, or the slice's for a masked key.
    pub width: u32,
    #[serde(rename = "match")]
    pub kind: String,
    /// The header's validity slot: the key reads 0 while it is invalid.
    pub valid: Option<u32>,
    /// A slice: the key is `(field & mask) >> shift`.
    pub mask: Option<String>,
    #[serde(default)]
    pub shift: u32,
    pub name: String,
}

/// One entry: per key field `[lo, hi, mask]` (matches when
/// `lo <= key & mask <= hi`), its action index and action data.
#[derive(Deserialize, Debug, Clone)]
pub struct EntryDesc {
    pub m: Vec<(String, String, String)>,
    pub a: u32,
    pub d: Vec<String>,
    /// BMv2's entry handle (a direct meter's rates name it).
    #[serde(default)]
    pub h: Option<u32>,
    /// An action selector's group: its members (action, data) in the order it indexes them.
    #[serde(default)]
    pub g: Option<Vec<(u32, Vec<String>)>>,
}

#[derive(Deserialize, Debug, Clone)]
pub struct ActionCall {
    pub a: u32,
    pub d: Vec<String>,
}

/// Where a table goes next: by hit/miss, or by the action it ran.
#[derive(Deserialize, Debug, Clone)]
#[serde(untagged)]
pub enum NextDesc {
    HitMiss { hit: i64, miss: i64 },
    Actions { actions: std::collections::BTreeMap<String, i64>, base: i64 },
}

#[derive(Deserialize, Debug, Clone)]
pub struct CondDesc {
    pub name: String,
    pub label: String,
    /// None: the compiler could not lower it (`why`): a fallback branch.
    pub expr: Option<Value>,
    #[serde(default)]
    pub why: Option<String>,
    #[serde(rename = "true")]
    pub true_next: i64,
    #[serde(rename = "false")]
    pub false_next: i64,
}

#[derive(Deserialize, Debug, Clone)]
pub struct PipelineDesc {
    pub name: String,
    pub init: i64,
}

#[derive(Deserialize, Debug, Clone)]
pub struct ChecksumDesc {
    pub name: String,
    pub target: u32,
    pub algo: String,
    /// `["f", slot]`, `["c", hex, width]`, `["h", header]`, `["payload"]`.
    pub inputs: Vec<Value>,
    pub cond: Option<Value>,
    pub update: bool,
    pub verify: bool,
}

/// A hex string (`"0x1f"`, `"-0x1"`, any length) as its two's complement
/// residue mod 2^128, whether it is negative, and a bound `bits` on its
/// size: `0 <= v < 2^bits`, or `-2^bits <= v < 0` when negative.
pub fn parse_hex(s: &str) -> Result<(u128, bool, u32), String> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let digits = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")).unwrap_or(body);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!("a hex value, found {s:?}"));
    }
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Ok((0, false, 0));
    }
    let low = &digits[digits.len().saturating_sub(32)..];
    let v = u128::from_str_radix(low, 16).map_err(|_| format!("a hex value, found {s:?}"))?;
    if digits.len() > 32 {
        let lead = digits.as_bytes()[0];
        let lead_bits = 8 - (u8::from_str_radix(std::str::from_utf8(&[lead]).unwrap(), 16).unwrap()).leading_zeros();
        let bits = 4 * (digits.len() as u32 - 1) + lead_bits;
        return Ok(if neg { (v.wrapping_neg(), true, bits) } else { (v, false, bits) });
    }
    Ok(if neg { (v.wrapping_neg(), true, 128 - (v - 1).leading_zeros()) } else { (v, false, 128 - v.leading_zeros()) })
}

/// A non-negative hex value of at most 128 bits.
pub fn hex_u128(s: &str, what: &str) -> Result<u128, String> {
    match parse_hex(s) {
        Ok((v, false, bits)) if bits <= 128 => Ok(v),
        Ok((_, false, _)) => Err(format!("{what}: expected a value of at most 128 bits, found {s}")),
        Ok(_) => Err(format!("{what}: expected a non-negative value, found {s}")),
        Err(e) => Err(format!("{what}: expected {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_values_with_their_bounds() {
        assert_eq!(parse_hex("0x1f").unwrap(), (31, false, 5));
        assert_eq!(parse_hex("0x0").unwrap(), (0, false, 0));
        assert_eq!(parse_hex("-0x1").unwrap(), (u128::MAX, true, 0));
        assert_eq!(parse_hex("-0x2").unwrap(), ((-2i128) as u128, true, 1));
        assert_eq!(parse_hex("-0x80").unwrap(), ((-128i128) as u128, true, 7));
        assert_eq!(parse_hex(&format!("0x{}", "f".repeat(32))).unwrap().2, 128);
        assert_eq!(parse_hex(&format!("0x1{}", "0".repeat(32))).unwrap(), (0, false, 129));
        assert!(hex_u128(&format!("0x1{}", "0".repeat(32)), "x").is_err());
        assert!(parse_hex("0xzz").is_err());
        assert_eq!(hex_u128("0x000000ff", "x").unwrap(), 255);
        assert!(hex_u128("-0x1", "x").is_err());
    }
}
