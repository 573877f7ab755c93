//! CSV uploads and CSV predict bodies: a header row, then one row per sample (RFC 4180
//! quoting, CRLF or LF, a leading UTF-8 BOM dropped, blank lines skipped), parsed by the
//! `csv` crate as the bytes stream in. Errors point at `/line/N`, the physical line where
//! the offending record starts (the header is line 1 when it comes first).

use super::format::DatasetWriter;
use super::{parse_number, DatasetInfo, IngestError, TargetKind, Targets};
use crate::kernel::Points;
use nalgebra::DMatrix;
use std::collections::VecDeque;
use std::io::{Read, Write};

/// What the query string of POST /datasets says about a CSV body.
#[derive(Debug, Clone, Default)]
pub struct CsvOptions {
    /// The target column's name (or several, `a,b`); None: the last column; empty: no
    /// target (every column a feature).
    pub target: Option<String>,
    pub name: Option<String>,
}

fn at_line(line: u64, message: impl Into<String>) -> IngestError {
    IngestError::invalid(format!("/line/{line}"), message)
}

/// A record that holds nothing: an empty line or a line of one empty field.
fn is_blank(rec: &csv::ByteRecord) -> bool {
    rec.is_empty() || (rec.len() == 1 && rec[0].is_empty())
}

/// A `Read` that notes where the line breaks it passes on are, so that a record's
/// physical line can be worked out (see [`Records::line`]).
struct Tracked<R> {
    inner: R,
    /// Bytes passed on so far.
    offset: u64,
    /// Offsets of the '\n' bytes not yet known to lie before every record still to come.
    newlines: VecDeque<u64>,
    /// '\n' bytes dropped from the front of `newlines`.
    dropped: u64,
}

impl<R: Read> Read for Tracked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = self.inner.read(buf)?;
        let at = self.offset;
        self.newlines.extend(memchr::memchr_iter(b'\n', &buf[..k]).map(|i| at + i as u64));
        self.offset += k as u64;
        Ok(k)
    }
}

impl<R> Tracked<R> {
    /// '\n' bytes at offsets below `end`.
    fn newlines_before(&self, end: u64) -> u64 {
        self.dropped + self.newlines.partition_point(|&o| o < end) as u64
    }

    fn forget_before(&mut self, end: u64) {
        while self.newlines.front().is_some_and(|&o| o < end) {
            self.newlines.pop_front();
            self.dropped += 1;
        }
    }
}

/// Non-blank records one at a time, each with the physical line it starts on.
struct Records<R: Read> {
    reader: csv::Reader<Tracked<R>>,
    rec: csv::ByteRecord,
    /// The current record's first line.
    line: u64,
}

impl<R: Read> Records<R> {
    fn new(input: R) -> Records<R> {
        // Field counts are checked here, to name the line and the counts in the error.
        let tracked = Tracked { inner: input, offset: 0, newlines: VecDeque::new(), dropped: 0 };
        let reader = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(tracked);
        Records { reader, rec: csv::ByteRecord::new(), line: 1 }
    }

    /// Reads the next non-blank record into `self.rec` and its line into `self.line`.
    ///
    /// The csv crate reports a record's position from before the blank lines it skips,
    /// so the line is counted back from where the record ended: the line breaks before
    /// that point, less those inside its quoted fields, less its own terminator if it
    /// was consumed (after a CRLF record the parser stops between '\r' and '\n').
    fn next(&mut self) -> Result<bool, IngestError> {
        loop {
            match self.reader.read_byte_record(&mut self.rec) {
                Ok(false) => return Ok(false),
                Ok(true) if is_blank(&self.rec) => continue,
                Ok(true) => {
                    let end = self.reader.position().byte();
                    let tracked = self.reader.get_mut();
                    let inner: u64 = self.rec.iter().map(|f| memchr::memchr_iter(b'\n', f).count() as u64).sum();
                    let terminated = end > 0 && tracked.newlines.binary_search(&(end - 1)).is_ok();
                    let before = tracked.newlines_before(end);
                    self.line = 1 + before.saturating_sub(inner + u64::from(terminated));
                    tracked.forget_before(end);
                    return Ok(true);
                }
                Err(e) => {
                    let line = self.reader.position().line();
                    return Err(match e.into_kind() {
                        csv::ErrorKind::Io(io) => IngestError::Io(io),
                        other => at_line(line, format!("malformed CSV: {other:?}")),
                    });
                }
            }
        }
    }

    fn error(&self, message: impl Into<String>) -> IngestError {
        at_line(self.line, message)
    }
}

