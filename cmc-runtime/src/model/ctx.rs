//! What handler code sees: [`choose`], the handler context [`Ctx`] (network,
//! timers) and the guard view [`View`].
//!
//! Every nondeterministic decision — `choose(n)`, which pending message
//! `recv` delivers, whether a send fails — is a *choice*. The engine runs a
//! handler with a script of choice values; calls beyond the script take 0 and
//! record their range; the engine then advances the script like an odometer
//! until every combination has run once.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::model::env::Env;
use crate::model::env::OnFull;
use crate::model::process::{Ctx, Process, View};
use crate::sys::scope::set_in_user_code;
use crate::sys::scope::{in_user_code, system_scope};

/// The state of the handler run in progress on this thread. It lives in
/// checker memory: every method that grows it runs in a system scope.
#[derive(Debug, Default)]
pub(crate) struct Run {
    /// Choice values to replay, in order.
    pub(crate) script: Vec<usize>,
    /// The choices made so far, as (value, range).
    pub(crate) taken: Vec<(usize, usize)>,
    /// Whether to describe delivered messages (when building traces).
    pub(crate) describe: bool,
    /// The delivered (or lost, or duplicated) message: (sender, receiver,
    /// its `Debug`).
    pub(crate) delivered: Option<(usize, usize, String)>,
    /// Messages sent: (receiver, `Debug`, what happened to it).
    pub(crate) sent: Vec<(usize, String, &'static str)>,
    /// Timers the run started or cancelled, in order: "sets timer `t`",
    /// "cancels timer `t`" (only those whose state changed).
    pub(crate) timers: Vec<String>,
    /// A model error raised by the environment (the network bound).
    pub(crate) model_error: Option<String>,
    /// A replayed choice that is out of its range now: the trace does not
    /// fit the program (the handler panics to stop).
    pub(crate) misfit: Option<String>,
    /// The state of the generator that picks the choices beyond the script
    /// (a random walk's); `None`: they are 0 (the odometer's first script).
    pub(crate) pick: Option<u64>,
}

thread_local! {
    static RUN: RefCell<Option<Run>> = const { RefCell::new(None) };
    static PANIC: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
    /// The panic recorded before the one in `PANIC`, in the same call of
    /// user code: a panic raised while another unwinds aborts the process,
    /// and cmc then says what both were (see `set_cmc_hook`).
    static EARLIER: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
}

/// The message std gives the non-unwinding panic it raises when a panic
/// escapes a destructor during unwinding; the process aborts after the hook.
const PANIC_IN_CLEANUP: &str = "panic in a destructor during cleanup";

/// How the line the panic hook writes then begins (after `cmc: `), for the
/// parent of an isolated check to find it (`engine::stderr_tail`).
pub(crate) const TWO_PANICS: &str = "a panic while another unwound aborts the process";

pub(crate) fn begin_run(run: Run) {
    let _sys = system_scope();
    RUN.with(|r| *r.borrow_mut() = Some(run));
}

pub(crate) fn end_run() -> Run {
    RUN.with(|r| r.borrow_mut().take())
        .expect("end_run without begin_run")
}

/// Runs `f` as user code: panics are recorded (message, location) instead of
/// printed, and caught. `scrub` zeroes the stack below this frame first
/// (for code that writes state, so padding copied from the stack is the
/// same every time); nothing whose path varies runs in between.
pub(crate) fn user_code<R>(scrub: bool, f: impl FnOnce() -> R) -> Result<R, (String, String)> {
    // What comes before and after the call is not generic (one copy of it
    // for every caller), but the stack is scrubbed and checked from this
    // frame, the one the code runs from.
    let depth = enter_user_code();
    if scrub {
        crate::sys::stack::scrub_stack(depth + GUARD_BYTES);
    }
    let result = match SHIFT.with(Cell::get) {
        0 => call_user(f),
        n => call_shifted(n, f),
    };
    let hook = leave_user_code();
    if scrub
        && !crate::sys::stack::band_is_clean(depth, GUARD_BYTES, crate::sys::layout::thread_stack())
    {
        went_deeper(depth);
    }
    match result {
        Ok(r) => Ok(r),
        Err(payload) => Err(caught_panic(payload, hook)),
    }
}

/// [`user_code`] before the call: the depth the stack is to be scrubbed
/// to.
fn enter_user_code() -> usize {
    install_panic_hook();
    // The record is of this call's panics only (user code may catch a panic
    // of its own and return normally).
    PANIC.with(|p| p.borrow_mut().take());
    EARLIER.with(|p| p.borrow_mut().take());
    set_in_user_code(true);
    SCRUB.with(Cell::get)
}

/// [`user_code`] after the call: whether cmc's panic hook was in force.
fn leave_user_code() -> HookCheck {
    set_in_user_code(false);
    // The code may have replaced cmc's panic hook: put it back before
    // anything else can panic, and while a hook the code installed in its
    // arena is still live (see `restore_panic_hook`).
    if cmc_hook_in_force() {
        HookCheck::InForce
    } else {
        restore_panic_hook(At::End)
    }
}

/// The code went below the scrubbed `depth`, where older garbage lay: what
/// it copied from there may differ between runs. Scrubs deeper from now
/// on, and tells the engine to run it again.
fn went_deeper(depth: usize) {
    let (low, len) = crate::sys::layout::thread_stack();
    let marker = 0u8;
    let here = &marker as *const u8 as u64;
    let room = here.saturating_sub(low).min(len) as usize;
    let most = room.saturating_sub(64 * 1024) / 2;
    if depth * 2 <= most {
        SCRUB.with(|s| s.set(depth * 2));
        DEEPER.with(|d| d.set(true));
    }
}

/// The message and location of a panic that left user code with `payload`.
/// `hook` says whether cmc's panic hook was in force when the code returned.
fn caught_panic(payload: Box<dyn Any + Send>, hook: HookCheck) -> (String, String) {
    // Everything kept from here on must outlive the arena that was current.
    let _sys = system_scope();
    let message = payload_message(&*payload);
    // The payload may live in the arena that was current: drop it now,
    // before any restore reuses that memory.
    drop(payload);
    match PANIC.with(|p| p.borrow_mut().take()) {
        // The hook saw this panic (or, for a payload caught and resumed with
        // `resume_unwind`, the panic that made it).
        Some((recorded, location)) if recorded == message => (message, location),
        _ => {
            // No hook recorded it: `resume_unwind` runs none, and a hook the
            // code installed in place of cmc's may not forward to it.
            // Whether cmc's hook is in force tells which.
            let hook = match hook {
                HookCheck::InForce => restore_panic_hook(At::Panic),
                other => other,
            };
            let why = match hook {
                HookCheck::InForce => "std::panic::resume_unwind runs no panic hook",
                HookCheck::Replaced => {
                    "cmc's panic hook was replaced (std::panic::set_hook or take_hook)"
                }
                HookCheck::Unknown => "no panic hook recorded it",
            };
            (message, format!("unknown location: {why}"))
        }
    }
}

/// The message a panic payload carries: the `&str` or `String` of `panic!`.
/// Other payloads (`panic_any`) have no message cmc can show: their type
/// cannot be named. Allocates the result: call it in a system scope.
fn payload_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

thread_local! {
    /// Bytes by which user code's stack starts deeper than usual (the
    /// determinism check's repeated runs; see [`set_stack_shift`]).
    static SHIFT: Cell<usize> = const { Cell::new(0) };
}

/// Makes the following user code run from a stack `bytes` deeper than
/// usual (rounded to 64 bytes, at most 1 KiB): a value taken from a stack
/// address then differs from one run to the next. 0 restores the usual.
pub(crate) fn set_stack_shift(bytes: usize) {
    SHIFT.with(|s| s.set(bytes.min(1024) / 64));
}

/// Calls user code in a frame of its own. Never inlined: every temporary
/// of the user's code (a struct built on the stack and moved into the heap,
/// with its padding) then lives below the frame that scrubbed the stack,
/// never in a caller's frame holding older bytes.
#[inline(never)]
fn call_user<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
}

