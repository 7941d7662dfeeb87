//! A long conversation outgrows the short-term window; its early part is flushed into a
//! `VectorMemoryBlock` on the embedded Qdrant engine, embedded by the local all-MiniLM-L6-v2
//! model. A later question about that early part brings the fact back into the `<memory>`
//! the model would see.
//!
//! ```text
//! export AGENT_MEMORY_MODEL_DIR=$(cargo xtask fetch-model)
//! cargo run -p vector-recall
//! ```
#![cfg_attr(test, allow(clippy::arithmetic_side_effects, clippy::indexing_slicing))]

use std::sync::Arc;

use memory_core::memory::Memory;
use memory_core::memory::blocks::VectorMemoryBlock;
use memory_core::{
    ChatMessage, Embedder, InMemoryHistoryStore, InMemorySessionStore, Scope, VectorStore,
};
use memory_vector::{BertEmbedder, MODEL_DIR_ENV, QdrantEdgeStore};

/// The fact the user mentions once, early in the conversation.
const FACT: &str = "By the way, the spare key to the office is hidden under the blue flower pot \
                    next to the back door.";

/// Small talk that pushes the fact out of the short-term window.
const FILLER: [(&str, &str); 7] = [
    (
        "Can you explain how TCP congestion control works?",
        "TCP starts slowly, grows its congestion window until packets are lost, then backs off \
         and probes again; algorithms such as CUBIC and BBR differ in how they grow and react.",
    ),
    (
        "What are good stretches after a long run?",
        "Try standing quad stretches, hamstring stretches, calf stretches against a wall and a \
         gentle hip flexor lunge, holding each for about thirty seconds.",
    ),
    (
        "Summarise the plot of a heist movie in two sentences.",
        "A crew of specialists plans an impossible robbery of a casino vault. Everything goes \
         wrong until the final twist reveals the plan was something else all along.",
    ),
    (
        "How do I keep basil alive on a windowsill?",
        "Give it six hours of sun, water when the top of the soil is dry and pinch off the \
         flower buds so the plant keeps making leaves.",
    ),
    (
        "Which sorting algorithm should I use for nearly sorted data?",
        "Insertion sort or Timsort: both run close to linear time when only a few elements are \
         out of place.",
    ),
    (
        "Recommend a board game for four players.",
        "Try a cooperative game where everyone races to cure diseases before they spread, or a \
         trading game about settling an island.",
    ),
    (
        "How long should I boil an egg for a runny yolk?",
        "About six minutes in gently boiling water, then straight into cold water to stop the \
         cooking.",
    ),
];

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(model_dir) = std::env::var_os(MODEL_DIR_ENV) else {
        return Err(format!(
            "{MODEL_DIR_ENV} is not set: run `export {MODEL_DIR_ENV}=$(cargo xtask fetch-model)` \
             first"
        )
        .into());
    };
    println!(
        "embedder: all-MiniLM-L6-v2 from {}",
        model_dir.to_string_lossy()
    );
    let embedder: Arc<dyn Embedder> = Arc::new(BertEmbedder::load_async(model_dir).await?);
    let dir = std::env::temp_dir().join(format!("vector-recall-{}", std::process::id()));
    let store: Arc<dyn VectorStore> =
        Arc::new(QdrantEdgeStore::open_with_dimensions(&dir, embedder.dimensions()).await?);
    println!("vector store: Qdrant edge shard in {}", dir.display());

    let memory = Memory::builder(
        Scope::session("vector-recall-demo")?,
        Arc::new(InMemoryHistoryStore::new()),
        Arc::new(InMemorySessionStore::new()),
    )
    // A tiny window so the conversation overflows it quickly.
    .token_limit(400)
    .chat_history_token_ratio(0.5)
    .token_flush_size(40)
    .block(Arc::new(
        VectorMemoryBlock::new(embedder, store).with_similarity_top_k(1),
    ))
    .build()?;

    let (mut flushed, mut flushes) = (0usize, 0u32);
    let mut turns = vec![(
        FACT,
        "Noted: the spare office key is under the blue flower pot.",
    )];
    turns.extend(FILLER);
    for (question, answer) in turns {
        let report = memory
            .put_messages(&[ChatMessage::user(question), ChatMessage::assistant(answer)])
            .await?;
        if report.messages > 0 {
            flushed = flushed.saturating_add(report.messages);
            flushes = flushes.saturating_add(1);
        }
    }
    println!("flushed {flushed} messages in {flushes} batches out of the short-term window");

    let question = ChatMessage::user("I'm locked out of the office. Where is the spare key?");
    let messages = memory.get(std::slice::from_ref(&question)).await?;
    let memory_text = messages
        .iter()
        .map(ChatMessage::text)
        .find(|t| t.starts_with("<memory>"))
        .unwrap_or_default();
    println!("\nwhat the model would see as memory:\n{memory_text}\n");
    let recalled = memory_text.contains("blue flower pot");
    println!(
        "recalled the flushed fact: {}",
        if recalled { "yes" } else { "no" }
    );
    drop(memory);
    let _ = std::fs::remove_dir_all(&dir);
    if recalled {
        Ok(())
    } else {
        Err("the flushed fact was not recalled".into())
    }
}
