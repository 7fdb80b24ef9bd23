//! The end-to-end harness: one private PostgreSQL cluster per test binary, a migrated
//! template database cloned per test, the plugins built once, and real `almanac`
//! processes.
#![allow(dead_code)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use almanac::cluster::{Cluster, Settings};
use tokio_postgres::{Client, NoTls};

pub mod browser;
pub mod certs;
pub mod failover;
pub mod memcg;
pub mod private;
pub mod proxy;
pub mod receiver;

pub const TEMPLATE: &str = "almanac_template";

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_owned()
}

pub fn almanac_bin() -> &'static str {
    env!("CARGO_BIN_EXE_almanac")
}

/// Stops the private clusters that plugin projects' own tests (almanac-testing) start
/// under `<project>/.almanac`, whatever happens.
pub struct ProjectClusters(pub Vec<PathBuf>);

impl Drop for ProjectClusters {
    fn drop(&mut self) {
        for project in &self.0 {
            let _ = std::process::Command::new(almanac_bin()).args(["stop"]).current_dir(project).output();
        }
    }
}

struct Shared {
    cluster: Cluster,
    _dir: tempfile::TempDir,
    cache: tempfile::TempDir,
}

static SHARED: OnceLock<Shared> = OnceLock::new();

/// Statics are never dropped, so the cluster and the temp dirs are cleaned up here.
extern "C" fn stop_cluster() {
    if let Some(shared) = SHARED.get() {
        let _ = shared.cluster.stop("immediate");
        for dir in [shared.cluster.socket_dir.as_path(), shared._dir.path(), shared.cache.path()] {
            // The server's last files may still be going away right after the stop.
            for _ in 0..50 {
                if std::fs::remove_dir_all(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
}

fn shared() -> &'static Shared {
    SHARED.get_or_init(|| {
        let dir = tempfile::Builder::new().prefix("almanac-e2e-").tempdir().expect("temp dir");
        let mut settings = Settings::default();
        // Durability across OS crashes is not under test; process crashes keep the OS
        // page cache, so fsync only costs time here. synchronous_commit stays on.
        settings.extra.push(("fsync".into(), "off".into()));
        settings.extra.push(("max_connections".into(), "300".into()));
        let cluster = Cluster::new(&dir.path().join("pg")).expect("cluster handle");
        cluster.init(&settings).expect("initdb");
        cluster.start().expect("start PostgreSQL");
        unsafe { libc::atexit(stop_cluster) };
        let url = cluster.url("postgres");
        // Tests run on several runtimes; this one-off setup gets its own.
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(async {
                let admin = connect(&url).await;
                admin.batch_execute(&format!("CREATE DATABASE {TEMPLATE}")).await.expect("create the template database");
            })
        })
        .join()
        .expect("template database setup");
        let migrate = Command::new(almanac_bin()).arg("migrate").env("DATABASE_URL", cluster.url(TEMPLATE)).output().expect("run almanac migrate");
        assert!(migrate.status.success(), "almanac migrate: {}", String::from_utf8_lossy(&migrate.stderr));
        let cache = tempfile::Builder::new().prefix("almanac-cache-").tempdir().expect("cache dir");
        Shared { cluster, _dir: dir, cache }
    })
}

pub fn cluster() -> &'static Cluster {
    &shared().cluster
}

/// The folder the plugins were built into (built once per test binary).
pub fn built_plugins() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out =
            Command::new("bash").arg(workspace().join("scripts/build-plugins.sh")).stderr(Stdio::inherit()).output().expect("run scripts/build-plugins.sh");
        assert!(out.status.success(), "building the plugins failed");
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
}

/// A fresh folder holding copies of the named plugins (file stems, e.g. "daily_points").
pub fn plugin_dir(names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::Builder::new().prefix("almanac-plugins-").tempdir().expect("plugins dir");
    for name in names {
        let from = built_plugins().join(format!("{name}.wasm"));
        std::fs::copy(&from, dir.path().join(format!("{name}.wasm"))).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
    }
    dir
}

/// A database cloned from the migrated template, with a client on it.
pub struct TestDb {
    pub name: String,
    pub url: String,
    pub client: Client,
}

