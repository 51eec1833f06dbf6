//! A YAML writer for JSON values: block style, two-space indents, one
//! `---` before each document, as people write Kubernetes manifests by
//! hand. A string is written plain only when every YAML reader takes it
//! back as that same string — YAML 1.1's readers (PyYAML, the go-yaml that
//! `kubectl` uses) as well as 1.2's — and double-quoted otherwise: words
//! they read as booleans or null (`yes`, `no`, `on`, `off`, `y`, `~`,
//! `null`…), anything that starts like a number, a date or a sexagesimal
//! (`0755`, `1e3`, `2026-01-01`, `1:30`), an indicator first (`-`, `:`,
//! `#`, `*`, `&`, `!`, `%`, `@`, quotes, brackets…), `: ` or ` #` inside,
//! a space at either end, and any character outside printable ASCII. The
//! double-quoted escapes are those YAML 1.1 and 1.2 share (YAML 1.2 §5.7);
//! the line breaks YAML knows beyond `\n` (NEL, LS, PS) are escaped too, so
//! a string never folds. A value of several lines of printable ASCII (a
//! certificate, a script) is a literal block (`|`, or `|-` without a final
//! line break), its lines as they are.

use serde_json::Value;
use std::fmt::Write;

/// Each value as a YAML document, `---` before each.
pub(crate) fn documents(docs: &[Value]) -> String {
    let mut out = String::new();
    for doc in docs {
        out.push_str("---\n");
        node(&mut out, doc, 0);
    }
    out
}

/// `value` as block lines at `indent`, starting on a fresh line.
fn node(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, v) in map {
                pad(out, indent);
                entry(out, key, v, indent);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for item in items {
                pad(out, indent);
                out.push('-');
                after_dash(out, item, indent);
            }
        }
        scalar => {
            pad(out, indent);
            push_scalar(out, scalar);
            out.push('\n');
        }
    }
}

/// `key: value` of a map at `indent`, the key where the line is now.
fn entry(out: &mut String, key: &str, value: &Value, indent: usize) {
    push_string(out, key);
    out.push(':');
    if is_block(value) {
        out.push('\n');
        node(out, value, indent + 2);
    } else {
        out.push(' ');
        push_value(out, value, indent + 2);
    }
}

/// A sequence item after its `-`: a map's first entry on the dash's line
/// and the rest under it, a scalar on the line, a sequence below.
fn after_dash(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (i, (key, v)) in map.iter().enumerate() {
                if i == 0 {
                    out.push(' ');
                } else {
                    pad(out, indent + 2);
                }
                entry(out, key, v, indent + 2);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            node(out, value, indent + 2);
        }
        scalar => {
            out.push(' ');
            push_value(out, scalar, indent + 2);
        }
    }
}

/// A scalar value and its line break: a literal block, its lines at
/// `indent`, where the string suits one; else as [`push_scalar`] writes it.
fn push_value(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::String(s) if literal_suits(s) => {
            let body = s.strip_suffix('\n').unwrap_or(s);
            out.push_str(if body.len() < s.len() { "|\n" } else { "|-\n" });
            for line in body.split('\n') {
                if !line.is_empty() {
                    pad(out, indent);
                    out.push_str(line);
                }
                out.push('\n');
            }
        }
        scalar => {
            push_scalar(out, scalar);
            out.push('\n');
        }
    }
}

/// Whether `s` reads back whole from a literal block with clip (`|`) or
/// strip (`|-`) chomping: several lines of printable ASCII, the first not
/// starting with a space (which would need an indentation indicator), no
/// line of spaces alone, and at most one final line break (more needs
/// keep chomping).
fn literal_suits(s: &str) -> bool {
    let body = s.strip_suffix('\n').unwrap_or(s);
    body.contains('\n')
        && !body.ends_with('\n')
        && !body.starts_with(' ')
        && body
            .chars()
            .all(|c| c == '\n' || c == ' ' || c.is_ascii_graphic())
        && body
            .split('\n')
            .all(|line| line.is_empty() || !line.trim_start_matches(' ').is_empty())
}

/// A map or a sequence with something in it (written as block lines).
fn is_block(value: &Value) -> bool {
    match value {
        Value::Object(m) => !m.is_empty(),
        Value::Array(a) => !a.is_empty(),
        _ => false,
    }
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

/// A scalar, or an empty map or sequence (`{}`, `[]`).
fn push_scalar(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(s) => push_string(out, s),
        Value::Object(_) => out.push_str("{}"),
        Value::Array(_) => out.push_str("[]"),
    }
}

/// A number as both YAML versions read it back: JSON's text, except that
/// a float's exponent gets the dot and the sign YAML 1.1 requires
/// (`1e300` would be a string to it; `1.0e+300` is a float to both).
fn number(n: &serde_json::Number) -> String {
    let text = n.to_string();
    if !n.is_f64() {
        return text;
    }
    let Some(at) = text.find(['e', 'E']) else {
        return text;
    };
    let (mantissa, exponent) = (&text[..at], &text[at + 1..]);
    let mantissa = if mantissa.contains('.') {
        mantissa.to_string()
    } else {
        format!("{mantissa}.0")
    };
    let exponent = if exponent.starts_with(['+', '-']) {
        exponent.to_string()
    } else {
        format!("+{exponent}")
    };
    format!("{mantissa}e{exponent}")
}

