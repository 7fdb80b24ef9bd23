//! `almanac plugins`: each plugin the hosts installed in this database (version, digest,
//! when), and the functions it declares it calls, as the catalog had them: volatility,
//! SECURITY DEFINER, owning extension, whether it runs SQL given as text.
use std::process::ExitCode;

use almanac::text::printable;

pub async fn run(database: &super::database::Database) -> anyhow::Result<ExitCode> {
    let (client, _conn) = database.connect().await?;
    for plugin in almanac::catalog::calls::installed(&client).await? {
        println!(
            "{} {} (digest {}, installed {})",
            printable(&plugin.name),
            printable(&plugin.version),
            &plugin.digest[..plugin.digest.len().min(12)],
            plugin.loaded_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        );
        if plugin.calls.is_empty() {
            println!("    calls: the host's built-in allowlist only");
        }
        for call in &plugin.calls {
            println!("    calls {}", printable(&call.describe()));
        }
    }
    Ok(ExitCode::SUCCESS)
}
