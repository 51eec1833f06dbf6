//! Small helpers below every other module, with no knowledge of perflab's
//! domain: how a `Duration` is written in stored JSON, how an error chain
//! is folded onto the one line the user sees, and how text reaches
//! standard output and error without a closed pipe stopping the process;
//! the process's interrupt flag, which long preparations look at, and
//! the watches that cut work short at a signal ([`until_interrupted`],
//! [`InterruptWatch`]), and the hold a file being written puts on an exit
//! at a signal ([`writing_file`]); how a
//! file the user named is read (a regular file, under a bound); the free
//! space of a file system ([`free_bytes`]); JSON values written as YAML
//! ([`yaml`]); the system calls several modules make, wrapped once
//! ([`sys`]); a timer
//! finer than tokio's ([`timer`]); a worker thread's own poll of its
//! users' sockets ([`poller`]); which boot of which host this is
//! ([`boot_id`]); Student's t for a 95% interval ([`t_975`]). Anything here may be imported from
//! anywhere; it imports nothing of the crate.

pub(crate) mod poller;
pub(crate) mod prom_text;
pub(crate) mod sys;
pub(crate) mod timer;
pub(crate) mod yaml;

/// A current-thread runtime with timers and I/O, as a worker runs, for tests.
#[cfg(test)]
pub(crate) fn test_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a test's runtime")
}

/// Durations are stored in plans as seconds (f64), the unit of the JSON export.
pub(crate) mod serde_duration {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let seconds = f64::deserialize(d)?;
        Duration::try_from_secs_f64(seconds).map_err(serde::de::Error::custom)
    }

    /// The same for an optional duration (null when absent).
    pub(crate) mod option {
        use serde::{Deserialize, Deserializer, Serializer};
        use std::time::Duration;

        pub(crate) fn serialize<S: Serializer>(
            d: &Option<Duration>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => s.serialize_some(&d.as_secs_f64()),
                None => s.serialize_none(),
            }
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<Duration>, D::Error> {
            Option::<f64>::deserialize(d)?
                .map(|seconds| {
                    Duration::try_from_secs_f64(seconds).map_err(serde::de::Error::custom)
                })
                .transpose()
        }
    }
}

/// A URL part with its `%XX` sequences replaced by the bytes they stand
/// for (a `%` not followed by two hex digits stays as it is); none when the
/// bytes are not UTF-8.
pub(crate) fn percent_decoded(part: &str) -> Option<String> {
    String::from_utf8(percent_decoded_bytes(part)).ok()
}

/// The bytes a URL part's `%XX` sequences stand for, whatever they are
/// (a file name need not be UTF-8).
pub(crate) fn percent_decoded_bytes(part: &str) -> Vec<u8> {
    let bytes = part.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    out
}

/// A panic's message, from its payload: the text `panic!` was given
/// (a literal or a formatted `String`), or `None` for any other payload.
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> Option<&str> {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

/// Folds a message onto one line: every run of whitespace (newlines of a
/// `{:#}` error chain included) becomes one space.
pub(crate) fn one_line(text: &str) -> String {
    printable(text)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Text that came from outside (a probe's labels, a server's message) made
/// safe for a terminal: every control character but newline and tab —
/// the escape that starts a terminal sequence among them — becomes `�`.
pub(crate) fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if text.chars().any(unsafe_char) {
        text.chars()
            .map(|c| if unsafe_char(c) { '\u{fffd}' } else { c })
            .collect::<String>()
            .into()
    } else {
        text.into()
    }
}

/// The process's interrupt flag: a command that honours Ctrl-C and SIGTERM
/// registers them on it before it starts work, and every long phase —
/// connecting, loading a database, starting a managed server, the sweep —
/// looks at it.
pub(crate) fn interrupt_flag() -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    INTERRUPT.get_or_init(Default::default).clone()
}

static INTERRUPT: std::sync::OnceLock<std::sync::Arc<std::sync::atomic::AtomicBool>> =
    std::sync::OnceLock::new();

/// The work was stopped by Ctrl-C or SIGTERM while `0` (`loading the
/// bank`); nothing more is done.
#[derive(Debug, thiserror::Error)]
#[error("interrupted while {0}")]
pub(crate) struct Interrupted(pub &'static str);

/// An [`Interrupted`] error once the interrupt flag is set.
pub(crate) fn check_interrupt(while_doing: &'static str) -> Result<(), Interrupted> {
    if interrupt_set() {
        Err(Interrupted(while_doing))
    } else {
        Ok(())
    }
}

/// A value from outside as an error line quotes it: whole up to 80
/// characters, else its first 60 and how long it was, so that one line
/// stays one line whatever was given.
pub(crate) fn clipped(text: &str) -> std::borrow::Cow<'_, str> {
    const SHOWN: usize = 60;
    if text.chars().count() <= 80 {
        return std::borrow::Cow::Borrowed(text);
    }
    let head: String = text.chars().take(SHOWN).collect();
    std::borrow::Cow::Owned(format!("{head}… ({} bytes in all)", text.len()))
}

