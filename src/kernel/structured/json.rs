//! The JSON form of the string, set and feature-map kernels (read with pointers into the
//! kernel document; written back with every default filled in and, once fitted, the
//! mixture).

use super::{Mahalanobis, Mixture, MixtureKernel, SetMeasure};
use crate::kernel::Kernel;
use crate::spec::{as_f64, json_type_name, FieldError, ObjectReader};
use nalgebra::DMatrix;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// Beyond these the kernels only burn time: a subsequence of 10,000 characters has no
/// useful weight left, nor a mixture of more components than that.
const MAX_LENGTH: u64 = 10_000;
const MAX_COMPONENTS: u64 = 10_000;

/// Reads the parameters of `ty` if it is one of this module's kernels.
pub(in crate::kernel) fn read(ty: &str, obj: &mut ObjectReader<'_>) -> Result<Option<Kernel>, FieldError> {
    Ok(Some(match ty {
        "spectrum" => {
            Kernel::Spectrum { k: integer(obj, "k", 3, MAX_LENGTH)?, normalize: obj.bool("normalize")?.unwrap_or(true) }
        }
        "subsequence" => {
            let length = integer(obj, "length", 2, MAX_LENGTH)?;
            let decay = match crate::kernel::hyper::plain_number(obj, "decay")? {
                None => 0.5,
                Some((v, _)) if v > 0.0 && v <= 1.0 => v,
                Some((_, at)) => return Err(FieldError::invalid(at, "must be in (0, 1]")),
            };
            Kernel::Subsequence { length, decay, normalize: obj.bool("normalize")?.unwrap_or(true) }
        }
        "set" => Kernel::Set {
            measure: match obj.str("measure")? {
                None | Some("jaccard") => SetMeasure::Jaccard,
                Some("intersection") => SetMeasure::Intersection,
                Some(other) => {
                    return Err(FieldError::invalid(
                        obj.pointer("measure"),
                        format!("unknown measure `{other}`; expected jaccard or intersection"),
                    ))
                }
            },
        },
        "mahalanobis" => {
            let ptr = obj.pointer("matrix");
            let rows = match obj.take("matrix") {
                None => return Err(FieldError::shape(ptr, "missing field `matrix`")),
                Some(v) => matrix(v, &ptr)?,
            };
            let m = Mahalanobis::new(rows).map_err(|e| FieldError::invalid(&ptr, e))?;
            Kernel::Mahalanobis(Arc::new(m))
        }
        "generative" | "fisher" => {
            let given = obj.take("components").is_some();
            let mut spec = MixtureKernel {
                components: integer(obj, "components", 3, MAX_COMPONENTS)?,
                seed: obj.u64("seed")?.unwrap_or(0),
                max_iter: integer(obj, "max_iter", 100, u32::MAX as u64)?,
                mixture: None,
            };
            let ptr = obj.pointer("mixture");
            if let Some(v) = obj.take("mixture") {
                let m = mixture(v, &ptr)?;
                if given && spec.components != m.components() {
                    return Err(FieldError::invalid(
                        obj.pointer("components"),
                        format!("is {} but the mixture has {} components", spec.components, m.components()),
                    ));
                }
                spec.components = m.components();
                spec.mixture = Some(Arc::new(m));
            }
            if ty == "generative" {
                Kernel::Generative(spec)
            } else {
                Kernel::Fisher(spec)
            }
        }
        _ => return Ok(None),
    }))
}

/// A plain integer from 1 to `max`.
/// An integer from 1 to `max` (a negative or fractional number is 422 at its pointer, as
/// any out-of-range value).
fn integer(obj: &mut ObjectReader<'_>, key: &'static str, default: usize, max: u64) -> Result<usize, FieldError> {
    Ok(crate::kernel::hyper::integer_in(obj, key, 1, max)?.map_or(default, |v| v as usize))
}

/// A list of equally long lists of numbers, as a matrix with one list per column.
fn columns(v: &Value, ptr: &str) -> Result<DMatrix<f64>, FieldError> {
    let Value::Array(rows) = v else {
        return Err(FieldError::shape(
            ptr,
            format!("expected a list of lists of numbers, found {}", json_type_name(v)),
        ));
    };
    let mut data = Vec::new();
    let mut width = None;
    for (i, row) in rows.iter().enumerate() {
        let at = format!("{ptr}/{i}");
        let Value::Array(cells) = row else {
            return Err(FieldError::shape(at, format!("expected a list of numbers, found {}", json_type_name(row))));
        };
        for (j, c) in cells.iter().enumerate() {
            data.push(as_f64(c, &format!("{at}/{j}"))?);
        }
        match width {
            None => width = Some(cells.len()),
            Some(w) if w != cells.len() => {
                return Err(FieldError::invalid(at, format!("has {} entries but row 0 has {w}", cells.len())))
            }
            _ => {}
        }
    }
    match width {
        Some(w) if w > 0 => Ok(DMatrix::from_vec(w, rows.len(), data)),
        _ => Err(FieldError::invalid(ptr, "must not be empty")),
    }
}

