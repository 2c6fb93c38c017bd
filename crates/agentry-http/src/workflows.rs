//! The workflow routes of spec section 4.

use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, get, post, web};
use actix_web_lab::sse;
use agentry_core::{ExecuteOptions, ExecutionRecord, Status};
use futures::StreamExt;

use crate::AppState;
use crate::envelope;
use crate::error::{ApiError, engine_error};
use crate::wire::{self, ExecuteRequest, ResumeRequest, SuspendRequest};

const EXECUTE_FAILED: &str = "Failed to execute workflow";

/// GET /workflows
#[get("/workflows")]
pub async fn list(app: web::Data<AppState>) -> HttpResponse {
    let items: Vec<wire::WorkflowSummary> = app
        .engine
        .workflows()
        .iter()
        .map(|w| wire::WorkflowSummary::from(w.as_ref()))
        .collect();
    envelope::ok(items)
}

/// GET /workflows/{id}
#[get("/workflows/{id}")]
pub async fn detail(
    app: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let wf = app
        .engine
        .workflow(&id)
        .ok_or_else(|| ApiError::not_found(format!("Workflow {id} not found")))?;
    Ok(envelope::ok(wire::WorkflowDetail::from(wf.as_ref())))
}

fn options(body: &mut ExecuteRequest) -> ExecuteOptions {
    let o = body.options.take().unwrap_or_default();
    ExecuteOptions {
        execution_id: o.execution_id,
        user_id: o.user_id,
        conversation_id: o.conversation_id,
        context: o.context.unwrap_or_default(),
    }
}

/// The execute/resume answer: 200 with the execution result, or 500 when the run ended in error.
fn finished(rec: ExecutionRecord) -> HttpResponse {
    if rec.state.status() == Status::Error {
        tracing::warn!(execution_id = %rec.id, error = ?rec.state.error(), "{EXECUTE_FAILED}");
        return ApiError::internal(EXECUTE_FAILED).error_response_with_id(&rec.id);
    }
    envelope::ok(wire::execution_result(&rec))
}

trait WithId {
    fn error_response_with_id(&self, id: &str) -> HttpResponse;
}

impl WithId for ApiError {
    fn error_response_with_id(&self, id: &str) -> HttpResponse {
        let mut resp = actix_web::ResponseError::error_response(self);
        if let Ok(v) = actix_web::http::header::HeaderValue::from_str(id) {
            resp.headers_mut().insert(
                actix_web::http::header::HeaderName::from_static("x-execution-id"),
                v,
            );
        }
        resp
    }
}

/// POST /workflows/{id}/execute
#[post("/workflows/{id}/execute")]
pub async fn execute(
    app: web::Data<AppState>,
    id: web::Path<String>,
    body: web::Json<ExecuteRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut body = body.into_inner();
    let opts = options(&mut body);
    let handle = app
        .engine
        .start(&id, body.input, opts)
        .await
        .map_err(|e| engine_error(e, EXECUTE_FAILED))?;
    // The run goes on in its own task: a client that hangs up does not stop a durable execution.
    let rec = handle
        .finish()
        .await
        .map_err(|e| engine_error(e, EXECUTE_FAILED))?;
    Ok(finished(rec))
}

/// POST /workflows/{id}/stream
#[post("/workflows/{id}/stream")]
pub async fn stream(
    app: web::Data<AppState>,
    id: web::Path<String>,
    body: web::Json<ExecuteRequest>,
) -> Result<
    sse::Sse<impl futures::Stream<Item = Result<sse::Event, std::convert::Infallible>>>,
    ApiError,
> {
    let mut body = body.into_inner();
    let opts = options(&mut body);
    let handle = app
        .engine
        .start(&id, body.input, opts)
        .await
        .map_err(|e| engine_error(e, EXECUTE_FAILED))?;
    let events = futures::stream::unfold(handle.events, |mut rx| async move {
        rx.recv().await.map(|ev| (ev, rx))
    })
    .map(|ev| {
        Ok(sse::Event::Data(sse::Data::new(
            wire::event_json(&ev).to_string(),
        )))
    });
    Ok(sse::Sse::from_stream(events).with_keep_alive(Duration::from_secs(15)))
}

/// POST /workflows/{id}/executions/{executionId}/suspend
#[post("/workflows/{id}/executions/{execution_id}/suspend")]
pub async fn suspend(
    app: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let (id, execution_id) = path.into_inner();
    // The body is optional here: an empty one suspends with the default reason.
    let body: SuspendRequest = if body.iter().all(u8::is_ascii_whitespace) {
        SuspendRequest::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("Invalid request body: {e}")))?
    };
    let reason = body
        .reason
        .unwrap_or_else(|| "Suspended by request".to_owned());
    let rec = app
        .engine
        .suspend(&id, &execution_id, reason)
        .await
        .map_err(|e| engine_error(e, "Failed to suspend workflow"))?;
    let status = if rec.state.status() == Status::Suspended {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok(envelope::with_status(status, wire::suspend_result(&rec)))
}

/// POST /workflows/{id}/executions/{executionId}/resume
#[post("/workflows/{id}/executions/{execution_id}/resume")]
pub async fn resume(
    app: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: web::Json<ResumeRequest>,
) -> Result<HttpResponse, ApiError> {
    let (id, execution_id) = path.into_inner();
    let body = body.into_inner();
    let step_id = body.options.and_then(|o| o.step_id);
    let handle = app
        .engine
        .start_resume(&id, &execution_id, body.resume_data, step_id.as_deref())
        .await
        .map_err(|e| engine_error(e, "Failed to resume workflow"))?;
    let rec = handle
        .finish()
        .await
        .map_err(|e| engine_error(e, EXECUTE_FAILED))?;
    Ok(finished(rec))
}

/// GET /workflows/{id}/executions/{executionId}/state
#[get("/workflows/{id}/executions/{execution_id}/state")]
pub async fn execution_state(
    app: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (id, execution_id) = path.into_inner();
    let rec = app
        .engine
        .state(&id, &execution_id)
        .await
        .map_err(|e| engine_error(e, "Failed to read execution state"))?;
    Ok(envelope::ok(wire::execution_state(&rec)))
}

/// Registers the workflow routes.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(list)
        .service(detail)
        .service(execute)
        .service(stream)
        .service(suspend)
        .service(resume)
        .service(execution_state);
}
