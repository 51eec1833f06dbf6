//! fio job files read as disk access specs (`--fio-job FILE`). The common
//! part of the format: INI sections (`[global]`, whose options apply to
//! the jobs after it, and job sections), whole-line `;` and `#` comments,
//! `key=value` or a bare flag on each line, sizes with k/m/g/t/p in base
//! 1024 (fio's default), times in fio's default units (seconds for
//! `runtime`, microseconds for `thinktime`).
//!
//! One job is taken: the `--section` named, or the only job section. Its
//! `rw`, `rwmixread`/`rwmixwrite`, `bs`/`bssplit`/`bsrange` and
//! `thinktime` become the lines of an [`AccessSpec`] (one line per block
//! size, the read and random percentages of the pattern); `iodepth` ×
//! `numjobs` the outstanding I/Os, `rate_iops` × `numjobs` an offered
//! rate, `runtime` the step's measured window; `size`, `filename`,
//! `direct` and `ioengine` the target and the engine. Any other option,
//! value or form is refused with its line, never ignored.

use super::access::{AccessSpec, Line, MAX_TRANSFER};
use super::Engine;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The longest job file read.
pub(crate) const MAX_JOB_FILE: u64 = 1 << 20;

/// The most block sizes a `bssplit` or `bsrange` may give (each is a line
/// of the spec, with two operations counted apart).
const MAX_SIZES: usize = 64;

/// The longest text option (`name`, `description`, `filename`) taken.
const MAX_TEXT: usize = 4096;

/// The longest time option taken: a day, as the engine's longest wait.
const LONGEST: Duration = Duration::from_secs(86_400);

/// The options read, as the refusal of any other lists them.
const OPTIONS: &str = "rw, readwrite, rwmixread, rwmixwrite, bs, bssplit, bsrange, iodepth, size, filename, direct, numjobs, offset, rate_iops, thinktime, time_based, runtime, norandommap, ioengine, name, description";

/// A mistake in a job file: its line (from 1) and what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JobError {
    pub(crate) line: usize,
    pub(crate) message: String,
}

impl JobError {
    fn at(line: usize, message: impl Into<String>) -> JobError {
        JobError {
            line,
            message: message.into(),
        }
    }
}

/// The job taken from a file, resolved: what the run's plan stores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FioJob {
    /// The job file, as given.
    pub(crate) file: String,
    /// The section the job came from.
    pub(crate) section: String,
    /// The job's `name` (its section's when not set).
    pub(crate) name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<String>,
    /// The access spec of its `rw`, mix, block sizes and think time.
    pub(crate) spec: AccessSpec,
    pub(crate) iodepth: u32,
    pub(crate) numjobs: u32,
    /// The I/Os it keeps outstanding: `iodepth` × `numjobs`.
    pub(crate) outstanding: u32,
    /// The I/Os per second it offers (`rate_iops` × `numjobs`), if capped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) rate_iops: Option<u64>,
    /// Its `runtime`: each step's measured window when `--duration` is not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) runtime: Option<Duration>,
    pub(crate) time_based: bool,
    /// `norandommap` was given: fio, too, draws each offset independently.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) norandommap: bool,
    /// The file's size (`size`), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) filename: Option<String>,
    pub(crate) direct: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) engine: Option<Engine>,
}

impl FioJob {
    /// One line saying what runs: the file, the section, the job's name
    /// and description, its outstanding I/Os and the spec's lines.
    pub(crate) fn summary(&self) -> String {
        let lines: Vec<String> = self.spec.lines.iter().map(Line::text).collect();
        let rate = self
            .rate_iops
            .map_or(String::new(), |r| format!(", {r} I/Os per second"));
        let about = self
            .description
            .as_deref()
            .map_or(String::new(), |d| format!(" \"{}\"", clip(d)));
        format!(
            "fio job {} [{}] {}{about}: {} outstanding I/Os{rate}, {}{}{}",
            self.file,
            self.section,
            self.name,
            self.outstanding,
            if self.direct { "direct" } else { "buffered" },
            lines.iter().map(|l| format!("; {l}")).collect::<String>(),
            self.random_map_note()
        )
    }

