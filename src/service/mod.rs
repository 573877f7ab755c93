//! The operations the HTTP API exposes, free of HTTP: validate a training request into
//! checked inputs, queue its fit, wait for it or not, predict, list, delete, drain.
//!
//! Handlers call one method here and map its result; every way an operation can fail is
//! a [`ServiceError`] variant, mapped to a status in one place (`api::problem`). Models
//! are here; uploaded datasets in [`datasets`].

pub mod aliases;
mod batch;
pub mod datasets;
mod deletes;
pub use crate::replica::Compaction;
mod observations;
mod posterior;
mod predict;
mod search;
pub mod studies;
mod training;
mod transform;

use crate::config::Config;
use crate::dataset::rows::Row;
use crate::estimator::{ModelSpec, TrainingData};
use crate::metrics::{Metrics, StatusLabels};
use crate::pool::FitPool;
use crate::registry::{Failure, FailureKind, ModelEntry, ModelState, Origin, Registry, Status};
use crate::replica::{Replica, ReplicaError};
use crate::spec::FieldError;
use crate::store::{Store, StoreError};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use uuid::Uuid;

pub use crate::estimator::Target;
pub use observations::RowExtras;
pub use posterior::SampleOptions;
pub use predict::QueryRows;

/// A training request after JSON parsing, before validation.
#[derive(Debug, Clone)]
pub struct TrainInput {
    pub model: String,
    pub kernel: Option<Value>,
    pub params: Option<Value>,
    pub source: TrainSource,
    pub name: Option<String>,
    pub metadata: Option<Value>,
    /// A model search (`search` in the body): the hyperparameters are chosen by
    /// cross-validation before the fit.
    pub search: Option<Value>,
}

/// Where a fit's rows come from.
#[derive(Debug, Clone)]
pub enum TrainSource {
    /// `x` and `y` in the request body (`y` absent for models without targets).
    Rows { x: Vec<Row>, y: Option<Vec<Target>> },
    /// An uploaded dataset, by the id the request gave (checked at validation).
    Dataset(String),
}

impl TrainInput {
    /// The name and metadata, dropping everything else.
    fn into_labels(self) -> (Option<String>, Option<Value>) {
        (self.name, self.metadata)
    }

    /// Whether the body's kernel is `precomputed`: its rows are then kernel values
    /// (checked and turned into indexed rows before anything else sees them).
    pub(crate) fn precomputed_kernel(&self) -> bool {
        self.kernel.as_ref().and_then(|k| k.get("type")).is_some_and(|t| t == "precomputed")
    }
}

/// A training request that passed validation: what to fit, on what, and where the rows
/// came from.
#[derive(Debug)]
pub struct ValidTraining {
    /// The model to fit; with a search, its first candidate (the search picks the one
    /// fitted).
    pub spec: ModelSpec,
    pub data: TrainingData,
    pub origin: Origin,
    pub search: Option<Box<SearchJob>>,
    /// A model without targets fitted on a dataset that has a target column: that column,
    /// not used by the fit, kept only to label the training rows of its plot sample.
    pub labels: Option<crate::dataset::Targets>,
}

/// A checked model search and what it may use.
#[derive(Debug)]
pub struct SearchJob {
    pub plan: crate::selection::Plan,
    /// Bytes left for a shared Gram table once the fits running at once are counted.
    pub table_budget: u64,
    /// The body's kernel and params, shown while the search runs.
    pub kernel: Value,
    pub params: Value,
}

