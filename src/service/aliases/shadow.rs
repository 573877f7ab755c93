//! Shadow predictions: an alias's shadow model predicts the rows its route answered,
//! after the answer, on a task of its own. It never delays or fails the answer: its
//! errors and latency are metrics, and it is the first work dropped under load (when no
//! shadow slot is free, or the fits and large predictions running fill the cores).

use super::super::Service;
use crate::estimator::{FittedModel, PredictOptions, Prediction};
use crate::kernel::Points;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{OwnedRwLockWriteGuard, RwLock, Semaphore};
use uuid::Uuid;

pub struct Shadows {
    /// Shadow predictions running at once, at most one per core.
    slots: Arc<Semaphore>,
    cores: usize,
    /// Held for writing by [`Service::hold_shadows`]: shadows wait for it.
    gate: Arc<RwLock<()>>,
    /// Shadow predictions finished (done, failed or shed).
    finished: tokio::sync::watch::Sender<u64>,
}

impl Shadows {
    pub fn new(cores: usize) -> Shadows {
        Shadows {
            slots: Arc::new(Semaphore::new(cores.max(1))),
            cores: cores.max(1),
            gate: Arc::new(RwLock::new(())),
            finished: tokio::sync::watch::Sender::new(0),
        }
    }

    fn finish(&self) {
        self.finished.send_modify(|n| *n += 1);
    }
}

/// What the primary model answered, to compare the shadow's with.
pub struct Primary {
    pub fitted: Arc<FittedModel>,
    pub prediction: Prediction,
}

/// Keeps shadow predictions waiting while held (tests: a shadow that has not run yet
/// cannot have touched the answer).
pub struct ShadowHold(#[allow(dead_code)] OwnedRwLockWriteGuard<()>);

impl Service {
    /// Predicts `points` with `shadow` on a task of its own and counts how far its
    /// answer is from the primary's; or counts it shed.
    pub(crate) fn spawn_shadow(
        self: &Arc<Self>,
        alias: &str,
        shadow: Uuid,
        points: Points,
        opts: PredictOptions,
        primary: Primary,
    ) {
        let shadows = &self.aliases.shadows;
        let busy = self.pool.running() + self.heavy_predicts.load(Ordering::Acquire);
        let permit = (busy < shadows.cores).then(|| shadows.slots.clone().try_acquire_owned().ok()).flatten();
        let Some(permit) = permit else {
            self.metrics.record_shadow_shed(alias);
            shadows.finish();
            return;
        };
        let (service, alias) = (self.clone(), alias.to_string());
        tokio::spawn(async move {
            let _permit = permit;
            let _gate = service.aliases.shadows.gate.clone().read_owned().await;
            let started = Instant::now();
            match service.shadow_answer(shadow, points, opts).await {
                Ok((fitted, p)) => {
                    service.metrics.record_shadow(
                        &alias,
                        started.elapsed().as_secs_f64(),
                        &disagreement(&primary, &fitted, &p),
                    );
                }
                Err(e) => {
                    tracing::debug!(alias, shadow_model = %shadow, error = %e, "a shadow prediction failed");
                    service.metrics.record_shadow_error(&alias, started.elapsed().as_secs_f64());
                }
            }
            service.aliases.shadows.finish();
        });
    }

    async fn shadow_answer(
        self: &Arc<Self>,
        id: Uuid,
        points: Points,
        opts: PredictOptions,
    ) -> Result<(Arc<FittedModel>, Prediction), super::ServiceError> {
        let entry = self.lookup(id).await?;
        let answer = self.answer_points(&entry, points, opts).await?;
        Ok((answer.fitted, answer.prediction))
    }

    /// Holds every shadow prediction back until the hold is dropped (for tests).
    pub async fn hold_shadows(&self) -> ShadowHold {
        ShadowHold(self.aliases.shadows.gate.clone().write_owned().await)
    }

    /// Waits until `n` shadow predictions have finished (run, failed or shed) since start.
    pub async fn wait_shadows(&self, n: u64) {
        let _ = self.aliases.shadows.finished.subscribe().wait_for(|k| *k >= n).await;
    }
}

/// How far the shadow's answer is from the primary's, one figure per value: the
/// absolute difference of regression values (or embeddings), 0 or 1 for a class label
/// that differs.
fn disagreement(primary: &Primary, fitted: &FittedModel, shadow: &Prediction) -> Vec<f64> {
    let p = &primary.prediction;
    if let (Some(a), Some(b)) = (&p.classes, &shadow.classes) {
        let (la, lb) = (primary.fitted.predictor().classes(), fitted.predictor().classes());
        return match (la, lb) {
            (Some(la), Some(lb)) => {
                a.iter().zip(b).map(|(&i, &j)| if la.label(i) == lb.label(j) { 0.0 } else { 1.0 }).collect()
            }
            _ => Vec::new(),
        };
    }
    if let (Some(a), Some(b)) = (&p.embedding, &shadow.embedding) {
        if a.shape() == b.shape() {
            return a.iter().zip(b.iter()).map(|(x, y)| (x - y).abs()).collect();
        }
        return Vec::new();
    }
    if p.values.len() == shadow.values.len() {
        return p.values.iter().zip(&shadow.values).map(|(x, y)| (x - y).abs()).collect();
    }
    Vec::new()
}
