//! The HTML counterexample report: its content for real and hand-made
//! traces, and that it renders in a headless browser without script errors.
//!
//! Browser tests need Chromium (`apt-get install -y chromium`); without it
//! they fail, unless `CMC_SKIP_BROWSER_TESTS=1`. `CMC_REPORT_SCREENSHOT=path`
//! keeps the screenshot of the ping-pong report there; `CMC_REPORT_HTML_DIR`
//! keeps every rendered page.

#[path = "../src/report.rs"]
mod report;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cmc::{
    Ctx, Handler, Invariant, Model, NetworkConfig, Process, Sent, Step, StepKind, Strategy, Trace,
    Verdict, View, ViolationKind, ViolationRecord,
};

#[global_allocator]
static ALLOC: cmc::Allocator = cmc::Allocator;

// ---------------------------------------------------------------- models

/// Process 0 sends 1 then 2 to process 1; process 1 records what it gets.
/// Over an unordered network they can arrive out of order.
#[derive(Debug)]
struct Courier {
    sent: bool,
    got: Vec<u8>,
}

impl Courier {
    fn send_both(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.sent = true;
        for m in [1u8, 2] {
            let _ = ctx.send(1, m);
        }
    }

    fn receive(&mut self, ctx: &mut Ctx<'_, Self>) {
        if let Some((_, m)) = ctx.recv() {
            self.got.push(m);
        }
    }
}

impl Process for Courier {
    type Msg = u8;
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![
            Handler::new("send_both", Courier::send_both).guard(|c, v| v.me() == 0 && !c.sent),
            Handler::new("receive", Courier::receive).guard(|_, v| v.has_mail()),
        ]
    }
    fn invariants() -> Vec<Invariant<Self>> {
        vec![Invariant::new("in_order", |c| {
            if c.got.windows(2).all(|w| w[0] < w[1]) {
                Ok(())
            } else {
                Err(format!("got {:?}", c.got))
            }
        })]
    }
}

fn courier_trace() -> Trace {
    let r = Model::new("courier", 2, |_| Courier {
        sent: false,
        got: Vec::new(),
    })
    .network(NetworkConfig::new())
    .quiescence_ok(true)
    .strategy(Strategy::Bfs)
    .debug_states()
    .check()
    .unwrap();
    assert_eq!(r.verdict, Verdict::Violation);
    r.violations[0].trace.clone()
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Ball {
    Ping { round: u8, attempt: u8 },
    Pong(u8),
}

/// Process 0 pings (numbering its attempts) and resends on a timeout;
/// process 1 answers. The property "the first ping process 1 hears is a
/// first attempt" fails when the first ping is lost and the resend arrives.
#[derive(Debug)]
struct Player {
    round: u8,
    attempt: u8,
    waiting: bool,
    first_heard: Option<u8>,
}

impl Player {
    fn serve(&mut self, ctx: &mut Ctx<'_, Self>) {
        let _ = ctx.send(
            1,
            Ball::Ping {
                round: self.round,
                attempt: self.attempt,
            },
        );
        self.waiting = true;
        ctx.set_timer("resend");
    }

    fn receive(&mut self, ctx: &mut Ctx<'_, Self>) {
        match ctx.recv() {
            Some((from, Ball::Ping { round, attempt })) => {
                self.first_heard.get_or_insert(attempt);
                let _ = ctx.send(from, Ball::Pong(round));
            }
            Some((_, Ball::Pong(n))) if self.waiting && n == self.round => {
                self.round += 1;
                self.attempt = 0;
                self.waiting = false;
                ctx.cancel_timer("resend");
            }
            Some(_) | None => {}
        }
    }

    fn resend(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.attempt += 1;
        let _ = ctx.send(
            1,
            Ball::Ping {
                round: self.round,
                attempt: self.attempt,
            },
        );
        ctx.set_timer("resend");
    }
}

impl Process for Player {
    type Msg = Ball;
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![
            Handler::new("serve", Player::serve)
                .guard(|p: &Player, v: &View<'_, Player>| v.me() == 0 && !p.waiting && p.round < 1),
            Handler::new("receive", Player::receive).guard(|_, v| v.has_mail()),
            Handler::new("resend", Player::resend).on_timer("resend"),
        ]
    }
    fn invariants() -> Vec<Invariant<Self>> {
        vec![Invariant::new("first_try_arrives", |p| {
            match p.first_heard {
                Some(a) if a > 0 => Err(format!("the first ping heard was attempt {a}")),
                _ => Ok(()),
            }
        })]
    }
}

fn ping_pong_trace() -> Trace {
    let r = Model::new("ping_pong", 2, |_| Player {
        round: 0,
        attempt: 0,
        waiting: false,
        first_heard: None,
    })
    .network(NetworkConfig::new().capacity(1).lossy(true))
    .quiescence_ok(true)
    .strategy(Strategy::Bfs)
    .max_depth(8)
    .debug_states()
    .check()
    .unwrap();
    assert_eq!(r.verdict, Verdict::Violation);
    r.violations[0].trace.clone()
}

/// Process 0 posts a note (one of two, chosen) whose text is HTML; process 1
/// reads notes and must read at most one. The network duplicates.
#[derive(Debug)]
struct Board {
    posted: bool,
    read: Vec<String>,
}

impl Board {
    fn post(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.posted = true;
        let which = cmc::choose(2);
        let _ = ctx.send(1, format!("<script>alert(\"{which}\")</script> & 'co'"));
    }

    fn read(&mut self, ctx: &mut Ctx<'_, Self>) {
        if let Some((_, note)) = ctx.recv() {
            self.read.push(note);
        }
    }
}

impl Process for Board {
    type Msg = String;
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![
            Handler::new("post", Board::post).guard(|b, v| v.me() == 0 && !b.posted),
            Handler::new("read", Board::read).guard(|_, v| v.has_mail()),
        ]
    }
    fn invariants() -> Vec<Invariant<Self>> {
        vec![Invariant::new("read_once", |b| {
            if b.read.len() <= 1 {
                Ok(())
            } else {
                Err(format!("read {} notes: <b>{:?}</b>", b.read.len(), b.read))
            }
        })]
    }
}

