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
use crate::sut::http::HttpBase;
use crate::workload::{Started, SweepDriver};
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

/// The most addresses a form names (one per loopback address or host).
const MAX_BASES: usize = 256;

/// The form a generator was sent, checked field by field: it came from
/// outside the process, and what it holds is written into requests.
pub(super) fn read(form: serde_json::Value) -> Result<Form, PlanError> {
    let form: Form = serde_json::from_value(form)
        .map_err(|e| PlanError::new(format!("the web workload's form is not one: {e}")))?;
    form.check().map_err(PlanError::new)?;
    Ok(form)
}

impl Form {
    /// One line naming the first field a generator cannot use: a header
    /// that is not one line of `Name: value`, a file path or an address
    /// that would break the request line or the Host header, a size class
    /// or weight out of range, options a run refuses.
    fn check(&self) -> Result<(), String> {
        self.check_headers()?;
        if self.files.is_empty() || self.bases.is_empty() {
            return Err("the web workload's form names no file or no address".to_string());
        }
        if self.bases.len() > MAX_BASES {
            return Err(format!(
                "form.bases names {} addresses; at most {MAX_BASES}",
                self.bases.len()
            ));
        }
        for (i, (base, _)) in self.bases.iter().enumerate() {
            base.check()
                .map_err(|why| format!("form.bases[{i}]: {why}"))?;
        }
        self.check_files()?;
        self.check_spec()
    }

    /// Each header is one line of `Name: value`, and none is one perflab
    /// sets itself.
    fn check_headers(&self) -> Result<(), String> {
        for (i, (name, value)) in self.headers.iter().enumerate() {
            let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
            if name.is_empty() || !name.bytes().all(token) {
                return Err(format!("form.headers[{i}]: the name is not an HTTP token"));
            }
            if value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
                return Err(format!(
                    "form.headers[{i}] ({name}): the value holds a line break or control character"
                ));
            }
            if ["host", "content-length", "transfer-encoding", "connection"]
                .contains(&name.to_ascii_lowercase().as_str())
            {
                return Err(format!("form.headers[{i}]: perflab sets {name} itself"));
            }
        }
        Ok(())
    }

    /// Each file's path fits a request line, its class exists, its weight
    /// is positive, and the weights add up to a number.
    fn check_files(&self) -> Result<(), String> {
        let mut total = 0.0;
        for (i, file) in self.files.iter().enumerate() {
            // Percent-encoded: visible ASCII, no space, no query.
            if !file
                .path
                .bytes()
                .all(|b| b.is_ascii_graphic() && b != b'?' && b != b'#')
            {
                return Err(format!(
                    "form.files[{i}].path holds a space, a control character, '?' or '#'"
                ));
            }
            if file.class >= super::fileset::CLASS_NAMES.len() {
                return Err(format!(
                    "form.files[{i}].class is {}; there are {} size classes",
                    file.class,
                    super::fileset::CLASS_NAMES.len()
                ));
            }
            if !(file.weight.is_finite() && file.weight > 0.0) {
                return Err(format!(
                    "form.files[{i}].weight is {}; give a positive number",
                    file.weight
                ));
            }
            total += file.weight;
        }
        if !total.is_finite() {
            return Err("form.files: the weights add up to more than a number".to_string());
        }
        Ok(())
    }

    /// The options a run refuses are refused here too.
    fn check_spec(&self) -> Result<(), String> {
        let spec = &self.spec;
        if spec.targets.is_some() {
            return Err(
                "form.spec.targets: a targets file's requests are sent by the run that read it"
                    .to_string(),
            );
        }
        if !(1..=super::MAX_PIPELINE).contains(&spec.pipeline) {
            return Err(format!(
                "form.spec.pipeline is {}; give 1 to {}",
                spec.pipeline,
                super::MAX_PIPELINE
            ));
        }
        if spec.pipeline > 1 && spec.connection == super::Connection::Close {
            return Err(
                "form.spec.pipeline: a connection closed after each request carries one request"
                    .to_string(),
            );
        }
        if !(0.0..=1.0).contains(&spec.verify_share) {
            return Err(format!(
                "form.spec.verify_share is {}; give 0 to 1",
                spec.verify_share
            ));
        }
        Ok(())
    }
}

/// Builds the workload from its form and hands it to `driver`.
pub(super) fn build<D: SweepDriver>(
    form: serde_json::Value,
    driver: D,
) -> anyhow::Result<D::Output> {
    let Form {
        mut spec,
        headers,
        files,
        bases,
    } = read(form)?;
    spec.headers = headers;
    let shared = Shared::new(&spec, FileSet::of(files), &bases, None, None)?;
    driver.drive(
        Arc::new(WebWorkload {
            shared: Arc::new(shared),
            form: None,
        }),
        Started::default(),
    )
}
