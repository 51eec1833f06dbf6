//! `perflab run`: prepare the target, run the sweep, commit every step as
//! it ends, check the workload's data, print the table; with `--serve`,
//! show the same as it happens on a live page and to Prometheus.

use super::output::{write, Destination};
use super::unstored::{KeptStep, LockedOut};
use super::Exit;
use crate::cli::{plan_from, CommonRunArgs, RunArgs};
use crate::engine::{
    run_sweep_on, FinishedStep, GeneratorPeer, Generators, IntervalRecord, IntervalSpec, Schedule,
    SweepEnd, SweepObserver,
};
use crate::error::PlanError;
use crate::live::{Live, LiveServer};
use crate::measure::Tally;
use crate::plan::{Level, Plan};
use crate::probe::agent_client::{AgentAccess, AgentClient};
use crate::probe::counters::process::{ProcessGroup, ProcessSelector};
use crate::probe::counters::{HostReader, HostRoot, HostSample, HostSnapshot};
use crate::probe::remote::{RemoteProbe, RemoteWatch};
use crate::probe::{DbProbe, HostFacts};
use crate::report::{Format, Output, Progress};
use crate::store::{NewRun, RunId, RunStatus, StepId, Store};
use crate::sut::Endpoint;
use crate::units::format_duration;
use crate::workload::{CheckReport, Started, SweepDriver, Workload};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Runs `perflab run`.
pub(crate) fn run(args: &RunArgs, argv: Vec<String>) -> anyhow::Result<Exit> {
    let (workload, plan) = plan_from(args)?;
    let common = &args.workload.common;
    if workload.target().is_file(&common.store.store) {
        return Err(PlanError::flag(
            "--store",
            format!(
                "{} is the target's database; the results store must be another file",
                common.store.store.display()
            ),
            "give --store another path (the default is perflab.db)",
        )
        .into());
    }
    // Signals are honoured from here on, in every phase: reaching the
    // probes and the target, loading, starting a managed server, the sweep.
    // Which signal stopped the run, for its reason and exit code.
    let (signals, interrupted) = super::StopSignals::register_with_servers()?;
    let signal = signals.shared();
    // Bad input here is found before anything is reached or loaded.
    let serve = crate::cli::live_view(common)?;
    let baseline = super::gate::Baseline::of(
        common.baseline.as_deref(),
        common.fail_on.as_deref(),
        &common.store.store,
        super::gate::CiFiles {
            junit: common.junit.clone(),
            markdown: common.markdown.clone(),
        },
    )?;
    let labels = crate::store::parse_labels(&common.labels).map_err(|e| {
        PlanError::flag(
            "--label",
            e,
            "e.g. --label commit=abc123 --label branch=main",
        )
    })?;
    let live = serve
        .map(|config| live_view(&config, workload.target().redacted(), &plan))
        .transpose()?;
    // The token file is read once: its warnings are said once.
    let access = crate::cli::agent_access(&common.agent_access)?;
    let remotes = start_remotes(common, &access)?;
    let generators = connect_generators(common, &access, &plan)?;
    let mut store = Store::open(&common.store.store)?;
    let ctx = RunContext {
        argv,
        started_at: SystemTime::now(),
        store: &mut store,
        interrupted,
        signal,
        plan: &plan,
        target: workload.target().redacted(),
        remotes,
        generators,
        live,
        access,
        baseline,
        labels,
    };
    let signal_seen = ctx.signal.clone();
    match workload.start(&plan, ctx) {
        // Stopped before the sweep began: nothing was measured, nothing
        // stored; a managed server is already stopped and removed.
        Err(e) if e.chain().any(|c| c.is::<crate::util::Interrupted>()) => {
            let (by, exit) =
                super::signal_exit(signal_seen.load(std::sync::atomic::Ordering::Relaxed));
            let what = e
                .chain()
                .find(|c| c.is::<crate::util::Interrupted>())
                .map_or_else(String::new, ToString::to_string);
            crate::util::err(format_args!("error: {what} ({by}); nothing was measured\n"));
            Ok(exit)
        }
        // A signal after the run was stored (while its files were removed
        // or its managed server stopped) still ends it as a signal does.
        Ok(Exit::Ok) if signal_seen.load(std::sync::atomic::Ordering::Relaxed) != 0 => {
            Ok(super::signal_exit(signal_seen.load(std::sync::atomic::Ordering::Relaxed)).1)
        }
        other => other,
    }
}

