//! Certificates made by the tests: a CA, server certificates it signs (valid, for the
//! wrong name, expired), client certificates for `cert` authentication.
use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, in PEM.
pub struct Pair {
    pub cert: String,
    pub key: String,
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        Ca { issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().expect("CA key")).expect("CA certificate") }
    }

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A server certificate for `names` (DNS names or IP addresses).
    pub fn server(&self, names: &[&str]) -> Pair {
        self.sign(names, names.first().copied().unwrap_or("server"), false)
    }

    /// A server certificate for `names` that expired in 2020.
    pub fn expired(&self, names: &[&str]) -> Pair {
        self.sign(names, names.first().copied().unwrap_or("server"), true)
    }

    /// A client certificate for database user `user` (its common name).
    pub fn client(&self, user: &str) -> Pair {
        self.sign(&[], user, false)
    }

    fn sign(&self, names: &[&str], common_name: &str, expired: bool) -> Pair {
        let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).expect("params");
        params.distinguished_name.push(DnType::CommonName, common_name);
        if expired {
            params.not_before = rcgen::date_time_ymd(2019, 1, 1);
            params.not_after = rcgen::date_time_ymd(2020, 1, 1);
        }
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &*self.issuer).expect("sign");
        Pair { cert: cert.pem(), key: key.serialize_pem() }
    }
}

/// Write `text` to `dir/name` with `mode`; the path.
pub fn write(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write a certificate file");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    path
}
