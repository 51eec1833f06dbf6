//! Closed-loop users: each runs one operation, thinks, and runs the next.
//! The next operation's intended start is the end of the last plus the think
//! time, so a user that wakes late is charged for it in response time.

use super::state::WorkerState;
use crate::plan::ThinkTime;
use crate::workload::Session;
use rand::rngs::SmallRng;
use rand::Rng;
use std::rc::Rc;
use tokio::time::Instant;

/// The life of one virtual user during a step.
pub(super) async fn user<S: Session>(
    mut session: S,
    state: Rc<WorkerState>,
    think: ThinkTime,
    mut rng: SmallRng,
    start: Instant,
) {
    // Users with think time start spread over one mean think time, not in lockstep.
    let stagger = think.mean().mul_f64(rng.gen::<f64>());
    let mut intended = start + stagger;
    tokio::time::sleep_until(intended).await;
    while !state.stop.get() {
        let ended = state.run_op(&mut session, intended).await;
        let wait = think.sample(&mut rng) + session.pause();
        state.recorder.borrow_mut().record_think(wait);
        intended = ended + wait;
        if wait.is_zero() {
            // Let the ticker and the other users of this thread run.
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep_until(intended).await;
        }
    }
}
