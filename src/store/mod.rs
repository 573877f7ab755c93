//! The durable store: one file per ready model in the data directory, and the uploaded
//! datasets beside them ([`datasets`]).
//!
//! A file is `MAGIC | version (u32 LE) | payload length (u64 LE) | CRC-32 of the payload
//! (u32 LE) | payload`, the payload a postcard encoding of [`StoredModel`] (f64 bit-exact).
//! Writes are atomic: a temporary file is written and fsynced, renamed over the final
//! name, and the directory is fsynced, so a model acknowledged with 201 survives a crash
//! that follows at once. At start every file is read back; one that is corrupt,
//! truncated or of an unknown version is moved to `quarantine/` and skipped, never a
//! crash.

pub mod datasets;

use crate::estimator::{FittedModel, StoredFit};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use uuid::Uuid;

const MAGIC: &[u8; 8] = b"MERCERM\0";
/// 2 added classes and named arrays to [`StoredFit`]; 3 added [`StoredModel::extra`].
/// Files of versions 1 and 2 still load.
const VERSION: u32 = 3;
const HEADER: usize = 8 + 4 + 8 + 4;
const EXTENSION: &str = "model";

/// Everything needed to bring a ready model back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredModel {
    pub id: Uuid,
    pub name: Option<String>,
    /// JSON text of the client's metadata.
    pub metadata: Option<String>,
    pub created_at_unix_nanos: u128,
    pub n_train: u64,
    pub n_features: u64,
    pub fit: StoredFit,
    /// JSON text of an object with the model's other facts (its origin: dataset and
    /// feature names), so that new facts need no new format version.
    pub extra: String,
}

impl StoredModel {
    pub fn created_at(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_nanos(self.created_at_unix_nanos.min(u64::MAX as u128) as u64)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot write {path}: {source}")]
    Write { path: String, source: std::io::Error },
    #[error("{path}: {reason}")]
    Corrupt { path: String, reason: String },
}

impl StoreError {
    /// Whether the disk is full (the request gets 507 rather than a generic 5xx).
    pub fn is_out_of_space(&self) -> bool {
        matches!(self, StoreError::Write { source, .. } if source.raw_os_error() == Some(libc::ENOSPC))
    }
}

/// A model read back at start.
pub struct Loaded {
    pub model: StoredModel,
    pub fitted: FittedModel,
}

/// What a start-up load found.
#[derive(Default)]
pub struct LoadReport {
    pub loaded: Vec<Loaded>,
    /// Files moved to quarantine, with why.
    pub quarantined: Vec<(PathBuf, String)>,
}

pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// A store in `dir` (created if missing; a failure here shows up at the first write).
    pub fn open(dir: impl Into<PathBuf>) -> Store {
        let dir = dir.into();
        if let Err(e) = fs::create_dir_all(&dir) {
            tracing::error!(dir = %dir.display(), error = %e, "cannot create the data directory; fits will fail to store");
        }
        Store { dir }
    }

    fn path_of(&self, id: Uuid) -> PathBuf {
        self.dir.join(format!("{id}.{EXTENSION}"))
    }

    /// Writes `model` durably (temporary file, fsync, rename, fsync of the directory).
    pub fn save(&self, model: &StoredModel) -> Result<(), StoreError> {
        let path = self.path_of(model.id);
        let tmp = self.dir.join(format!(".{}.tmp", model.id));
        let err = |p: &Path, source| StoreError::Write { path: p.display().to_string(), source };
        let bytes = encode(model);
        let result = (|| {
            let mut f = File::create(&tmp).map_err(|e| err(&tmp, e))?;
            f.write_all(&bytes).map_err(|e| err(&tmp, e))?;
            f.sync_all().map_err(|e| err(&tmp, e))?;
            fs::rename(&tmp, &path).map_err(|e| err(&path, e))?;
            sync_dir(&self.dir).map_err(|e| err(&self.dir, e))
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }

    /// Removes a model's file (absent is fine).
    pub fn remove(&self, id: Uuid) -> Result<(), StoreError> {
        let path = self.path_of(id);
        match fs::remove_file(&path) {
            Ok(()) => {
                sync_dir(&self.dir).map_err(|e| StoreError::Write { path: self.dir.display().to_string(), source: e })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::Write { path: path.display().to_string(), source: e }),
        }
    }

    /// Reads every stored model; unreadable files go to `quarantine/`.
    pub fn load(&self) -> LoadReport {
        let mut report = LoadReport::default();
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) => {
                tracing::error!(dir = %self.dir.display(), error = %e, "cannot read the data directory");
                return report;
            }
        };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        let mut models = Vec::new();
        for path in paths {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
            if name.starts_with('.') && name.ends_with(".tmp") {
                // A write that never reached its rename: it was never acknowledged.
                let _ = fs::remove_file(&path);
            } else if path.extension().and_then(|e| e.to_str()) == Some(EXTENSION) && path.is_file() {
                models.push(path);
            }
        }
        // Reading, checking and decoding run on every core; quarantining stays in order.
        let results: Vec<_> = models.into_par_iter().map(|p| (read_model(&p), p)).collect();
        for (result, path) in results {
            match result {
                Ok(loaded) => report.loaded.push(loaded),
                Err(reason) => {
                    let target = self.quarantine(&path);
                    tracing::warn!(file = %path.display(), moved_to = %target.display(), reason = %reason, "quarantined a stored model");
                    report.quarantined.push((path, reason));
                }
            }
        }
        report
    }

