//! The control flow: pipelines (ingress, then egress) of nodes, each a
//! table (keyed: build the key, look it up, record the visit, run the
//! entry's or the default action; keyless: run its default action) or a
//! conditional (an expression on the PHV), and where each goes next.
//!
//! As simple_switch does (and the interpreter): `exit` ends the current
//! pipeline; after a pipeline, a packet whose `egress_spec` is the drop
//! port (511) and whose `mcast_grp` is 0 is dropped (egress does not run
//! after a drop in ingress); `egress_port` takes `egress_spec` between
//! ingress and egress.

use super::action::{self, DROP_PORT};
use super::exec::{Program, Scratch, State, NONE};
use super::table::{Hit, Probe, TableHot};
use super::expr::{Code, Env, Expr, Fast};
use super::table::tainted_key;
use super::visits::Visits;

/// A node of a pipeline.
#[derive(Clone, Debug)]
pub enum Node {
    Table(u32),
    Cond(Cond),
}

#[derive(Clone, Debug)]
pub struct Cond {
    pub name: String,
    /// None: an expression the compiler could not lower (a fallback branch, taken false).
    pub e: Option<Expr>,
    pub on_true: i32,
    pub on_false: i32,
    /// Slots it reads that may hold a synthesized value.
    pub taint: Vec<u32>,
    /// What a fallback branch here is counted as.
    pub fallback: u32,
}

/// No action (a miss of a table without a default action).
pub const NO_ACTION: u32 = u32::MAX;

/// A condition's truth from its fast form, when it has one the pipeline
/// evaluates in place: nearly every condition is a field against a
/// constant or a field's truth, and skips the call into the evaluator.
#[inline(always)]
fn fast_truth(f: Fast, cells: &[u128]) -> Option<bool> {
    // a condition has no action parameters
    Code::quick(f, cells, &[]).map(|v| v != 0)
}

impl Program {
    /// Runs pipeline `pi` (its nodes from its init), appending the visits.
    pub fn run_pipeline(&self, pi: usize, st: &mut State, frame: &[u8], visits: &mut Visits, sc: &mut Scratch) {
        let Some(&(_, init)) = self.pipelines.get(pi) else { return };
        let mut n = init;
        while n >= 0 {
            n = match &self.nodes[n as usize] {
                Node::Table(t) => self.run_table(*t, st, frame, visits, sc),
                Node::Cond(c) => self.run_cond(c, st, frame),
            };
        }
    }

    /// Runs the pipelines; true when the packet is dropped (at the end of
    /// pipeline `st.drop_pipeline`).
    pub fn run_pipelines(&self, st: &mut State, frame: &[u8], visits: &mut Visits, sc: &mut Scratch) -> bool {
        for (pi, &(_, init)) in self.pipelines.iter().enumerate() {
            let mut n = init;
            while n >= 0 {
                n = match &self.nodes[n as usize] {
                    Node::Table(t) => self.run_table(*t, st, frame, visits, sc),
                    Node::Cond(c) => self.run_cond(c, st, frame),
                };
            }
            if let Some((spec, _)) = self.std.egress_spec {
                let mcast = self.std.mcast_grp.map_or(0, |(c, _)| st.phv.cells[c as usize]);
                if st.phv.cells[spec as usize] == DROP_PORT && mcast == 0 {
                    st.drop_pipeline = pi as u32;
                    return true;
                }
                if pi == 0 {
                    if let Some((port, g)) = self.std.egress_port {
                        st.phv.cells[port as usize] = st.phv.cells[spec as usize] & self.std.egress_port_mask;
                        st.phv.mark(g);
                    }
                }
            }
        }
        false
    }

