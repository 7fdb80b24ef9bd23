//! The server listens only on a unix socket in a short per-cluster directory under the
//! temp dir (no TCP port to collide on). `initdb` and `postgres` refuse to run as root,
//! so when we are root every server command runs as the `postgres` OS user.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sha2::{Digest, Sha256};

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("pgbouncer is not installed (Debian: apt-get install pgbouncer; scripts/bootstrap.sh --need-pgbouncer)")]
    NoPgBouncer,
    #[error("PostgreSQL server binaries (initdb, pg_ctl) not found; install them (Debian: apt-get install postgresql) or set DATABASE_URL")]
    NoServer,
    #[error("running as root, but there is no `postgres` OS user to run the server as; create one (apt-get install postgresql does) or set DATABASE_URL")]
    NoPostgresUser,
    #[error("{command} failed: {detail}")]
    Command { command: String, detail: String },
    #[error("database {0:?} exists and was not made by `almanac scratch`: it is not dropped (give another name)")]
    NotScratch(String),
    #[error(
        "{dir}/postmaster.pid was written by the server of another data directory ({theirs}, PID {pid}): this one was copied while that server ran. \
         If no server runs on {dir}, delete {dir}/postmaster.pid and try again"
    )]
    CopiedPidFile { dir: String, theirs: String, pid: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("cannot set up the private cluster's database: {0}")]
    Provision(#[from] tokio_postgres::Error),
}

/// The role the host connects as on the private cluster (`private_role.sql`).
pub const PRIVATE_ROLE: &str = "almanac_host";
const PRIVATE_ROLE_SQL: &str = include_str!("private_role.sql");
const DATABASE_OWNER: &str = include_str!("database_owner.sql");
const SCRATCH_MARK: &str = include_str!("scratch_mark.sql");
const SCRATCH_ORPHANS: &str = include_str!("scratch_orphans.sql");
/// The comment on a database `almanac scratch` made.
const SCRATCH: &str = "made by almanac scratch: dropped and made anew by the next";

/// Server settings for a private cluster, appended to its `postgresql.conf`.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Extra `name = value` lines.
    pub extra: Vec<(String, String)>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            extra: vec![
                ("max_connections".into(), "200".into()),
                // One statement may spill at most this much to temporary files (a
                // plugin's runaway recursive CTE once wrote 25 GB in 55 s). Operators of
                // their own servers should set it too (the book: docs/src/concepts/least-privilege.md).
                ("temp_file_limit".into(), "'1GB'".into()),
            ],
        }
    }
}

pub struct Cluster {
    pub data_dir: PathBuf,
    pub socket_dir: PathBuf,
    pub port: u16,
    bin_dir: PathBuf,
    pub(super) as_postgres: bool,
}

impl Cluster {
    /// A URL for database `dbname`, created (owned by [`PRIVATE_ROLE`]) if missing, as
    /// the role that owns it.
    pub async fn provision(&self, dbname: &str) -> Result<String, ClusterError> {
        let admin = self.admin().await?;
        self.provision_on(&admin, dbname).await
    }

    /// A superuser session on database `postgres`, holding the lock that makes one
    /// process at a time provision: roles are the cluster's, and two made at once
    /// (`almanac_host`) had the second fail on the first one's.
    async fn admin(&self) -> Result<tokio_postgres::Client, ClusterError> {
        let (admin, connection) = tokio_postgres::connect(&self.url("postgres"), tokio_postgres::NoTls).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        // Released when the session ends.
        admin.batch_execute("SELECT pg_advisory_lock(hashtext('almanac private cluster provisioning'))").await?;
        Ok(admin)
    }

    async fn provision_on(&self, admin: &tokio_postgres::Client, dbname: &str) -> Result<String, ClusterError> {
        admin.batch_execute(PRIVATE_ROLE_SQL).await?;
        let owner: Option<String> = admin.query_opt(DATABASE_OWNER, &[&dbname]).await?.map(|r| r.get(0));
        let user = match owner {
            None => {
                let create = format!("CREATE DATABASE {} OWNER {PRIVATE_ROLE}", crate::db::quote_ident(dbname));
                admin.batch_execute(&create).await?;
                PRIVATE_ROLE.to_owned()
            }
            // A database made by an older version, owned by the superuser: keep using it as is.
            Some(owner) => owner,
        };
        Ok(self.url(dbname).replace("user=postgres", &format!("user={user}")))
    }

