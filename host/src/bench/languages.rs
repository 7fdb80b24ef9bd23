//! Each language's daily-points beside the `--plugin` one (`--languages`): the host's
//! start with the component compiled (an empty cache) and from the compiled cache, the
//! plugin overhead per job and the jobs/s at the largest batch, each run verified like
//! the others, on the same database.
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::harness::{overhead, reset, run_almanac, timed, verified, Options, Run, TASK};
use crate::cluster::Cluster;
use crate::{executor, host};

#[derive(Debug, Clone, Serialize)]
pub struct LanguageRun {
    pub file: String,
    /// The version the component declares (`0.1.0-ts`, `0.1.0-py`).
    pub version: String,
    pub bytes: u64,
    /// How many jobs one instance may run (`task-info.reuse`; 0: a fresh one per job).
    pub reuse: u32,
    /// A host's start, compiling the component (an empty cache).
    pub first_load_seconds: f64,
    /// A host's start from the compiled cache.
    pub cached_load_seconds: f64,
    pub overhead_us: f64,
    pub run: Run,
}

pub(super) async fn measure(cluster: &Cluster, url: &str, options: &Options, host_options: &host::Options) -> anyhow::Result<Vec<LanguageRun>> {
    let batch = options.batches.iter().copied().max().unwrap_or(1);
    let mut runs = Vec::new();
    for file in &options.languages {
        runs.push(one(cluster, url, options, host_options, file, batch).await.with_context(|| format!("--languages {}", file.display()))?);
    }
    Ok(runs)
}

async fn one(cluster: &Cluster, url: &str, options: &Options, host_options: &host::Options, file: &Path, batch: usize) -> anyhow::Result<LanguageRun> {
    let plugins = tempfile::tempdir()?;
    std::fs::copy(file, plugins.path().join("daily_points.wasm")).with_context(|| format!("copy {}", file.display()))?;
    let cache = tempfile::tempdir()?;
    let host_options = host::Options { plugins_dir: plugins.path().to_owned(), cache_dir: Some(cache.path().to_owned()), ..host_options.clone() };
    let shutdown = CancellationToken::new();
    let started = Instant::now();
    drop(host::Host::start(url, host_options.clone(), &shutdown).await?);
    let first_load_seconds = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let host = host::Host::start(url, host_options.clone(), &shutdown).await?;
    let cached_load_seconds = started.elapsed().as_secs_f64();
    let plugin = host.registry().get(TASK).cloned().with_context(|| format!("{} provides no task {TASK}", file.display()))?;
    let overhead_us = overhead(&plugin, options.overhead_calls).await?;
    let admin = host.pool.get().await?;
    reset(&admin).await?;
    let exec = executor::Options { batch, ..host_options.executor.clone() };
    let (seconds, cpu) = timed(&admin, cluster, || run_almanac(&host, exec, &admin)).await?;
    let run = verified(&admin, batch, options.accounts, seconds, Some(cpu)).await?;
    Ok(LanguageRun {
        file: file.file_name().map_or_else(|| file.display().to_string(), |n| n.to_string_lossy().into_owned()),
        version: plugin.spec.version.clone(),
        bytes: std::fs::metadata(file)?.len(),
        reuse: plugin.spec.reuse,
        first_load_seconds,
        cached_load_seconds,
        overhead_us,
        run,
    })
}
