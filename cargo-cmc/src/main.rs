//! `cargo cmc`: the command-line front end of cmc.
//!
//! The subcommands `check`, `list` and `replay` need the model-checking engine
//! and the macros that register models; until they exist this binary answers
//! `--version` and refuses everything else with exit code 2 ("the tool could
//! not do its job"), so no script can mistake it for a passing check.

use std::process::ExitCode;

fn main() -> ExitCode {
    // Invoked as `cargo cmc …`, cargo passes "cmc" as the first argument.
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "cmc").collect();
    match args.first().map(String::as_str) {
        Some("--version" | "-V") => {
            println!("cargo-cmc {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("error: `cargo cmc {other}` is not available in this version of cmc (only --version is)");
            ExitCode::from(2)
        }
        None => {
            eprintln!("usage: cargo cmc --version");
            ExitCode::from(2)
        }
    }
}
