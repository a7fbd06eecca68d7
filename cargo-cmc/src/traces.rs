//! Where `check` saves the traces it finds, and `replay --last` looks for
//! them: one directory per project, one file per violation, named after
//! the model.

use std::path::PathBuf;

use crate::project::Project;

/// The directory of the project's saved traces (a workspace's crates share
/// it).
pub(crate) fn traces_dir(project: &Project) -> PathBuf {
    project.target_dir.join("cmc").join("traces")
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