    /// Where fio would run this job's sizes otherwise: without
    /// `norandommap`, fio touches each block once per pass and shortens an
    /// I/O to the untouched blocks at its offset, so a random mix of sizes
    /// leans to the smallest as the pass fills (4k/50:64k/50 ran 73 % 4k
    /// I/Os by count in fio here); perflab keeps the job's shares.
    fn random_map_note(&self) -> &'static str {
        let random = self.spec.lines.iter().any(|l| l.random > 0.0);
        if self.norandommap || !random || self.spec.lines.len() < 2 {
            return "";
        }
        " (each offset drawn on its own, as fio's norandommap; fio without it shortens I/Os to a pass's untouched blocks and so runs more small ones than the shares say)"
    }
}

/// One `key[=value]` line.
#[derive(Debug, Clone)]
struct Entry {
    line: usize,
    key: String,
    value: Option<String>,
}

/// A job section, with the `[global]` options before it.
#[derive(Debug)]
struct Section {
    name: String,
    line: usize,
    entries: Vec<Entry>,
}

/// Reads `text` (the file `file`) and takes the job `wanted`, or the only one.
pub(crate) fn read(text: &str, file: &str, wanted: Option<&str>) -> Result<FioJob, JobError> {
    let jobs = sections(text)?;
    let section = choose(&jobs, wanted)?;
    let settings = Settings::from_entries(&section.entries)?;
    settings.job(file, &section.name, section.line)
}

/// The job sections of `text`, each with the global options before it.
fn sections(text: &str) -> Result<Vec<Section>, JobError> {
    let mut global: Vec<Entry> = Vec::new();
    let mut jobs: Vec<Section> = Vec::new();
    let mut in_global = None;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.contains(|c: char| c.is_control() && c != '\t') {
            return Err(JobError::at(
                n,
                "the line holds control characters; a job file is text",
            ));
        }
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let name = rest
                .strip_suffix(']')
                .map(str::trim)
                .filter(|s| !s.is_empty() && !s.contains(['[', ']']))
                .ok_or_else(|| {
                    JobError::at(n, format!("'{}' is not a [section] line", clip(line)))
                })?;
            if name == "global" {
                in_global = Some(true);
                continue;
            }
            if jobs.iter().any(|j| j.name == name) {
                return Err(JobError::at(
                    n,
                    format!("the section [{}] is given twice", clip(name)),
                ));
            }
            jobs.push(Section {
                name: name.to_string(),
                line: n,
                entries: global.clone(),
            });
            in_global = Some(false);
            continue;
        }
        let entry = entry(line, n)?;
        match (in_global, jobs.last_mut()) {
            (Some(true), _) => global.push(entry),
            (Some(false), Some(job)) => job.entries.push(entry),
            _ => {
                return Err(JobError::at(
                    n,
                    "an option before any [section]; put it under [global] or a job's section",
                ))
            }
        }
    }
    Ok(jobs)
}

/// One option line: `key=value` (spaces around `=` allowed) or a bare key.
fn entry(line: &str, n: usize) -> Result<Entry, JobError> {
    let (key, value) = match line.split_once('=') {
        Some((k, v)) => (k.trim(), Some(v.trim().to_string())),
        None => (line, None),
    };
    if key.is_empty() || key.contains(char::is_whitespace) {
        return Err(JobError::at(
            n,
            format!("'{}' is not key=value", clip(line)),
        ));
    }
    if value.as_deref().is_some_and(|v| v.contains("${")) {
        return Err(JobError::at(
            n,
            format!("{key}: environment variables are not expanded here; write the value itself"),
        ));
    }
    Ok(Entry {
        line: n,
        key: key.to_ascii_lowercase(),
        value,
    })
}

/// The section `wanted`, or the only job section.
fn choose<'a>(jobs: &'a [Section], wanted: Option<&str>) -> Result<&'a Section, JobError> {
    match (wanted, jobs) {
        (Some(w), _) => jobs.iter().find(|j| j.name == w).ok_or_else(|| {
            let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
            JobError::at(
                1,
                format!(
                    "no section [{}]; its job sections are: {}",
                    clip(w),
                    names.join(", ")
                ),
            )
        }),
        (None, [only]) => Ok(only),
        (None, []) => Err(JobError::at(
            1,
            "no job section, only [global]; add a [job] section",
        )),
        (None, [_, second, ..]) => Err(JobError::at(
            second.line,
            format!(
                "several job sections ([{}], [{}]{}); choose one with --section NAME",
                jobs[0].name,
                second.name,
                if jobs.len() > 2 { ", …" } else { "" }
            ),
        )),
    }
}