/// [`call_user`] from `units` × 64 bytes deeper on the stack.
#[inline(never)]
fn call_shifted<R>(units: usize, f: impl FnOnce() -> R) -> std::thread::Result<R> {
    if units == 0 {
        return call_user(f);
    }
    let pad = [0u8; 64];
    let r = call_shifted(units - 1, f);
    std::hint::black_box(&pad);
    r
}

/// Bytes of stack zeroed before a handler or constructor runs, at first
/// (with the guard band below, 16 KiB).
const SCRUB_BYTES: usize = 14 * 1024;

/// Bytes below the scrubbed depth also zeroed, and checked after the code
/// ran: code that wrote there went deeper than the scrub.
const GUARD_BYTES: usize = 2 * 1024;

thread_local! {
    /// The depth scrubbed before user code on this thread: doubles whenever
    /// code goes deeper (see [`user_code`]).
    static SCRUB: Cell<usize> = const { Cell::new(SCRUB_BYTES) };
    /// Set when user code went deeper than the scrubbed depth.
    static DEEPER: Cell<bool> = const { Cell::new(false) };
}

/// Whether user code went deeper than the stack it found scrubbed since the
/// last call (the depth has grown since: running it again makes its stack
/// garbage zeros).
pub(crate) fn take_deeper() -> bool {
    DEEPER.with(|d| d.replace(false))
}

