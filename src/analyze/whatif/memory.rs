//! The what-ifs of more or less memory: the server's reads from storage
//! as a queueing centre whose demand is the pages the cache misses per
//! operation over what the read limit lets through
//! ([`crate::analyze::memory`] says how many it misses).

use super::{Centre, Change, Changed};
use crate::analyze::memory::{Memory, Reads};
use crate::analyze::points::ResourceKind;
use crate::units::Bytes;
/// The centre of `missed` pages per operation.
fn centre(r: &Reads, missed: f64) -> Option<Centre> {
    (missed > 0.0).then(|| Centre {
        name: r.name.clone(),
        kind: ResourceKind::Disk,
        servers: 1.0,
        demand_s: missed / r.pages_per_s,
    })
}

/// The centre as the run measured it: none when it read nothing.
pub(super) fn centre_now(r: &Reads) -> Option<Centre> {
    centre(r, r.cache.missed)
}

/// The changes of memory to predict, each with the network after it
/// (`centres` with the reads the cache then misses) and at the ends of
/// the cache's range; `body_s` is the lowest load's median response.
pub(super) fn changes(
    r: &Reads,
    centres: &[Centre],
    memory: Option<Memory>,
    body_s: f64,
) -> Vec<Change> {
    let others: Vec<Centre> = centres
        .iter()
        .filter(|c| c.name != r.name)
        .cloned()
        .collect();
    let with =
        |missed: f64| -> Vec<Centre> { others.iter().cloned().chain(centre(r, missed)).collect() };
    let c = &r.cache;
    c.sizes(memory)
        .into_iter()
        .filter(|m| (m - c.limit_bytes).abs() > 0.5 * c.page_bytes)
        .filter_map(|m| {
            let [missed, fewest, most] = c.missed_at(m)?;
            let none = missed < 0.005;
            let reads = if none {
                "none of its pages from storage".to_string()
            } else {
                format!("{missed:.2} pages per operation from storage")
            };
            let what = if c.pool {
                "a buffer pool (innodb_buffer_pool_size)"
            } else {
                "a memory limit"
            };
            let words = format!(
                "{what} of {} in place of {}: the cache reads {reads}, where it read {:.2}",
                Bytes(m as u64),
                Bytes(c.limit_bytes as u64),
                c.missed
            );
            let factor = (missed > 0.0 && c.missed > 0.0).then(|| c.missed / missed);
            Some(Change {
                words,
                after: with(missed),
                server_cpus: None,
                // A lab's memory axis is a cgroup's limit, not a pool.
                server_memory: (!c.pool).then_some(m),
                changed: Changed {
                    kind: ResourceKind::Disk,
                    factor,
                },
                ends: (fewest < most).then(|| [with(fewest), with(most)]),
                sharing: 0.0,
                moved_s: 0.0,
                idle_floor: true,
                read_free_s: if none { body_s } else { 0.0 },
            })
        })
        .collect()
}
