//! The HTML counterexample report: one self-contained page (inline CSS, SVG
//! and script, nothing fetched) that draws a trace as a message-sequence
//! chart, lists its steps and shows the processes' states.
//!
//! The page's script records that it ran: on load it sets
//! `document.body.dataset.renderedSteps` to the number of step rows in the
//! chart and keeps `document.body.dataset.errors` counting script errors, so
//! a headless browser can check the page.

use std::fmt::Write as _;

use cmc::{Step, StepKind, Trace};

/// Left margin, before the first lifeline (holds the step numbers).
const LEFT: i64 = 70;
/// Distance between two lifelines.
const COL: i64 = 210;
/// The y of the lifeline heads' bottom edge (the initial state).
const TOP: i64 = 64;
/// Height of one step row.
const ROW: i64 = 62;
/// Width of the margin right of the last lane (the violation's callout).
const MARGIN: i64 = 350;

/// Renders `trace` as a self-contained HTML page.
pub fn render(trace: &Trace) -> String {
    let lanes = lanes(trace);
    let messages = match_messages(trace);
    let failing = failing_step(trace);
    let mut out = String::with_capacity(16 * 1024);
    let title = format!("cmc counterexample: {}", trace.model);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(out, "<title>{}</title>", esc(&title));
    out.push_str("<style>");
    out.push_str(CSS);
    out.push_str("</style>\n<script>");
    out.push_str(HEAD_JS);
    out.push_str("</script>\n</head>\n<body>\n");
    header(&mut out, trace);
    out.push_str("<main>\n<section class=\"chart\">\n<h2>Message sequence chart</h2>\n");
    if trace.steps.is_empty() {
        out.push_str(
            "<p class=\"empty\">The initial state already violates the property: \
             the trace has no steps.</p>\n",
        );
    } else {
        legend(&mut out);
        out.push_str("<div class=\"scroll\">\n");
        chart(&mut out, trace, &lanes, &messages, failing);
        out.push_str("</div>\n");
    }
    out.push_str("</section>\n");
    step_list(&mut out, trace, failing);
    out.push_str("</main>\n<script>");
    out.push_str(BODY_JS);
    out.push_str("</script>\n</body>\n</html>\n");
    out
}

// ------------------------------------------------------------------ model

/// A lifeline: a process, or the environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Actor {
    Process(usize),
    Environment,
}

#[derive(Debug)]
struct Lane {
    actor: Actor,
    name: String,
}

/// One lifeline per process that appears in the trace (acting, sending or
/// receiving), in index order, then the environment if it acts.
fn lanes(trace: &Trace) -> Vec<Lane> {
    let mut actors: Vec<Actor> = Vec::new();
    let mut add = |a: Actor| {
        if !actors.contains(&a) {
            actors.push(a);
        }
    };
    for step in &trace.steps {
        add(step.process.map_or(Actor::Environment, Actor::Process));
        step.from.into_iter().for_each(|p| add(Actor::Process(p)));
        step.to.into_iter().for_each(|p| add(Actor::Process(p)));
        step.sent.iter().for_each(|s| add(Actor::Process(s.to)));
    }
    actors.sort();
    actors
        .into_iter()
        .map(|actor| {
            let name = match actor {
                Actor::Environment => "environment".to_string(),
                Actor::Process(p) => trace
                    .steps
                    .iter()
                    .find(|s| s.process == Some(p))
                    .map_or_else(
                        || format!("process {p}"),
                        // Under `#[cmc::roles]` handlers are named
                        // `Role::handler`: the lane says the role too.
                        |s| match s.handler.split_once("::") {
                            Some((role, _)) if !role.is_empty() => {
                                format!("{} ({role})", s.actor)
                            }
                            _ => s.actor.clone(),
                        },
                    ),
            };
            Lane { actor, name }
        })
        .collect()
}

/// How a message's arrow ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    /// Delivered by the step.
    Delivered,
    /// Lost by the network at the step.
    Lost,
    /// Still in flight when the trace ends.
    InFlight,
    /// The send failed or the network was full: it never left the sender.
    Failed,
}

/// One arrow of the chart.
#[derive(Debug)]
struct Arrow {
    /// The step that sent it (0-based), and whether that was the
    /// environment duplicating it; `None` if no earlier send matches.
    origin: Option<(usize, bool)>,
    /// The index of the send within its step (spreads the arrow's start).
    slot: usize,
    from: usize,
    to: usize,
    message: String,
    /// The step that delivered or lost it.
    end: Option<usize>,
    fate: Fate,
    /// The fate text of a failed send.
    note: String,
}

/// A message in flight while matching.
#[derive(Debug)]
struct Pending {
    step: usize,
    slot: usize,
    duplicate: bool,
    from: usize,
    to: usize,
    message: String,
}

