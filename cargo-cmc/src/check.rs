//! `cargo cmc check`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use cmc::registry::RunOptions;
use cmc::{CheckResult, FingerprintMode, FingerprintWidth, Strategy};

use crate::cli::{BitsArg, CheckArgs, FingerprintArg, StrategyArg, FAILURE, OK, VIOLATION};
use crate::output::{Output, Saved};
use crate::project::Project;

fn options(args: &CheckArgs) -> Result<RunOptions> {
    let mut o = RunOptions::default();
    o.strategy = args.strategy.map(|s| match s {
        StrategyArg::Dfs => Strategy::Dfs,
        StrategyArg::Bfs => Strategy::Bfs,
        StrategyArg::Random => Strategy::Random,
        StrategyArg::Best => Strategy::BestFirst,
        StrategyArg::Walk => Strategy::Walk,
    });
    if args.walks.is_some() && args.strategy != Some(StrategyArg::Walk) {
        anyhow::bail!("--walks bounds random walks: it needs --strategy walk");
    }
    if args.strategy == Some(StrategyArg::Walk) && args.walks.is_none() && args.time_limit.is_none()
    {
        anyhow::bail!(
            "--strategy walk never ends by itself: give it --walks N or --time-limit SECS"
        );
    }
    o.max_walks = args.walks;
    o.max_depth = args.max_depth;
    o.max_states = args.max_states;
    if let Some(secs) = args.time_limit {
        o.time_limit = Some(
            Duration::try_from_secs_f64(secs)
                .ok()
                .filter(|d| !d.is_zero())
                .with_context(|| {
                    format!("--time-limit must be a positive number of seconds, not {secs:?}")
                })?,
        );
    }
    o.transition_timeout = Some(
        Duration::try_from_secs_f64(args.transition_timeout)
            .ok()
            .with_context(|| {
                format!(
                    "--transition-timeout must be a number of seconds, 0 or more (0: no \
                     limit), not {}",
                    args.transition_timeout
                )
            })?,
    );
    o.seed = args.seed;
    // Absent: one worker per core (0), unless the model sets a number.
    o.jobs = Some(args.jobs.map_or(0, |j| j as usize));
    o.keep_going = args.keep_going.then_some(true);
    o.fingerprint = args.fingerprint.map(fingerprint_mode);
    o.width = args.fingerprint_bits.map(|b| match b {
        BitsArg::B64 => FingerprintWidth::Bits64,
        BitsArg::B128 => FingerprintWidth::Bits128,
    });
    o.check_determinism = args.check_determinism.map(|_| true);
    o.determinism_runs = args.check_determinism.map(|n| n as usize);
    o.max_memory = args.max_memory;
    o.random_seeds = args.random_seeds.map(|k| k as usize);
    o.isolate = true;
    Ok(o)
}

/// The runtime's mode for a `--fingerprint` argument.
pub(crate) fn fingerprint_mode(f: FingerprintArg) -> FingerprintMode {
    match f {
        FingerprintArg::State => FingerprintMode::State,
        FingerprintArg::Hash => FingerprintMode::Hash,
        FingerprintArg::Debug => FingerprintMode::Debug,
        FingerprintArg::Heap => FingerprintMode::Heap,
        FingerprintArg::Bytes => FingerprintMode::Bytes,
        FingerprintArg::Abstract => FingerprintMode::Abstract,
    }
}

/// A file name for a model path: `crate::module::fn` → `crate__module__fn`.
pub(crate) fn file_stem(model: &str) -> String {
    model
        .replace("::", "__")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// How the project was built, for the traces (replay rebuilds it so).
fn build_info(project: &Project, options: &RunOptions) -> cmc::BuildInfo {
    let args = &project.args;
    cmc::BuildInfo {
        packages: args.packages.clone(),
        features: args
            .features
            .iter()
            .flat_map(|f| f.split([' ', ',']))
            .filter(|f| !f.is_empty())
            .map(str::to_string)
            .collect(),
        all_features: args.all_features,
        no_default_features: args.no_default_features,
        cmc_version: env!("CARGO_PKG_VERSION").to_string(),
        sources: crate::project::sources_hash(project),
        profile: "release".to_string(),
        options: Some(options.clone()),
    }
}

/// A short hash of a trace's contents, so that traces of different
/// violations (or of the same one under other features) get different
/// files.
fn short_hash(trace: &cmc::Trace) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    trace.to_json().hash(&mut h);
    format!("{:08x}", h.finish() as u32)
}

