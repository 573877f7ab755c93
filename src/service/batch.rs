//! Dynamic batching of small predictions: concurrent requests to one model are stacked
//! into one predict call, so that the work that does not depend on the row (reading the
//! training points, and for a GP's variance the whole n x n factor) is done once per
//! batch instead of once per request.
//!
//! A single-row GP variance is a triangular solve against the factor: about n^2 flops
//! that stream all n^2 / 2 entries of L through the core for one row (9 GFLOP/s here at
//! n = 1000). The same solve for 8 or 16 rows at once runs at 30-33 GFLOP/s (faer's
//! blocked solve keeps each block of L in cache for every column), so stacking is worth
//! 3-4x on that part alone.
//!
//! A model's requests go to its lane; the first to find the lane idle starts a drain on
//! a blocking thread, and the drain takes everything queued (up to [`MAX_BATCH_ROWS`])
//! each time round. Under load the requests that arrive while a batch computes form the
//! next one (group commit, as databases batch their log writes). Before a batch that is
//! not full, the drain waits until its oldest request is `delay` old
//! (`MERCER_BATCH_DELAY_US`), so that requests arriving together off-peak share a call.
//!
//! Requests are batched only with others asking the same thing (the same fitted model
//! and the same options); a covariance spans its rows and is never batched. Every
//! predict path computes a row in an order of its own (see `linalg::ordered` and
//! `kernel::pairwise`), so a batched answer is the same bits as the request alone.

use crate::estimator::{FittedModel, PredictOptions, Prediction};
use crate::kernel::Points;
use crate::linalg::Parallelism;
use prometheus_client::metrics::histogram::Histogram;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use uuid::Uuid;

/// The most rows one batch stacks: past this the solve's rate no longer rises (faer's
/// triangular solve at n = 1000 runs at 37 GFLOP/s with 64 columns, 33 with 16), while
/// the first request of the batch waits for all of them.
pub const MAX_BATCH_ROWS: usize = 64;

/// Below this cost a predict runs inline on the async thread that received it: it takes
/// less time (~20 us) than handing it to a blocking thread and back.
pub const BATCH_MIN_FLOPS: f64 = 50_000.0;

/// One request waiting in a lane.
struct Job {
    fitted: Arc<FittedModel>,
    points: Points,
    opts: PredictOptions,
    reply: oneshot::Sender<Option<Prediction>>,
    arrived: Instant,
}

impl Job {
    /// Whether `other` may share this job's predict call.
    fn compatible(&self, other: &Job) -> bool {
        Arc::ptr_eq(&self.fitted, &other.fitted) && self.opts == other.opts
    }
}

#[derive(Default)]
struct LaneState {
    queued: Vec<Job>,
    /// Drains running for this lane.
    draining: usize,
}

#[derive(Default)]
struct Lane(Mutex<LaneState>);

/// The lanes of the models being predicted now, by model id. A lane leaves the map when
/// its last drain finds it empty.
type Lanes = Arc<Mutex<HashMap<Uuid, Arc<Lane>>>>;

pub struct Batcher {
    lanes: Lanes,
    /// How long a batch that is not full waits for more (its oldest request's age).
    delay: Duration,
    /// A batch estimated above this many flops runs on every core.
    parallel_flops: f64,
    /// Drains one lane may run at once. One keeps a 2-core machine's other core for
    /// the HTTP work and gives the largest batches; bigger machines get more.
    drains_per_lane: usize,
    /// Rows per predict call, for /metrics.
    batch_rows: Histogram,
    /// The service's count of heavy work on blocking threads: a batch run on every core
    /// is counted there while it runs.
    busy: Arc<AtomicUsize>,
}

impl Batcher {
    pub fn new(
        cores: usize,
        batch_rows: Histogram,
        delay: Duration,
        parallel_flops: f64,
        busy: Arc<AtomicUsize>,
    ) -> Batcher {
        let drains_per_lane = (cores / 2).max(1);
        Batcher { lanes: Lanes::default(), delay, parallel_flops, drains_per_lane, batch_rows, busy }
    }