impl SweepDriver for RunContext<'_> {
    type Output = Exit;

    fn drive<W: Workload>(self, workload: Arc<W>, started: Started) -> anyhow::Result<Exit> {
        execute(workload, started, self)
    }

    fn agent_access(&self) -> Option<AgentAccess> {
        Some(self.access.clone())
    }
}

/// The live view of `--serve` at `config`, its server started.
fn live_view(
    config: &crate::live::ServeConfig,
    target: String,
    plan: &Plan,
) -> anyhow::Result<(Arc<Live>, LiveServer)> {
    let live = Live::new(
        target,
        plan.workload.name().to_string(),
        plan.sweep.levels.len() * plan.repeat as usize,
    );
    let server = LiveServer::start(config, live.clone())?;
    Ok((live, server))
}

/// The remote probes of `--probe`, each answering now (`local` is always on).
fn start_remotes(args: &CommonRunArgs, access: &AgentAccess) -> anyhow::Result<Vec<RemoteWatch>> {
    let mut out = Vec::new();
    for spec in args.probe.iter().filter(|p| p.as_str() != "local") {
        let shown = crate::secret::redact(spec);
        if out.iter().any(|w: &RemoteWatch| w.name() == shown) {
            return Err(PlanError::flag(
                "--probe",
                format!("'{shown}' is given twice"),
                "give each probe once",
            )
            .into());
        }
        // A run cannot wait long at an interval boundary for a probe.
        let probe = RemoteProbe::parse(spec, access, Duration::from_millis(500))?;
        out.push(RemoteWatch::start(probe)?);
    }
    Ok(out)
}

/// The generators of the plan, each answering now as a generator of this
/// version that runs the workload, its clock offset measured; a wrong
/// token, certificate or version is bad input, found before anything is
/// loaded.
fn connect_generators(
    args: &CommonRunArgs,
    access: &AgentAccess,
    plan: &Plan,
) -> anyhow::Result<Vec<Arc<GeneratorPeer>>> {
    if plan.generators.is_empty() {
        return Ok(Vec::new());
    }
    // The null target is in-process too, but stateless: each generator
    // has its own. An embedded database is one, here.
    if plan
        .target
        .as_ref()
        .is_some_and(|t| t.kind == crate::sut::TargetKind::Sqlite)
    {
        return Err(PlanError::flag(
            "--generators",
            "an embedded target (sqlite:) lives inside this process, where no generator can reach it",
            "give a server target (postgres://, mysql://, a managed server) or drop --generators",
        )
        .into());
    }
    let mut peers = Vec::new();
    for address in &plan.generators {
        let client = AgentClient::new(address, access.clone())?;
        let wait = args.generators_wait.unwrap_or_default();
        let peer = GeneratorPeer::connect_within(client, plan.workload.name(), wait)?;
        crate::util::out(format_args!(
            "generator {address}: clock offset {:+.3} ms (±{:.3} ms)\n",
            peer.offset_ns as f64 / 1e6,
            peer.delay_ns as f64 / 2e6
        ));
        peers.push(Arc::new(peer));
    }
    Ok(peers)
}

/// Writes each interval to the store as it ends, with what the probes saw
/// over it (the database, this host, remote hosts); shows progress.
struct RunObserver<'a> {
    store: &'a mut Store,
    run: RunId,
    progress: Progress,
    db_probe: Option<DbProbe>,
    /// This host's counters at the last interval boundary.
    host_last: Option<HostSnapshot>,
    /// perflab itself and, when known, the server under test.
    groups: Vec<ProcessGroup>,
    /// Reads this host's counters (keeping, among others, a socket in the
    /// server's network namespace for its qdiscs).
    host: HostReader,
    /// Remote hosts' probes.
    remotes: Vec<RemoteWatch>,
    /// The running step in the store, and how many intervals it has.
    step: Option<(StepId, usize)>,
    /// The live view's state, with `--serve`.
    live: Option<Arc<Live>>,
    /// The run as it was stored, to write a step elsewhere.
    new_run: NewRun,
    /// The running step, kept until the store has all of it.
    kept: Option<KeptStep>,
    /// Why the store refused the running step (another process held it
    /// past a commit's patience): its rest is only kept, not stored.
    locked: Option<String>,
}

