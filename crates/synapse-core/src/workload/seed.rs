//! ClassBench parameter ("seed") files: the statistics of a real filter set
//! that drive the filter generator (Taylor & Turner, "ClassBench: a packet
//! classification benchmark", WUCSE-2004-28, §4; format as in the README of
//! ClassBench's `db_generator`).
//!
//! A file is a list of sections, each opened by a `-name` line and closed
//! by a `#` line:
//! - `-scale`: rules in the set the seed was taken from;
//! - `-prots`: `proto prob p0 .. p24`, the protocol mix and, per protocol,
//!   the distribution of the 25 port-pair classes ([`PPC`]);
//! - `-flags`: `proto 0xVALUE/0xMASK,prob ...` (ClassBench-ng's flags);
//! - `-extra`: number of extra fields (only 0 is supported);
//! - `-spar`/`-spem`/`-dpar`/`-dpem`: `prob lo:hi`, the arbitrary ranges and
//!   exact ports of source and destination ports;
//! - one section per port-pair class (`-wc_wc` .. `-em_em`):
//!   `total,prob  src,prob src,prob ...`, the joint prefix-length
//!   distribution as a total length and the source length given the total;
//! - `-snest`/`-dnest`: the most prefixes on one path of the address trie;
//! - `-sskew`/`-dskew`: `level p_one_child p_two_children skew`, the shape
//!   of the address tries;
//! - `-pcorr`: `level prob`, the chance that source and destination
//!   addresses keep following the same path at that level.

use crate::rules::{Flags, ParseError};

/// Class of a port range (ClassBench §4.1): wildcard, the high ports
/// `1024:65535`, the low ports `0:1023`, an arbitrary range, an exact port.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum PortClass {
    Wc,
    Hi,
    Lo,
    Ar,
    Em,
}

impl PortClass {
    pub const ALL: [PortClass; 5] = [PortClass::Wc, PortClass::Hi, PortClass::Lo, PortClass::Ar, PortClass::Em];

    /// The class of an inclusive port range.
    pub fn of(lo: u32, hi: u32) -> PortClass {
        match (lo, hi) {
            (0, 65535) => PortClass::Wc,
            (1024, 65535) => PortClass::Hi,
            (0, 1023) => PortClass::Lo,
            _ if lo == hi => PortClass::Em,
            _ => PortClass::Ar,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            PortClass::Wc => "wc",
            PortClass::Hi => "hi",
            PortClass::Lo => "lo",
            PortClass::Ar => "ar",
            PortClass::Em => "em",
        }
    }
}

use PortClass::{Ar, Em, Hi, Lo, Wc};

/// The 25 port-pair classes (source, destination) in the column order of
/// `-prots` and of ClassBench's `select_ports`.
pub const PPC: [(PortClass, PortClass); 25] = [
    (Wc, Wc), (Wc, Hi), (Hi, Wc), (Hi, Hi), (Wc, Lo), (Lo, Wc), (Hi, Lo), (Lo, Hi), (Lo, Lo),
    (Wc, Ar), (Ar, Wc), (Hi, Ar), (Ar, Hi), (Wc, Em), (Em, Wc), (Hi, Em), (Em, Hi),
    (Lo, Ar), (Ar, Lo), (Lo, Em), (Em, Lo), (Ar, Ar), (Ar, Em), (Em, Ar), (Em, Em),
];

/// Section name of port-pair class `i`, e.g. `wc_em`.
pub fn ppc_name(i: usize) -> String {
    format!("{}_{}", PPC[i].0.name(), PPC[i].1.name())
}

/// One protocol of `-prots`.
#[derive(Clone, PartialEq, Debug)]
pub struct Protocol {
    /// Protocol number; 0 stands for the wildcard protocol (`0x00/0x00`).
    pub proto: u8,
    pub prob: f64,
    /// Probability of each port-pair class, in [`PPC`] order.
    pub ppc: [f64; 25],
    /// Line of the file it came from (for errors found after parsing).
    pub line: usize,
}

/// A port range with its probability (`-spar` .. `-dpem`).
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct PortRange {
    pub prob: f64,
    pub lo: u16,
    pub hi: u16,
}

/// A total prefix length with its probability and the distribution of the
/// source length given that total.
#[derive(Clone, PartialEq, Debug)]
pub struct TotalLen {
    pub total: u8,
    pub prob: f64,
    pub src: Vec<(u8, f64)>,
}

