//! The Agent2Agent protocol (A2A 1.0, its JSON-RPC binding) for agentry, as the official SDKs
//! (`a2a-sdk` 1.3, `@a2a-js/sdk` 1.3) speak it:
//! - `wire`: the protocol's shapes (ProtoJSON of `lf.a2a.v1`) and the JSON-RPC envelope;
//! - `card`: an agent's card from the registry;
//! - `task`: a durable agent run as a task;
//! - `server`: every agent an A2A server (`A2aServer`: the card, and each method on the
//!   application layer's use cases), which agentry-http mounts at `/a2a/{agentId}`;
//! - `errors`: failures as JSON-RPC errors carrying the error table's code;
//! - `toolset`: remote A2A agents as tools of agentry's agents (`A2aToolset`, `ask_<agent id>`).
//!
//! No web framework here: the HTTP layer adapts requests and streams.

pub mod card;
pub mod errors;
pub mod server;
pub mod task;
pub mod toolset;
pub mod wire;

pub use card::CARD_PATH;
pub use server::{A2aServer, Reply};
pub use toolset::{A2aToolset, A2aToolsetError};
