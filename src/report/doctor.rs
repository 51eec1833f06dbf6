//! The doctor's findings as text: a count by severity, then each finding,
//! worst first, with its evidence, why it matters and the fix, then what
//! this host could not be asked.

use crate::doctor::{Finding, Report, Severity};
use std::fmt::Write;

/// The findings in the order given (the doctor sorts them worst first),
/// then what could not be looked at.
pub(crate) fn render_doctor(report: &Report) -> String {
    let mut out = String::new();
    let count = |s: Severity| report.findings.iter().filter(|f| f.severity == s).count();
    let _ = writeln!(
        out,
        "perflab doctor: {} critical, {} warning, {} info",
        count(Severity::Critical),
        count(Severity::Warning),
        count(Severity::Info)
    );
    for f in &report.findings {
        finding(&mut out, f);
    }
    if !report.unavailable.is_empty() {
        let _ = writeln!(out, "\nnot available on this host:");
        for u in &report.unavailable {
            let _ = writeln!(out, "  - {u}");
        }
    }
    out
}

/// One finding: its headline, evidence, why and fix.
fn finding(out: &mut String, f: &Finding) {
    let _ = writeln!(
        out,
        "\n{:<8} {:<10} {}",
        f.severity.as_str().to_uppercase(),
        f.area,
        f.title
    );
    for e in &f.evidence {
        let _ = writeln!(out, "  evidence  {e}");
    }
    let _ = writeln!(out, "  why       {}", f.why);
    let _ = writeln!(out, "  fix       {}", f.fix);
}
