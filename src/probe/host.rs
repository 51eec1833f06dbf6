//! Facts about the host a run ran on, stored with the run so that two runs
//! can be told apart later. Missing files give `None`, never an error.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// What machine a run ran on.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HostFacts {
    pub hostname: Option<String>,
    /// Kernel release (`uname -r`).
    pub kernel: Option<String>,
    /// CPU model name.
    pub cpu_model: Option<String>,
    /// Logical CPUs online.
    pub cpus: Option<u32>,
    /// Physical memory, bytes.
    pub memory_bytes: Option<u64>,
}

impl HostFacts {
    /// Reads this host's facts from /proc.
    pub(crate) fn read() -> Self {
        Self::read_from(Path::new("/proc"))
    }

    /// Reads the facts from a /proc tree (a fixture in tests).
    pub(crate) fn read_from(proc_root: &Path) -> Self {
        let read = |rel: &str| std::fs::read_to_string(proc_root.join(rel)).ok();
        let cpuinfo = read("cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name") || l.starts_with("Model"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string());
        let cpus = cpuinfo
            .lines()
            .filter(|l| l.starts_with("processor"))
            .count();
        let memory_bytes = read("meminfo").and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
                .map(|kib| kib * 1024)
        });
        HostFacts {
            hostname: read("sys/kernel/hostname").map(|s| s.trim().to_string()),
            kernel: read("sys/kernel/osrelease").map(|s| s.trim().to_string()),
            cpu_model,
            cpus: u32::try_from(cpus).ok().filter(|&n| n > 0),
            memory_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_come_from_a_proc_tree() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/proc-host");
        let facts = HostFacts::read_from(&root);
        assert_eq!(facts.cpus, Some(2));
        assert_eq!(facts.memory_bytes, Some(24_604_144 * 1024));
        assert_eq!(facts.kernel.as_deref(), Some("6.1.0-fixture"));
        assert_eq!(
            facts.cpu_model.as_deref(),
            Some("Intel(R) Xeon(R) Processor @ 2.10GHz")
        );
    }

    #[test]
    fn a_missing_tree_gives_nothing_not_an_error() {
        let facts = HostFacts::read_from(Path::new("/nonexistent-proc"));
        assert_eq!(facts, HostFacts::default());
    }
}
