use crate::bindings::almanac::plugin::types;

/// One SQL value, as the WIT `value` variant.
pub type Value = types::Value;

/// A `timestamptz`: microseconds since 1970-01-01T00:00:00Z.
///
/// Displays as RFC 3339 in UTC, e.g. `2026-03-07T16:00:00Z` (with microseconds only
/// when there are any): a stable text form for outbox keys and payloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let micros = self.0.rem_euclid(1_000_000);
        let secs = self.0.div_euclid(1_000_000);
        let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
        // Civil date from days since the epoch (Howard Hinnant's algorithm): plugins
        // have no clock or date library, and need none for this.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        write!(f, "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}", rest / 3600, rest / 60 % 60, rest % 60)?;
        if micros != 0 {
            write!(f, ".{micros:06}")?;
        }
        f.write_str("Z")
    }
}

/// Something that can be a statement parameter.
pub trait ToValue {
    /// The parameter's WIT value.
    fn to_value(&self) -> Value;
}

impl<T: ToValue + ?Sized> ToValue for &T {
    fn to_value(&self) -> Value {
        (**self).to_value()
    }
}

impl<T: ToValue> ToValue for Option<T> {
    fn to_value(&self) -> Value {
        self.as_ref().map_or(Value::Null, ToValue::to_value)
    }
}

macro_rules! to_value {
    ($($t:ty => |$v:ident| $e:expr;)*) => {
        $(impl ToValue for $t {
            fn to_value(&self) -> Value {
                let $v = self;
                $e
            }
        })*
    };
}

to_value! {
    Value => |v| v.clone();
    bool => |v| Value::Boolean(*v);
    i16 => |v| Value::Int(i64::from(*v));
    i32 => |v| Value::Int(i64::from(*v));
    i64 => |v| Value::Int(*v);
    f64 => |v| Value::Float(*v);
    str => |v| Value::Text(v.to_owned());
    String => |v| Value::Text(v.clone());
    [u8] => |v| Value::Bytes(v.to_vec());
    Vec<u8> => |v| Value::Bytes(v.clone());
    Timestamp => |v| Value::Timestamp(v.0);
}

/// Something a result column can be read as.
pub trait FromValue: Sized {
    /// Convert, or say why the column does not fit.
    fn from_value(value: &Value) -> Result<Self, String>;
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(value: &Value) -> Result<Self, String> {
        match value {
            Value::Null => Ok(None),
            v => T::from_value(v).map(Some),
        }
    }
}

macro_rules! from_value {
    ($($t:ty, $want:literal => $($pat:pat => $e:expr),+;)*) => {
        $(impl FromValue for $t {
            fn from_value(value: &Value) -> Result<Self, String> {
                match value {
                    $($pat => $e,)+
                    other => Err(format!("expected {}, found {}", $want, kind(other))),
                }
            }
        })*
    };
}

from_value! {
    bool, "boolean" => Value::Boolean(b) => Ok(*b);
    i64, "int" => Value::Int(i) => Ok(*i);
    i32, "int" => Value::Int(i) => i32::try_from(*i).map_err(|_| format!("{i} does not fit i32"));
    f64, "float" => Value::Float(f) => Ok(*f);
    String, "text" => Value::Text(s) | Value::Json(s) | Value::Numeric(s) => Ok(s.clone());
    Vec<u8>, "bytes" => Value::Bytes(b) => Ok(b.clone());
    Timestamp, "timestamp" => Value::Timestamp(t) => Ok(Timestamp(*t));
}

pub(crate) fn kind(value: &Value) -> &'static str {
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

#[cfg(test)]
mod tests {
    use super::Timestamp;

    #[test]
    fn timestamps_display_as_rfc3339_utc() {
        assert_eq!(Timestamp(0).to_string(), "1970-01-01T00:00:00Z");
        assert_eq!(Timestamp(1_772_899_200_000_000).to_string(), "2026-03-07T16:00:00Z");
        assert_eq!(Timestamp(951_782_400_000_000 + 1).to_string(), "2000-02-29T00:00:00.000001Z");
        assert_eq!(Timestamp(-1).to_string(), "1969-12-31T23:59:59.999999Z");
    }
}