fn board_trace() -> Trace {
    let r = Model::new("board<&>", 2, |_| Board {
        posted: false,
        read: Vec::new(),
    })
    .network(NetworkConfig::new().fifo(true).duplicating(true))
    .quiescence_ok(true)
    .strategy(Strategy::Bfs)
    .debug_states()
    .check()
    .unwrap();
    assert_eq!(r.verdict, Verdict::Violation);
    r.violations[0].trace.clone()
}

/// A process that is broken from the start: a violation with no steps.
#[derive(Debug)]
struct Doomed;

impl Process for Doomed {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        vec![
            Handler::new("never", |_: &mut Doomed, _: &mut Ctx<'_, Doomed>| {}).guard(|_, _| false),
        ]
    }
    fn invariants() -> Vec<Invariant<Self>> {
        vec![Invariant::new("sane", |_| {
            Err("broken from the <start> & \"always\"".into())
        })]
    }
}

fn doomed_trace() -> Trace {
    let r = Model::new("doomed", 1, |_| Doomed).check().unwrap();
    assert_eq!(r.verdict, Verdict::Violation);
    r.violations[0].trace.clone()
}

fn step(process: Option<usize>, handler: &str, kind: StepKind) -> Step {
    Step {
        process,
        actor: process.map_or("environment".into(), |p| format!("process {p}")),
        handler: handler.into(),
        kind,
        choices: Vec::new(),
        seed: 0,
        message: None,
        from: None,
        to: None,
        sent: Vec::new(),
        timers: Vec::new(),
        fingerprint: "00ff".into(),
        before: None,
        after: None,
    }
}

fn sent(to: usize, message: &str, fate: &str) -> Sent {
    Sent {
        to,
        message: message.into(),
        fate: fate.into(),
    }
}

fn deliver(mut s: Step, message: &str, from: usize, to: usize) -> Step {
    s.message = Some(message.into());
    s.from = Some(from);
    s.to = Some(to);
    s
}

