//! The tc BPF trimmer of `tools/bpf` (trim.bpf.c, loaded by trim.sh) on one switch port, for
//! the kernel-switch tests: compiled here, attached where the switch runs (this kernel, or the
//! kernel VM's: the caller says how to run a command there), detached when dropped.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs a command where the switch is; its stdout, or why it failed.
pub type Run<'a> = Box<dyn Fn(&[&str]) -> Result<String, String> + 'a>;

/// A trimmer attached to `ns iface`.
pub struct Trimmer<'a> {
    run: Run<'a>,
    script: String,
    obj: PathBuf,
    ns: String,
    iface: String,
}

impl std::fmt::Debug for Trimmer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Trimmer({} {})", self.ns, self.iface)
    }
}

/// What the trimmer counted: frames that matched, frames trimmed, frames it could not trim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub matched: u64,
    pub trimmed: u64,
    pub failed: u64,
}

impl<'a> Trimmer<'a> {
    /// Compiles the trimmer for every `every`-th frame into `dir` (a directory the switch's side
    /// reads too) and attaches it to `ns iface` with `run`.
    pub fn attach(run: Run<'a>, dir: &Path, every: u64, ns: &str, iface: &str) -> Self {
        let script = crate::workspace()
            .join("tools/bpf/trim.sh")
            .to_string_lossy()
            .into_owned();
        let obj = dir.join(format!("{}.o", crate::unique("mrc-trim")));
        let t = Self {
            run,
            script,
            obj,
            ns: ns.to_owned(),
            iface: iface.to_owned(),
        };
        let out = Command::new("bash")
            .arg(&t.script)
            .arg("build")
            .arg(&t.obj)
            .arg(every.to_string())
            .output()
            .expect("trim.sh runs");
        assert!(
            out.status.success(),
            "trim.sh build: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let obj = t.obj.to_string_lossy().into_owned();
        t.sh(&["attach", ns, iface, &obj])
            .unwrap_or_else(|e| panic!("trim.sh attach {ns} {iface}: {e}"));
        t
    }

    fn sh(&self, args: &[&str]) -> Result<String, String> {
        let mut argv = vec!["bash", self.script.as_str()];
        argv.extend_from_slice(args);
        (self.run)(&argv)
    }

    /// Its counters now.
    pub fn stats(&self) -> Stats {
        let out = self
            .sh(&["stats", &self.ns, &self.iface])
            .unwrap_or_else(|e| panic!("trim.sh stats: {e}"));
        let w: Vec<&str> = out.split_whitespace().collect();
        match w.as_slice() {
            ["matched", m, "trimmed", t, "failed", f] => Stats {
                matched: m.parse().expect("a count"),
                trimmed: t.parse().expect("a count"),
                failed: f.parse().expect("a count"),
            },
            _ => panic!("trim.sh stats: {out:?}"),
        }
    }
}

impl Drop for Trimmer<'_> {
    fn drop(&mut self) {
        let _ = self.sh(&["detach", &self.ns, &self.iface]);
        let _ = std::fs::remove_file(&self.obj);
    }
}

/// Runs a command here; its stdout, or why it failed.
pub fn run_here(argv: &[&str]) -> Result<String, String> {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .output()
        .map_err(|e| format!("{}: {e}", argv[0]))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
