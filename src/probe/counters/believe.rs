//! What a counter read from outside may be believed to say: the largest
//! figure, the fastest growth, the longest interval, and the differencing
//! that takes a counter going backwards or leaping for a reset. A leaf that
//! every reader of counters uses ([`super::untrusted`] cleans what an
//! agent sends with it).

/// The largest figure believed, rate or count or size: 2^53, the largest
/// integer an f64 holds exactly. No host's bytes, operations or events per
/// second come within orders of magnitude of it.
pub(crate) const MAX_FIGURE: f64 = 9_007_199_254_740_992.0;

/// The fastest a counter is believed to grow, per second; a faster leap
/// is a reset or a lie, and counts as no increase. A terabyte per second
/// is beyond any host's memory bandwidth today, a thousand times over for
/// its disks and links.
pub(crate) const MAX_RATE: f64 = 1e15;

/// The longest interval believed between two snapshots, seconds (11 days):
/// a rate over a longer one is no rate a lab reads.
pub(crate) const MAX_INTERVAL: f64 = 1e6;

/// The increase of a counter from `x` to `y` over `seconds`: none when it
/// went backwards (a reset), when it leapt faster than [`MAX_RATE`] or
/// beyond [`MAX_FIGURE`] (a reset or a lie), or over no interval.
pub(crate) fn increase(x: u64, y: u64, seconds: f64) -> u64 {
    let grew = y.saturating_sub(x);
    let believable =
        seconds > 0.0 && grew as f64 <= MAX_FIGURE && grew as f64 / seconds <= MAX_RATE;
    if believable {
        grew
    } else {
        0
    }
}

/// `n` events over `seconds`, per second: 0 over no interval, and 0 for a
/// rate beyond [`MAX_RATE`].
pub(crate) fn per_second(n: u64, seconds: f64) -> f64 {
    let rate = if seconds > 0.0 {
        n as f64 / seconds
    } else {
        0.0
    };
    if rate.is_finite() && rate <= MAX_RATE {
        rate
    } else {
        0.0
    }
}

/// A size or count read as it stands (not differenced): 0 beyond
/// [`MAX_FIGURE`].
pub(crate) fn believable(n: u64) -> u64 {
    if n as f64 <= MAX_FIGURE {
        n
    } else {
        0
    }
}
