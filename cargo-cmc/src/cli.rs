//! The command line: one enum of subcommands, each with its flags in its
//! own module, and the dispatch to their `run`s.

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::check::CheckArgs;
use crate::diagnostic::report_error;
use crate::exit::Exit;
use crate::init::InitArgs;
use crate::list::ListArgs;
use crate::replay::ReplayArgs;

/// `cargo` as it runs a subcommand: `cargo-cmc cmc <command>`. It has no
/// help text of its own (`about = None`), as cargo's is not ours to write.
#[derive(Parser, Debug)]
#[command(name = "cargo", bin_name = "cargo", about = None, long_about = None)]
enum Cargo {
    /// Model-check the models of a Rust project.
    Cmc(Cmc),
}

/// `cargo cmc`: the subcommand to run.
#[derive(Args, Debug)]
#[command(version, about = "Model-check the #[cmc::model]s of a cargo project", long_about = None)]
struct Cmc {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands of `cargo cmc`.
#[derive(Subcommand, Debug)]
enum Command {
    /// Make a check crate (`cmc/`) in an existing crate, with a sample model.
    Init(InitArgs),
    /// Check models and report violations with replayable traces.
    Check(Box<CheckArgs>),
    /// List the models, one full path per line.
    List(ListArgs),
    /// Re-execute a saved trace, step by step.
    #[command(
        after_help = "Exit codes: 1 the violation reproduces; 3 the trace ends in \
another violation; 0 it ends in none (or --step stopped it); 4 it diverges because the \
program changed; 5 it diverges with the same sources (hidden nondeterminism); 6 the trace \
does not fit the model; 2 a tool error."
    )]
    Replay(ReplayArgs),
}

/// Whether the command line asks for JSON output (read before parsing, so
/// that an error in the arguments is JSON too).
fn json_requested() -> bool {
    let args: Vec<String> = std::env::args().collect();
    args.iter().enumerate().any(|(i, a)| {
        a == "--message-format=json"
            || (a == "--message-format" && args.get(i + 1).is_some_and(|v| v == "json"))
    })
}

/// Parses the command line, runs the subcommand, and turns its outcome
/// into the exit code (an error is printed, and exits with
/// [`Exit::Failure`]).
pub(crate) fn main() -> ExitCode {
    let json = json_requested();
    let cmc = match Cargo::try_parse() {
        Ok(Cargo::Cmc(cmc)) => cmc,
        Err(e) if json && e.use_stderr() => {
            report_error(true, e.to_string().trim());
            return Exit::Failure.into();
        }
        Err(e) => e.exit(),
    };
    crate::harness::catch_signals();
    let result = match cmc.command {
        Command::Init(args) => crate::init::run(args),
        Command::Check(args) => crate::check::run(*args),
        Command::List(args) => crate::list::run(args),
        Command::Replay(args) => crate::replay::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            report_error(json, &format!("{err:#}"));
            Exit::Failure.into()
        }
    }
}
