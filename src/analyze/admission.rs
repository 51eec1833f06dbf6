//! A sweep the server's own admission limit ended: the server answered
//! and refused a session because of a setting (PostgreSQL's or MariaDB's
//! `max_connections`), or turned requests away with the HTTP replies that
//! say so (429, 503: nginx's `limit_req` and `limit_conn`, a proxy's or a
//! gateway's limit). That limit, not a resource, is what stopped the
//! load from growing, so it is the verdict, with the setting's value as
//! the server reported it when the run started, the load it refused at,
//! the highest load every session of which opened (or the rate it served
//! while turning the rest away), and what the steps below it showed.

use super::bottleneck::Bottleneck;
use super::Verdict;
use crate::store::StoredRun;

/// Makes the verdict of a run a refusal ended the server's admission
/// limit; leaves any other verdict as it is.
pub(super) fn apply(run: &StoredRun, verdict: &mut Verdict) {
    let refused = run
        .status_reason
        .as_deref()
        .and_then(|reason| Some((reason, crate::engine::refusal::read(reason)?)));
    if let Some((reason, (setting, at))) = refused {
        verdict.bottleneck = Some(limit(run, verdict, reason, setting, at));
        verdict.what_if = None;
        verdict.no_what_if = Some(format!(
            "past {setting} the server takes no more sessions: what it would do with them was not measured"
        ));
        return;
    }
    if super::open_files::apply(run, verdict) {
        return;
    }
    let waited = match verdict.bottleneck.as_ref().map(|b| b.name.as_str()) {
        Some(super::bottleneck::backlog::NAME) => Some("in the listen queue"),
        Some(super::bottleneck::workers::NAME) => Some("for the server's workers"),
        _ => None,
    };
    if let Some(waited) = waited {
        verdict.what_if = None;
        verdict.no_what_if = Some(format!(
            "the clients waited {waited}, before the server's resources: a model of those resources has nothing to change for them"
        ));
    }
    let unit = verdict.rate_unit;
    let turned: Vec<TurnedAway> = run
        .steps
        .iter()
        .filter_map(|s| turned_away(s, unit))
        .collect();
    let closed: Vec<TurnedAway> = if unit == crate::units::RateUnit::Requests {
        run.steps
            .iter()
            .filter_map(|s| closed_on(s, unit))
            .collect()
    } else {
        Vec::new()
    };
    if !turned.is_empty() || !closed.is_empty() {
        // What the steps showed, when the last complete one was not
        // turned away itself.
        let below = match (verdict.bottleneck.as_ref(), verdict.points.last()) {
            (Some(b), Some(top)) if top.error_rate < TURNED_AWAY_SHARE => Some(b.name.clone()),
            _ => None,
        };
        verdict.bottleneck = Some(if turned.is_empty() {
            connection_limit(&closed, unit, below.as_deref(), &nginx_connections(run))
        } else {
            http_limit(&turned, unit, below.as_deref())
        });
        verdict.what_if = None;
        verdict.no_what_if = Some(
            "past its admission limit the server turned the work away: what it would do with it was not measured"
                .to_string(),
        );
    }
}

/// The replies by which an HTTP server turns work away past a limit it is
/// configured with, rather than failing at it: 429 (a rate limit that
/// says so) and 503 (nginx's `limit_req` and `limit_conn` by default, a
/// proxy with no free upstream, a server shedding load).
const TURNING_AWAY: [(&str, &str); 2] = [
    ("http:429", "429 Too Many Requests"),
    ("http:503", "503 Service Unavailable"),
];

/// The share of a step's requests turned away from which the step
/// measured the limit rather than the server's work (the default
/// `--max-error-rate`).
const TURNED_AWAY_SHARE: f64 = 0.05;

/// A step's requests turned away.
#[derive(Debug, Clone, PartialEq)]
struct TurnedAway {
    /// The step's load, as said.
    load: String,
    /// The reply most of them got.
    reply: &'static str,
    turned: u64,
    /// Every request the step ended: served, declined, failed.
    requests: u64,
    /// The requests served (answered as asked or declined by the
    /// workload's rules) per second of the measured window.
    served_per_s: f64,
}

