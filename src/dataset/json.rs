//! JSON uploads, `{"x": [[...], ...], "y": [...], "name": ...}` as in a training body,
//! parsed as they stream in: serde visits each row once and the row goes straight to
//! the stored form, so no JSON tree (and no `Vec<Vec<f64>>`) of the set is ever built.
//! Rows are numbers, strings or token lists, as in a training body; the first row that
//! says which (a token-list set may begin with empty lists) fixes the kind.

use super::format::DatasetWriter;
use super::rows::Cell;
use super::{DatasetInfo, IngestError, Targets};
use crate::kernel::RowKind;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use std::fmt;
use std::io::{self, Read, Write};

/// Where the parser is, kept as indices so that no pointer is formatted until an error.
#[derive(Debug, Clone, Copy)]
enum Loc {
    Top,
    Field(&'static str),
    X(usize, Option<usize>),
    Y(usize),
}

impl Loc {
    fn pointer(self) -> String {
        match self {
            Loc::Top => String::new(),
            Loc::Field(f) => format!("/{f}"),
            Loc::X(i, None) => format!("/x/{i}"),
            Loc::X(i, Some(j)) => format!("/x/{i}/{j}"),
            Loc::Y(i) => format!("/y/{i}"),
        }
    }
}

enum Ys {
    Numbers(Vec<f64>),
    Labels(Vec<String>),
    /// A 2-D y: t numbers per row, row-major.
    Rows {
        t: usize,
        values: Vec<f64>,
    },
}

struct State<W: Write> {
    /// The output before the first row fixes d; then the writer.
    out: Option<W>,
    writer: Option<DatasetWriter<W>>,
    d: usize,
    /// The rows' kind, once a row has shown it.
    kind: Option<RowKind>,
    /// Empty lists seen before the kind was known (token lists, or an error).
    leading_empty: usize,
    row: Vec<f64>,
    text: Option<String>,
    tokens: Vec<String>,
    y: Option<Ys>,
    name: Option<Option<String>>,
    x_seen: bool,
    loc: Loc,
    /// An error found by our own checks (serde's message would lose its kind).
    failure: Option<IngestError>,
    /// Longest string row (code points) or token list (tokens) accepted.
    max_row_chars: usize,
}

impl<W: Write> State<W> {
    fn fail<E: de::Error>(&mut self, e: IngestError) -> E {
        let message = e.to_string();
        self.failure = Some(e);
        E::custom(message)
    }

    /// The kind of the row just parsed; None for an empty list.
    fn row_kind(&self) -> Option<RowKind> {
        if self.text.is_some() {
            Some(RowKind::Text)
        } else if !self.tokens.is_empty() {
            Some(RowKind::Tokens)
        } else if !self.row.is_empty() {
            Some(RowKind::Numeric)
        } else {
            None
        }
    }

