//! [`Tally`]: the counts and histograms of one interval (or of any merge of
//! intervals). Latencies are recorded in microseconds in HdrHistograms with
//! three significant figures; histograms are encoded with the standard
//! HdrHistogram V2 compressed format so other HdrHistogram tools can read them.

use super::error_counts::ErrorCounts;
use super::outcome::{OpResult, Outcome};
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use std::time::Duration;

/// Where in a step an interval lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Before the measured window: discarded from results.
    Warmup,
    /// The measured window.
    Measured,
    /// Operations that completed after the window closed: kept only so that
    /// every operation the target saw is accounted for (the bank check).
    Drain,
}

impl Phase {
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            Phase::Warmup => "warmup",
            Phase::Measured => "measured",
            Phase::Drain => "drain",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "warmup" => Some(Phase::Warmup),
            "measured" => Some(Phase::Measured),
            "drain" => Some(Phase::Drain),
            _ => None,
        }
    }
}

/// A new latency histogram: microseconds, three significant figures,
/// growing as larger values arrive.
pub fn new_histogram() -> Histogram<u64> {
    let mut h = Histogram::new(3).expect("3 significant figures is a valid precision");
    h.auto(true);
    h
}

/// Encodes a histogram in HdrHistogram's V2 compressed format.
pub fn encode_histogram(h: &Histogram<u64>) -> Vec<u8> {
    let mut out = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut out)
        .expect("serialising into memory does not fail");
    out
}

/// The V2 compressed format's cookie (for 8-byte counts), and the cookie
/// of the V2 form inside its deflate stream.
const V2_DEFLATE_COOKIE: u32 = 0x1c84_9314;
const V2_COOKIE: u32 = 0x1c84_9313;
/// The V2 header: cookie, payload length, normalising offset, significant
/// figures (4 bytes each), lowest and highest value, integer-to-double
/// ratio (8 bytes each).
const V2_HEADER: usize = 40;
/// The most counts a histogram of [`new_histogram`]'s precision holds,
/// grown to every `u64` (55 buckets of 1,024 sub-buckets), each at most
/// a 9-byte varint: no payload perflab writes is longer.
const MAX_PAYLOAD: usize = 55 * 1_024 * 9;

/// Decodes a histogram written by [`encode_histogram`]. The bytes may come
/// from a peer or a damaged store, so the header is checked first: only
/// the precision and range perflab itself writes (3 significant figures,
/// lowest value 1, a payload no longer than such a histogram's) are
/// decoded; another header would make hdrhistogram allocate whatever it
/// asks for (100 MB and more).
pub fn decode_histogram(bytes: &[u8]) -> anyhow::Result<Histogram<u64>> {
    let inner = inflate_v2(bytes)?;
    check_v2_header(&inner)?;
    let mut h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut &inner[..])
        .map_err(|e| anyhow::anyhow!("damaged histogram: {e:?}"))?;
    h.auto(true);
    Ok(h)
}

/// The V2 form inside a V2 compressed histogram, inflated no further than
/// the longest histogram perflab writes (one byte more, to tell a longer
/// one).
fn inflate_v2(bytes: &[u8]) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    let word = |at: usize| {
        bytes
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_be_bytes)
    };
    if word(0) != Some(V2_DEFLATE_COOKIE) {
        anyhow::bail!("damaged histogram: not in HdrHistogram's V2 compressed format");
    }
    let length = word(4).and_then(|n| usize::try_from(n).ok()).unwrap_or(0);
    let deflated = bytes.get(8..).unwrap_or_default();
    let deflated = deflated.get(..length).unwrap_or(deflated);
    let limit = u64::try_from(V2_HEADER + MAX_PAYLOAD + 1).unwrap_or(u64::MAX);
    let mut inner = Vec::new();
    flate2::read::ZlibDecoder::new(deflated)
        .take(limit)
        .read_to_end(&mut inner)
        .map_err(|e| anyhow::anyhow!("damaged histogram: {e}"))?;
    Ok(inner)
}

