//! Code generated per program: which linked programs the generator
//! ([`emit`], code like [`super::native::Router`]) can take. The
//! subset: fixed-size headers, stacks, `verify`, `set` and `advance` in
//! the parser; tables with action selectors, direct counters and meters
//! (no add-on-miss, no synthesized key); assignments, `drop`, `exit`,
//! counters, meters, register reads and writes, `hash`, `random` and
//! headers made valid, invalid or copied in actions and parser states;
//! conditions the compiler lowered; checksums of BMv2's algorithms; none
//! of simple_switch's clone, resubmit, recirculate or digest calls.
//! Anything else is named, and that program
//! stays with the interpreter (which is also the generated code's oracle).
//!
//! [`emit`] writes that code: the Rust source of a module running one
//! program in the subset (see its module doc).

use super::action::Op;
use super::control::Node;
use super::exec::Program;
use super::parser::POp;

mod emit;
pub use emit::emit;

fn op_ok(op: &Op, p: &Program) -> Result<(), &'static str> {
    match op {
        Op::SetConst { .. } | Op::Copy { .. } | Op::SetParam { .. } | Op::Set { .. } | Op::Moves(_) | Op::Drop | Op::Exit => Ok(()),
        Op::Extern(i) => emit::extern_ok(&p.externs[*i as usize]),
        Op::SetWide { .. } => Err("a field wider than 128 bits"),
        Op::Taint { .. } | Op::Synth { .. } | Op::Unsupported(_) => Err("a synthesized or unsupported value"),
        Op::Valid { .. } | Op::HdrCopy { .. } | Op::Build(_) => Ok(()),
        Op::Push { .. } | Op::Pop { .. } => Err("a stack push or pop"),
        Op::Jump(_) | Op::JumpZero { .. } => Err("a branch inside an action"),
    }
}

/// What in `p` is outside the generator's subset, one line each (empty: all of it is in).
pub fn unsupported(p: &Program) -> Vec<String> {
    let mut out = Vec::new();
    for s in &p.parser.states {
        if s.reject.is_some() {
            out.push(format!("parser state {}: not lowered by the compiler", s.name));
        }
        for op in &s.ops {
            let why = match op {
                POp::Extract(h) if p.headers[*h as usize].plan.is_none() => Some("a header with a field wider than one 8-byte read"),
                POp::Extract(_) | POp::ExtractStack(_) | POp::Verify { .. } => None,
                POp::ExtractVl(..) => Some("a varbit header"),
                POp::Advance(_) => None,
                POp::Do(op) => op_ok(op, p).err(),
            };
            if let Some(w) = why {
                out.push(format!("parser state {}: {w}", s.name));
            }
        }
    }
    for t in &p.tables {
        if t.keyed.is_some() && (!t.taint.is_empty() || t.learn.is_some()) {
            out.push(format!("table {}: add-on-miss or synthesized key", t.name));
        }
    }
    for a in &p.actions {
        for op in &a.ops {
            if let Err(w) = op_ok(op, p) {
                out.push(format!("action {}: {w}", a.name));
            }
        }
    }
    for n in &p.nodes {
        if let Node::Cond(c) = n {
            if c.e.is_none() {
                out.push(format!("condition {}: not lowered by the compiler", c.name));
            }
        }
    }
    out.extend(emit::headers::unsupported_checksums(p));
    out.sort();
    out.dedup();
    if out.is_empty() {
        // what only writing the code finds (a construct the parser or an expression uses)
        out.extend(emit::module(p).err());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router() -> serde_json::Value {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/p4/router-desc.json");
        serde_json::from_str(&std::fs::read_to_string(path).expect("tests/data/p4/router-desc.json")).unwrap()
    }

    #[test]
    fn the_router_is_in_the_subset_and_other_constructs_are_named() {
        let d = router();
        assert_eq!(unsupported(&Program::from_json(&d.to_string()).unwrap()), Vec::<String>::new());
        // a direct counter on the acl is in the subset
        let mut d = router();
        for n in d["nodes"].as_array_mut().unwrap() {
            if n["name"] == "MyIngress.acl" {
                n["counters"] = serde_json::json!(true);
            }
        }
        assert_eq!(unsupported(&Program::from_json(&d.to_string()).unwrap()), Vec::<String>::new());
        // a state the compiler could not lower, an action pushing a stack, a clone
        for s in d["parser"]["states"].as_array_mut().unwrap() {
            if s["name"] == "parse_magic" {
                s["reject"] = serde_json::json!(4);
            }
        }
        for a in d["actions"].as_array_mut().unwrap() {
            if a["name"] == "MyIngress.set_tag" {
                a["ops"].as_array_mut().unwrap().push(serde_json::json!(["push", 0, 1, 0]));
            }
            if a["name"] == "MyIngress.drop" {
                a["ops"].as_array_mut().unwrap().push(serde_json::json!(["extern", "clone_ingress_pkt_to_egress", [["e", ["c", "0x5"]], ["e", ["c", "0x1"]]]]));
            }
        }
        let why = unsupported(&Program::from_json(&d.to_string()).unwrap());
        assert_eq!(why.len(), 3, "{why:?}");
        assert_eq!(why[0], "action MyIngress.drop: a clone, resubmit, recirculate or digest", "{why:?}");
        assert!(why[1].starts_with("action MyIngress.set_tag: a stack push"), "{why:?}");
        assert!(why[2].starts_with("parser state parse_magic"), "{why:?}");
    }
}