/// Matches each delivery (and loss) to the earliest unmatched earlier send
/// with the same sender, receiver and text; a duplication adds a copy.
fn match_messages(trace: &Trace) -> Vec<Arrow> {
    let mut arrows = Vec::new();
    let mut pending: Vec<Pending> = Vec::new();
    for (i, step) in trace.steps.iter().enumerate() {
        if let (Some(message), Some(from), Some(to)) = (&step.message, step.from, step.to) {
            let found = pending
                .iter()
                .position(|p| p.from == from && p.to == to && &p.message == message);
            if step.kind == StepKind::Duplication {
                pending.push(Pending {
                    step: i,
                    slot: 0,
                    duplicate: true,
                    from,
                    to,
                    message: message.clone(),
                });
            } else {
                let origin = found.map(|k| pending.remove(k));
                arrows.push(Arrow {
                    origin: origin.as_ref().map(|p| (p.step, p.duplicate)),
                    slot: origin.as_ref().map_or(0, |p| p.slot),
                    from,
                    to,
                    message: message.clone(),
                    end: Some(i),
                    fate: if step.kind == StepKind::Loss {
                        Fate::Lost
                    } else {
                        Fate::Delivered
                    },
                    note: String::new(),
                });
            }
        }
        let Some(sender) = step.process else { continue };
        for (slot, sent) in step.sent.iter().enumerate() {
            if sent.fate == "sent" {
                pending.push(Pending {
                    step: i,
                    slot,
                    duplicate: false,
                    from: sender,
                    to: sent.to,
                    message: sent.message.clone(),
                });
            } else {
                arrows.push(Arrow {
                    origin: Some((i, false)),
                    slot,
                    from: sender,
                    to: sent.to,
                    message: sent.message.clone(),
                    end: None,
                    fate: Fate::Failed,
                    note: sent.fate.clone(),
                });
            }
        }
    }
    arrows.extend(pending.into_iter().map(|p| Arrow {
        origin: Some((p.step, p.duplicate)),
        slot: p.slot,
        from: p.from,
        to: p.to,
        message: p.message,
        end: None,
        fate: Fate::InFlight,
        note: String::new(),
    }));
    arrows
}

/// Where a lasso's cycle starts among the described steps (a long
/// trace's prefix is not drawn; the cycle then starts in the first drawn
/// step at the latest).
fn loop_start(trace: &Trace) -> Option<usize> {
    trace.loop_start.map(|l| l.saturating_sub(trace.skipped()))
}

/// The step the violation follows: the last one (if there is a violation).
fn failing_step(trace: &Trace) -> Option<usize> {
    trace.violation.as_ref()?;
    trace.steps.len().checked_sub(1)
}

// ------------------------------------------------------------------ page parts

fn header(out: &mut String, trace: &Trace) {
    out.push_str("<header>\n");
    let _ = writeln!(
        out,
        "<h1>cmc counterexample: <span class=\"model\">{}</span></h1>",
        esc(&trace.model)
    );
    match &trace.violation {
        Some(v) => {
            let _ = write!(
                out,
                "<div class=\"violation\" id=\"violation\">\
                 <span class=\"kind\">{}</span> \
                 <span class=\"property\">{}</span> violated\
                 <div class=\"message\">{}</div>",
                esc(v.kind.as_str()),
                esc(&v.property),
                esc(&v.message)
            );
            if let Some(location) = &v.location {
                let _ = write!(out, "<div class=\"location\">at {}</div>", esc(location));
            }
            if !trace.also_violated.is_empty() {
                let _ = write!(
                    out,
                    "<div class=\"also\">also violated in this state: {}</div>",
                    esc(&trace.also_violated.join(", "))
                );
            }
            out.push_str("</div>\n");
        }
        None => out.push_str("<div class=\"no-violation\">No violation recorded.</div>\n"),
    }
    let steps = trace.len();
    let _ = writeln!(
        out,
        "<p class=\"facts\">{steps} step{} · trace format {} · {}-bit fingerprints · \
         initial state <code>{}</code></p>",
        if steps == 1 { "" } else { "s" },
        trace.version,
        trace.fingerprint_bits,
        esc(&trace.initial_fingerprint)
    );
    if trace.symmetric {
        out.push_str(
            "<p class=\"symmetric\" id=\"symmetric\">Checked with symmetry reduction: \
             states that differ only in the names of interchangeable processes counted once \
             (the fingerprints are those of each state's smallest image); the steps are the \
             concrete ones.</p>\n",
        );
    }
    let skipped = trace.skipped();
    if skipped > 0 {
        let _ = writeln!(
            out,
            "<p class=\"skipped\" id=\"skipped\">A long trace: steps 1 to {skipped} are \
             recorded as events only (in the trace file, which replay runs); the last {} are \
             drawn and described here.</p>",
            trace.steps.len()
        );
    }
    out.push_str("</header>\n");
}

fn legend(out: &mut String) {
    out.push_str(
        "<ul class=\"legend\">\
         <li><svg width=\"22\" height=\"16\"><rect class=\"mark mark-handler\" x=\"3\" y=\"2\" \
         width=\"16\" height=\"12\" rx=\"3\"/></svg>handler</li>\
         <li><svg width=\"22\" height=\"16\"><circle class=\"mark mark-timer\" cx=\"11\" cy=\"8\" \
         r=\"6.5\"/></svg>timer expired</li>\
         <li><svg width=\"22\" height=\"16\"><path class=\"mark mark-choice\" \
         d=\"M11 1 L18 8 L11 15 L4 8 Z\"/></svg>choices made</li>\
         <li><svg width=\"34\" height=\"16\"><line class=\"msg-line delivered\" x1=\"2\" y1=\"8\" \
         x2=\"30\" y2=\"8\"/></svg>message delivered</li>\
         <li><svg width=\"34\" height=\"16\"><line class=\"msg-line lost\" x1=\"2\" y1=\"8\" \
         x2=\"24\" y2=\"8\"/><path class=\"cross\" d=\"M21 4 L29 12 M29 4 L21 12\"/></svg>\
         message lost</li>\
         <li><svg width=\"34\" height=\"16\"><line class=\"msg-line duplicate\" x1=\"2\" y1=\"8\" \
         x2=\"30\" y2=\"8\"/></svg>duplicated copy</li>\
         <li><svg width=\"34\" height=\"16\"><line class=\"msg-line in-flight\" x1=\"2\" y1=\"8\" \
         x2=\"30\" y2=\"8\"/></svg>never delivered</li>\
         <li><svg width=\"34\" height=\"16\"><line class=\"msg-line failed\" x1=\"2\" y1=\"8\" \
         x2=\"20\" y2=\"8\"/><path class=\"cross\" d=\"M17 4 L25 12 M25 4 L17 12\"/></svg>\
         send failed / dropped</li>\
         </ul>\n",
    );
}

