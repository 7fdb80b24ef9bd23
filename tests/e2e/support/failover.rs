//! A pg_auto_failover formation of the test's own (Debian's postgresql-15-auto-failover):
//! a monitor and two PostgreSQL nodes with synchronous replication, on loopback ports,
//! run as the `postgres` OS user. Each `pg_autoctl` runs in a process group of its own,
//! so a node can be killed whole (its keeper and its postgres) with one signal, as a
//! machine that dies would be.
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = "/usr/lib/postgresql/15/bin";
/// The database the nodes serve.
pub const DB: &str = "almanac";

pub struct Formation {
    dir: tempfile::TempDir,
    monitor_port: u16,
    /// The two nodes' ports (node_1, node_2).
    pub ports: [u16; 2],
    /// The running `pg_autoctl` of the monitor and of each node (None once killed).
    monitor: Option<Child>,
    nodes: [Option<Child>; 2],
}

impl Formation {
    /// Create and start the monitor, then node_1 (primary), then node_2 (secondary); return
    /// once node_2 is a synchronous secondary.
    pub async fn start() -> Formation {
        let dir = tempfile::Builder::new().prefix("almanac-failover-").tempdir().expect("tempdir");
        chown(dir.path());
        let ports = [free_port(), free_port()];
        let mut formation = Formation { monitor_port: free_port(), ports, dir, monitor: None, nodes: [None, None] };
        let port = formation.monitor_port.to_string();
        let created = formation
            .autoctl("monitor-create", &["create", "monitor", "--pgdata", &formation.pgdata("monitor"), "--pgport", &port])
            .wait()
            .expect("pg_autoctl create monitor");
        assert!(created.success(), "pg_autoctl create monitor failed; see {}", formation.log("monitor-create"));
        formation.monitor = Some(formation.autoctl("monitor", &["run", "--pgdata", &formation.pgdata("monitor")]));
        // Failover within seconds rather than the defaults' ~50 s: a node unreachable for
        // 2 s is unhealthy; a primary that stopped reporting is deemed demoted after 3 s.
        let admin = formation.connect_monitor().await;
        for (setting, ms) in [
            ("health_check_period", 1000),
            ("health_check_timeout", 1000),
            ("health_check_max_retries", 1),
            ("health_check_retry_delay", 500),
            ("node_considered_unhealthy_timeout", 2000),
            ("primary_demote_timeout", 3000),
        ] {
            admin.batch_execute(&format!("ALTER SYSTEM SET pgautofailover.{setting} = {ms}")).await.expect("tune the monitor");
        }
        admin.batch_execute("SELECT pg_reload_conf()").await.expect("reload the monitor");
        formation.nodes[0] = Some(formation.create_node(0));
        formation.wait_states("node_1 single", &[("node_1", "single")], Duration::from_secs(60)).await;
        formation.nodes[1] = Some(formation.create_node(1));
        formation.wait_states("node_1 primary, node_2 secondary", &[("node_1", "primary"), ("node_2", "secondary")], Duration::from_secs(120)).await;
        formation
    }

