//! The web workload on generators: what the coordinator's started
//! workload sends ([`Form`]: its validated options with the request
//! headers as given — a secret header crosses to the generator in TLS and
//! is stored nowhere — the file set as built, and the addresses the
//! coordinator resolved), and the workload a generator builds from it.
//! Nothing is prepared on a generator: the coordinator wrote the files
//! into a managed server and checked a request before the sweep.

use super::fileset::{FileSet, WebFile};
use super::session::{Shared, WebWorkload};
use super::WebSpec;
use crate::error::PlanError;
use crate::target::http::HttpBase;
use crate::workload::{Driver, Started};
use std::net::SocketAddr;
use std::sync::Arc;

/// What a generator builds the web workload from.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct Form {
    /// The options (their headers masked, as a plan stores them).
    spec: WebSpec,
    /// The request headers as given.
    headers: Vec<(String, String)>,
    files: Vec<WebFile>,
    bases: Vec<(HttpBase, SocketAddr)>,
}

/// The form of a started web workload.
pub(super) fn form(
    spec: &WebSpec,
    files: &FileSet,
    bases: &[(HttpBase, SocketAddr)],
) -> Option<serde_json::Value> {
    serde_json::to_value(Form {
        spec: spec.clone(),
        headers: spec.headers.clone(),
        files: files.files.clone(),
        bases: bases.to_vec(),
    })
    .ok()
}

/// Builds the workload from its form and hands it to `driver`.
pub(super) fn build<D: Driver>(form: serde_json::Value, driver: D) -> anyhow::Result<D::Output> {
    let Form {
        mut spec,
        headers,
        files,
        bases,
    } = serde_json::from_value(form)
        .map_err(|e| PlanError::new(format!("the web workload's form is not one: {e}")))?;
    if files.is_empty() || bases.is_empty() {
        return Err(PlanError::new("the web workload's form names no file or no address").into());
    }
    spec.headers = headers;
    let shared = Shared::new(&spec, FileSet::of(files), &bases)?;
    driver.drive(
        Arc::new(WebWorkload {
            shared: Arc::new(shared),
            form: None,
        }),
        Started::default(),
    )
}
