//! The shape of the crate, checked on its own source (docs/ARCHITECTURE.md,
//! "Invariants"): every module of `lib.rs` sits on a layer and imports only
//! from the layers below it ([`LAYERS`]), and no files import each other in
//! a circle. A test reads `src/` as text: every `use` and every path from
//! `crate::`, `super::` or `self::` in code (comments and strings left out)
//! is an import, followed through re-exports to the file that defines what
//! it names.

mod code_map;
mod imports;
#[cfg(test)]
mod kinds;
#[cfg(test)]
mod tests;

use imports::Import;
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
    &["sut"],
    &["plan"],
    &["record"],
    &["workload"],
    &["engine"],
    &["store"],
    &["analyze"],
    &["doctor"],
    &["report"],
    &["agent"],
    &["live"],
    &["cli"],
    &["lab", "kube"],
    &["commands"],
];

/// Modules of `lib.rs` on no layer: this check, which only tests build.
const UNLAYERED: &[&str] = &["layers"];

/// One source file of the crate.
struct SourceFile {
    /// Its path below `src/`.
    path: PathBuf,
    /// Its module's path: `["probe", "counters"]` for
    /// `probe/counters/mod.rs` and `probe/counters.rs`; empty for `lib.rs`.
    module: Vec<String>,
    /// Its code (no comments, no string contents).
    code: String,
}

/// Every `.rs` file under `src/` but the binary's `main.rs`; an error names
/// what could not be read (a check that cannot read the tree fails).
struct Tree {
    files: Vec<SourceFile>,
    /// Each module's file, by the module's path.
    modules: BTreeMap<Vec<String>, usize>,
}

impl Tree {
    fn read(src: &Path) -> Result<Tree, String> {
        let mut files = Vec::new();
        let mut dirs = vec![src.to_path_buf()];
        while let Some(dir) = dirs.pop() {
            let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            for entry in entries {
                let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let rel = path.strip_prefix(src).unwrap_or(&path).to_path_buf();
                    if rel == Path::new("main.rs") {
                        continue;
                    }
                    let text = std::fs::read_to_string(&path)
                        .map_err(|e| format!("{}: {e}", path.display()))?;
                    files.push(SourceFile {
                        module: module_of(&rel),
                        code: imports::code(&text),
                        path: rel,
                    });
                }
            }
        }
        if files.is_empty() {
            return Err(format!("{}: no Rust source in it", src.display()));
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let modules = files
            .iter()
            .enumerate()
            .map(|(at, f)| (f.module.clone(), at))
            .collect();
        Ok(Tree { files, modules })
    }

    fn is_module(&self, path: &[String]) -> bool {
        self.modules.contains_key(path)
    }

    /// Each file's imports, made absolute.
    fn imports(&self) -> Vec<Vec<Import>> {
        self.files
            .iter()
            .map(|f| imports::imports(&f.code, &f.module, &|p| self.is_module(p)))
            .collect()
    }

    /// The file that defines what `path` names: the file of its longest
    /// module prefix, or, where that file only imports the item it is
    /// asked for (a re-export), the file that defines it.
    fn defining_file(&self, path: &[String], imports: &[Vec<Import>]) -> Option<usize> {
        let mut path = path.to_vec();
        for _ in 0..8 {
            let depth = (0..=path.len())
                .rev()
                .find(|d| self.is_module(&path[..*d]))?;
            let file = self.modules[&path[..depth]];
            let Some(item) = path.get(depth) else {
                return Some(file);
            };
            if defines(&self.files[file].code, item) {
                return Some(file);
            }
            match imports[file].iter().find(|i| &i.seen_as == item) {
                Some(import) => path = import.path.clone(),
                None => return Some(file),
            }
        }
        None
    }

    fn shown(&self, file: usize) -> String {
        format!("src/{}", self.files[file].path.display())
    }
}

/// The module path of a file below `src/`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// Whether `code` defines an item named `name`.
fn defines(code: &str, name: &str) -> bool {
    const KINDS: &[&str] = &[
        "struct", "enum", "union", "fn", "trait", "type", "const", "static", "mod",
    ];
    KINDS.iter().any(|kind| {
        let word = format!("{kind} {name}");
        code.match_indices(&word).any(|(at, _)| {
            let before = code[..at].chars().next_back();
            let after = code[at + word.len()..].chars().next();
            before.is_none_or(|c| !c.is_alphanumeric() && c != '_')
                && after.is_none_or(|c| !c.is_alphanumeric() && c != '_')
        })
    }) || code.contains(&format!("macro_rules! {name}"))
}

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

/// The modules `lib.rs` declares against [`LAYERS`]: each one declared but
/// on no layer, and each one on a layer but not declared.
fn unlisted_modules(tree: &Tree) -> Vec<String> {
    let Some(root) = tree.modules.get(&Vec::new()) else {
        return vec!["src/lib.rs is missing".to_string()];
    };
    let declared: BTreeSet<&str> = tree.files[*root]
        .code
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let line = line
                .strip_prefix("pub(crate) ")
                .or_else(|| line.strip_prefix("pub "))
                .unwrap_or(line);
            line.strip_prefix("mod ")?.strip_suffix(';').map(str::trim)
        })
        .collect();
    let layered: BTreeSet<&str> = LAYERS.iter().flat_map(|l| l.iter().copied()).collect();
    let mut found: Vec<String> = declared
        .iter()
        .filter(|m| !layered.contains(*m) && !UNLAYERED.contains(*m))
        .map(|m| format!("src/lib.rs declares module {m}, which is on no layer of LAYERS"))
        .collect();
    found.extend(
        layered
            .iter()
            .filter(|m| !declared.contains(*m))
            .map(|m| format!("LAYERS lists {m}, which src/lib.rs does not declare")),
    );
    found
}