/// How long work that begins once a signal has come may still take: the
/// bank's check after an interrupted sweep runs, but a silent server or a
/// large table holds the process no longer than this.
pub(crate) const GRACE_AFTER_SIGNAL: std::time::Duration = std::time::Duration::from_secs(2);

/// How often a watch looks at the interrupt flag.
const WATCH_TICK: std::time::Duration = std::time::Duration::from_millis(50);

/// When work begun now must stop: at the next signal, or — when one has
/// already come — [`GRACE_AFTER_SIGNAL`] from now.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cutoff {
    /// The end of the grace, when the work began after a signal.
    grace_until: Option<std::time::Instant>,
}

impl Cutoff {
    /// The cutoff of work that begins now.
    pub(crate) fn from_now() -> Self {
        Cutoff {
            grace_until: interrupt_set().then(|| std::time::Instant::now() + GRACE_AFTER_SIGNAL),
        }
    }

    /// Whether the work must stop now.
    pub(crate) fn reached(&self) -> bool {
        match self.grace_until {
            None => interrupt_set(),
            Some(until) => std::time::Instant::now() >= until,
        }
    }
}

fn interrupt_set() -> bool {
    INTERRUPT
        .get()
        .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
}

/// Runs `work` to its end, or until its [`Cutoff`]: a statement a server
/// never answers, or a load that would go on for minutes, ends within a
/// tick of the signal as [`Interrupted`] (`while_doing`). Needs a runtime
/// with timers.
pub(crate) async fn until_interrupted<F: std::future::Future>(
    while_doing: &'static str,
    work: F,
) -> Result<F::Output, Interrupted> {
    let cutoff = Cutoff::from_now();
    let mut work = std::pin::pin!(work);
    loop {
        tokio::select! {
            done = &mut work => return Ok(done),
            () = tokio::time::sleep(WATCH_TICK) => {
                if cutoff.reached() {
                    return Err(Interrupted(while_doing));
                }
            }
        }
    }
}

/// A thread that calls `stop` at each tick once the [`Cutoff`] of work
/// begun now is reached (SQLite's interrupt, which a statement that
/// starts later would miss if called once), until the watch is dropped.
pub(crate) struct InterruptWatch {
    cutoff: Cutoff,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl InterruptWatch {
    /// Starts watching for the work that begins now.
    pub(crate) fn start(stop: impl Fn() + Send + 'static) -> Self {
        use std::sync::atomic::Ordering;
        let cutoff = Cutoff::from_now();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ended = done.clone();
        let thread = std::thread::Builder::new()
            .name("interrupt-watch".to_string())
            .spawn(move || {
                while !ended.load(Ordering::Relaxed) {
                    if cutoff.reached() {
                        stop();
                    }
                    std::thread::sleep(WATCH_TICK);
                }
            })
            .ok();
        InterruptWatch {
            cutoff,
            done,
            thread,
        }
    }

    /// Whether the work was cut: the error it ended with is then an
    /// [`Interrupted`] (`while_doing`), not the one its cut made.
    pub(crate) fn cut(&self, while_doing: &'static str) -> Result<(), Interrupted> {
        if self.cutoff.reached() {
            Err(Interrupted(while_doing))
        } else {
            Ok(())
        }
    }
}

impl Drop for InterruptWatch {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Held while a file the user named is being written (a report, an
/// export): a command that ends at a signal without unwinding
/// ([`end_at_signal_hold`]) waits for it, so that the file is the one
/// that was there or the whole new one, and no temporary is left beside
/// it.
static WRITING_FILE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Holds off an exit at a signal while a file is written (see
/// [`WRITING_FILE`]), until the guard is dropped.
pub(crate) fn writing_file() -> std::sync::MutexGuard<'static, ()> {
    WRITING_FILE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// For an exit at a signal: waits, at most `within`, until no file is
/// being written, and returns the hold, which keeps any other write from
/// starting; none when a write went on longer (a slow device), to exit
/// anyway.
pub(crate) fn end_at_signal_hold(
    within: std::time::Duration,
) -> Option<std::sync::MutexGuard<'static, ()>> {
    let until = std::time::Instant::now() + within;
    loop {
        match WRITING_FILE.try_lock() {
            Ok(hold) => return Some(hold),
            Err(std::sync::TryLockError::Poisoned(held)) => return Some(held.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) if std::time::Instant::now() < until => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(std::sync::TryLockError::WouldBlock) => return None,
        }
    }
}

/// Opens a file the user named (on the command line, in a lab file, in
/// an environment variable) for reading: it must be a regular file, or a
/// link to one. A device (`/dev/zero`), a FIFO, a socket or a directory
/// is refused with what it is, never read: a read from one may never end.
/// A FIFO is not waited on (the open does not block).
pub(crate) fn open_regular(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    // Looked at first, so that a device is never opened at all (opening
    // some has an effect); the open file is looked at again, so that what
    // was swapped in between is caught too.
    let not_regular = |kind: std::fs::FileType| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("is {}, not a regular file", kind_of(kind)),
        )
    };
    let kind = std::fs::metadata(path)?.file_type();
    if !kind.is_file() {
        return Err(not_regular(kind));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(not_regular(kind));
    }
    Ok(file)
}

/// What a file is, in words: `a directory`, `a character device`.
pub(crate) fn kind_of(kind: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_dir() {
        "a directory"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_file() {
        "a regular file"
    } else {
        "not a file"
    }
}

/// The bytes of a regular file the user named ([`open_regular`]), of at
/// most `limit` bytes: a file beyond it is refused with its bound, never
/// read into memory whole.
pub(crate) fn read_bounded(path: &std::path::Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let too_long = || {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("longer than {limit} bytes; is it the right file?"),
        )
    };
    let file = open_regular(path)?;
    if file.metadata()?.len() > limit {
        return Err(too_long());
    }
    let mut bytes = Vec::new();
    // The bound holds even for a file that grows while it is read.
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_long());
    }
    Ok(bytes)
}

