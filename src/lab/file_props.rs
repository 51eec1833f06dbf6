//! Property tests of the lab file's parser ([`LabFile::parse`]) on
//! arbitrary text and on lab files built from their parts — workload,
//! run flags, repetitions, `[vary]`, `[zip]` and `[[variant]]` tables —
//! with hostile names and values: nothing panics; a file taken has at
//! least one variant, at most [`MAX_CELLS`] cells and variant names of
//! one line; a file refused is refused in one line placed inside it.

use super::file::{LabFile, MAX_CELLS};
use proptest::prelude::*;
use std::path::Path;

/// Inputs each property sees.
const CASES: u32 = 4000;

/// A TOML string holding `text`, quoted and escaped.
fn quoted(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

/// Text a user or a hostile file may hold.
fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => "[a-z0-9._-]{1,12}",
        1 => any::<String>(),
        1 => "[a-z]{1,4}[\\n\\t\\x1b\\u{202e}][a-z]{0,4}",
        1 => (100usize..300).prop_map(|n| "k".repeat(n)),
    ]
}

/// A knob's value: a string, a number, or what no knob takes.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => word().prop_map(|w| quoted(&w)),
        2 => any::<i64>().prop_map(|n| n.to_string()),
        1 => any::<f64>().prop_map(|x| format!("{x:?}")),
        1 => Just("[[1]]".to_string()),
        1 => Just("{ a = 1 }".to_string()),
        1 => Just("true".to_string()),
    ]
}

/// A knob's name: a real one or anything.
fn knob() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("cpus".to_string()),
        Just("\"pg.shared_buffers\"".to_string()),
        Just("users".to_string()),
        word().prop_map(|w| quoted(&w)),
    ]
}

/// A `[vary]` or `[zip]` table of up to 4 knobs, each up to 6 values.
fn axes(table: &'static str) -> impl Strategy<Value = String> {
    prop::collection::vec((knob(), prop::collection::vec(value(), 0..6)), 0..4).prop_map(
        move |knobs| {
            let mut text = format!("[{table}]\n");
            for (knob, values) in knobs {
                text.push_str(&format!("{knob} = [{}]\n", values.join(", ")));
            }
            text
        },
    )
}

/// Up to 4 `[[variant]]` tables.
fn variants() -> impl Strategy<Value = String> {
    prop::collection::vec((prop::option::of(word()), knob(), value()), 0..4).prop_map(|all| {
        let mut text = String::new();
        for (name, knob, value) in all {
            text.push_str("[[variant]]\n");
            if let Some(name) = name {
                text.push_str(&format!("name = {}\n", quoted(&name)));
            }
            text.push_str(&format!("{knob} = {value}\n"));
        }
        text
    })
}

/// A lab file built from its parts, a line of anything perhaps among them.
fn lab_text() -> impl Strategy<Value = String> {
    let head = (
        prop_oneof![Just("bank".to_string()), Just("null".to_string()), word()],
        prop::option::of(prop_oneof![4 => 1i64..4, 1 => any::<i64>()]),
        prop::option::of(prop_oneof![
            4 => Just("--users 1".to_string()),
            1 => word()
        ]),
        prop::option::of(prop_oneof![4 => 0i64..1 << 32, 1 => any::<i64>()]),
    );
    // Mostly axes or named variants, as a lab file has; sometimes both.
    let knobs = prop_oneof![
        3 => (prop::option::of(axes("vary")), prop::option::of(axes("zip")), Just(String::new())),
        3 => (Just(None), Just(None), variants()),
        1 => (prop::option::of(axes("vary")), prop::option::of(axes("zip")), variants()),
    ];
    let tables = (
        knobs,
        prop::option::weighted(0.2, (any::<prop::sample::Index>(), word())),
    );
    (head, tables).prop_map(
        |((workload, repetitions, args, seed), ((vary, zip, named), junk))| {
            let mut lines = vec![format!("workload = {}", quoted(&workload))];
            lines.extend(repetitions.map(|r| format!("repetitions = {r}")));
            lines.extend(args.map(|a| format!("args = {}", quoted(&a))));
            lines.extend(seed.map(|s| format!("seed = {s}")));
            let mut text = lines.join("\n") + "\n";
            text.push_str(&vary.unwrap_or_default());
            text.push_str(&zip.unwrap_or_default());
            text.push_str(&named);
            if let Some((at, junk)) = junk {
                let mut all: Vec<&str> = text.lines().collect();
                all.insert(at.index(all.len() + 1), &junk);
                text = all.join("\n");
            }
            text
        },
    )
}

/// What holds of any outcome of parsing `text`.
fn bounded(text: &str) -> Result<(), TestCaseError> {
    match LabFile::parse(Path::new("lab.toml"), text.to_string()) {
        Ok(lab) => {
            prop_assert!(!lab.variants.is_empty());
            let cells = lab.variants.len().saturating_mul(lab.repetitions as usize);
            prop_assert!(cells <= MAX_CELLS, "{} cells", cells);
            for v in &lab.variants {
                prop_assert!(!v.name.contains('\n'), "{:?}", v.name);
            }
        }
        Err(e) => {
            let shown = e.to_string();
            prop_assert_eq!(shown.lines().count(), 1, "{}", shown);
            prop_assert!(shown.starts_with("lab.toml:"), "{}", shown);
            prop_assert!(
                e.line >= 1 && e.line <= text.lines().count() + 1,
                "{}",
                shown
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_text_is_taken_or_refused_in_one_line(text in any::<String>()) {
        bounded(&text)?;
    }

    #[test]
    fn built_lab_files_are_taken_bounded_or_refused_in_one_line(text in lab_text()) {
        bounded(&text)?;
    }
}
