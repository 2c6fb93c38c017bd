//! `chat.completion.chunk` events -> `ModelChunk`s.
//!
//! Text deltas pass straight through. Tool calls arrive as fragments (the first carries the
//! `id` and function name, later ones pieces of the arguments' JSON text) keyed by `index`; they
//! are assembled and emitted whole once the choice finishes (or the stream ends). The last event
//! is one `Finish` with the finish reason and the usage of the final, choice-less chunk
//! (`stream_options.include_usage`).
//!
//! The returned stream owns async-openai's event stream: dropping it closes the upstream
//! connection (async-openai's reader task stops when its receiver goes away).

use std::collections::{BTreeMap, VecDeque};

use agentry_agents::{ChunkStream, ModelChunk, ModelError, ToolCall, Usage};
use async_openai::error::OpenAIError;
use futures::stream::{BoxStream, StreamExt};

use crate::error::model_error;
use crate::response::{WireChunk, finish_reason, parse_arguments};

type Upstream = BoxStream<'static, Result<WireChunk, OpenAIError>>;

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

struct State {
    upstream: Upstream,
    base_url: String,
    calls: BTreeMap<u32, PartialCall>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    pending: VecDeque<Result<ModelChunk, ModelError>>,
    done: bool,
}

impl State {
    /// Emits the assembled tool calls, in index order.
    fn flush_calls(&mut self) {
        for (index, call) in std::mem::take(&mut self.calls) {
            let id = if call.id.is_empty() {
                format!("call_{index}")
            } else {
                call.id
            };
            self.pending.push_back(Ok(ModelChunk::ToolCall(ToolCall {
                tool_call_id: id,
                tool_name: call.name,
                args: parse_arguments(&call.arguments),
            })));
        }
    }

    fn absorb(&mut self, chunk: WireChunk) {
        if let Some(e) = chunk.error {
            self.pending.push_back(Err(ModelError::new(format!(
                "the endpoint reported an error mid-stream: {}",
                e.describe()
            ))));
            self.done = true;
            return;
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.into());
        }
        // Only one choice is ever asked for (no `n`).
        let Some(choice) = chunk.choices.and_then(|c| c.into_iter().next()) else {
            return;
        };
        if let Some(delta) = choice.delta {
            for text in [delta.content, delta.refusal].into_iter().flatten() {
                if !text.is_empty() {
                    self.pending.push_back(Ok(ModelChunk::TextDelta(text)));
                }
            }
            for (position, fragment) in delta.tool_calls.into_iter().flatten().enumerate() {
                let index = fragment.index.unwrap_or(position as u32);
                let call = self.calls.entry(index).or_default();
                if let Some(id) = fragment.id.filter(|id| !id.is_empty()) {
                    call.id = id;
                }
                if let Some(function) = fragment.function {
                    // Some servers repeat the name in every fragment: take it once.
                    if let Some(name) = function.name.filter(|_| call.name.is_empty()) {
                        call.name = name;
                    }
                    if let Some(arguments) = function.arguments {
                        call.arguments.push_str(&arguments);
                    }
                }
            }
        }
        if let Some(reason) = choice.finish_reason {
            self.finish_reason = Some(reason);
            self.flush_calls();
        }
    }

    fn finish(&mut self) {
        self.flush_calls();
        self.pending.push_back(Ok(ModelChunk::Finish {
            finish_reason: finish_reason(self.finish_reason.as_deref()),
            usage: self.usage.unwrap_or_default(),
        }));
        self.done = true;
    }
}

pub(crate) fn chunks(upstream: Upstream, base_url: String) -> ChunkStream {
    let state = State {
        upstream,
        base_url,
        calls: BTreeMap::new(),
        finish_reason: None,
        usage: None,
        pending: VecDeque::new(),
        done: false,
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(item) = state.pending.pop_front() {
                return Some((item, state));
            }
            if state.done {
                return None;
            }
            match state.upstream.next().await {
                Some(Ok(chunk)) => state.absorb(chunk),
                Some(Err(e)) => {
                    state.done = true;
                    let error = model_error(&state.base_url, e);
                    return Some((Err(error), state));
                }
                None => state.finish(),
            }
        }
    })
    .boxed()
}
