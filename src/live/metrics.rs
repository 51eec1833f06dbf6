//! The run's numbers for Prometheus: cumulative counts of operations by
//! kind and outcome, and classic histograms of response and service time,
//! rendered as OpenMetrics 1.0 text (asked for with
//! `Accept: application/openmetrics-text`) or as the plain text format
//! 0.0.4 otherwise. Names follow Prometheus' conventions: base units in the
//! name (`_seconds`), counters ending in `_total`
//! (<https://prometheus.io/docs/practices/naming/>; the OpenMetrics
//! specification, "Counter" and "Histogram").

use crate::measure::{OpTally, Tally};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

/// The histograms' upper bounds: 100 µs to 10 s, the span of a database
/// or web request; slower operations fall in `+Inf` only.
pub(crate) const BUCKETS: [Duration; 16] = [
    Duration::from_micros(100),
    Duration::from_micros(250),
    Duration::from_micros(500),
    Duration::from_millis(1),
    Duration::from_micros(2500),
    Duration::from_millis(5),
    Duration::from_millis(10),
    Duration::from_millis(25),
    Duration::from_millis(50),
    Duration::from_millis(100),
    Duration::from_millis(250),
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_micros(2_500_000),
    Duration::from_secs(5),
    Duration::from_secs(10),
];

/// A classic histogram: cumulative counts at each of [`BUCKETS`], with the
/// count and sum of every value.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Buckets {
    /// Values at or below each bound (cumulative, as exposed).
    pub(crate) at_or_below: [u64; BUCKETS.len()],
    pub(crate) count: u64,
    /// The values summed (from the HdrHistogram's mean: within its
    /// precision).
    pub(crate) sum: Duration,
}

impl Buckets {
    /// Adds the values of an HdrHistogram of microseconds.
    fn add_micros(&mut self, h: &hdrhistogram::Histogram<u64>) {
        if h.is_empty() {
            return;
        }
        for (slot, bound) in self.at_or_below.iter_mut().zip(BUCKETS) {
            let micros = u64::try_from(bound.as_micros()).unwrap_or(u64::MAX);
            *slot += h.count_between(0, micros);
        }
        self.count += h.len();
        self.sum += Duration::from_secs_f64(h.mean() * h.len() as f64 / 1e6);
    }

    fn add(&mut self, other: &Buckets) {
        for (a, b) in self.at_or_below.iter_mut().zip(other.at_or_below) {
            *a += b;
        }
        self.count += other.count;
        self.sum += other.sum;
    }
}

/// One kind of operation's counts since the run began.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct OpCounts {
    pub(crate) ok: u64,
    /// Declined for a business reason (served, not failed).
    pub(crate) refused: u64,
    /// Failed, by error kind.
    pub(crate) errors: BTreeMap<String, u64>,
    pub(crate) response: Buckets,
    pub(crate) service: Buckets,
}

impl OpCounts {
    fn add_tally(&mut self, t: &OpTally) {
        self.ok += t.ok;
        self.refused += t.completed() - t.ok;
        for (kind, n) in t.errors.to_text() {
            *self.errors.entry(kind).or_default() += n;
        }
        self.response.add_micros(&t.response);
        self.service.add_micros(&t.service);
    }

    fn add(&mut self, other: &OpCounts) {
        self.ok += other.ok;
        self.refused += other.refused;
        for (kind, n) in &other.errors {
            *self.errors.entry(kind.clone()).or_default() += n;
        }
        self.response.add(&other.response);
        self.service.add(&other.service);
    }
}

/// Counts per operation kind, in the workload's order.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Counts(pub(crate) Vec<OpCounts>);

impl Counts {
    /// Adds a tally of the same operation kinds.
    pub(crate) fn add_tally(&mut self, tally: &Tally) {
        if self.0.len() < tally.ops.len() {
            self.0.resize_with(tally.ops.len(), OpCounts::default);
        }
        for (mine, theirs) in self.0.iter_mut().zip(&tally.ops) {
            mine.add_tally(theirs);
        }
    }