impl RunObserver<'_> {
    fn running(&self) -> anyhow::Result<(StepId, usize)> {
        self.step
            .ok_or_else(|| anyhow::anyhow!("an interval came before its step started"))
    }

    /// Does `commit` unless the store already stayed locked in this step;
    /// a lock that outlasts its patience is remembered, not an error.
    fn store_unless_locked(
        &mut self,
        commit: impl FnOnce(&mut Store) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        if self.locked.is_some() {
            return Ok(());
        }
        match commit(self.store) {
            Err(e) if crate::store::is_locked(&e) => {
                self.locked = Some(e.to_string());
                Ok(())
            }
            other => other,
        }
    }
}

impl SweepObserver for RunObserver<'_> {
    fn step_started(
        &mut self,
        index: usize,
        level: Level,
        schedule: &Schedule,
    ) -> anyhow::Result<()> {
        // Start the step's counters from here, not from the last step's end.
        if let Some(probe) = &self.db_probe {
            let _ = probe.take();
        }
        self.host_last = Some(self.host.read(&self.groups));
        for remote in &mut self.remotes {
            remote.rebase();
        }
        let begun = self.store.begin_step(self.run, index, level).map_err(|e| {
            if crate::store::is_locked(&e) {
                LockedOut(format!(
                    "{e}: step {} ({level}) of run {} was not begun; the steps before it are stored",
                    index + 1,
                    self.run
                ))
                .into()
            } else {
                e
            }
        })?;
        self.step = Some((begun, 0));
        self.kept = Some(KeptStep {
            index,
            level,
            intervals: Vec::new(),
        });
        self.progress.step_started(index, level, schedule);
        if let Some(live) = &self.live {
            live.step_started(index, level, schedule);
        }
        Ok(())
    }

    fn interval(
        &mut self,
        spec: &IntervalSpec,
        tally: &Tally,
        mut record: IntervalRecord,
    ) -> anyhow::Result<()> {
        let (step, count) = self.running()?;
        record.db = self.db_probe.as_ref().and_then(DbProbe::take);
        let now = self.host.read(&self.groups);
        record.host = self
            .host_last
            .as_ref()
            .map(|last| HostSample::between(last, &now));
        self.host_last = Some(now);
        record.probes = self.remotes.iter_mut().map(RemoteWatch::sample).collect();
        self.store_unless_locked(|store| store.write_interval(step, count, &record))?;
        self.step = Some((step, count + 1));
        self.progress.interval(spec, tally);
        if let Some(live) = &self.live {
            live.interval(spec, tally, &record);
        }
        if let Some(kept) = &mut self.kept {
            kept.intervals.push(record);
        }
        Ok(())
    }

    fn step_finished(&mut self, step: &mut FinishedStep) -> anyhow::Result<()> {
        let (id, _) = self.running()?;
        self.store_unless_locked(|store| store.finish_step(id, step))?;
        self.step = None;
        let kept = self.kept.take();
        self.progress.step_finished(step);
        if let Some(live) = &self.live {
            live.step_finished(step);
        }
        match (&self.locked, kept) {
            (Some(why), Some(kept)) => Err(super::unstored::spill(
                self.store.path(),
                self.run,
                &self.new_run,
                &kept,
                step,
                why,
            )),
            _ => Ok(()),
        }
    }

    fn step_dropped(&mut self) -> anyhow::Result<()> {
        self.kept = None;
        if let Some(live) = &self.live {
            live.step_dropped();
        }
        match self.step.take() {
            Some((id, _)) => self.store.drop_step(id),
            None => Ok(()),
        }
    }
}

