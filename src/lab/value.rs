//! What each variant costs and how it scores. A network lab sets each network's
//! price beside the throughput it gave; an adapter evaluation weighs performance,
//! value and the testers' own ratings into one score per adapter. In a
//! lab file:
//!
//! ```toml
//! [costs]                              # each value's cost, summed per variant
//! unit = "USD"
//! cpus = { "0" = 400, "0-1" = 700 }
//! [scorecard]                          # weights
//! throughput = 40                      # the peak; the best variant scores 5
//! value = 40                           # the peak per unit of cost; best = 5
//! latency = 20                         # p95 at the peak; the lowest scores 5
//! ease = 20                            # any other name: the user's rating
//! [ratings."cpus=0"]                   # 0 to 5, per variant
//! ease = 4
//! ```
//!
//! A `[[variant]]` may also give its own `cost = N`, added to its knobs'.
//! Every criterion is on such an evaluation's 0–5 scale, and the score is
//! Σ wᵢ·sᵢ / Σ wᵢ (its weights of 20, 20, 40 and 40% sum to 120%: the
//! score divides by the weights' sum).

use super::place::{At, LabFileError};
use super::variant::Variant;
use std::collections::BTreeMap;
use toml::Spanned;

/// A table of a lab file as written: names and values, with places.
pub(crate) type Table = Spanned<BTreeMap<Spanned<String>, Spanned<toml::Value>>>;

/// `[ratings]` as written: its sub-tables are headed `[ratings."NAME"]`,
/// which leaves `[ratings]` itself and the names without a place (toml
/// places no implicit table); each name's ratings have one.
pub(crate) type Ratings = BTreeMap<String, Spanned<toml::Value>>;

/// The criteria perflab measures; any other is the user's rating.
pub(crate) const MEASURED: [&str; 3] = ["throughput", "latency", "value"];

/// The highest rating, and so the best score of a criterion.
pub(crate) const TOP: f64 = 5.0;

/// What `[costs]` and `[scorecard]` add to a lab: the unit costs are in,
/// and the criteria with their weights (each variant's cost and ratings
/// are on the variant).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Valuation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cost_unit: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) weights: Vec<(String, f64)>,
}

/// A number of the file (an integer or a float), finite and in `range`.
fn number(value: &toml::Value, range: std::ops::RangeInclusive<f64>) -> Option<f64> {
    let x = match value {
        toml::Value::Integer(n) => *n as f64,
        toml::Value::Float(x) => *x,
        _ => return None,
    };
    (x.is_finite() && range.contains(&x)).then_some(x)
}

/// A variant's own `cost = N` (in a `[[variant]]` table).
pub(crate) fn own_cost(value: &Spanned<toml::Value>, at: &At) -> Result<f64, LabFileError> {
    number(value.get_ref(), 0.0..=f64::MAX).ok_or_else(|| {
        at(
            value.span().start,
            "'cost' must be a number of 0 or more, e.g. cost = 1200".into(),
        )
    })
}

/// Reads `[costs]`, `[scorecard]` and `[ratings]` into `variants` (each
/// one's cost and ratings) and the lab's valuation.
pub(crate) fn read(
    costs: Option<&Table>,
    scorecard: Option<&Table>,
    ratings: Option<&Ratings>,
    variants: &mut [Variant],
    at: &At,
) -> Result<Valuation, LabFileError> {
    let mut valuation = Valuation::default();
    if let Some(costs) = costs {
        valuation.cost_unit = read_costs(costs, variants, at)?;
    }
    let priced = variants.iter().filter(|v| v.cost.is_some()).count();
    if priced > 0 && priced < variants.len() {
        let lacking = variants
            .iter()
            .find(|v| v.cost.is_none())
            .map_or("", |v| &v.name);
        let offset = costs.map_or(0, |c| c.span().start);
        return Err(at(
            offset,
            format!("variant '{lacking}' has no cost while others have; price every variant ([costs] by knob value, or cost = N in its [[variant]])"),
        ));
    }
    let Some(scorecard) = scorecard else {
        if let Some(r) = ratings {
            return Err(at(
                r.values().next().map_or(0, |v| v.span().start),
                "[ratings] without a [scorecard]: give the criteria's weights, e.g. [scorecard] throughput = 40, ease = 20".into(),
            ));
        }
        return Ok(valuation);
    };
    valuation.weights = read_weights(scorecard, priced > 0, at)?;
    if let Some(ratings) = ratings {
        read_ratings(ratings, &valuation.weights, variants, at)?;
    }
    check_rated(scorecard, variants, at)?;
    Ok(valuation)
}

