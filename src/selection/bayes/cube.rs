//! A search space as the optimiser sees it: each dimension mapped to the unit cube
//! (uniform and integer ranges linearly, log-uniform ones in log, lists one-hot) and back
//! to the setting it stands for, and a setting's identity.

use crate::selection::space::{Axis, Draw};
use serde_json::Value;

/// One dimension of a space.
#[derive(Debug, Clone, PartialEq)]
pub enum Dim {
    /// A real range, in log when `log`.
    Real { lo: f64, hi: f64, log: bool },
    /// Integers from lo to hi inclusive.
    Int { lo: i64, hi: i64 },
    /// One of these values.
    Choice(Vec<Value>),
}

impl Dim {
    fn width(&self) -> usize {
        match self {
            Dim::Choice(v) if v.len() > 1 => v.len(),
            Dim::Choice(_) => 0,
            Dim::Real { .. } | Dim::Int { .. } => 1,
        }
    }
}

/// A space of settings and its unit-cube encoding.
#[derive(Debug, Clone, PartialEq)]
pub struct Space {
    pub dims: Vec<Dim>,
}

impl Space {
    /// The space of these axes (a search's or a study's, in their order).
    pub fn of<'a>(axes: impl IntoIterator<Item = &'a Axis>) -> Space {
        let dims = axes
            .into_iter()
            .map(|a| match a {
                Axis::List(v) => Dim::Choice(v.clone()),
                Axis::Grid { count, .. } => Dim::Choice((0..*count).map(|i| a.value(i)).collect()),
                Axis::Draw(Draw::Uniform(lo, hi)) => Dim::Real { lo: *lo, hi: *hi, log: false },
                Axis::Draw(Draw::LogUniform(lo, hi)) => Dim::Real { lo: *lo, hi: *hi, log: true },
                Axis::Draw(Draw::IntUniform(lo, hi)) => Dim::Int { lo: *lo, hi: *hi },
            })
            .collect();
        Space { dims }
    }

    /// Coordinates in the unit cube.
    pub fn width(&self) -> usize {
        self.dims.iter().map(Dim::width).sum()
    }

    /// A setting's point in the unit cube; None when a value is not in the space.
    pub fn encode(&self, values: &[Value]) -> Option<Vec<f64>> {
        let mut out = Vec::with_capacity(self.width());
        for (dim, v) in self.dims.iter().zip(values) {
            match dim {
                Dim::Real { lo, hi, log } => {
                    let x = v.as_f64()?;
                    let (a, b, x) = if *log { (lo.ln(), hi.ln(), x.ln()) } else { (*lo, *hi, x) };
                    out.push(if b > a { ((x - a) / (b - a)).clamp(0.0, 1.0) } else { 0.5 });
                }
                Dim::Int { lo, hi } => {
                    let x = v.as_i64()?;
                    out.push(if hi > lo { (x - lo) as f64 / (hi - lo) as f64 } else { 0.5 });
                }
                Dim::Choice(c) => {
                    let i = c.iter().position(|w| w == v)?;
                    if c.len() > 1 {
                        out.extend((0..c.len()).map(|j| if j == i { 1.0 } else { 0.0 }));
                    }
                }
            }
        }
        Some(out)
    }

    /// The setting at a point of the unit cube: integers rounded, one-hots decided by
    /// their largest entry (ties to the first).
    pub fn decode(&self, u: &[f64]) -> Vec<Value> {
        let mut at = 0;
        self.dims
            .iter()
            .map(|dim| match dim {
                Dim::Real { lo, hi, log } => {
                    let x = u[at].clamp(0.0, 1.0);
                    at += 1;
                    let v = if *log { (lo.ln() + x * (hi.ln() - lo.ln())).exp() } else { lo + x * (hi - lo) };
                    number(v.clamp(*lo, *hi))
                }
                Dim::Int { lo, hi } => {
                    let x = u[at].clamp(0.0, 1.0);
                    at += 1;
                    let v = (*lo as f64 + x * (*hi - *lo) as f64).round() as i64;
                    Value::from(v.clamp(*lo, *hi))
                }
                Dim::Choice(c) if c.len() > 1 => {
                    let part = &u[at..at + c.len()];
                    at += c.len();
                    let best = crate::estimator::first_max(part.iter().copied());
                    c[best].clone()
                }
                Dim::Choice(c) => c[0].clone(),
            })
            .collect()
    }

    /// The point a setting decodes to, encoded again: where the surrogate sees it.
    pub fn snap(&self, u: &[f64]) -> Vec<f64> {
        self.encode(&self.decode(u)).expect("a decoded setting is in the space")
    }

    /// How many distinct settings the space holds, when it is finite (lists, grids and
    /// integer ranges only).
    pub fn size(&self) -> Option<u128> {
        self.dims.iter().try_fold(1u128, |acc, d| match d {
            Dim::Choice(c) => Some(acc.saturating_mul(c.len() as u128)),
            Dim::Int { lo, hi } => Some(acc.saturating_mul((*hi as i128 - *lo as i128 + 1) as u128)),
            Dim::Real { .. } => None,
        })
    }
}

fn number(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

/// A setting's identity, to tell whether it was evaluated.
pub fn key(values: &[Value]) -> String {
    Value::Array(values.to_vec()).to_string()
}