/// The header's column names, checked: UTF-8, no duplicates. Also returns the line
/// after the header, for "no rows" errors.
fn read_header<R: Read>(r: &mut Records<R>) -> Result<(Vec<String>, u64), IngestError> {
    if !r.next()? {
        return Err(at_line(1, "empty CSV: no header row"));
    }
    let mut names = Vec::with_capacity(r.rec.len());
    for i in 0..r.rec.len() {
        let field = &r.rec[i];
        // The csv crate leaves a UTF-8 byte-order mark in the first field.
        let field = if i == 0 { field.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(field) } else { field };
        let name = match std::str::from_utf8(field) {
            Ok(name) => name.to_string(),
            Err(_) => return Err(r.error(format!("column {} of the header is not UTF-8 text", i + 1))),
        };
        if names.contains(&name) {
            return Err(r.error(format!("duplicate column name `{name}`")));
        }
        names.push(name);
    }
    Ok((names, r.line + 1))
}

/// The targets of a CSV column as they stream in: numbers while every cell is one, and
/// the cells' text (one arena) in case one is not.
#[derive(Default)]
struct TargetColumn {
    numbers: Vec<f64>,
    all_numeric: bool,
    text: String,
    ends: Vec<usize>,
}

impl TargetColumn {
    /// Takes one target cell; an error message when it is not acceptable.
    fn push(&mut self, cell: &[u8], column: &str) -> Result<(), String> {
        let text =
            std::str::from_utf8(cell).map_err(|_| format!("column `{column}` (the target) is not UTF-8 text"))?;
        if text.trim().is_empty() {
            return Err(format!("column `{column}` (the target) is empty"));
        }
        if self.all_numeric {
            match parse_number(cell) {
                Some(v) => self.numbers.push(v),
                None => {
                    self.all_numeric = false;
                    self.numbers = Vec::new();
                }
            }
        }
        self.text.push_str(text);
        self.ends.push(self.text.len());
        Ok(())
    }

    fn finish(self) -> Targets {
        if self.all_numeric {
            return Targets::Numeric(self.numbers);
        }
        let mut start = 0;
        let text = &self.text;
        Targets::from_labels(self.ends.iter().map(|&end| {
            let s = &text[start..end];
            start = end;
            s
        }))
    }
}

fn not_a_number(column: &str, cell: &[u8]) -> String {
    format!("column `{column}`: `{}` is not a finite number", String::from_utf8_lossy(cell))
}

/// Streams a CSV training set from `input` into the stored form written to `out`.
/// Returns the dataset's description and `out` (flushed, not synced).
pub fn ingest<R: Read, W: Write>(input: R, out: W, opts: CsvOptions) -> Result<(DatasetInfo, W), IngestError> {
    let mut r = Records::new(input);
    let (header, header_end) = read_header(&mut r)?;
    // The target columns: the one named (an exact column name wins over splitting at
    // commas), several named `a,b` (a multi-output regression's), none (`?target=`
    // empty), or the last one.
    let targets_at: Vec<usize> = match &opts.target {
        None => vec![header.len() - 1],
        Some(name) if name.is_empty() => Vec::new(),
        Some(name) => match header.iter().position(|c| c == name) {
            Some(t) => vec![t],
            None if name.contains(',') => {
                let mut at = Vec::new();
                for part in name.split(',') {
                    match header.iter().position(|c| c == part) {
                        Some(t) if !at.contains(&t) => at.push(t),
                        Some(_) => return Err(r.error(format!("the target column `{part}` is named twice"))),
                        None => {
                            return Err(r.error(format!(
                                "no column `{part}` (a target) in the header; the columns are {header:?}"
                            )))
                        }
                    }
                }
                at
            }
            None => {
                return Err(
                    r.error(format!("no column `{name}` (the target) in the header; the columns are {header:?}"))
                )
            }
        },
    };
    let multi = !targets_at.is_empty() && opts.target.as_ref().is_some_and(|name| !header.contains(name));
    // usize::MAX: no column is the target.
    let t = targets_at.first().copied().unwrap_or(usize::MAX);
    let features: Vec<String> =
        header.iter().enumerate().filter(|(i, _)| !targets_at.contains(i)).map(|(_, c)| c.clone()).collect();
    if features.is_empty() {
        return Err(r.error("no feature columns besides the target"));
    }
    let d = features.len();
    let mut writer = DatasetWriter::begin(out, d)?;
    let mut targets = TargetColumn { all_numeric: true, ..Default::default() };
    let mut row = vec![0.0; d];
    let mut multi_values: Vec<Vec<f64>> = vec![Vec::new(); if multi { targets_at.len() } else { 0 }];
    while r.next()? {
        if r.rec.len() != header.len() {
            let message = format!("{} fields, but the header has {}", r.rec.len(), header.len());
            return Err(r.error(message));
        }
        let mut k = 0;
        for i in 0..header.len() {
            let cell = &r.rec[i];
            if multi {
                if let Some(j) = targets_at.iter().position(|&c| c == i) {
                    match parse_number(cell) {
                        Some(v) => multi_values[j].push(v),
                        None => {
                            let message =
                                format!("{} (a target: several targets are numbers)", not_a_number(&header[i], cell));
                            return Err(r.error(message));
                        }
                    }
                    continue;
                }
            } else if i == t {
                if let Err(message) = targets.push(cell, &header[t]) {
                    return Err(r.error(message));
                }
                continue;
            }
            match parse_number(cell) {
                Some(v) => row[k] = v,
                None => {
                    let message = not_a_number(&header[i], cell);
                    return Err(r.error(message));
                }
            }
            k += 1;
        }
        writer.push_row(&row)?;
    }
    if writer.rows() == 0 {
        return Err(at_line(header_end, "no data rows after the header"));
    }
    let mut info = DatasetInfo::new(opts.name);
    let targets = if targets_at.is_empty() {
        Targets::None
    } else if multi {
        info.targets = Some(targets_at.iter().map(|&c| header[c].clone()).collect());
        Targets::Multi { t: targets_at.len(), values: multi_values.concat() }
    } else {
        info.target = Some(header[t].clone());
        targets.finish()
    };
    info.features = Some(features);
    info.target_kind = targets.kind();
    Ok(writer.finish(info, &targets)?).map(|(out, info)| (info, out))
}

