//! The search for the highest load that meets the objectives (`--find`):
//! which level the next step runs, from how the levels judged so far
//! fared. The sweep runs the steps and judges them ([`super::judge`]); a
//! level runs again, its intervals pooled with the earlier runs', where
//! the search says that may move its answer ([`Search::runs_again`]),
//! before the search hears of it, so the search itself only sees levels
//! that met, broke, or stayed too close to call within the budget (taken
//! as not met: a capacity is only claimed where it was shown).
//!
//! The search, stated:
//! 1. From the first level, double the load while levels meet (halve it
//!    while they do not) until a level that meets lies below one that does
//!    not: the bracket.
//! 2. Narrow the bracket until its upper end is within `precision` of its
//!    lower, to the resolution of the levels ([`within`]). Each probe is placed where the latency
//!    objectives' ratio (measured value over limit) is expected to reach
//!    1, interpolating its reciprocal linearly in the load between the
//!    bracket's ends — exact for a single-server queue, whose response
//!    time percentiles go as 1/(capacity − load), and close for many
//!    servers near saturation — offset by 40% of the precision towards the
//!    side the last probe did not fall on, so that the next two probes
//!    usually close the bracket from both sides; when a probe can close
//!    it whatever it shows (a bracket under twice the precision wide), it
//!    goes where it does, nearest that point. An end kept while the
//!    other moved twice or more counts for half as much each time (the
//!    Illinois rule of regula falsi), so that a curve bent one way does
//!    not creep up on the answer from one side. The probe stays at least
//!    a tenth of the bracket from either end, and when two probes in a row
//!    did not halve the bracket (or no latency ratio is known) the probe
//!    is the geometric midpoint: never slower than bisection by more than a
//!    step in three.

use super::judge::{Decision, LevelJudgement};
use crate::plan::load::{MAX_RATE, MAX_USERS, MIN_RATE};
use crate::plan::Level;

/// One level the search has judged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Probe {
    pub(crate) load: f64,
    pub(crate) decision: Decision,
    /// The latency objectives' measured value over their limit (the
    /// largest of them): under 1 where they hold; none without one.
    pub(crate) ratio: Option<f64>,
}

/// A search under way.
#[derive(Debug, Clone)]
pub(crate) struct Search {
    /// Users (whole numbers) or arrivals per second.
    users: bool,
    start: f64,
    precision: f64,
    probes: Vec<Probe>,
}

impl Search {
    /// A search from `start` that stops when the bracket is within
    /// `precision` (a fraction).
    pub(crate) fn new(start: Level, precision: f64) -> Self {
        Search {
            users: matches!(start, Level::Users(_)),
            start: start.value(),
            precision,
            probes: Vec::new(),
        }
    }

    /// Records the judgement of a level.
    pub(crate) fn record(&mut self, probe: Probe) {
        self.probes.push(probe);
    }

    /// The highest load shown to meet below every one that did not, and
    /// the lowest that did not (broke, or stayed undecided).
    pub(crate) fn bracket(&self) -> (Option<Probe>, Option<Probe>) {
        bracket(&self.probes)
    }

    /// The level of the next step; none when the search is over.
    pub(crate) fn next(&self) -> Option<Level> {
        let load = match self.bracket() {
            _ if self.probes.is_empty() => self.start,
            (Some(lo), None) => {
                let up = lo.load * 2.0;
                if lo.load >= self.ceiling() {
                    return None;
                }
                up.min(self.ceiling())
            }
            (None, Some(hi)) => {
                let down = hi.load / 2.0;
                if hi.load <= self.floor() || self.undecided_going_down() {
                    return None;
                }
                down.max(self.floor())
            }
            (Some(lo), Some(hi)) => {
                if self.narrow(lo.load, hi.load) {
                    return None;
                }
                self.just_below(lo, hi)
                    .unwrap_or_else(|| self.inside(lo, hi))
            }
            (None, None) => return None,
        };
        // A level already judged is not run again: inside a bracket, the
        // midpoint (or the next whole user up) is tried instead.
        let fresh = |level: &Level| !self.probes.iter().any(|p| p.load == level.value());
        let mut candidates = vec![self.level(load)];
        if let (Some(lo), Some(hi)) = self.bracket() {
            candidates.push(self.level((lo.load * hi.load).sqrt()));
            if self.users {
                candidates.push(self.level(lo.load + 1.0));
            }
        }
        candidates.into_iter().find(fresh)
    }

