//! A real PgBouncer (Debian's package) in transaction pooling mode in front of a test
//! cluster, on a loopback port of its own; it can be killed and started again on the
//! same port.
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use almanac::cluster::Cluster;

pub struct PgBouncer {
    child: Option<Child>,
    pub port: u16,
    config: PathBuf,
    dir: tempfile::TempDir,
}

impl PgBouncer {
    /// Every database of `cluster`, pooled per transaction.
    pub async fn start(cluster: &Cluster) -> PgBouncer {
        let dir = tempfile::Builder::new().prefix("almanac-pgbouncer-").tempdir().expect("temp dir");
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let path = |name: &str| dir.path().join(name).display().to_string();
        let config = dir.path().join("pgbouncer.ini");
        std::fs::write(
            &config,
            format!(
                "[databases]\n* = host={socket} port={pg}\n\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
                 auth_type = trust\nauth_file = {users}\npool_mode = transaction\nmax_client_conn = 500\ndefault_pool_size = 20\n\
                 logfile = {log}\npidfile = {pid}\nadmin_users = postgres\n",
                socket = cluster.socket_dir.display(),
                pg = cluster.port,
                users = path("users.txt"),
                log = path("pgbouncer.log"),
                pid = path("pgbouncer.pid"),
            ),
        )
        .expect("write pgbouncer.ini");
        std::fs::write(dir.path().join("users.txt"), "\"postgres\" \"\"\n").expect("write users.txt");
        // PgBouncer refuses to run as root; the cluster's own OS user runs it.
        if unsafe { libc::geteuid() } == 0 {
            let status = Command::new("chown").arg("-R").arg("postgres").arg(dir.path()).status().expect("chown");
            assert!(status.success());
        }
        let mut bouncer = PgBouncer { child: None, port, config, dir };
        bouncer.spawn().await;
        bouncer
    }

    /// `dbname` through the pooler.
    pub fn url(&self, dbname: &str) -> String {
        format!("host=127.0.0.1 port={} user=postgres dbname={dbname}", self.port)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pgbouncer.log")).unwrap_or_default()
    }

    /// SIGKILL, then a new PgBouncer on the same port: every client connection is cut.
    pub async fn restart(&mut self) {
        self.kill();
        self.spawn().await;
    }

    fn kill(&mut self) {
        // runuser forks: the pid file names PgBouncer itself.
        let pidfile = self.dir.path().join("pgbouncer.pid");
        if let Some(pid) = std::fs::read_to_string(&pidfile).ok().and_then(|p| p.trim().parse::<i32>().ok()) {
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = std::fs::remove_file(&pidfile);
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    async fn spawn(&mut self) {
        let bin = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"].into_iter().find(|p| std::path::Path::new(p).exists()).expect(
            "pgbouncer is not installed (scripts/bootstrap.sh --need-pgbouncer installs Debian's package)",
        );
        let mut command = if unsafe { libc::geteuid() } == 0 {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--", bin]);
            c
        } else {
            Command::new(bin)
        };
        let child = command.arg(&self.config).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("start pgbouncer");
        self.child = Some(child);
        // Ready when it answers a query (a real one, through to the server).
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok((client, connection)) = tokio_postgres::connect(&self.url("postgres"), tokio_postgres::NoTls).await {
                tokio::spawn(connection);
                if client.simple_query("SELECT 1").await.is_ok() {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "pgbouncer did not start; log:\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        self.kill();
    }
}
