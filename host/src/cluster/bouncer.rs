//! A PgBouncer (the system's `pgbouncer` binary) in transaction pooling mode in front of
//! a private cluster, on a loopback port of its own: what `almanac bench` measures the
//! pooled path with and the tests run hosts through. It can be killed and started again
//! on the same port. A failed server login (the server restarting) is retried after a
//! second, not PgBouncer's default 15.
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::server::{Cluster, ClusterError};

pub struct Bouncer {
    child: Option<Child>,
    pub port: u16,
    dir: PathBuf,
    as_postgres: bool,
    /// A connection string through it that answers once it is up.
    probe: String,
}

impl Bouncer {
    /// Every database of `cluster`, pooled per transaction, with its files in `dir`.
    pub async fn start(cluster: &Cluster, dir: &Path) -> Result<Bouncer, ClusterError> {
        std::fs::create_dir_all(dir)?;
        let port = Bouncer::free_port()?;
        let path = |name: &str| dir.join(name).display().to_string();
        std::fs::write(
            dir.join("pgbouncer.ini"),
            format!(
                "[databases]\n* = host={socket} port={pg}\n\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
                 auth_type = trust\nauth_file = {users}\nauth_user = postgres\npool_mode = transaction\nmax_client_conn = 500\ndefault_pool_size = 20\nserver_login_retry = 1\n\
                 logfile = {log}\npidfile = {pid}\nadmin_users = postgres\n",
                socket = cluster.socket_dir.display(),
                pg = cluster.port,
                users = path("users.txt"),
                log = path("pgbouncer.log"),
                pid = path("pgbouncer.pid"),
            ),
        )?;
        std::fs::write(dir.join("users.txt"), "\"postgres\" \"\"\n")?;
        let probe = format!("host=127.0.0.1 port={port} user=postgres dbname=postgres");
        Bouncer::launch(cluster, dir, port, probe).await
    }

    /// A PgBouncer configured by `dir/pgbouncer.ini` as the caller wrote it (its files,
    /// `listen_port = port`), up once a query through `probe` answers.
    pub async fn with_config(cluster: &Cluster, dir: &Path, port: u16, probe: String) -> Result<Bouncer, ClusterError> {
        Bouncer::launch(cluster, dir, port, probe).await
    }

    /// A free loopback port for a PgBouncer.
    pub fn free_port() -> Result<u16, ClusterError> {
        Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
    }

    async fn launch(cluster: &Cluster, dir: &Path, port: u16, probe: String) -> Result<Bouncer, ClusterError> {
        // PgBouncer refuses to run as root, as the server does.
        cluster.own(dir)?;
        let mut bouncer = Bouncer { child: None, port, dir: dir.to_owned(), as_postgres: cluster.as_postgres, probe };
        bouncer.spawn().await?;
        Ok(bouncer)
    }

    /// `dbname` through the pooler.
    pub fn url(&self, dbname: &str) -> String {
        format!("host=127.0.0.1 port={} user=postgres dbname={dbname}", self.port)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("pgbouncer.log")).unwrap_or_default()
    }

    /// SIGKILL, then a new PgBouncer on the same port: every client connection is cut.
    pub async fn restart(&mut self) -> Result<(), ClusterError> {
        self.kill();
        self.spawn().await
    }

    fn kill(&mut self) {
        // runuser forks: the pid file names PgBouncer itself. runuser reaps it and then
        // exits, so waiting for runuser means PgBouncer is gone and its port free; killing
        // runuser first would leave PgBouncer holding the port while a new one starts.
        let pidfile = self.dir.join("pgbouncer.pid");
        let pid = std::fs::read_to_string(&pidfile).ok().and_then(|p| p.trim().parse::<i32>().ok());
        let _ = std::fs::remove_file(&pidfile);
        if let Some(mut child) = self.child.take() {
            match pid {
                // SAFETY: kill has no memory effects; a stale pid at worst gets ESRCH.
                Some(pid) => unsafe {
                    libc::kill(pid, libc::SIGKILL);
                },
                None => {
                    let _ = child.kill();
                }
            }
            let _ = child.wait();
        }
    }

    async fn spawn(&mut self) -> Result<(), ClusterError> {
        let bin = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"].into_iter().find(|p| Path::new(p).exists()).ok_or(ClusterError::NoPgBouncer)?;
        let mut command = match self.as_postgres {
            true => {
                let mut c = Command::new("runuser");
                c.args(["-u", "postgres", "--", bin]);
                c
            }
            false => Command::new(bin),
        };
        self.child = Some(command.arg(self.dir.join("pgbouncer.ini")).stdout(Stdio::null()).stderr(Stdio::null()).spawn()?);
        // Ready when a query goes through it to the server.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            // One that exited (a port still taken, a bad file) will never answer.
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                return Err(ClusterError::Command { command: "pgbouncer".into(), detail: format!("exited with {status}; log:\n{}", self.log()) });
            }
            if let Ok((client, connection)) = tokio_postgres::connect(&self.probe, tokio_postgres::NoTls).await {
                tokio::spawn(connection);
                if client.simple_query("SELECT 1").await.is_ok() {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(ClusterError::Command { command: "pgbouncer".into(), detail: format!("not answering after 20 s; log:\n{}", self.log()) });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        self.kill();
    }
}
