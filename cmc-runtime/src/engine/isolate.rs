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
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::engine::tree::Tree;
use crate::sys::process;

/// Layout of the crash log, in 64-bit words: `[0]` the magic word, `[1]`
/// the length of the current record, then `CURRENT` words: what the child
/// is doing right now (the node it expands and the step it runs, or the
/// replay step); then the status block. Beside it, in a mapping of its own,
/// the search tree ([`crate::engine::tree`]): the child records every stored state
/// there, once, and the parent reads from it the path to the state a
/// crashed child was expanding. Recording is O(1) per state and per
/// transition.
const CURRENT: usize = 1 << 12;
/// The status block: what the child is doing (its phase, see [`phase`]),
/// a heartbeat, and its statistics, which the parent reads while it runs
/// and after it ended however it ended.
const STATUS_AT: usize = 2 + CURRENT;
const STATUS: usize = 16;
const SEQ: usize = STATUS_AT;
const PHASE: usize = STATUS_AT + 1;
const STAT_UNIQUE: usize = STATUS_AT + 6;
const STAT_TRANSITIONS: usize = STATUS_AT + 7;
const STAT_DEPTH: usize = STATUS_AT + 8;
const STAT_GENERATED: usize = STATUS_AT + 9;
/// The last signal user code sent its own process (0: none).
const SELF_SIGNAL: usize = STATUS_AT + 10;
/// Words of the log.
const LOG_WORDS: usize = STATUS_AT + STATUS;
const MAGIC: u64 = 0x636d_635f_6c6f_6721;

/// The descriptor `cargo cmc` reads the protocol from (`CMC_PROTOCOL_FD`),
/// so that whatever the user's code prints on standard output cannot be
/// mistaken for it; standard output when it is not set.
///
/// A search across processes has no such descriptor (the launcher starts
/// the processes): `cargo cmc` names a file instead (`CMC_PROTOCOL_FILE`),
/// which the process that speaks for the search appends whole lines to.
pub(crate) fn protocol_fd() -> Option<i32> {
    static FD: std::sync::OnceLock<Option<i32>> = std::sync::OnceLock::new();
    *FD.get_or_init(|| {
        let _sys = crate::sys::scope::system_scope();
        if let Some(path) = std::env::var_os("CMC_PROTOCOL_FILE") {
            // Above the descriptors an isolated check uses.
            return process::open_append_above(std::path::Path::new(&path), RESULT_FD + 1);
        }
        std::env::var("CMC_PROTOCOL_FD")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&fd: &i32| fd > RESULT_FD)
    })
}

/// The shared crash log.
pub(crate) struct CrashLog {
    words: *mut AtomicU64,
    /// The search tree, shared with the child.
    tree: Tree,
}

thread_local! {
    /// The crash log of the isolated run on this thread, if any.
    static LOG: Cell<*const CrashLog> = const { Cell::new(std::ptr::null()) };
}

impl CrashLog {
    fn new() -> std::io::Result<CrashLog> {
        let named = |what: &str, e: std::io::Error| {
            std::io::Error::new(e.kind(), format!("cannot map the {what}: {e}"))
        };
        let tree = Tree::new(true).map_err(|e| named("shared search tree", e))?;
        let p = crate::sys::map_zeroed(LOG_WORDS * 8, true).map_err(|e| named("crash log", e))?;
        Ok(CrashLog {
            words: p.cast(),
            tree,
        })
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        assert!(i < LOG_WORDS, "crash log index {i} out of bounds");
        // SAFETY: the mapping holds `LOG_WORDS` zero-initialised words, and
        // AtomicU64 has the layout of u64.
        unsafe { &*self.words.add(i) }
    }

    /// Replaces the current record.
    fn write(&self, data: &[u64]) {
        self.write_parts(data, &[]);
    }

    /// Replaces the current record with `head` followed by `tail`.
    fn write_parts(&self, head: &[u64], tail: &[usize]) {
        let n = (head.len() + tail.len()).min(CURRENT);
        self.fixed(1).store(0, Ordering::Release);
        let words = head.iter().copied().chain(tail.iter().map(|&c| c as u64));
        for (i, w) in words.take(n).enumerate() {
            self.fixed(2 + i).store(w, Ordering::Relaxed);
        }
        self.fixed(0).store(MAGIC, Ordering::Relaxed);
        self.fixed(1).store(n as u64, Ordering::Release);
    }