    /// Like [`Cluster::provision`], for a database made anew: dropped first (its
    /// connections ended) if it exists, so nothing of an earlier use is left in it. Only
    /// a database this made before is dropped (it carries [`SCRATCH`] as its comment):
    /// `almanac scratch almanac` must not wipe the private cluster's own database.
    /// The test harnesses' scratch databases of a process no longer running
    /// (`almanac_test_<n>_<pid>`) go too: test runs leave no pile behind.
    pub async fn provision_fresh(&self, dbname: &str) -> Result<String, ClusterError> {
        let admin = self.admin().await?;
        for orphan in admin.query(SCRATCH_ORPHANS, &[&SCRATCH]).await? {
            let (other, pid): (String, i32) = (orphan.get(0), orphan.get(1));
            // Signal 0 asks only whether the process exists.
            let gone = unsafe { libc::kill(pid, 0) } != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
            if gone && other != dbname {
                admin.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", crate::db::quote_ident(&other))).await?;
            }
        }
        let name = crate::db::quote_ident(dbname);
        match admin.query_opt(SCRATCH_MARK, &[&dbname]).await? {
            Some(row) if row.get::<_, Option<String>>(0).as_deref() != Some(SCRATCH) => return Err(ClusterError::NotScratch(dbname.to_owned())),
            Some(_) => admin.batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)")).await?,
            None => {}
        }
        let url = self.provision_on(&admin, dbname).await?;
        admin.batch_execute(&format!("COMMENT ON DATABASE {name} IS '{SCRATCH}'")).await?;
        Ok(url)
    }

    /// A handle on the cluster in `data_dir` (which need not exist yet).
    pub fn new(data_dir: &Path) -> Result<Cluster, ClusterError> {
        let bin_dir = find_bin_dir().ok_or(ClusterError::NoServer)?;
        std::fs::create_dir_all(data_dir)?;
        let data_dir = data_dir.canonicalize()?;
        let as_postgres = unsafe { libc::geteuid() } == 0;
        if as_postgres && !user_exists("postgres") {
            return Err(ClusterError::NoPostgresUser);
        }
        // Unix socket paths are limited to ~107 bytes, so the socket lives in a short
        // directory named after the data directory rather than inside it.
        let tag = hex::encode(&Sha256::digest(data_dir.as_os_str().as_encoded_bytes())[..6]);
        let socket_dir = std::env::temp_dir().join(format!("almanac-{tag}"));
        Ok(Cluster { data_dir, socket_dir, port: 5432, bin_dir, as_postgres })
    }

    /// Initialise (if needed) and start (if not running) the cluster in `data_dir`.
    pub fn ensure(data_dir: &Path, settings: &Settings) -> Result<Cluster, ClusterError> {
        let cluster = Cluster::new(data_dir)?;
        // One process at a time: two tests of a plugin's project starting the stopped
        // cluster at once had the second `pg_ctl start` fail on the first one's server.
        // Held until this returns (the lock goes with the file).
        let lock = std::fs::File::create(cluster.data_dir.with_extension("lock"))?;
        lock.lock()?;
        cluster.init(settings)?;
        // pg_ctl would take the other server for this one (its PID is alive) and every
        // connection would then fail on a socket that does not exist.
        if let Some((pid, theirs)) = cluster.foreign_pid_file() {
            return Err(ClusterError::CopiedPidFile { dir: cluster.data_dir.display().to_string(), theirs, pid });
        }
        if !cluster.is_running() {
            cluster.start()?;
        }
        Ok(cluster)
    }

    /// (PID, data directory) of a `postmaster.pid` that names another data directory
    /// (its second line is the directory the server was started on).
    fn foreign_pid_file(&self) -> Option<(String, String)> {
        let text = std::fs::read_to_string(self.data_dir.join("postmaster.pid")).ok()?;
        let mut lines = text.lines();
        let (pid, theirs) = (lines.next()?.trim().to_owned(), lines.next()?.trim().to_owned());
        let same = Path::new(&theirs).canonicalize().is_ok_and(|t| t == self.data_dir);
        (!same).then_some((pid, theirs))
    }

    fn initialized(&self) -> bool {
        self.data_dir.join("PG_VERSION").exists()
    }

    pub fn init(&self, settings: &Settings) -> Result<(), ClusterError> {
        if self.initialized() {
            return Ok(());
        }
        self.own(&self.data_dir)?;
        let data = self.data_dir.display().to_string();
        self.server_command("initdb", &["-D", &data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"])?;
        let mut conf = String::from("\n# almanac private cluster\nlisten_addresses = ''\n");
        conf.push_str(&format!("unix_socket_directories = '{}'\n", self.socket_dir.display()));
        conf.push_str(&format!("port = {}\n", self.port));
        for (name, value) in &settings.extra {
            conf.push_str(&format!("{name} = {value}\n"));
        }
        let path = self.data_dir.join("postgresql.conf");
        let mut existing = std::fs::read_to_string(&path)?;
        existing.push_str(&conf);
        std::fs::write(&path, existing)?;
        Ok(())
    }

    pub fn is_running(&self) -> bool {
        let data = self.data_dir.display().to_string();
        self.server_command("pg_ctl", &["status", "-D", &data]).is_ok()
    }

    pub fn start(&self) -> Result<(), ClusterError> {
        std::fs::create_dir_all(&self.socket_dir)?;
        self.own(&self.socket_dir)?;
        let data = self.data_dir.display().to_string();
        let log = self.data_dir.join("server.log").display().to_string();
        self.server_command("pg_ctl", &["start", "-w", "-t", "60", "-D", &data, "-l", &log]).map(drop)
    }

    /// Stop with `mode` (`smart`, `fast` or `immediate`).
    pub fn stop(&self, mode: &str) -> Result<(), ClusterError> {
        let data = self.data_dir.display().to_string();
        self.server_command("pg_ctl", &["stop", "-w", "-m", mode, "-D", &data]).map(drop)
    }

    /// `pg_ctl restart -m immediate`: a crash of the server, then recovery.
    pub fn restart_immediate(&self) -> Result<(), ClusterError> {
        let data = self.data_dir.display().to_string();
        let log = self.data_dir.join("server.log").display().to_string();
        self.server_command("pg_ctl", &["restart", "-w", "-m", "immediate", "-D", &data, "-l", &log]).map(drop)
    }

    /// Connection string for database `dbname` as the `postgres` superuser.
    pub fn url(&self, dbname: &str) -> String {
        format!("host={} port={} user=postgres dbname={dbname}", self.socket_dir.display(), self.port)
    }

    /// The path of one of the server package's programs (`pgbench`).
    pub fn bin(&self, program: &str) -> PathBuf {
        self.bin_dir.join(program)
    }

    /// Run a server binary, as `postgres` when we are root.
    fn server_command(&self, program: &str, args: &[&str]) -> Result<Output, ClusterError> {
        let binary = self.bin_dir.join(program);
        let mut command = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.arg("-u").arg("postgres").arg("--").arg(&binary);
            c
        } else {
            Command::new(&binary)
        };
        command.args(args).current_dir(&self.data_dir).stdin(std::process::Stdio::null());
        let output = command.output()?;
        if output.status.success() {
            Ok(output)
        } else {
            let mut detail = String::from_utf8_lossy(&output.stderr).trim().to_owned();
            if detail.is_empty() {
                detail = String::from_utf8_lossy(&output.stdout).trim().to_owned();
            }
            if program == "pg_ctl" && args.first() == Some(&"start") {
                let log = std::fs::read_to_string(self.data_dir.join("server.log")).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(5).collect();
                detail.push_str(&format!("; server log: {}", tail.into_iter().rev().collect::<Vec<_>>().join(" | ")));
            }
            Err(ClusterError::Command { command: format!("{program} {}", args.join(" ")), detail })
        }
    }

    pub(crate) fn own(&self, dir: &Path) -> Result<(), ClusterError> {
        if !self.as_postgres {
            return Ok(());
        }
        let status = Command::new("chown").arg("-R").arg("postgres:postgres").arg(dir).status()?;
        if !status.success() {
            return Err(ClusterError::Command { command: format!("chown postgres {}", dir.display()), detail: status.to_string() });
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        Ok(())
    }
}

fn user_exists(name: &str) -> bool {
    Command::new("id").arg("-u").arg(name).output().is_ok_and(|o| o.status.success())
}

/// `$ALMANAC_PG_BIN`, else the newest `/usr/lib/postgresql/*/bin`, else `initdb` on PATH.
fn find_bin_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("ALMANAC_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).find(|dir| dir.join("initdb").exists() && dir.join("pg_ctl").exists())
}
