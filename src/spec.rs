//! Reading untrusted JSON specifications (kernels, model params) into checked values.
//!
//! The numerical core parses its own specifications so that an invalid hyperparameter can
//! never reach a solver, but it knows nothing of HTTP. Errors carry a JSON pointer relative
//! to the value being read and a kind: `Shape` for JSON that does not have the documented
//! form (wrong type, unknown or missing field) and `Invalid` for well-formed values that
//! are out of range. The API layer turns the first into 400 and the second into 422.

use serde_json::{Map, Value};
use std::fmt;

/// Whether a field error is about the form of the JSON or about the value it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Not the documented JSON shape: wrong type, unknown field, missing field.
    Shape,
    /// Well-formed but not acceptable: out of range, unknown type name, inconsistent.
    Invalid,
}

/// One problem with one place of a request, named by a JSON pointer (RFC 6901).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub kind: ErrorKind,
    pub pointer: String,
    pub message: String,
}

impl FieldError {
    pub fn shape(pointer: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError { kind: ErrorKind::Shape, pointer: pointer.into(), message: message.into() }
    }

    pub fn invalid(pointer: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError { kind: ErrorKind::Invalid, pointer: pointer.into(), message: message.into() }
    }

    /// Whether it says the field is not one the object has (see [`ObjectReader::finish`]).
    pub fn is_unknown_field(&self) -> bool {
        self.kind == ErrorKind::Shape && self.message.starts_with("unknown field")
    }

    /// The same error seen from an enclosing document: `/length_scale` under `/kernel`
    /// becomes `/kernel/length_scale`.
    pub fn under(mut self, prefix: &str) -> Self {
        self.pointer = format!("{prefix}{}", self.pointer);
        self
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.pointer, self.message)
    }
}

impl std::error::Error for FieldError {}

/// Escapes one reference token of a JSON pointer (`~` and `/`).
pub fn pointer_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

pub fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A JSON object being read field by field. Every field must be taken (read) before
/// `finish`, which reports the first field nobody asked for: unknown fields are errors,
/// never silently ignored.
pub struct ObjectReader<'a> {
    map: &'a Map<String, Value>,
    path: String,
    taken: Vec<&'a str>,
}

impl<'a> ObjectReader<'a> {
    /// `value` must be an object; `path` is its pointer, used in errors.
    pub fn new(value: &'a Value, path: &str) -> Result<Self, FieldError> {
        match value {
            Value::Object(map) => Ok(ObjectReader { map, path: path.to_string(), taken: Vec::new() }),
            other => Err(FieldError::shape(path, format!("expected an object, found {}", json_type_name(other)))),
        }
    }

    pub fn pointer(&self, key: &str) -> String {
        format!("{}/{}", self.path, pointer_token(key))
    }

    /// The raw value of `key`, if present; `null` counts as absent.
    /// Whether `key` is given (present and not null), without taking it.
    pub fn has(&self, key: &str) -> bool {
        self.map.get(key).is_some_and(|v| !v.is_null())
    }

    pub fn take(&mut self, key: &'a str) -> Option<&'a Value> {
        self.taken.push(key);
        match self.map.get(key) {
            None | Some(Value::Null) => None,
            Some(v) => Some(v),
        }
    }

    pub fn f64(&mut self, key: &'a str) -> Result<Option<f64>, FieldError> {
        let pointer = self.pointer(key);
        self.take(key).map(|v| as_f64(v, &pointer)).transpose()
    }

    pub fn bool(&mut self, key: &'a str) -> Result<Option<bool>, FieldError> {
        let pointer = self.pointer(key);
        match self.take(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => {
                Err(FieldError::shape(pointer, format!("expected a boolean, found {}", json_type_name(other))))
            }
        }
    }

    /// A non-negative integer; fractional or negative numbers are shape errors.
    pub fn u64(&mut self, key: &'a str) -> Result<Option<u64>, FieldError> {
        let pointer = self.pointer(key);
        match self.take(key) {
            None => Ok(None),
            Some(v) => as_u64(v, &pointer).map(Some),
        }
    }

    pub fn str(&mut self, key: &'a str) -> Result<Option<&'a str>, FieldError> {
        let pointer = self.pointer(key);
        match self.take(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(other) => {
                Err(FieldError::shape(pointer, format!("expected a string, found {}", json_type_name(other))))
            }
        }
    }

    /// Fails on the first field (in document order) that was never taken.
    pub fn finish(self) -> Result<(), FieldError> {
        match self.map.keys().find(|k| !self.taken.contains(&k.as_str())) {
            None => Ok(()),
            Some(unknown) => Err(FieldError::shape(
                format!("{}/{}", self.path, pointer_token(unknown)),
                format!("unknown field `{unknown}`"),
            )),
        }
    }
}

pub fn as_f64(v: &Value, pointer: &str) -> Result<f64, FieldError> {
    match v {
        // serde_json refuses 1e400 and NaN while parsing, so a number here is finite.
        Value::Number(n) => {
            n.as_f64().filter(|x| x.is_finite()).ok_or_else(|| FieldError::shape(pointer, "number out of range"))
        }
        other => Err(FieldError::shape(pointer, format!("expected a number, found {}", json_type_name(other)))),
    }
}

pub fn as_u64(v: &Value, pointer: &str) -> Result<u64, FieldError> {
    match v {
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                return Ok(u);
            }
            // 3.0 is an integer written as a float: accept it, as Python clients send it.
            match n.as_f64() {
                Some(x) if x >= 0.0 && x.fract() == 0.0 && x <= 2f64.powi(53) => Ok(x as u64),
                _ => Err(FieldError::shape(pointer, "expected a non-negative integer")),
            }
        }
        other => {
            Err(FieldError::shape(pointer, format!("expected a non-negative integer, found {}", json_type_name(other))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_are_shape_errors_with_escaped_pointers() {
        let v = json!({"a": 1.0, "x/y": 2});
        let mut r = ObjectReader::new(&v, "/params").unwrap();
        assert_eq!(r.f64("a").unwrap(), Some(1.0));
        let err = r.finish().unwrap_err();
        assert_eq!(err.kind, ErrorKind::Shape);
        assert_eq!(err.pointer, "/params/x~1y");
    }

    #[test]
    fn wrong_types_name_the_field() {
        let v = json!({"a": "1"});
        let mut r = ObjectReader::new(&v, "").unwrap();
        let err = r.f64("a").unwrap_err();
        assert_eq!((err.kind, err.pointer.as_str()), (ErrorKind::Shape, "/a"));
    }

    #[test]
    fn integers_written_as_floats_are_accepted_but_fractions_are_not() {
        assert_eq!(as_u64(&json!(3.0), "/d").unwrap(), 3);
        assert!(as_u64(&json!(2.5), "/d").is_err());
        assert!(as_u64(&json!(-1), "/d").is_err());
    }

    #[test]
    fn null_counts_as_absent() {
        let v = json!({"a": null});
        let mut r = ObjectReader::new(&v, "").unwrap();
        assert_eq!(r.f64("a").unwrap(), None);
        r.finish().unwrap();
    }
}
