//! `p4emit DESCRIPTION.json > module.rs`: the Rust source of a module that
//! runs the compiled program per packet (`program::codegen::emit`), for a
//! description as `RustProgram.description` writes it. A program outside
//! the generator's subset: what of it is outside, one line each, and exit
//! status 2; an unreadable description: one line naming the file, status 1.
use synapse_core::program::codegen::emit;
use synapse_core::program::Program;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let Some(path) = a.get(1) else {
        eprintln!("usage: p4emit DESCRIPTION.json > module.rs");
        std::process::exit(1);
    };
    let prog = match std::fs::read_to_string(path).map_err(|e| e.to_string()).and_then(|t| Program::from_json(&t)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("p4emit: {path}: {e}");
            std::process::exit(1);
        }
    };
    match emit(&prog) {
        Ok(src) => print!("{src}"),
        Err(why) => {
            for w in why {
                eprintln!("p4emit: {path}: {w}");
            }
            std::process::exit(2);
        }
    }
}
