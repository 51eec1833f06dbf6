//! What a disk run is asked for, from its flags or from a fio job file
//! (`--fio-job`): the target's text, the file's size, the access spec,
//! direct I/O and the engine. A job's `filename` and `size` take the
//! place of `--target` and `--size` and go through the same ownership
//! checks; giving both is refused rather than one silently winning.

use super::access::AccessSpec;
use super::fio_job::{self, FioJob};
use super::{DiskArgs, Engine, DEFAULT_TARGET};
use crate::error::PlanError;
use crate::plan::StepDefaults;

/// The run asked for, before its target is looked at.
pub(super) struct Asked {
    /// `file:PATH` or `device:/dev/NAME`.
    pub(super) target: String,
    /// Neither `--target` nor a job's `filename`: perflab's own file.
    pub(super) default_target: bool,
    /// The file's size as written (`--size` or the job's `size`).
    pub(super) size: Option<String>,
    pub(super) spec: AccessSpec,
    pub(super) direct: bool,
    pub(super) engine: Option<Engine>,
    /// The flag a spec that does not fit the target is blamed on.
    pub(super) spec_flag: &'static str,
    pub(super) job: Option<FioJob>,
}

impl Asked {
    /// The run the flags ask for.
    pub(super) fn of(args: &DiskArgs) -> Result<Asked, PlanError> {
        let Some(file) = &args.fio_job else {
            return Ok(Asked {
                target: args
                    .target
                    .clone()
                    .unwrap_or_else(|| DEFAULT_TARGET.to_string()),
                default_target: args.target.is_none(),
                size: args.size.clone(),
                spec: super::access_spec(args)?,
                direct: !args.buffered,
                engine: args.engine,
                spec_flag: if args.spec_file.is_some() {
                    "--spec-file"
                } else {
                    "--spec"
                },
                job: None,
            });
        };
        let job = read_job(file, args.section.as_deref())?;
        let target = match (&job.filename, &args.target) {
            (Some(_), Some(_)) => return Err(both(&job, "filename", "--target")),
            (Some(name), None) if name.starts_with("/dev/") => format!("device:{name}"),
            (Some(name), None) => format!("file:{name}"),
            (None, given) => given.clone().unwrap_or_else(|| DEFAULT_TARGET.to_string()),
        };
        let size = match (job.size, &args.size) {
            (Some(_), Some(_)) => return Err(both(&job, "size", "--size")),
            (Some(bytes), None) => Some(bytes.to_string()),
            (None, given) => given.clone(),
        };
        Ok(Asked {
            target,
            default_target: job.filename.is_none() && args.target.is_none(),
            size,
            spec: job.spec.clone(),
            direct: job.direct,
            engine: job.engine,
            spec_flag: "--fio-job",
            job: Some(job),
        })
    }

    /// The steps the job asks for where no flag does.
    pub(super) fn steps(&self) -> Option<StepDefaults> {
        self.job.as_ref().map(|j| StepDefaults {
            users: Some(j.outstanding),
            rate: j.rate_iops,
            duration: j.runtime,
            threads: None,
            slack: None,
        })
    }
}

/// The job of `file` (its `section`, or its only one), or one line naming
/// the file, the line and what is wrong.
fn read_job(file: &std::path::Path, section: Option<&str>) -> Result<FioJob, PlanError> {
    let shown = file.display().to_string();
    let text = crate::util::read_text_bounded(file, fio_job::MAX_JOB_FILE).map_err(|e| {
        PlanError::flag(
            "--fio-job",
            format!("{shown}: {e}"),
            "give a readable fio job file (text, at most 1 MiB)",
        )
    })?;
    fio_job::read(&text, &shown, section).map_err(|e| {
        PlanError::flag(
            "--fio-job",
            format!("{shown}:{}: {}", e.line, e.message),
            "see docs/disk.md, \"Your own fio job\"",
        )
    })
}

/// A job option and the flag of the same meaning, both given.
fn both(job: &FioJob, option: &str, flag: &str) -> PlanError {
    PlanError::flag(
        flag,
        format!(
            "the job [{}] of {} sets {option}= too",
            job.section, job.file
        ),
        &format!("give {flag} or the job's {option}=, not both"),
    )
}