/// Refuses a V2 header perflab would not have written.
fn check_v2_header(inner: &[u8]) -> anyhow::Result<()> {
    let field = |at: usize, len: usize| -> u64 {
        inner
            .get(at..at + len)
            .map_or(0, |b| b.iter().fold(0, |n, &byte| n << 8 | u64::from(byte)))
    };
    if inner.len() < V2_HEADER || field(0, 4) != u64::from(V2_COOKIE) {
        anyhow::bail!("damaged histogram: its header is cut short or not HdrHistogram's V2");
    }
    let payload = field(4, 4);
    let figures = field(12, 4);
    let lowest = field(16, 8);
    if figures != 3 {
        anyhow::bail!(
            "a histogram of {figures} significant figures; perflab writes 3 (the sender is not \
             perflab or the bytes are damaged)"
        );
    }
    if lowest != 1 {
        anyhow::bail!(
            "a histogram whose lowest value is {lowest}; perflab writes 1 (the sender is not \
             perflab or the bytes are damaged)"
        );
    }
    let longest = u64::try_from(MAX_PAYLOAD).unwrap_or(u64::MAX);
    let holds = u64::try_from(inner.len() - V2_HEADER).unwrap_or(u64::MAX);
    if payload > longest || payload > holds {
        anyhow::bail!(
            "a histogram that says its counts take {payload} bytes, where it holds {holds} and \
             perflab writes at most {longest} (the sender is not perflab or the bytes are damaged)"
        );
    }
    Ok(())
}

/// Counts and latency histograms of one kind of operation.
#[derive(Debug, Clone, PartialEq)]
pub struct OpTally {
    /// Operations done as asked.
    pub ok: u64,
    /// Operations declined for a business reason.
    pub(crate) refused: u64,
    /// Failed operations by kind (`timeout`, `busy`, `sql:…`).
    pub errors: ErrorCounts,
    /// Retries spent (busy, serialisation failures), over all outcomes.
    pub retries: u64,
    /// Payload bytes.
    pub bytes: u64,
    /// Service time (start of the call → reply), µs, of ok and refused operations.
    pub service: Histogram<u64>,
    /// Response time (intended start → reply), µs, of ok and refused operations.
    pub response: Histogram<u64>,
    /// Time users spent in operations that failed, summed, each from its
    /// intended start to its end (every try and the waits between them):
    /// failed operations keep no latency, but their users' time counts
    /// for Little's law.
    pub(crate) failed_time: Duration,
}

impl Default for OpTally {
    fn default() -> Self {
        OpTally {
            ok: 0,
            refused: 0,
            errors: ErrorCounts::default(),
            retries: 0,
            bytes: 0,
            service: new_histogram(),
            response: new_histogram(),
            failed_time: Duration::ZERO,
        }
    }
}

impl OpTally {
    /// Operations that were served (ok or refused).
    pub(crate) fn completed(&self) -> u64 {
        self.ok + self.refused
    }

    /// Failed operations of every kind.
    pub(crate) fn error_count(&self) -> u64 {
        self.errors.total()
    }

    pub(crate) fn record(&mut self, outcome: &Outcome, service: Duration, response: Duration) {
        self.retries += u64::from(outcome.retries);
        self.bytes += outcome.bytes;
        match outcome.result {
            OpResult::Ok => self.ok += 1,
            OpResult::Refused => self.refused += 1,
            OpResult::Error(kind) => {
                self.errors.record(kind);
                self.failed_time += response;
                return;
            }
        }
        record(&mut self.service, micros(service));
        record(&mut self.response, micros(response));
    }

    /// Adds another tally of the same operation.
    pub(crate) fn merge(&mut self, other: &OpTally) {
        self.ok += other.ok;
        self.refused += other.refused;
        self.errors.merge(&other.errors);
        self.retries += other.retries;
        self.bytes += other.bytes;
        self.failed_time += other.failed_time;
        add(&mut self.service, &other.service);
        add(&mut self.response, &other.response);
    }
}

/// Records a value, growing the histogram as needed; only a value beyond
/// what any histogram can hold is clamped.
pub(crate) fn record(h: &mut Histogram<u64>, value: u64) {
    if h.record(value).is_err() {
        h.saturating_record(value);
    }
}

