//! Whether a what-if prediction held against a measurement of the change
//! it predicted: within 10% of it, or — further off — an interval no
//! wider than ±15% that meets the measured step's. A lab judges each
//! prediction one variant made of another this way.

use serde::Serialize;

/// Largest error of a prediction, relative to the measurement, that
/// holds whatever its interval.
pub(crate) const WITHIN: f64 = 0.10;

/// Widest relative half-width of an interval that can hold a
/// measurement a prediction missed by more than [`WITHIN`].
pub(crate) const NARROW: f64 = 0.15;

/// How a prediction fared against a measurement of the change it
/// predicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Held {
    /// Within [`WITHIN`] of the measured throughput.
    Within,
    /// Further off, but its interval, no wider than [`NARROW`], overlaps
    /// the measured step's: the difference is within the noise.
    Interval,
    /// Further off, and its interval is wider than [`NARROW`]: too rough
    /// to say it held.
    Rough,
    /// Further off, and the intervals do not meet.
    Missed,
    /// A floor the measurement is above (or within 10% below).
    Floor,
}

impl Held {
    /// In words, for a table's cell.
    pub(crate) fn words(self) -> &'static str {
        match self {
            Held::Within => "yes, within 10%",
            Held::Interval => "yes, the intervals meet",
            Held::Rough => "no, its interval is over ±15%",
            Held::Missed => "no",
            Held::Floor => "a floor: the measurement is above it",
        }
    }
}

/// A prediction of `predicted` with its interval, against the
/// `measured` throughput with the measured step's interval.
pub(crate) fn judge(
    predicted: f64,
    interval: Option<[f64; 2]>,
    measured: f64,
    measured_interval: Option<[f64; 2]>,
) -> Held {
    if predicted > 0.0 && (measured / predicted - 1.0).abs() <= WITHIN {
        return Held::Within;
    }
    let Some([lo, hi]) = interval else {
        return Held::Missed;
    };
    if predicted <= 0.0 || (hi - lo) / 2.0 > NARROW * predicted {
        return Held::Rough;
    }
    let [mlo, mhi] = measured_interval.unwrap_or([measured, measured]);
    if lo <= mhi && mlo <= hi {
        Held::Interval
    } else {
        Held::Missed
    }
}

/// A floor of `predicted` against the `measured` throughput: held when
/// the measurement, or its interval's top, is no more than [`WITHIN`]
/// below it.
pub(crate) fn judge_floor(
    predicted: f64,
    measured: f64,
    measured_interval: Option<[f64; 2]>,
) -> Held {
    let top = measured_interval.map_or(measured, |[_, hi]| hi.max(measured));
    if top >= predicted * (1.0 - WITHIN) {
        Held::Floor
    } else {
        Held::Missed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Within 10% holds whatever the interval; beyond, an interval no
    /// wider than ±15% holds when it meets the measured one, and a wider
    /// one never does.
    #[test]
    fn a_prediction_is_judged_by_its_error_then_its_interval() {
        assert_eq!(judge(100.0, None, 109.0, None), Held::Within);
        assert_eq!(judge(100.0, None, 85.0, None), Held::Missed);
        let narrow = Some([88.0, 112.0]);
        assert_eq!(
            judge(100.0, narrow, 115.0, Some([110.0, 120.0])),
            Held::Interval
        );
        assert_eq!(
            judge(100.0, narrow, 115.0, Some([113.0, 117.0])),
            Held::Missed
        );
        assert_eq!(judge(100.0, narrow, 111.5, None), Held::Interval);
        assert_eq!(
            judge(100.0, Some([80.0, 120.0]), 115.0, Some([110.0, 120.0])),
            Held::Rough
        );
    }

    /// A floor holds where the measurement reaches it, or comes within
    /// 10% under it.
    #[test]
    fn a_floor_holds_when_the_measurement_is_above_it() {
        assert_eq!(judge_floor(100.0, 300.0, None), Held::Floor);
        assert_eq!(judge_floor(100.0, 85.0, Some([80.0, 92.0])), Held::Floor);
        assert_eq!(judge_floor(100.0, 85.0, Some([80.0, 88.0])), Held::Missed);
    }
}
