//! The flags that several subcommands share, and the modules below the
//! subcommands read: which packages to build and how, the fingerprint
//! source, the output format. A subcommand's own flags live in its file.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use cmc::FingerprintMode;

/// Which packages to look at, and how to build them (as cargo does).
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct ProjectArgs {
    /// Path to Cargo.toml.
    #[arg(long, value_name = "PATH")]
    pub(crate) manifest_path: Option<PathBuf>,
    /// Only this package (repeatable).
    #[arg(short = 'p', long = "package", value_name = "SPEC")]
    pub(crate) packages: Vec<String>,
    /// Features to enable (space or comma separated, repeatable).
    #[arg(long, value_name = "FEATURES")]
    pub(crate) features: Vec<String>,
    /// Enable all features.
    #[arg(long)]
    pub(crate) all_features: bool,
    /// Do not enable the default features.
    #[arg(long)]
    pub(crate) no_default_features: bool,
}

/// `--fingerprint` of `check` and `replay`: the source each process's
/// fingerprint is taken from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum FingerprintArg {
    /// The process type's cmc::StateHash (derive it): by meaning, the first
    /// choice when it exists.
    State,
    /// The process type's own Hash.
    Hash,
    /// The process type's Debug output, canonicalized (maps and sets count
    /// as unordered).
    Debug,
    /// The value walked by its type information (the executable's
    /// debugging information): the default for types with none of the
    /// above.
    Typed,
    /// The canonical heap reachable from each process (the default only
    /// for types with none of the above that the debugging information
    /// does not describe).
    Heap,
    /// The raw pages of each process's arena (fastest; equal values with
    /// different bytes count twice).
    Bytes,
    /// The model's abstraction function (Model::abstraction).
    Abstract,
}

impl FingerprintArg {
    /// The runtime's mode for this `--fingerprint` argument.
    pub(crate) fn mode(self) -> FingerprintMode {
        match self {
            FingerprintArg::State => FingerprintMode::State,
            FingerprintArg::Hash => FingerprintMode::Hash,
            FingerprintArg::Debug => FingerprintMode::Debug,
            FingerprintArg::Heap => FingerprintMode::Heap,
            FingerprintArg::Bytes => FingerprintMode::Bytes,
            FingerprintArg::Abstract => FingerprintMode::Abstract,
            FingerprintArg::Typed => FingerprintMode::Typed,
        }
    }
}

/// `--message-format`: how results, warnings and errors are printed. Only
/// `check` takes the flag, but an error in any command line that asks for
/// JSON is printed as JSON too, and the output module reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Default)]
pub(crate) enum MessageFormat {
    /// Text for people.
    #[default]
    Human,
    /// One JSON object per line.
    Json,
}