/// What every run carries from the command line to its end.
struct RunContext<'a> {
    argv: Vec<String>,
    started_at: SystemTime,
    store: &'a mut Store,
    interrupted: Arc<AtomicBool>,
    /// The signal that interrupted the run (0 while none has).
    signal: Arc<AtomicUsize>,
    plan: &'a Plan,
    /// The target as stored (no password).
    target: String,
    remotes: Vec<RemoteWatch>,
    /// The generators that offer the load, none when this process does.
    generators: Vec<Arc<GeneratorPeer>>,
    /// With `--serve`: the live view's state and its server.
    live: Option<(Arc<Live>, LiveServer)>,
    /// How agents are reached (a net run's target is one).
    access: AgentAccess,
    /// `--baseline` with `--fail-on`: what the run is gated against.
    baseline: Option<super::gate::Baseline>,
    /// `--label KEY=VALUE`: stored with the run.
    labels: crate::store::Labels,
}

/// This host's facts, a database target's settings (`db.…`) and the remote
/// hosts' facts (`server.…`).
fn inventory(
    endpoint: Option<&Endpoint>,
    remotes: &[RemoteWatch],
) -> std::collections::BTreeMap<String, String> {
    let mut facts = local_inventory(endpoint);
    for remote in remotes {
        match remote.inventory() {
            Some(Ok(remote_facts)) => facts.extend(
                remote_facts
                    .into_iter()
                    .map(|(k, v)| (format!("server.{k}"), v)),
            ),
            Some(Err(e)) => {
                crate::util::err(format_args!(
                    "warning: no inventory from {}: {}\n",
                    remote.name(),
                    crate::util::one_line(&format!("{e:#}"))
                ));
            }
            None => {}
        }
    }
    facts
}

/// This host's facts and, for a database target, its settings (`db.…`).
fn local_inventory(endpoint: Option<&Endpoint>) -> std::collections::BTreeMap<String, String> {
    let mut inv = crate::doctor::inventory::host_inventory(&crate::doctor::Root::live());
    if let Some(settings) = endpoint.and_then(Endpoint::settings) {
        match settings {
            Ok(s) => {
                inv.insert("db.engine".to_string(), s.engine.clone());
                for (k, v) in s.settings {
                    inv.insert(format!("db.{k}"), v);
                }
                if let Some((same, _)) = s.wal_on_data_device {
                    inv.insert(
                        "db.wal_on_data_device".to_string(),
                        if same { "yes" } else { "no" }.to_string(),
                    );
                }
            }
            Err(e) => {
                crate::util::err(format_args!(
                    "warning: the database's settings are not in the run's inventory: {}\n",
                    crate::util::one_line(&format!("{e:#}"))
                ));
            }
        }
    }
    inv
}

/// perflab itself, the server under test when known, and the origin
/// behind it when perflab runs that too.
fn process_groups(
    server: Option<ProcessSelector>,
    origin: Option<ProcessSelector>,
) -> Vec<ProcessGroup> {
    let mut groups = vec![ProcessGroup {
        label: "perflab".to_string(),
        selector: ProcessSelector::Pid(std::process::id()),
    }];
    if let Some(selector) = server {
        groups.push(ProcessGroup {
            label: "server".to_string(),
            selector,
        });
    }
    if let Some(selector) = origin {
        groups.push(ProcessGroup {
            label: "origin".to_string(),
            selector,
        });
    }
    groups
}