// cmc's panic hook.
//
// While user code runs, cmc's hook records a panic's message and location
// (the payload alone has no location) instead of printing it; elsewhere it
// forwards to the hook the program had installed.
//
// User code may replace the hook: a handler, a constructor or a model
// function that installs a logger or a crash reporter (`set_hook`, perhaps
// after `take_hook` to forward to the hook it replaces). cmc puts its own
// hook back as soon as that code returns, and discards the code's hook
// without ever calling it again:
// * the hook is process-wide and belongs to no state: left in force after
//   one branch of the search, it would act in every branch explored after
//   it, so what a step reports would depend on the order of the search
//   (and a replay, which runs one branch, could disagree);
// * installed by a handler, it lives in the process's arena, which the next
//   restore rolls back: calling it later would run freed memory;
// * cmc reports a panic of user code itself; a hook adds nothing to that.
// Within the call that installs it, the code's hook does act (a panic after
// `set_hook` in the same handler goes to it; cmc then has the payload's
// message but no location). A hook the program installs outside user code
// (between two checks, say) is the program's: cmc forwards to it the
// panics of code that is not user code, as to the hook it found when it
// first installed its own.
//
// Detection is cheap, since `user_code` looks before and after every call:
// the word of std's hook slot (`std::panicking::HOOK`, found by its symbol)
// that holds the address of the installed closure, compared with cmc's; and
// a `Sentinel` that cmc's closure owns, which std drops when the hook is
// replaced or taken and dropped. Two loads and a compare; only when one of
// them says the hook changed does cmc call `take_hook`/`set_hook`. Without
// a symbol table (a stripped binary) only the sentinel is left: a hook that
// takes cmc's and keeps it, without forwarding to it, is then found only at
// the next panic of user code that no hook recorded.

/// A hook as `std::panic::set_hook` takes it.
type PanicHook = dyn Fn(&std::panic::PanicHookInfo<'_>) + Send + Sync + 'static;

/// The state of cmc's hook: [`HOOK_IN_FORCE`] while its current hook has not
/// been dropped, else 0 (not installed yet) or how it was dropped.
static HOOK: AtomicU8 = AtomicU8::new(0);
const HOOK_IN_FORCE: u8 = 1;
/// cmc's hook was dropped by user code (on the thread that dropped it).
const HOOK_DROPPED_BY_USER_CODE: u8 = 2;
/// cmc's hook was dropped by code that was not user code: the program.
const HOOK_DROPPED_BY_PROGRAM: u8 = 4;
/// The generation of cmc's current hook: the sentinel of an older one (that
/// a user's hook held to forward to it) says nothing when it drops.
static HOOK_GENERATION: AtomicU64 = AtomicU64::new(0);
/// The address of the closure of cmc's current hook, to recognise it in
/// std's slot and when `take_hook` returns it (the closure is not
/// zero-sized, so the address is its own).
static HOOK_ADDRESS: AtomicUsize = AtomicUsize::new(0);
/// The address of the word of std's hook slot that holds the installed
/// closure's address, or 0 when the symbol table did not tell.
static STD_SLOT: AtomicUsize = AtomicUsize::new(0);
/// Held by the thread restoring the hook. A flag tried, never waited for: a
/// child forked while another thread held it must not wait forever.
static RESTORING: AtomicBool = AtomicBool::new(false);
/// The hook cmc forwards to outside user code. Only touched by the thread
/// that holds [`RESTORING`] (or runs the first installation).
static PREVIOUS: Mutex<Option<Arc<Box<PanicHook>>>> = Mutex::new(None);

/// Owned by cmc's hook: std drops it when the hook is replaced, or taken
/// and dropped.
struct Sentinel {
    generation: u64,
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        if self.generation != HOOK_GENERATION.load(Ordering::Acquire) {
            return;
        }
        let by = if in_user_code() {
            HOOK_DROPPED_BY_USER_CODE
        } else {
            HOOK_DROPPED_BY_PROGRAM
        };
        HOOK.store(by, Ordering::Release);
    }
}