/// What `step` turned away, if at least [`TURNED_AWAY_SHARE`] of its
/// requests were.
fn turned_away(
    step: &crate::engine::StepResult,
    unit: crate::units::RateUnit,
) -> Option<TurnedAway> {
    let (tally, length) = step.measured();
    let all = tally.all_ops();
    let errors = all.errors.to_text();
    let (reply, turned) = TURNING_AWAY
        .iter()
        .map(|(kind, reply)| (*reply, errors.get(*kind).copied().unwrap_or(0)))
        .max_by_key(|(_, n)| *n)?;
    let requests = all.completed().saturating_add(all.error_count());
    let seconds = length.as_secs_f64();
    (turned > 0 && turned as f64 >= TURNED_AWAY_SHARE * requests as f64 && seconds > 0.0).then(
        || TurnedAway {
            load: super::capacity::load_said(step, unit),
            reply,
            turned,
            requests,
            served_per_s: all.completed() as f64 / seconds,
        },
    )
}

/// The share of a step's requests whose connections were reset or
/// refused above which the server is taken to have gone, not to limit.
const MOSTLY_CLOSED: f64 = 0.9;

/// What `step` lost to connections the server reset or refused while it
/// went on answering the rest to the step's end (a server that had gone
/// would answer none): at least [`TURNED_AWAY_SHARE`] of its requests,
/// at most [`MOSTLY_CLOSED`].
fn closed_on(step: &crate::engine::StepResult, unit: crate::units::RateUnit) -> Option<TurnedAway> {
    let (tally, length) = step.measured();
    let all = tally.all_ops();
    let errors = all.errors.to_text();
    let closed = ["reset", "connect"]
        .iter()
        .map(|k| errors.get(*k).copied().unwrap_or(0))
        .sum::<u64>();
    let requests = all.completed().saturating_add(all.error_count());
    let seconds = length.as_secs_f64();
    let share = closed as f64 / requests.max(1) as f64;
    // Still answering at the step's end: a server that went away during
    // it is lost, not limiting.
    let answering = step
        .intervals
        .iter()
        .rev()
        .find(|i| i.phase == crate::measure::Phase::Measured)
        .is_some_and(|i| {
            let last = i.tally.unpack();
            last.all_ops().completed() > 0
        });
    let seen = closed > 0 && (TURNED_AWAY_SHARE..=MOSTLY_CLOSED).contains(&share);
    (seen && answering && seconds > 0.0).then(|| TurnedAway {
        load: super::capacity::load_said(step, unit),
        reply: "a reset or refused connection",
        turned: closed,
        requests,
        served_per_s: all.completed() as f64 / seconds,
    })
}

/// What a managed nginx was configured with for connections: its
/// `worker_connections` and `worker_processes`, as the run stored them;
/// empty for any other server.
fn nginx_connections(run: &StoredRun) -> Vec<(String, String)> {
    super::capacity::nginx_settings(run, &["worker_connections", "worker_processes"])
}

