//! The C program of `tests/c/` links `libmrc.so` through `include/mrc.h` and moves data
//! between two QPs: built with the system C compiler and run here.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `libmrc.so` as cargo built it for this test run (next to the test binary's directory).
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("deps directory");
    [deps, deps.parent().unwrap_or(deps)]
        .into_iter()
        .find(|d| d.join("libmrc.so").exists())
        .unwrap_or_else(|| panic!("libmrc.so not found near {}", deps.display()))
        .to_path_buf()
}

/// Removes the scratch directory, also when the test fails.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_c_program_moves_data_through_libmrc() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let lib = library_dir();
    let scratch = Scratch(std::env::temp_dir().join(format!("mrc-capi-{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0).expect("scratch dir");
    let exe = scratch.0.join("mrc_write");
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let status = Command::new(&compiler)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1"])
        .arg("-I")
        .arg(root.join("include"))
        .arg(root.join("tests/c/mrc_write.c"))
        .arg("-L")
        .arg(&lib)
        .arg("-lmrc")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-o")
        .arg(&exe)
        .status()
        .unwrap_or_else(|e| panic!("{compiler}: {e}"));
    assert!(status.success(), "the C program does not build");
    let out = Command::new(&exe).output().expect("run the C program");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "mrc_write failed:\n{stdout}{stderr}");
    assert!(stdout.contains("mrc_write: ok"), "{stdout}");
}
