//! The Open Inference Protocol's binary tensor data extension (as Triton defines it and
//! tritonclient sends it with `binary_data=True`): a body is a JSON header of
//! `Inference-Header-Content-Length` bytes followed by the tensors' raw data, each
//! tensor's share said by its `parameters.binary_data_size`. Elements are little-endian
//! and row-major; a BYTES element is a 4-byte little-endian length and its bytes.
//!
//! This module only encodes and decodes; `oip` decides which tensors travel this way.

use serde_json::Value;

/// The header that says how long the JSON part of a body is.
pub const HEADER_LENGTH: &str = "inference-header-content-length";

/// A binary tensor's elements.
#[derive(Debug, PartialEq)]
pub enum Elements {
    Numbers(Vec<f64>),
    Strings(Vec<String>),
}

/// The JSON header and the binary rest of a body, split at `header_len` (None: the
/// whole body is JSON).
pub fn split<'a>(body: &'a [u8], header_len: Option<&str>) -> Result<(&'a [u8], &'a [u8]), String> {
    let Some(raw) = header_len else { return Ok((body, &[])) };
    let n: usize =
        raw.trim().parse().map_err(|_| format!("Inference-Header-Content-Length must be a byte count, not `{raw}`"))?;
    if n > body.len() {
        return Err(format!("Inference-Header-Content-Length is {n} but the body has {} bytes", body.len()));
    }
    Ok(body.split_at(n))
}

/// Bytes per element of a fixed-size datatype (None: BYTES, or not a tensor datatype).
fn element_size(datatype: &str) -> Option<usize> {
    Some(match datatype {
        "FP64" | "INT64" | "UINT64" => 8,
        "FP32" | "INT32" | "UINT32" => 4,
        "FP16" | "INT16" | "UINT16" => 2,
        "INT8" | "UINT8" => 1,
        _ => return None,
    })
}

/// `count` elements of `datatype` from `bytes`, which must hold exactly them.
pub fn decode(datatype: &str, bytes: &[u8], count: usize) -> Result<Elements, String> {
    if datatype == "BYTES" {
        return decode_strings(bytes, count).map(Elements::Strings);
    }
    let size = element_size(datatype).ok_or_else(|| format!("unsupported datatype `{datatype}`"))?;
    if Some(bytes.len()) != count.checked_mul(size) {
        return Err(format!(
            "{} bytes of binary data for {count} {datatype} elements ({size} bytes each)",
            bytes.len()
        ));
    }
    let number = |c: &[u8]| -> f64 {
        let a = |n: usize| -> [u8; 8] {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&c[..n]);
            b
        };
        match datatype {
            "FP64" => f64::from_le_bytes(a(8)),
            "FP32" => f32::from_le_bytes(c.try_into().expect("4 bytes")) as f64,
            "FP16" => half_to_f64(u16::from_le_bytes(c.try_into().expect("2 bytes"))),
            "INT64" => i64::from_le_bytes(a(8)) as f64,
            "INT32" => i32::from_le_bytes(c.try_into().expect("4 bytes")) as f64,
            "INT16" => i16::from_le_bytes(c.try_into().expect("2 bytes")) as f64,
            "INT8" => c[0] as i8 as f64,
            "UINT64" => u64::from_le_bytes(a(8)) as f64,
            "UINT32" => u32::from_le_bytes(c.try_into().expect("4 bytes")) as f64,
            "UINT16" => u16::from_le_bytes(c.try_into().expect("2 bytes")) as f64,
            _ => c[0] as f64,
        }
    };
    Ok(Elements::Numbers(bytes.chunks_exact(size).map(number).collect()))
}

