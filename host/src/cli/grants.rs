//! `almanac grants`: the SQL a database's owners run so that the host's role can serve
//! the plugins of a folder (see [`almanac::grants`]).
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct GrantsArgs {
    /// Folder of plugin components: the tables their `describe()` declares.
    #[arg(long)]
    plugins: std::path::PathBuf,
    /// Per-task overrides, checked as a host would [default: ./almanac.toml if it exists].
    #[arg(long)]
    config: Option<std::path::PathBuf>,
    /// The host's role [default: the role DATABASE_URL connects as].
    #[arg(long)]
    role: Option<String>,
}

pub async fn run(database: &super::database::Database, data_dir: &std::path::Path, args: GrantsArgs) -> anyhow::Result<ExitCode> {
    let tls = database.target()?.tls;
    let (client, _conn) = database.connect().await?;
    let name = almanac::db::database_name(&client).await?;
    let runtime = almanac::plugin::Runtime::new(almanac::plugin::Limits::default(), Some(data_dir.join("cache")), tls, &name)?;
    let (registry, refused) = almanac::catalog::load_only(&runtime, &args.plugins).await?;
    for why in &refused {
        eprintln!("not loaded: {why}");
    }
    anyhow::ensure!(!registry.is_empty(), "no plugins loaded from {}", args.plugins.display());
    let config_path = args.config.or_else(|| Some(almanac::config::default_path()).filter(|p| p.exists()));
    let config = config_path.as_deref().map(almanac::config::Config::load).transpose()?;
    let config = config.unwrap_or_else(almanac::config::Config::none);
    let mut specs = Vec::new();
    for plugin in registry.iter() {
        let mut spec = plugin.spec.clone();
        config.apply_to(&mut spec)?;
        specs.push(spec);
    }
    let needs = almanac::grants::needs(&client, args.role.as_deref(), &specs.iter().collect::<Vec<_>>()).await?;
    print!("{}", needs.script(&args.plugins.display().to_string()));
    Ok(if refused.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
