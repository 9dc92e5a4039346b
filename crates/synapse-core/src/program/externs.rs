//! Externs: the one place where a primitive the program calls by name
//! (`count`, `execute_meter`, `register_read`, `modify_field_with_hash_based_offset`,
//! `clone_ingress_pkt_to_egress`, ...) and a calculation's algorithm
//! (`csum16`, `crc32`, ...) are given their meaning, as BMv2 simple_switch
//! gives it (`targets/simple_switch/primitives.cpp`; the control plane's
//! twin, the test oracle, is `synapse_vmt.p4.exprs.Codegen.extern`).
//!
//! [`Linker::extern_call`] decides, once per call site, what a primitive
//! does; [`Extern::run`] does it per packet, on the PHV and on the run's
//! [`ExternState`] (registers, counters, meters, the random generator, the
//! current pass); [`Objects`] are the program's stateful objects and
//! calculations, linked from the description:
//!
//! - `register_read` / `register_write`: arrays kept across packets (an
//!   index out of bounds reads and writes nothing, as BMv2);
//! - `count`: packets and the packet's ingress length per cell;
//! - `execute_meter`: BMv2's two-rate three-colour marker ([`super::meter`]),
//!   GREEN without configured rates;
//! - `modify_field_with_hash_based_offset` (P4 `hash`): `base + h % size`
//!   over BMv2's buffer of the calculation's inputs ([`super::hash`]);
//! - `modify_field_rng_uniform` (P4 `random`): the run's seeded generator
//!   ([`SplitMix64`], the same as the interpreter's);
//! - `clone_*_pkt_to_egress`, `resubmit`, `recirculate`, `generate_digest`:
//!   the packet's registers that [`super::flow`] acts on after the pipeline;
//! - `add_entry`, `restart_expire_timer`, `set_entry_expire_time`: PNA's
//!   data-plane table writes ([`super::learn`]);
//! - logs, assertions and `truncate`: no effect on the visits;
//! - anything else is **unsupported**: its first field argument is marked
//!   *synthesized* (taint), counted by name.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, OnceLock};

use serde_json::Value;

use super::action::Dst;
use super::exec::{Linker, Program, State};
use super::expr::{Code, Env, Expr, Scope};
use super::flow::{Meta, Pass, SwitchConfig};
use super::hash::{Algo, Bits, CrcSpec};
use super::ir::{parse_hex, ExternsDesc, MeterDesc};
use super::meter::Meter;
use super::phv::mask;

/// Primitives with no effect on what a packet does here.
pub const NO_OPS: &[&str] = &["log_msg", "truncate", "assume", "assert", "no_op", "_drop_bridge", "count_direct"];

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

/// A value an extern reads: a field's cell or an expression.
#[derive(Clone, Copy, Debug)]
pub enum Val {
    Cell(u32),
    Expr(Expr),
}

/// A field an extern writes.
#[derive(Clone, Copy, Debug)]
pub struct Out {
    pub dst: Dst,
    pub slot: u32,
    pub mask: u128,
}

/// What one extern call site does.
#[derive(Clone, Debug)]
pub enum Extern {
    NoOp,
    Count { counter: u32, idx: Val },
    Meter { meter: u32, idx: Val, out: Out },
    RegRead { reg: u32, idx: Val, out: Out },
    RegWrite { reg: u32, idx: Val, v: Val },
    Hash { out: Out, base: Val, calc: u32, size: Val },
    Random { out: Out, lo: Val, hi: Val },
    /// Writes the packet's registers: `(cell, group, value, or)`: the
    /// clone's session (| 0x10000) and field list, a resubmit's or
    /// recirculate's field list, a digest's learn list.
    Regs(Vec<(u32, u32, Val, u128)>),
    /// PNA `add_entry(action, params.., profile)` in an add-on-miss table's
    /// miss action (`super::learn`); `misplaced` counts a call anywhere else.
    AddEntry { action: u32, params: Vec<Val>, profile: Val, misplaced: u32 },
    /// PNA `restart_expire_timer()` / `set_entry_expire_time(profile)` in a
    /// hit action (a no-op on a fixed entry).
    Restart { profile: Option<Val> },
    /// Not executed: the field argument (if any) is marked synthesized.
    Unsupported { reason: u32, taints: Option<u32> },
}

/// A calculation's input, resolved against the PHV.
#[derive(Clone, Debug)]
pub enum CalcIn {
    /// A field (left out while its header is invalid: `valid` is that cell).
    Field { cell: u32, width: u32, limbs: u32, valid: Option<u32> },
    Const { v: u128, width: u32 },
    Header(u32),
    Payload,
}

