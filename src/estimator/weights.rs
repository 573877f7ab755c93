//! `class_weight` and `sample_weight` of the SVM family, as scikit-learn passes them to
//! LIBSVM: a class's weight multiplies C for that class's rows, a row's weight multiplies
//! its C, and rows of weight 0 are left out of the fit.

use super::targets::labels::ClassLabels;
use crate::spec::{json_type_name, FieldError, ObjectReader};
use serde_json::{Map, Value};
use std::sync::Arc;

/// `class_weight`: per class label, or scikit-learn's "balanced".
#[derive(Debug, Clone, PartialEq)]
pub enum ClassWeight {
    /// (label as the client wrote the key, weight).
    Given(Vec<(String, f64)>),
    Balanced,
}

impl ClassWeight {
    pub fn read(obj: &mut ObjectReader<'_>) -> Result<Option<ClassWeight>, FieldError> {
        let at = obj.pointer("class_weight");
        match obj.take("class_weight") {
            None => Ok(None),
            Some(Value::String(s)) if s == "balanced" => Ok(Some(ClassWeight::Balanced)),
            Some(Value::String(s)) => {
                Err(FieldError::invalid(at, format!("`{s}` is not a weighting; give an object or \"balanced\"")))
            }
            Some(Value::Object(map)) => {
                let mut out = Vec::with_capacity(map.len());
                for (label, w) in map {
                    let here = format!("{at}/{}", crate::spec::pointer_token(label));
                    let w = crate::spec::as_f64(w, &here)?;
                    if w <= 0.0 {
                        return Err(FieldError::invalid(here, "a class weight must be positive"));
                    }
                    out.push((label.clone(), w));
                }
                Ok(Some(ClassWeight::Given(out)))
            }
            Some(other) => Err(FieldError::shape(
                at,
                format!("expected an object of label: weight or \"balanced\", found {}", json_type_name(other)),
            )),
        }
    }

    pub fn to_json(&self) -> Value {
        match self {
            ClassWeight::Balanced => Value::String("balanced".into()),
            ClassWeight::Given(pairs) => {
                Value::Object(pairs.iter().map(|(k, w)| (k.clone(), Value::from(*w))).collect::<Map<_, _>>())
            }
        }
    }

    /// The weight of each class of `classes` (1 where none is given), counting `y`'s rows
    /// for "balanced" (n / (classes x count), every row counted whatever its sample
    /// weight, as scikit-learn). A label that names no class is 422 at `pointer`.
    pub fn per_class(&self, classes: &ClassLabels, y: &[usize], pointer: &str) -> Result<Vec<f64>, FieldError> {
        let k = classes.len();
        match self {
            ClassWeight::Balanced => {
                let mut count = vec![0usize; k];
                for &c in y {
                    count[c] += 1;
                }
                let n = y.len() as f64;
                Ok(count.iter().map(|&c| if c == 0 { 1.0 } else { n / (k as f64 * c as f64) }).collect())
            }
            ClassWeight::Given(pairs) => {
                let mut out = vec![1.0; k];
                for (label, w) in pairs {
                    let class = (0..k).find(|&c| names_class(label, &classes.label(c))).ok_or_else(|| {
                        // At the object, as the contract says (the key is in the message).
                        FieldError::invalid(
                            pointer,
                            format!("`{label}` is not one of the classes {}", classes.to_json()),
                        )
                    })?;
                    out[class] = *w;
                }
                Ok(out)
            }
        }
    }
}

/// Whether a class_weight key names a class: a string label exactly, a numeric one by
/// its value ("1" and "1.0" both name class 1).
fn names_class(key: &str, label: &Value) -> bool {
    match label {
        Value::String(s) => s == key,
        Value::Number(n) => key.trim().parse::<f64>().ok().zip(n.as_f64()).is_some_and(|(a, b)| a == b),
        _ => false,
    }
}

/// `sample_weight`: one non-negative weight per training row, shared cheaply.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleWeight(pub Arc<[f64]>);

