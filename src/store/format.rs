//! The model file: `MAGIC | version (u32 LE) | ...`, checksummed, versioned, one object
//! per model.
//!
//! Version 4 (written now) is `MAGIC | 4 | head length (u64) | head CRC-32 (u32) | body
//! length (u64) | body CRC-32 (u32) | head | body`: the head a postcard [`ModelHead`]
//! (what a listing shows: names, kind, kernel, report), the body a postcard
//! [`StoredModel`] (f64 bit-exact). A replica learns of a model from its first few
//! kilobytes, without downloading its arrays. Versions 1 to 3 (`MAGIC | version |
//! payload length (u64) | CRC-32 (u32) | StoredModel`) still load; they have no head.

use super::StoredModel;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

const MAGIC: &[u8; 8] = b"MERCERM\0";
/// 2 added classes and named arrays to `StoredFit`; 3 added [`StoredModel::extra`]; 4
/// put a [`ModelHead`] before the model; 5 added `StoredFit::rows` (string and token-list
/// training rows) and [`StoredModel::sample`]; 6 added `StoredRows::Indices` (a
/// precomputed kernel's rows; a version 5 body is a version 6 body without them).
pub const VERSION: u32 = 6;
const LEGACY_HEADER: usize = 8 + 4 + 8 + 4;
pub const HEADER: usize = 8 + 4 + 8 + 4 + 8 + 4;

/// What a listing needs to show a model, readable without its arrays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelHead {
    pub id: Uuid,
    pub name: Option<String>,
    /// JSON text of the client's metadata.
    pub metadata: Option<String>,
    pub created_at_unix_nanos: u128,
    pub n_train: u64,
    pub n_features: u64,
    /// The model's name in the API (`gaussian_process`, ...).
    pub kind: String,
    /// JSON text of a [`super::ModelSummary`].
    pub summary: String,
    /// As [`StoredModel::extra`].
    pub extra: String,
}

/// What the first bytes of a file say.
pub enum Prefix {
    /// A version 4 file whose head fits in the bytes given.
    Head(ModelHead),
    /// A version 4 file whose head needs this many bytes from the start.
    Need(usize),
    /// Versions 1 to 3: the whole file is needed.
    Legacy,
}

pub fn encode(model: &StoredModel, head: &ModelHead) -> Vec<u8> {
    let head = postcard::to_allocvec(head).expect("a model head serialises");
    // The body (a GP's is mostly its n^2 factor) is serialised once, in place: a body
    // built apart and then copied cost two more passes over hundreds of MB.
    let body_len = postcard::experimental::serialized_size(model).expect("a stored model serialises");
    let body_at = HEADER + head.len();
    let mut out = crate::linalg::zeroed_bytes(body_at + body_len);
    let written = postcard::to_slice(model, &mut out[body_at..]).expect("the body fits its measured size").len();
    assert_eq!(written, body_len, "postcard's measured size is the serialised size");
    let body_crc = crc32fast::hash(&out[body_at..]);
    let mut header = Vec::with_capacity(HEADER);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&VERSION.to_le_bytes());
    header.extend_from_slice(&(head.len() as u64).to_le_bytes());
    header.extend_from_slice(&crc32fast::hash(&head).to_le_bytes());
    header.extend_from_slice(&(body_len as u64).to_le_bytes());
    header.extend_from_slice(&body_crc.to_le_bytes());
    out[..HEADER].copy_from_slice(&header);
    out[HEADER..body_at].copy_from_slice(&head);
    out
}

