//! The chunks of the AI SDK's UI message stream protocol (v1), the events of
//! POST /agents/{id}/chat. Each chunk carries only the fields the protocol defines, so that
//! strict parsers (the `ai` package validates every chunk) accept them.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::agents::{FinishReason, Usage};

/// A chunk of the UI message stream, by `type`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum UiMessageChunk {
    /// The assistant message begins.
    #[serde(rename_all = "camelCase")]
    Start { message_id: String },
    /// A model call begins.
    StartStep,
    /// A text part begins.
    TextStart { id: String },
    /// New text of the part `id`.
    TextDelta { id: String, delta: String },
    /// The text part `id` ends.
    TextEnd { id: String },
    #[serde(rename_all = "camelCase")]
    ToolInputStart {
        tool_call_id: String,
        tool_name: String,
    },
    /// The tool's arguments.
    #[serde(rename_all = "camelCase")]
    ToolInputAvailable {
        tool_call_id: String,
        tool_name: String,
        input: Value,
    },
    /// The tool's result.
    #[serde(rename_all = "camelCase")]
    ToolOutputAvailable { tool_call_id: String, output: Value },
    /// A tool call waits for a person's approval (a durable run): `addToolApprovalResponse`
    /// answers it, then `sendMessage` sends the answer back (or POST the approval route).
    #[serde(rename_all = "camelCase")]
    ToolApprovalRequest {
        approval_id: String,
        tool_call_id: String,
    },
    /// The person denied the tool call: it did not run.
    #[serde(rename_all = "camelCase")]
    ToolOutputDenied { tool_call_id: String },
    /// The tool failed.
    #[serde(rename_all = "camelCase")]
    ToolOutputError {
        tool_call_id: String,
        error_text: String,
    },
    /// A model call ends.
    FinishStep,
    /// The message ends: why (`finishReason`, which the `ai` package's `onFinish` reads; also
    /// in the metadata), and the usage.
    #[serde(rename_all = "camelCase")]
    Finish {
        finish_reason: FinishReason,
        message_metadata: FinishMetadata,
    },
    /// The generation failed.
    #[serde(rename_all = "camelCase")]
    Error { error_text: String },
}

/// The `messageMetadata` of the `finish` chunk.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FinishMetadata {
    pub finish_reason: FinishReason,
    pub usage: Usage,
}
