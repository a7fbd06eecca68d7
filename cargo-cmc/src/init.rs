//! `cargo cmc init`: in an existing crate, a check crate (`cmc/`, as
//! `cargo fuzz init` makes `fuzz/`) that depends on cmc and on the crate,
//! with a sample model that passes.

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
    #[arg(long, value_name = "PATH")]
    pub(crate) manifest_path: Option<PathBuf>,
    /// Where to put the check crate, relative to the crate's directory.
    #[arg(long, value_name = "DIR", default_value = "cmc")]
    pub(crate) dir: PathBuf,
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
    let dir = pkg_dir.join(&args.dir);
    if dir.exists() {
        bail!(
            "{} already exists: cargo cmc init makes a new check crate (give another --dir)",
            dir.display()
        );
    }
    let runtime = runtime_dir()?;
    let name = format!("{}-cmc", pkg.name);
    let lib_name = lib.name.replace('-', "_");
    let rel_up = args
        .dir
        .components()
        .map(|_| "..")
        .collect::<Vec<_>>()
        .join("/");
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
    let lib_rs = format!(
        r#"//! Models of `{pkg}`, checked by `cargo cmc check` (run it in `{pkg}`'s
//! directory or in this one).
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
        pkg = pkg.name,
        lib = lib_name,
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
