//! `almanac new`: a Rust and a Python project that build as they are, and whose own
//! test (almanac-testing: `cargo test`, `pytest`) passes against a real database, and
//! fails when what it asserts is not so.
use std::path::Path;
use std::process::{Command, Output};

use crate::support::{almanac_bin, workspace, ProjectClusters};

fn run(command: &mut Command) -> Output {
    command.output().unwrap_or_else(|e| panic!("{command:?}: {e}"))
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        match path.is_dir() {
            true => copy_dir(&path, &target),
            false => drop(std::fs::copy(&path, &target).unwrap()),
        }
    }
}

/// A second test that asserts what is not so ("hi" where the task records "hello").
fn add_failing_test(from: &Path, to: &Path) {
    let test = std::fs::read_to_string(from).unwrap();
    assert!(test.contains("\"hello\""), "{test}");
    std::fs::write(to, test.replace("\"hello\"", "\"hi\"").replace("records_each_day_once", "records_what_is_not_so")).unwrap();
}

#[test]
fn almanac_new_makes_rust_and_python_projects_whose_own_tests_pass() {
    let root = workspace();
    let dir = tempfile::tempdir().unwrap();
    let (rs, py) = (dir.path().join("hello-rs"), dir.path().join("hello-py"));
    let _clusters = ProjectClusters(vec![rs.clone(), py.clone()]);
    // The Python project is made from a copy of what it needs of the checkout, under a
    // path with a space and both quotes: its build.sh and pyproject.toml must hold it.
    let odd = dir.path().join("al'manac \"copy\"");
    for part in ["wit", "guest-sdk/python", "guest-sdk/testing"] {
        copy_dir(&root.join(part), &odd.join(part));
    }
    std::fs::copy(root.join("guest-sdk/Cargo.toml"), odd.join("guest-sdk/Cargo.toml")).unwrap();
    let odd = odd.display().to_string();
    for args in [&["new", "hello-rs"][..], &["new", "hello-py", "--lang", "python", "--almanac", &odd]] {
        let out = run(Command::new(almanac_bin()).args(args).current_dir(dir.path()));
        assert!(out.status.success(), "{}", text(&out));
    }
    let out = run(Command::new(almanac_bin()).args(["new", "hello-rs", "--dir", &rs.display().to_string()]));
    assert!(!out.status.success() && text(&out).contains("exists already"), "{}", text(&out));
    add_failing_test(&rs.join("tests/plugin.rs"), &rs.join("tests/not_so.rs"));
    add_failing_test(&py.join("tests/test_plugin.py"), &py.join("tests/test_not_so.py"));

    // Rust: `cargo test`, sharing the plugins' target dir so nothing is built twice.
    let out = run(Command::new("cargo")
        .args(["test", "--no-fail-fast"])
        .env("CARGO_TARGET_DIR", root.join("target/wasm"))
        .env("ALMANAC", almanac_bin())
        .current_dir(&rs));
    let report = text(&out);
    assert!(!out.status.success(), "{report}");
    assert!(report.contains("test records_each_day_once ... ok"), "{report}");
    assert!(report.contains("test records_what_is_not_so ... FAILED") && report.contains("\"hi\""), "{report}");

    // Python: `pytest`, whose test builds the component with the project's build.sh.
    let venv = root.join(".venv/bin");
    let out = run(Command::new(venv.join("pytest"))
        .args(["-q", "-p", "no:cacheprovider"])
        .env("COMPONENTIZE_PY", venv.join("componentize-py"))
        .env("ALMANAC", almanac_bin())
        .current_dir(&py));
    let report = text(&out);
    assert!(!out.status.success(), "{report}");
    assert!(report.contains("1 failed, 1 passed") && report.contains("FAILED tests/test_not_so.py::test_records_what_is_not_so"), "{report}");
    assert!(py.join("hello_py.wasm").exists(), "{report}");
}

/// `almanac new NAME --lang ts`: a TypeScript project whose `node --test` runs its source
/// against a fake transaction, its built component under node against the same fake and
/// in the real host, and whose build refuses a type error.
#[test]
fn almanac_new_makes_a_typescript_project_whose_own_tests_pass() {
    let dir = tempfile::tempdir().unwrap();
    let ts = dir.path().join("hello-ts");
    let _clusters = ProjectClusters(vec![ts.clone()]);
    let out = run(Command::new(almanac_bin()).args(["new", "hello-ts", "--lang", "ts"]).current_dir(dir.path()));
    assert!(out.status.success(), "{}", text(&out));
    let test = std::fs::read_to_string(ts.join("tests/plugin.test.mjs")).unwrap();
    assert!(test.contains("[[\"2026-01-01\", \"hello\"]]"), "{test}");
    std::fs::write(ts.join("tests/not-so.test.mjs"), test.replace("[[\"2026-01-01\", \"hello\"]]", "[[\"2026-01-01\", \"hi\"]]")).unwrap();
    let out = run(Command::new("node").args(["--test"]).env("ALMANAC", almanac_bin()).current_dir(&ts));
    let report = text(&out);
    assert!(!out.status.success(), "{report}");
    assert!(report.contains("# pass 5") && report.contains("# fail 1"), "{report}");
    assert!(report.contains("ok 2 - the built component does the same, under node"), "{report}");
    assert!(report.contains("not ok 3 - the component records each day once, in a real database") && report.contains("'hi'"), "{report}");
    assert!(ts.join("hello_ts.wasm").exists(), "{report}");
    // A type error stops the build, with tsc's message.
    let source = std::fs::read_to_string(ts.join("src/plugin.ts")).unwrap();
    std::fs::write(ts.join("src/plugin.ts"), source.replace("const greeting = ", "const greeting: number = ")).unwrap();
    let out = run(Command::new("sh").arg("build.sh").current_dir(&ts));
    let report = text(&out);
    assert!(!out.status.success() && report.contains("error TS2322") && report.contains("type errors"), "{report}");
}

/// `almanac scratch NAME` makes NAME anew, and drops only what it made: never the
/// private cluster's own database, whatever name it is given.
#[test]
fn scratch_makes_a_database_anew_and_drops_only_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let _cluster = ProjectClusters(vec![dir.path().to_owned()]);
    let almanac = |args: &[&str]| run(Command::new(almanac_bin()).args(args).env_remove("DATABASE_URL").current_dir(dir.path()));
    let out = almanac(&["psql", "--", "-c", "CREATE TABLE kept (x int)"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = almanac(&["scratch", "almanac"]);
    assert!(!out.status.success() && text(&out).contains("database \"almanac\" exists and was not made by `almanac scratch`"), "{}", text(&out));
    assert!(almanac(&["psql", "--", "-c", "SELECT * FROM kept"]).status.success(), "the table is still there");
    for _ in 0..2 {
        let out = almanac(&["scratch", "t1"]);
        assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("dbname=t1"), "{}", text(&out));
    }

    // The test harnesses name theirs for their process: those of a process gone are
    // dropped by the next scratch; those of a live one, and every other name, are not.
    let mut gone = Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let (orphan, live) = (format!("almanac_test_0_{dead}"), format!("almanac_test_0_{}", std::process::id()));
    for name in [&orphan, &live, "keep_2024"] {
        assert!(almanac(&["scratch", name]).status.success());
    }
    assert!(almanac(&["scratch", "t2"]).status.success());
    let out =
        almanac(&["psql", "--", "-Atc", "SELECT string_agg(datname, ' ' ORDER BY datname) FROM pg_database WHERE datname ~ '^(almanac_test|keep|t[12])'"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("{live} keep_2024 t1 t2"), "{}", text(&out));
}