/// Shape of one level of an address trie.
#[derive(Clone, Copy, PartialEq, Default, Debug)]
pub struct Skew {
    pub p_one: f64,
    pub p_two: f64,
    /// For nodes with two children: 1 - (light subtree / heavy subtree).
    pub skew: f64,
}

/// All the parameters of one seed file.
#[derive(Clone, PartialEq, Debug)]
pub struct Params {
    pub scale: u32,
    pub prots: Vec<Protocol>,
    /// Per protocol number, the flag specifications and their probabilities.
    pub flags: Vec<(u8, Vec<(Flags, f64)>)>,
    pub spar: Vec<PortRange>,
    pub spem: Vec<PortRange>,
    pub dpar: Vec<PortRange>,
    pub dpem: Vec<PortRange>,
    /// Prefix-length pair distribution per port-pair class.
    pub prefix: Vec<Vec<TotalLen>>,
    pub snest: u32,
    pub dnest: u32,
    pub sskew: [Skew; 33],
    pub dskew: [Skew; 33],
    pub pcorr: [f64; 33],
}

/// The built-in seeds, copied from ClassBench's `parameter_files` (the
/// `acl1_seed`, `fw1_seed` and `ipc1_seed` that ship with db_generator,
/// derived from real ACL, firewall and IP-chain sets).
pub const BUILTIN: [(&str, &str); 3] = [
    ("acl", include_str!("../../data/classbench/acl1_seed")),
    ("fw", include_str!("../../data/classbench/fw1_seed")),
    ("ipc", include_str!("../../data/classbench/ipc1_seed")),
];

impl Params {
    /// The parameters of a built-in type: `acl`, `fw` or `ipc`.
    pub fn builtin(kind: &str) -> Option<Params> {
        let (_, text) = BUILTIN.iter().find(|(k, _)| *k == kind)?;
        Some(Params::parse(text, &format!("<builtin {kind}1_seed>")).expect("built-in seed parses"))
    }

    /// Parses a seed file; errors name the file and line.
    pub fn parse(text: &str, file: &str) -> Result<Params, ParseError> {
        Parser { file, lines: text.lines().enumerate().peekable() }.params()
    }
}

const PREFIX_SECTIONS: usize = 25;

struct Parser<'a, I: Iterator<Item = (usize, &'a str)>> {
    file: &'a str,
    lines: std::iter::Peekable<I>,
}

fn num<T: std::str::FromStr>(tok: &str, what: &str) -> Result<T, String> {
    tok.parse::<T>().map_err(|_| format!("expected {what}, found {tok:?}"))
}

fn prob(tok: &str) -> Result<f64, String> {
    let p: f64 = num(tok, "a probability")?;
    if !(0.0..=1.0 + 1e-6).contains(&p) {
        return Err(format!("expected a probability in 0..1, found {tok:?}"));
    }
    Ok(p)
}

fn pair<'t>(tok: &'t str, sep: char, what: &str) -> Result<(&'t str, &'t str), String> {
    tok.split_once(sep).ok_or_else(|| format!("expected {what}, found {tok:?}"))
}

fn port_range(line: &str) -> Result<PortRange, String> {
    let t: Vec<&str> = line.split_whitespace().collect();
    if t.len() != 2 {
        return Err(format!("expected 'probability lo:hi', found {} fields", t.len()));
    }
    let (lo, hi) = pair(t[1], ':', "a port range lo:hi")?;
    let (lo, hi): (u16, u16) = (num(lo, "a port 0..65535")?, num(hi, "a port 0..65535")?);
    if lo > hi {
        return Err(format!("port range {lo}:{hi} is empty (low above high)"));
    }
    Ok(PortRange { prob: prob(t[0])?, lo, hi })
}

fn hex16(tok: &str) -> Option<u16> {
    let d = tok.strip_prefix("0x").or_else(|| tok.strip_prefix("0X"))?;
    u16::from_str_radix(d, 16).ok()
}