/// When cmc looks at the hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    /// Before user code runs: a change since was the program's.
    Start,
    /// After user code returned: a change since the start was the code's.
    End,
    /// After a panic of user code that no hook recorded.
    Panic,
}

/// What is known of cmc's hook after a look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HookCheck {
    /// It was in force.
    InForce,
    /// Something had replaced it; it is back in force now.
    Replaced,
    /// Not looked at: another thread is restoring it, or this one panics.
    Unknown,
}

/// Whether cmc's current hook is in force, as far as two loads can tell.
#[inline]
fn cmc_hook_in_force() -> bool {
    if HOOK.load(Ordering::Relaxed) != HOOK_IN_FORCE {
        return false;
    }
    let slot = STD_SLOT.load(Ordering::Relaxed);
    // SAFETY: a nonzero `slot` is an 8-byte aligned word of std's static
    // hook slot (`find_std_slot`), mapped for the life of the program. The
    // read is volatile because another thread's `set_hook` may write it
    // meanwhile; what it then reads differs from cmc's address, and the
    // slow path looks again under std's lock.
    slot == 0
        || unsafe { std::ptr::read_volatile(slot as *const usize) }
            == HOOK_ADDRESS.load(Ordering::Relaxed)
}

/// Makes sure cmc's panic hook is in force (installs it the first time).
pub(crate) fn install_panic_hook() {
    if !cmc_hook_in_force() {
        restore_panic_hook(At::Start);
    }
}

/// Puts cmc's panic hook back in force when something replaced it. At
/// [`At::Panic`] without std's slot, looks even if nothing says so: the
/// only way left to tell a panic resumed with `resume_unwind` from a hook
/// that took cmc's and kept it is to take std's hook and look.
#[cold]
#[inline(never)]
fn restore_panic_hook(at: At) -> HookCheck {
    static FIRST: std::sync::Once = std::sync::Once::new();
    // `take_hook` and `set_hook` panic on a panicking thread.
    if std::thread::panicking() {
        return HookCheck::Unknown;
    }
    let here = crate::memory::alloc::current();
    let _sys = system_scope();
    FIRST.call_once(|| {
        set_cmc_hook(Arc::new(std::panic::take_hook()));
        find_std_slot();
    });
    let sure = at != At::Panic || STD_SLOT.load(Ordering::Relaxed) != 0;
    if sure && cmc_hook_in_force() {
        return HookCheck::InForce;
    }
    if RESTORING
        .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return HookCheck::Unknown;
    }
    let state = HOOK.load(Ordering::Acquire);
    let found = std::panic::take_hook();
    let address = (&*found as *const PanicHook).cast::<u8>() as usize;
    let hook = if address == HOOK_ADDRESS.load(Ordering::Relaxed) {
        // Ours, in force: a panic resumed with `resume_unwind` ran no hook.
        std::panic::set_hook(found);
        HookCheck::InForce
    } else {
        let arena = crate::memory::arena::find(address);
        let program = arena.is_none()
            && (state & HOOK_DROPPED_BY_PROGRAM != 0
                || (state & HOOK_DROPPED_BY_USER_CODE == 0 && at == At::Start));
        if program {
            // The program's own hook: forward to it from now on.
            set_cmc_hook(Arc::new(found));
        } else {
            let previous = PREVIOUS
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
                .expect("cmc's panic hook was installed before it was replaced");
            set_cmc_hook(previous);
            // The code that just returned installed this hook: its memory,
            // system memory or the arena current now, is live, and dropping
            // it frees it before the successor state is captured. Any other
            // hook of user code may lie in an arena restored since, or in
            // another thread's: leak it, unread.
            let live = arena.is_none_or(|a| std::ptr::eq(a, here));
            if at == At::End && live {
                drop(found);
            } else {
                std::mem::forget(found);
            }
        }
        HookCheck::Replaced
    };
    RESTORING.store(false, Ordering::Release);
    hook
}

