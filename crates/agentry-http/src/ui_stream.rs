//! The AI SDK's UI message stream protocol (v1), as consumed by `useChat`, `DefaultChatTransport`
//! and `readUIMessageStream` of the `ai` npm package: `start`, `start-step`,
//! `text-start`/`text-delta`/`text-end`, `tool-input-start`/`tool-input-available`,
//! `tool-output-available`/`tool-output-error`, `finish-step`, `finish`, then `[DONE]`.
//! Chunks carry only the fields the protocol defines, so that strict parsers accept them.

use agentry_agents::AgentEvent;
use serde_json::Value;

use crate::wire::chat::{FinishMetadata, UiMessageChunk as Chunk};

/// The response header that marks the protocol.
pub const HEADER: (&str, &str) = ("x-vercel-ai-ui-message-stream", "v1");

/// Turns agent events into UI message chunks, keeping track of open text parts and steps.
#[derive(Debug)]
pub struct UiMessageStream {
    message_id: String,
    text_id: Option<String>,
    texts: usize,
    step_open: bool,
}

impl UiMessageStream {
    pub fn new(message_id: String) -> Self {
        Self {
            message_id,
            text_id: None,
            texts: 0,
            step_open: false,
        }
    }

    /// The chunks that continue a message the client has (a run its approval answers resumed):
    /// `start` with its id, and the next step opens with the next model call's output (the
    /// tool outputs of the answered calls come first, outside a step, as the `ai` package's
    /// own streams send them).
    pub fn resume(&mut self) -> Vec<Chunk> {
        vec![Chunk::Start {
            message_id: self.message_id.clone(),
        }]
    }

    /// The chunks that open the message.
    pub fn start(&mut self) -> Vec<Chunk> {
        self.step_open = true;
        vec![
            Chunk::Start {
                message_id: self.message_id.clone(),
            },
            Chunk::StartStep,
        ]
    }

    fn close_text(&mut self, out: &mut Vec<Chunk>) {
        if let Some(id) = self.text_id.take() {
            out.push(Chunk::TextEnd { id });
        }
    }

    fn ensure_step(&mut self, out: &mut Vec<Chunk>) {
        if !self.step_open {
            self.step_open = true;
            out.push(Chunk::StartStep);
        }
    }

    fn close_step(&mut self, out: &mut Vec<Chunk>) {
        self.close_text(out);
        if self.step_open {
            self.step_open = false;
            out.push(Chunk::FinishStep);
        }
    }

    /// The chunks for one agent event. After `finish` or `error` the stream is over.
    pub fn on(&mut self, ev: &AgentEvent) -> Vec<Chunk> {
        let mut out = Vec::new();
        match ev {
            AgentEvent::TextDelta(d) => {
                self.ensure_step(&mut out);
                let id = match &self.text_id {
                    Some(id) => id.clone(),
                    None => {
                        let id = format!("text-{}", self.texts);
                        self.texts += 1;
                        out.push(Chunk::TextStart { id: id.clone() });
                        self.text_id = Some(id.clone());
                        id
                    }
                };
                out.push(Chunk::TextDelta {
                    id,
                    delta: d.clone(),
                });
            }
            AgentEvent::ToolCall(c) => {
                self.ensure_step(&mut out);
                self.close_text(&mut out);
                out.push(Chunk::ToolInputStart {
                    tool_call_id: c.tool_call_id.clone(),
                    tool_name: c.tool_name.clone(),
                });
                out.push(Chunk::ToolInputAvailable {
                    tool_call_id: c.tool_call_id.clone(),
                    tool_name: c.tool_name.clone(),
                    input: c.args.clone(),
                });
            }
            AgentEvent::ToolApprovalRequest(r) => {
                self.ensure_step(&mut out);
                self.close_text(&mut out);
                out.push(Chunk::ToolApprovalRequest {
                    approval_id: r.approval_id.clone(),
                    tool_call_id: r.tool_call_id.clone(),
                });
            }
            AgentEvent::ToolResult(r) if agentry_agents::is_denial(r) => {
                out.push(Chunk::ToolOutputDenied {
                    tool_call_id: r.tool_call_id.clone(),
                });
                self.close_step(&mut out);
            }
            AgentEvent::ToolResult(r) => {
                if r.is_error {
                    let text = r
                        .result
                        .get("error")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .unwrap_or_else(|| r.result.to_string());
                    out.push(Chunk::ToolOutputError {
                        tool_call_id: r.tool_call_id.clone(),
                        error_text: text,
                    });
                } else {
                    out.push(Chunk::ToolOutputAvailable {
                        tool_call_id: r.tool_call_id.clone(),
                        output: r.result.clone(),
                    });
                }
                // The model's next call is a new step.
                self.close_step(&mut out);
            }
            // A tool's progress is in the raw stream (`tool-progress`), not the UI stream.
            AgentEvent::PartialObject(_) | AgentEvent::ToolProgress { .. } => {}
            AgentEvent::Finish {
                finish_reason,
                usage,
                ..
            } => {
                self.close_step(&mut out);
                out.push(Chunk::Finish {
                    finish_reason: (*finish_reason).into(),
                    message_metadata: FinishMetadata {
                        finish_reason: (*finish_reason).into(),
                        usage: (*usage).into(),
                    },
                });
            }
            AgentEvent::Error(e) => {
                self.close_text(&mut out);
                out.push(Chunk::Error {
                    error_text: e.to_string(),
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentry_agents::{FinishReason, ToolCall, ToolResult, Usage};
    use serde_json::json;

    #[test]
    fn a_tool_using_answer_opens_and_closes_everything() {
        let mut s = UiMessageStream::new("m1".into());
        let mut all = s.start();
        let call = ToolCall {
            tool_call_id: "c1".into(),
            tool_name: "get_weather".into(),
            args: json!({"city": "Oslo"}),
        };
        for ev in [
            AgentEvent::ToolCall(call.clone()),
            AgentEvent::ToolResult(ToolResult {
                tool_call_id: "c1".into(),
                tool_name: "get_weather".into(),
                args: call.args.clone(),
                result: json!({"ok": 1}),
                is_error: false,
            }),
            AgentEvent::TextDelta("Hi ".into()),
            AgentEvent::TextDelta("there".into()),
            AgentEvent::Finish {
                finish_reason: FinishReason::Stop,
                usage: Usage::default(),
                text: "Hi there".into(),
                object: None,
            },
        ] {
            all.extend(s.on(&ev));
        }
        let all: Vec<Value> = all
            .iter()
            .map(|c| serde_json::to_value(c).unwrap())
            .collect();
        let types: Vec<&str> = all.iter().map(|v| v["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [
                "start",
                "start-step",
                "tool-input-start",
                "tool-input-available",
                "tool-output-available",
                "finish-step",
                "start-step",
                "text-start",
                "text-delta",
                "text-delta",
                "text-end",
                "finish-step",
                "finish"
            ]
        );
    }
}
