//! Raw command-line flags (clap derive). Values that need more than a type
//! conversion stay strings here and are validated in `validate`.

use super::values;
use crate::plan::{Arrivals, Sweep, ThinkTime};
use crate::workload::{self, CheckChoice, RunChoice};
use std::time::Duration;

// The defaults of a run, written once: the help texts below and
// `validate` use the same words.
macro_rules! default_users {
    () => {
        "10..150/10"
    };
}
macro_rules! quick_users {
    () => {
        "1,2,4,8,16,32"
    };
}
macro_rules! default_warmup {
    () => {
        "5s"
    };
}
macro_rules! quick_warmup {
    () => {
        "1s"
    };
}
macro_rules! default_duration {
    () => {
        "20s"
    };
}
macro_rules! quick_duration {
    () => {
        "3s"
    };
}

/// Users of the default sweep: the classic lab ramp.
pub const DEFAULT_USERS: &str = default_users!();
/// Users of `--quick`.
pub const QUICK_USERS: &str = quick_users!();
/// Warm-up and measured window: (default, with `--quick`).
pub(crate) const WARMUP: (&str, &str) = (default_warmup!(), quick_warmup!());
pub(crate) const DURATION: (&str, &str) = (default_duration!(), quick_duration!());
use clap::{ArgMatches, Args, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;

/// perflab: drive a server with realistic load, sweep it to saturation, and
/// see what stops it.
#[derive(Debug, Parser)]
#[command(name = "perflab", version, about, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a workload against a target over a sweep of load levels.
    Run(Box<RunArgs>),
    /// List the runs in the results store.
    Runs(StoreArg),
    /// Print a stored run's table, or export it as JSON.
    Show(ShowArgs),
    /// Check a workload's database for lost or invented data.
    Check(CheckArgs),
    /// Watch this host's resources without load: utilisation, saturation and errors per resource.
    Watch(WatchArgs),
    /// Serve this host's counters to a perflab elsewhere (read-only, token-protected).
    Agent(AgentArgs),
    /// The verdict of a stored run: capacity, knee, bottleneck with evidence, models.
    Analyze(AnalyzeArgs),
    /// Audit this host (and a database) for the classic performance traps.
    Doctor(DoctorArgs),
    /// What differs between the hosts (and database settings) of two runs.
    DiffHosts(DiffHostsArgs),
    /// Compare runs with a baseline, level by level, with significance tests.
    Compare(CompareArgs),
    /// The runs of one plan as series per load level and metric, with their change points.
    History(HistoryArgs),
    /// Write runs as a self-contained HTML report, Markdown or CSV, from the store alone.
    Report(ReportArgs),
    /// Run a lab file: every variant of the server's configuration, repeated, as one matrix.
    Lab(LabArgs),
    /// Write the Kubernetes manifests of a run on many generators: an Indexed Job of generators and a coordinator Job.
    Kube(KubeArgs),
    /// Serve the stored runs in a browser: a list, and each run's report page.
    Serve(ServeArgs),
    /// Start a database perflab manages, as a run would, and hold it until Ctrl-C or SIGTERM, for a peer tool or a script to load: its URL printed (a password hidden), and written whole to --url-file.
    Up(UpArgs),
}

/// `perflab kube --generators N --image IMAGE --out FILE -- run WORKLOAD …`.
#[derive(Debug, Args)]
pub struct KubeArgs {
    /// Generator pods in the Indexed Job.
    #[arg(long, value_name = "N")]
    pub(crate) generators: u32,

    /// The image built from the Containerfile.
    #[arg(long, value_name = "IMAGE")]
    pub(crate) image: String,

    /// The namespace of every object.
    #[arg(long, value_name = "NS", default_value = "default")]
    pub(crate) namespace: String,

    /// The objects' name prefix.
    #[arg(long, value_name = "NAME", default_value = "perflab")]
    pub(crate) name: String,

    /// Where to write the manifests (made mode 0600: they hold the token and a key).
    #[arg(long, value_name = "FILE")]
    pub(crate) out: PathBuf,

