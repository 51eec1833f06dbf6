//! A lab file (TOML): the workload, its target and run flags, how many
//! times each configuration runs, and the variants — axes crossed into a
//! matrix (`[vary]`), axes taken together value by value (`[zip]`), or a
//! list of named variants (`[[variant]]`). Every mistake is reported as
//! `FILE:LINE:COLUMN: what is wrong; the fix`, before anything is made.
//! `setup` and `teardown` at the top are commands every variant runs
//! around its cells unless it names its own.
//!
//! ```toml
//! workload = "bank"
//! target = "postgres:managed"
//! args = "--scale 8 --users 1,2,4,8 --warmup 2s --duration 10s"
//! repetitions = 2
//! [vary]
//! cpus = ["0", "0-1"]
//! "pg.shared_buffers" = ["16MB", "1GB"]
//! ```

pub(crate) use super::place::LabFileError;
use super::place::{line_column, At};
use super::value::{Ratings, Table, Valuation};
use super::variant::{Axis, Variant};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// The longest lab file read (a lab file is a page, not a data set).
const MAX_FILE: u64 = 1 << 20;
/// The most cells (variants × repetitions) one lab may hold.
pub(crate) const MAX_CELLS: usize = 10_000;

/// A lab file, read and checked for shape (its knobs and flags are
/// checked against the target by [`super::plan`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LabFile {
    pub(crate) path: PathBuf,
    pub(crate) name: String,
    pub(crate) workload: String,
    pub(crate) target: Option<String>,
    /// The run flags every cell shares.
    pub(crate) args: Vec<String>,
    pub(crate) repetitions: u32,
    pub(crate) seed: Option<u64>,
    pub(crate) variants: Vec<Variant>,
    /// The axes, when the variants were crossed or zipped (none for a
    /// list of named variants).
    pub(crate) axes: Vec<Axis>,
    /// The cost unit and the scorecard's weights.
    pub(crate) valuation: Valuation,
    /// Where each knob's values are in the file, for later errors.
    positions: BTreeMap<String, usize>,
    /// Where the run flags are (or the workload, when no flags are given).
    args_at: usize,
    text: String,
}

/// `args`: one string of flags, or a list of them.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawArgs {
    Line(String),
    List(Vec<String>),
}

/// One knob's list of values as written, with places.
type RawValues = Spanned<Vec<Spanned<toml::Value>>>;
/// Axes as written: each knob's name and its list of values, with places.
type RawAxes = Spanned<BTreeMap<Spanned<String>, RawValues>>;
/// A `[[variant]]` table as written.
type RawVariant = Spanned<BTreeMap<Spanned<String>, Spanned<toml::Value>>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLab {
    name: Option<Spanned<String>>,
    workload: Spanned<String>,
    target: Option<Spanned<String>>,
    args: Option<Spanned<RawArgs>>,
    repetitions: Option<Spanned<i64>>,
    seed: Option<Spanned<i64>>,
    setup: Option<Spanned<String>>,
    teardown: Option<Spanned<String>>,
    vary: Option<RawAxes>,
    zip: Option<RawAxes>,
    variant: Option<Vec<RawVariant>>,
    costs: Option<Table>,
    scorecard: Option<Table>,
    ratings: Option<Ratings>,
    /// Each cell searches the load that meets the objectives (`--find`).
    find: Option<Spanned<bool>>,
    /// The objectives each cell is judged (and searches) by (`--slo`).
    slo: Option<Spanned<String>>,
}