/// A long text clipped for an error line.
fn clip(text: &str) -> String {
    crate::util::clipped(text).into_owned()
}

/// The I/O pattern of `rw`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Pattern {
    Read,
    Write,
    Mixed,
}

/// The options a job sets, with the line each was set on (a section's
/// setting overrides its global's).
#[derive(Debug, Default)]
struct Settings {
    rw: Option<(Pattern, bool)>,
    mix_read: Option<(u32, usize)>,
    mix_write: Option<(u32, usize)>,
    bs: Option<u64>,
    bssplit: Option<Vec<(u64, f64)>>,
    bsrange: Option<(u64, u64, usize)>,
    iodepth: Option<u32>,
    numjobs: Option<u32>,
    size: Option<u64>,
    filename: Option<String>,
    direct: Option<bool>,
    rate_iops: Option<(u64, usize)>,
    thinktime: Option<Duration>,
    time_based: bool,
    norandommap: bool,
    runtime: Option<Duration>,
    engine: Option<Engine>,
    name: Option<String>,
    description: Option<String>,
}

impl Settings {
    fn from_entries(entries: &[Entry]) -> Result<Settings, JobError> {
        let mut s = Settings::default();
        for e in entries {
            s.set(e).map_err(|m| JobError::at(e.line, m))?;
        }
        Ok(s)
    }

    /// Takes one option, or says why not.
    fn set(&mut self, e: &Entry) -> Result<(), String> {
        let key = e.key.as_str();
        let bare = e.value.is_none();
        let v = e.value.as_deref().unwrap_or("");
        if bare && !matches!(key, "time_based" | "direct" | "norandommap") {
            return Err(format!("{key} needs a value ({key}=…)"));
        }
        match key {
            "rw" | "readwrite" => self.rw = Some(pattern(v)?),
            "rwmixread" => self.mix_read = Some((percent(key, v)?, e.line)),
            "rwmixwrite" => self.mix_write = Some((percent(key, v)?, e.line)),
            "bs" | "blocksize" => self.bs = Some(block_size(key, v)?),
            "bssplit" => self.bssplit = Some(bssplit(v)?),
            "bsrange" | "blocksize_range" => self.bsrange = Some(bsrange(v, e.line)?),
            "iodepth" => self.iodepth = Some(count(key, v)?),
            "numjobs" => self.numjobs = Some(count(key, v)?),
            "size" => self.size = Some(nonzero(key, v)?),
            "filename" => self.filename = Some(filename(v)?),
            "direct" => self.direct = Some(bare || flag(key, v)?),
            "time_based" => self.time_based = bare || flag(key, v)?,
            // perflab draws every offset on its own: what this asks of fio.
            "norandommap" => self.norandommap = bare || flag(key, v)?,
            "offset" => offset(v)?,
            "rate_iops" => self.rate_iops = Some((rate(v)?, e.line)),
            "thinktime" => self.thinktime = Some(time(key, v, Duration::from_micros(1))?),
            "runtime" => self.runtime = Some(time(key, v, Duration::from_secs(1))?),
            "ioengine" => self.engine = Some(engine(v)?),
            "name" => self.name = Some(text(key, v)?),
            "description" => self.description = Some(text(key, v)?),
            other => {
                return Err(format!(
                    "the option '{}' is not one perflab runs (it reads {OPTIONS}); remove it or run the job with fio",
                    clip(other)
                ))
            }
        }
        Ok(())
    }