fn version_of(bytes: &[u8]) -> Result<u32, String> {
    if bytes.len() < LEGACY_HEADER || &bytes[..8] != MAGIC {
        return Err("not a mercer model file (bad magic or too short)".into());
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if !(1..=VERSION).contains(&version) {
        return Err(format!("unknown format version {version} (this build reads 1 to {VERSION})"));
    }
    Ok(version)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// Reads the head from the first bytes of a file (`total`: the file's size, if known).
pub fn decode_prefix(bytes: &[u8], total: Option<u64>) -> Result<Prefix, String> {
    if version_of(bytes)? < 4 {
        return Ok(Prefix::Legacy);
    }
    if bytes.len() < HEADER {
        return Ok(Prefix::Need(HEADER));
    }
    let (head_len, head_crc, body_len) = (u64_at(bytes, 12), u32_at(bytes, 20), u64_at(bytes, 24));
    let want = (HEADER as u64).checked_add(head_len).and_then(|n| n.checked_add(body_len));
    if let Some(total) = total.filter(|t| want != Some(*t)) {
        return Err(format!("truncated or padded: {total} bytes, header says {want:?}"));
    }
    if head_len > 1 << 30 {
        return Err(format!("implausible head length {head_len}"));
    }
    let end = HEADER + head_len as usize;
    if bytes.len() < end {
        return Ok(Prefix::Need(end));
    }
    let head = &bytes[HEADER..end];
    if crc32fast::hash(head) != head_crc {
        return Err("head checksum mismatch".into());
    }
    postcard::from_bytes(head).map(Prefix::Head).map_err(|e| format!("cannot decode the head: {e}"))
}

/// Reads and checks a whole file; the head is None for versions 1 to 3.
pub fn decode(bytes: &[u8]) -> Result<(Option<ModelHead>, StoredModel), String> {
    let version = version_of(bytes)?;
    if version < 4 {
        return decode_legacy(bytes, version).map(|m| (None, m));
    }
    let head = match decode_prefix(bytes, Some(bytes.len() as u64))? {
        Prefix::Head(h) => h,
        _ => return Err("truncated head".into()),
    };
    let (head_len, body_crc) = (u64_at(bytes, 12) as usize, u32_at(bytes, 32));
    let body = &bytes[HEADER + head_len..];
    if crc32fast::hash(body) != body_crc {
        return Err("checksum mismatch".into());
    }
    let model: StoredModel = if version == 4 {
        postcard::from_bytes::<v4::StoredModel>(body).map(v4::StoredModel::upgrade)
    } else {
        postcard::from_bytes(body)
    }
    .map_err(|e| format!("cannot decode: {e}"))?;
    if model.id != head.id {
        return Err(format!("the head names {} but the body {}", head.id, model.id));
    }
    Ok((Some(head), model))
}

fn decode_legacy(bytes: &[u8], version: u32) -> Result<StoredModel, String> {
    let len = u64_at(bytes, 12);
    let crc = u32_at(bytes, 20);
    let payload = &bytes[LEGACY_HEADER..];
    if payload.len() as u64 != len {
        return Err(format!("truncated or padded: payload has {} bytes, header says {len}", payload.len()));
    }
    if crc32fast::hash(payload) != crc {
        return Err("checksum mismatch".into());
    }
    let decoded = match version {
        1 => postcard::from_bytes::<v1::StoredModel>(payload).map(v1::StoredModel::upgrade),
        2 => postcard::from_bytes::<v2::StoredModel>(payload).map(v2::StoredModel::upgrade),
        _ => postcard::from_bytes::<v4::StoredModel>(payload).map(v4::StoredModel::upgrade),
    };
    decoded.map_err(|e| format!("cannot decode: {e}"))
}

/// The version 1 layout (regression models only), read and upgraded.
mod v1 {
    use serde::Deserialize;
    use uuid::Uuid;

    #[derive(Deserialize)]
    pub struct StoredModel {
        id: Uuid,
        name: Option<String>,
        metadata: Option<String>,
        created_at_unix_nanos: u128,
        n_train: u64,
        n_features: u64,
        fit: StoredFit,
    }

    #[derive(Deserialize)]
    struct StoredFit {
        kind: String,
        kernel: String,
        params: String,
        report: String,
        d: u64,
        x: Vec<f64>,
        alpha: Vec<f64>,
        factor: Vec<f64>,
        jitter: f64,
        y_mean: f64,
        y_std: f64,
    }

    impl StoredModel {
        pub fn upgrade(self) -> super::StoredModel {
            let f = self.fit;
            super::StoredModel {
                id: self.id,
                name: self.name,
                metadata: self.metadata,
                created_at_unix_nanos: self.created_at_unix_nanos,
                n_train: self.n_train,
                n_features: self.n_features,
                fit: crate::estimator::StoredFit {
                    kind: f.kind,
                    kernel: f.kernel,
                    params: f.params,
                    report: f.report,
                    d: f.d,
                    x: f.x,
                    alpha: f.alpha,
                    factor: f.factor,
                    jitter: f.jitter,
                    y_mean: f.y_mean,
                    y_std: f.y_std,
                    classes: "null".into(),
                    arrays: Vec::new(),
                    rows: Default::default(),
                },
                extra: "{}".into(),
                sample: String::new(),
            }
        }
    }
}

/// The layout of versions 3 and 4 (the body after the head): the current one less
/// `StoredFit::rows`.
mod v4 {
    use serde::Deserialize;
    use uuid::Uuid;

    #[derive(Deserialize)]
    pub struct StoredModel {
        id: Uuid,
        name: Option<String>,
        metadata: Option<String>,
        created_at_unix_nanos: u128,
        n_train: u64,
        n_features: u64,
        fit: StoredFit,
        extra: String,
    }

    #[derive(Deserialize)]
    pub struct StoredFit {
        kind: String,
        kernel: String,
        params: String,
        report: String,
        d: u64,
        x: Vec<f64>,
        alpha: Vec<f64>,
        factor: Vec<f64>,
        jitter: f64,
        y_mean: f64,
        y_std: f64,
        classes: String,
        arrays: Vec<(String, Vec<f64>)>,
    }

    impl StoredFit {
        pub fn upgrade(self) -> crate::estimator::StoredFit {
            crate::estimator::StoredFit {
                kind: self.kind,
                kernel: self.kernel,
                params: self.params,
                report: self.report,
                d: self.d,
                x: self.x,
                alpha: self.alpha,
                factor: self.factor,
                jitter: self.jitter,
                y_mean: self.y_mean,
                y_std: self.y_std,
                classes: self.classes,
                arrays: self.arrays,
                rows: Default::default(),
            }
        }
    }

    impl StoredModel {
        pub fn upgrade(self) -> super::StoredModel {
            super::StoredModel {
                id: self.id,
                name: self.name,
                metadata: self.metadata,
                created_at_unix_nanos: self.created_at_unix_nanos,
                n_train: self.n_train,
                n_features: self.n_features,
                fit: self.fit.upgrade(),
                extra: self.extra,
                sample: String::new(),
            }
        }
    }
}

/// The version 2 layout: version 3 less `extra`.
mod v2 {
    use serde::Deserialize;
    use uuid::Uuid;

    #[derive(Deserialize)]
    pub struct StoredModel {
        id: Uuid,
        name: Option<String>,
        metadata: Option<String>,
        created_at_unix_nanos: u128,
        n_train: u64,
        n_features: u64,
        fit: super::v4::StoredFit,
    }

    impl StoredModel {
        pub fn upgrade(self) -> super::StoredModel {
            super::StoredModel {
                id: self.id,
                name: self.name,
                metadata: self.metadata,
                created_at_unix_nanos: self.created_at_unix_nanos,
                n_train: self.n_train,
                n_features: self.n_features,
                fit: self.fit.upgrade(),
                extra: "{}".into(),
                sample: String::new(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimator::StoredFit;

    fn head_of(m: &StoredModel) -> ModelHead {
        ModelHead {
            id: m.id,
            name: m.name.clone(),
            metadata: m.metadata.clone(),
            created_at_unix_nanos: m.created_at_unix_nanos,
            n_train: m.n_train,
            n_features: m.n_features,
            kind: m.fit.kind.clone(),
            summary: r#"{"n_support":2}"#.into(),
            extra: m.extra.clone(),
        }
    }

    /// The file is the header, then the head and the body as postcard writes them on their
    /// own: serialising the body in place changed no byte of the format.
    #[test]
    fn the_body_serialised_in_place_is_the_format() {
        let m = sample();
        let head = postcard::to_allocvec(&head_of(&m)).unwrap();
        let body = postcard::to_allocvec(&m).unwrap();
        let mut want = Vec::new();
        want.extend_from_slice(MAGIC);
        want.extend_from_slice(&VERSION.to_le_bytes());
        want.extend_from_slice(&(head.len() as u64).to_le_bytes());
        want.extend_from_slice(&crc32fast::hash(&head).to_le_bytes());
        want.extend_from_slice(&(body.len() as u64).to_le_bytes());
        want.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        want.extend_from_slice(&head);
        want.extend_from_slice(&body);
        assert_eq!(encode(&m, &head_of(&m)), want);
    }

    fn sample() -> StoredModel {
        StoredModel {
            id: Uuid::new_v4(),
            name: Some("n".into()),
            metadata: Some(r#"{"a":1}"#.into()),
            created_at_unix_nanos: 1_700_000_000_123_456_789,
            n_train: 2,
            n_features: 1,
            fit: StoredFit {
                kind: "kernel_ridge".into(),
                kernel: r#"{"type":"rbf","length_scale":1.0}"#.into(),
                params: r#"{"lambda":0.1}"#.into(),
                report: r#"{"duration_ms":1.5,"jitter":0.0}"#.into(),
                d: 1,
                x: vec![0.1, f64::MIN_POSITIVE],
                alpha: vec![1.0 / 3.0, -2.5e-300],
                factor: vec![],
                jitter: 0.0,
                y_mean: 0.0,
                y_std: 1.0,
                classes: "null".into(),
                arrays: vec![("extra".into(), vec![2.0])],
                rows: Default::default(),
            },
            extra: r#"{"dataset":null}"#.into(),
            sample: r#"{"n_train":2,"x":[[0.1]],"y":[1.0]}"#.into(),
        }
    }

    /// The fields of a `StoredFit` as versions 2 to 4 wrote them (no `rows`).
    #[derive(serde::Serialize)]
    #[allow(clippy::type_complexity)]
    struct FitV4<'a>(
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        u64,
        &'a [f64],
        &'a [f64],
        &'a [f64],
        f64,
        f64,
        f64,
        &'a str,
        &'a [(String, Vec<f64>)],
    );

    fn fit_v4(f: &StoredFit) -> FitV4<'_> {
        FitV4(
            &f.kind, &f.kernel, &f.params, &f.report, f.d, &f.x, &f.alpha, &f.factor, f.jitter, f.y_mean, f.y_std,
            &f.classes, &f.arrays,
        )
    }

    #[test]
    fn string_rows_round_trip_and_version_4_bodies_still_load() {
        let mut m = sample();
        m.fit.d = 0;
        m.fit.x = vec![];
        m.fit.rows = crate::estimator::StoredRows::Text(vec!["héllo".into(), String::new()]);
        let bytes = encode(&m, &head_of(&m));
        assert_eq!(decode(&bytes).unwrap().1, m);

        #[derive(serde::Serialize)]
        struct ModelV4<'a>(Uuid, &'a Option<String>, &'a Option<String>, u128, u64, u64, FitV4<'a>, &'a str);
        let m = sample();
        let body = ModelV4(
            m.id,
            &m.name,
            &m.metadata,
            m.created_at_unix_nanos,
            m.n_train,
            m.n_features,
            fit_v4(&m.fit),
            &m.extra,
        );
        let head = postcard::to_allocvec(&head_of(&m)).unwrap();
        let body = postcard::to_allocvec(&body).unwrap();
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&4u32.to_le_bytes());
        bytes.extend_from_slice(&(head.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&head).to_le_bytes());
        bytes.extend_from_slice(&(body.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        bytes.extend_from_slice(&head);
        bytes.extend_from_slice(&body);
        let (h, back) = decode(&bytes).unwrap();
        assert_eq!((h, back), (Some(head_of(&m)), StoredModel { sample: String::new(), ..m }));
    }

    #[test]
    fn encoding_round_trips_bit_exactly() {
        let m = sample();
        let bytes = encode(&m, &head_of(&m));
        let (head, back) = decode(&bytes).unwrap();
        assert_eq!(back, m);
        assert_eq!(head, Some(head_of(&m)));
        assert_eq!(back.fit.alpha[1].to_bits(), m.fit.alpha[1].to_bits());
        // The head alone, from a prefix of the file.
        let total = bytes.len() as u64;
        let Prefix::Need(need) = decode_prefix(&bytes[..HEADER], Some(total)).unwrap() else { panic!("needs more") };
        let Prefix::Head(h) = decode_prefix(&bytes[..need], Some(total)).unwrap() else { panic!("a head") };
        assert_eq!(h, head_of(&m));
    }

    /// Files written by the first release (format 1, no classes or arrays) still load.
    #[test]
    fn version_1_files_are_upgraded() {
        #[derive(serde::Serialize)]
        struct FitV1<'a>(&'a str, &'a str, &'a str, &'a str, u64, Vec<f64>, Vec<f64>, Vec<f64>, f64, f64, f64);
        #[derive(serde::Serialize)]
        struct ModelV1<'a>(Uuid, Option<String>, Option<String>, u128, u64, u64, FitV1<'a>);
        let m = sample();
        let f = &m.fit;
        let old = ModelV1(
            m.id,
            m.name.clone(),
            m.metadata.clone(),
            m.created_at_unix_nanos,
            m.n_train,
            m.n_features,
            FitV1(&f.kind, &f.kernel, &f.params, &f.report, f.d, f.x.clone(), f.alpha.clone(), vec![], 0.0, 0.0, 1.0),
        );
        let payload = postcard::to_allocvec(&old).unwrap();
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        bytes.extend_from_slice(&payload);
        let (head, back) = decode(&bytes).unwrap();
        assert!(head.is_none());
        assert!(matches!(decode_prefix(&bytes, Some(bytes.len() as u64)), Ok(Prefix::Legacy)));
        assert_eq!(
            back,
            StoredModel {
                fit: StoredFit { classes: "null".into(), arrays: vec![], ..m.fit.clone() },
                extra: "{}".into(),
                sample: String::new(),
                ..m
            }
        );
    }

    /// Version 2 files (no `extra`) still load.
    #[test]
    fn version_2_files_are_upgraded() {
        #[derive(serde::Serialize)]
        struct ModelV2<'a>(Uuid, &'a Option<String>, &'a Option<String>, u128, u64, u64, FitV4<'a>);
        let m = sample();
        let old = ModelV2(m.id, &m.name, &m.metadata, m.created_at_unix_nanos, m.n_train, m.n_features, fit_v4(&m.fit));
        let payload = postcard::to_allocvec(&old).unwrap();
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&2u32.to_le_bytes());
        bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        bytes.extend_from_slice(&payload);
        assert_eq!(decode(&bytes).unwrap().1, StoredModel { extra: "{}".into(), sample: String::new(), ..m });
    }

    #[test]
    fn damage_is_detected() {
        let m = sample();
        let bytes = encode(&m, &head_of(&m));
        let mut flipped = bytes.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0x40;
        assert!(decode(&flipped).unwrap_err().contains("checksum"));
        assert!(decode(&bytes[..bytes.len() - 3]).unwrap_err().contains("truncated"));
        let mut future = bytes.clone();
        future[8] = 9;
        assert!(decode(&future).unwrap_err().contains("version"));
        assert!(decode(b"hello").is_err());
        let mut head_flipped = bytes.clone();
        head_flipped[HEADER + 1] ^= 1;
        assert!(decode(&head_flipped).unwrap_err().contains("head checksum"));
    }
}
