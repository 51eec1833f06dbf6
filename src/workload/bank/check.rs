//! The bank's proof that nothing was lost: money is conserved
//! (Σ accounts = Σ tellers = Σ branches = opening total + Σ history deltas),
//! history holds exactly the rows of the transactions the client saw
//! commit (give or take those whose outcome a timeout left unknown), and the
//! ATM mix never took a balance below what its funds check allows.

use super::mix::BankMix;
use super::ops::{history_rows, ACCOUNTS_PER_BRANCH, TELLERS_PER_BRANCH};
use crate::workload::{CheckLine, CheckReport, OpCounts};

/// What the check reads from the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct BankFigures {
    /// Scale the database was loaded at.
    pub(crate) scale: i64,
    /// Σ of every balance at load time, per table (accounts, tellers and
    /// branches each hold the same total).
    pub(crate) initial_total: i64,
    pub(crate) branches: i64,
    pub(crate) tellers: i64,
    pub(crate) accounts: i64,
    pub(crate) accounts_sum: i64,
    pub(crate) tellers_sum: i64,
    pub(crate) branches_sum: i64,
    pub(crate) history_rows: i64,
    pub(crate) history_sum: i64,
    /// Accounts with a balance below zero.
    pub(crate) negative_accounts: i64,
    /// The lowest balance.
    pub(crate) min_balance: i64,
}

fn line(rule: &str, passed: bool, detail: String) -> CheckLine {
    CheckLine {
        rule: rule.to_string(),
        passed,
        detail,
    }
}

/// The rules that hold for any bank database, whatever ran on it.
fn database_lines(f: &BankFigures) -> Vec<CheckLine> {
    let rows_ok = f.branches == f.scale
        && f.tellers == f.scale * TELLERS_PER_BRANCH
        && f.accounts == f.scale * ACCOUNTS_PER_BRANCH;
    let expected = f.initial_total + f.history_sum;
    let conserved =
        f.accounts_sum == expected && f.tellers_sum == expected && f.branches_sum == expected;
    vec![
        line(
            "rows",
            rows_ok,
            format!(
                "scale {}: {} branches, {} tellers, {} accounts",
                f.scale, f.branches, f.tellers, f.accounts
            ),
        ),
        line(
            "money conserved",
            conserved,
            format!(
                "Σ accounts {} · Σ tellers {} · Σ branches {} · opening {} + Σ history {} = {}",
                f.accounts_sum,
                f.tellers_sum,
                f.branches_sum,
                f.initial_total,
                f.history_sum,
                expected
            ),
        ),
    ]
}

/// Checks a database on its own (`perflab check bank`).
pub(crate) fn check_database(f: &BankFigures) -> CheckReport {
    let mut lines = database_lines(f);
    lines.push(line(
        "balances",
        true,
        format!(
            "{} accounts below zero (TPC-B allows it), lowest {}",
            f.negative_accounts, f.min_balance
        ),
    ));
    CheckReport::from_lines(lines)
}

/// Before reusing a loaded bank: it must pass its check, or the run is
/// refused with a pointer to `--reload`.
pub(crate) fn ensure_reusable(figures: &BankFigures, location: &str) -> anyhow::Result<()> {
    let report = check_database(figures);
    if report.passed {
        return Ok(());
    }
    let failed: Vec<String> = report
        .lines
        .iter()
        .filter(|l| !l.passed)
        .map(|l| format!("{}: {}", l.rule, l.detail))
        .collect();
    Err(crate::error::PlanError::new(format!(
        "the bank in {location} fails its check ({}); rerun with --reload to load it afresh",
        failed.join("; ")
    ))
    .into())
}

/// Checks a database after a run, against what the client saw.
pub(crate) fn check_run(
    mix: BankMix,
    before: &BankFigures,
    after: &BankFigures,
    run: &[OpCounts],
) -> CheckReport {
    let mut lines = database_lines(after);
    let committed: u64 = run
        .iter()
        .enumerate()
        .map(|(op, c)| c.ok * history_rows(mix, op))
        .sum();
    let unknown: u64 = run
        .iter()
        .enumerate()
        .map(|(op, c)| c.indeterminate * history_rows(mix, op))
        .sum();
    let written = after.history_rows - before.history_rows;
    let written_u = u64::try_from(written).unwrap_or(0);
    let history_ok = written >= 0 && written_u >= committed && written_u <= committed + unknown;
    lines.push(line(
        "history = committed",
        history_ok,
        if unknown > 0 {
            format!("{written} rows written; the client saw {committed} committed and {unknown} of unknown outcome (timeouts, lost connections)")
        } else {
            format!("{written} rows written; the client saw {committed} committed")
        },
    ));
    if let BankMix::Atm(_) = mix {
        let floor = before.min_balance.min(0);
        let ok = after.negative_accounts <= before.negative_accounts && after.min_balance >= floor;
        lines.push(line(
            "no overdraft",
            ok,
            format!(
                "accounts below zero: {} before, {} after; lowest balance {} (floor {floor})",
                before.negative_accounts, after.negative_accounts, after.min_balance
            ),
        ));
    }
    CheckReport::from_lines(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::bank::mix::AtmWeights;

    fn healthy() -> BankFigures {
        BankFigures {
            scale: 1,
            initial_total: 1_000,
            branches: 1,
            tellers: 10,
            accounts: 100_000,
            accounts_sum: 1_050,
            tellers_sum: 1_050,
            branches_sum: 1_050,
            history_rows: 7,
            history_sum: 50,
            negative_accounts: 0,
            min_balance: 3,
        }
    }

    #[test]
    fn a_consistent_bank_passes() {
        let before = BankFigures {
            history_rows: 2,
            ..healthy()
        };
        let run = [OpCounts {
            ok: 5,
            refused: 0,
            indeterminate: 0,
        }];
        let report = check_run(BankMix::Tpcb, &before, &healthy(), &run);
        assert!(report.passed, "{report:?}");
    }

    #[test]
    fn a_changed_balance_fails() {
        let broken = BankFigures {
            accounts_sum: 1_051,
            ..healthy()
        };
        assert!(!check_database(&broken).passed);
    }

    #[test]
    fn lost_or_phantom_history_fails_unless_a_timeout_explains_it() {
        let before = BankFigures {
            history_rows: 2,
            ..healthy()
        };
        let lost = [OpCounts {
            ok: 6,
            refused: 0,
            indeterminate: 0,
        }];
        assert!(!check_run(BankMix::Tpcb, &before, &healthy(), &lost).passed);
        let explained = [OpCounts {
            ok: 4,
            refused: 0,
            indeterminate: 1,
        }];
        assert!(check_run(BankMix::Tpcb, &before, &healthy(), &explained).passed);
    }

    #[test]
    fn an_overdraft_fails_the_atm_check() {
        let after = BankFigures {
            negative_accounts: 1,
            min_balance: -5,
            history_rows: 2,
            ..healthy()
        };
        let report = check_run(
            BankMix::Atm(AtmWeights::default()),
            &healthy(),
            &after,
            &[OpCounts::default(); 4],
        );
        assert!(!report.passed);
        assert_eq!(report.lines.last().map(|l| l.passed), Some(false));
    }
}
