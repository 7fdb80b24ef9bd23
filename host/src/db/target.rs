//! Where and how to connect: a connection string and the environment, read as libpq
//! reads them (`conninfo`), turned into tokio-postgres's configuration and the TLS
//! connector that libpq's `sslmode` asks for.
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_postgres_rustls::MakeRustlsConnect;

use super::conninfo::{self, Params};
use super::error::{error_chain, DbError};
use crate::tls::{self, Identity, Verify};

/// The TLS connector of every connection (and cancel request) to one database.
pub type Tls = MakeRustlsConnect;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(text: &str) -> Result<SslMode, DbError> {
        Ok(match text {
            "disable" => SslMode::Disable,
            // libpq's `allow` tries plaintext first; tokio-postgres cannot, so it asks for
            // TLS first and falls back to plaintext, as `prefer` does.
            "allow" | "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => return Err(DbError::InvalidUrl(format!("invalid sslmode {other:?} (one of disable, allow, prefer, require, verify-ca, verify-full)"))),
        })
    }

    fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// One database as Almanac connects to it.
#[derive(Clone)]
pub struct Target {
    pub config: tokio_postgres::Config,
    pub tls: Tls,
    pub sslmode: SslMode,
    /// Whether this leads through a transaction-pooling pooler (`--pooler`): then no
    /// statement may outlive its transaction, and the server refuses session options.
    pub pooled: bool,
    /// `application_name` before a connection's role is added to it.
    base_name: String,
}

impl Target {
    /// Read `text` with this process's environment and home directory.
    pub fn new(text: &str) -> Result<Target, DbError> {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        Target::read(text, &|name| std::env::var(name).ok(), home.as_deref())
    }

    pub fn read(text: &str, env: &dyn Fn(&str) -> Option<String>, home: Option<&Path>) -> Result<Target, DbError> {
        let mut params = conninfo::read(text, env)?;
        if !params.contains_key("host") && !params.contains_key("hostaddr") {
            // libpq's default: the local server's socket directory.
            let socket = "/var/run/postgresql";
            params.insert("host".into(), if Path::new(socket).is_dir() { socket.into() } else { "localhost".into() });
        }
        if !params.contains_key("user") {
            let user = env("USER")
                .or_else(|| env("LOGNAME"))
                .ok_or_else(|| DbError::InvalidUrl("no user given (user=, PGUSER) and none known from the environment".into()))?;
            params.insert("user".into(), user);
        }
        if !params.contains_key("password") {
            if let Some(password) = conninfo::password_file(&params, home)? {
                params.insert("password".into(), password);
            }
        }
        let base_name = params.get("application_name").or(params.get("fallback_application_name")).cloned().unwrap_or_else(|| "almanac".into());
        let mut config: tokio_postgres::Config = conninfo::passed(&params).parse().map_err(|e: tokio_postgres::Error| DbError::InvalidUrl(error_chain(&e)))?;
        let (sslmode, tls) = ssl(&params, &config, home)?;
        config.ssl_mode(match sslmode {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            _ => tokio_postgres::config::SslMode::Require,
        });
        config.application_name(&base_name);
        // A primary that dies without closing its sockets (a power loss, a partition, a
        // failover behind a virtual IP) must not hold a host forever: each connection
        // attempt (each host of a multi-host list) gives up after 10 s, an idle
        // connection is probed after 30 s and dropped after 3 probes 10 s apart, and
        // data the server leaves unacknowledged for 60 s ends the connection. Each of
        // these is the user's when given.
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(std::time::Duration::from_secs(10));
        }
        if !params.contains_key("keepalives_idle") {
            config.keepalives_idle(std::time::Duration::from_secs(30));
        }
        if !params.contains_key("keepalives_interval") {
            config.keepalives_interval(std::time::Duration::from_secs(10));
        }
        if !params.contains_key("keepalives_retries") {
            config.keepalives_retries(3);
        }
        if !params.contains_key("tcp_user_timeout") {
            config.tcp_user_timeout(std::time::Duration::from_secs(60));
        }
        Ok(Target { config, tls, sslmode, pooled: false, base_name })
    }

    /// The same target for connections doing `role` (worker, listen, dispatcher, ...),
    /// so operators tell them apart in `pg_stat_activity`.
    pub fn role(&self, role: &str) -> Target {
        let mut target = self.clone();
        target.config.application_name(format!("{} {role}", self.base_name));
        target
    }

    pub async fn connect(
        &self,
    ) -> Result<
        (
            tokio_postgres::Client,
            tokio_postgres::Connection<tokio_postgres::Socket, <Tls as tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket>>::Stream>,
        ),
        tokio_postgres::Error,
    > {
        self.config.connect(self.tls.clone()).await
    }

    /// Where this target leads, without the password: for messages.
    pub fn describe(&self) -> String {
        let hosts: Vec<String> = self
            .config
            .get_hosts()
            .iter()
            .map(|h| match h {
                tokio_postgres::config::Host::Tcp(name) => name.clone(),
                tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
            })
            .collect();
        let ports: Vec<String> = self.config.get_ports().iter().map(u16::to_string).collect();
        format!(
            "{} port {} database {} as {} (sslmode {})",
            hosts.join(","),
            if ports.is_empty() { "5432".into() } else { ports.join(",") },
            self.config.get_dbname().unwrap_or("(the user's)"),
            self.config.get_user().unwrap_or_default(),
            self.sslmode.name()
        )
    }
}

