//! `--emit-test`: a `#[test]` that replays a counterexample, so that a bug
//! found becomes a regression test. It fails while the violation still
//! reproduces, and passes once the code no longer reaches it.

use std::path::Path;

use anyhow::{Context, Result};

use crate::project::CmcPackage;

/// A raw string literal holding `text`, with enough `#`s.
fn raw_string(text: &str) -> String {
    let mut hashes = String::from("#");
    while text.contains(&format!("\"{hashes}")) {
        hashes.push('#');
    }
    format!("r{hashes}\"{text}\"{hashes}")
}

/// The test's source.
pub(crate) fn source(pkg: &CmcPackage, model: &str, trace: &cmc::Trace) -> String {
    let cmc = &pkg.runtime_import;
    let name = format!(
        "cmc_counterexample_{}",
        crate::check::file_stem(model).to_lowercase()
    );
    let violation = trace
        .violation
        .as_ref()
        .map(|v| v.to_string())
        .unwrap_or_default();
    format!(
        r#"//! Emitted by `cargo cmc check --emit-test`: replays the counterexample
//! cmc found in `{model}`:
//! {violation}
//! The test fails while the violation reproduces.

#[global_allocator]
static ALLOC: {cmc}::Allocator = {cmc}::Allocator;

// Links the library with its registered models.
use {lib} as _;

const TRACE: &str = {trace};

#[test]
fn {name}() {{
    let trace = {cmc}::Trace::from_json(TRACE).expect("a cmc trace");
    let model = {cmc}::registry::models()
        .into_iter()
        .find(|m| m.path == {model_q})
        .expect("the model is registered");
    let mut options = {cmc}::registry::RunOptions::default();
    options.isolate = true;
    match model.replay(&options, &trace).expect("the trace fits the model") {{
        {cmc}::ReplayOutcome::Reproduced(v) => panic!("the counterexample still reproduces: {{v}}"),
        other => eprintln!("the counterexample no longer reproduces: {{other:?}}"),
    }}
}}
"#,
        lib = pkg.lib_name,
        trace = raw_string(&trace.to_json()),
        model_q = serde_json::to_string(model).expect("a string serialises"),
    )
}

pub(crate) fn write(file: &Path, pkg: &CmcPackage, model: &str, trace: &cmc::Trace) -> Result<()> {
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(file, source(pkg, model, trace))
        .with_context(|| format!("cannot write {}", file.display()))
}
