//! Running a check (or a replay) in a child process, so that a crash in user
//! code — a segfault, an abort, a stack overflow — is reported with the trace
//! that led to it instead of taking the checker down.
//!
//! Before fork, the parent maps a shared *crash log*. Before every transition
//! the child copies into it the path to the state it expands and the step it
//! is about to run (process, handler, choice script). The child's standard
//! error goes to a pipe. If the child dies of a signal, the parent decodes the
//! log into a trace whose last step is the one that crashed, and reports what
//! the child printed (for instance Rust's "has overflowed its stack").

use std::cell::Cell;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicU64, Ordering};

/// Layout of the crash log, in 64-bit words:
///
/// * `[0]` the magic word, `[1]` the length of the current record, then
///   `CURRENT` words: what the child is doing right now (the node it
///   expands and the step it runs, or the replay step);
/// * the node count, then `NODES` records of three words (parent, actor,
///   handler and choice count packed, offset of the choices): a mirror of the
///   search tree, appended once per stored state;
/// * the choice count, then `CHOICES` words of choice values.
///
/// The mapping is shared, anonymous and not reserved: only the pages
/// written cost memory. Recording is O(1) per state and per transition.
const CURRENT: usize = 1 << 12;
const NODES: usize = 1 << 24;
const CHOICES: usize = 1 << 26;
const NODE_COUNT_AT: usize = 2 + CURRENT;
const NODES_AT: usize = NODE_COUNT_AT + 1;
const CHOICE_COUNT_AT: usize = NODES_AT + 3 * NODES;
const CHOICES_AT: usize = CHOICE_COUNT_AT + 1;
const LOG_WORDS: usize = CHOICES_AT + CHOICES;
const MAGIC: u64 = 0x636d_635f_6c6f_6721;

/// The shared crash log.
pub(crate) struct CrashLog {
    words: *mut AtomicU64,
}

thread_local! {
    /// The crash log of the isolated run on this thread, if any.
    static LOG: Cell<*const CrashLog> = const { Cell::new(std::ptr::null()) };
}

impl CrashLog {
    fn new() -> std::io::Result<CrashLog> {
        let len = LOG_WORDS * 8;
        // SAFETY: an anonymous shared mapping of our own; it stays mapped
        // until `drop`.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(CrashLog { words: p.cast() })
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        assert!(i < LOG_WORDS, "crash log index {i} out of bounds");
        // SAFETY: the mapping holds LOG_WORDS zero-initialised words, and
        // AtomicU64 has the layout of u64.
        unsafe { &*self.words.add(i) }
    }

    /// Replaces the current record.
    fn write(&self, data: &[u64]) {
        let n = data.len().min(CURRENT);
        self.word(1).store(0, Ordering::Release);
        for (i, &w) in data[..n].iter().enumerate() {
            self.word(2 + i).store(w, Ordering::Relaxed);
        }
        self.word(0).store(MAGIC, Ordering::Relaxed);
        self.word(1).store(n as u64, Ordering::Release);
    }

    fn read(&self) -> Option<Vec<u64>> {
        if self.word(0).load(Ordering::Acquire) != MAGIC {
            return None;
        }
        let n = self.word(1).load(Ordering::Acquire) as usize;
        Some(
            (0..n)
                .map(|i| self.word(2 + i).load(Ordering::Relaxed))
                .collect(),
        )
    }

    /// Appends a node of the search tree; false when the log is full.
    fn push_node(
        &self,
        parent: u32,
        actor: u32,
        handler: u32,
        seed: u32,
        choices: &[usize],
    ) -> bool {
        let id = self.word(NODE_COUNT_AT).load(Ordering::Relaxed) as usize;
        let at = self.word(CHOICE_COUNT_AT).load(Ordering::Relaxed) as usize;
        if id >= NODES || at + choices.len() > CHOICES || choices.len() > u32::MAX as usize {
            return false;
        }
        for (k, &c) in choices.iter().enumerate() {
            self.word(CHOICES_AT + at + k)
                .store(c as u64, Ordering::Relaxed);
        }
        let base = NODES_AT + 3 * id;
        self.word(base).store(
            (u64::from(parent) << 32) | u64::from(actor),
            Ordering::Relaxed,
        );
        self.word(base + 1).store(
            (u64::from(handler) << 32) | choices.len() as u64,
            Ordering::Relaxed,
        );
        // `at` is below CHOICES, far below 2^32.
        self.word(base + 2)
            .store((u64::from(seed) << 32) | at as u64, Ordering::Relaxed);
        self.word(CHOICE_COUNT_AT)
            .store((at + choices.len()) as u64, Ordering::Release);
        self.word(NODE_COUNT_AT)
            .store(id as u64 + 1, Ordering::Release);
        true
    }