/// The admission limit of an HTTP server that reset or refused
/// connections in the steps of `closed` while it answered the rest: a
/// limit on the connections it holds, named from a managed nginx's
/// settings (`nginx`) when they are known.
fn connection_limit(
    closed: &[TurnedAway],
    unit: crate::units::RateUnit,
    below: Option<&str>,
    nginx: &[(String, String)],
) -> Bottleneck {
    let rate = |r: f64| crate::units::Rate(r, unit).to_string();
    let mut evidence: Vec<String> = closed
        .iter()
        .map(|t| {
            format!(
                "at {} the server reset or refused the connection of {} of {} requests ({}) and answered the rest, serving {}",
                t.load,
                t.turned,
                t.requests,
                crate::units::Percent(t.turned as f64 / t.requests.max(1) as f64),
                rate(t.served_per_s)
            )
        })
        .collect();
    let setting = nginx.iter().find(|(k, _)| k == "worker_connections");
    if let Some((_, value)) = setting {
        let workers = nginx
            .iter()
            .find(|(k, _)| k == "worker_processes")
            .map_or("1".to_string(), |(_, v)| v.clone());
        evidence.push(format!(
            "the managed nginx ran with worker_connections = {value} per worker (worker_processes = {workers}; auto is one per CPU), its listening sockets and upstream connections counting against it: past it a worker closes what it cannot hold (its error log: \"worker_connections are not enough\")"
        ));
    } else {
        evidence.push(
            "a server that answers most requests and closes the connections of the rest holds fewer connections than the load opened: a limit on connections (nginx's worker_connections, a proxy's maxconn, a full listen backlog, a file-descriptor limit)".to_string(),
        );
    }
    evidence.extend(below.map(|b| format!("the steps below it showed: {b}")));
    let name = match setting {
        Some(_) => "admission limit (worker_connections)".to_string(),
        None => "admission limit (connections reset or refused)".to_string(),
    };
    Bottleneck::admission_limit(name, evidence, format!(
            "raise the server's limit on connections ({}) to measure it past {}, or give fewer users",
            if setting.is_some() { "worker_connections, and worker_rlimit_nofile with it" } else { "worker_connections, maxconn, the listen backlog, the open-file limit" },
            closed[0].load
        ))
}

/// The admission limit of an HTTP server that turned requests away in
/// the steps of `turned`: what each step was answered, whether the rate
/// served held while the load grew (a rate limit) or grew with it (a
/// limit on connections), and what the steps below showed.
fn http_limit(
    turned: &[TurnedAway],
    unit: crate::units::RateUnit,
    below: Option<&str>,
) -> Bottleneck {
    let rate = |r: f64| crate::units::Rate(r, unit).to_string();
    let first = &turned[0];
    let mut evidence: Vec<String> = turned
        .iter()
        .map(|t| {
            format!(
                "at {} the server answered {} to {} of {} requests ({}), serving {}",
                t.load,
                t.reply,
                t.turned,
                t.requests,
                crate::units::Percent(t.turned as f64 / t.requests.max(1) as f64),
                rate(t.served_per_s)
            )
        })
        .collect();
    let served: Vec<f64> = turned.iter().map(|t| t.served_per_s).collect();
    let (low, high) = served
        .iter()
        .fold((f64::MAX, 0.0_f64), |(l, h), &r| (l.min(r), h.max(r)));
    let last = &turned[turned.len() - 1];
    evidence.push(match turned.len() {
        1 => "a limit the server is configured with turned the rest away (nginx's limit_req or limit_conn, a proxy's or a gateway's limit): what it served is the limit's rate, not its capacity".to_string(),
        _ if high - low <= 0.15 * high => format!(
            "the rate served held {} while the load grew from {} to {}: a limit on the request rate (nginx's limit_req, a proxy's or a gateway's rate limit)",
            if rate(low) == rate(high) { format!("at {}", rate(low)) } else { format!("between {} and {}", rate(low), rate(high)) },
            first.load, last.load
        ),
        _ => format!(
            "the rate served grew from {} to {} with the load while requests were turned away: a limit on connections or requests in flight (nginx's limit_conn, a pool's size)",
            rate(served[0]), rate(served[served.len() - 1])
        ),
    });
    evidence.extend(below.map(|b| format!("the steps below it showed: {b}")));
    Bottleneck::admission_limit(format!("admission limit (requests turned away: {})", first.reply), evidence, format!(
            "raise the limit (nginx's limit_req rate and burst, limit_conn, the proxy's or gateway's) to measure the server behind it, or keep the load under {} to measure it within the limit",
            rate(low)
        ))
}

