//! The contract's JSON form of kernels: reading with pointers into the kernel document,
//! and writing back (fitted values, in the form the client used).

use super::hyper::{Hyper, Scales};
use super::{Kernel, Nu, RbfWidth};
use crate::spec::{json_type_name, FieldError, ObjectReader};
use serde_json::{json, Map, Value};

/// Every kernel type of the contract.
const TYPES: &[&str] = &[
    "linear",
    "polynomial",
    "rbf",
    "laplacian",
    "exponential",
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
    "spectrum",
    "subsequence",
    "set",
    "mahalanobis",
    "generative",
    "fisher",
    "precomputed",
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
        "linear" => Kernel::Linear { c: non_negative(&mut obj, "c", 0.0)? },
        "polynomial" => {
            let degree = crate::kernel::hyper::integer_in(&mut obj, "degree", 1, MAX_DEGREE)?.unwrap_or(3) as u32;
            let gamma = gamma(&mut obj)?;
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
                (None, Some(g)) if g == "scale" => Kernel::Rbf(RbfWidth::Gamma(Hyper::scale())),
                (None, Some(g)) => Kernel::Rbf(RbfWidth::Gamma(Hyper::read_positive(g, &g_ptr)?)),
                (None, None) => Kernel::Rbf(RbfWidth::LengthScale(Hyper::new(Scales::Isotropic(1.0)))),
            }
        }
        "laplacian" => Kernel::Laplacian { length_scale: positive(&mut obj, "length_scale", 1.0)? },
        "exponential" => Kernel::Exponential { length_scale: scales(&mut obj)? },
        "matern" => {
            let nu = match crate::kernel::hyper::plain_number(&mut obj, "nu")? {
                None => Nu::ThreeHalves,
                Some((0.5, _)) => Nu::Half,
                Some((1.5, _)) => Nu::ThreeHalves,
                Some((2.5, _)) => Nu::FiveHalves,
                Some((_, at)) => return Err(FieldError::invalid(at, "must be 0.5, 1.5 or 2.5")),
            };
            Kernel::Matern { length_scale: scales(&mut obj)?, nu }
        }
        "rational_quadratic" => Kernel::RationalQuadratic {
            length_scale: positive(&mut obj, "length_scale", 1.0)?,
            alpha: positive(&mut obj, "alpha", 1.0)?,
        },
        "periodic" => Kernel::Periodic {
            length_scale: positive(&mut obj, "length_scale", 1.0)?,
            period: positive(&mut obj, "period", 1.0)?,
        },
        "sigmoid" => Kernel::Sigmoid { gamma: gamma(&mut obj)?, coef0: any_number(&mut obj, "coef0", 0.0)? },
        // The rows of x are kernel values, so no part of a combination can be this.
        "precomputed" if !path.is_empty() => {
            return Err(FieldError::invalid(
                path,
                "a precomputed kernel must be the whole kernel, not part of a sum, product or scale",
            ))
        }
        "precomputed" => Kernel::Precomputed,
        "inverse_multiquadric" => Kernel::InverseMultiquadric { c: positive(&mut obj, "c", 1.0)? },
        "constant" => Kernel::Constant { value: positive(&mut obj, "value", 1.0)? },
        "white" => Kernel::White { noise: positive(&mut obj, "noise", 1.0)? },
        "sum" | "product" => {
            let ptr = obj.pointer("kernels");
            let parts = match obj.take("kernels") {
                None => return Err(FieldError::shape(ptr, "missing field `kernels`")),
                Some(Value::Array(items)) => items,
                Some(other) => {
                    return Err(FieldError::shape(
                        ptr,
                        format!("expected a list of kernels, found {}", json_type_name(other)),
                    ))
                }
            };
            if parts.len() < 2 {
                return Err(FieldError::invalid(ptr, format!("a {ty} needs at least 2 kernels, got {}", parts.len())));
            }
            let parts =
                parts.iter().enumerate().map(|(i, p)| read(p, &format!("{ptr}/{i}"))).collect::<Result<Vec<_>, _>>()?;
            if ty == "sum" {
                Kernel::Sum(parts)
            } else {
                Kernel::Product(parts)
            }
        }
        "scale" => {
            let factor = positive(&mut obj, "factor", 1.0)?;
            let ptr = obj.pointer("kernel");
            let inner = match obj.take("kernel") {
                None => return Err(FieldError::shape(ptr, "missing field `kernel`")),
                Some(k) => read(k, &ptr)?,
            };
            Kernel::Scale { factor, kernel: Box::new(inner) }
        }
        other => match super::structured::json::read(other, &mut obj)? {
            Some(k) => k,
            None => {
                return Err(FieldError::invalid(
                    obj.pointer("type"),
                    format!("unknown kernel type `{other}`; expected one of {}", TYPES.join(", ")),
                ))
            }
        },
    };
    obj.finish()?;
    Ok(kernel)
}

fn scales(obj: &mut ObjectReader<'_>) -> Result<Hyper<Scales>, FieldError> {
    let pointer = obj.pointer("length_scale");
    match obj.take("length_scale") {
        None => Ok(Hyper::new(Scales::Isotropic(1.0))),
        Some(v) => Hyper::read_positive(v, &pointer),
    }
}

/// A polynomial's or sigmoid's gamma: a positive number (1 when absent) or `"scale"`.
fn gamma(obj: &mut ObjectReader<'_>) -> Result<Hyper, FieldError> {
    let pointer = obj.pointer("gamma");
    match obj.take("gamma") {
        None => Ok(Hyper::new(1.0)),
        Some(v) if v == "scale" => Ok(Hyper::scale()),
        Some(v) => Hyper::read_positive(v, &pointer),
    }
}

