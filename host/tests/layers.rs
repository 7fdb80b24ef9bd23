//! The host's modules form layers: a module may use modules of lower layers only, and no
//! files import each other in a circle. This reads `host/src` (every `crate::` path and
//! `super::` path outside comments and test modules) and fails naming the import that
//! breaks the rule. `docs/src/internals/architecture.md` explains the layers; a new top-level module
//! must be given one here.
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level modules by layer, lowest first.
const LAYERS: &[&[&str]] = &[
    // Foundations: text; TLS (trust stores, verifiers) for every connection.
    &["text", "tls"],
    // Time, connections, the WIT bindings, the calendar.
    &["backoff", "db", "bindings", "calendar", "job"],
    // The private cluster, migrations, wake-ups; database roles and declared tables; who
    // may use the console.
    &["cluster", "migrate", "wake", "access", "clients", "operators"],
    // What a task is; the outbox (a message's rules, the dispatcher and its sinks); plugin
    // logins (the sessions plugin SQL runs in, made as members of the tasks' roles).
    &["task", "outbox", "login"],
    // What a plugin is lent; counters; the job history's partitions, counts, claim floor
    // and pruning (by the tasks' horizons).
    &["capability", "metrics", "history", "grants"],
    // The plugin runtime; the configuration file.
    &["plugin", "config"],
    // The data path: cursor -> jobs, claim -> run -> commit (and the operator queries
    // on the tables each owns).
    &["scheduler", "executor"],
    // Which plugins this host serves (loads, sets up, registers schedules); status; the
    // hosts on record (heartbeats).
    &["catalog", "status", "hosts"],
    // What an operator looks at; a plugin tried in a rolled-back transaction.
    &["dashboard", "dryrun"],
    // One running host; the HTTP listener.
    &["host", "http"],
    // The benchmark and the demo drive whole hosts.
    &["bench", "demo"],
];

fn layer(module: &str) -> Option<usize> {
    let top = module.split("::").next().unwrap_or_default();
    LAYERS.iter().position(|layer| layer.contains(&top))
}

/// `host/src/a/b.rs` and `host/src/a/b/mod.rs` are `a::b`.
fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read host/src") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).expect("under src").with_extension("");
            let mut parts: Vec<String> = relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
            if parts.last().is_some_and(|p| p == "mod") {
                parts.pop();
            }
            let name = parts.join("::");
            if ["lib", "main", "", "tests"].contains(&name.as_str()) || name.ends_with("::tests") || name.starts_with("cli") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read source");
            // Test modules may reach anywhere; comments are not imports.
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            let code: String = code.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
            out.insert(name, code);
        }
    }
    out
}

/// Every path that follows `prefix` in `code`, expanding `{a, b::c}` groups.
fn paths_after(code: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let path: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
        let path = path.trim_end_matches(':').to_owned();
        if rest[path.len()..].trim_start_matches(':').starts_with('{') {
            let group = &rest[path.len()..];
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].trim_start_matches([':', '{']).split(',') {
                let item = item.trim().split(' ').next().unwrap_or_default().trim_start_matches('{');
                out.push(if path.is_empty() { item.to_owned() } else { format!("{path}::{item}") });
            }
        }
        out.push(path);
    }
    out
}

fn resolve(path: &str, names: &BTreeSet<String>) -> Option<String> {
    let parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
    (1..=parts.len()).rev().map(|n| parts[..n].join("::")).find(|candidate| names.contains(candidate))
}

/// Every module's imports of other modules, and of its own ancestors (a child that
/// reaches back into its parent's file: the parent declares the child, so that is a
/// circle whatever the parent itself imports).
fn all_imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = modules(&src);
    let names: BTreeSet<String> = modules.keys().cloned().collect();
    let mut edges = BTreeMap::new();
    for (module, code) in &modules {
        let parent = module.rsplit_once("::").map(|(p, _)| p.to_owned());
        let mut targets = BTreeSet::new();
        for path in paths_after(code, "crate::") {
            targets.extend(resolve(&path, &names));
        }
        for path in paths_after(code, "super::") {
            if let Some(parent) = &parent {
                targets.extend(resolve(&format!("{parent}::{path}"), &names));
            }
        }
        targets.remove(module);
        edges.insert(module.clone(), targets);
    }
    edges
}

