//! The Model Context Protocol for agentry, on the official Rust SDK (`rmcp`):
//! - `server`: agentry's tools, agents and workflows as an MCP server (Streamable HTTP), which
//!   agentry-http mounts at `/mcp` behind its authentication;
//! - `toolset`: the tools of any MCP server (Streamable HTTP or stdio) as tools of agentry's
//!   agents.
//!
//! No web framework here: the HTTP layer adapts rmcp's service.

pub mod server;
pub mod toolset;

pub use server::{AgentryMcp, McpCaller, McpService, service};
pub use toolset::{McpServer, McpToolset, McpToolsetError};