impl LabFile {
    /// Reads and checks the lab file at `path`.
    pub(crate) fn read(path: &Path) -> Result<Self, LabFileError> {
        let shown = path.display().to_string();
        let whole = |message: String| LabFileError {
            file: shown.clone(),
            line: 1,
            column: 1,
            message,
        };
        let file = crate::util::open_regular(path).map_err(|e| {
            whole(format!(
                "cannot read the lab file ({e}); give a TOML file's path"
            ))
        })?;
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::Read::take(file, MAX_FILE + 1), &mut text)
            .map_err(|e| whole(format!("cannot read the lab file as text ({e})")))?;
        if text.len() as u64 > MAX_FILE {
            return Err(whole(format!(
                "the lab file is over {} KiB; a lab file names variants, it holds no data",
                MAX_FILE >> 10
            )));
        }
        Self::parse(path, text)
    }

    /// Checks the text of a lab file named `path`.
    pub(crate) fn parse(path: &Path, text: String) -> Result<Self, LabFileError> {
        let shown = path.display().to_string();
        let at = |offset: usize, message: String| {
            let (line, column) = line_column(&text, offset);
            LabFileError {
                file: shown.clone(),
                line,
                column,
                message,
            }
        };
        let raw = read_raw(&text, &at)?;
        let workload = raw.workload.get_ref().trim().to_string();
        if workload.is_empty() {
            return Err(at(
                raw.workload.span().start,
                "'workload' is empty; name one, e.g. workload = \"bank\"".into(),
            ));
        }
        if !crate::workload::NAMES.contains(&workload.as_str()) {
            return Err(at(
                raw.workload.span().start,
                format!(
                    "'{}' is not a workload; name one of {}",
                    crate::util::clipped(&crate::util::one_line(&workload)),
                    crate::workload::registry_names()
                ),
            ));
        }
        let (mut args, args_at) = raw.args_and_place();
        raw.search_args(&mut args, &at)?;
        let repetitions = raw.repetitions(&at)?;
        let seed = raw.seed(&at)?;
        let mut positions = BTreeMap::new();
        let (mut variants, axes) = raw.variants(text.len(), &at, &mut positions)?;
        raw.add_lab_hooks(&mut variants, &mut positions, &at)?;
        let valuation = super::value::read(
            raw.costs.as_ref(),
            raw.scorecard.as_ref(),
            raw.ratings.as_ref(),
            &mut variants,
            &at,
        )?;
        if variants.len() * repetitions as usize > MAX_CELLS {
            return Err(at(
                0,
                format!(
                    "{} variants × {repetitions} repetitions is over {MAX_CELLS} cells; vary fewer knobs",
                    variants.len()
                ),
            ));
        }
        let name = raw.name(path, &at)?;
        Ok(LabFile {
            path: path.to_path_buf(),
            name,
            workload,
            target: raw.target.map(|t| t.into_inner()),
            args,
            repetitions,
            seed,
            variants,
            axes,
            valuation,
            positions,
            args_at,
            text,
        })
    }

    /// An error placed at knob `knob`'s values (at the run flags when the
    /// file does not name it).
    pub(crate) fn error_at_knob(&self, knob: &str, message: String) -> LabFileError {
        self.error_at(
            self.positions.get(knob).copied().unwrap_or(self.args_at),
            message,
        )
    }

    /// An error placed at the run flags.
    pub(crate) fn error_at_args(&self, message: String) -> LabFileError {
        self.error_at(self.args_at, message)
    }

    fn error_at(&self, offset: usize, message: String) -> LabFileError {
        let (line, column) = line_column(&self.text, offset);
        LabFileError {
            file: self.path.display().to_string(),
            line,
            column,
            message,
        }
    }
}

/// The file as TOML, after a check for a bare dotted knob (which TOML
/// would read as a table); a TOML error is placed where it is.
fn read_raw(text: &str, at: &At) -> Result<RawLab, LabFileError> {
    if let Some((offset, key)) = bare_dotted_knob(text) {
        return Err(at(
            offset,
            format!("write a knob whose name holds a dot in quotes, \"{key}\" = …: bare, TOML reads {key} as a table"),
        ));
    }
    toml::from_str(text).map_err(|e| {
        let offset = e.span().map_or(0, |s| s.start);
        let message: Vec<&str> = e
            .message()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        at(offset, message.join("; "))
    })
}

impl RawLab {
    /// The run flags, and where they are (at the workload when not given).
    /// `slo = "p95<50ms"` and `find = true` as the run flags they stand
    /// for; a search without objectives is refused at `find`.
    fn search_args(
        &self,
        args: &mut Vec<String>,
        at: &impl Fn(usize, String) -> LabFileError,
    ) -> Result<(), LabFileError> {
        if let Some(slo) = &self.slo {
            args.extend(["--slo".to_string(), slo.get_ref().clone()]);
        }
        let Some(find) = self.find.as_ref().filter(|f| *f.get_ref()) else {
            return Ok(());
        };
        if !args.iter().any(|a| a == "--slo" || a.starts_with("--slo=")) {
            return Err(at(
                find.span().start,
                "find = true searches the load that meets objectives, and none is given; add slo = \"p95<50ms\" (or --slo in args)".into(),
            ));
        }
        args.push("--find".to_string());
        Ok(())
    }