/// A hand-made trace with every kind of arrow: identical messages matched
/// in order, a self-send, failed and dropped sends, a loss, a duplicate, a
/// delivery with no matching send and messages never delivered.
fn handmade_trace() -> Trace {
    let mut s1 = step(Some(0), "start", StepKind::Handler);
    s1.choices = vec![1, 0];
    s1.sent = vec![
        sent(1, "Req(7)", "sent"),
        sent(2, "Req(7)", "failed"),
        sent(0, "Note", "sent"),
    ];
    s1.before = Some("Node {\n    n: 0,\n    log: \"<none>\",\n}".into());
    s1.after = Some("Node {\n    n: 1,\n    log: \"<none>\",\n}".into());
    let mut s2 = step(Some(0), "retry", StepKind::Timer);
    s2.sent = vec![
        sent(1, "Req(7)", "sent"),
        sent(2, "Req(8)", "dropped: network full"),
    ];
    let s3 = deliver(step(Some(1), "on_req", StepKind::Handler), "Req(7)", 0, 1);
    let s4 = deliver(
        step(None, "duplicate message", StepKind::Duplication),
        "Req(7)",
        0,
        1,
    );
    let mut s5 = deliver(step(Some(1), "on_req", StepKind::Handler), "Req(7)", 0, 1);
    s5.sent = vec![sent(0, "Ack(7)", "sent"), sent(2, "Ack(7)", "sent")];
    let s6 = deliver(step(None, "lose message", StepKind::Loss), "Ack(7)", 1, 0);
    let s7 = deliver(step(Some(0), "on_note", StepKind::Handler), "Note", 0, 0);
    let s8 = deliver(step(Some(2), "on_ghost", StepKind::Handler), "Ghost", 1, 2);
    let mut s9 = deliver(step(Some(1), "on_req", StepKind::Handler), "Req(7)", 0, 1);
    s9.fingerprint = String::new();
    Trace {
        version: cmc::TRACE_VERSION,
        state_hash: cmc::STATE_HASH.to_string(),
        model: "handmade".into(),
        fingerprint_bits: 64,
        fingerprint: None,
        build: None,
        loop_start: None,
        symmetric: false,
        twin: Vec::new(),
        sources: Vec::new(),
        handlers: String::new(),
        initial_fingerprint: "abcdef0123456789".into(),
        prefix: Vec::new(),
        steps: vec![s1, s2, s3, s4, s5, s6, s7, s8, s9],
        violation: Some(ViolationRecord {
            kind: ViolationKind::Panic,
            property: "on_req".into(),
            message: "process 1: third request".into(),
            location: Some("src/node.rs:10:5".into()),
        }),
        also_violated: Vec::new(),
    }
}

/// A long trace, as depth-first search or a routing protocol gives: 40
/// steps over four processes, with messages whose `Debug` is long.
fn long_trace() -> Trace {
    let msg = |k: usize| {
        format!(
            "RouteRequest {{ origin: {}, destination: {}, sequence: {k}, hop_count: {} }}",
            k % 4,
            (k + 2) % 4,
            k % 5
        )
    };
    let mut steps = Vec::new();
    for k in 0..40 {
        let p = k % 4;
        let s = match k % 5 {
            0 | 2 => {
                let mut s = step(Some(p), "broadcast_route_request", StepKind::Handler);
                s.sent = vec![
                    sent((p + 1) % 4, &msg(k), "sent"),
                    sent((p + 3) % 4, &msg(k), "sent"),
                ];
                s
            }
            1 | 3 => deliver(
                step(Some(p), "handle_route_request", StepKind::Handler),
                &msg(k - 1),
                (p + 3) % 4,
                p,
            ),
            _ => deliver(
                step(None, "lose message", StepKind::Loss),
                &msg(k - 2),
                (p + 2) % 4,
                (p + 3) % 4,
            ),
        };
        steps.push(s);
    }
    Trace {
        version: cmc::TRACE_VERSION,
        state_hash: cmc::STATE_HASH.to_string(),
        model: "aodv::model::aodv_4_ring_with_a_long_name".into(),
        fingerprint_bits: 64,
        fingerprint: None,
        build: None,
        loop_start: Some(30),
        symmetric: false,
        twin: Vec::new(),
        sources: Vec::new(),
        handlers: String::new(),
        initial_fingerprint: "abcdef0123456789".into(),
        prefix: Vec::new(),
        steps,
        violation: Some(ViolationRecord {
            kind: ViolationKind::Invariant,
            property: "loop_freedom_of_every_routing_table".into(),
            message:
                "a routing loop: 0 → 1 → 2 → 3 → 0 for destination 1, all with sequence number 17"
                    .into(),
            location: None,
        }),
        also_violated: Vec::new(),
    }
}

