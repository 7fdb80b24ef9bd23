//! libpq's connection conventions, read the way libpq reads them: a `postgres://` URL or
//! `key=value` pairs, then the `PG*` environment for what they leave out, then the
//! password file. Parameters tokio-postgres does not know (the TLS files, `passfile`,
//! `verify-ca`/`verify-full`) are taken out here; the rest is handed to it.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::error::DbError;

/// The environment libpq reads, by parameter. A parameter given in the connection
/// string wins over its variable.
const ENVIRONMENT: &[(&str, &str)] = &[
    ("PGHOST", "host"),
    ("PGHOSTADDR", "hostaddr"),
    ("PGPORT", "port"),
    ("PGDATABASE", "dbname"),
    ("PGUSER", "user"),
    ("PGPASSWORD", "password"),
    ("PGPASSFILE", "passfile"),
    ("PGOPTIONS", "options"),
    ("PGAPPNAME", "application_name"),
    ("PGSSLMODE", "sslmode"),
    ("PGSSLROOTCERT", "sslrootcert"),
    ("PGSSLCERT", "sslcert"),
    ("PGSSLKEY", "sslkey"),
    ("PGSSLNEGOTIATION", "sslnegotiation"),
    ("PGCONNECT_TIMEOUT", "connect_timeout"),
    ("PGTARGETSESSIONATTRS", "target_session_attrs"),
    ("PGCHANNELBINDING", "channel_binding"),
    ("PGLOADBALANCEHOSTS", "load_balance_hosts"),
    ("PGGSSENCMODE", "gssencmode"),
];

/// Parameters handed to tokio-postgres as they are.
const PASSED: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "options",
    "application_name",
    "sslnegotiation",
    "connect_timeout",
    "tcp_user_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_retries",
    "target_session_attrs",
    "channel_binding",
    "load_balance_hosts",
];

/// Parameters Almanac reads itself.
const OURS: &[&str] = &["sslmode", "sslrootcert", "sslcert", "sslkey", "passfile", "fallback_application_name"];

/// libpq parameters that do not change how Almanac connects (Kerberos and compression
/// settings, SNI, which rustls always sends for a host name): accepted and left alone.
const IGNORED: &[&str] = &[
    "gssencmode",
    "krbsrvname",
    "gsslib",
    "gssdelegation",
    "sslcompression",
    "sslsni",
    "sslpassword",
    "sslcertmode",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
];

/// libpq's parameters, in a map, with the environment filled in.
pub type Params = BTreeMap<String, String>;

/// Read `text` (a URL, `key=value` pairs, or nothing) and fill in what it leaves out
/// from `env` as libpq does.
pub fn read(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Params, DbError> {
    let text = text.trim();
    let mut params = if text.starts_with("postgres://") || text.starts_with("postgresql://") { url(text)? } else { pairs(text)? };
    for (variable, key) in ENVIRONMENT {
        if !params.contains_key(*key) {
            if let Some(value) = env(variable).filter(|v| !v.is_empty()) {
                params.insert((*key).to_owned(), value);
            }
        }
    }
    for key in params.keys() {
        if !PASSED.contains(&key.as_str()) && !OURS.contains(&key.as_str()) && !IGNORED.contains(&key.as_str()) && !refused(key) {
            return Err(DbError::InvalidUrl(format!("invalid connection option {key:?}")));
        }
        if refused(key) {
            return Err(DbError::InvalidUrl(format!("connection option {key:?} is not supported by Almanac (it has no GSSAPI, service file or CRL support)")));
        }
    }
    if params.get("gssencmode").is_some_and(|m| m == "require") {
        return Err(DbError::InvalidUrl("gssencmode=require: Almanac has no GSSAPI encryption; use TLS (sslmode)".into()));
    }
    params.remove("gssencmode");
    Ok(params)
}

fn refused(key: &str) -> bool {
    ["service", "sslcrl", "sslcrldir", "requirepeer", "require_auth"].contains(&key)
}

/// The parameters tokio-postgres takes, as a `key=value` string it parses.
pub fn passed(params: &Params) -> String {
    let mut out = String::new();
    for (key, value) in params.iter().filter(|(k, _)| PASSED.contains(&k.as_str())) {
        let quoted = value.replace('\\', "\\\\").replace('\'', "\\'");
        out.push_str(&format!("{key}='{quoted}' "));
    }
    out
}

/// `key=value` pairs, values optionally single-quoted with backslash escapes.
fn pairs(text: &str) -> Result<Params, DbError> {
    let mut params = Params::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(params);
        }
        let key: String = std::iter::from_fn(|| chars.next_if(|c| *c != '=' && !c.is_whitespace())).collect();
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            return Err(DbError::InvalidUrl(format!("missing \"=\" after {key:?} in the connection string")));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    Some('\'') => break,
                    Some('\\') => value.extend(chars.next()),
                    Some(c) => value.push(c),
                    None => return Err(DbError::InvalidUrl(format!("unterminated quoted value of {key:?}"))),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                if c == '\\' {
                    value.extend(chars.next());
                } else {
                    value.push(c);
                }
            }
        }
        params.insert(key, value);
    }
}

