//! What a durable run records of itself, written and read here only: the events of its log
//! ([`RunEvent`]; the engine stores them as a layer's events, without reading them) and its
//! journal ([`EntryKind`]'s keys, read back as a typed view by [`RunJournal`]).

use agentry_engine::ExecutionRecord;
use agentry_engine::engine::is_wake_record;
use agentry_engine::event::{EventKind, LayerEvent};
use agentry_engine::store::{StepRecord, StepStatus};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::generation::AgentError;
use crate::guardrail::Tripped;
use crate::message::{FinishReason, Message, ToolCall, ToolResult, Usage};
use crate::model::{ModelError, ModelErrorKind, ModelResponse};

/// The one step of a run workflow; its journal holds the run's calls.
pub const RUN_STEP: &str = "run";

/// A tool call that waits for a person's approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequest {
    /// Names the request within its run (`ap-<model call>-<tool call>`).
    pub approval_id: String,
    pub tool_call_id: String,
    pub tool_name: String,
    pub args: Value,
    /// After it, the request counts as denied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<DateTime<Utc>>,
}

/// The answer to a tool approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalAnswer {
    pub approval_id: String,
    pub approved: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Nobody answered before the deadline (a denial).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expired: bool,
    /// The verified user who answered, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// Why a run failed, as the agents layer knows it: the failed `run` step's output and the
/// run's `agent-failed` event, so that a durable run answers with the failure's own code (a
/// provider's 503, a guardrail, a budget) on every path, as a generation held in memory does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
pub enum RunFailure {
    /// The model (every model tried) failed.
    Model {
        error: ModelErrorKind,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_ms: Option<u64>,
    },
    /// A guardrail tripped.
    Guardrail { tripped: Tripped },
    /// A token budget is spent.
    Budget {
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_secs: Option<u64>,
    },
    /// Anything else, as its message.
    Other { message: String },
}

impl From<&AgentError> for RunFailure {
    fn from(e: &AgentError) -> Self {
        match e {
            AgentError::Model(m) => RunFailure::Model {
                error: m.kind,
                message: m.message.clone(),
                retry_after_ms: m
                    .retry_after
                    .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            },
            AgentError::GuardrailTripped(t) => RunFailure::Guardrail { tripped: t.clone() },
            AgentError::BudgetExceeded {
                message,
                retry_after,
            } => RunFailure::Budget {
                message: message.clone(),
                retry_after_secs: retry_after.map(|d| d.as_secs()),
            },
            other => RunFailure::Other {
                message: other.to_string(),
            },
        }
    }
}

impl RunFailure {
    /// The agent error it stands for.
    pub fn to_error(&self) -> AgentError {
        match self {
            RunFailure::Model {
                error,
                message,
                retry_after_ms,
            } => AgentError::Model(ModelError {
                kind: *error,
                message: message.clone(),
                retry_after: retry_after_ms.map(std::time::Duration::from_millis),
            }),
            RunFailure::Guardrail { tripped } => AgentError::GuardrailTripped(tripped.clone()),
            RunFailure::Budget {
                message,
                retry_after_secs,
            } => AgentError::BudgetExceeded {
                message: message.clone(),
                retry_after: retry_after_secs.map(std::time::Duration::from_secs),
            },
            RunFailure::Other { message } => AgentError::Run(message.clone()),
        }
    }
}

/// An event of a durable agent run, in the execution's event log (`type`: `agent-model-call`,
/// ...) or, for a piece of text and a tool's progress, for its live subscribers only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
pub enum RunEvent {
    /// A model call answered: its text, the tools it asks for, its usage. `call` counts the
    /// run's model calls from 1.
    AgentModelCall {
        call: u32,
        text: String,
        tool_calls: Vec<ToolCall>,
        usage: Usage,
        finish_reason: FinishReason,
    },
    /// A tool call ended (a denied call too: its result says so).
    AgentToolResult { result: ToolResult, attempt: u32 },
    /// A tool call waits for a person's approval.
    AgentApprovalRequest { request: ApprovalRequest },
    /// A tool approval was answered (by a person, or by its deadline: a denial).
    AgentApprovalAnswer { answer: ApprovalAnswer },
    /// The run failed (the engine's `workflow-error` follows): why, with its code.
    AgentFailed { failure: RunFailure },
    /// A piece of the run's text as the model streams it. Live only (the model call's event
    /// carries the whole text).
    AgentTextDelta { delta: String },
    /// A tool call reported progress. Live only.
    AgentToolProgress {
        tool_call_id: String,
        tool_name: String,
        data: Value,
    },
}

impl RunEvent {
    /// The run's event `kind` is; `None` for an event of the engine or of another layer.
    pub fn of(kind: &EventKind) -> Option<Self> {
        match kind {
            EventKind::Layer(layer) => layer.decode(),
            _ => None,
        }
    }

