//! The search for the highest load that meets the objectives (`--find`):
//! which level the next step runs, from how the levels judged so far
//! fared. The sweep runs the steps and judges them ([`super::judge`]); a
//! level judged undecided runs again, its intervals pooled with the
//! earlier runs', before the search hears of it, so the search itself only
//! sees levels that met, broke, or stayed too close to call within the
//! budget (taken as not met: a capacity is only claimed where it was
//! shown).
//!
//! The search, stated:
//! 1. From the first level, double the load while levels meet (halve it
//!    while they do not) until a level that meets lies below one that does
//!    not: the bracket.
//! 2. Narrow the bracket until its upper end is within `precision` of its
//!    lower (or one user apart). Each probe is placed where the latency
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
                if hi.load <= self.floor() || self.undecided_twice_going_down() {
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

    /// Whether the two lowest levels, with none met, were both too close
    /// to call: lower loads count fewer operations, which decide less,
    /// so halving on only runs the search down to its floor.
    fn undecided_twice_going_down(&self) -> bool {
        let mut loads: Vec<&Probe> = self.probes.iter().collect();
        loads.sort_by(|a, b| a.load.total_cmp(&b.load));
        loads.len() >= 2 && loads[..2].iter().all(|p| p.decision == Decision::Undecided)
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
mod tests {
    use super::*;

    /// A single-server queue's p95 over a limit: ln(20)/(μ − λ) against
    /// `limit`, the capacity within it λ* = μ − ln(20)/limit.
    fn mm1_ratio(load: f64, mu: f64, limit: f64) -> f64 {
        if load >= mu {
            1e6
        } else {
            (20f64).ln() / (mu - load) / limit
        }
    }

    /// Runs a search against a noiseless judge; gives the steps it took
    /// and the bracket it ended with.
    fn search(start: Level, precision: f64, ratio: impl Fn(f64) -> f64) -> (usize, f64, f64) {
        let mut s = Search::new(start, precision);
        let mut steps = 0;
        while let Some(level) = s.next() {
            steps += 1;
            assert!(steps < 40, "the search does not end");
            let r = ratio(level.value());
            let decision = if r < 1.0 {
                Decision::Meets
            } else {
                Decision::Breaks
            };
            s.record(Probe {
                load: level.value(),
                decision,
                ratio: Some(r),
            });
        }
        let (lo, hi) = s.bracket();
        (
            steps,
            lo.map_or(0.0, |p| p.load),
            hi.map_or(f64::INFINITY, |p| p.load),
        )
    }

    #[test]
    fn the_search_brackets_a_queue_to_the_precision_in_few_steps() {
        // μ = 1000/s, p95 < 10 ms: λ* = 1000 − 299.6 = 700.4/s.
        let truth = 1000.0 - (20f64).ln() / 0.01;
        let (steps, lo, hi) = search(Level::Rate(100.0), 0.05, |l| mm1_ratio(l, 1000.0, 0.01));
        assert!(lo < truth && truth < hi, "{lo} {truth} {hi}");
        assert!(hi <= lo * 1.05 + 1e-9, "{lo} {hi}");
        // Doubling 100 → 800 takes four, the bracket two or three more. A
        // linear sweep at 5% of the answer would need 20.
        assert!(steps <= 7, "{steps} steps");
    }

    #[test]
    fn without_a_latency_ratio_the_search_bisects() {
        let (steps, lo, hi) = search(Level::Users(1), 0.05, |l| if l <= 37.0 { 0.5 } else { 2.0 });
        // Doubling 1 → 64, then bisecting [32, 64] to one user apart.
        let (steps_b, lo_b, hi_b) = {
            let mut s = Search::new(Level::Users(1), 0.05);
            let mut steps = 0;
            while let Some(level) = s.next() {
                steps += 1;
                let meets = level.value() <= 37.0;
                s.record(Probe {
                    load: level.value(),
                    decision: if meets {
                        Decision::Meets
                    } else {
                        Decision::Breaks
                    },
                    ratio: None,
                });
            }
            let (lo, hi) = s.bracket();
            (steps, lo.unwrap().load, hi.unwrap().load)
        };
        assert_eq!((lo_b, hi_b), (37.0, 38.0));
        assert!(steps_b <= 12, "{steps_b}");
        assert!(
            lo <= 37.0 && hi >= 38.0 && hi <= lo * 1.05 + 1.0,
            "{lo} {hi} {steps}"
        );
    }

    #[test]
    fn a_first_level_that_breaks_searches_down() {
        let (_, lo, hi) = search(Level::Rate(1000.0), 0.05, |l| mm1_ratio(l, 1000.0, 0.01));
        assert!(lo < 700.4 && 700.4 < hi, "{lo} {hi}");
        // One user that breaks: nothing lower to try.
        let mut s = Search::new(Level::Users(1), 0.05);
        s.record(Probe {
            load: 1.0,
            decision: Decision::Breaks,
            ratio: Some(3.0),
        });
        assert_eq!(s.next(), None);
    }

    #[test]
    fn an_undecided_level_is_not_claimed() {
        let mut s = Search::new(Level::Users(8), 0.05);
        for (load, decision) in [
            (8.0, Decision::Meets),
            (16.0, Decision::Undecided),
            (32.0, Decision::Breaks),
        ] {
            s.record(Probe {
                load,
                decision,
                ratio: None,
            });
        }
        let (lo, hi) = s.bracket();
        assert_eq!((lo.unwrap().load, hi.unwrap().load), (8.0, 16.0));
        assert_eq!(s.next(), Some(Level::Users(11)));
    }

    #[test]
    fn a_level_too_close_to_call_is_approached_from_just_below() {
        let mut s = Search::new(Level::Rate(2000.0), 0.05);
        for (load, decision, ratio) in [
            (2000.0, Decision::Meets, 0.7),
            (4000.0, Decision::Breaks, 9.0),
            (3310.0, Decision::Undecided, 1.02),
        ] {
            s.record(Probe {
                load,
                decision,
                ratio: Some(ratio),
            });
        }
        // 3310 / 1.05 = 3152.4, rounded up to three figures: meeting
        // there closes the bracket.
        assert_eq!(s.next(), Some(Level::Rate(3160.0)));
        s.record(Probe {
            load: 3160.0,
            decision: Decision::Meets,
            ratio: Some(0.9),
        });
        assert_eq!(s.next(), None);
    }

    /// A bracket from 3430/s to 3680/s (7.3%) closes in one probe at any
    /// level from 3510 (meeting there leaves 4.8%) to 3600 (missing there
    /// leaves 5.0%): the probe goes there, not where the ratios point
    /// (3605/s, and 2% beyond after a level that met).
    #[test]
    fn a_bracket_one_probe_can_close_is_closed_by_it() {
        let mut s = Search::new(Level::Rate(2000.0), 0.05);
        for (load, decision, ratio) in [
            (2000.0, Decision::Meets, 0.35),
            (4000.0, Decision::Breaks, 8.0),
            (3170.0, Decision::Meets, 0.7),
            (3680.0, Decision::Breaks, 1.05),
            (3430.0, Decision::Meets, 0.9),
        ] {
            s.record(Probe {
                load,
                decision,
                ratio: Some(ratio),
            });
        }
        let next = s.next().unwrap().value();
        assert!((3510.0..=3600.0).contains(&next), "{next}");
        for decision in [Decision::Meets, Decision::Breaks, Decision::Undecided] {
            let mut after = s.clone();
            after.record(Probe {
                load: next,
                decision,
                ratio: Some(1.0),
            });
            assert_eq!(after.next(), None, "{decision:?} at {next}");
        }
        // Twice the precision or more: no one probe closes it.
        assert_eq!(s.closing(3000.0, 3400.0), None);
    }

    #[test]
    fn the_estimate_follows_the_reciprocal_ratio_to_one() {
        // M/M/1, μ = 1000/s, p95 < 10 ms: the reciprocal ratio is linear
        // in the load, so two loads give λ* = 700.4/s exactly, from
        // either side of it or both below.
        let truth = 1000.0 - (20f64).ln() / 0.01;
        let probe = |load: f64| Probe {
            load,
            decision: Decision::Meets,
            ratio: Some(mm1_ratio(load, 1000.0, 0.01)),
        };
        for (lo, hi) in [(600.0, 800.0), (500.0, 650.0)] {
            let at = estimate(probe(lo), probe(hi)).unwrap();
            assert!((at - truth).abs() < 1e-6, "{lo}..{hi}: {at}");
        }
        // A ratio that does not rise says nothing of where it reaches 1.
        let flat = |load| Probe {
            load,
            decision: Decision::Meets,
            ratio: Some(0.5),
        };
        assert_eq!(estimate(flat(100.0), flat(200.0)), None);
    }

    /// Four servers of exp:1ms: the levels a search ran, their ratios the
    /// queue's own, then each off by 5% of its value in turn. The fit
    /// through the levels near the answer lands closer to it than the
    /// line through the bracket's two ends.
    #[test]
    fn the_levels_near_the_answer_place_it_better_than_the_bracket_alone() {
        use crate::workload::null::{theory, ServiceDist};
        let service = ServiceDist::Exponential {
            mean: std::time::Duration::from_millis(1),
        };
        let limit = 0.002;
        let truth =
            theory::max_rate(4, service, 0.5, std::time::Duration::from_secs_f64(limit)).unwrap();
        let ratio = |load: f64| {
            theory::response_quantile(4, service, load, 0.5)
                .map_or(1e6, |t| t.as_secs_f64() / limit)
        };
        let loads = [2000.0, 3160.0, 3370.0, 3530.0, 4000.0];
        let probes = |skew: &dyn Fn(usize) -> f64| -> Vec<Probe> {
            loads
                .iter()
                .enumerate()
                .map(|(i, &load)| Probe {
                    load,
                    decision: Decision::Meets,
                    ratio: Some(ratio(load) * skew(i)),
                })
                .collect()
        };
        let exact = fitted_estimate(&probes(&|_| 1.0)).unwrap();
        assert!(
            (exact / truth - 1.0).abs() < 0.01,
            "{exact} against {truth}"
        );
        for off in [0.95, 1.05] {
            for i in 1..4 {
                let p = probes(&|j| if j == i { off } else { 1.0 });
                let fitted = fitted_estimate(&p).unwrap();
                let (lo, hi) = (p[2], p[3]);
                let ends = estimate(lo, hi).unwrap_or(f64::NAN);
                assert!(
                    (fitted / truth - 1.0).abs() < 0.05,
                    "level {i} off by {off}: {fitted} against {truth}"
                );
                assert!(
                    (fitted - truth).abs() <= (ends - truth).abs() + 1.0 || i == 1,
                    "level {i} off by {off}: fitted {fitted}, ends {ends}, truth {truth}"
                );
            }
        }
        // Fewer than two levels near the answer, or none falling: none.
        assert_eq!(fitted_estimate(&probes(&|_| 1.0)[..2]), None);
    }

    /// A narrow meet is taken without another run where the levels
    /// before it place the answer a precision above it, and not where
    /// they place it nearer, past the level that did not meet, or nowhere.
    #[test]
    fn a_narrow_meet_well_under_the_fitted_answer_is_borne_out() {
        let mut s = Search::new(Level::Rate(2000.0), 0.05);
        assert!(!s.borne_out(2900.0), "no level judged yet");
        // Reciprocal ratios on a line that crosses 1 at 3,200/s.
        let ratio = |load: f64| 1.0 / (1.0 + (3200.0 - load) / 2000.0);
        for (load, decision) in [
            (2000.0, Decision::Meets),
            (4000.0, Decision::Breaks),
            (2820.0, Decision::Meets),
            (3210.0, Decision::Undecided),
        ] {
            s.record(Probe {
                load,
                decision,
                ratio: Some(ratio(load)),
            });
        }
        assert!(s.borne_out(3040.0), "3,040 is over 5% under 3,200");
        assert!(!s.borne_out(3060.0), "3,060 is within 5% of 3,200");
        // A fit past the lowest level that did not meet is not taken.
        let mut far = Search::new(Level::Rate(2000.0), 0.05);
        for (load, decision) in [(2300.0, Decision::Meets), (2500.0, Decision::Undecided)] {
            far.record(Probe {
                load,
                decision,
                ratio: Some(ratio(load)),
            });
        }
        assert!(!far.borne_out(2200.0), "fitted 3,200, over 2,500 × 1.05");
    }

    /// A level runs again only where its second run may change the
    /// answer.
    #[test]
    fn a_level_runs_again_only_where_that_may_move_the_answer() {
        use super::super::judge::Judgement;
        let judged = |decision: Decision, estimate: f64| LevelJudgement {
            decision,
            objectives: vec![Judgement {
                objective: "p95<5ms".to_string(),
                decision,
                estimate,
                low: estimate - 0.02,
                high: estimate + 0.02,
                bound: 0.05,
                unit: "share",
            }],
        };
        let (over, under) = (
            judged(Decision::Undecided, 0.065),
            judged(Decision::Undecided, 0.035),
        );
        let record = |s: &mut Search, load: f64, decision: Decision| {
            s.record(Probe {
                load,
                decision,
                ratio: None,
            });
        };
        // No level met yet: a break halves on, two undecided levels stop
        // the search; either decision is worth a run.
        let mut s = Search::new(Level::Rate(1000.0), 0.05);
        assert!(s.runs_again(1000.0, &over) && s.runs_again(1000.0, &under));
        // Above a level that met: only a meet moves the answer up.
        record(&mut s, 1000.0, Decision::Meets);
        assert!(!s.runs_again(2000.0, &over));
        assert!(s.runs_again(2000.0, &under));
        // ... and none is needed where not meeting closes the bracket.
        assert!(!s.runs_again(1050.0, &under));
        // A narrow meet runs again (no level bears it out), a narrow
        // break does not.
        assert!(s.runs_again(1500.0, &judged(Decision::Meets, 0.04)));
        assert!(!s.runs_again(1500.0, &judged(Decision::Breaks, 0.06)));
    }

    /// Levels are rates at three figures: a bracket from 3,170/s to
    /// 3,330/s is within 5% (3,328.5/s is no level), and no probe is
    /// spent on 3,180/s to close it.
    #[test]
    fn a_bracket_within_the_precision_at_the_levels_resolution_is_narrow() {
        let mut s = Search::new(Level::Rate(2000.0), 0.05);
        for (load, decision) in [
            (2000.0, Decision::Meets),
            (4000.0, Decision::Breaks),
            (3170.0, Decision::Meets),
            (3330.0, Decision::Undecided),
        ] {
            s.record(Probe {
                load,
                decision,
                ratio: Some(1.0),
            });
        }
        assert_eq!(s.next(), None);
        assert!(!s.narrow(3170.0, 3340.0));
    }

    #[test]
    fn a_search_down_stops_at_two_levels_too_close_to_call() {
        let mut s = Search::new(Level::Rate(1000.0), 0.05);
        for load in [1000.0, 500.0] {
            assert_eq!(s.next(), Some(Level::Rate(load)));
            s.record(Probe {
                load,
                decision: Decision::Undecided,
                ratio: Some(1.0),
            });
        }
        assert_eq!(s.next(), None);
    }

    #[test]
    fn rates_are_probed_at_three_figures() {
        let s = Search::new(Level::Rate(1.0), 0.05);
        assert_eq!(s.level(3314.7), Level::Rate(3310.0));
        assert_eq!(s.level(0.123456), Level::Rate(0.123));
    }
}
