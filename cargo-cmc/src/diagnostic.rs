//! Errors and warnings for the user: a line on standard error, or with
//! `--message-format json` a JSON object on standard output, so that a
//! program reading the JSON sees them in order with the results.

/// Prints an error: a line on standard error, or with `--message-format
/// json` a `{"type": "error", "message": …}` object on standard output.
pub(crate) fn report_error(json: bool, message: &str) {
    report(json, "error", "error", message);
}

/// Prints a warning or a notice the same way (`"type": "warning"`).
pub(crate) fn report_warning(json: bool, message: &str) {
    report(json, "warning", "cmc", message);
}

/// Prints `message` as a JSON object of type `kind`, or as a line on
/// standard error that starts with `prefix`.
fn report(json: bool, kind: &str, prefix: &str, message: &str) {
    if json {
        println!("{}", serde_json::json!({"type": kind, "message": message}));
    } else {
        eprintln!("{prefix}: {message}");
    }
}
