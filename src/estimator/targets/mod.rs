//! What a model is fitted to: class labels and several outputs.

pub mod labels;
pub mod outputs;