    /// The job, resolved.
    fn job(self, file: &str, section: &str, line: usize) -> Result<FioJob, JobError> {
        let name = self.name.clone().unwrap_or_else(|| section.to_string());
        let spec = self.spec(&name, line)?;
        let iodepth = self.iodepth.unwrap_or(1);
        let numjobs = self.numjobs.unwrap_or(1);
        let outstanding = iodepth
            .checked_mul(numjobs)
            .filter(|n| *n <= crate::plan::load::MAX_USERS)
            .ok_or_else(|| {
                JobError::at(
                    line,
                    format!(
                        "iodepth {iodepth} × numjobs {numjobs} is more than the {} I/Os perflab keeps outstanding",
                        crate::plan::load::MAX_USERS
                    ),
                )
            })?;
        let rate_iops = match self.rate_iops {
            Some((r, at)) => Some(
                r.checked_mul(u64::from(numjobs))
                    .filter(|t| *t as f64 <= crate::plan::load::MAX_RATE)
                    .ok_or_else(|| JobError::at(at, format!("rate_iops {r} × numjobs {numjobs} is above the highest rate perflab offers")))?,
            ),
            None => None,
        };
        Ok(FioJob {
            file: file.to_string(),
            section: section.to_string(),
            name,
            description: self.description,
            spec,
            iodepth,
            numjobs,
            outstanding,
            rate_iops,
            runtime: self.runtime,
            time_based: self.time_based,
            norandommap: self.norandommap,
            size: self.size,
            filename: self.filename,
            direct: self.direct.unwrap_or(false),
            engine: self.engine,
        })
    }

    /// The access spec: a line per block size, each with the pattern's
    /// read and random percentages, aligned to the smallest size (fio's
    /// default block alignment).
    fn spec(&self, name: &str, line: usize) -> Result<AccessSpec, JobError> {
        let (pattern, random) = self.rw.unwrap_or((Pattern::Read, false));
        let read = match pattern {
            Pattern::Read => 100.0,
            Pattern::Write => 0.0,
            Pattern::Mixed => f64::from(self.read_share()?),
        };
        let sizes = match (&self.bssplit, self.bsrange) {
            (Some(split), _) => split.clone(),
            (None, Some((low, high, at))) => {
                range_sizes(low, high).map_err(|m| JobError::at(at, m))?
            }
            (None, None) => vec![(self.bs.unwrap_or(4096), 100.0)],
        };
        let align = sizes.iter().map(|(s, _)| *s).min().unwrap_or(4096);
        let lines = sizes
            .iter()
            .map(|&(size, share)| Line {
                size,
                share,
                read,
                random: if random { 100.0 } else { 0.0 },
                delay: self.thinktime.unwrap_or(Duration::ZERO),
                burst: 1,
                align,
            })
            .collect();
        AccessSpec::from_lines(name.to_string(), lines, |i| format!("block size {}", i + 1))
            .map_err(|m| JobError::at(line, m))
    }

    /// A mixed pattern's read percentage: `rwmixread`, or 100 less
    /// `rwmixwrite`, or 50; both given must sum to 100.
    fn read_share(&self) -> Result<u32, JobError> {
        Ok(match (self.mix_read, self.mix_write) {
            (Some((r, _)), Some((w, at))) if r + w != 100 => {
                return Err(JobError::at(
                    at,
                    format!("rwmixread={r} and rwmixwrite={w} do not sum to 100; give one of them"),
                ))
            }
            (Some((r, _)), _) => r,
            (None, Some((w, _))) => 100 - w,
            (None, None) => 50,
        })
    }
}

/// `rw`'s pattern and whether it is random.
fn pattern(v: &str) -> Result<(Pattern, bool), String> {
    Ok(match v {
        "read" => (Pattern::Read, false),
        "write" => (Pattern::Write, false),
        "randread" => (Pattern::Read, true),
        "randwrite" => (Pattern::Write, true),
        "rw" | "readwrite" => (Pattern::Mixed, false),
        "randrw" => (Pattern::Mixed, true),
        other if other.contains(':') => {
            return Err(format!(
                "rw={}: an offset modifier (':') is not run; give the pattern alone",
                clip(other)
            ))
        }
        other => {
            return Err(format!(
                "rw={}: perflab runs read, write, randread, randwrite, rw (readwrite) and randrw",
                clip(other)
            ))
        }
    })
}

