//! A rank's whole benchmark as one [`Application`]: for every size, out-of-place then in-place,
//! warm-up operations, a barrier, the timed operations, and (with `-c N`) N times fresh
//! inputs, a barrier, one more operation and the check of its output (nccl-tests' order). The
//! simulator runs it in virtual time, the NIC runtime in real time, the same code.
//!
//! The timed loop is `-n` iterations of `-m` operations each, one after another (a rank's
//! operations never overlap: NCCL's groups have no counterpart here), with nccl-tests'
//! `-z`: a barrier after every operation (1), or after every iteration with the barriers'
//! time left out (3); 0 and 2 are what a rank does anyway (it completes each operation
//! before it starts the next). `-T` fails a rank whose operation or barrier does not
//! complete in time.

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

/// nccl-tests' `-z`: what a rank does between the timed loop's operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Blocking {
    /// 0: the next operation starts once this one completed at this rank.
    #[default]
    No,
    /// 1: a barrier after every operation (its time counted).
    BarrierEach,
    /// 2: wait for every operation, no barrier (what 0 does here).
    Wait,
    /// 3: a barrier after every iteration (`-m` operations), its time left out.
    BarrierIterExcluded,
}

impl Blocking {
    /// nccl-tests' number.
    pub const fn code(self) -> u8 {
        match self {
            Self::No => 0,
            Self::BarrierEach => 1,
            Self::Wait => 2,
            Self::BarrierIterExcluded => 3,
        }
    }

    /// The mode of nccl-tests' number.
    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Self::No),
            1 => Some(Self::BarrierEach),
            2 => Some(Self::Wait),
            3 => Some(Self::BarrierIterExcluded),
            _ => None,
        }
    }
}

/// What a one-rank operation costs where time does not pass by itself (the simulator's
/// virtual clock): it is a local copy, `per_op_ns` plus its size at `bytes_per_sec`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CopyCost {
    pub per_op_ns: u64,
    pub bytes_per_sec: f64,
}

impl CopyCost {
    /// Nanoseconds of a copy of `bytes`.
    pub fn ns(&self, bytes: u64) -> u64 {
        self.per_op_ns + (bytes as f64 / self.bytes_per_sec * 1e9) as u64
    }
}

