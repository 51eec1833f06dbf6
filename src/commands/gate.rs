//! `perflab compare BASE NEW --fail-on 'throughput<-5%,p95>+10%'`: the
//! gate of a CI job. Each run is a run in the store (a number, `last`) or
//! a JSON export a job kept (`perflab show N --json FILE`); exit 1 when a
//! threshold fails ([`crate::analyze::gate`]), 0 when none does, 2 for
//! runs of different plans or a bad threshold.

use super::Exit;
use crate::analyze::gate::{self, Gate, Threshold};
use crate::error::PlanError;
use crate::report::svg::escape;
use std::path::{Path, PathBuf};

/// The files a CI system reads that the gate also writes: JUnit XML
/// (`--junit`) and a Markdown job summary (`--markdown`).
#[derive(Debug, Clone, Default)]
pub(super) struct CiFiles {
    pub(super) junit: Option<PathBuf>,
    pub(super) markdown: Option<PathBuf>,
}

impl CiFiles {
    /// Writes the gate to each file asked for, and says so.
    fn write(&self, g: &Gate) -> anyhow::Result<()> {
        use super::output::{save, Readers, Saved};
        let files = [
            (&self.junit, "--junit", junit(g)),
            (&self.markdown, "--markdown", markdown(g)),
        ];
        for (path, flag, text) in files {
            let Some(path) = path else { continue };
            if save(path, &text, flag, Readers::Umask)? == Saved::File {
                crate::util::out(format_args!(
                    "gate: wrote {} to {}\n",
                    &flag[2..],
                    path.display()
                ));
            }
        }
        Ok(())
    }
}

/// The largest export read as a baseline: a run's export is megabytes.
const MAX_EXPORT_BYTES: u64 = 512 << 20;

/// The thresholds of `--fail-on`.
pub(super) fn thresholds(text: &str) -> anyhow::Result<Vec<Threshold>> {
    gate::parse_thresholds(text).map_err(|e| {
        PlanError::flag("--fail-on", e, "e.g. --fail-on 'throughput<-5%,p95>+10%'").into()
    })
}

/// Gates `runs` (the baseline, then the run judged) and prints the lines
/// as text, Markdown or JSON.
pub(super) fn run_gate(
    runs: &[String],
    store: &Path,
    thresholds: &[Threshold],
    format: crate::report::Format,
    files: &CiFiles,
) -> anyhow::Result<Exit> {
    let [base, new] = runs else {
        return Err(PlanError::flag(
            "--fail-on",
            format!("{} runs are given", runs.len()),
            "the gate judges one run against its baseline: give BASE NEW",
        )
        .into());
    };
    let (base_json, base_name) = exported(base, store)?;
    let (new_json, new_name) = exported(new, store)?;
    if let Some(why) = gate::plan_difference(&base_json, &new_json) {
        return Err(PlanError::new(format!(
            "{new_name} cannot be gated against {base_name}: {why}; gate runs of one plan"
        ))
        .into());
    }
    let seed = base_json
        .pointer("/run/plan/seed")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(1);
    let g = gate::judge(
        &base_json,
        &new_json,
        (&base_name, &new_name),
        thresholds,
        seed,
    );
    let text = match format {
        crate::report::Format::Json => serde_json::to_string_pretty(&g)? + "\n",
        crate::report::Format::Markdown => markdown(&g),
        _ => terminal(&g),
    };
    crate::util::out(format_args!("{text}"));
    files.write(&g)?;
    Ok(if g.failed { Exit::Failed } else { Exit::Ok })
}

/// A baseline read before a run (`run --baseline B --fail-on T`), to gate
/// the run against once it is stored.
pub(super) struct Baseline {
    export: serde_json::Value,
    name: String,
    thresholds: Vec<Threshold>,
    files: CiFiles,
}

impl Baseline {
    /// The baseline of `--baseline`, with the thresholds of `--fail-on`;
    /// none without them. Refused as bad input before anything runs.
    pub(super) fn of(
        baseline: Option<&str>,
        fail_on: Option<&str>,
        store: &Path,
        files: CiFiles,
    ) -> anyhow::Result<Option<Baseline>> {
        let (Some(baseline), Some(fail_on)) = (baseline, fail_on) else {
            return Ok(None);
        };
        let thresholds = thresholds(fail_on)?;
        let (export, name) = exported(baseline, store)?;
        Ok(Some(Baseline {
            export,
            name,
            thresholds,
            files,
        }))
    }

    /// Gates stored run `run` against the baseline and prints the lines:
    /// `exit` as it was, or failed when the gate fails. A run that did not
    /// end well is not gated.
    pub(super) fn gate(
        &self,
        store: &crate::store::Store,
        run: crate::store::RunId,
        exit: Exit,
    ) -> anyhow::Result<Exit> {
        if exit != Exit::Ok {
            crate::util::out(format_args!(
                "gate: not judged, run {run} did not end well\n"
            ));
            return Ok(exit);
        }
        let new = crate::report::run_json(&super::show::load_run(store, run)?);
        if let Some(why) = gate::plan_difference(&self.export, &new) {
            crate::util::out(format_args!(
                "gate: run {run} cannot be gated against {}: {why}\n",
                self.name
            ));
            return Ok(Exit::Failed);
        }
        let seed = self
            .export
            .pointer("/run/plan/seed")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(1);
        let g = gate::judge(
            &self.export,
            &new,
            (&self.name, &format!("run {run}")),
            &self.thresholds,
            seed,
        );
        crate::util::out(format_args!("\n{}", terminal(&g)));
        self.files.write(&g)?;
        Ok(if g.failed { Exit::Failed } else { Exit::Ok })
    }
}