/// A size in fio's form: a whole number with an optional k, m, g, t or p
/// (base 1024, with or without a trailing `b` or `ib`, any case).
pub(crate) fn size(v: &str) -> Option<u64> {
    let digits = v.len() - v.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return None;
    }
    let number: u64 = v[..digits].parse().ok()?;
    let unit = v[digits..].to_ascii_lowercase();
    let base = match unit.strip_suffix("ib") {
        Some("") => return None,
        Some(base) => base,
        None => unit.strip_suffix('b').unwrap_or(&unit),
    };
    let shift = match base {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        "p" => 50,
        _ => return None,
    };
    number.checked_mul(1u64 << shift)
}

/// A size from `key=v`, said wrong in one line.
fn parsed_size(key: &str, v: &str) -> Result<u64, String> {
    size(v).ok_or_else(|| {
        format!(
            "{key}={}: not a size; give a whole number of bytes with k, m or g (e.g. 4k), at most 16 EiB",
            clip(v)
        )
    })
}

/// A size above zero.
fn nonzero(key: &str, v: &str) -> Result<u64, String> {
    match parsed_size(key, v)? {
        0 => Err(format!("{key}=0 moves nothing; give a size above 0")),
        n => Ok(n),
    }
}

/// One block size: above zero, at most [`MAX_TRANSFER`], the same for
/// reads and writes.
fn block_size(key: &str, v: &str) -> Result<u64, String> {
    if v.contains(',') {
        return Err(format!(
            "{key}={}: separate read and write block sizes are not run; give one size",
            clip(v)
        ));
    }
    let n = nonzero(key, v)?;
    if n > MAX_TRANSFER {
        return Err(format!(
            "{key}={}: above the largest transfer perflab runs, {}",
            clip(v),
            crate::units::Bytes(MAX_TRANSFER)
        ));
    }
    Ok(n)
}

/// `bssplit`: `size/percent` entries separated by `:`; entries without a
/// percentage share what the others leave, equally; the shares sum to 100.
fn bssplit(v: &str) -> Result<Vec<(u64, f64)>, String> {
    if v.contains(',') {
        return Err(format!(
            "bssplit={}: separate read and write splits are not run; give one split",
            clip(v)
        ));
    }
    let parts: Vec<&str> = v.split(':').collect();
    if parts.len() > MAX_SIZES {
        return Err(format!(
            "bssplit: {} sizes; perflab runs at most {MAX_SIZES}",
            parts.len()
        ));
    }
    let mut given = Vec::with_capacity(parts.len());
    for part in parts {
        let (s, p) = match part.split_once('/') {
            Some((s, p)) => (s, Some(p).filter(|p| !p.is_empty())),
            None => (part, None),
        };
        let share = p.map(|p| percent("bssplit", p)).transpose()?;
        given.push((block_size("bssplit", s)?, share));
    }
    let set: u32 = given.iter().filter_map(|(_, p)| *p).sum();
    let unset = given.iter().filter(|(_, p)| p.is_none()).count();
    if set > 100 || (unset == 0 && set != 100) || (unset > 0 && set == 100) {
        return Err(format!(
            "bssplit={}: the percentages sum to {set}, not 100",
            clip(v)
        ));
    }
    let rest = f64::from(100 - set) / unset.max(1) as f64;
    Ok(given
        .into_iter()
        .filter(|(_, p)| *p != Some(0))
        .map(|(s, p)| (s, p.map_or(rest, f64::from)))
        .collect())
}

/// `bsrange`: `low-high`; its sizes are the multiples of `low` up to
/// `high`, drawn equally (as fio draws its sizes).
fn bsrange(v: &str, line: usize) -> Result<(u64, u64, usize), String> {
    let (low, high) = v
        .split_once('-')
        .ok_or_else(|| format!("bsrange={}: give low-high, e.g. 4k-64k", clip(v)))?;
    let (low, high) = (block_size("bsrange", low)?, block_size("bsrange", high)?);
    if low > high {
        return Err(format!(
            "bsrange={}: the low size is above the high one",
            clip(v)
        ));
    }
    Ok((low, high, line))
}

/// The sizes of a `bsrange`, in equal shares.
fn range_sizes(low: u64, high: u64) -> Result<Vec<(u64, f64)>, String> {
    let n = high / low;
    if n > MAX_SIZES as u64 {
        return Err(format!(
            "bsrange gives {n} sizes (multiples of {low} up to {high}); perflab runs at most {MAX_SIZES}: give a bssplit"
        ));
    }
    let share = 100.0 / n as f64;
    Ok((1..=n).map(|k| (k * low, share)).collect())
}