// ---------------------------------------------------------------- helpers

/// The number of steps that deliver a message to a handler.
fn deliveries(trace: &Trace) -> usize {
    trace
        .steps
        .iter()
        .filter(|s| {
            matches!(s.kind, StepKind::Handler | StepKind::Timer)
                && s.message.is_some()
                && s.from.is_some()
        })
        .count()
}

fn count(html: &str, needle: &str) -> usize {
    html.matches(needle).count()
}

/// The number of lifelines, the environment's included.
fn lifelines(html: &str) -> usize {
    count(html, "<g class=\"lifeline\"") + count(html, "<g class=\"lifeline env\"")
}

/// The (origin, end) step numbers of the arrows of `class` ("msg lost", …),
/// in document order.
fn arrows(html: &str, class: &str) -> Vec<(usize, usize)> {
    let open = format!("<g class=\"{class}");
    html.match_indices(&open)
        .map(|(i, _)| {
            let tag = &html[i..i + html[i..].find('>').unwrap()];
            let attr = |name: &str| -> usize {
                let key = format!("{name}=\"");
                let at = tag.find(&key).unwrap() + key.len();
                tag[at..at + tag[at..].find('"').unwrap()].parse().unwrap()
            };
            (attr("data-from"), attr("data-to"))
        })
        .collect()
}

/// Checks what every report must have.
fn check_common(trace: &Trace, html: &str) {
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(
        !html.contains("src=\"http") && !html.contains("href=\"http"),
        "the page loads nothing"
    );
    assert!(html.contains(&escaped(&trace.model)), "model name");
    for s in &trace.steps {
        assert!(html.contains(&escaped(&s.handler)), "handler {}", s.handler);
        for state in s.before.iter().chain(&s.after) {
            for line in state.lines() {
                assert!(html.contains(&escaped(line)), "state line {line:?}");
            }
        }
    }
    let n = trace.steps.len();
    assert_eq!(count(html, "<g class=\"step-row"), n, "one row per step");
    assert_eq!(count(html, "<li id=\"step-"), n, "one list item per step");
    for k in 1..=n {
        // Numbered as its step, whatever comes before it in the list (a
        // lasso's cycle banner is an item too).
        let item = &html[html.find(&format!("<li id=\"step-{k}\"")).unwrap()..];
        // Numbered after a long trace's prefix.
        let number = trace.skipped() + k;
        assert!(
            item[..item.find('>').unwrap()].contains(&format!(" value=\"{number}\"")),
            "step {k}: {}",
            &item[..item.find('>').unwrap()]
        );
    }
    assert_eq!(
        count(html, "<g class=\"msg delivered"),
        deliveries(trace),
        "one arrow per delivered message"
    );
    let v = trace.violation.as_ref().unwrap();
    let banner = &html[html.find("<div class=\"violation\"").unwrap()..];
    let banner = &banner[..banner.find("</div>\n").unwrap()];
    assert!(banner.contains(&escaped(&v.property)), "{banner}");
    assert!(banner.contains(&escaped(&v.message)), "{banner}");
    assert!(banner.contains(v.kind.as_str()), "{banner}");
    if n > 0 {
        assert_eq!(count(html, "<g class=\"step-row failing\""), 1);
        assert!(html.contains(&format!("<g class=\"step-row failing\" data-step=\"{n}\"")));
        assert_eq!(count(html, "class=\"step-row failing\""), 1);
        assert!(html.contains(&format!("<li id=\"step-{n}\" class=\"step ")));
        let item = &html[html.find(&format!("<li id=\"step-{n}\"")).unwrap()..];
        assert!(item[..item.find('>').unwrap()].contains(" failing\""));
        assert_eq!(count(html, "<g class=\"callout\">"), 1);
    }
    keep_html(&trace.model, html);
}

