//! docs/ARCHITECTURE.md against the tree it describes. Its code map has a
//! heading per top-level folder (`### \`src/NAME/\``); in a folder's
//! section a path in backticks (`` `bank/` ``, `` `managed/server.rs` ``)
//! is below that folder, and one that starts with a folder of the
//! repository (`src/`, `docs/`, `tests/` …) is from the repository's root.
//! Every folder under `src/`, at any depth, must be named by such a path
//! (a folder beside its module's file, `threads/` beside `threads.rs`, is
//! named with that file), and so must every file directly in `src/`; and
//! every path the code map names must exist. Anywhere on the page, a
//! path of the crate in backticks (`` `commands::main_with_args` ``) must
//! name a module, or an item its module (or a module below it) defines;
//! one that starts with a type (`` `Store::create_run` ``) must name a type
//! and an item the crate defines.

use super::{defines, Tree};
use std::collections::BTreeSet;
use std::path::Path;

/// Folders of the repository a path on the page may start from.
const ROOTS: &[&str] = &[
    "src/", "docs/", "tests/", "scripts/", "bench/", "schema/", "labs/",
];

/// Everything the page `doc` gets wrong about the repository at `root`
/// (which holds `src/`), one line each.
pub(super) fn problems(root: &Path, doc: &str) -> Result<Vec<String>, String> {
    let src = root.join("src");
    let named = named_paths(doc);
    let mut found: Vec<String> = named
        .iter()
        .filter(|p| !root.join(p).exists())
        .map(|p| format!("the code map names {p}, which does not exist"))
        .collect();
    let mut folders = Vec::new();
    folders_below(&src, &mut folders)?;
    found.extend(top_level_files(&src)?.into_iter().filter_map(|f| {
        let path = format!("src/{f}");
        (!named.contains(&path)).then(|| format!("the code map does not name the file {path}"))
    }));
    found.extend(
        folders
            .iter()
            .filter_map(|f| f.strip_prefix(root).ok())
            .map(|f| f.display().to_string())
            .filter(|f| !named.contains(&format!("{f}/")) && !named.contains(&format!("{f}.rs")))
            .map(|f| format!("the code map does not name the folder {f}/")),
    );
    let tree = Tree::read(&src)?;
    found.extend(
        crate_paths(doc)
            .into_iter()
            .filter(|p| !names_something(&tree, p))
            .map(|p| format!("the page names `{p}`, which the crate does not define")),
    );
    Ok(found)
}

/// Every folder below `dir`, at any depth.
fn folders_below(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        if path.is_dir() {
            folders_below(&path, out)?;
            out.push(path);
        }
    }
    Ok(())
}

/// The names of the `.rs` files directly in `src`.
fn top_level_files(src: &Path) -> Result<Vec<String>, String> {
    let entries = std::fs::read_dir(src).map_err(|e| format!("{}: {e}", src.display()))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", src.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".rs") && entry.path().is_file() {
            files.push(name);
        }
    }
    Ok(files)
}

/// The text in backticks of `text`.
fn quoted(text: &str) -> impl Iterator<Item = &str> {
    text.split('`').skip(1).step_by(2)
}

