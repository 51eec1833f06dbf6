//! A sweep ended by the server's own admission limit: a server that
//! answered and would not take another session because of a setting
//! (PostgreSQL's and MariaDB's `max_connections`). The run's stored reason
//! says it in one sentence, which the verdict reads back; both sides of
//! that sentence live here.

/// How the stored reason of a run ended by a refusal begins.
const OPENING: &str = "the server refused a session past its ";

/// The run's reason: the setting that refused, at which step and load,
/// what the server said, and that the steps below were kept.
pub(crate) fn reason(step: usize, at: &str, setting: &str, said: &str) -> String {
    format!(
        "{OPENING}{setting} at step {} ({at}): {said}; the steps before it are kept",
        step + 1
    )
}

/// What a stored reason says of a refusal: the setting, and the step's
/// load as said; none for any other reason.
pub(crate) fn read(reason: &str) -> Option<(&str, &str)> {
    let rest = reason.strip_prefix(OPENING)?;
    let (setting, rest) = rest.split_once(" at step ")?;
    let at = rest.split_once(" (")?.1.split_once("):")?.0;
    Some((setting, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_reads_back_its_setting_and_load() {
        let said = "cannot open the session of user 6: PostgreSQL at x refused the connection (53300: sorry, too many clients already)";
        let r = reason(4, "16 users", "max_connections", said);
        assert!(r.contains("step 5 (16 users)"), "{r}");
        assert!(r.contains(said), "{r}");
        assert_eq!(read(&r), Some(("max_connections", "16 users")));
        assert_eq!(read("lost the target during step 5 (x)"), None);
        assert_eq!(read(OPENING), None);
    }
}