impl SampleWeight {
    pub fn read(obj: &mut ObjectReader<'_>) -> Result<Option<SampleWeight>, FieldError> {
        let at = obj.pointer("sample_weight");
        match obj.take("sample_weight") {
            None => Ok(None),
            Some(Value::Array(items)) => {
                let w = items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        let here = format!("{at}/{i}");
                        let w = crate::spec::as_f64(v, &here)?;
                        if w < 0.0 {
                            return Err(FieldError::invalid(here, "a sample weight must not be negative"));
                        }
                        Ok(w)
                    })
                    .collect::<Result<Vec<f64>, _>>()?;
                if !w.iter().any(|&v| v > 0.0) {
                    return Err(FieldError::invalid(at, "every sample weight is 0: nothing is left to fit"));
                }
                Ok(Some(SampleWeight(w.into())))
            }
            Some(other) => Err(FieldError::shape(
                at,
                format!("expected a list of weights, one per row, found {}", json_type_name(other)),
            )),
        }
    }

    pub fn to_json(&self) -> Value {
        Value::from(self.0.to_vec())
    }

    /// The list must have one weight per training row.
    pub fn check_len(&self, n: usize, pointer: &str) -> Result<(), FieldError> {
        if self.0.len() != n {
            return Err(FieldError::invalid(pointer, format!("has {} weights for {n} training rows", self.0.len())));
        }
        Ok(())
    }

    /// The weights of rows `rows` (a fold's training rows).
    pub fn select(&self, rows: &[usize]) -> SampleWeight {
        SampleWeight(rows.iter().map(|&r| self.0[r]).collect())
    }
}

/// Each row's weight (1 without `sample_weight`) and the rows that take part (weight > 0).
pub fn rows_and_weights(sample_weight: Option<&SampleWeight>, n: usize) -> (Vec<usize>, Vec<f64>) {
    match sample_weight {
        None => ((0..n).collect(), vec![1.0; n]),
        Some(w) => ((0..n).filter(|&i| w.0[i] > 0.0).collect(), w.0.to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimator::Target;
    use serde_json::json;

    fn read_cw(v: Value) -> Result<Option<ClassWeight>, FieldError> {
        let params = json!({ "class_weight": v });
        let mut obj = ObjectReader::new(&params, "/params").unwrap();
        ClassWeight::read(&mut obj)
    }

    #[test]
    fn class_weights_name_classes_by_label_or_value() {
        let (classes, y) =
            ClassLabels::encode(&[Target::Number(0.0), Target::Number(1.0), Target::Number(1.0)]).unwrap();
        let w = read_cw(json!({"1.0": 3, "0": 2})).unwrap().unwrap();
        assert_eq!(w.per_class(&classes, &y, "/params/class_weight").unwrap(), vec![2.0, 3.0]);
        let e = read_cw(json!({"7": 1})).unwrap().unwrap().per_class(&classes, &y, "/params/class_weight").unwrap_err();
        assert_eq!(e.pointer, "/params/class_weight");
        // n / (k * count): 3 / (2 * 1) and 3 / (2 * 2).
        let b = read_cw(json!("balanced")).unwrap().unwrap();
        assert_eq!(b.per_class(&classes, &y, "").unwrap(), vec![1.5, 0.75]);
        assert_eq!(read_cw(json!({"1": -1})).unwrap_err().pointer, "/params/class_weight/1");
        assert_eq!(read_cw(json!("even")).unwrap_err().pointer, "/params/class_weight");
    }

    #[test]
    fn sample_weights_are_checked() {
        let read = |v: Value| {
            let params = json!({ "sample_weight": v });
            let mut obj = ObjectReader::new(&params, "/params").unwrap();
            SampleWeight::read(&mut obj)
        };
        assert_eq!(read(json!([1, -1])).unwrap_err().pointer, "/params/sample_weight/1");
        assert_eq!(read(json!([0, 0])).unwrap_err().pointer, "/params/sample_weight");
        let w = read(json!([0, 2.5, 1])).unwrap().unwrap();
        assert_eq!(w.check_len(2, "/params/sample_weight").unwrap_err().pointer, "/params/sample_weight");
        assert_eq!(rows_and_weights(Some(&w), 3), (vec![1, 2], vec![0.0, 2.5, 1.0]));
    }
}