/// Installs a new cmc hook that forwards to `previous` outside user code.
/// std holds no hook of cmc's now (it holds its default hook, which
/// `set_hook` drops). Runs in a system scope, one thread at a time.
fn set_cmc_hook(previous: Arc<Box<PanicHook>>) {
    *PREVIOUS.lock().unwrap_or_else(PoisonError::into_inner) = Some(previous.clone());
    let generation = HOOK_GENERATION.fetch_add(1, Ordering::AcqRel) + 1;
    let sentinel = Sentinel { generation };
    let hook: Box<PanicHook> = Box::new(move |info| {
        let _owned = &sentinel;
        if in_user_code() {
            let _sys = system_scope();
            let message = payload_message(info.payload());
            let location = info
                .location()
                .map_or_else(|| "unknown location".into(), |l| l.to_string());
            if message == PANIC_IN_CLEANUP {
                // std aborts the process once this hook returns: say on
                // standard error, where the parent reads it, what the two
                // panics were (the abort itself says neither).
                let first = EARLIER.with(|p| p.borrow().clone());
                let second = PANIC.with(|p| p.borrow().clone());
                let say = |p: Option<(String, String)>| {
                    p.map_or_else(|| "?".to_string(), |(m, l)| format!("`{m}` at {l}"))
                };
                let line = format!(
                    "\ncmc: {}: {}, then, in a destructor while it unwound, {}\n",
                    TWO_PANICS,
                    say(first),
                    say(second)
                );
                crate::sys::write_stderr_raw(line.as_bytes());
                return;
            }
            let previous = PANIC.with(|p| p.borrow_mut().replace((message, location)));
            EARLIER.with(|p| *p.borrow_mut() = previous);
        } else {
            previous(info);
        }
    });
    let address = (&*hook as *const PanicHook).cast::<u8>() as usize;
    HOOK_ADDRESS.store(address, Ordering::Relaxed);
    std::panic::set_hook(hook);
    HOOK.store(HOOK_IN_FORCE, Ordering::Release);
    let slot = STD_SLOT.load(Ordering::Relaxed);
    // SAFETY: as in `cmc_hook_in_force`.
    if slot != 0 && unsafe { std::ptr::read_volatile(slot as *const usize) } != address {
        // std's slot is not laid out as it was (or another thread set a
        // hook just now): stop reading it, rather than look in vain.
        STD_SLOT.store(0, Ordering::Relaxed);
    }
}

/// Finds the word of std's hook slot that holds the address of cmc's hook,
/// just installed: `std::panicking::HOOK` (a lock and the hook) in the
/// executable's symbol table, a word of which must hold the address.
fn find_std_slot() {
    let Some((value, size)) = crate::sys::symbols::lookup("std::panicking::HOOK") else {
        return;
    };
    if !(8..=256).contains(&size) {
        return;
    }
    let start = crate::sys::layout::modules().exe_bias as usize + value;
    let ours = HOOK_ADDRESS.load(Ordering::Relaxed);
    let words = (start.next_multiple_of(8)..start + size - 7).step_by(8);
    for word in words {
        // SAFETY: an 8-byte aligned word inside std's static, at its load
        // address (the symbol's value and size); volatile as in
        // `cmc_hook_in_force`.
        if unsafe { std::ptr::read_volatile(word as *const usize) } == ours {
            STD_SLOT.store(word, Ordering::Relaxed);
            return;
        }
    }
}

/// Runs `f` on the current run, or panics at the caller's line when no
/// handler is running.
#[track_caller]
fn with_run<R>(what: &str, f: impl FnOnce(&mut Run) -> R) -> R {
    let _sys = system_scope();
    let result = RUN.with(|r| r.borrow_mut().as_mut().map(f));
    match result {
        Some(r) => r,
        None => panic!(
            "{what} was called outside a handler: it is only meaningful while cmc runs a handler"
        ),
    }
}

/// [`choice`], which the draws after it depend on under symmetry
/// reduction (see `determinism::random::orbit_choice`).
#[track_caller]
fn choice_labelled(n: usize, what: &str) -> usize {
    let v = choice(n, what);
    crate::determinism::random::orbit_choice(false, |_, _| v as u128);
    v
}

