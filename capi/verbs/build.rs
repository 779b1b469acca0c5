//! libibverbs.so needs lib_mrc.so (where every call goes) and records `libibverbs.so` as its
//! SONAME. It links against a stub with lib_mrc.so's SONAME, made here with the system C
//! compiler: so the two libraries build independently, and at run time the real lib_mrc.so is
//! found next to this one (`$ORIGIN`) or on the program's library path.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let stub = out.join("lib_mrc.so");
    // Linked by path, with no link-search directory: cargo puts build scripts' search
    // directories on LD_LIBRARY_PATH when it runs tests and binaries, and this stub must never
    // be found at run time in place of the real lib_mrc.so.
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let status = Command::new(&cc)
        .args([
            "-shared",
            "-Wl,-soname,lib_mrc.so",
            "-x",
            "c",
            "/dev/null",
            "-o",
        ])
        .arg(&stub)
        .status()
        .unwrap_or_else(|e| panic!("{cc} (for the lib_mrc.so link stub): {e}"));
    assert!(
        status.success(),
        "{cc} could not make the lib_mrc.so link stub"
    );
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libibverbs.so");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-rpath,$ORIGIN");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-cdylib-link-arg={}", stub.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,--as-needed");
    println!("cargo:rerun-if-changed=build.rs");
}
