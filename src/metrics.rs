//! Prometheus metrics: the contract's families, recorded by the HTTP middleware, the fit
//! jobs and the predict path; gauges (queue depth, running fits, models by status,
//! registry bytes) are read from their owners at scrape time so they cannot drift.

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    pub method: String,
    pub route: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub method: String,
    pub route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelLabels {
    pub model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FitOutcomeLabels {
    pub model: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabels {
    pub status: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 0.5 ms .. ~65 s
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(0.0005, 2.0, 18))
}

fn fit_histogram() -> Histogram {
    // 1 ms .. ~9 min
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(0.001, 2.0, 20))
}

pub struct Metrics {
    registry: Registry,
    pub http_requests: Family<HttpLabels, Counter>,
    pub http_duration: HistogramFamily<RouteLabels>,
    pub fit_duration: HistogramFamily<ModelLabels>,
    pub fits: Family<FitOutcomeLabels, Counter>,
    pub predict_rows: Family<ModelLabels, Counter>,
    pub predict_duration: HistogramFamily<ModelLabels>,
    pub fit_queue_depth: Gauge,
    pub fits_running: Gauge,
    pub models: Family<StatusLabels, Gauge>,
    pub registry_bytes: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let http_requests = Family::<HttpLabels, Counter>::default();
        let http_duration: HistogramFamily<RouteLabels> = Family::new_with_constructor(latency_histogram);
        let fit_duration: HistogramFamily<ModelLabels> = Family::new_with_constructor(fit_histogram);
        let fits = Family::<FitOutcomeLabels, Counter>::default();
        let predict_rows = Family::<ModelLabels, Counter>::default();
        let predict_duration: HistogramFamily<ModelLabels> = Family::new_with_constructor(latency_histogram);
        let fit_queue_depth = Gauge::default();
        let fits_running = Gauge::default();
        let models = Family::<StatusLabels, Gauge>::default();
        let registry_bytes = Gauge::default();
        // Counter names get their `_total` suffix from the encoder.
        registry.register("mercer_http_requests", "HTTP requests by method, route and status", http_requests.clone());
        registry.register("mercer_http_request_duration_seconds", "HTTP request latency", http_duration.clone());
        registry.register("mercer_fit_duration_seconds", "Fit wall time by model", fit_duration.clone());
        registry.register("mercer_fits", "Fits by model and outcome (ready, failed, cancelled)", fits.clone());
        registry.register("mercer_predict_rows", "Rows predicted by model", predict_rows.clone());
        registry.register(
            "mercer_predict_duration_seconds",
            "Predict computation time by model",
            predict_duration.clone(),
        );
        registry.register("mercer_fit_queue_depth", "Fits waiting for a worker", fit_queue_depth.clone());
        registry.register("mercer_fits_running", "Fits running now", fits_running.clone());
        registry.register("mercer_models", "Models in the registry by status", models.clone());
        registry.register("mercer_registry_bytes", "Bytes held by fitted models", registry_bytes.clone());
        Metrics {
            registry,
            http_requests,
            http_duration,
            fit_duration,
            fits,
            predict_rows,
            predict_duration,
            fit_queue_depth,
            fits_running,
            models,
            registry_bytes,
        }
    }

    pub fn record_fit(&self, model: &str, outcome: &str, seconds: f64) {
        self.fits.get_or_create(&FitOutcomeLabels { model: model.into(), outcome: outcome.into() }).inc();
        if outcome == "ready" {
            self.fit_duration.get_or_create(&ModelLabels { model: model.into() }).observe(seconds);
        }
    }

    pub fn record_predict(&self, model: &str, rows: usize, seconds: f64) {
        let labels = ModelLabels { model: model.into() };
        self.predict_rows.get_or_create(&labels).inc_by(rows as u64);
        self.predict_duration.get_or_create(&labels).observe(seconds);
    }

    /// OpenMetrics text of every family.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}
