//! `cargo cmc replay <trace.json> [--step N]`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use cmc::registry::RunOptions;
use cmc::{ReplayOutcome, Step, Trace};

use crate::args::{FingerprintArg, ProjectArgs};
use crate::exit::Exit;
use crate::project::Project;
use crate::traces::{file_stem, traces_dir};

/// `cargo cmc replay`: the trace, how far to replay it, and how to build
/// and fingerprint.
#[derive(Args, Debug)]
pub(crate) struct ReplayArgs {
    #[command(flatten)]
    pub(crate) project: ProjectArgs,
    /// The trace file written by `cargo cmc check`.
    #[arg(required_unless_present = "last")]
    pub(crate) trace: Option<PathBuf>,
    /// Replay the newest trace `cargo cmc check` saved in this project.
    #[arg(long, conflicts_with = "trace")]
    pub(crate) last: bool,
    /// Stop after this step.
    #[arg(long, value_name = "N")]
    pub(crate) step: Option<usize>,
    /// Fingerprint the states by this source instead of the one the trace
    /// was recorded with.
    #[arg(long, value_enum, value_name = "MODE")]
    pub(crate) fingerprint: Option<FingerprintArg>,
}

/// The build flags to replay with: the command line's when it gives any,
/// else the ones the trace recorded (saying so either way).
fn build_args(given: &ProjectArgs, trace: &Trace) -> ProjectArgs {
    let mut args = given.clone();
    let Some(b) = &trace.build else {
        return args;
    };
    let describe = |features: &[String], all: bool, no_default: bool, packages: &[String]| {
        let mut flags = Vec::new();
        if !features.is_empty() {
            flags.push(format!("--features {}", features.join(",")));
        }
        if all {
            flags.push("--all-features".into());
        }
        if no_default {
            flags.push("--no-default-features".into());
        }
        for p in packages {
            flags.push(format!("-p {p}"));
        }
        if flags.is_empty() {
            "no feature flags".to_string()
        } else {
            flags.join(" ")
        }
    };
    let recorded = describe(
        &b.features,
        b.all_features,
        b.no_default_features,
        &b.packages,
    );
    let on_command_line = !given.features.is_empty()
        || given.all_features
        || given.no_default_features
        || !given.packages.is_empty();
    if on_command_line {
        let now = describe(
            &given.features,
            given.all_features,
            given.no_default_features,
            &given.packages,
        );
        if now != recorded {
            println!("cmc: building with {now} from the command line; the trace was checked with {recorded}");
        }
    } else {
        args.features = b.features.clone();
        args.all_features = b.all_features;
        args.no_default_features = b.no_default_features;
        args.packages = b.packages.clone();
        if recorded != "no feature flags" {
            println!("cmc: building with {recorded}, as the trace was checked");
        }
    }
    args
}

/// The replay's arguments with the trace file resolved.
struct ReplayFile {
    file: PathBuf,
    args: ReplayArgs,
}

impl std::ops::Deref for ReplayFile {
    type Target = ReplayArgs;
    fn deref(&self) -> &ReplayArgs {
        &self.args
    }
}

/// The newest trace file, in the project's traces directory, of a model
/// the project has (a workspace's crates share the directory).
fn last_trace(given: &ProjectArgs) -> Result<PathBuf> {
    let project = crate::project::discover(given)?;
    let built = crate::harness::build_all(&project, None, None)?;
    let stems: Vec<String> = built
        .iter()
        .flat_map(|(_, models)| models.iter())
        .map(|m| format!("{}--", file_stem(&m.path)))
        .collect();
    let dir = traces_dir(&project);
    let newest = std::fs::read_dir(&dir)
        .ok()
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.ends_with(".json") && stems.iter().any(|s| name.starts_with(s.as_str()))
        })
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .max();
    match newest {
        Some((_, path)) => Ok(path),
        None => bail!(
            "--last: no trace of this project's models in {}: `cargo cmc check` saves one \
             for each violation it finds",
            dir.display()
        ),
    }
}

/// Whether the project's sources are the ones `trace` was recorded with:
/// `None` when the trace does not record them.
fn same_sources(project: &Project, trace: &Trace) -> Option<bool> {
    let recorded = trace.build.as_ref().map(|b| b.sources.as_str())?;
    if recorded.is_empty() {
        return None;
    }
    Some(crate::project::sources_hash(project) == recorded)
}