    /// Whether the level at `load`, just judged, runs again (its
    /// intervals pooled with this run's) before the search hears of it:
    /// - one that met narrowly would be claimed, and one window of a
    ///   queue near saturation can be calm or stormy (at 93% busy the
    ///   share over a p99 limit scatters from 0.5% to 16% between 3 s
    ///   windows, and a calm one's intervals agree with each other): it
    ///   runs again, unless the levels before it bear it out
    ///   ([`Search::borne_out`]);
    /// - one that broke does not: were its window stormy, it caps the
    ///   answer a little low, on the safe side, and the search probes
    ///   below it anyway (in 30 searches of the null queue each of 11
    ///   narrow breaks run again broke again, a step each);
    /// - one too close to call, with no level met yet, runs again when
    ///   that may decide it either way (halving goes on below a break,
    ///   and stops at two undecided levels);
    /// - one too close to call above a level that met runs again only
    ///   when it may turn out to meet, which moves the answer up (a break
    ///   is taken as an undecided level is: not met; in 15 searches each
    ///   of 3 such repeats broke), and not when taking it as not met
    ///   already closes the bracket to the precision asked.
    pub(crate) fn runs_again(&self, load: f64, judged: &LevelJudgement) -> bool {
        match (judged.decision, self.bracket().0) {
            (Decision::Meets, _) => judged.another_run_may_decide(false) && !self.borne_out(load),
            (Decision::Breaks, _) => false,
            (Decision::Undecided, None) => judged.another_run_may_decide(false),
            (Decision::Undecided, Some(lo)) => {
                !self.narrow(lo.load, load) && judged.another_run_may_decide(true)
            }
        }
    }

    /// Whether a level that met narrowly is borne out by the levels
    /// judged before it: the capacity fitted to them ([`fitted_estimate`]) lies at least
    /// a precision above `load`, and no further than a precision past the
    /// lowest level that did not meet. A calm window that let a level
    /// meet which truly breaks would then have to coincide with the
    /// other levels' windows placing the answer over 5% too high; in 15
    /// searches of the null queue, 5 narrow meets were run again and each
    /// met again.
    fn borne_out(&self, load: f64) -> bool {
        let Some(fitted) = fitted_estimate(&self.probes) else {
            return false;
        };
        let cap = match self.bracket() {
            (_, Some(hi)) => hi.load * (1.0 + self.precision),
            (_, None) => f64::INFINITY,
        };
        fitted >= load * (1.0 + self.precision) && fitted <= cap
    }

    /// Whether the lowest levels, with none met, were too close to call
    /// often enough to stop: lower loads count fewer operations, which
    /// decide less, so halving on only runs the search down to its
    /// floor. Two such levels stop it, unless the lowest read under the
    /// latency objectives' limits (a ratio under 1: less load there is
    /// likely to meet, as a managed nginx at 1000/s reading a p95 of
    /// 4.15 ms against 5 ms, too close to call in its 2 s, showed); three
    /// stop it whatever they read.
    fn undecided_going_down(&self) -> bool {
        let mut loads: Vec<&Probe> = self.probes.iter().collect();
        loads.sort_by(|a, b| a.load.total_cmp(&b.load));
        let undecided = loads
            .iter()
            .take_while(|p| p.decision == Decision::Undecided)
            .count();
        let leans_to_meet = loads.first().and_then(|p| p.ratio).is_some_and(|r| r < 1.0);
        undecided >= 3 || (undecided >= 2 && !leans_to_meet)
    }

    /// Whether the bracket is as narrow as asked ([`within`]).
    fn narrow(&self, lo: f64, hi: f64) -> bool {
        within(lo, hi, self.precision, self.users)
    }

    /// Below a level too close to call: the answer lies near it, so the
    /// probe goes where, if it meets, the bracket is as narrow as asked.
    /// None when `hi` was decided, or no such level lies inside.
    fn just_below(&self, lo: Probe, hi: Probe) -> Option<f64> {
        if hi.decision != Decision::Undecided {
            return None;
        }
        // Rounded up, so that meeting there closes the bracket.
        let level = self.level_up(hi.load / (1.0 + self.precision)).value();
        (level > lo.load && level < hi.load && self.narrow(level, hi.load)).then_some(level)
    }

