//! `--metrics-textfile DIR`: the exposition in DIR/mrc.prom (mrc-coll: DIR/mrc-coll-rRANK.prom,
//! one file per rank) for node_exporter's textfile collector (docs/metrics.md, "node_exporter
//! textfile"). Each write goes to DIR/.NAME.<pid>.tmp (a name the collector, which reads
//! `*.prom`, ignores) and is then renamed over DIR/NAME, so a reader sees the old file or the
//! new one, never half of one.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The file name node_exporter reads (mrc-perf's; mrc-coll's ranks name theirs).
pub const FILE: &str = "mrc.prom";

/// Writes DIR/mrc.prom atomically.
#[derive(Debug)]
pub struct Textfile {
    tmp: PathBuf,
    path: PathBuf,
    /// Writes that failed (reported once on stderr).
    pub failures: u64,
}

impl Textfile {
    /// `dir` must be a writable directory: checked now by writing the temporary file, so a
    /// refusal comes at startup (one line, what to change).
    pub fn new(dir: &Path, name: &str) -> Result<Self, String> {
        let given = dir.display();
        if !dir.is_dir() {
            return Err(format!(
                "--metrics-textfile {given}: not a directory: give an existing, writable directory"
            ));
        }
        let t = Self {
            tmp: dir.join(format!(".{name}.{}.tmp", std::process::id())),
            path: dir.join(name),
            failures: 0,
        };
        std::fs::write(&t.tmp, b"")
            .and_then(|()| std::fs::remove_file(&t.tmp))
            .map_err(|e| {
                format!("--metrics-textfile {given}: cannot write in it ({e}): give a writable directory")
            })?;
        Ok(t)
    }

    /// DIR/mrc.prom.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replace DIR/mrc.prom with `text`; a failure is one stderr line (the first time).
    pub fn write(&mut self, text: &str) -> Result<(), String> {
        let r = std::fs::File::create(&self.tmp)
            .and_then(|mut f| {
                f.write_all(text.as_bytes())?;
                f.sync_data()
            })
            .and_then(|()| std::fs::rename(&self.tmp, &self.path));
        r.map_err(|e| {
            let _ = std::fs::remove_file(&self.tmp);
            self.failures += 1;
            let line = format!("telemetry: cannot write {} ({e})", self.path.display());
            if self.failures == 1 {
                eprintln!("{line}");
            }
            line
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_atomically_and_refuses_what_is_not_a_directory() {
        let dir = std::env::temp_dir().join(format!("mrc-textfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut t = Textfile::new(&dir, FILE).unwrap();
        t.write("a 1\n").unwrap();
        t.write("a 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(dir.join(FILE)).unwrap(), "a 2\n");
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1, "only mrc.prom stays: {left:?}");
        let e = Textfile::new(&dir.join(FILE), FILE).unwrap_err();
        assert!(e.contains("not a directory"), "{e}");
        let e = Textfile::new(Path::new("/nonexistent"), FILE).unwrap_err();
        assert!(e.starts_with("--metrics-textfile /nonexistent: "), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
