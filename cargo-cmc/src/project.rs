//! Finding the packages that take part: workspace members that depend on
//! `cmc-runtime`, discovered with `cargo metadata`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use cargo_metadata::{CargoOpt, Metadata, MetadataCommand, Package};

use crate::args::ProjectArgs;

/// How the harness should depend on the runtime: exactly as the package
/// does, so both use one copy.
#[derive(Debug, Clone)]
pub(crate) enum RuntimeSource {
    Path(PathBuf),
    Version(String),
}

/// A package whose library registers models.
#[derive(Debug, Clone)]
pub(crate) struct CmcPackage {
    pub(crate) name: String,
    pub(crate) dir: PathBuf,
    /// The name the package's code uses for the runtime (`cmc` when renamed).
    pub(crate) runtime_import: String,
    pub(crate) runtime: RuntimeSource,
    /// The package's library crate name (`my_crate`).
    pub(crate) lib_name: String,
    /// Every feature the package declares.
    pub(crate) declared_features: Vec<String>,
    /// The local (path) packages it depends on, directly or not, with the
    /// features each declares: a feature asked for that the package does
    /// not declare is enabled on the one that does (the library a check
    /// crate checks).
    pub(crate) local_deps: Vec<LocalDep>,
}

/// A path dependency of a cmc package.
#[derive(Debug, Clone)]
pub(crate) struct LocalDep {
    pub(crate) name: String,
    pub(crate) dir: PathBuf,
    pub(crate) declared_features: Vec<String>,
}

/// The features asked for, one per item (`--features "a b,c"` is three).
pub(crate) fn requested_features(args: &ProjectArgs) -> Vec<String> {
    args.features
        .iter()
        .flat_map(|f| f.split([' ', ',']))
        .filter(|f| !f.is_empty())
        .map(String::from)
        .collect()
}

/// The project `cargo cmc` runs in.
#[derive(Debug)]
pub(crate) struct Project {
    pub(crate) workspace_root: PathBuf,
    pub(crate) target_dir: PathBuf,
    /// The manifest cargo read, absolute (the one given, or the current
    /// directory's package's, or the workspace's): printed commands name
    /// it, so that they work from any directory.
    pub(crate) manifest: PathBuf,
    pub(crate) packages: Vec<CmcPackage>,
    pub(crate) args: ProjectArgs,
}

const RUNTIME: &str = "cmc-runtime";

/// The project's metadata, resolved with the features asked for; when the
/// package there does not declare one of them (it may be the check crate's
/// or the library's only: `cargo cmc` routes each feature to the package
/// that declares it), resolved without them.
fn metadata(args: &ProjectArgs) -> Result<Metadata> {
    match metadata_with(args, true) {
        Err(e) if e.to_string().contains("does not contain this feature") => {
            metadata_with(args, false)
        }
        other => other,
    }
}

fn metadata_with(args: &ProjectArgs, with_features: bool) -> Result<Metadata> {
    let mut cmd = MetadataCommand::new();
    if let Some(path) = &args.manifest_path {
        cmd.manifest_path(path);
    }
    if args.all_features {
        cmd.features(CargoOpt::AllFeatures);
    }
    if args.no_default_features {
        cmd.features(CargoOpt::NoDefaultFeatures);
    }
    let features = requested_features(args);
    if with_features && !features.is_empty() {
        cmd.features(CargoOpt::SomeFeatures(features));
    }
    cmd.exec().map_err(|e| match e {
        cargo_metadata::Error::CargoMetadata { stderr } => {
            let text = stderr.trim().trim_start_matches("error: ").to_string();
            if text.contains("could not find `Cargo.toml`") {
                anyhow::anyhow!("not inside a cargo project: {text}")
            } else {
                anyhow::anyhow!("`cargo metadata` failed: {text}")
            }
        }
        other => anyhow::Error::new(other).context("cannot run `cargo metadata`"),
    })
}

