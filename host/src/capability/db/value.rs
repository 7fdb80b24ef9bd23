//! WIT `value` <-> PostgreSQL wire values, and a statement's error as the plugin sees
//! it. Parameters are encoded for the type the server inferred for their placeholder.
//! As node-postgres users expect, a text value where the server inferred a type it can
//! read from text (a date, a timestamp, an interval, numeric, uuid, json, an enum, an
//! address) is sent as text for the server to parse, and refused by it if it does not
//! parse; an integer fits a float parameter when the float holds it exactly, and a float
//! fits numeric as its shortest exact text. Anything else that does not fit is an error
//! naming both types, never a silent conversion (a float into an integer, text into a
//! number or a boolean).
use std::error::Error as StdError;

use bytes::BytesMut;
use chrono::{DateTime, NaiveDateTime, Utc};
use postgres_types::{to_sql_checked, Format, FromSql, IsNull, Kind, ToSql, Type};
use rust_decimal::Decimal;
use tokio_postgres::Row;

use crate::bindings::almanac::plugin::types::{DbError, Value};

type BoxError = Box<dyn StdError + Sync + Send>;

/// One guest parameter, encoded on demand for the placeholder's type.
#[derive(Debug)]
pub struct Param<'a>(pub &'a Value);

fn micros_to_utc(us: i64) -> Result<DateTime<Utc>, BoxError> {
    DateTime::from_timestamp_micros(us).ok_or_else(|| format!("timestamp {us} µs is out of range").into())
}

fn mismatch(value: &Value, ty: &Type) -> BoxError {
    format!("a {} value does not fit a parameter of type {}", kind(value), ty.name()).into()
}

/// The largest magnitudes a float holds every integer up to: 2^53 (double) and 2^24 (real).
const EXACT_F64: i64 = 1 << 53;
const EXACT_F32: i64 = 1 << 24;

fn exact_float(i: i64, bound: i64, ty: &Type) -> Result<f64, BoxError> {
    match i.checked_abs() {
        Some(a) if a <= bound => Ok(i as f64),
        _ => Err(format!("{i} does not fit {} exactly; pass it as numeric or a float", ty.name()).into()),
    }
}

/// Types the server reads from text with their input function, where a plugin's text
/// value is sent as text (node-postgres sends every parameter so).
fn parses_text(ty: &Type) -> bool {
    matches!(
        *ty,
        Type::DATE
            | Type::TIME
            | Type::TIMETZ
            | Type::TIMESTAMP
            | Type::TIMESTAMPTZ
            | Type::INTERVAL
            | Type::NUMERIC
            | Type::UUID
            | Type::JSON
            | Type::JSONB
            | Type::INET
            | Type::CIDR
            | Type::MACADDR
    ) || matches!(ty.kind(), Kind::Enum(_))
}

/// How a value goes over the wire for `ty`: as text for the server to parse, or binary.
fn as_text(value: &Value, ty: &Type) -> bool {
    match value {
        Value::Text(_) => parses_text(ty),
        Value::Float(_) => *ty == Type::NUMERIC,
        _ => false,
    }
}

