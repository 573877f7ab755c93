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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: String,
}

/// Why a connection ended with a request on it unanswered (see `api::serve`), or why an
/// answer went out with its request's body unread (`drain_bound`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WhyLabels {
    pub why: String,
}

/// What a damaged stored object was: "model" (a full object) or "delta".
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ObjectLabels {
    pub object: String,
}

/// Which listing of a refresh failed: "models", "deltas", "datasets", "delete markers".
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListingLabels {
    pub listing: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoreLabels {
    pub op: String,
    /// "ok" (including a missing object), or "unavailable".
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AliasLabels {
    pub alias: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AliasModelLabels {
    pub alias: String,
    pub model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabels {
    pub action: String,
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
    /// Rows per batched predict call (concurrent requests stacked into one).
    pub predict_batch_rows: Histogram,
    pub appended_rows: Family<ModelLabels, Counter>,
    pub append_duration: HistogramFamily<ModelLabels>,
    /// Model searches by model and outcome, and the fold fits they ran.
    pub searches: Family<FitOutcomeLabels, Counter>,
    pub search_fits: Family<ModelLabels, Counter>,
    pub fit_queue_depth: Gauge,
    pub fits_running: Gauge,
    pub models: Family<StatusLabels, Gauge>,
    pub registry_bytes: Gauge,
    pub store_up: Gauge,
    pub store_duration: HistogramFamily<StoreLabels>,
    /// One refresh from a shared store: its listings and the reads of what changed. With
    /// the refresh interval it bounds how late other replicas' writes show here.
    pub store_sync_seconds: Histogram,
    /// Listings of a refresh that failed, by listing: while they fail, deletes by other
    /// replicas are not seen here.
    pub store_sync_failures: Family<ListingLabels, Counter>,
    /// Request handlers that panicked (each answered 500).
    pub handler_panics: Counter,
    /// Requests whose connection ended without their whole answer, by why.
    pub http_unanswered: Family<WhyLabels, Counter>,
    /// Stored objects found damaged when read, by kind.
    pub damaged_objects: Family<ObjectLabels, Counter>,
    /// Compactions of online updates' deltas into a full model object, by outcome.
    pub compactions: Family<OutcomeLabels, Counter>,
    /// Deltas applied to bring a model read from the store up to its newest version.
    pub deltas_replayed: Counter,
    /// Studies created, trials suggested, values told, and suggest latency.
    pub studies_created: Counter,
    pub study_suggestions: Counter,
    pub study_tells: Counter,
    pub study_suggest_seconds: Histogram,
    /// Intermediate values reported, reports answered "prune", and trials told pruned.
    pub study_reports: Counter,
    pub study_prune_advice: Counter,
    pub study_pruned: Counter,
    /// Requests served through an alias, by alias and the model its route chose.
    pub alias_requests: Family<AliasModelLabels, Counter>,
    /// Alias settings written here, by action (set, rollback, delete, unroute).
    pub alias_changes: Family<ActionLabels, Counter>,
    /// How far shadow answers are from the answers sent: the absolute difference per
    /// value (regression), 0 or 1 per row (a class label).
    pub alias_shadow_disagreement: HistogramFamily<AliasLabels>,
    pub alias_shadow_seconds: HistogramFamily<AliasLabels>,
    pub alias_shadow_errors: Family<AliasLabels, Counter>,
    /// Shadow predictions dropped because the server was busy.
    pub alias_shadow_shed: Family<AliasLabels, Counter>,
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
        // 1 .. 64 rows, the batcher's cap.
        let predict_batch_rows =
            Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(1.0, 2.0, 7));
        let appended_rows = Family::<ModelLabels, Counter>::default();
        let append_duration: HistogramFamily<ModelLabels> = Family::new_with_constructor(latency_histogram);
        let searches = Family::<FitOutcomeLabels, Counter>::default();
        let search_fits = Family::<ModelLabels, Counter>::default();
        let fit_queue_depth = Gauge::default();
        let fits_running = Gauge::default();
        let models = Family::<StatusLabels, Gauge>::default();
        let registry_bytes = Gauge::default();
        let store_up = Gauge::default();
        store_up.set(1);
        let store_duration: HistogramFamily<StoreLabels> = Family::new_with_constructor(latency_histogram);
        let handler_panics = Counter::default();
        let damaged_objects = Family::<ObjectLabels, Counter>::default();
        let store_sync_failures = Family::<ListingLabels, Counter>::default();
        let http_unanswered = Family::<WhyLabels, Counter>::default();
        let compactions = Family::<OutcomeLabels, Counter>::default();
        let deltas_replayed = Counter::default();
        let (studies_created, study_suggestions, study_tells) =
            (Counter::default(), Counter::default(), Counter::default());
        let study_suggest_seconds = latency_histogram();
        let (study_reports, study_prune_advice, study_pruned) =
            (Counter::default(), Counter::default(), Counter::default());
        let store_sync_seconds = latency_histogram();
        let alias_requests = Family::<AliasModelLabels, Counter>::default();
        let alias_changes = Family::<ActionLabels, Counter>::default();
        // Absolute differences from 1e-6 to 1e3; a label mismatch (1) falls at 1.
        let alias_shadow_disagreement: HistogramFamily<AliasLabels> = Family::new_with_constructor(|| {
            Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(1e-6, 10.0, 10))
        });
        let alias_shadow_seconds: HistogramFamily<AliasLabels> = Family::new_with_constructor(latency_histogram);
        let alias_shadow_errors = Family::<AliasLabels, Counter>::default();
        let alias_shadow_shed = Family::<AliasLabels, Counter>::default();
        registry.register(
            "mercer_alias_requests",
            "Requests served through an alias, by alias and the model its route chose",
            alias_requests.clone(),
        );
        registry.register("mercer_alias_changes", "Alias settings written, by action", alias_changes.clone());
        registry.register(
            "mercer_alias_shadow_disagreement",
            "Shadow answers against the answers sent: absolute difference per value, or 1 per differing label",
            alias_shadow_disagreement.clone(),
        );
        registry.register(
            "mercer_alias_shadow_seconds",
            "Shadow prediction latency, by alias",
            alias_shadow_seconds.clone(),
        );
        registry.register("mercer_alias_shadow_errors", "Shadow predictions that failed", alias_shadow_errors.clone());
        registry.register(
            "mercer_alias_shadow_shed",
            "Shadow predictions dropped because the server was busy",
            alias_shadow_shed.clone(),
        );
        registry.register(
            "mercer_store_sync_duration_seconds",
            "Time one refresh from the store takes (listing models, deltas and datasets, reading what changed)",
            store_sync_seconds.clone(),
        );
        registry.register("mercer_studies_created", "Studies created", studies_created.clone());
        registry.register("mercer_study_suggestions", "Trials suggested by studies", study_suggestions.clone());
        registry.register("mercer_study_tells", "Values told to studies (warm starts included)", study_tells.clone());
        registry.register("mercer_study_reports", "Intermediate values reported to studies", study_reports.clone());
        registry.register(
            "mercer_study_prune_advice",
            "Reports a study's pruner answered with prune: true",
            study_prune_advice.clone(),
        );
        registry.register("mercer_study_pruned", "Trials told pruned", study_pruned.clone());
        registry.register(
            "mercer_study_suggest_duration_seconds",
            "Time to answer POST /studies/{id}/suggest",
            study_suggest_seconds.clone(),
        );
        registry.register(
            "mercer_store_compactions",
            "Compactions of online updates' deltas into a full model object, by outcome \
             (compacted, raced: another replica or a delete got there first, failed)",
            compactions.clone(),
        );
        registry.register(
            "mercer_deltas_replayed",
            "Online updates replayed from their stored deltas to bring a model up to date",
            deltas_replayed.clone(),
        );
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
        registry.register(
            "mercer_predict_batch_rows",
            "Rows per predict call that stacked concurrent requests to one model",
            predict_batch_rows.clone(),
        );
        registry.register("mercer_appended_rows", "Rows added by online updates, by model", appended_rows.clone());
        registry.register(
            "mercer_append_duration_seconds",
            "Online update wall time (the arithmetic and the stored write) by model",
            append_duration.clone(),
        );
        registry.register(
            "mercer_searches",
            "Model searches (training bodies with `search`) by model and outcome",
            searches.clone(),
        );
        registry.register(
            "mercer_search_fits",
            "Candidate fits on cross-validation folds run by model searches, by model",
            search_fits.clone(),
        );
        registry.register("mercer_fit_queue_depth", "Fits waiting for a worker", fit_queue_depth.clone());
        registry.register("mercer_fits_running", "Fits running now", fits_running.clone());
        registry.register("mercer_models", "Models in the registry by status", models.clone());
        registry.register("mercer_registry_bytes", "Bytes held by fitted models", registry_bytes.clone());
        registry.register(
            "mercer_store_up",
            "1 while the store answers, 0 since a call found it unreachable",
            store_up.clone(),
        );
        registry.register(
            "mercer_store_request_duration_seconds",
            "Store call latency by operation and outcome",
            store_duration.clone(),
        );
        registry.register(
            "mercer_handler_panics",
            "Request handlers that panicked (each answered with a 500 problem)",
            handler_panics.clone(),
        );
        registry.register(
            "mercer_http_unanswered",
            "Requests whose connection ended before their whole answer was written, by why \
             (client_closed, timeout, malformed, body_failed, io, shutdown, other), connections that \
             read bytes and wrote none with no request formed (before_request), and answers \
             sent with part of the request body unread (drain_bound)",
            http_unanswered.clone(),
        );
        registry.register(
            "mercer_store_damaged_objects",
            "Stored objects found damaged when read: a full model (moved to quarantine) or a \
             delta (left in place; its model answers 500 damaged-model), by object",
            damaged_objects.clone(),
        );
        registry.register(
            "mercer_store_sync_failures",
            "Listings of the store by a refresh that failed, by listing (models, deltas, \
             datasets, delete markers): while they fail, other replicas' deletes are not seen here",
            store_sync_failures.clone(),
        );
        Metrics {
            registry,
            damaged_objects,
            store_sync_failures,
            http_unanswered,
            http_requests,
            http_duration,
            fit_duration,
            fits,
            predict_rows,
            predict_duration,
            predict_batch_rows,
            appended_rows,
            compactions,
            deltas_replayed,
            append_duration,
            searches,
            search_fits,
            fit_queue_depth,
            fits_running,
            models,
            registry_bytes,
            store_up,
            store_duration,
            store_sync_seconds,
            handler_panics,
            studies_created,
            study_suggestions,
            study_tells,
            study_suggest_seconds,
            study_reports,
            study_prune_advice,
            study_pruned,
            alias_requests,
            alias_changes,
            alias_shadow_disagreement,
            alias_shadow_seconds,
            alias_shadow_errors,
            alias_shadow_shed,
        }
    }

    pub fn record_alias_request(&self, alias: &str, model: uuid::Uuid) {
        let labels = AliasModelLabels { alias: alias.into(), model: model.to_string() };
        self.alias_requests.get_or_create(&labels).inc();
    }

    pub fn record_alias_change(&self, action: &str) {
        self.alias_changes.get_or_create(&ActionLabels { action: action.into() }).inc();
    }

    /// A shadow prediction that ran: its latency and each value's disagreement.
    pub fn record_shadow(&self, alias: &str, seconds: f64, disagreement: &[f64]) {
        let labels = AliasLabels { alias: alias.into() };
        self.alias_shadow_seconds.get_or_create(&labels).observe(seconds);
        let h = self.alias_shadow_disagreement.get_or_create(&labels);
        for &d in disagreement {
            h.observe(d);
        }
    }

    pub fn record_shadow_error(&self, alias: &str, seconds: f64) {
        let labels = AliasLabels { alias: alias.into() };
        self.alias_shadow_seconds.get_or_create(&labels).observe(seconds);
        self.alias_shadow_errors.get_or_create(&labels).inc();
    }

    pub fn record_shadow_shed(&self, alias: &str) {
        self.alias_shadow_shed.get_or_create(&AliasLabels { alias: alias.into() }).inc();
    }

    /// A function that records store calls, for the store to call (it knows nothing of
    /// metrics).
    pub fn store_observer(&self) -> impl Fn(&'static str, f64, bool) + Send + Sync + 'static {
        let (up, duration) = (self.store_up.clone(), self.store_duration.clone());
        move |op, seconds, answered| {
            let outcome = if answered { "ok" } else { "unavailable" };
            duration.get_or_create(&StoreLabels { op: op.into(), outcome: outcome.into() }).observe(seconds);
            up.set(answered as i64);
        }
    }

    /// A search ended (`ready`, `failed` or `cancelled`) after `fold_fits` fold fits.
    pub fn record_search(&self, model: &str, outcome: &str, fold_fits: u64) {
        self.searches.get_or_create(&FitOutcomeLabels { model: model.into(), outcome: outcome.into() }).inc();
        self.search_fits.get_or_create(&ModelLabels { model: model.into() }).inc_by(fold_fits);
    }

    pub fn record_fit(&self, model: &str, outcome: &str, seconds: f64) {
        self.fits.get_or_create(&FitOutcomeLabels { model: model.into(), outcome: outcome.into() }).inc();
        if outcome == "ready" {
            self.fit_duration.get_or_create(&ModelLabels { model: model.into() }).observe(seconds);
        }
    }

    pub fn record_append(&self, model: &str, rows: usize, seconds: f64) {
        let labels = ModelLabels { model: model.into() };
        self.appended_rows.get_or_create(&labels).inc_by(rows as u64);
        self.append_duration.get_or_create(&labels).observe(seconds);
    }

    pub fn record_predict(&self, model: &str, rows: usize, seconds: f64) {
        let labels = ModelLabels { model: model.into() };
        self.predict_rows.get_or_create(&labels).inc_by(rows as u64);
        self.predict_duration.get_or_create(&labels).observe(seconds);
    }

    /// Every family, in the exposition format asked for.
    pub fn encode(&self, format: Format) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        match format {
            Format::OpenMetrics => out,
            Format::Prometheus => openmetrics_to_prometheus(&out),
        }
    }
}

/// The two text formats scrapers speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The Prometheus text format 0.0.4: what every scraper reads, so the default (as in
    /// the Prometheus client libraries).
    Prometheus,
    /// OpenMetrics 1.0, for clients whose `Accept` asks for it.
    OpenMetrics,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// Rewrites OpenMetrics text (prometheus-client writes only that) in the 0.0.4 format:
/// a counter's HELP and TYPE name its `_total` samples, types the old format lacks become
/// their nearest kin, and `# UNIT` lines, exemplars and `# EOF` go.
fn openmetrics_to_prometheus(text: &str) -> String {
    let kinds: std::collections::HashMap<&str, &str> =
        text.lines().filter_map(|l| l.strip_prefix("# TYPE ")).filter_map(|rest| rest.split_once(' ')).collect();
    let renamed = |name: &str| match kinds.get(name).copied() {
        Some("counter") => format!("{name}_total"),
        Some("info") => format!("{name}_info"),
        _ => name.to_string(),
    };
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if let Some((name, kind)) = line.strip_prefix("# TYPE ").and_then(|r| r.split_once(' ')) {
            let kind = match kind {
                "info" | "stateset" => "gauge",
                "gaugehistogram" => "histogram",
                "unknown" => "untyped",
                other => other,
            };
            out.push_str(&format!("# TYPE {} {kind}\n", renamed(name)));
        } else if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            out.push_str(&format!("# HELP {} {}\n", renamed(name), help_text_004(help)));
        } else if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        } else {
            // A sample, without its exemplar (" # {labels} value").
            out.push_str(line.find(" # {").map_or(line, |i| &line[..i]));
            out.push('\n');
        }
    }
    out
}

