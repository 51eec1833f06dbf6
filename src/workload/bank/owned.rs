//! Which tables in the user's database are perflab's. A load writes the
//! name of every table it is about to make into a ledger table of its own
//! (`perflab_tables`) before making it; only tables the ledger lists are
//! ever dropped or replaced, by `--reload` or a load at another scale. A
//! table that stands where the bank wants one and that the ledger does not
//! list is somebody else's: the load is refused before anything is
//! written, naming it. The rules are here once; each database supplies its
//! catalog ([`Catalog`]).

use super::Tables;
use crate::error::PlanError;

/// The ledger of the tables perflab made in a database.
pub(crate) const LEDGER: &str = "perflab_tables";
/// The ledger's columns, in order: a table with this name and other
/// columns is not perflab's, and is neither read as a ledger nor written.
pub(crate) const LEDGER_COLUMNS: [&str; 3] = ["table_name", "made_at", "made_by"];
/// What `made_by` holds in every row perflab writes.
pub(crate) const MADE_BY: &str = "perflab";

/// What the database's catalog says about the bank's tables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Catalog {
    /// The bank's tables that exist (of [`Tables::all`]).
    pub(crate) present: Vec<&'static str>,
    /// The ledger's columns, when a table named [`LEDGER`] exists.
    pub(crate) ledger_columns: Option<Vec<String>>,
    /// The tables the ledger lists (empty without a ledger).
    pub(crate) listed: Vec<String>,
}

impl Catalog {
    /// What was found: the layout's tables present, and the columns of a
    /// table named like the ledger (empty when there is none). Which
    /// tables the ledger lists is read next, once [`Self::ledger_is_ours`].
    pub(crate) fn found(present: Vec<&'static str>, ledger_columns: Vec<String>) -> Self {
        Catalog {
            present,
            ledger_columns: (!ledger_columns.is_empty()).then_some(ledger_columns),
            listed: Vec::new(),
        }
    }

    /// True when the ledger table exists and has perflab's shape.
    pub(crate) fn ledger_is_ours(&self) -> bool {
        self.ledger_columns.as_ref().is_some_and(|columns| {
            columns.len() == LEDGER_COLUMNS.len()
                && columns
                    .iter()
                    .zip(LEDGER_COLUMNS)
                    .all(|(c, ours)| c.eq_ignore_ascii_case(ours))
        })
    }

    /// True when perflab made `table` (the ledger lists it).
    pub(crate) fn owns(&self, table: &str) -> bool {
        self.ledger_is_ours() && self.listed.iter().any(|t| t.eq_ignore_ascii_case(table))
    }

    /// True when every table of the layout exists and perflab made each.
    pub(crate) fn owns_all(&self, tables: &Tables) -> bool {
        tables
            .all()
            .iter()
            .all(|t| self.present.contains(t) && self.owns(t))
    }

    /// The tables a fresh load would replace, once it is allowed: the
    /// layout's tables that exist, every one of them perflab's. Refused,
    /// naming the others, when any is not; refused too when a table named
    /// like the ledger is not perflab's ledger. `location` names the
    /// database in the message.
    pub(crate) fn replaceable(
        &self,
        tables: &Tables,
        location: &str,
    ) -> Result<Vec<&'static str>, PlanError> {
        if self.ledger_columns.is_some() && !self.ledger_is_ours() {
            return Err(PlanError::new(format!(
                "{location} has a table named {LEDGER} that is not perflab's ledger \
                 (its columns are not {}); perflab writes nothing there: give the bank \
                 a database or schema of its own",
                LEDGER_COLUMNS.join(", ")
            )));
        }
        let foreign: Vec<&str> = self
            .present
            .iter()
            .copied()
            .filter(|t| !self.owns(t))
            .collect();
        if !foreign.is_empty() {
            let fix = if tables.pgbench {
                "perflab drops only tables it made: rebuild them at this scale with \
                 `pgbench -i -s SCALE`, give the --scale they hold, or give another database"
            } else {
                "perflab drops only tables it made: give another database (or schema), \
                 or rename or drop those tables yourself"
            };
            return Err(PlanError::new(format!(
                "{location} already has {} {}, which perflab did not make; {fix}",
                if foreign.len() == 1 {
                    "table"
                } else {
                    "tables"
                },
                foreign.join(", ")
            )));
        }
        Ok(self.present.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::bank::mix::BankMix;

    fn ledger() -> Option<Vec<String>> {
        Some(LEDGER_COLUMNS.iter().map(|c| c.to_string()).collect())
    }

    #[test]
    fn an_empty_database_is_loaded_with_nothing_replaced() {
        let t = Tables::of(BankMix::Tpcb);
        let c = Catalog::default();
        assert_eq!(c.replaceable(&t, "db").expect("empty"), Vec::<&str>::new());
        assert!(!c.owns_all(&t));
    }

    #[test]
    fn a_table_the_ledger_does_not_list_is_refused_by_name() {
        let t = Tables::of(BankMix::Tpcb);
        let c = Catalog {
            present: vec![t.accounts, t.history],
            ledger_columns: ledger(),
            listed: vec![t.history.to_string()],
        };
        let e = c.replaceable(&t, "sqlite:app.db").expect_err("foreign");
        let text = e.to_string();
        assert!(
            text.contains(
                "sqlite:app.db already has table perflab_accounts, which perflab did not make"
            ),
            "{text}"
        );
        assert!(!text.contains("perflab_history"), "{text}");
    }

    #[test]
    fn perflab_s_own_tables_are_replaceable_and_reusable() {
        let t = Tables::of(BankMix::Tpcb);
        let all = t.all();
        let c = Catalog {
            present: all.clone(),
            ledger_columns: ledger(),
            listed: all.iter().map(|s| s.to_uppercase()).collect(),
        };
        assert_eq!(c.replaceable(&t, "db").expect("ours"), all);
        assert!(c.owns_all(&t));
    }

    #[test]
    fn a_ledger_of_another_shape_is_nobody_s_ledger() {
        let t = Tables::of(BankMix::Tpcb);
        let c = Catalog {
            present: vec![t.accounts],
            ledger_columns: Some(vec!["table_name".to_string()]),
            listed: vec![t.accounts.to_string()],
        };
        assert!(!c.owns(t.accounts));
        let e = c.replaceable(&t, "db").expect_err("not our ledger");
        assert!(e.to_string().contains("not perflab's ledger"), "{e}");
    }

    #[test]
    fn pgbench_s_own_tables_are_never_perflab_s() {
        let t = Tables::of(BankMix::Pgbench);
        let c = Catalog {
            present: t.all(),
            ledger_columns: None,
            listed: Vec::new(),
        };
        assert!(!c.owns_all(&t));
        let e = c.replaceable(&t, "postgres://h/db").expect_err("pgbench's");
        assert!(e.to_string().contains("pgbench -i -s"), "{e}");
    }
}