    fn end_row<E: de::Error>(&mut self, i: usize) -> Result<(), E> {
        let max = self.max_row_chars;
        let too_long = match &self.text {
            Some(t) if t.len() > max && t.chars().count() > max => {
                Some(format!("a string of {} characters", t.chars().count()))
            }
            _ if self.tokens.len() > max => Some(format!("{} tokens", self.tokens.len())),
            _ => None,
        };
        if let Some(what) = too_long {
            let message = format!("row {i} is {what}, over the limit of {max} (MERCER_MAX_ROW_CHARS)");
            return Err(self.fail(IngestError::TooLarge { pointer: format!("/x/{i}"), message }));
        }
        let row_kind = self.row_kind();
        let kind = match (self.kind, row_kind) {
            (Some(k), _) => k,
            (None, None) => {
                self.leading_empty += 1;
                return Ok(());
            }
            (None, Some(k)) => {
                if self.leading_empty > 0 && k != RowKind::Tokens {
                    let e = IngestError::invalid("/x/0", "rows must have at least one feature");
                    return Err(self.fail(e));
                }
                self.d = self.row.len();
                let out = self.out.take().expect("the output is taken once, at the first non-empty row");
                let begun = match k {
                    RowKind::Numeric => DatasetWriter::begin(out, self.d),
                    other => DatasetWriter::begin_rows(out, other),
                };
                let mut writer = match begun {
                    Ok(w) => w,
                    Err(e) => return Err(self.fail(IngestError::Io(e))),
                };
                for _ in 0..self.leading_empty {
                    if let Err(e) = writer.push_tokens(&[]) {
                        return Err(self.fail(IngestError::Io(e)));
                    }
                }
                self.writer = Some(writer);
                self.kind = Some(k);
                k
            }
        };
        let writer = self.writer.as_mut().expect("begun at the first non-empty row");
        let written = match (kind, row_kind) {
            (RowKind::Numeric, Some(RowKind::Numeric)) | (RowKind::Numeric, None) if self.row.len() != self.d => {
                let message = format!("has {} features but row 0 has {}", self.row.len(), self.d);
                return Err(self.fail(IngestError::invalid(format!("/x/{i}"), message)));
            }
            (RowKind::Numeric, Some(RowKind::Numeric)) => writer.push_row(&self.row),
            (RowKind::Text, Some(RowKind::Text)) => writer.push_text(self.text.as_deref().unwrap_or_default()),
            (RowKind::Tokens, Some(RowKind::Tokens) | None) => writer.push_tokens(&self.tokens),
            (want, got) => {
                let got = got.map_or("an empty list", RowKind::describe);
                let message = format!("is {got}, but the rows are {}", want.describe());
                return Err(self.fail(IngestError::invalid(format!("/x/{i}"), message)));
            }
        };
        if let Err(e) = written {
            return Err(self.fail(IngestError::Io(e)));
        }
        Ok(())
    }
}

/// Streams a JSON training set from `input` into the stored form written to `out`; a
/// string row longer than `max_row_chars` code points (a token list with more tokens) is
/// refused at its pointer.
pub fn ingest<R: Read, W: Write>(input: R, out: W, max_row_chars: usize) -> Result<(DatasetInfo, W), IngestError> {
    let mut state = State {
        out: Some(out),
        writer: None,
        d: 0,
        kind: None,
        leading_empty: 0,
        row: Vec::new(),
        text: None,
        tokens: Vec::new(),
        y: None,
        name: None,
        x_seen: false,
        loc: Loc::Top,
        failure: None,
        max_row_chars,
    };
    let mut de = serde_json::Deserializer::from_reader(io::BufReader::with_capacity(1 << 16, input));
    let parsed = Body(&mut state).deserialize(&mut de).and_then(|()| de.end());
    if let Err(e) = parsed {
        if let Some(f) = state.failure.take() {
            return Err(f);
        }
        if e.is_io() {
            return Err(IngestError::Io(e.into()));
        }
        return Err(IngestError::malformed(state.loc.pointer(), e.to_string()));
    }
    let Some(writer) = state.writer.take() else {
        return Err(if state.leading_empty > 0 {
            IngestError::invalid("/x", "every row is empty")
        } else if state.x_seen {
            IngestError::invalid("/x", "must contain at least one row")
        } else {
            IngestError::malformed("/x", "missing field `x`")
        });
    };
    let targets = match state.y.take() {
        // Rows for the models without targets (one_class_svm, kernel_pca).
        None => Targets::None,
        Some(Ys::Numbers(y)) => Targets::Numeric(y),
        Some(Ys::Labels(y)) => Targets::from_labels(y.iter().map(String::as_str)),
        Some(Ys::Rows { t, values }) => {
            // Row-major as sent; stored output by output.
            let n = values.len() / t;
            let mut out = vec![0.0; values.len()];
            for (j, v) in values.iter().enumerate() {
                out[(j % t) * n + j / t] = *v;
            }
            Targets::Multi { t, values: out }
        }
    };
    let n_y = targets.len() as u64;
    if targets != Targets::None && n_y != writer.rows() {
        return Err(IngestError::invalid("/y", format!("has {n_y} entries but x has {} rows", writer.rows())));
    }
    let mut info = DatasetInfo::new(state.name.flatten());
    info.target_kind = targets.kind();
    let (out, info) = writer.finish(info, &targets)?;
    Ok((info, out))
}

struct Body<'a, W: Write>(&'a mut State<W>);