fn is_ancestor(ancestor: &str, of: &str) -> bool {
    of.starts_with(&format!("{ancestor}::"))
}

/// Imports between modules that are not each other's ancestors.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let mut edges = all_imports();
    for (module, targets) in edges.iter_mut() {
        targets.retain(|t| !is_ancestor(t, module));
    }
    edges
}

/// A parent file holds its children's declarations and what it shows of them; what the
/// children share lives in a child, so no child reaches back into its parent.
#[test]
fn no_child_imports_its_parent() {
    let mut wrong = Vec::new();
    for (module, targets) in all_imports() {
        for target in targets.iter().filter(|t| is_ancestor(t, &module)) {
            wrong.push(format!("{module} imports from its ancestor {target}: move what they share into a child of {target}"));
        }
    }
    assert!(wrong.is_empty(), "children reaching back into their parents:\n{}", wrong.join("\n"));
}

#[test]
fn no_module_imports_a_higher_layer() {
    let mut wrong = Vec::new();
    for (module, targets) in imports() {
        let Some(own) = layer(&module) else {
            wrong.push(format!("{module}: not in any layer (add it to LAYERS in host/tests/layers.rs and to docs/src/internals/architecture.md)"));
            continue;
        };
        for target in targets {
            let same_tree = module.split("::").next() == target.split("::").next();
            if !same_tree && layer(&target).is_none_or(|other| other >= own) {
                wrong.push(format!("{module} (layer {own}) imports {target} (layer {:?})", layer(&target)));
            }
        }
    }
    assert!(wrong.is_empty(), "imports against the layers:\n{}", wrong.join("\n"));
}

#[test]
fn no_files_import_each_other_in_a_circle() {
    let edges = imports();
    // Tarjan's strongly connected components; any with more than one module is a circle.
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        circles: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        for w in s.edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w.as_str()) {
                visit(s, w);
                let low = s.low[v].min(s.low[w.as_str()]);
                s.low.insert(v, low);
            } else if s.stack.contains(&w.as_str()) {
                let low = s.low[v].min(s.index[w.as_str()]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                component.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.circles.push(component);
            }
        }
    }
    let mut state = State { edges: &edges, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), circles: Vec::new() };
    for v in edges.keys() {
        if !state.index.contains_key(v.as_str()) {
            visit(&mut state, v);
        }
    }
    assert!(state.circles.is_empty(), "modules importing each other in a circle: {:?}", state.circles);
}

#[test]
fn the_check_sees_imports() {
    let edges = imports();
    // Known edges of the data path, so a parser that finds nothing cannot pass.
    for (from, to) in [("executor", "plugin"), ("scheduler", "calendar"), ("capability::db::session", "access"), ("catalog", "scheduler")] {
        assert!(edges.get(from).is_some_and(|t| t.iter().any(|x| x == to || x.starts_with(&format!("{to}::")))), "{from} -> {to}: {:?}", edges.get(from));
    }
}

/// SQL lives beside the module that owns the table (or in `migrations/`); the CLI only
/// parses and prints, so a new command cannot grow queries of its own.
#[test]
fn the_cli_holds_no_sql() {
    let cli = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cli");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&cli).expect("read src/cli") {
        let path = entry.expect("dir entry").path();
        let text = std::fs::read_to_string(&path).expect("read source");
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            if ["\"SELECT ", "\"INSERT ", "\"UPDATE ", "\"DELETE ", "\"CREATE ", "\"DROP ", "\"TRUNCATE "].iter().any(|sql| code.contains(sql)) {
                found.push(format!("{}:{}: {}", path.display(), n + 1, code));
            }
        }
    }
    assert!(found.is_empty(), "SQL in the CLI:\n{}", found.join("\n"));
}
