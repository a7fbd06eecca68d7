//! `cargo cmc`: finds the models registered with `#[cmc::model]` in a cargo
//! project, builds a checking harness for them, runs them, and reports what
//! they found. See `cargo cmc --help`.
//!
//! The modules form layers, each using only those below it: `cli` (the
//! command line and the dispatch); the subcommands `check`, `init`, `list`
//! and `replay`, each with its flags; and below them `args` (shared
//! flags), `exit` (exit codes), `diagnostic` (errors and warnings),
//! `traces`, `harness`, `coverage` (`check --coverage`: the instrumented
//! build's rustc wrapper, lcov, the summary and the page), `project`,
//! `output`, `emit` and `report`.

mod args;
mod check;
mod cli;
mod coverage;
mod diagnostic;
mod emit;
mod exit;
mod harness;
mod init;
mod list;
mod output;
mod project;
mod replay;
mod report;
mod traces;

fn main() -> std::process::ExitCode {
    // The rustc wrapper of a coverage build (`cargo cmc check --coverage`).
    if let Some(code) = coverage::wrap_rustc() {
        return code;
    }
    cli::main()
}