/// A named calculation: BMv2's algorithm (None: `random`, the run's
/// generator) over its inputs.
#[derive(Clone, Debug)]
pub struct Calc {
    pub name: String,
    pub algo: Option<Algo>,
    pub inputs: Vec<CalcIn>,
    /// When every input is a field of whole bytes in one cell (an action
    /// selector's 5-tuple), the input built by [`planned_input`] on the
    /// stack: (cell, validity cell or NONE, bytes), planned at link.
    pub plan: Option<Box<[(u32, u32, u32)]>>,
}

/// Largest input (bytes) a [`Calc::plan`] builds.
pub const PLAN_BYTES: usize = 64;

impl Calc {
    fn new(name: &str, algo: Option<Algo>, inputs: Vec<CalcIn>) -> Calc {
        let one = |i: &CalcIn| match *i {
            CalcIn::Field { cell, width, limbs: 1, valid } if width % 8 == 0 && width > 0 => Some((cell, valid.unwrap_or(super::exec::NONE), width / 8)),
            _ => None,
        };
        let plan: Option<Vec<_>> = inputs.iter().map(one).collect();
        let plan = plan.filter(|p| p.iter().map(|f| f.2 as usize).sum::<usize>() <= PLAN_BYTES).map(Vec::into_boxed_slice);
        Calc { name: name.to_string(), algo, inputs, plan }
    }
}

/// A planned calculation's input: each field's bytes, big-endian, one
/// 16-byte store each (a field of an invalid header left out, as BMv2's
/// `BufBuilder` leaves it); its length.
#[inline(always)]
pub fn planned_input(plan: &[(u32, u32, u32)], cells: &[u128], buf: &mut [u8; PLAN_BYTES + 16]) -> usize {
    let mut n = 0;
    for &(cell, valid, k) in plan {
        if valid != super::exec::NONE && cells[valid as usize] == 0 {
            continue;
        }
        // the field's k bytes left-aligned: the bytes past them are overwritten by the next field
        let v = cells[cell as usize] << (128 - 8 * k);
        buf[n..n + 16].copy_from_slice(&v.to_be_bytes());
        n += k as usize;
    }
    n
}

/// The program's stateful objects and calculations, linked.
#[derive(Clone, Debug, Default)]
pub struct Objects {
    pub calcs: Vec<Calc>,
    pub calc_ix: HashMap<String, u32>,
    pub registers: Vec<(String, u32, u32, Vec<(u32, u128)>)>,
    pub counters: Vec<(String, u32)>,
    pub meters: Vec<MeterDesc>,
    /// Field list id -> its fields (cell, group, limbs).
    pub field_lists: HashMap<u64, Vec<(u32, u32, u32)>>,
    /// Learn list id -> (name, its fields' cells).
    pub learn_lists: HashMap<u64, (String, Vec<u32>)>,
    /// Action profile -> its selector's calculation (an index into `calcs`).
    pub selectors: HashMap<String, u32>,
    pub flow: SwitchConfig,
    /// The fields simple_switch reads and writes by name, indexed by [`Meta`]: (cell, group, mask).
    pub meta: [Option<(u32, u32, u128)>; Meta::COUNT],
    /// Metadata cells and their groups (zeroed for a copy).
    pub metadata: Vec<(u32, u32)>,
    pub ingress: i64,
    pub egress: i64,
    pub verify: bool,
    pub seed: u64,
}

/// The run's random generator (SplitMix64, as `synapse_vmt.p4.externs.SplitMix64`).
#[derive(Clone, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi]` (`lo <= hi`): `lo + next % (hi - lo + 1)`.
    pub fn range(&mut self, lo: u128, hi: u128) -> u128 {
        let n = hi - lo + 1;
        let x = self.next_u64() as u128;
        if n > u64::MAX as u128 {
            lo.wrapping_add(x)
        } else {
            lo + x % n
        }
    }
}

/// What the externs keep across packets, and the current pass.
#[derive(Clone, Debug)]
pub struct ExternState {
    pub registers: Vec<Vec<u128>>,
    /// Per counter: per index [packets, bytes].
    pub counters: Vec<Vec<[u64; 2]>>,
    /// Per meter: its configured cells.
    pub meters: Vec<HashMap<u32, Meter>>,
    /// Per table: a direct counter's entries' [packets, bytes]; a direct meter's cells.
    pub direct: Vec<Vec<[u64; 2]>>,
    pub direct_meters: Vec<HashMap<u32, Meter>>,
    /// Per meter (in `Objects::meters` order): packets marked GREEN, YELLOW, RED.
    pub colors: Vec<[u64; 3]>,
    /// Per learn list: digests sent.
    pub digests: BTreeMap<String, u64>,
    pub rng: SplitMix64,
    pub pass: Pass,
    pub bits: Bits,
}

