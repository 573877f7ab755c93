//! Settings: embedded defaults < `--config` file < `MERCER_*` environment variables.
//!
//! `config/default.toml` is the single list of settings and their defaults; it is
//! compiled in, so the binary runs with no file around it. A key that the defaults do
//! not have is an error in a file and ignored nowhere: typos fail loudly at start.

use serde::{Deserialize, Serialize};
use std::path::Path;

pub const DEFAULTS_TOML: &str = include_str!("../config/default.toml");

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub bind: String,
    pub data_dir: String,
    /// `[NAME=]TOKEN[:SCOPE]` entries, comma-separated (src/api/keys.rs reads them).
    pub api_keys: String,
    pub fit_workers: usize,
    pub fit_queue: usize,
    pub max_body_bytes: usize,
    pub max_train_rows: usize,
    pub exact_max_rows: usize,
    pub max_dataset_bytes: u64,
    pub max_fit_bytes: u64,
    pub log: String,
    pub request_timeout_secs: u64,
    pub fit_wait_secs: u64,
    pub shutdown_grace_secs: u64,
    pub max_covariance_rows: usize,
    pub max_search_fits: u64,
    /// Trials one study may hold.
    pub max_study_trials: u64,
    /// Longest string row (code points) or token list (tokens) a request may carry.
    pub max_row_chars: usize,
    pub predict_inline_max_flops: f64,
    /// Longest a prediction waits for concurrent ones to the same model to share its
    /// call (microseconds); 0 turns batching off.
    pub batch_delay_us: u64,
    pub store_url: String,
    pub store_refresh_secs: u64,
    /// Deltas (online updates stored apart) after which a full object is written again.
    pub compact_deltas: u64,
    /// ... or bytes of deltas.
    pub compact_bytes: u64,
    pub cache_bytes: u64,
    pub ui_dir: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("invalid config file {path}: {message}")]
    Parse { path: String, message: String },
    #[error("invalid value for {var}: {message}")]
    Env { var: String, message: String },
}

impl Config {
    /// The embedded defaults alone.
    pub fn defaults() -> Config {
        toml::from_str(DEFAULTS_TOML).expect("config/default.toml is valid")
    }

    /// Defaults, then the file (if any), then the process environment.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        Config::load_with_env(file, std::env::vars())
    }

    /// As [`Config::load`] with an explicit environment (for tests).
    pub fn load_with_env(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigError> {
        let mut table: toml::Table = toml::from_str(DEFAULTS_TOML).expect("config/default.toml is valid");
        if let Some(path) = file {
            let shown = path.display().to_string();
            let text =
                std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: shown.clone(), source })?;
            let overrides: toml::Table = toml::from_str(&text)
                .map_err(|e| ConfigError::Parse { path: shown.clone(), message: e.to_string() })?;
            for (key, value) in overrides {
                if !table.contains_key(&key) {
                    return Err(ConfigError::Parse { path: shown, message: format!("unknown setting `{key}`") });
                }
                table.insert(key, value);
            }
            // Types are checked once, over the merged table.
            toml::Table::try_into::<Config>(table.clone())
                .map_err(|e| ConfigError::Parse { path: shown, message: e.to_string() })?;
        }
        for (var, raw) in env {
            let Some(key) = var.strip_prefix("MERCER_").map(str::to_ascii_lowercase) else {
                continue;
            };
            let Some(current) = table.get(&key) else {
                continue;
            };
            let value = match current {
                toml::Value::String(_) => toml::Value::String(raw.clone()),
                toml::Value::Integer(_) => {
                    raw.trim().parse::<i64>().ok().filter(|v| *v >= 0).map(toml::Value::Integer).ok_or_else(|| {
                        ConfigError::Env {
                            var: var.clone(),
                            message: format!("expected a non-negative integer, got {raw:?}"),
                        }
                    })?
                }
                toml::Value::Float(_) => {
                    raw.trim().parse::<f64>().ok().filter(|v| v.is_finite()).map(toml::Value::Float).ok_or_else(
                        || ConfigError::Env { var: var.clone(), message: format!("expected a number, got {raw:?}") },
                    )?
                }
                other => {
                    return Err(ConfigError::Env {
                        var,
                        message: format!("unsupported setting type {}", other.type_str()),
                    })
                }
            };
            table.insert(key, value);
        }
        let config: Config = table.try_into().map_err(|e: toml::de::Error| ConfigError::Parse {
            path: "(merged settings)".into(),
            message: e.to_string(),
        })?;
        Ok(config)
    }

    /// `fit_workers`, with 0 meaning one per core.
    pub fn effective_fit_workers(&self) -> usize {
        if self.fit_workers == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            self.fit_workers
        }
    }

    /// `max_fit_bytes`, with 0 meaning half of physical memory (no limit if unknown).
    pub fn effective_max_fit_bytes(&self) -> u64 {
        if self.max_fit_bytes > 0 {
            return self.max_fit_bytes;
        }
        physical_memory_bytes().map_or(u64::MAX, |m| m / 2)
    }

    /// `cache_bytes`, with 0 meaning a quarter of physical memory (1 GiB if unknown).
    pub fn effective_cache_bytes(&self) -> usize {
        if self.cache_bytes > 0 {
            return self.cache_bytes as usize;
        }
        physical_memory_bytes().map_or(1 << 30, |m| (m / 4) as usize)
    }

    /// Settings for tests and embedding: ephemeral port, memory only, quiet.
    pub fn for_tests() -> Config {
        Config { bind: "127.0.0.1:0".into(), data_dir: String::new(), log: "warn".into(), ..Config::defaults() }
    }
}

