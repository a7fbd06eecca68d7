//! `cargo cmc list`: the models found, one full path per line.

use anyhow::Result;

use crate::cli::{ListArgs, OK};

pub(crate) fn run(args: ListArgs) -> Result<u8> {
    let project = crate::project::discover(&args.project)?;
    for (_, models) in crate::harness::build_all(&project)? {
        for m in models {
            println!("{}", m.path);
        }
    }
    Ok(OK)
}