fn escaped(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

fn keep_html(name: &str, html: &str) {
    if let Some(dir) = std::env::var_os("CMC_REPORT_HTML_DIR") {
        let name: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(Path::new(&dir).join(format!("{name}.html")), html).unwrap();
    }
}

// ---------------------------------------------------------------- content

#[test]
fn the_courier_report_draws_both_deliveries_out_of_order() {
    let trace = courier_trace();
    assert_eq!(trace.steps.len(), 3);
    let html = report::render(&trace);
    check_common(&trace, &html);
    // Sent together by step 1, delivered 2 first (step 2), then 1 (step 3).
    assert_eq!(arrows(&html, "msg delivered"), vec![(1, 2), (1, 3)]);
    assert_eq!(count(&html, "<g class=\"msg in-flight"), 0);
    assert_eq!(lifelines(&html), 2, "no environment lane");
    assert!(html.contains("in_order"));
    assert!(html.contains("<details class=\"state\""));
    // Step 3 appends 1 to `got`: only that line is marked changed.
    let item = &html[html.find("<li id=\"step-3\"").unwrap()..];
    let item = &item[..item.find("</li>").unwrap()];
    let changed: Vec<&str> = item
        .split("<span class=\"changed\">")
        .skip(1)
        .map(|s| &s[..s.find("</span>").unwrap()])
        .collect();
    assert_eq!(changed, vec!["        1,"], "{item}");
}

#[test]
fn the_report_names_the_other_properties_the_last_state_breaks() {
    let mut trace = courier_trace();
    assert!(!report::render(&trace).contains("also violated"));
    trace.also_violated = vec!["freshness".into(), "<loop>".into()];
    let html = report::render(&trace);
    check_common(&trace, &html);
    assert!(
        html.contains(
            "<div class=\"also\">also violated in this state: freshness, &lt;loop&gt;</div>"
        ),
        "{html}"
    );
}

#[test]
fn the_ping_pong_report_shows_the_loss_the_timer_and_the_unanswered_pong() {
    let trace = ping_pong_trace();
    let kinds: Vec<StepKind> = trace.steps.iter().map(|s| s.kind).collect();
    assert_eq!(
        kinds,
        vec![
            StepKind::Handler,
            StepKind::Loss,
            StepKind::Timer,
            StepKind::Handler
        ],
        "{trace}"
    );
    let html = report::render(&trace);
    check_common(&trace, &html);
    assert_eq!(arrows(&html, "msg lost"), vec![(1, 2)]);
    assert_eq!(arrows(&html, "msg delivered"), vec![(3, 4)]);
    assert_eq!(arrows(&html, "msg in-flight"), vec![(4, 0)], "the pong");
    assert_eq!(count(&html, "<g class=\"mark mark-timer\""), 1);
    assert_eq!(count(&html, "<g class=\"mark mark-loss\""), 1);
    assert_eq!(count(&html, "<g class=\"lifeline env\""), 1);
}

#[test]
fn html_in_debug_output_is_escaped() {
    let trace = board_trace();
    let kinds: Vec<StepKind> = trace.steps.iter().map(|s| s.kind).collect();
    assert!(kinds.contains(&StepKind::Duplication), "{trace}");
    assert!(
        trace.steps[0].sent[0].message.contains("<script>"),
        "{trace}"
    );
    let html = report::render(&trace);
    check_common(&trace, &html);
    assert_eq!(
        count(&html, "<script>"),
        2,
        "only the page's own two scripts"
    );
    assert!(!html.contains("<b>"), "the violation message is escaped");
    assert!(!html.contains("board<&>"));
    assert!(html.contains("board&lt;&amp;&gt;"));
    assert!(html.contains("&lt;script&gt;alert(\\&quot;"));
    assert!(html.contains("&amp; &#39;co&#39;"));
    // One delivery from the original send, one from the duplicate.
    assert_eq!(count(&html, "<g class=\"msg delivered duplicate\""), 1);
    assert_eq!(count(&html, "<g class=\"mark mark-dup\""), 1);
    let with_choices = trace.steps.iter().filter(|s| !s.choices.is_empty()).count();
    assert!(with_choices >= 1);
    assert_eq!(
        count(&html, "class=\"mark mark-choice\""),
        with_choices + 1,
        "steps + legend"
    );
    assert!(html.contains(&format!("choose {:?}", trace.steps[0].choices)));
}

#[test]
fn a_trace_with_no_steps_shows_the_initial_violation() {
    let trace = doomed_trace();
    assert!(trace.steps.is_empty());
    let html = report::render(&trace);
    check_common(&trace, &html);
    assert!(html.contains("the trace has no steps"));
    assert!(!html.contains("<svg class=\"msc\""));
    assert!(html.contains("broken from the &lt;start&gt; &amp; &quot;always&quot;"));
}

#[test]
fn a_handmade_trace_matches_every_kind_of_message() {
    let trace = handmade_trace();
    let html = report::render(&trace);
    check_common(&trace, &html);
    // The two Req(7) sent in steps 1 and 2 are delivered in steps 3 and 5,
    // in order; the duplicate made in step 4 is delivered in step 9.
    assert_eq!(
        arrows(&html, "msg delivered"),
        vec![(1, 3), (2, 5), (1, 7), (0, 8), (4, 9)]
    );
    assert_eq!(arrows(&html, "msg delivered duplicate"), vec![(4, 9)]);
    assert_eq!(
        arrows(&html, "msg delivered unmatched"),
        vec![(0, 8)],
        "Ghost was never sent"
    );
    assert_eq!(arrows(&html, "msg lost"), vec![(5, 6)]);
    assert_eq!(arrows(&html, "msg failed"), vec![(1, 0), (2, 0)]);
    assert_eq!(arrows(&html, "msg in-flight"), vec![(5, 0)], "Ack(7) to 2");
    assert!(html.contains("dropped: network full"));
    assert!(html.contains("choose [1, 0]"));
    assert!(html.contains("at src/node.rs:10:5"));
    // The lines that changed are marked in the after state, only they.
    assert!(html.contains("<span class=\"changed\">    n: 1,</span>"));
    assert_eq!(count(&html, "<span class=\"changed\">"), 1);
    assert_eq!(lifelines(&html), 4, "3 processes + env");
}

#[test]
fn a_report_renders_from_a_saved_trace() {
    let trace = courier_trace();
    let loaded = Trace::from_json(&trace.to_json()).unwrap();
    assert_eq!(report::render(&loaded), report::render(&trace));
}

// ---------------------------------------------------------------- browser

/// One browser at a time: the machine is small.
static BROWSER: Mutex<()> = Mutex::new(());

/// The Chromium binary, or `None` to skip (only with
/// `CMC_SKIP_BROWSER_TESTS=1`); fails when it is missing otherwise.
fn chromium() -> Option<PathBuf> {
    if std::env::var("CMC_SKIP_BROWSER_TESTS").as_deref() == Ok("1") {
        eprintln!("CMC_SKIP_BROWSER_TESTS=1: skipping the browser check");
        return None;
    }
    // An explicit CMC_CHROMIUM is the only candidate.
    let candidates: Vec<PathBuf> = match std::env::var_os("CMC_CHROMIUM") {
        Some(path) => vec![PathBuf::from(path)],
        None => [
            "/usr/bin/chromium",
            "/usr/bin/chromium-browser",
            "/usr/bin/google-chrome",
        ]
        .map(PathBuf::from)
        .to_vec(),
    };
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return Some(found.clone());
    }
    panic!(
        "Chromium was not found at {candidates:?} (set CMC_CHROMIUM to its path): \
         install it with `apt-get install -y chromium`, or set \
         CMC_SKIP_BROWSER_TESTS=1 to skip the browser tests"
    );
}