/// Adds one histogram into another. Auto-resizing histograms take any
/// value; should a damaged stored histogram hold one beyond every range, its
/// values are clamped rather than lost or allowed to panic.
fn add(into: &mut Histogram<u64>, other: &Histogram<u64>) {
    if into.add(other).is_err() {
        for v in other.iter_recorded() {
            into.saturating_record_n(v.value_iterated_to(), v.count_at_value());
        }
    }
}

/// Microseconds, the unit of every latency histogram.
pub(crate) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// A tally's counts: operations served, failed, and (open loop) dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TallyCounts {
    pub(crate) completed: u64,
    pub(crate) errors: u64,
    pub(crate) dropped: u64,
}

/// Everything recorded over some span of time, for every operation kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Tally {
    /// One entry per operation kind, in the workload's order.
    pub ops: Vec<OpTally>,
    /// Open loop: arrivals not sent because too many operations were outstanding.
    pub(crate) dropped: u64,
    /// Open loop: how late the generator dispatched each arrival, µs.
    pub(crate) lag: Histogram<u64>,
    /// Closed loop: total think time drawn.
    pub(crate) think_total: Duration,
    /// Closed loop: number of think times drawn.
    pub(crate) thinks: u64,
    /// Operations still running (or, in an open loop, waiting for a
    /// session) when the worker handed this interval over as its last:
    /// each one's time from its intended start to then, µs — a lower
    /// bound of its response time. They belong to the step (an operation
    /// in flight when the window ends is the window's), in its latency,
    /// never in its throughput.
    pub(crate) unfinished: Histogram<u64>,
    /// Of the unfinished, how many ended in error after the window (their
    /// errors are in `ops`): set only on a step's merged tally, by
    /// [`Tally::absorb_late`].
    pub(crate) late_errors: u64,
}

impl Tally {
    /// An empty tally for `op_count` kinds of operation.
    pub fn new(op_count: usize) -> Self {
        Tally {
            ops: (0..op_count).map(|_| OpTally::default()).collect(),
            dropped: 0,
            lag: new_histogram(),
            think_total: Duration::ZERO,
            thinks: 0,
            unfinished: new_histogram(),
            late_errors: 0,
        }
    }

    /// Adds another tally recorded for the same operation kinds.
    pub(crate) fn merge(&mut self, other: &Tally) {
        if self.ops.len() < other.ops.len() {
            self.ops.resize_with(other.ops.len(), OpTally::default);
        }
        for (mine, theirs) in self.ops.iter_mut().zip(&other.ops) {
            mine.merge(theirs);
        }
        self.dropped += other.dropped;
        add(&mut self.lag, &other.lag);
        self.think_total += other.think_total;
        self.thinks += other.thinks;
        add(&mut self.unfinished, &other.unfinished);
        self.late_errors += other.late_errors;
    }

    /// Counts one operation still in flight (or queued) at the end of the
    /// window, in flight for `so_far` from its intended start.
    pub(crate) fn record_unfinished(&mut self, so_far: Duration) {
        record(&mut self.unfinished, micros(so_far));
    }

    /// Takes into a step's merged window the errors of `after`, what ended
    /// after the window: every operation there was in flight when the
    /// window ended (no operation starts after it), so its failure —
    /// a timeout in the drain above all — is the step's own.
    pub(crate) fn absorb_late(&mut self, after: &Tally) {
        for (mine, theirs) in self.ops.iter_mut().zip(&after.ops) {
            mine.errors.merge(&theirs.errors);
            self.late_errors += theirs.error_count();
        }
    }

    /// The response times of every operation kind, with the unfinished
    /// operations' times so far: the step's latency.
    pub(crate) fn response(&self) -> Histogram<u64> {
        let mut all = self.all_ops().response;
        add(&mut all, &self.unfinished);
        all
    }

    /// Its counts, every operation kind together, without its histograms.
    pub(crate) fn counts(&self) -> TallyCounts {
        TallyCounts {
            completed: self.ops.iter().map(OpTally::completed).sum(),
            errors: self.ops.iter().map(OpTally::error_count).sum(),
            dropped: self.dropped,
        }
    }

