//! Which process writes a run, beyond its pid: the kernel reuses pids, so a
//! run is known to be still running only while its pid belongs to the same
//! process — same boot (`/proc/sys/kernel/random/boot_id`) and same start
//! time (field 22 of `/proc/PID/stat`, clock ticks after boot).

/// `BOOT_ID:START_TICKS` of process `pid` on this host, none when it is
/// gone or its files cannot be read.
pub(crate) fn identity(pid: u32) -> Option<String> {
    let boot = crate::util::boot_id()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(format!("{boot}:{}", start_ticks(&stat)?))
}

/// The start time of a /proc/PID/stat line: after the command name (which
/// may hold spaces and parentheses, so it is cut at the last `)`), the
/// 20th field.
fn start_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_known_by_its_boot_and_start_time() {
        let me = identity(std::process::id()).expect("this process");
        assert_eq!(identity(std::process::id()), Some(me.clone()));
        let (boot, ticks) = me.rsplit_once(':').unwrap();
        assert_eq!(boot.len(), 36, "{me}");
        assert!(ticks.parse::<u64>().is_ok(), "{me}");
        // Another process has another identity; a gone one, none. The
        // start time counts clock ticks (10 ms): a child forked in this
        // process's own tick would share it, so it starts a tick later.
        std::thread::sleep(std::time::Duration::from_millis(30));
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let other = identity(child.id());
        let _ = child.kill();
        let _ = child.wait();
        assert!(other.is_some() && other != Some(me), "{other:?}");
        assert_eq!(identity(u32::MAX), None);
    }

    #[test]
    fn the_start_time_is_read_past_a_command_name_with_spaces() {
        let line = "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(start_ticks(line), Some(987_654));
        assert_eq!(start_ticks("garbage"), None);
        assert_eq!(start_ticks("1 (x) S"), None);
    }
}