/// The bytes an unprivileged writer may still put on the file system of
/// `dir` (statvfs's `f_bavail`: the space kept for root is left to the
/// host).
pub(crate) fn free_bytes(dir: &std::path::Path) -> std::io::Result<u64> {
    Ok(sys::space(dir)?.free)
}

/// A text file the user named, as [`read_bounded`] reads it (a spec, a
/// URL list, a lab file): UTF-8, at most `limit` bytes.
pub(crate) fn read_text_bounded(path: &std::path::Path, limit: u64) -> std::io::Result<String> {
    String::from_utf8(read_bounded(path, limit)?).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "is not text (not UTF-8); is it the right file?",
        )
    })
}

/// Set once standard output, or standard error, could not be written (the
/// reader went away: `| head`): later text for it is dropped.
static STDOUT_GONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static STDERR_GONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Writes to standard output and flushes, every control character but
/// newline and tab made [`printable`]: text from outside (a lab's or a
/// variant's name, a server's message, a hook's output) never reaches a
/// terminal as an escape sequence. A reader that went away ends this
/// output, quietly, not the process: a run whose terminal or pipe is gone
/// goes on measuring into its store. False once output is gone.
pub(crate) fn out(args: std::fmt::Arguments<'_>) -> bool {
    let text = std::fmt::format(args);
    write_or_drop(
        &mut std::io::stdout().lock(),
        format_args!("{}", printable(&text)),
        &STDOUT_GONE,
    )
}

/// As [`out`], for perflab's own terminal control (the live progress
/// line's carriage return and line erase), written as it is: `args` must
/// hold no text from outside.
pub(crate) fn out_control(args: std::fmt::Arguments<'_>) -> bool {
    write_or_drop(&mut std::io::stdout().lock(), args, &STDOUT_GONE)
}

/// As [`out`], for standard error.
pub(crate) fn err(args: std::fmt::Arguments<'_>) -> bool {
    let text = std::fmt::format(args);
    write_or_drop(
        &mut std::io::stderr().lock(),
        format_args!("{}", printable(&text)),
        &STDERR_GONE,
    )
}