    /// A generator pod leaves after this long without a request, so its Job completes.
    #[arg(long, value_name = "TIME", default_value = "10m", value_parser = values::duration)]
    pub(crate) generator_idle: Duration,

    /// The run: `run WORKLOAD FLAGS…`, as `perflab run` takes it.
    #[arg(last = true, required = true, value_name = "RUN")]
    pub(crate) run: Vec<String>,
}

/// `perflab lab FILE.toml`, or `perflab lab report LAB`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct LabArgs {
    /// The lab file (TOML): workload, target, args, repetitions, and [vary], [zip] or [[variant]].
    #[arg(required = true, value_name = "FILE")]
    pub(crate) file: Option<PathBuf>,

    /// Print the cells in their order and what each changes; run nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,

    #[command(flatten)]
    pub(crate) ask: LabAskArgs,

    /// Serve the lab live on ADDR (e.g. 127.0.0.1:8090; port 0 picks one, printed on stderr): the matrix of cells as they run, each cell's run at /run/N, the report at the end, and Prometheus metrics (/metrics). The cells' runs do not serve.
    #[arg(long, value_name = "ADDR")]
    pub(crate) serve: Option<String>,

    /// With --serve: keep serving the final page (and metrics) this long after the lab ends. Default 0: the server stops with the lab.
    #[arg(long, value_name = "TIME", requires = "serve", value_parser = values::duration)]
    pub(crate) serve_linger: Option<Duration>,

    #[command(flatten)]
    pub(crate) serve_access: ServeAccessArgs,

    #[command(subcommand)]
    pub(crate) command: Option<LabCommand>,

    #[command(flatten)]
    pub(crate) store: StoreArg,
}

#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Print a stored lab's matrix: each variant's peak with its 95% interval, bottleneck, and difference from the first.
    Report(LabReportArgs),
    /// Continue a stopped or killed lab at its first unfinished cell, keeping the finished ones.
    Resume(LabResumeArgs),
    /// Remove what the managed servers of killed perflab processes left on this host: server processes, network namespaces, veth pairs, cgroups, directories.
    Cleanup,
}

#[derive(Debug, Args)]
pub struct LabResumeArgs {
    /// The lab (its number, or last).
    pub(crate) lab: String,

    #[command(flatten)]
    pub(crate) store: StoreArg,
}

/// The capacity question a lab's report answers.
#[derive(Debug, Args)]
pub struct LabAskArgs {
    /// The throughput needed, operations per second (e.g. 2000 or 2000/s): the report lists the variants that reached it, the smallest of them, and the configurations predicted to.
    #[arg(long, value_name = "RATE", value_parser = values::need)]
    pub(crate) need: Option<f64>,

    /// A service level objective the needed throughput must be met within, e.g. p95<50ms or errors<1% (repeatable).
    #[arg(long, value_name = "OBJECTIVE")]
    pub(crate) slo: Vec<String>,
}

#[derive(Debug, Args)]
pub struct LabReportArgs {
    /// The lab (its number, printed when it ran, or last).
    pub(crate) lab: String,

    /// JSON instead of the terminal table.
    #[arg(long)]
    pub(crate) json: bool,

    /// Also write the report as Markdown to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) md: Option<std::path::PathBuf>,

    /// Also write the report as one HTML file (the variants' curves overlaid as inline SVG).
    #[arg(long, value_name = "FILE")]
    pub(crate) html: Option<std::path::PathBuf>,

    #[command(flatten)]
    pub(crate) ask: LabAskArgs,

    #[command(flatten)]
    pub(crate) store: StoreArg,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The runs (numbers from `perflab runs`, or last); several overlay their curves.
    #[arg(required = true)]
    pub(crate) runs: Vec<String>,

    /// Write one self-contained HTML file (charts as inline SVG).
    #[arg(long, value_name = "FILE")]
    pub(crate) html: Option<std::path::PathBuf>,

