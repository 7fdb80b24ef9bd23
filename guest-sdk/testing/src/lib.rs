//! Test an Almanac task plugin from its own project, with `cargo test`.
//!
//! ```no_run
//! use almanac_testing::Almanac;
//!
//! #[test]
//! fn records_one_run_per_slot() {
//!     let almanac = Almanac::new(); // builds this crate's component; a fresh database
//!     almanac.sql("CREATE TABLE accounts (id int PRIMARY KEY, points int NOT NULL)");
//!     let tried = almanac.run("hello", "2026-01-01T00:00:00Z", "run");
//!     assert!(tried.ok, "{tried}");
//!     assert_eq!(almanac.query("SELECT greeting FROM hello_runs"), [["hello"]]);
//! }
//! ```
//!
//! Each [`Almanac`] is a new database in a private PostgreSQL cluster under the
//! project's `.almanac/` (started on first use with the system's server binaries), made
//! by `almanac scratch`; the plugin runs through `almanac try --commit` / `almanac plan`,
//! so it is loaded, sandboxed and confined to its role exactly as a host does it. The
//! `almanac` binary is `$ALMANAC`, else the one built in the Almanac checkout this crate
//! comes from, else `almanac` on `PATH`.
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// A fresh database and the plugin built from the project under test.
pub struct Almanac {
    bin: PathBuf,
    project: PathBuf,
    plugins: PathBuf,
    url: String,
    /// The test's database, which names its configuration file too.
    name: String,
    /// This test's configuration file, once [`Almanac::settings`] wrote one.
    config: Option<PathBuf>,
    /// The settings given so far, per task, in the order given.
    settings: Vec<(String, Vec<(String, String)>)>,
}

/// What a `run`, `plan` or `apply` did: `ok` and its report (for a dry run, every
/// statement the plugin sent, with its parameters and what it did, and the outcome).
#[derive(Debug)]
pub struct Tried {
    pub ok: bool,
    /// For `plan`: the keys it returned.
    pub keys: Vec<String>,
    pub report: String,
}

impl fmt::Display for Tried {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.report)
    }
}

impl Almanac {
    /// Build the component of the crate under test (`cargo build --release --target
    /// wasm32-wasip2`, once per test process) and make a fresh database.
    pub fn new() -> Almanac {
        let project = PathBuf::from(env("CARGO_MANIFEST_DIR"));
        static BUILT: OnceLock<PathBuf> = OnceLock::new();
        let component = BUILT.get_or_init(|| {
            let out = Command::new(std::env::var_os("CARGO").unwrap_or("cargo".into()))
                .args(["build", "--release", "--target", "wasm32-wasip2", "--message-format=json-render-diagnostics"])
                .current_dir(&project)
                .output()
                .expect("run cargo");
            assert!(out.status.success(), "building the component failed:\n{}", String::from_utf8_lossy(&out.stderr));
            // The crate under test is the last artifact cargo reports; its file, wherever
            // the (workspace's) target dir is.
            let stdout = String::from_utf8_lossy(&out.stdout);
            let artifact = stdout.lines().rfind(|l| l.contains("\"reason\":\"compiler-artifact\"")).unwrap_or_default();
            let wasm =
                artifact.split('"').find(|s| s.ends_with(".wasm")).unwrap_or_else(|| panic!("cargo built no .wasm for {}: {artifact}", project.display()));
            PathBuf::from(wasm)
        });
        Almanac::with_plugins(&project, component)
    }

    /// A fresh database for components already built: `plugins` is one component file
    /// or a folder of them. `project` is the directory `almanac` runs in (its
    /// `.almanac/` holds the private cluster, its `almanac.toml`, if any, the settings).
    pub fn with_plugins(project: &Path, plugins: &Path) -> Almanac {
        static DATABASES: AtomicUsize = AtomicUsize::new(0);
        // One per test and process: test binaries run at once (nextest) share the cluster.
        let name = format!("almanac_test_{}_{}", DATABASES.fetch_add(1, Ordering::SeqCst), std::process::id());
        let bin = almanac_bin();
        let mut scratch = Command::new(&bin);
        scratch.env_remove("DATABASE_URL").args(["scratch", &name]).current_dir(project);
        let url = String::from_utf8(checked(&mut scratch).stdout).expect("utf-8").trim().to_owned();
        Almanac {
            bin,
            project: project.to_owned(),
            plugins: plugins.canonicalize().expect("the plugins folder"),
            url,
            name,
            config: None,
            settings: Vec::new(),
        }
    }