#[derive(Debug)]
pub enum TrainOutcome {
    /// The fit finished and the model is ready.
    Ready(Arc<ModelEntry>),
    /// The fit is queued or running (asked for with wait=false, or it outlasted the wait).
    Accepted(Arc<ModelEntry>),
}

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("{0}")]
    Invalid(FieldError),
    #[error("{detail}")]
    TooLarge { detail: String },
    /// Too large, at a place in the request (a row over MERCER_MAX_ROW_CHARS).
    #[error("{pointer}: {detail}")]
    TooLargeAt { pointer: String, detail: String },
    #[error("no model with id {0}")]
    NotFound(Uuid),
    #[error("no dataset with id {0}")]
    DatasetNotFound(String),
    #[error("no study with id {0}")]
    StudyNotFound(Uuid),
    #[error("no model or alias named {0}")]
    AliasNotFound(String),
    /// An `If-Match` / `If-None-Match` that the alias's generation does not meet.
    #[error("{0}")]
    PreconditionFailed(String),
    /// The request conflicts with the resource's state (a rollback with nothing to go
    /// back to).
    #[error("{0}")]
    Conflict(String),
    /// A model that aliases route to (or shadow) cannot be deleted without `force`.
    #[error("model {id} is in use by alias{} {}: take it out first, or delete with ?force=true", if aliases.len() == 1 { "" } else { "es" }, aliases.join(", "))]
    ModelInUse { id: Uuid, aliases: Vec<String> },
    #[error("study {study} has no trial {trial}")]
    TrialNotFound { study: Uuid, trial: u64 },
    /// A trial's outcome was told already (a second tell is refused).
    #[error("trial {trial} was told already")]
    AlreadyTold { trial: u64 },
    #[error("model {id} is {}, not ready", status.name())]
    NotReady { id: Uuid, status: Status },
    #[error("the fit queue is full")]
    QueueFull { retry_after: Duration },
    #[error("the server is shutting down")]
    Draining,
    #[error("{}", .0.detail)]
    FitFailed(Failure),
    /// The store refused an operation that must be durable.
    #[error("{0}")]
    Storage(String),
    /// A stored delta of the model is damaged (`key`): the model cannot be brought up.
    #[error("{detail}")]
    DamagedModel { id: Uuid, key: String, detail: String },
    /// Other writers kept changing the model while an update ran.
    #[error("{detail}")]
    Contended { detail: String },
    /// The store cannot be reached: nothing that needs it can be acknowledged.
    #[error("{detail}")]
    StoreUnavailable { detail: String, retry_after: Duration },
}

impl From<FieldError> for ServiceError {
    fn from(e: FieldError) -> Self {
        ServiceError::Invalid(e)
    }
}

pub struct Service {
    pub config: Config,
    pub pool: Arc<FitPool>,
    pub metrics: Arc<Metrics>,
    /// This process's copy of the store: the store handle, the registry of models, and
    /// what keeps them in step with other replicas.
    pub replica: Arc<Replica>,
    ready: tokio::sync::watch::Sender<bool>,
    draining: AtomicBool,
    /// Predictions running on blocking threads now, batched ones on every core included
    /// (they compete with fits for cores): the busy figure with the pool's running fits.
    heavy_predicts: Arc<AtomicUsize>,
    /// HTTP requests being handled now (drain waits for them).
    in_flight: tokio::sync::watch::Sender<usize>,
    heavy_predict_slots: Semaphore,
    /// Stacks concurrent small predictions to one model into one call.
    batcher: batch::Batcher,
    /// What this replica has read of each study, and its surrogate.
    studies: Mutex<HashMap<Uuid, Arc<tokio::sync::Mutex<studies::Cached>>>>,
    /// The aliases' write turn and their shadows' slots (what this replica knows of the
    /// aliases is the replica's).
    aliases: aliases::Aliases,
}

impl From<ReplicaError> for ServiceError {
    fn from(e: ReplicaError) -> Self {
        match e {
            ReplicaError::NotFound(id) => ServiceError::NotFound(id),
            ReplicaError::NotReady { id, status } => ServiceError::NotReady { id, status },
            ReplicaError::Damaged(failure) => ServiceError::FitFailed(failure),
            ReplicaError::DamagedDelta { id, key, detail } => ServiceError::DamagedModel { id, key, detail },
            ReplicaError::Storage(detail) => ServiceError::Storage(detail),
            ReplicaError::Unavailable { detail, retry_after } => ServiceError::StoreUnavailable { detail, retry_after },
        }
    }
}

/// Now, RFC 3339 with milliseconds (when a trial or an alias setting was written).
fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

impl Service {
    /// Rows of `x` within MERCER_MAX_ROW_CHARS (413 at the first that is not).
    pub fn check_row_chars(&self, x: &[Row]) -> Result<(), ServiceError> {
        let max = self.config.max_row_chars;
        match crate::dataset::rows::first_too_long(x, max) {
            None => Ok(()),
            Some((i, what)) => Err(ServiceError::TooLargeAt {
                pointer: format!("/x/{i}"),
                detail: format!("row {i} is {what}, over the limit of {max} (MERCER_MAX_ROW_CHARS)"),
            }),
        }
    }

