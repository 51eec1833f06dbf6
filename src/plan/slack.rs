//! The open loop's slack: how far from its intended time the pacer may
//! send an arrival so that it sends several from one wake-up.
//!
//! A wake-up of the pacer is a sleep and a context switch (in a virtual
//! machine, a timer programmed through the hypervisor too); at tens of
//! thousands of arrivals a second, one per arrival costs more CPU than the
//! requests themselves. With a window `w`, the pacer wakes at the first
//! waiting arrival's time and sends it with every arrival due within `w`
//! after it: none goes out late (but by the timer's own latency, as with
//! exact pacing, shown in the `lag` column), each up to `w` early. One sent
//! early counts its response time from when it went out, so that the
//! batching adds nothing to any response time; the server sees the
//! arrivals of each window together, up to `w` ahead of their times.
//!
//! `auto`, the default, keeps exact pacing (a window of 0) until a worker's
//! share of the rate passes [`AUTO_WAKEUPS`] arrivals a second, and from
//! there widens the window just enough that the pacer wakes about that
//! many times a second: with arrivals at rate `r` and a window `w`, a
//! wake-up sends `1 + r·w` of them on average, so `w = 1/W − 1/r`.

use crate::units::{format_duration, parse_duration};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::time::Duration;

/// The most an open loop's pacer may send an arrival ahead of its time
/// (`--slack`): beyond it the batches would be a load pattern of their
/// own (bursts), not a saving.
pub(crate) const MAX_SLACK: Duration = Duration::from_millis(10);

/// The wake-ups per second per worker thread that `auto` allows the
/// pacer: on a 2-CPU virtual machine a wake-up costs about 10–15 µs of
/// CPU, so 1,000 of them take 1–2 % of a core. The window it asks for
/// stays under 1 ms, the tick a tokio timer paces at (oha's). 2,000
/// (windows under 500 µs) cost 1.11 of oha's CPU per request at
/// 20,000/s against nginx; 1,000 cost 0.72.
pub(crate) const AUTO_WAKEUPS: f64 = 1_000.0;

/// The window within which the pacer sends arrivals together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Slack {
    /// Exact up to [`AUTO_WAKEUPS`] arrivals a second per worker, batched
    /// above it.
    Auto,
    /// A window of this width at every rate (0: a wake-up per arrival).
    Fixed(Duration),
}

impl Slack {
    /// Parses `auto` or a duration (`0`, `500us`, `1ms`), at most
    /// [`MAX_SLACK`].
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        if text.trim().eq_ignore_ascii_case("auto") {
            return Ok(Slack::Auto);
        }
        let window = parse_duration(text).map_err(|e| format!("{e}, or auto"))?;
        if window > MAX_SLACK {
            return Err(format!(
                "a slack of {} would send arrivals in bursts; give at most {}, or auto",
                format_duration(window),
                format_duration(MAX_SLACK)
            ));
        }
        Ok(Slack::Fixed(window))
    }

    /// The window for a worker whose share of the arrivals is `rate` a second.
    pub(crate) fn window(self, rate: f64) -> Duration {
        match self {
            Slack::Fixed(window) => window,
            Slack::Auto if rate > AUTO_WAKEUPS && rate.is_finite() => {
                Duration::from_secs_f64(1.0 / AUTO_WAKEUPS - 1.0 / rate).min(MAX_SLACK)
            }
            Slack::Auto => Duration::ZERO,
        }
    }

    /// Whether the window is within bounds (a plan read from outside).
    pub(crate) fn check(self) -> Result<(), String> {
        match self {
            Slack::Fixed(window) if window > MAX_SLACK => Err(format!(
                "load.slack is {}; give at most {}, or \"auto\"",
                format_duration(window),
                format_duration(MAX_SLACK)
            )),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for Slack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Slack::Auto => write!(f, "auto"),
            Slack::Fixed(window) => write!(f, "{}", format_duration(*window)),
        }
    }
}

