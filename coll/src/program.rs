//! A rank's whole benchmark as one [`Application`]: for every size, out-of-place then in-place,
//! warm-up operations, a barrier, the timed operations, and (with `-c 1`) fresh inputs, a
//! barrier, one more operation and the check of its output (nccl-tests' order). The
//! simulator runs it in virtual time, the NIC runtime in real time, the same code.

use std::sync::{Arc, Mutex};

use mrc_transport::Instant;
use mrc_transport::app::{Application, Verbs};
use mrc_transport::verbs::WorkCompletion;

use crate::check;
use crate::comm::{Comm, CommError, CommEvent};
use crate::ops::{Op, Scratch};
use crate::pattern::{Granularity, Pattern};
use crate::spec::OpSpec;

/// Buffers from this size up use a block pattern when the backend asks for compact data.
pub const COMPACT_FROM_BYTES: u64 = 64 * 1024;

/// One line of the table: an operation run out-of-place and in-place.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    pub spec: OpSpec,
}

/// How the program runs.
#[derive(Debug, Clone)]
pub struct ProgramOpts {
    pub warmup: u32,
    pub iters: u32,
    pub check: bool,
    /// Block patterns for large buffers (the simulator's compact memory).
    pub compact: bool,
    /// Mixed into every pattern (nccl-tests' `rep`).
    pub seed: u64,
}

/// What one rank measured for one (row, placement).
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Measure {
    /// Nanoseconds per operation (the timed loop's duration / iterations).
    pub time_ns: Option<f64>,
    /// Wrong elements of the checked run.
    pub wrong: Option<u64>,
    /// When the timed loop started (the rank's clock, ns): for faults "mid-run".
    pub timed_start_ns: Option<u64>,
}

/// What one rank reports: `[out-of-place, in-place]` per row, and why it stopped early.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct RankReport {
    pub rows: Vec<[Measure; 2]>,
    pub error: Option<String>,
    pub done: bool,
}

/// Shared between the program and whoever reads its results.
pub type ReportHandle = Arc<Mutex<RankReport>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Init {
        row: usize,
        in_place: bool,
    },
    Barrier,
    Run {
        row: usize,
        in_place: bool,
        iters: u32,
        timed: bool,
    },
    Check {
        row: usize,
        in_place: bool,
    },
}

/// A rank's benchmark program.
#[derive(Debug)]
pub struct Program {
    comm: Comm,
    rows: Vec<Row>,
    opts: ProgramOpts,
    steps: Vec<Step>,
    pc: usize,
    op: Option<Op>,
    /// Operations of the current `Run` step still to start.
    ops_left: u32,
    run_started: Instant,
    scratch: Scratch,
    report: ReportHandle,
    failed: bool,
    retry_at: Option<Instant>,
}

/// How long a refused post waits before it is tried again.
const RETRY_NS: u64 = 2_000;

impl Program {
    pub fn new(comm: Comm, rows: Vec<Row>, opts: ProgramOpts) -> (Self, ReportHandle) {
        let mut steps = Vec::new();
        for row in 0..rows.len() {
            for in_place in [false, true] {
                if opts.warmup > 0 {
                    steps.push(Step::Barrier);
                    steps.push(Step::Run {
                        row,
                        in_place,
                        iters: opts.warmup,
                        timed: false,
                    });
                }
                steps.push(Step::Barrier);
                steps.push(Step::Run {
                    row,
                    in_place,
                    iters: opts.iters,
                    timed: true,
                });
                if opts.check {
                    steps.push(Step::Init { row, in_place });
                    steps.push(Step::Barrier);
                    steps.push(Step::Run {
                        row,
                        in_place,
                        iters: 1,
                        timed: false,
                    });
                    steps.push(Step::Check { row, in_place });
                }
            }
        }
        // Nobody leaves while a peer may still write into its buffers.
        steps.push(Step::Barrier);
        let report = Arc::new(Mutex::new(RankReport {
            rows: vec![[Measure::default(); 2]; rows.len()],
            ..RankReport::default()
        }));
        let p = Self {
            comm,
            rows,
            opts,
            steps,
            pc: 0,
            op: None,
            ops_left: 0,
            run_started: Instant::ZERO,
            scratch: Scratch::default(),
            report: Arc::clone(&report),
            failed: false,
            retry_at: None,
        };
        (p, report)
    }

    /// The pattern of a (row, placement).
    pub fn pattern(opts: &ProgramOpts, spec: &OpSpec, row: usize, in_place: bool) -> Pattern {
        let compact = opts.compact && spec.size_bytes() >= COMPACT_FROM_BYTES;
        Pattern {
            dtype: spec.dtype,
            op: spec.op,
            seed: opts.seed ^ ((row as u64) << 1 | u64::from(in_place)).wrapping_mul(0x2545_f491),
            granularity: if compact {
                Granularity::Block(crate::memory::COMPACT_BLOCK as u32)
            } else {
                Granularity::Element
            },
        }
    }

