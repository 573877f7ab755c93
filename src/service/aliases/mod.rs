//! Aliases: stable names for models. An alias routes each request to one of its models
//! by weight (a canary), may have a shadow that predicts the same rows after the answer
//! is sent, and keeps the history of its settings for a rollback.
//!
//! The store is the source of truth ([`crate::store::aliases`]): a setting is a new
//! generation written create-only, so that of two writers of one generation exactly one
//! lands (an `If-Match` writer that loses answers 412; one without retries on the newer
//! setting). A replica serves from its cache, refreshed with the models
//! (`store_refresh_secs`) and never moved back to an older generation than it holds.

mod shadow;

pub use crate::replica::aliases::setting::{self, check_name, Action, Alias, Route, Setting, Wanted};
pub use shadow::{Primary, ShadowHold};

use super::{Service, ServiceError};
use crate::spec::FieldError;
use std::sync::Arc;
use uuid::Uuid;

/// Tries of a write without `If-Match` that keeps losing its generation to others.
const WRITE_TRIES: usize = 8;

/// A write's condition on the alias's generation (`If-Match` / `If-None-Match`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Precondition {
    #[default]
    None,
    /// `If-Match: *`: the alias exists.
    Exists,
    /// `If-Match: "3", "4"`: the alias is at one of these generations (an unreadable tag
    /// matches none).
    Generation(Vec<u64>),
    /// `If-None-Match: *`: the alias does not exist.
    Absent,
}

/// Which model answers a request, and through which alias.
#[derive(Debug, Clone)]
pub struct Served {
    pub model: Uuid,
    pub alias: Option<AliasHit>,
}

#[derive(Debug, Clone)]
pub struct AliasHit {
    pub name: String,
    pub generation: u64,
    pub shadow: Option<Uuid>,
}

/// What the service keeps of the aliases beside the replica's cache of them
/// (`Replica::aliases`): its writes' turn and the shadows' slots.
pub struct Aliases {
    /// One write at a time from this replica (others are ordered by the store).
    writes: tokio::sync::Mutex<()>,
    shadows: shadow::Shadows,
}

impl Aliases {
    pub fn new(cores: usize) -> Aliases {
        Aliases { writes: tokio::sync::Mutex::new(()), shadows: shadow::Shadows::new(cores) }
    }
}

/// What a write sets: its action, routes, shadow and (a rollback's) restored generation.
struct Change {
    action: Action,
    routes: Vec<Route>,
    shadow: Option<Uuid>,
    restores: Option<u64>,
}

impl Service {
    /// Every alias in effect (the store listed now), by name.
    pub async fn list_aliases(&self) -> Result<Vec<Arc<Alias>>, ServiceError> {
        self.replica.sync_aliases().await.map_err(|e| self.store_failure("cannot list the aliases", e))?;
        Ok(self.replica.aliases.live())
    }

    /// One alias with its history, read from the store now.
    pub async fn alias(&self, name: &str) -> Result<Arc<Alias>, ServiceError> {
        check_name(name).map_err(|_| ServiceError::AliasNotFound(name.into()))?;
        if let Some(a) = self.read_alias(name).await? {
            let a = self.replica.aliases.remember(a);
            if a.is_live() {
                return Ok(a);
            }
        }
        Err(ServiceError::AliasNotFound(name.into()))
    }

    /// Sets an alias from a PUT's body; `true` when the name was not in use.
    pub async fn set_alias(
        &self,
        name: &str,
        body: &serde_json::Value,
        pre: &Precondition,
        by: Option<String>,
    ) -> Result<(Arc<Alias>, bool), ServiceError> {
        check_name(name)?;
        let wanted = Wanted::from_json(body)?;
        self.check_routed_models(&wanted).await?;
        self.write_alias(name, pre, by, |_| {
            Ok(Change { action: Action::Set, routes: wanted.routes.clone(), shadow: wanted.shadow, restores: None })
        })
        .await
    }

    /// Sets an alias to the setting before the one in effect (409 when there is none, or
    /// when one of its models is gone).
    pub async fn rollback_alias(
        &self,
        name: &str,
        pre: &Precondition,
        by: Option<String>,
    ) -> Result<Arc<Alias>, ServiceError> {
        check_name(name).map_err(|_| ServiceError::AliasNotFound(name.into()))?;
        let target = {
            let current = self.read_alias(name).await?.filter(|a| a.is_live());
            let current = current.ok_or_else(|| ServiceError::AliasNotFound(name.into()))?;
            current.rollback_target().cloned()
        };
        if let Some(t) = &target {
            for id in t.models() {
                if !self.is_ready_model(id).await {
                    return Err(ServiceError::Conflict(format!(
                        "generation {} routes to model {id}, which is no longer ready: set the alias instead",
                        t.generation
                    )));
                }
            }
        }
        let (alias, _) = self
            .write_alias(name, pre, by, |current| {
                let current =
                    current.filter(|a| a.is_live()).ok_or_else(|| ServiceError::AliasNotFound(name.into()))?;
                let t = current.rollback_target().ok_or_else(|| {
                    ServiceError::Conflict(format!(
                        "alias {name} has no earlier setting to roll back to in its last {} settings",
                        setting::HISTORY
                    ))
                })?;
                Ok(Change {
                    action: Action::Rollback,
                    routes: t.routes.clone(),
                    shadow: t.shadow,
                    restores: Some(t.generation),
                })
            })
            .await?;
        Ok(alias)
    }

