//! Hyperparameters: a value with optional search bounds and a `fixed` flag.
//!
//! The contract accepts a bare number (`1.0`), a list for ARD length scales (`[1.0, 2.0]`),
//! or the object form `{"value": .., "bounds": [lo, hi], "fixed": true}`. A fitted kernel is
//! returned in the form the client used, so a hyperparameter remembers its form.

use crate::spec::{as_f64, json_type_name, FieldError, ObjectReader};
use serde_json::{json, Value};

/// The bounds hyperparameters get when the client names none (as scikit-learn's).
pub const DEFAULT_BOUNDS: (f64, f64) = (1e-5, 1e5);

/// A hyperparameter of value type `T` (`f64`, or `Vec<f64>` for ARD length scales).
#[derive(Debug, Clone, PartialEq)]
pub struct Hyper<T = f64> {
    pub value: T,
    /// Search bounds in the hyperparameter's own units; `None` means the defaults.
    pub bounds: Option<(f64, f64)>,
    /// Excluded from optimisation.
    pub fixed: bool,
    /// Written by the client in the object form; echoed back the same way.
    object_form: bool,
    /// Given as `"scale"`: the value is decided by the training rows at the fit
    /// (scikit-learn's `gamma="scale"`); `value` means nothing until then.
    scale: bool,
}

impl<T> Hyper<T> {
    pub fn new(value: T) -> Self {
        Hyper { value, bounds: None, fixed: false, object_form: false, scale: false }
    }

    pub fn bounds_or(&self, default: (f64, f64)) -> (f64, f64) {
        self.bounds.unwrap_or(default)
    }

    /// The same hyperparameter (bounds, flag, form) holding another value.
    pub fn with_value<U>(&self, value: U) -> Hyper<U> {
        Hyper { value, bounds: self.bounds, fixed: self.fixed, object_form: self.object_form, scale: self.scale }
    }
}

impl Hyper<f64> {
    /// `"scale"`: a gamma the fit decides (its value is a placeholder until
    /// [`Hyper::resolved`]).
    pub fn scale() -> Self {
        Hyper { scale: true, ..Hyper::new(1.0) }
    }

    /// Whether this is a `"scale"` gamma not yet decided.
    pub fn is_scale(&self) -> bool {
        self.scale
    }

    /// A `"scale"` gamma decided as `value` (a plain number from then on); any other
    /// hyperparameter unchanged.
    pub fn resolved(&self, value: f64) -> Self {
        if self.scale {
            Hyper::new(value)
        } else {
            self.clone()
        }
    }
}

/// Anything a hyperparameter can hold, read from and written to JSON.
pub trait HyperValue: Sized + Clone {
    fn read(v: &Value, pointer: &str) -> Result<Self, FieldError>;
    fn write(&self) -> Value;
    fn all(&self, pred: impl Fn(f64) -> bool) -> bool;
}

impl HyperValue for f64 {
    fn read(v: &Value, pointer: &str) -> Result<Self, FieldError> {
        as_f64(v, pointer)
    }
    fn write(&self) -> Value {
        json!(self)
    }
    fn all(&self, pred: impl Fn(f64) -> bool) -> bool {
        pred(*self)
    }
}

/// A scalar or a list: a length scale shared by all features or one per feature.
#[derive(Debug, Clone, PartialEq)]
pub enum Scales {
    Isotropic(f64),
    PerFeature(Vec<f64>),
}

impl HyperValue for Scales {
    fn read(v: &Value, pointer: &str) -> Result<Self, FieldError> {
        match v {
            Value::Array(items) => {
                if items.is_empty() {
                    return Err(FieldError::invalid(pointer, "a per-feature list must not be empty"));
                }
                let values = items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| as_f64(x, &format!("{pointer}/{i}")))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Scales::PerFeature(values))
            }
            other => as_f64(other, pointer).map(Scales::Isotropic),
        }
    }
    fn write(&self) -> Value {
        match self {
            Scales::Isotropic(x) => json!(x),
            Scales::PerFeature(xs) => json!(xs),
        }
    }
    fn all(&self, pred: impl Fn(f64) -> bool) -> bool {
        match self {
            Scales::Isotropic(x) => pred(*x),
            Scales::PerFeature(xs) => xs.iter().all(|&x| pred(x)),
        }
    }
}

impl<T: HyperValue> Hyper<T> {
    /// Reads a number (or list) or the object form; does not range-check the value.
    pub fn read(v: &Value, pointer: &str) -> Result<Self, FieldError> {
        if !v.is_object() {
            return T::read(v, pointer).map(Hyper::new);
        }
        let mut obj = ObjectReader::new(v, pointer)?;
        let value = match obj.take("value") {
            Some(x) => T::read(x, &obj.pointer("value"))?,
            None => return Err(FieldError::shape(obj.pointer("value"), "missing field `value`")),
        };
        let bounds = match obj.take("bounds") {
            None => None,
            Some(b) => Some(read_bounds(b, &obj.pointer("bounds"))?),
        };
        let fixed = obj.bool("fixed")?.unwrap_or(false);
        obj.finish()?;
        Ok(Hyper { value, bounds, fixed, object_form: true, scale: false })
    }