/// A fresh directory under the temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "cmc-report-{}-{name}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs headless Chromium on `page` with `args`; returns its stdout.
fn run_chromium(browser: &Path, page: &Path, args: &[String]) -> String {
    let _one = BROWSER.lock().unwrap_or_else(|e| e.into_inner());
    let profile = TempDir::new("profile");
    let out = profile.0.join("stdout");
    let err = profile.0.join("stderr");
    let start = Instant::now();
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!(
            "--user-data-dir={}",
            profile.0.join("data").display()
        ))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", browser.display()));
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "chromium did not finish in 90 s; stderr:\n{}",
                std::fs::read_to_string(&err).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    eprintln!(
        "chromium {:?} took {:.2} s",
        args,
        start.elapsed().as_secs_f64()
    );
    assert!(
        status.success(),
        "chromium failed ({status}); stderr:\n{}",
        std::fs::read_to_string(&err).unwrap_or_default()
    );
    std::fs::read_to_string(&out).unwrap()
}

/// Renders `html` in Chromium; returns the DOM after the page's script ran.
fn dump_dom(browser: &Path, html: &str) -> String {
    let dir = TempDir::new("page");
    let page = dir.0.join("report.html");
    std::fs::write(&page, html).unwrap();
    run_chromium(browser, &page, &["--dump-dom".to_string()])
}

