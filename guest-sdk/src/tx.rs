use crate::bindings::almanac::plugin::{db::Transaction, types};
use crate::task::Error;
use crate::value::{FromValue, ToValue, Value};

/// The transaction a call is lent: every statement runs inside the job's transaction.
pub struct Tx<'a>(pub(crate) &'a Transaction);

impl Tx<'_> {
    /// Run a statement that returns rows.
    pub fn query(&self, sql: &str, params: &[&dyn ToValue]) -> Result<Rows, Error> {
        Ok(Rows(self.0.query(sql, &values(params))?))
    }

    /// Run a statement that returns exactly one row.
    pub fn query_one(&self, sql: &str, params: &[&dyn ToValue]) -> Result<Row, Error> {
        let mut rows = self.query(sql, params)?.0;
        match rows.rows.len() {
            1 => Ok(Row { columns: rows.columns, values: rows.rows.pop().unwrap_or_default() }),
            n => Err(Error::permanent(format!("expected one row, got {n}"))),
        }
    }

    /// Run a statement and return how many rows it affected.
    pub fn execute(&self, sql: &str, params: &[&dyn ToValue]) -> Result<u64, Error> {
        Ok(self.0.execute(sql, &values(params))?)
    }
}

fn values(params: &[&dyn ToValue]) -> Vec<Value> {
    params.iter().map(|p| p.to_value()).collect()
}

/// The rows a query returned.
pub struct Rows(types::Rows);

impl Rows {
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.0.rows.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.0.rows.is_empty()
    }

    /// Column names, in order.
    pub fn columns(&self) -> &[String] {
        &self.0.columns
    }

    /// The rows, each readable with [`RowRef::get`].
    pub fn iter(&self) -> impl Iterator<Item = RowRef<'_>> {
        self.0.rows.iter().map(|values| RowRef { values })
    }
}

/// A borrowed row of [`Rows`].
pub struct RowRef<'a> {
    values: &'a [Value],
}

impl RowRef<'_> {
    /// Column `index` (0-based) as `T`; a NULL needs `Option<T>`.
    pub fn get<T: FromValue>(&self, index: usize) -> Result<T, Error> {
        get(self.values, index)
    }
}

/// One owned row, from [`Tx::query_one`].
pub struct Row {
    columns: Vec<String>,
    values: Vec<Value>,
}

impl Row {
    /// Column `index` (0-based) as `T`.
    pub fn get<T: FromValue>(&self, index: usize) -> Result<T, Error> {
        get(&self.values, index)
    }

    /// The column named `name` as `T`.
    pub fn get_named<T: FromValue>(&self, name: &str) -> Result<T, Error> {
        let index = self.columns.iter().position(|c| c == name).ok_or_else(|| Error::permanent(format!("no column named {name:?}")))?;
        get(&self.values, index)
    }
}

fn get<T: FromValue>(values: &[Value], index: usize) -> Result<T, Error> {
    let value = values.get(index).ok_or_else(|| Error::permanent(format!("no column {index} (row has {})", values.len())))?;
    T::from_value(value).map_err(|e| Error::permanent(format!("column {index}: {e}")))
}
