//! A panic is a bug in perflab, never the user's input: it ends in one
//! line that says so, names where it happened (file, line, thread) and
//! asks for a report, in place of Rust's several lines. A worker's panic
//! fails its step and the run keeps what it measured before (see
//! `engine::crew`); the line is all the user sees of the panic itself.
//! With `RUST_BACKTRACE` set, Rust's own report follows, for a developer.

use std::panic::PanicHookInfo;

/// Installs the one-line report for every later panic of the process.
pub fn one_line_panics() {
    let rust_own = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        crate::util::err(format_args!("{}\n", panic_line(info)));
        if std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0") {
            rust_own(info);
        }
    }));
}

/// The line for one panic: its message, place and thread.
fn panic_line(info: &PanicHookInfo<'_>) -> String {
    let message = crate::util::panic_text(info.payload()).unwrap_or("a panic without a message");
    let place = info
        .location()
        .map_or_else(String::new, |l| format!(" at {}:{}", l.file(), l.line()));
    let current = std::thread::current();
    let thread = current.name().unwrap_or("an unnamed thread");
    crate::util::one_line(&format!(
        "error: internal error in perflab (a bug, not your input: please report it with this line): {message}{place} in thread '{thread}'"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn an_overflow_in_a_worker_is_one_line_naming_the_bug_its_place_and_thread() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let keep = Arc::clone(&seen);
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            keep.lock().unwrap().push(panic_line(info));
        }));
        let huge = std::hint::black_box(u64::MAX);
        let worker = std::thread::Builder::new()
            .name("perflab-worker-7".into())
            .spawn(move || huge + std::hint::black_box(1))
            .unwrap();
        let ended = worker.join();
        let multi = std::thread::Builder::new()
            .name("perflab-worker-8".into())
            .spawn(|| panic!("first\nsecond\n\tthird"))
            .unwrap()
            .join();
        std::panic::set_hook(before);
        assert!(ended.is_err(), "the addition did not overflow");
        assert!(multi.is_err());
        // Tests running beside this one may panic on purpose meanwhile.
        let seen: Vec<String> = seen
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains("in thread 'perflab-worker-"))
            .cloned()
            .collect();
        assert_eq!(seen.len(), 2, "{seen:?}");
        let line = &seen[0];
        assert!(
            line.starts_with("error: internal error in perflab"),
            "{line}"
        );
        assert!(line.contains("attempt to add with overflow"), "{line}");
        assert!(line.contains("src/commands/panic_line.rs:"), "{line}");
        assert!(line.ends_with("in thread 'perflab-worker-7'"), "{line}");
        assert!(
            seen[1].ends_with("in thread 'perflab-worker-8'"),
            "{}",
            seen[1]
        );
        assert_eq!(seen[1].lines().count(), 1, "{}", seen[1]);
        assert!(seen[1].contains("first second third"), "{}", seen[1]);
    }
}
