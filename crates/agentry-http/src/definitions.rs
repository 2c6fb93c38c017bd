//! Workflow definitions deployed as data (issue 37): `PUT`, `GET` and `DELETE
//! /definitions/workflows/{name}`. Each reads the request, calls one use case of `agentry-app`
//! and renders.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, delete, get, put, web};
use agentry_app::definitions::MAX_DEFINITION_BYTES;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::AppState;
use crate::auth::Requester;
use crate::envelope::{self, Success};
use crate::error::ApiError;
use crate::intake::read_body;
use crate::wire::definitions::{DefinitionDeleted, DefinitionDeployed, DefinitionView};

/// The version a read or a delete names.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct VersionParam {
    /// The definition's version (`document.version`); a read without it reads the newest.
    #[param(example = "1.0.0")]
    pub version: Option<String>,
}

/// PUT /definitions/workflows/{name}
#[utoipa::path(
    tag = "definitions",
    operation_id = "deployDefinition",
    summary = "Deploy a workflow definition",
    description = "The body is a Serverless Workflow 1.0 document, as JSON (`application/json`) \
        or YAML (`application/yaml`), at most 1 MiB, whose `document.name` is the path's name. \
        It is checked as `agentry check` checks a file (every problem is answered, \
        `invalid_definition`), stored in the database and registered as the workflow `name` in \
        version `document.version`: new executions start on the newest version, running ones \
        stay on theirs; every replica registers it within seconds. A version is never \
        rewritten: the same document again answers 200 (`created: false`), another document \
        under a deployed version is `definition_conflict` (raise `document.version`), as is a \
        name compiled into the server or read from its definitions folder. Admin-only: a \
        verified user needs the `admin` role (any mode).",
    params(("name" = String, Path, description = "The workflow's id (`document.name`).", example = "order-saga")),
    request_body(content = Object, content_type = "application/yaml", description = "The document (or as `application/json`)."),
    responses(
        (status = 201, description = "A new version, deployed.", body = Success<DefinitionDeployed>),
        (status = 200, description = "The same document was deployed already.", body = Success<DefinitionDeployed>),
    ),
)]
#[put("/definitions/workflows/{name}")]
pub async fn deploy(
    app: web::Data<AppState>,
    req: HttpRequest,
    name: web::Path<String>,
    payload: web::Payload,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let content_type = req
        .headers()
        .get(actix_web::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = read_body(payload, MAX_DEFINITION_BYTES).await?;
    let deployed = app
        .app
        .deploy_definition(&caller.0, &name, &body, &content_type)
        .await?;
    let status = if deployed.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(envelope::with_status(status, deployed))
}

/// GET /definitions/workflows/{name}
#[utoipa::path(
    tag = "definitions",
    operation_id = "getDefinition",
    summary = "A deployed workflow definition",
    description = "A version deployed through the API (the newest without `version`): its \
        document as deployed (`source`) and as JSON, who deployed it and when, and every \
        deployed version with its executions in flight. Admin-only, as deploying is.",
    params(
        ("name" = String, Path, description = "The workflow's id.", example = "order-saga"),
        VersionParam,
    ),
    responses((status = 200, description = "The definition.", body = Success<DefinitionView>)),
)]
#[get("/definitions/workflows/{name}")]
pub async fn detail(
    app: web::Data<AppState>,
    name: web::Path<String>,
    params: web::Query<VersionParam>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    Ok(envelope::ok(
        app.app
            .deployed_definition(&caller.0, &name, params.version.as_deref())
            .await?,
    ))
}

/// DELETE /definitions/workflows/{name}
#[utoipa::path(
    tag = "definitions",
    operation_id = "deleteDefinition",
    summary = "Delete a deployed definition's version",
    description = "Forgets one deployed version (`version` is required) that no execution runs \
        or waits on (`definition_in_use` otherwise): new executions start on the newest \
        version left; every replica forgets it within seconds. Admin-only.",
    params(
        ("name" = String, Path, description = "The workflow's id.", example = "order-saga"),
        VersionParam,
    ),
    responses((status = 200, description = "Deleted.", body = Success<DefinitionDeleted>)),
)]
#[delete("/definitions/workflows/{name}")]
pub async fn remove(
    app: web::Data<AppState>,
    name: web::Path<String>,
    params: web::Query<VersionParam>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let version = params.version.as_deref().ok_or_else(|| {
        ApiError::bad_request("Invalid query: `version` names the version to delete")
    })?;
    Ok(envelope::ok(
        app.app.delete_definition(&caller.0, &name, version).await?,
    ))
}

pub fn routes(cfg: &mut crate::registration::Routes<'_, '_>) {
    cfg.service(deploy).service(detail).service(remove);
}