#[track_caller]
fn choice(n: usize, what: &str) -> usize {
    match pick(n, what) {
        Ok(value) => value,
        Err(message) => panic!("{message}: the trace does not fit the program"),
    }
}

/// The next choice in `0..n`: the script's, or the generator's, or 0; an
/// error (recorded as the run's misfit) when a replayed value is out of
/// range.
fn pick(n: usize, what: &str) -> Result<usize, String> {
    with_run(what, |run| {
        let at = run.taken.len();
        let value = match run.script.get(at) {
            Some(&v) => v,
            None => match &mut run.pick {
                // Uniform in 0..n from the output's high bits.
                Some(state) => {
                    ((u128::from(crate::sys::hash::splitmix64(state)) * n as u128) >> 64) as usize
                }
                None => 0,
            },
        };
        if value >= n {
            let message = format!(
                "choice {} of the step is {value}, out of its range 0..{n} now",
                at + 1
            );
            run.misfit = Some(message.clone());
            return Err(message);
        }
        run.taken.push((value, n));
        Ok(value)
    })
}

/// A choice made by the engine itself (which message the environment loses
/// or duplicates); `None` when a replayed (or shortened) trace's value is
/// out of range now — recorded as the run's misfit, not a panic, since the
/// engine's own code is not caught like a handler's.
pub(crate) fn choice_internal(n: usize) -> Option<usize> {
    pick(n, "an environment event").ok()
}

/// Records what the current step delivered, lost or duplicated, when the
/// run describes its steps (the closure runs in checker memory).
pub(crate) fn describe(f: impl FnOnce() -> (usize, usize, String)) {
    with_run("an environment event", |run| {
        if run.describe {
            run.delivered = Some(f());
        }
    });
}

/// Returns a value in `0..n`; the search explores every value from the same
/// state. Only meaningful inside a handler.
///
/// # Panics
/// When `n == 0` or when called outside a handler (a usage error, reported
/// at the caller's line).
#[track_caller]
pub fn choose(n: usize) -> usize {
    assert!(
        n > 0,
        "cmc::choose(0): there is nothing to choose from (n must be at least 1)"
    );
    let v = choice(n, "cmc::choose");
    crate::determinism::random::orbit_choice(true, |_, _| v as u128);
    v
}

/// Records a timer the run started or cancelled, when it describes its
/// steps.
fn note_timer(what: &'static str, name: &str) {
    with_run("Ctx::set_timer", |run| {
        if run.describe {
            run.timers.push(format!("{what} timer `{name}`"));
        }
    })
}

/// Records the fate of a copy sent to `to`, when the run describes its
/// steps.
#[track_caller]
fn note_copy(to: usize, msg: &impl fmt::Debug, fate: &'static str) {
    with_run("Ctx::send", |run| {
        if run.describe {
            run.sent.push((to, format!("{msg:?}"), fate));
        }
    })
}

/// Why a send failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    /// The network holds its capacity of messages (with `OnFull::Error`).
    Full,
    /// A nondeterministic send failure (with `send_failure`).
    Failed,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SendError::Full => "the network is full",
            SendError::Failed => "the send failed",
        })
    }
}

impl std::error::Error for SendError {}

