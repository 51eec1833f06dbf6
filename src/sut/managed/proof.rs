//! A managed kind added by its own file and one line of [`super::KINDS`],
//! proved in tests and compiled only for them: `proof:managed`, a
//! PostgreSQL that the lifecycle of [`super::postgres`] runs, saying the
//! rest of itself — its target, its name, its flags (`--proof-set`,
//! `--proof-cpus`, `--proof-memory`), its lab knobs (`proof.NAME`), its
//! directory's prefix — so that every list, flag, refusal and knob that
//! names the managed kinds is shown to come from the kinds' declarations.

use super::postgres::Postgres;
use super::server::{ManagedKind, MovedLog, Probe, Reach, Site, Start};
use super::ServerDir;
use crate::error::PlanError;
use crate::sut::{ServerOptions, TargetKind};
use std::process::Command;
use std::time::Duration;

/// The proof's kind: a PostgreSQL under another name.
pub(crate) struct Proof(Postgres);

impl ManagedKind for Proof {
    const SCHEME: &'static str = "proof:managed";
    const TARGET_KIND: TargetKind = TargetKind::Postgres;
    const NAME: &'static str = "proof server";
    const DIR_PREFIX: &'static str = "proof";
    const MOVED_LOG: Option<MovedLog> = None;
    const USER: &'static str = <Postgres as ManagedKind>::USER;
    const LOG: &'static str = <Postgres as ManagedKind>::LOG;
    const KNOB: &'static str = "proof";
    const SETTINGS_FLAG: &'static str = "--proof-set";
    const CPUS_FLAG: &'static str = "--proof-cpus";
    const MEMORY_FLAG: &'static str = "--proof-memory";
    const EXAMPLE_SETTING: &'static str = "shared_buffers=16MB";
    const SETTINGS_HELP: &'static str = "a PostgreSQL setting, NAME=VALUE (repeatable)";
    const PROGRAM: &'static str = <Postgres as ManagedKind>::PROGRAM;
    const START_TIMEOUT: Duration = <Postgres as ManagedKind>::START_TIMEOUT;
    const POLL: Duration = <Postgres as ManagedKind>::POLL;
    const READY_MEANS: &'static str = <Postgres as ManagedKind>::READY_MEANS;
    const STOP_SIGNAL: libc::c_int = <Postgres as ManagedKind>::STOP_SIGNAL;
    const STOP_TIMEOUT: Duration = <Postgres as ManagedKind>::STOP_TIMEOUT;

    type Programs = <Postgres as ManagedKind>::Programs;

    fn ask(settings: &[(String, String)], accelerating: bool) -> Result<(), String> {
        Postgres::ask(settings, accelerating)
    }

    fn find(options: &ServerOptions) -> anyhow::Result<Self::Programs> {
        Postgres::find(options)
    }

    fn version(programs: &Self::Programs, user: Option<(u32, u32)>) -> String {
        Postgres::version(programs, user)
    }

    fn prepare(programs: Self::Programs, site: &Site) -> anyhow::Result<Self> {
        Postgres::prepare(programs, site).map(Proof)
    }

    fn command(&self, site: &Site) -> Command {
        self.0.command(site)
    }

    fn probe<'a>(&'a self, site: &'a Site, start: Start) -> anyhow::Result<Probe<'a>> {
        self.0.probe(site, start)
    }

    fn said(dir: &ServerDir) -> Vec<String> {
        Postgres::said(dir)
    }

    fn reach(&self, site: &Site) -> Result<Reach, PlanError> {
        self.0.reach(site)
    }
}

#[cfg(test)]
mod tests {
    use crate::commands::run_in as perflab;

    /// The proof's kind is a target, with flags of its own that reach
    /// its server and that another kind's target refuses, and knobs a lab
    /// turns; a database kind's flags are refused for it.
    #[test]
    fn a_kind_added_in_its_own_file_is_a_target_with_its_own_flags_and_knobs() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let run = "run bank --target proof:managed --proof-set work_mem=5MB --proof-cpus 0 --users 1 --warmup 0s --duration 400ms --interval 100ms --store DIR/s.db";
        assert_eq!(perflab(dir, run), 0);
        assert_eq!(
            perflab(dir, "show last --store DIR/s.db --json DIR/r.json"),
            0
        );
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("r.json")).unwrap()).unwrap();
        let text = json["run"].to_string();
        assert!(text.contains("proof:managed"), "{text}");
        assert!(text.contains("work_mem"), "{text}");
        for refused in [
            "run bank --target proof:managed --pg-set work_mem=5MB --store DIR/t.db",
            "run bank --target postgres:managed --proof-cpus 0 --store DIR/t.db",
            "run bank --target proof:managed --log-dir /tmp --store DIR/t.db",
        ] {
            assert_eq!(perflab(dir, refused), 2, "{refused}");
        }
        assert!(!dir.join("t.db").exists());
        let target = crate::sut::Target::parse("proof:managed").unwrap();
        assert_eq!(
            crate::sut::knobs::knob_flags(&target, "proof.work_mem", "5MB").unwrap(),
            ["--proof-set", "work_mem=5MB"]
        );
        assert_eq!(
            crate::sut::knobs::knob_flags(&target, "cpus", "0").unwrap(),
            ["--proof-cpus", "0"]
        );
        assert!(crate::sut::knobs::knob_flags(&target, "pg.work_mem", "5MB").is_err());
    }
}