/// The query rows of a CSV predict body: columns matched by name when the model knows
/// its feature names (other columns ignored), else by position (exactly `d` columns).
pub fn read_query(input: &[u8], features: Option<&[String]>, d: usize) -> Result<Points, IngestError> {
    let mut r = Records::new(input);
    let (header, header_end) = read_header(&mut r)?;
    let columns: Vec<usize> = match features {
        Some(names) => {
            let mut columns = Vec::with_capacity(names.len());
            for n in names {
                match header.iter().position(|c| c == n) {
                    Some(c) => columns.push(c),
                    None => {
                        return Err(r.error(format!("no column `{n}`: the model was trained on the columns {names:?}")))
                    }
                }
            }
            columns
        }
        None if header.len() == d => (0..d).collect(),
        None => return Err(r.error(format!("{} columns, but the model has {d} features", header.len()))),
    };
    let mut values = Vec::new();
    while r.next()? {
        if r.rec.len() != header.len() {
            let message = format!("{} fields, but the header has {}", r.rec.len(), header.len());
            return Err(r.error(message));
        }
        for &c in &columns {
            match parse_number(&r.rec[c]) {
                Some(v) => values.push(v),
                None => {
                    let message = not_a_number(&header[c], &r.rec[c]);
                    return Err(r.error(message));
                }
            }
        }
    }
    if values.is_empty() {
        return Err(at_line(header_end, "no rows to predict"));
    }
    let n = values.len() / columns.len();
    Ok(Points::from_columns(DMatrix::from_vec(columns.len(), n, values)))
}

/// Writes a CSV answer: a header, then one row per query.
pub fn write_table(out: &mut Vec<u8>, header: &[String], rows: impl Iterator<Item = Vec<String>>) {
    let mut w = csv::WriterBuilder::new().terminator(csv::Terminator::Any(b'\n')).from_writer(out);
    // Writing to a Vec cannot fail.
    w.write_record(header).expect("writes to memory");
    for r in rows {
        w.write_record(&r).expect("writes to memory");
    }
    w.flush().expect("writes to memory");
}

