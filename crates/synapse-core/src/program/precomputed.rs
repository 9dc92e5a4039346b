//! A [`RunPacket`] that replays what another executor computed for a batch:
//! the Python interpreter's visits (`synapse_vmt.p4.interp`, until the
//! compiled program runs in Rust), handed over per batch across PyO3 and
//! consumed packet by packet by the same streaming consumer as a native
//! executor's. It ignores the frames: the batch must be the held frames,
//! in order ([`super::stream::Stream::run_held`]).

use super::{Outcome, Outputs, RunPacket, Visits};

/// Precomputed visits and outcomes of one batch (see the module doc).
pub struct Precomputed {
    key_words: Vec<usize>,
    reasons: Vec<String>,
    visits: Visits,
    outcome: Vec<Outcome>,
    reason: Vec<u32>,
    next: usize,
}

impl Precomputed {
    /// An executor of a program whose keyed table t has `key_words[t]`
    /// words; `reasons` names the drop reasons.
    pub fn new(key_words: Vec<usize>, reasons: Vec<String>) -> Self {
        Precomputed { key_words, reasons, visits: Visits::new(), outcome: Vec::new(), reason: Vec::new(), next: 0 }
    }

    /// The next batch: its visits (one packet per frame) and per packet
    /// its outcome and drop reason.
    pub fn load(&mut self, visits: Visits, outcome: Vec<Outcome>, reason: Vec<u32>) -> Result<(), String> {
        if visits.packets() != outcome.len() || reason.len() != outcome.len() {
            return Err(format!(
                "precomputed batch: {} packets of visits, {} outcomes, {} drop reasons",
                visits.packets(),
                outcome.len(),
                reason.len()
            ));
        }
        if visits.key_start.len() != visits.len() + 1 || visits.entry.len() != visits.len() || visits.action.len() != visits.len() {
            return Err("precomputed batch: visit columns differ in length".into());
        }
        if visits.pkt_start.windows(2).any(|w| w[1] < w[0]) || visits.key_start.windows(2).any(|w| w[1] < w[0])
            || *visits.pkt_start.last().unwrap() as usize != visits.len()
            || *visits.key_start.last().unwrap() as usize != visits.key_words.len()
        {
            return Err("precomputed batch: pkt_start / key_start must be non-decreasing offsets ending at the visits / key words".into());
        }
        if let Some(&r) = reason.iter().find(|&&r| r as usize >= self.reasons.len().max(1)) {
            return Err(format!("precomputed batch: drop reason {r} of {}", self.reasons.len()));
        }
        self.visits = visits;
        self.outcome = outcome;
        self.reason = reason;
        self.next = 0;
        Ok(())
    }

    /// Packets of the batch not yet run.
    pub fn remaining(&self) -> usize {
        self.outcome.len() - self.next
    }
}

impl RunPacket for Precomputed {
    fn tables(&self) -> usize {
        self.key_words.len()
    }

    fn key_words(&self, t: usize) -> usize {
        self.key_words[t]
    }

    fn run(&mut self, _frame: &[u8], _port: u32, _now_ps: u64, visits: &mut Visits, _outputs: Option<&mut Outputs>) -> Outcome {
        // Past the batch (a caller's bug): a packet that visited nothing.
        let p = self.next;
        self.next += 1;
        if p >= self.outcome.len() {
            visits.end_packet();
            return Outcome::default();
        }
        for i in self.visits.of_packet(p) {
            visits.push(self.visits.table[i], self.visits.entry[i], self.visits.action[i], self.visits.key(i));
        }
        visits.end_packet();
        self.outcome[p]
    }

    fn drop_reason(&self) -> u32 {
        self.next.checked_sub(1).and_then(|p| self.reason.get(p)).copied().unwrap_or(0)
    }

    fn drop_reasons(&self) -> Vec<String> {
        self.reasons.clone()
    }
}