impl TestDb {
    pub async fn new() -> TestDb {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let name = format!("t{}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::SeqCst));
        let admin = connect(&cluster().url("postgres")).await;
        admin.batch_execute(&format!("CREATE DATABASE {name} TEMPLATE {TEMPLATE}")).await.expect("clone the template database");
        let url = cluster().url(&name);
        let client = connect(&url).await;
        TestDb { name, url, client }
    }

    /// The seed's business table with `n` accounts at 0 points.
    pub async fn accounts(&self, n: i64) {
        self.client.batch_execute("CREATE TABLE accounts (id bigint PRIMARY KEY, points bigint NOT NULL DEFAULT 0)").await.expect("create accounts");
        self.client.execute("INSERT INTO accounts SELECT g, 0 FROM generate_series(1, $1::bigint) g", &[&n]).await.expect("seed accounts");
    }

    /// `task`'s schedule row, as a host registers it, with its cursor at `cursor`.
    pub async fn schedule(&self, task: &str, cron: &str, zone: &str, cursor: chrono::DateTime<chrono::Utc>) {
        self.client
            .execute("INSERT INTO almanac.schedules (task, cron, zone, generated_through) VALUES ($1, $2, $3, $4)", &[&task, &cron, &zone, &cursor])
            .await
            .expect("insert a schedule");
    }

    /// Outbox topic `topic` as a host whose almanac.toml names it records it (publishing
    /// on a topic no host configured is refused), its first publisher its owner.
    pub async fn configured_topic(&self, topic: &str) {
        self.client
            .execute("INSERT INTO almanac.outbox_topics (topic, publishers, configured) VALUES ($1, '{}', true) ON CONFLICT (topic) DO NOTHING", &[&topic])
            .await
            .expect("configure a topic");
    }

    /// Insert jobs of `task` for one slot (RFC 3339), one per key.
    pub async fn enqueue(&self, task: &str, slot: &str, keys: &[&str]) {
        self.client
            .execute("INSERT INTO almanac.jobs (task, slot, key) SELECT $1, $2::text::timestamptz, k FROM unnest($3::text[]) k", &[&task, &slot, &keys])
            .await
            .expect("enqueue jobs");
    }

    /// fixture-gate's table with its row, created before the plugin loads, so tests can
    /// lock the row (shut the gate) whenever they like.
    pub async fn gate(&self) {
        self.client
            .batch_execute("CREATE TABLE fixture_gate (id int PRIMARY KEY, passed int NOT NULL); INSERT INTO fixture_gate VALUES (1, 0)")
            .await
            .expect("create fixture_gate");
    }

    /// fixture-sleeper's control row, before the plugin loads: each of its jobs sleeps
    /// `seconds` inside its transaction.
    pub async fn sleeper(&self, seconds: f64) {
        self.client.batch_execute("CREATE TABLE fixture_sleeper_control (seconds float8 NOT NULL)").await.expect("create fixture_sleeper_control");
        self.client.execute("INSERT INTO fixture_sleeper_control VALUES ($1)", &[&seconds]).await.expect("set the sleep");
    }

    /// The counters `status` reads (almanac.task_counts) agree with a count of the jobs
    /// themselves, per task and status.
    pub async fn counts_agree(&self) {
        let read = |sql: &'static str| async move {
            let rows = self.client.query(sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
            rows.iter().map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1), r.get::<_, i64>(2), r.get::<_, i64>(3), r.get::<_, i64>(4))).collect::<Vec<_>>()
        };
        let counted = read("SELECT task, pending, done, failed, discarded FROM almanac.task_counts ORDER BY task").await;
        let actual = read(
            "SELECT task, count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'done'),
                    count(*) FILTER (WHERE status = 'failed'), count(*) FILTER (WHERE status = 'discarded')
             FROM almanac.jobs GROUP BY task ORDER BY task",
        )
        .await;
        assert_eq!(counted, actual, "almanac.task_counts (task, pending, done, failed, discarded) against the jobs");
    }

    pub async fn count(&self, sql: &str) -> i64 {
        self.client.query_one(sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")).get(0)
    }

    /// The counters say what the jobs say, however they got there: `almanac.job_counts`
    /// per task and month, `almanac.slot_counts` per task and period, each summed over its
    /// folded row and the deltas since.
    pub async fn assert_counters_agree(&self) {
        for (counters, key) in [("almanac.job_counts", "date_trunc('month', slot, 'UTC')"), ("almanac.slot_counts", "slot")] {
            let column = if counters.ends_with("job_counts") { "month" } else { "slot" };
            let sql = format!(
                "WITH actual AS (
                     SELECT task, {key} AS at, count(*) FILTER (WHERE status = 'pending') AS p, count(*) FILTER (WHERE status = 'done') AS d,
                            count(*) FILTER (WHERE status = 'failed') AS f, count(*) FILTER (WHERE status = 'discarded') AS x
                     FROM almanac.jobs GROUP BY 1, 2
                 ), counted AS (
                     SELECT task, {column} AS at, sum(pending)::bigint AS p, sum(done)::bigint AS d, sum(failed)::bigint AS f, sum(discarded)::bigint AS x
                     FROM {counters} GROUP BY 1, 2 HAVING (sum(pending), sum(done), sum(failed), sum(discarded)) <> (0, 0, 0, 0)
                 )
                 SELECT coalesce(string_agg(format('%s %s: jobs %s, counted %s', task, at, (a.p, a.d, a.f, a.x), (c.p, c.d, c.f, c.x)), '; '), '')
                 FROM actual a FULL JOIN counted c USING (task, at)
                 WHERE (a.p, a.d, a.f, a.x) IS DISTINCT FROM (c.p, c.d, c.f, c.x)"
            );
            let differ: String = self.client.query_one(&sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")).get(0);
            assert!(differ.is_empty(), "{counters} disagrees with the jobs (pending, done, failed, discarded): {differ}");
        }
    }

    /// Poll `sql` (returning one bigint) until it equals `want`.
    pub async fn wait_count(&self, sql: &str, want: i64, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let got: i64 = match self.client.query_one(sql, &[]).await {
                Ok(row) => row.get(0),
                Err(_) => -1,
            };
            if got == want {
                return;
            }
            assert!(Instant::now() < deadline, "timed out after {timeout:?}: {sql} is {got}, want {want}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// What `almanac migrate` says on a database at migration `version`: the migrations in
/// the repository after it.
pub fn migrations_applied_after(version: u32) -> String {
    let after = std::fs::read_dir(workspace().join("migrations"))
        .expect("read migrations/")
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_prefix('V')?.split("__").next()?.parse::<u32>().ok())
        .filter(|v| *v > version)
        .count();
    format!("{after} migration(s) applied")
}

/// Run `almanac ARGS` with `DATABASE_URL=url` to its end: (exit code, or -1 if a signal
/// ended it; stdout; stderr).
pub fn almanac(url: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(almanac_bin()).args(args).env("DATABASE_URL", url).output().expect("run almanac");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

pub async fn connect(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.unwrap_or_else(|e| panic!("connect {url}: {e}"));
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// Poll `check` every 50 ms until it holds; panic naming `what` after `timeout`.
pub async fn wait_for<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if check().await {
            return;
        }
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A real `almanac run` process; killed with SIGKILL when dropped.
pub struct HostProc {
    child: Child,
    pub log: PathBuf,
    _log_dir: tempfile::TempDir,
}

impl HostProc {
    /// `almanac run` on `db` with test-friendly intervals; `extra` args come last.
    pub fn spawn(db: &TestDb, plugins: &Path, extra: &[&str]) -> HostProc {
        HostProc::spawn_with_env(db, plugins, extra, &[])
    }

    /// As [`HostProc::spawn`], with extra environment variables.
    pub fn spawn_with_env(db: &TestDb, plugins: &Path, extra: &[&str], env: &[(&str, &str)]) -> HostProc {
        HostProc::spawn_url(&db.url, plugins, extra, env)
    }

    /// As [`HostProc::spawn_with_env`], on any database URL: a private cluster that may
    /// be down, or a proxy in front of one.
    pub fn spawn_url(url: &str, plugins: &Path, extra: &[&str], env: &[(&str, &str)]) -> HostProc {
        let log_dir = tempfile::Builder::new().prefix("almanac-log-").tempdir().expect("log dir");
        let log = log_dir.path().join("host.log");
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(almanac_bin())
            .arg("run")
            .arg("--plugins")
            .arg(plugins)
            .arg("--cache-dir")
            .arg(shared().cache.path())
            .args(["--tick", "100ms", "--poll-interval", "100ms", "--retry-base", "20ms", "--shutdown-grace", "10s"])
            // fixture-sleeper holds a job open with pg_sleep, which plugins are denied by default.
            .args(["--allow-function", "pg_sleep"])
            .args(extra)
            .env("DATABASE_URL", url)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("spawn almanac run");
        HostProc { child, log, _log_dir: log_dir }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, signal: i32) {
        unsafe { libc::kill(self.pid(), signal) };
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Wait for the process to exit, at most `timeout`.
    pub async fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "host did not exit within {timeout:?}; log:\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGTERM, then expect a clean exit 0.
    pub async fn stop(&mut self) {
        self.signal(libc::SIGTERM);
        let status = self.wait(Duration::from_secs(20)).await;
        assert!(status.success(), "host exited with {status} after SIGTERM; log:\n{}", self.log());
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The address `--listen 127.0.0.1:0` bound, once the host has logged it.
    pub async fn listen_addr(&self) -> String {
        const MARK: &str = "address=";
        self.wait_log(MARK, Duration::from_secs(30)).await;
        let log = self.log();
        let at = log.find(MARK).unwrap() + MARK.len();
        log[at..].split_whitespace().next().unwrap().to_owned()
    }

    /// Wait until the host's log contains `needle`.
    pub async fn wait_log(&self, needle: &str, timeout: Duration) {
        wait_for(&format!("log line containing {needle:?}"), timeout, || async { self.log().contains(needle) }).await;
    }
}

impl Drop for HostProc {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("---- log of host {} ----\n{}", self.pid(), self.log());
        }
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