/// MemTotal from /proc/meminfo (Linux); None elsewhere.
fn physical_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn defaults_are_the_contract_defaults() {
        let c = Config::defaults();
        assert_eq!(c.bind, "127.0.0.1:8080");
        assert_eq!(c.data_dir, "data");
        assert_eq!((c.fit_queue, c.max_body_bytes, c.max_train_rows), (64, 67_108_864, 10_000_000));
        assert_eq!((c.exact_max_rows, c.max_dataset_bytes), (20_000, 4_294_967_296));
        assert_eq!(c.log, "info");
        assert_eq!(c.max_search_fits, 10_000);
        assert!(c.api_keys.is_empty());
        assert!(c.effective_max_fit_bytes() > 1 << 20, "half of physical memory by default");
    }

    #[test]
    fn file_overrides_defaults_and_env_overrides_file() {
        let dir = std::env::temp_dir().join(format!("mercer-config-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.toml");
        writeln!(std::fs::File::create(&path).unwrap(), "fit_queue = 3\nbind = \"0.0.0.0:9000\"").unwrap();
        let c = Config::load_with_env(Some(&path), env(&[("MERCER_FIT_QUEUE", "5"), ("MERCER_API_KEYS", "a, b,")]))
            .unwrap();
        assert_eq!((c.fit_queue, c.bind.as_str()), (5, "0.0.0.0:9000"));
        assert_eq!(c.api_keys, "a, b,");
        let c = Config::load_with_env(Some(&path), env(&[("MERCER_DATA_DIR", "")])).unwrap();
        assert_eq!((c.fit_queue, c.data_dir.as_str()), (3, ""));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn unknown_keys_and_bad_values_fail_loudly() {
        let dir = std::env::temp_dir().join(format!("mercer-config-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.toml");
        std::fs::write(&path, "fit_qeue = 3\n").unwrap();
        assert!(matches!(Config::load_with_env(Some(&path), env(&[])), Err(ConfigError::Parse { .. })));
        std::fs::write(&path, "fit_queue = \"many\"\n").unwrap();
        assert!(matches!(Config::load_with_env(Some(&path), env(&[])), Err(ConfigError::Parse { .. })));
        assert!(matches!(
            Config::load_with_env(None, env(&[("MERCER_FIT_WORKERS", "-2")])),
            Err(ConfigError::Env { .. })
        ));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
