//! The registered workloads and the one dispatch to them. Adding a
//! workload is one line in the `workloads!` call at the end of this file;
//! the macro writes the enums that carry a chosen workload's flags and
//! spec, and the matches that reach its [`WorkloadKind`].

use super::{spec_of, CheckReport, SweepDriver, WorkloadKind};
use crate::error::PlanError;
use crate::plan::{Plan, WorkloadSpec};
use crate::sut::Target;

macro_rules! workloads {
    ($($(#[$attr:meta])* $variant:ident = $kind:ty),+ $(,)?) => {
        /// How many workloads this build has (a line may be for tests only).
        const COUNT: usize = {
            let mut n = 0;
            $(
                $(#[$attr])*
                {
                    n += 1;
                }
            )+
            n
        };

        /// The workloads' names, in the order help lists them.
        pub const NAMES: &[&str] = &{
            let mut names = [""; COUNT];
            let mut i = 0;
            $(
                $(#[$attr])*
                {
                    names[i] = <$kind as WorkloadKind>::NAME;
                    i += 1;
                }
            )+
            let _ = i;
            names
        };

        /// `perflab run NAME …`: the chosen workload and its own flags.
        #[derive(Debug)]
        pub enum RunChoice {
            $($(#[$attr])* $variant(<$kind as WorkloadKind>::RunArgs)),+
        }

        /// A chosen workload's validated spec.
        pub enum Validated {
            $($(#[$attr])* $variant(<$kind as WorkloadKind>::Spec)),+
        }

        /// `perflab check NAME …`: the chosen workload and its flags.
        #[derive(Debug)]
        pub enum CheckChoice {
            $($(#[$attr])* $variant(<$kind as WorkloadKind>::CheckArgs)),+
        }

        impl RunChoice {
            /// One subcommand per workload with its own flags, for `perflab run`.
            // Pushed one by one: a line of the registry may be for tests only.
            #[allow(clippy::vec_init_then_push)]
            pub(crate) fn commands() -> Vec<clap::Command> {
                let mut out = Vec::new();
                $(
                    $(#[$attr])*
                    out.push(
                        <<$kind as WorkloadKind>::RunArgs as clap::Args>::augment_args(
                            clap::Command::new(<$kind as WorkloadKind>::NAME),
                        )
                        .about(<$kind as WorkloadKind>::ABOUT),
                    );
                )+
                out
            }

            /// The workload named `name`, its flags read from `matches`.
            pub(crate) fn from_matches(name: &str, matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
                $(
                    $(#[$attr])*
                    if name == <$kind as WorkloadKind>::NAME {
                        return Ok(RunChoice::$variant(
                            <<$kind as WorkloadKind>::RunArgs as clap::FromArgMatches>::from_arg_matches(matches)?,
                        ));
                    }
                )+
                Err(clap::Error::raw(
                    clap::error::ErrorKind::InvalidSubcommand,
                    format!("'{name}' is not a workload; use {}", super::registry::names_text()),
                ))
            }

            /// Validates the workload's flags.
            pub(crate) fn validate(&self) -> Result<Validated, PlanError> {
                Ok(match self {
                    $($(#[$attr])* RunChoice::$variant(args) => Validated::$variant(<$kind as WorkloadKind>::validate(args)?)),+
                })
            }
        }

        impl Validated {
            /// What the plan records of the workload.
            pub(crate) fn spec(&self) -> Result<WorkloadSpec, PlanError> {
                match self {
                    $($(#[$attr])* Validated::$variant(spec) => spec_of::<$kind>(spec)),+
                }
            }

            /// Its target.
            pub(crate) fn target(&self) -> Target {
                match self {
                    $($(#[$attr])* Validated::$variant(spec) => <$kind as WorkloadKind>::target(spec)),+
                }
            }

            /// Makes the target ready and hands the workload to `driver`.
            pub(crate) fn start<D: SweepDriver>(&self, plan: &Plan, driver: D) -> anyhow::Result<D::Output> {
                match self {
                    $($(#[$attr])* Validated::$variant(spec) => <$kind as WorkloadKind>::start(spec, plan, driver)),+
                }
            }
        }

        /// Builds the workload named `name` on a generator from its form
        /// and hands it to `driver`.
        pub fn on_generator<D: SweepDriver>(
            name: &str,
            form: serde_json::Value,
            driver: D,
        ) -> anyhow::Result<D::Output> {
            $(
                $(#[$attr])*
                if name == <$kind as WorkloadKind>::NAME {
                    return <$kind as WorkloadKind>::on_generator(form, driver);
                }
            )+
            Err(PlanError::new(format!("'{name}' is not a workload of this perflab")).into())
        }

        /// Checks the form of the workload named `name` that a generator
        /// was sent: a workload of this perflab that runs on generators,
        /// its form checked by the workload.
        pub fn check_generator_form(name: &str, form: &serde_json::Value) -> Result<(), PlanError> {
            $(
                $(#[$attr])*
                if name == <$kind as WorkloadKind>::NAME {
                    if !<$kind as WorkloadKind>::ON_GENERATORS {
                        return Err(PlanError::new(format!(
                            "workload: {name} does not run on generators; they run {}",
                            generator_workloads().join(", ")
                        )));
                    }
                    return <$kind as WorkloadKind>::check_form(form);
                }
            )+
            Err(PlanError::new(format!(
                "workload: '{}' is not a workload of this perflab",
                crate::util::one_line(&name.chars().take(40).collect::<String>())
            )))
        }

        /// The unit the throughput of the workload named `name` is
        /// counted in; operations per second for a name this perflab does
        /// not know (a store written by another version).
        pub fn rate_unit(name: &str) -> crate::units::RateUnit {
            $(
                $(#[$attr])*
                if name == <$kind as WorkloadKind>::NAME {
                    return <$kind as WorkloadKind>::RATE_UNIT;
                }
            )+
            crate::units::RateUnit::Operations
        }

        /// The figures of its own that the workload named `name` gives
        /// for a run's `steps` ([`WorkloadKind::figures`]); none for a
        /// name this perflab does not know.
        pub(crate) fn figures(
            name: &str,
            steps: &[crate::record::StepResult],
            op_names: &[String],
        ) -> Option<super::figures::Figures> {
            $(
                $(#[$attr])*
                if name == <$kind as WorkloadKind>::NAME {
                    return <$kind as WorkloadKind>::figures(steps, op_names);
                }
            )+
            None
        }

        /// The unit a run of the workload named `name` counts its
        /// throughput in, from its first operation's name.
        pub(crate) fn rate_unit_of(name: &str, first_op: Option<&str>) -> crate::units::RateUnit {
            $(
                $(#[$attr])*
                if name == <$kind as WorkloadKind>::NAME {
                    return <$kind as WorkloadKind>::rate_unit_of(first_op);
                }
            )+
            crate::units::RateUnit::Operations
        }

        /// The workloads that run on generators.
        pub fn generator_workloads() -> Vec<&'static str> {
            let mut out = Vec::new();
            $(
                $(#[$attr])*
                if <$kind as WorkloadKind>::ON_GENERATORS {
                    out.push(<$kind as WorkloadKind>::NAME);
                }
            )+
            out
        }

        impl CheckChoice {
            /// One subcommand per workload, for `perflab check`.
            // Pushed one by one: a line of the registry may be for tests only.
            #[allow(clippy::vec_init_then_push)]
            pub(crate) fn commands() -> Vec<clap::Command> {
                let mut out = Vec::new();
                $(
                    $(#[$attr])*
                    out.push(
                        <<$kind as WorkloadKind>::CheckArgs as clap::Args>::augment_args(
                            clap::Command::new(<$kind as WorkloadKind>::NAME),
                        )
                        .about(<$kind as WorkloadKind>::CHECK_ABOUT),
                    );
                )+
                out
            }

            /// The workload named `name`, its flags read from `matches`.
            pub(crate) fn from_matches(name: &str, matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
                $(
                    $(#[$attr])*
                    if name == <$kind as WorkloadKind>::NAME {
                        return Ok(CheckChoice::$variant(
                            <<$kind as WorkloadKind>::CheckArgs as clap::FromArgMatches>::from_arg_matches(matches)?,
                        ));
                    }
                )+
                Err(clap::Error::raw(
                    clap::error::ErrorKind::InvalidSubcommand,
                    format!("'{name}' is not a workload; use {}", super::registry::names_text()),
                ))
            }

            /// Runs the workload's check on its own.
            pub(crate) fn check(&self) -> anyhow::Result<(String, CheckReport)> {
                match self {
                    $($(#[$attr])* CheckChoice::$variant(args) => <$kind as WorkloadKind>::check(args)),+
                }
            }
        }
    };
}

/// The names as prose: `bank or null`, `a, b or c`.
pub fn names_text() -> String {
    match NAMES.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

workloads! {
    Bank = super::bank::Bank,
    Disk = super::disk::Disk,
    Files = super::files::Files,
    Net = super::net::Net,
    Null = super::null::Null,
    Sql = super::sql::Sql,
    Web = super::web::Web,
    #[cfg(test)]
    Proof = super::proof::Proof,
}