fn lane_x(k: usize) -> i64 {
    LEFT + 40 + k as i64 * COL
}

fn row_y(step: usize) -> i64 {
    TOP + ROW * (step as i64 + 1)
}

fn chart(
    out: &mut String,
    trace: &Trace,
    lanes: &[Lane],
    arrows: &[Arrow],
    failing: Option<usize>,
) {
    let lane_of = |a: Actor| lanes.iter().position(|l| l.actor == a).unwrap_or(0);
    let n = trace.steps.len();
    let width = lane_x(lanes.len().saturating_sub(1)) + COL + MARGIN;
    let bottom = row_y(n - 1) + ROW;
    let height = bottom + 24;
    let _ = writeln!(
        out,
        "<svg class=\"msc\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" \
         height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" \
         aria-label=\"message sequence chart of {} steps\">",
        n
    );
    out.push_str(
        "<defs>\
         <marker id=\"head\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"8\" \
         markerHeight=\"8\" orient=\"auto-start-reverse\"><path d=\"M0 0 L10 5 L0 10 z\" \
         class=\"head\"/></marker>\
         <marker id=\"head-dup\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"8\" \
         markerHeight=\"8\" orient=\"auto-start-reverse\"><path d=\"M0 0 L10 5 L0 10 z\" \
         class=\"head-dup\"/></marker>\
         <marker id=\"head-open\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"9\" \
         markerHeight=\"9\" orient=\"auto-start-reverse\"><path d=\"M0 0 L10 5 L0 10\" \
         class=\"head-open\"/></marker>\
         </defs>\n",
    );

    // Row backgrounds (below everything, so that lines stay visible).
    out.push_str("<g class=\"rows\">\n");
    let _ = writeln!(
        out,
        "<text class=\"row-num initial\" x=\"8\" y=\"{}\">initial</text>\
         <line class=\"initial-line\" x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{}\" y2=\"{TOP}\"/>",
        TOP + 4,
        width - 8
    );
    for i in 0..n {
        let _ = writeln!(
            out,
            "<rect class=\"row-bg{}\" data-step=\"{}\" x=\"2\" y=\"{}\" width=\"{}\" \
             height=\"{ROW}\"/>",
            if failing == Some(i) { " failing" } else { "" },
            i + 1,
            row_y(i) - ROW / 2,
            width - 4
        );
    }
    // A lasso: a bracket in the right margin over the steps that repeat
    // forever, labelled just above it (between two rows, clear of the
    // violation's callout in the last row).
    if let Some(l) = loop_start(trace).filter(|&l| l < n) {
        let (y1, y2) = (row_y(l) - ROW / 2, row_y(n - 1) + ROW / 2);
        let x = width - 6;
        let _ = writeln!(
            out,
            "<g class=\"cycle\"><line x1=\"{x}\" y1=\"{y1}\" x2=\"{x}\" y2=\"{y2}\"/>\
             <line x1=\"{x}\" y1=\"{y1}\" x2=\"{}\" y2=\"{y1}\"/>\
             <line x1=\"{x}\" y1=\"{y2}\" x2=\"{}\" y2=\"{y2}\"/>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\">↻ steps {}–{n} repeat forever</text></g>",
            width - 12,
            width - 12,
            width - 12,
            y1 - 4,
            l + 1,
        );
    }
    out.push_str("</g>\n");

    // Lifelines.
    out.push_str("<g class=\"lifelines\">\n");
    for (k, lane) in lanes.iter().enumerate() {
        let x = lane_x(k);
        let env = if lane.actor == Actor::Environment {
            " env"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "<g class=\"lifeline{env}\"><line x1=\"{x}\" y1=\"{TOP}\" x2=\"{x}\" y2=\"{bottom}\"/>\
             <rect x=\"{}\" y=\"14\" width=\"{}\" height=\"34\" rx=\"6\"/>\
             <text x=\"{x}\" y=\"36\" text-anchor=\"middle\">{}</text></g>",
            x - 70,
            140,
            esc(&short(&lane.name, 18))
        );
    }
    out.push_str("</g>\n");

    // Message lines. Their messages are named in the rows of the steps
    // that send and receive them (and in each line's tooltip), not along
    // the lines: a label on a line that crosses rows covers the labels of
    // the steps it crosses.
    out.push_str("<g class=\"messages\">\n");
    for a in arrows {
        arrow(out, a, &lane_of, lanes, bottom);
    }
    out.push_str("</g>\n");

    // Steps: marks and labels.
    out.push_str("<g class=\"steps\">\n");
    for (i, step) in trace.steps.iter().enumerate() {
        let actor = step.process.map_or(Actor::Environment, Actor::Process);
        let x = lane_x(lane_of(actor));
        let y = row_y(i);
        let fail = failing == Some(i);
        let _ = write!(
            out,
            "<g class=\"step-row{}\" data-step=\"{}\" id=\"row-{}\"><title>{}</title>\
             <text class=\"row-num\" x=\"8\" y=\"{}\">{}{}</text>",
            if fail { " failing" } else { "" },
            i + 1,
            i + 1,
            esc(&describe(step)),
            y + 4,
            if fail { "✗ " } else { "" },
            trace.skipped() + i + 1
        );
        if fail {
            if let Some(v) = &trace.violation {
                let cx = lane_x(lanes.len() - 1) + COL + 24;
                let _ = write!(
                    out,
                    "<g class=\"callout\">\
                     <text class=\"callout-title\" x=\"{cx}\" y=\"{}\">✗ {} violated</text>\
                     <text class=\"callout-message\" x=\"{cx}\" y=\"{}\">{}</text>\
                     <text class=\"callout-message\" x=\"{cx}\" y=\"{}\">{}</text></g>",
                    y - 12,
                    esc(v.kind.as_str()),
                    y + 3,
                    esc(&short(&v.property, 40)),
                    y + 18,
                    esc(&short(&v.message, 40))
                );
            }
        }
        mark(out, step, x, y);
        let event = match (step.kind, &step.message) {
            (StepKind::Timer, _) => "timer expired".to_string(),
            (StepKind::Loss, Some(m)) => format!("loses {}", short(m, 24)),
            (StepKind::Duplication, Some(m)) => format!("duplicates {}", short(m, 24)),
            (_, Some(m)) => format!("receives {}", short(m, 24)),
            _ => String::new(),
        };
        let mut detail = String::new();
        let mut detail_x = x + 16;
        if !step.choices.is_empty() {
            // A diamond before the choice values.
            let _ = write!(
                out,
                "<path class=\"mark mark-choice\" d=\"M{} {} l6 6 l-6 6 l-6 -6 z\"/>",
                x + 22,
                y - 1
            );
            detail_x += 14;
            let _ = write!(detail, "choose {:?}", step.choices);
            if !event.is_empty() {
                detail.push_str(" · ");
            }
        }
        detail.push_str(&event);
        let _ = write!(
            out,
            "<text class=\"label handler\" x=\"{}\" y=\"{}\">{}</text>",
            x + 16,
            y - 4,
            esc(&short(&step.handler, 26))
        );
        if !detail.is_empty() {
            let _ = write!(
                out,
                "<text class=\"label detail\" x=\"{detail_x}\" y=\"{}\">{}</text>",
                y + 9,
                esc(&short(&detail, 30))
            );
        }
        if !step.sent.is_empty() {
            let _ = write!(
                out,
                "<text class=\"label detail sends\" x=\"{}\" y=\"{}\">{}</text>",
                x + 16,
                y + 22,
                esc(&sends_text(&step.sent))
            );
        }
        out.push_str("</g>\n");
    }
    out.push_str("</g>\n");

    out.push_str("</svg>\n");
}