impl<P: Process> Ctx<'_, P> {
    fn env(&self) -> &Env<P::Msg, P::Shared> {
        // SAFETY: the environment root is live in the restored state for the
        // whole handler, and the engine holds no other reference meanwhile.
        unsafe { &*self.env }
    }

    #[allow(
        clippy::mut_from_ref,
        reason = "the environment is reached through the engine's root pointer"
    )]
    fn env_mut(&self) -> &mut Env<P::Msg, P::Shared> {
        // SAFETY: as above; `Ctx` is the only path to the environment while
        // a handler runs, and no reference returned here outlives a method.
        unsafe { &mut *self.env }
    }

    /// The same context for a process type with the same messages and
    /// shared variables: a role of a `#[cmc::roles]` enum runs its handlers
    /// with it. A `Ctx` depends on its process type only through those two
    /// types, so the copy is exact; it borrows `self`, so only one of the
    /// two is used at a time.
    pub(crate) fn narrow<R>(&mut self) -> Ctx<'_, R>
    where
        R: Process<Msg = P::Msg, Shared = P::Shared>,
    {
        Ctx {
            me: self.me,
            count: self.count,
            env: self.env,
            mem: self.mem,
            env_arena: self.env_arena,
            net: self.net,
        }
    }

    /// This process's index.
    pub fn me(&self) -> usize {
        self.me
    }

    /// The number of processes.
    pub fn process_count(&self) -> usize {
        self.count
    }

    /// The other processes' indices.
    pub fn peers(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.count).filter(move |&p| p != self.me)
    }

    /// Sends `msg` to process `to`. The message is copied into the
    /// environment.
    ///
    /// # Panics
    /// When `to` is not a process of the model.
    #[track_caller]
    pub fn send(&mut self, to: usize, msg: P::Msg) -> Result<(), SendError> {
        assert!(
            to < self.count,
            "send to process {to}, but the model has {} processes",
            self.count
        );
        crate::model::por::note_send(to);
        let note = |fate: &'static str, msg: &P::Msg| note_copy(to, msg, fate);
        if self.net.send_failure && choice_labelled(2, "Ctx::send") == 1 {
            note("failed", &msg);
            return Err(SendError::Failed);
        }
        if self.env().msgs.len() >= self.net.capacity {
            note("dropped: network full", &msg);
            return match self.net.on_full {
                OnFull::Drop => Ok(()),
                OnFull::Error => Err(SendError::Full),
                _ => {
                    let capacity = self.net.capacity;
                    with_run("Ctx::send", |run| {
                        run.model_error.get_or_insert_with(|| {
                            format!("the network's capacity of {capacity} messages was exceeded")
                        });
                    });
                    Ok(())
                }
            };
        }
        note("sent", &msg);
        let me = self.me;
        let _in_env = self.mem.enter(self.env_arena);
        let copy = msg.clone();
        self.env_mut().insert(me, to, copy);
        Ok(())
    }

    /// Sends a copy of `msg` to every other process; see
    /// [`multicast`](Self::multicast).
    pub fn broadcast(&mut self, msg: P::Msg) -> Result<(), SendError> {
        let peers: Vec<usize> = self.peers().collect();
        self.multicast(peers, msg)
    }

    /// Sends a copy of `msg` to each process of `to` (in that order);
    /// returns the first error (every send is attempted).
    ///
    /// When the network is lossy-full (`OnFull::Drop`) and has room for
    /// some copies but not all, *which* copies get in is the environment's
    /// choice: every subset of the size that fits is explored. (Keeping the
    /// first copies only would make the receivers of a broadcast depend on
    /// process numbering and hide behaviours.)
    ///
    /// # Panics
    /// When a receiver is not a process of the model.
    #[track_caller]
    pub fn multicast(
        &mut self,
        to: impl IntoIterator<Item = usize>,
        msg: P::Msg,
    ) -> Result<(), SendError> {
        let to: Vec<usize> = to.into_iter().collect();
        for &t in &to {
            assert!(
                t < self.count,
                "multicast to process {t}, but the model has {} processes",
                self.count
            );
        }
        let mut result = Ok(());
        for (i, &t) in to.iter().enumerate() {
            let left = to.len() - i;
            let room = self.net.capacity.saturating_sub(self.env().msgs.len());
            if self.net.on_full == OnFull::Drop
                && room > 0
                && room < left
                && choice_labelled(2, "Ctx::multicast") == 1
            {
                // There is room for `room` of the `left` copies; this one is
                // among those that do not get in.
                crate::model::por::note_send(t);
                note_copy(t, &msg, "dropped: network full");
                continue;
            }
            let r = self.send(t, msg.clone());
            if result.is_ok() {
                result = r;
            }
        }
        result
    }

    /// Whether a message is waiting for this process (for guards, see
    /// [`View::has_mail`]).
    pub fn has_mail(&self) -> bool {
        let mail = self.env().has_mail(self.me);
        if !mail {
            crate::model::por::note(crate::model::por::SAW_EMPTY);
        }
        mail
    }

    /// Receives one pending message as (sender, message); every deliverable
    /// message is explored as a separate successor. `None` when none is
    /// pending.
    pub fn recv(&mut self) -> Option<(usize, P::Msg)> {
        let count = self.env().deliverable_iter(self.me).count();
        if count == 0 {
            crate::model::por::note(crate::model::por::SAW_EMPTY);
            return None;
        }
        crate::model::por::note(crate::model::por::CONSUMED);
        let pick = choice(count, "Ctx::recv");
        let k = self
            .env()
            .deliverable_iter(self.me)
            .nth(pick)
            .expect("the pick is below the count");
        let entry = {
            let _in_env = self.mem.enter(self.env_arena);
            self.env_mut().remove(k)
        };
        // Copy into this process's arena (current again), then free the
        // environment's copy (routed by address).
        let from = entry.from as usize;
        // Under symmetry reduction, what the handler draws next depends on
        // the message received named up to a renaming, not on its place.
        let key_fn = self.env().key_fn();
        crate::determinism::random::orbit_choice(false, |masked, colours| {
            let _sys = system_scope();
            let h = crate::identity::rename::hashing_renamed(masked, || {
                let mut h = crate::identity::hasher::StateHasher::default();
                key_fn(&entry.msg, &mut h);
                h.finish128()
            });
            let c = colours.get(from).copied().unwrap_or(from as u128);
            h ^ c.rotate_left(61)
        });
        let msg = entry.msg.clone();
        drop(entry);
        let me = self.me;
        with_run("Ctx::recv", |run| {
            if run.describe {
                run.delivered = Some((from, me, format!("{msg:?}")));
            }
        });
        Some((from, msg))
    }

    /// The shared variables, read-only.
    pub fn shared(&self) -> &P::Shared {
        crate::model::por::note(crate::model::por::READ_SHARED);
        &self.env().shared
    }

    /// Changes the shared variables. The closure runs with the environment's
    /// arena current, so whatever it allocates belongs to the shared state.
    pub fn with_shared<R>(&mut self, f: impl FnOnce(&mut P::Shared) -> R) -> R {
        crate::model::por::note(crate::model::por::READ_SHARED | crate::model::por::WROTE_SHARED);
        let _in_env = self.mem.enter(self.env_arena);
        f(&mut self.env_mut().shared)
    }

    /// Starts the timer `name` (no effect when it is pending already). Its
    /// expiry runs the process's handler for that timer at some later point.
    pub fn set_timer(&mut self, name: &str) {
        let me = self.me;
        let was = {
            let _sys = system_scope();
            self.env().timer_pending(me, name)
        };
        {
            let _in_env = self.mem.enter(self.env_arena);
            self.env_mut().set_timer(me, name);
        }
        if !was {
            note_timer("sets", name);
        }
    }

    /// Cancels the timer `name`; returns whether it was pending.
    pub fn cancel_timer(&mut self, name: &str) -> bool {
        let me = self.me;
        let was = {
            let _in_env = self.mem.enter(self.env_arena);
            self.env_mut().cancel_timer(me, name)
        };
        if was {
            note_timer("cancels", name);
        }
        was
    }

    /// Whether the timer `name` is pending.
    pub fn timer_pending(&self, name: &str) -> bool {
        let _sys = system_scope();
        self.env().timer_pending(self.me, name)
    }
}

