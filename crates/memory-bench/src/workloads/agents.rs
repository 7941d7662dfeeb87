//! `agent_run`: [`Agent::run`] over the backend's history store, with [`ConstantReplyModel`],
//! an offline model, so the figure is the memory pipeline alone.

use std::sync::Arc;

use memory_core::{Agent, AgentBuilder, ChatMessage, ChatModel, ChatRequest, ChatResponse};

use super::threads::{Growth, grow};
use crate::BenchResult;
use crate::backends::Stores;
use crate::harness::{Ctx, Report};

/// The agent whose history the session of `session_roundtrip` holds, and the agent's name in
/// `agent_run` and `memory_turn`.
pub(super) const AGENT: &str = "assistant-agent";
/// The answer of [`ConstantReplyModel`]: about as long as a data set message.
const CONSTANT_REPLY: &str = "Thanks for the update. I checked the release branch and the \
    billing service: the config file migrated as expected, the design doc is reviewed, and the \
    pricing table needs one more pass before Friday. I will follow up with the hiring committee \
    after lunch and post the notes in the weekly sync.";

/// A chat model for the benchmark: answers every request with the same assistant message,
/// offline and at no cost, so `agent_run` measures the memory pipeline alone.
#[derive(Debug, Clone)]
pub(crate) struct ConstantReplyModel {
    reply: String,
}

impl ConstantReplyModel {
    /// A model answering `reply` to everything.
    pub(crate) fn new(reply: impl Into<String>) -> Self {
        Self {
            reply: reply.into(),
        }
    }
}

#[memory_core::async_trait]
impl ChatModel for ConstantReplyModel {
    async fn complete(&self, _request: &ChatRequest) -> memory_core::Result<ChatResponse> {
        Ok(ChatResponse {
            messages: vec![ChatMessage::assistant(self.reply.clone())],
            ..ChatResponse::default()
        })
    }
}

/// The agent of the agent workloads ([`AGENT`], brief instructions, [`ConstantReplyModel`]
/// answering [`CONSTANT_REPLY`]) on the backend's history store, to finish building.
pub(super) fn constant_reply_agent(stores: &Stores) -> AgentBuilder {
    Agent::builder(
        AGENT,
        Arc::new(ConstantReplyModel::new(CONSTANT_REPLY)),
        Arc::clone(&stores.history),
    )
    .instructions("You are a helpful assistant. Answer briefly.")
}

/// `agent_run`: `Agent::run` on a session whose thread holds N messages, with
/// [`ConstantReplyModel`]. One op = one run (window read, request, model, one append of input
/// and answer). The ops run in [`rounds`](super::threads) on fresh sessions of N.
pub(super) async fn agent_run(ctx: &Ctx<'_>, stores: &Stores) -> BenchResult<Vec<Report>> {
    let growth = Growth::new(ctx, 10, 200, 2);
    let agent = constant_reply_agent(stores).build()?;
    let grown = grow(ctx, stores, growth, async |session, k, timer| {
        let input = ChatMessage::user(ctx.later(k).text.clone());
        timer
            .time(stores, async || {
                Ok(agent.run(input, session).await?.window_len)
            })
            .await
    })
    .await?;
    let report = grown
        .report(ctx, 2)
        .field("window_len_avg", grown.window_len_avg());
    Ok(vec![grown.with_rounds(ctx, report)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::AgentSession;

    use crate::backends;
    use crate::harness::fresh_scope;

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn the_constant_model_answers_the_agent() {
        let stores = (backends::find("in-memory").unwrap().connect)()
            .await
            .unwrap();
        let agent = Agent::builder(
            AGENT,
            Arc::new(ConstantReplyModel::new("ok")),
            stores.history.clone(),
        )
        .build()
        .unwrap();
        let mut session = AgentSession::new(fresh_scope().unwrap());
        let run = agent.run("hello", &mut session).await.unwrap();
        assert_eq!(run.text(), "ok");
        assert_eq!(
            stores.history.count(session.scope()).await.unwrap().active,
            2
        );
    }
}
