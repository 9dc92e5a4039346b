//! The ClassBench filter and trace formats (Taylor & Turner, ClassBench
//! technical report; ClassBench-ng adds a trailing flags field).
//!
//! Filter line, tab-separated, earlier lines winning:
//! `@src/len  dst/len  sport_lo : sport_hi  dport_lo : dport_hi  0xPROTO/0xMASK  [0xFLAGS/0xMASK]`
//!
//! Trace line, whitespace-separated decimals:
//! `src dst sport dport proto [flags [rule]]`, where `rule` is the 0-based
//! index of the rule the header was drawn from.

use super::{FieldMatch, Flags, Key, ParseError, Rule, RuleSet, Schema};
use std::fmt::Write as _;

/// One header of a trace, with the rule it was drawn from when known.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TraceEntry {
    pub key: Key,
    pub flags: u32,
    pub rule: Option<u32>,
}

fn err(file: &str, line: usize, message: impl Into<String>) -> ParseError {
    ParseError { file: file.to_string(), line, message: message.into() }
}

fn parse_ipv4_prefix(s: &str) -> Result<(u32, u8), String> {
    let (addr, len) = s
        .split_once('/')
        .ok_or_else(|| format!("expected an IPv4 prefix a.b.c.d/len, found {s:?}"))?;
    let mut v = 0u32;
    let mut n = 0;
    for part in addr.split('.') {
        let b: u8 = part
            .parse()
            .map_err(|_| format!("expected an IPv4 address a.b.c.d, found {addr:?}"))?;
        v = (v << 8) | b as u32;
        n += 1;
    }
    if n != 4 {
        return Err(format!("expected an IPv4 address a.b.c.d, found {addr:?}"));
    }
    let len: u8 = len
        .parse()
        .ok()
        .filter(|&l| l <= 32)
        .ok_or_else(|| format!("expected a prefix length 0..32, found {len:?}"))?;
    Ok((v, len))
}

fn parse_port_range(lo: &str, hi: &str) -> Result<(u32, u32), String> {
    let p = |s: &str| {
        s.parse::<u16>()
            .map_err(|_| format!("expected a port 0..65535, found {s:?}"))
    };
    let (lo, hi) = (p(lo)?, p(hi)?);
    if lo > hi {
        return Err(format!("port range {lo} : {hi} is empty (low above high)"));
    }
    Ok((lo as u32, hi as u32))
}

fn parse_hex_pair(s: &str, what: &str, max: u32) -> Result<(u32, u32), String> {
    let bad = || format!("expected {what} as 0xVALUE/0xMASK, found {s:?}");
    let (v, m) = s.split_once('/').ok_or_else(bad)?;
    let h = |x: &str| {
        let digits = x.strip_prefix("0x").or_else(|| x.strip_prefix("0X")).ok_or_else(bad)?;
        u32::from_str_radix(digits, 16).ok().filter(|&n| n <= max).ok_or_else(bad)
    };
    Ok((h(v)?, h(m)?))
}

/// Parses one filter line (without its line number) into a rule.
pub fn parse_rule_line(line: &str) -> Result<Rule, String> {
    let body = line
        .trim_start()
        .strip_prefix('@')
        .ok_or("expected a rule starting with '@'")?;
    // Fields are tab-separated, but the port ranges contain spaces around ':'.
    let tokens: Vec<&str> = body.split_whitespace().collect();
    if tokens.len() != 9 && tokens.len() != 10 {
        return Err(format!(
            "expected 5 fields (src dst sport dport proto) and an optional flags field, found {} tokens",
            tokens.len()
        ));
    }
    let (src, slen) = parse_ipv4_prefix(tokens[0])?;
    let (dst, dlen) = parse_ipv4_prefix(tokens[1])?;
    if tokens[3] != ":" || tokens[6] != ":" {
        return Err("expected port ranges written 'lo : hi'".into());
    }
    let (sp_lo, sp_hi) = parse_port_range(tokens[2], tokens[4])?;
    let (dp_lo, dp_hi) = parse_port_range(tokens[5], tokens[7])?;
    let (pv, pm) = parse_hex_pair(tokens[8], "the protocol", 0xff)?;
    let flags = match tokens.get(9) {
        Some(t) => {
            let (v, m) = parse_hex_pair(t, "the flags", 0xffff)?;
            Some(Flags { value: v as u16, mask: m as u16 })
        }
        None => None,
    };
    let mut rule = Rule::new(
        &[
            FieldMatch::prefix(src, slen, 32),
            FieldMatch::prefix(dst, dlen, 32),
            FieldMatch::range(sp_lo, sp_hi),
            FieldMatch::range(dp_lo, dp_hi),
            FieldMatch::ternary(pv, pm),
        ],
        0,
        0,
    );
    rule.flags = flags;
    Ok(rule)
}

/// Parses a whole ClassBench filter file. Blank lines are skipped. Priorities
/// are `len - index` and actions are the 0-based line index among rules.
pub fn parse_rules(text: &str, file: &str) -> Result<RuleSet, ParseError> {
    let mut rules = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let r = parse_rule_line(line).map_err(|m| err(file, i + 1, m))?;
        rules.push(r);
    }
    let n = rules.len() as u32;
    for (i, r) in rules.iter_mut().enumerate() {
        r.priority = n - i as u32;
        r.action = i as u32;
    }
    Ok(RuleSet::new(Schema::five_tuple(), rules))
}

