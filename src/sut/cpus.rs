//! CPU lists: a managed server's CPUs as a flag gives them (`0-1,3`),
//! checked against the CPUs perflab's cgroup lets a child run on, and the
//! kernel's own lists.

use crate::error::PlanError;

/// Validates a managed server's CPUs flag (`flag`): CPUs it may be placed on, e.g.
/// `0` or `0-1,3`. The server starts with perflab's affinity and is then
/// moved to these CPUs with sched_setaffinity(2), which may leave
/// perflab's own mask (`taskset -c 1 perflab` with the server on CPU 0 keeps the
/// generator off the server's CPU) but not perflab's cpuset cgroup: a
/// container's CPUs, which need not start at 0.
pub(crate) fn parse_cpu_list(text: &str, flag: &str) -> Result<Vec<usize>, PlanError> {
    let allowed = placeable_cpus();
    let shown = format_cpu_list(&allowed);
    let bad = |why: String| {
        PlanError::flag(
            flag,
            why,
            &format!(
                "give CPUs from {shown}, e.g. {flag} {}",
                allowed.first().copied().unwrap_or(0)
            ),
        )
    };
    let mut out = Vec::new();
    for part in text.split(',') {
        let Some((a, b)) = parse_cpu_range(part) else {
            return Err(bad(format!("'{part}' is not a CPU number or range")));
        };
        if let Some(cpu) = (a..=b).find(|c| !allowed.contains(c)) {
            return Err(bad(format!(
                "CPU {cpu} is not among the CPUs perflab's cgroup lets a server run on ({shown})"
            )));
        }
        out.extend(a..=b);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// `3` or `0-3` as (first, last); none when malformed or reversed.
fn parse_cpu_range(part: &str) -> Option<(usize, usize)> {
    let (a, b) = part.split_once('-').unwrap_or((part, part));
    let (a, b) = (
        a.trim().parse::<usize>().ok()?,
        b.trim().parse::<usize>().ok()?,
    );
    (a <= b).then_some((a, b))
}

/// A kernel CPU list (`0-3,6`) as CPU numbers.
pub(crate) fn parse_kernel_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = parse_cpu_range(part)?;
        cpus.extend(a..=b);
    }
    (!cpus.is_empty()).then_some(cpus)
}

/// `0-1,3` for CPUs 0, 1 and 3.
fn format_cpu_list(cpus: &[usize]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &cpu in cpus {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == cpu => *end = cpu,
            _ => runs.push((cpu, cpu)),
        }
    }
    runs.iter()
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The CPUs a child of perflab can be moved to: its cpuset cgroup's
/// effective CPUs (cgroup v2 `cpuset.cpus.effective`, v1
/// `cpuset.effective_cpus`; see the kernel's cgroup-v2.rst and
/// cgroup-v1/cpusets.rst), else the online CPUs, else as many as perflab
/// may use from 0.
fn placeable_cpus() -> Vec<usize> {
    let read = |path: String| std::fs::read_to_string(path).ok();
    let mut candidates = Vec::new();
    for line in read("/proc/self/cgroup".to_string())
        .unwrap_or_default()
        .lines()
    {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let path = path.trim_end_matches('/');
        if controllers.is_empty() {
            candidates.push(format!("/sys/fs/cgroup{path}/cpuset.cpus.effective"));
        } else if controllers.split(',').any(|c| c == "cpuset") {
            candidates.push(format!("/sys/fs/cgroup/cpuset{path}/cpuset.effective_cpus"));
        }
    }
    // Inside a cgroup namespace the paths above may be the host's; the
    // mount's root is then this cgroup.
    candidates.push("/sys/fs/cgroup/cpuset.cpus.effective".to_string());
    candidates.push("/sys/fs/cgroup/cpuset/cpuset.effective_cpus".to_string());
    candidates.push("/sys/devices/system/cpu/online".to_string());
    candidates
        .into_iter()
        .find_map(|path| read(path).as_deref().and_then(parse_kernel_cpu_list))
        .unwrap_or_else(|| {
            (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_cpus_are_checked_against_the_cpus_a_server_can_get() {
        assert_eq!(format_cpu_list(&[0, 1, 3, 5, 6, 7]), "0-1,3,5-7");
        assert_eq!(parse_kernel_cpu_list("0-1,3\n"), Some(vec![0, 1, 3]));
        assert_eq!(parse_kernel_cpu_list("3-1"), None);
        let allowed = placeable_cpus();
        assert!(!allowed.is_empty());
        let first = allowed[0].to_string();
        assert_eq!(
            parse_cpu_list(&first, "--pg-cpus").unwrap(),
            vec![allowed[0]]
        );
        let outside = (0..).find(|c| !allowed.contains(c)).unwrap();
        let err = parse_cpu_list(&format!("{first},{outside}"), "--pg-cpus")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("CPU {outside} is not among the CPUs")),
            "{err}"
        );
        assert!(err.contains(&format_cpu_list(&allowed)), "{err}");
        assert!(parse_cpu_list("1-0", "--pg-cpus").is_err());
    }
}
