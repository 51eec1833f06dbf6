//! A sweep the server's own admission limit ended: the server answered
//! and refused a session because of a setting (PostgreSQL's or MariaDB's
//! `max_connections`). That limit, not a resource, is what stopped the
//! load from growing, so it is the verdict, with the setting's value as
//! the server reported it when the run started, the load it refused at,
//! the highest load every session of which opened, and what the steps
//! below it showed.

use super::bottleneck::{Bottleneck, BottleneckKind};
use super::Verdict;
use crate::store::StoredRun;

/// Makes the verdict of a run a refusal ended the server's admission
/// limit; leaves any other verdict as it is.
pub(super) fn apply(run: &StoredRun, verdict: &mut Verdict) {
    let Some(reason) = run.status_reason.as_deref() else {
        return;
    };
    let Some((setting, at)) = crate::engine::refusal::read(reason) else {
        return;
    };
    verdict.bottleneck = Some(limit(run, verdict, reason, setting, at));
    verdict.what_if = None;
    verdict.no_what_if = Some(format!(
        "past {setting} the server takes no more sessions: what it would do with them was not measured"
    ));
}

fn limit(run: &StoredRun, verdict: &Verdict, reason: &str, setting: &str, at: &str) -> Bottleneck {
    let mut evidence = vec![reason.to_string()];
    let value = run
        .inventory
        .as_ref()
        .and_then(|inv| inv.get(&format!("db.{setting}")));
    if let Some(value) = value {
        evidence.push(format!(
            "{setting} = {value}, as the server reported it when the run started; every connection counts against it, perflab's own (its statistics, its checks) among them"
        ));
    }
    if let Some(top) = verdict.points.last() {
        evidence.push(format!(
            "the highest load every session of which opened: {}, {} there",
            super::capacity::load_text(top),
            crate::units::Rate(top.throughput, verdict.rate_unit)
        ));
    }
    if let Some(below) = verdict.bottleneck.as_ref() {
        evidence.push(format!("the steps below it showed: {}", below.name));
    }
    Bottleneck {
        kind: BottleneckKind::AdmissionLimit,
        name: format!("admission limit ({setting})"),
        evidence,
        ruled_out: Vec::new(),
        unreliable: false,
        next: Some(format!(
            "raise {setting} (a restart applies it) or put a connection pool in front of the server, then sweep past {at} again"
        )),
        resource: None,
    }
}
