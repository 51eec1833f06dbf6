//! TLS for HTTPS targets (rustls with the *ring* provider): the roots a
//! server's certificate is checked against — the file of `--cacert`, else
//! the system's bundle — or, with `--insecure`, no check of the
//! certificate at all (the handshake's signatures are still verified, so
//! the session is encrypted, only not authenticated).

use crate::error::PlanError;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::path::Path;
use std::sync::Arc;

/// The system's bundle of trusted roots (Debian's ca-certificates).
const SYSTEM_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// How a client checks an HTTPS server.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TlsOptions {
    /// The CA certificates (PEM) to trust instead of the system's.
    pub cacert: Option<std::path::PathBuf>,
    /// Accept any certificate.
    pub insecure: bool,
}

/// The client configuration `options` ask for.
pub fn client_config(options: &TlsOptions) -> Result<Arc<ClientConfig>, PlanError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| PlanError::new(format!("TLS cannot be set up: {e}")))?;
    let config = if options.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth()
    } else {
        let roots = match &options.cacert {
            Some(file) => roots_from(file, "--cacert")?,
            None => roots_from(Path::new(SYSTEM_ROOTS), "the system's CA bundle")
                .unwrap_or_else(|_| RootCertStore::empty()),
        };
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    Ok(Arc::new(config))
}

/// The certificates of a PEM file as roots; at least one.
fn roots_from(file: &Path, what: &str) -> Result<RootCertStore, PlanError> {
    let bad = |why: String| {
        PlanError::flag(
            "--cacert",
            format!("{what} {}: {why}", file.display()),
            "give a PEM file holding the CA certificate that signed the server's",
        )
    };
    let mut roots = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(file).map_err(|e| bad(e.to_string()))?;
    for cert in certs {
        let cert = cert.map_err(|e| bad(e.to_string()))?;
        roots.add(cert).map_err(|e| bad(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(bad("it holds no certificate".to_string()));
    }
    Ok(roots)
}

/// The name a server's certificate must carry: the URL's host.
pub fn server_name(host: &str) -> Result<ServerName<'static>, PlanError> {
    ServerName::try_from(host.to_string()).map_err(|e| {
        PlanError::flag(
            "--target",
            format!("'{host}' cannot name a TLS server: {e}"),
            "give a DNS name or an IP address",
        )
    })
}

/// `--insecure`: any certificate passes; signatures are still checked.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cacert_without_certificates_is_refused_in_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ca.pem");
        std::fs::write(&file, "not a certificate\n").unwrap();
        let err = client_config(&TlsOptions {
            cacert: Some(file),
            insecure: false,
        })
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("--cacert") && err.contains("no certificate"),
            "{err}"
        );
        let err = client_config(&TlsOptions {
            cacert: Some(dir.path().join("missing.pem")),
            insecure: false,
        })
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("--cacert"), "{err}");
        assert!(client_config(&TlsOptions::default()).is_ok());
        assert!(client_config(&TlsOptions {
            cacert: None,
            insecure: true
        })
        .is_ok());
    }
}