/// What a step sent, in a row: the message (shortened) and its
/// receivers, with those whose send failed or was dropped marked.
fn sends_text(sent: &[cmc::Sent]) -> String {
    let mut groups: Vec<(&str, Vec<String>)> = Vec::new();
    for s in sent {
        let to = if s.fate == "sent" {
            format!("{}", s.to)
        } else {
            format!("{}✗", s.to)
        };
        match groups.iter_mut().find(|(m, _)| *m == s.message) {
            Some((_, tos)) => tos.push(to),
            None => groups.push((&s.message, vec![to])),
        }
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(m, tos)| format!("{} → {}", head(m), tos.join(",")))
        .collect();
    short(&format!("sends {}", parts.join("; ")), 30)
}

/// A message's name for a row: whole when short, else its first word (the
/// variant or type) and an ellipsis.
fn head(m: &str) -> String {
    let flat = short(m, 64);
    if flat.chars().count() <= 14 {
        return flat;
    }
    let word: String = flat
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
        .take(14)
        .collect();
    if word.is_empty() {
        return short(&flat, 14);
    }
    format!("{word}…")
}

/// The mark of a step on its actor's lifeline.
fn mark(out: &mut String, step: &Step, x: i64, y: i64) {
    let _ = match step.kind {
        StepKind::Timer => write!(
            out,
            "<g class=\"mark mark-timer\"><circle cx=\"{x}\" cy=\"{y}\" r=\"10\"/>\
             <path class=\"hands\" d=\"M{x} {} L{x} {y} L{} {y}\"/></g>",
            y - 6,
            x + 5
        ),
        StepKind::Loss => write!(
            out,
            "<g class=\"mark mark-loss\"><circle cx=\"{x}\" cy=\"{y}\" r=\"10\"/>\
             <path class=\"x\" d=\"M{} {} l10 10 m0 -10 l-10 10\"/></g>",
            x - 5,
            y - 5
        ),
        StepKind::Duplication => write!(
            out,
            "<g class=\"mark mark-dup\"><rect x=\"{}\" y=\"{}\" width=\"13\" height=\"13\" rx=\"2\"/>\
             <rect x=\"{}\" y=\"{}\" width=\"13\" height=\"13\" rx=\"2\"/></g>",
            x - 10,
            y - 10,
            x - 3,
            y - 3
        ),
        _ => write!(
            out,
            "<rect class=\"mark mark-handler\" x=\"{}\" y=\"{}\" width=\"20\" height=\"22\" rx=\"4\"/>",
            x - 10,
            y - 11
        ),
    };
}