    fn fail(&mut self, e: &CommError) {
        self.failed = true;
        let mut r = self.report.lock().expect("report lock");
        r.error = Some(format!("rank {}: {e}", self.comm.rank()));
        r.done = true;
    }

    /// Runs steps until one has to wait for the network.
    fn advance(&mut self, now: Instant, verbs: &mut dyn Verbs) -> Result<(), CommError> {
        loop {
            if self.pc >= self.steps.len() {
                return Ok(());
            }
            match self.steps[self.pc] {
                Step::Barrier => {
                    if !self.comm.barrier_complete() {
                        return Ok(());
                    }
                }
                Step::Run {
                    row,
                    in_place,
                    timed,
                    ..
                } => {
                    if self.op.as_ref().is_some_and(|op| !op.is_done()) {
                        return Ok(());
                    }
                    if self.ops_left > 0 {
                        self.ops_left -= 1;
                        let mut op = Op::new(self.rows[row].spec, in_place);
                        op.start(&mut self.comm, verbs, &mut self.scratch)?;
                        self.op = Some(op);
                        continue;
                    }
                    self.op = None;
                    if timed {
                        let iters = f64::from(self.iters_of(self.pc).max(1));
                        let ns = now.0.saturating_sub(self.run_started.0) as f64 / iters;
                        self.report.lock().expect("report lock").rows[row][usize::from(in_place)]
                            .time_ns = Some(ns);
                    }
                }
                Step::Init { .. } | Step::Check { .. } => {}
            }
            // The current step is complete: enter the next.
            self.pc += 1;
            if self.pc == self.steps.len() {
                self.report.lock().expect("report lock").done = true;
                return Ok(());
            }
            self.enter(now, verbs)?;
        }
    }

    fn iters_of(&self, pc: usize) -> u32 {
        match self.steps[pc] {
            Step::Run { iters, .. } => iters,
            _ => 0,
        }
    }

    /// Starts step `pc` (synchronous steps run to the end here).
    fn enter(&mut self, now: Instant, verbs: &mut dyn Verbs) -> Result<(), CommError> {
        match self.steps[self.pc] {
            Step::Barrier => self.comm.barrier_enter(verbs)?,
            Step::Run {
                iters,
                timed,
                row,
                in_place,
            } => {
                self.ops_left = iters;
                self.run_started = now;
                if timed {
                    self.report.lock().expect("report lock").rows[row][usize::from(in_place)]
                        .timed_start_ns = Some(now.0);
                }
            }
            Step::Init { row, in_place } => {
                let spec = self.rows[row].spec;
                let pattern = Self::pattern(&self.opts, &spec, row, in_place);
                check::init(
                    &self.comm,
                    verbs,
                    &spec,
                    in_place,
                    &pattern,
                    &mut self.scratch.a,
                )?;
            }
            Step::Check { row, in_place } => {
                let spec = self.rows[row].spec;
                let pattern = Self::pattern(&self.opts, &spec, row, in_place);
                let wrong = check::count_wrong(
                    &self.comm,
                    verbs,
                    &spec,
                    in_place,
                    &pattern,
                    &mut self.scratch.a,
                )?;
                self.report.lock().expect("report lock").rows[row][usize::from(in_place)].wrong =
                    Some(wrong);
            }
        }
        Ok(())
    }

    fn step(&mut self, now: Instant, verbs: &mut dyn Verbs, ev: Option<CommEvent>) {
        if self.failed {
            return;
        }
        let r = (|| {
            if let (Some(ev), Some(op)) = (ev, self.op.as_mut()) {
                op.on_event(ev, &mut self.comm, verbs, &mut self.scratch)?;
            }
            self.advance(now, verbs)
        })();
        if let Err(e) = r {
            self.fail(&e);
        }
        self.retry_at = self.comm.blocked.then(|| Instant(now.0 + RETRY_NS));
    }
}

impl Application for Program {
    fn start(&mut self, now: Instant, verbs: &mut dyn Verbs) {
        let r = self.comm.post_receives(verbs);
        if let Err(e) = r {
            self.fail(&e);
            return;
        }
        if self.steps.is_empty() {
            self.report.lock().expect("report lock").done = true;
            return;
        }
        if let Err(e) = self.enter(now, verbs) {
            self.fail(&e);
            return;
        }
        self.step(now, verbs, None);
    }

    fn on_completion(&mut self, now: Instant, wc: &WorkCompletion, verbs: &mut dyn Verbs) {
        if self.failed {
            return;
        }
        match self.comm.handle(wc, verbs) {
            Ok(ev) => self.step(now, verbs, Some(ev)),
            Err(e) => self.fail(&e),
        }
    }

    fn on_timer(&mut self, now: Instant, verbs: &mut dyn Verbs) {
        self.retry_at = None;
        if let Err(e) = self.comm.pump_all(verbs) {
            self.fail(&e);
            return;
        }
        self.step(now, verbs, None);
    }

    fn next_timer(&self) -> Option<Instant> {
        self.retry_at
    }

    fn is_done(&self) -> bool {
        self.failed || self.pc >= self.steps.len()
    }
}
