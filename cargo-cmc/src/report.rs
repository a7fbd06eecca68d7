//! TEMPORARY: replaced by the HTML report module being written.
pub(crate) fn render(trace: &cmc::Trace) -> String {
    format!("<html><body><pre>{}</pre></body></html>", trace)
}
