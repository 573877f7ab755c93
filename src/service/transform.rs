//! The transform kinds' two operations (kernel PCA's): rows to components (`transform`, a prediction whose
//! answer is the embedding, so it shares the predict path: batching, the pool for large
//! m), and components back to rows (`inverse_transform`, for models fitted with
//! `fit_inverse_transform`).

use super::{QueryRows, Service, ServiceError};
use crate::dataset::rows::{to_points, Row, RowShape};
use crate::estimator::{ModelKind, PredictOptions};
use crate::kernel::RowKind;
use crate::linalg::Parallelism;
use crate::spec::FieldError;
use nalgebra::DMatrix;
use std::sync::Arc;
use uuid::Uuid;

/// A model without a transform: 422 at /model naming the kinds that have one.
fn no_transform(kind: ModelKind) -> ServiceError {
    let kinds = ModelKind::names_that(|c| c.transform);
    FieldError::invalid("/model", format!("transform is {kinds}'s; this model is a {}", kind.name())).into()
}

impl Service {
    /// The rows' components, m x n_components.
    pub async fn transform(self: &Arc<Self>, id: Uuid, rows: QueryRows) -> Result<DMatrix<f64>, ServiceError> {
        let entry = self.lookup(id).await?;
        if !entry.kind.can().transform {
            return Err(no_transform(entry.kind));
        }
        let p = self.answer(entry, rows, PredictOptions::default(), None).await?.prediction;
        Ok(p.embedding.expect("a kernel PCA answers with its embedding"))
    }

    /// Rows (m x d) from components (m x n_components rows of `x`).
    pub async fn inverse_transform(self: &Arc<Self>, id: Uuid, x: Vec<Row>) -> Result<DMatrix<f64>, ServiceError> {
        let entry = self.lookup(id).await?;
        if !entry.kind.can().transform {
            return Err(no_transform(entry.kind));
        }
        let fitted = self.fitted(&entry).await?;
        let Some(model) = fitted.transformer() else { return Err(no_transform(fitted.kind())) };
        if !model.has_inverse() {
            return Err(FieldError::invalid(
                "/model",
                "this kernel_pca was fitted without fit_inverse_transform: refit with it to map components back",
            )
            .into());
        }
        if x.is_empty() {
            return Err(FieldError::invalid("/x", "must contain at least one row").into());
        }
        let points = to_points(&x, Some(RowShape { kind: RowKind::Numeric, d: model.n_components() }))?;
        drop(x);
        let (m, n) = (points.n(), fitted.n_support());
        let cost = (m * n) as f64 * (model.n_components() + fitted.n_features() + 8) as f64;
        let rows = if cost <= self.config.predict_inline_max_flops {
            model.inverse_transform(&points, Parallelism::Sequential)
        } else {
            let fitted = fitted.clone();
            self.run_heavy(id, n.max(m), move |par| {
                fitted.transformer().expect("checked above").inverse_transform(&points, par)
            })
            .await?
        }
        .expect("checked: the model has its inverse map");
        if !rows.iter().all(|v| v.is_finite()) {
            return Err(FieldError::invalid("/x", "the inverse map overflows for these components").into());
        }
        Ok(rows)
    }
}
