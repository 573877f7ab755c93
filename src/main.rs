//! The mercer binary: `mercer` serves; `mercer healthcheck` probes a running server (the
//! container's HEALTHCHECK, as the slim image has no curl); `mercer config` prints the
//! effective settings; `train`, `predict`, `models`, `show`, `delete`, `datasets` and
//! `study` are the HTTP client (`mercer::client`); `completions SHELL` prints shell completions.

use clap::{CommandFactory, Parser, Subcommand};
use mercer::client::{
    self, Api, ClientError, Connection, ObserveArgs, PredictArgs, SampleArgs, TrainArgs, TransformArgs,
};
use mercer::config::Config;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(name = "mercer", version, about = "Kernel machines served over HTTP")]
struct Cli {
    /// A TOML file overriding config/default.toml (MERCER_* variables override both).
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve HTTP (the default).
    Serve,
    /// Exit 0 if the server at the configured address answers /healthz with 200.
    Healthcheck,
    /// Print the effective settings as TOML.
    Config,
    /// Upload a CSV file as a dataset and fit a model on it (waits until it is ready).
    Train(Box<TrainArgs>),
    /// Predict the rows of a CSV file with a model; CSV out.
    Predict(PredictArgs),
    /// Map the rows of a CSV file to a kernel_pca model's components; CSV out.
    Transform(TransformArgs),
    /// Draw from a gaussian_process's joint predictive distribution at the rows of a CSV
    /// file; CSV out (one row per query row, one column per draw).
    Sample(SampleArgs),
    /// Append the rows of a CSV file to a ready exact GP or kernel ridge model (an online
    /// update: the model equals a refit on all its rows).
    Observe(ObserveArgs),
    /// List the models.
    Models,
    /// List the model kinds the server fits and what each can do.
    Kinds,
    /// Show one model: its parameters, fitted kernel and training report.
    Show {
        /// The model's id.
        id: String,
    },
    /// Delete a model.
    Delete {
        /// The model's id.
        id: String,
        /// Delete it even if aliases route to it (they are changed to go without it).
        #[arg(long)]
        force: bool,
    },
    /// List the datasets.
    Datasets,
    /// Bayesian optimisation of anything you evaluate: create a study, ask it where to
    /// evaluate next, tell it the value.
    Study(client::study::StudyArgs),
    /// Stable names for models: point one at a model, send a canary share to another, add
    /// a shadow, roll back.
    Alias(client::alias::AliasArgs),
    /// Print shell completions (bash, zsh, fish, elvish, powershell) to standard output.
    Completions { shell: clap_complete::Shell },
}

fn main() -> ExitCode {
    mercer::tune_allocator();
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Completions { shell }) => {
            clap_complete::generate(shell, &mut Cli::command(), "mercer", &mut std::io::stdout());
            return ExitCode::SUCCESS;
        }
        Some(
            command @ (Command::Train(_)
            | Command::Predict(_)
            | Command::Transform(_)
            | Command::Sample(_)
            | Command::Observe(_)
            | Command::Models
            | Command::Kinds
            | Command::Show { .. }
            | Command::Delete { .. }
            | Command::Datasets
            | Command::Study(_)
            | Command::Alias(_)),
        ) => return run_client(command, &cli.connection),
        _ => {}
    }
    let config = match Config::load(cli.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mercer: {e}");
            return ExitCode::from(2);
        }
    };
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(config),
        Command::Healthcheck => healthcheck(&config.bind),
        Command::Config => {
            // The keys' names and scopes, never their secrets: this output lands in
            // terminals, tickets and CI logs.
            let shown = Config { api_keys: mercer::api::keys::redacted(&config.api_keys), ..config };
            print!("{}", toml::to_string(&shown).expect("settings serialise"));
            ExitCode::SUCCESS
        }
        _ => unreachable!("client commands returned above"),
    }
}

