//! The contract's JSON form of kernels: reading with pointers into the kernel document,
//! and writing back (fitted values, in the form the client used).

use super::hyper::{Hyper, Scales};
use super::{Kernel, RbfWidth};
use crate::spec::{FieldError, ObjectReader};
use serde_json::{json, Map, Value};

const IMPLEMENTED: &[&str] = &["linear", "polynomial", "rbf", "laplacian", "exponential"];

/// Contract kernel types this build does not serve yet; named so that the error says so
/// rather than calling a documented type unknown.
const NOT_YET: &[&str] = &[
    "matern",
    "rational_quadratic",
    "periodic",
    "sigmoid",
    "inverse_multiquadric",
    "constant",
    "white",
    "sum",
    "product",
    "scale",
];

/// The largest polynomial degree accepted; beyond it the kernel only overflows.
const MAX_DEGREE: u64 = 64;

pub(super) fn read(v: &Value, path: &str) -> Result<Kernel, FieldError> {
    let mut obj = ObjectReader::new(v, path)?;
    let ty = match obj.str("type")? {
        Some(t) => t,
        None => return Err(FieldError::shape(obj.pointer("type"), "missing field `type`")),
    };
    let kernel = match ty {
        "linear" => {
            let c = positive_or_zero(&mut obj, "c", 0.0)?;
            Kernel::Linear { c }
        }
        "polynomial" => {
            let degree = match obj.u64("degree")? {
                None => 3,
                Some(d) if (1..=MAX_DEGREE).contains(&d) => d as u32,
                Some(_) => {
                    return Err(FieldError::invalid(
                        obj.pointer("degree"),
                        format!("must be an integer from 1 to {MAX_DEGREE}"),
                    ))
                }
            };
            let gamma = positive(&mut obj, "gamma", 1.0)?;
            let coef0 = any_number(&mut obj, "coef0", 1.0)?;
            Kernel::Polynomial { degree, gamma, coef0 }
        }
        "rbf" => {
            let ls_ptr = obj.pointer("length_scale");
            let g_ptr = obj.pointer("gamma");
            let ls = obj.take("length_scale");
            let gamma = obj.take("gamma");
            match (ls, gamma) {
                (Some(_), Some(_)) => {
                    return Err(FieldError::invalid(g_ptr, "give either `length_scale` or `gamma`, not both"))
                }
                (Some(l), None) => Kernel::Rbf(RbfWidth::LengthScale(Hyper::read_positive(l, &ls_ptr)?)),
                (None, Some(g)) => Kernel::Rbf(RbfWidth::Gamma(Hyper::read_positive(g, &g_ptr)?)),
                (None, None) => Kernel::Rbf(RbfWidth::LengthScale(Hyper::new(Scales::Isotropic(1.0)))),
            }
        }
        "laplacian" => Kernel::Laplacian { length_scale: positive(&mut obj, "length_scale", 1.0)? },
        "exponential" => Kernel::Exponential { length_scale: positive(&mut obj, "length_scale", 1.0)? },
        other => {
            let message = if NOT_YET.contains(&other) {
                format!("kernel type `{other}` is not available in this version; available: {}", IMPLEMENTED.join(", "))
            } else {
                format!("unknown kernel type `{other}`; expected one of {}", IMPLEMENTED.join(", "))
            };
            return Err(FieldError::invalid(obj.pointer("type"), message));
        }
    };
    obj.finish()?;
    Ok(kernel)
}

fn positive(obj: &mut ObjectReader<'_>, key: &'static str, default: f64) -> Result<Hyper, FieldError> {
    let pointer = obj.pointer(key);
    match obj.take(key) {
        None => Ok(Hyper::new(default)),
        Some(v) => Hyper::read_positive(v, &pointer),
    }
}

