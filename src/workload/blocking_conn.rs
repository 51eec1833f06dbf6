//! A connection whose calls block (SQLite's), as a session the engine can
//! await: a user with its worker thread to itself calls it right there;
//! users that share a worker each keep theirs on a thread of its own and
//! talk to it over a channel, so that one user's blocking call delays no
//! other. The connection is made on the thread that uses it (SQLite's
//! prepared statements stay on the thread that prepared them). A
//! [`Blocking`] runs one operation to its end, retries included, by its
//! deadline.

use super::Seat;
use crate::measure::{ErrorKind, Outcome};
use anyhow::Context;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// A connection that runs one operation at a time, blocking.
pub(crate) trait Blocking: 'static {
    /// What one operation is told.
    type Op: Send + 'static;

    /// Runs `op` to its end (commit, refusal or error), giving up on
    /// retries by `deadline`.
    fn run(&mut self, op: Self::Op, deadline: Instant) -> Outcome;
}

/// One operation sent to a connection's thread.
struct Job<Op> {
    op: Op,
    started: Instant,
    reply: oneshot::Sender<Outcome>,
}

/// A user's blocking connection.
pub(crate) enum BlockingConn<B: Blocking> {
    /// Called on the user's own worker thread, each operation allowed this long.
    Inline(Box<B>, Duration),
    /// On a thread of its own.
    Threaded(Threaded<B::Op>),
}

/// A channel to the thread that owns a connection.
pub(crate) struct Threaded<Op> {
    jobs: Option<mpsc::Sender<Job<Op>>>,
    thread: Option<JoinHandle<()>>,
}

impl<B: Blocking> BlockingConn<B> {
    /// Makes the connection with `make`, where `seat` says it runs: right
    /// here, or on a new thread called `name`.
    pub(crate) fn open(
        seat: Seat,
        name: &str,
        make: impl FnOnce() -> anyhow::Result<B> + Send + 'static,
    ) -> anyhow::Result<Self> {
        let timeout = seat.timeout;
        if seat.alone {
            return Ok(BlockingConn::Inline(Box::new(make()?), timeout));
        }
        let (ready, made) = mpsc::sync_channel(1);
        let (jobs, inbox) = mpsc::channel::<Job<B::Op>>();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let mut conn = match make() {
                    Ok(conn) => {
                        let _ = ready.send(Ok(()));
                        conn
                    }
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                for job in inbox {
                    let outcome = conn.run(job.op, job.started + timeout);
                    let _ = job.reply.send(outcome);
                }
            })
            .with_context(|| format!("cannot start a thread for a connection ({name})"))?;
        made.recv()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the connection's thread ended")))?;
        Ok(BlockingConn::Threaded(Threaded {
            jobs: Some(jobs),
            thread: Some(thread),
        }))
    }

    /// Runs one operation.
    pub(crate) async fn execute(&mut self, op: B::Op) -> Outcome {
        let threaded = match self {
            BlockingConn::Inline(conn, timeout) => {
                let deadline = Instant::now() + *timeout;
                return conn.run(op, deadline);
            }
            BlockingConn::Threaded(threaded) => threaded,
        };
        let (reply, answer) = oneshot::channel();
        let job = Job {
            op,
            started: Instant::now(),
            reply,
        };
        let sent = threaded.jobs.as_ref().is_some_and(|j| j.send(job).is_ok());
        if !sent {
            return Outcome::error(ErrorKind::Connect);
        }
        answer
            .await
            .unwrap_or_else(|_| Outcome::error(ErrorKind::Connect))
    }
}

impl<Op> Drop for Threaded<Op> {
    fn drop(&mut self) {
        // Close the channel, then wait for the thread to finish its last
        // operation, so that nothing writes after the step has ended.
        self.jobs.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
