//! An agent's card, built from the registry: its name and description, its tools as skills,
//! the JSON-RPC interface of protocol 1.0, streaming, and the Bearer JWT scheme when a
//! provider is on.

use agentry_app::wire::agents::AgentDetail;
use serde_json::{Map, json};

use crate::wire::{
    AgentCapabilities, AgentCard, AgentInterface, AgentSkill, JSONRPC_BINDING, PROTOCOL_VERSION,
};

/// The card's path under an agent's A2A base (`/a2a/{agentId}/`).
pub const CARD_PATH: &str = ".well-known/agent-card.json";

/// The name of the card's security scheme.
pub const BEARER: &str = "bearer";

/// The media types a task takes and gives.
const MODES: [&str; 2] = ["text/plain", "application/json"];

pub fn card_of(detail: &AgentDetail, url: &str, authenticated: bool) -> AgentCard {
    let agent = &detail.agent;
    let mut skills: Vec<AgentSkill> = detail
        .tool_definitions
        .iter()
        .map(|t| AgentSkill {
            id: t.name.clone(),
            name: t.name.clone(),
            description: t.description.clone(),
            tags: vec!["tool".into()],
            examples: Vec::new(),
        })
        .collect();
    if skills.is_empty() {
        skills.push(AgentSkill {
            id: "chat".into(),
            name: agent.name.clone(),
            description: agent.description.clone(),
            tags: vec!["chat".into()],
            examples: Vec::new(),
        });
    }
    let (security_schemes, security_requirements) = if authenticated {
        let mut schemes = Map::new();
        schemes.insert(
            BEARER.into(),
            json!({"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}}),
        );
        (
            Some(schemes),
            Some(vec![json!({"schemes": {BEARER: {"list": []}}})]),
        )
    } else {
        (None, None)
    };
    AgentCard {
        name: agent.name.clone(),
        description: agent.description.clone(),
        version: env!("CARGO_PKG_VERSION").into(),
        supported_interfaces: vec![AgentInterface {
            url: url.to_owned(),
            protocol_binding: JSONRPC_BINDING.into(),
            protocol_version: PROTOCOL_VERSION.into(),
        }],
        capabilities: AgentCapabilities {
            streaming: true,
            push_notifications: false,
        },
        default_input_modes: MODES.map(String::from).to_vec(),
        default_output_modes: MODES.map(String::from).to_vec(),
        skills,
        security_schemes,
        security_requirements,
    }
}