/// `postgres[ql]://[user[:password]@][host[:port][,...]][/dbname][?key=value&...]`.
fn url(text: &str) -> Result<Params, DbError> {
    let bad = |what: &str| DbError::InvalidUrl(format!("{what} in the connection URL"));
    let rest = text.split_once("://").map(|(_, r)| r).unwrap_or_default();
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (netloc, dbname) = rest.split_once('/').unwrap_or((rest, ""));
    let mut params = Params::new();
    let (userinfo, hosts) = match netloc.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, netloc),
    };
    if let Some(userinfo) = userinfo {
        let (user, password) = userinfo.split_once(':').map_or((userinfo, None), |(u, p)| (u, Some(p)));
        if !user.is_empty() {
            params.insert("user".into(), decode(user).ok_or_else(|| bad("bad percent-encoding of the user"))?);
        }
        if let Some(password) = password {
            params.insert("password".into(), decode(password).ok_or_else(|| bad("bad percent-encoding of the password"))?);
        }
    }
    if !hosts.is_empty() {
        let (mut names, mut ports) = (Vec::new(), Vec::new());
        for spec in hosts.split(',') {
            // `[::1]:5432`: the port follows the bracket, not the last colon of the address.
            let (host, port) = match spec.strip_prefix('[') {
                Some(v6) => {
                    let (address, after) = v6.split_once(']').ok_or_else(|| bad("an unclosed \"[\""))?;
                    (address, after.strip_prefix(':').unwrap_or_default())
                }
                None => spec.rsplit_once(':').unwrap_or((spec, "")),
            };
            names.push(decode(host).ok_or_else(|| bad("bad percent-encoding of a host"))?);
            ports.push(port.to_owned());
        }
        if names.iter().any(|n| !n.is_empty()) {
            params.insert("host".into(), names.join(","));
        }
        if ports.iter().any(|p| !p.is_empty()) {
            params.insert("port".into(), ports.join(","));
        }
    }
    if !dbname.is_empty() {
        params.insert("dbname".into(), decode(dbname).ok_or_else(|| bad("bad percent-encoding of the database name"))?);
    }
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').ok_or_else(|| bad(&format!("parameter {pair:?} without \"=\"")))?;
        let key = decode(key).ok_or_else(|| bad("bad percent-encoding of a parameter"))?;
        let value = decode(value).ok_or_else(|| bad("bad percent-encoding of a parameter"))?;
        // JDBC's spelling, which libpq also takes in URLs.
        if key == "ssl" && value == "true" {
            params.insert("sslmode".into(), "require".into());
            continue;
        }
        params.insert(key, value);
    }
    Ok(params)
}

fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The password for the first host from a libpq password file
/// (`hostname:port:database:username:password`, `*` matching anything), if the file
/// exists, is private, and has a line for this connection.
pub fn password_file(params: &Params, home: Option<&Path>) -> Result<Option<String>, DbError> {
    let path = match params.get("passfile") {
        Some(file) => PathBuf::from(file),
        None => match home {
            Some(home) => home.join(".pgpass"),
            None => return Ok(None),
        },
    };
    let Ok(meta) = std::fs::metadata(&path) else { return Ok(None) };
    use std::os::unix::fs::PermissionsExt;
    if meta.permissions().mode() & 0o077 != 0 {
        tracing::warn!(file = %path.display(), "password file has group or world access; permissions should be u=rw (0600) or less: ignored");
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).map_err(|e| DbError::InvalidUrl(format!("cannot read the password file {}: {e}", path.display())))?;
    let first = |key: &str| params.get(key).and_then(|v| v.split(',').next()).unwrap_or_default().to_owned();
    let host = first("host");
    // libpq matches a socket directory (or no host) against "localhost".
    let host = if host.is_empty() || host.starts_with('/') { "localhost".to_owned() } else { host };
    let port = Some(first("port")).filter(|p| !p.is_empty()).unwrap_or_else(|| "5432".into());
    let user = params.get("user").cloned().unwrap_or_default();
    let dbname = params.get("dbname").cloned().unwrap_or_else(|| user.clone());
    let wanted = [host, port, dbname, user];
    for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
        let fields = pgpass_fields(line);
        if fields.len() == 5 && fields[..4].iter().zip(&wanted).all(|(field, want)| field == "*" || field == want) {
            return Ok(Some(fields[4].clone()));
        }
    }
    Ok(None)
}

