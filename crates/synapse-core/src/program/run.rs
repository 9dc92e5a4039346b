//! The executor's face: what runs one packet, and what it reports besides
//! the packet's [`Visits`].
//!
//! [`RunPacket`] is implemented by the compiled program's executor; the
//! consumers of its output (capture streaming, route interning, the routed
//! simulator, counters, output pcaps) are written against this trait, so
//! they are tested with a stand-in and never depend on how a program runs.

use super::capture::Frames;
use super::Visits;

/// What happened to one packet besides its visits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The packet left no copy (dropped in ingress or egress, parser drop).
    pub dropped: bool,
    /// `standard_metadata.parser_error` after parsing (0: no error).
    pub parser_error: u32,
    /// Output packets it produced (unicast, multicast copies, clones).
    pub outputs: u32,
}

/// Output packets of a batch: the deparsed bytes and the egress port of
/// each, appended in order (`start` has one element more than there are
/// packets), with the index in the batch of the input packet each came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outputs {
    pub port: Vec<u32>,
    pub input: Vec<u32>,
    pub start: Vec<u32>,
    pub bytes: Vec<u8>,
}

impl Outputs {
    pub fn new() -> Self {
        Outputs { start: vec![0], ..Default::default() }
    }

    pub fn clear(&mut self) {
        self.port.clear();
        self.input.clear();
        self.bytes.clear();
        self.start.clear();
        self.start.push(0);
    }

    pub fn push(&mut self, port: u32, input: u32, bytes: &[u8]) {
        self.bytes.extend_from_slice(bytes);
        self.end_packet(port, input);
    }

    /// Ends the packet whose bytes were just appended to [`Self::bytes`].
    pub fn end_packet(&mut self, port: u32, input: u32) {
        self.port.push(port);
        self.input.push(input);
        self.start.push(self.bytes.len() as u32);
    }

    pub fn len(&self) -> usize {
        self.port.len()
    }

    pub fn is_empty(&self) -> bool {
        self.port.is_empty()
    }

    /// The bytes of output packet `i`.
    pub fn packet(&self, i: usize) -> &[u8] {
        &self.bytes[self.start[i] as usize..self.start[i + 1] as usize]
    }
}

/// Runs packets one at a time, in arrival order (state such as registers
/// carries from one packet to the next).
pub trait RunPacket {
    /// Keyed tables of the program (the `table` of a visit indexes them).
    fn tables(&self) -> usize;
    /// 32-bit words of table `t`'s key.
    fn key_words(&self, t: usize) -> usize;
    /// Runs one frame that arrived on `ingress_port` at `now_ps`: appends
    /// its visits to `visits` (ending the packet) and, when `outputs` is
    /// given, its output packets.
    fn run(&mut self, frame: &[u8], ingress_port: u32, now_ps: u64, visits: &mut Visits,
           outputs: Option<&mut Outputs>) -> Outcome;
    /// Runs every frame of `frames` in order (frame `i` arrived on
    /// `ports[i]` at `t_ps[i]`), appending as [`RunPacket::run`] does, and
    /// per frame its outcome with its drop reason (0 when not dropped) to
    /// `outcomes`. Generated code loaded as a library (`super::cdylib`)
    /// takes the whole batch in one call across the library boundary.
    fn run_batch(&mut self, frames: &Frames, ports: &[u32], t_ps: &[u64], visits: &mut Visits,
                 mut outputs: Option<&mut Outputs>, outcomes: &mut Vec<(Outcome, u32)>) -> Result<(), String> {
        for i in 0..frames.len() {
            let o = self.run(frames.frame(i), ports[i], t_ps[i], visits, outputs.as_deref_mut());
            outcomes.push((o, if o.dropped { self.drop_reason() } else { 0 }));
        }
        Ok(())
    }
    /// Why the last packet run was dropped (asked only when its outcome
    /// says dropped): an index into [`RunPacket::drop_reasons`].
    fn drop_reason(&self) -> u32 {
        0
    }
    /// The names of the drop reasons, by index.
    fn drop_reasons(&self) -> Vec<String> {
        vec!["dropped".into()]
    }
    /// Keep a log of the data-plane table writes from now on (`super::learn`).
    fn log_writes(&mut self) {}
    /// The data-plane table writes logged since the last call.
    fn take_writes(&mut self) -> Vec<super::learn::Write> {
        Vec::new()
    }
}
