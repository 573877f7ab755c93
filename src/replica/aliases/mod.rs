//! What this replica knows of the aliases: the newest setting of each it has read, never
//! moved back to an older generation than it holds, brought up to the store's by the
//! replica's listings (`Replica::sync`) and by the service after each write here.
//!
//! An alias's setting itself (routes with weights, a shadow, its history, its stored
//! form, the body of a PUT checked into one) is `setting`; writing settings, choosing a
//! route and running shadows are the service's (`service::aliases`).

pub mod setting;

use super::{locked, Replica};
use crate::store::StoreError;
use setting::Alias;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

/// The aliases as this replica last read them.
#[derive(Default)]
pub struct AliasCache {
    cache: RwLock<HashMap<String, Arc<Alias>>>,
    /// When the alias listing last began.
    synced: Mutex<Option<Instant>>,
    sync_lock: tokio::sync::Mutex<()>,
}

impl AliasCache {
    /// The newest setting of `name` read here.
    pub fn cached(&self, name: &str) -> Option<Arc<Alias>> {
        self.cache.read().unwrap_or_else(|p| p.into_inner()).get(name).cloned()
    }

    /// Keeps `alias` unless a newer generation is cached: a replica never goes back.
    pub fn remember(&self, alias: Alias) -> Arc<Alias> {
        let mut cache = self.cache.write().unwrap_or_else(|p| p.into_inner());
        match cache.get(&alias.name) {
            Some(have) if have.generation() >= alias.generation() => have.clone(),
            _ => {
                let alias = Arc::new(alias);
                cache.insert(alias.name.clone(), alias.clone());
                alias
            }
        }
    }

    /// Every alias in effect (not deleted), by name.
    pub fn live(&self) -> Vec<Arc<Alias>> {
        let cache = self.cache.read().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<Arc<Alias>> = cache.values().filter(|a| a.is_live()).cloned().collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }
}

impl Replica {
    /// Brings the alias cache up to the store's newest generation of every alias (unless
    /// a listing that began after this call finished meanwhile).
    pub async fn sync_aliases(&self) -> Result<(), StoreError> {
        let asked = Instant::now();
        let aliases = &self.aliases;
        let _one = aliases.sync_lock.lock().await;
        let last = *locked(&aliases.synced);
        if last.is_some_and(|t| t >= asked) {
            return Ok(());
        }
        let began = Instant::now();
        let listed = self.store.list_aliases().await?;
        for (name, generations) in listed {
            let newest = *generations.last().expect("a listed name has a generation");
            if aliases.cached(&name).is_some_and(|a| a.generation() >= newest) {
                continue;
            }
            if let Some(bytes) = self.store.alias_setting(&name, newest).await? {
                match Alias::from_bytes(&bytes) {
                    Ok(a) => {
                        aliases.remember(a);
                    }
                    Err(e) => tracing::warn!(alias = name, generation = newest, error = %e, "a damaged alias setting"),
                }
            }
        }
        *locked(&aliases.synced) = Some(began);
        Ok(())
    }
}
