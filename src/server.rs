//! Starting and stopping the HTTP server.

use crate::api;
use crate::config::Config;
use crate::service::Service;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How often the allocator's free memory is handed back to the system.
const TRIM_EVERY: Duration = Duration::from_secs(60);

/// A server running on the current tokio runtime.
pub struct RunningServer {
    pub addr: SocketAddr,
    pub service: Arc<Service>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl RunningServer {
    /// Drains (readyz 503, no new fits, queued fits dropped), stops accepting
    /// connections, and waits up to `shutdown_grace_secs` for requests in flight.
    /// Returns whether everything finished within the grace period.
    pub async fn shutdown(mut self) -> bool {
        self.service.begin_drain();
        let grace = Duration::from_secs(self.service.config.shutdown_grace_secs);
        let deadline = tokio::time::Instant::now() + grace;
        // Keep accepting while requests are in flight, so that clients polling meanwhile
        // see /readyz 503 and fits refused with 503 rather than a refused connection.
        let _ = tokio::time::timeout_at(deadline, self.service.wait_idle()).await;
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match tokio::time::timeout_at(deadline, &mut self.task).await {
            Ok(_) => true,
            Err(_) => {
                self.task.abort();
                false
            }
        }
    }
}

/// Binds `config.bind` and serves in a background task.
pub async fn start(config: Config) -> std::io::Result<RunningServer> {
    let service =
        Service::try_new(config).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
    serve(service).await
}

/// As [`start`], over a given store (tests run replicas sharing one).
pub async fn start_with_store(config: Config, store: crate::store::Store) -> std::io::Result<RunningServer> {
    serve(Service::with_store(config, store)).await
}

async fn serve(service: Service) -> std::io::Result<RunningServer> {
    let listener = TcpListener::bind(&service.config.bind).await?;
    let addr = listener.local_addr()?;
    let service = Arc::new(service);
    // Stored models load off the async threads while /readyz answers 503; then the
    // store is listed every store_refresh_secs.
    let loader = service.clone();
    tokio::spawn(async move {
        let refresher = loader.clone();
        if tokio::task::spawn_blocking(move || loader.load_store()).await.is_ok() {
            refresher.spawn_refresh();
        }
    });
    // Freed memory back to the system once a minute (see `crate::trim_allocator`), for
    // as long as the service lives.
    let weak = Arc::downgrade(&service);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(TRIM_EVERY);
        tick.tick().await;
        loop {
            tick.tick().await;
            if weak.strong_count() == 0 {
                break;
            }
            let _ = tokio::task::spawn_blocking(crate::trim_allocator).await;
        }
    });
    let app = api::router(service.clone());
    let (stop, stopped) = oneshot::channel::<()>();
    let served = service.clone();
    let task = tokio::spawn(async move {
        api::serve::serve(listener, app, served, async {
            let _ = stopped.await;
        })
        .await
    });
    Ok(RunningServer { addr, service, stop: Some(stop), task })
}

/// Serves until SIGTERM or SIGINT, then shuts down gracefully.
pub async fn run(config: Config) -> std::io::Result<()> {
    let server = start(config).await?;
    tracing::info!(addr = %server.addr, workers = server.service.pool.workers(), "mercer listening");
    shutdown_signal().await;
    tracing::info!("shutdown signal received; draining");
    let clean = server.shutdown().await;
    tracing::info!(clean, "mercer stopped");
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