    /// Whether it is for live subscribers only, never stored.
    fn is_live(&self) -> bool {
        matches!(
            self,
            RunEvent::AgentTextDelta { .. } | RunEvent::AgentToolProgress { .. }
        )
    }
}

impl From<RunEvent> for EventKind {
    fn from(event: RunEvent) -> Self {
        EventKind::Layer(if event.is_live() {
            LayerEvent::live(&event)
        } else {
            LayerEvent::stored(&event)
        })
    }
}

/// What a record of a run's journal is: the run step's journal holds `model-<k>` (the k-th
/// model call's answer), `tool-<k>-<i>` (the i-th tool call of that answer) and
/// `approval-<k>-<i>` (a call that waits for, then has, a person's answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    ModelCall,
    ToolCall,
    Approval,
}

impl EntryKind {
    fn prefix(self) -> &'static str {
        match self {
            EntryKind::ModelCall => "model",
            EntryKind::ToolCall => "tool",
            EntryKind::Approval => "approval",
        }
    }

    /// The journal key of the `call`-th model call's record (`index`: of its `index`-th tool
    /// call).
    pub(crate) fn key(self, call: u32, index: Option<usize>) -> String {
        numbered(self.prefix(), call, index)
    }

    /// The kind of the record under `key` (a key of neither a model call nor an approval is a
    /// tool call's).
    fn of(key: &str) -> Self {
        match key.split('-').next() {
            Some("model") => EntryKind::ModelCall,
            Some("approval") => EntryKind::Approval,
            _ => EntryKind::ToolCall,
        }
    }
}

fn numbered(prefix: &str, call: u32, index: Option<usize>) -> String {
    match index {
        Some(i) => format!("{prefix}-{call}-{i}"),
        None => format!("{prefix}-{call}"),
    }
}

/// The id of the approval of the `call`-th model call's `index`-th tool call (`ap-<k>-<i>`).
pub(crate) fn approval_id(call: u32, index: usize) -> String {
    numbered("ap", call, Some(index))
}

/// The order of journal keys: model call, then its approvals, then its tool calls, by index.
fn key_order(key: &str) -> (u32, u8, u32) {
    let mut parts = key.split('-').skip(1);
    let call = parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    let index = parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    let rank = match EntryKind::of(key) {
        EntryKind::ModelCall => 0,
        EntryKind::Approval => 1,
        EntryKind::ToolCall => 2,
    };
    (call, rank, index)
}

/// A run's journal, read from its execution record: its calls in order. The typed view of a
/// run that the wire renders.
pub struct RunJournal<'a> {
    entries: Vec<(&'a str, &'a StepRecord)>,
    /// The failed run step's output.
    failure: Option<&'a Value>,
}

/// One recorded step of a run, read: a model call (with its answer once it has one), a tool
/// call (its call, and its result once finished) or an approval (the call it asks for, and the
/// answer once given).
#[derive(Debug)]
pub struct JournalStep<'a> {
    /// Its name in the run (`model-1`, `tool-1-0`, `approval-1-0`).
    pub key: &'a str,
    pub kind: EntryKind,
    pub record: &'a StepRecord,
    pub answer: Option<ModelResponse>,
    pub call: Option<ToolCall>,
    pub result: Option<ToolResult>,
    pub approval: Option<ApprovalAnswer>,
    /// The earlier messages semantic recall added to the first model call's context.
    pub recalled: Vec<Message>,
}

fn parsed<T: serde::de::DeserializeOwned>(value: Option<&Value>) -> Option<T> {
    T::deserialize(value?).ok()
}

impl<'a> RunJournal<'a> {
    pub fn of(rec: &'a ExecutionRecord) -> Self {
        let prefix = format!("{RUN_STEP}/");
        let mut entries: Vec<(&str, &StepRecord)> = rec
            .progress
            .steps
            .iter()
            // The engine's own record under the step (`$wake`: what resumed it) is no call.
            .filter(|(id, _)| !is_wake_record(id))
            .filter_map(|(id, r)| Some((id.strip_prefix(&prefix)?, r.as_ref())))
            .collect();
        entries.sort_by_key(|(key, _)| key_order(key));
        let failure = rec
            .progress
            .steps
            .get(RUN_STEP)
            .filter(|r| r.status == StepStatus::Failed)
            .and_then(|r| r.output.as_ref());
        Self { entries, failure }
    }

    /// Why the run failed, when it failed in its generation (none for a run that failed
    /// otherwise, or was recorded before failures were).
    pub fn failure(&self) -> Option<RunFailure> {
        parsed(self.failure)
    }

    fn of_kind(&self, kind: EntryKind) -> impl Iterator<Item = &(&'a str, &'a StepRecord)> {
        self.entries
            .iter()
            .filter(move |(key, _)| EntryKind::of(key) == kind)
    }

