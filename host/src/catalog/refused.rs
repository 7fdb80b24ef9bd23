//! Refused deploys, recorded where every operator looks (`almanac status`, the dashboard):
//! the plugin files a serving host would not load, why, and which version keeps serving
//! instead. Each host owns its rows (host name and plugins folder) and replaces them after
//! every read of its folder; see `migrations/V17__refused_deploys.sql`.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::db::{Pool, Sql};

/// How often a host with refusals says it still has them.
pub const HEARTBEAT: Duration = Duration::from_secs(60);

/// One refused file, as this host knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub digest: String,
    pub task: Option<String>,
    /// The version that keeps serving instead, if any.
    pub serving: Option<String>,
    pub reason: String,
}

/// A refused deploy as recorded, on any host.
#[derive(Debug, Clone, Serialize)]
pub struct RefusedDeploy {
    pub host: String,
    pub file: String,
    pub digest: String,
    pub task: Option<String>,
    pub serving: Option<String>,
    pub reason: String,
    pub refused_at: DateTime<Utc>,
    /// When its host last said it still refuses the file.
    pub seen_at: DateTime<Utc>,
    /// Its host has not said so for three heartbeats: killed or retired, not current.
    pub stale: bool,
}

/// How long a row nobody says still stands is kept (a retired host's, a folder renamed):
/// long enough to be seen as stale for a day, short enough not to pile up.
pub const FORGET_AFTER: Duration = Duration::from_secs(24 * 3600);

/// Replace this host's rows for `dir` with `now`, all seen now (keeping when a file was
/// first refused, if its content is the same), and forget every host's rows unseen for
/// [`FORGET_AFTER`].
pub async fn record(client: &impl Sql, host: &str, dir: &Path, now: &BTreeMap<PathBuf, Refused>) -> Result<(), tokio_postgres::Error> {
    let files = file_names(dir, now.keys());
    let dir = dir.display().to_string();
    let digests: Vec<&str> = now.values().map(|r| r.digest.as_str()).collect();
    // Empty for none: the statements' typed parameters take no NULLs in arrays.
    let tasks: Vec<&str> = now.values().map(|r| r.task.as_deref().unwrap_or_default()).collect();
    let serving: Vec<&str> = now.values().map(|r| r.serving.as_deref().unwrap_or_default()).collect();
    let reasons: Vec<&str> = now.values().map(|r| r.reason.as_str()).collect();
    client
        .exec(
            "WITH gone AS (
                 DELETE FROM almanac.refused_deploys d WHERE d.host = $1 AND d.dir = $2 AND d.file <> ALL ($3::text[])
             ), forgotten AS (
                 DELETE FROM almanac.refused_deploys d
                 WHERE d.seen_at < now() - $8 * interval '1 second' AND NOT (d.host = $1 AND d.dir = $2)
             )
             INSERT INTO almanac.refused_deploys AS d (host, dir, file, digest, task, serving, reason)
             SELECT $1, $2, r.file, r.digest, nullif(r.task, ''), nullif(r.serving, ''), r.reason
             FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[]) AS r (file, digest, task, serving, reason)
             ON CONFLICT (host, dir, file) DO UPDATE
                SET refused_at = CASE WHEN d.digest = EXCLUDED.digest THEN d.refused_at ELSE now() END,
                    digest = EXCLUDED.digest, task = EXCLUDED.task, serving = EXCLUDED.serving,
                    reason = EXCLUDED.reason, seen_at = now()",
            &[&host, &dir, &files, &digests, &tasks, &serving, &reasons, &FORGET_AFTER.as_secs_f64()],
        )
        .await?;
    Ok(())
}

/// Each file's path in `dir` as text, one per file: two names that are not UTF-8 may
/// read the same once made text, and one row each needs a key each.
fn file_names<'a>(dir: &Path, paths: impl Iterator<Item = &'a PathBuf>) -> Vec<String> {
    let mut taken = std::collections::HashSet::new();
    paths
        .map(|path| {
            let name = dir.join(path.file_name().unwrap_or(path.as_os_str())).display().to_string();
            let unique = (1..).map(|n| if n == 1 { name.clone() } else { format!("{name} ({n})") }).find(|n| !taken.contains(n));
            let unique = unique.expect("some suffix is free");
            taken.insert(unique.clone());
            unique
        })
        .collect()
}

/// The recorded refusals, current ones first: at most `limit` of them, and how many
/// there are in all.
pub async fn list(client: &impl Sql, limit: Option<i64>) -> Result<(Vec<RefusedDeploy>, i64), tokio_postgres::Error> {
    let rows = client
        .rows(
            "SELECT host, file, digest, task, serving, reason, refused_at, seen_at,
                    seen_at < now() - $1 * interval '1 second' AS stale, count(*) OVER () AS total
             FROM almanac.refused_deploys ORDER BY stale, task, host, file LIMIT $2",
            &[&(3.0 * HEARTBEAT.as_secs_f64()), &limit],
        )
        .await?;
    let total = rows.first().map_or(0, |r| r.get("total"));
    let deploys = rows
        .iter()
        .map(|r| RefusedDeploy {
            host: r.get("host"),
            file: r.get("file"),
            digest: r.get("digest"),
            task: r.get("task"),
            serving: r.get("serving"),
            reason: r.get("reason"),
            refused_at: r.get("refused_at"),
            seen_at: r.get("seen_at"),
            stale: r.get("stale"),
        })
        .collect();
    Ok((deploys, total))
}