    /// Write Markdown.
    #[arg(long, value_name = "FILE")]
    pub(crate) md: Option<std::path::PathBuf>,

    /// Write steps.csv and intervals.csv into DIR.
    #[arg(long, value_name = "DIR")]
    pub(crate) csv: Option<std::path::PathBuf>,

    /// The load level whose latency distribution to plot (repeat to
    /// overlay several, e.g. --step 1 --step 32; `peak` is the default).
    #[arg(long = "step", value_name = "LOAD")]
    pub(crate) steps: Vec<String>,

    #[command(flatten)]
    pub(crate) store: StoreArg,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline run, then the runs to compare with it (with --fail-on, each may also be a run's JSON export: perflab show N --json FILE).
    #[arg(required = true, num_args = 2..)]
    pub(crate) runs: Vec<String>,

    /// A CI gate: exit 1 when NEW's change against BASE is beyond a threshold and significant at some load level both ran, e.g. 'throughput<-5%,p95>+10%' (throughput, p50, p90, p95, p99, p99.9; < with a drop, > with a rise).
    #[arg(long, value_name = "THRESHOLDS")]
    pub(crate) fail_on: Option<String>,

    /// With --fail-on: also write the gate as JUnit XML to FILE (one test case per threshold, a failed one as <failure>), for a CI system's test report.
    #[arg(long, value_name = "FILE", requires = "fail_on")]
    pub(crate) junit: Option<PathBuf>,

    /// With --fail-on: also write the gate as a Markdown table to FILE (e.g. $GITHUB_STEP_SUMMARY).
    #[arg(long, value_name = "FILE", requires = "fail_on")]
    pub(crate) markdown: Option<PathBuf>,

    /// A scorecard: weights of throughput, p95 and cpu_per_op, e.g. throughput=0.4,p95=0.4,cpu_per_op=0.2.
    #[arg(long, value_name = "WEIGHTS")]
    pub(crate) weights: Option<String>,

    /// What a run's setup costs, RUN=AMOUNT (repeatable): prints peak throughput per unit of cost.
    #[arg(long, value_name = "RUN=AMOUNT")]
    pub(crate) cost: Vec<String>,

    /// Markdown instead of the terminal table.
    #[arg(long)]
    pub(crate) md: bool,

    /// JSON instead of the terminal table.
    #[arg(long, conflicts_with = "md")]
    pub(crate) json: bool,

    #[command(flatten)]
    pub(crate) store: StoreArg,
}

#[derive(Debug, Args)]
pub struct DiffHostsArgs {
    /// The first run (a number from `perflab runs`, or last).
    pub(crate) a: String,

    /// The second run.
    pub(crate) b: String,

    #[command(flatten)]
    pub(crate) store: StoreArg,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Time between the two readings of counters that must move to mean something (errors, carrier changes, swapping, steal).
    #[arg(long, value_name = "TIME", default_value = "5s", value_parser = values::duration)]
    pub(crate) sample: Duration,

    /// Also check a database's configuration: postgres://… or mysql://…
    #[arg(long, value_name = "DSN")]
    pub(crate) target: Option<String>,

    /// The most users a sweep will run, for the database's connection limit.
    #[arg(long, value_name = "N")]
    pub(crate) users: Option<u32>,

    /// The server's pid, for its cgroup's CPU and memory limits.
    #[arg(long, value_name = "PID")]
    pub(crate) server_pid: Option<u32>,

    /// Time flushes (an 8 KiB write and fdatasync, one writer, for 2 s) in a file perflab makes and removes in DIR: what a commit would wait with its log on that device.
    #[arg(long, value_name = "DIR")]
    pub(crate) flush_latency: Option<PathBuf>,

    /// Write the findings as JSON to stdout.
    #[arg(long)]
    pub(crate) json: bool,

    /// Examine another host through its perflab agent: agent://HOST:PORT.
    #[arg(long, value_name = "SOURCE")]
    pub(crate) probe: Option<String>,

