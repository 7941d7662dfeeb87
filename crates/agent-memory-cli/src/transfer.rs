//! The commands that move memory: export, import, migrate; and doctor.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::time::Instant;

use agent_memory::bundle::{self, BundleSummary, Progress, Selection, Tenants};
use agent_memory::interop::agent_framework::session::export_session;
use agent_memory::interop::llamaindex::{LiOptions, to_llamaindex};
use agent_memory::{AgentSession, ChatMessage, Scope, StoredMessage, Stores, Window, redact_url};
use indicatif::ProgressBar;
use serde_json::{Value, json};

use crate::cli::{ExportArgs, ExportFormat, ImportArgs, MigrateArgs, OwnerArgs, ScopeArgs};
use crate::commands::{agent_id, scope_of, session_id, tenant_id, user_id};
use crate::error::{CliResult, Doing, Failed};
use crate::output::{print, print_json, progress};
use crate::{open, open_or_create};

/// Where `export` writes: a file or standard output.
fn output(args: &ExportArgs) -> CliResult<Box<dyn Write + Send>> {
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
        owner: OwnerArgs {
            tenant: args.tenant.clone(),
            user: args.user.clone(),
            agent: args.agent.clone(),
        },
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

/// The selection of the export flags.
fn selection_of(args: &ExportArgs) -> CliResult<Selection> {
    let mut selection = if args.all_tenants {
        Selection::new(Tenants::All)
    } else {
        Selection::new(Tenants::one(tenant_id(&args.tenant)?))
    };
    if let Some(user) = &args.user {
        selection = selection.with_user(user_id(user)?);
    }
    if let Some(agent) = &args.agent {
        selection = selection.with_agent(agent_id(agent)?);
    }
    if let Some(session) = &args.session {
        selection = selection.with_session(session_id(session)?);
    }
    Ok(selection)
}

/// Moves a progress bar as a bundle operation advances.
struct Bar(ProgressBar);

impl Progress for Bar {
    fn thread_started(&self, _scope: &Scope, messages: u64) {
        self.0.inc_length(messages);
    }

    fn messages_copied(&self, n: u64) {
        self.0.inc(n);
    }

    fn session_copied(&self, _scope: &Scope) {}
}

/// A summary as JSON.
fn summary_json(summary: &BundleSummary) -> Value {
    json!({
        "threads": summary.threads,
        "messages": summary.messages,
        "archived": summary.archived,
        "sessions": summary.sessions,
        "block_states": summary.block_states,
    })
}

/// Exports a bundle.
async fn export_bundle(stores: &Stores, args: &ExportArgs, json: bool) -> CliResult<()> {
    let selection = selection_of(args)?;
    let to_stdout = args.output.as_ref().is_none_or(|p| p.as_os_str() == "-");
    let mut out = output(args)?;
    let bar = Bar(progress(Some(0), json, "messages"));
    let summary = bundle::export(&stores.endpoint(), &selection, &mut out, &bar)
        .await
        .doing(|| "could not export the bundle".to_owned())?;
    out.flush()
        .doing(|| "could not write the bundle".to_owned())?;
    bar.0.finish_and_clear();
    if to_stdout {
        // The bundle is the output: the summary goes to stderr, for people only.
        if !json {
            eprintln!("Exported {summary}.");
        }
        return Ok(());
    }
    if json {
        return print_json(&summary_json(&summary));
    }
    print(&format!("Exported {summary}."))
}

/// `import`.
pub(crate) async fn import(stores: &Stores, args: &ImportArgs, json: bool) -> CliResult<()> {
    let input: Box<dyn BufRead + Send> = if args.file.as_os_str() == "-" {
        Box::new(BufReader::new(std::io::stdin()))
    } else {
        let file = File::open(&args.file)
            .doing(|| format!("could not open the bundle {}", args.file.display()))?;
        Box::new(BufReader::new(file))
    };
    let bar = Bar(progress(Some(0), json, "messages"));
    let summary = bundle::import(&stores.endpoint(), input, &bar)
        .await
        .doing(|| {
            format!(
                "could not import the bundle {} (importing it again is safe and finishes the work)",
                args.file.display()
            )
        })?;
    bar.0.finish_and_clear();
    if json {
        return print_json(&summary_json(&summary));
    }
    print(&format!("Imported {summary}."))
}

/// `migrate`: copies, verifies, and prints the report and the throughput.
pub(crate) async fn migrate(args: &MigrateArgs, json: bool) -> CliResult<()> {
    let selection = if args.tenant.is_empty() {
        Selection::new(Tenants::All)
    } else {
        let tenants: CliResult<Vec<_>> = args.tenant.iter().map(|t| tenant_id(t)).collect();
        Selection::new(Tenants::listed(tenants?))
    };
    let (from_shown, to_shown) = (redact_url(&args.from), redact_url(&args.to));
    let from = open(&args.from).await?;
    let to = open_or_create(&args.to).await?;
    let bar = Bar(progress(Some(0), json, "messages"));
    let started = Instant::now();
    let report = bundle::migrate(&from.endpoint(), &to.endpoint(), &selection, &bar)
        .await
        .doing(|| {
            format!(
                "could not migrate from {from_shown} to {to_shown} (running the same migrate \
                 again is safe and resumes it)"
            )
        })?;
    let seconds = started.elapsed().as_secs_f64();
    bar.0.finish_and_clear();
    let copied = report.copied.messages;
    let rate = if seconds > 0.0 {
        copied as f64 / seconds
    } else {
        0.0
    };
    if json {
        return print_json(&json!({
            "from": from_shown,
            "to": to_shown,
            "copied": summary_json(&report.copied),
            "already_present": report.already_present,
            "verified_threads": report.verified_threads,
            "verified_sessions": report.verified_sessions,
            "seconds": seconds,
            "messages_per_second": rate,
        }));
    }
    print(&format!("Migrated {from_shown} to {to_shown}: {report}."))?;
    print(&format!(
        "{copied} messages in {seconds:.2} s: {rate:.0} messages/s."
    ))
}

/// `doctor`: the diagnosis of [`agent_memory::doctor()`]; exits non-zero when a check failed.
pub(crate) async fn doctor(url: &str, json: bool) -> CliResult<()> {
    let diagnosis = agent_memory::doctor(url)
        .await
        .doing(|| format!("could not check the store at {}", redact_url(url)))?;
    if json {
        let value = serde_json::to_value(&diagnosis)
            .doing(|| "could not write the diagnosis as JSON".to_owned())?;
        print_json(&value)?;
    } else {
        print(&diagnosis.to_string())?;
    }
    if diagnosis.healthy() {
        Ok(())
    } else {
        Err(Failed::msg(format!(
            "the store at {} failed a check (see above)",
            diagnosis.url
        )))
    }
}

/// `upgrade`: opens the store at `url` as an application does, which creates its tables or
/// applies its pending migrations, then checks that it now opens as current.
pub(crate) async fn upgrade(url: &str, json: bool) -> CliResult<()> {
    let shown = redact_url(url);
    drop(open_or_create(url).await?);
    drop(open(url).await?);
    if json {
        print_json(&json!({ "url": shown, "schema": "current" }))
    } else {
        print(&format!(
            "The store at {shown} is at the current schema (tables created or migrated where \
             needed)."
        ))
    }
}