    /// A word of the log: the hot path's accessor, without the bounds
    /// check of [`CrashLog::word`].
    #[inline]
    fn fixed(&self, i: usize) -> &AtomicU64 {
        debug_assert!(i < LOG_WORDS, "{i} is not in the crash log");
        // SAFETY: the log maps `LOG_WORDS` words, zero-initialised, and
        // AtomicU64 has the layout of u64; the callers pass constants or
        // indices bounded by `CURRENT`.
        unsafe { &*self.words.add(i.min(LOG_WORDS - 1)) }
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

    /// The steps from the root to `node`, as (actor, handler, seed, choices);
    /// `None` when the node was not recorded.
    fn ancestry(&self, node: u32) -> Option<Vec<LoggedStep>> {
        self.tree.path(node)
    }
}

/// What the child was doing, as its status block says (see [`phase`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Phase {
    /// One of the `IN_*` constants.
    pub(crate) kind: u64,
    /// The node of the search tree the phase concerns (the state whose
    /// guards or invariants run).
    pub(crate) node: u32,
    /// The process (`u64::MAX`: none), then two words the kind defines.
    pub(crate) a: u64,
    pub(crate) b: u64,
    pub(crate) c: u64,
}

/// The checker's own code: nothing of the user's is running.
pub(crate) const IN_CHECKER: u64 = 0;
/// A process's constructor (`a`: the process).
pub(crate) const IN_SETUP: u64 = 1;
/// A handler: the current record names it.
pub(crate) const IN_HANDLER: u64 = 2;
/// A guard of state `node` (`a`: the process, `b`: the handler).
pub(crate) const IN_GUARD: u64 = 3;
/// An invariant of state `node` (`a`: the process or `u64::MAX` for a
/// global one; `b`: its index among the model's invariants, per-process
/// ones first, then the model's own global ones, then the registered
/// ones).
pub(crate) const IN_INVARIANT: u64 = 4;
/// The `Hash`, `Debug` or abstraction of a process, for its fingerprint or
/// a trace (`a`: the process).
pub(crate) const IN_IDENTITY: u64 = 5;
/// A registered model's function, building the model.
pub(crate) const IN_BUILD: u64 = 6;

/// The statistics the child last published.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Published {
    pub(crate) unique: u64,
    pub(crate) transitions: u64,
    pub(crate) max_depth: u64,
    pub(crate) generated: u64,
    /// Whether the search tree outgrew the log (crash traces beyond it
    /// cannot be rebuilt).
    pub(crate) log_full: bool,
}

impl CrashLog {
    fn phase(&self) -> Phase {
        let w = |i: usize| self.word(PHASE + i).load(Ordering::Relaxed);
        Phase {
            kind: w(0),
            node: w(1) as u32,
            a: w(2),
            b: w(3),
            c: w(4),
        }
    }

    fn heartbeat(&self) -> u64 {
        self.fixed(SEQ).load(Ordering::Relaxed)
    }

    fn published(&self) -> Published {
        let w = |i: usize| self.word(i).load(Ordering::Relaxed);
        Published {
            unique: w(STAT_UNIQUE),
            transitions: w(STAT_TRANSITIONS),
            max_depth: w(STAT_DEPTH),
            generated: w(STAT_GENERATED),
            log_full: self.tree.full(),
        }
    }
}

/// Records what the child is doing now (one of the `IN_*` kinds), for the
/// parent's watchdog and for naming the culprit if the child dies: a few
/// relaxed stores into shared memory, cheap enough for every guard,
/// handler and invariant. A no-op outside an isolated run.
#[inline]
pub(crate) fn phase(kind: u64, node: u32, a: u64, b: u64, c: u64) {
    let log = LOG.with(Cell::get);
    if log.is_null() {
        return;
    }
    // SAFETY: the log outlives the isolated run that set the pointer.
    let log = unsafe { &*log };
    log.fixed(PHASE).store(kind, Ordering::Relaxed);
    log.fixed(PHASE + 1)
        .store(u64::from(node), Ordering::Relaxed);
    log.fixed(PHASE + 2).store(a, Ordering::Relaxed);
    log.fixed(PHASE + 3).store(b, Ordering::Relaxed);
    log.fixed(PHASE + 4).store(c, Ordering::Relaxed);
    let seq = log.fixed(SEQ);
    seq.store(
        seq.load(Ordering::Relaxed).wrapping_add(1),
        Ordering::Release,
    );
}