    /// The next probe inside the bracket.
    fn inside(&self, lo: Probe, hi: Probe) -> f64 {
        let span = hi.load - lo.load;
        let bisect = (lo.load * hi.load).sqrt();
        let guess = if self.stalling() {
            None
        } else {
            // The end kept while the other moved twice or more counts for
            // half as much each time (the Illinois rule: a curve bent one
            // way otherwise creeps up on the answer from one side).
            let (kept_hi, moves) = self.same_side_run();
            let weight = 0.5f64.powi(moves.saturating_sub(1).min(30) as i32);
            let weights = if kept_hi {
                (1.0, weight)
            } else {
                (weight, 1.0)
            };
            crossing(lo, hi, weights)
        };
        let Some(guess) = guess else {
            return bisect;
        };
        let last_met = self
            .probes
            .last()
            .is_some_and(|p| p.decision == Decision::Meets);
        let offset = 0.4 * self.precision;
        let aimed = if last_met {
            guess * (1.0 + offset)
        } else {
            guess * (1.0 - offset)
        };
        self.closing(lo.load, hi.load)
            .map_or(aimed, |(from, to)| aimed.clamp(from, to))
            .clamp(lo.load + span / 10.0, hi.load - span / 10.0)
    }

    /// Where one probe closes the bracket whatever it shows: from the
    /// lowest level whose meeting leaves `hi` within the precision, to the
    /// highest level whose missing leaves it within the precision of `lo`
    /// (levels as probed, rounded inwards). None when no level does.
    fn closing(&self, lo: f64, hi: f64) -> Option<(f64, f64)> {
        let from = self.level_up(hi / (1.0 + self.precision)).value();
        let to = self.level_down(lo * (1.0 + self.precision)).value();
        (from > lo && to < hi && from <= to).then_some((from, to))
    }

    /// Whether the latest probes all met (so the bracket's upper end was
    /// kept while its lower end moved) or all did not, and how many.
    fn same_side_run(&self) -> (bool, u32) {
        let Some(last) = self.probes.last() else {
            return (true, 0);
        };
        let met = last.decision == Decision::Meets;
        let moves = self
            .probes
            .iter()
            .rev()
            .take_while(|p| (p.decision == Decision::Meets) == met)
            .count();
        (met, u32::try_from(moves).unwrap_or(u32::MAX))
    }

    /// Whether the last two probes inside a bracket failed to halve it.
    fn stalling(&self) -> bool {
        let n = self.probes.len();
        if n < 4 {
            return false;
        }
        let width = |probes: &[Probe]| match bracket(probes) {
            (Some(lo), Some(hi)) => Some((hi.load / lo.load).ln()),
            _ => None,
        };
        match (width(&self.probes[..n - 2]), width(&self.probes)) {
            (Some(before), Some(now)) => now > before / 2.0,
            _ => false,
        }
    }

    /// The level nearest `load`: whole users, or a rate to three
    /// significant figures.
    fn level(&self, load: f64) -> Level {
        self.rounded(load, f64::round)
    }

    /// The lowest level at or above `load`.
    fn level_up(&self, load: f64) -> Level {
        self.rounded(load, f64::ceil)
    }

    /// The highest level at or below `load`.
    fn level_down(&self, load: f64) -> Level {
        self.rounded(load, f64::floor)
    }

    fn rounded(&self, load: f64, round: fn(f64) -> f64) -> Level {
        rounded(self.users, load, round)
    }

    fn ceiling(&self) -> f64 {
        if self.users {
            f64::from(MAX_USERS)
        } else {
            MAX_RATE
        }
    }

    fn floor(&self) -> f64 {
        if self.users {
            1.0
        } else {
            (self.start / 1024.0).max(MIN_RATE)
        }
    }
}

/// `load` rounded by `round` to whole users (`users`), or to a rate of
/// three significant figures.
fn rounded(users: bool, load: f64, round: fn(f64) -> f64) -> Level {
    if users {
        Level::Users(round(load).clamp(1.0, f64::from(MAX_USERS)) as u32)
    } else {
        let digits = 10f64.powf(load.log10().floor() - 2.0);
        Level::Rate((round(load / digits) * digits).clamp(MIN_RATE, MAX_RATE))
    }
}

