//! `cargo cmc init`: in an existing crate, a check crate (`cmc/`, as
//! `cargo fuzz init` makes `fuzz/`) that depends on cmc and on the crate,
//! with a sample model that passes; with `--dep NAME[@VERSION]`, a check
//! crate of its own that depends on a crate of a registry (`cargo add`
//! resolves it).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use cargo_metadata::{Metadata, MetadataCommand, Package};
use clap::Args;

use crate::exit::Exit;

/// `cargo cmc init`: the crate to add a check crate to, and where.
#[derive(Args, Debug)]
pub(crate) struct InitArgs {
    /// Path to the Cargo.toml of the crate to check.
    #[arg(long, value_name = "PATH", conflicts_with = "dep")]
    pub(crate) manifest_path: Option<PathBuf>,
    /// Check a crate of a registry instead (`serde`, `raft@0.7`): make a
    /// check crate of its own in the current directory that depends on it,
    /// as `cargo add NAME[@VERSION]` resolves it.
    #[arg(long, value_name = "NAME[@VERSION]")]
    pub(crate) dep: Option<String>,
    /// Where to put the check crate: relative to the crate's directory
    /// (default `cmc`), or with --dep to the current one (default
    /// `NAME-cmc`).
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
}

/// The cmc source this `cargo cmc` was built from: the runtime a check
/// crate depends on (cmc is not on crates.io).
fn runtime_dir() -> Result<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cmc-runtime");
    dir.canonicalize().with_context(|| {
        format!(
            "cargo cmc was built from a cmc checkout whose cmc-runtime is no longer at {}: \
             install cargo cmc again from a checkout (cargo install --locked --path cargo-cmc)",
            dir.display()
        )
    })
}

/// The manifest cargo would use here: the nearest `Cargo.toml` in the
/// current directory or above it.
fn nearest_manifest() -> Result<PathBuf> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    cwd.ancestors()
        .map(|dir| dir.join("Cargo.toml"))
        .find(|manifest| manifest.is_file())
        .with_context(|| {
            format!(
                "not inside a cargo package: no Cargo.toml in {} or above",
                cwd.display()
            )
        })
}

/// The package whose manifest is `manifest`: the workspace's root package,
/// or one of its members (`cargo metadata --no-deps` names no root package
/// when run in a member, so it is found by its manifest's path).
fn package_of<'m>(meta: &'m Metadata, manifest: &Path) -> Option<&'m Package> {
    let manifest = manifest.canonicalize().ok()?;
    meta.workspace_packages().into_iter().find(|pkg| {
        pkg.manifest_path
            .as_std_path()
            .canonicalize()
            .is_ok_and(|m| m == manifest)
    })
}

