//! mercer: kernel machines served over HTTP.
//!
//! The numerical core (`kernel`, `estimator`, `linalg`) knows nothing of HTTP; the HTTP
//! layer (`api`) knows nothing of linear algebra. `service` holds the operations both
//! sides meet at: validate a request into checked inputs, run fits in the `pool`, keep
//! models in the `registry`.

pub mod api;
pub mod config;
pub mod estimator;
pub mod kernel;
pub mod linalg;
pub mod metrics;
pub mod pool;
pub mod registry;
pub mod server;
pub mod service;
pub mod spec;
pub mod telemetry;