impl TargetKind {
    pub fn name(self) -> &'static str {
        match self {
            TargetKind::Numeric => "numeric",
            TargetKind::Labels => "labels",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::format::read_dataset;

    fn load(text: &str, target: Option<&str>) -> Result<(DatasetInfo, crate::dataset::format::Decoded), IngestError> {
        let opts = CsvOptions { target: target.map(String::from), name: None };
        let (info, bytes) = ingest(text.as_bytes(), Vec::new(), opts)?;
        let back = read_dataset(&bytes[..], bytes.len() as u64).expect("the stored form reads back");
        Ok((info, back))
    }

    fn pointer(r: Result<impl Sized, IngestError>) -> String {
        match r {
            Err(IngestError::Invalid { pointer, .. }) => pointer,
            Err(e) => panic!("expected a 422 error, got {e}"),
            Ok(_) => panic!("expected an error"),
        }
    }

    #[test]
    fn quotes_crlf_blank_lines_and_a_bom_are_read() {
        let text = "\u{feff}a,\"b, quoted\",y\r\n1,2,3\r\n\r\n\"4\",5.5,\"-6\"\r\n\n7, 8 ,9\n";
        let (info, back) = load(text, None).unwrap();
        assert_eq!(info.features, Some(vec!["a".to_string(), "b, quoted".to_string()]));
        assert_eq!((info.target.as_deref(), info.target_kind, info.n_rows), (Some("y"), TargetKind::Numeric, 3));
        assert_eq!(back.x.as_matrix().as_slice(), &[1.0, 2.0, 4.0, 5.5, 7.0, 8.0]);
        assert_eq!(back.y, Targets::Numeric(vec![3.0, -6.0, 9.0]));
        assert_eq!(back.info, info);
    }

    #[test]
    fn a_named_target_may_hold_labels_and_sits_anywhere() {
        let (info, back) = load("label,x1,x2\ncat,1,2\n\"dog, big\",3,4\ncat,5,6\n", Some("label")).unwrap();
        assert_eq!(info.target_kind, TargetKind::Labels);
        assert_eq!(info.features, Some(vec!["x1".to_string(), "x2".to_string()]));
        assert_eq!(back.x.as_matrix().as_slice(), &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(back.y, Targets::Labels { labels: vec!["cat".into(), "dog, big".into()], codes: vec![0, 1, 0] });
        // One label among numbers makes the whole column labels, with the numbers' text.
        let (_, back) = load("x,y\n1,1.0\n2,two\n", None).unwrap();
        assert_eq!(back.y, Targets::Labels { labels: vec!["1.0".into(), "two".into()], codes: vec![0, 1] });
    }

    #[test]
    fn errors_name_the_physical_line() {
        assert_eq!(pointer(load("a,y\n1,2\n\n1,x2\nz,3\n", None)), "/line/5");
        // A quoted field spanning lines: the record starts on line 3.
        assert_eq!(pointer(load("a,b,y\n1,2,3\n\"multi\nline\",2,3\n", None)), "/line/3");
        assert_eq!(pointer(load("a,y\n1,2\n1,2,3\n", None)), "/line/3");
        assert_eq!(pointer(load("a,y\n1,\n", None)), "/line/2");
        assert_eq!(pointer(load("a,y\nnan,1\n", None)), "/line/2");
        assert_eq!(pointer(load("a,y\n1e999,1\n", None)), "/line/2");
        assert_eq!(pointer(load("a,y\n1,1\n", Some("z"))), "/line/1");
        assert_eq!(pointer(load("a,a,y\n1,1,1\n", None)), "/line/1");
        assert_eq!(pointer(load("y\n1\n", None)), "/line/1");
        assert_eq!(pointer(load("", None)), "/line/1");
        assert_eq!(pointer(load("a,y\n\n", None)), "/line/2");
        assert_eq!(pointer(load("a,y", None)), "/line/2");
        assert_eq!(pointer(load("a,y\r\nq,1\r\n", None)), "/line/2");
        assert_eq!(pointer(load("a,y\r\n1,1\r\n\r\n\r\nq,1", None)), "/line/5");
        // Blank lines before the header and before a bad row are counted.
        assert_eq!(pointer(load("\n\na,a,y\n", None)), "/line/3");
        assert_eq!(pointer(load("a,y\n1,2\n\n\r\n3,oops\n4,5\n", Some("a"))), "/line/5");
        assert_eq!(pointer(load("a,y\n1,2\n\n3,oops", Some("a"))), "/line/4");
        assert_eq!(pointer(load("a,y\n\n\"q\nq\",1\n", None)), "/line/3");
        let msg = match load("a,bee,y\n1,oops,3\n", None) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("accepted a word"),
        };
        assert!(msg.contains("bee") && msg.contains("oops"), "{msg}");
    }

    #[test]
    fn query_columns_match_by_name_or_position() {
        let names = vec!["b".to_string(), "a".to_string()];
        let q = read_query(b"a,extra,b\n1,x,2\n3,y,4\n", Some(&names), 2).unwrap();
        assert_eq!(q.as_matrix().as_slice(), &[2.0, 1.0, 4.0, 3.0]);
        assert_eq!(pointer(read_query(b"a,c\n1,2\n", Some(&names), 2)), "/line/1");
        let q = read_query(b"u,v\n1,2\n", None, 2).unwrap();
        assert_eq!((q.n(), q.d()), (1, 2));
        assert_eq!(pointer(read_query(b"u,v,w\n1,2,3\n", None, 2)), "/line/1");
        assert_eq!(pointer(read_query(b"u,v\n", None, 2)), "/line/2");
    }
}
