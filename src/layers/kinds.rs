//! The managed kinds named only by themselves: outside a kind's own file
//! (the one that defines its `const SCHEME`, or the folder of it when
//! that is a `mod.rs`), no code writes its `--target` (`nginx:managed`)
//! or one of its flags (`--nginx-set`, made from its knob) as a literal;
//! it takes the kind's constants, or lists the kinds from
//! `sut::managed::KINDS`, so that a kind renamed, added or removed
//! changes every message and flag with it. Tests (a `tests.rs`, and a
//! file's `#[cfg(test)]` module, which by the crate's convention closes
//! the file) and comments are left out: they may name what they test.

use std::path::{Path, PathBuf};

/// Each literal `--target` or flag of a kind written outside its own
/// file, as `FILE:LINE names LITERAL`; `kinds` are the kinds' schemes and
/// knobs.
pub(super) fn kind_literals(src: &Path, kinds: &[(&str, &str)]) -> Result<Vec<String>, String> {
    let mut files = Vec::new();
    rs_files(src, &mut files)?;
    let texts = files
        .into_iter()
        .map(|path| {
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok((path, text))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut found = Vec::new();
    for (scheme, knob) in kinds {
        let own = own_area(&texts, scheme);
        let flag = format!("--{knob}-");
        for (path, text) in &texts {
            let shown = Path::new("src").join(path.strip_prefix(src).unwrap_or(path));
            if own.as_deref().is_some_and(|own| path.starts_with(own))
                || path.file_name().is_some_and(|n| n == "tests.rs")
                || path.components().any(|c| c.as_os_str() == "tests")
            {
                continue;
            }
            for (n, line) in product_lines(text) {
                for literal in [*scheme, flag.as_str()] {
                    if line.contains(literal) {
                        found.push(format!("{}:{n} names {literal}", shown.display()));
                    }
                }
            }
        }
    }
    found.sort();
    Ok(found)
}

/// The file that defines the kind of `scheme`, or its folder when it is a
/// `mod.rs`.
fn own_area(texts: &[(PathBuf, String)], scheme: &str) -> Option<PathBuf> {
    let defines = format!("const SCHEME: &'static str = \"{scheme}\";");
    let (path, _) = texts.iter().find(|(_, text)| text.contains(&defines))?;
    if path.file_name().is_some_and(|n| n == "mod.rs") {
        path.parent().map(Path::to_path_buf)
    } else {
        Some(path.clone())
    }
}

/// The lines of `text` that are the product's code, numbered from 1:
/// not a comment, and before the file's `#[cfg(test)]` module.
fn product_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .windows(2)
        .position(|w| w[0].trim() == "#[cfg(test)]" && w[1].trim_start().starts_with("mod "))
        .unwrap_or(lines.len());
    lines
        .into_iter()
        .enumerate()
        .take(end)
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .map(|(i, l)| (i + 1, l))
}

/// Every `.rs` file below `dir`.
fn rs_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        if path.is_dir() {
            rs_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}
