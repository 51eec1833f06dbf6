//! What a connection to a database server does around each transaction,
//! whatever the server: re-open a lost connection (with backoff, counted as
//! a `connect` error while it fails), roll back a transaction whose
//! operation was abandoned at a timeout, and retry serialisation failures
//! and deadlocks up to `--max-tries`, counting every retry. A retry waits
//! first, a random time up to a bound that doubles with each failed try
//! (1 ms, 2 ms, … up to 64 ms): transactions that failed together and
//! retried at once would collide again, and two users could then fail each
//! other a hundred times in a row. Every try and every wait is inside the
//! operation's response time. A [`DbClient`] supplies the server's own calls,
//! and runs the workload's own kind of operation (a bank transaction, a
//! user's script).

use crate::measure::{ErrorKind, OpResult, Outcome, SqlCode};
use crate::sut::mysql::wire::MyError;
use crate::sut::postgres::wire::WireError;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The bound of the wait before the first retry; it doubles with each
/// failed try up to [`MAX_RETRY_WAIT`].
const FIRST_RETRY_WAIT: Duration = Duration::from_millis(1);
const MAX_RETRY_WAIT: Duration = Duration::from_millis(64);

/// Seeds of the connections' retry waits, one after another: a process's
/// connections draw distinct, reproducible sequences.
static NEXT_SEED: AtomicU64 = AtomicU64::new(0x5eed_ba2c_0ff5);

/// The wait before retry number `retry` (1 for the first): uniform up to
/// a bound that doubles with each failed try.
fn retry_wait(retry: u32, rng: &mut SmallRng) -> Duration {
    let bound = FIRST_RETRY_WAIT
        .saturating_mul(1 << retry.saturating_sub(1).min(16))
        .min(MAX_RETRY_WAIT);
    bound.mul_f64(rng.gen::<f64>())
}

/// Why one try of a transaction failed.
pub(crate) enum Failure {
    /// Serialisation failure, deadlock or lock-wait timeout (its code): try again.
    Retry(SqlCode),
    /// The connection is gone.
    Lost,
    /// A held connection's operation passed its deadline: the operation
    /// is a timeout, and its transaction is rolled back before the next
    /// (as one the engine abandons at its timeout).
    TimedOut,
    /// Any other database error, by its code.
    Sql(SqlCode),
}

impl Failure {
    /// A failure worth another try, by its code (written in place: a
    /// retried try allocates nothing).
    pub(crate) fn retry(code: impl std::fmt::Display) -> Self {
        Failure::Retry(SqlCode::of(code))
    }

    /// Any other database error, by its code or, without one, its message.
    pub(crate) fn sql(code: impl std::fmt::Display) -> Self {
        Failure::Sql(SqlCode::of(code))
    }

    /// What a failed exchange on perflab's own PostgreSQL connection means.
    pub(crate) fn of_pg(e: &WireError) -> Self {
        match e {
            WireError::Lost => Failure::Lost,
            WireError::TimedOut => Failure::TimedOut,
            WireError::Server(code) if code.is_retryable() => Failure::retry(code),
            WireError::Server(code) if code.ends_connection() => Failure::Lost,
            WireError::Server(code) => Failure::sql(code),
        }
    }

    /// What a failed exchange on perflab's own MySQL/MariaDB connection
    /// means: deadlocks (1213) and lock-wait timeouts (1205) are worth
    /// another try; a killed connection (1927) or a server shutting down
    /// (1053) is gone.
    pub(crate) fn of_my(e: &MyError) -> Self {
        match e {
            MyError::Server(code @ (1213 | 1205)) => Failure::retry(code),
            MyError::Server(1927 | 1053) | MyError::Lost => Failure::Lost,
            MyError::TimedOut => Failure::TimedOut,
            MyError::Server(code) => Failure::sql(code),
            MyError::TooLarge => Failure::sql("reply-too-large"),
            MyError::TooLong => Failure::sql("statement-too-long"),
        }
    }
}

/// One server's client calls.
pub(crate) trait DbClient {
    /// An open connection with its prepared statements.
    type Conn;
    type Error;
    /// What one operation runs (a transaction, a script and its state).
    type Op;

    /// Opens and prepares a connection.
    fn connect(&self) -> impl Future<Output = anyhow::Result<Self::Conn>>;
    /// An operation starts: a held connection's deadline runs from now.
    fn begin(conn: &mut Self::Conn);
    /// True when the connection is known to be gone.
    fn is_closed(conn: &Self::Conn) -> bool;
    /// One try of one transaction, from BEGIN to COMMIT (or a refusal).
    fn run(
        conn: &mut Self::Conn,
        op: &mut Self::Op,
    ) -> impl Future<Output = Result<OpResult, Self::Error>>;
    /// Rolls back whatever transaction is open.
    fn rollback(conn: &mut Self::Conn) -> impl Future<Output = Result<(), Self::Error>>;
    /// Sorts an error into retry, lost connection or SQL error.
    fn classify(e: &Self::Error) -> Failure;
    /// Whether the operation may leave a transaction open when it is
    /// abandoned (one to roll back before the next).
    fn opens_transaction(op: &Self::Op) -> bool;
}

