//! The commands that move memory: export, import, migrate; and doctor.

use std::fs::File;
use std::io::{BufWriter, Write};

use agent_memory::interop::agent_framework::session::export_session;
use agent_memory::interop::llamaindex::{LiOptions, to_llamaindex};
use agent_memory::{AgentSession, ChatMessage, StoredMessage, Stores, Window};
use serde_json::Value;

use crate::cli::{ExportArgs, ExportFormat, ImportArgs, MigrateArgs, ScopeArgs};
use crate::commands::scope_of;
use crate::error::{CliResult, Doing, Failed};

/// Where `export` writes: a file or standard output.
fn output(args: &ExportArgs) -> CliResult<Box<dyn Write>> {
    match &args.output {
        Some(path) if path.as_os_str() != "-" => {
            let file = File::create(path)
                .doing(|| format!("could not create the file {}", path.display()))?;
            Ok(Box::new(BufWriter::new(file)))
        }
        _ => Ok(Box::new(BufWriter::new(std::io::stdout()))),
    }
}

/// `export`.
pub(crate) async fn export(stores: &Stores, args: &ExportArgs, json: bool) -> CliResult<()> {
    match args.format {
        ExportFormat::Bundle => export_bundle(stores, args, json).await,
        ExportFormat::AgentFramework | ExportFormat::Llamaindex => {
            export_thread(stores, args).await
        }
    }
}

/// Exports one thread in a peer's JSON.
async fn export_thread(stores: &Stores, args: &ExportArgs) -> CliResult<()> {
    let Some(session) = &args.session else {
        return Err(Failed::msg(
            "the agent-framework and llamaindex formats export one thread: name it with --session",
        ));
    };
    if args.all_tenants {
        return Err(Failed::msg(
            "the agent-framework and llamaindex formats export one thread: --all-tenants is for \
             bundles",
        ));
    }
    let scope = scope_of(&ScopeArgs {
        tenant: args.tenant.clone(),
        user: args.user.clone(),
        agent: args.agent.clone(),
        session: session.clone(),
        source: agent_memory::scope::DEFAULT_SOURCE.to_owned(),
    })?;
    let messages: Vec<ChatMessage> = stores
        .history
        .read(&scope, Window::All)
        .await
        .doing(|| format!("could not read thread {scope}"))?
        .into_iter()
        .map(StoredMessage::into_message)
        .collect();
    let document = match args.format {
        ExportFormat::AgentFramework => {
            let stored = stores
                .sessions
                .load(&scope)
                .await
                .doing(|| format!("could not load the session state of {scope}"))?;
            let session = match stored {
                Some(stored) => AgentSession::deserialize_at(&stored.state, &scope)
                    .doing(|| format!("could not read the session state of {scope}"))?,
                None => AgentSession::new(scope.clone()),
            };
            export_session(&session, &messages)
        }
        _ => Value::Array(
            messages
                .iter()
                .map(|m| to_llamaindex(m, &LiOptions::default()))
                .collect(),
        ),
    };
    let mut out = output(args)?;
    serde_json::to_writer_pretty(&mut out, &document)
        .doing(|| "could not write the export".to_owned())?;
    writeln!(out)
        .and_then(|()| out.flush())
        .doing(|| "could not write the export".to_owned())
}

/// Exports a bundle.
async fn export_bundle(stores: &Stores, args: &ExportArgs, json: bool) -> CliResult<()> {
    let _ = (stores, args, json);
    Err(Failed::msg(
        "bundle export is not in this build yet (it waits on memory-bundle)",
    ))
}

/// `import`.
pub(crate) async fn import(stores: &Stores, args: &ImportArgs, json: bool) -> CliResult<()> {
    let _ = (stores, args, json);
    Err(Failed::msg(
        "import is not in this build yet (it waits on memory-bundle)",
    ))
}

/// `migrate`.
pub(crate) async fn migrate(args: &MigrateArgs, json: bool) -> CliResult<()> {
    let _ = (args, json);
    Err(Failed::msg(
        "migrate is not in this build yet (it waits on memory-bundle)",
    ))
}

/// `doctor`.
pub(crate) async fn doctor(url: &str, json: bool) -> CliResult<()> {
    let _ = (url, json);
    Err(Failed::msg(
        "doctor is not in this build yet (it waits on agent_memory::doctor)",
    ))
}