fn body_tag(dom: &str) -> &str {
    let at = dom.find("<body").expect("a body in the dumped DOM");
    &dom[at..at + dom[at..].find('>').unwrap()]
}

fn check_in_browser(trace: &Trace) {
    let Some(browser) = chromium() else { return };
    let html = report::render(trace);
    keep_html(&trace.model, &html);
    let dom = dump_dom(&browser, &html);
    let body = body_tag(&dom);
    // No text of the chart overlaps another or leaves the chart.
    assert!(
        body.contains("data-label-overlaps=\"0\"") && body.contains("data-label-clipped=\"0\""),
        "{}: text overlaps or leaves the chart: {body}",
        trace.model
    );

    let n = trace.steps.len();
    assert!(
        body.contains(&format!("data-rendered-steps=\"{n}\"")),
        "{body}"
    );
    assert!(body.contains("data-errors=\"0\""), "{body}");
    assert!(
        body.contains(&format!("data-arrows=\"{}\"", deliveries(trace))),
        "{body}"
    );
}

#[test]
fn reports_render_in_a_browser_without_script_errors() {
    for trace in [
        courier_trace(),
        board_trace(),
        doomed_trace(),
        handmade_trace(),
        long_trace(),
    ] {
        check_in_browser(&trace);
    }
}

#[test]
fn the_error_counter_sees_script_errors() {
    let Some(browser) = chromium() else { return };
    let html = report::render(&courier_trace()).replace(
        "</body>",
        "<script>window.undefinedFunction();</script></body>",
    );
    let dom = dump_dom(&browser, &html);
    let body = body_tag(&dom);
    assert!(body.contains("data-errors=\"1\""), "{body}");
    assert!(body.contains("data-rendered-steps=\"3\""), "{body}");
}

#[test]
fn the_ping_pong_report_renders_and_has_a_screenshot() {
    let trace = ping_pong_trace();
    check_in_browser(&trace);
    let Some(browser) = chromium() else { return };
    let dir = TempDir::new("shot");
    let page = dir.0.join("report.html");
    std::fs::write(&page, report::render(&trace)).unwrap();
    let shot = std::env::var_os("CMC_REPORT_SCREENSHOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.0.join("report.png"));
    let shot = std::path::absolute(&shot).unwrap();
    let _ = std::fs::remove_file(&shot);
    run_chromium(
        &browser,
        &page,
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1200,900".to_string(),
        ],
    );
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(
        png.len() > 10_000,
        "a blank screenshot? {} bytes",
        png.len()
    );
}

#[test]
fn a_trace_with_a_prefix_numbers_its_described_steps_after_it() {
    let mut trace = courier_trace();
    trace.version = cmc::LONG_TRACE_VERSION;
    trace.prefix = vec![cmc::PathRun {
        process: Some(0),
        handler: 0,
        choices: Vec::new(),
        seed: 0,
        times: 1_999_500,
    }];
    assert_eq!(trace.len(), 1_999_503);
    let html = report::render(&trace);
    check_common(&trace, &html);
    assert!(
        html.contains("1,999,503 steps") || html.contains("1999503 steps"),
        "the header counts every step"
    );
    assert!(html.contains("steps 1 to 1999500 are recorded as events only"));
    // The list and the chart number the described steps after the prefix.
    assert!(html.contains("value=\"1999501\""));
    assert!(html.contains("value=\"1999503\""));
    assert!(!html.contains("value=\"1\""));
    let text = trace.to_string();
    assert!(text.contains("… steps 1 to 1999500: events only"), "{text}");
    assert!(text.contains("1999503. "), "{text}");
}
