//! The bounded fit pool: a fixed set of blocking worker threads and a bounded queue.
//!
//! Fits never run on the async runtime. Admission control happens at submit: a job is
//! accepted while queued + running < workers + queue capacity, otherwise the caller gets
//! `QueueFull` and answers 503. Queued jobs can be withdrawn (DELETE of a queued model)
//! and are handed back at shutdown so their models can be marked failed.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;
use uuid::Uuid;

/// What a job learns when it starts.
#[derive(Debug, Clone, Copy)]
pub struct RunInfo {
    /// Other jobs running at this moment (to decide whether to use every core).
    pub others_running: usize,
}

type Work = Box<dyn FnOnce(RunInfo) + Send + 'static>;

/// A unit of work, keyed by the model it fits.
pub struct Job {
    pub id: Uuid,
    work: Work,
    /// Runs after the pool has counted the job as finished, so that whoever it wakes
    /// sees consistent gauges. Dropped unrun if the job is withdrawn or dropped.
    done: Option<Box<dyn FnOnce() + Send + 'static>>,
}

impl Job {
    pub fn new(id: Uuid, work: impl FnOnce(RunInfo) + Send + 'static) -> Job {
        Job { id, work: Box::new(work), done: None }
    }

    /// Calls `done` once the job has run and the pool no longer counts it as running.
    pub fn on_done(mut self, done: impl FnOnce() + Send + 'static) -> Job {
        self.done = Some(Box::new(done));
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    #[error("the fit queue is full")]
    QueueFull,
    #[error("the pool is shutting down")]
    Closed,
}

struct State {
    queue: VecDeque<Job>,
    running: usize,
    closed: bool,
    /// Exponentially weighted mean fit time in seconds, for Retry-After.
    mean_job_secs: f64,
}

struct Shared {
    state: Mutex<State>,
    work_ready: Condvar,
    workers: usize,
    capacity: usize,
}

/// Cheap to clone; all clones share the workers.
#[derive(Clone)]
pub struct FitPool {
    shared: Arc<Shared>,
}

impl FitPool {
    /// Starts `workers` threads (at least one) with room for `capacity` waiting jobs.
    pub fn new(workers: usize, capacity: usize) -> FitPool {
        let workers = workers.max(1);
        let shared = Arc::new(Shared {
            state: Mutex::new(State { queue: VecDeque::new(), running: 0, closed: false, mean_job_secs: 1.0 }),
            work_ready: Condvar::new(),
            workers,
            capacity,
        });
        for i in 0..workers {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("mercer-fit-{i}"))
                .spawn(move || worker_loop(&shared))
                .expect("cannot start a fit worker thread");
        }
        FitPool { shared }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A job that panicked ran outside the lock, so the state is never half-updated.
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `job`, or refuses it when the pool is full or closed.
    pub fn try_submit(&self, job: Job) -> Result<(), SubmitError> {
        let mut st = self.lock();
        if st.closed {
            return Err(SubmitError::Closed);
        }
        if st.queue.len() + st.running >= self.shared.workers + self.shared.capacity {
            return Err(SubmitError::QueueFull);
        }
        st.queue.push_back(job);
        drop(st);
        self.shared.work_ready.notify_one();
        Ok(())
    }

    /// Takes a job out of the queue before it starts; false if it is not queued.
    pub fn withdraw(&self, id: Uuid) -> bool {
        let mut st = self.lock();
        let before = st.queue.len();
        st.queue.retain(|j| j.id != id);
        st.queue.len() != before
    }

    /// Whether a job submitted now would be refused (full or closed).
    pub fn is_full(&self) -> bool {
        let st = self.lock();
        st.closed || st.queue.len() + st.running >= self.shared.workers + self.shared.capacity
    }

    /// Jobs waiting for a worker.
    pub fn queued(&self) -> usize {
        self.lock().queue.len()
    }

    /// Jobs running now.
    pub fn running(&self) -> usize {
        self.lock().running
    }

    pub fn workers(&self) -> usize {
        self.shared.workers
    }

    /// A whole number of seconds (>= 1) after which a refused client may try again: the
    /// time for the queue ahead of it to drain at the recent mean fit time.
    pub fn retry_after(&self) -> Duration {
        let st = self.lock();
        let waves = (st.queue.len() + st.running) as f64 / self.shared.workers as f64;
        Duration::from_secs((st.mean_job_secs * waves).ceil().clamp(1.0, 300.0) as u64)
    }

