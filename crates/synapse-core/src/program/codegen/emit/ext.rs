//! The externs and table kinds generated code runs by calling the
//! interpreter's own code (`super::super::super::externs`): it holds their
//! state (`Gen::ext`, an [`ExternState`](super::super::super::externs::ExternState))
//! and is the oracle, so nothing of their meaning is written twice.
//!
//! - register writes, `hash` (BMv2's algorithms over a calculation's
//!   inputs), `random` and `execute_meter` in actions;
//! - an action selector's choice of its group's member;
//! - direct counters and direct meters of a table's hit entry.
//!
//! A calculation reads the PHV's cells: its inputs' locals are stored into
//! `Gen::sc` (a PHV-sized scratch array) before it runs.

use std::fmt::Write;

use super::super::super::externs::{CalcIn, Extern};
use super::{Ctx, Gen};

/// Whether generated code runs extern call `x`, else what it is.
pub(in super::super) fn extern_ok(x: &Extern) -> Result<(), &'static str> {
    match x {
        Extern::NoOp | Extern::Count { .. } | Extern::RegRead { .. } | Extern::RegWrite { .. } | Extern::Hash { .. }
        | Extern::Random { .. } | Extern::Meter { .. } => Ok(()),
        Extern::Regs(_) => Err("a clone, resubmit, recirculate or digest"),
        Extern::AddEntry { .. } | Extern::Restart { .. } => Err("a table write from the data plane"),
        Extern::Unsupported { .. } => Err("an extern the interpreter does not run"),
    }
}

impl Gen<'_> {
    /// An extern call other than `count` and `register_read` (see the module doc).
    pub(super) fn extern_op(&mut self, x: &Extern, ctx: Ctx) -> Result<String, String> {
        Ok(match x {
            &Extern::RegWrite { reg, idx, v } => {
                let (i, v) = (self.val(idx, ctx)?, self.val(v, ctx)?);
                format!("self.ext.reg_write(p, {reg}, {i}, {v});")
            }
            &Extern::Hash { out, base, calc, size } => {
                let (b, n) = (self.val(base, ctx)?, self.val(size, ctx)?);
                let stash = self.stash(calc)?;
                let set = self.assign(out.dst, "v", "u128", out.mask);
                format!("{{ {stash}let h = p.calculate_over({calc}, &self.sc, frame, pos, &mut self.ext); \
                         let v = hash_offset({b}, h, {n}); {set} }}")
            }
            &Extern::Random { out, lo, hi } => {
                let (l, h) = (self.val(lo, ctx)?, self.val(hi, ctx)?);
                let set = self.assign(out.dst, "v", "u128", out.mask);
                format!("{{ let (l, h) = ({l}, {h}); if l <= h {{ let v = self.ext.rng.range(l, h); {set} }} }}")
            }
            &Extern::Meter { meter, idx, out } => {
                let i = self.val(idx, ctx)?;
                let set = self.assign(out.dst, "v", "u128", out.mask);
                format!("{{ let v = self.ext.meter(p, {meter}, {i}) as u128; {set} }}")
            }
            x => return Err(extern_ok(x).err().unwrap_or("an extern").into()),
        })
    }

    /// Stores calculation `calc`'s input cells (fields, their headers'
    /// validity) into `self.sc`, where `calculate_over` reads them.
    fn stash(&mut self, calc: u32) -> Result<String, String> {
        let p = self.p;
        let mut cells = Vec::new();
        for i in &p.objs.calcs[calc as usize].inputs {
            match *i {
                CalcIn::Field { cell, limbs, valid, .. } => {
                    if limbs != 1 {
                        return Err("a calculation over a field wider than 128 bits".into());
                    }
                    cells.push(cell);
                    cells.extend(valid);
                }
                CalcIn::Header(h) => {
                    let hd = &p.headers[h as usize];
                    if hd.fields.iter().any(|f| f.limbs != 1) {
                        return Err("a calculation over a field wider than 128 bits".into());
                    }
                    cells.extend(hd.fields.iter().map(|f| f.cell));
                    cells.push(hd.valid);
                }
                CalcIn::Const { .. } | CalcIn::Payload => {}
            }
        }
        cells.sort();
        cells.dedup();
        let mut s = String::new();
        for c in cells {
            let v = self.cell(c, "u128");
            write!(s, "self.sc[{c}] = {v}; ").unwrap();
        }
        Ok(s)
    }

    /// Table `ti`'s action selector: `h` replaced by the member its hash
    /// picks from the entry's (or the default) group, when it is not empty.
    pub(super) fn selector(&mut self, ti: usize) -> Result<String, String> {
        let Some(calc) = self.p.tables[ti].selector else { return Ok(String::new()) };
        let stash = self.stash(calc)?;
        let ind = "                    ";
        Ok(format!("{ind}let h = {{ // the action selector's member\n\
                    {ind}    let t = &p.tables[{ti}];\n\
                    {ind}    let (start, len) = e.map_or(t.default_group, |e| t.groups[e as usize]);\n\
                    {ind}    if len == 0 {{ h }} else {{\n\
                    {ind}        {stash}let hash = p.calculate_over({calc}, &self.sc, frame, pos, &mut self.ext);\n\
                    {ind}        t.members[(start + synapse_core::program::selector::choose(hash, len as usize) as u32) as usize]\n\
                    {ind}    }}\n\
                    {ind}}};\n"))
    }

    /// Table `ti`'s direct counter and meter, on a hit (after the visit is recorded).
    pub(super) fn direct(&mut self, ti: usize) -> String {
        let t = &self.p.tables[ti];
        let ind = "                    ";
        match t.meter {
            Some((_, out)) => {
                let set = self.assign(out.dst, "v as u128", "u128", out.mask);
                format!("{ind}if let Some(v) = e.and_then(|e| self.ext.direct_hit(p, {ti}, e)) {{ {set} }}\n")
            }
            None if t.counters => format!("{ind}if let Some(e) = e {{ self.ext.direct_hit(p, {ti}, e); }}\n"),
            None => String::new(),
        }
    }
}