/// OpenMetrics escapes `\\`, `\n` and `\"` in HELP text; the 0.0.4 format only the first two.
fn help_text_004(help: &str) -> String {
    let mut out = String::with_capacity(help.len());
    let mut chars = help.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('"') => out.push('"'),
            Some(e) => {
                out.push('\\');
                out.push(e);
            }
            None => out.push_str("\\\\"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_text_names_counters_by_their_samples_and_drops_what_it_lacks() {
        let om = "# HELP jobs Jobs \\\"done\\\".\n# TYPE jobs counter\n# UNIT jobs jobs\njobs_total{kind=\"a\"} 3 # {trace=\"x\"} 1.0\n\
                  # HELP build Build.\n# TYPE build info\nbuild_info{v=\"1\"} 1\n\
                  # HELP t Latency.\n# TYPE t histogram\nt_bucket{le=\"+Inf\"} 2\nt_sum 0.5\nt_count 2\n# EOF\n";
        let text = openmetrics_to_prometheus(om);
        assert_eq!(
            text,
            "# HELP jobs_total Jobs \"done\".\n# TYPE jobs_total counter\njobs_total{kind=\"a\"} 3\n\
             # HELP build_info Build.\n# TYPE build_info gauge\nbuild_info{v=\"1\"} 1\n\
             # HELP t Latency.\n# TYPE t histogram\nt_bucket{le=\"+Inf\"} 2\nt_sum 0.5\nt_count 2\n"
        );
    }

    #[test]
    fn both_formats_carry_the_same_samples() {
        let m = Metrics::new();
        m.record_fit("svm", "ready", 0.25);
        m.record_predict("svm", 3, 0.001);
        let samples = |t: &str| -> Vec<String> {
            t.lines().filter(|l| !l.starts_with('#')).map(str::to_string).collect::<Vec<_>>()
        };
        let (classic, om) = (m.encode(Format::Prometheus), m.encode(Format::OpenMetrics));
        assert_eq!(samples(&classic), samples(&om));
        assert!(om.ends_with("# EOF\n") && !classic.contains("# EOF"));
        assert!(classic.contains("# TYPE mercer_fits_total counter\n"), "{classic}");
        assert!(om.contains("# TYPE mercer_fits counter\n"), "{om}");
    }
}
