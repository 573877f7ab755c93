//! The rows of `x` as a request sends them (a list of numbers, a string, or a list of
//! strings per row), and their check into [`Points`] of one kind.
//!
//! A row is parsed by what its JSON is, without buffering: a string is a text row, a list
//! is numbers or tokens by its elements (a list mixing both is malformed: 400). Whether
//! the rows agree with each other is a separate, 422 question ([`to_points`]).

use crate::kernel::{Points, RowKind};
use crate::spec::FieldError;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;

/// One row of `x`.
#[derive(Debug, Clone, PartialEq)]
pub enum Row {
    /// A list of numbers (also `[]`, which may turn out to be an empty token list).
    Numbers(Vec<f64>),
    Text(String),
    Tokens(Vec<String>),
}

impl Row {
    /// The row's kind; None for `[]`, which any list kind could hold.
    pub fn kind(&self) -> Option<RowKind> {
        match self {
            Row::Numbers(v) if v.is_empty() => None,
            Row::Numbers(_) => Some(RowKind::Numeric),
            Row::Text(_) => Some(RowKind::Text),
            Row::Tokens(_) => Some(RowKind::Tokens),
        }
    }
}

/// What a row of x must look like at predict: the training rows' kind, and for numeric
/// rows their width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowShape {
    pub kind: RowKind,
    /// Features per row (numeric rows only).
    pub d: usize,
}

/// A string row of more than `max` code points, or a token list of more than `max`
/// tokens: the first such row's index and what it holds. Numeric rows are never too long
/// here (their width is the model's).
pub fn first_too_long(x: &[Row], max: usize) -> Option<(usize, String)> {
    x.iter().enumerate().find_map(|(i, r)| match r {
        // A string has at least as many bytes as code points: most need no count.
        Row::Text(s) if s.len() > max && s.chars().count() > max => {
            Some((i, format!("a string of {} characters", s.chars().count())))
        }
        Row::Tokens(t) if t.len() > max => Some((i, format!("{} tokens", t.len()))),
        _ => None,
    })
}

/// The kind of a set of rows: the first row's, or for lists the first non-empty one's.
/// Errors (at `/x`) when every row is an empty list.
pub fn kind_of(x: &[Row]) -> Result<RowKind, FieldError> {
    x.iter().find_map(Row::kind).ok_or_else(|| FieldError::invalid("/x", "every row is empty"))
}

/// Checks that the rows are all of one kind (and of `expected`'s, at predict) and, for
/// numeric rows, rectangular with d >= 1; `x` must be non-empty. Pointers: `/x/i` for the
/// first row that breaks the rule, `/x` for rows of another kind than the model's.
pub fn to_points(x: &[Row], expected: Option<RowShape>) -> Result<Points, FieldError> {
    let kind = kind_of(x)?;
    if let Some(want) = expected {
        if want.kind != kind {
            return Err(FieldError::invalid(
                "/x",
                format!("the model was trained on {}, but these rows are {}", want.kind.describe(), kind.describe()),
            ));
        }
    }
    let differs = |i: usize, row: &Row| {
        let what = row.kind().map_or("an empty list", RowKind::describe);
        FieldError::invalid(format!("/x/{i}"), format!("is {what}, but the rows are {}", kind.describe()))
    };
    match kind {
        RowKind::Numeric => {
            let width = |r: &Row| if let Row::Numbers(v) = r { Some(v.len()) } else { None };
            let d = width(&x[0]).ok_or_else(|| differs(0, &x[0]))?;
            if d == 0 {
                return Err(FieldError::invalid("/x/0", "rows must have at least one feature"));
            }
            if let Some(RowShape { d: want, .. }) = expected {
                if d != want {
                    return Err(FieldError::invalid(
                        "/x/0",
                        format!("has {d} features but the model was trained on {want}"),
                    ));
                }
            }
            let mut data = Vec::with_capacity(x.len() * d);
            for (i, r) in x.iter().enumerate() {
                match r {
                    Row::Numbers(v) if v.len() == d => data.extend_from_slice(v),
                    Row::Numbers(v) if !v.is_empty() => {
                        return Err(FieldError::invalid(
                            format!("/x/{i}"),
                            format!("has {} features but row 0 has {d}", v.len()),
                        ))
                    }
                    Row::Numbers(_) => {
                        return Err(FieldError::invalid(format!("/x/{i}"), format!("has 0 features but row 0 has {d}")))
                    }
                    other => return Err(differs(i, other)),
                }
            }
            Ok(Points::from_columns(nalgebra::DMatrix::from_vec(d, x.len(), data)))
        }
        RowKind::Text => {
            let mut out = Vec::with_capacity(x.len());
            for (i, r) in x.iter().enumerate() {
                match r {
                    Row::Text(s) => out.push(s.as_str()),
                    other => return Err(differs(i, other)),
                }
            }
            Ok(Points::from_texts(out))
        }
        RowKind::Tokens => {
            let mut out = Vec::with_capacity(x.len());
            for (i, r) in x.iter().enumerate() {
                match r {
                    Row::Tokens(t) => out.push(t.clone()),
                    Row::Numbers(v) if v.is_empty() => out.push(Vec::new()),
                    other => return Err(differs(i, other)),
                }
            }
            Ok(Points::from_tokens(out))
        }
    }
}