/// A string, plain when that reads back as the same string, else
/// double-quoted.
fn push_string(out: &mut String, s: &str) {
    if plain_is_safe(s) {
        out.push_str(s);
    } else {
        quoted(out, s);
    }
}

/// Words YAML 1.1 or 1.2 reads as null or a boolean (compared without case).
const SPECIAL_WORDS: [&str; 12] = [
    "null", "~", "y", "n", "yes", "no", "on", "off", "true", "false", "=", "<<",
];

/// Whether `s` written plain reads back as the string `s` in YAML 1.1 and
/// 1.2, in a block context.
fn plain_is_safe(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    // Letters, `/` and `_` start no number, date, indicator or special word
    // but those listed; everything else (digits, signs, dots, indicators)
    // is quoted.
    if !(first.is_ascii_alphabetic() || first == '/' || first == '_') {
        return false;
    }
    if SPECIAL_WORDS.iter().any(|w| s.eq_ignore_ascii_case(w)) {
        return false;
    }
    // YAML 1.1 reads `.inf`, `.nan` only with the dot first (excluded
    // above); a value ending in `:` or holding `: ` or ` #` is a key or a
    // comment to a reader.
    let printable = s.chars().all(|c| c == ' ' || c.is_ascii_graphic());
    printable
        && !s.ends_with([' ', ':'])
        && !s.contains(": ")
        && !s.contains(" #")
        && !s.contains("  ")
}

/// `s` double-quoted, with the escapes YAML 1.1 and 1.2 share.
fn quoted(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            ' '..='~' => out.push(c),
            c if (c as u32) <= 0xFFFF => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08X}", c as u32);
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The documents read back by PyYAML (a YAML 1.1 reader, the stricter
    /// of the two about plain words), as JSON values.
    fn read_back(text: &str) -> Vec<Value> {
        use std::io::Write;
        let mut child = std::process::Command::new("python3")
            .args([
                "-c",
                "import sys, json, yaml; json.dump(list(yaml.safe_load_all(sys.stdin)), sys.stdout)",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs (with PyYAML: apt-get install python3-yaml)");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("the YAML is written");
        let out = child.wait_with_output().expect("python3 ends");
        assert!(out.status.success(), "PyYAML refused:\n{text}");
        serde_json::from_slice(&out.stdout).expect("json back")
    }

    /// Strings YAML would take for something else, or that break a line.
    const TRICKY: [&str; 56] = [
        "yes",
        "No",
        "ON",
        "off",
        "y",
        "N",
        "true",
        "False",
        "null",
        "~",
        "Null",
        "",
        " ",
        " lead",
        "trail ",
        "0755",
        "1e3",
        "12",
        "-1",
        "+1",
        ".5",
        ".inf",
        "0x1F",
        "1_000",
        "1:30",
        "2026-01-01",
        "2026-01-01T10:00:00Z",
        "- item",
        "-",
        ":",
        "key: value",
        "ends:",
        "a #comment",
        "#",
        "&anchor",
        "*alias",
        "!tag",
        "%dir",
        "@at",
        "`tick",
        "'single'",
        "\"double\"",
        "[list]",
        "{map}",
        "|",
        ">",
        "multi\nline\n",
        "tab\there",
        "two\nlines",
        "\nfirst empty",
        "a\n\nb\n",
        "ends\n\n",
        " lead\nline",
        "a\n  \nb",
        "x\n  indented\n#not a comment\n",
        "- a\n- b\n",
    ];

    #[test]
    fn what_is_written_reads_back_as_the_same_value() {
        let mut tricky = serde_json::Map::new();
        for (i, s) in TRICKY.iter().enumerate() {
            tricky.insert(format!("k{i}"), json!(s));
            // Each as a key too.
            tricky.insert((*s).to_string(), json!(i));
        }
        let docs = vec![
            json!({
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": { "name": "plk", "labels": { "app.kubernetes.io/name": "perflab" } },
                "spec": {
                    "completions": 2,
                    "parallelism": 2,
                    "template": { "spec": { "containers": [
                        { "name": "g", "args": ["agent", "--generate", "--token-file", "/etc/perflab/token"],
                          "env": [{ "name": "X", "value": "yes" }], "ports": [] }
                    ], "nodeSelector": {} } }
                },
                "nested": [[1, 2], [], [{ "a": null }], [[true]]],
                "numbers": [0, -3, 1.5, 1e300, -2.5e-8, 18446744073709551615u64],
                "unicode": ["café", "line\u{2028}sep", "nel\u{85}", "bom\u{feff}", "emoji 🙂", "bell\u{7}", "del\u{7f}"],
            }),
            Value::Object(tricky),
            json!("a scalar document"),
            json!([]),
        ];
        let text = documents(&docs);
        assert_eq!(read_back(&text), docs, "{text}");
    }

    #[test]
    fn ordinary_words_stay_plain() {
        // Keys come sorted (serde_json's map); `null` and what starts with
        // a dash or a digit are quoted.
        let text = documents(&[json!({
            "kind": "Service",
            "image": "registry.example/perflab:0.1.0",
            "command": ["perflab", "run", "null", "--users", "2,4", "--slo", "p95<50ms"],
            "mountPath": "/etc/perflab",
        })]);
        assert_eq!(
            text,
            "---\ncommand:\n  - perflab\n  - run\n  - \"null\"\n  - \"--users\"\n  - \"2,4\"\n  - \"--slo\"\n  - p95<50ms\nimage: registry.example/perflab:0.1.0\nkind: Service\nmountPath: /etc/perflab\n"
        );
    }
}