/// Changes the process and handler of the current phase (a guard after
/// another of the same state): two stores and the heartbeat.
#[inline]
pub(crate) fn phase_args(a: u64, b: u64) {
    let log = LOG.with(Cell::get);
    if log.is_null() {
        return;
    }
    // SAFETY: the log outlives the isolated run that set the pointer.
    let log = unsafe { &*log };
    log.fixed(PHASE + 2).store(a, Ordering::Relaxed);
    log.fixed(PHASE + 3).store(b, Ordering::Relaxed);
    let seq = log.fixed(SEQ);
    seq.store(
        seq.load(Ordering::Relaxed).wrapping_add(1),
        Ordering::Release,
    );
}

/// Publishes the search's statistics (read by the parent if the child
/// never returns a result). A no-op outside an isolated run.
#[inline]
pub(crate) fn publish(unique: u64, transitions: u64, max_depth: usize, generated: u64) {
    let log = LOG.with(Cell::get);
    if log.is_null() {
        return;
    }
    // SAFETY: the log outlives the isolated run that set the pointer.
    let log = unsafe { &*log };
    log.fixed(STAT_UNIQUE).store(unique, Ordering::Relaxed);
    log.fixed(STAT_TRANSITIONS)
        .store(transitions, Ordering::Relaxed);
    log.fixed(STAT_DEPTH)
        .store(max_depth as u64, Ordering::Relaxed);
    log.fixed(STAT_GENERATED)
        .store(generated, Ordering::Relaxed);
}

/// Whether this thread runs inside an isolated child.
pub(crate) fn isolated() -> bool {
    !LOG.with(Cell::get).is_null()
}

/// Sends one line of text to the parent at once (a violation as soon as it
/// is found, so that nothing found is lost if the child dies later). A
/// no-op outside an isolated run.
pub(crate) fn stream(line: &str) {
    if !isolated() {
        return;
    }
    debug_assert!(!line.contains('\n'), "a streamed line is one line");
    process::write_all(RESULT_FD, format!("V{line}\n").as_bytes());
}

/// A step of the search tree as the crash log holds it.
pub(crate) type LoggedStep = crate::engine::tree::TreeStep;

impl Drop for CrashLog {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and no reference into it survives.
        unsafe { crate::sys::unmap(self.words.cast(), LOG_WORDS * 8) };
    }
}

/// A view of the search tree of the isolated run on this thread, if there
/// is one: what an engine running in the child records into.
///
/// The view must not outlive the run: the engine that takes it is built and
/// dropped inside the child's work, and the log outlives that work.
pub(crate) fn tree_view() -> Option<Tree> {
    let log = LOG.with(Cell::get);
    // SAFETY: the log outlives the isolated run that set the pointer, and
    // the view is used only within that run (see above).
    (!log.is_null()).then(|| unsafe { (*log).tree.view() })
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

/// Records what a check is about to run — the node it expands, the event
/// (`u64::MAX` for the environment), the random-seed variant and the choice
/// script — in the crash log of the isolated run on this thread, if there
/// is one, without allocating.
#[inline]
pub(crate) fn record_checking(node: u32, actor: u64, handler: u64, seed: u32, script: &[usize]) {
    let log = LOG.with(Cell::get);
    if !log.is_null() {
        // SAFETY: the log outlives the isolated run that set the pointer.
        unsafe {
            (*log).write_parts(
                &[
                    CHECKING,
                    u64::from(node),
                    actor,
                    handler,
                    u64::from(seed),
                    script.len() as u64,
                ],
                script,
            )
        };
    }
}

/// The descriptor the child writes its result to.
pub(crate) const RESULT_FD: i32 = 3;

/// Limits the parent enforces on the child while it runs.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Watch {
    /// How long user code (a handler, guard, invariant, constructor,
    /// `Hash` or `Debug`) may run before the child is stopped.
    pub(crate) transition_timeout: Option<Duration>,
    /// When the run must have ended (the time limit and a grace second):
    /// past it, a child stuck in user code is stopped.
    pub(crate) deadline: Option<Instant>,
}

