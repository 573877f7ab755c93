//! Logging: JSON lines on stderr, filtered by `MERCER_LOG` (EnvFilter syntax).

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber once; later calls (tests start many servers) are no-ops.
pub fn init(filter: &str) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|e| {
        eprintln!("{{\"level\":\"WARN\",\"message\":\"invalid log filter {filter:?} ({e}); using info\"}}");
        EnvFilter::new("info")
    });
    let _ = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(true)
        .with_span_list(false)
        .with_target(true)
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