    /// Reads like [`Hyper::read`] and requires every value to be strictly positive.
    pub fn read_positive(v: &Value, pointer: &str) -> Result<Self, FieldError> {
        let h = Self::read(v, pointer)?;
        if !h.value.all(|x| x > 0.0) {
            let at = if v.is_object() { format!("{pointer}/value") } else { pointer.to_string() };
            return Err(FieldError::invalid(at, "must be greater than 0"));
        }
        Ok(h)
    }

    pub fn to_json(&self) -> Value {
        if self.scale {
            return Value::String("scale".into());
        }
        if !self.object_form {
            return self.value.write();
        }
        let mut m = serde_json::Map::new();
        m.insert("value".into(), self.value.write());
        if let Some((lo, hi)) = self.bounds {
            m.insert("bounds".into(), json!([lo, hi]));
        }
        if self.fixed {
            m.insert("fixed".into(), Value::Bool(true));
        }
        Value::Object(m)
    }
}

fn read_bounds(v: &Value, pointer: &str) -> Result<(f64, f64), FieldError> {
    let items = match v {
        Value::Array(items) if items.len() == 2 => items,
        Value::Array(_) => return Err(FieldError::shape(pointer, "expected [lower, upper]")),
        other => {
            return Err(FieldError::shape(pointer, format!("expected [lower, upper], found {}", json_type_name(other))))
        }
    };
    let lo = as_f64(&items[0], &format!("{pointer}/0"))?;
    let hi = as_f64(&items[1], &format!("{pointer}/1"))?;
    if lo <= 0.0 {
        // The search runs in log space, so bounds must be positive.
        return Err(FieldError::invalid(format!("{pointer}/0"), "lower bound must be greater than 0"));
    }
    if hi < lo {
        return Err(FieldError::invalid(format!("{pointer}/1"), "upper bound must not be below the lower bound"));
    }
    Ok((lo, hi))
}

/// A numeric parameter that is never optimised, as a number or in the hyperparameter form
/// `{"value", "bounds", "fixed"}` every numeric kernel parameter accepts (bounds and fixed
/// then change nothing). Returns the value and the pointer its range errors name
/// (`.../value` in the object form).
pub(crate) fn plain_number<'a>(obj: &mut ObjectReader<'a>, key: &'a str) -> Result<Option<(f64, String)>, FieldError> {
    let pointer = obj.pointer(key);
    let Some(v) = obj.take(key) else { return Ok(None) };
    if !v.is_object() {
        return Ok(Some((as_f64(v, &pointer)?, pointer)));
    }
    let h = Hyper::<f64>::read(v, &pointer)?;
    Ok(Some((h.value, format!("{pointer}/value"))))
}

/// An integer parameter in `lo..=hi` (a number, or the hyperparameter form): another
/// number (negative, fractional, out of range) is 422 at its pointer, anything else a
/// shape error.
pub(crate) fn integer_in<'a>(
    obj: &mut ObjectReader<'a>,
    key: &'a str,
    lo: u64,
    hi: u64,
) -> Result<Option<u64>, FieldError> {
    match plain_number(obj, key)? {
        None => Ok(None),
        Some((v, _)) if v.fract() == 0.0 && v >= lo as f64 && v <= hi as f64 => Ok(Some(v as u64)),
        Some((_, at)) => Err(FieldError::invalid(at, format!("must be an integer from {lo} to {hi}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::ErrorKind;

    #[test]
    fn number_and_object_forms_round_trip_in_their_own_form() {
        let plain = Hyper::<f64>::read(&json!(0.5), "/l").unwrap();
        assert_eq!(plain.to_json(), json!(0.5));
        let obj = json!({"value": 0.5, "bounds": [0.1, 10.0], "fixed": true});
        let h = Hyper::<f64>::read(&obj, "/l").unwrap();
        assert_eq!((h.value, h.bounds, h.fixed), (0.5, Some((0.1, 10.0)), true));
        assert_eq!(h.to_json(), obj);
    }

    #[test]
    fn per_feature_scales_read_as_lists() {
        let h = Hyper::<Scales>::read_positive(&json!([1.0, 2.0]), "/l").unwrap();
        assert_eq!(h.value, Scales::PerFeature(vec![1.0, 2.0]));
        let err = Hyper::<Scales>::read_positive(&json!([1.0, -2.0]), "/l").unwrap_err();
        assert_eq!(err.kind, ErrorKind::Invalid);
    }

    #[test]
    fn bad_bounds_and_values_are_named() {
        let err = Hyper::<f64>::read(&json!({"value": 1.0, "bounds": [0.0, 1.0]}), "/k").unwrap_err();
        assert_eq!((err.kind, err.pointer.as_str()), (ErrorKind::Invalid, "/k/bounds/0"));
        let err = Hyper::<f64>::read(&json!({"value": 1.0, "bounds": [2.0, 1.0]}), "/k").unwrap_err();
        assert_eq!(err.pointer, "/k/bounds/1");
        let err = Hyper::<f64>::read_positive(&json!({"value": 0.0}), "/k").unwrap_err();
        assert_eq!(err.pointer, "/k/value");
        let err = Hyper::<f64>::read(&json!({"bounds": [1.0, 2.0]}), "/k").unwrap_err();
        assert_eq!((err.kind, err.pointer.as_str()), (ErrorKind::Shape, "/k/value"));
        let err = Hyper::<f64>::read(&json!({"value": 1.0, "lower": 1}), "/k").unwrap_err();
        assert_eq!(err.pointer, "/k/lower");
    }
}