    /// A service as `config` says; panics if its store URL is malformed (see
    /// [`Service::try_new`]).
    pub fn new(config: Config) -> Service {
        Service::try_new(config).unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn try_new(config: Config) -> Result<Service, crate::store::object::OpenError> {
        let store = crate::store::open(&config.store_url, &config.data_dir)?;
        Ok(Service::with_store(config, store))
    }

    /// A service over a given store (tests run replicas over one shared store).
    pub fn with_store(config: Config, store: Store) -> Service {
        let workers = config.effective_fit_workers();
        let pool = Arc::new(FitPool::new(workers, config.fit_queue));
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        // Without a durable store the cache is the only copy: nothing may be evicted.
        let cache_limit = store.is_durable().then(|| config.effective_cache_bytes());
        // A durable store is read back (`load_store`) before the service is ready.
        let ready = tokio::sync::watch::Sender::new(!store.is_durable());
        let metrics = Arc::new(Metrics::new());
        store.observe(Arc::new(metrics.store_observer()));
        store.hedge_listings(Duration::from_secs(config.store_refresh_secs.max(1)));
        let heavy_predicts = Arc::new(AtomicUsize::new(0));
        let batcher = batch::Batcher::new(
            cores,
            metrics.predict_batch_rows.clone(),
            Duration::from_micros(config.batch_delay_us),
            config.predict_inline_max_flops,
            heavy_predicts.clone(),
        );
        let settings = crate::replica::Settings {
            refresh: Duration::from_secs(config.store_refresh_secs.max(1)),
            compact_deltas: config.compact_deltas,
            compact_bytes: config.compact_bytes,
        };
        let busy = crate::replica::Busy { pool: pool.clone(), heavy: heavy_predicts.clone() };
        let replica = Replica::new(store, Registry::new(cache_limit), metrics.clone(), settings, busy);
        Service {
            config,
            pool,
            metrics,
            replica: Arc::new(replica),
            ready,
            draining: AtomicBool::new(false),
            heavy_predicts,
            in_flight: tokio::sync::watch::Sender::new(0),
            heavy_predict_slots: Semaphore::new(cores),
            batcher,
            studies: Mutex::default(),
            aliases: aliases::Aliases::new(cores),
        }
    }

    /// Reads the store's models, datasets and aliases at start (blocking: call off the
    /// async threads), then marks the service ready. Returns how many models were found.
    pub fn load_store(&self) -> usize {
        let found = self.replica.load();
        self.ready.send_replace(true);
        found
    }

    /// Brings what this replica knows up to date with the store: models, datasets, and
    /// aliases.
    pub async fn sync_store(&self) {
        self.replica.sync().await
    }

    /// As [`Service::sync_store`], sharing a listing that began after this call.
    pub async fn sync_store_if_stale(&self) {
        self.replica.sync_if_stale().await
    }

    /// Refreshes from the store every `store_refresh_secs` until the service is dropped.
    pub fn spawn_refresh(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        let period = Duration::from_secs(self.config.store_refresh_secs.max(1));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(service) = weak.upgrade() else { break };
                service.sync_store().await;
            }
        });
    }

    /// The model with this id: known here, or read from the store's head of it.
    pub async fn lookup(&self, id: Uuid) -> Result<Arc<ModelEntry>, ServiceError> {
        Ok(self.replica.lookup(id).await?)
    }

    /// A ready model's decoded state: from the cache, or brought up from the store.
    pub async fn fitted(&self, entry: &ModelEntry) -> Result<Arc<crate::estimator::FittedModel>, ServiceError> {
        Ok(self.replica.fitted(entry).await?)
    }

    /// The error a request gets when the store let it down.
    pub(crate) fn store_error(&self, e: StoreError) -> ServiceError {
        self.replica.store_error(e).into()
    }

    /// As [`Service::store_error`], saying what could not be done (`what`) when the
    /// store answered but refused.
    pub(crate) fn store_failure(&self, what: &str, e: StoreError) -> ServiceError {
        self.replica.store_failure(what, e).into()
    }

    /// When to try again while the store is down: the next refresh will have probed it.
    pub fn store_retry_after(&self) -> Duration {
        self.replica.retry_after()
    }

    /// What is degraded while the service still serves: for /readyz.
    pub fn degraded(&self) -> Vec<String> {
        let health = self.replica.store.health();
        if health.up {
            return Vec::new();
        }
        vec![format!(
            "store: {} (models in memory keep answering; fits, uploads and deletes answer 503)",
            health.error.unwrap_or_else(|| "unreachable".into())
        )]
    }

    /// Ready to serve: started and not draining.
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow() && !self.is_draining()
    }

    pub fn request_started(&self) {
        self.in_flight.send_modify(|n| *n += 1);
    }

    pub fn request_finished(&self) {
        self.in_flight.send_modify(|n| *n = n.saturating_sub(1));
    }

    /// Waits until no request is in flight.
    pub async fn wait_idle(&self) {
        let _ = self.in_flight.subscribe().wait_for(|k| *k == 0).await;
    }

    /// Waits until at least `n` requests are in flight.
    pub async fn wait_in_flight_at_least(&self, n: usize) {
        let _ = self.in_flight.subscribe().wait_for(|k| *k >= n).await;
    }

    /// Waits until the stored models are loaded.
    pub async fn wait_ready(&self) {
        let _ = self.ready.subscribe().wait_for(|r| *r).await;
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Whether a fit would be admitted now: refusing before the body is read keeps an
    /// overloaded server from spending its cores parsing training sets it will refuse.
    /// (Only a hint: `train` decides.)
    pub async fn admission(&self) -> Result<(), ServiceError> {
        if self.is_draining() {
            return Err(ServiceError::Draining);
        }
        if self.pool.is_full() {
            return Err(ServiceError::QueueFull { retry_after: self.pool.retry_after() });
        }
        self.store_admission().await
    }

    /// Refuses work that must end in the store while the store is down: nothing is
    /// acknowledged that is not stored, and refusing now beats failing after the fit.
    /// Down is rechecked by the request itself ([`crate::store::Store::accepts_writes`]).
    pub async fn store_admission(&self) -> Result<(), ServiceError> {
        if self.replica.store.accepts_writes().await {
            return Ok(());
        }
        let health = self.replica.store.health();
        Err(ServiceError::StoreUnavailable {
            detail: format!(
                "{} (last tried {:.1} s ago); retry shortly",
                health.error.unwrap_or_else(|| "the store cannot be reached".into()),
                health.last_try.elapsed().as_secs_f64(),
            ),
            retry_after: self.store_retry_after(),
        })
    }

    /// Every model in the store (listed now, or a moment ago), and the fits in flight
    /// here, oldest first.
    pub async fn list(&self) -> Vec<Arc<ModelEntry>> {
        if self.replica.store.is_durable() {
            self.sync_store_if_stale().await;
        }
        self.replica.registry.list()
    }

    /// A ready model's plot data: `{"n_train", "x", "y"}` (the sample of training rows kept
    /// at its fit; empty lists for models stored before samples were kept) and
    /// `"support"`, up to as many of the points the model keeps for prediction.
    pub async fn sample(self: &Arc<Self>, id: Uuid) -> Result<Value, ServiceError> {
        let entry = self.lookup(id).await?;
        // Reading the model from the store also brings its sample.
        let fitted = self.fitted(&entry).await?;
        let mut v: Value = entry
            .sample()
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_else(|| serde_json::json!({"n_train": entry.n_train, "x": [], "y": []}));
        let support = fitted.predictor().support();
        let rows = crate::estimator::approximation::inducing::sample_rows(
            support.n(),
            support.n().min(crate::replica::stored::SAMPLE_ROWS),
            0x5A3F1E,
        );
        v["support"] = Value::Array(crate::replica::stored::rows_json(support, &rows));
        Ok(v)
    }

    /// A model and, when it is ready and its kind has them, its coefficients as
    /// scikit-learn names them (`?include=coefficients`).
    pub async fn with_coefficients(
        &self,
        id: Uuid,
    ) -> Result<(Arc<ModelEntry>, Option<crate::estimator::Coefficients>), ServiceError> {
        let entry = self.lookup(id).await?;
        if entry.summary().is_none() {
            return Ok((entry, None));
        }
        let fitted = self.fitted(&entry).await?;
        Ok((entry, fitted.coefficients()))
    }

    /// Starts shutting down: /readyz turns 503, new fits are refused, queued fits are
    /// dropped and their models marked failed. Running fits go on.
    pub fn begin_drain(&self) {
        self.draining.store(true, Ordering::Release);
        for id in self.pool.close() {
            if let Some(entry) = self.replica.registry.get(id) {
                entry.set_state(ModelState::Failed(Failure {
                    kind: FailureKind::Shutdown,
                    detail: "the server shut down before this fit could run".into(),
                }));
                self.metrics.record_fit(entry.kind.name(), "cancelled", 0.0);
            }
        }
    }

    /// Brings the scrape-time gauges up to date.
    pub fn refresh_gauges(&self) {
        self.metrics.fit_queue_depth.set(self.pool.queued() as i64);
        self.metrics.fits_running.set(self.pool.running() as i64);
        for (status, count) in Status::ALL.iter().zip(self.replica.registry.count_by_status()) {
            self.metrics.models.get_or_create(&StatusLabels { status: status.name().into() }).set(count as i64);
        }
        self.metrics.registry_bytes.set(self.replica.registry.memory_bytes() as i64);
    }
}
