//! `cargo cmc`: finds the models registered with `#[cmc::model]` in a cargo
//! project, builds a checking harness for them, runs them, and reports what
//! they found. See `cargo cmc --help`.

mod check;
mod cli;
mod emit;
mod harness;
mod init;
mod list;
mod output;
mod project;
mod replay;
mod report;

fn main() -> std::process::ExitCode {
    cli::main()
}
