//! Agents: models, tools, sub-agents, memory and the generation loop.

pub mod message;
pub mod model;
pub mod offline;
pub mod tool;

pub use message::{FinishReason, Message, Role, ToolCall, ToolResult, Usage};
pub use model::{
    ChunkStream, GenerationSettings, Model, ModelChunk, ModelError, ModelErrorKind, ModelRequest,
    ModelResponse, ToolSpec,
};
pub use offline::OfflineModel;
pub use tool::{Approval, FnTool, MAX_PROGRESS_BYTES, Tool, ToolContext, ToolProgress};

pub mod definition;
pub mod durable;
pub mod memory;
pub mod partial;
pub mod runtime;

pub use definition::{
    Agent, Hooks, InstructionContext, Instructions, MemoryConfig, OperationContext, Outcome,
};
pub use durable::{
    ApprovalAnswer, ApprovalRequest, RunInput, agent_of_run, is_denial, resume_data, run_result,
    run_workflow_id,
};
pub use memory::{ConversationKey, ConversationStore, InMemoryConversationStore};
pub use runtime::{
    AgentError, AgentEvent, AgentHub, Caller, GenerateOptions, MAX_CONTEXT_LIMIT,
    MAX_HISTORY_BYTES, MAX_MESSAGE_CHARS, ObjectResult, TextResult,
};
