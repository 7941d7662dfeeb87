//! The quickstart: an agent with memory, offline and without a key.
//!
//! It plays a short bundled conversation through an [`Agent`] on the default store (or the one
//! `AGENT_MEMORY_URL` names: a SQLite file, PostgreSQL, MySQL/MariaDB or Redis). The agent has a
//! [`Memory`] as its context provider: a small short-term window whose oldest messages are
//! flushed into a [`FactExtractionMemoryBlock`], which keeps the facts a model extracts from
//! them in the session store. The model is [`OfflineStandInModel`], a clearly named stand-in
//! that needs no network: it answers from what it is sent, so you can watch what the memory
//! gives it. Every turn prints what the model is sent: the `<memory>` text of the block and the
//! history window. Half-way, the session is serialized to JSON, restored into a new session
//! object, and the conversation goes on; the last questions are answered from the memory after
//! the window dropped the messages that held the answers.
//!
//! Run it with `cargo run -p quickstart`; add `RUST_LOG=info` to see the tracing spans.
#![cfg_attr(test, allow(clippy::arithmetic_side_effects, clippy::indexing_slicing))]

mod stand_in;

use std::error::Error as StdError;
use std::process::ExitCode;
use std::sync::Arc;

use agent_memory::memory::blocks::FactExtractionMemoryBlock;
use agent_memory::openai::OpenAiChatModel;
use agent_memory::{
    Agent, AgentSession, ChatMessage, ChatModel, HistoryStore, Memory, Role, Scope, Stores,
    TiktokenCounter, TokenCounter, Window,
};
use stand_in::OfflineStandInModel;

/// The bundled conversation: what the user says, turn by turn.
const CONVERSATION: &[&str] = &[
    "Hi! My name is Dana and I am on call this week.",
    "The billing service paged me at 02:13 UTC for a slow query.",
    "What is my name?",
    "I added an index on invoices(customer_id) and latency recovered.",
    "Please remember that the postmortem is due on Friday.",
    "The dashboards look green again.",
    "What is my name?",
    "Which service paged me?",
    "What is still open for me?",
];

/// After how many turns the session is serialized and restored.
const RESTORE_AFTER: usize = 5;

/// The memory's token limit (short-term messages and `<memory>` text together).
const TOKEN_LIMIT: u64 = 400;
/// The share of [`TOKEN_LIMIT`] the short-term window may use before its oldest messages are
/// flushed into the fact block: 100 tokens, about two turns of this conversation.
const WINDOW_RATIO: f64 = 0.25;
/// Tokens flushed at least, once a flush starts: about one turn.
const FLUSH_TOKENS: u64 = 30;

/// What a played conversation showed, turn by turn.
#[derive(Debug, Default)]
struct Transcript {
    /// The assistant's answers.
    answers: Vec<String>,
    /// The `<memory>` text the model was sent, empty when the memory had nothing yet.
    memory: Vec<String>,
    /// The history window the model was sent (the messages after the instructions, without
    /// the input).
    windows: Vec<Vec<ChatMessage>>,
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // `error: …`, then one `caused by: …` line per cause.
            for line in agent_memory::error_lines(error.as_ref()) {
                eprintln!("{line}");
            }
            ExitCode::FAILURE
        }
    }
}

/// An error with a sentence saying what was being done, and the error that stopped it.
#[derive(Debug)]
struct Failed {
    doing: String,
    source: agent_memory::Error,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.doing)
    }
}

impl StdError for Failed {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&self.source)
    }
}

async fn run() -> Result<(), Box<dyn StdError>> {
    let url =
        env_value(agent_memory::URL_ENV).unwrap_or_else(|| agent_memory::DEFAULT_URL.to_owned());
    let stores = open_stores(&url).await?;
    println!(
        "store: {} (set {} to use another: postgres://…, mysql://…, redis://…)",
        agent_memory::redact_url(&url),
        agent_memory::URL_ENV
    );
    // A blank key counts as unset, as a blank URL does: the quickstart stays offline.
    let model: Arc<dyn ChatModel> = if env_value("OPENAI_API_KEY").is_some() {
        let model = OpenAiChatModel::from_env()?;
        println!("model: {} (OPENAI_API_KEY is set)", model.model());
        Arc::new(model)
    } else {
        println!("model: OfflineStandInModel (set OPENAI_API_KEY to talk to a real model)");
        Arc::new(OfflineStandInModel)
    };
    let scope = Scope::session("quickstart")?.with_user("dana")?;
    play(&stores, model, &scope, kept_after_exit(&url)).await?;
    Ok(())
}

