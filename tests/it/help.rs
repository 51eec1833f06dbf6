//! The documentation and `--help` agree: every command line that README.md
//! and the guide in `docs/` show parses, every flag `--help` lists is
//! documented, the README stays a front page whose links resolve and that
//! lists every destructive flag, and the help of `perflab run bank` names
//! every target scheme and the real quick sweep.

use clap::{CommandFactory, Parser};
use perflab::cli::Cli;
use std::path::{Path, PathBuf};

/// The project's root, where README.md and `docs/` are.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).expect("README.md is readable")
}

/// README.md and every page of `docs/`, by path relative to the root.
fn documents() -> Vec<(PathBuf, String)> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ is readable")
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    pages.sort();
    let mut out = vec![(PathBuf::from("README.md"), readme())];
    for page in pages {
        let text = std::fs::read_to_string(&page).expect("a docs page is readable");
        let relative = page
            .strip_prefix(root())
            .expect("under the root")
            .to_path_buf();
        out.push((relative, text));
    }
    out
}

/// A document's example command lines: `perflab …` in code blocks, after
/// any environment assignments or `taskset -c N`, up to a comment; each
/// with its line number.
fn examples(doc: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    let mut in_code = false;
    for (number, line) in doc.lines().enumerate() {
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
        out.push((
            number + 1,
            shell_words(&command.replace("\"$(pidof mariadbd)\"", "1")),
        ));
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
fn every_documented_command_line_parses() {
    let mut total = 0;
    for (path, text) in documents() {
        for (line, words) in examples(&text) {
            total += 1;
            if let Err(e) = Cli::try_parse_from(&words) {
                panic!(
                    "{}:{line}: `{}` does not parse: {e}",
                    path.display(),
                    words.join(" ")
                );
            }
        }
    }
    assert!(total > 40, "found only {total} examples");
    for page in [
        "bank", "web", "disk", "files", "null", "lab", "reports", "hosts",
    ] {
        let text = std::fs::read_to_string(root().join(format!("docs/{page}.md")))
            .unwrap_or_else(|e| panic!("docs/{page}.md: {e}"));
        assert!(
            !examples(&text).is_empty(),
            "docs/{page}.md shows no `perflab …` line"
        );
    }
}

/// The check above catches a wrong example, wherever in a page it stands.
#[test]
fn a_wrong_example_fails_to_parse() {
    let page = "# A page\n\n```sh\nperflab run bank --quick\nPGUSER=bank perflab run bank --no-such-flag   # wrong\n```\n";
    let found = examples(page);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(Cli::try_parse_from(&found[0].1).is_ok());
    assert_eq!(found[1].0, 5);
    assert!(Cli::try_parse_from(&found[1].1).is_err());
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
fn every_flag_in_help_is_documented() {
    let docs: String = documents().into_iter().map(|(_, text)| text).collect();
    let mut all = Vec::new();
    flags(&Cli::command(), "perflab", &mut all);
    let missing: Vec<String> = all
        .iter()
        .filter(|(_, flag)| {
            !docs.contains(&format!("{flag} ")) && !docs.contains(&format!("{flag}`"))
        })
        .map(|(path, flag)| format!("{path} {flag}"))
        .collect();
    assert!(missing.is_empty(), "not in README.md or docs/: {missing:?}");
}

/// The README is a front page: short, and a link to every page of the guide.
#[test]
fn the_readme_is_a_front_page_linking_every_page() {
    let readme = readme();
    let lines = readme.lines().count();
    assert!(
        lines <= 300,
        "README.md is {lines} lines: move detail to docs/"
    );
    for (path, _) in documents().iter().skip(1) {
        let link = format!("]({})", path.display());
        assert!(
            readme.contains(&link),
            "README.md does not link {}",
            path.display()
        );
    }
}

/// Every relative link of README.md and docs/ names a file that exists.
#[test]
fn every_relative_link_resolves() {
    let mut broken = Vec::new();
    for (path, text) in documents() {
        let dir = root().join(path.parent().unwrap_or(Path::new("")));
        for target in text
            .split("](")
            .skip(1)
            .filter_map(|rest| rest.split(')').next())
        {
            let file = target.split('#').next().unwrap_or("");
            if file.is_empty() || file.contains("://") || file.starts_with("mailto:") {
                continue;
            }
            if !dir.join(file).exists() {
                broken.push(format!("{}: {target}", path.display()));
            }
        }
    }
    assert!(broken.is_empty(), "links to nothing: {broken:?}");
}

/// The section of `doc` under the heading `title`, up to the next heading
/// of the same level or above.
fn section<'a>(doc: &'a str, title: &str) -> &'a str {
    let start = doc
        .find(title)
        .unwrap_or_else(|| panic!("no section {title:?}"));
    let level = title.chars().take_while(|c| *c == '#').count();
    let rest = &doc[start + title.len()..];
    let end = rest
        .match_indices("\n#")
        .find(|(at, _)| {
            let hashes = rest[at + 1..].chars().take_while(|c| *c == '#').count();
            hashes <= level && rest[at + 1 + hashes..].starts_with(' ')
        })
        .map_or(rest.len(), |(at, _)| at);
    &rest[..end]
}

/// The README itself lists every destructive flag that docs/safety.md's
/// table holds, and that table holds the flags that overwrite a target.
#[test]
fn the_readme_lists_every_destructive_flag() {
    let safety = std::fs::read_to_string(root().join("docs/safety.md")).expect("docs/safety.md");
    let table = section(&safety, "## Every destructive flag");
    let listed: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("| `"))
        .flat_map(|l| l.split('|').nth(1).unwrap_or("").split(", "))
        .map(|cell| cell.trim().trim_matches('`'))
        .collect();
    let mut all = Vec::new();
    flags(&Cli::command(), "perflab", &mut all);
    for flag in ["--reload", "--destroy-data"] {
        assert!(all.iter().any(|(_, f)| f == flag), "{flag} is no flag");
        assert!(
            listed.contains(&flag),
            "docs/safety.md does not list {flag}"
        );
    }
    let readme = readme();
    let front = section(&readme, "## What perflab may destroy");
    for entry in &listed {
        let name = entry.split(' ').next().unwrap_or(entry);
        let words = entry.trim_start_matches("perflab ");
        assert!(
            front.contains(&format!("`{entry}`"))
                || front.contains(&format!("`{name} "))
                || front.contains(words),
            "README.md's destructive flags leave out {entry}"
        );
    }
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
