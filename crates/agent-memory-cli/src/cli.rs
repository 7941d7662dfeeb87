//! The command line: clap's definitions of every subcommand and flag.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Inspect, export, import, migrate and forget the memory of LLM agents, on any backend
/// agent-memory opens (SQLite, PostgreSQL, MySQL/MariaDB, Redis).
#[derive(Debug, Parser)]
#[command(name = "agent-memory", version, about)]
pub(crate) struct Cli {
    /// The store: `sqlite://file.db`, `postgres://…`, `mysql://…`, `redis://…`; a `prefix`
    /// query parameter picks the table or key prefix. Printed only with its password hidden.
    #[arg(
        long,
        global = true,
        env = agent_memory::URL_ENV,
        hide_env_values = true,
        default_value = agent_memory::DEFAULT_URL
    )]
    pub(crate) url: String,
    /// Print JSON on stdout (for scripts) instead of tables and sentences.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// List the threads with their message and token counts.
    Threads(ThreadsArgs),
    /// Show a thread's messages, or a session's state.
    Show(ShowArgs),
    /// Count threads, messages, archived messages, tokens and sessions per tenant.
    Stats(TenantsArgs),
    /// Export memory as a bundle (JSON Lines), or one thread as Agent Framework or LlamaIndex
    /// JSON.
    Export(ExportArgs),
    /// Import a bundle.
    Import(ImportArgs),
    /// Copy every thread and session from one store to another (idempotent and resumable).
    Migrate(MigrateArgs),
    /// Delete everything of a tenant, user, agent or session, and print the receipt.
    Forget(ForgetArgs),
    /// Delete the threads and sessions whose time to live has passed.
    PurgeExpired,
    /// Check a store: connectivity, schema, settings that lose data.
    Doctor(DoctorArgs),
    /// Create the store's tables or apply its pending schema migrations (every other command
    /// except `import` and `migrate`'s target refuses a store that is missing or not current).
    Upgrade(UpgradeArgs),
    /// Serve the memory over HTTP (docs/server.md) until Ctrl-C or SIGTERM, then finish the
    /// requests in flight and stop.
    Serve(ServeArgs),
    /// Serve the memory over MCP on stdin and stdout (docs/mcp.md) until the client closes
    /// them; every call is the tenant (and user) given here or in the environment.
    Mcp(McpArgs),
}

/// `mcp`.
#[derive(Debug, Args)]
pub(crate) struct McpArgs {
    /// The configuration file (TOML; docs/server.md) for the store and the limits (its tokens
    /// are not used: the caller is the process's tenant). Without one: the defaults, then the
    /// `AGENT_MEMORY_SERVER_*` environment variables.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// The tenant of every call (default: `AGENT_MEMORY_SERVER_MCP_TENANT`, else `default`).
    #[arg(long)]
    pub(crate) tenant: Option<String>,
    /// The user of every call, if any (default: `AGENT_MEMORY_SERVER_MCP_USER`).
    #[arg(long)]
    pub(crate) user: Option<String>,
}

/// `serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The configuration file (TOML; docs/server.md). Without one: the defaults, then the
    /// `AGENT_MEMORY_SERVER_*` environment variables.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// The listen address (`ip:port`), over the file and the environment.
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen: Option<String>,
}

/// Which tenants a listing covers.
#[derive(Debug, Args)]
pub(crate) struct TenantsArgs {
    /// The tenant.
    #[arg(long, default_value = agent_memory::scope::DEFAULT_TENANT, conflicts_with = "all_tenants")]
    pub(crate) tenant: String,
    /// Every tenant the store holds.
    #[arg(long)]
    pub(crate) all_tenants: bool,
}

/// `threads`.
#[derive(Debug, Args)]
pub(crate) struct ThreadsArgs {
    /// Which tenants.
    #[command(flatten)]
    pub(crate) tenants: TenantsArgs,
    /// Only this user's threads.
    #[arg(long)]
    pub(crate) user: Option<String>,
    /// Only this agent's threads.
    #[arg(long)]
    pub(crate) agent: Option<String>,
}

