//! What the store keeps of a registry entry: its full object (body and head), and the
//! plot sample of its training rows, made at the fit and grown by each append (the same
//! way when a replica replays the append's delta).

use crate::estimator::{TrainingData, TrainingSet};
use crate::optimize::SplitMix64;
use crate::registry::ModelEntry;
use crate::store::{ModelHead, ModelSummary, StoredModel};
use serde_json::{json, Value};

/// What the store keeps of a ready model: its file's body and head.
pub fn stored_model(
    entry: &ModelEntry,
    fitted: &crate::estimator::FittedModel,
    summary: &ModelSummary,
) -> (StoredModel, ModelHead) {
    let created = entry.created_at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let model = StoredModel {
        id: entry.id,
        name: entry.name.clone(),
        metadata: entry.metadata.as_ref().map(Value::to_string),
        created_at_unix_nanos: created.as_nanos(),
        n_train: entry.n_train as u64,
        n_features: entry.n_features as u64,
        fit: fitted.to_stored(),
        extra: serde_json::to_string(&entry.origin).expect("an origin serialises"),
        sample: entry.sample().map_or_else(String::new, |s| s.to_string()),
    };
    let head = ModelHead::of(&model, entry.kind, summary);
    (model, head)
}

/// Training rows kept with a model for plots, at most this many.
pub const SAMPLE_ROWS: usize = 500;

/// `{"n_train", "x", "y"}`: a seeded sample of at most [`SAMPLE_ROWS`] training rows (in
/// their order) with their targets as the request gave them; a model without targets has
/// its dataset's target column there (`labels`), or nulls.
pub fn sample_json(data: &TrainingData, labels: Option<&crate::dataset::Targets>) -> String {
    let x = data.x();
    let rows = crate::estimator::approximation::inducing::sample_rows(x.n(), x.n().min(SAMPLE_ROWS), 0x5A3F1E);
    let y: Vec<Value> = match data {
        // Output 0 of a multi-output model: y is column-major, so its first n values.
        TrainingData::Regression(d) => rows.iter().map(|&i| serde_json::json!(d.y[i])).collect(),
        TrainingData::Classification(d) => rows.iter().map(|&i| d.classes.label(d.y[i])).collect(),
        TrainingData::Unlabelled(_) => match labels {
            Some(crate::dataset::Targets::Numeric(y) | crate::dataset::Targets::Multi { values: y, .. }) => {
                rows.iter().map(|&i| serde_json::json!(y[i])).collect()
            }
            Some(crate::dataset::Targets::Labels { labels, codes }) => {
                rows.iter().map(|&i| Value::String(labels[codes[i] as usize].clone())).collect()
            }
            None | Some(crate::dataset::Targets::None) => vec![Value::Null; rows.len()],
        },
    };
    serde_json::json!({"n_train": x.n(), "x": rows_json(x, &rows), "y": y}).to_string()
}

/// The rows of `p` at `indices` in the contract's JSON form.
pub fn rows_json(p: &crate::kernel::Points, indices: &[usize]) -> Vec<Value> {
    indices
        .iter()
        .map(|&i| match (p.numeric(), p.texts(), p.token_lists()) {
            (Some(_), _, _) => serde_json::json!(p.point(i)),
            (_, Some(t), _) => Value::String(t[i].iter().collect()),
            (_, _, Some(t)) => serde_json::json!(t[i]),
            _ => Value::Null,
        })
        .collect()
}

/// The plot sample (`{"n_train", "x", "y"}`, see [`SAMPLE_ROWS`]) with the new
/// rows: added while there is room, then each new row i (counting all rows) replaces a
/// kept one with probability SAMPLE_ROWS / (i + 1), reservoir sampling, so the sample
/// stays uniform over all the rows. Seeded by the version. None if it cannot be read.
pub fn grown_sample(sample: &str, n_before: usize, new: &TrainingSet, version: u64) -> Option<String> {
    let mut v: Value = serde_json::from_str(sample).ok()?;
    let mut xs = v.get_mut("x")?.as_array_mut().map(std::mem::take)?;
    let mut ys = v.get_mut("y")?.as_array_mut().map(std::mem::take)?;
    let rows = (0..new.x.n()).collect::<Vec<_>>();
    let new_x = rows_json(&new.x, &rows);
    let mut rng = SplitMix64::new(0x5A3F1E ^ version);
    for (j, (x, y)) in new_x.into_iter().zip(&new.y).enumerate() {
        let i = n_before + j;
        if xs.len() < SAMPLE_ROWS {
            xs.push(x);
            ys.push(json!(y));
        } else {
            let slot = (rng.next_u64() % (i as u64 + 1)) as usize;
            if slot < xs.len() {
                xs[slot] = x;
                ys[slot] = json!(y);
            }
        }
    }
    Some(json!({"n_train": n_before + new.x.n(), "x": xs, "y": ys}).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::Points;

    fn sample_of(n: usize) -> String {
        let x: Vec<Value> = (0..n).map(|i| json!([i as f64])).collect();
        let y: Vec<Value> = (0..n).map(|i| json!(i as f64)).collect();
        json!({"n_train": n, "x": x, "y": y}).to_string()
    }

    fn rows(from: usize, k: usize) -> TrainingSet {
        let x: Vec<Vec<f64>> = (from..from + k).map(|i| vec![i as f64]).collect();
        TrainingSet::new(Points::from_rows(&x), (from..from + k).map(|i| i as f64).collect())
    }

    /// New rows join a sample with room; a full one stays full, keeps rows paired with
    /// their targets, and takes new rows at about the reservoir's rate.
    #[test]
    fn the_plot_sample_takes_the_new_rows() {
        let grown: Value = serde_json::from_str(&grown_sample(&sample_of(3), 3, &rows(3, 2), 2).unwrap()).unwrap();
        assert_eq!(grown, serde_json::from_str::<Value>(&sample_of(5)).unwrap());

        let full = training_rows();
        let grown: Value =
            serde_json::from_str(&grown_sample(&sample_of(full), full, &rows(full, 500), 2).unwrap()).unwrap();
        assert_eq!(grown["n_train"], json!(full + 500));
        let (x, y) = (grown["x"].as_array().unwrap(), grown["y"].as_array().unwrap());
        assert_eq!((x.len(), y.len()), (full, full));
        assert!(x.iter().zip(y).all(|(x, y)| x[0] == *y), "rows stay with their targets");
        // A uniform sample of 500 out of 1000 rows holds about half of the 500 new ones
        // (hypergeometric: 250, standard deviation about 8).
        let taken = y.iter().filter(|v| v.as_f64().unwrap() >= full as f64).count();
        assert!((210..=290).contains(&taken), "{taken} new rows kept");
    }

    fn training_rows() -> usize {
        SAMPLE_ROWS
    }
}
