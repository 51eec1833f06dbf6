//! A lab's cells: every variant run `repetitions` times, each repetition a
//! round of all variants in a seeded random order (so drift over the hours
//! of a lab — a warming cache, a neighbour's load — favours no variant),
//! and each cell's `perflab run` command line, checked as `perflab run`
//! itself checks one before anything is created.

use super::file::{LabFile, LabFileError};
use super::variant::Variant;
use crate::cli::{plan_from, Cli, Command};
use crate::sut::knobs::knob_flags;
use crate::sut::Target;
use rand::seq::SliceRandom;
use rand::SeedableRng;

/// One run of one variant.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Cell {
    /// Its place in the lab's order, from 0.
    pub(crate) position: usize,
    /// Index of its variant in the lab file's order.
    pub(crate) variant: usize,
    /// Which run of the variant, from 1.
    pub(crate) repetition: u32,
    /// The flags of its `perflab run` (after `run`, without `--store`).
    pub(crate) args: Vec<String>,
    /// The flags its knobs added, to show what the cell changes.
    pub(crate) knob_args: Vec<String>,
}

/// The lab's cells in the order they run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LabPlan {
    pub(crate) seed: u64,
    pub(crate) cells: Vec<Cell>,
}

/// Flags a lab sets itself: a cell's may not.
const LAB_FLAGS: [&str; 2] = ["--store", "--target"];

impl LabPlan {
    /// Checks every variant's run against its target and workload, and
    /// orders the cells; `seed` when the file gives none.
    pub(crate) fn of(lab: &LabFile, seed: u64) -> Result<Self, LabFileError> {
        let seed = lab.seed.unwrap_or(seed);
        check_lab_flags(lab)?;
        let Some(target_text) = &lab.target else {
            return Err(lab.error_at_args(no_target()));
        };
        let target = Target::parse(target_text).map_err(|e| lab.error_at_args(e))?;
        let per_variant = lab
            .variants
            .iter()
            .map(|variant| variant_run(lab, &target, target_text, variant))
            .collect::<Result<Vec<_>, _>>()?;
        let cells = ordered_cells(lab, seed, &per_variant);
        Ok(LabPlan { seed, cells })
    }
}

/// A variant's run: the flags of its `perflab run`, and those its knobs
/// added.
struct VariantRun {
    args: Vec<String>,
    knob_args: Vec<String>,
}

/// The lab's own arguments set none of the flags the lab sets itself.
fn check_lab_flags(lab: &LabFile) -> Result<(), LabFileError> {
    // Every cell serving on its own would fight for the address: the lab
    // serves them all.
    if let Some(flag) = lab.args.iter().find(|a| a.starts_with("--serve")) {
        let flag = flag.split('=').next().unwrap_or(flag);
        return Err(lab.error_at_args(format!(
            "'{flag}' would make every cell's run serve on its own; give it to the lab instead: perflab lab FILE {flag} …, which serves every cell"
        )));
    }
    let Some(flag) = lab.args.iter().find(|a| {
        LAB_FLAGS
            .iter()
            .any(|f| a.as_str() == *f || a.starts_with(&format!("{f}=")))
    }) else {
        return Ok(());
    };
    Err(lab.error_at_args(format!(
        "'{flag}' is set by the lab itself; give the target as target = \"…\" and the store with perflab lab --store"
    )))
}

/// `variant`'s run on `target`: its knobs turned into flags, checked as
/// `perflab run` checks them, an error placed at the knob that gave the
/// flag it names.
fn variant_run(
    lab: &LabFile,
    target: &Target,
    target_text: &str,
    variant: &Variant,
) -> Result<VariantRun, LabFileError> {
    let mut knob_args = Vec::new();
    // Which knob gave which flag, to place a flag's error.
    let mut sources: Vec<(String, &str)> = Vec::new();
    for (knob, value) in &variant.knobs {
        if let Some(checked) = super::hooks::lab_knob(knob, value) {
            // The lab's own: no flag of the run.
            checked.map_err(|e| lab.error_at_knob(knob, e))?;
            continue;
        }
        let flags = knob_flags(target, knob, value).map_err(|e| lab.error_at_knob(knob, e))?;
        sources.push((flags[0].clone(), knob));
        knob_args.extend(flags);
    }
    let mut args = vec![
        lab.workload.clone(),
        "--target".to_string(),
        target_text.to_string(),
    ];
    args.extend(lab.args.iter().cloned());
    args.extend(knob_args.iter().cloned());
    check_run(&args).map_err(|message| {
        match sources
            .iter()
            .find(|(flag, _)| message.contains(flag.as_str()))
        {
            Some((_, knob)) => lab.error_at_knob(knob, format!("{}: {message}", variant.name)),
            None => lab.error_at_args(message),
        }
    })?;
    Ok(VariantRun { args, knob_args })
}

