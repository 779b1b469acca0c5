//! What every mrc-rs command-line tool does the same way: how it parses its command line, how
//! it refuses what it cannot run, how it writes its stdout, and the exit status it ends with.
//!
//! - A command line, file or resource the tool cannot use is a [`Usage`] error: one line on
//!   stderr (`tool: what is wrong: what to change`), exit status 2 ([`EXIT_USAGE`]).
//! - A run that went wrong (an error completion, wrong data) is exit status 1.
//! - stdout goes through [`out!`](crate::out) / [`outln!`](crate::outln): a reader that goes
//!   away (`| head -1`) ends the output quietly, a stdout that cannot be written (`>/dev/full`)
//!   is one line on stderr and exit status 2; neither is a panic. Check [`finish`] at the end.
//!
//! ```no_run
//! use std::process::ExitCode;
//! use mrc_apps::tool;
//! # #[derive(clap::Parser)] struct Args;
//! fn main() -> ExitCode {
//!     let args: Args = match tool::parse_args("mrc-x") {
//!         Ok(a) => a,
//!         Err(code) => return code,
//!     };
//!     mrc_apps::outln!("hello");
//!     tool::finish("mrc-x", ExitCode::SUCCESS)
//! }
//! ```

use std::fmt;
use std::io::{self, Write as _};
use std::process::ExitCode;
use std::sync::Mutex;

/// Exit status of a command line, file or resource the tool cannot use.
pub const EXIT_USAGE: u8 = 2;
/// Exit status of a run that failed.
pub const EXIT_FAILED: u8 = 1;

/// A refusal of what the user gave: printed as one line, exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

/// A [`Usage`] error as an `anyhow::Error`: `return Err(usage!("-q 0: give at least one QP"))`.
#[macro_export]
macro_rules! usage {
    ($($t:tt)*) => {
        ::anyhow::Error::new($crate::tool::Usage(format!($($t)*)))
    };
}

/// Refuse with a [`Usage`] error: `bail_usage!("--planes {p}: 1 to 8")`.
#[macro_export]
macro_rules! bail_usage {
    ($($t:tt)*) => {
        return Err($crate::usage!($($t)*))
    };
}

/// Whether `e` (or anything in its chain) is a refusal of the user's input.
pub fn is_usage(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<Usage>())
}

/// `e` as the one line the user sees: the chain joined with ": ", without repeating a cause
/// that a context already quoted, newlines folded.
pub fn one_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for c in e.chain() {
        let s = c.to_string();
        let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
        if s.is_empty() || parts.iter().any(|p| p.contains(&s)) {
            continue;
        }
        parts.push(s);
    }
    parts.join(": ")
}

/// Print `e` as one line and give its exit status: 2 for a [`Usage`] error, else `otherwise`.
pub fn fail(tool: &str, e: &anyhow::Error, otherwise: u8) -> ExitCode {
    eprintln!("{tool}: {}", one_line(e));
    ExitCode::from(if is_usage(e) { EXIT_USAGE } else { otherwise })
}

/// Parse the command line with clap. Help and version print as clap prints them (exit 0); an
/// error is one line (clap's message and its tip, without the usage block), exit status 2.
pub fn parse_args<T: clap::Parser>(tool: &str) -> Result<T, ExitCode> {
    parse_from(tool, std::env::args_os())
}

/// [`parse_args`] over given arguments (the first is the program name).
pub fn parse_from<T, I, A>(tool: &str, args: I) -> Result<T, ExitCode>
where
    T: clap::Parser,
    I: IntoIterator<Item = A>,
    A: Into<std::ffi::OsString> + Clone,
{
    use clap::error::ErrorKind;
    match T::try_parse_from(args) {
        Ok(t) => Ok(t),
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) =>
        {
            // Help goes to stdout; a closed stdout is not worth a panic.
            let _ = e.print();
            Err(
                if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                    ExitCode::from(EXIT_USAGE)
                } else {
                    ExitCode::SUCCESS
                },
            )
        }
        Err(e) => {
            eprintln!("{tool}: {}", clap_line(&e));
            Err(ExitCode::from(EXIT_USAGE))
        }
    }
}