/// A user's connection to a server.
pub(crate) struct ServerConn<D: DbClient> {
    driver: D,
    max_tries: u32,
    conn: Option<D::Conn>,
    /// A transaction was begun and not seen to end (its operation was
    /// abandoned at a timeout): roll it back before the next one.
    open_transaction: bool,
    /// Wait before the next reconnect attempt after a failed one.
    reconnect_backoff: Duration,
    /// Draws the waits before retries.
    rng: SmallRng,
}

impl<D: DbClient> ServerConn<D> {
    /// Opens the first connection; failing here fails the step's start.
    pub(crate) async fn open(driver: D, max_tries: u32) -> anyhow::Result<Self> {
        let conn = driver.connect().await?;
        Ok(ServerConn {
            driver,
            max_tries,
            conn: Some(conn),
            open_transaction: false,
            reconnect_backoff: Duration::ZERO,
            rng: SmallRng::seed_from_u64(NEXT_SEED.fetch_add(0x9e37_79b9, Ordering::Relaxed)),
        })
    }

    /// The open connection, if any (for tests that look at it).
    #[cfg(test)]
    pub(crate) fn conn(&self) -> Option<&D::Conn> {
        self.conn.as_ref()
    }

    /// Re-opens a lost connection; false (after backing off) if that failed.
    async fn ensure_link(&mut self) -> bool {
        if self.conn.as_ref().is_some_and(|l| !D::is_closed(l)) {
            return true;
        }
        if !self.reconnect_backoff.is_zero() {
            tokio::time::sleep(self.reconnect_backoff).await;
        }
        match self.driver.connect().await {
            Ok(conn) => {
                self.conn = Some(conn);
                self.open_transaction = false;
                self.reconnect_backoff = Duration::ZERO;
                true
            }
            Err(_) => {
                self.conn = None;
                self.reconnect_backoff = (self.reconnect_backoff * 2)
                    .clamp(Duration::from_millis(10), Duration::from_secs(1));
                false
            }
        }
    }
}

impl<D: DbClient> ServerConn<D> {
    /// Runs one operation to its end: reconnecting, rolling back what an
    /// abandoned one left open, retrying what is worth another try.
    pub(crate) async fn execute(&mut self, op: &mut D::Op) -> Outcome {
        if !self.ensure_link().await {
            return Outcome::error(ErrorKind::Connect);
        }
        let Some(conn) = self.conn.as_mut() else {
            return Outcome::error(ErrorKind::Connect);
        };
        D::begin(conn);
        if self.open_transaction {
            if let Err(e) = D::rollback(conn).await {
                // Still no reply within this operation's deadline: a
                // timeout again, on the same connection; anything else
                // and the connection is given up.
                if let Failure::TimedOut = D::classify(&e) {
                    return Outcome::error(ErrorKind::Timeout);
                }
                self.conn = None;
                return Outcome::error(ErrorKind::Connect);
            }
        }
        let mut retries = 0;
        loop {
            self.open_transaction = D::opens_transaction(op);
            let failure = match D::run(conn, op).await {
                Ok(result) => {
                    self.open_transaction = false;
                    return Outcome {
                        result,
                        bytes: 0,
                        retries,
                    };
                }
                Err(e) => match D::classify(&e) {
                    Failure::TimedOut => return Outcome::error(ErrorKind::Timeout),
                    failure => failure,
                },
            };
            let rolled_back = D::rollback(conn).await.is_ok();
            self.open_transaction = !rolled_back;
            let kind = match failure {
                Failure::Retry(_) if retries + 1 < self.max_tries && rolled_back => {
                    retries += 1;
                    tokio::time::sleep(retry_wait(retries, &mut self.rng)).await;
                    continue;
                }
                Failure::Retry(code) | Failure::Sql(code) => ErrorKind::Sql(code),
                Failure::Lost => ErrorKind::Connect,
                Failure::TimedOut => ErrorKind::Timeout,
            };
            if !rolled_back {
                self.conn = None;
            }
            return Outcome {
                result: OpResult::Error(kind),
                bytes: 0,
                retries,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each retry waits under a bound that doubles from 1 ms to 64 ms,
    /// and the waits spread over it (not one fixed wait that keeps two
    /// users in step).
    #[test]
    fn retry_waits_spread_under_a_doubling_bound() {
        let mut rng = SmallRng::seed_from_u64(7);
        for (retry, bound_ms) in [(1, 1), (2, 2), (3, 4), (7, 64), (100, 64)] {
            let waits: Vec<Duration> = (0..200).map(|_| retry_wait(retry, &mut rng)).collect();
            let bound = Duration::from_millis(bound_ms);
            assert!(waits.iter().all(|w| *w < bound), "retry {retry}");
            let longest = waits.iter().max().copied().unwrap_or_default();
            let shortest = waits.iter().min().copied().unwrap_or_default();
            assert!(
                longest > bound / 2 && shortest < bound / 2,
                "retry {retry}: {waits:?}"
            );
        }
    }
}
