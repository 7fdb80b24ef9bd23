//! A PostgreSQL cluster of one test's own, for tests that stop, crash or restart the
//! server: the shared cluster must not blink under the tests running beside them.
//! Optionally on TCP (loopback only), so a test can put a proxy between host and server.
use std::process::Command;
use std::time::Duration;

use almanac::cluster::{Cluster, Settings};

use super::{almanac_bin, connect, TestDb};

/// The migrated database every private cluster gets.
pub const DB: &str = "almanac";

pub struct PrivateCluster {
    pub cluster: Cluster,
    /// Listening on 127.0.0.1:`cluster.port` as well as on its unix socket.
    pub tcp: bool,
    /// Appended to the TCP connection string (e.g. sslmode and the root certificate).
    url_params: String,
    dir: Option<tempfile::TempDir>,
}

/// How a private cluster differs from the plain one.
#[derive(Default)]
pub struct Setup {
    /// Listen on 127.0.0.1 as well.
    pub tcp: bool,
    /// More postgresql.conf settings.
    pub settings: Vec<(String, String)>,
    /// Files written into the data directory before the start (mode 0600).
    pub files: Vec<(String, String)>,
    /// pg_hba.conf, in place of initdb's.
    pub hba: Option<String>,
    /// Appended to the TCP connection string the host and `almanac migrate` use.
    pub url_params: String,
}

impl PrivateCluster {
    /// initdb, start, create [`DB`] and `almanac migrate` it.
    pub async fn start(tcp: bool) -> PrivateCluster {
        PrivateCluster::start_with(Setup { tcp, ..Setup::default() }).await
    }

    pub async fn start_with(setup: Setup) -> PrivateCluster {
        let tcp = setup.tcp;
        let dir = tempfile::Builder::new().prefix("almanac-private-").tempdir().expect("temp dir");
        let mut cluster = Cluster::new(&dir.path().join("pg")).expect("cluster handle");
        let mut settings = Settings::default();
        // As for the shared cluster: OS crashes are not under test; synchronous_commit
        // stays on, so a server crash (restart_immediate) still keeps every COMMIT.
        settings.extra.push(("fsync".into(), "off".into()));
        // Several clusters may run at once on a small machine.
        settings.extra.push(("shared_buffers".into(), "'32MB'".into()));
        if tcp {
            // Cluster::init writes `port = <cluster.port>` and `listen_addresses = ''`;
            // the later line wins.
            cluster.port = free_port();
            settings.extra.push(("listen_addresses".into(), "'127.0.0.1'".into()));
        }
        settings.extra.extend(setup.settings);
        tokio::task::block_in_place(|| {
            cluster.init(&settings).expect("initdb");
            for (name, text) in &setup.files {
                let path = cluster.data_dir.join(name);
                std::fs::write(&path, text).expect("write a server file");
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
                // The server runs as the postgres OS user when the tests run as root.
                let _ = Command::new("chown").arg("--reference").arg(&cluster.data_dir).arg(&path).status();
            }
            if let Some(hba) = &setup.hba {
                std::fs::write(cluster.data_dir.join("pg_hba.conf"), hba).expect("write pg_hba.conf");
            }
            let mut tries = 0;
            // A port found free can be taken before the server binds it: take another.
            while let Err(e) = cluster.start() {
                tries += 1;
                assert!(tcp && tries < 3, "start PostgreSQL: {e}");
                cluster.port = free_port();
                let conf = cluster.data_dir.join("postgresql.conf");
                let mut text = std::fs::read_to_string(&conf).expect("postgresql.conf");
                text.push_str(&format!("port = {}\n", cluster.port));
                std::fs::write(&conf, text).expect("postgresql.conf");
            }
        });
        let private = PrivateCluster { cluster, tcp, url_params: setup.url_params, dir: Some(dir) };
        connect(&private.cluster.url("postgres")).await.batch_execute(&format!("CREATE DATABASE {DB}")).await.expect("create the database");
        let migrate = tokio::task::block_in_place(|| {
            Command::new(almanac_bin()).arg("migrate").env("DATABASE_URL", private.url()).output().expect("run almanac migrate")
        });
        assert!(migrate.status.success(), "almanac migrate: {}", String::from_utf8_lossy(&migrate.stderr));
        private
    }

    /// The connection string of [`DB`]: over TCP when the cluster listens on it.
    pub fn url(&self) -> String {
        if self.tcp {
            self.tcp_url(self.cluster.port)
        } else {
            self.cluster.url(DB)
        }
    }

    /// [`DB`] on 127.0.0.1:`port` (the server's own port, or a proxy's).
    pub fn tcp_url(&self, port: u16) -> String {
        format!("host=127.0.0.1 port={port} user=postgres dbname={DB} {}", self.url_params)
    }

    /// A [`TestDb`] on [`DB`]: the test's own client on the unix socket (never through
    /// a proxy, never needing TLS); `url` is what hosts are given.
    pub async fn db(&self) -> TestDb {
        TestDb { name: DB.into(), client: connect(&self.cluster.url(DB)).await, url: self.url() }
    }

    pub fn start_server(&self) {
        tokio::task::block_in_place(|| self.cluster.start()).expect("start PostgreSQL");
    }

    /// `pg_ctl stop -m <mode>`.
    pub fn stop_server(&self, mode: &str) {
        tokio::task::block_in_place(|| self.cluster.stop(mode)).expect("stop PostgreSQL");
    }

    /// A server crash and its recovery.
    pub fn restart_immediate(&self) {
        tokio::task::block_in_place(|| self.cluster.restart_immediate()).expect("restart PostgreSQL");
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let _ = self.cluster.stop("immediate");
        let dir = self.dir.take().expect("dir");
        for path in [self.cluster.socket_dir.as_path(), dir.path()] {
            // The server's last files may still be going away right after the stop.
            for _ in 0..50 {
                if std::fs::remove_dir_all(path).is_ok() || !path.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0").local_addr().expect("local addr").port()
}