    /// All operation kinds folded into one.
    pub(crate) fn all_ops(&self) -> OpTally {
        let mut all = OpTally::default();
        for op in &self.ops {
            all.merge(op);
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::ErrorKind;

    #[test]
    fn merging_adds_counts_and_histograms() {
        let mut a = Tally::new(2);
        let mut b = Tally::new(2);
        a.ops[0].record(
            &Outcome::ok(),
            Duration::from_millis(1),
            Duration::from_millis(2),
        );
        b.ops[0].record(
            &Outcome::ok(),
            Duration::from_millis(3),
            Duration::from_millis(4),
        );
        b.ops[1].record(
            &Outcome::error(ErrorKind::Timeout),
            Duration::from_secs(30),
            Duration::from_secs(30),
        );
        a.merge(&b);
        assert_eq!(a.ops[0].ok, 2);
        assert_eq!(a.ops[0].response.len(), 2);
        assert_eq!(a.ops[1].errors.count(ErrorKind::Timeout), 1);
        assert_eq!(a.ops[1].response.len(), 0, "errors stay out of latency");
        assert_eq!(a.all_ops().ok, 2);
    }

    #[test]
    fn large_values_grow_the_histogram_instead_of_clamping() {
        let mut op = OpTally::default();
        op.record(
            &Outcome::ok(),
            Duration::from_secs(5),
            Duration::from_secs(7),
        );
        assert_eq!(op.response.max(), op.response.highest_equivalent(7_000_000));
        assert!(op.service.max() >= 4_990_000);
    }

    #[test]
    fn histograms_survive_encoding() {
        let mut h = new_histogram();
        for v in [1u64, 10, 100, 1_000, 1_000_000] {
            h.record(v).unwrap();
        }
        let back = decode_histogram(&encode_histogram(&h)).unwrap();
        assert_eq!(back.len(), 5);
        assert_eq!(back.max(), h.max());
        assert!(decode_histogram(b"garbage").is_err());
    }

    /// A V2 compressed histogram with the header given and `payload` bytes
    /// of counts (not all there): what a hostile peer can send.
    fn crafted(figures: u32, lowest: u64, highest: u64, payload: u32) -> Vec<u8> {
        use std::io::Write;
        let mut inner = Vec::new();
        inner.extend(V2_COOKIE.to_be_bytes());
        inner.extend(payload.to_be_bytes());
        inner.extend(0u32.to_be_bytes());
        inner.extend(figures.to_be_bytes());
        inner.extend(lowest.to_be_bytes());
        inner.extend(highest.to_be_bytes());
        inner.extend(1.0f64.to_be_bytes());
        inner.extend([2u8; 16]);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&inner).unwrap();
        let deflated = z.finish().unwrap();
        let mut out = V2_DEFLATE_COOKIE.to_be_bytes().to_vec();
        out.extend(u32::try_from(deflated.len()).unwrap().to_be_bytes());
        out.extend(deflated);
        out
    }

    #[test]
    fn a_histogram_perflab_would_not_write_is_refused_before_it_is_allocated() {
        for (bytes, says) in [
            (
                crafted(5, 1, u64::MAX, 16),
                "of 5 significant figures; perflab writes 3",
            ),
            (
                crafted(3, 1_000, u64::MAX, 16),
                "lowest value is 1000; perflab writes 1",
            ),
            (crafted(3, 1, u64::MAX, 100_000_000), "take 100000000 bytes"),
            (
                crafted(3, 1, u64::MAX, 17),
                "take 17 bytes, where it holds 16",
            ),
        ] {
            let e = decode_histogram(&bytes).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn the_longest_histogram_perflab_writes_decodes() {
        let widest = Histogram::<u64>::new_with_bounds(1, u64::MAX, 3).unwrap();
        assert_eq!(widest.distinct_values() * 9, MAX_PAYLOAD);
        let mut h = new_histogram();
        for shift in 0..64 {
            record(&mut h, 1u64 << shift);
        }
        record(&mut h, u64::MAX);
        let back = decode_histogram(&encode_histogram(&h)).unwrap();
        assert_eq!(back.len(), 65);
    }
}