/// `[scorecard]`: each criterion's weight, above 0, in the file's order;
/// `value` only when the variants are priced.
fn read_weights(
    scorecard: &Table,
    priced: bool,
    at: &At,
) -> Result<Vec<(String, f64)>, LabFileError> {
    let mut entries: Vec<_> = scorecard.get_ref().iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    if entries.is_empty() {
        return Err(at(
            scorecard.span().start,
            "[scorecard] has no criterion; weigh some, e.g. throughput = 40, latency = 20".into(),
        ));
    }
    let mut weights = Vec::new();
    for (key, weight) in entries {
        let name = key.get_ref().trim().to_string();
        let w = number(weight.get_ref(), 0.0..=f64::MAX)
            .filter(|w| *w > 0.0)
            .ok_or_else(|| {
                at(
                    weight.span().start,
                    format!("the weight of '{name}' must be a number above 0, e.g. {name} = 40"),
                )
            })?;
        if name == "value" && !priced {
            return Err(at(
                key.span().start,
                "the scorecard's 'value' is the peak per unit of cost: give [costs] too".into(),
            ));
        }
        weights.push((name, w));
    }
    Ok(weights)
}

/// Every criterion of the scorecard perflab does not measure is the
/// user's rating: each variant needs one.
fn check_rated(scorecard: &Table, variants: &[Variant], at: &At) -> Result<(), LabFileError> {
    for key in scorecard.get_ref().keys() {
        let name = key.get_ref().trim();
        if MEASURED.contains(&name) {
            continue;
        }
        if let Some(v) = variants
            .iter()
            .find(|v| v.ratings.iter().all(|(c, _)| c != name))
        {
            return Err(at(
                key.span().start,
                format!(
                    "'{name}' is not measured ({}), so it is your rating: give it for every variant, e.g. [ratings.\"{}\"] {name} = 4",
                    MEASURED.join(", "),
                    v.name
                ),
            ));
        }
    }
    Ok(())
}

/// `[costs]`: its unit, and each knob value's cost added to the variants
/// that have it.
fn read_costs(
    costs: &Table,
    variants: &mut [Variant],
    at: &At,
) -> Result<Option<String>, LabFileError> {
    let mut unit = None;
    let mut entries: Vec<_> = costs.get_ref().iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    for (key, value) in entries {
        let knob = key.get_ref().trim();
        let here = value.span().start;
        if knob == "unit" {
            match value.get_ref() {
                toml::Value::String(s) if !s.trim().is_empty() && s.len() <= 16 => {
                    unit = Some(s.trim().to_string())
                }
                _ => {
                    return Err(at(
                        here,
                        "'unit' names what costs are counted in, e.g. unit = \"USD\"".into(),
                    ))
                }
            }
            continue;
        }
        let toml::Value::Table(prices) = value.get_ref() else {
            return Err(at(
                here,
                format!("[costs] {knob} needs each value's cost, e.g. {knob} = {{ \"0\" = 400, \"0-1\" = 700 }}"),
            ));
        };
        if !variants
            .iter()
            .any(|v| v.knobs.iter().any(|(k, _)| k == knob))
        {
            return Err(at(
                key.span().start,
                format!("[costs] prices '{knob}', which no variant sets; price the knobs the lab varies"),
            ));
        }
        for (given, price) in prices {
            if number(price, 0.0..=f64::MAX).is_none() {
                return Err(at(
                    here,
                    format!(
                        "[costs] {knob}: the cost of \"{given}\" must be a number of 0 or more"
                    ),
                ));
            }
        }
        for v in variants.iter_mut() {
            let Some((_, set)) = v.knobs.iter().find(|(k, _)| k == knob) else {
                continue;
            };
            let price = prices
                .get(set)
                .and_then(|p| number(p, 0.0..=f64::MAX))
                .ok_or_else(|| {
                    at(
                        here,
                        format!("[costs] {knob} gives no cost for \"{set}\"; add \"{set}\" = N"),
                    )
                })?;
            v.cost = Some(v.cost.unwrap_or(0.0) + price);
        }
    }
    Ok(unit)
}