/// Draws one message arrow into `out`, and its label into `labels`.
fn arrow(
    out: &mut String,
    a: &Arrow,
    lane_of: &dyn Fn(Actor) -> usize,
    lanes: &[Lane],
    bottom: i64,
) {
    let x1 = lane_x(lane_of(Actor::Process(a.from)));
    let x2 = lane_x(lane_of(Actor::Process(a.to)));
    let env_x = lanes
        .iter()
        .position(|l| l.actor == Actor::Environment)
        .map(lane_x);
    // Where it starts: below the sending step's mark (a duplicate starts at
    // the environment's mark), or half a row above its end if no send
    // matched.
    let (sx, sy) = match a.origin {
        Some((step, true)) => (env_x.unwrap_or(x1), row_y(step) + 10),
        Some((step, false)) => (x1, row_y(step) + 11 + 5 * a.slot as i64),
        None => (x1, row_y(a.end.unwrap_or(0)) - ROW / 2),
    };
    let dup = matches!(a.origin, Some((_, true)));
    let (class, head) = match a.fate {
        Fate::Delivered if dup => ("delivered duplicate", "head-dup"),
        Fate::Delivered => ("delivered", "head"),
        Fate::Lost => ("lost", ""),
        Fate::InFlight => ("in-flight", "head-open"),
        Fate::Failed => ("failed", ""),
    };
    let unmatched = if a.origin.is_none() { " unmatched" } else { "" };
    let fate_text = match a.fate {
        Fate::Delivered => "delivered",
        Fate::Lost => "lost",
        Fate::InFlight => "never delivered",
        Fate::Failed => a.note.as_str(),
    };
    let title = format!(
        "<title>{} (process {} → process {}): {}</title>",
        esc(&a.message),
        a.from,
        a.to,
        esc(fate_text)
    );
    let _ = write!(
        out,
        "<g class=\"msg {class}{unmatched}\" data-from=\"{}\" data-to=\"{}\"{}{}>{title}",
        a.origin.map_or(0, |(s, _)| s + 1),
        a.end.map_or(0, |s| s + 1),
        if dup { " data-duplicate=\"1\"" } else { "" },
        if unmatched.is_empty() {
            ""
        } else {
            " data-unmatched=\"1\""
        },
    );
    let end_y = a.end.map_or(bottom, row_y);
    let same_lane = x2 == sx;
    // The end point.
    let (ex, ey) = match a.fate {
        Fate::Delivered if same_lane => (sx - 12, end_y - 4),
        Fate::Delivered if x2 > sx => (x2 - 11, end_y - 6),
        Fate::Delivered => (x2 + 11, end_y - 6),
        Fate::Lost if same_lane => (sx - 40, end_y),
        Fate::Lost => (sx + (x2 - sx) * 3 / 5, end_y),
        // A message never delivered: a dashed line within its row that
        // ends, open, at its receiver's lifeline (a user read the short
        // stub of earlier versions as pointing nowhere), not a line across
        // every row below.
        Fate::InFlight if same_lane => (sx - 30, sy + 18),
        Fate::InFlight if x2 > sx => (x2 - 6, sy + 18),
        Fate::InFlight => (x2 + 6, sy + 18),
        Fate::Failed if x2 >= sx => (sx + 36, sy + 12),
        Fate::Failed => (sx - 36, sy + 12),
    };
    let head_attr = if head.is_empty() {
        String::new()
    } else {
        format!(" marker-end=\"url(#{head})\"")
    };
    let self_loop = same_lane && a.fate == Fate::Delivered;
    if self_loop {
        // A message to itself: a loop out to the left (labels are right).
        let _ = write!(
            out,
            "<path class=\"msg-line\" d=\"M{} {sy} C{} {sy} {} {ey} {ex} {ey}\"{head_attr}/>",
            sx - 8,
            sx - 70,
            sx - 70
        );
    } else {
        let _ = write!(
            out,
            "<line class=\"msg-line\" x1=\"{sx}\" y1=\"{sy}\" x2=\"{ex}\" y2=\"{ey}\"{head_attr}/>"
        );
    }
    if matches!(a.fate, Fate::Lost | Fate::Failed) {
        let _ = write!(
            out,
            "<path class=\"cross\" d=\"M{} {} l10 10 m0 -10 l-10 10\"/>",
            ex - 5,
            ey - 5
        );
    }
    out.push_str("</g>\n");
}

