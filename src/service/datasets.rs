//! The dataset operations: upload (streamed into the store), list, get, delete, and
//! reading one back for a fit.

use super::{Service, ServiceError};
use crate::dataset::csv::CsvOptions;
use crate::dataset::format::{Decoded, FormatError};
use crate::dataset::{DatasetInfo, IngestError};
use crate::spec::FieldError;
use std::io::Read;
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
            IngestError::Io(e) => ServiceError::Storage(format!("cannot store the dataset: {e}")),
        }
    }
}

impl Service {
    /// Streams an upload into the store (blocking: run it off the async threads) and
    /// lists it. Nothing is kept when it fails.
    pub fn upload_dataset(&self, format: UploadFormat, body: impl Read) -> Result<DatasetInfo, ServiceError> {
        if self.is_draining() {
            return Err(ServiceError::Draining);
        }
        let info = self.datasets.write(|sink| match format {
            UploadFormat::Csv(opts) => crate::dataset::csv::ingest(body, sink, opts),
            UploadFormat::Json { name } => crate::dataset::json::ingest(body, sink).map(|(mut info, sink)| {
                info.name = info.name.or(name);
                (info, sink)
            }),
        })?;
        self.catalog_write().insert(info.id, info.clone());
        tracing::info!(dataset_id = %info.id, rows = info.n_rows, bytes = info.bytes, "dataset stored");
        Ok(info)
    }

    fn catalog_write(&self) -> std::sync::RwLockWriteGuard<'_, std::collections::HashMap<Uuid, DatasetInfo>> {
        self.dataset_catalog.write().unwrap_or_else(|p| p.into_inner())
    }

    fn catalog_read(&self) -> std::sync::RwLockReadGuard<'_, std::collections::HashMap<Uuid, DatasetInfo>> {
        self.dataset_catalog.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Every dataset, oldest first.
    pub fn list_datasets(&self) -> Vec<DatasetInfo> {
        let mut all: Vec<DatasetInfo> = self.catalog_read().values().cloned().collect();
        all.sort_by_key(|i| (i.created_at_unix_nanos, i.id));
        all
    }

    pub fn get_dataset(&self, id: Uuid) -> Result<DatasetInfo, ServiceError> {
        self.catalog_read().get(&id).cloned().ok_or_else(|| ServiceError::DatasetNotFound(id.to_string()))
    }

    /// Removes a dataset (blocking: fsyncs). Fits already queued keep their own copy.
    pub fn delete_dataset(&self, id: Uuid) -> Result<(), ServiceError> {
        if !self.catalog_read().contains_key(&id) {
            return Err(ServiceError::DatasetNotFound(id.to_string()));
        }
        self.datasets
            .remove(id)
            .map_err(|e| ServiceError::Storage(format!("cannot delete the stored dataset: {e}")))?;
        self.catalog_write().remove(&id);
        Ok(())
    }

    /// The dataset a training request names, read whole (422 at `/dataset` when there is
    /// none, or when its stored form is damaged).
    pub(super) fn read_dataset_for_fit(&self, raw: &str) -> Result<(Uuid, Decoded), ServiceError> {
        let unknown = || FieldError::invalid("/dataset", format!("no dataset with id `{raw}`"));
        let id = Uuid::parse_str(raw).map_err(|_| unknown())?;
        if !self.catalog_read().contains_key(&id) {
            return Err(unknown().into());
        }
        match self.datasets.read(id) {
            Ok(d) => Ok((id, d)),
            // Deleted between the lookup and the read.
            Err(FormatError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Err(unknown().into()),
            Err(e) => {
                tracing::error!(dataset_id = %id, error = %e, "cannot read a stored dataset");
                Err(FieldError::invalid("/dataset", format!("the stored dataset `{raw}` cannot be read: {e}")).into())
            }
        }
    }

    /// Lists the stored datasets at start.
    pub(super) fn load_datasets(&self) {
        let infos = self.datasets.load();
        let count = infos.len();
        let mut catalog = self.catalog_write();
        for info in infos {
            catalog.insert(info.id, info);
        }
        if count > 0 {
            tracing::info!(count, "stored datasets listed");
        }
    }
}
