//! The wire types: every answer and stream event is declared once, in `agentry-app`'s `wire`
//! (shared by every front end), and re-exported here; only the WebSockets' messages are this
//! crate's own (`sockets`).

pub use agentry_app::wire::*;

pub mod sockets;