    fn quarantine(&self, path: &Path) -> PathBuf {
        let dir = self.dir.join("quarantine");
        let _ = fs::create_dir_all(&dir);
        let target = dir.join(path.file_name().unwrap_or_default());
        if fs::rename(path, &target).is_err() {
            tracing::error!(file = %path.display(), "cannot move a corrupt model to quarantine; leaving it in place");
        }
        target
    }
}

fn read_model(path: &Path) -> Result<Loaded, String> {
    let bytes = fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    let model = decode(&bytes)?;
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    if stem != model.id.to_string() {
        return Err(format!("file name does not match the stored id {}", model.id));
    }
    let mut model = model;
    // The arrays move into the fitted model; the stored copy keeps only the metadata.
    let fit = std::mem::take(&mut model.fit);
    let fitted = FittedModel::from_stored(fit).map_err(|e| e.to_string())?;
    Ok(Loaded { model, fitted })
}

pub fn encode(model: &StoredModel) -> Vec<u8> {
    let payload = postcard::to_allocvec(model).expect("a stored model serialises");
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

pub fn decode(bytes: &[u8]) -> Result<StoredModel, String> {
    if bytes.len() < HEADER || &bytes[..8] != MAGIC {
        return Err("not a mercer model file (bad magic or too short)".into());
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if !(1..=VERSION).contains(&version) {
        return Err(format!("unknown format version {version} (this build reads 1 to {VERSION})"));
    }
    let len = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"));
    let crc = u32::from_le_bytes(bytes[20..24].try_into().expect("4 bytes"));
    let payload = &bytes[HEADER..];
    if payload.len() as u64 != len {
        return Err(format!("truncated or padded: payload has {} bytes, header says {len}", payload.len()));
    }
    if crc32fast::hash(payload) != crc {
        return Err("checksum mismatch".into());
    }
    let decoded = match version {
        1 => postcard::from_bytes::<v1::StoredModel>(payload).map(v1::StoredModel::upgrade),
        2 => postcard::from_bytes::<v2::StoredModel>(payload).map(v2::StoredModel::upgrade),
        _ => postcard::from_bytes(payload),
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
                fit: super::StoredFit {
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
                },
                extra: "{}".into(),
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
        fit: crate::estimator::StoredFit,
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
                fit: self.fit,
                extra: "{}".into(),
            }
        }
    }
}

pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

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
            },
            extra: r#"{"dataset":null}"#.into(),
        }
    }

    #[test]
    fn encoding_round_trips_bit_exactly() {
        let m = sample();
        let back = decode(&encode(&m)).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.fit.alpha[1].to_bits(), m.fit.alpha[1].to_bits());
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
        let back = decode(&bytes).unwrap();
        assert_eq!(
            back,
            StoredModel {
                fit: StoredFit { classes: "null".into(), arrays: vec![], ..m.fit.clone() },
                extra: "{}".into(),
                ..m
            }
        );
    }

    /// Version 2 files (no `extra`) still load.
    #[test]
    fn version_2_files_are_upgraded() {
        #[derive(serde::Serialize)]
        struct ModelV2<'a>(Uuid, &'a Option<String>, &'a Option<String>, u128, u64, u64, &'a StoredFit);
        let m = sample();
        let old = ModelV2(m.id, &m.name, &m.metadata, m.created_at_unix_nanos, m.n_train, m.n_features, &m.fit);
        let payload = postcard::to_allocvec(&old).unwrap();
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&2u32.to_le_bytes());
        bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        bytes.extend_from_slice(&payload);
        assert_eq!(decode(&bytes).unwrap(), StoredModel { extra: "{}".into(), ..m });
    }

    #[test]
    fn damage_is_detected() {
        let bytes = encode(&sample());
        let mut flipped = bytes.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0x40;
        assert!(decode(&flipped).unwrap_err().contains("checksum"));
        assert!(decode(&bytes[..bytes.len() - 3]).unwrap_err().contains("truncated"));
        let mut future = bytes.clone();
        future[8] = 9;
        assert!(decode(&future).unwrap_err().contains("version"));
        assert!(decode(b"hello").is_err());
    }
}