fn save(project: &Project, options: &RunOptions, result: &CheckResult) -> Result<Vec<Saved>> {
    let traces = project.target_dir.join("cmc").join("traces");
    let reports = project.target_dir.join("cmc").join("reports");
    std::fs::create_dir_all(&traces)
        .with_context(|| format!("cannot create {}", traces.display()))?;
    std::fs::create_dir_all(&reports)
        .with_context(|| format!("cannot create {}", reports.display()))?;
    let stem = file_stem(&result.model);
    let mut saved = Vec::new();
    for v in &result.violations {
        let mut trace = v.trace.clone();
        trace.build = Some(build_info(project, options));
        // One file per violation: model, property, contents.
        let name = format!(
            "{stem}--{}-{}",
            file_stem(&v.record.property),
            short_hash(&trace)
        );
        let trace_file = traces.join(format!("{name}.json"));
        let report_file = reports.join(format!("{name}.html"));
        trace
            .save(&trace_file)
            .with_context(|| format!("cannot write {}", trace_file.display()))?;
        std::fs::write(&report_file, crate::report::render(&v.trace))
            .with_context(|| format!("cannot write {}", report_file.display()))?;
        saved.push(Saved {
            trace_file,
            report_file,
        });
    }
    Ok(saved)
}

/// `text` quoted for a POSIX shell, when it needs to be.
pub(crate) fn shell_quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// The command that replays `trace_file` (which records the features and
/// packages it was checked with), ready to paste.
pub(crate) fn replay_command(project: &Project, trace_file: &Path) -> String {
    let mut cmd = format!(
        "cargo cmc replay {}",
        shell_quote(&trace_file.display().to_string())
    );
    if let Some(m) = &project.manifest_path {
        cmd += &format!(" --manifest-path {}", shell_quote(&m.display().to_string()));
    }
    cmd
}

pub(crate) fn run(args: CheckArgs) -> Result<u8> {
    let options = options(&args)?;
    let project = crate::project::discover(&args.project)?;
    let built = crate::harness::build_all(&project)?;
    let selected: Vec<(&crate::harness::Harness, &String)> = built
        .iter()
        .flat_map(|(h, models)| models.iter().map(move |m| (h, &m.path)))
        .filter(|(_, path)| {
            args.models.is_empty() || args.models.iter().any(|m| path.contains(m.as_str()))
        })
        .collect();
    if selected.is_empty() {
        let all: Vec<&String> = built
            .iter()
            .flat_map(|(_, m)| m.iter().map(|m| &m.path))
            .collect();
        bail!(
            "--model {} matches none of the models: {}",
            args.models
                .iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(", "),
            all.iter()
                .map(|p| p.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let options_json = serde_json::to_string(&options).context("options serialise")?;
    let mut out = Output::new(args.message_format, args.verbose);
    let mut violation = false;
    let mut failed = false;
    let mut emitted = false;
    for (harness, model) in selected {
        if crate::harness::caught().is_some() {
            break;
        }
        out.start(model);
        let mut result: Option<CheckResult> = None;
        let ran = harness.run(
            &["check".into(), model.clone(), options_json.clone()],
            |line| {
                match line["type"].as_str() {
                    Some("progress") => {
                        let p: cmc::progress::Progress =
                            serde_json::from_value(line["progress"].clone())
                                .context("bad progress line")?;
                        out.progress(&p);
                    }
                    Some("result") => {
                        result = Some(
                            serde_json::from_value(line["result"].clone())
                                .context("bad result line")?,
                        );
                    }
                    _ => {}
                }
                Ok(())
            },
        );
        // One model's failure does not stop the others.
        let result = match ran.and_then(|()| {
            result.with_context(|| format!("the harness printed no result for {model}"))
        }) {
            Ok(result) => result,
            Err(e) => {
                out.error(model, &format!("{e:#}"));
                failed = true;
                continue;
            }
        };
        let saved = save(&project, &options, &result)?;
        out.result(&result, &saved, &|s| {
            replay_command(&project, &s.trace_file)
        });
        if let (Some(file), Some(v), false) = (&args.emit_test, result.violations.first(), emitted)
        {
            let pkg = project
                .packages
                .iter()
                .find(|p| p.name == harness.package)
                .context("the harness's package")?;
            crate::emit::write(file, pkg, &result.model, &v.trace)?;
            eprintln!(
                "cmc: wrote a regression test for {} to {}",
                result.model,
                file.display()
            );
            emitted = true;
        }
        violation |= !result.violations.is_empty();
        failed |= result.verdict == cmc::Verdict::Interrupted;
    }
    if let Some(signal) = crate::harness::caught() {
        eprintln!("cmc: stopped by signal {signal}; the traces found so far are saved");
        return Ok(128 + signal as u8);
    }
    if args.emit_test.is_some() && !emitted {
        eprintln!("cmc: no counterexample, so no regression test was written");
    }
    Ok(if failed {
        FAILURE
    } else if violation {
        VIOLATION
    } else {
        OK
    })
}

pub(crate) fn traces_dir(project: &Project) -> PathBuf {
    project.target_dir.join("cmc").join("traces")
}