    /// Deletes an alias (a setting with no routes: its generations go on counting).
    pub async fn delete_alias(&self, name: &str, pre: &Precondition, by: Option<String>) -> Result<(), ServiceError> {
        check_name(name).map_err(|_| ServiceError::AliasNotFound(name.into()))?;
        self.write_alias(name, pre, by, |current| {
            current.filter(|a| a.is_live()).ok_or_else(|| ServiceError::AliasNotFound(name.into()))?;
            Ok(Change { action: Action::Delete, routes: Vec::new(), shadow: None, restores: None })
        })
        .await?;
        Ok(())
    }

    /// The model a request to `target` (a model id or an alias name) is served by: an
    /// alias's route is chosen by weight, at the place `request_id` falls.
    pub async fn resolve(&self, target: &str, request_id: &str) -> Result<Served, ServiceError> {
        if let Ok(id) = Uuid::parse_str(target) {
            return Ok(Served { model: id, alias: None });
        }
        if check_name(target).is_err() {
            return Err(ServiceError::AliasNotFound(target.into()));
        }
        let mut alias = self.replica.aliases.cached(target);
        if alias.is_none() {
            // A name unknown here may have been set on another replica a moment ago (as
            // an unknown model id is looked for in the store; concurrent misses share
            // one listing).
            if let Err(e) = self.replica.sync_aliases().await {
                // Not a 404: the name may well exist once the store answers.
                return Err(self.store_failure("cannot list the aliases", e));
            }
            alias = self.replica.aliases.cached(target);
        }
        let alias = alias.filter(|a| a.is_live()).ok_or_else(|| ServiceError::AliasNotFound(target.into()))?;
        let current = alias.current();
        let model = current.choose(setting::draw(request_id, target));
        self.metrics.record_alias_request(target, model);
        Ok(Served {
            model,
            alias: Some(AliasHit { name: alias.name.clone(), generation: current.generation, shadow: current.shadow }),
        })
    }

    /// The aliases in effect that route to or shadow `id` (the store listed now).
    pub(super) async fn aliases_naming(&self, id: Uuid) -> Result<Vec<Arc<Alias>>, ServiceError> {
        self.replica.sync_aliases().await.map_err(|e| self.store_failure("cannot list the aliases", e))?;
        Ok(self.replica.aliases.live().into_iter().filter(|a| a.current().names(id)).collect())
    }

    /// Takes `id` out of every alias that names it (a forced model delete): the other
    /// routes' weights are scaled back to 100; an alias left with no route is deleted.
    pub(super) async fn unroute(&self, id: Uuid, by: Option<String>) -> Result<(), ServiceError> {
        for alias in self.aliases_naming(id).await? {
            self.write_alias(&alias.name, &Precondition::None, by.clone(), |current| {
                let Some(current) = current.filter(|a| a.is_live() && a.current().names(id)) else {
                    return Err(ServiceError::Conflict(String::new()));
                };
                let (routes, shadow) = current.current().without(id);
                let action = if routes.is_empty() { Action::Delete } else { Action::Unroute };
                let shadow = if routes.is_empty() { None } else { shadow };
                Ok(Change { action, routes, shadow, restores: None })
            })
            .await
            .map(|_| ())
            .or_else(|e| match e {
                // Another writer took it out (or deleted the alias) meanwhile.
                ServiceError::Conflict(ref d) if d.is_empty() => Ok(()),
                e => Err(e),
            })?;
        }
        Ok(())
    }

    /// The newest setting of `name` in the store (None: never set), with every stored
    /// generation of it.
    async fn read_alias_stored(&self, name: &str) -> Result<(Option<Alias>, Vec<u64>), ServiceError> {
        for _ in 0..3 {
            let listed = self
                .replica
                .store
                .list_aliases()
                .await
                .map_err(|e| self.store_failure("cannot list the aliases", e))?;
            let Some(generations) = listed.get(name).cloned() else { return Ok((None, Vec::new())) };
            let newest = *generations.last().expect("a listed name has a generation");
            let read = self.replica.store.alias_setting(name, newest).await;
            match read.map_err(|e| self.store_failure("cannot read the alias", e))? {
                Some(bytes) => {
                    let alias = Alias::from_bytes(&bytes)
                        .map_err(|e| ServiceError::Storage(format!("alias {name} generation {newest}: {e}")))?;
                    return Ok((Some(alias), generations));
                }
                // Pruned between the listing and the read: a newer one is there.
                None => continue,
            }
        }
        Err(ServiceError::Contended { detail: format!("alias {name} kept changing while it was read; retry") })
    }

