//! `call: openapi`: an operation of an OpenAPI 3.x or Swagger 2.0 document, found by its
//! `operationId` and sent through [`Outbound::send`]. (A helper writes this module.)

use serde_json::Value;

use crate::model::OpenApiCall;
use crate::outbound::Outbound;
use crate::run::{Args, Stop};

/// The documents read so far, by URI.
#[derive(Debug, Default)]
pub(crate) struct Documents {}

impl Outbound {
    /// Runs a `call: openapi`: its raw output as `output` asks.
    pub(crate) async fn openapi(
        &self,
        call: &OpenApiCall,
        input: &Value,
        args: &Args<'_>,
        idempotency_key: &str,
    ) -> Result<Value, Stop> {
        let _ = (call, input, args, idempotency_key, &self.documents);
        Err(crate::DslError::runtime("call: openapi is not written yet").into())
    }
}
