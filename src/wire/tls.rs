//! TLS set-up (rustls with the *ring* provider) for both ends: what a
//! client trusts — the system's roots, a CA file, one certificate pinned
//! by its SHA-256 fingerprint, or (`--insecure`) any certificate — and a
//! server's identity, from PEM files or made on the spot (self-signed,
//! by rcgen). A fingerprint is written as `openssl x509 -fingerprint
//! -sha256` writes it: 32 bytes in upper-case hex pairs joined by colons.

use crate::error::PlanError;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use sha2::Digest;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a peer's certificate was refused, for the refusals users meet:
/// rustls names them only by a variant (`UnknownIssuer`, …), and a CA's
/// certificate shown as a server's only inside `Other`
/// (`CaUsedAsEndEntity`, from webpki).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    CaAsServer,
    UnknownIssuer,
    WrongName,
    Expired,
    NotYetValid,
    BadSignature,
    Revoked,
}

impl Refusal {
    /// The refusal `why` is, if it is one of these.
    pub(crate) fn of(why: &rustls::CertificateError) -> Option<Refusal> {
        use rustls::CertificateError as E;
        Some(match why {
            E::UnknownIssuer => Refusal::UnknownIssuer,
            E::NotValidForName | E::NotValidForNameContext { .. } => Refusal::WrongName,
            E::Expired | E::ExpiredContext { .. } => Refusal::Expired,
            E::NotValidYet | E::NotValidYetContext { .. } => Refusal::NotYetValid,
            E::BadSignature => Refusal::BadSignature,
            E::Revoked => Refusal::Revoked,
            E::Other(other) if format!("{other:?}").contains("CaUsedAsEndEntity") => {
                Refusal::CaAsServer
            }
            _ => return None,
        })
    }

    /// In words a user can act on.
    pub(crate) fn words(self) -> &'static str {
        match self {
            Refusal::CaAsServer => {
                "it shows a CA's certificate as its own: a CA certificate signs certificates and cannot be a server's"
            }
            Refusal::UnknownIssuer => "its certificate is signed by no CA this side trusts",
            Refusal::WrongName => "its certificate is not for the name it was reached by",
            Refusal::Expired => "its certificate has expired",
            Refusal::NotYetValid => "its certificate is not valid yet",
            Refusal::BadSignature => "its certificate's signature does not verify",
            Refusal::Revoked => "its certificate is revoked",
        }
    }
}

/// The system's bundle of trusted roots (Debian's ca-certificates).
const SYSTEM_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// What a client accepts as the server's certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Trust {
    /// Signed by a root of the system's bundle, for the name asked.
    System,
    /// Signed by a certificate of this PEM file (named by `flag` in errors).
    CaFile { file: PathBuf, flag: &'static str },
    /// Exactly a certificate with one of these SHA-256 fingerprints,
    /// whatever its names and signer: self-signed agents'.
    Pinned(Vec<[u8; 32]>),
    /// Any certificate (the session is encrypted, not authenticated).
    Any,
}

/// The client configuration `trust` asks for.
pub(crate) fn client_config(trust: &Trust) -> Result<Arc<ClientConfig>, PlanError> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| PlanError::new(format!("TLS cannot be set up: {e}")))?;
    let roots = match trust {
        Trust::Pinned(pin) => {
            return Ok(Arc::new(
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(Accepting {
                        provider,
                        pins: Some(pin.clone()),
                    }))
                    .with_no_client_auth(),
            ))
        }
        Trust::Any => {
            return Ok(Arc::new(
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(Accepting {
                        provider,
                        pins: None,
                    }))
                    .with_no_client_auth(),
            ))
        }
        Trust::CaFile { file, flag } => roots_from(file, flag)?,
        Trust::System => roots_from(Path::new(SYSTEM_ROOTS), "the system's CA bundle")
            .unwrap_or_else(|_| RootCertStore::empty()),
    };
    Ok(Arc::new(
        builder.with_root_certificates(roots).with_no_client_auth(),
    ))
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The most a PEM file perflab reads may hold: a certificate chain or a
/// key is a few kilobytes, a system's whole CA bundle about 250 KiB.
pub(crate) const MAX_PEM: u64 = 4 << 20;

/// A PEM file's bytes: a regular file of at most [`MAX_PEM`] bytes
/// (`/dev/zero` is refused, not read for ever).
fn read_pem(file: &Path) -> Result<Vec<u8>, String> {
    crate::util::read_bounded(file, MAX_PEM).map_err(|e| e.to_string())
}