/// The environment variable `name`, trimmed; `None` when it is unset, blank or not Unicode.
fn env_value(name: &str) -> Option<String> {
    non_blank(std::env::var(name).ok())
}

/// `value` trimmed, `None` when it is blank.
fn non_blank(value: Option<String>) -> Option<String> {
    value
        .map(|value| value.trim().to_owned())
        .filter(|value| !value.is_empty())
}

/// Whether the store at `url` outlives the process: not for `memory:` nor an in-memory SQLite
/// database, whose conversation a second run cannot continue.
fn kept_after_exit(url: &str) -> bool {
    let url = url.to_ascii_lowercase();
    !(url.starts_with("memory:") || url.contains(":memory:") || url.contains("mode=memory"))
}

/// Opens the stores at `url`; the error names the URL with its password redacted.
async fn open_stores(url: &str) -> Result<Stores, Failed> {
    agent_memory::open(url).await.map_err(|source| Failed {
        doing: format!(
            "could not open the store at {} (set {} to another URL, or unset it for the default \
             {})",
            agent_memory::redact_url(url),
            agent_memory::URL_ENV,
            agent_memory::DEFAULT_URL
        ),
        source,
    })
}

/// Plays [`CONVERSATION`] in the session at `scope`, continuing it if an earlier run saved it,
/// and prints every turn; `kept_after_exit` says whether a second run can continue it.
async fn play(
    stores: &Stores,
    model: Arc<dyn ChatModel>,
    scope: &Scope,
    kept_after_exit: bool,
) -> Result<Transcript, Box<dyn StdError>> {
    // The memory: a small short-term window over the agent's own thread, flushed into a fact
    // block whose facts (and the mark of what it was given) live in the session store.
    let memory = Memory::builder(
        scope.clone(),
        stores.history.clone(),
        stores.sessions.clone(),
    )
    .token_limit(TOKEN_LIMIT)
    .chat_history_token_ratio(WINDOW_RATIO)
    .token_flush_size(FLUSH_TOKENS)
    .block(Arc::new(FactExtractionMemoryBlock::new(model.clone())))
    .build()?;
    println!(
        "memory: a short-term window of {} tokens; older messages are flushed into the block \
         fact_extraction_memory, which keeps the facts the model extracts from them",
        memory.config().flush_threshold()
    );
    // The agent reads every active message; the memory's flush keeps them few.
    let agent = Agent::builder("helper", model, stores.history.clone())
        .instructions("You are a concise on-call assistant.")
        .window(Window::All)
        .context_provider(Arc::new(memory))
        .build()?;
    let counter = TiktokenCounter::o200k();

    // The session lives in the session store: a second run picks it up and continues the
    // conversation of the first (the thread itself is in the history store).
    let (mut session, mut version) = match stores.sessions.load(scope).await? {
        Some(saved) => {
            let session = AgentSession::deserialize_at(&saved.state, scope)?;
            let stored = stores.history.count(scope).await?;
            println!(
                "continuing the conversation of an earlier run: {} turns, {} stored messages \
                 ({} flushed into the memory)",
                session.turns(),
                stored.active.saturating_add(stored.archived),
                stored.archived
            );
            (session, Some(saved.version))
        }
        None => {
            if kept_after_exit {
                println!("starting a new conversation (run me again to continue it)");
            } else {
                println!(
                    "starting a new conversation (this store is in process memory: it is gone \
                     when I exit, so a second run starts over)"
                );
            }
            (AgentSession::new(scope.clone()), None)
        }
    };
    let (first_half, second_half) = CONVERSATION.split_at(RESTORE_AFTER);
    let mut transcript = Transcript::default();
    let mut play_turns = async |session: &mut AgentSession, texts: &[&str]| {
        for text in texts {
            turn(&agent, stores, session, text, &counter, &mut transcript).await?;
        }
        Ok::<_, agent_memory::Error>(())
    };

    play_turns(&mut session, first_half).await?;

    // Save the session as JSON, restore it into a fresh session object, and carry on: what an
    // application does between two requests, or two processes.
    let state = session.to_json()?;
    version = Some(
        stores
            .sessions
            .save(scope, &serde_json::from_str(&state)?, version)
            .await?,
    );
    println!(
        "\n== session serialized: {} bytes of JSON, {} turns; restoring it ==",
        state.len(),
        session.turns()
    );
    let mut session = AgentSession::deserialize_at(&serde_json::from_str(&state)?, scope)?;

    play_turns(&mut session, second_half).await?;
    stores
        .sessions
        .save(scope, &session.serialize()?, version)
        .await?;

    let count = stores.history.count(session.scope()).await?;
    println!(
        "\nstored thread: {} messages in the window, {} flushed into the memory and archived \
         (nothing was deleted)",
        count.active, count.archived
    );
    Ok(transcript)
}