    fn run_cond(&self, c: &Cond, st: &mut State, frame: &[u8]) -> i32 {
        let Some(e) = c.e else {
            st.note_inexact(c.fallback);
            return c.on_false;
        };
        if !c.taint.is_empty() && c.taint.iter().any(|&s| st.tainted(s)) {
            st.note_inexact(c.fallback);
        }
        let cells = &st.phv.cells;
        let v = match fast_truth(e.fast, cells) {
            Some(v) => v,
            None => {
                let mut why = u32::MAX;
                let v = self.code.eval(e, &Env { cells, params: &[], frame, pos: st.pos }, &mut why).unwrap_or(0);
                if why != u32::MAX {
                    st.note_inexact(why);
                }
                v != 0
            }
        };
        if v {
            c.on_true
        } else {
            c.on_false
        }
    }

    fn run_table(&self, ti: u32, st: &mut State, frame: &[u8], visits: &mut Visits, sc: &mut Scratch) -> i32 {
        let th = self.hot[ti as usize];
        if th.keyed == u16::MAX {
            let h = th.miss;
            if h.action != NO_ACTION && self.run_action(h.action, &self.data[(th.data + h.data) as usize..], st, frame) {
                return -1;
            }
            return h.next;
        }
        let index = &self.indexes[ti as usize];
        if th.probe != Probe::General {
            // one field, one word (see Probe): pushed as the visit's key and probed
            let w = TableHot::word(&self.key_hot[th.keys as usize], &st.phv.cells);
            visits.key_words.push(w);
            let entry = index.lookup_one(th.probe, w);
            return self.applied(th, entry, st, frame, visits);
        }
        let keys = &self.key_hot[th.keys as usize..th.keys as usize + th.nkeys as usize];
        // the key is built straight into the visit record and looked up there
        let at = visits.key_words.len();
        let entry = if th.one_word {
            let cells = &st.phv.cells;
            visits.key_words.extend(keys.iter().map(|k| TableHot::word(k, cells)));
            index.lookup_words(&visits.key_words[at..], &mut sc.vals)
        } else {
            visits.key_words.resize(at + th.words as usize, 0);
            TableHot::key(keys, &st.phv.cells, &mut sc.vals, &mut visits.key_words[at..]);
            index.lookup(&sc.vals, &visits.key_words[at..])
        };
        if !th.plain {
            return self.run_table_cold(ti, th.keyed, entry, st, frame, visits, sc);
        }
        self.applied(th, entry, st, frame, visits)
    }

    /// A plain table's visit after its lookup: recorded, then its action; the next node.
    #[inline(always)]
    fn applied(&self, th: TableHot, entry: Option<u32>, st: &mut State, frame: &[u8], visits: &mut Visits) -> i32 {
        let h = entry.map_or(th.miss, |e| self.hits[(th.hits + e) as usize]);
        visits.close(th.keyed, entry.map_or(-1, |e| e as i32), h.action);
        st.nvisits += 1;
        if h.action != NO_ACTION && self.run_action(h.action, &self.data[(th.data + h.data) as usize..], st, frame) {
            return -1;
        }
        h.next
    }

    /// [`Self::run_table`] after the lookup, for a table that is not
    /// `plain`: synthesized key fields, add-on-miss, an action selector,
    /// direct counters or meters (read from its [`super::table::Table`] record).
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn run_table_cold(&self, ti: u32, keyed: u16, entry: Option<u32>, st: &mut State, frame: &[u8], visits: &mut Visits,
                      sc: &mut Scratch) -> i32 {
        let t = &self.tables[ti as usize];
        if !t.taint.is_empty() {
            if let Some(i) = tainted_key(t, st) {
                st.note_inexact(t.taint_reason[i]);
            }
        }
        if let Some(spec) = &t.learn {
            return self.run_learner(ti, keyed, spec, entry, st, frame, visits, sc);
        }
        let th = self.hot[ti as usize];
        let mut h = entry.map_or(t.miss, |e| self.hits[(th.hits + e) as usize]);
        if let Some(calc) = t.selector {
            // an action selector's group: the member its hash picks, in handle order (BMv2)
            let (start, len) = entry.map_or(t.default_group, |e| t.groups[e as usize]);
            if len > 0 {
                let hash = self.calculate(calc, st, frame);
                h = t.members[(start + super::selector::choose(hash, len as usize) as u32) as usize];
            }
        }
        visits.close(keyed, entry.map_or(-1, |e| e as i32), h.action);
        st.nvisits += 1;
        if let Some(e) = entry {
            if let (Some(color), Some((_, out))) = (st.ext.direct_hit(self, ti, e), t.meter) {
                st.phv.cells[out.dst.cell as usize] = color as u128 & out.mask;
                st.wrote(out.dst);
            }
        }
        if h.action != NO_ACTION && self.run_action(h.action, &self.data[(th.data + h.data) as usize..], st, frame) {
            return -1;
        }
        h.next
    }

