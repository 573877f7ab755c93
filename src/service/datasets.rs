//! The dataset operations: upload (streamed into the store), list, get, delete, and
//! reading one back for a fit.

use super::{Service, ServiceError};
use crate::dataset::csv::CsvOptions;
use crate::dataset::format::Decoded;
use crate::dataset::{DatasetInfo, IngestError};
use crate::spec::FieldError;
use std::io::Read;
use std::time::Instant;
use uuid::Uuid;

/// How an upload's body is to be read.
#[derive(Debug, Clone)]
pub enum UploadFormat {
    Csv(CsvOptions),
    /// `name`: from the query string, used when the body has none.
    Json {
        name: Option<String>,
    },
}

impl From<IngestError> for ServiceError {
    fn from(e: IngestError) -> ServiceError {
        match e {
            IngestError::Invalid { pointer, message } => ServiceError::Invalid(FieldError::invalid(pointer, message)),
            IngestError::Malformed { pointer, message } => ServiceError::Invalid(FieldError::shape(pointer, message)),
            IngestError::TooLarge { pointer, message } => ServiceError::TooLargeAt { pointer, detail: message },
            IngestError::Io(e) => ServiceError::Storage(format!("cannot store the dataset: {e}")),
        }
    }
}

impl Service {
    /// Streams an upload into a scratch file, stores it (blocking: run it off the async
    /// threads) and lists it. Nothing is kept when it fails.
    pub fn upload_dataset(&self, format: UploadFormat, body: impl Read) -> Result<DatasetInfo, ServiceError> {
        if self.is_draining() {
            return Err(ServiceError::Draining);
        }
        self.replica.store.block_on(self.store_admission())?;
        let scratch = self.replica.store.dataset_scratch().map_err(IngestError::Io)?;
        let result = (|| {
            let file = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&scratch)?);
            let (info, file) = match format {
                UploadFormat::Csv(opts) => crate::dataset::csv::ingest(body, file, opts)?,
                UploadFormat::Json { name } => {
                    let (mut info, file) = crate::dataset::json::ingest(body, file, self.config.max_row_chars)?;
                    info.name = info.name.or(name);
                    (info, file)
                }
            };
            file.into_inner().map_err(|e| e.into_error())?;
            Ok::<_, IngestError>(info)
        })();
        let info = match result {
            Ok(info) => info,
            Err(e) => {
                let _ = std::fs::remove_file(&scratch);
                return Err(e.into());
            }
        };
        if let Err(e) = self.replica.store.block_on(self.replica.store.save_dataset(info.id, &scratch)) {
            let _ = std::fs::remove_file(&scratch);
            return Err(self.store_failure("cannot store the dataset", e));
        }
        self.replica.datasets_mut().insert(info.id, (info.clone(), Instant::now()));
        tracing::info!(dataset_id = %info.id, rows = info.n_rows, bytes = info.bytes, "dataset stored");
        Ok(info)
    }

    /// Every dataset (as listed at the last refresh, plus those uploaded here since),
    /// oldest first.
    pub fn list_datasets(&self) -> Vec<DatasetInfo> {
        let mut all: Vec<DatasetInfo> = self.replica.datasets().values().map(|(i, _)| i.clone()).collect();
        all.sort_by_key(|i| (i.created_at_unix_nanos, i.id));
        all
    }

    /// As [`Service::list_datasets`], listing the store first.
    pub async fn list_datasets_now(&self) -> Vec<DatasetInfo> {
        if self.replica.store.is_durable() {
            self.sync_store_if_stale().await;
        }
        self.list_datasets()
    }

    /// A dataset known here, or found in the store.
    pub async fn get_dataset(&self, id: Uuid) -> Result<DatasetInfo, ServiceError> {
        if let Some((info, _)) = self.replica.datasets().get(&id) {
            return Ok(info.clone());
        }
        let not_found = || ServiceError::DatasetNotFound(id.to_string());
        if !self.replica.store.is_durable() || self.replica.is_tombstoned(id) {
            return Err(not_found());
        }
        match self.replica.store.dataset_info(id).await {
            Ok(Some(info)) => {
                self.replica.datasets_mut().entry(id).or_insert((info.clone(), Instant::now()));
                Ok(info)
            }
            Ok(None) => Err(not_found()),
            Err(e) => Err(self.store_error(e)),
        }
    }

    /// Removes a dataset. Fits already queued keep their own copy.
    pub async fn delete_dataset(&self, id: Uuid) -> Result<(), ServiceError> {
        self.get_dataset(id).await?;
        self.replica
            .store
            .delete_dataset(id)
            .await
            .map_err(|e| self.store_failure("cannot delete the stored dataset", e))?;
        self.replica.tombstone(id);
        self.replica.datasets_mut().remove(&id);
        Ok(())
    }

    /// The dataset a training request names, read whole (422 at `/dataset` when there is
    /// none, or when its stored form is damaged). Blocking: run off the async threads.
    pub(super) fn read_dataset_for_fit(&self, raw: &str) -> Result<(Uuid, Decoded), ServiceError> {
        let unknown = || FieldError::invalid("/dataset", format!("no dataset with id `{raw}`"));
        let id = Uuid::parse_str(raw).map_err(|_| unknown())?;
        match self.replica.store.block_on(self.get_dataset(id)) {
            Ok(_) => {}
            Err(ServiceError::DatasetNotFound(_)) => return Err(unknown().into()),
            Err(e) => return Err(e),
        }
        match self.replica.store.read_dataset_blocking(id) {
            Ok(Some(d)) => Ok((id, d)),
            // Deleted between the lookup and the read.
            Ok(None) => Err(unknown().into()),
            Err(e) if e.is_unavailable() => Err(self.store_error(e)),
            Err(e) => {
                tracing::error!(dataset_id = %id, error = %e, "cannot read a stored dataset");
                Err(FieldError::invalid("/dataset", format!("the stored dataset `{raw}` cannot be read: {e}")).into())
            }
        }
    }
}
