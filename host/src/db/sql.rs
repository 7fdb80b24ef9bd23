//! How the host's statements reach the server. Talking to PostgreSQL directly, a pooled
//! connection ([`Conn`]) keeps each statement prepared (`prepare_cached`): parsed and
//! planned once. Through a pooler in transaction mode (PgBouncer 1.18 and the like),
//! consecutive transactions of one client may land on different server connections, so
//! no prepared statement may outlive its transaction: every statement is then sent
//! unnamed, parsed, bound and executed in one round trip, with its parameters' types
//! declared by the Rust values ([`Param`]). A bare client or transaction sends every
//! statement that way, direct or not: it is one round trip where tokio-postgres's own
//! `query(&str)` takes two (prepare, then execute), and it is right through a pooler.
use chrono::{DateTime, Utc};
use postgres_types::{ToSql, Type};
use tokio_postgres::{Error, Row};

use super::pool::Conn;

/// A value's PostgreSQL type, declared when statements are sent unnamed.
pub trait Typed {
    const TYPE: Type;
}

/// A statement parameter: what tokio-postgres sends, and the type it is sent as.
pub trait Param: ToSql + Sync {
    fn pg_type(&self) -> Type;
}

impl<T: Typed + ToSql + Sync + ?Sized> Param for T {
    fn pg_type(&self) -> Type {
        T::TYPE
    }
}

macro_rules! typed {
    ($($rust:ty => $pg:ident / $array:ident),* $(,)?) => {$(
        impl Typed for $rust {
            const TYPE: Type = Type::$pg;
        }
        impl Typed for Vec<$rust> {
            const TYPE: Type = Type::$array;
        }
        impl Typed for [$rust] {
            const TYPE: Type = Type::$array;
        }
    )*};
}

typed! {
    bool => BOOL / BOOL_ARRAY,
    i16 => INT2 / INT2_ARRAY,
    i32 => INT4 / INT4_ARRAY,
    i64 => INT8 / INT8_ARRAY,
    f64 => FLOAT8 / FLOAT8_ARRAY,
    String => TEXT / TEXT_ARRAY,
    DateTime<Utc> => TIMESTAMPTZ / TIMESTAMPTZ_ARRAY,
    chrono::NaiveDate => DATE / DATE_ARRAY,
    serde_json::Value => JSONB / JSONB_ARRAY,
}

impl Typed for str {
    const TYPE: Type = Type::TEXT;
}

impl Typed for Vec<&str> {
    const TYPE: Type = Type::TEXT_ARRAY;
}

impl Typed for [&str] {
    const TYPE: Type = Type::TEXT_ARRAY;
}

impl<T: Typed> Typed for Option<T> {
    const TYPE: Type = T::TYPE;
}

impl<T: Typed + ?Sized> Typed for &T {
    const TYPE: Type = T::TYPE;
}

/// Statements on a connection, sent as its target says they must be.
#[allow(async_fn_in_trait)]
pub trait Sql {
    async fn rows(&self, sql: &str, params: &[&dyn Param]) -> Result<Vec<Row>, Error>;
    async fn one(&self, sql: &str, params: &[&dyn Param]) -> Result<Row, Error>;
    async fn opt(&self, sql: &str, params: &[&dyn Param]) -> Result<Option<Row>, Error>;
    async fn exec(&self, sql: &str, params: &[&dyn Param]) -> Result<u64, Error>;
}

fn untyped<'a>(params: &'a [&'a dyn Param]) -> Vec<&'a (dyn ToSql + Sync)> {
    params.iter().map(|p| *p as &(dyn ToSql + Sync)).collect()
}

fn typed<'a>(params: &'a [&'a dyn Param]) -> Vec<(&'a (dyn ToSql + Sync), Type)> {
    params.iter().map(|p| (*p as &(dyn ToSql + Sync), p.pg_type())).collect()
}

/// A client or transaction: every statement unnamed, in one round trip.
macro_rules! sql_for {
    ($($client:ty),*) => {$(
        impl Sql for $client {
            async fn rows(&self, sql: &str, params: &[&dyn Param]) -> Result<Vec<Row>, Error> {
                self.query_typed(sql, &typed(params)).await
            }
            async fn one(&self, sql: &str, params: &[&dyn Param]) -> Result<Row, Error> {
                self.query_typed_one(sql, &typed(params)).await
            }
            async fn opt(&self, sql: &str, params: &[&dyn Param]) -> Result<Option<Row>, Error> {
                self.query_typed_opt(sql, &typed(params)).await
            }
            async fn exec(&self, sql: &str, params: &[&dyn Param]) -> Result<u64, Error> {
                self.execute_typed(sql, &typed(params)).await
            }
        }
    )*};
}

sql_for!(tokio_postgres::Client, tokio_postgres::Transaction<'_>);

/// A pooled connection keeps its statements prepared when direct; through a pooler it
/// sends them as any client does.
impl Sql for Conn {
    async fn rows(&self, sql: &str, params: &[&dyn Param]) -> Result<Vec<Row>, Error> {
        if self.pooled() {
            return client(self).rows(sql, params).await;
        }
        self.query(&self.prepare_cached(sql).await?, &untyped(params)).await
    }
    async fn one(&self, sql: &str, params: &[&dyn Param]) -> Result<Row, Error> {
        if self.pooled() {
            return client(self).one(sql, params).await;
        }
        self.query_one(&self.prepare_cached(sql).await?, &untyped(params)).await
    }
    async fn opt(&self, sql: &str, params: &[&dyn Param]) -> Result<Option<Row>, Error> {
        if self.pooled() {
            return client(self).opt(sql, params).await;
        }
        self.query_opt(&self.prepare_cached(sql).await?, &untyped(params)).await
    }
    async fn exec(&self, sql: &str, params: &[&dyn Param]) -> Result<u64, Error> {
        if self.pooled() {
            return client(self).exec(sql, params).await;
        }
        self.execute(&self.prepare_cached(sql).await?, &untyped(params)).await
    }
}

fn client(conn: &Conn) -> &tokio_postgres::Client {
    conn
}

/// One of the host's hot statements: prepared on its connection ahead of use when
/// direct (so its later use is one Bind/Execute, sent the moment it is polled), or its
/// text, sent unnamed, through a pooler.
pub enum Prepared {
    Named(tokio_postgres::Statement),
    Unnamed(&'static str),
}

impl Prepared {
    pub async fn on(conn: &Conn, sql: &'static str) -> Result<Prepared, Error> {
        match conn.pooled() {
            true => Ok(Prepared::Unnamed(sql)),
            false => Ok(Prepared::Named(conn.prepare_cached(sql).await?)),
        }
    }

    pub async fn rows(&self, client: &tokio_postgres::Client, params: &[&dyn Param]) -> Result<Vec<Row>, Error> {
        match self {
            Prepared::Named(statement) => client.query(statement, &untyped(params)).await,
            Prepared::Unnamed(sql) => client.query_typed(sql, &typed(params)).await,
        }
    }

    pub async fn exec(&self, client: &tokio_postgres::Client, params: &[&dyn Param]) -> Result<u64, Error> {
        match self {
            Prepared::Named(statement) => client.execute(statement, &untyped(params)).await,
            Prepared::Unnamed(sql) => client.execute_typed(sql, &typed(params)).await,
        }
    }
}