/// This host's refused files, and what `almanac.refused_deploys` has heard of them.
#[derive(Debug, Default)]
pub struct Board {
    now: BTreeMap<PathBuf, Refused>,
    /// `now` as last written, and when; `None` until the first write and after a failed one.
    recorded: Option<(BTreeMap<PathBuf, Refused>, Instant)>,
    /// The last write failed (said once, not at every retry).
    failed: bool,
}

impl Board {
    pub fn insert(&mut self, path: PathBuf, refused: Refused) {
        self.now.insert(path, refused);
    }

    pub fn remove(&mut self, path: &Path) {
        self.now.remove(path);
    }

    pub fn retain(&mut self, keep: impl FnMut(&PathBuf, &mut Refused) -> bool) {
        self.now.retain(keep);
    }

    pub fn len(&self) -> usize {
        self.now.len()
    }

    pub fn is_empty(&self) -> bool {
        self.now.is_empty()
    }

    /// Nothing written yet, or the last write failed: to be tried again soon.
    pub fn unrecorded(&self) -> bool {
        self.recorded.is_none()
    }

    /// Whether the table is behind this host's refusals, or due to hear that they still
    /// stand.
    pub fn due(&self) -> bool {
        match &self.recorded {
            None => true,
            Some((recorded, at)) => *recorded != self.now || (!recorded.is_empty() && at.elapsed() >= HEARTBEAT),
        }
    }

    /// Bring the table in line with this host's refusals in `dir` (and say they still
    /// stand). A failure is tried again on the next wake.
    pub async fn record(&mut self, client: &impl Sql, dir: &Path) {
        // Written whole every time: another host on this machine serving the same folder
        // shares the rows, and may have cleared them when it stopped.
        self.recorded = match record(client, &crate::db::hostname(), dir, &self.now).await {
            Ok(()) => {
                if std::mem::take(&mut self.failed) {
                    tracing::info!("refused deploys recorded again");
                }
                Some((self.now.clone(), Instant::now()))
            }
            Err(e) => {
                if !std::mem::replace(&mut self.failed, true) {
                    tracing::warn!("refused deploys not recorded (tried again shortly): {}", crate::db::error_chain(&e));
                }
                None
            }
        };
    }

    /// A stopping host takes its refusals back: nobody will retry them.
    pub async fn clear(&self, pool: &Pool, dir: &Path) {
        if self.recorded.as_ref().is_some_and(|(r, _)| r.is_empty()) {
            return;
        }
        let clear = async {
            let conn = pool.get().await.ok()?;
            record(&**conn, &crate::db::hostname(), dir, &BTreeMap::new()).await.ok()
        };
        if tokio::time::timeout(Duration::from_secs(2), clear).await.ok().flatten().is_none() {
            tracing::warn!("refused deploys of this host not cleared; they show as stale in a few minutes");
        }
    }
}

/// One line for a person: where, what, why, and what serves instead.
pub fn describe(d: &RefusedDeploy) -> String {
    let serving = match &d.serving {
        Some(version) => format!("version {version} keeps serving"),
        None => "nothing of it serves".into(),
    };
    let task = d.task.as_deref().map(|t| format!("task {t}, ")).unwrap_or_default();
    let when = d.refused_at.format("%Y-%m-%d %H:%M:%S");
    let stale = match d.stale {
        true => format!(" (STALE: its host has not reported since {} UTC; stopped or retired?)", d.seen_at.format("%Y-%m-%d %H:%M:%S")),
        false => String::new(),
    };
    // The file's name is whoever deployed it's, the reason may quote a plugin: as text.
    let text = crate::text::printable;
    format!("{} on {} ({task}since {when} UTC; {serving}): {}{stale}", text(&d.file), text(&d.host), text(&d.reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn names_that_read_the_same_as_text_get_a_key_each() {
        use std::os::unix::ffi::OsStrExt;
        let odd = |bytes: &[u8]| PathBuf::from(std::ffi::OsStr::from_bytes(bytes));
        let paths = [odd(b"/p/a\xff.wasm"), odd(b"/p/a\xfe.wasm"), odd(b"/p/a\xfd.wasm"), PathBuf::from("/p/b.wasm")];
        let names = file_names(Path::new("/p"), paths.iter());
        assert_eq!(names, ["/p/a\u{fffd}.wasm", "/p/a\u{fffd}.wasm (2)", "/p/a\u{fffd}.wasm (3)", "/p/b.wasm"]);
    }
}