/// The certificates of a PEM file as roots; at least one. `flag` names
/// where the file came from.
fn roots_from(file: &Path, flag: &str) -> Result<RootCertStore, PlanError> {
    let bad = |why: String| {
        PlanError::new(format!(
            "{flag} {}: {why}; give a PEM file holding the CA certificate that signed the server's",
            file.display()
        ))
    };
    let mut roots = RootCertStore::empty();
    let pem = read_pem(file).map_err(bad)?;
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| bad(e.to_string()))?;
        roots.add(cert).map_err(|e| bad(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(bad("it holds no certificate".to_string()));
    }
    Ok(roots)
}

/// The name a server's certificate must carry: the host asked for.
pub(crate) fn server_name(host: &str, flag: &str) -> Result<ServerName<'static>, PlanError> {
    ServerName::try_from(host.to_string()).map_err(|e| {
        PlanError::flag(
            flag,
            format!("'{host}' cannot name a TLS server: {e}"),
            "give a DNS name or an IP address",
        )
    })
}

/// A certificate's SHA-256 fingerprint, `AB:CD:…`.
pub(crate) fn fingerprint(certificate: &[u8]) -> String {
    let digest = sha2::Sha256::digest(certificate);
    let pairs: Vec<String> = digest.iter().map(|b| format!("{b:02X}")).collect();
    pairs.join(":")
}

/// A fingerprint as given: 64 hex digits, with or without colons, in any
/// case, after an optional `sha256:` or `SHA256 Fingerprint=`.
pub(crate) fn parse_fingerprint(text: &str, flag: &str) -> Result<[u8; 32], PlanError> {
    let bad = || {
        PlanError::flag(
            flag,
            format!("'{text}' is not a SHA-256 fingerprint"),
            "give the 64 hex digits the agent printed at start (colons allowed)",
        )
    };
    let lower = text.trim().to_ascii_lowercase();
    let digits: String = lower
        .trim_start_matches("sha256 fingerprint=")
        .trim_start_matches("sha256:")
        .chars()
        .filter(|c| *c != ':')
        .collect();
    if digits.len() != 64 || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(bad());
    }
    let mut pin = [0u8; 32];
    for (i, byte) in pin.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(pin)
}

/// A server's certificate chain and key.
pub(crate) struct Identity {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

/// Shows the certificate's fingerprint, never the key.
impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("fingerprint", &self.fingerprint())
            .finish_non_exhaustive()
    }
}