/// The cells, a round of all variants in a seeded random order per
/// repetition; each cell its own seed from the lab's, unless the lab's
/// arguments give one.
fn ordered_cells(lab: &LabFile, seed: u64, per_variant: &[VariantRun]) -> Vec<Cell> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut cells = Vec::new();
    let user_seed = lab
        .args
        .iter()
        .any(|a| a == "--seed" || a.starts_with("--seed="));
    for repetition in 1..=lab.repetitions {
        let mut round: Vec<usize> = (0..lab.variants.len()).collect();
        round.shuffle(&mut rng);
        for variant in round {
            let run = &per_variant[variant];
            let mut args = run.args.clone();
            if !user_seed {
                // Each cell its own stream, all from the lab's seed.
                let cell_seed =
                    seed.wrapping_add((cells.len() as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
                args.extend(["--seed".to_string(), cell_seed.to_string()]);
            }
            cells.push(Cell {
                position: cells.len(),
                variant,
                repetition,
                args,
                knob_args: run.knob_args.clone(),
            });
        }
    }
    cells
}

/// What a lab that names no target is told: the managed targets, the
/// first as the example.
fn no_target() -> String {
    let schemes = crate::sut::managed::schemes(|_| true);
    let (first, others) = schemes
        .split_first()
        .map_or(("", &[][..]), |(f, o)| (*f, o));
    format!(
        "the lab names no target; add target = \"{first}\" (or {})",
        others.join(", ")
    )
}

/// Whether `perflab run ARGS` would start: its flags parse and validate
/// into a plan. The error's text when not (without clap's usage lines).
fn check_run(args: &[String]) -> Result<(), String> {
    let argv = ["perflab", "run"]
        .into_iter()
        .map(str::to_string)
        .chain(args.iter().cloned());
    let cli = <Cli as clap::Parser>::try_parse_from(argv).map_err(|e| {
        let rendered = e.render().to_string();
        let first = rendered.lines().next().unwrap_or("bad flags").to_string();
        first.trim_start_matches("error: ").to_string()
    })?;
    let Command::Run(run) = cli.command else {
        return Err("not a run".to_string());
    };
    plan_from(&run).map(|_| ()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn lab(text: &str) -> LabFile {
        LabFile::parse(Path::new("lab.toml"), text.to_string()).unwrap()
    }

    /// A lab without a target is told every managed target there is.
    #[test]
    fn a_lab_without_a_target_is_told_every_managed_one() {
        let e = LabPlan::of(&lab("workload = \"bank\"\n[vary]\ncpus = [\"0\"]\n"), 1)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("add target = \"postgres:managed\" (or mariadb:managed, nginx:managed"),
            "{e}"
        );
        for kind in crate::sut::managed::KINDS {
            assert!(e.contains(kind.scheme), "{e}");
        }
    }

    #[test]
    fn each_round_holds_every_variant_once_in_a_seeded_order() {
        let file = lab("workload = \"bank\"\ntarget = \"postgres:managed\"\nargs = \"--users 1\"\nrepetitions = 3\n[vary]\ncpus = [\"0\", \"0-1\"]\n\"pg.fsync\" = [\"on\", \"off\"]\n");
        let plan = LabPlan::of(&file, 7).unwrap();
        assert_eq!(plan.cells.len(), 12);
        for round in plan.cells.chunks(4) {
            let mut seen: Vec<usize> = round.iter().map(|c| c.variant).collect();
            seen.sort_unstable();
            assert_eq!(seen, [0, 1, 2, 3]);
        }
        assert_eq!(
            plan,
            LabPlan::of(&file, 7).unwrap(),
            "the same seed, the same order"
        );
        let orders: std::collections::BTreeSet<Vec<usize>> = (0..20)
            .map(|s| {
                LabPlan::of(&file, s)
                    .unwrap()
                    .cells
                    .iter()
                    .map(|c| c.variant)
                    .collect()
            })
            .collect();
        assert!(orders.len() > 1, "the order depends on --seed");
        let cell = &plan.cells[0];
        assert!(cell
            .args
            .windows(2)
            .any(|w| w == ["--target", "postgres:managed"]));
        assert!(cell.args.contains(&"--seed".to_string()));
        assert_eq!(cell.knob_args.len(), 4);
    }

    #[test]
    fn a_cell_that_would_not_run_is_refused_where_its_cause_is() {
        let refused = |text: &str| LabPlan::of(&lab(text), 1).unwrap_err().to_string();
        let e = refused("workload = \"bank\"\ntarget = \"postgres:managed\"\n[vary]\ncpus = [\"0\", \"0,99999\"]\n");
        assert!(
            e.starts_with("lab.toml:4:8: cpus=0,99999: --pg-cpus"),
            "{e}"
        );
        let e = refused("workload = \"bank\"\ntarget = \"sqlite:x.db\"\n[vary]\ncpus = [\"0\"]\n");
        assert!(
            e.starts_with("lab.toml:4:8:") && e.contains("manages"),
            "{e}"
        );
        let e = refused("workload = \"bank\"\ntarget = \"postgres:managed\"\nargs = \"--userz 3\"\n[vary]\ncpus = [\"0\"]\n");
        assert!(
            e.starts_with("lab.toml:3:8:") && e.contains("--userz"),
            "{e}"
        );
        let e = refused("workload = \"bank\"\ntarget = \"postgres:managed\"\nargs = \"--store x.db\"\n[vary]\ncpus = [\"0\"]\n");
        assert!(e.contains("set by the lab"), "{e}");
        let e = refused("workload = \"bank\"\ntarget = \"postgres:managed\"\nargs = \"--serve 127.0.0.1:0\"\n[vary]\ncpus = [\"0\"]\n");
        assert!(e.contains("perflab lab FILE --serve"), "{e}");
        let e = refused("workload = \"bank\"\n[vary]\ncpus = [\"0\"]\n");
        assert!(e.contains("names no target"), "{e}");
    }
}
