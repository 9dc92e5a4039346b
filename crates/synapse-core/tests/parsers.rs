//! Random junk fed to every parser of user files (ClassBench rules, traces,
//! seed files): each must answer Ok or an Err naming a line, never panic.

use proptest::prelude::*;
use synapse_core::rules::classbench::{parse_rules, parse_trace};
use synapse_core::workload::seed::{Params, BUILTIN};

const RULES: &str = "@237.73.3.4/32\t67.236.63.0/24\t0 : 65535\t1711 : 1711\t0x06/0xFF\t0x0000/0x0200\t\n\
                     @0.0.0.0/0\t10.0.0.0/8\t1024 : 65535\t80 : 80\t0x00/0x00\t\n";
const TRACE: &str = "1923697128\t2273746465\t0\t1221\t6\t4294967295\t261\n3980985135 864035178 65535 0 6\n";

/// A valid text with one byte replaced, a slice cut out, or truncated.
fn mutate(base: &'static str) -> impl Strategy<Value = String> {
    let n = base.len();
    (0..n, 0..n, any::<u8>(), 0..3u8).prop_map(move |(i, j, b, how)| {
        let mut v = base.as_bytes().to_vec();
        match how {
            0 => v[i] = b,
            1 => {
                let (a, z) = (i.min(j), i.max(j));
                v.drain(a..z);
            }
            _ => v.truncate(i),
        }
        String::from_utf8_lossy(&v).into_owned()
    })
}

fn check_err_line(e: &synapse_core::rules::ParseError, text: &str) {
    assert!(e.line <= text.lines().count().max(1), "line {} beyond the input: {e}", e.line);
    assert!(!e.message.is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn rules_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let text = String::from_utf8_lossy(&bytes);
        if let Err(e) = parse_rules(&text, "junk") { check_err_line(&e, &text); }
    }

    #[test]
    fn rules_parser_on_mutated_lines(text in mutate(RULES)) {
        match parse_rules(&text, "r") {
            Ok(set) => prop_assert!(set.len() <= 2),
            Err(e) => check_err_line(&e, &text),
        }
    }

    #[test]
    fn trace_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let text = String::from_utf8_lossy(&bytes);
        if let Err(e) = parse_trace(&text, "junk") { check_err_line(&e, &text); }
    }

    #[test]
    fn trace_parser_on_mutated_lines(text in mutate(TRACE)) {
        if let Err(e) = parse_trace(&text, "t") { check_err_line(&e, &text); }
    }

    #[test]
    fn seed_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let text = String::from_utf8_lossy(&bytes);
        if let Err(e) = Params::parse(&text, "junk") { check_err_line(&e, &text); }
    }

    #[test]
    fn seed_parser_on_mutated_seeds(text in mutate(BUILTIN[1].1)) {
        // A mutated seed either parses (and then generates) or fails cleanly.
        match Params::parse(&text, "s") {
            Ok(p) => { let _ = synapse_core::workload::rulegen::generate(&p, 50, 1); }
            Err(e) => check_err_line(&e, &text),
        }
    }
}
