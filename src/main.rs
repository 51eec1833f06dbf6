//! The perflab binary: parse, run, print one error line, exit with a
//! documented code (0 ok, 1 run failed, 2 bad input, 130 interrupted).

fn main() {
    std::process::exit(perflab::commands::main_with_args(std::env::args_os()));
}
