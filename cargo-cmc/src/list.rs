//! `cargo cmc list`: the models found, one full path per line.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::args::ProjectArgs;
use crate::exit::Exit;

/// `cargo cmc list`: which packages to list the models of.
#[derive(Args, Debug)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    pub(crate) project: ProjectArgs,
}

/// Runs `cargo cmc list`: builds the harnesses and prints their models.
pub(crate) fn run(args: ListArgs) -> Result<ExitCode> {
    let project = crate::project::discover(&args.project)?;
    for (_, models) in crate::harness::build_all(&project, None, None)? {
        for m in models {
            println!("{}", m.path);
        }
    }
    Ok(Exit::Success.into())
}
