//! Access specifications, Iometer's model. A spec is a list of lines; each
//! line has a transfer size, a share of the I/Os, a read percentage, a
//! random percentage, a delay and a burst, and an alignment. For each
//! burst a line is drawn (weighed by share over burst, so that shares are
//! of I/Os, as Iometer's are); `burst` I/Os of that line follow, after
//! `delay`; read or write and random or sequential are drawn per I/O by
//! the line's percentages. Joint mixes ("60% random reads, 20% random
//! writes, 10% sequential reads, 10% sequential writes") are one spec.
//!
//! Written inline (`size=4k share=60 read=80 random=100; size=64k …`), in
//! a TOML file (`[[line]]` tables with the same keys), or by name
//! ([`NAMED`]). Defaults: `share` 100 (one line), `read` 100, `random`
//! 100, `delay` 0, `burst` 1, `align` the transfer size (fio's
//! `blockalign`; Iometer's default is the sector).

use crate::units::{parse_duration, Bytes};
use crate::util::serde_duration;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The sector: the unit of alignment of direct I/O and of verification.
pub(crate) const SECTOR: u64 = 512;

/// The largest transfer a line may ask for (each user holds a buffer of
/// its spec's largest).
pub(crate) const MAX_TRANSFER: u64 = 256 << 20;

/// The longest spec file read.
pub(crate) const MAX_SPEC_FILE: u64 = 1 << 20;

/// One line of a spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Line {
    /// Bytes per transfer.
    pub(crate) size: u64,
    /// Share of the I/Os, percent; a spec's shares sum to 100.
    pub(crate) share: f64,
    /// Percent of the line's I/Os that read (the rest write).
    pub(crate) read: f64,
    /// Percent of the line's I/Os at a random offset (the rest follow the
    /// user's last I/O).
    pub(crate) random: f64,
    /// Pause before each burst (think time of the I/O stream).
    #[serde(with = "serde_duration")]
    pub(crate) delay: Duration,
    /// I/Os of this line in a row once it is drawn.
    pub(crate) burst: u32,
    /// Offsets are multiples of this.
    pub(crate) align: u64,
}

/// An access specification: its name and its lines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AccessSpec {
    pub(crate) name: String,
    pub(crate) lines: Vec<Line>,
}

/// The built-in specs: name, what it is, and its inline text.
pub(crate) const NAMED: &[(&str, &str, &str)] = &[
    (
        "file-server",
        "Intel's classic Iometer file-server spec: 80% read, 100% random",
        "size=512 share=10 read=80; size=1k share=5 read=80; size=2k share=5 read=80; \
         size=4k share=60 read=80; size=8k share=2 read=80; size=16k share=4 read=80; \
         size=32k share=4 read=80; size=64k share=10 read=80",
    ),
    (
        "hba-small",
        "a file server's load: 4K/64K/256K in equal shares, 67% read, random",
        "size=4k share=33.34 read=67; size=64k share=33.33 read=67; size=256k share=33.33 read=67",
    ),
    (
        "hba-large",
        "fat I/O: 1M/2M/16M in equal shares, 90% read, sequential",
        "size=1M share=33.34 read=90 random=0; size=2M share=33.33 read=90 random=0; size=16M share=33.33 read=90 random=0",
    ),
    ("oltp", "8 KiB, 67% read, 100% random", "size=8k read=67"),
    ("4k-randread", "4 KiB random reads", "size=4k read=100"),
    ("4k-randwrite", "4 KiB random writes", "size=4k read=0"),
    (
        "128k-seqread",
        "128 KiB sequential reads",
        "size=128k read=100 random=0",
    ),
    (
        "128k-seqwrite",
        "128 KiB sequential writes",
        "size=128k read=0 random=0",
    ),
];

impl AccessSpec {
    /// A built-in spec by name.
    pub(crate) fn named(name: &str) -> Option<AccessSpec> {
        let (_, _, text) = NAMED.iter().find(|(n, _, _)| *n == name)?;
        let mut spec = AccessSpec::parse_inline(text).ok()?;
        spec.name = name.to_string();
        Some(spec)
    }

    /// `--list-specs`: every built-in spec, one block each.
    pub(crate) fn list_text() -> String {
        let mut out = String::new();
        for (name, about, _) in NAMED {
            out.push_str(&format!("{name}: {about}\n"));
            if let Some(spec) = AccessSpec::named(name) {
                for line in &spec.lines {
                    out.push_str(&format!("  {}\n", line.text()));
                }
            }
        }
        out
    }