/// The numbered step list, with the states.
fn step_list(out: &mut String, trace: &Trace, failing: Option<usize>) {
    out.push_str("<section class=\"list\">\n<h2>Steps</h2>\n");
    let has_states = trace
        .steps
        .iter()
        .any(|s| s.before.is_some() || s.after.is_some());
    if has_states {
        out.push_str(
            "<p class=\"buttons\"><button type=\"button\" id=\"expand\">expand all states</button> \
             <button type=\"button\" id=\"collapse\">collapse all</button></p>\n",
        );
    }
    let _ = writeln!(
        out,
        "<p class=\"initial\">Initial state <code>{}</code></p>",
        esc(&trace.initial_fingerprint)
    );
    if trace.steps.is_empty() {
        out.push_str("<p class=\"empty\">No steps: the initial state is the failing state.</p>\n");
    } else {
        out.push_str("<ol class=\"steps\">\n");
    }
    for (i, step) in trace.steps.iter().enumerate() {
        if loop_start(trace) == Some(i) {
            out.push_str(
                "<li class=\"cycle-start\">↻ The cycle: from here to the last step, the \
                 steps repeat forever (the last step returns to the state before this one).</li>\n",
            );
        }
        let fail = failing == Some(i);
        let kind = match step.kind {
            StepKind::Handler => "handler",
            StepKind::Timer => "timer",
            StepKind::Loss => "loss",
            StepKind::Duplication => "duplication",
            _ => "other",
        };
        let _ = write!(
            out,
            // The number explicitly: a lasso's cycle banner is an item of
            // the list too, which would shift every number after it.
            "<li id=\"step-{}\" class=\"step {kind}{}\" value=\"{}\"><div class=\"what\">\
             <span class=\"actor\">{}</span> <code class=\"handler\">{}</code> \
             <span class=\"badge {kind}\">{kind}</span>",
            i + 1,
            if fail { " failing" } else { "" },
            trace.skipped() + i + 1,
            esc(&step.actor),
            esc(&step.handler)
        );
        if !step.choices.is_empty() {
            let _ = write!(
                out,
                " <span class=\"choices\">choices {}</span>",
                esc(&format!("{:?}", step.choices))
            );
        }
        if step.seed != 0 {
            let _ = write!(
                out,
                " <span class=\"choices\">random seed {}</span>",
                step.seed
            );
        }
        out.push_str("</div>\n");
        if let (Some(m), Some(from), Some(to)) = (&step.message, step.from, step.to) {
            let verb = match step.kind {
                StepKind::Loss => "loses",
                StepKind::Duplication => "duplicates",
                _ => "receives",
            };
            let _ = writeln!(
                out,
                "<div class=\"event\">{verb} <code>{}</code> (process {from} → process {to})</div>",
                esc(m)
            );
        }
        if !step.sent.is_empty() {
            out.push_str("<ul class=\"sent\">");
            for s in &step.sent {
                let bad = s.fate != "sent";
                let _ = write!(
                    out,
                    "<li{}>sends <code>{}</code> to process {}{}</li>",
                    if bad { " class=\"bad\"" } else { "" },
                    esc(&s.message),
                    s.to,
                    if bad {
                        format!(" <span class=\"fate\">({})</span>", esc(&s.fate))
                    } else {
                        String::new()
                    }
                );
            }
            out.push_str("</ul>\n");
        }
        if !step.timers.is_empty() {
            out.push_str("<ul class=\"sent timers\">");
            for t in &step.timers {
                let _ = write!(out, "<li>{}</li>", esc(t));
            }
            out.push_str("</ul>\n");
        }
        if !step.fingerprint.is_empty() {
            let _ = writeln!(
                out,
                "<div class=\"fp\">state after: <code>{}</code></div>",
                esc(&step.fingerprint)
            );
        }
        if step.before.is_some() || step.after.is_some() {
            let _ = write!(
                out,
                "<details class=\"state\"{}><summary>state of {}</summary><div class=\"panes\">",
                if fail { " open" } else { "" },
                esc(&step.actor)
            );
            state_pane(out, "before", step.before.as_deref(), None);
            state_pane(out, "after", step.after.as_deref(), step.before.as_deref());
            out.push_str("</div></details>\n");
        }
        if fail {
            if let Some(v) = &trace.violation {
                let _ = writeln!(
                    out,
                    "<div class=\"failure\">✗ <strong>{}</strong>: {}</div>",
                    esc(&v.headline()),
                    esc(&v.message)
                );
            }
        }
        out.push_str("</li>\n");
    }
    if !trace.steps.is_empty() {
        out.push_str("</ol>\n");
    }
    out.push_str("</section>\n");
}

/// One state in a `<pre>`; with `compare`, the lines that are not in it
/// (by a longest-common-subsequence line diff) are marked.
fn state_pane(out: &mut String, title: &str, state: Option<&str>, compare: Option<&str>) {
    let _ = write!(out, "<div class=\"pane\"><h4>{title}</h4>");
    match state {
        None => out.push_str("<p class=\"none\">(not available)</p>"),
        Some(text) => {
            out.push_str("<pre>");
            let lines: Vec<&str> = text.lines().collect();
            let changed = match compare {
                Some(old) => changed_lines(&old.lines().collect::<Vec<_>>(), &lines),
                None => vec![false; lines.len()],
            };
            for (k, line) in lines.iter().enumerate() {
                if k > 0 {
                    out.push('\n');
                }
                if changed[k] {
                    let _ = write!(out, "<span class=\"changed\">{}</span>", esc(line));
                } else {
                    out.push_str(&esc(line));
                }
            }
            out.push_str("</pre>");
        }
    }
    out.push_str("</div>");
}

/// For each line of `new`, whether it is not part of a longest common
/// subsequence with `old` (positional comparison for very large states).
fn changed_lines(old: &[&str], new: &[&str]) -> Vec<bool> {
    let (n, m) = (old.len(), new.len());
    if n.saturating_mul(m) > 4_000_000 {
        return (0..m).map(|k| old.get(k) != new.get(k)).collect();
    }
    // lcs[i][j]: the LCS length of old[i..] and new[j..].
    let mut lcs = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[at(i, j)] = if old[i] == new[j] {
                lcs[at(i + 1, j + 1)] + 1
            } else {
                lcs[at(i + 1, j)].max(lcs[at(i, j + 1)])
            };
        }
    }
    let mut changed = vec![true; m];
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        if old[i] == new[j] {
            changed[j] = false;
            i += 1;
            j += 1;
        } else if lcs[at(i + 1, j)] >= lcs[at(i, j + 1)] {
            i += 1;
        } else {
            j += 1;
        }
    }
    changed
}

/// A one-line description of a step (for tooltips).
fn describe(step: &Step) -> String {
    let mut s = format!("{} {}", step.actor, step.handler);
    if !step.choices.is_empty() {
        let _ = write!(s, " choices={:?}", step.choices);
    }
    if step.seed != 0 {
        let _ = write!(s, " seed={}", step.seed);
    }
    if let (Some(m), Some(from), Some(to)) = (&step.message, step.from, step.to) {
        let verb = match step.kind {
            StepKind::Loss => "loses",
            StepKind::Duplication => "duplicates",
            _ => "receives",
        };
        let _ = write!(s, " {verb} {m} ({from} → {to})");
    }
    if step.kind == StepKind::Timer {
        s.push_str(" (timer expired)");
    }
    s
}