/// Whose data: a tenant, and a user and an agent of it (`forget`; `show`, whose help says it
/// of the thread).
#[derive(Debug, Args)]
pub(crate) struct OwnerArgs {
    /// The tenant.
    #[arg(long, default_value = agent_memory::scope::DEFAULT_TENANT)]
    pub(crate) tenant: String,
    /// Only this user's data.
    #[arg(long)]
    pub(crate) user: Option<String>,
    /// Only this agent's data.
    #[arg(long)]
    pub(crate) agent: Option<String>,
}

/// The flags that address one thread or session. The user and agent flags say what they are
/// of a thread (help written as clap writes a doc comment's: without its final period).
#[derive(Debug, Args)]
#[command(
    mut_arg("user", |arg| arg.help("The user, if the thread has one")),
    mut_arg("agent", |arg| arg.help("The agent, if the thread has one"))
)]
pub(crate) struct ScopeArgs {
    /// The tenant, and the thread's user and agent if it has them.
    #[command(flatten)]
    pub(crate) owner: OwnerArgs,
    /// The session.
    #[arg(long)]
    pub(crate) session: String,
    /// The source (the provider that owns the data).
    #[arg(long, default_value = agent_memory::scope::DEFAULT_SOURCE)]
    pub(crate) source: String,
}

/// `show`.
#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// The thread or session.
    #[command(flatten)]
    pub(crate) scope: ScopeArgs,
    /// Only the last N active messages.
    #[arg(long, conflicts_with_all = ["all", "archived", "session_state"])]
    pub(crate) last: Option<usize>,
    /// Every message, active and archived.
    #[arg(long, conflicts_with_all = ["archived", "session_state"])]
    pub(crate) all: bool,
    /// Only the archived messages.
    #[arg(long, conflicts_with = "session_state")]
    pub(crate) archived: bool,
    /// The session's state (JSON) instead of the thread's messages.
    #[arg(long)]
    pub(crate) session_state: bool,
}

/// The formats of `export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ExportFormat {
    /// The agent-memory bundle (JSON Lines): every selected thread and session.
    Bundle,
    /// One thread as Microsoft Agent Framework's `AgentSession.to_dict()`.
    AgentFramework,
    /// One thread as a JSON array of LlamaIndex `ChatMessage.model_dump()`s.
    Llamaindex,
}

/// `export`.
#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// The file to write (standard output when left out or `-`).
    #[arg(long, short)]
    pub(crate) output: Option<PathBuf>,
    /// The format.
    #[arg(long, value_enum, default_value = "bundle")]
    pub(crate) format: ExportFormat,
    /// The tenant (every tenant with --all-tenants, bundle only).
    #[arg(long, default_value = agent_memory::scope::DEFAULT_TENANT)]
    pub(crate) tenant: String,
    /// Every tenant (bundle only).
    #[arg(long)]
    pub(crate) all_tenants: bool,
    /// Only this user's data.
    #[arg(long)]
    pub(crate) user: Option<String>,
    /// Only this agent's data.
    #[arg(long)]
    pub(crate) agent: Option<String>,
    /// Only this session (required by the agent-framework and llamaindex formats).
    #[arg(long)]
    pub(crate) session: Option<String>,
}

/// `import`.
#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    /// The bundle file (`-` for standard input).
    pub(crate) file: PathBuf,
}

/// `migrate`.
#[derive(Debug, Args)]
pub(crate) struct MigrateArgs {
    /// The store to copy from.
    #[arg(long)]
    pub(crate) from: String,
    /// The store to copy to.
    #[arg(long)]
    pub(crate) to: String,
    /// Only these tenants (repeat the flag; every tenant when left out).
    #[arg(long)]
    pub(crate) tenant: Vec<String>,
}

/// `forget`.
#[derive(Debug, Args)]
pub(crate) struct ForgetArgs {
    /// The tenant, and only this user's or agent's data.
    #[command(flatten)]
    pub(crate) owner: OwnerArgs,
    /// Only this session's data.
    #[arg(long)]
    pub(crate) session: Option<String>,
    /// Count what would be deleted; change nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Confirm forgetting a whole tenant.
    #[arg(long)]
    pub(crate) yes: bool,
}

/// `doctor`.
#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// The store to check (else --url).
    #[arg(value_name = "URL")]
    pub(crate) target: Option<String>,
}

/// `upgrade`.
#[derive(Debug, Args)]
pub(crate) struct UpgradeArgs {
    /// The store to create or migrate (else --url).
    #[arg(value_name = "URL")]
    pub(crate) target: Option<String>,
}