fn runtime_of(meta: &Metadata, pkg: &Package) -> Result<RuntimeSource> {
    let resolve = meta
        .resolve
        .as_ref()
        .context("`cargo metadata` returned no dependency graph")?;
    let node = resolve
        .nodes
        .iter()
        .find(|n| n.id == pkg.id)
        .context("the package is missing from the graph")?;
    let runtime = node
        .deps
        .iter()
        .filter_map(|d| meta.packages.iter().find(|p| p.id == d.pkg))
        .find(|p| p.name.as_str() == RUNTIME)
        .with_context(|| {
            format!(
                "{} depends on {RUNTIME}, but the graph does not resolve it",
                pkg.name
            )
        })?;
    Ok(match &runtime.source {
        None => RuntimeSource::Path(
            runtime
                .manifest_path
                .parent()
                .context("a manifest path has a parent")?
                .to_path_buf()
                .into(),
        ),
        Some(_) => RuntimeSource::Version(runtime.version.to_string()),
    })
}

/// Discovers the project and its participating packages.
pub(crate) fn discover(args: &ProjectArgs) -> Result<Project> {
    let meta = metadata(args)?;
    let members: Vec<&Package> = meta.workspace_packages();
    for spec in &args.packages {
        if !members.iter().any(|p| p.name.as_str() == spec) {
            bail!(
                "package `{spec}` is not a member of the workspace at {}",
                meta.workspace_root
            );
        }
    }
    // Like cargo: the named packages; else the package whose manifest was
    // given (or found from the current directory); else, at a virtual
    // workspace root, every member.
    let explicit = !args.packages.is_empty();
    let selected: Vec<&Package> = if explicit {
        members
            .iter()
            .copied()
            .filter(|p| args.packages.iter().any(|s| s == p.name.as_str()))
            .collect()
    } else if let Some(root) = meta.root_package() {
        vec![root]
    } else {
        members.clone()
    };
    let single = selected.len() == 1;
    let mut packages = Vec::new();
    for pkg in selected {
        if pkg.name.as_str() == RUNTIME {
            continue;
        }
        let Some(dep) = pkg
            .dependencies
            .iter()
            .find(|d| d.name == RUNTIME && d.kind == cargo_metadata::DependencyKind::Normal)
        else {
            if explicit {
                bail!(
                    "package `{}` does not depend on {RUNTIME}, so it has no models",
                    pkg.name
                );
            }
            continue;
        };
        let Some(lib) = pkg.targets.iter().find(|t| t.is_lib()) else {
            if explicit || single {
                bail!(
                    "package `{}` has no library target: cmc finds #[cmc::model] functions in a package's library (src/lib.rs)",
                    pkg.name
                );
            }
            continue;
        };
        packages.push(CmcPackage {
            name: pkg.name.to_string(),
            dir: pkg
                .manifest_path
                .parent()
                .context("a manifest path has a parent")?
                .to_path_buf()
                .into(),
            runtime_import: dep
                .rename
                .clone()
                .unwrap_or_else(|| RUNTIME.to_string())
                .replace('-', "_"),
            runtime: runtime_of(&meta, pkg)?,
            lib_name: lib.name.replace('-', "_"),
            declared_features: pkg.features.keys().cloned().collect(),
            local_deps: meta
                .packages
                .iter()
                .filter(|p| {
                    p.source.is_none()
                        && p.id != pkg.id
                        && !matches!(p.name.as_str(), RUNTIME | "cmc-macros")
                })
                .filter_map(|p| {
                    Some(LocalDep {
                        name: p.name.to_string(),
                        dir: p.manifest_path.parent()?.to_path_buf().into(),
                        declared_features: p.features.keys().cloned().collect(),
                    })
                })
                .collect(),
        });
    }
    if packages.is_empty() && args.manifest_path.is_none() && !explicit {
        // The check crate `cargo cmc init` made (as `cargo fuzz` finds
        // `fuzz/`): in the package's directory, or the workspace root's.
        let base: PathBuf = match meta.root_package() {
            Some(root) => root
                .manifest_path
                .parent()
                .context("a manifest path has a parent")?
                .to_path_buf()
                .into(),
            None => meta.workspace_root.clone().into(),
        };
        let check_crate = base.join("cmc").join("Cargo.toml");
        if check_crate.is_file() {
            return discover(&ProjectArgs {
                manifest_path: Some(check_crate),
                ..args.clone()
            });
        }
    }
    if packages.is_empty() {
        // A member chosen by the current directory (or --manifest-path)
        // that does not use cmc, in a workspace whose other members do.
        let users: Vec<&str> = members
            .iter()
            .filter(|p| {
                p.name.as_str() != RUNTIME
                    && p.dependencies.iter().any(|d| {
                        d.name == RUNTIME && d.kind == cargo_metadata::DependencyKind::Normal
                    })
            })
            .map(|p| p.name.as_str())
            .collect();
        if let (Some(root), false, false) = (meta.root_package(), users.is_empty(), explicit) {
            bail!(
                "package `{}` does not depend on {RUNTIME}, so it has no models; in its workspace, {} {}: run cargo cmc at the workspace root ({}), or choose with -p {}",
                root.name,
                users.join(", "),
                if users.len() == 1 { "does" } else { "do" },
                meta.workspace_root,
                users[0]
            );
        }
        bail!(
            "no package in {} depends on {RUNTIME}, and there is no check crate (cmc/Cargo.toml): `cargo cmc init` makes one, with a sample model",
            meta.workspace_root
        );
    }
    // Each feature asked for must be some package's: a cmc package's, or a
    // local package's it depends on.
    for f in requested_features(args) {
        let declared = |name: &str, features: &[String], f: &str| match f.split_once('/') {
            Some((p, feat)) => p == name && features.iter().any(|x| x == feat),
            None => features.iter().any(|x| x == f),
        };
        let known = packages.iter().any(|p| {
            declared(&p.name, &p.declared_features, &f)
                || p.local_deps
                    .iter()
                    .any(|d| declared(&d.name, &d.declared_features, &f))
        });
        if !known {
            let mut names: Vec<&str> = packages
                .iter()
                .flat_map(|p| {
                    std::iter::once(p.name.as_str())
                        .chain(p.local_deps.iter().map(|d| d.name.as_str()))
                })
                .collect();
            names.sort_unstable();
            names.dedup();
            bail!(
                "no package declares the feature `{f}` (the packages checked and the local packages they depend on: {})",
                names.join(", ")
            );
        }
    }
    let manifest = match &args.manifest_path {
        Some(path) => std::path::absolute(path)
            .with_context(|| format!("cannot resolve {}", path.display()))?,
        None => match meta.root_package() {
            Some(root) => root.manifest_path.clone().into(),
            None => meta.workspace_root.join("Cargo.toml").into(),
        },
    };
    Ok(Project {
        workspace_root: meta.workspace_root.clone().into(),
        target_dir: meta.target_directory.clone().into(),
        manifest,
        packages,
        args: args.clone(),
    })
}

