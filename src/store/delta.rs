//! Online updates as deltas: each appended version is one small object,
//! `deltas/ID.VERSION` (the version zero-padded to 20 digits, so names sort by version),
//! written create-only beside the model's full object `ID.model`. A model is its full
//! object (version b, said in its head) and its deltas b+1, b+2, ... replayed in order;
//! a compaction writes a full object of a newer version over the old one and deletes the
//! deltas it covers.
//!
//! Why create-only is enough for two writers: of two replicas appending version v+1, one
//! key, exactly one write lands and the other redoes its append on top of it. Why a
//! delta also carries a write id: a compaction deletes the deltas it covers, which frees
//! their keys, so an appender that learns (by the head it reads after its write) that
//! the full object is already at its version or later looks for its write id among the
//! ones the full object says it folded in, to know whether its rows are in.
//!
//! File: `MAGIC | format version (u32 LE) | length (u64) | CRC-32 (u32) | postcard Delta`.

use super::blobs::BlobError;
use super::{bulk, Store, StoreError, SMALL_CALL};
use crate::estimator::StoredAppend;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

const MAGIC: &[u8; 8] = b"MERCERD\0";
const VERSION: u32 = 1;
const HEADER: usize = 8 + 4 + 8 + 4;
/// Where deltas live, one directory for every model's (a replica's refresh lists it once).
pub const DIR: &str = "deltas";

/// What a delta says of the version it makes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeltaHead {
    pub id: Uuid,
    /// The model's version once these rows are in.
    pub version: u64,
    /// Random, chosen by the writer (see the module's docs).
    pub write_id: u64,
    /// Training rows at `version`.
    pub n_train: u64,
    /// JSON text of the [`super::ModelSummary`] of `version`.
    pub summary: String,
}

/// One appended version: what it makes, and the rows that make it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    pub head: DeltaHead,
    pub rows: StoredAppend,
}

pub fn delta_key(id: Uuid, version: u64) -> String {
    format!("{DIR}/{id}.{version:020}")
}

/// The model and version a delta's key names (None: not a delta's key).
pub fn parse_delta_key(key: &str) -> Option<(Uuid, u64)> {
    let name = key.strip_prefix(DIR)?.strip_prefix('/')?;
    let (id, version) = name.split_once('.')?;
    if version.len() != 20 || !version.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((Uuid::parse_str(id).ok()?, version.parse().ok()?))
}

pub fn encode(delta: &Delta) -> Vec<u8> {
    let payload = postcard::to_allocvec(delta).expect("a delta serialises");
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

/// Bytes the rows of a delta take in it.
pub fn rows_bytes(rows: &StoredAppend) -> u64 {
    postcard::experimental::serialized_size(rows).expect("rows serialise") as u64
}

/// Reads and checks a delta that should be version `version` of model `id`.
pub fn decode(bytes: &[u8], id: Uuid, version: u64) -> Result<Delta, String> {
    if bytes.len() < HEADER || &bytes[..8] != MAGIC {
        return Err("not a mercer delta (bad magic or too short)".into());
    }
    let format = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if format != VERSION {
        return Err(format!("unknown delta format version {format} (this build reads {VERSION})"));
    }
    let len = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"));
    let crc = u32::from_le_bytes(bytes[20..24].try_into().expect("4 bytes"));
    let payload = &bytes[HEADER..];
    if payload.len() as u64 != len {
        return Err(format!("truncated or padded: {} bytes of payload, header says {len}", payload.len()));
    }
    if crc32fast::hash(payload) != crc {
        return Err("checksum mismatch".into());
    }
    let delta: Delta = postcard::from_bytes(payload).map_err(|e| format!("cannot decode: {e}"))?;
    if (delta.head.id, delta.head.version) != (id, version) {
        return Err(format!(
            "the delta of {id} version {version} holds {} version {}",
            delta.head.id, delta.head.version
        ));
    }
    Ok(delta)
}

/// A delta as a listing shows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ListedDelta {
    pub id: Uuid,
    pub version: u64,
    pub bytes: u64,
}

