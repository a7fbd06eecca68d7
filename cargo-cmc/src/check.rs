//! `cargo cmc check`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use cmc::registry::RunOptions;
use cmc::{CheckResult, FingerprintMode, FingerprintWidth, Strategy};

use crate::cli::{
    BitsArg, CheckArgs, FingerprintArg, StrategyArg, FAILURE, INCOMPLETE, OK, VIOLATION,
};
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
                    if secs.is_finite() && secs > 0.0 {
                        format!(
                            "--time-limit {secs:?} is too large for a time limit (leave it out \
                             for none)"
                        )
                    } else {
                        format!("--time-limit must be a positive number of seconds, not {secs:?}")
                    }
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
    o.por = args.por.then_some(true);
    o.transition_cache = args.no_transition_cache.then_some(false);
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
        FingerprintArg::Typed => FingerprintMode::Typed,
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
    let all: Vec<&String> = built
        .iter()
        .flat_map(|(_, m)| m.iter().map(|m| &m.path))
        .collect();
    for pattern in args.models.iter().chain(&args.exclude) {
        if !all.iter().any(|p| selects(pattern, p)) {
            let near: Vec<&str> = all
                .iter()
                .filter(|p| p.contains(pattern.trim_matches('*')))
                .map(|p| p.as_str())
                .collect();
            let hint = if near.is_empty() {
                String::new()
            } else {
                format!(
                    " (it is part of {}: name a model by its full path or its last segments, \
                     or use a glob such as `*{}*`)",
                    near.join(", "),
                    pattern.trim_matches('*')
                )
            };
            bail!(
                "--model `{pattern}` matches none of the models{hint}; the models: {}",
                all.iter()
                    .map(|p| p.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    let selected: Vec<(&crate::harness::Harness, &String)> = built
        .iter()
        .flat_map(|(h, models)| models.iter().map(move |m| (h, &m.path)))
        .filter(|(_, path)| {
            (args.models.is_empty() || args.models.iter().any(|m| selects(m, path)))
                && !args.exclude.iter().any(|m| selects(m, path))
        })
        .collect();
    if selected.is_empty() {
        bail!("--exclude leaves no model to check");
    }
    let options_json = serde_json::to_string(&options).context("options serialise")?;
    let mut out = Output::new(args.message_format, args.verbose);
    let json = args.message_format == crate::cli::MessageFormat::Json;
    let mut violation = false;
    let mut failed = false;
    let mut incomplete = false;
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
            crate::cli::report_warning(
                json,
                &format!(
                    "wrote a regression test for {} to {}",
                    result.model,
                    file.display()
                ),
            );
            emitted = true;
        }
        violation |= !result.violations.is_empty();
        failed |= result.verdict == cmc::Verdict::Interrupted;
        incomplete |= result.verdict == cmc::Verdict::Bounded;
    }
    if let Some(signal) = crate::harness::caught() {
        crate::cli::report_warning(
            json,
            &format!("stopped by signal {signal}; the traces found so far are saved"),
        );
        return Ok(128 + signal as u8);
    }
    if args.emit_test.is_some() && !emitted {
        crate::cli::report_warning(json, "no counterexample, so no regression test was written");
    }
    if incomplete && args.require_complete && !failed && !violation {
        crate::cli::report_warning(
            json,
            "a search ended bounded, and --require-complete asks for complete ones (exit 3)",
        );
    }
    Ok(if failed {
        FAILURE
    } else if violation {
        VIOLATION
    } else if incomplete && args.require_complete {
        INCOMPLETE
    } else {
        OK
    })
}

/// Whether `pattern` (of --model or --exclude) names the model at `path`:
/// the full path, or its last `::` segments, or a glob (`*`, `?`) over
/// either.
pub(crate) fn selects(pattern: &str, path: &str) -> bool {
    let glob = pattern.contains(['*', '?']);
    let mut tails = vec![path];
    let mut at = 0;
    while let Some(i) = path[at..].find("::") {
        at += i + 2;
        tails.push(&path[at..]);
    }
    tails.iter().any(|tail| {
        if glob {
            glob_match(pattern.as_bytes(), tail.as_bytes())
        } else {
            *tail == pattern
        }
    })
}

/// `*` matches any run of characters, `?` one character.
fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

pub(crate) fn traces_dir(project: &Project) -> PathBuf {
    project.target_dir.join("cmc").join("traces")
}

#[cfg(test)]
mod tests {
    use super::{glob_match, selects};

    #[test]
    fn a_model_is_named_exactly_or_by_a_glob() {
        let path = "aodv::models::aodv_4_line";
        for yes in [
            "aodv::models::aodv_4_line",
            "models::aodv_4_line",
            "aodv_4_line",
            "aodv_4_*",
            "*4_line",
            "aodv::*",
            "aodv_?_line",
        ] {
            assert!(selects(yes, path), "{yes}");
        }
        for no in [
            "aodv_4",
            "4_line",
            "line",
            "aodv_4_line_dup",
            "odv_4_line",
            "aodv_3_*",
        ] {
            assert!(!selects(no, path), "{no}");
        }
        assert!(selects("abp_3_payloads", "abp::abp_3_payloads"));
        assert!(!selects("abp_3_payloads", "abp::abp_3_payloads_dup"));
    }

    /// The glob matcher against a naive recursive one on every short
    /// pattern and text over a small alphabet.
    #[test]
    fn globs_match_like_the_naive_definition() {
        fn naive(p: &[u8], t: &[u8]) -> bool {
            match p.split_first() {
                None => t.is_empty(),
                Some((b'*', rest)) => (0..=t.len()).any(|i| naive(rest, &t[i..])),
                Some((&c, rest)) => {
                    t.first().is_some_and(|&x| c == b'?' || c == x) && naive(rest, &t[1..])
                }
            }
        }
        let words = |n: usize, alphabet: &[u8]| {
            let mut all: Vec<Vec<u8>> = vec![Vec::new()];
            for len in 1..=n {
                let mut w = vec![0usize; len];
                loop {
                    all.push(w.iter().map(|&i| alphabet[i]).collect());
                    let Some(k) = w.iter().rposition(|&i| i + 1 < alphabet.len()) else {
                        break;
                    };
                    w[k] += 1;
                    for x in &mut w[k + 1..] {
                        *x = 0;
                    }
                }
            }
            all
        };
        for p in words(4, b"ab*?") {
            for t in words(4, b"ab") {
                assert_eq!(glob_match(&p, &t), naive(&p, &t), "{p:?} {t:?}");
            }
        }
    }
}