/// Runs the sweep of a started workload, its run stored as it goes, then
/// ends the run ([`finish`]).
fn execute<W: Workload>(
    workload: Arc<W>,
    started: Started,
    ctx: RunContext<'_>,
) -> anyhow::Result<Exit> {
    let RunContext {
        argv,
        started_at,
        store,
        interrupted,
        signal,
        plan,
        target,
        remotes,
        generators,
        live,
        access: _,
        baseline,
        labels,
    } = ctx;
    let (live, live_server) = live.unzip();
    let generators = on_generators(workload.as_ref(), plan, generators)?;
    let new_run = NewRun {
        started_at,
        workload: plan.workload.name().to_string(),
        target: target.clone(),
        op_names: workload.op_names().iter().map(|s| s.to_string()).collect(),
        plan_given: argv,
        plan_resolved: serde_json::to_value(plan)?,
        host: HostFacts::read(),
        setup: started.setup.clone(),
    };
    let run = store.create_run(&new_run)?;
    store.save_labels(run, &labels)?;
    let facts = inventory(started.endpoint.as_ref(), &remotes);
    store.save_inventory(run, &facts)?;
    if let Some(live) = &live {
        live.run_created(
            run.to_string(),
            workload.op_names().iter().map(|s| s.to_string()).collect(),
        );
    }
    announce(plan, run, &target, store);
    let mut observer = observe(workload.as_ref(), plan, started, store, run, new_run);
    observer.remotes = remotes;
    observer.live = live.clone();
    let swept = run_sweep_on(
        workload.clone(),
        plan,
        generators.as_ref(),
        &interrupted,
        &mut observer,
    );
    let store = observer.store;
    let (end, counts) = match swept {
        Ok(done) => done,
        // The store stayed locked: a status would wait as long again.
        Err(e) if e.chain().any(|c| c.is::<LockedOut>()) => return Err(e),
        Err(e) => {
            let reason = format!("{e:#}");
            let _ = store.finish_run(run, RunStatus::Failed, Some(&reason), None);
            return Err(e);
        }
    };
    let end = held_by_pool(end, &facts, plan);
    let at_sweep_end = signal.load(std::sync::atomic::Ordering::SeqCst);
    let checked = workload.check(&counts);
    let finished = finish(store, run, end, checked, &signal, live.as_deref());
    if let Some(live_server) = live_server {
        live_server.finish(&interrupted);
    }
    let exit = after_sweep(
        finished,
        at_sweep_end,
        signal.load(std::sync::atomic::Ordering::SeqCst),
        run,
    )?;
    match baseline {
        Some(b) => b.gate(store, run, exit),
        None => Ok(exit),
    }
}

/// The observer of run `run` (stored as `new_run`) of a started
/// workload: no remote probe and no live view yet.
fn observe<'a, W: Workload>(
    workload: &W,
    plan: &Plan,
    started: Started,
    store: &'a mut Store,
    run: RunId,
    new_run: NewRun,
) -> RunObserver<'a> {
    // The processes given on the command line win over a managed server's.
    let server = plan.server.clone().or(started.server);
    // The links the run's traffic can cross; unknown (every link read)
    // for a workload that names no addresses, or when the kernel's routes
    // cannot be asked.
    let path = started
        .addresses
        .as_deref()
        .and_then(|a| crate::probe::route::interfaces_to(a).ok());
    RunObserver {
        store,
        run,
        progress: Progress::new(
            steps_planned(plan),
            crate::workload::run_rate_unit(
                &plan.workload.name,
                workload.op_names().first().copied(),
            ),
        ),
        db_probe: started.db_probe,
        host_last: None,
        groups: process_groups(server, started.origin),
        host: HostReader::new(HostRoot::live()).on_path(path),
        remotes: Vec::new(),
        step: None,
        live: None,
        new_run,
        kept: None,
        locked: None,
    }
}

/// The steps a plan runs; 0 for a search (`--find`), whose steps are not
/// known in advance.
fn steps_planned(plan: &Plan) -> usize {
    if plan.find.is_some() {
        0
    } else {
        plan.sweep.levels.len() * plan.repeat as usize
    }
}