impl Clone for Identity {
    fn clone(&self) -> Self {
        Identity {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

impl Identity {
    /// From PEM files: the certificate (its chain after it) and its key.
    pub(crate) fn from_files(cert: &Path, key: &Path) -> Result<Self, PlanError> {
        let bad = |flag: &str, file: &Path, why: String| {
            PlanError::flag(
                flag,
                format!("{}: {why}", file.display()),
                "give PEM files: the certificate (and its chain) and its private key",
            )
        };
        let pem = read_pem(cert).map_err(|e| bad("--tls-cert", cert, e))?;
        let chain = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad("--tls-cert", cert, e.to_string()))?;
        if chain.is_empty() {
            return Err(bad("--tls-cert", cert, "it holds no certificate".into()));
        }
        let pem = read_pem(key).map_err(|e| bad("--tls-key", key, e))?;
        let key_der = PrivateKeyDer::from_pem_slice(&pem)
            .map_err(|e| bad("--tls-key", key, format!("no private key read: {e}")))?;
        let identity = Identity {
            chain,
            key: key_der,
        };
        identity.server_config().map_err(|e| {
            bad(
                "--tls-key",
                key,
                format!("it does not go with the certificate: {e}"),
            )
        })?;
        Ok(identity)
    }

    /// A self-signed certificate for `names` (DNS names or IP addresses),
    /// with a key made now and never written anywhere.
    pub(crate) fn self_signed(names: Vec<String>) -> Result<Self, PlanError> {
        let failed =
            |e: rcgen::Error| PlanError::new(format!("cannot make a self-signed certificate: {e}"));
        let made = rcgen::generate_simple_self_signed(names).map_err(failed)?;
        let key = PrivateKeyDer::try_from(made.signing_key.serialize_der())
            .map_err(|e| PlanError::new(format!("cannot use the key just made: {e}")))?;
        Ok(Identity {
            chain: vec![made.cert.der().clone()],
            key,
        })
    }

    /// The certificate chain and the key as PEM text (for a Kubernetes
    /// Secret): `(certificates, key)`.
    pub(crate) fn pem(&self) -> (String, String) {
        let certs: String = self
            .chain
            .iter()
            .map(|c| pem_block("CERTIFICATE", c))
            .collect();
        let label = match &self.key {
            PrivateKeyDer::Pkcs1(_) => "RSA PRIVATE KEY",
            PrivateKeyDer::Sec1(_) => "EC PRIVATE KEY",
            _ => "PRIVATE KEY",
        };
        (certs, pem_block(label, self.key.secret_der()))
    }

    /// The fingerprint of the server's own certificate.
    pub(crate) fn fingerprint(&self) -> String {
        self.chain.first().map_or(String::new(), |c| fingerprint(c))
    }

    /// The server's configuration: TLS 1.2 and 1.3, no client certificate.
    pub(crate) fn server_config(&self) -> Result<Arc<ServerConfig>, rustls::Error> {
        let config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(self.chain.clone(), self.key.clone_key())?;
        Ok(Arc::new(config))
    }
}

/// One PEM block (RFC 7468): base64 in lines of 64.
fn pem_block(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in text.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// Accepts the pinned certificates, or any without pins; the
/// handshake's signatures are checked either way.
#[derive(Debug)]
struct Accepting {
    provider: Arc<CryptoProvider>,
    pins: Option<Vec<[u8; 32]>>,
}

impl ServerCertVerifier for Accepting {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let digest = sha2::Sha256::digest(end_entity);
        match &self.pins {
            Some(pins) if !pins.iter().any(|p| digest.as_slice() == p) => {
                Err(rustls::Error::General(format!(
                    "its certificate's SHA-256 fingerprint is {}",
                    fingerprint(end_entity)
                )))
            }
            _ => Ok(ServerCertVerified::assertion()),
        }
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
            &self.provider.signature_verification_algorithms,
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
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The names a self-signed certificate carries: the address listened on
/// (unless it is every address), this host's name, and loopback's. A
/// client that pins the fingerprint checks no name; one that trusts the
/// certificate as its CA (`--agent-cacert`) finds its name among these.
pub(crate) fn self_signed_names(listen: &std::net::SocketAddr) -> Vec<String> {
    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    if !listen.ip().is_unspecified() {
        names.push(listen.ip().to_string());
    }
    if let Ok(host) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let host = host.trim();
        if !host.is_empty() {
            names.push(host.to_string());
        }
    }
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_are_read_as_openssl_writes_them() {
        let identity = Identity::self_signed(vec!["localhost".into()]).unwrap();
        let printed = identity.fingerprint();
        assert_eq!(printed.len(), 32 * 3 - 1, "{printed}");
        let pin = parse_fingerprint(&printed, "--agent-fingerprint").unwrap();
        for given in [
            printed.to_lowercase(),
            printed.replace(':', ""),
            format!("sha256:{printed}"),
            format!("SHA256 Fingerprint={printed}"),
        ] {
            assert_eq!(parse_fingerprint(&given, "--f").unwrap(), pin, "{given}");
        }
        for bad in ["", "AB:CD", &printed[..94], &"zz".repeat(32)] {
            let e = parse_fingerprint(bad, "--agent-fingerprint")
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("--agent-fingerprint"), "{e}");
        }
    }

    #[test]
    fn a_cacert_without_certificates_is_refused_in_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ca.pem");
        std::fs::write(&file, "not a certificate\n").unwrap();
        let trust = |file: PathBuf| Trust::CaFile {
            file,
            flag: "--cacert",
        };
        let err = client_config(&trust(file)).unwrap_err().to_string();
        assert!(
            err.starts_with("--cacert") && err.contains("no certificate"),
            "{err}"
        );
        let err = client_config(&trust(dir.path().join("missing.pem")))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("--cacert"), "{err}");
        for trust in [Trust::System, Trust::Any, Trust::Pinned(vec![[7; 32]])] {
            assert!(client_config(&trust).is_ok());
        }
    }

    /// A key that is not the certificate's is refused at start, not at
    /// the first handshake.
    #[test]
    fn a_key_that_does_not_go_with_the_certificate_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let one = rcgen::generate_simple_self_signed(vec!["a".to_string()]).unwrap();
        let other = rcgen::KeyPair::generate().unwrap();
        let cert = dir.path().join("cert.pem");
        let key = dir.path().join("key.pem");
        std::fs::write(&cert, one.cert.pem()).unwrap();
        std::fs::write(&key, one.signing_key.serialize_pem()).unwrap();
        assert!(Identity::from_files(&cert, &key).is_ok());
        // Written as PEM and read back, an identity is itself.
        let made = Identity::self_signed(vec!["x".to_string()]).unwrap();
        let (certs, private) = made.pem();
        std::fs::write(&cert, certs).unwrap();
        std::fs::write(&key, private).unwrap();
        let read = Identity::from_files(&cert, &key).unwrap();
        assert_eq!(read.fingerprint(), made.fingerprint());
        std::fs::write(&key, other.serialize_pem()).unwrap();
        let e = Identity::from_files(&cert, &key).err().unwrap().to_string();
        assert!(
            e.starts_with("--tls-key") && e.contains("does not go"),
            "{e}"
        );
        let e = Identity::from_files(&key, &key).err().unwrap().to_string();
        assert!(e.starts_with("--tls-cert"), "{e}");
    }
}