impl<'a, I: Iterator<Item = (usize, &'a str)>> Parser<'a, I> {
    fn err(&self, line: usize, m: impl Into<String>) -> ParseError {
        ParseError { file: self.file.to_string(), line, message: m.into() }
    }

    /// The body lines of the current section up to its closing `#`, with
    /// 1-based line numbers; blank lines skipped.
    fn body(&mut self, name: &str, start: usize) -> Result<Vec<(usize, &'a str)>, ParseError> {
        let mut out = Vec::new();
        for (i, l) in self.lines.by_ref() {
            let t = l.trim();
            if t == "#" {
                return Ok(out);
            }
            if t.is_empty() {
                continue;
            }
            if t.starts_with('-') && t[1..].starts_with(|c: char| c.is_ascii_alphabetic()) {
                return Err(self.err(i + 1, format!("expected '#' closing section -{name} before {t}")));
            }
            out.push((i + 1, l));
        }
        Err(self.err(start, format!("section -{name} is not closed by '#' before the end of the file")))
    }

    fn params(mut self) -> Result<Params, ParseError> {
        let mut scale = None;
        let mut prots: Option<Vec<Protocol>> = None;
        let mut flags = Vec::new();
        let (mut spar, mut spem, mut dpar, mut dpem) = (vec![], vec![], vec![], vec![]);
        let mut prefix: Vec<Vec<TotalLen>> = vec![Vec::new(); PREFIX_SECTIONS];
        let (mut snest, mut dnest) = (None, None);
        let mut sskew = None;
        let mut dskew = None;
        let mut pcorr = [0.0; 33];
        let ppc_names: Vec<String> = (0..25).map(ppc_name).collect();
        while let Some((i, l)) = self.lines.next() {
            let t = l.trim();
            if t.is_empty() || t == "#" {
                continue;
            }
            let line = i + 1;
            let name = t
                .strip_prefix('-')
                .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
                .ok_or_else(|| self.err(line, format!("expected a section name such as -prots, found {t:?}")))?
                .to_string();
            let body = self.body(&name, line)?;
            let e = |m: String, at: usize| ParseError { file: self.file.to_string(), line: at, message: m };
            let single = |what: &str| -> Result<u32, ParseError> {
                match body.as_slice() {
                    [(at, v)] => num::<u32>(v.trim(), what).map_err(|m| e(m, *at)),
                    _ => Err(e(format!("expected one line holding {what} in -{name}"), line)),
                }
            };
            match name.as_str() {
                "scale" => scale = Some(single("the seed's rule count")?),
                "snest" => snest = Some(single("the source nesting limit")?),
                "dnest" => dnest = Some(single("the destination nesting limit")?),
                "extra" => {
                    let n = single("the number of extra fields")?;
                    if n != 0 {
                        return Err(e(format!("extra fields are not supported (found {n}, expected 0)"), body[0].0));
                    }
                }
                "prots" => {
                    let mut v = Vec::new();
                    for &(at, l) in &body {
                        v.push(protocol(l).map_err(|m| e(m, at))?);
                        v.last_mut().unwrap().line = at;
                    }
                    prots = Some(v);
                }
                "flags" => {
                    for &(at, l) in &body {
                        flags.push(flag_line(l).map_err(|m| e(m, at))?);
                    }
                }
                "spar" | "spem" | "dpar" | "dpem" => {
                    let mut v = Vec::new();
                    for &(at, l) in &body {
                        v.push(port_range(l).map_err(|m| e(m, at))?);
                    }
                    match name.as_str() {
                        "spar" => spar = v,
                        "spem" => spem = v,
                        "dpar" => dpar = v,
                        _ => dpem = v,
                    }
                }
                "sskew" | "dskew" => {
                    let mut s = [Skew::default(); 33];
                    for &(at, l) in &body {
                        let (lev, k) = skew_line(l).map_err(|m| e(m, at))?;
                        s[lev] = k;
                    }
                    if name == "sskew" { sskew = Some(s) } else { dskew = Some(s) }
                }
                "pcorr" => {
                    for &(at, l) in &body {
                        let t: Vec<&str> = l.split_whitespace().collect();
                        if t.len() != 2 {
                            return Err(e(format!("expected 'level probability', found {} fields", t.len()), at));
                        }
                        let lev: usize = num(t[0], "a level 0..32").map_err(|m| e(m, at))?;
                        if lev > 32 {
                            return Err(e(format!("expected a level 0..32, found {lev}"), at));
                        }
                        pcorr[lev] = prob(t[1]).map_err(|m| e(m, at))?;
                    }
                }
                n => {
                    let k = ppc_names.iter().position(|p| p == n).ok_or_else(|| {
                        e(format!("unknown section -{n} (expected -scale, -prots, -flags, -extra, -spar, -spem, -dpar, -dpem, a port-pair class such as -wc_em, -snest, -sskew, -dnest, -dskew or -pcorr)"), line)
                    })?;
                    let mut v = Vec::new();
                    for &(at, l) in &body {
                        v.push(total_len(l).map_err(|m| e(m, at))?);
                    }
                    prefix[k] = v;
                }
            }
        }
        let missing = |s: &str| ParseError { file: self.file.to_string(), line: 0, message: format!("missing section -{s}") };
        let p = Params {
            scale: scale.ok_or_else(|| missing("scale"))?,
            prots: prots.ok_or_else(|| missing("prots"))?,
            flags,
            spar,
            spem,
            dpar,
            dpem,
            prefix,
            snest: snest.ok_or_else(|| missing("snest"))?,
            dnest: dnest.ok_or_else(|| missing("dnest"))?,
            sskew: sskew.ok_or_else(|| missing("sskew"))?,
            dskew: dskew.ok_or_else(|| missing("dskew"))?,
            pcorr,
        };
        p.check(self.file)?;
        Ok(p)
    }
}