/// A clap error as one line: its message, then its tips in parentheses.
fn clap_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let mut msg: Option<String> = None;
    let mut tips = Vec::new();
    // The message may go on in indented lines (the arguments a "required arguments were not
    // provided" names), up to the first blank line.
    let mut in_msg = false;
    for raw in text.lines() {
        let line = raw.trim();
        if let Some(m) = line.strip_prefix("error: ") {
            msg = Some(m.to_owned());
            in_msg = true;
        } else if let Some(t) = line.strip_prefix("tip: ") {
            tips.push(t);
            in_msg = false;
        } else if line.is_empty() {
            in_msg = false;
        } else if in_msg
            && raw.starts_with(' ')
            && let Some(m) = msg.as_mut()
        {
            m.push(' ');
            m.push_str(line);
        }
    }
    let msg = msg.unwrap_or_else(|| text.lines().next().unwrap_or("bad command line").to_owned());
    if tips.is_empty() {
        format!("{msg} (see --help)")
    } else {
        format!("{msg} ({})", tips.join("; "))
    }
}

/// What became of stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
enum OutState {
    Open,
    /// The reader went away: the rest of the output is dropped, the exit status unchanged.
    Closed,
    /// Writing failed for another reason (the message): exit status 2.
    Failed(String),
}

static STDOUT: Mutex<OutState> = Mutex::new(OutState::Open);

/// Write to stdout; after a failure, nothing more is written. Used by [`out!`](crate::out).
pub fn write_out(args: fmt::Arguments<'_>) {
    write_with(|o| o.write_fmt(args));
}

/// Run `f` on stdout unless it failed before, and remember how it fails. Stdout is
/// line-buffered: a line's error shows when its newline flushes it.
fn write_with(f: impl FnOnce(&mut io::StdoutLock<'static>) -> io::Result<()>) {
    let mut state = STDOUT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if *state != OutState::Open {
        return;
    }
    if let Err(e) = f(&mut io::stdout().lock()) {
        *state = match e.kind() {
            io::ErrorKind::BrokenPipe => OutState::Closed,
            _ => OutState::Failed(e.to_string()),
        };
    }
}

/// Whether stdout still takes output (false once its reader left or writing failed): long
/// runs may stop early.
pub fn out_open() -> bool {
    *STDOUT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        == OutState::Open
}

/// The exit status of a tool whose run ended with `code`: 2 with one line on stderr if stdout
/// could not be written, else `code` (a reader that went away early changes nothing).
pub fn finish(tool: &str, code: ExitCode) -> ExitCode {
    // What is left of a line without its newline.
    write_with(io::Write::flush);
    let state = STDOUT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    match state {
        OutState::Failed(e) => {
            eprintln!(
                "{tool}: cannot write stdout: {e}: give it a file or pipe that takes the output"
            );
            ExitCode::from(EXIT_USAGE)
        }
        OutState::Open | OutState::Closed => code,
    }
}

/// `print!` for the tools: see the module's docs.
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => {
        $crate::tool::write_out(format_args!($($t)*))
    };
}

/// `println!` for the tools: see the module's docs.
#[macro_export]
macro_rules! outln {
    () => {
        $crate::tool::write_out(format_args!("\n"))
    };
    ($($t:tt)*) => {
        $crate::tool::write_out(format_args!("{}\n", format_args!($($t)*)))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_drops_repeated_causes_and_newlines() {
        let e = anyhow::anyhow!("--evs 0: at least 1").context("--evs 0: at least 1");
        assert_eq!(one_line(&e), "--evs 0: at least 1");
        let e = anyhow::anyhow!("line one\nline two").context("reading plan.toml");
        assert_eq!(one_line(&e), "reading plan.toml: line one line two");
    }

    #[test]
    fn usage_errors_are_found_through_contexts() {
        let e = usage!("-q 0: give at least one QP");
        assert!(is_usage(&e));
        let e = e.context("settings");
        assert!(is_usage(&e));
        assert!(!is_usage(&anyhow::anyhow!("a run failed")));
    }

    #[derive(Debug, clap::Parser)]
    struct T {
        #[arg(long = "all-evs")]
        all_evs: bool,
        #[arg(short = 'n')]
        n: Option<u32>,
    }

    #[test]
    fn clap_errors_are_one_line_with_their_tip() {
        let e = <T as clap::Parser>::try_parse_from(["t", "--all_evs"]).unwrap_err();
        let line = clap_line(&e);
        assert!(!line.contains('\n'), "{line}");
        assert!(
            line.contains("--all_evs") && line.contains("--all-evs"),
            "{line}"
        );
        #[derive(Debug, clap::Parser)]
        struct R {
            #[arg(long)]
            to: String,
        }
        let e = <R as clap::Parser>::try_parse_from(["t"]).unwrap_err();
        let line = clap_line(&e);
        assert!(line.contains("--to") && !line.contains('\n'), "{line}");
        let e = <T as clap::Parser>::try_parse_from(["t", "-n", "x"]).unwrap_err();
        let line = clap_line(&e);
        assert!(line.contains("'x'") && !line.contains('\n'), "{line}");
    }
}