    fn args_and_place(&self) -> (Vec<String>, usize) {
        match &self.args {
            None => (Vec::new(), self.workload.span().start),
            Some(a) => (
                match a.get_ref() {
                    RawArgs::Line(line) => line.split_whitespace().map(str::to_string).collect(),
                    RawArgs::List(list) => list.clone(),
                },
                a.span().start,
            ),
        }
    }

    /// `repetitions`, 1 to 1000 (1 when not given).
    fn repetitions(&self, at: &At) -> Result<u32, LabFileError> {
        match &self.repetitions {
            None => Ok(1),
            Some(r) => u32::try_from(*r.get_ref())
                .ok()
                .filter(|&n| (1..=1000).contains(&n))
                .ok_or_else(|| at(r.span().start, "'repetitions' must be 1 to 1000".into())),
        }
    }

    /// `seed`, when given: 0 or more.
    fn seed(&self, at: &At) -> Result<Option<u64>, LabFileError> {
        self.seed
            .as_ref()
            .map(|s| {
                u64::try_from(*s.get_ref())
                    .map_err(|_| at(s.span().start, "'seed' must be 0 or more".into()))
            })
            .transpose()
    }

    /// The variants, from `[[variant]]` tables or from `[vary]`/`[zip]`
    /// axes (never both), and the axes; `end` is the file's length.
    fn variants(
        &self,
        end: usize,
        at: &At,
        positions: &mut BTreeMap<String, usize>,
    ) -> Result<(Vec<Variant>, Vec<Axis>), LabFileError> {
        match (&self.variant, &self.vary, &self.zip) {
            (Some(list), None, None) => Ok((
                named(list, self.costs.is_some(), at, positions)?,
                Vec::new(),
            )),
            (Some(list), _, _) => Err(at(
                list.first().map_or(0, |v| v.span().start),
                "give either [[variant]] tables or [vary]/[zip] axes, not both".into(),
            )),
            (None, None, None) => Err(at(
                end,
                "the lab has no variants; add a [vary] table of axes (cpus = [\"0\", \"0-1\"]) or [[variant]] tables".into(),
            )),
            (None, vary, zip) => crossed(vary.as_ref(), zip.as_ref(), at, positions),
        }
    }

    /// Gives a lab-wide `setup`/`teardown` to every variant that names none.
    fn add_lab_hooks(
        &self,
        variants: &mut [Variant],
        positions: &mut BTreeMap<String, usize>,
        at: &At,
    ) -> Result<(), LabFileError> {
        for (key, command) in [("setup", &self.setup), ("teardown", &self.teardown)] {
            let Some(command) = command else { continue };
            if command.get_ref().trim().is_empty() {
                return Err(at(
                    command.span().start,
                    format!("'{key}' is empty; give a command, or leave it out"),
                ));
            }
            positions
                .entry(key.to_string())
                .or_insert(command.span().start);
            for v in variants
                .iter_mut()
                .filter(|v| v.knobs.iter().all(|(k, _)| k != key))
            {
                v.knobs.push((key.to_string(), command.get_ref().clone()));
            }
        }
        Ok(())
    }

    /// The lab's name: `name`, one line, or the file's stem.
    fn name(&self, path: &Path, at: &At) -> Result<String, LabFileError> {
        match &self.name {
            Some(n) if n.get_ref().trim().is_empty() || n.get_ref().contains(['\n', '\r']) => {
                Err(at(n.span().start, "'name' must be one line of text".into()))
            }
            Some(n) => Ok(n.get_ref().trim().to_string()),
            None => Ok(path
                .file_stem()
                .map_or("lab".to_string(), |s| s.to_string_lossy().into_owned())),
        }
    }
}

/// The first knob of `[vary]`, `[zip]` or a `[[variant]]` written as a
/// bare dotted key (`link.rate = …`), which TOML reads as a table `link`
/// holding `rate`: its offset and its name.
fn bare_dotted_knob(text: &str) -> Option<(usize, String)> {
    let mut in_knobs = false;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            let header: String = trimmed.chars().filter(|c| !c.is_whitespace()).collect();
            in_knobs = ["[vary]", "[zip]", "[[variant]]"]
                .iter()
                .any(|h| header.starts_with(h));
            continue;
        }
        let Some((key, _)) = trimmed.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if in_knobs && key.contains('.') && !key.starts_with(['"', '\'']) {
            return Some((start + line.len() - trimmed.len(), key.to_string()));
        }
    }
    None
}

