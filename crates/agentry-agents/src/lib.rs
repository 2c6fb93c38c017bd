//! agentry-agents: agents on top of the engine (`agentry-engine`). Models, tools, sub-agents,
//! memory, the generation loop, durable runs (an internal workflow of the engine per agent)
//! with their approvals, the offline model, and what a run records of itself ([`run_log`]).

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
pub use tool::{
    Approval, FnTool, MAX_PROGRESS_BYTES, Tool, ToolContext, ToolProgress, WithApproval,
};

pub mod definition;
pub mod durable;
mod generation;
pub mod guardrail;
pub mod judge;
pub mod memory;
pub mod partial;
pub mod recall;
pub mod run_log;
pub mod runtime;
pub mod scorers;
pub mod telemetry;
pub mod usage;
pub mod working_memory;

pub use definition::{
    Agent, Budget, Hooks, InstructionContext, Instructions, MemoryConfig, OperationContext, Outcome,
};
pub use durable::{RunInput, agent_of_run, is_denial, resume_data, run_result, run_workflow_id};
pub use generation::{
    AgentError, AgentEvent, GenerateOptions, MemoryOwner, ObjectResult, TextResult,
};
pub use memory::{ConversationKey, ConversationStore, InMemoryConversationStore};
pub use recall::{
    Embedder, OfflineEmbedder, RecallError, RecallQuery, RecallScope, RecallStore, RecalledKind,
    RecalledMessage, SemanticRecall, recall,
};
pub use run_log::{ApprovalAnswer, ApprovalRequest, EntryKind, JournalStep, RunEvent, RunJournal};
pub use runtime::{AgentHub, MAX_CONTEXT_LIMIT, MAX_HISTORY_BYTES};
pub use scorers::{LiveScoring, Score, ScoreInput, ScoreStore, Scorer, StoredScore};
pub use working_memory::{
    InMemoryWorkingMemoryStore, StoredWorkingMemory, WorkingMemory, WorkingMemoryError,
    WorkingMemoryKey, WorkingMemoryScope, WorkingMemoryStore,
};