impl<'de, W: Write> DeserializeSeed<'de> for Body<'_, W> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, W: Write> Visitor<'de> for Body<'_, W> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object with x, y and optionally name")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let s = self.0;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "x" if s.x_seen => return Err(s.fail(IngestError::malformed("/x", "duplicate field `x`"))),
                "y" if s.y.is_some() => return Err(s.fail(IngestError::malformed("/y", "duplicate field `y`"))),
                "name" if s.name.is_some() => {
                    return Err(s.fail(IngestError::malformed("/name", "duplicate field `name`")))
                }
                "x" => {
                    s.x_seen = true;
                    s.loc = Loc::Field("x");
                    map.next_value_seed(Rows(&mut *s))?;
                }
                "y" => {
                    s.loc = Loc::Field("y");
                    let y = map.next_value_seed(Labels(&mut *s))?;
                    s.y = Some(y);
                }
                "name" => {
                    s.loc = Loc::Field("name");
                    s.name = Some(map.next_value::<Option<String>>()?);
                }
                other => {
                    let pointer = format!("/{}", crate::spec::pointer_token(other));
                    return Err(s.fail(IngestError::malformed(pointer, format!("unknown field `{other}`"))));
                }
            }
            s.loc = Loc::Top;
        }
        Ok(())
    }
}

struct Rows<'a, W: Write>(&'a mut State<W>);

impl<'de, W: Write> DeserializeSeed<'de> for Rows<'_, W> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, W: Write> Visitor<'de> for Rows<'_, W> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of rows")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let s = self.0;
        let mut i = 0;
        loop {
            s.loc = Loc::X(i, None);
            s.row.clear();
            s.text = None;
            s.tokens.clear();
            if seq.next_element_seed(Row(&mut *s, i))?.is_none() {
                return Ok(());
            }
            s.end_row(i)?;
            i += 1;
        }
    }
}

struct Row<'a, W: Write>(&'a mut State<W>, usize);

impl<'de, W: Write> DeserializeSeed<'de> for Row<'_, W> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, W: Write> Visitor<'de> for Row<'_, W> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a row: a list of numbers, a string, or a list of strings")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.0.text = Some(v.to_string());
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let (s, i) = (self.0, self.1);
        loop {
            let j = s.row.len() + s.tokens.len();
            s.loc = Loc::X(i, Some(j));
            match seq.next_element::<Cell>()? {
                Some(Cell::Number(v)) if s.tokens.is_empty() => s.row.push(v),
                Some(Cell::Text(t)) if s.row.is_empty() => s.tokens.push(t),
                Some(_) => return Err(de::Error::custom("a row mixes numbers and strings")),
                None => return Ok(()),
            }
        }
    }
}

struct Labels<'a, W: Write>(&'a mut State<W>);

impl<'de, W: Write> DeserializeSeed<'de> for Labels<'_, W> {
    type Value = Ys;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Ys, D::Error> {
        d.deserialize_seq(self)
    }
}

/// One target: a number, a string, or a row of numbers (2-D y).
enum Label {
    Number(f64),
    Text(String),
    Row(Vec<f64>),
}

struct LabelVisitor;

