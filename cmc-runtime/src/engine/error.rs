//! The tool's own errors: what stops a check that is not a property of
//! the user's code (an arena that cannot be reserved, a malformed model,
//! a child process that could not run).

use std::fmt;

/// The tool could not check the model (as opposed to finding a violation).
#[derive(Debug)]
#[non_exhaustive]
pub enum CheckError {
    /// The model is malformed.
    Model(String),
    /// The operating system refused (e.g. reserving an arena).
    Io(std::io::Error),
    /// A trace does not fit the model.
    Trace(String),
    /// The child process of an isolated check failed without a result.
    Isolation(String),
    /// A search across processes failed (its processes disagree, or the
    /// engine that carries it does).
    Cluster(String),
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckError::Model(m) => write!(f, "invalid model: {m}"),
            CheckError::Io(e) => write!(f, "{e}"),
            CheckError::Trace(m) => write!(f, "the trace does not fit the model: {m}"),
            CheckError::Isolation(m) => write!(f, "the checking process failed: {m}"),
            CheckError::Cluster(m) => write!(f, "the search across processes failed: {m}"),
        }
    }
}

impl std::error::Error for CheckError {}

impl From<std::io::Error> for CheckError {
    fn from(e: std::io::Error) -> Self {
        CheckError::Io(e)
    }
}