/// A whole percentage, 0 to 100.
fn percent(key: &str, v: &str) -> Result<u32, String> {
    v.parse::<u32>()
        .ok()
        .filter(|p| *p <= 100)
        .ok_or_else(|| format!("{key}={}: not a whole percentage from 0 to 100", clip(v)))
}

/// A count of 1 or more, at most perflab's most users.
fn count(key: &str, v: &str) -> Result<u32, String> {
    v.parse::<u32>()
        .ok()
        .filter(|n| (1..=crate::plan::load::MAX_USERS).contains(n))
        .ok_or_else(|| {
            format!(
                "{key}={}: not a count from 1 to {}",
                clip(v),
                crate::plan::load::MAX_USERS
            )
        })
}

/// 0 or 1.
fn flag(key: &str, v: &str) -> Result<bool, String> {
    match v {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(format!("{key}={}: give 0 or 1", clip(v))),
    }
}

/// `offset`: only 0 (perflab's I/O spans the whole file).
fn offset(v: &str) -> Result<(), String> {
    match parsed_size("offset", v)? {
        0 => Ok(()),
        _ => Err(format!(
            "offset={}: a region inside the file is not run (perflab's I/O spans the whole file); drop it or give offset=0",
            clip(v)
        )),
    }
}

/// `rate_iops`: one rate for reads and writes together.
fn rate(v: &str) -> Result<u64, String> {
    if v.contains(',') {
        return Err(format!(
            "rate_iops={}: separate read and write rates are not run; give one rate",
            clip(v)
        ));
    }
    v.parse::<u64>().ok().filter(|r| *r >= 1).ok_or_else(|| {
        format!(
            "rate_iops={}: not a whole number of I/Os per second",
            clip(v)
        )
    })
}

/// A time: a whole number in `unit` (fio's default for the option) or
/// with us, ms, s, m, h or d.
fn time(key: &str, v: &str, unit: Duration) -> Result<Duration, String> {
    let digits = v.len() - v.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let bad = || {
        format!(
            "{key}={}: not a time; give e.g. 30s, 500ms or a whole number",
            clip(v)
        )
    };
    let n: u32 = v[..digits].parse().map_err(|_| bad())?;
    let unit = match v[digits..].to_ascii_lowercase().as_str() {
        "" => unit,
        "us" | "usec" => Duration::from_micros(1),
        "ms" | "msec" => Duration::from_millis(1),
        "s" | "sec" => Duration::from_secs(1),
        "m" | "min" => Duration::from_secs(60),
        "h" => Duration::from_secs(3600),
        "d" => Duration::from_secs(86_400),
        _ => return Err(bad()),
    };
    let t = unit.checked_mul(n).ok_or_else(bad)?;
    if t > LONGEST {
        return Err(format!("{key}={}: longer than a day", clip(v)));
    }
    Ok(t)
}

/// `ioengine`: fio's asynchronous engines run on io_uring, its
/// synchronous ones on pread/pwrite.
fn engine(v: &str) -> Result<Engine, String> {
    match v {
        "libaio" | "io_uring" => Ok(Engine::Uring),
        "psync" | "sync" => Ok(Engine::Psync),
        other => Err(format!(
            "ioengine={}: perflab runs libaio and io_uring (on its io_uring engine) and psync and sync (on pread/pwrite), no other",
            clip(other)
        )),
    }
}

/// `filename`: one file (fio's `:` joins several).
fn filename(v: &str) -> Result<String, String> {
    if v.is_empty() {
        return Err("filename= is empty; give a path".to_string());
    }
    if v.contains(':') {
        return Err(format!(
            "filename={}: several files (':') are not run; give one path",
            clip(v)
        ));
    }
    text("filename", v)
}

/// A text option, bounded.
fn text(key: &str, v: &str) -> Result<String, String> {
    if v.len() > MAX_TEXT {
        return Err(format!("{key}: longer than {MAX_TEXT} bytes"));
    }
    Ok(v.to_string())
}

#[cfg(test)]
#[path = "fio_job_tests.rs"]
mod tests;
