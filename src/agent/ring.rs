//! The agent's recent samples: a bounded queue numbered from 1, so a client
//! asks for what came after the last number it saw.

use crate::probe::agent_client::StampedSample;
use crate::probe::counters::HostSample;
use std::collections::VecDeque;

/// Samples kept (ten minutes at 1 Hz).
const CAPACITY: usize = 600;

/// The recent samples.
#[derive(Debug, Default)]
pub(crate) struct Ring {
    samples: VecDeque<StampedSample>,
    last: u64,
}

impl Ring {
    /// Adds a sample, dropping the oldest beyond capacity.
    pub(crate) fn push(&mut self, at: String, sample: HostSample) {
        self.last += 1;
        self.samples.push_back(StampedSample {
            seq: self.last,
            at,
            sample,
        });
        while self.samples.len() > CAPACITY {
            self.samples.pop_front();
        }
    }

    /// Every sample numbered above `since`.
    pub(crate) fn since(&self, since: u64) -> Vec<StampedSample> {
        self.samples
            .iter()
            .filter(|s| s.seq > since)
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_get_what_came_after_their_last_number() {
        let mut ring = Ring::default();
        for i in 0..700 {
            ring.push(format!("t{i}"), HostSample::default());
        }
        assert_eq!(ring.since(0).len(), CAPACITY);
        let tail = ring.since(698);
        assert_eq!(tail.len(), 2);
        assert_eq!(tail[1].seq, 700);
        assert!(ring.since(700).is_empty());
    }
}