impl ToSql for Param<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        if as_text(self.0, ty) {
            match self.0 {
                Value::Text(s) => out.extend_from_slice(s.as_bytes()),
                // Rust prints a float's shortest text that reads back as the same float.
                Value::Float(f) if f.is_finite() => out.extend_from_slice(f.to_string().as_bytes()),
                value => return Err(format!("{} does not fit numeric", show(value)).into()),
            }
            return Ok(IsNull::No);
        }
        match (self.0, ty) {
            (Value::Null, _) => Ok(IsNull::Yes),
            (Value::Int(i), &Type::FLOAT8) => exact_float(*i, EXACT_F64, ty)?.to_sql(ty, out),
            (Value::Int(i), &Type::FLOAT4) => (exact_float(*i, EXACT_F32, ty)? as f32).to_sql(ty, out),
            (Value::Boolean(b), &Type::BOOL) => b.to_sql(ty, out),
            (Value::Int(i), &Type::INT8) => i.to_sql(ty, out),
            (Value::Int(i), &Type::INT4) => i32::try_from(*i).map_err(|_| format!("{i} does not fit integer"))?.to_sql(ty, out),
            (Value::Int(i), &Type::INT2) => i16::try_from(*i).map_err(|_| format!("{i} does not fit smallint"))?.to_sql(ty, out),
            (Value::Int(i), &Type::NUMERIC) => Decimal::from(*i).to_sql(ty, out),
            (Value::Float(f), &Type::FLOAT8) => f.to_sql(ty, out),
            (Value::Float(f), &Type::FLOAT4) => (*f as f32).to_sql(ty, out),
            (Value::Text(s), t) if is_text(t) => s.as_str().to_sql(&Type::TEXT, out),
            (Value::Bytes(b), &Type::BYTEA) => b.as_slice().to_sql(ty, out),
            (Value::Timestamp(us), &Type::TIMESTAMPTZ) => micros_to_utc(*us)?.to_sql(ty, out),
            (Value::Timestamp(us), &Type::TIMESTAMP) => micros_to_utc(*us)?.naive_utc().to_sql(ty, out),
            (Value::Json(s), &Type::JSON) => {
                out.extend_from_slice(s.as_bytes());
                Ok(IsNull::No)
            }
            (Value::Json(s), &Type::JSONB) => {
                // jsonb's binary format is a version byte followed by the JSON text.
                out.extend_from_slice(&[1]);
                out.extend_from_slice(s.as_bytes());
                Ok(IsNull::No)
            }
            (Value::Numeric(s), &Type::NUMERIC) => s.parse::<Decimal>().map_err(|e| format!("numeric {s:?}: {e}"))?.to_sql(ty, out),
            (value, ty) => Err(mismatch(value, ty)),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    fn encode_format(&self, ty: &Type) -> Format {
        if as_text(self.0, ty) {
            Format::Text
        } else {
            Format::Binary
        }
    }

    to_sql_checked!();
}

fn is_text(ty: &Type) -> bool {
    matches!(*ty, Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN)
}

/// Raw column bytes, so each type can be decoded by hand.
struct Raw<'a>(&'a [u8]);

impl<'a> FromSql<'a> for Raw<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        Ok(Raw(raw))
    }
    fn accepts(_: &Type) -> bool {
        true
    }
}

/// Convert every column of `row`; the error names the column and its type.
pub fn row_values(row: &Row) -> Result<Vec<Value>, String> {
    (0..row.len()).map(|i| column(row, i)).collect()
}

fn column(row: &Row, i: usize) -> Result<Value, String> {
    let col = &row.columns()[i];
    let ty = col.type_();
    let fail = |e: BoxError| format!("column {:?} ({}): {e}", col.name(), ty.name());
    let raw: Option<Raw> = row.try_get(i).map_err(|e| fail(e.into()))?;
    let Some(Raw(raw)) = raw else { return Ok(Value::Null) };
    let value = match *ty {
        // A function returning void (pg_sleep, pg_notify) yields one empty column.
        Type::VOID => Value::Null,
        Type::BOOL => Value::Boolean(bool::from_sql(ty, raw).map_err(fail)?),
        Type::INT2 => Value::Int(i16::from_sql(ty, raw).map_err(fail)?.into()),
        Type::INT4 => Value::Int(i32::from_sql(ty, raw).map_err(fail)?.into()),
        Type::INT8 => Value::Int(i64::from_sql(ty, raw).map_err(fail)?),
        Type::OID => Value::Int(u32::from_sql(ty, raw).map_err(fail)?.into()),
        Type::FLOAT4 => Value::Float(f32::from_sql(ty, raw).map_err(fail)?.into()),
        Type::FLOAT8 => Value::Float(f64::from_sql(ty, raw).map_err(fail)?),
        Type::BYTEA => Value::Bytes(raw.to_vec()),
        Type::TIMESTAMPTZ => Value::Timestamp(DateTime::<Utc>::from_sql(ty, raw).map_err(fail)?.timestamp_micros()),
        Type::TIMESTAMP => Value::Timestamp(NaiveDateTime::from_sql(ty, raw).map_err(fail)?.and_utc().timestamp_micros()),
        Type::JSON => Value::Json(String::from_utf8_lossy(raw).into_owned()),
        Type::JSONB => Value::Json(String::from_utf8_lossy(raw.get(1..).unwrap_or_default()).into_owned()),
        Type::NUMERIC => Value::Numeric(Decimal::from_sql(ty, raw).map_err(fail)?.to_string()),
        ref t if is_text(t) => Value::Text(String::from_utf8_lossy(raw).into_owned()),
        _ => {
            return Err(format!(
                "column {:?} has type {}, which plugins cannot read directly; cast it in SQL (e.g. {}::text)",
                col.name(),
                ty.name(),
                col.name()
            ))
        }
    };
    Ok(value)
}

