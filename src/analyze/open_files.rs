//! A sweep the server's open-file limit stopped: a process of the server
//! (or of its origin) held as many descriptors as its soft
//! `RLIMIT_NOFILE` allows, read from /proc at each interval's end
//! ([`crate::probe::counters::open_files`]), in a step whose operations
//! failed or stalled. At the limit a server can accept no connection and
//! open no file (EMFILE, "Too many open files"): the clients it cannot
//! accept wait in its listen queue, the files it cannot open fail (nginx
//! answers 500). That setting, not a resource, is what stopped the load,
//! so it is the verdict, with the process, its descriptors and its limit,
//! the load it was reached at, what the step showed and the highest step
//! below it. A process at its limit in a step that showed nothing wrong
//! is a caveat: one more connection or file fails.

use super::bottleneck::Bottleneck;
use super::host::HostSource;
use super::Verdict;
use crate::engine::{StepResult, StepStatus};
use crate::probe::counters::open_files::OpenFiles;
use crate::store::StoredRun;

/// The verdict's name.
pub(crate) const NAME: &str = "admission limit (open files)";

/// The groups whose limit is the server's.
const LABELS: [(&str, &str); 2] = [
    (crate::probe::counters::process::SERVER_LABEL, "the server"),
    ("origin", "the origin"),
];

/// What one step showed of the open files and of its operations.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StepFiles {
    /// The step's load, as said.
    pub(crate) load: String,
    /// Whose process was nearest its limit ("the server", "the origin"),
    /// and its figures at the interval it held the most.
    pub(crate) nearest: Option<(&'static str, OpenFiles)>,
    /// What went wrong in the step, said; none when nothing did.
    pub(crate) symptom: Option<String>,
    /// What it served per second of its measured window, said.
    pub(crate) served: String,
}

impl StepFiles {
    fn at_limit(&self) -> bool {
        self.nearest.is_some_and(|(_, f)| at_limit(f))
    }
}

/// Whether `f` held its limit.
fn at_limit(f: OpenFiles) -> bool {
    crate::probe::counters::open_files::at_limit(f.files, f.limit)
}

/// Makes the verdict of a run the open-file limit stopped, or adds the
/// caveat of a process at its limit; true when it set the verdict.
pub(super) fn apply(run: &StoredRun, verdict: &mut Verdict) -> bool {
    let (source, _) = super::server_source(run);
    let unit = verdict.rate_unit;
    let steps: Vec<StepFiles> = run
        .steps
        .iter()
        .map(|s| step_files(s, source, unit))
        .collect();
    let nginx = super::capacity::nginx_settings(run, &["worker_rlimit_nofile", "open_file_cache"]);
    if let Some(b) = limit(&steps, &nginx) {
        verdict.bottleneck = Some(b);
        verdict.what_if = None;
        verdict.no_what_if = Some(
            "at its open-file limit the server could take no more connections or files: what it would do with them was not measured"
                .to_string(),
        );
        return true;
    }
    verdict.caveats.extend(steps.iter().find(|s| s.at_limit()).map(|s| {
        let (whose, f) = s.nearest.expect("at_limit holds a process");
        format!(
            "at {} {whose}'s process {} held {} of the {} descriptors its limit allows: one more connection or file fails (EMFILE)",
            s.load, f.pid, f.files, f.limit
        )
    }));
    false
}

/// What `step` showed of the open files (from `source`) and of its
/// operations.
fn step_files(step: &StepResult, source: HostSource, unit: crate::units::RateUnit) -> StepFiles {
    let nearest = step
        .intervals
        .iter()
        .filter_map(|i| source.sample(i))
        .flat_map(|h| h.processes.iter())
        .filter_map(|p| {
            let whose = LABELS.iter().find(|(l, _)| *l == p.label)?.1;
            Some((whose, p.open_files?))
        })
        .max_by(|a, b| a.1.share().total_cmp(&b.1.share()));
    let (tally, length) = step.measured();
    let all = tally.all_ops();
    let seconds = length.as_secs_f64();
    let served = if seconds > 0.0 {
        crate::units::Rate(all.completed() as f64 / seconds, unit).to_string()
    } else {
        "nothing".to_string()
    };
    StepFiles {
        load: super::capacity::load_said(step, unit),
        nearest,
        symptom: symptom(step, &all),
        served,
    }
}

/// What went wrong in a step: its status, and its failed operations.
fn symptom(step: &StepResult, all: &crate::measure::OpTally) -> Option<String> {
    let status = match &step.status {
        StepStatus::Failed(why) => Some(format!("the step failed: {why}")),
        StepStatus::Stalled(why) => Some(format!("the step stalled: {why}")),
        _ => None,
    };
    let failed = all.error_count();
    let errors = (failed > 0).then(|| {
        let mut kinds: Vec<(String, u64)> = all.errors.to_text().into_iter().collect();
        kinds.sort_by_key(|k| std::cmp::Reverse(k.1));
        let kinds: Vec<String> = kinds
            .iter()
            .take(3)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        format!(
            "{failed} of {} operations failed ({})",
            all.completed().saturating_add(failed),
            kinds.join(", ")
        )
    });
    match (status, errors) {
        (Some(status), Some(errors)) => Some(format!("{status}; {errors}")),
        (status, errors) => status.or(errors),
    }
}