fn positive(obj: &mut ObjectReader<'_>, key: &'static str, default: f64) -> Result<Hyper, FieldError> {
    let pointer = obj.pointer(key);
    match obj.take(key) {
        None => Ok(Hyper::new(default)),
        Some(v) => Hyper::read_positive(v, &pointer),
    }
}

fn non_negative(obj: &mut ObjectReader<'_>, key: &'static str, default: f64) -> Result<Hyper, FieldError> {
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
    let mut put = |key: &str, v: Value| {
        m.insert(key.into(), v);
    };
    match k {
        Kernel::Linear { c } => put("c", c.to_json()),
        Kernel::Polynomial { degree, gamma, coef0 } => {
            put("degree", json!(degree));
            put("gamma", gamma.to_json());
            put("coef0", coef0.to_json());
        }
        Kernel::Rbf(RbfWidth::LengthScale(h)) | Kernel::Exponential { length_scale: h } => {
            put("length_scale", h.to_json())
        }
        Kernel::Rbf(RbfWidth::Gamma(h)) => put("gamma", h.to_json()),
        Kernel::Laplacian { length_scale } => put("length_scale", length_scale.to_json()),
        Kernel::Matern { length_scale, nu } => {
            put("length_scale", length_scale.to_json());
            put("nu", json!(nu.value()));
        }
        Kernel::RationalQuadratic { length_scale, alpha } => {
            put("length_scale", length_scale.to_json());
            put("alpha", alpha.to_json());
        }
        Kernel::Periodic { length_scale, period } => {
            put("length_scale", length_scale.to_json());
            put("period", period.to_json());
        }
        Kernel::Sigmoid { gamma, coef0 } => {
            put("gamma", gamma.to_json());
            put("coef0", coef0.to_json());
        }
        Kernel::InverseMultiquadric { c } => put("c", c.to_json()),
        Kernel::Constant { value } => put("value", value.to_json()),
        Kernel::White { noise } => put("noise", noise.to_json()),
        Kernel::Sum(ks) | Kernel::Product(ks) => put("kernels", Value::Array(ks.iter().map(write).collect())),
        Kernel::Scale { factor, kernel } => {
            put("factor", factor.to_json());
            put("kernel", write(kernel));
        }
        Kernel::Precomputed => {}
        _ => {
            let written = super::structured::json::write(k, &mut m);
            debug_assert!(written, "every kernel type is written somewhere");
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
            (json!({"type": "matern"}), json!({"type": "matern", "length_scale": 1.0, "nu": 1.5})),
            (
                json!({"type": "rational_quadratic", "alpha": 2.0}),
                json!({"type": "rational_quadratic", "length_scale": 1.0, "alpha": 2.0}),
            ),
            (json!({"type": "periodic"}), json!({"type": "periodic", "length_scale": 1.0, "period": 1.0})),
            (json!({"type": "sigmoid"}), json!({"type": "sigmoid", "gamma": 1.0, "coef0": 0.0})),
            (json!({"type": "inverse_multiquadric"}), json!({"type": "inverse_multiquadric", "c": 1.0})),
            (
                json!({"type": "constant", "value": {"value": 2.0, "fixed": true}}),
                json!({"type": "constant", "value": {"value": 2.0, "fixed": true}}),
            ),
            (json!({"type": "white"}), json!({"type": "white", "noise": 1.0})),
            (
                json!({"type": "scale", "factor": 2.0, "kernel": {"type": "sum", "kernels": [{"type": "white"}, {"type": "product", "kernels": [{"type": "constant"}, {"type": "rbf"}]}]}}),
                json!({"type": "scale", "factor": 2.0, "kernel": {"type": "sum", "kernels": [
                    {"type": "white", "noise": 1.0},
                    {"type": "product", "kernels": [{"type": "constant", "value": 1.0}, {"type": "rbf", "length_scale": 1.0}]}
                ]}}),
            ),
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
        let e = err(json!({"type": "matern", "nu": 2.0}));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Invalid, "/nu"));
        let e = err(json!({"type": "periodic", "period": 0}));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Invalid, "/period"));
        let e = err(json!({"type": "sum", "kernels": [{"type": "rbf"}]}));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Invalid, "/kernels"));
        let e = err(json!({"type": "product", "kernels": []}));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Invalid, "/kernels"));
        let e = err(
            json!({"type": "sum", "kernels": [{"type": "rbf"}, {"type": "scale", "kernel": {"type": "rbf", "length_scale": -2}}]}),
        );
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Invalid, "/kernels/1/kernel/length_scale"));
        let e = err(json!({"type": "white", "noise": {"value": 0.0}}));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Invalid, "/noise/value"));
    }

    #[test]
    fn malformed_kernels_are_400_kind_with_pointers() {
        let e = err(json!({"length_scale": 1.0}));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Shape, "/type"));
        let e = err(json!({"type": "rbf", "length_scale": "wide"}));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Shape, "/length_scale"));
        let e = err(json!({"type": "rbf", "sigma": 1.0}));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Shape, "/sigma"));
        // A number where an integer is wanted is a value out of range (422), not a shape.
        let e = err(json!({"type": "polynomial", "degree": 2.5}));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Invalid, "/degree"));
        let e = err(json!({"type": "polynomial", "degree": "2"}));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Shape, "/degree"));
        let e = err(json!("rbf"));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Shape, ""));
        let e = err(json!({"type": "sum", "kernels": {"type": "rbf"}}));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Shape, "/kernels"));
        let e = err(json!({"type": "scale", "factor": 2.0}));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Shape, "/kernel"));
        let e = err(json!({"type": "product", "kernels": [{"type": "rbf"}, {"type": "rbf", "width": 1}]}));
        assert_eq!((e.kind, e.pointer.as_str()), (ErrorKind::Shape, "/kernels/1/width"));
    }
}