/// The WIT name of a value's case, for messages.
pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Boolean(_) => "boolean",
        Value::Int(_) => "int",
        Value::Float(_) => "float",
        Value::Text(_) => "text",
        Value::Bytes(_) => "bytes",
        Value::Timestamp(_) => "timestamp",
        Value::Json(_) => "json",
        Value::Numeric(_) => "numeric",
    }
}

/// Bytes a value takes in the host, roughly: what the result budget counts.
pub fn size(value: &Value) -> usize {
    16 + match value {
        Value::Text(s) | Value::Json(s) | Value::Numeric(s) => s.len(),
        Value::Bytes(b) => b.len(),
        _ => 0,
    }
}

/// A parameter as a dry run prints it: SQL-ish literals, long ones clipped.
pub fn show(value: &Value) -> String {
    let text = match value {
        Value::Null => "NULL".to_owned(),
        Value::Boolean(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Text(t) => format!("{t:?}"),
        // Text (a JSON message, say) is shown as text, escaped; other bytes by their count.
        Value::Bytes(b) => match std::str::from_utf8(b) {
            Ok(text) => format!("{text:?} ({} bytes)", b.len()),
            Err(_) => format!("<{} bytes>", b.len()),
        },
        Value::Timestamp(micros) => {
            chrono::DateTime::from_timestamp_micros(*micros).map_or_else(|| micros.to_string(), |t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
        }
        Value::Json(j) => j.clone(),
        Value::Numeric(n) => n.clone(),
    };
    crate::text::clip(text, 200)
}

/// A tokio-postgres error as the plugin sees it, its message clipped (a unique
/// violation's detail repeats the key, which may be large).
pub fn db_error(e: &tokio_postgres::Error) -> DbError {
    let error = match e.as_db_error() {
        Some(db) => {
            let code = db.code().code().to_owned();
            let mut message = db.message().to_owned();
            if let Some(detail) = db.detail() {
                message.push_str(": ");
                message.push_str(detail);
            }
            DbError { retryable: retryable_sqlstate(&code), sqlstate: Some(code), message }
        }
        None if e.is_closed() => DbError { sqlstate: Some("08006".into()), message: format!("connection lost: {e}"), retryable: true },
        // Parameter encoding and similar client-side errors: the plugin's input is wrong.
        None => DbError { sqlstate: None, message: crate::db::error_chain(e), retryable: false },
    };
    DbError { message: crate::text::clip(error.message, crate::text::MAX_ERROR), ..error }
}

/// Whether a later attempt may succeed: serialization failures and deadlocks (40),
/// connection trouble (08), resource exhaustion (53), cancels and shutdowns (57),
/// lock timeouts (55P03) and system errors (58). Everything else is the statement's
/// own fault and will fail again.
pub fn retryable_sqlstate(code: &str) -> bool {
    matches!(code.get(..2), Some("40" | "08" | "53" | "57" | "58")) || code == "55P03"
}