    /// A spec written inline: lines separated by `;`, each `key=value`
    /// words.
    pub(crate) fn parse_inline(text: &str) -> Result<AccessSpec, String> {
        let lines = text
            .split(';')
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .enumerate()
            .map(|(i, l)| {
                let pairs = l
                    .split_whitespace()
                    .map(|word| {
                        word.split_once('=')
                            .ok_or_else(|| format!("line {}: '{word}' is not key=value", i + 1))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Line::from_pairs(&pairs).map_err(|(_, e)| format!("line {}: {e}", i + 1))
            })
            .collect::<Result<Vec<_>, _>>()?;
        AccessSpec::from_lines("inline".to_string(), lines, |i| format!("line {}", i + 1))
    }

    /// A spec from a TOML file: an optional `name` and `[[line]]` tables
    /// with the inline keys (sizes and durations as strings or numbers).
    pub(crate) fn parse_toml(text: &str) -> Result<AccessSpec, String> {
        let doc: toml::Table = text.parse().map_err(|e: toml::de::Error| match e.span() {
            Some(span) => {
                let (line, column) = line_and_column(text, span.start);
                format!("line {line}, column {column}: not TOML: {}", e.message())
            }
            None => format!("not TOML: {}", e.message()),
        })?;
        let places = table_places(text);
        // Where the file has the `[[line]]` table `i` (its key `key`).
        let at = |i: usize, key: Option<&str>| match places.get(i) {
            Some((table, keys)) => {
                let line = key
                    .and_then(|k| keys.iter().find(|(name, _)| name == k))
                    .map_or(*table, |(_, line)| *line);
                format!("line {line}")
            }
            None => format!("[[line]] {}", i + 1),
        };
        let mut name = "file".to_string();
        let mut lines = Vec::new();
        for (key, value) in &doc {
            match (key.as_str(), value) {
                ("name", toml::Value::String(s))
                    if s.contains(char::is_control) || s.chars().count() > 120 =>
                {
                    return Err("the spec's name is one line of at most 120 characters (it is shown and stored with the run); give a shorter name without line breaks".to_string());
                }
                ("name", toml::Value::String(s)) => name = s.clone(),
                ("line", toml::Value::Array(tables)) => {
                    for (i, t) in tables.iter().enumerate() {
                        let toml::Value::Table(t) = t else {
                            return Err(format!("{}: not a [[line]] table", at(i, None)));
                        };
                        let texts: Vec<(String, String)> = t
                            .iter()
                            .map(|(k, v)| {
                                let v = match v {
                                    toml::Value::String(s) => s.clone(),
                                    toml::Value::Integer(n) => n.to_string(),
                                    toml::Value::Float(x) => x.to_string(),
                                    other => {
                                        return Err(format!(
                                            "{}: {k} = {other} is not a number or a text",
                                            at(i, Some(k))
                                        ))
                                    }
                                };
                                Ok((k.clone(), v))
                            })
                            .collect::<Result<_, String>>()?;
                        let pairs: Vec<(&str, &str)> = texts
                            .iter()
                            .map(|(k, v)| (k.as_str(), v.as_str()))
                            .collect();
                        lines.push(Line::from_pairs(&pairs).map_err(|(pair, e)| {
                            format!("{}: {e}", at(i, pair.map(|p| pairs[p].0)))
                        })?);
                    }
                }
                _ => {
                    return Err(format!(
                        "'{key}' is not a key of a spec file; use name and [[line]] tables"
                    ))
                }
            }
        }
        AccessSpec::from_lines(name, lines, |i| at(i, Some("share")))
    }

    /// Checks what holds of the lines alone: at least one, shares summing
    /// to 100, a one-line spec's share defaulting to 100.
    pub(super) fn from_lines(
        name: String,
        mut lines: Vec<Line>,
        place: impl Fn(usize) -> String,
    ) -> Result<AccessSpec, String> {
        if lines.is_empty() {
            return Err("the spec has no line; give at least size=…".to_string());
        }
        if lines.len() == 1 && lines[0].share.is_nan() {
            lines[0].share = 100.0;
        }
        if let Some(i) = lines.iter().position(|l| l.share.is_nan()) {
            return Err(format!(
                "{}: a spec of several lines needs share=… on each",
                place(i)
            ));
        }
        let sum: f64 = lines.iter().map(|l| l.share).sum();
        if (sum - 100.0).abs() > 0.01 {
            return Err(format!("the shares sum to {sum}, not 100"));
        }
        Ok(AccessSpec { name, lines })
    }

    /// Checks the spec against its target: for direct I/O, sizes and
    /// alignments in multiples of `direct` (the target's direct I/O
    /// alignment, at least a sector); no alignment above its size, no
    /// transfer larger than the target.
    pub(crate) fn check(&self, target_size: u64, direct: Option<u64>) -> Result<(), String> {
        for (i, l) in self.lines.iter().enumerate() {
            let n = i + 1;
            if let Some(unit) = direct.map(|d| d.max(SECTOR)) {
                if l.size % unit != 0 {
                    return Err(format!(
                        "line {n}: size {} is not a multiple of {unit} bytes, which direct I/O needs on this target (or give --buffered)",
                        l.size
                    ));
                }
                if l.align % unit != 0 {
                    return Err(format!(
                        "line {n}: align {} is not a multiple of {unit} bytes, which direct I/O needs on this target",
                        l.align
                    ));
                }
            }
            if l.align > l.size {
                return Err(format!(
                    "line {n}: align {} is larger than the size {}",
                    Bytes(l.align),
                    Bytes(l.size)
                ));
            }
            if l.size > target_size {
                return Err(format!(
                    "line {n}: a transfer of {} is larger than the target ({})",
                    Bytes(l.size),
                    Bytes(target_size)
                ));
            }
        }
        Ok(())
    }

    /// The largest transfer: each user's buffer.
    pub(crate) fn max_size(&self) -> u64 {
        self.lines.iter().map(|l| l.size).max().unwrap_or(SECTOR)
    }

    /// Whether any line writes.
    pub(crate) fn writes(&self) -> bool {
        self.lines.iter().any(|l| l.read < 100.0)
    }

    /// The operation kinds: each line's reads and writes, named by size
    /// (and by line number when two lines share a size): `4k read`.
    pub(crate) fn op_names(&self) -> Vec<String> {
        let mut out = Vec::with_capacity(self.lines.len() * 2);
        for (i, l) in self.lines.iter().enumerate() {
            let shared = self.lines.iter().filter(|o| o.size == l.size).count() > 1;
            let size = size_text(l.size);
            let prefix = if shared {
                format!("L{} {size}", i + 1)
            } else {
                size
            };
            out.push(format!("{prefix} read"));
            out.push(format!("{prefix} write"));
        }
        out
    }
}

impl Line {
    /// A line from `key=value` pairs; an unset share is NaN until the
    /// spec decides it. An error comes with the index of the pair it is
    /// about, when it is about one.
    fn from_pairs(pairs: &[(&str, &str)]) -> Result<Line, (Option<usize>, String)> {
        for (i, (key, _)) in pairs.iter().enumerate() {
            if pairs[..i].iter().any(|(earlier, _)| earlier == key) {
                return Err((Some(i), format!("{key} is given twice; give it once")));
            }
        }
        let mut size = None;
        let mut line = Line {
            size: 0,
            share: f64::NAN,
            read: 100.0,
            random: 100.0,
            delay: Duration::ZERO,
            burst: 1,
            align: 0,
        };
        for (i, (key, value)) in pairs.iter().enumerate() {
            line.set(&mut size, key, value).map_err(|e| (Some(i), e))?;
        }
        line.size = size
            .filter(|s| *s > 0)
            .ok_or((None, "each line needs size=…, e.g. size=4k".to_string()))?;
        if line.size > MAX_TRANSFER {
            return Err((
                pairs.iter().position(|(k, _)| *k == "size"),
                format!(
                    "size={} is above the largest transfer, {}",
                    Bytes(line.size),
                    Bytes(MAX_TRANSFER)
                ),
            ));
        }
        if line.align == 0 {
            line.align = line.size;
        }
        Ok(line)
    }

    /// Sets the line's `key` to `value` (`size` into `size`, checked once
    /// every key is read).
    fn set(&mut self, size: &mut Option<u64>, key: &str, value: &str) -> Result<(), String> {
        match key {
            "size" => *size = Some(Bytes::parse(value)?.0),
            "share" => {
                let x = percent(key, value)?;
                if x <= 0.0 {
                    return Err("share=0 never runs; drop the line".to_string());
                }
                self.share = x;
            }
            "read" => self.read = percent(key, value)?,
            "random" => self.random = percent(key, value)?,
            "delay" => {
                self.delay = if value == "0" {
                    Duration::ZERO
                } else {
                    parse_duration(value).map_err(|e| format!("delay={value}: {e}"))?
                }
            }
            "burst" => {
                self.burst = value
                    .parse()
                    .ok()
                    .filter(|b| *b >= 1)
                    .ok_or_else(|| format!("burst={value} is not a count of 1 or more"))?
            }
            "align" => self.align = Bytes::parse(value)?.0,
            other => {
                return Err(format!(
                    "'{other}' is not a key; use size, share, read, random, delay, burst, align"
                ))
            }
        }
        Ok(())
    }

    /// The line as inline text.
    pub(crate) fn text(&self) -> String {
        let mut t = format!(
            "size={} share={} read={} random={}",
            size_text(self.size),
            self.share,
            self.read,
            self.random
        );
        if !self.delay.is_zero() {
            t.push_str(&format!(
                " delay={}",
                humantime::format_duration(self.delay)
            ));
        }
        if self.burst != 1 {
            t.push_str(&format!(" burst={}", self.burst));
        }
        if self.align != self.size {
            t.push_str(&format!(" align={}", size_text(self.align)));
        }
        t
    }
}

/// A size in the shortest exact unit: `512`, `4k`, `1M`.
pub(crate) fn size_text(bytes: u64) -> String {
    for (shift, unit) in [(30, "G"), (20, "M"), (10, "k")] {
        if bytes >= 1 << shift && bytes % (1 << shift) == 0 {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// The line and column (from 1, in characters) of byte `at` of `text`.
/// Where each `[[line]]` table of a spec file is: the file's line of its
/// start, and of each of its keys (empty when the text is not TOML, which
/// is said before this is asked).
fn table_places(text: &str) -> Vec<(usize, Vec<(String, usize)>)> {
    let Ok(doc) = toml::de::DeTable::parse(text) else {
        return Vec::new();
    };
    let line_of = |at: usize| line_and_column(text, at).0;
    let Some(toml::de::DeValue::Array(tables)) = doc.get_ref().get("line").map(|v| v.get_ref())
    else {
        return Vec::new();
    };
    tables
        .iter()
        .map(|table| {
            let keys = match table.get_ref() {
                toml::de::DeValue::Table(t) => t
                    .iter()
                    .map(|(k, _)| (k.get_ref().to_string(), line_of(k.span().start)))
                    .collect(),
                _ => Vec::new(),
            };
            (line_of(table.span().start), keys)
        })
        .collect()
}

/// A percentage `key=v`, `%` optional, 0 to 100.
fn percent(key: &str, v: &str) -> Result<f64, String> {
    let x: f64 = v
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("{key}={v} is not a percentage"))?;
    if !(0.0..=100.0).contains(&x) {
        return Err(format!("{key}={v} is not between 0 and 100"));
    }
    Ok(x)
}

fn line_and_column(text: &str, at: usize) -> (usize, usize) {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_spec_parses_and_sums_to_a_hundred() {
        for (name, _, _) in NAMED {
            let spec = AccessSpec::named(name).unwrap_or_else(|| panic!("{name}"));
            let sum: f64 = spec.lines.iter().map(|l| l.share).sum();
            assert!((sum - 100.0).abs() < 0.011, "{name}: {sum}");
        }
        let fs = AccessSpec::named("file-server").unwrap();
        assert_eq!(fs.lines.len(), 8);
        assert_eq!(fs.lines[3].size, 4096);
        assert_eq!(fs.lines[3].share, 60.0);
        assert!(fs.lines.iter().all(|l| l.read == 80.0 && l.random == 100.0));
        assert!(AccessSpec::list_text().contains("hba-large: "));
    }

    #[test]
    fn a_key_given_twice_and_a_toml_mistake_are_placed() {
        let e = AccessSpec::parse_inline("size=4k read=100; size=4k size=8k").unwrap_err();
        assert_eq!(e, "line 2: size is given twice; give it once");
        let e = AccessSpec::parse_toml("[[line]]\nsize = \"4k\"\nread = 1x\n").unwrap_err();
        assert!(e.starts_with("line 3, column 8: not TOML: "), "{e}");
        // A spec file's mistakes are placed at the file's line of the key
        // (or of its table), not at the table's rank.
        let file = "name = 'mine'\n\n[[line]]\nsize = '4k'\nshare = 50\n\n[[line]]\nsize = '8k'\nshare = 'lots'\n";
        assert_eq!(
            AccessSpec::parse_toml(file).unwrap_err(),
            "line 9: share=lots is not a percentage"
        );
        let unknown = "[[line]]\nsize = '4k'\n\nbogus = 1\n";
        assert!(AccessSpec::parse_toml(unknown)
            .unwrap_err()
            .starts_with("line 4: 'bogus' is not a key"));
        let sizeless = "[[line]]\nshare = 50\n[[line]]\nsize = '4k'\nshare = 50\n";
        assert_eq!(
            AccessSpec::parse_toml(sizeless).unwrap_err(),
            "line 1: each line needs size=…, e.g. size=4k"
        );
        let shareless = "[[line]]\nsize = '4k'\nshare = 50\n[[line]]\nsize = '8k'\n";
        assert_eq!(
            AccessSpec::parse_toml(shareless).unwrap_err(),
            "line 4: a spec of several lines needs share=… on each"
        );
        assert_eq!(line_and_column("ab\ncé\nd", 6), (2, 3));
        assert_eq!(line_and_column("ab\ncé\nd", 5), (2, 2));
        assert_eq!(line_and_column("", 9), (1, 1));
    }

    #[test]
    fn inline_and_toml_give_the_same_spec() {
        let inline = AccessSpec::parse_inline(
            "size=4k share=60 read=80 random=100; size=64k share=40 read=80 random=0 delay=5ms burst=4 align=4k",
        )
        .unwrap();
        let toml = AccessSpec::parse_toml(
            "name = 'mine'\n[[line]]\nsize = '4k'\nshare = 60\nread = 80\nrandom = 100\n\
             [[line]]\nsize = 65536\nshare = 40\nread = 80\nrandom = 0\ndelay = '5ms'\nburst = 4\nalign = '4k'\n",
        )
        .unwrap();
        assert_eq!(inline.lines, toml.lines);
        assert_eq!(toml.name, "mine");
        assert_eq!(inline.lines[1].burst, 4);
        assert_eq!(inline.lines[1].align, 4096);
        assert_eq!(inline.lines[0].align, 4096);
        assert_eq!(
            inline.op_names(),
            ["4k read", "4k write", "64k read", "64k write"]
        );
    }

    #[test]
    fn bad_specs_are_named() {
        for (text, says) in [
            ("size=4k share=60; size=8k share=30", "sum to 90"),
            ("size=4k; size=8k", "needs share"),
            ("share=100", "needs size"),
            ("size=4k read=120", "between 0 and 100"),
            ("size=4k colour=red", "'colour' is not a key"),
            ("size=4k burst=0", "burst=0"),
            ("size", "not key=value"),
            ("", "no line"),
            ("size=1G", "above the largest transfer"),
        ] {
            let err = AccessSpec::parse_inline(text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
        let odd = AccessSpec::parse_inline("size=1000").unwrap();
        assert!(odd
            .check(1 << 20, Some(512))
            .unwrap_err()
            .contains("multiple of 512"));
        assert!(odd.check(1 << 20, None).is_ok());
        let small = AccessSpec::parse_inline("size=512").unwrap();
        assert!(small.check(1 << 20, Some(512)).is_ok());
        assert!(small
            .check(1 << 20, Some(4096))
            .unwrap_err()
            .contains("multiple of 4096"));
        let big_align = AccessSpec::parse_inline("size=4k align=8k").unwrap();
        assert!(big_align
            .check(1 << 20, Some(512))
            .unwrap_err()
            .contains("larger than the size"));
        let huge = AccessSpec::parse_inline("size=2M").unwrap();
        assert!(huge
            .check(1 << 20, Some(512))
            .unwrap_err()
            .contains("larger than the target"));
        assert!(AccessSpec::parse_toml("x = 1").unwrap_err().contains("'x'"));
        assert!(AccessSpec::parse_toml("[[line]]\nsize = true").is_err());
    }
}
