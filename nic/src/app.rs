//! Driving an [`Application`] state machine from an application thread over a [`NicHandle`]:
//! the same perf test or collective the simulator runs in virtual time, in real time here.

use mrc_transport::app::Application;
use mrc_transport::verbs::{CqHandle, WorkCompletion};

use crate::config::IdlePolicy;
use crate::error::NicError;
use crate::handle::NicHandle;

/// Counters of one [`AppDriver::run`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AppRunStats {
    /// Completions delivered to the application.
    pub completions: u64,
    /// Timer calls delivered.
    pub timers: u64,
    /// Loop iterations.
    pub iterations: u64,
    /// Nanoseconds of NIC time from start to done.
    pub elapsed_ns: u64,
}

/// Runs an [`Application`]: starts it, then polls its CQs and delivers every completion, and
/// its timer when due, until it says it is done.
#[derive(Debug)]
pub struct AppDriver {
    handle: NicHandle,
    cqs: Vec<CqHandle>,
    deadline: Option<std::time::Duration>,
    idle: IdlePolicy,
}

impl AppDriver {
    /// A driver over (a clone of) `handle`, polling no CQ yet.
    pub fn new(handle: &NicHandle) -> Self {
        Self {
            handle: handle.clone(),
            cqs: Vec::new(),
            deadline: None,
            idle: IdlePolicy::Yield { after: 16 },
        }
    }

    /// Polls `cq` too.
    pub fn cq(mut self, cq: CqHandle) -> Self {
        self.cqs.push(cq);
        self
    }

    /// Fails with [`NicError::Timeout`] if the application is not done within `limit` of wall
    /// time.
    pub fn deadline(mut self, limit: std::time::Duration) -> Self {
        self.deadline = Some(limit);
        self
    }

    /// What the loop does when nothing happened.
    pub fn idle(mut self, idle: IdlePolicy) -> Self {
        self.idle = idle;
        self
    }

    /// Runs `app` until [`Application::is_done`].
    pub fn run(&mut self, app: &mut dyn Application) -> Result<AppRunStats, NicError> {
        let wall = std::time::Instant::now();
        let start = self.handle.now();
        let mut stats = AppRunStats::default();
        app.start(start, &mut self.handle);
        let mut wcs = [WorkCompletion::EMPTY; 32];
        let mut idle = 0_u32;
        while !app.is_done() {
            stats.iterations += 1;
            let mut work = false;
            for &cq in &self.cqs {
                let n = self.handle.poll_cq(cq, &mut wcs)?;
                for wc in &wcs[..n] {
                    let now = self.handle.now();
                    app.on_completion(now, wc, &mut self.handle);
                    stats.completions += 1;
                }
                work |= n > 0;
            }
            let now = self.handle.now();
            if app.next_timer().is_some_and(|t| t <= now) {
                app.on_timer(now, &mut self.handle);
                stats.timers += 1;
                work = true;
            }
            if work {
                idle = 0;
                continue;
            }
            if !self.handle.is_running() {
                return Err(NicError::Stopped);
            }
            if let Some(limit) = self.deadline
                && wall.elapsed() > limit
            {
                return Err(NicError::Timeout(limit));
            }
            idle = idle.saturating_add(1);
            let until = app
                .next_timer()
                .map(|t| std::time::Duration::from_nanos(t.0.saturating_sub(self.handle.now().0)));
            self.idle.pause(idle, until);
        }
        stats.elapsed_ns = self.handle.now().0.saturating_sub(start.0);
        Ok(stats)
    }
}

/// Runs `app` over `handle`, delivering the completions of `cq`, until it is done.
pub fn run_application(
    handle: &NicHandle,
    app: &mut dyn Application,
    cq: CqHandle,
) -> Result<AppRunStats, NicError> {
    AppDriver::new(handle).cq(cq).run(app)
}
