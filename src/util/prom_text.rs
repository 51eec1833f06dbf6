//! Samples read from a Prometheus text page: the 0.0.4 exposition format
//! and OpenMetrics' sample lines, which share one grammar for what perflab
//! reads — `name{label="value",…} number [timestamp]`.
//!
//! Comment lines (`# HELP`, `# TYPE`, `# EOF`) and blank lines are
//! skipped: a histogram's buckets are ordinary samples named `…_bucket`
//! with an `le` label, and a reader that wants them asks for them by name.
//! Label values are unescaped (`\\`, `\"`, `\n`). A line that does not
//! follow the grammar fails the whole page with its line number, so a
//! page that is not Prometheus text (an HTML error page, a truncated
//! body) is refused rather than half read.

use std::fmt;

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    pub(crate) name: String,
    pub(crate) labels: Labels,
    /// The value: `+Inf`, `-Inf` and `NaN` are kept as such.
    pub(crate) value: f64,
}

/// A sample's labels, in the order written.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Labels(pub(crate) Vec<(String, String)>);

impl Labels {
    /// The value of label `key`, if present.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a page is not Prometheus text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParseError {
    /// 1-based.
    pub(crate) line: usize,
    pub(crate) what: &'static str,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.what)
    }
}

impl std::error::Error for ParseError {}

/// Every sample of `text`, in order.
pub(crate) fn parse(text: &str) -> Result<Vec<Sample>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        out.push(sample(line).map_err(|what| ParseError { line: i + 1, what })?);
    }
    Ok(out)
}

fn sample(line: &str) -> Result<Sample, &'static str> {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err("a sample line must start with a metric name");
    }
    let mut rest = &line[name_end..];
    let mut labels = Labels::default();
    if let Some(after) = rest.strip_prefix('{') {
        rest = label_set(after, &mut labels.0)?;
    }
    let mut words = rest.split_ascii_whitespace();
    let value = words.next().ok_or("a sample has no value")?;
    let value = number(value).ok_or("a sample's value is not a number")?;
    if let Some(timestamp) = words.next() {
        timestamp
            .parse::<f64>()
            .map_err(|_| "a sample's timestamp is not a number")?;
    }
    if words.next().is_some() {
        return Err("a sample line has more than a value and a timestamp");
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Reads `key="value",…}` into `labels`; returns what follows the `}`.
fn label_set<'a>(
    mut rest: &'a str,
    labels: &mut Vec<(String, String)>,
) -> Result<&'a str, &'static str> {
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix('}') {
            return Ok(after);
        }
        let eq = rest.find('=').ok_or("a label has no '='")?;
        let key = rest[..eq].trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err("a label's name is not a name");
        }
        let quoted = rest[eq + 1..]
            .trim_start()
            .strip_prefix('"')
            .ok_or("a label's value is not quoted")?;
        let mut value = String::new();
        let mut chars = quoted.char_indices();
        let end = loop {
            match chars.next() {
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c @ ('\\' | '"'))) => value.push(c),
                    Some((_, c)) => {
                        value.push('\\');
                        value.push(c);
                    }
                    None => return Err("a label's value is not closed"),
                },
                Some((_, c)) => value.push(c),
                None => return Err("a label's value is not closed"),
            }
        };
        labels.push((key.to_string(), value));
        rest = quoted[end + 1..].trim_start();
        if let Some(after) = rest.strip_prefix(',') {
            rest = after;
        } else if !rest.starts_with('}') {
            return Err("labels must be separated by ',' and closed by '}'");
        }
    }
}

/// A sample's value: a decimal or one of the format's spellings of the
/// special values.
fn number(word: &str) -> Option<f64> {
    match word {
        "+Inf" | "Inf" | "+inf" | "inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        "NaN" | "nan" => Some(f64::NAN),
        _ => word.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_with_labels_escapes_and_special_values() {
        let text = "# HELP node_cpu_seconds_total Seconds.\n\
                    # TYPE node_cpu_seconds_total counter\n\
                    node_cpu_seconds_total{cpu=\"0\",mode=\"idle\"} 1234.5\n\
                    \n\
                    up 1 1700000000000\n\
                    x_bucket{le=\"+Inf\"} 8\n\
                    odd{a=\"q\\\"uote\\\\back\\nline\", b = \"}\" ,} -Inf\n\
                    nan_one NaN\n\
                    # EOF\n";
        let s = parse(text).unwrap();
        assert_eq!(s.len(), 5);
        assert_eq!(s[0].name, "node_cpu_seconds_total");
        assert_eq!(s[0].labels.get("mode"), Some("idle"));
        assert_eq!(s[0].value, 1234.5);
        assert_eq!(s[1].name, "up");
        assert!(s[1].labels.0.is_empty());
        assert_eq!(s[2].labels.get("le"), Some("+Inf"));
        assert_eq!(s[3].labels.get("a"), Some("q\"uote\\back\nline"));
        assert_eq!(s[3].labels.get("b"), Some("}"));
        assert_eq!(s[3].value, f64::NEG_INFINITY);
        assert!(s[4].value.is_nan());
    }

    #[test]
    fn what_is_not_prometheus_text_is_refused_with_its_line() {
        for (text, line) in [
            ("<html><body>502</body></html>", 1),
            ("ok 1\nbad{a=\"x\" 2", 2),
            ("ok 1\n\nno_value", 3),
            ("m{a=x} 1", 1),
            ("m{a=\"x} 1", 1),
            ("m one", 1),
            ("m 1 2 3", 1),
            ("m 1 later", 1),
            ("9m 1", 1),
            ("m{=\"x\"} 1", 1),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
        }
    }
}

#[cfg(test)]
mod props {
    //! Pages as a peer might send them: every line is a sample or a line
    //! number with its reason, never a panic.
    use super::*;
    use proptest::prelude::*;

    /// A line built from the grammar's pieces, with any of them wrong.
    fn line() -> impl Strategy<Value = String> {
        let name = prop_oneof!["[a-z_:][a-z0-9_:]{0,12}", "[0-9{}=\" ]{0,3}"];
        let value = prop_oneof![
            "[+-]?(Inf|inf|NaN|nan)",
            any::<f64>().prop_map(|v| v.to_string()),
            any::<u64>().prop_map(|v| format!("{v}{v}")),
            "[0-9eE.+-]{0,12}",
        ];
        let label = ("[a-z_]{0,6}", r#"([^"\\]|\\.){0,8}\\?"#, "[,}]?")
            .prop_map(|(k, v, end)| format!("{k}=\"{v}\"{end}"));
        (
            name,
            prop::option::of(prop::collection::vec(label, 0..4)),
            value,
            prop::option::of("[0-9-]{0,14}"),
        )
            .prop_map(|(name, labels, value, ts)| {
                let labels = labels.map_or(String::new(), |l| format!("{{{}", l.join(",")));
                format!("{name}{labels} {value} {}", ts.unwrap_or_default())
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn pages_never_panic(lines in prop::collection::vec(line(), 0..16)) {
            let page = lines.join("\n");
            if let Err(e) = parse(&page) {
                prop_assert!(e.line >= 1 && e.line <= lines.len());
            }
        }

        #[test]
        fn any_text_never_panics(text in any::<String>()) {
            let _ = parse(&text);
        }
    }
}