/// A run's export and its name: the file when `arg` names one, else the
/// run of that number in the store.
fn exported(arg: &str, store: &Path) -> anyhow::Result<(serde_json::Value, String)> {
    let path = Path::new(arg);
    let is_run = arg == "last" || arg.chars().all(|c| c.is_ascii_digit());
    if !is_run {
        return Ok((read_export(path)?, path.display().to_string()));
    }
    let store = super::show::existing_store(store)?;
    let id = store.resolve_run(arg)?;
    let run = super::show::load_run(&store, id)?;
    Ok((crate::report::run_json(&run), format!("run {id}")))
}

/// An exported run read from `path`, refused in one line when it is not
/// one.
fn read_export(path: &Path) -> anyhow::Result<serde_json::Value> {
    let bad = |why: String| -> anyhow::Error {
        PlanError::new(format!(
            "{}: {why}; give a run of the store (a number, last) or a file written by `perflab show N --json FILE`",
            path.display()
        ))
        .into()
    };
    let meta = std::fs::metadata(path).map_err(|e| bad(format!("cannot be read ({e})")))?;
    if !meta.is_file() || meta.len() > MAX_EXPORT_BYTES {
        return Err(bad("is not a run's export".to_string()));
    }
    let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot be read ({e})")))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("is not JSON ({e})")))?;
    if value.get("schema").is_none() || value.get("steps").is_none() {
        return Err(bad("is JSON but not a run's export".to_string()));
    }
    Ok(value)
}

fn terminal(g: &Gate) -> String {
    let mut out = format!(
        "gate: {} against {} (the baseline): {}\n",
        g.new,
        g.base,
        if g.failed { "FAIL" } else { "pass" }
    );
    for line in &g.lines {
        out.push_str(&format!("  {}\n", line.said));
    }
    if let Some(moved) = &g.moved {
        out.push_str(&format!("  {moved}\n"));
    }
    if let Some((base, new)) = &g.verdicts {
        for (name, side) in [(&g.base, base), (&g.new, new)] {
            let mut said = side.bottleneck.clone();
            for (what, value) in [("peak", &side.peak), ("p95 there", &side.p95)] {
                if let Some(value) = value {
                    said.push_str(&format!(", {what} {value}"));
                }
            }
            if let Some(evidence) = &side.evidence {
                said.push_str(&format!("; {evidence}"));
            }
            out.push_str(&format!("    {name}: {said}\n"));
        }
    }
    out
}

fn markdown(g: &Gate) -> String {
    let mut out = format!(
        "### Gate: {} against {}: {}\n\n| threshold | result | line |\n|---|---|---|\n",
        g.new,
        g.base,
        if g.failed { "**FAIL**" } else { "pass" }
    );
    for line in &g.lines {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            line.threshold,
            if line.failed { "**FAIL**" } else { "pass" },
            cell(&line.said)
        ));
    }
    if let Some(moved) = &g.moved {
        out.push_str(&format!("\n{moved}\n"));
    }
    if let Some((base, new)) = &g.verdicts {
        out.push_str(&format!(
            "\n| verdict | {} (baseline) | {} |\n|---|---|---|\n",
            cell(&g.base),
            cell(&g.new)
        ));
        for ((what, a), (_, b)) in base.rows().into_iter().zip(new.rows()) {
            let shown = |v: Option<&str>| v.map_or("-".to_string(), cell);
            out.push_str(&format!("| {what} | {} | {} |\n", shown(a), shown(b)));
        }
    }
    out
}

/// Text in a Markdown table's cell: a `|` escaped, a line break a space.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// The gate as JUnit XML: one test suite, one test case per threshold,
/// a failed threshold's case holding a `<failure>`; the moved bottleneck
/// in the suite's `<system-out>`.
pub(crate) fn junit(g: &Gate) -> String {
    let failures = g.lines.iter().filter(|l| l.failed).count();
    let suite = escape(&format!("perflab gate: {} against {}", g.new, g.base));
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"perflab\" tests=\"{n}\" failures=\"{failures}\" errors=\"0\">\n  <testsuite name=\"{suite}\" tests=\"{n}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\">\n",
        n = g.lines.len()
    );
    for line in &g.lines {
        let name = escape(&line.threshold);
        out.push_str(&format!(
            "    <testcase classname=\"perflab.gate\" name=\"{name}\">\n"
        ));
        if line.failed {
            out.push_str(&format!(
                "      <failure type=\"threshold\" message=\"{}\">{}</failure>\n",
                escape(&line.said),
                escape(&line.said)
            ));
        } else {
            out.push_str(&format!(
                "      <system-out>{}</system-out>\n",
                escape(&line.said)
            ));
        }
        out.push_str("    </testcase>\n");
    }
    if let Some(moved) = &g.moved {
        out.push_str(&format!("    <system-out>{}</system-out>\n", escape(moved)));
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

#[cfg(test)]
mod tests;
