//! The stored binary form of a dataset, written in one streaming pass.
//!
//! ```text
//! MAGIC (8) | version (u32 LE)
//! x: n * d f64 LE, one row after another (a d x n column-major matrix: `Points`' layout)
//! y: n f64 LE (numeric target) or n u32 LE codes into the trailer's labels
//! trailer: postcard of [`Trailer`] | trailer length (u64 LE) | CRC-32 (u32 LE) | END (4)
//! ```
//!
//! Version 2 holds strings or token lists instead of numbers: x is one record per row
//! (a string: its UTF-8 length (u32 LE) and bytes; a token list: its token count (u32
//! LE), then each token as a string), and the trailer's bytes end with the row kind (1
//! strings, 2 token lists) and x's length in bytes (u64 LE), counted in the trailer
//! length. Numeric datasets are still written as version 1.
//!
//! Several numeric targets per row (a multi-output regression's y, n x t) fill the y
//! section output by output (t x n f64 LE), and the trailer's bytes end with a targets
//! suffix: a postcard [`MultiTargets`], its length (u32 LE) and [`MULTI_MARK`] (after the
//! version 2 suffix when there is one). Files without it have one target; t = 0 is a
//! dataset without a target (no y section).
//!
//! Rows go to the file as they are parsed, so n is only known at the end: the metadata
//! sits in a trailer found from the file's last 16 bytes. The CRC covers every byte before
//! it. Reading the trailer alone lists a dataset; a fit reads the whole file and checks it.
//! This file writes the form; `read.rs` reads it back and checks it.

mod read;

pub use read::{read_dataset, read_dataset_streaming, read_info, Decoded};

use super::{DatasetInfo, Targets};
use crate::kernel::RowKind;
use serde::{Deserialize, Serialize};
use std::io::{self, Write};

const MAGIC: &[u8; 8] = b"MERCERD\0";
const END: &[u8; 4] = b"MDS\x01";
const VERSION: u32 = 1;
const ROWS_VERSION: u32 = 2;
const KIND_TEXT: u8 = 1;
const KIND_TOKENS: u8 = 2;
/// Kind byte and x length after a version 2 trailer.
const ROWS_SUFFIX: usize = 9;
const HEAD: u64 = 12;
const TAIL: u64 = 16;

/// The last byte of a trailer with a targets suffix (no older trailer ends so: their
/// tails are 0 or exactly [`ROWS_SUFFIX`] bytes after the postcard trailer).
const MULTI_MARK: u8 = 0xA7;

/// Several targets per row: how many, and the CSV columns' names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct MultiTargets {
    t: u32,
    names: Option<Vec<String>>,
}

/// Everything after the arrays: the dataset's description and its label table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Trailer {
    info: DatasetInfo,
    /// Distinct labels of a labels target, indexed by the codes of the y section.
    labels: Vec<String>,
}

/// Why stored bytes are not a dataset.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("not a dataset file: {0}")]
    Corrupt(String),
}

/// A `Write` that keeps a running CRC-32 and byte count of what passes through.
struct Checksummed<W> {
    inner: W,
    crc: crc32fast::Hasher,
    written: u64,
}

impl<W: Write> Write for Checksummed<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let k = self.inner.write(buf)?;
        self.crc.update(&buf[..k]);
        self.written += k as u64;
        Ok(k)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Writes a dataset as its rows arrive: `begin`, `push_row` for each row, `finish`.
pub struct DatasetWriter<W: Write> {
    out: Checksummed<io::BufWriter<W>>,
    /// Features per row; 0 for strings and token lists.
    d: usize,
    kind: RowKind,
    rows: u64,
}

impl<W: Write> DatasetWriter<W> {
    pub fn begin(inner: W, d: usize) -> io::Result<DatasetWriter<W>> {
        Self::start(inner, VERSION, d, RowKind::Numeric)
    }

    /// Begins a dataset of strings or token lists (version 2).
    pub fn begin_rows(inner: W, kind: RowKind) -> io::Result<DatasetWriter<W>> {
        assert_ne!(kind, RowKind::Numeric, "numeric rows use `begin`");
        Self::start(inner, ROWS_VERSION, 0, kind)
    }

    fn start(inner: W, version: u32, d: usize, kind: RowKind) -> io::Result<DatasetWriter<W>> {
        let mut out = Checksummed {
            inner: io::BufWriter::with_capacity(1 << 20, inner),
            crc: crc32fast::Hasher::new(),
            written: 0,
        };
        out.write_all(MAGIC)?;
        out.write_all(&version.to_le_bytes())?;
        Ok(DatasetWriter { out, d, kind, rows: 0 })
    }

    fn push_str(&mut self, s: &str) -> io::Result<()> {
        let len = u32::try_from(s.len()).map_err(|_| io::Error::other("a string over 4 GiB"))?;
        self.out.write_all(&len.to_le_bytes())?;
        self.out.write_all(s.as_bytes())
    }

