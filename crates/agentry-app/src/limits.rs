//! Every bound a client's input can hit, declared once. The application layer checks them (or,
//! for the few the engine and the agents keep, re-exports theirs), and every place that states
//! a bound to the outside reads it here: `/doc`'s schemas, the A2A agent card and the A2A
//! toolset's tool schema, the MCP tools' input schemas. A refusal names the bound it hit.
//!
//! The body of a request is bounded before any of this by the HTTP layer's body limit
//! (`HttpConfig::body_limit`, 1 MiB by default, a setting rather than a constant).

use agentry_agents::Message;

use crate::error::AppError;

/// The most characters one input message of a generation may have, on every path: `/text`,
/// `/stream`, `/object`, `/chat` (in memory or as a durable run), MCP's `ask_<agent>`, A2A's
/// messages. Over it: `invalid_request` (HTTP 400), naming the message and the limit.
///
/// 100,000 characters (about 25,000 tokens): what the A2A card and the MCP tools have always
/// published to outside clients and what durable runs always accepted; it fits today's model
/// contexts, and a pasted document of ordinary length passes (the in-memory paths' former
/// 16,384 did not).
pub const MAX_MESSAGE_CHARS: usize = 100_000;

/// The longest reason an answer to a tool approval may give (shown to the model on a denial).
pub const MAX_REASON_CHARS: usize = 2000;

/// The most parts one A2A message may have.
pub const MAX_MESSAGE_PARTS: usize = 64;

/// The most executions (or runs, or A2A tasks) one page of a list holds.
pub const MAX_PAGE: u32 = 100;

/// The largest `maxSteps` of a generation (model calls, with tool use, in one generation).
pub const MAX_STEPS: u32 = 100;

/// The largest `maxOutputTokens` of a generation.
pub const MAX_OUTPUT_TOKENS: u32 = 1_000_000;

/// The largest MCP `initialize` body, in bytes: a session keeps the parameters of its
/// `initialize` for its whole life (clients send a few hundred bytes). Other messages are only
/// held while they are handled, and may be as large as any JSON body.
pub const MCP_INITIALIZE_BYTES: usize = 4 * 1024;

/// The most JSON values (objects, arrays, strings, numbers, ...) in an MCP `initialize`'s
/// `params`: kept parsed, each costs about a hundred bytes however few bytes it took to send
/// (clients send about twenty).
pub const MCP_INITIALIZE_VALUES: usize = 64;

/// The most characters of a key a client chooses (a user, conversation, run or execution id,
/// an event's key): the engine's bound, which it checks itself.
pub use agentry_engine::id::MAX_KEY_CHARS;

/// The most bytes of an agent's working memory (its JSON text; a template's Markdown text),
/// through its tool and `PUT /agents/{id}/memory/working` alike: the agents' bound, which they
/// check themselves.
pub use agentry_agents::working_memory::MAX_WORKING_MEMORY_BYTES;

/// The largest `contextLimit` (messages of history loaded per call): the agents' bound.
pub use agentry_agents::MAX_CONTEXT_LIMIT;

/// Refuses a generation's input when one of its messages is over [`MAX_MESSAGE_CHARS`]: the
/// one check of the message length, for every path that builds a generation from a client's
/// messages.
pub fn check_messages(input: &[Message]) -> Result<(), AppError> {
    for (i, m) in input.iter().enumerate() {
        // Counting stops just past the limit: a huge message costs no more than a small one.
        if m.content.chars().nth(MAX_MESSAGE_CHARS).is_some() {
            return Err(AppError::bad_request(format!(
                "Invalid request: input message {} has {} characters, over the limit of \
                 {MAX_MESSAGE_CHARS} characters",
                i + 1,
                m.content.chars().count()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;

    #[test]
    fn a_message_of_the_limit_passes_and_one_more_character_is_refused() {
        let longest = Message::user("é".repeat(MAX_MESSAGE_CHARS));
        assert_eq!(check_messages(std::slice::from_ref(&longest)), Ok(()));
        let over = Message::user("x".repeat(MAX_MESSAGE_CHARS + 1));
        let e = check_messages(&[longest, over]).unwrap_err();
        assert_eq!(e.code, Code::InvalidRequest);
        assert_eq!(
            e.message,
            "Invalid request: input message 2 has 100001 characters, over the limit of 100000 \
             characters"
        );
    }
}
