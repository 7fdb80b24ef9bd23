//! What goes wrong with connections, and errors told in one line.

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("invalid connection settings (DATABASE_URL or PG* variables): {0}")]
    InvalidUrl(String),
    #[error("cannot build the connection pool: {0}")]
    Pool(String),
    #[error("shut down while waiting for the database")]
    ShutDown,
}

/// An error and its causes on one line, with a TLS certificate problem named in words.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    if let Some(tls) = crate::tls::cause(e) {
        out.push_str(&format!(" ({tls})"));
    }
    out
}

/// Whether an error is the database connection failing rather than a statement's or a
/// configuration's fault.
pub fn is_transient(e: &(dyn std::error::Error + 'static)) -> bool {
    std::iter::successors(Some(e), |e| e.source()).any(|cause| {
        if let Some(pg) = cause.downcast_ref::<tokio_postgres::Error>() {
            let code = pg.code().map(|c| c.code().to_owned());
            return pg.is_closed() || pg.as_db_error().is_none() || code.is_some_and(|c| c.starts_with("08") || c.starts_with("57P"));
        }
        cause.is::<deadpool_postgres::PoolError>()
    })
}
