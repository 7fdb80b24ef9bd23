//! `almanac new NAME [--lang rust|python|ts]`: a plugin project that builds as it is.
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    /// TypeScript (also `typescript`).
    #[value(alias = "typescript")]
    Ts,
}

#[derive(clap::Args)]
pub struct NewArgs {
    /// The task's name (lowercase letters, digits, '-' and '_'); also the folder made.
    name: String,
    #[arg(long, value_enum, default_value_t = Lang::Rust)]
    lang: Lang,
    /// Where to make the project [default: ./NAME].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The Almanac checkout whose SDK (guest-sdk/) and contract (wit/) the project uses
    /// [default: the one this binary was built from].
    #[arg(long)]
    almanac: Option<PathBuf>,
}

pub fn run(args: NewArgs) -> anyhow::Result<ExitCode> {
    let name = &args.name;
    if name.is_empty() || name.len() > 64 || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_') {
        bail!("task name {name:?} is invalid: use 1-64 lowercase letters, digits, '-' and '_'");
    }
    let checkout = match args.almanac {
        Some(dir) => dir,
        None => Path::new(env!("CARGO_MANIFEST_DIR")).parent().context("the Almanac checkout")?.to_owned(),
    };
    let checkout = checkout.canonicalize().with_context(|| format!("the Almanac checkout {} (give --almanac DIR)", checkout.display()))?;
    if !checkout.join("guest-sdk/Cargo.toml").exists() {
        bail!("{} is not an Almanac checkout (no guest-sdk/): give --almanac DIR", checkout.display());
    }
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(name));
    if dir.exists() {
        bail!("{} exists already", dir.display());
    }
    let table = format!("{}_runs", name.replace('-', "_"));
    let module = name.replace('-', "_");
    let (test, test_file) = match args.lang {
        Lang::Rust => ("`cargo test`", "tests/plugin.rs"),
        Lang::Python => ("`pytest` (`pip install pytest`, once)", "tests/test_plugin.py"),
        Lang::Ts => ("`node --test`", "tests/plugin.test.mjs"),
    };
    let fill = |template: &str, build: &str, wasm: &str, lang: &str| {
        template
            .replace("{name}", name)
            // Paths into TOML as TOML strings: a checkout may live anywhere.
            .replace("{testing}", &toml_string(&checkout.join("guest-sdk/testing")))
            .replace("{test_file}", test_file)
            .replace("{test}", test)
            .replace("{table}", &table)
            .replace("{sdk}", &toml_string(&checkout.join("guest-sdk")))
            .replace("{build}", build)
            .replace("{wasm_name}", wasm.rsplit('/').next().unwrap_or(wasm))
            .replace("{wasm}", wasm)
            .replace("{lang}", lang)
    };
    let files: Vec<(&str, String)> = match args.lang {
        Lang::Rust => {
            let wasm = format!("target/wasm32-wasip2/release/{module}.wasm");
            let build = "cargo build --release --target wasm32-wasip2   # rustup target add wasm32-wasip2, once";
            vec![
                ("Cargo.toml", fill(include_str!("../../templates/new/Cargo.toml.in"), build, &wasm, "Rust")),
                (".cargo/config.toml", include_str!("../../templates/new/config.toml.in").to_owned()),
                ("src/lib.rs", fill(include_str!("../../templates/new/lib.rs.in"), build, &wasm, "Rust")),
                ("tests/plugin.rs", fill(include_str!("../../templates/new/plugin_test.rs.in"), build, &wasm, "Rust")),
                ("README.md", fill(include_str!("../../templates/new/README.md.in"), build, &wasm, "Rust")),
                (".gitignore", "/target\n/.almanac\n".to_owned()),
            ]
        }
        Lang::Python => {
            let wasm = format!("{module}.wasm");
            let script = format!(
                "#!/bin/sh\n# Build the component (pip install componentize-py==0.25.1, once).\nset -e\ncd \"$(dirname \"$0\")\"\nexec \"${{COMPONENTIZE_PY:-componentize-py}}\" -d {} -w task-plugin componentize -p . -p {} app -o {wasm}\n",
                sh_word(&checkout.join("wit")),
                sh_word(&checkout.join("guest-sdk/python"))
            );
            let build = "sh build.sh   # pip install componentize-py==0.25.1, once";
            vec![
                ("app.py", fill(include_str!("../../templates/new/app.py.in"), build, &wasm, "Python")),
                ("build.sh", script),
                ("pyproject.toml", fill(include_str!("../../templates/new/pyproject.toml.in"), build, &wasm, "Python")),
                ("tests/test_plugin.py", fill(include_str!("../../templates/new/test_plugin.py.in"), build, &wasm, "Python")),
                ("README.md", fill(include_str!("../../templates/new/README.md.in"), build, &wasm, "Python")),
                (".gitignore", "/*.wasm\n/.almanac\n__pycache__/\n.pytest_cache/\n".to_owned()),
            ]
        }
        Lang::Ts => {
            let wasm = format!("{module}.wasm");
            let sdk = checkout.join("guest-sdk/typescript");
            let script = format!(
                "#!/bin/sh\n# Check the types (tsc --strict), then build the component (esbuild, then componentize-js):\n# the checkout's guest-sdk/typescript, installed there once by scripts/bootstrap.sh --need-typescript.\nset -e\ncd \"$(dirname \"$0\")\"\nexec node {} src/plugin.ts -o {wasm} --check\n",
                sh_word(&sdk.join("build.mjs"))
            );
            let testing = file_url(&sdk.join("testing.mjs"));
            let build = "sh build.sh   # needs the checkout's scripts/bootstrap.sh --need-typescript, once";
            vec![
                ("src/plugin.ts", fill(include_str!("../../templates/new/plugin.ts.in"), build, &wasm, "TypeScript")),
                ("build.sh", script),
                ("package.json", format!("{{\n  \"name\": {},\n  \"private\": true,\n  \"type\": \"module\",\n  \"scripts\": {{ \"build\": \"sh build.sh\", \"test\": \"node --test\" }}\n}}\n", serde_json::Value::String(name.clone()))),
                ("tsconfig.json", format!("{{\n  \"compilerOptions\": {{\n    \"strict\": true,\n    \"target\": \"es2022\",\n    \"module\": \"es2022\",\n    \"moduleResolution\": \"bundler\",\n    \"noEmit\": true,\n    \"paths\": {{ \"almanac-guest\": [{}] }}\n  }},\n  \"files\": [{}, \"src/plugin.ts\"]\n}}\n", serde_json::Value::String(sdk.join("src/index.ts").display().to_string()), serde_json::Value::String(sdk.join("src/wit.d.ts").display().to_string()))),
                ("tests/almanac.mjs", format!("// The test helpers of the Almanac checkout this project was made from.\nexport * from {};\n", serde_json::Value::String(testing))),
                ("tests/plugin.test.mjs", fill(include_str!("../../templates/new/plugin.test.mjs.in"), build, &wasm, "TypeScript")),
                ("README.md", fill(include_str!("../../templates/new/README.md.in"), build, &wasm, "TypeScript")),
                (".gitignore", "/*.wasm\n/.almanac\n/node_modules\n".to_owned()),
            ]
        }
    };
    for (path, text) in &files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, text).with_context(|| format!("write {}", path.display()))?;
    }
    println!("made {} ({}): see its README.md to build and try it", dir.display(), files.iter().map(|(p, _)| *p).collect::<Vec<_>>().join(", "));
    Ok(ExitCode::SUCCESS)
}

/// `path` as a TOML string, quotes and backslashes escaped.
fn toml_string(path: &Path) -> String {
    toml::Value::String(path.display().to_string()).to_string()
}

/// `path` as one word of a POSIX shell command line, whatever characters it holds.
fn sh_word(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

/// `path` (absolute) as a `file:` URL, every byte outside the unreserved set and `/`
/// percent-encoded: what `import` takes, wherever the checkout lives.
fn file_url(path: &Path) -> String {
    let mut url = String::from("file://");
    for b in path.display().to_string().bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => url.push(b as char),
            _ => url.push_str(&format!("%{b:02X}")),
        }
    }
    url
}
