//! The direction of the crate's imports, checked on its own source: every
//! module sits on a layer and imports only from the layers below it
//! ([`LAYERS`]; DESIGN.md, "Imports run one way"), so no two modules import
//! each other, and the files of one module do not import each other in a
//! circle. A test reads `src/` as text: any `crate::NAME` in
//! code (comments left out) is an import of module NAME.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first. A module imports only from the layers below
/// its own: never from its own layer's other modules, never from above.
/// Data flows cli → plan → engine (workload sessions, measure recorders,
/// probe samples) → store → analyze → report → commands; the imports
/// point down this list.
const LAYERS: &[&[&str]] = &[
    &["util", "error", "units", "secret"],
    &["wire"],
    &["measure"],
    &["probe"],
    &["target"],
    &["plan"],
    &["workload"],
    &["engine"],
    &["store"],
    &["analyze"],
    &["doctor"],
    &["report"],
    &["agent"],
    &["cli"],
    &["lab", "kube"],
    &["commands"],
];

/// The layer of `module`; none for a name that is no module of the crate.
fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// What `module` must not import: its layer's other modules and every
/// module above.
fn forbidden_for(module: &str) -> Vec<&'static str> {
    let Some(layer) = layer_of(module) else {
        return Vec::new();
    };
    LAYERS[layer..]
        .iter()
        .flat_map(|l| l.iter().copied())
        .filter(|m| *m != module)
        .collect()
}

/// The `.rs` files of a module: `src/NAME.rs` or everything under `src/NAME/`.
fn module_files(src: &Path, module: &str) -> Vec<PathBuf> {
    let file = src.join(format!("{module}.rs"));
    if file.is_file() {
        return vec![file];
    }
    let mut files = Vec::new();
    let mut dirs = vec![src.join(module)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for path in entries.flatten().map(|e| e.path()) {
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The code of a file without its comments (`//`, `///`, `//!` to the end
/// of the line; perflab has no block comments).
fn code(text: &str) -> String {
    text.lines()
        .map(|line| {
            // A `//` inside a string ("http://…") is code: the comment
            // starts at the first one outside quotes.
            let start = line
                .match_indices("//")
                .map(|(at, _)| at)
                .find(|at| line[..*at].matches('"').count() % 2 == 0);
            start.map_or(line, |at| &line[..at])
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names `prefix` is followed by in `code`: `crate::NAME`, and
/// `super::{A, B}` lists.
fn names_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in code.match_indices(prefix) {
        let rest = &code[at + prefix.len()..];
        if let Some(list) = rest.strip_prefix('{') {
            // The first segment of each item at the list's own level
            // (`{a::{b, c}, d}` names a and d).
            let mut depth = 0usize;
            let mut item = String::new();
            for c in list.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        first_segment(&item, &mut names);
                        item.clear();
                    }
                    c if depth == 0 => item.push(c),
                    _ => {}
                }
            }
            first_segment(&item, &mut names);
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            names.insert(name);
        }
    }
    names
}

/// The first path segment of one item of a `{…}` list, into `names`.
fn first_segment(item: &str, names: &mut BTreeSet<String>) {
    let name: String = item
        .trim()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    if !name.is_empty() && name != "self" {
        names.insert(name);
    }
}

/// Each broken rule: `FILE imports crate::NAME`.
fn forbidden_imports(src: &Path) -> Vec<String> {
    let mut broken = Vec::new();
    for module in LAYERS.iter().flat_map(|l| l.iter()) {
        let forbidden = forbidden_for(module);
        for file in module_files(src, module) {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            for name in names_after(&code(&text), "crate::") {
                if name != *module && forbidden.contains(&name.as_str()) {
                    let shown = file.strip_prefix(src).unwrap_or(&file).display();
                    broken.push(format!("src/{shown} imports crate::{name}"));
                }
            }
        }
    }
    broken
}

/// Circles among the files directly in one module's folder: file A names
/// `super::B` and B, through any path, names `super::A`.
fn circles(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let files: BTreeMap<String, String> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .filter_map(|p| {
            let stem = p.file_stem()?.to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&p).ok()?;
            (stem != "mod").then_some((stem, code(&text)))
        })
        .collect();
    let edges: BTreeMap<&str, BTreeSet<String>> = files
        .iter()
        .map(|(stem, code)| {
            let to = names_after(code, "super::")
                .into_iter()
                .filter(|n| n != stem && files.contains_key(n))
                .collect();
            (stem.as_str(), to)
        })
        .collect();
    let mut found = Vec::new();
    for start in edges.keys() {
        // Depth-first from `start`, looking for a way back to it.
        let mut stack: Vec<Vec<&str>> = vec![vec![start]];
        let mut seen = BTreeSet::new();
        while let Some(path) = stack.pop() {
            let last = path[path.len() - 1];
            for next in edges.get(last).into_iter().flatten() {
                if next == start {
                    let mut circle = path.clone();
                    circle.push(start);
                    found.push(circle.join(" → "));
                } else if seen.insert(next.clone()) {
                    let mut longer = path.clone();
                    longer.push(next);
                    stack.push(longer);
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
    }

    #[test]
    fn lower_modules_import_nothing_above_them() {
        let broken = forbidden_imports(&src());
        assert!(
            broken.is_empty(),
            "imports against the layers:\n{}",
            broken.join("\n")
        );
    }

    #[test]
    fn no_module_s_files_import_one_another_in_a_circle() {
        let mut found = Vec::new();
        let mut dirs = vec![src()];
        while let Some(dir) = dirs.pop() {
            for path in std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()) {
                if path.is_dir() {
                    found.extend(
                        circles(&path)
                            .into_iter()
                            .map(|c| format!("{}: {c}", path.display())),
                    );
                    dirs.push(path);
                }
            }
        }
        assert!(found.is_empty(), "files in a circle: {found:#?}");
    }

    /// The checks find what they look for: a fixture tree breaking both rules.
    #[test]
    fn a_tree_breaking_the_rules_is_caught() {
        let tree = tempfile::tempdir().unwrap();
        let src = tree.path();
        std::fs::create_dir_all(src.join("probe")).unwrap();
        std::fs::write(
            src.join("probe/remote.rs"),
            "//! Reads `crate::agent` (only a comment).\nuse crate::cli::PlanError;\nlet url = \"http://x\"; // crate::engine\n",
        )
        .unwrap();
        std::fs::write(
            src.join("util.rs"),
            "use crate::{units, plan::{Level, Sweep}};\n",
        )
        .unwrap();
        assert_eq!(
            forbidden_imports(src),
            [
                "src/util.rs imports crate::plan",
                "src/util.rs imports crate::units",
                "src/probe/remote.rs imports crate::cli",
            ]
        );
        std::fs::create_dir_all(src.join("engine")).unwrap();
        std::fs::write(src.join("engine/worker.rs"), "use super::{closed, open};\n").unwrap();
        std::fs::write(src.join("engine/closed.rs"), "use super::state::State;\n").unwrap();
        std::fs::write(src.join("engine/open.rs"), "use super::worker::State;\n").unwrap();
        std::fs::write(src.join("engine/state.rs"), "pub struct State;\n").unwrap();
        let found = circles(&src.join("engine"));
        assert!(
            found.iter().any(|c| c == "open → worker → open"),
            "{found:?}"
        );
        assert!(!found.iter().any(|c| c.contains("closed")), "{found:?}");
    }
}