    /// The steps from the root to `node`, as (actor, handler, seed, choices);
    /// `None` when the node was not recorded.
    fn ancestry(&self, mut node: u32) -> Option<Vec<LoggedStep>> {
        let count = self.word(NODE_COUNT_AT).load(Ordering::Acquire) as usize;
        let mut steps = Vec::new();
        loop {
            if node as usize >= count {
                return None;
            }
            let base = NODES_AT + 3 * node as usize;
            let w0 = self.word(base).load(Ordering::Relaxed);
            let w1 = self.word(base + 1).load(Ordering::Relaxed);
            let w2 = self.word(base + 2).load(Ordering::Relaxed);
            let (seed, at) = ((w2 >> 32) as u32, (w2 & 0xffff_ffff) as usize);
            let parent = (w0 >> 32) as u32;
            if parent == u32::MAX {
                break;
            }
            let n = (w1 & 0xffff_ffff) as usize;
            let choices = (0..n)
                .map(|k| self.word(CHOICES_AT + at + k).load(Ordering::Relaxed))
                .collect();
            steps.push(LoggedStep {
                actor: w0 as u32,
                handler: (w1 >> 32) as u32,
                seed,
                choices,
            });
            node = parent;
        }
        steps.reverse();
        Some(steps)
    }
}

/// A step of the search tree as the crash log holds it.
pub(crate) struct LoggedStep {
    pub(crate) actor: u32,
    pub(crate) handler: u32,
    pub(crate) seed: u32,
    pub(crate) choices: Vec<u64>,
}

impl Drop for CrashLog {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and no reference into it survives.
        unsafe { libc::munmap(self.words.cast(), LOG_WORDS * 8) };
    }
}

/// Records a node of the search tree in the crash log of the isolated run
/// on this thread, if there is one.
pub(crate) fn record_node(parent: u32, actor: u32, handler: u32, seed: u32, choices: &[usize]) {
    let log = LOG.with(Cell::get);
    if !log.is_null() {
        // SAFETY: the log outlives the isolated run that set the pointer.
        let _ = unsafe { (*log).push_node(parent, actor, handler, seed, choices) };
    }
}

/// The first word of a current record written by a check: then the node
/// being expanded, the actor, the handler, the random-seed variant, the
/// script length and the script.
pub(crate) const CHECKING: u64 = 1;
/// The first word of a current record written by a replay: then the step.
pub(crate) const REPLAYING: u64 = 2;

/// Records `words` in the crash log of the isolated run on this thread, if
/// there is one (a no-op otherwise).
pub(crate) fn record(words: impl FnOnce() -> Vec<u64>) {
    let log = LOG.with(Cell::get);
    if !log.is_null() {
        let data = words();
        // SAFETY: the log outlives the isolated run that set the pointer.
        unsafe { (*log).write(&data) };
    }
}

/// The descriptor the child writes its result to.
const RESULT_FD: i32 = 3;

/// How the child ended.
pub(crate) enum ChildEnd {
    /// It exited normally with this result text.
    Finished(String),
    /// It died of a signal: its current record, the steps to the node that
    /// record names (when it names one), and what it printed.
    Crashed {
        signal: i32,
        log: Option<Vec<u64>>,
        ancestry: Option<Vec<LoggedStep>>,
        stderr: String,
    },
    /// It exited with an error status without a result.
    Failed { status: i32, stderr: String },
}