// ------------------------------------------------------------------ text

/// Escapes text for HTML content and attribute values.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Whitespace collapsed, at most `max` characters (an ellipsis marks a cut).
fn short(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

// ------------------------------------------------------------------ assets

const CSS: &str = r#"
:root { --ink: #1f2933; --muted: #616e7c; --line: #cbd2d9; --blue: #2563eb; --red: #c81e1e;
  --amber: #b7791f; --purple: #7c3aed; --bg-fail: #fde8e8; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: var(--ink); background: #fff; }
header { padding: 14px 24px 6px; border-bottom: 1px solid var(--line); background: #f8fafc; }
h1 { font-size: 20px; margin: 0 0 8px; }
h1 .model { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; }
h2 { font-size: 16px; margin: 18px 0 8px; }
main { padding: 0 24px 40px; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
.violation { border: 2px solid var(--red); background: var(--bg-fail); border-radius: 6px;
  padding: 8px 12px; font-size: 15px; }
.violation .kind { background: var(--red); color: #fff; border-radius: 4px; padding: 1px 7px;
  font-weight: 600; }
.violation .property { font-weight: 700; font-family: ui-monospace, monospace; }
.violation .message { margin-top: 4px; font-family: ui-monospace, monospace; white-space: pre-wrap; }
.violation .location { color: var(--muted); font-size: 12px; }
.violation .also { margin-top: 4px; color: var(--muted); }
.no-violation { color: var(--muted); }
.facts { color: var(--muted); font-size: 12px; margin: 6px 0; }
.empty { padding: 12px; border: 1px dashed var(--red); background: var(--bg-fail); border-radius: 6px; }
.legend { list-style: none; padding: 0; margin: 0 0 6px; display: flex; flex-wrap: wrap; gap: 4px 16px;
  font-size: 12px; color: var(--muted); }
.legend li { display: flex; align-items: center; gap: 4px; }
.scroll { overflow-x: auto; border: 1px solid var(--line); border-radius: 6px; }
svg.msc { display: block; font-size: 12px; }
svg text { fill: var(--ink); }
.lifeline line { stroke: #9aa5b1; stroke-width: 1.5; stroke-dasharray: 5 4; }
.lifeline rect { fill: #e4ebf5; stroke: #52606d; }
.lifeline text { font-weight: 600; }
.lifeline.env line { stroke: #bcccdc; stroke-dasharray: 2 5; }
.lifeline.env rect { fill: #f0f4f8; stroke: #9aa5b1; stroke-dasharray: 4 3; }
.initial-line { stroke: var(--line); stroke-width: 1; }
.row-num { fill: var(--muted); font-size: 12px; }
.row-num.initial { font-size: 11px; }
.step-row { cursor: pointer; }
.row-bg { fill: transparent; cursor: pointer; }
.row-bg:nth-of-type(even) { fill: #f8fafc; }
.row-bg:hover { fill: #eef4ff; }
.row-bg.failing { fill: var(--bg-fail); stroke: var(--red); stroke-width: 1.5; }
.cycle line { stroke: var(--red); stroke-width: 2; stroke-dasharray: 6 3; }
.cycle text { fill: var(--red); font-size: 12px; font-weight: 600; }
li.cycle-start { list-style: none; color: var(--red); font-weight: 600; margin: 0.6em 0; }
.step-row.failing .row-num { fill: var(--red); font-weight: 700; }
.row-bg.flash { fill: #fff3c4; }
.label { paint-order: stroke; stroke: #fff; stroke-width: 4px; stroke-linejoin: round; }
.step-row.failing .label { stroke: var(--bg-fail); }
.label.handler { font-weight: 600; font-family: ui-monospace, monospace; }
.label.detail { fill: var(--muted); font-size: 11px; }
.mark-handler { fill: #dbeafe; stroke: var(--blue); stroke-width: 1.5; }
.step-row.failing .mark-handler, .step-row.failing .mark circle { fill: #fecaca; stroke: var(--red); }
.mark-timer circle, circle.mark-timer { fill: #fef3c7; stroke: var(--amber); stroke-width: 1.5; }
.mark-timer .hands { fill: none; stroke: var(--amber); stroke-width: 1.5; }
.mark-loss circle { fill: #fff; stroke: var(--red); stroke-width: 1.5; }
.mark-loss .x { stroke: var(--red); stroke-width: 2; }
.mark-dup rect { fill: #ede9fe; stroke: var(--purple); stroke-width: 1.5; }
.mark-choice { fill: #fde68a; stroke: #92400e; stroke-width: 1.2; }
.callout-title { fill: var(--red) !important; font-weight: 700; font-size: 13px; }
.callout-message { fill: var(--red) !important; font-family: ui-monospace, monospace; font-size: 11.5px; }
.msg-line { fill: none; stroke-width: 1.6; }
.msg.delivered .msg-line, .msg-line.delivered { stroke: var(--blue); }
.msg.duplicate .msg-line, .msg-line.duplicate { stroke: var(--purple); stroke-dasharray: 6 3; }
.msg.lost .msg-line, .msg-line.lost { stroke: var(--red); stroke-dasharray: 2 2; }
.msg.in-flight .msg-line, .msg-line.in-flight { stroke: #9aa5b1; stroke-dasharray: 6 4; }
.msg.failed .msg-line, .msg-line.failed { stroke: var(--red); }
.msg.unmatched .msg-line { stroke-dasharray: 1 3; }
.cross { stroke: var(--red); stroke-width: 2.2; fill: none; }
.head { fill: var(--blue); }
.head-dup { fill: var(--purple); }
.head-open { fill: none; stroke: #9aa5b1; stroke-width: 1.5; }
.msg-label { font-family: ui-monospace, monospace; font-size: 11px; paint-order: stroke;
  stroke: #fff; stroke-width: 4px; stroke-linejoin: round; }
.msg-label.lost, .msg-label.failed { fill: var(--red); }
.msg-label.in-flight { fill: var(--muted); }
.msg-label.duplicate { fill: var(--purple); }
.msg:hover .msg-line { stroke-width: 3; }
ol.steps { padding-left: 36px; }
ol.steps > li { margin: 0 0 8px; padding: 6px 10px; border: 1px solid var(--line); border-radius: 6px; }
ol.steps > li.failing { border: 2px solid var(--red); background: var(--bg-fail); }
ol.steps > li.flash { outline: 3px solid #f6c343; }
.actor { color: var(--muted); }
.handler { font-weight: 700; }
.badge { font-size: 11px; border-radius: 3px; padding: 0 5px; background: #e4e7eb; }
.badge.timer { background: #fef3c7; } .badge.loss { background: #fde2e2; }
.badge.duplication { background: #ede9fe; }
.choices { font-size: 12px; background: #fde68a; border-radius: 3px; padding: 0 5px; }
.event, .fp, ul.sent { font-size: 13px; }
.fp { color: var(--muted); font-size: 12px; }
ul.sent { margin: 2px 0; padding-left: 20px; }
ul.sent li.bad { color: var(--red); }
.failure { color: var(--red); margin-top: 4px; }
details.state summary { cursor: pointer; color: var(--blue); font-size: 13px; }
.panes { display: flex; gap: 12px; flex-wrap: wrap; }
.pane { flex: 1 1 320px; min-width: 0; }
.pane h4 { margin: 4px 0; font-size: 12px; color: var(--muted); text-transform: uppercase; }
.pane pre { margin: 0; padding: 8px; background: #f5f7fa; border: 1px solid var(--line);
  border-radius: 4px; overflow-x: auto; max-height: 420px; }
.pane .changed { background: #fff3c4; }
.none { color: var(--muted); font-style: italic; margin: 0; }
"#;

/// Runs first: counts script errors from the start.
const HEAD_JS: &str = r#"
window.cmcErrors = 0;
window.onerror = function () {
  window.cmcErrors += 1;
  if (document.body) { document.body.dataset.errors = String(window.cmcErrors); }
  return false;
};
"#;

/// Runs last: wires the interactions and records that the page rendered.
const BODY_JS: &str = r#"
(function () {
  var body = document.body;
  body.dataset.errors = String(window.cmcErrors);
  var rows = document.querySelectorAll('svg.msc .step-row');
  function flash(el) {
    el.classList.add('flash');
    setTimeout(function () { el.classList.remove('flash'); }, 1200);
  }
  function bg(n) { return document.querySelector('svg.msc rect.row-bg[data-step="' + n + '"]'); }
  function showStep(n) {
    var item = document.getElementById('step-' + n);
    if (!item) { return; }
    Array.prototype.forEach.call(item.querySelectorAll('details'), function (d) { d.open = true; });
    item.scrollIntoView({ block: 'center', behavior: 'smooth' });
    flash(item);
  }
  Array.prototype.forEach.call(document.querySelectorAll('svg.msc [data-step]'), function (el) {
    el.addEventListener('click', function () { showStep(el.getAttribute('data-step')); });
  });
  Array.prototype.forEach.call(document.querySelectorAll('ol.steps > li'), function (item) {
    item.addEventListener('dblclick', function () {
      var row = bg(item.id.replace('step-', ''));
      if (row) { row.scrollIntoView({ block: 'center', behavior: 'smooth' }); flash(row); }
    });
  });
  function setAll(open) {
    Array.prototype.forEach.call(document.querySelectorAll('details.state'), function (d) { d.open = open; });
  }
  var expand = document.getElementById('expand');
  var collapse = document.getElementById('collapse');
  if (expand) { expand.addEventListener('click', function () { setAll(true); }); }
  if (collapse) { collapse.addEventListener('click', function () { setAll(false); }); }
  body.dataset.renderedSteps = String(rows.length);
  body.dataset.arrows = String(document.querySelectorAll('svg.msc .msg.delivered').length);
  // Layout self-check (read by the browser test): text of the chart that
  // overlaps other text, and text that sticks out of the chart.
  var svg = document.querySelector('svg.msc');
  var overlaps = 0, clipped = 0;
  if (svg) {
    var frame = svg.getBoundingClientRect();
    var texts = Array.prototype.filter.call(svg.querySelectorAll('text'), function (t) {
      var b = t.getBoundingClientRect();
      return b.width > 0 && b.height > 0;
    });
    var boxes = texts.map(function (t) { return t.getBoundingClientRect(); });
    var first = '';
    boxes.forEach(function (b, i) {
      if (b.left < frame.left - 0.5 || b.right > frame.right + 0.5 ||
          b.top < frame.top - 0.5 || b.bottom > frame.bottom + 0.5) {
        clipped += 1;
        if (!first) { first = texts[i].textContent; }
      }
      for (var j = i + 1; j < boxes.length; j++) {
        var c = boxes[j];
        var w = Math.min(b.right, c.right) - Math.max(b.left, c.left);
        var h = Math.min(b.bottom, c.bottom) - Math.max(b.top, c.top);
        if (w > 1 && h > 1) { overlaps += 1; }
      }
    });
  }
  body.dataset.labelOverlaps = String(overlaps);
  body.dataset.labelClipped = String(clipped);
  if (first) { body.dataset.firstClipped = first; }
})();
"#;
