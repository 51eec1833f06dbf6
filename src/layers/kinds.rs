//! The managed kinds named only by themselves: outside the file that
//! defines a kind (its `const SCHEME`), no code writes its `--target`
//! (`nginx:managed`) as a literal; it takes the kind's constant, or
//! lists the kinds from `sut::managed::KINDS`, so that a kind renamed,
//! added or removed changes every message with it. Tests (a `tests.rs`,
//! and a file's `#[cfg(test)]` module, which by the crate's convention
//! closes the file) and comments are left out: they may name what they
//! test.

use std::path::Path;

/// Each literal `--target` of a kind written outside its own file, as
/// `FILE:LINE names SCHEME`; `schemes` are the kinds' own.
pub(super) fn scheme_literals(src: &Path, schemes: &[&str]) -> Result<Vec<String>, String> {
    let mut files = Vec::new();
    rs_files(src, &mut files)?;
    let mut found = Vec::new();
    for path in files {
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let shown = Path::new("src").join(path.strip_prefix(src).unwrap_or(&path));
        if path.file_name().is_some_and(|n| n == "tests.rs")
            || path.components().any(|c| c.as_os_str() == "tests")
        {
            continue;
        }
        for scheme in schemes {
            if text.contains(&format!("const SCHEME: &'static str = \"{scheme}\";")) {
                continue;
            }
            for (n, line) in product_lines(&text) {
                if line.contains(scheme) {
                    found.push(format!("{}:{n} names {scheme}", shown.display()));
                }
            }
        }
    }
    found.sort();
    Ok(found)
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
