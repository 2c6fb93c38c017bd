//! [`OpenAiEmbedder`]: semantic recall's embedder on an OpenAI-compatible `/embeddings`
//! endpoint.

use std::fmt;
use std::time::Duration;

use agentry_agents::{Embedder, ModelError};
use async_openai::config::{Config, OpenAIConfig};
use async_openai::error::{ApiError, ApiErrorResponse, OpenAIError, WrappedError};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use crate::{DEFAULT_READ_TIMEOUT, OpenAiSettings, config, error, http_client};

/// An embedding model served by an OpenAI-compatible endpoint (`POST {base_url}/embeddings`).
#[derive(Clone)]
pub struct OpenAiEmbedder {
    http: reqwest::Client,
    config: OpenAIConfig,
    base_url: String,
    model: String,
    dimensions: usize,
}

impl fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiEmbedder")
            .field("model", &self.model)
            .field("dimensions", &self.dimensions)
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

/// The answer's part that is read.
#[derive(Deserialize)]
struct WireEmbeddings {
    data: Vec<WireEmbedding>,
}

#[derive(Deserialize)]
struct WireEmbedding {
    index: usize,
    embedding: Vec<f32>,
}

impl OpenAiEmbedder {
    /// The embedding model `settings.model` (e.g. `text-embedding-3-small`), whose vectors have
    /// `dimensions` numbers (an answer of another length is a failure).
    pub fn new(settings: OpenAiSettings, dimensions: usize) -> Self {
        let (config, base_url) = config(&settings);
        Self {
            http: http_client(DEFAULT_READ_TIMEOUT).unwrap_or_default(),
            config,
            base_url,
            model: settings.model,
            dimensions,
        }
    }

    /// This embedder with another read time-out ([`DEFAULT_READ_TIMEOUT`] by default).
    pub fn with_read_timeout(mut self, read_timeout: Duration) -> Self {
        self.http = http_client(read_timeout).unwrap_or_default();
        self
    }

    /// The API base requests go to (without a trailing slash).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The failure of an answer that is not a success, as the chat model reports it, with the
    /// wait a `Retry-After` of seconds asks for.
    async fn failure(&self, response: reqwest::Response) -> ModelError {
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| Duration::from_secs_f64(s.min(3_600.0)));
        let body = match response.text().await {
            Ok(body) => body,
            Err(e) => return error::model_error(&self.base_url, OpenAIError::Reqwest(e)),
        };
        let api_error = match serde_json::from_str::<WrappedError>(&body) {
            Ok(w) if !status.is_server_error() => w.error,
            // As async-openai keeps a 5xx body: raw (the mapping reads an error object in it).
            _ => ApiError {
                message: body,
                r#type: None,
                param: None,
                code: None,
                misalignment: None,
            },
        };
        let mut e = error::model_error(
            &self.base_url,
            OpenAIError::ApiError(ApiErrorResponse {
                status_code: status,
                api_error,
            }),
        );
        e.retry_after = retry_after;
        e
    }
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn name(&self) -> &str {
        &self.model
    }

    fn dimensions(&self) -> usize {
        self.dimensions
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        tracing::debug!(model = %self.model, base_url = %self.base_url, texts = texts.len(), "embeddings");
        let response = self
            .http
            .post(self.config.url("/embeddings"))
            .headers(self.config.headers())
            .json(&json!({"model": self.model, "input": texts}))
            .send()
            .await
            .map_err(|e| error::model_error(&self.base_url, OpenAIError::Reqwest(e)))?;
        if !response.status().is_success() {
            return Err(self.failure(response).await);
        }
        let body = response
            .text()
            .await
            .map_err(|e| error::model_error(&self.base_url, OpenAIError::Reqwest(e)))?;
        let wire: WireEmbeddings = serde_json::from_str(&body).map_err(|e| {
            error::model_error(
                &self.base_url,
                OpenAIError::JSONDeserialize(e, body.clone()),
            )
        })?;
        let mut vectors: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        for d in wire.data {
            if d.embedding.len() != self.dimensions {
                return Err(ModelError::new(format!(
                    "the endpoint at {} returned a vector of {} numbers, not {} (model {})",
                    self.base_url,
                    d.embedding.len(),
                    self.dimensions,
                    self.model
                )));
            }
            if let Some(slot) = vectors.get_mut(d.index) {
                *slot = Some(d.embedding);
            }
        }
        vectors
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                ModelError::new(format!(
                    "the endpoint at {} did not return a vector for each of the {} texts",
                    self.base_url,
                    texts.len()
                ))
            })
    }
}
