//! `perflab analyze RUN`: the verdict of a stored run, recomputed from the
//! store alone — what the run printed at its end, or the same run judged
//! by other objectives (`--slo`, `--max-cv`).

use super::output::text_or_json;
use super::Exit;
use crate::analyze::verdict_of_run;
use crate::analyze::whatif::log::LogDevice;
use crate::cli::{parse_slos, AnalyzeArgs};
use crate::report::Output;

/// Runs `perflab analyze`.
pub(crate) fn analyze(args: &AnalyzeArgs) -> anyhow::Result<Exit> {
    let signals = super::report_signals::end_at_signal("analyzing the run")?;
    let slos = if args.slo.is_empty() {
        None
    } else {
        Some(parse_slos(&args.slo)?)
    };
    let max_cv = args.max_cv;
    let store = super::show::existing_store(&args.store.store)?;
    let id = store.resolve_run(&args.run)?;
    let run = super::show::load_run(&store, id)?;
    let mut verdict = verdict_of_run(&run, slos, max_cv);
    let device = match (&args.log_flush_dir, args.log_flush) {
        (Some(dir), _) => {
            let time = std::time::Duration::from_secs(2);
            let timed = crate::probe::flush::measure(dir, time, "--log-flush-dir")?;
            Some(LogDevice::timed(&timed))
        }
        (None, Some(mean)) => Some(LogDevice::given(mean)),
        (None, None) => None,
    };
    if let Some(device) = &device {
        crate::analyze::whatif::log::add_to(&mut verdict, device);
    }
    let output = Output::Verdict {
        verdict: &verdict,
        run: id,
    };
    text_or_json(
        &output,
        args.json.as_deref(),
        &format!("the verdict of run {id}"),
    )?;
    Ok(signals.exit(Exit::Ok))
}