    /// Appends one string row.
    pub fn push_text(&mut self, s: &str) -> io::Result<()> {
        debug_assert_eq!(self.kind, RowKind::Text);
        self.push_str(s)?;
        self.rows += 1;
        Ok(())
    }

    /// Appends one token-list row.
    pub fn push_tokens(&mut self, tokens: &[String]) -> io::Result<()> {
        debug_assert_eq!(self.kind, RowKind::Tokens);
        self.out.write_all(&(tokens.len() as u32).to_le_bytes())?;
        for t in tokens {
            self.push_str(t)?;
        }
        self.rows += 1;
        Ok(())
    }

    /// Appends one row of exactly d values.
    pub fn push_row(&mut self, row: &[f64]) -> io::Result<()> {
        debug_assert_eq!(row.len(), self.d);
        let mut buf = [0u8; 8 * 64];
        for chunk in row.chunks(64) {
            for (b, v) in buf.chunks_exact_mut(8).zip(chunk) {
                b.copy_from_slice(&v.to_le_bytes());
            }
            self.out.write_all(&buf[..chunk.len() * 8])?;
        }
        self.rows += 1;
        Ok(())
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Writes the targets and the trailer and returns the inner writer (flushed) and the
    /// stored description: `info` with its row count, feature count and size filled in.
    pub fn finish(mut self, mut info: DatasetInfo, targets: &Targets) -> io::Result<(W, DatasetInfo)> {
        let (labels, codes) = match targets {
            Targets::Numeric(y) => {
                assert_eq!(y.len() as u64, self.rows, "one target per row");
                for chunk in y.chunks(4096) {
                    let bytes: Vec<u8> = chunk.iter().flat_map(|v| v.to_le_bytes()).collect();
                    self.out.write_all(&bytes)?;
                }
                (Vec::new(), None)
            }
            Targets::Labels { labels, codes } => {
                assert_eq!(codes.len() as u64, self.rows, "one target per row");
                (labels.clone(), Some(codes))
            }
            Targets::Multi { t, values } => {
                assert_eq!(values.len() as u64, self.rows * *t as u64, "t targets per row");
                for chunk in values.chunks(4096) {
                    let bytes: Vec<u8> = chunk.iter().flat_map(|v| v.to_le_bytes()).collect();
                    self.out.write_all(&bytes)?;
                }
                info.outputs = Some(*t as u32);
                (Vec::new(), None)
            }
            // Stored as zero targets per row: an empty y section.
            Targets::None => {
                info.outputs = Some(0);
                (Vec::new(), None)
            }
        };
        if let Some(codes) = codes {
            for chunk in codes.chunks(4096) {
                let bytes: Vec<u8> = chunk.iter().flat_map(|c| c.to_le_bytes()).collect();
                self.out.write_all(&bytes)?;
            }
        }
        info.n_rows = self.rows;
        info.n_features = (self.kind == RowKind::Numeric).then_some(self.d as u64);
        // Version 2: x's length, known now that y follows it.
        let t = u64::from(info.outputs.unwrap_or(1));
        let mut suffix = match self.kind {
            RowKind::Numeric => Vec::new(),
            kind => {
                let y_bytes = self.rows * if labels.is_empty() { 8 * t } else { 4 };
                let x_bytes = self.out.written - HEAD - y_bytes;
                let mut s = vec![if kind == RowKind::Text { KIND_TEXT } else { KIND_TOKENS }];
                s.extend_from_slice(&x_bytes.to_le_bytes());
                s
            }
        };
        if let Some(t) = info.outputs {
            let multi = MultiTargets { t, names: info.targets.clone() };
            let bytes = postcard::to_allocvec(&multi).expect("targets serialise");
            suffix.extend_from_slice(&bytes);
            suffix.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            suffix.push(MULTI_MARK);
        }
        let trailer_len_at = self.out.written;
        // The size is part of the trailer: it is the trailer's own length plus the rest.
        let mut trailer = Trailer { info, labels };
        let size = loop {
            let bytes = postcard::to_allocvec(&trailer).expect("a trailer serialises");
            let size = trailer_len_at + (bytes.len() + suffix.len()) as u64 + TAIL;
            if trailer.info.bytes == size {
                break size;
            }
            trailer.info.bytes = size;
        };
        let mut bytes = postcard::to_allocvec(&trailer).expect("a trailer serialises");
        bytes.extend_from_slice(&suffix);
        self.out.write_all(&bytes)?;
        self.out.write_all(&(bytes.len() as u64).to_le_bytes())?;
        let crc = self.out.crc.clone().finalize();
        let mut inner = self.out.inner;
        inner.write_all(&crc.to_le_bytes())?;
        inner.write_all(END)?;
        let inner = inner.into_inner().map_err(|e| e.into_error())?;
        debug_assert_eq!(trailer.info.bytes, size);
        Ok((inner, trailer.info))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::TargetKind;
    use crate::kernel::Points;

    fn info() -> DatasetInfo {
        DatasetInfo {
            id: uuid::Uuid::new_v4(),
            name: Some("n".into()),
            n_rows: 0,
            n_features: None,
            features: Some(vec!["a".into(), "b".into()]),
            target: Some("t".into()),
            target_kind: TargetKind::Labels,
            outputs: None,
            targets: None,
            bytes: 0,
            created_at_unix_nanos: 5,
        }
    }

    fn write(rows: &[[f64; 2]], y: &Targets) -> Vec<u8> {
        let mut w = DatasetWriter::begin(Vec::new(), 2).unwrap();
        for r in rows {
            w.push_row(r).unwrap();
        }
        let (bytes, info) = w.finish(info(), y).unwrap();
        assert_eq!(bytes.len() as u64, info.bytes);
        bytes
    }

    #[test]
    fn round_trips_every_target_kind_bit_exactly() {
        let rows = [[0.1, -2.5e-300], [f64::MAX, 3.0], [1.0 / 3.0, 0.0]];
        for y in [
            Targets::Numeric(vec![1.5, -0.0, 7.0]),
            Targets::Labels { labels: vec!["cat".into(), "dög".into()], codes: vec![1, 0, 1] },
            Targets::Multi { t: 2, values: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0] },
            Targets::None,
        ] {
            let bytes = write(&rows, &y);
            let back = read_dataset(&bytes[..], bytes.len() as u64).unwrap();
            assert_eq!(back.y, y);
            assert_eq!(back.info.has_target(), y != Targets::None);
            assert_eq!((back.info.n_rows, back.info.n_features, back.info.bytes), (3, Some(2), bytes.len() as u64));
            for (i, r) in rows.iter().enumerate() {
                assert_eq!(back.x.point(i)[0].to_bits(), r[0].to_bits());
                assert_eq!(back.x.point(i)[1].to_bits(), r[1].to_bits());
            }
            let from_tail = read_info(&bytes[bytes.len() - 200.min(bytes.len())..], bytes.len() as u64).unwrap();
            assert_eq!(from_tail.unwrap(), back.info);
            // A tail too short for the trailer asks for the length it needs.
            let need = read_info(&bytes[bytes.len() - 16..], bytes.len() as u64).unwrap().unwrap_err();
            let again = read_info(&bytes[bytes.len() - need as usize..], bytes.len() as u64).unwrap();
            assert_eq!(again.unwrap(), back.info);
        }
    }

    #[test]
    fn string_and_token_rows_round_trip() {
        let mut w = DatasetWriter::begin_rows(Vec::new(), RowKind::Text).unwrap();
        for s in ["héllo", "", "a\u{1F600}b"] {
            w.push_text(s).unwrap();
        }
        let y = Targets::Labels { labels: vec!["x".into(), "y".into()], codes: vec![0, 1, 0] };
        let (bytes, stored) = w.finish(info(), &y).unwrap();
        assert_eq!((stored.n_rows, stored.n_features, stored.bytes), (3, None, bytes.len() as u64));
        let back = read_dataset(&bytes[..], bytes.len() as u64).unwrap();
        assert_eq!(back.x, Points::from_texts(["héllo", "", "a\u{1F600}b"]));
        assert_eq!(back.y, y);
        assert_eq!(read_info(&bytes, bytes.len() as u64).unwrap().unwrap(), stored);

        let rows = vec![vec!["a".to_string(), "b".into()], vec![], vec!["ç".into()]];
        let mut w = DatasetWriter::begin_rows(Vec::new(), RowKind::Tokens).unwrap();
        for r in &rows {
            w.push_tokens(r).unwrap();
        }
        let (bytes, _) = w.finish(info(), &Targets::Numeric(vec![1.0, 2.0, 3.0])).unwrap();
        let back = read_dataset(&bytes[..], bytes.len() as u64).unwrap();
        assert_eq!(back.x, Points::from_tokens(rows));
        for i in [13, 20, bytes.len() - 22] {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(read_dataset(&bad[..], bad.len() as u64).is_err(), "flip at {i} went unnoticed");
        }
    }

    #[test]
    fn damage_and_truncation_are_detected() {
        let bytes = write(&[[1.0, 2.0], [3.0, 4.0]], &Targets::Numeric(vec![0.5, 0.25]));
        for i in [3, 13, 30, bytes.len() - 20, bytes.len() - 6] {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(read_dataset(&bad[..], bad.len() as u64).is_err(), "flip at {i} went unnoticed");
        }
        let cut = &bytes[..bytes.len() - 1];
        assert!(read_dataset(cut, cut.len() as u64).is_err());
        assert!(read_info(cut, cut.len() as u64).is_err());
        assert!(read_dataset(&b"short"[..], 5).is_err());
    }
}
