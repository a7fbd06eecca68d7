//! `cargo cmc check --coverage`: which lines of the checked crates the
//! search executed.
//!
//! The harness is built a second time, in a target directory of its own
//! (`target/cmc/coverage-build`), with the toolchain's source-based
//! coverage (`-C instrument-coverage`) on the checked crates only: the
//! package, its local (path) dependencies and the crates `--coverage-crate`
//! names. `cargo cmc` is its own `RUSTC_WRAPPER` for that build
//! ([`wrap_rustc`]), adding the flag where it applies, so the runtime and
//! the other dependencies run at full speed and count nothing. The runtime
//! collects the counters of every process of the check (`cmc::coverage`)
//! and writes a raw profile; this module turns it into lcov with the
//! toolchain's `llvm-profdata` and `llvm-cov` (the `llvm-tools` component,
//! installed with rustup when missing), and summarizes it: the lines
//! reached per file, the functions never entered, the handlers never
//! enabled, as text, JSON and an HTML page.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};
use serde::Serialize;

/// The variable that turns `cargo cmc` into a rustc wrapper: the crate
/// names (comma separated, as rustc spells them) to instrument.
pub(crate) const CRATES_VAR: &str = "CMC_COVERAGE_CRATES";

/// When `cargo cmc` runs as the coverage build's `RUSTC_WRAPPER` (cargo
/// calls it with rustc's path and rustc's arguments), runs rustc with
/// `-C instrument-coverage` added for the crates [`CRATES_VAR`] names, and
/// returns its exit code; `None` when this is not such a call.
pub(crate) fn wrap_rustc() -> Option<ExitCode> {
    let crates = std::env::var(CRATES_VAR).ok()?;
    let mut args = std::env::args_os().skip(1);
    let rustc = args.next()?;
    if rustc == "cmc" {
        return None;
    }
    let args: Vec<OsString> = args.collect();
    let value_of = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.to_str())
    };
    let wanted = value_of("--crate-name").is_some_and(|name| {
        crates.split(',').any(|c| c == name) && value_of("--crate-type") != Some("proc-macro")
    });
    let mut cmd = Command::new(&rustc);
    cmd.args(&args);
    if wanted {
        cmd.args(["-C", "instrument-coverage"]);
    }
    Some(match cmd.status() {
        Ok(status) => ExitCode::from(status.code().unwrap_or(101).clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("cargo cmc: cannot run {}: {e}", Path::new(&rustc).display());
            ExitCode::from(101)
        }
    })
}

/// The crates whose coverage a check of `pkg` measures, as rustc names
/// them: the package's library, its local (path) dependencies, and the
/// crates `--coverage-crate` adds.
pub(crate) fn crates_of(pkg: &crate::project::CmcPackage, extra: &[String]) -> Vec<String> {
    let mut crates = vec![pkg.lib_name.clone()];
    crates.extend(pkg.local_deps.iter().map(|d| d.name.replace('-', "_")));
    crates.extend(extra.iter().map(|c| c.replace('-', "_")));
    crates.sort();
    crates.dedup();
    crates
}

/// Keeps the files of the checked crates: under the package's directory
/// or a local dependency's, or in the source of a crate `extra` names
/// (`…/<crate>-<version>/…`). Code a macro of another crate expanded into
/// them is attributed to that crate's file, which is dropped.
pub(crate) fn retain_checked(lcov: &mut Lcov, pkg: &crate::project::CmcPackage, extra: &[String]) {
    let dirs: Vec<&Path> = std::iter::once(pkg.dir.as_path())
        .chain(pkg.local_deps.iter().map(|d| d.dir.as_path()))
        .collect();
    let of_extra = |path: &Path| {
        path.components().any(|c| {
            let c = c.as_os_str().to_string_lossy();
            extra.iter().any(|e| {
                c.strip_prefix(e.as_str())
                    .and_then(|rest| rest.strip_prefix('-'))
                    .is_some_and(|v| v.starts_with(|ch: char| ch.is_ascii_digit()))
            })
        })
    };
    lcov.files
        .retain(|path, _| dirs.iter().any(|d| path.starts_with(d)) || of_extra(path));
}