    #[command(flatten)]
    pub(crate) agent_access: AgentAccessArgs,
}

#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// A run number from `perflab runs`, or last.
    #[arg(default_value = "last")]
    pub(crate) run: String,

    /// A service level objective, e.g. p95<50ms or errors<1% (repeatable); replaces the run's own.
    #[arg(long, value_name = "OBJECTIVE")]
    pub(crate) slo: Vec<String>,

    /// A step whose interval throughputs vary more than this (coefficient of variation) is flagged.
    #[arg(long, value_name = "PERCENT", value_parser = values::positive_percent)]
    pub(crate) max_cv: Option<f64>,

    /// Predict the commit rate with the log on DIR's device: perflab first times flushes there (as doctor --flush-latency, 2 s), for a run whose bottleneck is the commit's flush.
    #[arg(long, value_name = "DIR", conflicts_with = "log_flush")]
    pub(crate) log_flush_dir: Option<PathBuf>,

    /// Predict the commit rate with the log on a device whose mean flush takes TIME (e.g. 80us, as doctor --flush-latency measured it on another host).
    #[arg(long, value_name = "TIME", value_parser = values::duration)]
    pub(crate) log_flush: Option<std::time::Duration>,

    /// Write the verdict as JSON to FILE, or - for stdout.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,

    #[command(flatten)]
    pub(crate) store: StoreArg,
}

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Address to listen on; beyond loopback a --token-file and TLS are required.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7071")]
    pub(crate) listen: String,

    /// A file whose first line is the token every request must carry.
    #[arg(long, value_name = "FILE")]
    pub(crate) token_file: Option<PathBuf>,

    /// Serve HTTPS with this certificate (PEM, its chain after it); with --tls-key.
    #[arg(
        long,
        value_name = "FILE",
        requires = "tls_key",
        conflicts_with = "tls_self_signed"
    )]
    pub(crate) tls_cert: Option<PathBuf>,

    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,

    /// Serve HTTPS with a certificate made at start; its SHA-256 fingerprint is printed for clients to pin.
    #[arg(long)]
    pub(crate) tls_self_signed: bool,

    /// Also generate load: offer the part of each step a coordinator (`run --generators`) sends.
    #[arg(long)]
    pub(crate) generate: bool,

    /// Also echo: answer `perflab run net` (request/response and streams) on --echo-port; needs --token-file.
    #[arg(long)]
    pub(crate) echo: bool,

    /// The echo's TCP port on the --listen address (0: any free one, told by GET /v1/echo).
    #[arg(long, value_name = "PORT", default_value_t = 0, requires = "echo")]
    pub(crate) echo_port: u16,

    /// The echo's deadline for each message (each 128 KiB of a longer one), from its first byte: a peer slower than it is cut off. 1s to 1h.
    #[arg(long, value_name = "TIME", default_value = "60s", value_parser = values::duration, requires = "echo")]
    pub(crate) echo_deadline: Duration,

    /// Exit (status 0) after this long without a request: a generator pod's Job then completes.
    #[arg(long, value_name = "TIME", value_parser = values::duration)]
    pub(crate) idle_exit: Option<Duration>,

    /// Time between samples.
    #[arg(long, value_name = "TIME", default_value = "1s", value_parser = values::duration)]
    pub(crate) interval: Duration,
}

/// Where results live.
#[derive(Debug, Args)]
pub struct StoreArg {
    /// The results store (an SQLite file; created if missing).
    #[arg(long, default_value = "perflab.db", value_name = "PATH")]
    pub(crate) store: PathBuf,
}

/// `perflab run WORKLOAD …`: the workload (its own flags live in its
/// folder, `src/workload/NAME/`) with the flags every workload shares.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(subcommand)]
    pub(crate) workload: RunWorkload,
}

/// The chosen workload and the common flags, given after its name.
#[derive(Debug)]
pub struct RunWorkload {
    pub(crate) common: CommonRunArgs,
    pub(crate) choice: RunChoice,
}

