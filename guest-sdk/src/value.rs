use crate::bindings::almanac::plugin::types;

/// One SQL value, as the WIT `value` variant.
pub type Value = types::Value;

/// A `timestamptz`: microseconds since 1970-01-01T00:00:00Z.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

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