    /// Predicts `points` with `fitted`, stacked with whatever else is queued for the
    /// model. None if the predict panicked (the whole batch fails; the drain goes on).
    pub async fn predict(
        &self,
        id: Uuid,
        fitted: Arc<FittedModel>,
        points: Points,
        opts: PredictOptions,
    ) -> Option<Prediction> {
        debug_assert!(!opts.covariance, "covariances are not batched");
        let (reply, answer) = oneshot::channel();
        let lane = self.lanes.lock().unwrap_or_else(|p| p.into_inner()).entry(id).or_default().clone();
        let start = {
            let mut state = lane.0.lock().unwrap_or_else(|p| p.into_inner());
            state.queued.push(Job { fitted, points, opts, reply, arrived: Instant::now() });
            let start = state.draining < self.drains_per_lane;
            if start {
                state.draining += 1;
            }
            start
        };
        if start {
            let (lanes, batch_rows, busy) = (self.lanes.clone(), self.batch_rows.clone(), self.busy.clone());
            let (delay, parallel_flops) = (self.delay, self.parallel_flops);
            tokio::task::spawn_blocking(move || drain(&lanes, id, &lane, &batch_rows, (delay, parallel_flops), &busy));
        }
        // A drain always answers or drops the sender; a dropped one reads as a failure.
        answer.await.ok().flatten()
    }
}

/// Runs batches from `lane` until it is empty; the last drain out removes the lane.
fn drain(
    lanes: &Lanes,
    id: Uuid,
    lane: &Arc<Lane>,
    batch_rows: &Histogram,
    (delay, parallel_flops): (Duration, f64),
    busy: &AtomicUsize,
) {
    loop {
        // A batch that is not full waits until its oldest request is `delay` old.
        let wait = {
            let state = lane.0.lock().unwrap_or_else(|p| p.into_inner());
            let rows: usize = state.queued.iter().map(|j| j.points.n()).sum();
            state.queued.first().filter(|_| rows < MAX_BATCH_ROWS).map(|j| delay.saturating_sub(j.arrived.elapsed()))
        };
        if let Some(w) = wait.filter(|w| !w.is_zero()) {
            std::thread::sleep(w);
        }
        let batch = {
            let mut state = lane.0.lock().unwrap_or_else(|p| p.into_inner());
            if state.queued.is_empty() {
                state.draining -= 1;
                break;
            }
            take_batch(&mut state.queued)
        };
        let rows = batch.iter().map(|j| j.points.n()).sum::<usize>();
        batch_rows.observe(rows as f64);
        let cost = batch[0].fitted.predictor().predict_cost(rows, &batch[0].opts);
        if cost > parallel_flops {
            busy.fetch_add(1, Ordering::AcqRel);
            run(batch, Parallelism::Parallel);
            busy.fetch_sub(1, Ordering::AcqRel);
        } else {
            run(batch, Parallelism::Sequential);
        }
    }
    // Map before lane, as `Batcher::predict` takes them (it never holds both). A request
    // that found the lane before this removal queues on it and starts its own drain.
    let mut map = lanes.lock().unwrap_or_else(|p| p.into_inner());
    let idle = {
        let state = lane.0.lock().unwrap_or_else(|p| p.into_inner());
        state.draining == 0 && state.queued.is_empty()
    };
    if idle && map.get(&id).is_some_and(|l| Arc::ptr_eq(l, lane)) {
        map.remove(&id);
    }
}