fn limit(run: &StoredRun, verdict: &Verdict, reason: &str, setting: &str, at: &str) -> Bottleneck {
    let mut evidence = vec![reason.to_string()];
    if let Some(inv) = run.inventory.as_ref() {
        evidence.extend(crate::sut::postgres::pool::said(inv));
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
    let next = if setting.starts_with("pool") {
        format!(
            "raise the pool's limit (pgbouncer: default_pool_size or the database's pool_size, max_client_conn; a reload applies them) as far as the server's max_connections allows, or give fewer users than it passes, then sweep past {at} again"
        )
    } else {
        format!(
            "raise {setting} (a restart applies it) or put a connection pool in front of the server, then sweep past {at} again"
        )
    };
    Bottleneck::admission_limit(format!("admission limit ({setting})"), evidence, next)
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
    use super::{connection_limit, http_limit, slots, TurnedAway};
    use crate::units::RateUnit;

    fn turned(load: &str, turned: u64, requests: u64, served_per_s: f64) -> TurnedAway {
        TurnedAway {
            load: load.to_string(),
            reply: "429 Too Many Requests",
            turned,
            requests,
            served_per_s,
        }
    }

    /// A rate served flat while the load grew is a rate limit; one that
    /// grew with the load while requests were turned away is a limit on
    /// connections; what the steps below showed closes the evidence.
    #[test]
    fn requests_turned_away_are_a_rate_limit_when_the_rate_served_holds() {
        let rate = [
            turned("8 users", 50, 250, 200.0),
            turned("16 users", 600, 800, 201.0),
        ];
        let b = http_limit(&rate, RateUnit::Requests, Some("cpu"));
        assert_eq!(
            b.name,
            "admission limit (requests turned away: 429 Too Many Requests)"
        );
        assert_eq!(
            b.evidence[0],
            "at 8 users the server answered 429 Too Many Requests to 50 of 250 requests (20.0%), serving 200 req/s"
        );
        assert!(
            b.evidence[2].starts_with("the rate served held between 200 req/s and 201 req/s while the load grew from 8 users to 16 users: a limit on the request rate"),
            "{:?}",
            b.evidence
        );
        assert_eq!(b.evidence[3], "the steps below it showed: cpu");
        assert!(b
            .next
            .unwrap()
            .ends_with("keep the load under 200 req/s to measure it within the limit"));
        let conns = [
            turned("8 users", 50, 250, 200.0),
            turned("16 users", 90, 490, 400.0),
        ];
        let b = http_limit(&conns, RateUnit::Requests, None);
        assert!(
            b.evidence[2].starts_with("the rate served grew from 200 req/s to 400 req/s with the load while requests were turned away: a limit on connections"),
            "{:?}",
            b.evidence
        );
        assert_eq!(b.evidence.len(), 3);
    }

    /// Connections reset while the rest was answered: named by a managed
    /// nginx's worker_connections when it is known, as a limit on
    /// connections otherwise.
    #[test]
    fn connections_closed_on_the_load_are_a_limit_on_connections() {
        let mut closed = turned("48 users", 900, 9000, 4000.0);
        closed.reply = "a reset or refused connection";
        let nginx = [
            ("worker_processes".to_string(), "auto".to_string()),
            ("worker_connections".to_string(), "16".to_string()),
        ];
        let b = connection_limit(
            std::slice::from_ref(&closed),
            RateUnit::Requests,
            Some("cpu"),
            &nginx,
        );
        assert_eq!(b.name, "admission limit (worker_connections)");
        assert_eq!(
            b.evidence[0],
            "at 48 users the server reset or refused the connection of 900 of 9000 requests (10.0%) and answered the rest, serving 4000 req/s"
        );
        assert!(b.evidence[1].starts_with("the managed nginx ran with worker_connections = 16 per worker (worker_processes = auto;"), "{:?}", b.evidence);
        assert_eq!(b.evidence[2], "the steps below it showed: cpu");
        let b = connection_limit(&[closed], RateUnit::Requests, None, &[]);
        assert_eq!(b.name, "admission limit (connections reset or refused)");
        assert_eq!(b.evidence.len(), 2);
        assert!(b.next.unwrap().contains("past 48 users"));
    }

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