    /// [`Self::run_table`] for an add-on-miss table (`super::learn`): a
    /// fixed entry, else a learned one, else the miss, whose action may add
    /// the packet's key.
    #[allow(clippy::too_many_arguments)]
    fn run_learner(&self, ti: u32, keyed: u16, spec: &super::learn::Spec, entry: Option<u32>, st: &mut State, frame: &[u8],
                   visits: &mut Visits, sc: &mut Scratch) -> i32 {
        let (t, th) = (&self.tables[ti as usize], self.hot[ti as usize]);
        let key = visits.open_key();
        let (number, h, slot) = match entry {
            Some(e) => (e as i32, self.hits[(th.hits + e) as usize], super::learn::FIXED),
            None => match st.learn[ti as usize].as_mut().unwrap().lookup(key, spec) {
                Some(l) => (l.number as i32, Hit { action: l.action, data: 0, next: l.next }, l.slot),
                None => (-1, t.miss, NONE),
            },
        };
        if h.action != NO_ACTION {
            st.learn_key.clear();
            st.learn_key.extend_from_slice(key);
        }
        visits.close(keyed, number, h.action);
        st.nvisits += 1;
        if h.action == NO_ACTION {
            return h.next;
        }
        st.learn_at = ti;
        st.learn_slot = slot;
        let exited = if slot == NONE || slot == super::learn::FIXED {
            self.run_action(h.action, &self.data[(th.data + h.data) as usize..], st, frame)
        } else {
            let mut data = std::mem::take(&mut sc.learned);
            data.clear();
            data.extend_from_slice(st.learn[ti as usize].as_ref().unwrap().data(slot));
            let x = self.run_action(h.action, &data, st, frame);
            sc.learned = data;
            x
        };
        st.learn_at = NONE;
        if exited {
            -1
        } else {
            h.next
        }
    }

    /// Runs action `a` with its data at the front of `data`; true on `exit`.
    #[inline]
    fn run_action(&self, a: u32, data: &[u128], st: &mut State, frame: &[u8]) -> bool {
        let act = &self.actions[a as usize];
        !act.ops.is_empty() && action::run(&act.ops, &data[..act.params.len()], self, st, frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The in-place fast forms answer as the evaluator's.
        #[test]
        fn fast_conditions_equal_the_evaluator(cells in proptest::collection::vec(prop_oneof![any::<u128>(), 0u128..4], 4),
                                               x in 0u32..4, m in prop_oneof![any::<u128>(), Just(u128::MAX), 0u128..4],
                                               k in prop_oneof![any::<u128>(), 0u128..4], kind in 0usize..3) {
            let f = [Fast::MaskEq(x, m, k), Fast::MaskNe(x, m, k), Fast::Field(x)][kind];
            let e = Expr { start: 0, end: 0, narrow: false, ops64: false, fast: f };
            let mut why = u32::MAX;
            let v = Code::default().eval(e, &Env { cells: &cells, params: &[], frame: &[], pos: 0 }, &mut why).unwrap();
            prop_assert_eq!(fast_truth(f, &cells), Some(v != 0));
        }
    }
}