    /// Both nodes, as a host is given them: the one that takes writes is used.
    pub fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{},127.0.0.1:{}/{DB}?target_session_attrs=read-write&connect_timeout=2", self.ports[0], self.ports[1])
    }

    /// The monitor's database, once its postgres (just started) accepts connections.
    async fn connect_monitor(&self) -> tokio_postgres::Client {
        let url = format!("postgresql://postgres@127.0.0.1:{}/pg_auto_failover", self.monitor_port);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok((client, conn)) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
                tokio::spawn(conn);
                return client;
            }
            assert!(Instant::now() < deadline, "the monitor did not start; see {}", self.log("monitor"));
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Each node's name and reported state, as the monitor has them (by node id).
    pub async fn states(&self) -> Vec<(String, String)> {
        let Ok((client, conn)) =
            tokio_postgres::connect(&format!("postgresql://autoctl_node@127.0.0.1:{}/pg_auto_failover", self.monitor_port), tokio_postgres::NoTls).await
        else {
            return Vec::new();
        };
        tokio::spawn(conn);
        match client.query("SELECT nodename, reportedstate::text FROM pgautofailover.node ORDER BY nodeid", &[]).await {
            Ok(rows) => rows.iter().map(|r| (r.get(0), r.get(1))).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Wait until every named node reports its state. Meanwhile the primary is asked for
    /// a checkpoint now and then: a standby that cannot rewind falls back to a base
    /// backup, which waits for one (a spread one takes minutes).
    pub async fn wait_states(&self, what: &str, want: &[(&str, &str)], timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut checkpoint = Instant::now() + Duration::from_secs(2);
        loop {
            let states = self.states().await;
            if want.iter().all(|(node, state)| states.iter().any(|(n, s)| n == node && s == state)) {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: not within {timeout:?}; the monitor says {states:?}; logs in {}", self.dir.path().display());
            if Instant::now() >= checkpoint {
                checkpoint = Instant::now() + Duration::from_secs(2);
                if let Ok((client, conn)) = tokio_postgres::connect(&self.url(), tokio_postgres::NoTls).await {
                    tokio::spawn(conn);
                    let _ = client.batch_execute("CHECKPOINT").await;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Kill node `node` whole (its keeper and its postgres) with SIGKILL.
    pub fn kill(&mut self, node: usize) {
        let mut child = self.nodes[node].take().expect("the node runs");
        // SAFETY: kill(2) on the process group the child leads; no memory is involved.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
        let _ = child.wait();
    }

    /// Start node `node`'s keeper again: it rejoins as a standby of the new primary.
    pub fn rejoin(&mut self, node: usize) {
        assert!(self.nodes[node].is_none(), "node_{} still runs", node + 1);
        let name = format!("node{}", node + 1);
        self.nodes[node] = Some(self.autoctl(&format!("{name}-rejoin"), &["run", "--pgdata", &self.pgdata(&name)]));
    }

    /// A planned switchover: the primary hands over to the secondary and follows it.
    pub fn switchover(&self) {
        let status = self.autoctl("switchover", &["perform", "switchover", "--pgdata", &self.pgdata("monitor")]).wait().expect("pg_autoctl perform switchover");
        assert!(status.success(), "pg_autoctl perform switchover failed; see {}", self.log("switchover"));
    }

    fn create_node(&self, node: usize) -> Child {
        let name = format!("node{}", node + 1);
        let monitor = format!("postgres://autoctl_node@127.0.0.1:{}/pg_auto_failover?sslmode=disable", self.monitor_port);
        let port = self.ports[node].to_string();
        self.autoctl(
            &name,
            &[
                "create",
                "postgres",
                "--pgdata",
                &self.pgdata(&name),
                "--pgport",
                &port,
                "--name",
                &format!("node_{}", node + 1),
                "--dbname",
                DB,
                "--monitor",
                &monitor,
                "--run",
            ],
        )
    }

    fn pgdata(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    fn log(&self, name: &str) -> String {
        self.dir.path().join(format!("{name}.log")).display().to_string()
    }

    /// `pg_autoctl ARGS` as the postgres OS user, in a process group of its own, its
    /// output in `<name>.log`; its configuration and state files inside the formation's
    /// folder. Every node and the monitor listen on 127.0.0.1 only.
    fn autoctl(&self, name: &str, args: &[&str]) -> Child {
        use std::os::unix::process::CommandExt;
        let log = std::fs::File::create(self.log(name)).expect("log file");
        let root = self.dir.path();
        let mut all: Vec<String> = vec!["-u".into(), "postgres".into(), "--".into(), "env".into()];
        all.push(format!("PATH={BIN}:/usr/bin:/bin"));
        for (var, sub) in [("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"), ("XDG_RUNTIME_DIR", "run")] {
            all.push(format!("{var}={}", root.join(sub).display()));
        }
        all.push("pg_autoctl".into());
        all.extend(args.iter().map(|a| a.to_string()));
        if args.first() == Some(&"create") {
            all.extend(["--hostname", "127.0.0.1", "--listen", "127.0.0.1", "--auth", "trust", "--no-ssl"].map(String::from));
        }
        Command::new("runuser")
            .args(&all)
            .current_dir(root)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("run pg_autoctl")
    }
}

impl Drop for Formation {
    fn drop(&mut self) {
        for child in self.nodes.iter_mut().chain(std::iter::once(&mut self.monitor)).filter_map(Option::take) {
            let mut child = child;
            // SAFETY: as in `kill`.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
        }
        // A postgres that outlived its keeper (it is in the keeper's group) is gone too.
        let _ = Command::new("pkill").args(["-9", "-f", &self.dir.path().display().to_string()]).status();
        if std::thread::panicking() {
            let kept = std::mem::replace(&mut self.dir, tempfile::tempdir().expect("tempdir")).keep();
            eprintln!("the formation's logs and data are kept in {}", kept.display());
        }
    }
}

fn chown(path: &std::path::Path) {
    let status = Command::new("chown").args(["postgres:postgres", &path.display().to_string()]).status().expect("chown");
    assert!(status.success());
    for sub in ["config", "data", "run"] {
        let dir: PathBuf = path.join(sub);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).expect("chmod");
        Command::new("chown").args(["postgres:postgres", &dir.display().to_string()]).status().expect("chown");
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0").local_addr().expect("local addr").port()
}