/// The toolchain's `llvm-profdata` and `llvm-cov`.
#[derive(Debug)]
pub(crate) struct Tools {
    profdata: PathBuf,
    cov: PathBuf,
}

fn rustc_output(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("rustc")
        .args(args)
        .current_dir(dir)
        .output()
        .context("cannot run rustc")?;
    if !out.status.success() {
        bail!(
            "rustc {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl Tools {
    /// Finds the tools of the toolchain that builds in `dir`, installing
    /// the `llvm-tools` component with rustup when they are missing.
    pub(crate) fn find(dir: &Path) -> Result<Tools> {
        let sysroot = rustc_output(dir, &["--print", "sysroot"])?;
        let version = rustc_output(dir, &["-vV"])?;
        let host = version
            .lines()
            .find_map(|l| l.strip_prefix("host: "))
            .context("rustc -vV names no host")?;
        let bin = Path::new(&sysroot)
            .join("lib/rustlib")
            .join(host)
            .join("bin");
        let tools = Tools {
            profdata: bin.join("llvm-profdata"),
            cov: bin.join("llvm-cov"),
        };
        if tools.profdata.exists() && tools.cov.exists() {
            return Ok(tools);
        }
        eprintln!("cargo cmc: --coverage needs the toolchain's llvm-tools; installing them (rustup component add llvm-tools)");
        let status = Command::new("rustup")
            .args(["component", "add", "llvm-tools"])
            .current_dir(dir)
            .status();
        if !matches!(status, Ok(s) if s.success()) || !tools.profdata.exists() {
            bail!(
                "--coverage needs llvm-profdata and llvm-cov in {} (install them with \
                 `rustup component add llvm-tools`)",
                bin.display()
            );
        }
        Ok(tools)
    }

    /// Turns the raw profile `profraw` of `binary` into lcov, leaving out
    /// the files under `exclude` (the harness's own source).
    /// The profiles of the other processes of a search across processes
    /// (`<profraw>.1`, `<profraw>.2`, …) are merged with it.
    pub(crate) fn lcov(&self, profraw: &Path, binary: &Path, exclude: &Path) -> Result<Lcov> {
        let profdata = profraw.with_extension("profdata");
        let out = Command::new(&self.profdata)
            .args(["merge", "-sparse"])
            .arg(profraw)
            .args(other_processes(profraw))
            .arg("-o")
            .arg(&profdata)
            .output()
            .with_context(|| format!("cannot run {}", self.profdata.display()))?;
        if !out.status.success() {
            bail!(
                "llvm-profdata cannot read the coverage profile {}: {}",
                profraw.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let out = Command::new(&self.cov)
            .args(["export", "-format=lcov"])
            .arg(format!("-instr-profile={}", profdata.display()))
            .arg(binary)
            .output()
            .with_context(|| format!("cannot run {}", self.cov.display()))?;
        if !out.status.success() {
            bail!(
                "llvm-cov cannot export the coverage of {}: {}",
                binary.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let _ = std::fs::remove_file(&profdata);
        let mut lcov = Lcov::parse(&String::from_utf8_lossy(&out.stdout));
        lcov.files.retain(|path, _| !path.starts_with(exclude));
        Ok(lcov)
    }
}

/// The profiles the other processes of a search across processes wrote
/// beside `profraw` (`<profraw>.<rank>`).
pub(crate) fn other_processes(profraw: &Path) -> Vec<PathBuf> {
    let Some(name) = profraw
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
    else {
        return Vec::new();
    };
    let dir = profraw.parent().unwrap_or(Path::new("."));
    let mut found: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let file = e.file_name().to_string_lossy().into_owned();
            let rank = file.strip_prefix(&name)?.strip_prefix('.')?.parse().ok()?;
            Some((rank, e.path()))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, p)| p).collect()
}

/// One source file's coverage.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FileCoverage {
    /// Hits per line that has code.
    pub(crate) lines: BTreeMap<u32, u64>,
    /// Functions by demangled name: their first line and their hits
    /// (summed over a generic function's instances).
    pub(crate) functions: BTreeMap<String, (u32, u64)>,
    /// Branches: (line, block, branch) → times taken.
    pub(crate) branches: BTreeMap<(u32, u32, u32), u64>,
}

/// Coverage of several files, as lcov describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Lcov {
    pub(crate) files: BTreeMap<PathBuf, FileCoverage>,
}

/// A function's name as people read it: demangled, without the hash.
fn readable(name: &str) -> String {
    format!("{:#}", rustc_demangle::demangle(name))
}

impl Lcov {
    /// Parses lcov's tracefile format (the records `SF`, `FN`, `FNDA`,
    /// `DA`, `BRDA`, `end_of_record`; the others are totals it recomputes).
    pub(crate) fn parse(text: &str) -> Lcov {
        let mut lcov = Lcov::default();
        let mut file: Option<(PathBuf, FileCoverage)> = None;
        let mut starts: BTreeMap<String, u32> = BTreeMap::new();
        for line in text.lines() {
            let (tag, rest) = line.split_once(':').unwrap_or((line, ""));
            match (tag, &mut file) {
                ("SF", _) => {
                    file = Some((PathBuf::from(rest), FileCoverage::default()));
                    starts.clear();
                }
                ("FN", Some((_, f))) => {
                    if let Some((l, name)) = rest.split_once(',') {
                        let l = l.parse().unwrap_or(0);
                        starts.insert(name.to_string(), l);
                        f.functions.entry(readable(name)).or_insert((l, 0));
                    }
                }
                ("FNDA", Some((_, f))) => {
                    if let Some((n, name)) = rest.split_once(',') {
                        let l = starts.get(name).copied().unwrap_or(0);
                        let e = f.functions.entry(readable(name)).or_insert((l, 0));
                        e.1 += n.parse::<u64>().unwrap_or(0);
                    }
                }
                ("DA", Some((_, f))) => {
                    let mut parts = rest.split(',');
                    if let (Some(l), Some(n)) = (parts.next(), parts.next()) {
                        if let (Ok(l), Ok(n)) = (l.parse(), n.parse::<u64>()) {
                            *f.lines.entry(l).or_insert(0) += n;
                        }
                    }
                }
                ("BRDA", Some((_, f))) => {
                    let p: Vec<&str> = rest.split(',').collect();
                    if let [l, b, br, taken] = p[..] {
                        if let (Ok(l), Ok(b), Ok(br)) = (l.parse(), b.parse(), br.parse()) {
                            *f.branches.entry((l, b, br)).or_insert(0) +=
                                taken.parse::<u64>().unwrap_or(0);
                        }
                    }
                }
                ("end_of_record", _) => {
                    if let Some((path, f)) = file.take() {
                        lcov.files.entry(path).or_default().merge(&f);
                    }
                }
                _ => {}
            }
        }
        lcov
    }

    /// Adds `other`'s hits (the union of two checks).
    pub(crate) fn merge(&mut self, other: &Lcov) {
        for (path, f) in &other.files {
            self.files.entry(path.clone()).or_default().merge(f);
        }
    }

    /// The lcov tracefile.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        for (path, f) in &self.files {
            out.push_str(&format!("SF:{}\n", path.display()));
            for (name, (l, _)) in &f.functions {
                out.push_str(&format!("FN:{l},{name}\n"));
            }
            for (name, (_, n)) in &f.functions {
                out.push_str(&format!("FNDA:{n},{name}\n"));
            }
            out.push_str(&format!("FNF:{}\n", f.functions.len()));
            out.push_str(&format!(
                "FNH:{}\n",
                f.functions.values().filter(|(_, n)| *n > 0).count()
            ));
            for (&(l, b, br), &n) in &f.branches {
                out.push_str(&format!("BRDA:{l},{b},{br},{n}\n"));
            }
            if !f.branches.is_empty() {
                out.push_str(&format!("BRF:{}\n", f.branches.len()));
                out.push_str(&format!(
                    "BRH:{}\n",
                    f.branches.values().filter(|&&n| n > 0).count()
                ));
            }
            for (l, n) in &f.lines {
                out.push_str(&format!("DA:{l},{n}\n"));
            }
            out.push_str(&format!("LF:{}\n", f.lines.len()));
            out.push_str(&format!(
                "LH:{}\n",
                f.lines.values().filter(|&&n| n > 0).count()
            ));
            out.push_str("end_of_record\n");
        }
        out
    }
}

