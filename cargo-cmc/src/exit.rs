//! The exit codes of `cargo cmc`. 0, 1 and 2 mean the same for every
//! subcommand; 3 and above are verdicts that only some subcommands reach.

use std::process::ExitCode;

/// How a subcommand ended, as its exit code: an enum rather than
/// constants, so that each number has exactly one name. The codes count
/// up from 0 in the order of the variants (users' scripts depend on them:
/// add new ones at the end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Exit {
    /// 0, nothing was violated: every model checked passes (or is bounded,
    /// unless `check --require-complete`); `replay`: the trace ends in no
    /// violation, or `--step` stopped it.
    Success = 0,
    /// 1, a violation: `check` found one; `replay`: the recorded violation
    /// reproduces.
    Violation,
    /// 2, the tool could not do its job: bad arguments, a build failure, no
    /// such model, a harness that failed.
    Failure,
    /// 3, neither a pass nor the violation asked about. `check
    /// --require-complete`: a search ended bounded (a bound, the time
    /// limit, the memory budget, random walks) without a violation.
    /// `replay`: the trace ends in another violation than the one it
    /// recorded.
    Inconclusive,
    /// 4, `replay`: the replay diverged (a step is not enabled or reaches
    /// another state than recorded) and the program changed since the trace
    /// was recorded (or the trace does not record enough to tell).
    Diverged,
    /// 5, `replay`: the replay diverged with the same program: hidden
    /// nondeterminism.
    Nondeterminism,
    /// 6, `replay`: the trace does not fit the model (a handler or process
    /// it does not have, a choice out of its range).
    Misfit,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit as u8)
    }
}

/// The exit code of a `check` that a signal (SIGINT, SIGTERM) stopped: 128
/// + the signal, as a shell reports a process the signal ended.
pub(crate) fn stopped_by(signal: i32) -> ExitCode {
    ExitCode::from(128 + signal as u8)
}

#[cfg(test)]
mod tests {
    use super::Exit;

    /// The codes are the ones the book and `replay --help` document: a
    /// variant inserted before another would renumber it.
    #[test]
    fn each_exit_code_keeps_its_number() {
        let codes = [
            Exit::Success,
            Exit::Violation,
            Exit::Failure,
            Exit::Inconclusive,
            Exit::Diverged,
            Exit::Nondeterminism,
            Exit::Misfit,
        ]
        .map(|exit| exit as u8);
        assert_eq!(codes, [0, 1, 2, 3, 4, 5, 6]);
    }
}