/// A TOML basic string.
fn toml_str(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Runs `cargo cmc init`: writes the check crate (a project of its own,
/// with a sample model), refusing a directory that exists.
pub(crate) fn run(args: InitArgs) -> Result<ExitCode> {
    if let Some(dep) = &args.dep {
        return from_registry(dep, args.dir.as_deref());
    }
    let mut cmd = MetadataCommand::new();
    cmd.no_deps();
    if let Some(path) = &args.manifest_path {
        cmd.manifest_path(path);
    }
    let meta = cmd.exec().map_err(|e| match e {
        cargo_metadata::Error::CargoMetadata { stderr } => anyhow::anyhow!(
            "not inside a cargo package: {}",
            stderr.trim().trim_start_matches("error: ")
        ),
        other => anyhow::Error::new(other).context("cannot run `cargo metadata`"),
    })?;
    let manifest = match &args.manifest_path {
        Some(path) => path.clone(),
        None => nearest_manifest()?,
    };
    let Some(pkg) = package_of(&meta, &manifest) else {
        bail!(
            "run `cargo cmc init` in a package (or give --manifest-path of one): {} is a \
             workspace without a root package",
            manifest.display()
        );
    };
    let Some(lib) = pkg.targets.iter().find(|t| t.is_lib()) else {
        bail!(
            "package `{}` has no library target: the check crate uses the package's library",
            pkg.name
        );
    };
    let pkg_dir: PathBuf = pkg
        .manifest_path
        .parent()
        .context("a manifest path has a parent")?
        .to_path_buf()
        .into();
    let sub = args.dir.clone().unwrap_or_else(|| PathBuf::from("cmc"));
    let dir = pkg_dir.join(&sub);
    if dir.exists() {
        bail!(
            "{} already exists: cargo cmc init makes a new check crate (give another --dir)",
            dir.display()
        );
    }
    let runtime = runtime_dir()?;
    let name = format!("{}-cmc", pkg.name);
    let lib_name = lib.name.replace('-', "_");
    let rel_up = sub.components().map(|_| "..").collect::<Vec<_>>().join("/");
    let manifest = format!(
        "[package]\n\
         name = {name}\n\
         version = \"0.0.0\"\n\
         edition = \"2021\"\n\
         publish = false\n\
         \n\
         [dependencies]\n\
         cmc = {{ package = \"cmc-runtime\", path = {runtime} }}\n\
         {dep} = {{ path = {up} }}\n\
         \n\
         # A project of its own, as `cargo fuzz` makes `fuzz/`: the checking\n\
         # builds stay out of your workspace and its lock file.\n\
         [workspace]\n",
        name = toml_str(&name),
        runtime = toml_str(&runtime.display().to_string()),
        dep = pkg.name,
        up = toml_str(&rel_up),
    );
    let lib_rs = sample_lib(
        &pkg.name,
        &lib_name,
        &format!("run it in `{}`'s directory or in this one", pkg.name),
    );
    std::fs::create_dir_all(dir.join("src"))
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let write = |path: PathBuf, text: &str| {
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
    };
    write(dir.join("Cargo.toml"), &manifest)?;
    write(dir.join("src/lib.rs"), &lib_rs)?;
    write(dir.join(".gitignore"), "target\n")?;
    println!(
        "Created the check crate {} (package `{name}`), with a sample model.",
        dir.display()
    );
    println!("Check it, from {}:", pkg_dir.display());
    println!("    cargo cmc check");
    Ok(Exit::Success.into())
}

/// The sample check crate's `src/lib.rs`: models of package `pkg`, whose
/// library is `lib`; `where_` says where `cargo cmc check` runs.
fn sample_lib(pkg: &str, lib: &str, where_: &str) -> String {
    format!(
        r#"//! Models of `{pkg}`, checked by `cargo cmc check` ({where_}).
//!
//! A model is a function marked `#[cmc::model]` that returns a
//! `cmc::Model<P>`: `P` is a process, an ordinary struct whose methods
//! marked `#[handler]` are the events cmc runs in every order. Make your
//! processes own `{lib}`'s types and call its code from the handlers;
//! invariants (`#[invariant]`, `#[cmc::invariant]`) say what must always
//! hold. The book's chapter "Checking a crate you did not write" shows how.

#[allow(unused_imports, reason = "the crate under check, for your models")]
use {lib} as _;

/// A sample process, to replace with your own: a counter that stops at 3.
#[derive(Debug)]
pub struct Counter {{
    value: u8,
}}

#[cmc::process]
impl Counter {{
    #[handler(guard = Self::below_three)]
    fn bump(&mut self) {{
        self.value += 1;
    }}

    fn below_three(&self) -> bool {{
        self.value < 3
    }}

    #[invariant]
    fn at_most_three(&self) -> bool {{
        self.value <= 3
    }}
}}

/// Two counters: 16 states, no violation.
#[cmc::model]
pub fn sample() -> cmc::Model<Counter> {{
    cmc::Model::new("sample", 2, |_| Counter {{ value: 0 }}).quiescence_ok(true)
}}
"#,
        pkg = pkg,
        lib = lib,
        where_ = where_,
    )
}

/// Runs a cargo subcommand, failing with what cargo said.
fn cargo(args: &[&str], dir: &Path) -> Result<()> {
    let out =
        std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(args)
            .current_dir(dir)
            .output()
            .context("cannot run cargo")?;
    if !out.status.success() {
        bail!(
            "`cargo {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// `cargo cmc init --dep NAME[@VERSION]`: a check crate of its own, in the
/// current directory, that depends on a crate of a registry.
fn from_registry(dep: &str, dir: Option<&Path>) -> Result<ExitCode> {
    let name = dep.split('@').next().unwrap_or(dep);
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        bail!("--dep wants a crate's name, optionally with a version (`serde`, `raft@0.7`), not `{dep}`");
    }
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let dir = cwd.join(dir.map_or_else(|| PathBuf::from(format!("{name}-cmc")), Path::to_path_buf));
    if dir.exists() {
        bail!(
            "{} already exists: cargo cmc init makes a new check crate (give another --dir)",
            dir.display()
        );
    }
    let runtime = runtime_dir()?;
    let package = format!("{name}-cmc");
    let manifest = format!(
        "[package]\n\
         name = {package}\n\
         version = \"0.0.0\"\n\
         edition = \"2021\"\n\
         publish = false\n\
         \n\
         [dependencies]\n\
         cmc = {{ package = \"cmc-runtime\", path = {runtime} }}\n\
         \n\
         # A project of its own: its builds and lock file stay here.\n\
         [workspace]\n",
        package = toml_str(&package),
        runtime = toml_str(&runtime.display().to_string()),
    );
    std::fs::create_dir_all(dir.join("src"))
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let made = (|| -> Result<()> {
        let write = |path: PathBuf, text: &str| {
            std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
        };
        write(dir.join("Cargo.toml"), &manifest)?;
        write(dir.join("src/lib.rs"), "")?;
        write(dir.join(".gitignore"), "target\n")?;
        cargo(&["add", "--quiet", dep], &dir)?;
        let meta = MetadataCommand::new()
            .manifest_path(dir.join("Cargo.toml"))
            .exec()
            .context("cannot run `cargo metadata`")?;
        let added = meta
            .packages
            .iter()
            .find(|p| p.name.as_str() == name)
            .with_context(|| format!("`cargo add {dep}` added no package `{name}`"))?;
        let Some(lib) = added.targets.iter().find(|t| t.is_lib()) else {
            bail!("`{name}` has no library target: there is no code of it to check");
        };
        let lib_name = lib.name.replace('-', "_");
        write(
            dir.join("src/lib.rs"),
            &sample_lib(
                &format!("{name} {}", added.version),
                &lib_name,
                "run it in this directory",
            ),
        )
    })();
    if let Err(e) = made {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    println!(
        "Created the check crate {} (package `{package}`), depending on `{name}`, with a sample model.",
        dir.display()
    );
    println!("Check it, from {}:", dir.display());
    println!("    cargo cmc check");
    Ok(Exit::Success.into())
}