/// `[ratings."VARIANT"]`: the user's 0–5 rating of each variant on the
/// scorecard's criteria that perflab does not measure.
fn read_ratings(
    ratings: &Ratings,
    weights: &[(String, f64)],
    variants: &mut [Variant],
    at: &At,
) -> Result<(), LabFileError> {
    for (name, given) in ratings {
        let here = given.span().start;
        let Some(v) = variants.iter_mut().find(|v| &v.name == name) else {
            return Err(at(
                here,
                format!(
                    "[ratings] names '{name}', which is no variant; variants are named as `perflab lab FILE --dry-run` prints them"
                ),
            ));
        };
        let toml::Value::Table(criteria) = given.get_ref() else {
            return Err(at(
                given.span().start,
                format!(
                    "[ratings.\"{}\"] needs criteria and ratings, e.g. ease = 4",
                    v.name
                ),
            ));
        };
        for (criterion, rating) in criteria {
            if MEASURED.contains(&criterion.as_str()) {
                return Err(at(
                    here,
                    format!("'{criterion}' is measured, not rated; leave it out of [ratings]"),
                ));
            }
            if !weights.iter().any(|(c, _)| c == criterion) {
                return Err(at(
                    here,
                    format!("'{criterion}' is rated but not weighed; add {criterion} = WEIGHT to [scorecard]"),
                ));
            }
            let r = number(rating, 0.0..=TOP).ok_or_else(|| {
                at(
                    here,
                    format!("the rating of '{criterion}' must be 0 to {TOP}"),
                )
            })?;
            v.ratings.push((criterion.clone(), r));
        }
    }
    Ok(())
}

/// One variant's figures a score is made of: its mean peak, its p95 at
/// the peak (seconds), its cost and its ratings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Figures<'a> {
    pub(crate) peak: Option<f64>,
    pub(crate) p95_s: Option<f64>,
    pub(crate) cost: Option<f64>,
    pub(crate) ratings: &'a [(String, f64)],
}

/// One variant's score: each criterion on the 0–5 scale, and the
/// weighted total.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Score {
    pub(crate) criteria: Vec<(String, f64)>,
    pub(crate) total: f64,
}

/// The peak per unit of cost.
pub(crate) fn value_of(peak: Option<f64>, cost: Option<f64>) -> Option<f64> {
    Some(peak? / cost.filter(|c| *c > 0.0)?)
}

