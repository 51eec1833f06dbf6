//! Small helpers below every other module, with no knowledge of perflab's
//! domain: how a `Duration` is written in stored JSON, and how an error
//! chain is folded onto the one line the user sees. Anything here may be
//! imported from anywhere; it imports nothing of the crate.

/// Durations are stored in plans as seconds (f64), the unit of the JSON export.
pub(crate) mod serde_duration {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let seconds = f64::deserialize(d)?;
        Duration::try_from_secs_f64(seconds).map_err(serde::de::Error::custom)
    }

    /// The same for an optional duration (null when absent).
    pub mod option {
        use serde::{Deserialize, Deserializer, Serializer};
        use std::time::Duration;

        pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => s.serialize_some(&d.as_secs_f64()),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
            Option::<f64>::deserialize(d)?
                .map(|seconds| {
                    Duration::try_from_secs_f64(seconds).map_err(serde::de::Error::custom)
                })
                .transpose()
        }
    }
}

/// Folds a message onto one line: every run of whitespace (newlines of a
/// `{:#}` error chain included) becomes one space.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
