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
    if let Some(inv) = run.inventory.as_ref() {
        evidence.extend(slots(inv, setting));
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

/// What the server's inventory, taken when the run started, says of its
/// connection slots: the limit's value, the slots only superusers may
/// take, and the sessions already open before the sweep's first user
/// (perflab's own among them).
fn slots(inv: &std::collections::BTreeMap<String, String>, setting: &str) -> Vec<String> {
    use crate::sut::settings::{SESSIONS_OPEN, SESSIONS_OPEN_PERFLAB};
    let number = |key: &str| inv.get(&format!("db.{key}"))?.parse::<u64>().ok();
    let mut out = Vec::new();
    let Some(value) = inv.get(&format!("db.{setting}")) else {
        return out;
    };
    out.push(format!(
        "{setting} = {value}, as the server reported it when the run started; every connection counts against it, perflab's own (its statistics, its checks) among them"
    ));
    if setting == "max_connections" {
        let reserved = ["superuser_reserved_connections", "reserved_connections"]
            .into_iter()
            .filter_map(|k| Some((k, number(k).filter(|n| *n > 0)?)))
            .collect::<Vec<_>>();
        if !reserved.is_empty() {
            let total: u64 = reserved.iter().map(|(_, n)| n).sum();
            let named: Vec<String> = reserved.iter().map(|(k, n)| format!("{k} = {n}")).collect();
            let left = number(setting).map_or(String::new(), |max| {
                format!(": other roles may open {}", max.saturating_sub(total))
            });
            out.push(format!(
                "{total} of them are kept for privileged roles ({}){left}",
                named.join(", ")
            ));
        }
    }
    if number(SESSIONS_OPEN) == Some(0) {
        out.push(
            "when the run started the server held no client session besides perflab's look at its settings".into(),
        );
    } else if let Some(open) = number(SESSIONS_OPEN) {
        let own = number(SESSIONS_OPEN_PERFLAB).map_or(String::new(), |n| {
            format!(", {n} of them perflab's own (its statistics)")
        });
        let sessions = if open == 1 { "session" } else { "sessions" };
        out.push(format!(
            "when the run started the server already held {open} client {sessions} besides perflab's look at its settings{own}: they took slots before the sweep's first user"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::slots;

    #[test]
    fn the_slots_name_the_limit_the_reserved_and_the_sessions_already_open() {
        let inv = [
            ("db.max_connections", "10"),
            ("db.superuser_reserved_connections", "3"),
            ("db.reserved_connections", "0"),
            ("db.sessions_open_at_start", "4"),
            ("db.sessions_open_at_start_perflab", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let said = slots(&inv, "max_connections");
        assert_eq!(said.len(), 3, "{said:?}");
        assert!(said[0].starts_with("max_connections = 10, as the server reported it"));
        assert_eq!(
            said[1],
            "3 of them are kept for privileged roles (superuser_reserved_connections = 3): other roles may open 7"
        );
        assert_eq!(
            said[2],
            "when the run started the server already held 4 client sessions besides perflab's look at its settings, 1 of them perflab's own (its statistics): they took slots before the sweep's first user"
        );
        // MariaDB's limit on one user, with no count known: its value alone.
        let inv = [("db.max_user_connections", "5")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(slots(&inv, "max_user_connections").len(), 1);
        assert!(slots(&inv, "max_connections").is_empty());
    }
}
