//! Reading the stored form back: the description from a file's tail alone (a listing),
//! or the whole dataset with its checksum and layout checked (a fit).

use super::{
    FormatError, MultiTargets, Trailer, END, HEAD, KIND_TEXT, KIND_TOKENS, MAGIC, MULTI_MARK, ROWS_SUFFIX,
    ROWS_VERSION, TAIL, VERSION,
};
use crate::dataset::{DatasetInfo, Targets};
use crate::kernel::{Points, RowKind};
use nalgebra::DMatrix;
use std::io::{self, Read};

/// Reads the description from a file's tail: `tail` holds its last bytes (at least 16;
/// more saves a second read), `size` the file's length. Returns the trailer length needed
/// when `tail` is too short to hold it.
pub fn read_info(tail: &[u8], size: u64) -> Result<Result<DatasetInfo, u64>, FormatError> {
    let t = tail.len();
    let len = match trailer_length(tail, size)? {
        Ok(len) => len,
        Err(need) => return Ok(Err(need)),
    };
    let trailer = decode_trailer(&tail[t - 16 - len as usize..t - 16])?;
    check_sizes(&trailer, size, len)?;
    Ok(Ok(trailer.trailer.info))
}

/// A trailer and, for version 2, the kind and byte length of the x section.
struct Decoded2 {
    trailer: Trailer,
    rows: Option<(RowKind, u64)>,
}

fn decode_trailer(bytes: &[u8]) -> Result<Decoded2, FormatError> {
    let (trailer, rest): (Trailer, &[u8]) = postcard::take_from_bytes(bytes)
        .map_err(|e| FormatError::Corrupt(format!("cannot decode the trailer: {e}")))?;
    let mut trailer = trailer;
    let mut rest = rest;
    // Old trailers end 0 or ROWS_SUFFIX bytes after the postcard: anything else is a
    // targets suffix.
    if !rest.is_empty() && rest.len() != ROWS_SUFFIX {
        if rest[rest.len() - 1] != MULTI_MARK || rest.len() < 5 {
            return Err(FormatError::Corrupt(format!("{} stray bytes after the trailer", rest.len())));
        }
        let end = rest.len() - 5;
        let len = u32::from_le_bytes(rest[end..end + 4].try_into().expect("4 bytes")) as usize;
        let start = end.checked_sub(len).ok_or_else(|| FormatError::Corrupt("targets suffix overruns".into()))?;
        let multi: MultiTargets = postcard::from_bytes(&rest[start..end])
            .map_err(|e| FormatError::Corrupt(format!("cannot decode the targets: {e}")))?;
        // t = 0: a dataset without a target (older versions refuse it as inconsistent).
        if multi.names.as_ref().is_some_and(|n| n.len() != multi.t as usize) {
            return Err(FormatError::Corrupt("inconsistent targets".into()));
        }
        trailer.info.outputs = Some(multi.t);
        trailer.info.targets = multi.names;
        rest = &rest[..start];
    }
    let rows = match rest.len() {
        0 => None,
        ROWS_SUFFIX => {
            let kind = match rest[0] {
                KIND_TEXT => RowKind::Text,
                KIND_TOKENS => RowKind::Tokens,
                other => return Err(FormatError::Corrupt(format!("unknown row kind {other}"))),
            };
            Some((kind, u64::from_le_bytes(rest[1..].try_into().expect("8 bytes"))))
        }
        n => return Err(FormatError::Corrupt(format!("{n} stray bytes after the trailer"))),
    };
    Ok(Decoded2 { trailer, rows })
}

/// The byte lengths of the x and y sections a trailer implies, checked against the file.
fn check_sizes(d2: &Decoded2, size: u64, trailer_len: u64) -> Result<(u64, u64), FormatError> {
    let t = &d2.trailer;
    let (n, d) = (t.info.n_rows, t.info.n_features.unwrap_or(0));
    let x = match d2.rows {
        None => n.checked_mul(d).and_then(|v| v.checked_mul(8)),
        Some((_, x_bytes)) => Some(x_bytes),
    };
    let per_row = if t.labels.is_empty() { 8 * u64::from(t.info.outputs.unwrap_or(1)) } else { 4 };
    let y = n.checked_mul(per_row);
    let (Some(x), Some(y)) = (x, y) else {
        return Err(FormatError::Corrupt("row count overflows".into()));
    };
    if HEAD + x + y + trailer_len + TAIL != size || t.info.bytes != size {
        return Err(FormatError::Corrupt(format!("{size} bytes do not hold {n} rows of {d} features")));
    }
    Ok((x, y))
}