    /// Stops accepting jobs and returns the ones still queued (they will never run).
    /// Running jobs finish; workers then exit.
    pub fn close(&self) -> Vec<Uuid> {
        let mut st = self.lock();
        st.closed = true;
        let dropped = st.queue.drain(..).map(|j| j.id).collect();
        drop(st);
        self.shared.work_ready.notify_all();
        dropped
    }
}

fn worker_loop(shared: &Shared) {
    loop {
        let (job, others) = {
            let mut st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if let Some(job) = st.queue.pop_front() {
                    st.running += 1;
                    break (job, st.running - 1);
                }
                if st.closed {
                    return;
                }
                st = shared.work_ready.wait(st).unwrap_or_else(|p| p.into_inner());
            }
        };
        let started = std::time::Instant::now();
        // The job reports its own panics as a failed fit; this guard only keeps a worker
        // alive if the reporting itself panics.
        let Job { work, done, .. } = job;
        let _ = catch_unwind(AssertUnwindSafe(|| work(RunInfo { others_running: others })));
        let secs = started.elapsed().as_secs_f64();
        {
            let mut st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
            st.running -= 1;
            st.mean_job_secs = 0.8 * st.mean_job_secs + 0.2 * secs;
        }
        if let Some(done) = done {
            let _ = catch_unwind(AssertUnwindSafe(done));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A job that reports it started and then blocks until released.
    fn blocking_job(id: Uuid) -> (Job, mpsc::Receiver<()>, mpsc::Sender<()>) {
        let (started_tx, started_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let job = Job::new(id, move |_| {
            started_tx.send(()).unwrap();
            let _ = release_rx.recv();
        });
        (job, started_rx, release_tx)
    }

    #[test]
    fn admits_workers_plus_capacity_then_refuses() {
        let pool = FitPool::new(1, 1);
        let (a, a_started, a_release) = blocking_job(Uuid::new_v4());
        pool.try_submit(a).unwrap();
        a_started.recv().unwrap();
        let (b, b_started, b_release) = blocking_job(Uuid::new_v4());
        pool.try_submit(b).unwrap();
        assert_eq!((pool.running(), pool.queued()), (1, 1));
        let (c, _, _) = blocking_job(Uuid::new_v4());
        assert_eq!(pool.try_submit(c).unwrap_err(), SubmitError::QueueFull);
        assert!(pool.retry_after() >= Duration::from_secs(1));
        a_release.send(()).unwrap();
        b_started.recv().unwrap();
        b_release.send(()).unwrap();
    }

    #[test]
    fn queued_jobs_can_be_withdrawn_and_are_dropped_on_close() {
        let pool = FitPool::new(1, 4);
        let (a, a_started, a_release) = blocking_job(Uuid::new_v4());
        pool.try_submit(a).unwrap();
        a_started.recv().unwrap();
        let (ran_tx, ran_rx) = mpsc::channel::<Uuid>();
        let ids: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
        for &id in &ids {
            let tx = ran_tx.clone();
            pool.try_submit(Job::new(id, move |_| tx.send(id).unwrap())).unwrap();
        }
        assert!(pool.withdraw(ids[0]));
        assert!(!pool.withdraw(Uuid::new_v4()));
        let dropped = pool.close();
        assert_eq!(dropped, ids[1..].to_vec());
        assert_eq!(pool.try_submit(Job::new(Uuid::new_v4(), |_| {})).unwrap_err(), SubmitError::Closed);
        a_release.send(()).unwrap();
        drop(ran_tx);
        assert!(ran_rx.recv().is_err(), "no dropped job may run");
    }

    #[test]
    fn completion_runs_after_the_job_stops_counting_as_running() {
        let pool = FitPool::new(1, 1);
        let (tx, rx) = mpsc::channel();
        let observer = pool.clone();
        pool.try_submit(Job::new(Uuid::new_v4(), |_| {}).on_done(move || tx.send(observer.running()).unwrap()))
            .unwrap();
        assert_eq!(rx.recv().unwrap(), 0);
    }

    #[test]
    fn a_panicking_job_does_not_kill_the_worker() {
        let pool = FitPool::new(1, 2);
        pool.try_submit(Job::new(Uuid::new_v4(), |_| panic!("boom"))).unwrap();
        let (tx, rx) = mpsc::channel();
        pool.try_submit(Job::new(Uuid::new_v4(), move |_| tx.send(42).unwrap())).unwrap();
        assert_eq!(rx.recv().unwrap(), 42);
    }
}
