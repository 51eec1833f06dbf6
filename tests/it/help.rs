//! The README and `--help` agree: every command line the README shows
//! parses, every flag `--help` lists is in the README, and the help of
//! `perflab run bank` names every target scheme and the real quick sweep.

use clap::{CommandFactory, Parser};
use perflab::cli::Cli;

/// The README and the guide's pages that show command lines.
fn readme() -> String {
    ["README.md", "docs/live.md"]
        .iter()
        .map(|page| {
            std::fs::read_to_string(format!("{}/{page}", env!("CARGO_MANIFEST_DIR")))
                .unwrap_or_else(|e| panic!("{page} is readable: {e}"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The README's example command lines: `perflab …` in code blocks, after
/// any environment assignments or `taskset -c N`, up to a comment.
fn examples(readme: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in readme.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if !in_code {
            continue;
        }
        let line = line.split(" #").next().unwrap_or("").trim();
        let Some(at) = line.find("perflab ") else {
            continue;
        };
        let before = &line[..at];
        if !before
            .split_whitespace()
            .all(|w| w.contains('=') || w == "taskset" || w == "-c" || w.parse::<u32>().is_ok())
        {
            continue;
        }
        let command = line[at..].split(['>', '|']).next().unwrap_or("");
        out.push(shell_words(&command.replace("\"$(pidof mariadbd)\"", "1")));
    }
    out
}

/// A command line split as a shell splits it: on blanks outside quotes,
/// the quotes removed.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    let mut started = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (None, c) if c.is_whitespace() => {
                if started || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                started = false;
            }
            (None, c) => word.push(c),
        }
    }
    if started || !word.is_empty() {
        words.push(word);
    }
    words
}

#[test]
fn every_readme_command_line_parses() {
    let examples = examples(&readme());
    assert!(
        examples.len() > 40,
        "found only {} examples",
        examples.len()
    );
    for words in &examples {
        if let Err(e) = Cli::try_parse_from(words) {
            panic!("README: `{}` does not parse: {e}", words.join(" "));
        }
    }
}

/// Every long flag of `cmd` and its subcommands, with the command path.
fn flags(cmd: &clap::Command, path: &str, out: &mut Vec<(String, String)>) {
    for arg in cmd.get_arguments() {
        if let Some(long) = arg.get_long() {
            if long != "help" && long != "version" {
                out.push((path.to_string(), format!("--{long}")));
            }
        }
    }
    for sub in cmd.get_subcommands() {
        flags(sub, &format!("{path} {}", sub.get_name()), out);
    }
}

#[test]
fn every_flag_in_help_is_in_the_readme() {
    let readme = readme();
    let mut all = Vec::new();
    flags(&Cli::command(), "perflab", &mut all);
    let missing: Vec<String> = all
        .iter()
        .filter(|(_, flag)| {
            !readme.contains(&format!("{flag} ")) && !readme.contains(&format!("{flag}`"))
        })
        .map(|(path, flag)| format!("{path} {flag}"))
        .collect();
    assert!(missing.is_empty(), "not in the README: {missing:?}");
}

#[test]
fn run_help_names_every_target_scheme_and_the_real_quick_sweep() {
    let mut cmd = Cli::command();
    let bank = cmd
        .find_subcommand_mut("run")
        .and_then(|run| run.find_subcommand_mut("bank"))
        .expect("perflab run bank exists");
    let help = bank.render_long_help().to_string();
    for scheme in ["sqlite:", "postgres://", "postgres:managed", "mysql://"] {
        assert!(help.contains(scheme), "no {scheme} in:\n{help}");
    }
    let quick = perflab::cli::QUICK_USERS;
    assert!(
        help.contains(&format!("users {quick},")),
        "--quick's help does not say {quick}:\n{help}"
    );
    let cli = Cli::try_parse_from(["perflab", "run", "null", "--quick"]).expect("parses");
    let perflab::cli::Command::Run(run) = cli.command else {
        panic!("a run")
    };
    let (_, plan) = perflab::cli::plan_from(&run).expect("a plan");
    let levels: Vec<String> = plan
        .sweep
        .levels
        .iter()
        .map(|l| match l {
            perflab::plan::Level::Users(n) => n.to_string(),
            other => panic!("--quick is a closed loop, not {other:?}"),
        })
        .collect();
    assert_eq!(levels.join(","), quick, "--quick runs what its help says");
}