impl ExternState {
    pub fn new(p: &Program) -> ExternState {
        let o = &p.objs;
        ExternState {
            registers: o.registers.iter().map(|(_, size, width, init)| {
                let mut cells = vec![0u128; *size as usize];
                for &(i, v) in init {
                    if let Some(c) = cells.get_mut(i as usize) {
                        *c = v & mask((*width).min(128));
                    }
                }
                cells
            }).collect(),
            counters: o.counters.iter().map(|c| vec![[0; 2]; c.1 as usize]).collect(),
            meters: vec![HashMap::new(); o.meters.len()],
            direct: p.tables.iter().map(|t| vec![[0; 2]; if t.counters { t.handles.len() } else { 0 }]).collect(),
            direct_meters: vec![HashMap::new(); p.tables.len()],
            colors: vec![[0; 3]; o.meters.len()],
            digests: BTreeMap::new(),
            rng: SplitMix64(o.seed),
            pass: Pass::default(),
            bits: Bits::new(),
        }
    }

    /// A meter cell, configured on first use from `rates` (`index` -1: every cell).
    pub fn meter_cell<'a>(cells: &'a mut HashMap<u32, Meter>, rates: &[(i64, Vec<(f64, u64)>)], packets: bool, i: u32)
        -> Option<&'a mut Meter> {
        if !cells.contains_key(&i) {
            let r = rates.iter().find(|(k, _)| *k == i as i64).or_else(|| rates.iter().find(|(k, _)| *k < 0))?;
            let mut m = Meter::new(packets);
            m.set_rates(&r.1).ok()?;
            cells.insert(i, m);
        }
        cells.get_mut(&i)
    }

    pub fn color(&mut self, meter: u32, c: u32) {
        self.colors[meter as usize][(c as usize).min(2)] += 1;
    }

    /// `count(counter, i)`: one packet of the pass's ingress length (nothing out of bounds, as BMv2).
    #[inline]
    pub fn count(&mut self, counter: u32, i: u128) {
        let len = self.pass.ingress_length;
        if let Some(c) = self.counters[counter as usize].get_mut(i as usize) {
            c[0] += 1;
            c[1] += len;
        }
    }

    /// `execute_meter(meter, i)`: the colour (GREEN out of bounds or without rates), counted.
    pub fn meter(&mut self, p: &Program, meter: u32, i: u128) -> u32 {
        let m = &p.objs.meters[meter as usize];
        let Pass { ingress_length, now_us } = self.pass;
        let color = if i < m.size as u128 {
            ExternState::meter_cell(&mut self.meters[meter as usize], &m.rates, m.packets, i as u32)
                .map_or(0, |c| c.execute(ingress_length, now_us))
        } else {
            0
        };
        self.color(meter, color);
        color
    }

    /// `register_write(reg, i, x)` at the register's width (nothing out of bounds, as BMv2).
    #[inline]
    pub fn reg_write(&mut self, p: &Program, reg: u32, i: u128, x: u128) {
        let w = p.objs.registers[reg as usize].2;
        if let Some(c) = self.registers[reg as usize].get_mut(i as usize) {
            *c = x & mask(w.min(128));
        }
    }

    /// Table `ti`'s entry `e` was hit: its direct counter counts the
    /// packet; its direct meter's colour (counted), if it has one.
    pub fn direct_hit(&mut self, p: &Program, ti: u32, e: u32) -> Option<u32> {
        let t = &p.tables[ti as usize];
        if t.counters {
            let len = self.pass.ingress_length;
            let c = &mut self.direct[ti as usize][e as usize];
            c[0] += 1;
            c[1] += len;
        }
        let (m, _) = t.meter?;
        let md = &p.objs.meters[m as usize];
        let Pass { ingress_length, now_us } = self.pass;
        let color = ExternState::meter_cell(&mut self.direct_meters[ti as usize], &md.rates, md.packets, t.handles[e as usize])
            .map_or(0, |c| c.execute(ingress_length, now_us));
        self.color(m, color);
        Some(color)
    }
}