    /// Adds other counts.
    pub(crate) fn add(&mut self, other: &Counts) {
        if self.0.len() < other.0.len() {
            self.0.resize_with(other.0.len(), OpCounts::default);
        }
        for (mine, theirs) in self.0.iter_mut().zip(&other.0) {
            mine.add(theirs);
        }
    }

    /// Failed operations by kind, over every operation.
    pub(crate) fn errors(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for op in &self.0 {
            for (kind, n) in &op.errors {
                *out.entry(kind.clone()).or_default() += n;
            }
        }
        out
    }
}

/// What a scrape shows besides the counts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Gauges {
    /// Closed loop: the running step's users.
    pub(crate) users: Option<u32>,
    /// Open loop: the running step's offered arrivals per second.
    pub(crate) rate: Option<f64>,
    /// The running (or last) step, from 1; 0 before the first.
    pub(crate) step: usize,
    /// Steps the sweep plans.
    pub(crate) steps: usize,
    /// perflab's own CPU time, user and system.
    pub(crate) cpu: Duration,
}

/// The two text formats a scraper may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavour {
    /// `application/openmetrics-text; version=1.0.0`.
    OpenMetrics,
    /// `text/plain; version=0.0.4`.
    Text,
}

impl Flavour {
    /// What the scraper's `Accept` header asks for.
    pub(crate) fn of_accept(accept: Option<&str>) -> Flavour {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Flavour::OpenMetrics,
            _ => Flavour::Text,
        }
    }

    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Flavour::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Flavour::Text => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// A label value escaped (backslash, double quote, line feed).
pub(crate) fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A number as both formats read it.
pub(crate) fn float(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else {
        format!("{v}")
    }
}

/// A family's metadata: OpenMetrics names a counter's family without its
/// `_total` and states units; the 0.0.4 text names the sample.
pub(crate) fn family(
    out: &mut String,
    flavour: Flavour,
    name: &str,
    kind: &str,
    unit: &str,
    help: &str,
) {
    let (family_name, sample_name) = match (flavour, kind) {
        (Flavour::OpenMetrics, "counter") => (name.trim_end_matches("_total"), name),
        _ => (name, name),
    };
    let _ = writeln!(out, "# HELP {sample_name} {help}");
    let _ = writeln!(out, "# TYPE {family_name} {kind}");
    if flavour == Flavour::OpenMetrics && !unit.is_empty() {
        let _ = writeln!(out, "# UNIT {family_name} {unit}");
    }
}

/// The scrape's text: `ops` named by `op_names` (a kind without a name is
/// `op<N>`).
pub(crate) fn render(
    flavour: Flavour,
    op_names: &[String],
    counts: &Counts,
    gauges: &Gauges,
) -> String {
    let mut out = String::new();
    render_operations(&mut out, flavour, op_names, counts);
    render_times(&mut out, flavour, op_names, counts);
    render_gauges(&mut out, flavour, gauges);
    if flavour == Flavour::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}

/// The name of operation kind `i` (`op<N>` when it has none).
fn op_name(op_names: &[String], i: usize) -> String {
    op_names.get(i).cloned().unwrap_or_else(|| format!("op{i}"))
}

/// The operations counter, by kind and outcome.
fn render_operations(out: &mut String, flavour: Flavour, op_names: &[String], counts: &Counts) {
    family(
        out,
        flavour,
        "perflab_operations_total",
        "counter",
        "",
        "Operations ended since the run began, every phase, by kind and outcome (ok, refused, or the error's kind).",
    );
    for (i, op) in counts.0.iter().enumerate() {
        let op_label = label(&op_name(op_names, i));
        let mut outcomes: Vec<(String, u64)> = vec![
            ("ok".to_string(), op.ok),
            ("refused".to_string(), op.refused),
        ];
        outcomes.extend(op.errors.iter().map(|(k, n)| (k.clone(), *n)));
        for (outcome, n) in outcomes {
            let _ = writeln!(
                out,
                "perflab_operations_total{{op=\"{op_label}\",outcome=\"{}\"}} {n}",
                label(&outcome)
            );
        }
    }
}