impl<'de> Visitor<'de> for LabelVisitor {
    type Value = Label;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number or a string")
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Label, E> {
        Ok(Label::Number(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Label, E> {
        Ok(Label::Number(v as f64))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Label, E> {
        Ok(Label::Number(v as f64))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Label, E> {
        Ok(Label::Text(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Label, E> {
        Ok(Label::Text(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Label, A::Error> {
        let mut row = Vec::new();
        while let Some(v) = seq.next_element::<f64>()? {
            row.push(v);
        }
        Ok(Label::Row(row))
    }
}

impl<'de> de::Deserialize<'de> for Label {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Label, D::Error> {
        d.deserialize_any(LabelVisitor)
    }
}

impl<'de, W: Write> Visitor<'de> for Labels<'_, W> {
    type Value = Ys;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of numbers or strings")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Ys, A::Error> {
        let s = self.0;
        let mut ys: Option<Ys> = None;
        let mut i = 0;
        loop {
            s.loc = Loc::Y(i);
            let Some(label) = seq.next_element::<Label>()? else { break };
            match (&mut ys, label) {
                (None, Label::Number(v)) => ys = Some(Ys::Numbers(vec![v])),
                (None, Label::Text(t)) => ys = Some(Ys::Labels(vec![t])),
                (Some(Ys::Numbers(y)), Label::Number(v)) => y.push(v),
                (Some(Ys::Labels(y)), Label::Text(t)) => y.push(t),
                (None, Label::Row(r)) if r.is_empty() => {
                    let e = IngestError::invalid("/y/0", "a row of a 2-D y needs at least one number (one per output)");
                    return Err(s.fail(e));
                }
                (None, Label::Row(r)) => ys = Some(Ys::Rows { t: r.len(), values: r }),
                (Some(Ys::Rows { t, values }), Label::Row(r)) if r.len() == *t => values.extend(r),
                (Some(Ys::Rows { t, .. }), Label::Row(r)) => {
                    let e = IngestError::invalid(
                        format!("/y/{i}"),
                        format!("has {} numbers but y[0] has {t}: every row needs one number per output", r.len()),
                    );
                    return Err(s.fail(e));
                }
                (Some(Ys::Rows { .. }), _) | (Some(_), Label::Row(_)) => {
                    let e = IngestError::invalid(format!("/y/{i}"), "a 2-D y needs a list of numbers on every row");
                    return Err(s.fail(e));
                }
                _ => {
                    let e = IngestError::invalid(format!("/y/{i}"), "labels must be all numbers or all strings");
                    return Err(s.fail(e));
                }
            }
            i += 1;
        }
        Ok(ys.unwrap_or(Ys::Numbers(Vec::new())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::format::read_dataset;
    use crate::dataset::TargetKind;

    fn load(text: &str) -> Result<(DatasetInfo, crate::dataset::format::Decoded), IngestError> {
        let (info, bytes) = ingest(text.as_bytes(), Vec::new(), 1000)?;
        Ok((info, read_dataset(&bytes[..], bytes.len() as u64).expect("the stored form reads back")))
    }

    fn failure(text: &str) -> (bool, String) {
        match load(text) {
            Err(IngestError::Invalid { pointer, .. }) => (true, pointer),
            Err(IngestError::Malformed { pointer, .. }) => (false, pointer),
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("accepted {text}"),
        }
    }

    #[test]
    fn rows_and_targets_in_either_order() {
        let (info, back) = load(r#"{"y": [1, 2.5], "name": "s", "x": [[1, 2], [3.5, -4e2]]}"#).unwrap();
        assert_eq!((info.n_rows, info.n_features, info.name.as_deref()), (2, Some(2), Some("s")));
        assert_eq!((info.features.clone(), info.target.clone(), info.target_kind), (None, None, TargetKind::Numeric));
        assert_eq!(back.x.as_matrix().as_slice(), &[1.0, 2.0, 3.5, -400.0]);
        assert_eq!(back.y, Targets::Numeric(vec![1.0, 2.5]));
        let (info, back) = load(r#"{"x": [[0], [1], [2]], "y": ["b", "a", "b"]}"#).unwrap();
        assert_eq!(info.target_kind, TargetKind::Labels);
        assert_eq!(back.y, Targets::Labels { labels: vec!["b".into(), "a".into()], codes: vec![0, 1, 0] });
    }

    #[test]
    fn strings_and_token_lists_are_stored_as_such() {
        let (info, back) = load(r#"{"x": ["abc", "", "déjà"], "y": [1, 2, 3]}"#).unwrap();
        assert_eq!((info.n_rows, info.n_features), (3, None));
        assert_eq!(back.x, crate::kernel::Points::from_texts(["abc", "", "déjà"]));
        let (info, back) = load(r#"{"x": [[], ["a", "b"], []], "y": ["p", "q", "p"]}"#).unwrap();
        assert_eq!((info.n_rows, info.n_features), (3, None));
        let want = vec![vec![], vec!["a".to_string(), "b".into()], vec![]];
        assert_eq!(back.x, crate::kernel::Points::from_tokens(want));
    }

    /// A body without `y`: rows without a target.
    #[test]
    fn y_may_be_left_out() {
        let (info, back) = load(r#"{"x": [[1, 2], [3, 4]]}"#).unwrap();
        assert_eq!((info.n_rows, info.has_target(), info.target_kind), (2, false, TargetKind::Numeric));
        assert_eq!(back.y, Targets::None);
    }

    #[test]
    fn errors_point_into_the_body() {
        assert_eq!(failure(r#"{"x": [[1, 2], [3]], "y": [1, 2]}"#), (true, "/x/1".into()));
        assert_eq!(failure(r#"{"x": [[1, 2], [3, "a"]], "y": [1, 2]}"#), (false, "/x/1/1".into()));
        assert_eq!(failure(r#"{"x": [[1e400]], "y": [1]}"#), (false, "/x/0/0".into()));
        assert_eq!(failure(r#"{"x": [[]], "y": [1]}"#), (true, "/x".into()));
        assert_eq!(failure(r#"{"x": [[], [1]], "y": [1, 2]}"#), (true, "/x/0".into()));
        assert_eq!(failure(r#"{"x": ["a", [1]], "y": [1, 2]}"#), (true, "/x/1".into()));
        assert_eq!(failure(r#"{"x": [["a"], "b"], "y": [1, 2]}"#), (true, "/x/1".into()));
        assert_eq!(failure(r#"{"x": [[1], []], "y": [1, 2]}"#), (true, "/x/1".into()));
        assert_eq!(failure(r#"{"x": [["a", 1]], "y": [1]}"#), (false, "/x/0/1".into()));
        assert_eq!(failure(r#"{"x": [{"a": 1}], "y": [1]}"#), (false, "/x/0".into()));
        assert_eq!(failure(r#"{"x": [], "y": []}"#), (true, "/x".into()));
        assert_eq!(failure(r#"{"x": [[1], [2]], "y": [1]}"#), (true, "/y".into()));
        assert_eq!(failure(r#"{"x": [[1], [2]], "y": [1, "a"]}"#), (true, "/y/1".into()));
        assert_eq!(failure(r#"{"x": [[1]], "y": [true]}"#), (false, "/y/0".into()));
        assert_eq!(failure(r#"{"y": [1]}"#), (false, "/x".into()));
        assert_eq!(failure(r#"{"x": [[1]], "y": [1], "z": 1}"#), (false, "/z".into()));
        assert_eq!(failure(r#"{"x": [[1]], "y": [1], "name": 5}"#), (false, "/name".into()));
        assert_eq!(failure(r#"{"x": [[1]], "y": [1], "x": [[2]]}"#), (false, "/x".into()));
        assert!(!failure(r#"{"x": [[1]], "y": [1]} trailing"#).0);
        assert_eq!(failure(r#"[1, 2]"#), (false, "".into()));
        assert!(!failure(r#"{"x": [[1]], "y": [1"#).0);
    }
}