fn fmt_ipv4(v: u32) -> String {
    format!("{}.{}.{}.{}", v >> 24, (v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff)
}

/// Writes one rule in the ClassBench format (with the flags field when the
/// rule has one). Fails when a field is not representable in the format.
pub fn format_rule(r: &Rule) -> Result<String, String> {
    let f = &r.fields;
    let s_len = f[0].prefix_len(32).ok_or("source is not a prefix")?;
    let d_len = f[1].prefix_len(32).ok_or("destination is not a prefix")?;
    let (sp_lo, sp_hi) = f[2].as_range(16).ok_or("source port is not a range")?;
    let (dp_lo, dp_hi) = f[3].as_range(16).ok_or("destination port is not a range")?;
    let (pv, pm) = if f[4].lo == f[4].hi { (f[4].lo, f[4].mask & 0xff) } else {
        return Err("protocol is not value/mask".into());
    };
    let mut s = String::new();
    let _ = write!(
        s,
        "@{}/{}\t{}/{}\t{} : {}\t{} : {}\t0x{:02x}/0x{:02X}\t",
        fmt_ipv4(f[0].lo), s_len, fmt_ipv4(f[1].lo), d_len, sp_lo, sp_hi, dp_lo, dp_hi, pv, pm
    );
    if let Some(fl) = r.flags {
        let _ = write!(s, "0x{:04x}/0x{:04x}\t", fl.value, fl.mask);
    }
    Ok(s)
}

/// Writes a rule set, one line per rule, in priority order.
pub fn format_rules(set: &RuleSet) -> Result<String, String> {
    let mut out = String::with_capacity(set.len() * 80);
    for (i, r) in set.rules.iter().enumerate() {
        out.push_str(&format_rule(r).map_err(|m| format!("rule {i}: {m}"))?);
        out.push('\n');
    }
    Ok(out)
}

/// Parses a ClassBench trace: 5 to 7 decimal columns per line.
pub fn parse_trace(text: &str, file: &str) -> Result<Vec<TraceEntry>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.is_empty() {
            continue;
        }
        if !(5..=7).contains(&cols.len()) {
            return Err(err(
                file,
                i + 1,
                format!("expected 'src dst sport dport proto [flags [rule]]', found {} columns", cols.len()),
            ));
        }
        let num = |j: usize, name: &str, max: u64| -> Result<u64, ParseError> {
            cols[j]
                .parse::<u64>()
                .ok()
                .filter(|&v| v <= max)
                .ok_or_else(|| err(file, i + 1, format!("expected {name} as a decimal 0..{max}, found {:?}", cols[j])))
        };
        let key = Key::five_tuple(
            num(0, "the source address", u32::MAX as u64)? as u32,
            num(1, "the destination address", u32::MAX as u64)? as u32,
            num(2, "the source port", 65535)? as u16,
            num(3, "the destination port", 65535)? as u16,
            num(4, "the protocol", 255)? as u8,
        );
        let flags = if cols.len() > 5 { num(5, "the flags", u32::MAX as u64)? as u32 } else { 0 };
        let rule = if cols.len() > 6 { Some(num(6, "the rule index", u32::MAX as u64)? as u32) } else { None };
        out.push(TraceEntry { key, flags, rule });
    }
    Ok(out)
}

/// Writes one trace line `src dst sport dport proto flags rule`.
pub fn format_trace_entry(e: &TraceEntry) -> String {
    let k = &e.key.0;
    match e.rule {
        Some(r) => format!("{}\t{}\t{}\t{}\t{}\t{}\t{}", k[0], k[1], k[2], k[3], k[4], e.flags, r),
        None => format!("{}\t{}\t{}\t{}\t{}\t{}", k[0], k[1], k[2], k[3], k[4], e.flags),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "@237.73.3.4/32\t67.236.63.0/24\t0 : 65535\t1711 : 1711\t0x06/0xFF\t0x0000/0x0200\t";

    #[test]
    fn parses_and_writes_back_a_classbench_ng_line() {
        let r = parse_rule_line(LINE).unwrap();
        assert!(r.matches(&Key::five_tuple(0xed49_0304, 0x43ec_3f99, 5, 1711, 6)));
        assert!(!r.matches(&Key::five_tuple(0xed49_0304, 0x43ec_4000, 5, 1711, 6)));
        assert_eq!(r.flags, Some(Flags { value: 0, mask: 0x200 }));
        assert_eq!(format_rule(&r).unwrap(), LINE);
    }

    #[test]
    fn original_five_field_format_has_no_flags() {
        let r = parse_rule_line("@0.0.0.0/0\t10.0.0.0/8\t0 : 65535\t80 : 80\t0x00/0x00").unwrap();
        assert_eq!(r.flags, None);
        assert!(r.matches(&Key::five_tuple(1, 0x0a00_0001, 9, 80, 17)));
    }

    #[test]
    fn errors_name_file_and_line() {
        let text = format!("{LINE}\n@1.2.3.4/33\t1.2.3.4/32\t0 : 1\t0 : 1\t0x06/0xFF\n");
        let e = parse_rules(&text, "r.txt").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().starts_with("r.txt:2: expected a prefix length"), "{e}");
        let e = parse_rule_line("@1.2.3.4/32\t1.2.3.4/32\t9 : 1\t0 : 1\t0x06/0xFF").unwrap_err();
        assert!(e.contains("empty"), "{e}");
    }

    #[test]
    fn trace_round_trip() {
        let t = parse_trace("1923697128\t2273746465\t0\t1221\t6\t4294967295\t261\n", "t").unwrap();
        assert_eq!(t[0].rule, Some(261));
        assert_eq!(t[0].key.0[3], 1221);
        assert_eq!(format_trace_entry(&t[0]), "1923697128\t2273746465\t0\t1221\t6\t4294967295\t261");
        assert!(parse_trace("1 2 3\n", "t").is_err());
        assert!(parse_trace("1 2 3 70000 6\n", "t").is_err());
    }
}
