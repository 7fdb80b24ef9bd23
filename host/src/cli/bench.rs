//! `almanac bench`: run the benchmark and print its table (or JSON) and its targets.
use std::path::PathBuf;
use std::process::ExitCode;

use almanac::bench::{self, Report};

#[derive(clap::Args)]
pub struct BenchArgs {
    /// The daily_points.wasm component.
    #[arg(long)]
    plugin: PathBuf,
    #[arg(long, default_value_t = 20_000)]
    accounts: i64,
    #[arg(long, default_value_t = 8)]
    workers: usize,
    #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
    batches: Vec<usize>,
    /// Keys generated for one slot, and the depth of the claim test.
    #[arg(long, default_value_t = 1_000_000)]
    generate: i64,
    #[arg(long, default_value_t = 2_000)]
    claim_samples: usize,
    #[arg(long, default_value_t = 5_000)]
    overhead_calls: usize,
    /// Also run the executor over the unix socket, TCP, TLS and a transaction-pooling
    /// PgBouncer (installed separately), and print the ratios.
    #[arg(long)]
    connections: bool,
    /// Also measure the SQL enqueue API (almanac.enqueue_many of 100,000 keys, 10,000
    /// single almanac.enqueue calls from --workers connections) next to plain INSERTs.
    #[arg(long)]
    enqueue: bool,
    /// Also measure with a history of N done jobs over a year of slots (and N/10 pending
    /// not yet due) against an empty one: throughput, claim, `status` and overview
    /// latency, pruning a month, dead tuples after a 200,000-job run.
    #[arg(long, value_name = "N")]
    history: Option<i64>,
    /// Also run the backlog with 1, 2, 4 (or the given numbers of) hosts on one database,
    /// at the largest batch: throughput, WAL bytes per job against the floor's,
    /// connections per host.
    #[arg(long, value_delimiter = ',', num_args = 0.., default_missing_value = "1,2,4")]
    hosts: Option<Vec<usize>>,
    /// Also run these components of daily-points (its TypeScript and Python builds, say)
    /// beside --plugin: first and cached load, plugin overhead, jobs/s at the largest
    /// batch, each against --plugin's.
    #[arg(long, value_delimiter = ',')]
    languages: Vec<PathBuf>,
    /// The numbers of idle hosts (real `almanac run` processes at their defaults) whose
    /// statements are counted from pg_stat_statements, each over --idle-window; with one
    /// host, lone jobs are also timed from enqueue to claim. `--idle-hosts` with no number:
    /// neither.
    #[arg(long, value_delimiter = ',', num_args = 0.., default_value = "1,4")]
    idle_hosts: Vec<usize>,
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    idle_window: std::time::Duration,
    /// Lone jobs timed, one at a time on an idle host.
    #[arg(long, default_value_t = 200)]
    lone_jobs: usize,
    /// Also run a deadlock storm: this fixture_crosslock.wasm's jobs (which lock two rows
    /// in opposite orders) on --workers workers against the same jobs on one.
    #[arg(long, value_name = "WASM")]
    contention: Option<PathBuf>,
    /// Jobs of the deadlock storm, and the seconds each pauses between its two locks.
    #[arg(long, default_value_t = 200)]
    contention_jobs: i64,
    #[arg(long, default_value_t = 0.1)]
    contention_pause: f64,
    /// Also run the largest batch while this many clients load the console's pages
    /// (overview, a calendar month), against the same run without them.
    #[arg(long, value_name = "CLIENTS")]
    page_loads: Option<usize>,
    /// A small, quick run that only checks the benchmark works (what CI runs).
    #[arg(long)]
    smoke: bool,
    #[arg(long)]
    json: bool,
}