impl FileCoverage {
    fn merge(&mut self, other: &FileCoverage) {
        for (&l, &n) in &other.lines {
            *self.lines.entry(l).or_insert(0) += n;
        }
        for (name, &(l, n)) in &other.functions {
            let e = self.functions.entry(name.clone()).or_insert((l, 0));
            e.1 += n;
        }
        for (&k, &n) in &other.branches {
            *self.branches.entry(k).or_insert(0) += n;
        }
    }

    /// Lines with code, and those reached.
    pub(crate) fn counts(&self) -> (usize, usize) {
        (
            self.lines.len(),
            self.lines.values().filter(|&&n| n > 0).count(),
        )
    }

    /// The lines never reached, as ranges of consecutive lines with code.
    pub(crate) fn unreached(&self) -> Vec<(u32, u32)> {
        let mut out: Vec<(u32, u32)> = Vec::new();
        let mut last_code: Option<u32> = None;
        for (&l, &n) in &self.lines {
            if n == 0 {
                match out.last_mut() {
                    // Consecutive among the lines with code.
                    Some((_, end)) if last_code == Some(*end) => *end = l,
                    _ => out.push((l, l)),
                }
            }
            last_code = Some(l);
        }
        out
    }
}

/// Ranges as people write them: `12-15, 20`.
pub(crate) fn ranges_text(ranges: &[(u32, u32)]) -> String {
    ranges
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The coverage of several models together.
#[derive(Debug, Default)]
pub(crate) struct Union {
    pub(crate) lcov: Lcov,
    /// (package, handler) → the states it was enabled in, in every model.
    pub(crate) handlers: BTreeMap<(String, String), u64>,
    pub(crate) models: usize,
}

/// What the end of a check says about coverage (text and JSON).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Summary {
    /// The model, or `all` for the union of several.
    pub(crate) model: String,
    pub(crate) lines: usize,
    pub(crate) lines_reached: usize,
    pub(crate) files: Vec<FileSummary>,
    /// Handlers never enabled (`Type::handler`).
    pub(crate) handlers_never_enabled: Vec<String>,
    /// Functions never entered, with where they start.
    pub(crate) functions_never_entered: Vec<String>,
    pub(crate) lcov: PathBuf,
    pub(crate) page: PathBuf,
}