/// Every variant's score, or none for a variant lacking a measured figure
/// (no completed run). The best measured figure among the variants
/// scores [`TOP`], the others in proportion.
pub(crate) fn scores(weights: &[(String, f64)], all: &[Figures<'_>]) -> Vec<Option<Score>> {
    let best = |f: &dyn Fn(&Figures<'_>) -> Option<f64>, highest: bool| {
        all.iter().filter_map(f).fold(None, |acc: Option<f64>, x| {
            Some(acc.map_or(x, |a| if highest { a.max(x) } else { a.min(x) }))
        })
    };
    let top_peak = best(&|f| f.peak, true);
    let low_p95 = best(&|f| f.p95_s, false);
    let top_value = best(&|f| value_of(f.peak, f.cost), true);
    all.iter()
        .map(|f| {
            let mut criteria = Vec::new();
            for (name, _) in weights {
                let s = match name.as_str() {
                    "throughput" => TOP * f.peak? / top_peak.filter(|t| *t > 0.0)?,
                    "latency" => TOP * low_p95? / f.p95_s.filter(|p| *p > 0.0)?,
                    "value" => TOP * value_of(f.peak, f.cost)? / top_value.filter(|t| *t > 0.0)?,
                    _ => f.ratings.iter().find(|(c, _)| c == name)?.1,
                };
                criteria.push((name.clone(), s));
            }
            let sum: f64 = weights.iter().map(|(_, w)| w).sum();
            let total = weights
                .iter()
                .zip(&criteria)
                .map(|((_, w), (_, s))| w * s)
                .sum::<f64>()
                / sum;
            Some(Score { criteria, total })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Weights that sum to 120%, as such an evaluation's did (installation 20%,
    /// compatibility 20%, performance 40%, value 40%): ratings of 3.6,
    /// 3.6 and the best of both measured criteria make 4.53; 4.3, 4.3
    /// and 4/5 of the best make 4.1.
    #[test]
    fn the_score_divides_by_the_weights_sum() {
        let weights: Vec<(String, f64)> = [
            ("installation", 20.0),
            ("compatibility", 20.0),
            ("throughput", 40.0),
            ("value", 40.0),
        ]
        .iter()
        .map(|(n, w)| (n.to_string(), *w))
        .collect();
        let rated = |i: f64, c: f64| {
            vec![
                ("installation".to_string(), i),
                ("compatibility".to_string(), c),
            ]
        };
        let (jni, emulex) = (rated(3.6, 3.6), rated(4.3, 4.3));
        // JNI: the fastest and the best value; Emulex: 4/5 of both.
        let figures = [
            Figures {
                peak: Some(123.1),
                p95_s: None,
                cost: Some(1.0),
                ratings: &jni,
            },
            Figures {
                peak: Some(123.1 * 0.8),
                p95_s: None,
                cost: Some(1.0),
                ratings: &emulex,
            },
        ];
        let s = scores(&weights, &figures);
        let jni = s[0].as_ref().unwrap();
        let emulex = s[1].as_ref().unwrap();
        assert!(
            (jni.total - (3.6 * 20.0 * 2.0 + 5.0 * 80.0) / 120.0).abs() < 1e-9,
            "{jni:?}"
        );
        assert!(
            (emulex.total - (4.3 * 40.0 + 4.0 * 80.0) / 120.0).abs() < 1e-9,
            "{emulex:?}"
        );
        assert_eq!(emulex.criteria[2].0, "throughput");
        assert!((emulex.criteria[2].1 - 4.0).abs() < 1e-9);
    }

    /// The lowest p95 scores 5 and a p95 twice as long 2.5; a variant
    /// without a measured peak has no score.
    #[test]
    fn latency_scores_the_lowest_best_and_a_missing_figure_scores_nothing() {
        let weights = vec![
            ("latency".to_string(), 1.0),
            ("throughput".to_string(), 1.0),
        ];
        let figures = [
            Figures {
                peak: Some(100.0),
                p95_s: Some(0.010),
                cost: None,
                ratings: &[],
            },
            Figures {
                peak: Some(100.0),
                p95_s: Some(0.020),
                cost: None,
                ratings: &[],
            },
            Figures {
                peak: None,
                p95_s: None,
                cost: None,
                ratings: &[],
            },
        ];
        let s = scores(&weights, &figures);
        assert_eq!(s[0].as_ref().unwrap().criteria[0].1, 5.0);
        assert_eq!(s[1].as_ref().unwrap().criteria[0].1, 2.5);
        assert_eq!(s[1].as_ref().unwrap().total, 3.75);
        assert!(s[2].is_none());
    }
}
