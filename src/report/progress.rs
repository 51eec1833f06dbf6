//! Live progress of a sweep: one line per step rewritten every interval on
//! a terminal, plain lines (one when a step starts, one when it ends) when
//! stdout is not a terminal or under `CI=true`.

use crate::engine::{FinishedStep, IntervalSpec, Schedule};
use crate::measure::{LatencySummary, Phase, StepSummary, Tally};
use crate::plan::Level;
use crate::units::{format_duration, Latency, Rate, RateUnit};
use std::io::{IsTerminal, Write};
use std::time::Duration;

/// Prints a sweep's progress.
pub(crate) struct Progress {
    live: bool,
    steps: usize,
    current: Option<(usize, Level, Duration, Duration)>,
    /// The workload's unit of throughput.
    unit: RateUnit,
}

impl Progress {
    /// Live on a terminal outside CI; plain lines otherwise; throughput
    /// in `unit`.
    pub(crate) fn new(steps: usize, unit: RateUnit) -> Self {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        Progress {
            live: std::io::stdout().is_terminal() && !ci,
            steps,
            current: None,
            unit,
        }
    }

    /// `3/6`, or `7+` for a run more of a level whose throughput varied
    /// over --max-cv; `3` in a search (`--find`), whose steps are not
    /// known in advance.
    fn position(&self, index: usize) -> String {
        if self.steps == 0 {
            format!("{}", index + 1)
        } else if index < self.steps {
            format!("{}/{}", index + 1, self.steps)
        } else {
            format!("{}+", index + 1)
        }
    }

    /// A step starts.
    pub(crate) fn step_started(&mut self, index: usize, level: Level, schedule: &Schedule) {
        let warmup = schedule.warmup();
        let total = schedule.end();
        self.current = Some((index, level, warmup, total));
        if !self.live {
            crate::util::out(format_args!(
                "step {}: {level}, warm-up {}, measuring {}\n",
                self.position(index),
                format_duration(warmup),
                format_duration(total - warmup)
            ));
        }
    }

    /// An interval of the running step ended.
    pub(crate) fn interval(&mut self, spec: &IntervalSpec, tally: &Tally) {
        if !self.live {
            return;
        }
        let Some((index, level, warmup, total)) = self.current else {
            return;
        };
        let all = tally.all_ops();
        let seconds = (spec.end - spec.start).as_secs_f64().max(f64::MIN_POSITIVE);
        let p95 = LatencySummary::of(&tally.response()).p95;
        let phase = if spec.phase == Phase::Warmup {
            format!("warm-up {}/{}", secs(spec.end), secs(warmup))
        } else {
            format!(
                "measuring {}/{}",
                secs(spec.end - warmup),
                secs(total - warmup)
            )
        };
        crate::util::out_control(format_args!(
            "\r\x1b[2Kstep {} {level}: {phase}  {}  p95 {}  errors {}",
            self.position(index),
            Rate(all.completed() as f64 / seconds, self.unit),
            Latency(p95),
            all.error_count()
        ));
        let _ = std::io::stdout().flush();
    }

    /// A step ended (and was stored).
    pub(crate) fn step_finished(&mut self, step: &FinishedStep) {
        let s: StepSummary = step.summary();
        let status = match step.status.reason() {
            Some(why) => format!("{}: {why}", step.status.as_str()),
            None => step.status.as_str().to_string(),
        };
        let mut line = format!(
            "step {}: {}: {}  p95 {}  errors {}  {status}",
            self.position(step.index),
            step.level,
            Rate(s.throughput, self.unit),
            Latency(s.response.p95),
            s.errors,
        );
        if let Some(j) = &step.judgement {
            line.push_str(&format!("  {}", super::objectives::judgement_words(j)));
        }
        if self.live {
            crate::util::out_control(format_args!("\r\x1b[2K{line}\n"));
        } else {
            crate::util::out(format_args!("{line}\n"));
        }
    }
}

fn secs(d: Duration) -> String {
    format!("{}s", d.as_secs_f64().round())
}