/// Runs `work` in a forked child; its returned text comes back to the
/// parent. `work` must not return until it is done with the crash log.
pub(crate) fn run_in_child(work: impl FnOnce() -> String) -> std::io::Result<ChildEnd> {
    // What the child reads once and caches (the modules and symbols, the
    // control of randomness, cmc's own globals) is set up here first: a
    // one-time initialization another thread was in the middle of at the
    // fork would never finish in the child, which would wait for it
    // forever.
    crate::identity::layout::modules();
    crate::identity::layout::exe_tls_block();
    crate::identity::layout::thread_stack();
    crate::globals::exe_writable();
    crate::identity::random::warm();
    crate::identity::entropy::warm();
    crate::identity::clock::real();
    crate::symbols::own_globals();
    let log = CrashLog::new()?;
    let mut err_pipe = [0; 2];
    let mut out_pipe = [0; 2];
    // SAFETY: pipe writes two descriptors into each array.
    unsafe {
        if libc::pipe(err_pipe.as_mut_ptr()) != 0 || libc::pipe(out_pipe.as_mut_ptr()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    // SAFETY: fork has no preconditions; the child below only runs the
    // engine on this thread and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        // The child: standard error into the pipe, run, write the result,
        // leave without running the parent's destructors or atexit hooks.
        // Keep standard input and output, the error pipe as standard error
        // and the result pipe as descriptor 3; close everything else the
        // child inherited, such as other threads' pipes (their readers would
        // otherwise wait for this child too).
        // SAFETY: plain descriptor operations on descriptors we own.
        unsafe {
            libc::dup2(err_pipe[1], 2);
            if out_pipe[1] != RESULT_FD {
                libc::dup2(out_pipe[1], RESULT_FD);
            }
            if libc::syscall(libc::SYS_close_range, RESULT_FD + 1, u32::MAX, 0) != 0 {
                for fd in RESULT_FD + 1..4096 {
                    libc::close(fd);
                }
            }
        }
        LOG.with(|l| l.set(&log));
        let text = work();
        LOG.with(|l| l.set(std::ptr::null()));
        let bytes = text.as_bytes();
        let mut written = 0;
        while written < bytes.len() {
            // SAFETY: writes from a live buffer to our pipe.
            let n = unsafe {
                libc::write(
                    RESULT_FD,
                    bytes[written..].as_ptr().cast(),
                    bytes.len() - written,
                )
            };
            if n <= 0 {
                break;
            }
            written += n as usize;
        }
        // SAFETY: _exit ends the child immediately, as intended.
        unsafe { libc::_exit(0) };
    }
    // The parent.
    // SAFETY: closing our copies of the child's ends.
    unsafe {
        libc::close(err_pipe[1]);
        libc::close(out_pipe[1]);
    }
    // SAFETY: the descriptors are ours, open, and owned by the File from now.
    let (mut err, mut out) = unsafe {
        (
            std::fs::File::from_raw_fd(err_pipe[0]),
            std::fs::File::from_raw_fd(out_pipe[0]),
        )
    };
    // Read the result on another thread so neither pipe can fill up and
    // block the child.
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = out.read_to_string(&mut text);
        text
    });
    let mut stderr = String::new();
    let _ = err.read_to_string(&mut stderr);
    let text = reader.join().unwrap_or_default();
    let mut status = 0;
    // SAFETY: waits for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    Ok(if libc::WIFSIGNALED(status) {
        let current = log.read();
        // A check's record starts with the node being expanded.
        let ancestry = match current.as_deref() {
            Some([CHECKING, node, ..]) => log.ancestry(*node as u32),
            _ => None,
        };
        ChildEnd::Crashed {
            signal: libc::WTERMSIG(status),
            log: current,
            ancestry,
            stderr,
        }
    } else if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 && !text.is_empty() {
        ChildEnd::Finished(text)
    } else {
        ChildEnd::Failed {
            status: libc::WEXITSTATUS(status),
            stderr,
        }
    })
}

/// A signal's conventional name.
pub(crate) fn signal_name(signal: i32) -> String {
    match signal {
        libc::SIGSEGV => "SIGSEGV (segmentation fault)".into(),
        libc::SIGBUS => "SIGBUS (bus error)".into(),
        libc::SIGABRT => "SIGABRT (abort)".into(),
        libc::SIGILL => "SIGILL (illegal instruction)".into(),
        libc::SIGFPE => "SIGFPE (arithmetic error)".into(),
        libc::SIGKILL => "SIGKILL (killed)".into(),
        other => format!("signal {other}"),
    }
}
