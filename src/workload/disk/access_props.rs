//! Property tests of the disk spec parsers ([`AccessSpec::parse_inline`],
//! [`AccessSpec::parse_toml`]) on arbitrary text and on specs built from
//! their keys with hostile values: nothing panics; a spec taken has lines
//! whose shares sum to 100 and whose percentages lie in 0..=100; a spec
//! refused is refused in one line.

use super::access::AccessSpec;
use proptest::prelude::*;

/// Inputs each property sees.
const CASES: u32 = 4000;

/// A key of a spec line, or one that is not.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => prop::sample::select(vec!["size", "share", "read", "random", "delay", "burst", "align"])
            .prop_map(str::to_string),
        1 => "[a-z]{1,8}",
    ]
}

/// A value: sizes, percentages, durations, counts, and what none is.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[0-9]{1,4}(k|K|m|M|g|KiB|MiB|GiB|ms|s|%)?",
        2 => (0u32..=100).prop_map(|n| n.to_string()),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        1 => any::<f64>().prop_map(|x| x.to_string()),
        1 => "[0-9a-z.%-]{0,10}",
        1 => any::<String>().prop_map(|s| s.replace([';', '=', ' '], "")),
    ]
}

/// Up to 5 lines of up to 5 `key=value` words each; half of the time
/// lines a spec could hold (a size, shares summing to 100, percentages)
/// with one hostile word among them.
fn lines() -> impl Strategy<Value = Vec<Vec<(String, String)>>> {
    let any_lines = prop::collection::vec(prop::collection::vec((key(), value()), 1..5), 1..5);
    let shaped = (
        1usize..5,
        0u32..=100,
        0u32..=100,
        (key(), value()),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(n, read, random, hostile, at)| {
            let mut lines: Vec<Vec<(String, String)>> = (0..n)
                .map(|i| {
                    let share = if i + 1 == n {
                        100 - 100 / n * (n - 1)
                    } else {
                        100 / n
                    };
                    vec![
                        ("size".to_string(), format!("{}k", 4 << i)),
                        ("share".to_string(), share.to_string()),
                        ("read".to_string(), read.to_string()),
                        ("random".to_string(), random.to_string()),
                    ]
                })
                .collect();
            let line = at.index(n);
            lines[line].push(hostile);
            lines
        });
    prop_oneof![any_lines, shaped]
}

/// What holds of any outcome of a parse.
fn bounded(parsed: Result<AccessSpec, String>) -> Result<(), TestCaseError> {
    match parsed {
        Ok(spec) => {
            prop_assert!(!spec.lines.is_empty());
            prop_assert!(!spec.name.contains(char::is_control), "{:?}", spec.name);
            let sum: f64 = spec.lines.iter().map(|l| l.share).sum();
            prop_assert!((sum - 100.0).abs() < 0.011, "shares sum to {}", sum);
            for l in &spec.lines {
                for p in [l.share, l.read, l.random] {
                    prop_assert!((0.0..=100.0).contains(&p), "{:?}", l);
                }
            }
        }
        Err(e) => prop_assert_eq!(e.lines().count(), 1, "{}", e),
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
        bounded(AccessSpec::parse_inline(&text))?;
        bounded(AccessSpec::parse_toml(&text))?;
    }

    #[test]
    fn built_inline_specs_are_taken_bounded_or_refused(lines in lines()) {
        let text: Vec<String> = lines
            .iter()
            .map(|l| l.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" "))
            .collect();
        bounded(AccessSpec::parse_inline(&text.join("; ")))?;
    }

    #[test]
    fn built_spec_files_are_taken_bounded_or_refused(
        lines in lines(),
        name in prop_oneof![any::<String>(), "[a-z]{0,4}[\\n\\x1b\\t][a-z]{0,4}"],
    ) {
        let mut text = format!("name = {}\n", toml::Value::String(name));
        for line in &lines {
            text.push_str("[[line]]\n");
            for (k, v) in line {
                text.push_str(&format!("{k} = {}\n", toml::Value::String(v.clone())));
            }
        }
        bounded(AccessSpec::parse_toml(&text))?;
    }
}