/// The run's first line: what runs where, how, and where it is stored.
fn announce(plan: &Plan, run: RunId, target: &str, store: &Store) {
    let steps = match plan.find {
        Some(find) => format!(
            "a search (--find) from {} for {} to within {}, steps",
            plan.sweep
                .levels
                .first()
                .map_or(String::new(), |l| l.to_string()),
            plan.slos
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            crate::units::Percent(find.precision),
        ),
        None => match steps_planned(plan) {
            1 => "1 step".to_string(),
            n => format!("{n} steps"),
        },
    };
    let alone = if plan.alone_up_to > plan.threads {
        format!(" (one per user up to {} users)", plan.alone_up_to)
    } else {
        String::new()
    };
    crate::util::out(format_args!(
        "run {run}: {} on {target}, {steps} of {} after {} warm-up, {} thread{}{alone}, seed {}; results in {}\n",
        plan.workload.name(),
        format_duration(plan.duration),
        format_duration(plan.warmup),
        plan.threads,
        if plan.threads == 1 { "" } else { "s" },
        plan.seed,
        store.path().display()
    ));
}

/// How a run whose end was decided exits: a signal that came after its
/// sweep (while it was reported, or its live view served the final page)
/// still ends the process with that signal's code, said in one line.
fn after_sweep(
    finished: anyhow::Result<Exit>,
    at_sweep_end: usize,
    now: usize,
    run: RunId,
) -> anyhow::Result<Exit> {
    match finished {
        Ok(exit)
            if at_sweep_end == 0
                && now != 0
                && !matches!(exit, Exit::Interrupted | Exit::Terminated) =>
        {
            let (by, exit) = super::signal_exit(now);
            crate::util::err(format_args!(
                "interrupted ({by}) after the sweep; run {run} is stored\n"
            ));
            Ok(exit)
        }
        other => other,
    }
}

/// The generators the load is offered from (none: from here); refused
/// when the workload cannot run on them against this target.
fn on_generators<W: Workload>(
    workload: &W,
    plan: &Plan,
    peers: Vec<Arc<GeneratorPeer>>,
) -> Result<Option<Generators>, PlanError> {
    if peers.is_empty() {
        return Ok(None);
    }
    let form = workload.generator_form().ok_or_else(|| {
        PlanError::new(format!(
            "the {} workload cannot run on generators against this target (it runs only here, or its server is reached through a Unix socket); drop --generators, or reach the server over TCP",
            plan.workload.name()
        ))
    })?;
    Ok(Some(Generators {
        peers,
        workload: plan.workload.name().to_string(),
        form,
    }))
}

/// Ends a swept run: its status from how the sweep ended and the check,
/// stored; the table and the verdict printed and the verdict stored.
fn finish(
    store: &mut Store,
    run: RunId,
    end: SweepEnd,
    checked: anyhow::Result<Option<CheckReport>>,
    signal: &AtomicUsize,
    live: Option<&Live>,
) -> anyhow::Result<Exit> {
    let check = match (checked, &end) {
        (Ok(check), _) => check,
        (Err(e), _) if e.chain().any(|c| c.is::<crate::util::Interrupted>()) => {
            return check_cut(store, run, signal, live);
        }
        (Err(e), SweepEnd::TargetLost { step, reason }) => {
            // The server is gone: keep what was measured, say so once.
            let reason = format!(
                "lost the target during step {} ({reason}); the check could not run: {}",
                step + 1,
                crate::util::one_line(&format!("{e:#}"))
            );
            store.finish_run(run, RunStatus::Partial, Some(&reason), None)?;
            crate::util::out(format_args!("\n"));
            write(
                &Output::Run(&store.load_run(run)?),
                Format::Text,
                Destination::Stdout,
            )?;
            crate::util::err(format_args!(
                "error: {reason}; the finished steps are stored as run {run} (partial) in {}\n",
                store.path().display()
            ));
            if let Some(live) = live {
                live.ended(format!("partial: {reason}"), String::new());
            }
            return Ok(Exit::Failed);
        }
        (Err(e), _) => {
            // The sweep reached the target with the same settings: a check
            // that cannot is the target's failure, never bad input (exit 1,
            // not 2), whatever the error's own kind.
            let reason = format!("the check could not run: {e:#}");
            let _ = store.finish_run(run, RunStatus::Failed, Some(&reason), None);
            return Err(anyhow::anyhow!("{reason}"));
        }
    };
    let check_failed = check.as_ref().is_some_and(|c| !c.passed);
    let signal = signal.load(std::sync::atomic::Ordering::SeqCst);
    let (status, reason, exit) = run_end(&end, check_failed, signal);
    store.finish_run(run, status, reason.as_deref(), check.as_ref())?;
    let verdict = show_stored(store, run)?;
    if let Some(live) = live {
        let said = match &reason {
            Some(why) => format!("{}: {why}", status.as_str()),
            None => status.as_str().to_string(),
        };
        live.ended(said, verdict);
    }
    Ok(exit)
}