/// A dataset read back whole, checksum verified.
#[derive(Debug, Clone)]
pub struct Decoded {
    pub info: DatasetInfo,
    pub x: Points,
    pub y: Targets,
}

/// Reads a whole dataset of `size` bytes from `r`, checking its checksum and layout: the
/// bytes are taken whole (the trailer that describes the arrays comes last), then decoded
/// as [`read_dataset_streaming`] decodes a stream.
pub fn read_dataset(r: impl Read, size: u64) -> Result<Decoded, FormatError> {
    if size < HEAD + TAIL {
        return Err(FormatError::Corrupt("too short".into()));
    }
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(size as usize).map_err(|_| FormatError::Corrupt("too large to load".into()))?;
    r.take(size).read_to_end(&mut bytes)?;
    if bytes.len() as u64 != size {
        return Err(FormatError::Corrupt("truncated".into()));
    }
    read_dataset_streaming(&bytes[..], &bytes[..], size)
}

/// A reader that keeps the CRC-32 of what it has read.
struct CrcReader<R> {
    inner: R,
    crc: crc32fast::Hasher,
}

impl<R: Read> CrcReader<R> {
    fn exact(&mut self, buf: &mut [u8]) -> Result<(), FormatError> {
        self.inner.read_exact(buf).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => FormatError::Corrupt("truncated".into()),
            _ => FormatError::Io(e),
        })?;
        self.crc.update(buf);
        Ok(())
    }

    /// `len` bytes of little-endian f64s, decoded a block at a time.
    fn f64s(&mut self, len: u64) -> Result<Vec<f64>, FormatError> {
        let mut out = Vec::new();
        out.try_reserve_exact((len / 8) as usize).map_err(|_| FormatError::Corrupt("too large to load".into()))?;
        let mut block = vec![0u8; (1 << 20).min(len as usize)];
        let mut left = len as usize;
        while left > 0 {
            let k = left.min(block.len());
            self.exact(&mut block[..k])?;
            out.extend(block[..k].chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes"))));
            left -= k;
        }
        Ok(out)
    }

    fn bytes(&mut self, len: u64) -> Result<Vec<u8>, FormatError> {
        let mut out = Vec::new();
        out.try_reserve_exact(len as usize).map_err(|_| FormatError::Corrupt("too large to load".into()))?;
        out.resize(len as usize, 0);
        self.exact(&mut out)?;
        Ok(out)
    }
}

