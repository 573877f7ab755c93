//! Class labels: the distinct values of a classifier's `y`, sorted as the contract says,
//! and each training row's class index. Numbers equal in value are one class; labels are
//! all numbers or all strings.

use crate::kernel::Points;
use crate::spec::FieldError;
use serde::Deserialize;
use serde_json::Value;

/// A training target as sent: a number (regression, numeric classes), a string label, or
/// a list of numbers (one row of a 2-D y: kernel ridge and Gaussian processes).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Target {
    Number(f64),
    Text(String),
    Row(Vec<f64>),
}

/// The classes of a classifier, sorted ascending (strings by code point).
#[derive(Debug, Clone, PartialEq)]
pub enum ClassLabels {
    Numbers(Vec<f64>),
    Text(Vec<String>),
}

/// Training inputs of a classifier: points, each row's class index into `classes`.
#[derive(Debug, Clone)]
pub struct ClassificationSet {
    pub x: Points,
    pub y: Vec<usize>,
    pub classes: ClassLabels,
}

impl ClassificationSet {
    /// Row indices of each class, in row order.
    pub fn rows_by_class(&self) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new(); self.classes.len()];
        for (i, &c) in self.y.iter().enumerate() {
            out[c].push(i);
        }
        out
    }
}

impl ClassLabels {
    /// Sorts and deduplicates the labels of `y` and returns each row's class index.
    /// Errors point at `/y` (fewer than two classes) or `/y/i` (the first label whose type
    /// differs from y[0]).
    pub fn encode(y: &[Target]) -> Result<(ClassLabels, Vec<usize>), FieldError> {
        let Some(first) = y.first() else {
            return Err(FieldError::invalid("/y", "must contain at least one label"));
        };
        let (classes, index) = match first {
            Target::Number(_) => {
                let values = y
                    .iter()
                    .enumerate()
                    .map(|(i, t)| match t {
                        Target::Number(v) => Ok(*v),
                        _ => Err(mixed(i)),
                    })
                    .collect::<Result<Vec<f64>, _>>()?;
                let mut sorted = values.clone();
                sorted.sort_by(f64::total_cmp);
                // `==` rather than bit equality: 0.0 and -0.0 are one class.
                sorted.dedup_by(|a, b| a == b);
                let index = values.iter().map(|v| sorted.partition_point(|c| c < v)).collect();
                (ClassLabels::Numbers(sorted), index)
            }
            Target::Row(_) => return Err(FieldError::invalid("/y", "a classifier takes one label per row, not lists")),
            Target::Text(_) => {
                let values = y
                    .iter()
                    .enumerate()
                    .map(|(i, t)| match t {
                        Target::Text(s) => Ok(s.as_str()),
                        _ => Err(mixed(i)),
                    })
                    .collect::<Result<Vec<&str>, _>>()?;
                let mut sorted = values.clone();
                sorted.sort_unstable();
                sorted.dedup();
                let index = values.iter().map(|v| sorted.partition_point(|c| c < v)).collect();
                (ClassLabels::Text(sorted.into_iter().map(str::to_owned).collect()), index)
            }
        };
        if classes.len() < 2 {
            return Err(FieldError::invalid("/y", "a classifier needs at least two distinct classes; found one"));
        }
        Ok((classes, index))
    }

    pub fn len(&self) -> usize {
        match self {
            ClassLabels::Numbers(v) => v.len(),
            ClassLabels::Text(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Class k as JSON: a string, or a number (an integer when it is one, so that labels
    /// sent as 0 and 1 come back as 0 and 1).
    pub fn label(&self, k: usize) -> Value {
        match self {
            ClassLabels::Text(v) => Value::String(v[k].clone()),
            ClassLabels::Numbers(v) => number_json(v[k]),
        }
    }

    /// The classes at `keep` (ascending indices), in that order: the labels of a subset
    /// of the rows that lacks some classes.
    pub fn subset(&self, keep: &[usize]) -> ClassLabels {
        match self {
            ClassLabels::Numbers(v) => ClassLabels::Numbers(keep.iter().map(|&k| v[k]).collect()),
            ClassLabels::Text(v) => ClassLabels::Text(keep.iter().map(|&k| v[k].clone()).collect()),
        }
    }

    pub fn to_json(&self) -> Value {
        Value::Array((0..self.len()).map(|k| self.label(k)).collect())
    }

    /// The inverse of [`ClassLabels::to_json`] (for the durable store).
    pub fn from_json(v: &Value) -> Result<ClassLabels, String> {
        let items = v.as_array().ok_or("classes must be a list")?;
        let targets = items
            .iter()
            .map(|t| serde_json::from_value::<Target>(t.clone()).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        let (classes, index) = ClassLabels::encode(&targets).map_err(|e| e.message)?;
        if index.iter().enumerate().any(|(i, &k)| i != k) {
            return Err("classes are not sorted and distinct".into());
        }
        Ok(classes)
    }
}

fn mixed(i: usize) -> FieldError {
    FieldError::invalid(format!("/y/{i}"), "class labels must be all numbers or all strings")
}

/// Integral values within f64's exact integer range print without a fraction.
fn number_json(v: f64) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if v.fract() == 0.0 && v.abs() <= EXACT {
        Value::from(v as i64)
    } else {
        Value::from(v)
    }
}

impl ClassLabels {
    /// A stored classifier's classes.
    pub(crate) fn restore(r: &crate::estimator::Restoring) -> Result<ClassLabels, crate::estimator::RestoreError> {
        let v = r.classes_json()?;
        ClassLabels::from_json(&v).map_err(|e| crate::estimator::RestoreError(format!("classes: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn targets(v: Value) -> Vec<Target> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn numbers_sort_by_value_and_equal_values_are_one_class() {
        let (c, idx) = ClassLabels::encode(&targets(json!([2, 1.0, -0.5, 1, 2.0, 0.0, -0.0]))).unwrap();
        assert_eq!(c.to_json(), json!([-0.5, 0, 1, 2]));
        assert_eq!(idx, vec![3, 2, 0, 2, 3, 1, 1]);
    }

    #[test]
    fn strings_sort_by_code_point() {
        let (c, idx) = ClassLabels::encode(&targets(json!(["b", "B", "ä", "a", "b"]))).unwrap();
        assert_eq!(c.to_json(), json!(["B", "a", "b", "ä"]));
        assert_eq!(idx, vec![2, 0, 3, 1, 2]);
        assert_eq!(ClassLabels::from_json(&c.to_json()).unwrap(), c);
    }

    #[test]
    fn mixed_and_single_class_are_rejected_with_pointers() {
        let e = ClassLabels::encode(&targets(json!(["a", "b", 3]))).unwrap_err();
        assert_eq!(e.pointer, "/y/2");
        let e = ClassLabels::encode(&targets(json!([1, 1.0, 1]))).unwrap_err();
        assert_eq!(e.pointer, "/y");
    }

    #[test]
    fn a_subset_keeps_the_named_classes_in_order() {
        let (c, _) = ClassLabels::encode(&targets(json!(["a", "b", "c"]))).unwrap();
        assert_eq!(c.subset(&[0, 2]).to_json(), json!(["a", "c"]));
    }

    #[test]
    fn stored_classes_must_be_sorted_and_distinct() {
        assert!(ClassLabels::from_json(&json!([2, 1])).is_err());
        assert!(ClassLabels::from_json(&json!([1, 1, 2])).is_err());
        assert_eq!(ClassLabels::from_json(&json!([1.5, 3])).unwrap().to_json(), json!([1.5, 3]));
    }
}
