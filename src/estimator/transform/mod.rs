//! Models that map rows to new coordinates instead of predicting a target (task
//! `transform`): kernel PCA.

pub mod kernel_pca;

pub(crate) use kernel_pca::restore;
pub use kernel_pca::{EigenSolver, KernelPca, KernelPcaModel};