/// Explains a divergence or a misfit and chooses its exit code: the program
/// changed (4, with what the model and the sources tell), or the same
/// program behaved differently (5, hidden nondeterminism in `handler`).
fn divergence_verdict(
    project: &Project,
    trace: &Trace,
    handler: &str,
    changed: Option<&str>,
) -> Exit {
    if let Some(c) = changed {
        println!("the model changed since the trace was recorded: {c}");
    }
    match same_sources(project, trace) {
        Some(false) => {
            println!(
                "the project's sources changed since the trace was recorded: the divergence \
                 is that change, not nondeterminism (check the model again for a new trace)"
            );
            Exit::Diverged
        }
        Some(true) if changed.is_none() => {
            println!(
                "the project's sources are the ones the trace was recorded with: hidden \
                 nondeterminism in {handler} (or a dependency outside the project changed); \
                 `cargo cmc check --check-determinism` names its cause"
            );
            Exit::Nondeterminism
        }
        Some(true) => Exit::Diverged,
        None => {
            if changed.is_none() {
                println!(
                    "the trace does not record the sources it was checked with, so cmc \
                     cannot tell a changed program from hidden nondeterminism"
                );
            }
            Exit::Diverged
        }
    }
}

/// Runs `cargo cmc replay`: the exit code says how the replay ended (see
/// [`Exit`]).
pub(crate) fn run(mut args: ReplayArgs) -> Result<ExitCode> {
    let file = match args.trace.take() {
        Some(file) => file,
        None => last_trace(&args.project)?,
    };
    let args = ReplayFile { file, args };
    let trace = Trace::load(&args.file).map_err(|e| anyhow!("{e}"))?;
    let project = crate::project::discover(&build_args(&args.project, &trace))?;
    let built = crate::harness::build_all(&project, None, None)?;
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
            args.file.display(),
            trace.model,
            all.join(", ")
        );
    };
    let mut options = RunOptions::default();
    options.isolate = true;
    // The check's transition timeout, so that a hang reproduces as fast.
    options.transition_timeout = trace
        .build
        .as_ref()
        .and_then(|b| b.options.as_ref())
        .and_then(|o| o.transition_timeout);
    if let Some(f) = args.fingerprint {
        let mode = f.mode();
        options.fingerprint = Some(mode);
        let recorded = trace
            .fingerprint
            .map_or("each type's best source", |m| m.name());
        if trace.fingerprint != Some(mode) {
            println!(
                "cmc: fingerprinting by {} from the command line; the trace was recorded with {recorded}",
                mode.name()
            );
        }
    }
    let mut cmd = vec![
        "replay".to_string(),
        trace.model.clone(),
        args.file.display().to_string(),
        serde_json::to_string(&options).context("options serialise")?,
    ];
    if let Some(n) = args.step {
        let skipped = trace.skipped();
        if n <= skipped || n > trace.len() {
            bail!(
                "--step {n}: the trace describes steps {} to {}{}",
                skipped + 1,
                trace.len(),
                if skipped > 0 {
                    " (the steps before them are events only: the trace is long)"
                } else {
                    ""
                }
            );
        }
        cmd.push(n.to_string());
    }
    let n = trace.len();
    println!(
        "replaying {} ({n} step{}) from {}",
        trace.model,
        if n == 1 { "" } else { "s" },
        args.file.display()
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
    let recorded = trace.violation.as_ref();
    match outcome.context("the harness printed no outcome")? {
        ReplayOutcome::Reproduced(v)
            if recorded.is_none_or(|r| r.kind == v.kind && r.property == v.property) =>
        {
            println!("the violation reproduces: {v}");
            Ok(Exit::Violation.into())
        }
        ReplayOutcome::Reproduced(v) => {
            println!("the trace now ends in another violation: {v}");
            if let Some(r) = recorded {
                println!("it recorded: {r}");
            }
            Ok(Exit::Inconclusive.into())
        }
        ReplayOutcome::Stopped { step } => {
            println!("stopped after step {step}, as asked; every step so far matched the trace");
            Ok(Exit::Success.into())
        }
        ReplayOutcome::Diverged {
            step,
            message,
            handler,
            detail,
            changed,
            ..
        } => {
            if step == 0 {
                println!("the trace's initial state is not this build's: {message}");
            } else {
                println!("the replay diverged at step {step}: {message}");
            }
            if let Some(d) = detail {
                println!("{d}");
            }
            Ok(divergence_verdict(&project, &trace, &handler, changed.as_deref()).into())
        }
        ReplayOutcome::Misfit {
            step,
            message,
            changed,
            ..
        } => {
            println!("the trace does not fit the model at step {step}: {message}");
            if let Some(c) = changed {
                println!("the model changed since the trace was recorded: {c}");
            }
            if same_sources(&project, &trace) == Some(false) {
                println!(
                    "the project's sources changed since the trace was recorded: check the \
                     model again for a new trace"
                );
            }
            Ok(Exit::Misfit.into())
        }
        ReplayOutcome::NoViolation => {
            match recorded {
                Some(r) => println!(
                    "the trace ran to its end and its final state violates nothing: the \
                     recorded violation no longer occurs ({r})"
                ),
                None => {
                    println!("the trace ran to its end and its final state violates nothing")
                }
            }
            Ok(Exit::Success.into())
        }
        other => bail!("unexpected replay outcome {other:?}"),
    }
}
