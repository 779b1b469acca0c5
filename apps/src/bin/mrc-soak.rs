//! `mrc-soak`: a seeded fault campaign on the simulated fabric (docs/security.md, "Fault
//! soak"). Runs seed after seed for a given time (or number of seeds), each with random loss,
//! duplication, reordering, corruption, flapping and dead links, stopped switches and downed
//! host ports, and verifies every byte of every workload. Prints seeds run, bytes verified,
//! faults injected, and the first failing seed with the command that replays it.
//!
//! ```text
//! mrc-soak --secs 60                 # as many seeds as a minute allows, from seed 1
//! mrc-soak --seeds 200 --first 1000  # seeds 1000..1200
//! mrc-soak --replay 1234             # one seed, its schedule and outcome in full
//! ```

use std::cell::Cell;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use mrc_apps::{outln, tool};
use mrc_sim::soak::{self, SeedReport};

#[derive(Debug, Parser)]
#[command(
    name = "mrc-soak",
    about = "Seeded fault campaign on the simulated MRC fabric"
)]
struct Args {
    /// Run for this many wall-clock seconds (default when neither --secs nor --seeds).
    #[arg(long)]
    secs: Option<u64>,
    /// Run exactly this many seeds.
    #[arg(long)]
    seeds: Option<u64>,
    /// First seed.
    #[arg(long, default_value_t = 1)]
    first: u64,
    /// Run one seed and print its workload, fault schedule and outcome.
    #[arg(long)]
    replay: Option<u64>,
    /// Keep going after a failing seed (default: stop at the first).
    #[arg(long)]
    keep_going: bool,
    /// Print one line per seed.
    #[arg(short, long)]
    verbose: bool,
    /// Print the summary as JSON too.
    #[arg(long)]
    json: bool,
}

fn line(r: &SeedReport) -> String {
    format!(
        "seed {:>8}  {:>3} msgs  {:>10} B  {:>3} faults  {:>6} frames hit  {:>9} events  {}",
        r.seed,
        r.messages,
        r.bytes_verified,
        r.faults.scheduled(),
        r.faults.frames(),
        r.events,
        match &r.outcome {
            Ok(()) => "ok".to_owned(),
            Err(e) => format!("FAILED: {e}"),
        }
    )
}

fn replay(seed: u64) -> ExitCode {
    let plan = soak::soak_plan();
    let p = soak::draw(&plan, seed);
    outln!(
        "seed {seed} on {} ({} hosts, {} planes)",
        plan.name(),
        plan.host_count(),
        plan.planes()
    );
    outln!("workload:");
    for m in &p.messages {
        outln!(
            "  {:>8.1} us  h{} -> h{}  {} B",
            m.start.as_micros_f64(),
            m.src,
            m.dst,
            m.size
        );
    }
    outln!("faults:");
    for f in &p.faults {
        outln!("  {:>8.1} us  {:?}", f.at.as_micros_f64(), f.kind);
    }
    let r = soak::run_seed(seed);
    outln!("{}", line(&r));
    outln!("{:#?}", r.faults);
    if r.outcome.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

const TOOL: &str = "mrc-soak";

fn main() -> ExitCode {
    let args: Args = match tool::parse_args(TOOL) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let code = if let Some(seed) = args.replay {
        replay(seed)
    } else {
        campaign(&args)
    };
    tool::finish(TOOL, code)
}

fn campaign(args: &Args) -> ExitCode {
    let started = Instant::now();
    let budget = match (args.secs, args.seeds) {
        (None, None) => Some(Duration::from_mins(1)),
        (s, _) => s.map(Duration::from_secs),
    };
    let failed = Cell::new(false);
    let c = soak::campaign(
        args.first,
        &mut |run| {
            (args.keep_going || !failed.get())
                && tool::out_open()
                && args.seeds.is_none_or(|n| run < n)
                && budget.is_none_or(|b| started.elapsed() < b)
        },
        &mut |r| {
            if args.verbose || r.outcome.is_err() {
                outln!("{}", line(r));
            }
            if r.outcome.is_err() {
                failed.set(true);
            }
        },
    );
    let wall = started.elapsed().as_secs_f64();
    let f = &c.faults;
    outln!(
        "mrc-soak: {} seeds from {} in {wall:.1} s wall",
        c.seeds_run,
        args.first
    );
    outln!(
        "  messages verified  {} ({} bytes, every byte checked)",
        c.messages_verified,
        c.bytes_verified
    );
    outln!(
        "  faults scheduled   {} (link downs {}, switch stops {}, port downs {}, lossy links {}, fabric-wide impairments {})",
        f.scheduled(),
        f.link_downs,
        f.switch_stops,
        f.port_downs,
        f.lossy_links,
        f.impairments
    );
    outln!(
        "  frames hit         {} (lost {}, on down links {}, duplicated {}, corrupted {} [{} refused on ICRC], reordered {}, trimmed {}, dead switch {})",
        f.frames(),
        f.frames_lost,
        f.frames_down_dropped,
        f.frames_duplicated,
        f.frames_corrupted,
        f.bad_icrc_dropped,
        f.frames_reordered,
        f.frames_trimmed,
        f.frames_dead_switch
    );
    outln!("  simulator events   {}", c.events);
    match &c.first_failure {
        None => outln!("  failures           none"),
        Some(r) => {
            outln!(
                "  failures           {} seeds; first: seed {}",
                c.seeds_failed,
                r.seed
            );
            outln!("  replay with        mrc-soak --replay {}", r.seed);
        }
    }
    if args.json {
        let j = serde_json::json!({
            "seeds_run": c.seeds_run,
            "first_seed": args.first,
            "seeds_failed": c.seeds_failed,
            "messages_verified": c.messages_verified,
            "bytes_verified": c.bytes_verified,
            "faults": c.faults,
            "events": c.events,
            "first_failing_seed": c.first_failure.as_ref().map(|r| r.seed),
            "wall_secs": wall,
        });
        outln!("{j}");
    }
    if c.seeds_failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
