//! The command line: clap definitions ([`args`]) and the one function that
//! turns raw flags into a validated [`Plan`](crate::plan::Plan)
//! ([`plan_from`]). Every flag conflict is settled here; nothing else parses
//! flags.

mod args;
mod validate;
pub(crate) mod values;

pub use args::{
    AgentAccessArgs, AgentArgs, AnalyzeArgs, CheckArgs, CheckWorkload, Cli, Command, CommonRunArgs,
    CompareArgs, DiffHostsArgs, DoctorArgs, HistoryArgs, KubeArgs, LabArgs, LabAskArgs, LabCommand,
    LabReportArgs, LabResumeArgs, ReportArgs, RunArgs, RunWorkload, ServeArgs, ServerArgs,
    ShowArgs, StoreArg, UpArgs, WatchArgs,
};
pub use args::{DEFAULT_USERS, QUICK_USERS};
pub use validate::{
    agent_access, parse_slos, plan_for, plan_from, runs_on_generators, server_selector,
};
pub(crate) use validate::{lab_view, live_view, store_view};