fn protocol(l: &str) -> Result<Protocol, String> {
    let t: Vec<&str> = l.split_whitespace().collect();
    if t.len() != 27 {
        return Err(format!(
            "expected 'protocol probability' and 25 port-pair class probabilities, found {} fields",
            t.len()
        ));
    }
    let proto: u8 = num(t[0], "a protocol number 0..255")?;
    let mut ppc = [0.0; 25];
    for (k, tok) in t[2..].iter().enumerate() {
        ppc[k] = prob(tok)?;
    }
    Ok(Protocol { proto, prob: prob(t[1])?, ppc, line: 0 })
}

fn flag_line(l: &str) -> Result<(u8, Vec<(Flags, f64)>), String> {
    let mut t = l.split_whitespace();
    let proto: u8 = num(t.next().unwrap_or(""), "a protocol number 0..255")?;
    let mut v = Vec::new();
    for tok in t {
        let (spec, p) = pair(tok, ',', "0xVALUE/0xMASK,probability")?;
        let (val, mask) = pair(spec, '/', "flags as 0xVALUE/0xMASK")?;
        let (value, mask) = hex16(val)
            .zip(hex16(mask))
            .ok_or_else(|| format!("expected flags as 0xVALUE/0xMASK (16-bit hex), found {spec:?}"))?;
        v.push((Flags { value, mask }, prob(p)?));
    }
    if v.is_empty() {
        return Err("expected at least one 0xVALUE/0xMASK,probability after the protocol".into());
    }
    Ok((proto, v))
}

fn skew_line(l: &str) -> Result<(usize, Skew), String> {
    let t: Vec<&str> = l.split_whitespace().collect();
    if t.len() != 4 {
        return Err(format!("expected 'level p_one_child p_two_children skew', found {} fields", t.len()));
    }
    let lev: usize = num(t[0], "a level 0..32")?;
    if lev > 32 {
        return Err(format!("expected a level 0..32, found {lev}"));
    }
    Ok((lev, Skew { p_one: prob(t[1])?, p_two: prob(t[2])?, skew: prob(t[3])? }))
}

fn total_len(l: &str) -> Result<TotalLen, String> {
    let mut t = l.split_whitespace();
    let (tot, p) = pair(t.next().unwrap_or(""), ',', "total_length,probability")?;
    let total: u8 = num(tot, "a total prefix length 0..64")?;
    if total > 64 {
        return Err(format!("expected a total prefix length 0..64, found {total}"));
    }
    let mut src = Vec::new();
    for tok in t {
        let (s, sp) = pair(tok, ',', "source_length,probability")?;
        let s: u8 = num(s, "a source prefix length 0..32")?;
        if s > 32 || total < s || total - s > 32 {
            return Err(format!("source length {s} does not fit total length {total} (each side 0..32)"));
        }
        src.push((s, prob(sp)?));
    }
    if src.iter().all(|&(_, p)| p <= 0.0) {
        return Err(format!("expected source lengths with probabilities after total length {total}"));
    }
    Ok(TotalLen { total, prob: prob(p)?, src })
}

