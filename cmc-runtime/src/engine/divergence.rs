//! Where a replay diverges: the first difference between the state a
//! trace recorded and the state its replay reached.

use crate::engine::trace::Step;

/// Where two renderings of a process (its `Debug`, pretty or not) first
/// differ: the enclosing fields and the two lines, as "in `a.b`: `x`
/// against `y`".
pub(crate) fn first_difference(a: &str, b: &str) -> Option<String> {
    let mut path: Vec<String> = Vec::new();
    for (x, y) in a.lines().zip(b.lines()) {
        let (tx, ty) = (x.trim(), y.trim());
        if tx != ty {
            let field = tx.split_once(": ").map(|(k, _)| k.to_string());
            let mut at: Vec<String> = path.clone();
            at.extend(field);
            let place = if at.is_empty() {
                String::new()
            } else {
                format!("in `{}`: ", at.join("."))
            };
            let (tx, ty) = (tx.trim_end_matches(','), ty.trim_end_matches(','));
            return Some(format!("{place}`{tx}` against `{ty}`"));
        }
        if tx.starts_with(['}', ']', ')']) {
            path.pop();
        }
        if tx.ends_with(['{', '[', '(']) {
            let key = tx.split_once(": ").map_or_else(
                || tx.trim_end_matches(['{', '[', '(', ' ']).to_string(),
                |(k, _)| k.to_string(),
            );
            path.push(key);
        }
    }
    (a.lines().count() != b.lines().count()).then(|| "in its length".to_string())
}

/// Where a replayed step's result differs from the recorded one, as far as
/// the trace's `Debug` renderings tell: the acting process's state (which
/// fields), else the messages it sent (when known).
pub(crate) fn divergence_detail(
    step: &Step,
    after: Option<&str>,
    sent: Option<&[(usize, String)]>,
) -> Option<String> {
    let who = match step.process {
        Some(p) if step.actor != format!("process {p}") => format!("process {p} ({})", step.actor),
        _ => step.actor.clone(),
    };
    if let (Some(was), Some(now)) = (step.after.as_deref(), after) {
        if let Some(d) = first_difference(now, was) {
            return Some(format!(
                "the state of {who} differs {d} (now against recorded)"
            ));
        }
    }
    if let Some(sent) = sent {
        let recorded: Vec<(usize, String)> = step
            .sent
            .iter()
            .map(|s| (s.to, s.message.clone()))
            .collect();
        if recorded != sent {
            let show = |v: &[(usize, String)]| {
                let items: Vec<String> = v.iter().map(|(to, m)| format!("{m} to {to}")).collect();
                if items.is_empty() {
                    "nothing".to_string()
                } else {
                    items.join(", ")
                }
            };
            return Some(format!(
                "{who} sent {} now; the trace recorded {}",
                show(sent),
                show(&recorded)
            ));
        }
    }
    if step.after.is_some() && after.is_some() {
        Some(format!(
            "the `Debug` of {who} and the messages it sent are as recorded: the difference \
             is in what `Debug` does not show, or in its timers or the shared variables"
        ))
    } else {
        None
    }
}