impl<'de> Deserialize<'de> for Row {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Row, D::Error> {
        d.deserialize_any(RowVisitor)
    }
}

struct RowVisitor;

const EXPECTED_ROW: &str = "a row: a list of numbers, a string, or a list of strings";

impl<'de> Visitor<'de> for RowVisitor {
    type Value = Row;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(EXPECTED_ROW)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Row, E> {
        Ok(Row::Text(v.to_string()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Row, E> {
        Ok(Row::Text(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Row, A::Error> {
        let mut row = Row::Numbers(Vec::with_capacity(seq.size_hint().unwrap_or(8)));
        loop {
            // The first cell fixes what the rest must be, so that a stray cell fails where
            // it stands (its pointer is /x/i/j).
            let want = match &row {
                Row::Numbers(v) if v.is_empty() => None,
                Row::Numbers(_) => Some(false),
                _ => Some(true),
            };
            match seq.next_element_seed(CellSeed(want))? {
                None => return Ok(row),
                Some(Cell::Number(x)) => match &mut row {
                    Row::Numbers(v) => v.push(x),
                    _ => unreachable!("a number cell only where numbers are wanted"),
                },
                Some(Cell::Text(t)) => match &mut row {
                    Row::Tokens(v) => v.push(t),
                    _ => row = Row::Tokens(vec![t]),
                },
            }
        }
    }
}

/// One element of a list row.
pub(crate) enum Cell {
    Number(f64),
    Text(String),
}

impl<'de> Deserialize<'de> for Cell {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Cell, D::Error> {
        de::DeserializeSeed::deserialize(CellSeed(None), d)
    }
}

/// A cell of a row whose earlier cells were numbers (`Some(false)`), strings
/// (`Some(true)`), or none yet.
struct CellSeed(Option<bool>);

impl<'de> de::DeserializeSeed<'de> for CellSeed {
    type Value = Cell;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Cell, D::Error> {
        d.deserialize_any(self)
    }
}

impl CellSeed {
    fn check<E: de::Error>(&self, text: bool) -> Result<(), E> {
        match self.0 {
            Some(t) if t != text => Err(E::custom(format!("a row mixes numbers and strings; {EXPECTED_ROW}"))),
            _ => Ok(()),
        }
    }
}

impl<'de> Visitor<'de> for CellSeed {
    type Value = Cell;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(match self.0 {
            None => "a number or a string",
            Some(false) => "a number",
            Some(true) => "a string",
        })
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Cell, E> {
        self.check(false)?;
        Ok(Cell::Number(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Cell, E> {
        self.check(false)?;
        Ok(Cell::Number(v as f64))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Cell, E> {
        self.check(false)?;
        Ok(Cell::Number(v as f64))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Cell, E> {
        self.check(true)?;
        Ok(Cell::Text(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Cell, E> {
        self.check(true)?;
        Ok(Cell::Text(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(v: &str) -> Vec<Row> {
        serde_json::from_str(v).unwrap()
    }

    fn pointer(v: &str, expected: Option<RowShape>) -> String {
        to_points(&rows(v), expected).unwrap_err().pointer
    }

    #[test]
    fn each_kind_parses_and_converts() {
        let p = to_points(&rows(r#"[[1, 2.5], [3, -4]]"#), None).unwrap();
        assert_eq!((p.kind(), p.n(), p.d()), (RowKind::Numeric, 2, 2));
        let p = to_points(&rows(r#"["abc", ""]"#), None).unwrap();
        assert_eq!((p.kind(), p.n()), (RowKind::Text, 2));
        let p = to_points(&rows(r#"[[], ["a", "b"], []]"#), None).unwrap();
        assert_eq!((p.kind(), p.n()), (RowKind::Tokens, 3));
        assert_eq!(p.token_lists().unwrap()[0].len(), 0);
    }

    #[test]
    fn mixed_rows_are_malformed_and_mixed_kinds_invalid() {
        assert!(serde_json::from_str::<Vec<Row>>(r#"[[1, "a"]]"#).is_err());
        assert!(serde_json::from_str::<Vec<Row>>(r#"[["a", 1]]"#).is_err());
        assert!(serde_json::from_str::<Vec<Row>>(r#"[{"a": 1}]"#).is_err());
        assert!(serde_json::from_str::<Vec<Row>>(r#"[true]"#).is_err());
        assert_eq!(pointer(r#"["a", [1]]"#, None), "/x/1");
        assert_eq!(pointer(r#"[[1], "a"]"#, None), "/x/1");
        assert_eq!(pointer(r#"[[], []]"#, None), "/x");
        assert_eq!(pointer(r#"[[], [1]]"#, None), "/x/0");
        assert_eq!(pointer(r#"[["a"], "b"]"#, None), "/x/1");
        assert_eq!(pointer(r#"[[1, 2], [3]]"#, None), "/x/1");
        let text = Some(RowShape { kind: RowKind::Text, d: 0 });
        assert_eq!(pointer(r#"[[1, 2]]"#, text), "/x");
        let numeric = Some(RowShape { kind: RowKind::Numeric, d: 3 });
        assert_eq!(pointer(r#"[[1, 2]]"#, numeric), "/x/0");
        assert_eq!(pointer(r#"["abc"]"#, numeric), "/x");
    }
}