/// Each broken rule: `FILE imports crate::NAME`. Tests (a `tests`
/// module, inline or a file) may drive the crate from any layer, as a
/// dev-dependency would: what they import is not the product's.
fn forbidden_imports(tree: &Tree, imports: &[Vec<Import>]) -> Vec<String> {
    let mut broken = BTreeSet::new();
    for (at, file) in tree.files.iter().enumerate() {
        let Some(own) = file.module.first() else {
            continue;
        };
        if file.module.last().is_some_and(|m| m == "tests") {
            continue;
        }
        let forbidden = forbidden_for(own);
        for import in imports[at].iter().filter(|i| !i.in_tests) {
            if let Some(name) = import.path.first() {
                if name != own && forbidden.contains(&name.as_str()) {
                    broken.insert(format!("{} imports crate::{name}", tree.shown(at)));
                }
            }
        }
    }
    broken.into_iter().collect()
}

/// The files that import each other in a circle, each circle as its
/// imports (`A -> B: Name`). A file may use what the files of the modules
/// it sits in define (a child uses its parent's items), and tests may use
/// what they test: neither makes a circle.
fn circles(tree: &Tree, imports: &[Vec<Import>]) -> Vec<String> {
    let mut edges: BTreeMap<usize, BTreeMap<usize, BTreeSet<String>>> = BTreeMap::new();
    for (from, file) in tree.files.iter().enumerate() {
        if file.module.last().is_some_and(|m| m == "tests") {
            continue;
        }
        for import in imports[from].iter().filter(|i| !i.in_tests) {
            let Some(to) = tree.defining_file(&import.path, imports) else {
                continue;
            };
            let parent = file.module.starts_with(&tree.files[to].module);
            if to != from && !parent {
                edges
                    .entry(from)
                    .or_default()
                    .entry(to)
                    .or_default()
                    .insert(import.seen_as.clone());
            }
        }
    }
    let graph: BTreeMap<usize, Vec<usize>> = edges
        .iter()
        .map(|(from, to)| (*from, to.keys().copied().collect()))
        .collect();
    strongly_connected(&graph)
        .into_iter()
        .filter(|group| group.len() > 1)
        .map(|group| {
            let ties: Vec<String> = group
                .iter()
                .flat_map(|from| {
                    edges[from]
                        .iter()
                        .filter(|(to, _)| group.contains(to))
                        .map(|(to, names)| {
                            let names: Vec<&str> = names.iter().map(String::as_str).collect();
                            format!(
                                "{} -> {}: {}",
                                tree.shown(*from),
                                tree.shown(*to),
                                names.join(", ")
                            )
                        })
                })
                .collect();
            ties.join("; ")
        })
        .collect()
}

/// The strongly connected groups of `graph` (Tarjan's algorithm).
fn strongly_connected(graph: &BTreeMap<usize, Vec<usize>>) -> Vec<BTreeSet<usize>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<usize, Vec<usize>>,
        index: BTreeMap<usize, usize>,
        low: BTreeMap<usize, usize>,
        stack: Vec<usize>,
        on_stack: BTreeSet<usize>,
        groups: Vec<BTreeSet<usize>>,
    }
    impl Walk<'_> {
        fn visit(&mut self, node: usize) {
            let at = self.index.len();
            self.index.insert(node, at);
            self.low.insert(node, at);
            self.stack.push(node);
            self.on_stack.insert(node);
            for &next in self.graph.get(&node).into_iter().flatten() {
                if !self.index.contains_key(&next) {
                    self.visit(next);
                    let low = self.low[&node].min(self.low[&next]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(&next) {
                    let low = self.low[&node].min(self.index[&next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[&node] == self.index[&node] {
                let mut group = BTreeSet::new();
                while let Some(top) = self.stack.pop() {
                    self.on_stack.remove(&top);
                    group.insert(top);
                    if top == node {
                        break;
                    }
                }
                self.groups.push(group);
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        groups: Vec::new(),
    };
    for &node in graph.keys() {
        if !walk.index.contains_key(&node) {
            walk.visit(node);
        }
    }
    walk.groups
}

/// Everything wrong with the tree under `src`: modules off the layers,
/// imports against them, circles.
fn problems(src: &Path) -> Result<Vec<String>, String> {
    let tree = Tree::read(src)?;
    let imports = tree.imports();
    let mut found = unlisted_modules(&tree);
    found.extend(forbidden_imports(&tree, &imports));
    found.extend(
        circles(&tree, &imports)
            .into_iter()
            .map(|c| format!("circle: {c}")),
    );
    Ok(found)
}
