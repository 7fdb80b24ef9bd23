//! One pass over a parse tree, as data: every node type of libpg_query's protobuf
//! derives `serde::Serialize`, so a serializer that only *looks* visits every position
//! of every node without a list of node types to keep up to date, and without building
//! a copy of the tree (the JSON copy this replaced cost 2 GB for a 1 MiB statement).
//!
//! It gathers what the policy decides on (called functions, qualified operators,
//! `SELECT ... INTO`, sampling methods) and stops at the node and depth budgets. It
//! recurses, so it runs on the policy's own thread, whose stack is sized for the
//! deepest tree the budgets let through (see [`super::parser`]).
use serde::ser::{self, Serialize};

/// Parse nodes one statement may have.
pub const MAX_NODES: usize = 100_000;
/// Nesting one statement may reach, counted in serialized structs and lists (an
/// expression level is about three): a chain of ~300 `+` terms.
pub const MAX_DEPTH: usize = 1_000;

/// What a statement's tree holds that the policy decides on.
#[derive(Debug, Default)]
pub struct Found {
    /// Each called function's name as written: `["lower"]`, `["app", "score"]`.
    pub calls: Vec<Vec<String>>,
    /// Names that may be calls in attribute notation: PostgreSQL reads `(expr).name` and
    /// `t.name` as `name(expr)` when no column is so named, for a one-argument function
    /// of any type (`('role'::text).current_setting`). Columns look the same, so only
    /// the never-list applies to these.
    pub attributes: Vec<String>,
    /// Operators written with a schema: `OPERATOR(app.===)`.
    pub operators: Vec<Vec<String>>,
    /// `TABLESAMPLE` methods.
    pub samples: Vec<Vec<String>>,
    /// A `SELECT ... INTO` somewhere.
    pub into: bool,
}

/// Why the walk stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Budget {
    #[error("more than {MAX_NODES} parse nodes")]
    Nodes,
    #[error("nested more than {MAX_DEPTH} levels deep")]
    Depth,
    #[error("{0}")]
    Other(String),
}

impl ser::Error for Budget {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Budget::Other(msg.to_string())
    }
}

/// Walk `tree`, gathering what [`Found`] holds, within the budgets.
pub fn walk<T: Serialize + ?Sized>(tree: &T) -> Result<Found, Budget> {
    let mut walker = Walker { found: Found::default(), nodes: 0, depth: 0, structs: Vec::new(), names: None };
    tree.serialize(&mut walker)?;
    Ok(walker.found)
}

struct Walker {
    found: Found,
    nodes: usize,
    depth: usize,
    /// The names of the structs being serialized, innermost last.
    structs: Vec<&'static str>,
    /// Strings being gathered (a name list such as `FuncCall.funcname`).
    names: Option<Vec<String>>,
}

