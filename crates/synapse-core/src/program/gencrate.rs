//! Generated code built on the user's machine: a program's generated
//! module (`super::codegen`) as a cdylib crate, built with cargo and
//! cached, for [`super::cdylib`] to load.
//!
//! The crate lives in `$XDG_CACHE_HOME/synapse/gen/<hash>` (default
//! `~/.cache`), where the hash covers the module's source, synapse-core's
//! version and source, [`super::cdylib::ABI`] and `rustc -V`: the same
//! program on the same toolchain is built once. It depends on synapse-core
//! by path, at the source this library was built from (or
//! `SYNAPSE_CORE_SRC`), with the workspace's `Cargo.lock`, and is built
//! with `cargo build --release --offline` into a target directory shared by
//! every generated crate (`.../synapse/gen/target`: synapse-core and its
//! dependencies are compiled once, a new program compiles only its module).
//! cargo's output goes to `build.log` beside the crate; the library is
//! copied to `gen.so` there.

use super::exec::Program;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where and with what generated crates are built.
#[derive(Clone, Debug)]
pub struct Build {
    /// The cache root (`.../synapse/gen`).
    pub cache: PathBuf,
    /// cargo's target directory (default `<cache>/target`).
    pub target: PathBuf,
    pub cargo: OsString,
    pub rustc: OsString,
    /// synapse-core's source (its directory with `Cargo.toml`).
    pub core_src: PathBuf,
}

/// A built (or cached) library and the hash it was built under.
#[derive(Clone, Debug)]
pub struct Built {
    pub path: PathBuf,
    pub hash: u64,
    /// cargo ran (false: the cached library was taken as it is).
    pub built: bool,
}

/// FNV-1a, 64 bits, from `h` (start at [`FNV0`]): a stable hash (the cache
/// key and a program's shape hash must not change between runs).
pub(crate) fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h
}

pub(crate) const FNV0: u64 = 0xcbf2_9ce4_8422_2325;

/// Where a library's size and hash are kept, beside it.
fn sum_path(so: &Path) -> PathBuf {
    so.with_extension("sum")
}

/// The library at `so` is whole: its size and hash are the ones recorded
/// when it was built. (A cut library must never reach the loader: mapping
/// a file shorter than its headers say faults the process.)
fn intact(so: &Path) -> bool {
    let (Ok(bytes), Ok(sum)) = (std::fs::read(so), std::fs::read_to_string(sum_path(so))) else {
        return false;
    };
    sum.trim() == format!("{} {:016x}", bytes.len(), fnv(FNV0, &bytes))
}

