//! Aliases in the store: each setting of an alias is one object, written once and never
//! changed, so that replicas sharing the store agree on its order with create-only
//! writes as their only lock.
//!
//! - `aliases/NAME.GEN.alias`: setting GEN of alias NAME (JSON: its routes, shadow, who
//!   and when, and the settings before it), created with `put_new`: of two replicas
//!   writing generation GEN, exactly one lands and the other learns it lost.
//!
//! The newest generation of a name is its setting now (a delete is a setting too, with
//! no routes, so that the name's generations go on counting). Generations more than
//! [`KEEP_GENERATIONS`] behind the newest are removed: every setting carries the history
//! a client is shown, so no reader needs an older object.

use super::blobs::BlobError;
use super::{Store, StoreError, SMALL_CALL};
use bytes::Bytes;
use std::collections::BTreeMap;

const DIR: &str = "aliases";

/// Objects of one alias kept behind its newest (a reader that listed just before a
/// write still finds the object it listed).
pub const KEEP_GENERATIONS: u64 = 8;

fn key(name: &str, generation: u64) -> String {
    format!("{DIR}/{name}.{generation:010}.alias")
}

/// `NAME.GEN.alias` -> (NAME, GEN).
fn parse_key(key: &str) -> Option<(&str, u64)> {
    let file = key.rsplit('/').next()?;
    let stem = file.strip_suffix(".alias")?;
    let (name, generation) = stem.rsplit_once('.')?;
    Some((name, generation.parse().ok()?))
}

impl Store {
    /// Every alias name in the store with the generations stored for it, oldest first.
    pub async fn list_aliases(&self) -> Result<BTreeMap<String, Vec<u64>>, StoreError> {
        let listed = self.call("list", DIR, SMALL_CALL, self.blobs.list(DIR)).await?;
        let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for o in &listed {
            if let Some((name, generation)) = parse_key(&o.key) {
                out.entry(name.to_string()).or_default().push(generation);
            }
        }
        for generations in out.values_mut() {
            generations.sort_unstable();
        }
        Ok(out)
    }

    /// Setting `generation` of alias `name`; None when it is not (or no longer) stored.
    pub async fn alias_setting(&self, name: &str, generation: u64) -> Result<Option<Bytes>, StoreError> {
        let key = key(name, generation);
        match self.call("get", &key, SMALL_CALL, self.blobs.get(&key)).await {
            Ok(b) => Ok(Some(b)),
            Err(BlobError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes setting `generation` of alias `name` unless one is there: `Ok(false)` when
    /// another writer had it.
    pub async fn create_alias_setting(&self, name: &str, generation: u64, bytes: Bytes) -> Result<bool, StoreError> {
        self.create_once(key(name, generation), bytes).await
    }

    /// Removes the settings of `name` more than KEEP_GENERATIONS behind `newest` (best
    /// effort: one left behind is removed by a later write).
    pub async fn prune_alias(&self, name: &str, stored: &[u64], newest: u64) {
        for &generation in stored.iter().filter(|&&g| g + KEEP_GENERATIONS < newest) {
            let key = key(name, generation);
            if let Err(e) = self.call("delete", &key, SMALL_CALL, self.blobs.delete(&key)).await {
                tracing::debug!(alias = name, generation, error = %e, "cannot remove an old alias setting");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_back_whatever_the_name_holds() {
        for name in ["champion", "a.b.c", "v1.2-rc_3", "x"] {
            assert_eq!(parse_key(&key(name, 42)), Some((name, 42)));
        }
        assert_eq!(parse_key("aliases/champion.alias"), None);
        assert_eq!(parse_key("aliases/champion.00x.alias"), None);
        assert_eq!(parse_key("aliases/champion.0000000001.model"), None);
    }
}