impl Store {
    /// Writes a delta, durably, only if its version has none yet; returns its size. A
    /// [`StoreError::is_conflict`] error: another writer took that version.
    pub async fn create_delta(&self, delta: &Delta) -> Result<u64, StoreError> {
        let bytes = bytes::Bytes::from(encode(delta));
        let (key, size) = (delta_key(delta.head.id, delta.head.version), bytes.len() as u64);
        self.call("put", &key, bulk(size), self.blobs.put_new(&key, bytes)).await?;
        Ok(size)
    }

    /// Version `version`'s delta of model `id` (None: there is none).
    pub async fn load_delta(&self, id: Uuid, version: u64) -> Result<Option<Delta>, StoreError> {
        let key = delta_key(id, version);
        let bytes = match self.call("get", &key, bulk(64 << 20), self.blobs.get(&key)).await {
            Ok(b) => b,
            Err(BlobError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        decode(&bytes, id, version).map(Some).map_err(|reason| StoreError::Corrupt { key, reason })
    }

    /// Every stored delta, by model and version.
    pub async fn list_deltas(&self) -> Result<Vec<ListedDelta>, StoreError> {
        let listed = self.list(DIR).await?;
        Ok(listed
            .iter()
            .filter_map(|o| parse_delta_key(&o.key).map(|(id, version)| ListedDelta { id, version, bytes: o.size }))
            .collect())
    }

    pub async fn delete_delta(&self, id: Uuid, version: u64) -> Result<(), StoreError> {
        let key = delta_key(id, version);
        Ok(self.call("delete", &key, SMALL_CALL, self.blobs.delete(&key)).await?)
    }

    /// Deletes model `id`'s deltas up to version `up_to` (all of them for None), as a
    /// listing finds them; returns how many.
    pub async fn delete_deltas_of(&self, id: Uuid, up_to: Option<u64>) -> Result<usize, StoreError> {
        let mut deleted = 0;
        for d in self.list_deltas().await? {
            if d.id == id && up_to.is_none_or(|v| d.version <= v) {
                self.delete_delta(id, d.version).await?;
                deleted += 1;
            }
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimator::{StoredRows, TrainingSet};
    use crate::kernel::Points;

    fn delta() -> Delta {
        let new = TrainingSet::new(Points::from_rows(&[vec![1.0, 2.0], vec![3.0, -4.5]]), vec![0.5, f64::MIN_POSITIVE]);
        Delta {
            head: DeltaHead { id: Uuid::new_v4(), version: 7, write_id: 42, n_train: 12, summary: "{}".into() },
            rows: StoredAppend::of(&new, Some(&[0.1, 0.2]), None),
        }
    }

    /// A delta reads back equal, bit for bit; damage, truncation and a delta filed under
    /// another model's or version's key are refused.
    #[test]
    fn deltas_round_trip_and_damage_is_refused() {
        let d = delta();
        let bytes = encode(&d);
        assert_eq!(decode(&bytes, d.head.id, 7).unwrap(), d);
        let (rows, noise, weights) = d.rows.clone().restore().unwrap();
        assert_eq!((rows.x.n(), rows.y[1].to_bits()), (2, f64::MIN_POSITIVE.to_bits()));
        assert_eq!((noise, weights), (Some(vec![0.1, 0.2]), None));
        assert!(matches!(d.rows.rows, StoredRows::Numeric));

        let mut flipped = bytes.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(decode(&flipped, d.head.id, 7).unwrap_err().contains("checksum"));
        assert!(decode(&bytes[..bytes.len() - 1], d.head.id, 7).unwrap_err().contains("truncated"));
        assert!(decode(&bytes, d.head.id, 8).unwrap_err().contains("holds"));
        assert!(decode(&bytes, Uuid::new_v4(), 7).unwrap_err().contains("holds"));
        assert!(decode(b"MERCERM\0 a model", d.head.id, 7).is_err());
    }

    /// Keys name their model and version, sort by version, and nothing else parses.
    #[test]
    fn keys_name_model_and_version() {
        let id = Uuid::new_v4();
        assert_eq!(parse_delta_key(&delta_key(id, 12)), Some((id, 12)));
        assert!(delta_key(id, 9) < delta_key(id, 10));
        for other in [format!("{id}.model"), format!("deltas/{id}.12"), format!("deltas/{id}.0000000000000000001x")] {
            assert_eq!(parse_delta_key(&other), None, "{other}");
        }
    }
}
