//! The bank's transactions, written once for every database: each backend
//! supplies its statements ([`Statements`]) and this module strings them
//! into TPC-B's profile, deposits, withdrawals and transfers. SQLite's
//! statements are synchronous; their futures are ready at once and are
//! driven with `now_or_never`.
//!
//! Each transaction's BEGIN and COMMIT are timed on the run's statement
//! clock ([`clock`]): a commit's time less a BEGIN's (one round trip with
//! no work) is what it waited for its log, measured by the client itself
//! — what a what-if of the log on another device starts from.

use super::ops::BankOp;
use crate::measure::OpResult;
use crate::workload::sql::clock::{label, StatementClock};
use std::future::Future;
use std::time::Instant;

/// The clock's statements: BEGIN, then COMMIT.
const BEGIN: usize = 0;
const COMMIT: usize = 1;

/// The bank's statement clock: its BEGIN and its COMMIT, each labelled as
/// a script's statement is (`bank:0\tBEGIN`), so that the analysis finds
/// them as it finds a script's.
pub(crate) fn clock() -> StatementClock {
    StatementClock::labelled(&[label("bank", 0, "BEGIN"), label("bank", 0, "COMMIT")])
}

/// The statements one connection can run, each a round trip (or a call).
pub(crate) trait Statements {
    type Error;

    /// The clock BEGIN and COMMIT are timed on; none where their times
    /// would not be theirs (statements sent together in a pipeline,
    /// which the COMMIT's reply ends).
    fn clock(&self) -> Option<&StatementClock>;

    fn begin(&mut self) -> impl Future<Output = Result<(), Self::Error>>;
    fn commit(&mut self) -> impl Future<Output = Result<(), Self::Error>>;
    fn rollback(&mut self) -> impl Future<Output = Result<(), Self::Error>>;
    /// Adds `amount` (negative for TPC-B's debits) to an account.
    fn credit(&mut self, aid: i64, amount: i64) -> impl Future<Output = Result<(), Self::Error>>;
    /// Debits an account if its balance covers the amount, in one statement
    /// (so no interleaving can overdraw it); false when it did not.
    fn debit_if_covered(
        &mut self,
        aid: i64,
        amount: i64,
    ) -> impl Future<Output = Result<bool, Self::Error>>;
    /// Reads an account's balance.
    fn balance(&mut self, aid: i64) -> impl Future<Output = Result<(), Self::Error>>;
    fn teller(&mut self, tid: i64, delta: i64) -> impl Future<Output = Result<(), Self::Error>>;
    fn branch(&mut self, bid: i64, delta: i64) -> impl Future<Output = Result<(), Self::Error>>;
    fn history(
        &mut self,
        tid: i64,
        bid: i64,
        aid: i64,
        delta: i64,
    ) -> impl Future<Output = Result<(), Self::Error>>;
}

/// One try of one transaction. On an error the caller rolls back.
pub(crate) async fn run<S: Statements>(s: &mut S, op: BankOp) -> Result<OpResult, S::Error> {
    if let BankOp::Balance { aid } = op {
        s.balance(aid).await?;
        return Ok(OpResult::Ok);
    }
    let begun = Instant::now();
    s.begin().await?;
    if let Some(clock) = s.clock() {
        clock.record(0, BEGIN, begun.elapsed());
    }
    match op {
        BankOp::Balance { .. } => {}
        BankOp::Tpcb {
            aid,
            tid,
            bid,
            delta,
        } => {
            s.credit(aid, delta).await?;
            s.balance(aid).await?;
            at_teller(s, tid, bid, aid, delta).await?;
        }
        BankOp::Deposit {
            aid,
            tid,
            bid,
            amount,
        } => {
            s.credit(aid, amount).await?;
            at_teller(s, tid, bid, aid, amount).await?;
        }
        BankOp::Withdraw {
            aid,
            tid,
            bid,
            amount,
        } => {
            if !s.debit_if_covered(aid, amount).await? {
                s.rollback().await?;
                return Ok(OpResult::Refused);
            }
            at_teller(s, tid, bid, aid, -amount).await?;
        }
        BankOp::Transfer {
            from,
            to,
            tid,
            bid,
            amount,
        } => {
            if !s.debit_if_covered(from, amount).await? {
                s.rollback().await?;
                return Ok(OpResult::Refused);
            }
            s.credit(to, amount).await?;
            s.history(tid, bid, from, -amount).await?;
            s.history(tid, bid, to, amount).await?;
        }
    }
    let committing = Instant::now();
    s.commit().await?;
    if let Some(clock) = s.clock() {
        clock.record(0, COMMIT, committing.elapsed());
    }
    Ok(OpResult::Ok)
}

/// The teller, branch and history part of every money-moving transaction
/// at a teller.
async fn at_teller<S: Statements>(
    s: &mut S,
    tid: i64,
    bid: i64,
    aid: i64,
    delta: i64,
) -> Result<(), S::Error> {
    s.teller(tid, delta).await?;
    s.branch(bid, delta).await?;
    s.history(tid, bid, aid, delta).await
}
