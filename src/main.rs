//! The perflab binary: parse, run, print one error line, exit with a
//! documented code (0 ok, 1 run failed, 2 bad input, 130 interrupted,
//! 143 terminated or hung up).
//!
//! A reader that stops early (`perflab show 1 --json - | head`) does not
//! end the process: SIGPIPE stays ignored, as Rust
//! leaves it, and every line goes through `util::out`/`util::err`, which
//! drop what can no longer be written — a run goes on measuring into its
//! store. A panic, a bug, is one line too (`commands::panic_line`).

#![cfg_attr(not(test), warn(clippy::too_many_lines))]

fn main() {
    perflab::commands::one_line_panics();
    std::process::exit(perflab::commands::main_with_args(std::env::args_os()));
}