/// A hash of the project's source files: every `.rs`, `.toml` and `.lock`
/// file under the workspace root and the cmc packages' directories (build
/// output and hidden directories left out), by path and contents. Recorded
/// in traces, so that replay can say whether the program changed.
pub(crate) fn sources_hash(project: &Project) -> String {
    use std::hash::{Hash, Hasher};
    fn walk(dir: &Path, root: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || name == "target" {
                continue;
            }
            match e.file_type() {
                Ok(t) if t.is_dir() => walk(&path, root, out),
                Ok(t) if t.is_file() => {
                    let source = path
                        .extension()
                        .is_some_and(|x| x == "rs" || x == "toml" || x == "lock");
                    if source {
                        if let Ok(bytes) = std::fs::read(&path) {
                            let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
                            out.push((rel, bytes));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let mut files = Vec::new();
    let mut roots: Vec<&Path> = vec![&project.workspace_root];
    roots.extend(project.packages.iter().map(|p| p.dir.as_path()));
    roots.sort();
    roots.dedup();
    for root in roots.iter().copied() {
        // A package inside the workspace root is walked with it.
        if roots.iter().any(|r| *r != root && root.starts_with(r)) {
            continue;
        }
        walk(root, root, &mut files);
    }
    files.sort();
    // SipHash-1-3 with fixed keys: the same in every run.
    let mut h = std::hash::DefaultHasher::new();
    files.hash(&mut h);
    format!("{:016x}", h.finish())
}