/// What every workload's run takes: the load model, the sweep, the timing,
/// the objectives, the probes and the store.
#[derive(Debug, Args)]
pub struct CommonRunArgs {
    #[arg(long, visible_alias = "depth", value_name = "SWEEP", conflicts_with = "rate", help = concat!(
        "Closed loop: virtual users per step (the disk workload: outstanding I/Os), as N, a list 1,2,4,8 or a range 10..150/10. Default ",
        default_users!(), "."
    ), value_parser = values::users)]
    pub(crate) users: Option<Sweep>,

    /// Open loop: arrivals per second per step, as N, a list or a range 100..1000/100.
    #[arg(long, value_name = "SWEEP", value_parser = values::rates)]
    pub(crate) rate: Option<Sweep>,

    /// Closed loop think time: 0, 1s, exp:1s or uniform:0.5s..1.5s.
    #[arg(long, value_name = "TIME", default_value = "0", value_parser = values::think)]
    pub(crate) think: ThinkTime,

    /// Open loop arrival process.
    #[arg(long, value_name = "KIND", value_enum, default_value_t = Arrivals::Poisson)]
    pub(crate) arrivals: Arrivals,

    /// Open loop: sessions (connections) serving arrivals.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub(crate) connections: u32,

    /// Open loop: arrivals beyond this many queued or running operations are dropped.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub(crate) max_outstanding: u32,

    /// Open loop: the pacer sends the arrivals due within TIME after the
    /// first waiting one with it, each up to TIME early (its response time
    /// counted from when it went out). 0 wakes for every arrival; auto is
    /// exact up to 1,000 arrivals/s per thread and above that widens the
    /// window (below 1ms) to keep to about 1,000 wake-ups/s. Default:
    /// auto (0 for the null queue of --servers, whose model is an exact
    /// arrival process). See docs/running.md, "Open loop".
    #[arg(long, value_name = "TIME|auto", value_parser = crate::plan::Slack::parse)]
    pub(crate) slack: Option<crate::plan::Slack>,

    #[arg(long, value_name = "TIME", help = concat!(
        "Warm-up before each measured window (not counted). Default ",
        default_warmup!(), " (", quick_warmup!(), " with --quick)."
    ), value_parser = values::duration)]
    pub(crate) warmup: Option<Duration>,

    #[arg(long, value_name = "TIME", help = concat!(
        "Measured window of each step. Default ", default_duration!(),
        " (", quick_duration!(), " with --quick)."
    ), value_parser = values::duration)]
    pub(crate) duration: Option<Duration>,

    #[arg(long, help = concat!(
        "A short demonstration sweep: users ", quick_users!(), ", warm-up ",
        quick_warmup!(), ", ", quick_duration!(), " per step."
    ))]
    pub(crate) quick: bool,

    /// Worker threads generating load. Default: one per CPU.
    #[arg(long, value_name = "N")]
    pub(crate) threads: Option<usize>,

    /// An operation slower than this is an error of kind timeout.
    #[arg(long, value_name = "TIME", default_value = "30s", value_parser = values::duration)]
    pub(crate) timeout: Duration,

    /// A step whose failed share of operations is above this ends the sweep.
    #[arg(long, value_name = "PERCENT", default_value = "5%", value_parser = values::percent)]
    pub(crate) max_error_rate: f64,

    /// A service level objective for the verdict, e.g. p95<50ms or errors<1% (repeatable).
    #[arg(long, value_name = "OBJECTIVE")]
    pub(crate) slo: Vec<String>,

    /// The verdict flags a step whose throughputs vary more than this (coefficient of variation); with --max-repeat, a level runs again while its runs do.
    #[arg(long, value_name = "PERCENT", default_value = "5%", value_parser = values::positive_percent)]
    pub(crate) max_cv: f64,

    /// Search the highest load that meets --slo instead of running a list: from the first level of --users or --rate, double the load until a level breaks, then narrow the bracket to --precision. Each level is judged meets, breaks or undecided at 95%; an undecided one runs again (up to --max-repeat runs, 2 by default) before the search moves on.
    #[arg(long)]
    pub(crate) find: bool,

    /// With --find: how narrow the answer's bracket is, as a share of the load (default 5%; above 0 and below 50%).
    #[arg(long, value_name = "PERCENT")]
    pub(crate) precision: Option<String>,

    /// With --find: the most steps the search runs, runs again of an undecided level included (default 30; 1 to 1000). At this budget the search stops and the answer gives the bracket it reached.
    #[arg(long, value_name = "N")]
    pub(crate) max_steps: Option<u32>,

    /// Length of one measured interval: the batches --slo is judged by, and the resolution of the live view and the interval export (100ms to 60s, at most --duration) [default: 1s, or --duration when shorter].
    #[arg(long, value_name = "TIME", value_parser = values::duration)]
    pub(crate) interval: Option<Duration>,

    /// Run each load level this many times.
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub(crate) repeat: u32,

    /// Run a level again, up to this many times, while its runs' throughputs vary more than --max-cv.
    #[arg(long, value_name = "M")]
    pub(crate) max_repeat: Option<u32>,

    #[command(flatten)]
    pub(crate) server: ServerArgs,

    /// Also sample a remote host each interval: agent://HOST:PORT (perflab agent) or node-exporter://HOST:PORT; repeatable. This host is always sampled.
    #[arg(long, value_name = "SOURCE")]
    pub(crate) probe: Vec<String>,

    /// Offer the load from these generators (perflab agent --generate), comma-separated agent://HOST:PORT; this process then coordinates.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub(crate) generators: Vec<String>,

    /// The generators listed in FILE, one agent://HOST:PORT per line (# comments).
    #[arg(long, value_name = "FILE", conflicts_with = "generators")]
    pub(crate) generators_file: Option<PathBuf>,

    /// Wait up to this long for every generator to answer at the start (pods still being scheduled).
    #[arg(long, value_name = "TIME", value_parser = values::duration)]
    pub(crate) generators_wait: Option<Duration>,

    /// When a generator stops answering mid-step: keep that step (degraded) and go on with the others, or stop there.
    #[arg(long, value_name = "WHAT", value_enum, default_value = "stop")]
    pub(crate) on_generator_loss: crate::plan::GeneratorLoss,

    #[command(flatten)]
    pub(crate) agent_access: AgentAccessArgs,

    /// Seed of every random stream (printed and stored, so a run can be repeated).
    #[arg(long, value_name = "N")]
    pub(crate) seed: Option<u64>,

    #[command(flatten)]
    pub(crate) store: StoreArg,

    /// With --fail-on: the run to gate this one against, a run of the store (a number, last) or a run's JSON export (perflab show N --json FILE).
    #[arg(long, value_name = "RUN|FILE", requires = "fail_on")]
    pub(crate) baseline: Option<String>,

    /// A CI gate against --baseline: exit 1 when this run's change is beyond a threshold and significant at some level both ran, e.g. 'throughput<-5%,p95>+10%' (as compare --fail-on).
    #[arg(long, value_name = "THRESHOLDS", requires = "baseline")]
    pub(crate) fail_on: Option<String>,

    /// With --fail-on: also write the gate as JUnit XML to FILE (one test case per threshold, a failed one as <failure>), for a CI system's test report.
    #[arg(long, value_name = "FILE", requires = "fail_on")]
    pub(crate) junit: Option<PathBuf>,

    /// With --fail-on: also write the gate as a Markdown table to FILE (e.g. $GITHUB_STEP_SUMMARY).
    #[arg(long, value_name = "FILE", requires = "fail_on")]
    pub(crate) markdown: Option<PathBuf>,

    /// A label stored with the run, KEY=VALUE (repeatable, at most 32), e.g. --label commit=abc123 --label branch=main: shown by runs, show and the reports, and filtered on by perflab history.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub(crate) labels: Vec<String>,

    /// Serve the run live on ADDR (e.g. 127.0.0.1:8090; port 0 picks one, printed on stderr): a page with the report's charts updated each interval over server-sent events (/events), and Prometheus metrics (/metrics).
    #[arg(long, value_name = "ADDR")]
    pub(crate) serve: Option<String>,

    /// With --serve: keep serving the final page (and metrics) this long after the run ends, for a last look or a last scrape. Default 0: the server stops with the run.
    #[arg(long, value_name = "TIME", requires = "serve", value_parser = values::duration)]
    pub(crate) serve_linger: Option<Duration>,

    #[command(flatten)]
    pub(crate) serve_access: ServeAccessArgs,
}