/// The oldest job and every later one that may share its call, up to
/// [`MAX_BATCH_ROWS`] rows (the oldest is taken whatever its size), in arrival order.
fn take_batch(queued: &mut Vec<Job>) -> Vec<Job> {
    let mut rows = queued[0].points.n();
    let mut batch = Vec::new();
    let mut rest = Vec::with_capacity(queued.len());
    for (i, job) in queued.drain(..).enumerate() {
        let fits = i == 0
            || (job.compatible(batch.first().expect("the oldest job is taken first"))
                && rows + job.points.n() <= MAX_BATCH_ROWS);
        if fits {
            if i > 0 {
                rows += job.points.n();
            }
            batch.push(job);
        } else {
            rest.push(job);
        }
    }
    *queued = rest;
    batch
}

/// One predict call for the whole batch, its rows cut back into one answer per job.
fn run(batch: Vec<Job>, par: Parallelism) {
    let first = &batch[0];
    let (fitted, opts) = (first.fitted.clone(), first.opts);
    let sizes: Vec<usize> = batch.iter().map(|j| j.points.n()).collect();
    let result = catch_unwind(AssertUnwindSafe(|| {
        let predictor = fitted.predictor();
        if batch.len() == 1 {
            return predictor.predict(&batch[0].points, &opts, par);
        }
        let parts: Vec<&Points> = batch.iter().map(|j| &j.points).collect();
        predictor.predict(&Points::concat(&parts), &opts, par)
    }));
    match result {
        Ok(prediction) if batch.len() == 1 => {
            // A lone request (the common case off-peak) gets the prediction as it is.
            let _ = batch.into_iter().next().expect("one job").reply.send(Some(prediction));
        }
        Ok(prediction) => {
            for (job, part) in batch.into_iter().zip(prediction.split(&sizes)) {
                // The client may have gone; its answer is then dropped.
                let _ = job.reply.send(Some(part));
            }
        }
        Err(_) => {
            for job in batch {
                let _ = job.reply.send(None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimator::Decision;

    fn job(fitted: &Arc<FittedModel>, rows: usize, opts: PredictOptions) -> Job {
        let points = Points::from_rows(&vec![vec![0.5, -0.5]; rows]);
        Job { fitted: fitted.clone(), points, opts, reply: oneshot::channel().0, arrived: Instant::now() }
    }

    /// A model of `kind` over `n` seeded points in 2-D: a regression on a smooth target,
    /// or three classes by angle.
    fn fitted(kind: &str, kernel: serde_json::Value, params: serde_json::Value, n: usize) -> Arc<FittedModel> {
        use crate::estimator::targets::labels::{ClassLabels, ClassificationSet};
        use crate::estimator::{FitContext, ModelKind, ModelSpec, TrainingData, TrainingSet};
        let m = crate::test_support::seeded_matrix(n, 2, 7);
        let rows: Vec<Vec<f64>> = m.row_iter().map(|r| r.iter().copied().collect()).collect();
        let x = Points::from_rows(&rows);
        let kernel = crate::kernel::Kernel::from_json(&kernel).unwrap();
        let spec = ModelSpec::from_json(ModelKind::from_name(kind).unwrap(), kernel, Some(&params)).unwrap();
        let data = if kind == "svm" {
            let y = rows.iter().map(|r| ((r[1].atan2(r[0]) + std::f64::consts::PI) * 3.0 / 6.3) as usize).collect();
            let classes = ClassLabels::Text(vec!["a".into(), "b".into(), "c".into()]);
            TrainingData::Classification(ClassificationSet { x, y, classes })
        } else {
            let y = rows.iter().map(|r| (3.0 * r[0]).sin() + r[1] * r[1]).collect();
            TrainingData::Regression(TrainingSet::new(x, y))
        };
        Arc::new(spec.fit(&data, &FitContext::new(Parallelism::Sequential)).unwrap())
    }

    fn model() -> Arc<FittedModel> {
        fitted("kernel_ridge", serde_json::json!({"type": "rbf", "gamma": 0.5}), serde_json::json!({"lambda": 0.1}), 3)
    }

    /// Runs one batch of parts of `q` (row counts `sizes`) and compares each answer with
    /// the part predicted alone.
    fn batch_answers_equal_lone_predictions(model: &Arc<FittedModel>, opts: PredictOptions, sizes: &[usize]) {
        let q = crate::test_support::seeded_matrix(sizes.iter().sum(), 2, 11);
        let rows: Vec<Vec<f64>> = q.row_iter().map(|r| r.iter().copied().collect()).collect();
        let mut at = 0;
        let mut batch = Vec::new();
        let mut answers = Vec::new();
        for &k in sizes {
            let points = Points::from_rows(&rows[at..at + k]);
            at += k;
            let (reply, answer) = oneshot::channel();
            batch.push(Job { fitted: model.clone(), points, opts, reply, arrived: Instant::now() });
            answers.push(answer);
        }
        let alone: Vec<Prediction> =
            batch.iter().map(|j| model.predictor().predict(&j.points, &opts, Parallelism::Sequential)).collect();
        run(batch, Parallelism::Sequential);
        // Bit for bit: every path computes a row in an order of its own.
        let close = |a: &[f64], b: &[f64]| {
            assert_eq!(a.len(), b.len());
            for (u, v) in a.iter().zip(b) {
                assert_eq!(u.to_bits(), v.to_bits(), "{u} vs {v}");
            }
        };
        for (answer, want) in answers.into_iter().zip(alone) {
            let got = answer.blocking_recv().unwrap().expect("no panic");
            close(&got.values, &want.values);
            assert_eq!(got.variance.is_some(), want.variance.is_some());
            if let (Some(a), Some(b)) = (&got.variance, &want.variance) {
                close(a, b);
            }
            assert_eq!(got.classes, want.classes);
            if let (Some(a), Some(b)) = (&got.probabilities, &want.probabilities) {
                close(a.as_slice(), b.as_slice());
            }
            match (&got.decision, &want.decision) {
                (Some(Decision::PerClass(a)), Some(Decision::PerClass(b))) => close(a.as_slice(), b.as_slice()),
                (None, None) => {}
                other => panic!("decisions differ in kind: {other:?}"),
            }
        }
    }

    #[test]
    fn a_batch_answers_each_request_as_if_it_ran_alone() {
        let gp = fitted(
            "gaussian_process",
            serde_json::json!({"type": "rbf", "length_scale": 0.7}),
            serde_json::json!({"noise": 0.01}),
            80,
        );
        batch_answers_equal_lone_predictions(&gp, PredictOptions::default(), &[1, 3, 1, 7, 2]);
        let mean_only = PredictOptions { variance: false, ..Default::default() };
        batch_answers_equal_lone_predictions(&gp, mean_only, &[2, 1]);
        let svm = fitted(
            "svm",
            serde_json::json!({"type": "rbf", "gamma": 1.0}),
            serde_json::json!({"c": 1.0, "probability": true}),
            90,
        );
        batch_answers_equal_lone_predictions(&svm, PredictOptions::default(), &[1, 4, 2, 1]);
    }

    #[test]
    fn a_batch_takes_compatible_jobs_in_order_up_to_the_row_cap() {
        let (a, b) = (model(), model());
        let plain = PredictOptions::default();
        let other = PredictOptions { variance: false, ..plain };
        let mut queued = vec![
            job(&a, 10, plain),
            job(&b, 1, plain),  // another fitted model
            job(&a, 1, other),  // other options
            job(&a, 50, plain), // fits: 60 rows
            job(&a, 5, plain),  // would make 65
            job(&a, 4, plain),  // fits: 64
        ];
        let batch = take_batch(&mut queued);
        assert_eq!(batch.iter().map(|j| j.points.n()).collect::<Vec<_>>(), vec![10, 50, 4]);
        assert_eq!(queued.iter().map(|j| j.points.n()).collect::<Vec<_>>(), vec![1, 1, 5]);
        // The oldest is taken even alone over the cap.
        let mut big = vec![job(&a, 100, plain), job(&a, 1, plain)];
        assert_eq!(take_batch(&mut big).len(), 1);
        assert_eq!(big.len(), 1);
    }
}