/// The page cut at its headings: each heading line (empty for the text
/// before the first) with the text under it on one line, code fences left
/// out, so that text in backticks may run across a line break.
fn sections(doc: &str) -> Vec<(&str, String)> {
    let mut out: Vec<(&str, String)> = vec![("", String::new())];
    for line in doc.lines().filter(|l| !l.starts_with("```")) {
        if line.starts_with('#') {
            out.push((line, String::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push(' ');
            body.push_str(line);
        }
    }
    out
}

/// The paths the code map names, from the repository's root: its folder
/// headings and the file or folder paths in backticks of each section.
fn named_paths(doc: &str) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    let mut in_map = false;
    for (heading, body) in sections(doc) {
        if let Some(title) = heading.strip_prefix("## ") {
            in_map = title.trim() == "Code map";
        }
        if !in_map {
            continue;
        }
        let folder = heading
            .strip_prefix("### ")
            .and_then(|title| quoted(title).next())
            .filter(|t| t.starts_with("src/") && t.ends_with('/'))
            .unwrap_or("src/");
        if folder != "src/" {
            named.insert(folder.to_string());
        }
        for token in quoted(&body).filter(|t| is_file_path(t)) {
            if ROOTS.iter().any(|r| token.starts_with(r)) {
                named.insert(token.to_string());
            } else {
                named.insert(format!("{folder}{token}"));
            }
        }
    }
    named
}

/// Whether text in backticks is a path of a file or folder: plain path
/// characters, and a `/` or a file's extension in it.
fn is_file_path(token: &str) -> bool {
    !token.is_empty()
        && token
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
        && !token.starts_with('.')
        && !token.starts_with('/')
        && (token.contains('/') || token.ends_with(".rs") || token.ends_with(".md"))
}

/// The paths of the crate the page names in backticks (`a::b::c`,
/// `Type::item`), anywhere on it.
fn crate_paths(doc: &str) -> BTreeSet<String> {
    sections(doc)
        .iter()
        .flat_map(|(heading, body)| {
            quoted(heading)
                .chain(quoted(body))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|t| t.contains("::"))
        .filter(|t| {
            t.split("::").all(|part| {
                !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
        })
        .filter(|t| !t.starts_with(|c: char| c.is_ascii_digit()))
        .collect()
}

/// Whether `path` (`module::…::item`) is a module of the crate, or an item
/// defined in its longest module prefix or a module below that. A path
/// whose first word is no module of the crate (`std::…`) is not checked.
fn names_something(tree: &Tree, path: &str) -> bool {
    let parts: Vec<String> = path.split("::").map(str::to_string).collect();
    let parts = match parts.first().map(String::as_str) {
        Some("crate") => parts[1..].to_vec(),
        _ => parts,
    };
    let defined = |name: &str| tree.files.iter().any(|f| defines(&f.code, name));
    if let (Some(first), Some(last)) = (parts.first(), parts.last()) {
        if first.starts_with(|c: char| c.is_ascii_uppercase()) {
            return defined(first) && defined(last);
        }
    }
    if parts.is_empty() || !tree.is_module(&parts[..1]) {
        return true;
    }
    let depth = (1..=parts.len())
        .rev()
        .find(|d| tree.is_module(&parts[..*d]))
        .unwrap_or(0);
    let Some(item) = parts.last().filter(|_| depth < parts.len()) else {
        return true;
    };
    tree.files
        .iter()
        .filter(|f| f.module.starts_with(&parts[..depth]))
        .any(|f| defines(&f.code, item))
}

#[cfg(test)]
mod tests {
    use super::*;

    // A repository with `src/` holding `files`.
    use super::super::tests::tree as repo;

    const FILES: &[(&str, &str)] = &[
        ("src/lib.rs", "pub mod engine;\npub mod workload;\n"),
        ("src/engine/mod.rs", "pub fn run() {}\nmod batch;\n"),
        ("src/engine/batch.rs", "pub(super) struct Users;\n"),
        ("src/workload/mod.rs", "pub mod bank;\n"),
        ("src/workload/bank/mod.rs", "pub fn validate() {}\n"),
        ("docs/live.md", "# live\n"),
    ];

    const PAGE: &str = "# Page\n\n`engine::run` starts it.\n\n```\na ─► `b\n```\n\n\
        Run `perflab check\nbank` after it.\n\n## Code map\n\n\
        ### Top-level files\n\n`src/lib.rs` declares.\n\n\
        ### `src/engine/`\n\nIts `batch.rs` holds `engine::batch::Users`.\n\n\
        ### `src/workload/`\n\nOne folder each: `bank/`. See `docs/live.md`; \
        `http://` is no path.\n\n## Invariants\n\n`tests/it/none.rs` is not checked here.\n";

    #[test]
    fn a_page_that_names_every_folder_and_only_what_exists_passes() {
        let dir = repo(FILES);
        let found = problems(dir.path(), PAGE).unwrap();
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn a_folder_left_out_is_caught_at_any_depth() {
        let mut files = FILES.to_vec();
        files.push(("src/workload/bank/postgres/mod.rs", "pub fn open() {}\n"));
        let dir = repo(&files);
        let found = problems(dir.path(), PAGE).unwrap();
        assert_eq!(
            found,
            ["the code map does not name the folder src/workload/bank/postgres/"]
        );
    }

    #[test]
    fn a_folder_beside_its_modules_file_is_named_with_it() {
        let mut files = FILES.to_vec();
        files.push(("src/engine/batch/tests.rs", "fn t() {}\n"));
        let dir = repo(&files);
        assert!(problems(dir.path(), PAGE).unwrap().is_empty());
        let page = PAGE.replace("Its `batch.rs` holds", "It holds");
        let found = problems(dir.path(), &page).unwrap();
        assert_eq!(
            found,
            ["the code map does not name the folder src/engine/batch/"]
        );
    }

    #[test]
    fn a_top_level_file_left_out_is_caught() {
        let mut files = FILES.to_vec();
        files.push(("src/units.rs", "pub struct Bytes;\n"));
        let dir = repo(&files);
        let found = problems(dir.path(), PAGE).unwrap();
        assert_eq!(found, ["the code map does not name the file src/units.rs"]);
    }

    #[test]
    fn a_path_that_does_not_exist_is_caught() {
        let dir = repo(FILES);
        let page = PAGE.replace("`bank/`", "`bank/`, `cgroup.rs`");
        let found = problems(dir.path(), &page).unwrap();
        assert_eq!(
            found,
            ["the code map names src/workload/cgroup.rs, which does not exist"]
        );
    }

    #[test]
    fn a_function_the_crate_does_not_define_is_caught() {
        let dir = repo(FILES);
        let page = PAGE.replace("`engine::run`", "`engine::run_all`");
        let found = problems(dir.path(), &page).unwrap();
        assert_eq!(
            found,
            ["the page names `engine::run_all`, which the crate does not define"]
        );
        let page = PAGE.replace("`engine::run`", "`workload::bank::validate`");
        assert!(problems(dir.path(), &page).unwrap().is_empty());
        let page = PAGE.replace("`engine::run`", "`Users::run`");
        assert!(problems(dir.path(), &page).unwrap().is_empty());
        let page = PAGE.replace("`engine::run`", "`Users::start`");
        assert_eq!(
            problems(dir.path(), &page).unwrap(),
            ["the page names `Users::start`, which the crate does not define"]
        );
    }
}
