//! The plugins a host serves now, by task name.
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use super::error::LoadError;
use super::runtime::Plugin;

/// The loaded plugins, by task name. Immutable once shared: a reload builds a new one
/// and swaps it in whole ([`Loaded`]); a job holds its own `Arc<Plugin>`, so one already
/// running finishes on the version it started with.
#[derive(Default)]
pub struct Registry {
    plugins: HashMap<String, Arc<Plugin>>,
}

/// The registry the workers read now; [`crate::catalog::Folder`] replaces it on reload.
pub type Loaded = arc_swap::ArcSwap<Registry>;

/// What a host serves at one moment: a registry and its plugins' suspensions then. What
/// it serves changed when a reload swapped the registry or a plugin was suspended or
/// resumed: the one rule by which the workers, the idle wait and the scheduler look again.
pub struct Served {
    registry: Arc<Registry>,
    suspensions: u64,
}

impl Served {
    pub fn of(registry: Arc<Registry>) -> Served {
        let suspensions = registry.suspensions();
        Served { registry, suspensions }
    }

    /// What `loaded` serves now.
    pub fn now(loaded: &Loaded) -> Served {
        Served::of(loaded.load_full())
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Whether `loaded` serves something else now.
    pub fn changed(&self, loaded: &Loaded) -> bool {
        let now = loaded.load();
        !Arc::ptr_eq(&now, &self.registry) || now.suspensions() != self.suspensions
    }
}

impl Registry {
    /// Whether `plugin`'s task is still free here; the error names the file that has it.
    pub fn check_free(&self, plugin: &Plugin) -> Result<(), LoadError> {
        match self.plugins.get(plugin.name()) {
            Some(other) => {
                Err(LoadError::Duplicate { file: plugin.path.display().to_string(), task: plugin.name().to_owned(), other: other.path.display().to_string() })
            }
            None => Ok(()),
        }
    }

    /// Add a plugin unless its task is taken.
    pub fn insert(&mut self, plugin: Arc<Plugin>) -> Result<(), LoadError> {
        self.check_free(&plugin)?;
        self.plugins.insert(plugin.name().to_owned(), plugin);
        Ok(())
    }

    /// The plugin loaded from `path`, if any.
    pub fn by_path(&self, path: &Path) -> Option<&Arc<Plugin>> {
        self.plugins.values().find(|p| p.path == path)
    }

    pub fn get(&self, task: &str) -> Option<&Arc<Plugin>> {
        self.plugins.get(task)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Plugin>> {
        let mut all: Vec<_> = self.plugins.values().collect();
        all.sort_by(|a, b| a.name().cmp(b.name()));
        all.into_iter()
    }

    /// The tasks served: loaded and not suspended.
    pub fn tasks(&self) -> Vec<String> {
        self.iter().filter(|p| !p.is_suspended()).map(|p| p.name().to_owned()).collect()
    }

    /// Suspensions and resumptions of its plugins so far: a worker recomputes its tasks
    /// when this moves (each plugin's count only grows, so their sum moves with any).
    pub fn suspensions(&self) -> u64 {
        self.plugins.values().map(|p| p.suspensions()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.plugins.is_empty()
    }
}
