//! The Model Context Protocol for agentry, on the official Rust SDK (`rmcp`):
//! - `server`: agentry's tools, agents and workflows as an MCP server;
//! - `endpoint`: that server over Streamable HTTP (rmcp's service), behind the checks of its
//!   requests rmcp does not make, which agentry-http mounts at `/mcp` behind its authentication;
//! - `sessions`: its sessions: whose each is, how many may live, for how long;
//! - `toolset`: the tools of any MCP server (Streamable HTTP or stdio) as tools of agentry's
//!   agents.
//!
//! No web framework here: the HTTP layer adapts rmcp's service.

pub mod endpoint;
pub mod server;
pub mod sessions;
pub mod toolset;

pub use endpoint::{McpRefusal, McpResponse, McpService, service};
pub use server::{AgentryMcp, McpCaller};
pub use sessions::{McpSessions, Owner, SessionLimits};
pub use toolset::{McpServer, McpToolset, McpToolsetError};
