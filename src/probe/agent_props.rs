//! Property tests of what the coordinator takes from a perflab agent (or
//! anything answering as one): `/v1/snapshot` and `/v1/samples` bodies,
//! arbitrary bytes and a fixture VM's real counters with numbers and
//! names replaced by hostile ones, decoded and cleaned as the client does
//! ([`decode_snapshot`], [`decode_samples`]) and differenced. Nothing
//! panics; every figure shown is finite, at least 0 and at most 2^53;
//! every name is free of control characters and at most 256 characters.

use super::agent_client::{decode_samples, decode_snapshot};
use super::counters::believe::MAX_FIGURE;
use super::counters::untrusted::MAX_NAME;
use super::counters::{HostRoot, HostSample, HostSnapshot};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::path::Path;

/// Inputs each property sees.
const CASES: u32 = 4000;

/// A fixture VM's snapshot at `at` (t0, t1) as an agent's body.
fn fixture_body(at: &str, seconds: f64) -> Value {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/host-vm")
        .join(at);
    let root = HostRoot::Dirs {
        proc: dir.join("proc"),
        sys: dir.join("sys"),
    };
    let snapshot = serde_json::to_value(HostSnapshot::read(&root, &[])).expect("JSON");
    json!({"seconds": seconds, "snapshot": snapshot})
}

/// Every leaf (number or string) of `value`, as JSON pointers, and
/// whether it is a number.
fn leaves(value: &Value, at: String, out: &mut Vec<(String, bool)>) {
    match value {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                leaves(item, format!("{at}/{i}"), out);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                let k = k.replace('~', "~0").replace('/', "~1");
                leaves(item, format!("{at}/{k}"), out);
            }
        }
        Value::Number(_) => out.push((at, true)),
        Value::String(_) => out.push((at, false)),
        Value::Null | Value::Bool(_) => {}
    }
}

/// What a hostile agent puts where a number was: mostly counters it may
/// hold (so the body still decodes), sometimes what it may not.
fn hostile_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => Just(json!(u64::MAX)),
        2 => Just(json!(0)),
        8 => any::<u64>().prop_map(|n| json!(n)),
        6 => (0u64..1 << 20).prop_map(|n| json!(n)),
        1 => Just(json!(-1)),
        1 => Just(json!(1e308)),
        1 => Just(json!(-1e308)),
        1 => Just(json!(5e-324)),
        1 => any::<f64>()
            .prop_filter("JSON numbers are finite", |x| x.is_finite())
            .prop_map(|x| json!(x)),
    ]
}

/// What a hostile agent puts where a name was.
fn hostile_name() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<String>().prop_map(|s| json!(s)),
        "[a-z]{0,4}[\\n\\r\\t\\x1b\\x07\\x00\\u{202e}][a-z ]{0,8}".prop_map(|s| json!(s)),
        (0usize..3000).prop_map(|n| json!("x".repeat(n))),
        Just(json!(1)),
    ]
}

/// `body` with up to 7 of its leaves replaced by hostile ones.
fn mutated(body: Value) -> impl Strategy<Value = Value> {
    let mut paths = Vec::new();
    leaves(&body, String::new(), &mut paths);
    let change = (
        any::<prop::sample::Index>(),
        hostile_number(),
        hostile_name(),
    );
    prop::collection::vec(change, 0..8).prop_map(move |changes| {
        let mut body = body.clone();
        for (index, number, name) in changes {
            let (path, is_number) = index.get(&paths);
            if let Some(slot) = body.pointer_mut(path) {
                *slot = if *is_number { number } else { name };
            }
        }
        body
    })
}

/// Every number finite, in 0..=2^53; every string and key clean.
fn believable(value: &Value, at: &str) -> Result<(), TestCaseError> {
    match value {
        Value::Number(n) => {
            let v = n.as_f64().unwrap_or(f64::NAN);
            prop_assert!((0.0..=MAX_FIGURE).contains(&v), "{}: {}", at, v);
        }
        Value::String(s) => prop_assert!(clean(s), "{}: {:?}", at, s),
        Value::Array(items) => {
            for item in items {
                believable(item, at)?;
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                prop_assert!(clean(k), "{}: key {:?}", at, k);
                believable(item, &format!("{at}.{k}"))?;
            }
        }
        Value::Null | Value::Bool(_) => {}
    }
    Ok(())
}

fn clean(s: &str) -> bool {
    s.chars().count() <= MAX_NAME && !s.chars().any(|c| c.is_control() || c == '\u{202e}')
}

/// A sample is finite (NaN is unequal to itself; an infinity does not
/// survive JSON) and [`believable`].
fn sample_believable(sample: &HostSample) -> Result<(), TestCaseError> {
    prop_assert!(sample == &sample.clone(), "a NaN in {:?}", sample);
    let value = serde_json::to_value(sample).expect("JSON");
    let back: HostSample = serde_json::from_value(value.clone())
        .map_err(|e| TestCaseError::fail(format!("an infinity: {e}")))?;
    prop_assert_eq!(&back, sample);
    believable(&value, "sample")
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_snapshot(&bytes);
        let _ = decode_samples(&bytes);
    }

    #[test]
    fn hostile_snapshots_difference_to_believable_samples(
        a in mutated(fixture_body("t0", 10.0)),
        b in mutated(fixture_body("t1", 11.0)),
    ) {
        let decoded = |v: &Value| decode_snapshot(v.to_string().as_bytes()).ok();
        if let (Some(a), Some(b)) = (decoded(&a), decoded(&b)) {
            let sample = HostSample::between_over(&a.snapshot, &b.snapshot, b.seconds - a.seconds);
            sample_believable(&sample)?;
        }
    }

    #[test]
    fn hostile_samples_decode_to_believable_ones(
        body in mutated(fixture_samples()),
    ) {
        if let Ok(samples) = decode_samples(body.to_string().as_bytes()) {
            for s in samples {
                prop_assert!(clean(&s.at), "{:?}", s.at);
                sample_believable(&s.sample)?;
                if let Some(cpu) = s.sample.cpu {
                    prop_assert!((0.0..=1.0).contains(&cpu.user));
                }
            }
        }
    }
}

/// `/v1/samples` of the fixture VM's one interval.
fn fixture_samples() -> Value {
    let a = decode_snapshot(fixture_body("t0", 10.0).to_string().as_bytes()).expect("t0");
    let b = decode_snapshot(fixture_body("t1", 11.0).to_string().as_bytes()).expect("t1");
    let sample = HostSample::between_over(&a.snapshot, &b.snapshot, 1.0);
    json!({"samples": [{"seq": 1, "at": "2024-01-01T00:00:00Z", "sample": sample}]})
}