/// A knob's value as text: a string as it is, a number or a boolean as
/// written; anything else is no value.
fn value_text(value: &Spanned<toml::Value>) -> Option<String> {
    match value.get_ref() {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(n) => Some(n.to_string()),
        toml::Value::Float(x) => Some(x.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A knob name as written, checked for being one.
fn knob_name(key: &Spanned<String>, at: &At) -> Result<String, LabFileError> {
    let name = key.get_ref().trim();
    if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c.is_control()) {
        return Err(at(
            key.span().start,
            format!(
                "'{}' is not a knob's name",
                crate::util::clipped(&crate::util::one_line(name))
            ),
        ));
    }
    Ok(name.to_string())
}

/// A knob's value, refused when it holds a line break or another control
/// character: it names its variant in the lab's tables and goes into a
/// server's settings, where a line break would begin another line.
fn one_line_value(
    knob: &str,
    text: String,
    offset: usize,
    at: &At,
) -> Result<String, LabFileError> {
    if text.contains(char::is_control) {
        return Err(at(
            offset,
            format!("a value of '{knob}' holds a line break or a control character; give it on one line"),
        ));
    }
    Ok(text)
}

/// The `[[variant]]` list: each table a `name` and its knobs.
fn named(
    list: &[RawVariant],
    costs_given: bool,
    at: &At,
    positions: &mut BTreeMap<String, usize>,
) -> Result<Vec<Variant>, LabFileError> {
    let mut out: Vec<Variant> = Vec::new();
    for table in list {
        let mut entries: Vec<_> = table.get_ref().iter().collect();
        entries.sort_by_key(|(k, _)| k.span().start);
        let mut name = None;
        let mut knobs = Vec::new();
        let mut cost = None;
        for (key, value) in entries {
            if key.get_ref() == "cost" {
                cost = Some(super::value::own_cost(value, at)?);
                continue;
            }
            let text = value_text(value).ok_or_else(|| {
                at(
                    value.span().start,
                    format!("'{}' needs a string or a number", key.get_ref()),
                )
            })?;
            if key.get_ref() == "name" {
                name = Some(text);
                continue;
            }
            let knob = knob_name(key, at)?;
            let text = one_line_value(&knob, text, value.span().start, at)?;
            positions.entry(knob.clone()).or_insert(value.span().start);
            knobs.push((knob, text));
        }
        let Some(name) = name.filter(|n| !n.trim().is_empty()) else {
            return Err(at(
                table.span().start,
                "a [[variant]] needs a name, e.g. name = \"two-cpus\"".into(),
            ));
        };
        if name.chars().any(char::is_control) || name.chars().count() > 120 {
            return Err(at(
                table.span().start,
                "a variant's name is one line of at most 120 characters (it heads a row of the lab's tables); give a shorter name without line breaks or tabs".into(),
            ));
        }
        if out.iter().any(|v| v.name == name) {
            return Err(at(
                table.span().start,
                format!("two variants are named '{name}'; name each once"),
            ));
        }
        out.push(Variant {
            name,
            knobs,
            cost,
            ratings: Vec::new(),
        });
    }
    // A variant of its own cost beside one without is an unpriced one,
    // unless [costs] prices it by its knobs (checked with [costs]).
    if out.iter().any(|v| v.cost.is_some()) && !costs_given {
        if let Some((table, v)) = list.iter().zip(&out).find(|(_, v)| v.cost.is_none()) {
            return Err(at(
                table.span().start,
                format!("variant '{}' has no cost while others have; give it cost = N, or price the knobs in [costs]", v.name),
            ));
        }
    }
    Ok(out)
}

/// An axis as read: its knobs (several for a zipped group), and per
/// value the knobs' values.
struct RawAxis {
    knobs: Vec<String>,
    values: Vec<Vec<String>>,
}

/// `[vary]` axes crossed, first axis slowest; a `[zip]` group is one more
/// axis whose knobs move together.
fn crossed(
    vary: Option<&RawAxes>,
    zip: Option<&RawAxes>,
    at: &At,
    positions: &mut BTreeMap<String, usize>,
) -> Result<(Vec<Variant>, Vec<Axis>), LabFileError> {
    let mut axes = Vec::new();
    for (key, values) in vary.map(in_file_order).unwrap_or_default() {
        let (knob, texts) = read_axis(key, values, at, positions)?;
        axes.push(RawAxis {
            knobs: vec![knob],
            values: texts.into_iter().map(|t| vec![t]).collect(),
        });
    }
    if let Some(group) = zip.map(|z| zipped(z, at, positions)).transpose()?.flatten() {
        axes.push(group);
    }
    if axes.is_empty() {
        return Err(at(
            0,
            "[vary] and [zip] name no knob; give at least one axis".into(),
        ));
    }
    let variants = cross(&axes, at)?
        .into_iter()
        .map(|knobs| Variant {
            name: knobs
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" "),
            knobs,
            cost: None,
            ratings: Vec::new(),
        })
        .collect();
    let axes = axes
        .into_iter()
        .map(|axis| Axis {
            knobs: axis.knobs,
            values: axis.values.into_iter().map(|v| v.join("/")).collect(),
        })
        .collect();
    Ok((variants, axes))
}

/// A table of axes' entries, in the order the file gives them.
fn in_file_order(axes: &RawAxes) -> Vec<(&Spanned<String>, &RawValues)> {
    let mut entries: Vec<_> = axes.get_ref().iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    entries
}

/// One axis's knob and its values as text; a knob varied twice, or given
/// no value, is refused.
fn read_axis(
    key: &Spanned<String>,
    values: &RawValues,
    at: &At,
    positions: &mut BTreeMap<String, usize>,
) -> Result<(String, Vec<String>), LabFileError> {
    let knob = knob_name(key, at)?;
    if positions.contains_key(&knob) {
        return Err(at(
            key.span().start,
            format!("'{knob}' is varied twice; give it once"),
        ));
    }
    if values.get_ref().is_empty() {
        return Err(at(
            values.span().start,
            format!("'{knob}' has no values; give at least one"),
        ));
    }
    let texts = values
        .get_ref()
        .iter()
        .map(|v| {
            let text = value_text(v).ok_or_else(|| {
                at(
                    v.span().start,
                    format!("a value of '{knob}' must be a string or a number"),
                )
            })?;
            one_line_value(&knob, text, v.span().start, at)
        })
        .collect::<Result<Vec<_>, _>>()?;
    positions.insert(knob.clone(), values.span().start);
    Ok((knob, texts))
}

/// The `[zip]` group as one axis (none when it names no knob); its knobs
/// need as many values each.
fn zipped(
    zip: &RawAxes,
    at: &At,
    positions: &mut BTreeMap<String, usize>,
) -> Result<Option<RawAxis>, LabFileError> {
    let mut group = RawAxis {
        knobs: Vec::new(),
        values: Vec::new(),
    };
    for (key, values) in in_file_order(zip) {
        let (knob, texts) = read_axis(key, values, at, positions)?;
        if !group.knobs.is_empty() && texts.len() != group.values.len() {
            return Err(at(
                values.span().start,
                format!(
                    "'{knob}' has {} values and '{}' {}; zipped knobs need as many values each",
                    texts.len(),
                    group.knobs[0],
                    group.values.len()
                ),
            ));
        }
        if group.values.is_empty() {
            group.values = vec![Vec::new(); texts.len()];
        }
        for (slot, text) in group.values.iter_mut().zip(texts) {
            slot.push(text);
        }
        group.knobs.push(knob);
    }
    Ok((!group.knobs.is_empty()).then_some(group))
}

/// Every combination of the axes' values, first axis slowest: each
/// variant's knobs and values; refused past [`MAX_CELLS`] variants.
fn cross(axes: &[RawAxis], at: &At) -> Result<Vec<Vec<(String, String)>>, LabFileError> {
    let mut variants = vec![Vec::<(String, String)>::new()];
    for axis in axes {
        variants = variants
            .iter()
            .flat_map(|done| {
                axis.values.iter().map(move |vals| {
                    let mut v = done.clone();
                    v.extend(axis.knobs.iter().cloned().zip(vals.iter().cloned()));
                    v
                })
            })
            .collect();
        if variants.len() > MAX_CELLS {
            return Err(at(
                0,
                format!("the axes cross into over {MAX_CELLS} variants; vary fewer knobs"),
            ));
        }
    }
    Ok(variants)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<LabFile, LabFileError> {
        LabFile::parse(Path::new("lab.toml"), text.to_string())
    }

    #[test]
    fn crossed_axes_make_a_matrix_in_the_files_order() {
        let lab = parse(
            "workload = \"bank\"\ntarget = \"postgres:managed\"\nargs = \"--users 1,2\"\nrepetitions = 2\n[vary]\ncpus = [\"0\", \"0-1\"]\n\"pg.shared_buffers\" = [\"16MB\", \"1GB\", 128]\n",
        )
        .unwrap();
        assert_eq!(lab.name, "lab");
        assert_eq!(lab.args, ["--users", "1,2"]);
        let searching = LabFile::parse(
            Path::new("l.toml"),
            "workload = \"null\"\nargs = \"--users 1\"\nslo = \"p95<5ms\"\nfind = true\n[vary]\ncpus = [\"0\"]\n".into(),
        )
        .unwrap();
        assert_eq!(
            searching.args,
            ["--users", "1", "--slo", "p95<5ms", "--find"]
        );
        let e = LabFile::parse(
            Path::new("l.toml"),
            "workload = \"null\"\nfind = true\n[vary]\ncpus = [\"0\"]\n".into(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("l.toml:2:8: find = true searches"), "{e}");
        assert_eq!(lab.repetitions, 2);
        assert_eq!(lab.variants.len(), 6);
        assert_eq!(lab.variants[0].name, "cpus=0 pg.shared_buffers=16MB");
        assert_eq!(
            lab.variants[2].knobs[1],
            ("pg.shared_buffers".into(), "128".into())
        );
        assert_eq!(lab.variants[3].name, "cpus=0-1 pg.shared_buffers=16MB");
        assert_eq!(lab.axes[0].knobs, ["cpus"]);
        assert_eq!(lab.axes[1].values, ["16MB", "1GB", "128"]);
    }

    #[test]
    fn zipped_knobs_move_together_and_named_variants_keep_their_names() {
        let lab = parse(
            "workload = \"bank\"\n[vary]\ncpus = [\"0\", \"0-1\"]\n[zip]\n\"pg.shared_buffers\" = [\"16MB\", \"1GB\"]\n\"pg.effective_cache_size\" = [\"64MB\", \"4GB\"]\n",
        )
        .unwrap();
        assert_eq!(lab.variants.len(), 4);
        assert_eq!(
            lab.variants[1].name,
            "cpus=0 pg.shared_buffers=1GB pg.effective_cache_size=4GB"
        );
        assert_eq!(lab.axes[1].values, ["16MB/64MB", "1GB/4GB"]);
        let lab = parse(
            "workload = \"bank\"\n[[variant]]\nname = \"one\"\ncpus = \"0\"\n[[variant]]\nname = \"two\"\ncpus = \"0-1\"\n",
        )
        .unwrap();
        assert_eq!(
            lab.variants[1],
            Variant {
                name: "two".into(),
                knobs: vec![("cpus".into(), "0-1".into())],
                cost: None,
                ratings: Vec::new(),
            }
        );
        assert!(lab.axes.is_empty());
    }

    /// Each mistake is one line placed where it is.
    #[test]
    fn mistakes_name_their_line_and_column() {
        for (text, place, fragment) in [
            (
                "workload = \"bank\"\n[vary]\ncpus = []\n",
                "lab.toml:3:8",
                "no values",
            ),
            (
                "workload = \"bank\"\n[zip]\ncpus = [\"0\"]\nx = [\"1\", \"2\"]\n",
                "lab.toml:4:5",
                "as many values",
            ),
            ("workload = \"bank\"\n", "lab.toml:2:1", "no variants"),
            (
                "workload = \"bank\"\ncolour = 1\n[vary]\ncpus=[\"0\"]\n",
                "lab.toml:2:1",
                "unknown field",
            ),
            (
                "workload = \"bank\"\n[[variant]]\nname = \"a\"\n[[variant]]\nname = \"a\"\n",
                "lab.toml:4:1",
                "named 'a'",
            ),
            (
                "workload = \"bank\"\n[[variant]]\ncpus = \"0\"\n",
                "lab.toml:2:1",
                "needs a name",
            ),
            (
                "workload = \"bank\"\n[[variant]]\nname = \"a\\nb\"\n",
                "lab.toml:2:1",
                "without line breaks",
            ),
            (
                "workload = \"bank\"\nrepetitions = 0\n[vary]\ncpus=[\"0\"]\n",
                "lab.toml:2:15",
                "1 to 1000",
            ),
            (
                "workload = \"bank\"\n[vary]\ncpus = [[1]]\n",
                "lab.toml:3:9",
                "string or a number",
            ),
            (
                "workload = \"bank\"\n[vary]\ncpus = [\"0\"\n",
                "lab.toml:3:12",
                "expected `]`",
            ),
            (
                "workload = \"bank\"\n[vary]\ncpus=[\"0\"]\n[[variant]]\nname=\"x\"\n",
                "lab.toml:4",
                "not both",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.starts_with(place), "{text:?}: {e}");
            assert!(e.contains(fragment), "{text:?}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }
}