impl<'a, P: Process> View<'a, P> {
    /// The same view for a process type with the same messages and shared
    /// variables (see [`Ctx::narrow`]).
    pub(crate) fn narrow<R>(&self) -> View<'a, R>
    where
        R: Process<Msg = P::Msg, Shared = P::Shared>,
    {
        View {
            me: self.me,
            count: self.count,
            env: self.env,
        }
    }

    /// The shared variables.
    pub fn shared(&self) -> &'a P::Shared {
        crate::model::por::note(crate::model::por::READ_SHARED);
        &self.env.shared
    }

    /// This process's index.
    pub fn me(&self) -> usize {
        self.me
    }

    /// The number of processes.
    pub fn process_count(&self) -> usize {
        self.count
    }

    /// Whether a message is waiting for this process.
    pub fn has_mail(&self) -> bool {
        let mail = self.env.has_mail(self.me);
        if !mail {
            crate::model::por::note(crate::model::por::SAW_EMPTY);
        }
        mail
    }

    /// Whether this process's timer `name` is pending.
    pub fn timer_pending(&self, name: &str) -> bool {
        self.env.timer_pending(self.me, name)
    }

    /// The number of messages in flight in the whole network.
    pub fn in_flight(&self) -> usize {
        crate::model::por::note(crate::model::por::READ_COUNT);
        self.env.msgs.len()
    }
}