/// How a child that returned no result ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum How {
    /// Killed by this signal (not sent by the parent).
    Signal(i32),
    /// It exited with this status (user code called `exit`).
    Exit(i32),
    /// The parent stopped it: user code ran longer than the transition
    /// timeout.
    Hung(Duration),
    /// The parent stopped it: user code was still running at the deadline.
    Deadline,
    /// The parent stopped it: this signal (SIGINT, SIGTERM) asked the run
    /// to stop, and the child had not stopped a second later; `true` when
    /// the code it was running had been running all that second (without
    /// a heartbeat), `false` when the child was busy with other work.
    Interrupted(i32, bool),
    /// The parent stopped it: another worker of the same search had ended
    /// without a result (killed from outside, say), and this one had not
    /// stopped two seconds after being told to (it may have been waiting
    /// for the one that ended).
    Abandoned,
}

impl How {
    /// How the child ended, in words ("killed by SIGKILL").
    pub(crate) fn describe(self) -> String {
        match self {
            How::Signal(s) => format!("killed by {}", signal_name(s)),
            How::Exit(code) => format!("exited with status {code}"),
            How::Hung(t) => format!("stopped after {:.1} s in one transition", t.as_secs_f64()),
            How::Deadline => "stopped at the time limit".to_string(),
            How::Interrupted(s, _) => format!("stopped by {}", signal_name(s)),
            How::Abandoned => "abandoned".to_string(),
        }
    }
}

pub(crate) use crate::sys::process::{catch_job_stop_signals, catch_stop_signals, stop_signal};

/// How the child ended.
pub(crate) enum ChildEnd {
    /// It returned this result text (which holds whatever it streamed).
    Finished(String),
    /// It ended without a result: how, its current record, the steps to
    /// the node that record names (when it names one), its phase and the
    /// steps to the phase's node, its last statistics, the lines it
    /// streamed before, and what it printed.
    Ended(Box<Ended>),
}

/// See [`ChildEnd::Ended`].
pub(crate) struct Ended {
    pub(crate) how: How,
    pub(crate) log: Option<Vec<u64>>,
    pub(crate) ancestry: Option<Vec<LoggedStep>>,
    pub(crate) phase: Phase,
    pub(crate) phase_ancestry: Option<Vec<LoggedStep>>,
    pub(crate) published: Published,
    /// The last signal user code sent its own process, if it did.
    pub(crate) self_signal: Option<i32>,
    pub(crate) streamed: Vec<String>,
    pub(crate) stderr: String,
}

/// Splits what the child wrote on its result descriptor into the lines it
/// streamed and its result.
fn split_result(text: &str) -> (Vec<String>, String) {
    let mut streamed = Vec::new();
    let mut result = String::new();
    for line in text.split_inclusive('\n') {
        match line.strip_prefix('V') {
            Some(rest) => streamed.push(rest.trim_end_matches('\n').to_string()),
            None => result.push_str(line.strip_prefix('R').unwrap_or(line)),
        }
    }
    (streamed, result)
}

/// Runs `work` in a forked child; its returned text comes back to the
/// parent. `work` must not return until it is done with the crash log.
/// The parent watches the child's heartbeat and stops it (SIGKILL) when
/// user code outlasts `watch`'s limits.
pub(crate) fn run_in_child(
    watch: Watch,
    work: impl FnOnce() -> String,
) -> std::io::Result<ChildEnd> {
    let mut work = Some(work);
    let mut ends = run_in_children(
        watch,
        1,
        |_| (work.take().expect("one child runs the work once"))(),
        || {},
    )?;
    Ok(ends.pop().expect("one child, one end"))
}

/// A forked child and what the parent keeps of it.
struct Child {
    pid: libc::pid_t,
    log: CrashLog,
    out: Option<std::fs::File>,
    err: Option<std::fs::File>,
    status: Option<process::Exit>,
    stopped: Option<How>,
    beat: (u64, Instant),
}

/// Runs `work(0)` … `work(n - 1)` in `n` forked children at once (the
/// workers of a parallel search), each with a crash log of its own, and
/// watches them all as [`run_in_child`] watches one. When a child ends
/// without a result (it crashed, exited, or was stopped), `ended` is called
/// once, so that the others can be told to stop. The ends come back in the
/// children's order.
pub(crate) fn run_in_children(
    watch: Watch,
    n: usize,
    mut work: impl FnMut(usize) -> String,
    ended: impl Fn(),
) -> std::io::Result<Vec<ChildEnd>> {
    // One copy of the watching for every caller (it is long, and the
    // callers are generic over the process type).
    children_run(watch, n, &mut work, &ended)
}