/// Who may see a served run (`--serve`, `perflab serve`): beyond loopback,
/// a token and TLS.
#[derive(Debug, Args, Clone, Default)]
pub struct ServeAccessArgs {
    /// A file whose first line is the token every request to the served view must carry (Authorization: Bearer TOKEN, or ?token=TOKEN for the page); required beyond loopback, with TLS.
    #[arg(long, value_name = "FILE")]
    pub(crate) serve_token_file: Option<PathBuf>,

    /// Serve the view in HTTPS with this certificate (PEM, its chain after it); with --serve-tls-key.
    #[arg(
        long,
        value_name = "FILE",
        requires = "serve_tls_key",
        conflicts_with = "serve_tls_self_signed"
    )]
    pub(crate) serve_tls_cert: Option<PathBuf>,

    /// The private key (PEM) of --serve-tls-cert.
    #[arg(long, value_name = "FILE", requires = "serve_tls_cert")]
    pub(crate) serve_tls_key: Option<PathBuf>,

    /// Serve the view in HTTPS with a certificate made at start (its SHA-256 fingerprint is printed).
    #[arg(long)]
    pub(crate) serve_tls_self_signed: bool,
}

/// `perflab up --target KIND:managed`: a managed database held for
/// others.
#[derive(Debug, Args)]
pub struct UpArgs {
    #[command(flatten)]
    pub(crate) target: crate::sut::TargetArgs,