/// Ends a run whose check a signal cut short: partial, its steps kept
/// and shown, the exit code the signal's.
fn check_cut(
    store: &mut Store,
    run: RunId,
    signal: &AtomicUsize,
    live: Option<&Live>,
) -> anyhow::Result<Exit> {
    let (by, exit) = super::signal_exit(signal.load(std::sync::atomic::Ordering::SeqCst));
    let reason = format!(
        "interrupted ({by}) during the data check; the finished steps are stored, unchecked"
    );
    store.finish_run(run, RunStatus::Partial, Some(&reason), None)?;
    let verdict = show_stored(store, run)?;
    crate::util::err(format_args!(
        "error: {reason} as run {run} (partial) in {}\n",
        store.path().display()
    ));
    if let Some(live) = live {
        live.ended(format!("partial: {reason}"), verdict);
    }
    Ok(exit)
}

/// A sweep that lost its target because a pool in front of the server
/// kept a new session waiting (the inventory `facts` says a pool relays
/// the sessions): refused by the pool's size at that step, not lost.
fn held_by_pool(
    end: SweepEnd,
    facts: &std::collections::BTreeMap<String, String>,
    plan: &Plan,
) -> SweepEnd {
    match end {
        SweepEnd::TargetLost { step, reason }
            if crate::sut::postgres::pool::held(&reason, facts) =>
        {
            SweepEnd::Refused {
                step,
                at: plan
                    .sweep
                    .levels
                    .get(step)
                    .map_or_else(|| format!("step {}", step + 1), ToString::to_string),
                setting: "pool size",
                reason,
            }
        }
        other => other,
    }
}

/// The run's status, why, and the exit code, from how its sweep ended
/// and whether its check failed.
fn run_end(end: &SweepEnd, check_failed: bool, signal: usize) -> (RunStatus, Option<String>, Exit) {
    match (end, check_failed) {
        (SweepEnd::Interrupted, _) => {
            let (by, exit) = super::signal_exit(signal);
            (
                RunStatus::Partial,
                Some(format!("interrupted ({by}); the finished steps are stored")),
                exit,
            )
        }
        (SweepEnd::Failed { step, reason }, _) => (
            RunStatus::Failed,
            Some(format!("step {} failed: {reason}", step + 1)),
            Exit::Failed,
        ),
        (SweepEnd::TargetLost { step, reason }, _) => (
            RunStatus::Partial,
            Some(format!(
                "lost the target during step {} ({reason})",
                step + 1
            )),
            Exit::Failed,
        ),
        (
            SweepEnd::Refused {
                step,
                at,
                setting,
                reason,
            },
            _,
        ) => (
            RunStatus::Partial,
            Some(crate::engine::refusal::reason(*step, at, setting, reason)),
            Exit::Failed,
        ),
        (SweepEnd::Complete, true) => (
            RunStatus::Failed,
            Some("the data check failed".to_string()),
            Exit::Failed,
        ),
        (SweepEnd::Complete, false) => (RunStatus::Complete, None, Exit::Ok),
    }
}