/// Whether a bracket from `lo` to `hi` is within `precision` (a
/// fraction) to the resolution of the levels: one user apart (`users`),
/// or no further apart than the lowest rate at three figures at or above
/// `lo` raised by the precision (3,170/s and 3,330/s are within 5%,
/// 3,328.5/s being no level).
pub(crate) fn within(lo: f64, hi: f64, precision: f64, users: bool) -> bool {
    let reach = lo * (1.0 + precision);
    hi <= reach
        || (users && hi - lo <= 1.0)
        || (!users && hi <= rounded(false, reach, f64::ceil).value())
}

/// The load at which the latency objectives are expected to be just met,
/// from a load that met them (`lo`) and one above it (`hi`): the line
/// through the reciprocals of their latency ratios, followed to 1 (between
/// them when `hi` missed, beyond it when `hi` was still under). None
/// without a ratio at both ends, or when the ratio did not rise.
pub(crate) fn estimate(lo: Probe, hi: Probe) -> Option<f64> {
    let (a, b) = (lo.ratio?, hi.ratio?);
    if a <= 0.0 || b <= 0.0 {
        return None;
    }
    root(lo.load, 1.0 / a - 1.0, hi.load, 1.0 / b - 1.0)
}

/// How far from 1 a level's latency ratio may lie for [`fitted_estimate`]
/// to use it: from 1/1.5 to 1.5.
const NEAR: f64 = 1.5;

/// The load at which the latency objectives are expected to be just met,
/// from every level judged near them: the least-squares line through the
/// reciprocals of the latency ratios of the levels whose ratio lies
/// within a factor of [`NEAR`] of 1, followed to 1. Two levels (the
/// bracket's ends) give the line of [`estimate`]; the levels around them
/// average out the noise of each one's short window, which near the
/// answer can say 5% either way. None with fewer than two such levels,
/// or a line that does not fall.
pub(crate) fn fitted_estimate(probes: &[Probe]) -> Option<f64> {
    let near: Vec<(f64, f64)> = probes
        .iter()
        .filter_map(|p| Some((p.load, p.ratio?)))
        .filter(|&(_, r)| r > 1.0 / NEAR && r < NEAR)
        .map(|(load, r)| (load, 1.0 / r - 1.0))
        .collect();
    let n = near.len() as f64;
    if near.len() < 2 {
        return None;
    }
    let mean_x = near.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = near.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = near.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = near.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    (slope < 0.0).then(|| mean_x - mean_y / slope)
}

/// Where the search expects the objectives to be just met inside its
/// bracket, each end's distance from them weighed: none unless the ends
/// lie on either side.
fn crossing(lo: Probe, hi: Probe, (wa, wb): (f64, f64)) -> Option<f64> {
    let (a, b) = (lo.ratio?, hi.ratio?);
    if a <= 0.0 {
        return None;
    }
    // How far each end is from the objective, in the reciprocal ratio.
    let ga = (1.0 / a - 1.0) * wa;
    let gb = (1.0 / b.max(1e-9) - 1.0) * wb;
    if gb >= 0.0 {
        return None;
    }
    root(lo.load, ga, hi.load, gb)
}

/// Where the line through (x0, g0) and (x1, g1) crosses 0, for g0 above 0
/// and falling.
fn root(x0: f64, g0: f64, x1: f64, g1: f64) -> Option<f64> {
    (g0 > 0.0 && g1 < g0).then(|| x0 + g0 / (g0 - g1) * (x1 - x0))
}

/// The highest load that met below every one that did not, and the lowest
/// that did not.
fn bracket(probes: &[Probe]) -> (Option<Probe>, Option<Probe>) {
    let hi = probes
        .iter()
        .filter(|p| p.decision != Decision::Meets)
        .min_by(|a, b| a.load.total_cmp(&b.load))
        .copied();
    let lo = probes
        .iter()
        .filter(|p| p.decision == Decision::Meets && hi.is_none_or(|h| p.load < h.load))
        .max_by(|a, b| a.load.total_cmp(&b.load))
        .copied();
    (lo, hi)
}

#[cfg(test)]
mod tests;