/// Runs one turn and prints what the model was sent, and what the memory did after it.
async fn turn(
    agent: &Agent,
    stores: &Stores,
    session: &mut AgentSession,
    text: &str,
    counter: &TiktokenCounter,
    transcript: &mut Transcript,
) -> Result<(), agent_memory::Error> {
    println!("\n-- turn {} --", session.turns().saturating_add(1));
    println!("user: {text}");
    let archived_before = stores.history.count(session.scope()).await?.archived;
    let run = agent.run(text, session).await?;
    let tokens: u32 = run
        .request
        .messages
        .iter()
        .map(|m| counter.count_message(m))
        .sum();
    let (instructions, memory) = match run.request.messages.first() {
        Some(m) if m.role == Role::System => {
            let text = m.text();
            match text.split_once("<memory>") {
                Some((before, after)) => (before.trim_end().to_owned(), format!("<memory>{after}")),
                None => (text, String::new()),
            }
        }
        _ => (String::new(), String::new()),
    };
    println!(
        "model is sent {} messages (~{tokens} tokens): the instructions{}, a history window of {} \
         message(s), the input",
        run.request.messages.len(),
        if memory.is_empty() {
            " (the memory has nothing yet)"
        } else {
            " with the memory"
        },
        run.window_len,
    );
    let first_window = usize::from(
        run.request
            .messages
            .first()
            .is_some_and(|m| m.role == Role::System),
    );
    if first_window == 1 {
        println!("  [system   ] {instructions}");
        for line in memory.lines() {
            println!("              {line}");
        }
    }
    let window = run
        .request
        .messages
        .get(first_window..run.request.messages.len().saturating_sub(1))
        .unwrap_or_default()
        .to_vec();
    for m in run.request.messages.iter().skip(first_window) {
        println!("  [{:<9}] {}", m.role.as_str(), preview(m));
    }
    let answer = run.text();
    println!("assistant: {answer}");

    let count = stores.history.count(session.scope()).await?;
    let flushed = count.archived.saturating_sub(archived_before);
    if flushed > 0 {
        println!(
            "memory: flushed the {flushed} oldest message(s) of the window into \
             fact_extraction_memory; {} stay in the window",
            count.active
        );
    }
    transcript.answers.push(answer);
    transcript.memory.push(memory);
    transcript.windows.push(window);
    Ok(())
}

fn preview(message: &ChatMessage) -> String {
    let text = message.text();
    let short: String = text.chars().take(70).collect();
    if short.len() == text.len() {
        short
    } else {
        format!("{short}…")
    }
}

#[cfg(test)]
mod tests {
    use agent_memory::memory::BLOCK_STATE_SOURCE;
    use agent_memory::{ErrorKind, error_lines};

    use super::*;

    async fn in_memory_sqlite() -> Stores {
        agent_memory::open("sqlite::memory:").await.unwrap()
    }