/// The open-file limit as the verdict, when a step reached it and went
/// wrong: the first such step, what it showed, the highest step below it
/// and a managed nginx's settings that bear on it (`nginx`).
pub(crate) fn limit(steps: &[StepFiles], nginx: &[(String, String)]) -> Option<Bottleneck> {
    let at = steps
        .iter()
        .position(|s| s.at_limit() && s.symptom.is_some())?;
    let step = &steps[at];
    let (whose, f) = step.nearest?;
    let mut evidence = vec![
        format!(
            "at {} {whose}'s process {} held {} descriptors against a limit of {} (the soft `Max open files` of /proc/{}/limits): at it, accepting a connection or opening a file fails with EMFILE (Too many open files)",
            step.load, f.pid, f.files, f.limit, f.pid
        ),
        format!("at {}: {}", step.load, step.symptom.as_deref().unwrap_or_default()),
    ];
    evidence.push(
        match steps[..at].iter().rev().find(|s| s.symptom.is_none()) {
            Some(below) => format!(
                "below it, at {}, {} served {}{}",
                below.load,
                whose,
                below.served,
                below
                    .nearest
                    .map_or(String::new(), |(_, b)| if at_limit(b) {
                        format!(
                    ", already at its limit ({} descriptors against {}) with nothing failing",
                    b.files, b.limit
                )
                    } else {
                        format!(
                            " holding at most {} descriptors against its {}",
                            b.files, b.limit
                        )
                    })
            ),
            None => {
                "no step below it ran clean: the limit held from the sweep's first load".to_string()
            }
        },
    );
    let setting = |key: &str| {
        nginx
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    if let Some(nofile) = setting("worker_rlimit_nofile") {
        evidence.push(format!(
            "the managed nginx ran with worker_rlimit_nofile = {nofile}{}: each connection and each file its workers hold open takes a descriptor",
            setting("open_file_cache").map_or(String::new(), |c| format!(
                " and open_file_cache {c}, which keeps the files it served open"
            ))
        ));
    }
    Some(Bottleneck::admission_limit(NAME.to_string(), evidence, format!(
            "raise the server's open-file limit ({}a service's LimitNOFILE=, ulimit -n) or hold fewer files open, to measure it past {}",
            raise_with(&setting),
            step.load
        )))
}

/// The managed kinds' own setting that raises the open-file limit, with
/// its flag, where the run set it: `--nginx-set worker_rlimit_nofile=N, `.
fn raise_with<'a>(setting: &impl Fn(&str) -> Option<&'a str>) -> String {
    crate::sut::managed::KINDS
        .iter()
        .find_map(|k| {
            let name = k.advice.open_files?;
            setting(name).map(|_| format!("{} {name}=N, ", k.set_flag))
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(load: &str, files: u64, limit: u64, symptom: Option<&str>) -> StepFiles {
        StepFiles {
            load: load.to_string(),
            nearest: Some((
                "the server",
                OpenFiles {
                    pid: 42,
                    files,
                    limit,
                },
            )),
            symptom: symptom.map(str::to_string),
            served: "1000 req/s".to_string(),
        }
    }

    /// The first step at its limit that went wrong is the verdict, with
    /// the clean step below it and a managed nginx's settings.
    #[test]
    fn a_step_at_its_limit_that_went_wrong_is_the_limit() {
        let steps = [
            step("16 users", 100, 128, None),
            step(
                "24 users",
                120,
                128,
                Some("1 of 9000 operations failed (reset 1)"),
            ),
            step("32 users", 126, 128, None),
            step("64 users", 128, 128, Some("the step stalled: held")),
            step(
                "128 users",
                128,
                128,
                Some("9 of 10 operations failed (http:500 9)"),
            ),
        ];
        let nginx = [
            ("worker_rlimit_nofile".to_string(), "128".to_string()),
            (
                "open_file_cache".to_string(),
                "max=10000 inactive=60s".to_string(),
            ),
        ];
        let b = limit(&steps, &nginx).expect("the limit");
        assert_eq!(b.name, NAME);
        assert!(
            b.evidence[0].starts_with(
                "at 64 users the server's process 42 held 128 descriptors against a limit of 128"
            ),
            "{:?}",
            b.evidence
        );
        assert_eq!(b.evidence[1], "at 64 users: the step stalled: held");
        assert_eq!(
            b.evidence[2],
            "below it, at 32 users, the server served 1000 req/s, already at its limit (126 descriptors against 128) with nothing failing"
        );
        assert!(b.evidence[3].contains("worker_rlimit_nofile = 128 and open_file_cache max=10000"));
        assert!(b
            .next
            .unwrap()
            .contains("--nginx-set worker_rlimit_nofile=N"));
    }

    /// At the limit with nothing wrong, or wrong far under the limit: not
    /// this verdict. A first step at its limit says nothing ran clean.
    #[test]
    fn the_limit_needs_both_the_descriptors_and_a_step_gone_wrong() {
        assert!(limit(&[step("8 users", 128, 128, None)], &[]).is_none());
        assert!(limit(
            &[step("8 users", 60, 128, Some("3 of 9 operations failed"))],
            &[]
        )
        .is_none());
        // Within 2% (at least 2) of the limit counts as at it.
        let b = limit(&[step("8 users", 1004, 1024, Some("failed"))], &[]).expect("within 2%");
        assert_eq!(
            b.evidence[2],
            "no step below it ran clean: the limit held from the sweep's first load"
        );
        assert_eq!(b.evidence.len(), 3);
        assert!(limit(&[step("8 users", 1000, 1024, Some("failed"))], &[]).is_none());
        assert!(limit(&[step("8 users", 0, 0, Some("failed"))], &[]).is_none());
    }
}