/// Runs one client command; 0 on success, 1 with the reason on stderr otherwise.
fn run_client(command: Command, conn: &Connection) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mercer: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(client_command(command, conn)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mercer: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn client_command(command: Command, conn: &Connection) -> Result<(), ClientError> {
    let api = Api::new(&conn.url, conn.token.clone())?;
    let json_out = |v: &serde_json::Value| println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
    match command {
        Command::Train(args) => {
            let model = client::train(&api, &args).await?;
            if conn.json {
                json_out(&model);
            } else {
                print!("{}", client::model_details(&model));
            }
        }
        Command::Predict(args) => {
            let csv = client::predict(&api, &args).await?;
            match &args.output {
                Some(path) => std::fs::write(path, &csv)
                    .map_err(|e| ClientError::Other(format!("cannot write {}: {e}", path.display())))?,
                None => std::io::stdout()
                    .write_all(&csv)
                    .map_err(|e| ClientError::Other(format!("cannot write the predictions: {e}")))?,
            }
        }
        Command::Transform(args) => {
            let answer = client::transform(&api, &args).await?;
            let text = if conn.json { format!("{answer}\n") } else { client::embedding_csv(&answer) };
            match &args.output {
                Some(path) => std::fs::write(path, text)
                    .map_err(|e| ClientError::Other(format!("cannot write {}: {e}", path.display())))?,
                None => std::io::stdout()
                    .write_all(text.as_bytes())
                    .map_err(|e| ClientError::Other(format!("cannot write the components: {e}")))?,
            }
        }
        Command::Sample(args) => {
            let answer = client::sample(&api, &args).await?;
            let text = if conn.json { format!("{answer}\n") } else { client::samples_csv(&answer) };
            match &args.output {
                Some(path) => std::fs::write(path, text)
                    .map_err(|e| ClientError::Other(format!("cannot write {}: {e}", path.display())))?,
                None => std::io::stdout()
                    .write_all(text.as_bytes())
                    .map_err(|e| ClientError::Other(format!("cannot write the draws: {e}")))?,
            }
        }
        Command::Observe(args) => {
            let model = client::observe(&api, &args).await?;
            if conn.json {
                json_out(&model);
            } else {
                print!("{}", client::model_details(&model));
            }
        }
        Command::Models => {
            let v = api.get_json("/models").await?;
            if conn.json {
                json_out(&v);
            } else {
                print!("{}", client::model_table(v["models"].as_array().map_or(&[][..], Vec::as_slice)));
            }
        }
        Command::Kinds => {
            let v = api.get_json("/models/kinds").await?;
            if conn.json {
                json_out(&v);
            } else {
                print!("{}", client::kind_table(v["kinds"].as_array().map_or(&[][..], Vec::as_slice)));
            }
        }
        Command::Datasets => {
            let v = api.get_json("/datasets").await?;
            if conn.json {
                json_out(&v);
            } else {
                print!("{}", client::dataset_table(v["datasets"].as_array().map_or(&[][..], Vec::as_slice)));
            }
        }
        Command::Show { id } => {
            let v = api.get_json(&format!("/models/{}", client::path_segment(&id))).await?;
            if conn.json {
                json_out(&v);
            } else {
                print!("{}", client::model_details(&v));
            }
        }
        Command::Delete { id, force } => {
            let query = if force { "?force=true" } else { "" };
            api.delete(&format!("/models/{}{query}", client::path_segment(&id))).await?;
            if !conn.json {
                println!("deleted {id}");
            }
        }
        Command::Study(args) => {
            let (v, text) = client::study::run(&api, &args).await?;
            if conn.json {
                json_out(&v);
            } else {
                print!("{text}");
            }
        }
        Command::Alias(args) => {
            let (v, text) = client::alias::run(&api, &args).await?;
            if conn.json {
                json_out(&v);
            } else {
                print!("{text}");
            }
        }
        Command::Serve | Command::Healthcheck | Command::Config | Command::Completions { .. } => {
            unreachable!("not a client command")
        }
    }
    Ok(())
}

fn serve(config: Config) -> ExitCode {
    if let Err(e) = mercer::api::keys::KeyRing::parse(&config.api_keys) {
        eprintln!("mercer: {e}");
        return ExitCode::from(2);
    }
    mercer::telemetry::init(&config.log);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().thread_name("mercer-http").build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mercer: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(mercer::server::run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "mercer failed");
            eprintln!("mercer: {e}");
            ExitCode::FAILURE
        }
    }
}

/// GET /healthz over a plain TCP connection to the bind address (a wildcard address is
/// probed on loopback).
fn healthcheck(bind: &str) -> ExitCode {
    let addr: Option<SocketAddr> = bind.to_socket_addrs().ok().and_then(|mut a| a.next()).map(|mut a| {
        if a.ip().is_unspecified() {
            a.set_ip(if a.is_ipv4() { [127, 0, 0, 1].into() } else { std::net::Ipv6Addr::LOCALHOST.into() });
        }
        a
    });
    let Some(addr) = addr else {
        eprintln!("healthcheck: cannot resolve {bind}");
        return ExitCode::FAILURE;
    };
    let probe = || -> std::io::Result<bool> {
        let timeout = Duration::from_secs(3);
        let mut s = TcpStream::connect_timeout(&addr, timeout)?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        write!(s, "GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
        let mut head = [0u8; 12];
        s.read_exact(&mut head)?;
        Ok(&head[..] == b"HTTP/1.1 200")
    };
    match probe() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("healthcheck: {addr} answered /healthz with an error");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("healthcheck: {addr}: {e}");
            ExitCode::FAILURE
        }
    }
}