fn decode_strings(mut bytes: &[u8], count: usize) -> Result<Vec<String>, String> {
    let mut out = Vec::with_capacity(count.min(bytes.len() / 4));
    while !bytes.is_empty() {
        let Some((len, rest)) = bytes.split_first_chunk::<4>() else {
            return Err("BYTES data ends inside an element's 4-byte length".into());
        };
        let len = u32::from_le_bytes(*len) as usize;
        if rest.len() < len {
            return Err(format!("a BYTES element says {len} bytes but {} remain", rest.len()));
        }
        let (s, rest) = rest.split_at(len);
        out.push(String::from_utf8(s.to_vec()).map_err(|_| format!("BYTES element {} is not UTF-8", out.len()))?);
        bytes = rest;
    }
    if out.len() != count {
        return Err(format!("{} BYTES elements in the binary data, the shape says {count}", out.len()));
    }
    Ok(out)
}

/// IEEE half precision to f64 (subnormals, infinities and NaN included).
fn half_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let frac = (h & 0x3ff) as f64;
    sign * match exp {
        0 => frac * 2f64.powi(-24),
        31 if frac == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        e => (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
    }
}

/// An output tensor's JSON `data` (numbers for FP64, strings for BYTES) as binary.
pub fn encode(datatype: &str, data: &Value) -> Vec<u8> {
    let items = data.as_array().map_or(&[][..], Vec::as_slice);
    let mut out = Vec::with_capacity(items.len() * 8);
    for v in items {
        if datatype == "BYTES" {
            let s = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            out.extend_from_slice(&(s.len() as u32).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        } else {
            out.extend_from_slice(&v.as_f64().unwrap_or(f64::NAN).to_le_bytes());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every datatype decodes to its values; BYTES round-trip; wrong sizes are refused.
    #[test]
    fn elements_decode_and_encode() {
        let fp64: Vec<u8> = [1.5f64, -2.25].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(decode("FP64", &fp64, 2), Ok(Elements::Numbers(vec![1.5, -2.25])));
        let fp32: Vec<u8> = [0.5f32, 3.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(decode("FP32", &fp32, 2), Ok(Elements::Numbers(vec![0.5, 3.0])));
        // 1.0, -2.0, 65504 (largest half), the smallest subnormal.
        let fp16: Vec<u8> = [0x3c00u16, 0xc000, 0x7bff, 0x0001].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(decode("FP16", &fp16, 4), Ok(Elements::Numbers(vec![1.0, -2.0, 65504.0, 2f64.powi(-24)])));
        let ints: Vec<u8> = [-3i32, 7].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(decode("INT32", &ints, 2), Ok(Elements::Numbers(vec![-3.0, 7.0])));
        assert_eq!(decode("INT8", &[0xff, 2], 2), Ok(Elements::Numbers(vec![-1.0, 2.0])));
        assert_eq!(decode("UINT8", &[0xff], 1), Ok(Elements::Numbers(vec![255.0])));
        assert!(decode("FP64", &fp64[..12], 2).unwrap_err().contains("12 bytes"));
        assert!(decode("BOOL", &[1], 1).unwrap_err().contains("unsupported"));

        let words = json!(["ab", "", "été"]);
        let bytes = encode("BYTES", &words);
        assert_eq!(decode("BYTES", &bytes, 3), Ok(Elements::Strings(vec!["ab".into(), "".into(), "été".into()])));
        assert!(decode("BYTES", &bytes, 2).unwrap_err().contains("the shape says 2"));
        assert!(decode("BYTES", &bytes[..bytes.len() - 1], 3).unwrap_err().contains("remain"));
        assert!(decode("BYTES", &[1, 0], 1).unwrap_err().contains("4-byte length"));
        assert_eq!(encode("FP64", &json!([1.5, -2.25])), fp64);
    }

    #[test]
    fn bodies_split_at_the_header_length() {
        let body = b"{\"a\":1}\x01\x02";
        assert_eq!(split(body, Some("7")), Ok((&body[..7], &body[7..])));
        assert_eq!(split(body, None), Ok((&body[..], &[][..])));
        assert!(split(body, Some("10")).unwrap_err().contains("9 bytes"));
        assert!(split(body, Some("x")).unwrap_err().contains("byte count"));
    }
}