fn positive_or_zero(obj: &mut ObjectReader<'_>, key: &'static str, default: f64) -> Result<Hyper, FieldError> {
    let pointer = obj.pointer(key);
    match obj.take(key) {
        None => Ok(Hyper::new(default)),
        Some(v) => {
            let h = Hyper::<f64>::read(v, &pointer)?;
            if h.value < 0.0 {
                let at = if v.is_object() { format!("{pointer}/value") } else { pointer };
                return Err(FieldError::invalid(at, "must not be negative"));
            }
            Ok(h)
        }
    }
}

fn any_number(obj: &mut ObjectReader<'_>, key: &'static str, default: f64) -> Result<Hyper, FieldError> {
    let pointer = obj.pointer(key);
    match obj.take(key) {
        None => Ok(Hyper::new(default)),
        Some(v) => Hyper::read(v, &pointer),
    }
}

pub(super) fn write(k: &Kernel) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), json!(k.type_name()));
    match k {
        Kernel::Linear { c } => {
            m.insert("c".into(), c.to_json());
        }
        Kernel::Polynomial { degree, gamma, coef0 } => {
            m.insert("degree".into(), json!(degree));
            m.insert("gamma".into(), gamma.to_json());
            m.insert("coef0".into(), coef0.to_json());
        }
        Kernel::Rbf(RbfWidth::LengthScale(h)) => {
            m.insert("length_scale".into(), h.to_json());
        }
        Kernel::Rbf(RbfWidth::Gamma(h)) => {
            m.insert("gamma".into(), h.to_json());
        }
        Kernel::Laplacian { length_scale } | Kernel::Exponential { length_scale } => {
            m.insert("length_scale".into(), length_scale.to_json());
        }
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::ErrorKind;

    fn err(v: Value) -> FieldError {
        read(&v, "").unwrap_err()
    }

    #[test]
    fn every_kernel_round_trips_with_defaults_filled_in() {
        let cases = [
            (json!({"type": "linear"}), json!({"type": "linear", "c": 0.0})),
            (
                json!({"type": "polynomial", "degree": 2}),
                json!({"type": "polynomial", "degree": 2, "gamma": 1.0, "coef0": 1.0}),
            ),
            (json!({"type": "rbf"}), json!({"type": "rbf", "length_scale": 1.0})),
            (json!({"type": "rbf", "gamma": 0.5}), json!({"type": "rbf", "gamma": 0.5})),
            (
                json!({"type": "rbf", "length_scale": {"value": [1.0, 2.0], "bounds": [0.01, 100.0]}}),
                json!({"type": "rbf", "length_scale": {"value": [1.0, 2.0], "bounds": [0.01, 100.0]}}),
            ),
            (json!({"type": "laplacian", "length_scale": 3.0}), json!({"type": "laplacian", "length_scale": 3.0})),
            (json!({"type": "exponential"}), json!({"type": "exponential", "length_scale": 1.0})),
        ];
        for (input, expected) in cases {
            let k = read(&input, "").unwrap();
            assert_eq!(write(&k), expected, "for {input}");
            assert_eq!(read(&write(&k), "").unwrap(), k);
        }
    }

    #[test]
    fn invalid_values_are_422_kind_with_pointers() {
        let e = err(json!({"type": "rbf", "length_scale": -1.0}));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Invalid, "/length_scale"));
        let e = err(json!({"type": "polynomial", "degree": 0}));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Invalid, "/degree"));
        let e = err(json!({"type": "rbf", "gamma": 1.0, "length_scale": 1.0}));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Invalid, "/gamma"));
        let e = err(json!({"type": "spline"}));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Invalid, "/type"));
        let e = err(json!({"type": "linear", "c": -1.0}));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Invalid, "/c"));
    }

    #[test]
    fn malformed_kernels_are_400_kind_with_pointers() {
        let e = err(json!({"length_scale": 1.0}));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Shape, "/type"));
        let e = err(json!({"type": "rbf", "length_scale": "wide"}));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Shape, "/length_scale"));
        let e = err(json!({"type": "rbf", "sigma": 1.0}));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Shape, "/sigma"));
        let e = err(json!({"type": "polynomial", "degree": 2.5}));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Shape, "/degree"));
        let e = err(json!("rbf"));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Shape, ""));
    }
}