/// `hash(out, base, calc, size)`'s value: `base + h % size` (a size of 0 as 1).
#[inline]
pub fn hash_offset(base: u128, h: u64, size: u128) -> u128 {
    base.wrapping_add(h as u128 % size.max(1))
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
        if NO_OPS.contains(&name) || KNOWN.contains(&name) {
            return None;
        }
        args.iter().find_map(|a| {
            let a = a.as_array()?;
            (a.first()?.as_str()? == "f").then(|| a.get(1)?.as_u64().map(|s| s as u32)).flatten()
        })
    }

    /// Runs the call for one packet (`params`: the action data; `frame`:
    /// the packet's bytes, for externs that read them).
    #[inline]
    pub fn run(&self, p: &Program, st: &mut State, params: &[u128], frame: &[u8]) {
        match self {
            Extern::NoOp => {}
            Extern::Count { counter, idx } => {
                let i = val(p, st, *idx, params, frame);
                st.ext.count(*counter, i);
            }
            Extern::Meter { meter, idx, out } => {
                let i = val(p, st, *idx, params, frame);
                let color = st.ext.meter(p, *meter, i);
                write(st, *out, color as u128);
            }
            Extern::RegRead { reg, idx, out } => {
                let i = val(p, st, *idx, params, frame);
                if let Some(&v) = st.ext.registers[*reg as usize].get(i as usize) {
                    write(st, *out, v);
                }
            }
            Extern::RegWrite { reg, idx, v } => {
                let i = val(p, st, *idx, params, frame);
                let x = val(p, st, *v, params, frame);
                st.ext.reg_write(p, *reg, i, x);
            }
            Extern::Hash { out, base, calc, size } => {
                let b = val(p, st, *base, params, frame);
                let n = val(p, st, *size, params, frame);
                let h = p.calculate(*calc, st, frame);
                write(st, *out, hash_offset(b, h, n));
            }
            Extern::Random { out, lo, hi } => {
                let (l, h) = (val(p, st, *lo, params, frame), val(p, st, *hi, params, frame));
                if l <= h {
                    let v = st.ext.rng.range(l, h);
                    write(st, *out, v);
                }
            }
            Extern::Regs(sets) => {
                for &(cell, group, v, or) in sets {
                    let x = val(p, st, v, params, frame);
                    st.phv.cells[cell as usize] = (x & 0xffff) | or;
                    st.phv.mark(group);
                }
            }
            Extern::AddEntry { action, params: ps, profile, misplaced } => {
                let t = st.learn_at;
                if t == super::exec::NONE || st.learn_slot != super::exec::NONE {
                    st.note(*misplaced);
                    return;
                }
                let tb = &p.tables[t as usize];
                let spec = tb.learn.as_ref().unwrap();
                let widths = &p.actions[*action as usize].params;
                let mut data = [0u128; 16];
                for (i, (v, &w)) in ps.iter().zip(widths).enumerate() {
                    data[i] = val(p, st, *v, params, frame) & mask(w.min(128));
                }
                let prof = val(p, st, *profile, params, frame);
                if prof >= spec.profiles_us.len() as u128 {
                    st.note(*misplaced);
                    return;
                }
                let key = std::mem::take(&mut st.learn_key);
                let (now, keyed) = (st.now_us, tb.keyed.unwrap_or(0));
                st.learn[t as usize].as_mut().unwrap().add(spec, keyed, &key, *action, &data[..ps.len()], prof as u32, now,
                                                           st.writes.as_mut());
                st.learn_key = key;
            }
            Extern::Restart { profile } => {
                let (t, slot) = (st.learn_at, st.learn_slot);
                if t == super::exec::NONE || slot == super::exec::NONE || slot == super::learn::FIXED {
                    return;
                }
                let spec = p.tables[t as usize].learn.as_ref().unwrap();
                let prof = match profile {
                    Some(v) => match val(p, st, *v, params, frame) {
                        x if x < spec.profiles_us.len() as u128 => Some(x as u32),
                        _ => return,
                    },
                    None => None,
                };
                let now = st.now_us;
                st.learn[t as usize].as_mut().unwrap().restart(spec, slot, prof, now);
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

/// Externs this module runs (the taint analysis leaves their outputs alone).
const KNOWN: &[&str] = &[
    "count", "execute_meter", "register_read", "register_write", "modify_field_with_hash_based_offset",
    "modify_field_rng_uniform", "clone_ingress_pkt_to_egress", "clone_egress_pkt_to_egress", "resubmit", "recirculate",
    "generate_digest", "add_entry", "restart_expire_timer", "set_entry_expire_time",
];

fn val(p: &Program, st: &mut State, v: Val, params: &[u128], frame: &[u8]) -> u128 {
    match v {
        Val::Cell(c) => st.phv.cells[c as usize],
        Val::Expr(e) => {
            let mut why = u32::MAX;
            let x = p.code.eval(e, &Env { cells: &st.phv.cells, params, frame, pos: st.pos }, &mut why).unwrap_or(0);
            if why != u32::MAX {
                st.note_inexact(why);
            }
            x
        }
    }
}

fn write(st: &mut State, o: Out, v: u128) {
    st.phv.cells[o.dst.cell as usize] = v & o.mask;
    st.wrote(o.dst);
    st.set_taint(o.slot, false);
}

impl Program {
    /// Calculation `k` over the PHV (BMv2's `BufBuilder`, then its algorithm).
    pub fn calculate(&self, k: u32, st: &mut State, frame: &[u8]) -> u64 {
        self.calculate_over(k, &st.phv.cells, frame, st.pos, &mut st.ext)
    }

    /// Calculation `k` over PHV cells `cells` (the payload: `frame` from `pos`).
    pub fn calculate_over(&self, k: u32, cells: &[u128], frame: &[u8], pos: usize, ext: &mut ExternState) -> u64 {
        let c = &self.objs.calcs[k as usize];
        let Some(algo) = &c.algo else {
            return ext.rng.next_u64();
        };
        if let Some(plan) = &c.plan {
            let mut buf = [0u8; PLAN_BYTES + 16];
            let n = planned_input(plan, cells, &mut buf);
            return algo.hash(&buf[..n]);
        }
        let mut bits = std::mem::take(&mut ext.bits);
        bits.clear();
        let mut hb = Vec::new();
        for i in &c.inputs {
            match *i {
                CalcIn::Field { cell, width, limbs, valid } => {
                    if valid.is_some_and(|v| cells[v as usize] == 0) {
                        continue;
                    }
                    push_cells(&mut bits, &cells[cell as usize..(cell + limbs) as usize], width);
                }
                CalcIn::Const { v, width } => push_cells(&mut bits, &[v], width),
                CalcIn::Header(h) => {
                    let hd = &self.headers[h as usize];
                    if cells[hd.valid as usize] != 0 {
                        for f in &hd.fields {
                            push_cells(&mut bits, &cells[f.cell as usize..(f.cell + f.limbs) as usize], f.width);
                        }
                    }
                }
                CalcIn::Payload => {
                    hb.clear();
                    hb.extend_from_slice(&frame[pos.min(frame.len())..]);
                    bits.push_bytes(&hb);
                }
            }
        }
        let h = algo.hash(bits.bytes());
        ext.bits = bits;
        h
    }
}

/// Appends a field of `width` bits held in `cells` (most significant limb
/// first, the value right-aligned: the first limb holds what is left over
/// 128-bit limbs).
fn push_cells(bits: &mut Bits, cells: &[u128], width: u32) {
    let limbs = cells.len();
    for (j, &c) in cells.iter().enumerate() {
        let n = if j == 0 { width as usize - 128 * (limbs - 1) } else { 128 };
        bits.push_wide(c, n);
    }
}

impl Linker<'_> {
    /// Links the description's externs (objects, calculations, switch).
    pub fn objects(&mut self) -> Result<Objects, String> {
        let x: &ExternsDesc = &self.d.externs;
        let mut o = Objects { ingress: x.ingress, egress: x.egress, verify: x.verify, seed: x.seed, ..Default::default() };
        for (k, c) in x.calculations.iter().enumerate() {
            let what = format!("calculation {}", c.name);
            let algo = if c.algo == "random" {
                None
            } else {
                let spec = match &c.crc {
                    Some((w, poly, init, xor, ri, ro)) => {
                        let h = |s: &str| parse_hex(s).map(|v| v.0 as u64).map_err(|e| format!("{what}: expected {e}"));
                        Some(CrcSpec::new(*w, h(poly)?, h(init)?, h(xor)?, *ri, *ro))
                    }
                    None => None,
                };
                Some(Algo::from_name(&c.algo, spec).ok_or_else(|| format!("{what}: expected an algorithm BMv2 knows, found {:?}", c.algo))?)
            };
            let inputs = self.calc_inputs(&c.inputs, &what)?;
            o.calc_ix.insert(c.name.clone(), k as u32);
            o.calcs.push(Calc::new(&c.name, algo, inputs));
        }
        for s in &x.selectors {
            let what = format!("action selector {}", s.name);
            let algo = Algo::from_name(&s.algo, None).ok_or_else(|| format!("{what}: expected an algorithm BMv2 knows, found {:?}", s.algo))?;
            let inputs = self.calc_inputs(&s.inputs, &what)?;
            o.selectors.insert(s.name.clone(), o.calcs.len() as u32);
            o.calcs.push(Calc::new(&s.name, Some(algo), inputs));
        }
        for r in &x.registers {
            let mut init = Vec::new();
            for (i, v) in &r.init {
                init.push((*i, parse_hex(v).map_err(|e| format!("register {}: expected {e}", r.name))?.0));
            }
            o.registers.push((r.name.clone(), r.size, r.width, init));
        }
        o.counters = x.counters.iter().map(|c| (c.name.clone(), c.size)).collect();
        o.meters = x.meters.clone();
        for (id, fields) in &x.field_lists {
            let mut v = Vec::new();
            for f in fields {
                let s = self.field_of(f, "field list")?;
                v.push((self.lay.value_cell(s), self.lay.group[s], self.lay.limbs[s]));
            }
            o.field_lists.insert(*id, v);
        }
        for (id, name, fields) in &x.learn_lists {
            let mut v = Vec::new();
            for f in fields {
                v.push(self.lay.value_cell(self.field_of(f, "learn list")?));
            }
            o.learn_lists.insert(*id, (name.clone(), v));
        }
        let mut cfg = SwitchConfig { priority_queues: x.priority_queues.max(1), drop_port: x.drop_port, ..Default::default() };
        if x.drop_port == 0 {
            cfg.drop_port = 511;
        }
        for &(s, port, grp) in &x.mirroring {
            cfg.mirroring.insert(s, ((port >= 0).then_some(port as u32), (grp >= 0).then_some(grp as u32)));
        }
        for (g, reps) in &x.mc_groups {
            cfg.mc_groups.insert(*g, reps.clone());
        }
        o.flow = cfg;
        for (name, &slot) in &x.meta {
            if slot < 0 {
                continue;
            }
            let s = self.lay.slot(slot as u64, "externs.meta")?;
            let m = META.iter().find(|(n, _)| n == name).map(|&(_, m)| m);
            if let Some(m) = m {
                o.meta[m as usize] = Some((self.lay.value_cell(s), self.lay.group[s], mask(self.lay.width[s].min(128))));
            }
        }
        for &s in &x.metadata {
            let s = self.lay.slot(s as u64, "externs.metadata")?;
            o.metadata.push((self.lay.value_cell(s), self.lay.group[s]));
        }
        Ok(o)
    }

    fn field_of(&self, f: &Value, what: &str) -> Result<usize, String> {
        let a = f.as_array().filter(|a| a.first().and_then(|t| t.as_str()) == Some("f"));
        let s = a.and_then(|a| a.get(1)).and_then(|x| x.as_u64()).ok_or_else(|| format!("{what}: expected [\"f\", slot], found {f}"))?;
        self.lay.slot(s, what)
    }

    fn calc_inputs(&self, inputs: &[Value], what: &str) -> Result<Vec<CalcIn>, String> {
        let mut out = Vec::new();
        for v in inputs {
            let bad = || format!("{what}: expected a calculation input, found {v}");
            let a = v.as_array().ok_or_else(bad)?;
            let int = |k: usize| a.get(k).and_then(|x| x.as_u64()).ok_or_else(bad);
            out.push(match a.first().and_then(|x| x.as_str()) {
                Some("f") => {
                    let s = self.lay.slot(int(1)?, what)?;
                    if self.lay.varbit[s] {
                        return Err(format!("{what}: a varbit field as a calculation input is not supported"));
                    }
                    let h = self.hdr_of_slot[s];
                    let valid = (h != super::exec::NONE && !self.headers[h as usize].metadata).then(|| self.headers[h as usize].valid);
                    CalcIn::Field { cell: self.lay.value_cell(s), width: self.lay.width[s], limbs: self.lay.limbs[s], valid }
                }
                Some("c") => {
                    let (v, _, _) = parse_hex(a.get(1).and_then(|x| x.as_str()).ok_or_else(bad)?).map_err(|e| format!("{what}: expected {e}"))?;
                    CalcIn::Const { v, width: int(2)? as u32 }
                }
                Some("h") => CalcIn::Header(self.header(int(1)?, what)?),
                Some("payload") => CalcIn::Payload,
                _ => return Err(bad()),
            });
        }
        Ok(out)
    }

    fn out_of(&self, a: &Arg, what: &str) -> Result<Out, String> {
        match a {
            Arg::Field { slot, width, .. } => Ok(Out { dst: self.dst(*slot as usize), slot: *slot, mask: mask((*width).min(128)) }),
            _ => Err(format!("{what}: expected a field to write")),
        }
    }

    /// What the call `name(args)` does at this call site.
    pub fn extern_call(&mut self, name: &str, args: &[Arg], objs: &Objects) -> Result<Extern, String> {
        let what = format!("extern {name}");
        let v = |a: Option<&Arg>| -> Result<Val, String> {
            match a {
                Some(Arg::Field { cell, .. }) => Ok(Val::Cell(*cell)),
                Some(Arg::Expr(e)) => Ok(Val::Expr(*e)),
                _ => Err(format!("extern {name}: expected a value argument")),
            }
        };
        let named = |a: Option<&Arg>, kind: &str| -> Option<String> {
            match a {
                Some(Arg::Name(t, n)) if t == kind => Some(n.clone()),
                _ => None,
            }
        };
        let unsupported = |code: &mut Code, why: String, args: &[Arg]| {
            let taints = args.iter().find_map(|a| match a {
                Arg::Field { slot, .. } => Some(*slot),
                _ => None,
            });
            Extern::Unsupported { reason: code.reasons.id(&why), taints }
        };
        if NO_OPS.contains(&name) {
            return Ok(Extern::NoOp);
        }
        let meta = |m: Meta| objs.meta[m as usize].map(|(c, g, _)| (c, g));
        Ok(match name {
            "count" => match named(args.first(), "counter_array").and_then(|n| objs.counters.iter().position(|c| c.0 == n)) {
                Some(k) => Extern::Count { counter: k as u32, idx: v(args.get(1))? },
                None => unsupported(&mut self.code, format!("unsupported extern {name} (undeclared counter)"), args),
            },
            "execute_meter" => match named(args.first(), "meter_array").and_then(|n| objs.meters.iter().position(|m| m.name == n)) {
                Some(k) => Extern::Meter { meter: k as u32, idx: v(args.get(1))?, out: self.out_of(args.get(2).ok_or(what.clone())?, &what)? },
                None => unsupported(&mut self.code, format!("unsupported extern {name} (undeclared meter)"), args),
            },
            "register_read" => match named(args.get(1), "register_array").and_then(|n| objs.registers.iter().position(|r| r.0 == n)) {
                Some(k) => Extern::RegRead { reg: k as u32, idx: v(args.get(2))?, out: self.out_of(args.first().ok_or(what.clone())?, &what)? },
                None => unsupported(&mut self.code, format!("unsupported extern {name} (undeclared register)"), args),
            },
            "register_write" => match named(args.first(), "register_array").and_then(|n| objs.registers.iter().position(|r| r.0 == n)) {
                Some(k) => Extern::RegWrite { reg: k as u32, idx: v(args.get(1))?, v: v(args.get(2))? },
                None => unsupported(&mut self.code, format!("unsupported extern {name} (undeclared register)"), args),
            },
            "modify_field_with_hash_based_offset" => match named(args.get(2), "calculation").and_then(|n| objs.calc_ix.get(&n).copied()) {
                Some(k) => Extern::Hash {
                    out: self.out_of(args.first().ok_or(what.clone())?, &what)?,
                    base: v(args.get(1))?,
                    calc: k,
                    size: v(args.get(3))?,
                },
                None => unsupported(&mut self.code, format!("unsupported extern {name} (undeclared calculation)"), args),
            },
            "modify_field_rng_uniform" => Extern::Random {
                out: self.out_of(args.first().ok_or(what.clone())?, &what)?,
                lo: v(args.get(1))?,
                hi: v(args.get(2))?,
            },
            "clone_ingress_pkt_to_egress" | "clone_egress_pkt_to_egress" => match (meta(Meta::CloneSession), meta(Meta::CloneFieldList)) {
                (Some((c1, g1)), Some((c2, g2))) => Extern::Regs(vec![(c1, g1, v(args.first())?, 0x10000), (c2, g2, v(args.get(1))?, 0)]),
                _ => Extern::NoOp,
            },
            "resubmit" | "recirculate" | "generate_digest" => {
                let (m, a) = match name {
                    "resubmit" => (Meta::Resubmit, args.first()),
                    "recirculate" => (Meta::Recirculate, args.first()),
                    _ => (Meta::Learn, args.get(1)),
                };
                match meta(m) {
                    Some((c, g)) => Extern::Regs(vec![(c, g, v(a)?, 0)]),
                    None => Extern::NoOp,
                }
            }
            "add_entry" => {
                // add_entry(action name, its parameters.., expire time profile)
                let act = match args.first() {
                    Some(Arg::Name(_, n)) => self.d.actions.iter().position(|a| &a.name == n)
                        .ok_or_else(|| format!("{what}: expected an action name, found {n:?}"))?,
                    _ => return Err(format!("{what}: expected the action's name first")),
                };
                let np = self.d.actions[act].params.len();
                if args.len() != np + 2 || np > 16 {
                    return Err(format!("{what}: action {} takes {np} parameters: expected {} arguments (the action, its \
                                        parameters, the expire time profile), found {}", self.d.actions[act].name, np + 2, args.len()));
                }
                let params = args[1..=np].iter().map(|a| v(Some(a))).collect::<Result<Vec<_>, _>>()?;
                let misplaced = self.code.reasons.id("add_entry refused (not a miss of an add-on-miss table, or no such expire time profile)");
                Extern::AddEntry { action: act as u32, params, profile: v(args.last())?, misplaced }
            }
            "restart_expire_timer" => Extern::Restart { profile: None },
            "set_entry_expire_time" => Extern::Restart { profile: Some(v(args.first())?) },
            _ => unsupported(&mut self.code, format!("unsupported extern {name}"), args),
        })
    }
}

/// `flow::Meta` by the names the description gives them.
const META: &[(&str, Meta)] = &[
    ("IngressPort", Meta::IngressPort),
    ("PacketLength", Meta::PacketLength),
    ("InstanceType", Meta::InstanceType),
    ("EgressSpec", Meta::EgressSpec),
    ("EgressPort", Meta::EgressPort),
    ("McastGrp", Meta::McastGrp),
    ("EgressRid", Meta::EgressRid),
    ("Priority", Meta::Priority),
    ("IngressTimestamp", Meta::IngressTimestamp),
    ("EgressTimestamp", Meta::EgressTimestamp),
    ("ChecksumError", Meta::ChecksumError),
    ("ParserError", Meta::ParserError),
    ("CloneSession", Meta::CloneSession),
    ("CloneFieldList", Meta::CloneFieldList),
    ("Resubmit", Meta::Resubmit),
    ("Recirculate", Meta::Recirculate),
    ("Learn", Meta::Learn),
    ("Length", Meta::Length),
];

/// The calculation `algo` over the `bits` first bits of `input` (a bit
/// string, most significant bit first, zero-padded to whole bytes as BMv2's
/// `BufBuilder` pads it), truncated to `width` bits; None when `algo` is not
/// one of BMv2's ([`super::hash`]).
pub fn calculate(algo: &str, input: &[u8], bits: usize, width: u32) -> Option<u128> {
    let a = algo_named(algo)?;
    let n = bits.div_ceil(8).min(input.len());
    Some(a.hash(&input[..n]) as u128 & mask(width))
}

/// BMv2's algorithm `name`, built once per process (a CRC builds its table).
pub fn algo_named(name: &str) -> Option<Algo> {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<Algo>>>> = OnceLock::new();
    let mut m = CACHE.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    m.entry(name.to_string()).or_insert_with(|| Algo::from_name(name, None)).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_its_reference_sequence() {
        // the reference SplitMix64 (Vigna) from seed 0
        let mut r = SplitMix64(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        let mut r = SplitMix64(7);
        assert!((0..1000).all(|_| (5..=9).contains(&r.range(5, 9))));
    }

    proptest::proptest! {
        /// A planned input is the bytes the bit-string builder makes of the
        /// same fields (an invalid header's left out), whatever the cells
        /// hold above a field's width.
        #[test]
        fn a_planned_input_is_the_bit_strings_bytes(fields in proptest::collection::vec((1u32..=16, proptest::prelude::any::<u128>(), 0u8..3), 0..7)) {
            let mut cells: Vec<u128> = Vec::new();
            let mut inputs = Vec::new();
            let mut b = Bits::new();
            for &(k, v, valid) in &fields {
                cells.push(v);
                let cell = cells.len() as u32 - 1;
                // 0: no validity cell, 1: valid, 2: invalid
                let vc = (valid > 0).then(|| {
                    cells.push((valid == 1) as u128);
                    cells.len() as u32 - 1
                });
                inputs.push(CalcIn::Field { cell, width: 8 * k, limbs: 1, valid: vc });
                if valid != 2 {
                    push_cells(&mut b, &[v & mask(8 * k)], 8 * k);
                }
            }
            let c = Calc::new("c", None, inputs);
            if fields.iter().map(|f| f.0 as usize).sum::<usize>() > PLAN_BYTES {
                proptest::prop_assert!(c.plan.is_none());
                return Ok(());
            }
            let plan = c.plan.as_deref().expect("planned");
            let mut buf = [0u8; PLAN_BYTES + 16];
            let n = planned_input(plan, &cells, &mut buf);
            proptest::prop_assert_eq!(&buf[..n], b.bytes());
        }
    }

    #[test]
    fn inputs_not_of_whole_bytes_are_not_planned() {
        let f = |width| CalcIn::Field { cell: 0, width, limbs: 1, valid: None };
        assert!(Calc::new("c", None, vec![f(16), f(12)]).plan.is_none());
        assert!(Calc::new("c", None, vec![f(16), CalcIn::Payload]).plan.is_none());
        assert!(Calc::new("c", None, vec![CalcIn::Field { cell: 0, width: 136, limbs: 2, valid: None }]).plan.is_none());
        assert!(Calc::new("c", None, vec![f(128); 5]).plan.is_none());
        assert!(Calc::new("c", None, vec![f(128); 4]).plan.is_some());
    }

    #[test]
    fn fields_wider_than_64_bits_are_pushed_whole() {
        let mut b = Bits::new();
        push_cells(&mut b, &[0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10], 128);
        assert_eq!(b.bytes(), &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
        b.clear();
        push_cells(&mut b, &[0xab, 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10], 136);
        assert_eq!(b.bytes()[..2], [0xab, 1]);
        b.clear();
        push_cells(&mut b, &[0x1ff], 9);
        push_cells(&mut b, &[0x7f], 7);
        assert_eq!(b.bytes(), &[0xff, 0xff]);
    }
}
