//! Generated code built with cargo into a fresh cache, loaded, and run
//! beside the interpreter on the router's capture; a cached library that
//! is truncated or carries another hash is rebuilt, and one refused twice
//! is an error. cargo's target directory is kept under `target/tmp` across
//! runs (the first run compiles synapse-core for the library: about a
//! minute).

use std::path::{Path, PathBuf};
use synapse_core::program::cdylib::{check_capture, Library};
use synapse_core::program::gencrate::{load, module, Build};
use synapse_core::program::Program;

fn data(f: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/p4").join(f)
}

#[test]
fn generated_code_builds_loads_and_answers_as_the_interpreter() {
    let desc = std::fs::read_to_string(data("router-desc.json")).unwrap();
    let prog = Program::from_json(&desc).unwrap();
    let src = module(&prog).unwrap();
    let cache = std::env::temp_dir().join(format!("synapse-genload-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let mut build = Build::from_env();
    build.cache = cache.clone();
    build.target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("genload-target");

    // built, then taken from the cache
    let (lib, b) = load(&build, &src).unwrap();
    assert!(b.built && b.path.starts_with(&cache), "{b:?}");
    assert!(cache.join(format!("{:016x}", b.hash)).join("build.log").is_file());
    let pcap = data("router.pcap");
    assert_eq!(check_capture(&lib, &desc, &pcap, usize::MAX, Some(1)).unwrap(), None);
    drop(lib);
    let (lib, b2) = load(&build, &src).unwrap();
    assert!(!b2.built && b2.path == b.path);
    drop(lib);

    // a truncated library: rebuilt (written as a new file, as another process would leave
    // it: the one loaded above may still be mapped)
    let replace = |bytes: &[u8]| {
        let tmp = b.path.with_extension("tmp");
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, &b.path).unwrap();
    };
    let bytes = std::fs::read(&b.path).unwrap();
    replace(&bytes[..bytes.len() / 3]);
    let (lib, b3) = load(&build, &src).unwrap();
    assert!(b3.built);
    assert_eq!(check_capture(&lib, &desc, &pcap, 500, None).unwrap(), None);
    drop(lib);

    // another hash in the library's table: refused on open, rebuilt by load
    let mut bytes = std::fs::read(&b.path).unwrap();
    let h = b.hash.to_le_bytes();
    let at: Vec<usize> = (0..bytes.len() - 8).filter(|&i| bytes[i..i + 8] == h).collect();
    assert!(!at.is_empty());
    for i in at {
        bytes[i] ^= 0xff;
    }
    replace(&bytes);
    let e = Library::open(&b.path, b.hash).err().unwrap();
    assert!(e.contains("expected ABI") && e.contains(&format!("{:016x}", b.hash)), "{e}");
    let (lib, b4) = load(&build, &src).unwrap();
    assert!(b4.built);
    assert_eq!(check_capture(&lib, &desc, &pcap, 500, Some(0)).unwrap(), None);
    drop(lib);

    // a module that does not compile: one line naming the log
    let e = load(&build, "this is not rust").err().unwrap();
    assert!(e.contains("failed: see") && e.ends_with("build.log") && !e.contains('\n'), "{e}");
    let _ = std::fs::remove_dir_all(&cache);
}