/// A connector for a target without TLS (a private cluster's socket).
pub fn plain() -> Tls {
    MakeRustlsConnect::new(tls::client_config(&Verify::Nothing, None).expect("no files to read"))
}

/// libpq's sslmode semantics: what to verify, against which roots, with which client
/// certificate. Files named explicitly must be readable; libpq's default files under
/// `~/.postgresql/` are used when present.
fn ssl(params: &Params, config: &tokio_postgres::Config, home: Option<&Path>) -> Result<(SslMode, Tls), DbError> {
    let all_unix = config.get_hosts().iter().all(|h| matches!(h, tokio_postgres::config::Host::Unix(_))) && config.get_hostaddrs().is_empty();
    let root_param = params.get("sslrootcert").map(String::as_str);
    let mut mode = match params.get("sslmode") {
        Some(mode) => SslMode::parse(mode)?,
        // libpq 16: the system's roots are only worth using with full verification.
        None if root_param == Some("system") => SslMode::VerifyFull,
        None => SslMode::Prefer,
    };
    if all_unix {
        // libpq ignores sslmode on Unix-domain sockets; so does Almanac.
        mode = SslMode::Disable;
    }
    if mode == SslMode::Disable {
        return Ok((mode, plain()));
    }
    let invalid = |e: tls::TlsError| DbError::InvalidUrl(e.to_string());
    let default_dir = home.map(|h| h.join(".postgresql"));
    let roots = match root_param {
        Some("system") => {
            if mode != SslMode::VerifyFull {
                return Err(DbError::InvalidUrl(format!("weak sslmode {:?} may not be used with sslrootcert=system (use \"verify-full\")", mode.name())));
            }
            Some(tls::system_roots().map_err(invalid)?)
        }
        Some(file) => Some(tls::roots_from(Path::new(file), "root certificate file").map_err(invalid)?),
        None => match default_dir.as_ref().map(|d| d.join("root.crt")).filter(|f| f.exists()) {
            Some(file) => Some(tls::roots_from(&file, "root certificate file").map_err(invalid)?),
            None => None,
        },
    };
    let verify = match (mode, roots) {
        (SslMode::VerifyFull, Some(roots)) => Verify::Full(Arc::new(roots)),
        (SslMode::VerifyCa, Some(roots)) => Verify::Chain(Arc::new(roots)),
        (SslMode::VerifyCa | SslMode::VerifyFull, None) => {
            let expected = default_dir.map(|d| d.join("root.crt").display().to_string()).unwrap_or_else(|| "~/.postgresql/root.crt".into());
            return Err(DbError::InvalidUrl(format!(
                "sslmode={}: root certificate file {expected:?} does not exist; either provide the file (sslrootcert=FILE), use the system's trusted roots with sslrootcert=system, or change sslmode to disable server certificate verification",
                mode.name()
            )));
        }
        // As libpq: with a root certificate at hand, `require` and `prefer` check the chain.
        (_, Some(roots)) => Verify::Chain(Arc::new(roots)),
        (_, None) => Verify::Nothing,
    };
    let cert = match params.get("sslcert") {
        Some(file) => Some(PathBuf::from(file)),
        None => default_dir.as_ref().map(|d| d.join("postgresql.crt")).filter(|f| f.exists()),
    };
    let identity = match cert {
        None => None,
        Some(cert) => {
            let key = params.get("sslkey").map(PathBuf::from).unwrap_or_else(|| cert.with_file_name("postgresql.key"));
            let chain = tls::certificates(&cert, "client certificate file").map_err(invalid)?;
            let private = tls::private_key(&key).map_err(invalid)?;
            Some(Identity { chain, key: private, files: (cert, key) })
        }
    };
    let client = tls::client_config(&verify, identity).map_err(invalid)?;
    Ok((mode, MakeRustlsConnect::new(client)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Target, DbError> {
        Target::read(text, &|name| (name == "USER").then(|| "me".to_owned()), None)
    }

    #[test]
    fn sslmode_follows_libpq() {
        assert_eq!(read("host=db.example").unwrap().sslmode, SslMode::Prefer);
        assert_eq!(read("host=/run/pg sslmode=verify-full").unwrap().sslmode, SslMode::Disable, "sockets never use TLS");
        let no_root = read("host=db.example sslmode=verify-full").err().unwrap().to_string();
        assert!(no_root.contains("does not exist") && no_root.contains("sslrootcert=system"), "{no_root}");
        let weak = read("host=db.example sslmode=require sslrootcert=system").err().unwrap().to_string();
        assert!(weak.contains("weak sslmode"), "{weak}");
        let missing = read("host=db.example sslmode=verify-ca sslrootcert=/nonexistent/ca.pem").err().unwrap().to_string();
        assert!(missing.contains("/nonexistent/ca.pem"), "{missing}");
        assert!(read("host=db.example sslmode=sometimes").err().unwrap().to_string().contains("one of disable"));
    }

    #[test]
    fn connections_are_named_by_their_role() {
        let target = read("postgres://u:secret@db.example/shop").unwrap();
        assert_eq!(target.role("worker").config.get_application_name(), Some("almanac worker"));
        let named = read("host=h application_name=billing").unwrap();
        assert_eq!(named.role("listen").config.get_application_name(), Some("billing listen"));
        assert!(!target.describe().contains("secret"));
        assert!(target.describe().contains("db.example"));
    }
}