/// Stored as `"auto"` or as the window in seconds, the form runs stored
/// before `auto` existed have.
impl Serialize for Slack {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Slack::Auto => s.serialize_str("auto"),
            Slack::Fixed(window) => s.serialize_f64(window.as_secs_f64()),
        }
    }
}

impl<'de> Deserialize<'de> for Slack {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Stored {
            Seconds(f64),
            Word(String),
        }
        match Stored::deserialize(d)? {
            Stored::Seconds(seconds) => Duration::try_from_secs_f64(seconds)
                .map(Slack::Fixed)
                .map_err(serde::de::Error::custom),
            Stored::Word(word) if word == "auto" => Ok(Slack::Auto),
            Stored::Word(word) => Err(serde::de::Error::custom(format!(
                "slack is \"{word}\"; give seconds or \"auto\""
            ))),
        }
    }
}

/// Runs stored before the slack existed woke for every arrival.
impl Default for Slack {
    fn default() -> Self {
        Slack::Fixed(Duration::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `auto` is exact up to the wake-up budget and, above it, wide enough
    /// that a wake-up sends `r / W` arrivals on average; a fixed window is
    /// the same at every rate.
    #[test]
    fn auto_widens_the_window_only_past_the_wakeup_budget() {
        assert_eq!(Slack::Auto.window(0.001), Duration::ZERO);
        assert_eq!(Slack::Auto.window(AUTO_WAKEUPS), Duration::ZERO);
        let w = Slack::Auto.window(10_000.0).as_secs_f64();
        assert!((w - (1.0 / AUTO_WAKEUPS - 1e-4)).abs() < 1e-9, "{w}");
        // Wake-ups a second: r / (1 + r·w) = W.
        assert!((10_000.0 / (1.0 + 10_000.0 * w) - AUTO_WAKEUPS).abs() < 1e-6);
        assert!(Slack::Auto.window(1e7) < Duration::from_secs_f64(1.0 / AUTO_WAKEUPS));
        assert_eq!(Slack::Auto.window(f64::INFINITY), Duration::ZERO);
        assert_eq!(Slack::Auto.window(f64::NAN), Duration::ZERO);
        let fixed = Slack::Fixed(Duration::from_micros(300));
        assert_eq!(fixed.window(1.0), fixed.window(1e6));
    }

    /// The flag takes `auto` or a duration up to the bound; anything else is
    /// one line that says what to give.
    #[test]
    fn the_flag_takes_auto_or_a_bounded_duration() {
        assert_eq!(Slack::parse("auto"), Ok(Slack::Auto));
        assert_eq!(Slack::parse("0"), Ok(Slack::Fixed(Duration::ZERO)));
        assert_eq!(
            Slack::parse("500us"),
            Ok(Slack::Fixed(Duration::from_micros(500)))
        );
        let e = Slack::parse("1s").unwrap_err();
        assert!(e.contains("at most 10ms"), "{e}");
        let e = Slack::parse("soon").unwrap_err();
        assert!(e.contains("auto"), "{e}");
        assert!(Slack::Fixed(Duration::from_secs(1)).check().is_err());
        assert!(Slack::Auto.check().is_ok());
    }

    /// Stored as seconds or "auto"; a run stored before either reads as a
    /// wake-up per arrival, and a word that is neither is refused.
    #[test]
    fn the_stored_form_reads_back_and_old_runs_read_as_exact() {
        for slack in [Slack::Auto, Slack::Fixed(Duration::from_micros(250))] {
            let text = serde_json::to_string(&slack).unwrap();
            assert_eq!(serde_json::from_str::<Slack>(&text).unwrap(), slack);
        }
        assert_eq!(
            serde_json::from_str::<Slack>("0.0").unwrap(),
            Slack::Fixed(Duration::ZERO)
        );
        assert!(serde_json::from_str::<Slack>("\"later\"").is_err());
        assert!(serde_json::from_str::<Slack>("-1.0").is_err());
        assert_eq!(Slack::default(), Slack::Fixed(Duration::ZERO));
    }
}