fn write_or_drop(
    to: &mut impl std::io::Write,
    args: std::fmt::Arguments<'_>,
    gone: &std::sync::atomic::AtomicBool,
) -> bool {
    use std::sync::atomic::Ordering;
    if gone.load(Ordering::Relaxed) {
        return false;
    }
    let written = to.write_fmt(args).and_then(|()| to.flush()).is_ok();
    if !written {
        gone.store(true, Ordering::Relaxed);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panics_text_is_its_literal_or_its_formatted_message_and_nothing_else() {
        let literal: Box<dyn std::any::Any + Send> = Box::new("a literal");
        assert_eq!(panic_text(literal.as_ref()), Some("a literal"));
        let formatted: Box<dyn std::any::Any + Send> = Box::new(format!("{} formatted", 1));
        assert_eq!(panic_text(formatted.as_ref()), Some("1 formatted"));
        let other: Box<dyn std::any::Any + Send> = Box::new(7_u32);
        assert_eq!(panic_text(other.as_ref()), None);
    }

    #[test]
    fn a_long_value_is_clipped_to_one_readable_line() {
        assert_eq!(clipped("agent://gen1:7071"), "agent://gen1:7071");
        let long = "a".repeat(53_000);
        let shown = clipped(&long);
        assert!(
            shown.len() < 120 && shown.ends_with("(53000 bytes in all)"),
            "{shown}"
        );
        // Never cut inside a character.
        let wide = "é".repeat(100);
        assert!(clipped(&wide).starts_with(&"é".repeat(60)));
    }

    #[test]
    fn control_characters_never_reach_a_terminal() {
        assert_eq!(printable("vda\tsda\n"), "vda\tsda\n");
        assert_eq!(
            printable("eth0\x1b[2J\x07\r\u{9b}x"),
            "eth0\u{fffd}[2J\u{fffd}\u{fffd}\u{fffd}x"
        );
        assert_eq!(
            one_line("a\x1b]0;owned\x07 b\n c"),
            "a\u{fffd}]0;owned\u{fffd} b c"
        );
    }

    #[test]
    fn a_text_file_is_read_only_up_to_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x.txt");
        std::fs::write(&f, "size=4k\n").unwrap();
        assert_eq!(read_text_bounded(&f, 8).unwrap(), "size=4k\n");
        let err = read_text_bounded(&f, 7).unwrap_err().to_string();
        assert!(err.contains("longer than 7 bytes"), "{err}");
    }

    /// A device, a FIFO or a directory is refused at once, saying what it
    /// is: never read (`/dev/zero` would never end), never waited on (a
    /// FIFO without a writer).
    #[test]
    fn only_a_regular_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        for (path, says) in [
            (std::path::Path::new("/dev/zero"), "is a character device"),
            (fifo.as_path(), "is a FIFO"),
            (dir.path(), "is a directory"),
        ] {
            let err = read_text_bounded(path, 1 << 16).unwrap_err().to_string();
            assert_eq!(err, format!("{says}, not a regular file"));
            assert!(read_bounded(path, 1 << 16).is_err());
            assert!(open_regular(path).is_err());
        }
        // A link to a regular file is read; one to a device is not.
        let file = dir.path().join("x.pem");
        std::fs::write(&file, "text").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_text_bounded(&link, 4).unwrap(), "text");
        let zero = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(read_bounded(&zero, 4).is_err());
        std::fs::write(&file, [0xff, 0xfe]).unwrap();
        assert!(read_text_bounded(&file, 4)
            .unwrap_err()
            .to_string()
            .contains("not text"));
    }
}

/// Test support: the system allocator, counting each thread's allocations,
/// for the tests that prove a hot path allocates nothing.
#[cfg(test)]
pub(crate) mod counting_alloc {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    /// The system allocator, counting the allocations of each thread, so a
    /// test sees its own and not those of tests running beside it.
    struct CountingAllocator;

    thread_local! {
        static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    }

    // SAFETY: every call is passed on to the system allocator unchanged;
    // the count is a const-initialised thread-local, which never allocates.
    unsafe impl GlobalAlloc for CountingAllocator {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
            System.alloc(layout)
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            System.dealloc(ptr, layout)
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
            System.realloc(ptr, layout, new_size)
        }
    }

    #[global_allocator]
    static ALLOCATOR: CountingAllocator = CountingAllocator;

    /// Allocations made by this thread so far.
    pub(crate) fn allocations() -> u64 {
        ALLOCATIONS.with(Cell::get)
    }
}

/// The kernel's id of this boot (`/proc/sys/kernel/random/boot_id`): two
/// processes that read the same one run on the same host, whatever
/// network namespace or address each is reached at. None where it cannot
/// be read.
pub(crate) fn boot_id() -> Option<String> {
    let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = text.trim();
    (!id.is_empty()).then(|| id.to_string())
}

/// Student's t at 0.975 for 1–30 degrees of freedom (the standard table),
/// the normal 1.96 beyond, and an infinite half-width for none: the
/// multiplier of a two-sided 95% interval of a mean from `df + 1` values.
pub(crate) fn t_975(df: usize) -> f64 {
    const T_975: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        _ => T_975.get(df - 1).copied().unwrap_or(1.96),
    }
}
