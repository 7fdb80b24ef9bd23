//! The WIT `config` interface: a task's settings (`[tasks.<name>.settings]`), the
//! declared defaults filled in. Values read from the environment (`"env:VAR"`) are
//! secrets: never shown, logged or stored; the database records a digest of them.
use std::collections::BTreeMap;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::bindings::almanac::plugin::config::Host;

/// How a secret's digest starts where it is shown or stored.
pub const SECRET: &str = "secret sha256:";

/// One setting's value.
#[derive(Clone, PartialEq, Eq)]
pub struct Setting {
    pub value: String,
    /// Read from the host's environment: shown and stored only as a digest.
    pub secret: bool,
}

/// A task's settings by name; cheap to clone (one per call).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Settings {
    values: Arc<BTreeMap<String, Setting>>,
}

impl Settings {
    pub fn new(values: BTreeMap<String, Setting>) -> Settings {
        Settings { values: Arc::new(values) }
    }

    pub fn get(&self, name: &str) -> Option<&Setting> {
        self.values.get(name)
    }

    /// What may be shown and stored: plain values as they are, secrets as
    /// `secret sha256:<first 16 hex digits>` of the task, name and value, so that two hosts
    /// with different secrets can be told apart without either being revealed.
    pub fn shown(&self, task: &str) -> BTreeMap<String, String> {
        self.values
            .iter()
            .map(|(name, s)| {
                let shown = match s.secret {
                    false => s.value.clone(),
                    true => {
                        let digest = Sha256::digest(format!("{task}\0{name}\0{}", s.value));
                        format!("{SECRET}{}", &hex::encode(digest)[..16])
                    }
                };
                (name.clone(), shown)
            })
            .collect()
    }
}

/// Secrets never reach a log line through `{:?}`.
impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown: BTreeMap<&str, &str> = self.values.iter().map(|(k, s)| (k.as_str(), if s.secret { "(secret)" } else { s.value.as_str() })).collect();
        shown.fmt(f)
    }
}

impl Host for Settings {
    async fn get(&mut self, name: String) -> wasmtime::Result<Option<String>> {
        Ok(self.values.get(&name).map(|s| s.value.clone()))
    }
}