/// One file of a [`Summary`].
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FileSummary {
    pub(crate) path: String,
    pub(crate) lines: usize,
    pub(crate) lines_reached: usize,
    /// Unreached lines, as ranges (`12-15, 20`).
    pub(crate) unreached: String,
}

/// A path as the summary shows it: relative to `base` when under it, and a
/// registry crate's file from its crate's directory (`raft-0.7.0/src/…`).
fn shown(path: &Path, base: &Path) -> String {
    if let Ok(rel) = path.strip_prefix(base) {
        return rel.display().to_string();
    }
    let parts: Vec<_> = path.components().collect();
    if let Some(i) = parts
        .windows(2)
        .position(|w| w[0].as_os_str() == "registry" && w[1].as_os_str() == "src")
    {
        // …/registry/src/<index>/<crate>-<version>/…
        if parts.len() > i + 3 {
            return parts[i + 3..]
                .iter()
                .collect::<PathBuf>()
                .display()
                .to_string();
        }
    }
    path.display().to_string()
}

/// At most this many functions are named in the text summary (the page
/// and JSON name them all).
const FUNCTIONS_SHOWN: usize = 10;

/// The summary of `lcov` for `model`, whose never-enabled handlers are
/// `never_enabled`, and whose files are written at `lcov_file` and `page`.
pub(crate) fn summarize(
    model: &str,
    lcov: &Lcov,
    never_enabled: Vec<String>,
    base: &Path,
    lcov_file: PathBuf,
    page: PathBuf,
) -> Summary {
    let mut files = Vec::new();
    let mut functions = Vec::new();
    let (mut lines, mut reached) = (0, 0);
    for (path, f) in &lcov.files {
        let (n, r) = f.counts();
        lines += n;
        reached += r;
        files.push(FileSummary {
            path: shown(path, base),
            lines: n,
            lines_reached: r,
            unreached: ranges_text(&f.unreached()),
        });
        // A generic function has a record per instance and one for the
        // code no instance uses: it was entered when any record that starts
        // on its line was.
        let entered: BTreeSet<u32> = f
            .functions
            .values()
            .filter(|(_, hits)| *hits > 0)
            .map(|&(l, _)| l)
            .collect();
        let mut seen = BTreeSet::new();
        for (name, &(l, _)) in &f.functions {
            if !entered.contains(&l) && seen.insert(l) {
                functions.push(format!("{name} ({}:{l})", shown(path, base)));
            }
        }
    }
    Summary {
        model: model.to_string(),
        lines,
        lines_reached: reached,
        files,
        handlers_never_enabled: never_enabled,
        functions_never_entered: functions,
        lcov: lcov_file,
        page,
    }
}

