//! The perflab binary: parse, run, print one error line, exit with a
//! documented code (0 ok, 1 run failed, 2 bad input, 130 interrupted).

fn main() {
    // Output piped into a reader that stops early (`perflab show 1 --json - |
    // head`) ends the process quietly, as with any Unix tool, instead of a
    // panic on the closed pipe; every finished step is already stored.
    // SAFETY: setting a signal's disposition to its default before any
    // thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::process::exit(perflab::commands::main_with_args(std::env::args_os()));
}
