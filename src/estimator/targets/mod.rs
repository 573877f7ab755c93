//! What a model is fitted to: the validated rows and their targets (numbers with one or
//! several outputs, class labels, or none), and how targets are normalised.

pub mod labels;
pub mod outputs;

use super::{FitError, ModelKind};
use crate::kernel::Points;
use crate::spec::FieldError;
use labels::ClassificationSet;
use nalgebra::DMatrix;
use outputs::Outputs;

/// Training inputs of a regression model after validation: n >= 1 points and their
/// finite targets, n x t column-major (output k's targets are `y[k n..(k + 1) n]`; one
/// output: just y). Only kernel ridge and Gaussian processes take several outputs.
#[derive(Debug, Clone)]
pub struct TrainingSet {
    pub x: Points,
    pub y: Vec<f64>,
    pub outputs: Outputs,
}

impl TrainingSet {
    /// One target per row (1-D y).
    pub fn new(x: Points, y: Vec<f64>) -> TrainingSet {
        TrainingSet { x, y, outputs: Outputs::Single }
    }

    /// Targets `y` n x t column-major (2-D y, whatever t).
    pub fn multi(x: Points, y: Vec<f64>, t: usize) -> TrainingSet {
        debug_assert_eq!(y.len(), x.n() * t);
        TrainingSet { x, y, outputs: Outputs::Multi(t) }
    }

    /// The targets as an n x t matrix.
    pub fn y_matrix(&self) -> DMatrix<f64> {
        DMatrix::from_column_slice(self.x.n(), self.outputs.t(), &self.y)
    }

    /// Output k's targets.
    pub fn output(&self, k: usize) -> &[f64] {
        let n = self.x.n();
        &self.y[k * n..(k + 1) * n]
    }
}

/// Validated training inputs of any task.
#[derive(Debug, Clone)]
pub enum TrainingData {
    Regression(TrainingSet),
    Classification(ClassificationSet),
    /// Rows without targets (novelty detection).
    Unlabelled(Points),
}

impl TrainingData {
    pub fn x(&self) -> &Points {
        match self {
            TrainingData::Regression(d) => &d.x,
            TrainingData::Classification(d) => &d.x,
            TrainingData::Unlabelled(x) => x,
        }
    }

    pub fn x_mut(&mut self) -> &mut Points {
        match self {
            TrainingData::Regression(d) => &mut d.x,
            TrainingData::Classification(d) => &mut d.x,
            TrainingData::Unlabelled(x) => x,
        }
    }
}

/// The data of a kind's task, or 422 at `/y`: what a kind's `fit_checked` takes.
impl TrainingData {
    pub fn regression(&self, kind: ModelKind) -> Result<&TrainingSet, FitError> {
        match self {
            TrainingData::Regression(d) => Ok(d),
            TrainingData::Classification(_) | TrainingData::Unlabelled(_) => Err(unsuited(kind)),
        }
    }

    pub fn classification(&self, kind: ModelKind) -> Result<&ClassificationSet, FitError> {
        match self {
            TrainingData::Classification(d) => Ok(d),
            TrainingData::Regression(_) | TrainingData::Unlabelled(_) => Err(unsuited(kind)),
        }
    }

    pub fn unlabelled(&self, kind: ModelKind) -> Result<&Points, FitError> {
        match self {
            TrainingData::Unlabelled(x) => Ok(x),
            TrainingData::Regression(_) | TrainingData::Classification(_) => Err(unsuited(kind)),
        }
    }
}

fn unsuited(kind: ModelKind) -> FitError {
    FitError::Invalid(FieldError::invalid("/y", format!("these targets do not suit a {} model", kind.name())))
}