/// The response and service time histograms, by kind.
fn render_times(out: &mut String, flavour: Flavour, op_names: &[String], counts: &Counts) {
    for (metric, help, pick) in [
        (
            "perflab_response_time_seconds",
            "Time from an operation's intended start to its reply, of operations served (ok or refused).",
            (|o: &OpCounts| &o.response) as fn(&OpCounts) -> &Buckets,
        ),
        (
            "perflab_service_time_seconds",
            "Time from an operation's call to its reply, of operations served (ok or refused).",
            |o: &OpCounts| &o.service,
        ),
    ] {
        family(out, flavour, metric, "histogram", "seconds", help);
        for (i, op) in counts.0.iter().enumerate() {
            let op_label = label(&op_name(op_names, i));
            let b = pick(op);
            for (bound, n) in BUCKETS.iter().zip(b.at_or_below) {
                let _ = writeln!(
                    out,
                    "{metric}_bucket{{op=\"{op_label}\",le=\"{}\"}} {n}",
                    float(bound.as_secs_f64())
                );
            }
            let _ = writeln!(
                out,
                "{metric}_bucket{{op=\"{op_label}\",le=\"+Inf\"}} {}",
                b.count
            );
            let _ = writeln!(
                out,
                "{metric}_sum{{op=\"{op_label}\"}} {}",
                float(b.sum.as_secs_f64())
            );
            let _ = writeln!(out, "{metric}_count{{op=\"{op_label}\"}} {}", b.count);
        }
    }
}

/// The gauges of the running step and perflab's own CPU time.
fn render_gauges(out: &mut String, flavour: Flavour, gauges: &Gauges) {
    if let Some(users) = gauges.users {
        family(
            out,
            flavour,
            "perflab_users",
            "gauge",
            "",
            "Closed loop: virtual users of the running step.",
        );
        let _ = writeln!(out, "perflab_users {users}");
    }
    if let Some(rate) = gauges.rate {
        family(
            out,
            flavour,
            "perflab_offered_rate_per_second",
            "gauge",
            "",
            "Open loop: arrivals per second the running step offers.",
        );
        let _ = writeln!(out, "perflab_offered_rate_per_second {}", float(rate));
    }
    family(
        out,
        flavour,
        "perflab_step",
        "gauge",
        "",
        "The running (or last) step of the sweep, from 1; 0 before the first.",
    );
    let _ = writeln!(out, "perflab_step {}", gauges.step);
    family(
        out,
        flavour,
        "perflab_steps",
        "gauge",
        "",
        "Steps the sweep plans.",
    );
    let _ = writeln!(out, "perflab_steps {}", gauges.steps);
    family(
        out,
        flavour,
        "perflab_process_cpu_seconds_total",
        "counter",
        "seconds",
        "CPU time perflab itself used, user and system.",
    );
    let _ = writeln!(
        out,
        "perflab_process_cpu_seconds_total {}",
        float(gauges.cpu.as_secs_f64())
    );
}

