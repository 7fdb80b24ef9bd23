//! `almanac bench --page-loads N`: the executor's jobs per second at the largest batch
//! while N clients load the console's pages (the overview and a task's calendar month,
//! each as fast as it answers) against the same run without them. The listener's queries
//! use a pool of their own (2 connections) and one overview answer serves every request
//! for a second, so page loads must not slow the workers.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context;
use serde::Serialize;

use super::harness::{reset, run_almanac, timed, verified, Options, TASK};
use crate::cluster::Cluster;
use crate::{executor, host};

#[derive(Debug, Clone, Serialize)]
pub struct PagesReport {
    pub clients: usize,
    pub batch: usize,
    pub quiet_jobs_per_second: f64,
    pub loaded_jobs_per_second: f64,
    pub page_loads: usize,
    pub page_loads_per_second: f64,
    pub page_p50_ms: f64,
    pub page_p99_ms: f64,
}

pub async fn measure(
    host: &host::Host,
    admin: &tokio_postgres::Client,
    cluster: &Cluster,
    options: &Options,
    exec: executor::Options,
    clients: usize,
) -> anyhow::Result<PagesReport> {
    let shutdown = tokio_util::sync::CancellationToken::new();
    let access = crate::http::auth::Access { sign_in: crate::http::auth::SignIn::None, trusted_header: None, read_only: true };
    let observed = crate::http::Observed::new(Arc::new(crate::metrics::Metrics::default()), access);
    let addr = crate::http::bind("127.0.0.1:0".parse()?, observed.clone(), shutdown.clone()).await?;
    observed.started(
        host.target(),
        crate::http::Started { loaded: host.loaded.clone(), topics: Vec::new(), logins: host.logins.clone(), scheduler: host.scheduler_options() },
    )?;

    reset(admin).await?;
    let (seconds, _) = timed(admin, cluster, || run_almanac(host, exec.clone(), admin)).await?;
    let quiet = verified(admin, exec.batch, options.accounts, seconds, None).await?;

    reset(admin).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let http = reqwest::Client::new();
    let pages = [format!("http://{addr}/api/overview"), format!("http://{addr}/api/calendar?task={TASK}")];
    let loads: Vec<_> = (0..clients)
        .map(|i| {
            let (stop, latencies, http, url) = (stop.clone(), latencies.clone(), http.clone(), pages[i % pages.len()].clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    let ok = http.get(&url).send().await.is_ok_and(|r| r.status().is_success());
                    if ok {
                        latencies.lock().expect("latencies").push(started.elapsed().as_secs_f64() * 1e3);
                    }
                }
            })
        })
        .collect();
    let started = Instant::now();
    let (seconds, _) = timed(admin, cluster, || run_almanac(host, exec.clone(), admin)).await?;
    let loaded = verified(admin, exec.batch, options.accounts, seconds, None).await?;
    let elapsed = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for load in loads {
        load.await.context("a page-load client")?;
    }
    shutdown.cancel();
    let mut ms = std::mem::take(&mut *latencies.lock().expect("latencies"));
    anyhow::ensure!(!ms.is_empty(), "no page load answered during the run");
    ms.sort_by(f64::total_cmp);
    Ok(PagesReport {
        clients,
        batch: exec.batch,
        quiet_jobs_per_second: quiet.jobs_per_second,
        loaded_jobs_per_second: loaded.jobs_per_second,
        page_loads: ms.len(),
        page_loads_per_second: ms.len() as f64 / elapsed,
        page_p50_ms: ms[ms.len() / 2],
        page_p99_ms: ms[(ms.len() * 99 / 100).min(ms.len() - 1)],
    })
}
