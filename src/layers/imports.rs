//! The imports of one source file, read as text: every `use` tree (expanded
//! out of its `{…}` lists, aliases followed) and every path in the code that
//! starts at `crate::`, `super::` or `self::`, each made absolute — so that
//! `super::` in a top-level module is seen as the `crate::` it means.

/// One import: where it points, as an absolute path of segments (modules,
/// then maybe an item and what follows it), and the name the importing file
/// sees it by (its alias, or its last segment; `*` for a glob).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Import {
    pub(crate) path: Vec<String>,
    pub(crate) seen_as: String,
    /// Whether it is written in a module of tests (`mod tests { … }`).
    pub(crate) in_tests: bool,
}

/// The code of a file with its comments left out and its string and
/// character literals blanked (a message saying "use --x;" or naming
/// "crate::y" is no import). Line breaks stay where they were.
pub(super) fn code(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let end = find_from(&chars, i + 2, &['*', '/']).map_or(chars.len(), |e| e + 2);
            blank(&chars[i..end], &mut out);
            i = end;
        } else if c == '"' || (c == 'r' && raw_string_start(&chars, i).is_some()) {
            let end = string_end(&chars, i);
            out.push('"');
            blank(
                &chars[(i + 1).min(end)..end.saturating_sub(1).max(i + 1)],
                &mut out,
            );
            out.push('"');
            i = end;
        } else if c == '\'' && char_literal_end(&chars, i).is_some() {
            let end = char_literal_end(&chars, i).unwrap_or(i + 1);
            out.push_str("' '");
            i = end;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Spaces for `chars`, keeping their line breaks.
fn blank(chars: &[char], out: &mut String) {
    out.extend(chars.iter().map(|c| if *c == '\n' { '\n' } else { ' ' }));
}

/// Where `pattern` next starts at or after `from`.
fn find_from(chars: &[char], from: usize, pattern: &[char]) -> Option<usize> {
    (from..chars.len()).find(|at| chars[*at..].starts_with(pattern))
}

/// The number of `#` of a raw string starting at `at` (`r"`, `r#"`).
fn raw_string_start(chars: &[char], at: usize) -> Option<usize> {
    if at > 0 && is_name_char(chars[at - 1]) {
        return None;
    }
    let hashes = chars[at + 1..].iter().take_while(|c| **c == '#').count();
    (chars.get(at + 1 + hashes) == Some(&'"')).then_some(hashes)
}

/// Just past the end of the string literal starting at `at`.
fn string_end(chars: &[char], at: usize) -> usize {
    if let Some(hashes) = raw_string_start(chars, at).filter(|_| chars[at] == 'r') {
        let mut close = vec!['"'];
        close.extend(std::iter::repeat_n('#', hashes));
        let body = at + 2 + hashes;
        return find_from(chars, body, &close).map_or(chars.len(), |e| e + close.len());
    }
    let mut i = at + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    chars.len()
}

/// Just past the end of a character literal at `at` (`'x'`, `'\n'`,
/// `'\u{1F600}'`); none for a lifetime (`'a`).
fn char_literal_end(chars: &[char], at: usize) -> Option<usize> {
    match chars.get(at + 1)? {
        '\\' => {
            let close = find_from(chars, at + 3, &['\''])?;
            (close - at <= 11).then_some(close + 1)
        }
        _ => (chars.get(at + 2) == Some(&'\'')).then_some(at + 3),
    }
}

/// The imports of the code of a file of module `module` (`["probe",
/// "counters"]`; empty for the crate's root). `is_module` tells whether an
/// absolute path names one of the crate's modules: a `use` that starts with
/// a child module's name is relative to `module`; one that starts with
/// anything else names another crate and is left out.
pub(super) fn imports(
    code: &str,
    module: &[String],
    is_module: &dyn Fn(&[String]) -> bool,
) -> Vec<Import> {
    let (code, inline) = inline_modules(code);
    let (trees, rest) = use_trees(&code);
    let mut relative = Vec::new();
    for tree in &trees {
        expand(tree, Vec::new(), &mut relative);
    }
    relative.extend(inline_paths(&rest));
    let mut out: Vec<Import> = relative
        .into_iter()
        .filter_map(|(path, seen_as)| {
            let path = absolute(&path, module, is_module)?;
            Some(Import {
                path,
                seen_as,
                in_tests: false,
            })
        })
        .collect();
    for (name, body) in inline {
        let mut inner = module.to_vec();
        let tests = name == "tests";
        inner.push(name);
        out.extend(imports(&body, &inner, is_module).into_iter().map(|mut i| {
            i.in_tests |= tests;
            i
        }));
    }
    out.dedup();
    out
}

/// The modules written inline (`mod tests { … }`), by name with their
/// bodies, and the code without them: a path inside one is relative to it.
fn inline_modules(code: &str) -> (String, Vec<(String, String)>) {
    let mut rest = String::with_capacity(code.len());
    let mut inline = Vec::new();
    let mut at = 0;
    let mut from = 0;
    while let Some(found) = find_word(code, "mod", from) {
        let after = &code[found + 3..];
        let name: String = after
            .trim_start()
            .chars()
            .take_while(|c| is_name_char(*c))
            .collect();
        let open = after.find(['{', ';']);
        let Some(open) = open.filter(|o| after.as_bytes()[*o] == b'{' && !name.is_empty()) else {
            from = found + 3;
            continue;
        };
        let body_start = found + 3 + open + 1;
        let mut depth = 1usize;
        let mut end = code.len();
        for (i, c) in code[body_start..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = body_start + i;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest.push_str(&code[at..found]);
        inline.push((name, code[body_start..end].to_string()));
        at = (end + 1).min(code.len());
        from = at;
    }
    rest.push_str(&code[at..]);
    (rest, inline)
}

/// The `use` statements' trees (what follows `use`, up to its `;`), and the
/// code with them left out.
fn use_trees(code: &str) -> (Vec<String>, String) {
    let mut trees = Vec::new();
    let mut rest = String::with_capacity(code.len());
    let mut at = 0;
    while let Some(found) = find_word(code, "use", at) {
        let Some(end) = code[found..].find(';').map(|e| found + e) else {
            break;
        };
        rest.push_str(&code[at..found]);
        trees.push(code[found + 3..end].trim().to_string());
        at = end + 1;
    }
    rest.push_str(&code[at..]);
    (trees, rest)
}

/// The next `word` at or after `from` that stands alone (not part of a
/// longer name or a path).
fn find_word(code: &str, word: &str, from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(found) = code[at..].find(word).map(|f| at + f) {
        let before = code[..found].chars().next_back();
        let after = code[found + word.len()..].chars().next();
        let alone_before = before.is_none_or(|c| !is_name_char(c) && c != ':');
        let alone_after = after.is_some_and(char::is_whitespace);
        if alone_before && alone_after {
            return Some(found);
        }
        at = found + word.len();
    }
    None
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// One use tree (`a::b::{c, d::{e as f, self}, g::*}`) as paths with the
/// names they are seen by, each path below `prefix`.
fn expand(tree: &str, prefix: Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    let tree = tree.trim();
    if let Some(list) = tree.strip_prefix('{') {
        let list = list.strip_suffix('}').unwrap_or(list);
        for item in top_level_items(list) {
            expand(item, prefix.clone(), out);
        }
        return;
    }
    let group = tree.find('{').unwrap_or(tree.len());
    if let Some(sep) = tree[..group].find("::") {
        let mut longer = prefix;
        longer.push(tree[..sep].trim().to_string());
        expand(&tree[sep + 2..], longer, out);
        return;
    }
    let mut words = tree.split_whitespace();
    let Some(name) = words.next() else {
        return;
    };
    let alias = match (words.next(), words.next()) {
        (Some("as"), Some(alias)) => alias.to_string(),
        _ => name.to_string(),
    };
    match name {
        "self" => {
            let seen = prefix.last().cloned().unwrap_or_default();
            out.push((prefix, if alias == "self" { seen } else { alias }));
        }
        "*" => out.push((prefix, "*".to_string())),
        _ => {
            let mut path = prefix;
            path.push(name.to_string());
            out.push((path, alias));
        }
    }
}

/// The items of a `{…}` list at its own level.
fn top_level_items(list: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (at, c) in list.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(&list[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    items.push(&list[start..]);
    items.retain(|i| !i.trim().is_empty());
    items
}

/// The paths written in code (`crate::units::Bytes::new`), each seen by its
/// last segment.
fn inline_paths(code: &str) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    for root in ["crate::", "super::", "self::"] {
        for (at, _) in code.match_indices(root) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| is_name_char(c) || c == ':') {
                continue;
            }
            let mut path = Vec::new();
            let mut rest = &code[at..];
            loop {
                let name: String = rest.chars().take_while(|c| is_name_char(*c)).collect();
                if name.is_empty() {
                    break;
                }
                rest = &rest[name.len()..];
                path.push(name);
                match rest.strip_prefix("::") {
                    Some(after) => rest = after,
                    None => break,
                }
            }
            if let Some(last) = path.last().cloned() {
                out.push((path, last));
            }
        }
    }
    out
}

/// A path as written in a file of `module`, made absolute (without the
/// `crate` segment); none for a path into another crate.
fn absolute(
    path: &[String],
    module: &[String],
    is_module: &dyn Fn(&[String]) -> bool,
) -> Option<Vec<String>> {
    let (first, rest) = path.split_first()?;
    let mut out: Vec<String> = match first.as_str() {
        "crate" => return Some(rest.to_vec()),
        "self" => module.to_vec(),
        "super" => module[..module.len().checked_sub(1)?].to_vec(),
        _ => {
            let mut child = module.to_vec();
            child.push(first.clone());
            if !is_module(&child) {
                return None;
            }
            return Some([child, rest.to_vec()].concat());
        }
    };
    let mut rest = rest;
    while let Some(("super", after)) = rest.split_first().map(|(s, a)| (s.as_str(), a)) {
        out.pop()?;
        rest = after;
    }
    out.extend(rest.iter().cloned());
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(path: &[&str]) -> Vec<String> {
        path.iter().map(|s| s.to_string()).collect()
    }

    fn seen(code: &str, module: &[&str]) -> Vec<(String, String)> {
        let modules = [strings(&["probe"]), strings(&["probe", "counters"])];
        imports(code, &strings(module), &|p| modules.iter().any(|m| m == p))
            .into_iter()
            .map(|i| {
                (
                    i.path.join("::"),
                    i.seen_as + if i.in_tests { " (tests)" } else { "" },
                )
            })
            .collect()
    }

    #[test]
    fn use_trees_expand_with_their_aliases_and_selves() {
        let found = seen(
            "pub use crate::probe::{cgroup::{IoLimit as Limit, self}, qdisc::*};\nuse std::fmt;\n",
            &["report"],
        );
        assert_eq!(
            found,
            [
                ("probe::cgroup::IoLimit".into(), "Limit".into()),
                ("probe::cgroup".into(), "cgroup".into()),
                ("probe::qdisc".into(), "*".into()),
            ]
        );
    }

    #[test]
    fn a_path_in_an_inline_module_is_relative_to_it() {
        let text = "use super::x::A;\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::super::units::Bytes;\n}\n";
        assert_eq!(
            seen(text, &["probe", "counters"]),
            [
                ("probe::x::A".into(), "A".into()),
                ("probe::counters".into(), "* (tests)".into()),
                ("units::Bytes".into(), "Bytes (tests)".into()),
            ]
        );
    }

    #[test]
    fn relative_paths_become_absolute() {
        // A top-level module's `super::` is the crate's root.
        assert_eq!(
            seen("use super::plan::Level;", &["util"]),
            [("plan::Level".into(), "Level".into())]
        );
        assert_eq!(
            seen(
                "let x = super::super::units::Bytes(1);",
                &["probe", "counters"]
            ),
            [("units::Bytes".into(), "Bytes".into())]
        );
        // A child module's name starts a relative path; another crate's does not.
        assert_eq!(
            seen(
                "mod counters;\npub use counters::HostSample;\nuse serde::Serialize;",
                &["probe"]
            ),
            [("probe::counters::HostSample".into(), "HostSample".into())]
        );
        // `crate::` inside a longer path, a name or a string is no import.
        assert!(seen("let a = b::crate::x; let reuse = 1;", &["probe"]).is_empty());
        let text = "let m = \"use --force; see crate::cli\"; // crate::cli\nlet c = '\"'; let s = r#\"x\"#; let l: &'a str = crate::units::NAME;";
        assert_eq!(
            seen(&code(text), &["probe"]),
            [("units::NAME".into(), "NAME".into())]
        );
    }
}