/// perflab's own CPU time so far (user and system, every thread).
pub(crate) fn own_cpu() -> Duration {
    // SAFETY: getrusage writes one rusage struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{ErrorKind, OpTally};

    fn tally() -> Tally {
        let mut t = Tally::new(2);
        let mut a = OpTally::default();
        for micros in [50, 700, 3_000, 20_000_000] {
            a.ok += 1;
            a.response.record(micros).unwrap();
            a.service.record(micros / 2).unwrap();
        }
        a.errors.record(ErrorKind::Timeout);
        t.ops[0] = a;
        t
    }

    /// The 0.0.4 text parses (`util::prom_text`) with the counts and
    /// buckets it was given; names follow the conventions.
    #[test]
    fn the_text_format_parses_with_the_counts() {
        let mut counts = Counts::default();
        counts.add_tally(&tally());
        counts.add_tally(&tally());
        let gauges = Gauges {
            users: Some(8),
            step: 2,
            steps: 3,
            cpu: Duration::from_millis(1500),
            ..Gauges::default()
        };
        let names = vec!["read".to_string(), "write".to_string()];
        let text = render(Flavour::Text, &names, &counts, &gauges);
        let samples = crate::util::prom_text::parse(&text).unwrap();
        let value = |name: &str, labels: &[(&str, &str)]| {
            samples
                .iter()
                .find(|s| s.name == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
                .map(|s| s.value)
                .unwrap_or_else(|| panic!("no {name} {labels:?} in\n{text}"))
        };
        let ok = [("op", "read"), ("outcome", "ok")];
        assert_eq!(value("perflab_operations_total", &ok), 8.0);
        let timeout = [("op", "read"), ("outcome", "timeout")];
        assert_eq!(value("perflab_operations_total", &timeout), 2.0);
        assert_eq!(value("perflab_users", &[]), 8.0);
        assert_eq!(value("perflab_step", &[]), 2.0);
        assert_eq!(value("perflab_process_cpu_seconds_total", &[]), 1.5);
        let at = |le: f64| {
            samples
                .iter()
                .filter(|s| {
                    s.name == "perflab_response_time_seconds_bucket"
                        && s.labels.get("op") == Some("read")
                })
                .find(|s| {
                    let bound: f64 = match s.labels.get("le") {
                        Some("+Inf") => f64::INFINITY,
                        Some(b) => b.parse().unwrap(),
                        None => panic!("a bucket without le: {s:?}"),
                    };
                    (bound.is_infinite() && le.is_infinite()) || (bound - le).abs() < 1e-12
                })
                .map(|s| s.value)
        };
        // 50 µs and 700 µs twice each: 2 at 100 µs, 4 at 1 ms, 6 at 5 ms;
        // 20 s only in +Inf.
        assert_eq!(at(0.0001), Some(2.0));
        assert_eq!(at(0.001), Some(4.0));
        assert_eq!(at(0.005), Some(6.0));
        assert_eq!(at(10.0), Some(6.0));
        assert_eq!(at(f64::INFINITY), Some(8.0));
        // Every family's sample names carry their unit or _total.
        for line in text.lines().filter(|l| l.starts_with("# TYPE")) {
            let words: Vec<&str> = line.split(' ').collect();
            let (name, kind) = (words[2], words[3]);
            assert!(name.starts_with("perflab_"), "{line}");
            if kind == "counter" {
                assert!(name.ends_with("_total"), "{line}");
            }
            if kind == "histogram" {
                assert!(name.ends_with("_seconds"), "{line}");
            }
        }
    }

    /// A label value keeps its backslashes, quotes and line feeds escaped.
    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        let mut counts = Counts::default();
        counts.add_tally(&tally());
        let text = render(
            Flavour::Text,
            &["say \"hi\"".to_string()],
            &counts,
            &Gauges::default(),
        );
        assert!(
            text.contains(r#"{op="say \"hi\"",outcome="ok"} 4"#),
            "{text}"
        );
    }

    /// OpenMetrics: counter families named without `_total`, units stated,
    /// one `# EOF` at the end; every sample line names a declared family.
    #[test]
    fn the_openmetrics_format_declares_every_family_and_ends() {
        let mut counts = Counts::default();
        counts.add_tally(&tally());
        let text = render(
            Flavour::OpenMetrics,
            &["a".to_string(), "b".to_string()],
            &counts,
            &Gauges::default(),
        );
        assert!(text.ends_with("\n# EOF\n"), "{text}");
        assert_eq!(text.matches("# EOF").count(), 1);
        assert!(
            text.contains("# TYPE perflab_operations counter\n"),
            "{text}"
        );
        assert!(text.contains("# UNIT perflab_response_time_seconds seconds\n"));
        let families: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split(' ').next())
            .collect();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            assert!(
                families.iter().any(|f| {
                    name == *f
                        || ["_total", "_bucket", "_sum", "_count"]
                            .iter()
                            .any(|s| name.strip_suffix(s) == Some(f))
                }),
                "{name} is in no family:\n{text}"
            );
        }
        assert_eq!(
            Flavour::of_accept(Some(
                "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
            )),
            Flavour::OpenMetrics
        );
        assert_eq!(Flavour::of_accept(None), Flavour::Text);
    }
}