    async fn read_alias(&self, name: &str) -> Result<Option<Alias>, ServiceError> {
        let (stored, _) = self.read_alias_stored(name).await?;
        // Never older than what this replica has served.
        Ok(match (stored, self.replica.aliases.cached(name)) {
            (Some(s), Some(c)) if c.generation() > s.generation() => Some((*c).clone()),
            (None, Some(c)) => Some((*c).clone()),
            (s, _) => s,
        })
    }

    /// Writes the next generation of `name` as `change` makes it from the one in effect.
    async fn write_alias(
        &self,
        name: &str,
        pre: &Precondition,
        by: Option<String>,
        change: impl Fn(Option<&Alias>) -> Result<Change, ServiceError>,
    ) -> Result<(Arc<Alias>, bool), ServiceError> {
        self.store_admission().await?;
        let _one = self.aliases.writes.lock().await;
        for _ in 0..WRITE_TRIES {
            let (current, stored) = self.read_alias_stored(name).await?;
            let live = current.as_ref().filter(|a| a.is_live());
            check_precondition(name, pre, live)?;
            let c = change(current.as_ref())?;
            let generation =
                current.as_ref().map_or(0, |a| a.generation()).max(stored.last().copied().unwrap_or(0)) + 1;
            let setting = Setting {
                generation,
                action: c.action,
                routes: c.routes,
                shadow: c.shadow,
                at: super::now(),
                by: by.clone(),
                restores: c.restores,
            };
            let next = match &current {
                Some(a) => a.then(setting),
                None => Alias { name: name.to_string(), history: vec![setting] },
            };
            let landed = self.replica.store.create_alias_setting(name, generation, next.to_bytes()).await;
            if landed.map_err(|e| self.store_failure("cannot store the alias", e))? {
                self.metrics.record_alias_change(c.action.name());
                self.replica.store.prune_alias(name, &stored, generation).await;
                return Ok((self.replica.aliases.remember(next), live.is_none()));
            }
            if *pre != Precondition::None {
                return Err(ServiceError::PreconditionFailed(format!(
                    "alias {name} was changed by another writer at generation {generation}"
                )));
            }
        }
        Err(ServiceError::Contended { detail: format!("alias {name} kept changing while this write ran; retry") })
    }

    /// The models of a PUT exist, are ready, and agree with the first route (task and
    /// feature count), each checked at its pointer.
    async fn check_routed_models(&self, wanted: &Wanted) -> Result<(), ServiceError> {
        let mut first: Option<(crate::estimator::Task, usize, Uuid)> = None;
        let ids = wanted.routes.iter().map(|r| r.model).zip(wanted.pointers.iter().cloned());
        for (id, pointer) in ids.chain(wanted.shadow.map(|s| (s, "/shadow".to_string()))) {
            let entry = match self.lookup(id).await {
                Ok(e) => e,
                Err(ServiceError::NotFound(_)) => {
                    return Err(FieldError::invalid(pointer, format!("there is no model {id}")).into())
                }
                Err(e) => return Err(e),
            };
            if entry.summary().is_none() {
                let status = entry.status();
                return Err(FieldError::invalid(pointer, format!("model {id} is {}, not ready", status.name())).into());
            }
            let (task, d) = (entry.kind.task(), entry.n_features);
            match first {
                None => first = Some((task, d, id)),
                Some((t0, d0, id0)) if t0 != task || d0 != d => {
                    return Err(FieldError::invalid(
                        pointer,
                        format!(
                            "model {id} ({}, {d} features) does not agree with model {id0} ({}, {d0} features): \
                             an alias's models share a task and a feature count",
                            task_name(task),
                            task_name(t0)
                        ),
                    )
                    .into())
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    async fn is_ready_model(&self, id: Uuid) -> bool {
        self.lookup(id).await.is_ok_and(|e| e.summary().is_some())
    }
}

fn check_precondition(name: &str, pre: &Precondition, live: Option<&Alias>) -> Result<(), ServiceError> {
    let failed = |detail: String| Err(ServiceError::PreconditionFailed(detail));
    match (pre, live) {
        (Precondition::None, _) => Ok(()),
        (Precondition::Exists, Some(_)) => Ok(()),
        (Precondition::Exists, None) => failed(format!("If-Match: alias {name} does not exist")),
        (Precondition::Absent, None) => Ok(()),
        (Precondition::Absent, Some(a)) => {
            failed(format!("If-None-Match: alias {name} exists (generation {})", a.generation()))
        }
        (Precondition::Generation(g), Some(a)) if g.contains(&a.generation()) => Ok(()),
        (Precondition::Generation(_), Some(a)) => {
            failed(format!("If-Match: alias {name} is at generation {}", a.generation()))
        }
        (Precondition::Generation(_), None) => failed(format!("If-Match: alias {name} does not exist")),
    }
}

fn task_name(t: crate::estimator::Task) -> String {
    serde_json::to_value(t).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}