/// Reads a whole dataset as it streams from `r` (every byte of the file, in order),
/// given `tail`, the file's last bytes holding at least its trailer (read first, by a
/// ranged read): the arrays are decoded as they arrive, never held as raw bytes beside
/// the decoded ones (string rows excepted), and the checksum is verified over the stream.
/// A tail too short for the trailer is an error that names the length needed.
pub fn read_dataset_streaming(r: impl Read, tail: &[u8], size: u64) -> Result<Decoded, FormatError> {
    let len = match trailer_length(tail, size)? {
        Ok(len) => len,
        Err(need) => return Err(FormatError::Corrupt(format!("the tail read holds no trailer: {need} bytes needed"))),
    };
    let t = tail.len();
    let decoded = decode_trailer(&tail[t - 16 - len as usize..t - 16])?;
    let (xb, yb) = check_sizes(&decoded, size, len)?;
    let mut r = CrcReader { inner: r, crc: crc32fast::Hasher::new() };
    let mut head = [0u8; HEAD as usize];
    r.exact(&mut head)?;
    if &head[..8] != MAGIC {
        return Err(FormatError::Corrupt("bad magic".into()));
    }
    let version = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
    if version != VERSION && version != ROWS_VERSION {
        return Err(FormatError::Corrupt(format!("unknown format version {version}")));
    }
    if decoded.rows.is_some() != (version == ROWS_VERSION) {
        return Err(FormatError::Corrupt(format!("version {version} with a trailer of the other layout")));
    }
    let trailer = decoded.trailer;
    let d = trailer.info.n_features.unwrap_or(0) as usize;
    let n = trailer.info.n_rows as usize;
    let x = match decoded.rows {
        None => Points::from_columns(DMatrix::from_vec(d, n, r.f64s(xb)?)),
        Some((kind, _)) => read_rows(&r.bytes(xb)?, kind, n)?,
    };
    let y = match (trailer.info.outputs, trailer.labels.is_empty()) {
        (Some(0), _) => Targets::None,
        (Some(t), _) => Targets::Multi { t: t as usize, values: r.f64s(yb)? },
        (None, true) => Targets::Numeric(r.f64s(yb)?),
        (None, false) => {
            let codes: Vec<u32> =
                r.bytes(yb)?.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes"))).collect();
            if codes.iter().any(|&c| c as usize >= trailer.labels.len()) {
                return Err(FormatError::Corrupt("a label code is out of range".into()));
            }
            Targets::Labels { labels: trailer.labels, codes }
        }
    };
    // The trailer and its length are checksummed too; the stream's end must be the tail's.
    let mut rest = r.bytes(len + 8)?;
    if rest[..] != tail[t - 16 - len as usize..t - 8] {
        return Err(FormatError::Corrupt("the trailer read differs from the tail read".into()));
    }
    let crc = r.crc.clone().finalize();
    rest.clear();
    let mut end = [0u8; 8];
    r.inner.read_exact(&mut end).map_err(FormatError::Io)?;
    if end[..] != tail[t - 8..] || u32::from_le_bytes(end[..4].try_into().expect("4 bytes")) != crc {
        return Err(FormatError::Corrupt("checksum mismatch".into()));
    }
    Ok(Decoded { info: trailer.info, x, y })
}

/// The trailer's length from a file's tail (its last 16 bytes at least), checked against
/// the file's size; Err(bytes needed) when `tail` is too short to hold the trailer.
fn trailer_length(tail: &[u8], size: u64) -> Result<Result<u64, u64>, FormatError> {
    let t = tail.len();
    if (t as u64) < TAIL || size < HEAD + TAIL {
        return Err(FormatError::Corrupt("too short".into()));
    }
    if &tail[t - 4..] != END {
        return Err(FormatError::Corrupt("no end marker (truncated?)".into()));
    }
    let len = u64::from_le_bytes(tail[t - 16..t - 8].try_into().expect("8 bytes"));
    if len > size - HEAD - TAIL {
        return Err(FormatError::Corrupt(format!("trailer length {len} exceeds the file")));
    }
    if (t as u64) < len + TAIL {
        return Ok(Err(len + TAIL));
    }
    Ok(Ok(len))
}

/// The records of a version 2 x section.
fn read_rows(mut bytes: &[u8], kind: RowKind, n: usize) -> Result<Points, FormatError> {
    fn take<'a>(bytes: &mut &'a [u8], len: usize) -> Result<&'a [u8], FormatError> {
        if bytes.len() < len {
            return Err(FormatError::Corrupt("a row runs past its section".into()));
        }
        let (head, rest) = bytes.split_at(len);
        *bytes = rest;
        Ok(head)
    }
    fn u32_of(bytes: &mut &[u8]) -> Result<usize, FormatError> {
        Ok(u32::from_le_bytes(take(bytes, 4)?.try_into().expect("4 bytes")) as usize)
    }
    fn string(bytes: &mut &[u8]) -> Result<String, FormatError> {
        let len = u32_of(bytes)?;
        String::from_utf8(take(bytes, len)?.to_vec()).map_err(|_| FormatError::Corrupt("a row is not UTF-8".into()))
    }
    let points = match kind {
        RowKind::Text => Points::from_texts((0..n).map(|_| string(&mut bytes)).collect::<Result<Vec<_>, _>>()?),
        _ => {
            let mut rows = Vec::with_capacity(n);
            for _ in 0..n {
                let count = u32_of(&mut bytes)?;
                rows.push((0..count).map(|_| string(&mut bytes)).collect::<Result<Vec<_>, _>>()?);
            }
            Points::from_tokens(rows)
        }
    };
    if !bytes.is_empty() {
        return Err(FormatError::Corrupt("bytes left after the last row".into()));
    }
    Ok(points)
}
