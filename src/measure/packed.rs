//! A finished interval's tally as a step keeps it: counts as they are,
//! histograms in HdrHistogram's compressed V2 form (a few hundred bytes
//! where the live histogram holds a dense array of 16 KB or more). A long
//! step keeps hundreds of intervals; packed, its memory no longer grows
//! with its length. Histograms are unpacked only while they are read, one
//! interval at a time, and the store takes the packed bytes as they are.

use super::error_counts::ErrorCounts;
use super::tally::{decode_histogram, encode_histogram, new_histogram, OpTally, Tally};
use hdrhistogram::Histogram;
use std::time::Duration;

/// One operation kind's counts, its histograms packed (in JSON, as
/// base64: how a generator sends its intervals to the coordinator).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PackedOp {
    pub(crate) ok: u64,
    pub(crate) refused: u64,
    pub(crate) errors: ErrorCounts,
    pub(crate) retries: u64,
    pub(crate) bytes: u64,
    /// Service time, µs, packed.
    #[serde(with = "base64_bytes")]
    pub(crate) service: Vec<u8>,
    /// Response time, µs, packed.
    #[serde(with = "base64_bytes")]
    pub(crate) response: Vec<u8>,
    /// Time spent in failed operations (none from a generator or a store
    /// older than the field).
    #[serde(with = "crate::util::serde_duration", default)]
    pub(crate) failed_time: Duration,
}

/// A [`Tally`] with its histograms packed.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PackedTally {
    pub ops: Vec<PackedOp>,
    pub dropped: u64,
    /// The open loop's dispatch lag, µs, packed.
    #[serde(with = "base64_bytes")]
    pub lag: Vec<u8>,
    #[serde(with = "crate::util::serde_duration")]
    pub think_total: Duration,
    pub thinks: u64,
    /// Operations unfinished at the window's end, each one's time so far,
    /// µs, packed (empty from a generator or a store older than the field).
    #[serde(with = "base64_bytes", default)]
    pub unfinished: Vec<u8>,
}

impl PackedTally {
    /// Packs a tally.
    pub(crate) fn pack(tally: &Tally) -> Self {
        PackedTally {
            ops: tally
                .ops
                .iter()
                .map(|op| PackedOp {
                    ok: op.ok,
                    refused: op.refused,
                    errors: op.errors.clone(),
                    retries: op.retries,
                    bytes: op.bytes,
                    service: encode_histogram(&op.service),
                    response: encode_histogram(&op.response),
                    failed_time: op.failed_time,
                })
                .collect(),
            dropped: tally.dropped,
            lag: encode_histogram(&tally.lag),
            think_total: tally.think_total,
            thinks: tally.thinks,
            unfinished: encode_histogram(&tally.unfinished),
        }
    }

    /// The tally, histograms and all.
    pub(crate) fn unpack(&self) -> Tally {
        Tally {
            ops: self
                .ops
                .iter()
                .map(|op| OpTally {
                    ok: op.ok,
                    refused: op.refused,
                    errors: op.errors.clone(),
                    retries: op.retries,
                    bytes: op.bytes,
                    service: unpacked(&op.service),
                    response: unpacked(&op.response),
                    failed_time: op.failed_time,
                })
                .collect(),
            dropped: self.dropped,
            lag: unpacked(&self.lag),
            think_total: self.think_total,
            thinks: self.thinks,
            unfinished: unpacked(&self.unfinished),
            late_errors: 0,
        }
    }

    /// The tally, every histogram checked: for bytes from elsewhere (a
    /// generator), where a damaged one is an error, not an empty one.
    pub(crate) fn unpack_checked(&self) -> anyhow::Result<Tally> {
        let ops = self
            .ops
            .iter()
            .map(|op| {
                Ok(OpTally {
                    ok: op.ok,
                    refused: op.refused,
                    errors: op.errors.clone(),
                    retries: op.retries,
                    bytes: op.bytes,
                    service: decode_histogram(&op.service)?,
                    response: decode_histogram(&op.response)?,
                    failed_time: op.failed_time,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Tally {
            ops,
            dropped: self.dropped,
            lag: decode_histogram(&self.lag)?,
            think_total: self.think_total,
            thinks: self.thinks,
            unfinished: if self.unfinished.is_empty() {
                new_histogram()
            } else {
                decode_histogram(&self.unfinished)?
            },
            late_errors: 0,
        })
    }

    /// All operation kinds folded into one (histograms unpacked for it).
    pub(crate) fn all_ops(&self) -> OpTally {
        self.unpack().all_ops()
    }

    /// Operations served (ok or refused), of every kind, without unpacking.
    pub(crate) fn completed(&self) -> u64 {
        self.ops.iter().map(|op| op.ok + op.refused).sum()
    }
}

impl From<&Tally> for PackedTally {
    fn from(tally: &Tally) -> Self {
        PackedTally::pack(tally)
    }
}

/// Bytes as base64 text in JSON.
mod base64_bytes {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(serde::de::Error::custom)
    }
}

/// A packed histogram, unpacked. The bytes were written by
/// [`encode_histogram`] in this process or checked when read from the
/// store, so they decode; were they ever damaged, the histogram is empty
/// rather than the process stopped.
fn unpacked(bytes: &[u8]) -> Histogram<u64> {
    decode_histogram(bytes).unwrap_or_else(|_| new_histogram())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{ErrorKind, Outcome};

    #[test]
    fn a_packed_tally_unpacks_to_itself_and_is_small() {
        let mut tally = Tally::new(2);
        for i in 0..10_000u64 {
            let op = &mut tally.ops[(i % 2) as usize];
            let outcome = if i % 97 == 0 {
                Outcome::error(ErrorKind::Timeout)
            } else {
                Outcome::ok()
            };
            let service = Duration::from_micros(100 + i * 7 % 40_000);
            op.record(&outcome, service, service * 2);
        }
        tally.dropped = 3;
        tally.thinks = 9;
        tally.record_unfinished(Duration::from_millis(1_500));
        let packed = PackedTally::pack(&tally);
        assert_eq!(packed.unpack(), tally);
        // Through JSON, as a generator sends it, and checked.
        let sent: PackedTally =
            serde_json::from_str(&serde_json::to_string(&packed).unwrap()).unwrap();
        assert_eq!(sent.unpack_checked().unwrap(), tally);
        let mut damaged = sent.clone();
        damaged.ops[0].service.truncate(5);
        assert!(damaged.unpack_checked().is_err());
        assert_eq!(packed.completed(), tally.all_ops().completed());
        assert_eq!(packed.all_ops(), tally.all_ops());
        let bytes: usize = packed
            .ops
            .iter()
            .map(|op| op.service.len() + op.response.len())
            .sum();
        // Live, each of these four histograms holds a dense array of at
        // least 2,048 counts (16 KB).
        assert!(bytes < 16_384, "{bytes} bytes packed");
    }
}
