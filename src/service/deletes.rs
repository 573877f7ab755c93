//! DELETE /models/{id}: what keeps the model deleted on every replica is the replica's
//! (`crate::replica`, its tombstones and delete markers).

use super::{Service, ServiceError};
use uuid::Uuid;

impl Service {
    /// Removes a model everywhere: from the store first (a model whose object could not
    /// be removed would come back), then here; a queued fit is withdrawn, a running one
    /// abandoned. A model an alias routes to or shadows is refused (409) unless `force`,
    /// which first takes it out of those aliases (`by`: the key doing it).
    pub async fn delete(&self, id: Uuid, force: bool, by: Option<String>) -> Result<(), ServiceError> {
        let entry = self.lookup(id).await?;
        let naming = self.aliases_naming(id).await?;
        if !naming.is_empty() {
            if !force {
                return Err(ServiceError::ModelInUse { id, aliases: naming.iter().map(|a| a.name.clone()).collect() });
            }
            self.unroute(id, by).await?;
        }
        // An append in flight finishes (stored and acknowledged) before the delete.
        let lock = self.replica.model_lock(id);
        let _turn = lock.lock().await;
        self.replica.delete_model(id).await.map_err(|e| self.store_failure("cannot delete the stored model", e))?;
        if self.pool.withdraw(entry.id) {
            self.metrics.record_fit(entry.kind.name(), "cancelled", 0.0);
        }
        Ok(())
    }
}