    /// Write the server's URL, its password inside when it has one, to FILE: a new file only this user can read, removed when the server stops.
    #[arg(long, value_name = "FILE")]
    pub(crate) url_file: Option<std::path::PathBuf>,
}

/// `perflab serve`: stored runs in a browser.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to serve on; beyond loopback a --serve-token-file and TLS are required.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8090")]
    pub(crate) addr: String,

    #[command(flatten)]
    pub(crate) access: ServeAccessArgs,

    #[command(flatten)]
    pub(crate) store: StoreArg,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// How long to watch (default: until Ctrl-C).
    #[arg(long, value_name = "TIME", value_parser = values::duration)]
    pub(crate) duration: Option<Duration>,

    /// Time between samples.
    #[arg(long, value_name = "TIME", default_value = "1s", value_parser = values::duration)]
    pub(crate) interval: Duration,

    /// One JSON object per sample (the host sample of the run store) instead of text.
    #[arg(long)]
    pub(crate) json: bool,

    /// Where the samples come from: local (this host), agent://HOST:PORT or node-exporter://HOST:PORT.
    #[arg(long, value_name = "SOURCE", default_value = "local")]
    pub(crate) probe: String,

    #[command(flatten)]
    pub(crate) agent_access: AgentAccessArgs,

    #[command(flatten)]
    pub(crate) server: ServerArgs,
}

/// How perflab reaches its agents: the token, and what it trusts as an
/// agent's certificate (an agent beyond loopback is always asked in TLS).
#[derive(Debug, Args, Clone, Default)]
pub struct AgentAccessArgs {
    /// The token for agents (a file whose first line is the token).
    #[arg(long, value_name = "FILE")]
    pub(crate) token_file: Option<PathBuf>,

    /// Trust the agent whose certificate has this SHA-256 fingerprint (printed by `agent --tls-self-signed`); repeatable, one per agent.
    #[arg(long, value_name = "SHA256", conflicts_with = "agent_cacert")]
    pub(crate) agent_fingerprint: Vec<String>,

