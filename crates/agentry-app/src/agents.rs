//! The agent use cases: the catalogue, and generating text or objects, whole or streamed. The
//! caller decides whose conversation memory a generation reads and what its context says about
//! the user; an unknown agent is answered before anything about the body.

use std::sync::Arc;

use agentry_agents::{AgentEvent, Message, TextResult, Tool, ToolContext};
use agentry_engine::{AgentId, UserId};
use serde_json::Map;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::App;
use crate::caller::Caller;
use crate::error::{AppError, Code};
use crate::input::{BodyKind, Generation, check_key, read_body};
use crate::limits;
use crate::wire::agents::{AgentDetail, AgentSummary};

impl App {
    /// Every registered agent, in registration order.
    pub fn agent_summaries(&self) -> Vec<AgentSummary> {
        self.agents
            .agents()
            .iter()
            .map(|a| AgentSummary::new(&self.agents, a))
            .collect()
    }

    /// How many agents are registered: registration only adds agents (and an agent does not
    /// change once registered), so this names the catalogue's state.
    pub fn agent_count(&self) -> usize {
        self.agents.agents().len()
    }

    /// One agent, with its tools' definitions.
    pub fn agent(&self, id: &AgentId) -> Result<AgentDetail, AppError> {
        let agent = self.agents.require(id).map_err(AppError::agent)?;
        Ok(AgentDetail::new(&self.agents, &agent))
    }

    /// A generation request of `caller` to agent `id` from a route's body: a 404 for an unknown
    /// agent first, then the body read (a 400 naming the field at fault).
    pub fn generation(
        &self,
        caller: &Caller,
        id: &AgentId,
        body: &Value,
        kind: BodyKind,
    ) -> Result<Generation, AppError> {
        self.agents.require(id).map_err(AppError::agent)?;
        let generation = read_body(body, kind)?;
        self.for_caller(caller, generation)
    }

    /// A question in one user message, with an optional conversation (MCP's `ask_<agent>`,
    /// A2A's messages): `conversation` is its id and the field it came in, which a refusal
    /// names (`conversationId`, `message.contextId`).
    pub fn question(
        &self,
        caller: &Caller,
        id: &AgentId,
        text: &str,
        conversation: Option<(&str, String)>,
    ) -> Result<Generation, AppError> {
        self.agents.require(id).map_err(AppError::agent)?;
        let mut options = crate::input::parse_options(None)?;
        if let Some((field, conversation_id)) = conversation {
            check_key(field, &conversation_id)?;
            options.conversation_id = Some(conversation_id);
        }
        let generation = Generation {
            input: vec![Message::user(text)],
            options,
            schema: None,
            durability: Default::default(),
        };
        self.for_caller(caller, generation)
    }

    /// A generation of a client's messages, made the caller's: its messages checked against
    /// the limits (every route, MCP and A2A come through here, in memory and durable alike),
    /// the verified user in its context, and whose memory.
    fn for_caller(
        &self,
        caller: &Caller,
        mut generation: Generation,
    ) -> Result<Generation, AppError> {
        limits::check_messages(&generation.input)?;
        let options = &mut generation.options;
        caller.inject(&mut options.context, &mut options.user_id);
        options.memory_owner = caller.memory();
        Ok(generation)
    }

    /// Generates text (`cancel` stops it: the client went away).
    pub async fn generate_text(
        &self,
        id: &AgentId,
        generation: Generation,
        cancel: CancellationToken,
    ) -> Result<TextResult, AppError> {
        self.agents
            .generate_text(id, generation.input, generation.options, cancel)
            .await
            .map_err(AppError::agent)
    }

    /// Generates an object valid against the generation's schema.
    pub async fn generate_object(
        &self,
        id: &AgentId,
        generation: Generation,
        cancel: CancellationToken,
    ) -> Result<Value, AppError> {
        let schema = generation.schema.unwrap_or_default();
        self.agents
            .generate_object(id, generation.input, schema, generation.options, cancel)
            .await
            .map(|r| r.object)
            .map_err(AppError::agent)
    }

    /// Streams a generation's events (the stream ends when the receiver is dropped).
    pub fn stream_text(
        &self,
        id: &AgentId,
        generation: Generation,
    ) -> Result<mpsc::Receiver<AgentEvent>, AppError> {
        self.agents
            .stream_text(
                id,
                generation.input,
                generation.options,
                CancellationToken::new(),
            )
            .map_err(AppError::agent)
    }

    /// Streams an object as it grows, then the validated object.
    pub fn stream_object(
        &self,
        id: &AgentId,
        generation: Generation,
    ) -> Result<mpsc::Receiver<AgentEvent>, AppError> {
        let schema = generation.schema.unwrap_or_default();
        self.agents
            .stream_object(
                id,
                generation.input,
                schema,
                generation.options,
                CancellationToken::new(),
            )
            .map_err(AppError::agent)
    }

    /// Every agent's tools, each once, with the agent that lends it its context (the first
    /// that has it), in registration order.
    pub fn tools(&self) -> Vec<(AgentId, Arc<dyn Tool>)> {
        let mut tools: Vec<(AgentId, Arc<dyn Tool>)> = Vec::new();
        for agent in self.agents.agents() {
            for tool in &agent.tools {
                if !tools.iter().any(|(_, t)| t.name() == tool.name()) {
                    tools.push((AgentId::from(&agent.id), tool.clone()));
                }
            }
        }
        tools
    }

    /// Calls a registered tool directly (MCP's tools): its context holds the verified user.
    pub async fn call_tool(
        &self,
        caller: &Caller,
        name: &str,
        args: Value,
        cancel: CancellationToken,
    ) -> Result<Value, AppError> {
        let (agent, tool) = self
            .tools()
            .into_iter()
            .find(|(_, t)| t.name() == name)
            .ok_or_else(|| AppError::bad_request(format!("Unknown tool {name}")))?;
        // A direct call never bypasses a person's approval (fails closed).
        if tool.approval().is_some_and(|rule| rule.applies(&args)) {
            return Err(AppError::new(
                Code::ApprovalRequired,
                format!(
                    "Tool {name} needs a person's approval for these arguments: ask its agent, \
                     whose run waits for the approval"
                ),
            ));
        }
        let mut context = Map::new();
        let mut user_id = None;
        caller.inject(&mut context, &mut user_id);
        let ctx = ToolContext {
            agent_id: agent.into_string(),
            user_id: user_id.map(UserId::into_string),
            owner: caller.user_id().map(UserId::into_string),
            conversation_id: None,
            context,
            cancel,
            depth: 0,
            run_id: None,
            attempt: 1,
            progress: None,
        };
        tool.call(args, ctx)
            .await
            .map_err(|message| AppError::new(Code::ToolFailed, message))
    }
}