fn matrix(v: &Value, ptr: &str) -> Result<DMatrix<f64>, FieldError> {
    // Row i of the JSON is column i here; A is checked symmetric, so either reading works,
    // but the transpose keeps (i, j) meaning row i, column j in messages.
    Ok(columns(v, ptr)?.transpose())
}

fn mixture(v: &Value, ptr: &str) -> Result<Mixture, FieldError> {
    let mut obj = ObjectReader::new(v, ptr)?;
    let mut list = |key: &'static str| -> Result<&Value, FieldError> {
        obj.take(key).ok_or_else(|| FieldError::shape(format!("{ptr}/{key}"), format!("missing field `{key}`")))
    };
    let (w, mu, var) = (list("weights")?, list("means")?, list("variances")?);
    obj.finish()?;
    let wptr = format!("{ptr}/weights");
    let Value::Array(ws) = w else {
        return Err(FieldError::shape(wptr, format!("expected a list of numbers, found {}", json_type_name(w))));
    };
    let weights =
        ws.iter().enumerate().map(|(i, x)| as_f64(x, &format!("{wptr}/{i}"))).collect::<Result<Vec<_>, _>>()?;
    let sum: f64 = weights.iter().sum();
    if weights.is_empty() || weights.iter().any(|&x| x < 0.0) || (sum - 1.0).abs() > 1e-6 {
        return Err(FieldError::invalid(wptr, "must be non-negative numbers summing to 1"));
    }
    let means = columns(mu, &format!("{ptr}/means"))?;
    let variances = columns(var, &format!("{ptr}/variances"))?;
    for (name, m) in [("means", &means), ("variances", &variances)] {
        if m.ncols() != weights.len() {
            return Err(FieldError::invalid(
                format!("{ptr}/{name}"),
                format!("has {} components but `weights` has {}", m.ncols(), weights.len()),
            ));
        }
    }
    if variances.nrows() != means.nrows() {
        return Err(FieldError::invalid(format!("{ptr}/variances"), "must have as many features as `means`"));
    }
    if variances.iter().any(|&x| x <= 0.0) {
        return Err(FieldError::invalid(format!("{ptr}/variances"), "must all be greater than 0"));
    }
    Ok(Mixture { weights, means, variances })
}

/// Writes this module's kernels' parameters into `m`; false for other kernels.
pub(in crate::kernel) fn write(k: &Kernel, m: &mut Map<String, Value>) -> bool {
    let mut put = |key: &str, v: Value| {
        m.insert(key.into(), v);
    };
    match k {
        Kernel::Spectrum { k, normalize } => {
            put("k", json!(k));
            put("normalize", json!(normalize));
        }
        Kernel::Subsequence { length, decay, normalize } => {
            put("length", json!(length));
            put("decay", json!(decay));
            put("normalize", json!(normalize));
        }
        Kernel::Set { measure } => put(
            "measure",
            json!(match measure {
                SetMeasure::Jaccard => "jaccard",
                SetMeasure::Intersection => "intersection",
            }),
        ),
        Kernel::Mahalanobis(a) => {
            let a = a.matrix();
            put(
                "matrix",
                json!((0..a.nrows()).map(|i| a.row(i).iter().copied().collect::<Vec<_>>()).collect::<Vec<_>>()),
            )
        }
        Kernel::Generative(g) | Kernel::Fisher(g) => {
            put("components", json!(g.components));
            put("seed", json!(g.seed));
            put("max_iter", json!(g.max_iter));
            if let Some(mix) = &g.mixture {
                let cols = |m: &DMatrix<f64>| -> Vec<Vec<f64>> {
                    m.column_iter().map(|c| c.iter().copied().collect()).collect()
                };
                put(
                    "mixture",
                    json!({"weights": mix.weights, "means": cols(&mix.means), "variances": cols(&mix.variances)}),
                );
            }
        }
        _ => return false,
    }
    true
}