/// A password file line's fields: `:` separates, `\` escapes.
fn pgpass_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => fields.last_mut().expect("one field").extend(chars.next()),
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut().expect("one field").push(c),
        }
    }
    fields
}

/// `text` with any password taken out, for messages.
pub fn redact(text: &str) -> String {
    let text = text.trim();
    if let Some((scheme, rest)) = text.split_once("://") {
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        if let Some(at) = rest[..end].rfind('@') {
            if let Some(colon) = rest[..at].find(':') {
                return format!("{scheme}://{}:redacted{}", &rest[..colon], &rest[at..]);
            }
        }
        return text.to_owned();
    }
    match pairs(text) {
        Ok(mut params) => {
            if let Some(p) = params.get_mut("password") {
                *p = "redacted".into();
            }
            params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
        }
        Err(_) => "(a connection string that cannot be read)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn a_url_and_its_pairs_read_the_same() {
        let from_url =
            read("postgresql://al%40ice:p%3Ass@db.example:6432,[::1]:5433/shop?sslmode=verify-full&sslrootcert=/ca.pem&application_name=x", &no_env).unwrap();
        let from_pairs = read(
            r"user=al@ice password='p:ss' host=db.example,::1 port=6432,5433 dbname=shop sslmode=verify-full sslrootcert=/ca.pem application_name=x",
            &no_env,
        )
        .unwrap();
        assert_eq!(from_url, from_pairs);
        assert_eq!(from_url["host"], "db.example,::1");
        assert_eq!(read("postgres:///almanac?host=%2Fvar%2Frun%2Fpostgresql", &no_env).unwrap()["host"], "/var/run/postgresql");
        assert_eq!(read("postgres://h/d?ssl=true", &no_env).unwrap()["sslmode"], "require");
    }

    #[test]
    fn quoted_values_keep_spaces_quotes_and_backslashes() {
        let params = read(r"password='it\'s a \\ secret' options='-c a=b'", &no_env).unwrap();
        assert_eq!(params["password"], r"it's a \ secret");
        assert_eq!(params["options"], "-c a=b");
        let again = read(&passed(&params), &no_env).unwrap();
        assert_eq!(again, params);
        assert!(read("password='open", &no_env).unwrap_err().to_string().contains("unterminated"));
        assert!(read("host", &no_env).unwrap_err().to_string().contains("missing"));
    }

    #[test]
    fn the_environment_fills_what_the_string_leaves_out() {
        let env = |name: &str| match name {
            "PGHOST" => Some("envhost".to_owned()),
            "PGSSLMODE" => Some("require".to_owned()),
            "PGAPPNAME" => Some("billing".to_owned()),
            _ => None,
        };
        let params = read("host=given dbname=d", &env).unwrap();
        assert_eq!(params["host"], "given");
        assert_eq!(params["sslmode"], "require");
        assert_eq!(params["application_name"], "billing");
        assert_eq!(read("", &env).unwrap()["host"], "envhost");
    }

    #[test]
    fn unknown_and_unsupported_options_are_named() {
        assert!(read("hots=x", &no_env).unwrap_err().to_string().contains("\"hots\""));
        assert!(read("postgres://h/d?service=prod", &no_env).unwrap_err().to_string().contains("not supported"));
        assert!(read("sslsni=1 krbsrvname=postgres gssencmode=prefer", &no_env).is_ok());
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(redact("postgres://u:secret@h:5432/d?sslmode=require"), "postgres://u:redacted@h:5432/d?sslmode=require");
        assert_eq!(redact("postgres://h/d"), "postgres://h/d");
        assert!(!redact("host=h password='s e c' user=u").contains("s e c"));
    }

    #[test]
    fn the_password_file_is_read_like_libpq() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pgpass");
        std::fs::write(&file, "# comment\nother:*:*:*:no\nlocalhost:5432:shop:al\\:ice:pa\\:ss\n*:*:*:*:fallback\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut params = read(&format!("host=/run/pg dbname=shop user=al:ice passfile={}", file.display()), &no_env).unwrap();
        assert_eq!(password_file(&params, None).unwrap().as_deref(), Some("pa:ss"));
        params.insert("dbname".into(), "other".into());
        assert_eq!(password_file(&params, None).unwrap().as_deref(), Some("fallback"));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(password_file(&params, None).unwrap(), None, "a file others can read is ignored, as libpq does");
    }
}
