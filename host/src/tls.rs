//! TLS for every connection Almanac opens (PostgreSQL and webhooks): trust stores,
//! certificate and key files, the verifiers libpq's sslmodes need, and naming why a
//! handshake failed. rustls with the ring provider: no OpenSSL to build or link.
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {what} {path:?}: {cause}")]
    Read { what: &'static str, path: PathBuf, cause: String },
    #[error("{what} {path:?} holds no certificate")]
    NoCertificate { what: &'static str, path: PathBuf },
    #[error(
        "private key file {0:?} has group or world access; permissions should be u=rw (0600) or less if owned by the current user, or u=rw,g=r (0640) or less if owned by root"
    )]
    KeyPermissions(PathBuf),
    #[error("the client certificate {cert:?} and key {key:?} do not go together: {cause}")]
    ClientAuth { cert: PathBuf, key: PathBuf, cause: String },
    #[error("the operating system's trust store has no certificate ({0})")]
    NoSystemRoots(String),
}

/// How a server's certificate is checked.
#[derive(Clone)]
pub enum Verify {
    /// Not at all: encryption only (libpq's `require` without a root certificate).
    Nothing,
    /// The chain up to one of these roots, not the name (`verify-ca`).
    Chain(Arc<RootCertStore>),
    /// The chain and the host name (`verify-full`, and every https receiver).
    Full(Arc<RootCertStore>),
}

/// A client certificate and its key, for `cert` authentication.
pub struct Identity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    pub files: (PathBuf, PathBuf),
}

pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A client configuration checking servers as `verify` says, presenting `identity`.
pub fn client_config(verify: &Verify, identity: Option<Identity>) -> Result<ClientConfig, TlsError> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("the ring provider supports the default TLS versions");
    let verifier: Arc<dyn ServerCertVerifier> = match verify {
        Verify::Nothing => Arc::new(Unchecked(provider)),
        Verify::Chain(roots) => Arc::new(ChainOnly(webpki(roots, provider))),
        Verify::Full(roots) => webpki(roots, provider),
    };
    let builder = builder.dangerous().with_custom_certificate_verifier(verifier);
    match identity {
        None => Ok(builder.with_no_client_auth()),
        Some(Identity { chain, key, files: (cert, key_file) }) => {
            builder.with_client_auth_cert(chain, key).map_err(|e| TlsError::ClientAuth { cert, key: key_file, cause: e.to_string() })
        }
    }
}

fn webpki(roots: &Arc<RootCertStore>, provider: Arc<CryptoProvider>) -> Arc<WebPkiServerVerifier> {
    WebPkiServerVerifier::builder_with_provider(roots.clone(), provider).build().expect("a root store with at least one certificate")
}

/// The certificates in a PEM file.
pub fn certificates(path: &Path, what: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let read = |cause: String| TlsError::Read { what, path: path.to_owned(), cause };
    let bytes = std::fs::read(path).map_err(|e| read(e.to_string()))?;
    let certs = CertificateDer::pem_slice_iter(&bytes).collect::<Result<Vec<_>, _>>().map_err(|e| read(e.to_string()))?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { what, path: path.to_owned() });
    }
    Ok(certs)
}

/// The roots in a PEM file (a private CA, `sslrootcert`, a topic's `ca_file`).
pub fn roots_from(path: &Path, what: &'static str) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(path, what)? {
        roots.add(cert).map_err(|e| TlsError::Read { what, path: path.to_owned(), cause: e.to_string() })?;
    }
    Ok(roots)
}

/// The operating system's trust store (libpq's `sslrootcert=system`).
pub fn system_roots() -> Result<RootCertStore, TlsError> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let errors: Vec<String> = found.errors.iter().map(|e| e.to_string()).collect();
        return Err(TlsError::NoSystemRoots(if errors.is_empty() { "none found".into() } else { errors.join("; ") }));
    }
    Ok(roots)
}

/// What an https receiver is checked against: the Mozilla roots (webpki-roots), the
/// operating system's store when it has one, and `extra` (a private CA).
pub fn web_roots(extra: Option<&Path>) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    if let Ok(system) = system_roots() {
        roots.roots.extend(system.roots);
    }
    if let Some(path) = extra {
        roots.roots.extend(roots_from(path, "CA file")?.roots);
    }
    Ok(roots)
}

/// A client's private key, refused (as libpq does) when others may read it.
pub fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let read = |cause: String| TlsError::Read { what: "private key file", path: path.to_owned(), cause };
    let meta = std::fs::metadata(path).map_err(|e| read(e.to_string()))?;
    use std::os::unix::fs::MetadataExt;
    let mode = meta.mode() & 0o777;
    let too_open = if meta.uid() == 0 && current_uid() != 0 { mode & 0o037 != 0 } else { mode & 0o077 != 0 };
    if too_open {
        return Err(TlsError::KeyPermissions(path.to_owned()));
    }
    let bytes = std::fs::read(path).map_err(|e| read(e.to_string()))?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| read(e.to_string()))
}

fn current_uid() -> u32 {
    // SAFETY: getuid cannot fail and has no preconditions.
    unsafe { libc::getuid() }
}

/// Why a TLS handshake failed, in words, if the cause is a certificate's.
pub fn cause(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let rustls_error = std::iter::successors(Some(error), |e| e.source()).find_map(rustls_error)?;
    let rustls::Error::InvalidCertificate(certificate) = &rustls_error else {
        return Some(format!("TLS: {rustls_error}"));
    };
    Some(match certificate {
        CertificateError::UnknownIssuer => "the server's certificate is signed by an unknown issuer (not by the trusted CA)".into(),
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => "the server's certificate has expired".into(),
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => "the server's certificate is not valid yet".into(),
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            format!("the server's certificate does not match the host name ({certificate})")
        }
        CertificateError::BadSignature => "the server's certificate is not signed by the trusted CA (bad signature)".into(),
        CertificateError::Revoked => "the server's certificate is revoked".into(),
        other => format!("the server's certificate is not acceptable: {other}"),
    })
}

/// The rustls error `e` is or wraps: an io error hides the error it wraps from the
/// `source()` chain (its `source()` is the inner error's source, not the inner error).
fn rustls_error(e: &(dyn std::error::Error + 'static)) -> Option<rustls::Error> {
    if let Some(found) = e.downcast_ref::<rustls::Error>() {
        return Some(found.clone());
    }
    let inner = e.downcast_ref::<std::io::Error>()?.get_ref()?;
    rustls_error(inner)
}

/// Accepts any certificate (the handshake's signatures are still checked).
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Checks the chain to the roots and ignores the name (libpq's `verify-ca`).
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. })) => {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
