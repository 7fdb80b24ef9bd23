//! `almanac new`: a Rust and a Python project that build as they are, and whose task
//! runs (`almanac try --commit`) against a real database.
use std::process::Command;

use crate::support::{almanac_bin, workspace, TestDb};

fn ok(command: &mut Command) {
    let out = command.output().unwrap();
    assert!(out.status.success(), "{command:?}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

#[tokio::test(flavor = "multi_thread")]
async fn almanac_new_makes_rust_and_python_projects_that_build_and_run() {
    let root = workspace();
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    ok(Command::new(almanac_bin()).args(["new", "hello-rs"]).current_dir(dir.path()));
    ok(Command::new(almanac_bin()).args(["new", "hello-py", "--lang", "python"]).current_dir(dir.path()));
    let (code, _, err) = crate::support::almanac("", &["new", "hello-rs", "--dir", &dir.path().join("hello-rs").display().to_string()]);
    assert!(code == 1 && err.contains("exists already"), "{err}");

    // Rust: the README's command (sharing the plugins' target dir, so nothing is built twice).
    let target = root.join("target/wasm");
    ok(Command::new("cargo").args(["build", "--quiet", "--release", "--target", "wasm32-wasip2"]).env("CARGO_TARGET_DIR", &target).current_dir(dir.path().join("hello-rs")));
    std::fs::copy(target.join("wasm32-wasip2/release/hello_rs.wasm"), plugins.join("hello_rs.wasm")).unwrap();
    // Python: the README's command.
    let readme = std::fs::read_to_string(dir.path().join("hello-py/README.md")).unwrap();
    let build = readme.lines().find(|l| l.trim_start().starts_with("componentize-py")).unwrap().split('#').next().unwrap().trim().to_owned();
    let mut words = build.split_whitespace();
    words.next();
    ok(Command::new(root.join(".venv/bin/componentize-py")).args(words).current_dir(dir.path().join("hello-py")));
    std::fs::copy(dir.path().join("hello-py/hello_py.wasm"), plugins.join("hello_py.wasm")).unwrap();

    let db = TestDb::new().await;
    for task in ["hello-rs", "hello-py"] {
        let (code, out, err) = crate::support::almanac(
            &db.url,
            &["--data-dir", &dir.path().join("data").display().to_string(), "try", task, "--slot", "2026-01-01T00:00:00Z", "--key", "run", "--plugins", &plugins.display().to_string(), "--commit"],
        );
        assert_eq!(code, 0, "{out}{err}");
        assert!(out.contains("committed"), "{out}");
        let table = format!("{}_runs", task.replace('-', "_"));
        assert_eq!(db.count(&format!("SELECT count(*) FROM {table} WHERE greeting = 'hello'")).await, 1, "{task}");
    }
}
