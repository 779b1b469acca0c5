//! A progress bar for long runs: applications done out of those started, and the virtual time
//! reached. Drawn only when stderr is a terminal (CI logs stay clean); the wall clock it reads
//! never reaches a report.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

use crate::sim::Sim;

/// Call [`Progress::observe`] from the run's observer.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar titled `name` if stderr is a terminal, else nothing.
    pub fn new(name: &str, apps: u64) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::new(apps);
            b.set_style(
                ProgressStyle::with_template(
                    "{prefix:>18} [{bar:30}] {pos}/{len} apps done  {msg}",
                )
                .expect("static template")
                .progress_chars("=> "),
            );
            b.set_prefix(name.to_owned());
            b
        });
        Self { bar }
    }

    /// Update from the simulator.
    pub fn observe(&mut self, sim: &Sim) {
        if let Some(b) = &self.bar {
            b.set_position(sim.apps_done());
            b.set_message(format!("virtual {:.1} µs", sim.now().as_micros_f64()));
        }
    }

    /// Remove the bar.
    pub fn finish(self) {
        if let Some(b) = self.bar {
            b.finish_and_clear();
        }
    }
}