/// Files under `dir` ending in `.rs`, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        let mut es: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        es.sort();
        for p in es {
            if p.is_dir() {
                rust_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
}

impl Build {
    /// From the environment: the cache under `XDG_CACHE_HOME` (or
    /// `~/.cache`), cargo and rustc as `CARGO` and `RUSTC` name them (or
    /// from `PATH`), synapse-core's source as `SYNAPSE_CORE_SRC` names it
    /// (or where this library was built from).
    pub fn from_env() -> Build {
        let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        let cache = env("XDG_CACHE_HOME").map(PathBuf::from)
            .or_else(|| env("HOME").map(|h| Path::new(&h).join(".cache")))
            .unwrap_or_else(|| PathBuf::from(".cache"));
        let cache = cache.join("synapse").join("gen");
        Build {
            target: cache.join("target"),
            cache,
            cargo: env("CARGO").unwrap_or_else(|| "cargo".into()),
            rustc: env("RUSTC").unwrap_or_else(|| "rustc".into()),
            core_src: env("SYNAPSE_CORE_SRC").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR"))),
        }
    }

    /// Why this build cannot run, if it cannot: no synapse-core source, or
    /// no cargo.
    pub fn missing(&self) -> Option<String> {
        if !self.core_src.join("Cargo.toml").is_file() {
            return Some(format!("synapse-core's source is not at {} (generated code builds against it): set \
                                 SYNAPSE_CORE_SRC to a checkout's crates/synapse-core", self.core_src.display()));
        }
        let ok = Command::new(&self.cargo).arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status();
        if !ok.is_ok_and(|s| s.success()) {
            return Some(format!("cargo ({}) did not run: generated code needs a Rust toolchain", self.cargo.to_string_lossy()));
        }
        None
    }

    /// The hash `module` is built and loaded under (see the module doc).
    pub fn hash(&self, module: &str) -> Result<u64, String> {
        let v = Command::new(&self.rustc).arg("-V").output()
            .map_err(|e| format!("rustc ({}): {e}", self.rustc.to_string_lossy()))?;
        let mut h = fnv(FNV0, module.as_bytes());
        h = fnv(h, &v.stdout);
        h = fnv(h, env!("CARGO_PKG_VERSION").as_bytes());
        h = fnv(h, &super::cdylib::ABI.to_le_bytes());
        let mut files = vec![self.core_src.join("Cargo.toml")];
        rust_files(&self.core_src.join("src"), &mut files);
        for f in files {
            h = fnv(h, &std::fs::read(&f).map_err(|e| format!("{}: {e}", f.display()))?);
        }
        Ok(h)
    }

    /// The library of `module`: the cached one, or built now (always
    /// built when `rebuild`, as after a cached one was refused).
    pub fn library(&self, module: &str, rebuild: bool) -> Result<Built, String> {
        if let Some(why) = self.missing() {
            return Err(why);
        }
        let hash = self.hash(module)?;
        let dir = self.cache.join(format!("{hash:016x}"));
        let so = dir.join("gen.so");
        if !rebuild && intact(&so) {
            return Ok(Built { path: so, hash, built: false });
        }
        let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
        std::fs::create_dir_all(dir.join("src")).map_err(|e| io(&dir, e))?;
        let name = format!("synapse_gen_{hash:016x}");
        let manifest = format!(
            "# Generated by synapse-core {ver}: a program's generated code (src/generated.rs) as a library.\n\
             [package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
             [lib]\ncrate-type = [\"cdylib\"]\npath = \"src/lib.rs\"\n\n\
             [dependencies]\nsynapse-core = {{ path = {core:?} }}\n\n\
             [profile.release]\nopt-level = 3\ndebug = false\ncodegen-units = 4\nlto = \"thin\"\n\n[workspace]\n",
            ver = env!("CARGO_PKG_VERSION"), core = self.core_src.to_string_lossy());
        let lib = format!(
            "//! The generated module, exported as synapse-core's cdylib table.\n\
             #[allow(dead_code, unused_imports, clippy::all)]\n#[path = \"generated.rs\"]\nmod generated;\n\n\
             synapse_core::export_gen!(generated::Gen, 0x{hash:016x});\n");
        let write = |p: PathBuf, text: &str| std::fs::write(&p, text).map_err(|e| io(&p, e));
        write(dir.join("Cargo.toml"), &manifest)?;
        write(dir.join("src").join("generated.rs"), module)?;
        // written each build: its new mtime makes cargo rebuild a refused library
        write(dir.join("src").join("lib.rs"), &lib)?;
        // the workspace's lock: the dependencies' versions cargo already has (--offline)
        let lock = self.core_src.join("../../Cargo.lock");
        if lock.is_file() && !dir.join("Cargo.lock").is_file() {
            std::fs::copy(&lock, dir.join("Cargo.lock")).map_err(|e| io(&lock, e))?;
        }
        let log_path = dir.join("build.log");
        let log = std::fs::File::create(&log_path).map_err(|e| io(&log_path, e))?;
        let target = &self.target;
        let status = Command::new(&self.cargo)
            .args(["build", "--release", "--offline", "--manifest-path"])
            .arg(dir.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(target)
            .stdout(log.try_clone().map_err(|e| io(&log_path, e))?)
            .stderr(log)
            .status()
            .map_err(|e| format!("cargo ({}): {e}", self.cargo.to_string_lossy()))?;
        if !status.success() {
            return Err(format!("building the generated code failed: see {}", log_path.display()));
        }
        let built = target.join("release").join(format!("{}{name}{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX));
        // copied, then renamed into place: a reader never sees half a library
        let tmp = dir.join(format!("gen.so.{}", std::process::id()));
        std::fs::copy(&built, &tmp).map_err(|e| io(&built, e))?;
        let bytes = std::fs::read(&tmp).map_err(|e| io(&tmp, e))?;
        write(sum_path(&so), &format!("{} {:016x}\n", bytes.len(), fnv(FNV0, &bytes)))?;
        std::fs::rename(&tmp, &so).map_err(|e| io(&so, e))?;
        Ok(Built { path: so, hash, built: true })
    }
}

/// The generated module's source for `p` ([`super::codegen::emit`]), or
/// why `p` has none (one line each: what of it is outside the generator's
/// subset).
pub fn module(p: &Program) -> Result<String, Vec<String>> {
    super::codegen::emit(p)
}

/// Builds (or takes from the cache) and loads the library of `module`:
/// a cached library that is not as it was built (a truncated file), does
/// not load or is refused (another hash) is rebuilt once.
pub fn load(build: &Build, module: &str) -> Result<(std::sync::Arc<super::cdylib::Library>, Built), String> {
    // a library not as built (cut, changed) is rebuilt before it is loaded
    let b = build.library(module, false)?;
    match super::cdylib::Library::open(&b.path, b.hash) {
        Ok(l) => Ok((l, b)),
        Err(first) if !b.built => {
            let _ = std::fs::remove_file(&b.path);
            let b = build.library(module, true)?;
            let l = super::cdylib::Library::open(&b.path, b.hash)
                .map_err(|e| format!("generated code refused after a rebuild ({first}): {e}"))?;
            Ok((l, b))
        }
        Err(e) => Err(format!("generated code refused: {e}")),
    }
}
