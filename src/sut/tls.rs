//! TLS for HTTPS targets: the roots a server's certificate is checked
//! against — the file of `--cacert`, else the system's bundle — or, with
//! `--insecure`, no check of the certificate at all (the handshake's
//! signatures are still verified, so the session is encrypted, only not
//! authenticated). The set-up itself is `wire::tls`'s, shared with the
//! agents.

use crate::error::PlanError;
use crate::wire::tls::Trust;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use std::sync::Arc;

/// How a client checks an HTTPS server.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct TlsOptions {
    /// The CA certificates (PEM) to trust instead of the system's.
    pub(crate) cacert: Option<std::path::PathBuf>,
    /// Accept any certificate.
    pub(crate) insecure: bool,
}

/// The client configuration `options` ask for.
pub(crate) fn client_config(options: &TlsOptions) -> Result<Arc<ClientConfig>, PlanError> {
    crate::wire::tls::client_config(&match (&options.cacert, options.insecure) {
        (_, true) => Trust::Any,
        (Some(file), false) => Trust::CaFile {
            file: file.clone(),
            flag: "--cacert",
        },
        (None, false) => Trust::System,
    })
}

/// The name a server's certificate must carry: the URL's host.
pub(crate) fn server_name(host: &str) -> Result<ServerName<'static>, PlanError> {
    crate::wire::tls::server_name(host, "--target")
}
