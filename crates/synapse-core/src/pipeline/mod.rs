//! The pipeline a PHV crosses: a control-flow graph (a DAG) of logical tables.
//!
//! For synthetic programs a PHV leaving table i goes to table j with
//! probability P_ij and leaves the pipeline with the rest (paper §5's routing
//! matrix). In the RMT model each table (stage) has one waiting FIFO, the
//! VMU's PHV buffer ([`crate::hw::vmu`]), fed by the stage's input FIFO.

/// Where a PHV goes next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    Table(u16),
    Exit,
}

#[derive(Clone, Debug)]
pub struct Cfg {
    /// Per table: (destination, cumulative probability).
    out: Vec<Vec<(u16, f64)>>,
    /// Entry tables with cumulative shares (normalised to 1).
    entry: Vec<(u16, f64)>,
}

impl Cfg {
    /// `edges` as (src, dst, p); `entry` as (table, share). Errors name the
    /// offending table.
    pub fn new(
        tables: usize,
        edges: &[(u16, u16, f64)],
        entry: &[(u16, f64)],
    ) -> Result<Cfg, String> {
        let mut out: Vec<Vec<(u16, f64)>> = vec![Vec::new(); tables];
        for &(s, d, p) in edges {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("edge {s}->{d}: probability {p} not in [0, 1]"));
            }
            if s as usize >= tables || d as usize >= tables {
                return Err(format!("edge {s}->{d}: no such table"));
            }
            let acc = out[s as usize].last().map_or(0.0, |x| x.1) + p;
            if acc > 1.0 + 1e-9 {
                return Err(format!(
                    "table {s}: outgoing probabilities sum to {acc} > 1"
                ));
            }
            out[s as usize].push((d, acc));
        }
        // A DAG: Kahn's algorithm.
        let mut indeg = vec![0usize; tables];
        for o in &out {
            for &(d, _) in o {
                indeg[d as usize] += 1;
            }
        }
        let mut stack: Vec<usize> = (0..tables).filter(|&t| indeg[t] == 0).collect();
        let mut seen = 0;
        while let Some(t) = stack.pop() {
            seen += 1;
            for &(d, _) in &out[t] {
                indeg[d as usize] -= 1;
                if indeg[d as usize] == 0 {
                    stack.push(d as usize);
                }
            }
        }
        if seen != tables {
            return Err("the edges form a cycle; the CFG must be a DAG".into());
        }
        let entry = cumulative(tables, entry)?;
        Ok(Cfg { out, entry })
    }

    /// New entry shares (a traffic mix that shifts while the pipeline runs);
    /// the edges stay.
    pub fn set_entry(&mut self, entry: &[(u16, f64)]) -> Result<(), String> {
        self.entry = cumulative(self.out.len(), entry)?;
        Ok(())
    }

    /// A single table, entered by everything.
    pub fn single() -> Cfg {
        Cfg {
            out: vec![Vec::new()],
            entry: vec![(0, 1.0)],
        }
    }

    /// The next hop from `src` for a uniform draw `u` in [0, 1).
    #[inline]
    pub fn next(&self, src: u16, u: f64) -> Next {
        for &(d, c) in &self.out[src as usize] {
            if u < c {
                return Next::Table(d);
            }
        }
        Next::Exit
    }
    /// Whether `src` has outgoing edges (no draw needed otherwise).
    pub fn has_out(&self, src: u16) -> bool {
        !self.out[src as usize].is_empty()
    }
    /// The entry table for a uniform draw `u`.
    #[inline]
    pub fn entry(&self, u: f64) -> u16 {
        for &(t, c) in &self.entry {
            if u < c {
                return t;
            }
        }
        self.entry.last().unwrap().0
    }
    pub fn single_entry(&self) -> Option<u16> {
        (self.entry.len() == 1).then(|| self.entry[0].0)
    }
}

/// Entry shares normalised to a cumulative distribution.
fn cumulative(tables: usize, entry: &[(u16, f64)]) -> Result<Vec<(u16, f64)>, String> {
    if let Some(&(t, s)) = entry.iter().find(|&&(t, s)| t as usize >= tables || !(s >= 0.0)) {
        return Err(format!("entry share {s} of table {t}: no such table or not >= 0"));
    }
    let total: f64 = entry.iter().map(|e| e.1).sum();
    if entry.is_empty() || total <= 0.0 {
        return Err("no entry table with a positive share".into());
    }
    let mut acc = 0.0;
    Ok(entry
        .iter()
        .map(|&(t, s)| {
            acc += s / total;
            (t, acc)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_by_cumulative_probability_rest_exits() {
        let c = Cfg::new(3, &[(0, 1, 0.6), (0, 2, 0.3)], &[(0, 1.0)]).unwrap();
        assert_eq!(c.next(0, 0.0), Next::Table(1));
        assert_eq!(c.next(0, 0.5999), Next::Table(1));
        assert_eq!(c.next(0, 0.6), Next::Table(2));
        assert_eq!(c.next(0, 0.9), Next::Exit);
        assert_eq!(c.next(1, 0.0), Next::Exit);
    }

    #[test]
    fn rejects_cycles_and_overfull_tables() {
        assert!(Cfg::new(2, &[(0, 1, 0.5), (1, 0, 0.5)], &[(0, 1.0)])
            .unwrap_err()
            .contains("cycle"));
        assert!(Cfg::new(2, &[(0, 1, 0.7), (0, 1, 0.7)], &[(0, 1.0)])
            .unwrap_err()
            .contains("sum"));
        assert!(Cfg::new(2, &[], &[]).is_err());
    }

    #[test]
    fn entry_shares_can_shift() {
        let mut c = Cfg::new(2, &[], &[(0, 1.0)]).unwrap();
        assert_eq!(c.single_entry(), Some(0));
        c.set_entry(&[(0, 1.0), (1, 3.0)]).unwrap();
        assert_eq!((c.entry(0.2), c.entry(0.3), c.single_entry()), (0, 1, None));
        assert!(c.set_entry(&[(2, 1.0)]).is_err());
        assert!(c.set_entry(&[(0, 0.0)]).is_err());
        assert_eq!(c.entry(0.3), 1, "a rejected mix leaves the old one");
    }

    #[test]
    fn entry_shares_are_normalised() {
        let c = Cfg::new(2, &[], &[(0, 1.0), (1, 3.0)]).unwrap();
        assert_eq!(c.entry(0.2), 0);
        assert_eq!(c.entry(0.3), 1);
    }
}