/// How the program runs.
#[derive(Debug, Clone)]
pub struct ProgramOpts {
    pub warmup: u32,
    /// Timed iterations (`-n`).
    pub iters: u32,
    /// Operations per timed iteration (`-m`).
    pub agg_iters: u32,
    pub blocking: Blocking,
    /// Checked operations per line and placement (`-c`; 0: none).
    pub checks: u32,
    /// Block patterns for large buffers (the simulator's compact memory).
    pub compact: bool,
    /// Mixed into every pattern (nccl-tests' `rep`).
    pub seed: u64,
    /// An operation or barrier not complete after this many seconds fails the rank (`-T`).
    pub timeout_secs: Option<u64>,
    /// One rank's operations take this long (`None`: the time they take).
    pub local_copy: Option<CopyCost>,
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
        /// Operations to run.
        ops: u32,
        timed: bool,
    },
    Check {
        row: usize,
        in_place: bool,
        /// The last of the `-c` checks: the wrong elements are reported.
        last: bool,
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
    /// Operations of the current `Run` step still to start, and those complete.
    ops_left: u32,
    ops_done: u32,
    run_started: Instant,
    /// In the timed loop: waiting for a `-z` barrier; the time of operations so far (`-z 3`)
    /// and when the current stretch of operations started.
    in_barrier: bool,
    busy_ns: u64,
    stretch_started: Instant,
    /// A one-rank operation is complete then ([`CopyCost`]).
    hold_until: Option<Instant>,
    /// The current operation or barrier fails then (`-T`).
    deadline: Option<Instant>,
    /// Wrong elements of the checks so far of the current placement.
    wrong: u64,
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
                        ops: opts.warmup,
                        timed: false,
                    });
                }
                steps.push(Step::Barrier);
                steps.push(Step::Run {
                    row,
                    in_place,
                    ops: opts.iters.max(1).saturating_mul(opts.agg_iters.max(1)),
                    timed: true,
                });
                for c in 0..opts.checks {
                    steps.push(Step::Init { row, in_place });
                    steps.push(Step::Barrier);
                    steps.push(Step::Run {
                        row,
                        in_place,
                        ops: 1,
                        timed: false,
                    });
                    steps.push(Step::Check {
                        row,
                        in_place,
                        last: c + 1 == opts.checks,
                    });
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
            ops_done: 0,
            run_started: Instant::ZERO,
            in_barrier: false,
            busy_ns: 0,
            stretch_started: Instant::ZERO,
            hold_until: None,
            deadline: None,
            wrong: 0,
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
                    ops,
                } => {
                    if self.op.as_ref().is_some_and(|op| !op.is_done()) {
                        return Ok(());
                    }
                    if let Some(t) = self.hold_until {
                        if now < t {
                            return Ok(());
                        }
                        self.hold_until = None;
                    }
                    if self.op.take().is_some() {
                        self.ops_done += 1;
                        if timed && self.barrier_after(self.ops_done) {
                            self.busy_ns += now.0.saturating_sub(self.stretch_started.0);
                            self.comm.barrier_enter(verbs)?;
                            self.in_barrier = true;
                            self.deadline = self.deadline_from(now);
                        }
                    }
                    if self.in_barrier {
                        if !self.comm.barrier_complete() {
                            return Ok(());
                        }
                        self.in_barrier = false;
                        self.stretch_started = now;
                    }
                    if self.ops_left > 0 {
                        self.ops_left -= 1;
                        let spec = self.rows[row].spec;
                        let mut op = Op::new(spec, in_place);
                        op.start(&mut self.comm, verbs, &mut self.scratch)?;
                        if let Some(cost) = self.opts.local_copy
                            && op.is_done()
                            && spec.nranks == 1
                        {
                            self.hold_until = Some(Instant(now.0 + cost.ns(spec.size_bytes())));
                        }
                        self.op = Some(op);
                        self.deadline = self.deadline_from(now);
                        continue;
                    }
                    if timed {
                        let busy = if self.opts.blocking == Blocking::BarrierIterExcluded {
                            self.busy_ns
                        } else {
                            now.0.saturating_sub(self.run_started.0)
                        };
                        let ns = busy as f64 / f64::from(ops.max(1));
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

    /// A `-z` barrier follows the `done`-th operation of the timed loop.
    fn barrier_after(&self, done: u32) -> bool {
        match self.opts.blocking {
            Blocking::BarrierEach => true,
            Blocking::BarrierIterExcluded => done.is_multiple_of(self.opts.agg_iters.max(1)),
            Blocking::No | Blocking::Wait => false,
        }
    }

    /// When something that starts waiting at `now` times out (`-T`).
    fn deadline_from(&self, now: Instant) -> Option<Instant> {
        self.opts
            .timeout_secs
            .map(|s| Instant(now.0.saturating_add(s.saturating_mul(1_000_000_000))))
    }

    /// Starts step `pc` (synchronous steps run to the end here).
    fn enter(&mut self, now: Instant, verbs: &mut dyn Verbs) -> Result<(), CommError> {
        match self.steps[self.pc] {
            Step::Barrier => {
                self.comm.barrier_enter(verbs)?;
                self.deadline = self.deadline_from(now);
            }
            Step::Run {
                ops,
                timed,
                row,
                in_place,
            } => {
                self.ops_left = ops;
                self.ops_done = 0;
                self.run_started = now;
                self.stretch_started = now;
                self.busy_ns = 0;
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
            Step::Check {
                row,
                in_place,
                last,
            } => {
                let spec = self.rows[row].spec;
                let pattern = Self::pattern(&self.opts, &spec, row, in_place);
                self.wrong += check::count_wrong(
                    &self.comm,
                    verbs,
                    &spec,
                    in_place,
                    &pattern,
                    &mut self.scratch.a,
                )?;
                if last {
                    self.report.lock().expect("report lock").rows[row][usize::from(in_place)]
                        .wrong = Some(std::mem::take(&mut self.wrong));
                }
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
        // Still waiting on what started `-T` ago (every new operation or barrier moves the
        // deadline on).
        if !self.is_done()
            && self.hold_until.is_none()
            && self.deadline.is_some_and(|d| d <= now)
            && let Some(secs) = self.opts.timeout_secs
        {
            self.fail(&CommError::Timeout { secs });
        }
    }

    fn next_timer(&self) -> Option<Instant> {
        let deadline = self.deadline.filter(|_| !self.is_done());
        [self.retry_at, self.hold_until, deadline]
            .into_iter()
            .flatten()
            .min()
    }

    fn is_done(&self) -> bool {
        self.failed || self.pc >= self.steps.len()
    }
}