fn children_run(
    watch: Watch,
    n: usize,
    work: &mut dyn FnMut(usize) -> String,
    ended: &dyn Fn(),
) -> std::io::Result<Vec<ChildEnd>> {
    assert!(n >= 1, "at least one child");
    // What the child reads once and caches (the modules and symbols, the
    // control of randomness, cmc's own globals, its panic hook) is set up
    // here first: a one-time initialization another thread was in the
    // middle of at the fork would never finish in the child, which would
    // wait for it forever.
    crate::sys::layout::modules();
    crate::sys::layout::exe_tls_block();
    crate::sys::layout::thread_stack();
    crate::memory::globals::exe_writable();
    crate::determinism::random::warm();
    crate::determinism::entropy::warm();
    crate::determinism::clock::real();
    crate::memory::threads::warm();
    crate::sys::symbols::own_globals();
    protocol_fd();
    crate::model::ctx::install_panic_hook();
    let mut children: Vec<Child> = Vec::with_capacity(n);
    // Every child is forked before any reader thread starts: a fork copies
    // only the forking thread, and a reader holding a lock (the
    // allocator's) at that moment would leave it held in the child.
    for index in 0..n {
        let log = CrashLog::new()?;
        let forked = process::fork_with_pipes(RESULT_FD, protocol_fd()).map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot start a checking process: {e}"))
        })?;
        let (pid, err, out) = match forked {
            process::Forked::Child => {
                // The child: run, write the result, leave without running
                // the parent's destructors or atexit hooks. The protocol's
                // descriptor stays open: the child reports its progress
                // there.
                crate::memory::threads::after_fork_in_child();
                crate::memory::arena::after_fork_in_child();
                LOG.with(|l| l.set(&log));
                process::enter_isolated_child();
                // SAFETY: the child never leaves this block (it ends with
                // `exit_child` below, without dropping the log), so the
                // log's mapping stays for the rest of the process.
                let word: &'static AtomicU64 =
                    unsafe { &*(log.word(SELF_SIGNAL) as *const AtomicU64) };
                process::note_self_signals_in(word);
                // A panic must not unwind out of the child into the code the
                // parent was running (it would go on as a second copy of it).
                let work = std::panic::AssertUnwindSafe(|| work(index));
                let text = match std::panic::catch_unwind(work) {
                    Ok(text) => text,
                    Err(_) => process::exit_child(101),
                };
                LOG.with(|l| l.set(std::ptr::null()));
                let mut line = String::with_capacity(text.len() + 2);
                line.push('R');
                line.push_str(&text);
                process::write_all(RESULT_FD, line.as_bytes());
                process::exit_child(0);
            }
            process::Forked::Parent { pid, err, out } => (pid, err, out),
        };
        let beat = (log.heartbeat(), Instant::now());
        children.push(Child {
            pid,
            log,
            out: Some(out),
            err: Some(err),
            status: None,
            stopped: None,
            beat,
        });
    }
    // Read every pipe on a thread of its own so none can fill up and block
    // its child, while this thread watches them.
    let spawn = |file: Option<std::fs::File>| {
        let mut file = file.expect("each pipe is read once");
        std::thread::Builder::new().spawn(move || {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            text
        })
    };
    let mut readers = Vec::with_capacity(children.len());
    for c in children.iter_mut() {
        match (spawn(c.out.take()), spawn(c.err.take())) {
            (Ok(out), Ok(err)) => readers.push((out, err)),
            (out, err) => {
                // No thread to read a child's pipes (the system refused
                // one: too many threads, or no address space left): the
                // children are stopped, and the refusal is cmc's failure.
                let e = [out.err(), err.err()]
                    .into_iter()
                    .flatten()
                    .next()
                    .map(|e| {
                        std::io::Error::new(
                            e.kind(),
                            format!(
                                "cannot start a thread to read a checking process's output: {e}"
                            ),
                        )
                    });
                for c in &children {
                    process::kill_child(c.pid);
                }
                for c in &children {
                    while process::try_wait(c.pid).is_none() {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                return Err(e.expect("one of the two failed"));
            }
        }
    }
    let mut asked: Option<(i32, Instant)> = None;
    // How long a child asked to stop has before it is killed: in an MPI
    // job, long enough for the processes to meet and end together.
    let grace = if process::job_rank().is_some() {
        Duration::from_secs(10)
    } else {
        Duration::from_secs(1)
    };
    let mut nap = Duration::from_micros(200);
    let mut told: Option<Instant> = None;
    while children.iter().any(|c| c.status.is_none()) {
        for c in children.iter_mut().filter(|c| c.status.is_none()) {
            if let Some(status) = process::try_wait(c.pid) {
                c.status = Some(status);
                let clean = status == process::Exit::Code(0);
                if (!clean || c.stopped.is_some()) && told.is_none() {
                    told = Some(Instant::now());
                    ended();
                }
            }
        }
        if children.iter().all(|c| c.status.is_some()) {
            break;
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(20));
        let now = Instant::now();
        if let (Some(signal), None) = (stop_signal(), asked) {
            asked = Some((signal, now));
            // The children share this process's group, and a signal to
            // the group reached them too; one that came to this process
            // alone (in an MPI job, from `mpirun`) is passed on.
            for c in children.iter().filter(|c| c.status.is_none()) {
                process::send_signal(c.pid, signal);
            }
        }
        for c in children.iter_mut().filter(|c| c.status.is_none()) {
            let seq = c.log.heartbeat();
            if seq != c.beat.0 {
                c.beat = (seq, now);
            }
            if c.stopped.is_some() {
                continue;
            }
            // Told to stop because another worker ended: whatever this
            // one waits for (perhaps the one that ended), it is not a hang
            // of the code it ran last.
            if let Some(at) = told {
                if now.duration_since(at) >= Duration::from_secs(2) {
                    c.stopped = Some(How::Abandoned);
                    process::kill_child(c.pid);
                }
                continue;
            }
            if c.log.phase().kind == IN_CHECKER {
                continue;
            }
            let stuck = now.duration_since(c.beat.1);
            let how = match (watch.transition_timeout, watch.deadline, asked) {
                (_, _, Some((signal, at))) if now.duration_since(at) >= grace => {
                    Some(How::Interrupted(signal, stuck >= Duration::from_secs(1)))
                }
                (Some(limit), _, _) if stuck >= limit => Some(How::Hung(limit)),
                (_, Some(deadline), _) if now >= deadline => Some(How::Deadline),
                _ => None,
            };
            if let Some(how) = how {
                c.stopped = Some(how);
                process::kill_child(c.pid);
            }
        }
    }
    let mut ends = Vec::with_capacity(n);
    for (c, (reader, err_reader)) in children.into_iter().zip(readers) {
        let (streamed, text) = split_result(&reader.join().unwrap_or_default());
        let stderr = err_reader.join().unwrap_or_default();
        let status = c.status.expect("every child was reaped");
        let exited_cleanly = status == process::Exit::Code(0) && !text.is_empty();
        if exited_cleanly && c.stopped.is_none() {
            ends.push(ChildEnd::Finished(text));
            continue;
        }
        let how = match c.stopped {
            Some(how) => how,
            None => match status {
                process::Exit::Signal(signal) => How::Signal(signal),
                process::Exit::Code(code) => How::Exit(code),
            },
        };
        let log = &c.log;
        let current = log.read();
        // A check's record starts with the node being expanded.
        let ancestry = match current.as_deref() {
            Some([CHECKING, node, ..]) => log.ancestry(*node as u32),
            _ => None,
        };
        let phase = log.phase();
        let phase_ancestry = match phase.kind {
            IN_GUARD | IN_INVARIANT => log.ancestry(phase.node),
            _ => None,
        };
        ends.push(ChildEnd::Ended(Box::new(Ended {
            how,
            log: current,
            ancestry,
            phase,
            phase_ancestry,
            published: log.published(),
            self_signal: match log.word(SELF_SIGNAL).load(Ordering::Acquire) {
                0 => None,
                signal => Some(signal as i32),
            },
            streamed,
            stderr,
        })))
    }
    Ok(ends)
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
        libc::SIGINT => "SIGINT (interrupt)".into(),
        libc::SIGTERM => "SIGTERM (terminate)".into(),
        other => format!("signal {other}"),
    }
}
