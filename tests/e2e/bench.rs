//! The benchmark's smoke run: CI checks that `almanac bench` still works end to end
//! (its own cluster, every measurement, every result verified), not its figures.
use crate::support::{almanac_bin, built_plugins};

#[test]
fn the_benchmark_smoke_run_measures_and_verifies_everything() {
    let dir = tempfile::Builder::new().prefix("almanac-bench-").tempdir().unwrap();
    let out = std::process::Command::new(almanac_bin())
        .arg("--data-dir")
        .arg(dir.path())
        .args(["bench", "--smoke", "--connections", "--json", "--plugin"])
        .arg(built_plugins().join("daily_points.wasm"))
        .arg("--contention")
        .arg(built_plugins().join("fixture_crosslock.wasm"))
        .arg("--languages")
        .arg(format!("{},{}", built_plugins().join("daily_points_ts.wasm").display(), built_plugins().join("daily_points_py.wasm").display()))
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    // The benchmark stops the private cluster it started; stop it here whatever happened.
    let cluster = almanac::cluster::Cluster::new(&dir.path().join("bench/pg")).unwrap();
    let left_running = cluster.is_running();
    let _ = cluster.stop("immediate");
    let _ = std::fs::remove_dir_all(&cluster.socket_dir);
    assert!(out.status.success(), "bench failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(!left_running, "the benchmark left its private cluster running");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The physical floor: the seed's SQL by pgbench, verified (400 accounts, 2 clients).
    assert!(report["pgbench"]["jobs"] == 400 && report["pgbench"]["jobs_per_second"].as_f64().unwrap() > 0.0, "{}", report["pgbench"]);
    assert!(report["pgbench"]["postgres_cpu_seconds"].as_f64().unwrap() > 0.0 && report["pgbench"]["host_cpu_seconds"].as_f64().unwrap() > 0.0);
    // Each language's daily-points, verified like the rest.
    let languages: Vec<(&str, u64)> =
        report["languages"].as_array().unwrap().iter().map(|l| (l["version"].as_str().unwrap(), l["reuse"].as_u64().unwrap())).collect();
    assert_eq!(languages, [("0.1.0-ts", 1000), ("0.1.0-py", 1000)]);
    for l in report["languages"].as_array().unwrap() {
        assert!(l["run"]["jobs"] == 400 && l["run"]["jobs_per_second"].as_f64().unwrap() > 0.0 && l["overhead_us"].as_f64().unwrap() > 0.0, "{l}");
        assert!(l["first_load_seconds"].as_f64().unwrap() > l["cached_load_seconds"].as_f64().unwrap(), "{l}");
    }
    for run in ["floor", "almanac"] {
        let runs = report[run].as_array().unwrap();
        assert_eq!(runs.len(), 2, "{run}: batches 1 and 8");
        assert!(runs.iter().all(|r| r["jobs_per_second"].as_f64().unwrap() > 0.0 && r["jobs"] == 400));
    }
    assert!(report["almanac"][0]["postgres_cpu_seconds"].as_f64().unwrap() > 0.0);
    assert!(report["plugin_overhead_us"].as_f64().unwrap() > 0.0);
    assert!(report["policy_parse_us"].as_f64().unwrap() > report["policy_cached_us"].as_f64().unwrap());
    assert_eq!(report["generation_keys"], 5000);
    assert!(report["claim_plan"].as_str().unwrap().contains("_run_after_slot_task_key_idx"));
    assert!(report["claim_p99_ms"].as_f64().unwrap() > 0.0);
    let vias: Vec<&str> = report["connections"].as_array().unwrap().iter().map(|c| c["via"].as_str().unwrap()).collect();
    let round = ["socket", "socket", "tcp", "tcp", "tls", "tls", "pgbouncer", "pgbouncer"];
    let back: Vec<&str> = round.iter().rev().copied().collect();
    assert_eq!(vias, [&round[..], &back[..]].concat(), "two rounds, the second in reverse");
    assert!(report["connections"].as_array().unwrap().iter().all(|c| c["jobs_per_second"].as_f64().unwrap() > 0.0 && c["jobs"] == 400));
    let enqueue = &report["enqueue"];
    assert_eq!((enqueue["many_keys"].as_u64(), enqueue["single_calls"].as_u64()), (Some(2000), Some(400)));
    for rate in ["many_jobs_per_second", "many_plain_jobs_per_second", "single_jobs_per_second", "single_plain_jobs_per_second"] {
        assert!(enqueue[rate].as_f64().unwrap() > 0.0, "{rate}");
    }
    // The history comparison ran on both sides, pruned one month and counted dead tuples.
    let history = &report["history"];
    assert_eq!(history["done"], 20_000);
    for side in ["empty", "full"] {
        for figure in ["batch1_jobs_per_second", "batch32_jobs_per_second", "claim_p99_ms", "status_max_ms", "overview_max_ms", "calendar_max_ms"] {
            assert!(history[side][figure].as_f64().unwrap() > 0.0, "{side} {figure}");
        }
    }
    assert!(history["pruned_done"].as_i64().unwrap() > 0);
    assert_eq!(history["churn_jobs"], 800);
    // A real idle host's statements counted, lone jobs timed from enqueue to claim.
    let idle = &report["idle"];
    assert_eq!(idle["runs"].as_array().unwrap().len(), 1, "{idle}");
    assert!(idle["runs"][0]["statements"].as_i64().unwrap() > 0, "{idle}");
    assert_eq!(idle["lone_jobs"], 10, "{idle}");
    assert!(idle["lone_p50_ms"].as_f64().unwrap() > 0.0, "{idle}");
    // The deadlock storm and its serial run, each verified (every job done once).
    let contention = &report["contention"];
    assert_eq!(contention["jobs"], 16, "{contention}");
    assert!(contention["serial_seconds"].as_f64().unwrap() > 0.0 && contention["storm_seconds"].as_f64().unwrap() > 0.0, "{contention}");
    // The largest batch with and without clients loading the console, each run verified.
    let pages = &report["pages"];
    assert_eq!((pages["clients"].as_u64(), pages["batch"].as_u64()), (Some(4), Some(8)), "{pages}");
    assert!(pages["page_loads"].as_u64().unwrap() > 0 && pages["loaded_jobs_per_second"].as_f64().unwrap() > 0.0, "{pages}");
    // One and two hosts on one database, each job verified done once, with its WAL.
    let scaling = &report["scaling"];
    assert!(scaling["floor_wal_bytes_per_job"].as_f64().unwrap() > 0.0);
    let runs = scaling["runs"].as_array().unwrap();
    assert_eq!(runs.iter().map(|r| r["hosts"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2]);
    for run in runs {
        assert!(run["jobs_per_second"].as_f64().unwrap() > 0.0 && run["wal_bytes_per_job"].as_f64().unwrap() > 0.0 && run["jobs"] == 400, "{run}");
        assert!(run["connections_per_host"].as_f64().unwrap() >= 1.0, "{run}");
    }
}
