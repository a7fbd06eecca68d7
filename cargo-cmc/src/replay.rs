//! `cargo cmc replay <trace.json> [--step N]`.

use anyhow::{anyhow, bail, Context, Result};
use cmc::registry::RunOptions;
use cmc::{ReplayOutcome, Step, Trace};

use crate::cli::{ReplayArgs, OK, VIOLATION};

pub(crate) fn run(args: ReplayArgs) -> Result<u8> {
    let trace = Trace::load(&args.trace).map_err(|e| anyhow!("{e}"))?;
    let project = crate::project::discover(&args.project)?;
    let built = crate::harness::build_all(&project)?;
    let Some((harness, _)) = built
        .iter()
        .find(|(_, models)| models.iter().any(|m| m.path == trace.model))
    else {
        let all: Vec<&str> = built
            .iter()
            .flat_map(|(_, m)| m.iter().map(|m| m.path.as_str()))
            .collect();
        bail!(
            "{} is a trace of model `{}`, which this project does not have (its models: {})",
            args.trace.display(),
            trace.model,
            all.join(", ")
        );
    };
    let mut options = RunOptions::default();
    options.isolate = true;
    let mut cmd = vec![
        "replay".to_string(),
        trace.model.clone(),
        args.trace.display().to_string(),
        serde_json::to_string(&options).context("options serialise")?,
    ];
    if let Some(n) = args.step {
        if n == 0 || n > trace.steps.len() {
            bail!("--step {n}: the trace has steps 1 to {}", trace.steps.len());
        }
        cmd.push(n.to_string());
    }
    println!(
        "replaying {} ({} steps) from {}",
        trace.model,
        trace.steps.len(),
        args.trace.display()
    );
    let mut outcome: Option<ReplayOutcome> = None;
    harness.run(&cmd, |line| {
        match line["type"].as_str() {
            Some("step") => {
                let index = line["index"].as_u64().unwrap_or_default() as usize;
                let step: Step =
                    serde_json::from_value(line["step"].clone()).context("bad step line")?;
                crate::output::print_step(index, &step);
            }
            Some("replay") => {
                outcome = Some(
                    serde_json::from_value(line["outcome"].clone()).context("bad outcome line")?,
                );
            }
            _ => {}
        }
        Ok(())
    })?;
    match outcome.context("the harness printed no outcome")? {
        ReplayOutcome::Reproduced(v) => {
            println!("the violation reproduces: {v}");
            Ok(VIOLATION)
        }
        ReplayOutcome::Stopped { step } => {
            println!("stopped after step {step}, as asked; every step so far matched the trace");
            Ok(OK)
        }
        ReplayOutcome::Diverged {
            step: 0, message, ..
        } => {
            bail!("the trace does not match this build of the model: {message}")
        }
        ReplayOutcome::Diverged { step, message, .. } => {
            bail!("the replay diverged at step {step}: {message}")
        }
        ReplayOutcome::NoViolation => {
            bail!("every step matched, but the final state violates nothing: the trace does not reproduce")
        }
        other => bail!("unexpected replay outcome {other:?}"),
    }
}
