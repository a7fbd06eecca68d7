//! `--emit-test`: a `#[test]` that replays a counterexample, so that a bug
//! found becomes a regression test. It fails while the violation still
//! reproduces and when the trace no longer fits the program, and passes
//! once the trace's last state violates nothing.

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

/// The name of the emitted test for `model`: snake case, so the test
/// compiles without a `non_snake_case` warning.
fn test_name(model: &str) -> String {
    let mut name = String::from("cmc_counterexample");
    let mut gap = true;
    for c in model.chars() {
        if c.is_ascii_alphanumeric() {
            if gap {
                name.push('_');
                gap = false;
            }
            name.push(c.to_ascii_lowercase());
        } else {
            gap = true;
        }
    }
    name
}

/// `text` as lines of an inner doc comment.
fn doc_lines(text: &str) -> String {
    text.lines()
        .map(|l| format!("//! {l}").trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The test's source.
pub(crate) fn source(pkg: &CmcPackage, model: &str, trace: &cmc::Trace) -> String {
    let cmc = &pkg.runtime_import;
    let name = test_name(model);
    let violation = trace
        .violation
        .as_ref()
        .map(|v| v.to_string())
        .unwrap_or_default();
    format!(
        r#"//! Emitted by `cargo cmc check --emit-test`: replays the counterexample
//! cmc found in `{model}`:
{violation_doc}
//! The test fails while the violation reproduces (or the trace ends in
//! another violation), and when the program changed so that the trace no
//! longer fits it; it passes once the trace's last state violates nothing.
//! (The verdicts are the runtime's: `{cmc}::registry::regression_test`.)

#[global_allocator]
static ALLOC: {cmc}::Allocator = {cmc}::Allocator;

// Links the library with its registered models.
use {lib} as _;

const MODEL: &str = {model_q};

const TRACE: &str = {trace};

#[test]
fn {name}() {{
    {cmc}::registry::regression_test(MODEL, TRACE);
}}
"#,
        violation_doc = doc_lines(&violation),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_names_are_snake_case() {
        assert_eq!(
            test_name("fixture_violating::two_messages"),
            "cmc_counterexample_fixture_violating_two_messages"
        );
        assert_eq!(
            test_name("Aodv::Model::AODV_4"),
            "cmc_counterexample_aodv_model_aodv_4"
        );
    }

    #[test]
    fn every_line_of_a_message_stays_in_the_doc_comment() {
        assert_eq!(
            doc_lines("invariant violated: x\nline two\n\nlast"),
            "//! invariant violated: x\n//! line two\n//!\n//! last"
        );
    }
}