/// Prints the stored run's table and its verdict, and stores the verdict;
/// returns the verdict as printed.
fn show_stored(store: &mut Store, run: RunId) -> anyhow::Result<String> {
    crate::util::out(format_args!("\n"));
    let stored = store.load_run(run)?;
    write(&Output::Run(&stored), Format::Text, Destination::Stdout)?;
    let verdict = crate::analyze::verdict_of_run(&stored, None, None);
    crate::util::out(format_args!("\n"));
    write(
        &Output::Verdict {
            verdict: &verdict,
            run,
        },
        Format::Text,
        Destination::Stdout,
    )?;
    store.save_verdict(run, &serde_json::to_value(&verdict)?)?;
    crate::util::out(format_args!(
        "\nstored as run {run} in {}: perflab show {run} --json run-{run}.json\n",
        store.path().display()
    ));
    Ok(crate::report::render_verdict(&verdict, run))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{OpTally, PackedTally, Phase};
    use std::time::Duration;

    fn one_second(at: u64) -> (IntervalSpec, Tally, IntervalRecord) {
        let mut tally = Tally::new(1);
        let mut op = OpTally {
            ok: 5,
            ..OpTally::default()
        };
        op.response.record(1_000).unwrap();
        op.service.record(900).unwrap();
        tally.ops[0] = op;
        let spec = IntervalSpec {
            phase: Phase::Measured,
            start: Duration::from_secs(at),
            end: Duration::from_secs(at + 1),
        };
        let record = IntervalRecord {
            phase: Phase::Measured,
            start: spec.start,
            length: Duration::from_secs(1),
            tally: PackedTally::pack(&tally),
            db: None,
            host: None,
            probes: Vec::new(),
        };
        (spec, tally, record)
    }

    fn finished(tally: Tally) -> FinishedStep {
        let drain = IntervalRecord {
            phase: Phase::Drain,
            ..one_second(2).2
        };
        let mut answering = crate::engine::Answering::default();
        answering.interval(1, 0);
        FinishedStep::of_two_seconds(0, Level::Users(1), tally, answering, drain)
    }

    /// Another process holds the store past a commit's patience in the
    /// middle of a step: the step goes on measuring, kept in memory, and
    /// ends written whole as a JSON export beside the store, named in the
    /// one line the run ends with.
    #[test]
    fn a_step_the_locked_store_refuses_is_written_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("perflab.db");
        let mut store = Store::open(&path)
            .unwrap()
            .with_patience(Duration::from_millis(300));
        let new_run = NewRun {
            started_at: SystemTime::now(),
            workload: "null".to_string(),
            target: "null".to_string(),
            op_names: vec!["noop".to_string()],
            plan_given: vec!["perflab".to_string(), "run".to_string()],
            plan_resolved: serde_json::json!({}),
            host: HostFacts::default(),
            setup: None,
        };
        let run = store.create_run(&new_run).unwrap();
        let mut observer = RunObserver {
            store: &mut store,
            run,
            progress: Progress::new(1, crate::workload::run_rate_unit("null", Some("noop"))),
            db_probe: None,
            host_last: None,
            groups: Vec::new(),
            host: HostReader::new(HostRoot::live()),
            remotes: Vec::new(),
            step: None,
            live: None,
            new_run,
            kept: None,
            locked: None,
        };
        let schedule = Schedule::new(
            Duration::ZERO,
            Duration::from_secs(2),
            Duration::from_secs(1),
        );
        observer
            .step_started(0, Level::Users(1), &schedule)
            .unwrap();
        let (spec, tally, record) = one_second(0);
        observer.interval(&spec, &tally, record).unwrap();
        let holder = rusqlite::Connection::open(&path).unwrap();
        holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
        let (spec, tally, record) = one_second(1);
        observer.interval(&spec, &tally, record).unwrap();
        let said = observer
            .step_finished(&mut finished(tally))
            .expect_err("the store refused the step")
            .to_string();
        holder.execute_batch("COMMIT").unwrap();
        let export = dir.path().join("perflab-run-1-unstored.json");
        assert!(said.contains("stayed locked by another process"), "{said}");
        assert!(said.contains(&export.display().to_string()), "{said}");
        assert_eq!(said.lines().count(), 1, "{said}");
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
        assert_eq!(json["run"]["id"], 1, "{json}");
        let steps = json["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 1, "{json}");
        let measured = steps[0]["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["phase"] == "measured")
            .count();
        assert_eq!(measured, 2, "{json}");
        // Nothing of the scratch store is left behind.
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with("perflab.db"))
            .collect();
        assert_eq!(left, vec!["perflab-run-1-unstored.json".to_string()]);
    }
}