impl Params {
    /// Whole-file checks: every port-pair class a protocol can pick has the
    /// port lists and prefix lengths it needs.
    fn check(&self, file: &str) -> Result<(), ParseError> {
        let e = |line, m: String| ParseError { file: file.to_string(), line, message: m };
        if self.prots.iter().all(|p| p.prob <= 0.0) {
            return Err(e(0, "-prots gives no protocol a positive probability".into()));
        }
        for p in &self.prots {
            if p.prob > 0.0 && p.ppc.iter().all(|&x| x <= 0.0) {
                return Err(e(p.line, format!("protocol {} has no port-pair class with positive probability", p.proto)));
            }
            for (k, &x) in p.ppc.iter().enumerate() {
                if x <= 0.0 || p.prob <= 0.0 {
                    continue;
                }
                let (s, d) = PPC[k];
                let need = [(s, Ar, &self.spar, "spar"), (s, Em, &self.spem, "spem"), (d, Ar, &self.dpar, "dpar"), (d, Em, &self.dpem, "dpem")];
                for (c, want, list, sect) in need {
                    if c == want && list.iter().all(|r| r.prob <= 0.0) {
                        return Err(e(p.line, format!("protocol {} uses port-pair class {} but -{sect} is empty", p.proto, ppc_name(k))));
                    }
                }
                if self.prefix[k].iter().all(|t| t.prob <= 0.0) {
                    return Err(e(p.line, format!("protocol {} uses port-pair class {} but section -{} is empty", p.proto, ppc_name(k), ppc_name(k))));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_seeds_parse_with_their_sections() {
        let acl = Params::builtin("acl").unwrap();
        assert_eq!(acl.scale, 733);
        assert_eq!(acl.prots.iter().map(|p| p.proto).collect::<Vec<_>>(), [0, 1, 6, 17]);
        // TCP in acl1: 21.6% wc_wc, 13.1% wc_ar, 65.3% wc_em.
        let tcp = &acl.prots[2];
        assert!((tcp.ppc[0] - 0.215625).abs() < 1e-6 && (tcp.ppc[9] - 0.13125).abs() < 1e-6);
        assert!((tcp.ppc[13] - 0.653125).abs() < 1e-6 && ppc_name(13) == "wc_em");
        assert_eq!(acl.dpem[0], PortRange { prob: 0.18823530, lo: 1521, hi: 1521 });
        assert_eq!(acl.snest, 4);
        assert!((acl.pcorr[2] - 0.43708611).abs() < 1e-9);
        assert_eq!(acl.prefix[0].last().unwrap().total, 64);
        assert!(Params::builtin("fw").is_some() && Params::builtin("ipc").is_some());
        assert!(Params::builtin("route").is_none());
    }

    #[test]
    fn port_classes() {
        assert_eq!(PortClass::of(0, 65535), Wc);
        assert_eq!(PortClass::of(1024, 65535), Hi);
        assert_eq!(PortClass::of(0, 1023), Lo);
        assert_eq!(PortClass::of(80, 80), Em);
        assert_eq!(PortClass::of(80, 81), Ar);
    }

    fn replace(text: &str, from: &str, to: &str) -> String {
        assert!(text.contains(from));
        text.replacen(from, to, 1)
    }

    #[test]
    fn malformed_seeds_name_the_line() {
        let good = BUILTIN[0].1;
        let line_of = |needle: &str| good.lines().position(|l| l.contains(needle)).unwrap() + 1;
        let cases = [
            (replace(good, "0.08235294\t1600:1649", "0.08235294\t1649:1600"), line_of("1600:1649"), "empty"),
            (replace(good, "0.18823530\t1521:1521", "0.18823530 1521"), line_of("1521:1521"), "lo:hi"),
            (replace(good, "-snest\n4", "-snest\nfour"), line_of("-snest") + 1, "nesting"),
            (replace(good, "64,0.48878923", "65,0.48878923"), line_of("64,0.48878923"), "0..64"),
            (replace(good, "-pcorr", "-pcor"), line_of("-pcorr"), "unknown section"),
            (replace(good, "0x1000/0x1000,0.09375000", "0x1000/1000,0.09375000"), line_of("0x1000/0x1000"), "0xVALUE"),
        ];
        for (text, line, what) in cases {
            let e = Params::parse(&text, "s").unwrap_err();
            assert_eq!(e.line, line, "{e}");
            assert!(e.message.contains(what), "{e}");
        }
        let e = Params::parse("-scale\n10\n", "s").unwrap_err();
        assert!(e.to_string().contains("not closed"), "{e}");
        let e = Params::parse("-scale\n10\n#\n", "s").unwrap_err();
        assert_eq!(e.to_string(), "s: missing section -prots");
        // A protocol whose port-pair class has no ranges to draw from.
        let no_dpar = good.replace(
            &good[good.find("-dpar\n").unwrap()..good.find("-dpem").unwrap()],
            "-dpar\n#\n",
        );
        let e = Params::parse(&no_dpar, "s").unwrap_err();
        assert!(e.message.contains("-dpar is empty"), "{e}");
    }

    #[test]
    #[cfg_attr(not(synapse_shared), ignore = "needs ../shared/data (the developers' checkout)")]
    fn all_real_seeds_parse() {
        let dir = crate::testdata::shared("classbench/seeds");
        let mut n = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            Params::parse(&text, &path.display().to_string()).unwrap();
            n += 1;
        }
        assert_eq!(n, 12);
    }
}