impl Walker {
    fn enter(&mut self) -> Result<(), Budget> {
        self.nodes += 1;
        self.depth += 1;
        if self.nodes > MAX_NODES {
            return Err(Budget::Nodes);
        }
        if self.depth > MAX_DEPTH {
            return Err(Budget::Depth);
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// Serialize one field, gathering its strings when it is a name list we look at.
    fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Budget> {
        let within = self.structs.last().copied().unwrap_or_default();
        let target = match (within, key) {
            ("FuncCall", "funcname") => Some(Target::Call),
            // `ORDER BY x USING OPERATOR(app.<<<)` calls the operator too.
            ("AExpr", "name") | ("SubLink", "oper_name") | ("SortBy", "use_op") => Some(Target::Operator),
            ("RangeTableSample", "method") => Some(Target::Sample),
            ("AIndirection", "indirection") => Some(Target::Attribute),
            ("ColumnRef", "fields") => Some(Target::Column),
            _ => None,
        };
        let Some(target) = target else { return value.serialize(&mut *self) };
        let outer = self.names.replace(Vec::new());
        let result = value.serialize(&mut *self);
        let names = std::mem::replace(&mut self.names, outer).unwrap_or_default();
        result?;
        match target {
            Target::Call => self.found.calls.push(names),
            Target::Operator if names.len() > 1 => self.found.operators.push(names),
            Target::Operator => {}
            Target::Sample => self.found.samples.push(names),
            Target::Attribute => self.found.attributes.extend(names),
            Target::Column if names.len() > 1 => self.found.attributes.extend(names.last().cloned()),
            Target::Column => {}
        }
        Ok(())
    }
}

enum Target {
    Call,
    Operator,
    Sample,
    Attribute,
    Column,
}

impl ser::Serializer for &mut Walker {
    type Ok = ();
    type Error = Budget;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    fn serialize_bool(self, _: bool) -> Result<(), Budget> {
        Ok(())
    }
    fn serialize_i8(self, _: i8) -> Result<(), Budget> {
        Ok(())
    }
    fn serialize_i16(self, _: i16) -> Result<(), Budget> {
        Ok(())
    }
    fn serialize_i32(self, _: i32) -> Result<(), Budget> {
        Ok(())
    }
    fn serialize_i64(self, _: i64) -> Result<(), Budget> {
        Ok(())
    }
    fn serialize_u8(self, _: u8) -> Result<(), Budget> {
        Ok(())
    }
    fn serialize_u16(self, _: u16) -> Result<(), Budget> {
        Ok(())
    }
    fn serialize_u32(self, _: u32) -> Result<(), Budget> {
        Ok(())
    }
    fn serialize_u64(self, _: u64) -> Result<(), Budget> {
        Ok(())
    }
    fn serialize_f32(self, _: f32) -> Result<(), Budget> {
        Ok(())
    }
    fn serialize_f64(self, _: f64) -> Result<(), Budget> {
        Ok(())
    }
    fn serialize_char(self, _: char) -> Result<(), Budget> {
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Budget> {
        if let Some(names) = &mut self.names {
            names.push(v.to_owned());
        }
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Budget> {
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Budget> {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Budget> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Budget> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Budget> {
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<(), Budget> {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, value: &T) -> Result<(), Budget> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(self, _: &'static str, _: u32, _: &'static str, value: &T) -> Result<(), Budget> {
        value.serialize(self)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self, Budget> {
        self.enter()?;
        Ok(self)
    }
    fn serialize_tuple(self, len: usize) -> Result<Self, Budget> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Self, Budget> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(self, _: &'static str, _: u32, _: &'static str, len: usize) -> Result<Self, Budget> {
        self.serialize_seq(Some(len))
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Self, Budget> {
        self.serialize_seq(len)
    }
    fn serialize_struct(self, name: &'static str, _: usize) -> Result<Self, Budget> {
        self.enter()?;
        if name == "IntoClause" {
            self.found.into = true;
        }
        self.structs.push(name);
        Ok(self)
    }
    fn serialize_struct_variant(self, name: &'static str, _: u32, _: &'static str, len: usize) -> Result<Self, Budget> {
        self.serialize_struct(name, len)
    }
}

impl ser::SerializeSeq for &mut Walker {
    type Ok = ();
    type Error = Budget;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Budget> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<(), Budget> {
        self.leave();
        Ok(())
    }
}

impl ser::SerializeTuple for &mut Walker {
    type Ok = ();
    type Error = Budget;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Budget> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<(), Budget> {
        self.leave();
        Ok(())
    }
}

impl ser::SerializeTupleStruct for &mut Walker {
    type Ok = ();
    type Error = Budget;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Budget> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<(), Budget> {
        self.leave();
        Ok(())
    }
}

impl ser::SerializeTupleVariant for &mut Walker {
    type Ok = ();
    type Error = Budget;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Budget> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<(), Budget> {
        self.leave();
        Ok(())
    }
}

impl ser::SerializeMap for &mut Walker {
    type Ok = ();
    type Error = Budget;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Budget> {
        key.serialize(&mut **self)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Budget> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<(), Budget> {
        self.leave();
        Ok(())
    }
}

impl ser::SerializeStruct for &mut Walker {
    type Ok = ();
    type Error = Budget;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Budget> {
        self.field(key, value)
    }
    fn end(self) -> Result<(), Budget> {
        self.structs.pop();
        self.leave();
        Ok(())
    }
}

impl ser::SerializeStructVariant for &mut Walker {
    type Ok = ();
    type Error = Budget;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Budget> {
        self.field(key, value)
    }
    fn end(self) -> Result<(), Budget> {
        self.structs.pop();
        self.leave();
        Ok(())
    }
}