    /// Trust agents whose certificates this CA (PEM) signed.
    #[arg(long, value_name = "FILE")]
    pub(crate) agent_cacert: Option<PathBuf>,
}

/// Which processes are the server under test (followed with the host's counters).
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// The server's process and its children (e.g. the postmaster).
    #[arg(long, value_name = "PID", conflicts_with = "server_proc")]
    pub(crate) server_pid: Option<u32>,

    /// The server's processes by command name (e.g. postgres, mariadbd).
    #[arg(long, value_name = "NAME")]
    pub(crate) server_proc: Option<String>,
}

/// `perflab history [RUN] [--label KEY=VALUE]…`.
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The run whose plan's history to show (its workload, target kind and load shape): a number from `perflab runs`, or last.
    #[arg(default_value = "last")]
    pub(crate) run: String,

    /// Only the runs with this label, KEY=VALUE (repeatable: all must match), e.g. --label branch=main.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub(crate) labels: Vec<String>,

    /// How sure a change must be: the penalty of one change point, in units of the series' noise squared, per ln n (higher finds fewer).
    #[arg(long, value_name = "FACTOR", default_value_t = crate::analyze::history::detect::PENALTY_PER_LN_N)]
    pub(crate) penalty: f64,

    /// Write the history as JSON to FILE, or - for stdout.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,

    /// Write the history as an HTML page of charts, the change points marked, to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) html: Option<PathBuf>,

    #[command(flatten)]
    pub(crate) store: StoreArg,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// A run number from `perflab runs`, or last.
    #[arg(default_value = "last")]
    pub(crate) run: String,

    /// Write the run as JSON (schema: schema/run.schema.json) to FILE, or - for stdout.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,

    #[command(flatten)]
    pub(crate) store: StoreArg,
}

/// `perflab check WORKLOAD …`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(subcommand)]
    pub(crate) workload: CheckWorkload,
}

/// The workload whose data to check, with its flags.
#[derive(Debug)]
pub struct CheckWorkload {
    pub(crate) choice: CheckChoice,
}

impl FromArgMatches for RunWorkload {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let (name, sub) = chosen(matches)?;
        Ok(RunWorkload {
            common: CommonRunArgs::from_arg_matches(sub)?,
            choice: RunChoice::from_matches(name, sub)?,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Subcommand for RunWorkload {
    fn augment_subcommands(cmd: clap::Command) -> clap::Command {
        cmd.subcommands(RunChoice::commands().into_iter().map(|sub| {
            // The workload's own about line, not the common flags' doc.
            let about = sub.get_about().cloned();
            let sub = CommonRunArgs::augment_args(sub);
            match about {
                Some(about) => sub.about(about),
                None => sub,
            }
        }))
        .subcommand_required(true)
        .subcommand_value_name("WORKLOAD")
    }

    fn augment_subcommands_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_subcommands(cmd)
    }

    fn has_subcommand(name: &str) -> bool {
        workload::NAMES.contains(&name)
    }
}

impl FromArgMatches for CheckWorkload {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let (name, sub) = chosen(matches)?;
        Ok(CheckWorkload {
            choice: CheckChoice::from_matches(name, sub)?,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Subcommand for CheckWorkload {
    fn augment_subcommands(cmd: clap::Command) -> clap::Command {
        cmd.subcommands(CheckChoice::commands())
            .subcommand_required(true)
            .subcommand_value_name("WORKLOAD")
    }

    fn augment_subcommands_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_subcommands(cmd)
    }

    fn has_subcommand(name: &str) -> bool {
        workload::NAMES.contains(&name)
    }
}

/// The subcommand given (a workload's name) and its matches.
fn chosen(matches: &ArgMatches) -> Result<(&str, &ArgMatches), clap::Error> {
    matches.subcommand().ok_or_else(|| {
        clap::Error::raw(
            clap::error::ErrorKind::MissingSubcommand,
            format!("name a workload: {}", workload::registry_names()),
        )
    })
}