    #[tokio::test]
    async fn the_last_questions_are_answered_from_the_memory_after_the_window_dropped_them() {
        let stores = in_memory_sqlite().await;
        let scope = Scope::session("quickstart-test").unwrap();
        let t = play(&stores, Arc::new(OfflineStandInModel), &scope, false)
            .await
            .unwrap();
        let n = CONVERSATION.len();
        assert_eq!(
            (t.answers.len(), t.memory.len(), t.windows.len()),
            (n, n, n)
        );

        let last = &t.answers[n - 3..];
        assert_eq!(last[0], "Your name is Dana (from the memory I was sent).");
        assert!(last[1].contains("billing service paged you"), "{}", last[1]);
        assert!(
            last[2].contains("the postmortem is due on Friday"),
            "{}",
            last[2]
        );
        for answer in last {
            assert!(
                answer.ends_with("(from the memory I was sent)."),
                "{answer}"
            );
        }
        // Each of those turns' window no longer holds the user's message that said it.
        for (window, said) in
            t.windows[n - 3..]
                .iter()
                .zip(["My name is", "paged me", "postmortem"])
        {
            for m in window.iter().filter(|m| m.role == Role::User) {
                let text = m.text();
                assert!(!text.contains(said), "{text:?} is still in the window");
            }
        }
        // The memory started empty, and the block's rendered text holds the facts.
        assert_eq!(t.memory[0], "");
        let memory = &t.memory[n - 1];
        assert!(
            memory.starts_with("<memory>\n<fact_extraction_memory>\n"),
            "{memory}"
        );
        for fact in [
            "<fact>The user's name is Dana and the user is on call this week.</fact>",
            "<fact>The billing service paged the user at 02:13 UTC for a slow query.</fact>",
            "<fact>The postmortem is due on Friday.</fact>",
        ] {
            assert!(memory.contains(fact), "{fact} is not in {memory}");
        }
        // The facts are kept in the session store, beside the session.
        let states = stores
            .sessions
            .load(&scope.clone().with_source(BLOCK_STATE_SOURCE).unwrap())
            .await
            .unwrap()
            .unwrap();
        assert!(
            states
                .state
                .to_string()
                .contains("The postmortem is due on Friday."),
            "{}",
            states.state
        );
        assert!(stores.sessions.load(&scope).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn a_second_run_continues_the_first_and_keeps_each_fact_once() {
        let stores = in_memory_sqlite().await;
        let scope = Scope::session("quickstart-again").unwrap();
        play(&stores, Arc::new(OfflineStandInModel), &scope, false)
            .await
            .unwrap();
        let second = play(&stores, Arc::new(OfflineStandInModel), &scope, false)
            .await
            .unwrap();
        // The second run starts with the facts of the first.
        assert!(second.memory[0].contains("The postmortem is due on Friday."));
        let memory = second.memory.last().unwrap();
        assert_eq!(
            memory.matches("The user's name is Dana").count(),
            1,
            "{memory}"
        );
        let saved = stores.sessions.load(&scope).await.unwrap().unwrap();
        let session = AgentSession::deserialize_at(&saved.state, &scope).unwrap();
        assert_eq!(session.turns() as usize, 2 * CONVERSATION.len());
    }

    #[tokio::test]
    async fn a_store_that_cannot_be_opened_is_a_sentence_without_the_password() {
        let err = open_stores("postgres://nobody:secretpw@127.0.0.1:1/x")
            .await
            .unwrap_err();
        let lines = error_lines(&err);
        assert_eq!(
            lines[0],
            "error: could not open the store at postgres://nobody:***@127.0.0.1:1/x (set \
             AGENT_MEMORY_URL to another URL, or unset it for the default \
             sqlite://agent-memory.db)"
        );
        assert!(
            lines[1].starts_with("caused by: unavailable (postgres open): "),
            "{lines:?}"
        );
        assert!(!format!("{lines:?} {err:?}").contains("secretpw"));

        let err = open_stores("ftp://x").await.unwrap_err();
        assert_eq!(
            error_lines(&err)[1],
            "caused by: invalid_input: no agent-memory backend handles URLs with the scheme \"ftp\""
        );
    }

    #[test]
    fn a_blank_variable_counts_as_unset() {
        assert_eq!(non_blank(None), None);
        assert_eq!(non_blank(Some(String::new())), None);
        assert_eq!(non_blank(Some(" \t\n".to_owned())), None);
        assert_eq!(
            non_blank(Some(" sk-x \n".to_owned())).as_deref(),
            Some("sk-x")
        );
    }

    #[test]
    fn only_stores_outside_the_process_continue_in_a_second_run() {
        for url in [
            "sqlite://agent-memory.db",
            "postgres://postgres@127.0.0.1:5432/test",
            "mysql://root@127.0.0.1:3306/test",
            "redis://127.0.0.1:6379",
        ] {
            assert!(kept_after_exit(url), "{url}");
        }
        for url in [
            "memory:",
            "MEMORY:",
            "sqlite::memory:",
            "sqlite://file:x?mode=memory",
        ] {
            assert!(!kept_after_exit(url), "{url}");
        }
    }

    #[test]
    fn every_cause_is_a_line_and_repeats_are_left_out() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        let err = Failed {
            doing: "could not open the store at redis://127.0.0.1:1".to_owned(),
            source: agent_memory::Error::new(ErrorKind::Unavailable, "cannot reach Redis")
                .with_source(io),
        };
        assert_eq!(
            error_lines(&err),
            [
                "error: could not open the store at redis://127.0.0.1:1",
                "caused by: unavailable: cannot reach Redis",
                "caused by: connection refused",
            ]
        );
        let repeated = agent_memory::Error::new(ErrorKind::Backend, "disk full: no space left")
            .with_source(std::io::Error::other("no space left"));
        assert_eq!(
            error_lines(&repeated),
            ["error: backend: disk full: no space left"]
        );
    }
}
