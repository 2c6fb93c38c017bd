//! `call: a2a` and `call: mcp`: the agent protocols, as a definition calls them. (A helper
//! writes this module.)

use serde_json::{Map, Value};

use crate::model::{Protocol, ProtocolCall};
use crate::outbound::Outbound;
use crate::run::{Args, Stop};

/// The problems of a call's `with` (without `parameters`): `(pointer under with, reason)`.
pub(crate) fn check(protocol: Protocol, with: &Map<String, Value>) -> Vec<(String, String)> {
    let _ = with;
    vec![(
        String::new(),
        format!("`call: {protocol:?}` is not supported by agentry yet (docs/DEFINITIONS.md)"),
    )]
}

impl Outbound {
    /// Runs a `call: a2a` or `call: mcp`: the JSON-RPC result.
    pub(crate) async fn protocol(
        &self,
        call: &ProtocolCall,
        input: &Value,
        args: &Args<'_>,
        idempotency_key: &str,
    ) -> Result<Value, Stop> {
        let _ = (call, input, args, idempotency_key);
        Err(crate::DslError::runtime("not written yet").into())
    }
}