/// The percentage `part` of `whole` (100 when there is nothing).
pub(crate) fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        100.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

impl Summary {
    /// The text the end of a check prints.
    pub(crate) fn text(&self, base: &Path) -> String {
        let mut out = format!(
            "coverage of {}: {:.1}% of lines ({}/{}) in {} file{}\n",
            self.model,
            percent(self.lines_reached, self.lines),
            self.lines_reached,
            self.lines,
            self.files.len(),
            if self.files.len() == 1 { "" } else { "s" }
        );
        let width = self.files.iter().map(|f| f.path.len()).max().unwrap_or(0);
        for f in &self.files {
            out.push_str(&format!(
                "  {:width$}  {:5.1}% ({}/{})",
                f.path,
                percent(f.lines_reached, f.lines),
                f.lines_reached,
                f.lines
            ));
            if !f.unreached.is_empty() {
                out.push_str(&format!("  unreached: {}", f.unreached));
            }
            out.push('\n');
        }
        if !self.handlers_never_enabled.is_empty() {
            out.push_str(&format!(
                "  handlers never enabled: {}\n",
                self.handlers_never_enabled.join(", ")
            ));
        }
        if !self.functions_never_entered.is_empty() {
            let n = self.functions_never_entered.len();
            let named: Vec<&str> = self
                .functions_never_entered
                .iter()
                .take(FUNCTIONS_SHOWN)
                .map(String::as_str)
                .collect();
            out.push_str(&format!(
                "  functions never entered ({n}): {}",
                named.join(", ")
            ));
            if n > FUNCTIONS_SHOWN {
                out.push_str(&format!(
                    ", and {} more (the page names them)",
                    n - FUNCTIONS_SHOWN
                ));
            }
            out.push('\n');
        }
        out.push_str(&format!(
            "  lcov: {}\n  page: {}\n",
            shown(&self.lcov, base),
            shown(&self.page, base)
        ));
        out
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The coverage page: a self-contained HTML file with the summary and each
/// source file, its unreached lines marked.
pub(crate) fn page(summary: &Summary, lcov: &Lcov, base: &Path) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>cmc coverage: {m}</title><style>\
         body{{font-family:system-ui,sans-serif;margin:1.5em;color:#222}}\
         table{{border-collapse:collapse}}td,th{{padding:2px 10px;text-align:left}}\
         pre{{margin:0}}.src{{font-family:ui-monospace,monospace;font-size:13px;border:1px solid #ddd}}\
         .src td{{padding:0 6px;white-space:pre}}.ln,.hits{{color:#888;text-align:right}}\
         tr.miss{{background:#fdd}}tr.hit .hits{{color:#262}}h2{{margin-top:1.5em}}\
         </style></head><body data-unreached-lines=\"{u}\">\n<h1>Coverage of {m}</h1>\n\
         <p>{p:.1}% of lines ({r}/{n}) reached by the check.</p>\n",
        m = esc(&summary.model),
        u = summary.lines - summary.lines_reached,
        p = percent(summary.lines_reached, summary.lines),
        r = summary.lines_reached,
        n = summary.lines,
    ));
    out.push_str("<table><tr><th>file</th><th>lines reached</th><th>unreached</th></tr>\n");
    for (i, f) in summary.files.iter().enumerate() {
        out.push_str(&format!(
            "<tr><td><a href=\"#f{i}\">{}</a></td><td>{:.1}% ({}/{})</td><td>{}</td></tr>\n",
            esc(&f.path),
            percent(f.lines_reached, f.lines),
            f.lines_reached,
            f.lines,
            esc(&f.unreached)
        ));
    }
    out.push_str("</table>\n");
    for (title, items) in [
        ("Handlers never enabled", &summary.handlers_never_enabled),
        ("Functions never entered", &summary.functions_never_entered),
    ] {
        if !items.is_empty() {
            out.push_str(&format!("<h2>{title}</h2><ul>\n"));
            for item in items {
                out.push_str(&format!("<li><code>{}</code></li>\n", esc(item)));
            }
            out.push_str("</ul>\n");
        }
    }
    for (i, (path, f)) in lcov.files.iter().enumerate() {
        out.push_str(&format!(
            "<h2 id=\"f{i}\">{}</h2>\n<table class=\"src\">\n",
            esc(&shown(path, base))
        ));
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for (k, line) in text.lines().enumerate() {
            let l = k as u32 + 1;
            let (class, hits) = match f.lines.get(&l) {
                Some(0) => ("miss", "0".to_string()),
                Some(n) => ("hit", n.to_string()),
                None => ("", String::new()),
            };
            out.push_str(&format!(
                "<tr class=\"{class}\"><td class=\"ln\">{l}</td><td class=\"hits\">{hits}</td><td>{}</td></tr>\n",
                esc(line)
            ));
        }
        out.push_str("</table>\n");
    }
    out.push_str("</body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profiles_of_the_other_processes_are_found_by_rank() {
        let dir = std::env::temp_dir().join(format!("cmc-profiles-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for f in [
            "m.profraw",
            "m.profraw.1",
            "m.profraw.10",
            "m.profraw.2",
            "m.profrawx",
            "m.profraw.x",
            "n.profraw.1",
        ] {
            std::fs::write(dir.join(f), b"").unwrap();
        }
        let found = other_processes(&dir.join("m.profraw"));
        let names: Vec<String> = found
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["m.profraw.1", "m.profraw.2", "m.profraw.10"]);
        assert!(other_processes(&dir.join("none.profraw")).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    const SAMPLE: &str = "SF:/p/src/lib.rs\nFN:3,_ZN3foo3bar17h0123456789abcdefE\n\
FN:9,_ZN3foo3baz17h0123456789abcdefE\nFNDA:4,_ZN3foo3bar17h0123456789abcdefE\n\
FNDA:0,_ZN3foo3baz17h0123456789abcdefE\nFNF:2\nFNH:1\nDA:3,4\nDA:4,4\nDA:5,0\nDA:6,0\n\
DA:9,0\nDA:10,0\nBRDA:4,0,0,4\nBRDA:4,0,1,0\nLF:6\nLH:2\nend_of_record\n";

    #[test]
    fn lcov_parses_and_renders_what_it_read() {
        let lcov = Lcov::parse(SAMPLE);
        let f = &lcov.files[Path::new("/p/src/lib.rs")];
        assert_eq!(f.counts(), (6, 2));
        assert_eq!(f.unreached(), vec![(5, 10)]);
        assert_eq!(f.functions["foo::bar"], (3, 4));
        assert_eq!(f.functions["foo::baz"], (9, 0));
        assert_eq!(Lcov::parse(&lcov.render()), lcov);
        let mut twice = lcov.clone();
        twice.merge(&lcov);
        let f2 = &twice.files[Path::new("/p/src/lib.rs")];
        assert_eq!(f2.lines[&3], 8);
        assert_eq!(f2.counts(), (6, 2));
    }

    #[test]
    fn unreached_ranges_join_lines_with_code_only() {
        let mut f = FileCoverage::default();
        for (l, n) in [(1, 0), (2, 0), (4, 0), (5, 3), (6, 0), (9, 1)] {
            f.lines.insert(l, n);
        }
        // 1, 2 and 4 are consecutive among the lines with code (3 has none).
        assert_eq!(f.unreached(), vec![(1, 4), (6, 6)]);
        assert_eq!(ranges_text(&f.unreached()), "1-4, 6");
    }
}