    /// The model's answers, in order.
    pub fn model_calls(&self) -> impl Iterator<Item = ModelResponse> + '_ {
        self.of_kind(EntryKind::ModelCall)
            .filter(|(_, r)| r.is_finished())
            .filter_map(|(_, r)| parsed(r.output.as_ref()))
    }

    /// The approval requests still waiting for an answer.
    pub fn pending(&self) -> Vec<ApprovalRequest> {
        self.of_kind(EntryKind::Approval)
            .filter(|(_, r)| r.output.is_none())
            .filter_map(|(_, r)| parsed(Some(&r.input)))
            .collect()
    }

    /// A pending or answered request by its id, and whether it is answered.
    pub fn approval(&self, approval_id: &str) -> Option<(ApprovalRequest, bool)> {
        self.of_kind(EntryKind::Approval).find_map(|(_, r)| {
            let req: ApprovalRequest = parsed(Some(&r.input))?;
            (req.approval_id == approval_id).then(|| (req, r.output.is_some()))
        })
    }

    /// The text and usage so far.
    pub fn totals(&self) -> (String, Usage) {
        let mut text = String::new();
        let mut usage = Usage::default();
        for m in self.model_calls() {
            text.push_str(&m.text);
            usage += m.usage;
        }
        (text, usage)
    }

    /// Its steps, in order.
    pub fn steps(&self) -> Vec<JournalStep<'a>> {
        self.entries
            .iter()
            .map(|&(key, record)| {
                let kind = EntryKind::of(key);
                let mut step = JournalStep {
                    key,
                    kind,
                    record,
                    answer: None,
                    call: None,
                    result: None,
                    approval: None,
                    recalled: Vec::new(),
                };
                match kind {
                    EntryKind::ModelCall => {
                        step.answer = parsed(record.output.as_ref());
                        // The first call's record holds the messages it was sent.
                        if let Some(sent) = parsed::<Vec<Message>>(Some(&record.input)) {
                            step.recalled = crate::recall::recalled_from_prompt(&sent);
                        }
                    }
                    EntryKind::ToolCall => {
                        step.call = parsed(record.input.get("call").or(Some(&record.input)));
                        step.result = parsed(record.output.as_ref());
                    }
                    EntryKind::Approval => {
                        step.call =
                            parsed::<ApprovalRequest>(Some(&record.input)).map(|a| ToolCall {
                                tool_call_id: a.tool_call_id,
                                tool_name: a.tool_name,
                                args: a.args,
                            });
                        step.approval = parsed(record.output.as_ref());
                    }
                }
                step
            })
            .collect()
    }

    /// The run's messages: the request's (`input`), then each answer and its tool results.
    pub fn messages(&self, input: &[Message]) -> Vec<Message> {
        let mut out = input.to_vec();
        let results: Vec<ToolResult> = self
            .of_kind(EntryKind::ToolCall)
            .filter(|(_, r)| r.status == StepStatus::Completed)
            .filter_map(|(_, r)| parsed(r.output.as_ref()))
            .collect();
        for m in self.model_calls() {
            out.push(Message::tool_calls(m.text.clone(), m.tool_calls.clone()));
            for c in &m.tool_calls {
                if let Some(r) = results.iter().find(|r| r.tool_call_id == c.tool_call_id) {
                    out.push(Message::tool_result(r.clone()));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run's events are stored in the engine's log with the bytes they had when the engine
    /// knew them (`{"type": "agent-…", …}`), and read back as they were written.
    #[test]
    fn a_run_event_is_stored_as_it_was_written_and_read_back() {
        let result: ToolResult = serde_json::from_value(serde_json::json!({
            "toolCallId": "c1", "toolName": "lookup_order", "args": {"orderId": "42"},
            "result": {"total": 250}, "isError": false
        }))
        .expect("a tool result");
        let event = RunEvent::AgentToolResult { result, attempt: 2 };
        let kind = EventKind::from(event.clone());
        assert!(kind.is_stored());
        assert_eq!(kind.type_name(), "agent-tool-result");
        let json = serde_json::to_string(&kind).expect("serializes");
        assert!(
            json.starts_with(r#"{"type":"agent-tool-result","result":{"toolCallId":"c1""#),
            "{json}"
        );
        assert!(json.ends_with(r#","attempt":2}"#), "{json}");
        let back: EventKind = serde_json::from_str(&json).expect("reads back");
        assert_eq!(RunEvent::of(&back), Some(event));

        let live = EventKind::from(RunEvent::AgentTextDelta {
            delta: "Hel".into(),
        });
        assert!(!live.is_stored());
        // The engine's own events are not a run's.
        let start: EventKind =
            serde_json::from_str(r#"{"type":"workflow-start","input":null,"resumed":false}"#)
                .expect("an engine event");
        assert_eq!(RunEvent::of(&start), None);
        assert_eq!(start.type_name(), "workflow-start");
    }
}