pub async fn run(data_dir: &std::path::Path, args: BenchArgs, shutdown: tokio_util::sync::CancellationToken) -> anyhow::Result<ExitCode> {
    let mut options = bench::Options {
        plugin: args.plugin,
        data_dir: data_dir.join("bench"),
        accounts: args.accounts,
        workers: args.workers,
        batches: args.batches,
        generate: args.generate,
        claim_samples: args.claim_samples,
        overhead_calls: args.overhead_calls,
        connections: args.connections,
        enqueue: args.enqueue.then_some((100_000, 10_000)),
        history: args.history.map(|done| bench::HistoryOptions { done, churn: 200_000, autovacuum_wait: std::time::Duration::from_secs(90) }),
        hosts: args.hosts.unwrap_or_default(),
        languages: args.languages,
        idle: bench::IdleOptions { hosts: args.idle_hosts, window: args.idle_window, lone: args.lone_jobs },
        contention: args.contention.map(|plugin| bench::ContentionOptions { plugin, jobs: args.contention_jobs, pause: args.contention_pause }),
        page_loads: args.page_loads,
    };
    if args.smoke {
        options = bench::Options {
            accounts: 400,
            generate: 5_000,
            claim_samples: 50,
            overhead_calls: 100,
            batches: vec![1, 8],
            workers: 2,
            enqueue: Some((2_000, 400)),
            history: Some(bench::HistoryOptions { done: 20_000, churn: 800, autovacuum_wait: std::time::Duration::ZERO }),
            hosts: vec![1, 2],
            // Past a heartbeat (10 s): an idle host may send nothing else that long.
            idle: bench::IdleOptions { hosts: vec![1], window: std::time::Duration::from_secs(11), lone: 10 },
            contention: options.contention.map(|c| bench::ContentionOptions { jobs: 16, pause: 0.02, ..c }),
            page_loads: Some(4),
            ..options
        };
    }
    // SIGINT or SIGTERM drops the run: the cluster it started is stopped, the hosts it
    // started are sent SIGTERM (their guards).
    let report = tokio::select! {
        report = bench::run(options) => report?,
        _ = shutdown.cancelled() => anyhow::bail!("interrupted"),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(ExitCode::SUCCESS)
}

fn render(r: &Report) -> String {
    let mut out = String::new();
    let settings: Vec<String> = r.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
    out.push_str(&format!("private PostgreSQL: {}\n", settings.join(" ")));
    out.push_str(&format!("workload: {} accounts, one daily-points job each, --workers {}\n\n", r.accounts, r.workers));
    let p = &r.pgbench;
    out.push_str(&format!(
        "pgbench floor (the seed's per-job SQL by pgbench -M prepared, one job per transaction, {} clients): {:.0} jobs/s, PG CPU {:.2}s, pgbench CPU {:.2}s\n",
        r.workers,
        p.jobs_per_second,
        p.postgres_cpu_seconds.unwrap_or(0.0),
        p.host_cpu_seconds.unwrap_or(0.0)
    ));
    out.push_str("almanac against it: ");
    let per_job = |run: &bench::Run, of: fn(&bench::Run) -> Option<f64>| of(run).unwrap_or(0.0) / run.jobs as f64;
    let against: Vec<String> = r
        .almanac
        .iter()
        .map(|a| {
            format!(
                "batch {} {:.2}x jobs/s, {:.2}x PG CPU/job",
                a.batch,
                a.jobs_per_second / p.jobs_per_second,
                per_job(a, |x| x.postgres_cpu_seconds) / per_job(p, |x| x.postgres_cpu_seconds).max(1e-12)
            )
        })
        .collect();
    out.push_str(&against.join("; "));
    out.push_str("\n(below: \"floor\", the same SQL from a tokio-postgres loop of ours, beside each batch)\n\n");
    // CPU seconds for the same jobs: PostgreSQL's under each, and the floor's client
    // against Almanac's host (sandbox, policy, roles and all).
    out.push_str(&format!(
        "{:<7} {:>12} {:>14} {:>7} {:>13} {:>15} {:>7} {:>16} {:>14} {:>7}\n",
        "BATCH", "FLOOR job/s", "ALMANAC job/s", "RATIO", "FLOOR PG CPU", "ALMANAC PG CPU", "RATIO", "FLOOR CLIENT CPU", "ALMANAC HOST", "RATIO"
    ));
    for (f, a) in r.floor.iter().zip(&r.almanac) {
        let (host, pg) = (a.host_cpu_seconds.unwrap_or(0.0), a.postgres_cpu_seconds.unwrap_or(0.0));
        let (client, floor_pg) = (f.host_cpu_seconds.unwrap_or(0.0), f.postgres_cpu_seconds.unwrap_or(0.0));
        out.push_str(&format!(
            "{:<7} {:>12.0} {:>14.0} {:>7.2} {:>12.2}s {:>14.2}s {:>7.2} {:>15.2}s {:>13.2}s {:>7.2}\n",
            f.batch,
            f.jobs_per_second,
            a.jobs_per_second,
            a.jobs_per_second / f.jobs_per_second,
            floor_pg,
            pg,
            pg / floor_pg.max(1e-9),
            client,
            host,
            host / client.max(1e-9)
        ));
    }
    if let Some(e) = &r.enqueue {
        out.push_str(&format!(
            "\nenqueue (SQL API next to a plain INSERT of the same rows, same run):\n  enqueue_many of {} keys: {:.0} jobs/s, plain {:.0} jobs/s, ratio {:.2}\n  {} single enqueue calls from {} connections: {:.0} jobs/s, plain {:.0} jobs/s, ratio {:.2}\n",
            e.many_keys,
            e.many_jobs_per_second,
            e.many_plain_jobs_per_second,
            e.many_jobs_per_second / e.many_plain_jobs_per_second,
            e.single_calls,
            e.single_connections,
            e.single_jobs_per_second,
            e.single_plain_jobs_per_second,
            e.single_jobs_per_second / e.single_plain_jobs_per_second
        ));
    }
    if !r.connections.is_empty() {
        out.push_str(&render_connections(r));
    }
    if let Some(s) = &r.scaling {
        out.push_str(&bench::scaling::render(s, r.workers));
    }
    if let Some(h) = &r.history {
        out.push_str(&render_history(h));
    }
    if !r.languages.is_empty() {
        out.push_str(&render_languages(r));
    }
    if let Some(idle) = &r.idle {
        out.push_str(&render_idle(idle));
    }
    if let Some(c) = &r.contention {
        out.push_str(&format!(
            "\ncontention ({} jobs locking two rows in opposite orders, {:.2} s between the locks, deadlock_timeout 1 s): one worker {:.1} s; {} workers {:.1} s ({:.2}x), {} deadlocks, every job done once\n",
            c.jobs,
            c.pause_seconds,
            c.serial_seconds,
            c.workers,
            c.storm_seconds,
            c.storm_seconds / c.serial_seconds,
            c.deadlocks
        ));
    }
    if let Some(p) = &r.pages {
        out.push_str(&format!(
            "\nconsole page loads ({} clients, overview and calendar, as fast as they answer): --batch {} {:.0} jobs/s quiet, {:.0} loaded ({:.2}x); {:.0} page loads/s, p50 {:.1} ms, p99 {:.1} ms\n",
            p.clients,
            p.batch,
            p.quiet_jobs_per_second,
            p.loaded_jobs_per_second,
            p.loaded_jobs_per_second / p.quiet_jobs_per_second,
            p.page_loads_per_second,
            p.page_p50_ms,
            p.page_p99_ms
        ));
    }
    out.push_str(&format!("\nplugin overhead (instantiate + run + 2 host calls, no-op tx): {:.1} µs/job\n", r.plugin_overhead_us));
    out.push_str(&format!(
        "statement policy (libpg_query parse + tree walk, daily-points' statements): {:.1} µs uncached, {:.2} µs cached, per statement\n",
        r.policy_parse_us, r.policy_cached_us
    ));
    out.push_str(&format!("hot reload + metrics (registry lookup, counter, histogram): {:.2} µs per job\n", r.observe_us));
    out.push_str(&format!(
        "generation: {} jobs for one slot in {:.2} s (a plain INSERT ... SELECT of the same rows: {:.2} s, ratio {:.2}), peak host RSS {:.0} MB\n",
        r.generation_keys,
        r.generation_seconds,
        r.generation_plain_seconds,
        r.generation_plain_seconds / r.generation_seconds.max(1e-9),
        r.generation_peak_rss_mb
    ));
    out.push_str(&format!(
        "claim at depth ({} pending + {} done): p50 {:.3} ms, p99 {:.3} ms; plan:\n",
        r.claim_depth, r.claim_depth, r.claim_p50_ms, r.claim_p99_ms
    ));
    for line in r.claim_plan.lines() {
        out.push_str(&format!("    {line}\n"));
    }
    out.push_str("\ntargets:\n");
    let ratio = |b: usize| {
        let f = r.floor.iter().find(|x| x.batch == b)?;
        let a = r.almanac.iter().find(|x| x.batch == b)?;
        Some(a.jobs_per_second / f.jobs_per_second)
    };
    let mut target = |name: String, ok: Option<bool>| {
        let verdict = match ok {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "not measured",
        };
        out.push_str(&format!("  {verdict:<12} {name}\n"));
    };
    // Per batch size: throughput, PostgreSQL's CPU and the host's CPU against the floor's.
    let cpu = |b: usize, of: fn(&bench::Run) -> Option<f64>| {
        let f = r.floor.iter().find(|x| x.batch == b).and_then(of)?;
        let a = r.almanac.iter().find(|x| x.batch == b).and_then(of)?;
        Some(a / f.max(1e-9))
    };
    let physical = |b: usize| r.almanac.iter().find(|x| x.batch == b).map(|a| a.jobs_per_second / r.pgbench.jobs_per_second);
    target(
        format!("almanac at the default --batch (32, adaptive) >= 1.0 x the pgbench floor ({:.2})", physical(32).unwrap_or(f64::NAN)),
        physical(32).map(|x| x >= 1.0),
    );
    target(format!("almanac --batch 1 >= 1.0 x the pgbench floor ({:.2})", physical(1).unwrap_or(f64::NAN)), physical(1).map(|x| x >= 1.0));
    target(format!("almanac batch 32 >= 2.6 x the pgbench floor ({:.2})", physical(32).unwrap_or(f64::NAN)), physical(32).map(|x| x >= 2.6));
    for b in [1, 32] {
        target(format!("almanac batch {b} >= 1.0 x floor batch {b} ({:.2})", ratio(b).unwrap_or(f64::NAN)), ratio(b).map(|x| x >= 1.0));
        let pg = cpu(b, |x| x.postgres_cpu_seconds);
        target(format!("PostgreSQL CPU per job at batch {b} <= the floor's ({:.2}x)", pg.unwrap_or(f64::NAN)), pg.map(|x| x <= 1.0));
        let host = cpu(b, |x| x.host_cpu_seconds);
        target(format!("host CPU per job at batch {b} <= the floor client's ({:.2}x)", host.unwrap_or(f64::NAN)), host.map(|x| x <= 1.0));
    }
    let best = r.almanac.iter().max_by(|a, b| a.jobs_per_second.total_cmp(&b.jobs_per_second));
    target(
        format!("best setting >= 7,000 jobs/s ({:.0} at --batch {})", best.map_or(0.0, |b| b.jobs_per_second), best.map_or(0, |b| b.batch)),
        best.map(|b| b.jobs_per_second >= 7000.0),
    );
    target(format!("plugin overhead <= 30 µs ({:.1})", r.plugin_overhead_us), Some(r.plugin_overhead_us <= 30.0));
    let million = r.generation_keys >= 1_000_000;
    target(
        format!("1,000,000 jobs generated in <= 10 s ({:.2} s) with peak RSS <= 200 MB ({:.0} MB)", r.generation_seconds, r.generation_peak_rss_mb),
        million.then_some(r.generation_seconds <= 10.0 && r.generation_peak_rss_mb <= 200.0),
    );
    let speed = r.generation_plain_seconds / r.generation_seconds.max(1e-9);
    target(format!("1,000,000 jobs generated at >= 0.5 x a plain INSERT ... SELECT ({speed:.2})"), million.then_some(speed >= 0.5));
    target(format!("claim p99 <= 2 ms at depth ({:.3} ms)", r.claim_p99_ms), million.then_some(r.claim_p99_ms <= 2.0));
    let year = r.history.as_ref().filter(|h| h.done >= 10_000_000);
    let history_ratio = |of: fn(&bench::Side) -> f64| year.map(|h| of(&h.full) / of(&h.empty));
    for (b, of) in [(1, (|s: &bench::Side| s.batch1_jobs_per_second) as fn(&bench::Side) -> f64), (32, |s| s.batch32_jobs_per_second)] {
        let ratio = history_ratio(of);
        target(format!("batch {b} with 10^7 done >= 0.95 x on an empty history ({:.2})", ratio.unwrap_or(f64::NAN)), ratio.map(|x| x >= 0.95));
    }
    let slowest = year.map(|h| h.full.status_max_ms.max(h.full.overview_max_ms));
    target(format!("status and /api/overview <= 100 ms with 10^7 done ({:.1} ms at most)", slowest.unwrap_or(f64::NAN)), slowest.map(|x| x <= 100.0));
    let calendar = year.map(|h| h.full.calendar_max_ms);
    target(format!("a task's calendar month <= 100 ms with 10^7 done ({:.1} ms at most)", calendar.unwrap_or(f64::NAN)), calendar.map(|x| x <= 100.0));
    if let Some(s) = &r.scaling {
        for run in &s.runs {
            let ratio = run.wal_bytes_per_job / s.floor_wal_bytes_per_job.max(1e-9);
            target(format!("WAL per job at batch {}, {} host(s), <= the floor's ({ratio:.2}x)", s.batch, run.hosts), Some(ratio <= 1.0));
        }
    }
    if let Some(p) = r.pages.as_ref().filter(|p| p.clients >= 50) {
        let ratio = p.loaded_jobs_per_second / p.quiet_jobs_per_second;
        target(format!("{} clients loading the console leave the workers >= 0.9 x their jobs/s ({ratio:.2})", p.clients), Some(ratio >= 0.9));
    }
    if let Some(c) = &r.contention {
        let ratio = c.storm_seconds / c.serial_seconds;
        target(format!("a deadlock storm on {} workers within 2 x its serial time ({ratio:.2})", c.workers), Some(ratio <= 2.0));
    }
    if let Some(idle) = &r.idle {
        let lone = |ms: f64| (idle.lone_jobs > 0).then_some(ms <= 50.0);
        target(format!("a lone job starts within 50 ms of its enqueue, p50 ({:.1} ms)", idle.lone_p50_ms), lone(idle.lone_p50_ms));
        target(format!("a lone job starts within 50 ms of its enqueue, p99 ({:.1} ms)", idle.lone_p99_ms), lone(idle.lone_p99_ms));
        for run in &idle.runs {
            target(
                format!("an idle host sends <= 1 statement/s, {} host(s) ({:.2})", run.hosts, run.per_host_per_second),
                Some(run.per_host_per_second <= 1.0),
            );
        }
    }
    for l in &r.languages {
        let at = l.run.batch;
        target(format!("{} ({}) >= 1,000 jobs/s at --batch {at} ({:.0})", l.file, l.version, l.run.jobs_per_second), Some(l.run.jobs_per_second >= 1000.0));
        let versus = versus_plugin(r, l);
        target(format!("{} >= 0.3 x --plugin's jobs/s ({:.2})", l.file, versus.unwrap_or(f64::NAN)), versus.map(|x| x >= 0.3));
        target(format!("{} plugin overhead <= 300 µs ({:.0})", l.file, l.overhead_us), Some(l.overhead_us <= 300.0));
        target(format!("{} first load <= 5 s ({:.1} s)", l.file, l.first_load_seconds), Some(l.first_load_seconds <= 5.0));
    }
    out
}

/// Idle hosts' statements, and lone jobs' start.
fn render_idle(idle: &bench::idle::IdleReport) -> String {
    let mut out = String::from("\nidle (real `almanac run` hosts at their defaults, nothing due; statements from pg_stat_statements):\n");
    for run in &idle.runs {
        out.push_str(&format!(
            "  {} host(s): {} statements in {:.0} s, {:.2} per host per second; most frequent:\n",
            run.hosts, run.statements, run.seconds, run.per_host_per_second
        ));
        for (calls, query) in &run.top {
            out.push_str(&format!("    {calls:>6}  {query}\n"));
        }
    }
    if idle.lone_jobs > 0 {
        out.push_str(&format!(
            "lone jobs (one at a time on an idle host, enqueue's transaction to the claim's): {} jobs, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms\n",
            idle.lone_jobs, idle.lone_p50_ms, idle.lone_p99_ms, idle.lone_max_ms
        ));
    }
    out
}

/// A language's jobs/s against the `--plugin` component's at the same batch.
fn versus_plugin(r: &Report, l: &bench::LanguageRun) -> Option<f64> {
    let plugin = r.almanac.iter().find(|a| a.batch == l.run.batch)?;
    Some(l.run.jobs_per_second / plugin.jobs_per_second)
}

/// Each language's daily-points beside the `--plugin` one.
fn render_languages(r: &Report) -> String {
    let mut out = format!(
        "
languages (daily-points, --workers {}; first load: a host's start compiling the component; cached: from the compiled cache):
",
        r.workers
    );
    out.push_str(&format!(
        "{:<24} {:<10} {:>9} {:>6} {:>11} {:>12} {:>14} {:>7} {:>9} {:>11}
",
        "FILE", "VERSION", "SIZE", "REUSE", "FIRST LOAD", "CACHED LOAD", "OVERHEAD/job", "BATCH", "JOBS/S", "VS PLUGIN"
    ));
    for l in &r.languages {
        out.push_str(&format!(
            "{:<24} {:<10} {:>7.1}MB {:>6} {:>10.2}s {:>11.2}s {:>12.0}µs {:>7} {:>9.0} {:>11.2}
",
            l.file,
            l.version,
            l.bytes as f64 / 1e6,
            l.reuse,
            l.first_load_seconds,
            l.cached_load_seconds,
            l.overhead_us,
            l.run.batch,
            l.run.jobs_per_second,
            versus_plugin(r, l).unwrap_or(f64::NAN)
        ));
    }
    out
}

/// The history's figures: each on an empty history and on the full one, with the ratio.
fn render_history(h: &bench::HistoryReport) -> String {
    let mut out = format!(
        "
history: {} done jobs over 365 daily slots and {} pending not yet due (filled in {:.0} s), against an empty history:
",
        h.done, h.pending_ahead, h.fill_seconds
    );
    out.push_str(&format!(
        "  {:<28} {:>10} {:>10} {:>7}
",
        "", "EMPTY", "HISTORY", "RATIO"
    ));
    let rows: [(&str, f64, f64); 10] = [
        ("jobs/s --batch 1", h.empty.batch1_jobs_per_second, h.full.batch1_jobs_per_second),
        ("jobs/s --batch 32", h.empty.batch32_jobs_per_second, h.full.batch32_jobs_per_second),
        ("claim p50 ms", h.empty.claim_p50_ms, h.full.claim_p50_ms),
        ("claim p99 ms", h.empty.claim_p99_ms, h.full.claim_p99_ms),
        ("status p50 ms", h.empty.status_p50_ms, h.full.status_p50_ms),
        ("status max ms", h.empty.status_max_ms, h.full.status_max_ms),
        ("/api/overview p50 ms", h.empty.overview_p50_ms, h.full.overview_p50_ms),
        ("/api/overview max ms", h.empty.overview_max_ms, h.full.overview_max_ms),
        ("/api/calendar p50 ms", h.empty.calendar_p50_ms, h.full.calendar_p50_ms),
        ("/api/calendar max ms", h.empty.calendar_max_ms, h.full.calendar_max_ms),
    ];
    for (name, empty, full) in rows {
        out.push_str(&format!(
            "  {name:<28} {empty:>10.2} {full:>10.2} {:>7.2}
",
            full / empty.max(1e-9)
        ));
    }
    let mb = |b: i64| b as f64 / 1048576.0;
    out.push_str(&format!(
        "  prune of the oldest month: {:.3} s, {} done jobs dropped; almanac.jobs {:.0} MB -> {:.0} MB (heap and indexes)
",
        h.prune_seconds,
        h.pruned_done,
        mb(h.bytes_before_prune),
        mb(h.bytes_after_prune)
    ));
    let after = match h.dead_tuples_after_autovacuum {
        Some(n) => format!("{n} once autovacuum had visited ({:.0} s later)", h.autovacuum_wait_seconds),
        None => format!("autovacuum had not visited within {:.0} s", h.autovacuum_wait_seconds),
    };
    out.push_str(&format!(
        "  dead tuples after a {}-job run: {} at its end, {after}
",
        h.churn_jobs, h.dead_tuples_after_churn
    ));
    out
}

/// The executor by way of connecting, in two rounds of opposite order, each figure also
/// as a ratio to plain TCP at the same batch in the same round (TLS's cost, the pooler's).
fn render_connections(r: &Report) -> String {
    let mut out = format!("\nconnections (almanac, --workers {}; PG CPU excludes PgBouncer's own; round 1 socket→pgbouncer, round 2 back):\n", r.workers);
    out.push_str(&format!("{:<10} {:<7} {:>20} {:>14} {:>16}\n", "VIA", "BATCH", "ALMANAC job/s (1/2)", "VS TCP (1/2)", "PG CPU (1/2)"));
    let find = |via: &str, batch: usize, round: u8| r.connections.iter().find(|c| c.via == via && c.run.batch == batch && c.round == round);
    for c in r.connections.iter().filter(|c| c.round == 1) {
        let (batch, via) = (c.run.batch, c.via);
        let rate = |round| find(via, batch, round).map_or(f64::NAN, |x| x.run.jobs_per_second);
        let ratio = |round| rate(round) / find("tcp", batch, round).map_or(f64::NAN, |x| x.run.jobs_per_second);
        let cpu = |round| find(via, batch, round).and_then(|x| x.run.postgres_cpu_seconds).unwrap_or(f64::NAN);
        out.push_str(&format!(
            "{:<10} {:<7} {:>20} {:>14} {:>16}\n",
            via,
            batch,
            format!("{:.0} / {:.0}", rate(1), rate(2)),
            format!("{:.2} / {:.2}", ratio(1), ratio(2)),
            format!("{:.2}s / {:.2}s", cpu(1), cpu(2)),
        ));
    }
    out
}
