//! The AI SDK's UI message stream protocol (v1), as consumed by `useChat`, `DefaultChatTransport`
//! and `readUIMessageStream` of the `ai` npm package: `start`, `start-step`,
//! `text-start`/`text-delta`/`text-end`, `tool-input-start`/`tool-input-available`,
//! `tool-output-available`/`tool-output-error`, `finish-step`, `finish`, then `[DONE]`.
//! Chunks carry only the fields the protocol defines, so that strict parsers accept them.

use agentry_core::agent::AgentEvent;
use serde_json::{Value, json};

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

    /// The chunks that open the message.
    pub fn start(&mut self) -> Vec<Value> {
        self.step_open = true;
        vec![
            json!({"type": "start", "messageId": self.message_id}),
            json!({"type": "start-step"}),
        ]
    }

    fn close_text(&mut self, out: &mut Vec<Value>) {
        if let Some(id) = self.text_id.take() {
            out.push(json!({"type": "text-end", "id": id}));
        }
    }

    fn ensure_step(&mut self, out: &mut Vec<Value>) {
        if !self.step_open {
            self.step_open = true;
            out.push(json!({"type": "start-step"}));
        }
    }

    fn close_step(&mut self, out: &mut Vec<Value>) {
        self.close_text(out);
        if self.step_open {
            self.step_open = false;
            out.push(json!({"type": "finish-step"}));
        }
    }

    /// The chunks for one agent event. After `finish` or `error` the stream is over.
    pub fn on(&mut self, ev: &AgentEvent) -> Vec<Value> {
        let mut out = Vec::new();
        match ev {
            AgentEvent::TextDelta(d) => {
                self.ensure_step(&mut out);
                let id = match &self.text_id {
                    Some(id) => id.clone(),
                    None => {
                        let id = format!("text-{}", self.texts);
                        self.texts += 1;
                        out.push(json!({"type": "text-start", "id": id}));
                        self.text_id = Some(id.clone());
                        id
                    }
                };
                out.push(json!({"type": "text-delta", "id": id, "delta": d}));
            }
            AgentEvent::ToolCall(c) => {
                self.ensure_step(&mut out);
                self.close_text(&mut out);
                out.push(json!({
                    "type": "tool-input-start",
                    "toolCallId": c.tool_call_id,
                    "toolName": c.tool_name,
                }));
                out.push(json!({
                    "type": "tool-input-available",
                    "toolCallId": c.tool_call_id,
                    "toolName": c.tool_name,
                    "input": c.args,
                }));
            }
            AgentEvent::ToolResult(r) => {
                if r.is_error {
                    let text = r
                        .result
                        .get("error")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .unwrap_or_else(|| r.result.to_string());
                    out.push(json!({
                        "type": "tool-output-error",
                        "toolCallId": r.tool_call_id,
                        "errorText": text,
                    }));
                } else {
                    out.push(json!({
                        "type": "tool-output-available",
                        "toolCallId": r.tool_call_id,
                        "output": r.result,
                    }));
                }
                // The model's next call is a new step.
                self.close_step(&mut out);
            }
            AgentEvent::PartialObject(_) => {}
            AgentEvent::Finish {
                finish_reason,
                usage,
                ..
            } => {
                self.close_step(&mut out);
                out.push(json!({
                    "type": "finish",
                    "messageMetadata": {"finishReason": finish_reason.as_str(), "usage": usage},
                }));
            }
            AgentEvent::Error(e) => {
                self.close_text(&mut out);
                out.push(json!({"type": "error", "errorText": e.to_string()}));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentry_core::agent::{FinishReason, ToolCall, ToolResult, Usage};

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