    /// Give `task` these settings (as `[tasks.<task>.settings]` of `almanac.toml` would)
    /// for this test's `run`s and `plan`s from now on; later calls add to them. This
    /// test then runs by a configuration file of its own instead of the project's
    /// `almanac.toml`, so tests with different settings run side by side.
    pub fn settings(&mut self, task: &str, values: &[(&str, &str)]) -> &mut Almanac {
        let index = match self.settings.iter().position(|(t, _)| t == task) {
            Some(i) => i,
            None => {
                self.settings.push((task.to_owned(), Vec::new()));
                self.settings.len() - 1
            }
        };
        let given = &mut self.settings[index].1;
        for (name, value) in values {
            given.retain(|(n, _)| n != name);
            given.push(((*name).to_owned(), (*value).to_owned()));
        }
        let mut text = String::new();
        for (task, values) in &self.settings {
            text.push_str(&format!("[tasks.{}.settings]\n", toml_string(task)));
            for (name, value) in values {
                text.push_str(&format!("{} = {}\n", toml_string(name), toml_string(value)));
            }
        }
        let dir = self.project.join(".almanac").join("settings");
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot make {}: {e}", dir.display()));
        let file = dir.join(format!("{}.toml", self.name));
        std::fs::write(&file, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", file.display()));
        self.config = Some(file);
        self
    }

    /// `run` of job `(task, slot, key)` in a transaction that is committed if it succeeds.
    pub fn run(&self, task: &str, slot: &str, key: &str) -> Tried {
        self.call(&["try", task, "--slot", slot, "--key", key])
    }

    /// `run` with a JSON payload.
    pub fn run_with(&self, task: &str, slot: &str, key: &str, payload: &str) -> Tried {
        self.call(&["try", task, "--slot", slot, "--key", key, "--payload", payload])
    }

    /// `plan` of a slot (its keys in `Tried::keys`), committed if it succeeds.
    pub fn plan(&self, task: &str, slot: &str) -> Tried {
        self.call(&["plan", task, "--slot", slot, "--limit", "100000"])
    }

    /// Register the plugins' tasks as a deploy does (`almanac apply`: their setup,
    /// schedules, settings and `after`), so that a plugin's `enqueue` into another of
    /// them, and `plan`'s "runs after" line, work as on a live database. Put the other
    /// tasks' components beside this one with [`Almanac::with_plugins`].
    pub fn apply(&self) -> Tried {
        // `apply` reads a folder: one component file is given one of its own.
        let plugins = match self.plugins.is_file() {
            true => {
                let dir = self.project.join(".almanac").join("apply").join(&self.name);
                std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot make {}: {e}", dir.display()));
                let file = dir.join(self.plugins.file_name().expect("a component file"));
                std::fs::copy(&self.plugins, &file).unwrap_or_else(|e| panic!("cannot copy {}: {e}", self.plugins.display()));
                dir
            }
            false => self.plugins.clone(),
        };
        let mut command = self.command();
        command.args(["apply", "--plugins"]).arg(&plugins).args(["--reason", "almanac-testing"]);
        if let Some(config) = &self.config {
            command.arg("--config").arg(config);
        }
        tried(command.output().expect("run almanac"))
    }

    /// The jobs of `task` in the database (those the plugin enqueued, for one), in
    /// slot and key order: `[slot, key, payload, run_after, status]` as psql prints them.
    pub fn jobs(&self, task: &str) -> Vec<Vec<String>> {
        let quoted = task.replace('\'', "''");
        self.query(&format!(
            "SELECT slot, key, coalesce(payload::text, 'NULL'), run_after, status FROM almanac.jobs WHERE task = '{quoted}' ORDER BY slot, key"
        ))
    }

    /// Statements run as the database's owner (tables the plugin reads, rows to start from).
    pub fn sql(&self, sql: &str) {
        self.psql(sql);
    }

    /// A query's rows, every value as psql prints it (NULL as "NULL", times in UTC).
    pub fn query(&self, sql: &str) -> Vec<Vec<String>> {
        let out = self.psql(sql);
        out.split(|&b| b == 0).filter(|r| !r.is_empty()).map(|r| String::from_utf8_lossy(r).split('\u{1f}').map(str::to_owned).collect()).collect()
    }

    /// The connection string of this test's database.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn call(&self, args: &[&str]) -> Tried {
        let plugins = self.plugins.display().to_string();
        let mut command = self.command();
        command.args(args).args(["--plugins", &plugins, "--commit"]);
        if let Some(config) = &self.config {
            command.arg("--config").arg(config);
        }
        tried(command.output().expect("run almanac"))
    }

    fn psql(&self, sql: &str) -> Vec<u8> {
        let mut command = self.command();
        command.env("PGTZ", "UTC").args(["psql", "--", "-X", "-q", "-A", "-t", "-0", "-F", "\u{1f}", "-P", "null=NULL", "-v", "ON_ERROR_STOP=1", "-c", sql]);
        checked(&mut command).stdout
    }

    fn command(&self) -> Command {
        let mut command = Command::new(&self.bin);
        command.env("DATABASE_URL", &self.url).current_dir(&self.project);
        command
    }
}

impl Default for Almanac {
    fn default() -> Self {
        Almanac::new()
    }
}

fn tried(out: Output) -> Tried {
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let keys = report.lines().filter_map(|l| l.strip_prefix("  key: ")).map(str::to_owned).collect();
    Tried { ok: out.status.success(), keys, report }
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is unset: run this under cargo test"))
}

fn almanac_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("ALMANAC") {
        return bin.into();
    }
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/almanac");
    if checkout.exists() {
        return checkout;
    }
    "almanac".into()
}

/// A TOML basic string: quotes, backslashes and control characters escaped.
fn toml_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn checked(command: &mut Command) -> Output {
    let out = command.output().unwrap_or_else(|e| panic!("cannot run {command:?}: {e} (set ALMANAC to the almanac binary)"));
    assert!(out.status.success(), "{command:?} failed:\n{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    out
}
