//! A lab's variants: each configuration of the server it compares, with
//! its knobs' values, cost and ratings, and the axes they were given on.
//! Plain data that the file reader makes and the valuation, the plan and
//! the report read.

/// One configuration: its name and its knobs' values, in the file's order.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Variant {
    pub(crate) name: String,
    pub(crate) knobs: Vec<(String, String)>,
    /// What the variant costs, in the lab's cost unit (`[costs]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cost: Option<f64>,
    /// The user's 0–5 ratings on the scorecard's criteria (`[ratings]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) ratings: Vec<(String, f64)>,
}

/// How the variants were given, for the matrix report.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Axis {
    /// The knobs of the axis (several for a zipped group).
    pub(crate) knobs: Vec<String>,
    /// Its values' labels, in order.
    pub(crate) values: Vec<String>,
}
