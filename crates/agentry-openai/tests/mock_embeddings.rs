//! `OpenAiEmbedder` against a local mock of the OpenAI embeddings API (wiremock), answering with
//! the real wire format: `list` objects of `embedding`s, and OpenAI error objects.

use std::time::Duration;

use agentry_agents::{Embedder, ModelErrorKind};
use agentry_openai::{OpenAiEmbedder, OpenAiSettings};
use serde_json::{Value, json};
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const EMBEDDINGS: &str = "/v1/embeddings";

fn embedder_for(server: &MockServer, dimensions: usize) -> OpenAiEmbedder {
    OpenAiEmbedder::new(
        OpenAiSettings {
            api_key: Some("sk-test".into()),
            base_url: Some(format!("{}/v1/", server.uri())),
            model: "text-embedding-3-small".into(),
        },
        dimensions,
    )
}

fn embedding(index: usize, vector: Value) -> Value {
    json!({"object": "embedding", "index": index, "embedding": vector})
}

fn list(data: Vec<Value>) -> Value {
    json!({
        "object": "list",
        "data": data,
        "model": "text-embedding-3-small",
        "usage": {"prompt_tokens": 8, "total_tokens": 8}
    })
}

fn texts(t: &[&str]) -> Vec<String> {
    t.iter().map(|s| (*s).to_owned()).collect()
}

fn error_body(message: &str, kind: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
}

/// A batch is one request; the vectors come back in the order of the texts, whatever the order
/// of `data`.
#[tokio::test]
async fn a_batch_is_one_request_read_by_index() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(EMBEDDINGS))
        .and(header("authorization", "Bearer sk-test"))
        .and(body_json(json!({
            "model": "text-embedding-3-small",
            "input": ["I love pizza", "trains", "olives"]
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(list(vec![
            embedding(2, json!([0.0, 0.0, 1.0])),
            embedding(0, json!([1.0, 0.0, 0.0])),
            embedding(1, json!([0.0, 1.0, 0.0])),
        ])))
        .expect(1)
        .mount(&server)
        .await;
    let embedder = embedder_for(&server, 3);
    assert_eq!(embedder.name(), "text-embedding-3-small");
    assert_eq!(embedder.dimensions(), 3);
    let vectors = embedder
        .embed(&texts(&["I love pizza", "trains", "olives"]))
        .await
        .unwrap();
    assert_eq!(
        vectors,
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]].map(Vec::from)
    );
    // Nothing to embed: no request.
    assert!(embedder.embed(&[]).await.unwrap().is_empty());
}

/// An answer that misses a text, or gives vectors of another length, is a failure.
#[tokio::test]
async fn an_incomplete_answer_is_a_failure() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(EMBEDDINGS))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(list(vec![embedding(0, json!([1.0, 0.0, 0.0]))])),
        )
        .mount(&server)
        .await;
    let error = embedder_for(&server, 3)
        .embed(&texts(&["a", "b"]))
        .await
        .unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Failed);
    assert!(
        error.message.contains("each of the 2 texts"),
        "{}",
        error.message
    );
    let error = embedder_for(&server, 4)
        .embed(&texts(&["a"]))
        .await
        .unwrap_err();
    assert!(error.message.contains("not 4"), "{}", error.message);
}

/// A 503 is the provider being down; a 429 is a throttle that says how long to wait; a 401 does
/// not echo the key; silence past the read time-out times out.
#[tokio::test]
async fn upstream_failures_keep_their_kind() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(EMBEDDINGS))
        .respond_with(ResponseTemplate::new(503).set_body_json(error_body(
            "The engine is currently overloaded",
            "server_error",
        )))
        .mount(&server)
        .await;
    let error = embedder_for(&server, 3)
        .embed(&texts(&["a"]))
        .await
        .unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Unavailable, "{}", error.message);
    assert!(error.message.contains("503"), "{}", error.message);
    assert!(
        error.message.contains("currently overloaded"),
        "{}",
        error.message
    );
    assert_eq!(error.retry_after, None);

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(EMBEDDINGS))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "7")
                .set_body_json(error_body("Rate limit reached for requests", "requests")),
        )
        .mount(&server)
        .await;
    let error = embedder_for(&server, 3)
        .embed(&texts(&["a"]))
        .await
        .unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::RateLimited, "{}", error.message);
    assert!(
        error.message.contains("Rate limit reached"),
        "{}",
        error.message
    );
    assert_eq!(error.retry_after, Some(Duration::from_secs(7)));

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(EMBEDDINGS))
        .respond_with(ResponseTemplate::new(401).set_body_json(error_body(
            "Incorrect API key provided: sk-test",
            "invalid_request_error",
        )))
        .mount(&server)
        .await;
    let error = embedder_for(&server, 3)
        .embed(&texts(&["a"]))
        .await
        .unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Unauthorized);
    assert!(!error.message.contains("sk-test"), "{}", error.message);

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(EMBEDDINGS))
        .respond_with(
            ResponseTemplate::new(200)
                .set_delay(Duration::from_secs(3))
                .set_body_json(list(vec![embedding(0, json!([1.0, 0.0, 0.0]))])),
        )
        .mount(&server)
        .await;
    let error = embedder_for(&server, 3)
        .with_read_timeout(Duration::from_millis(300))
        .embed(&texts(&["a"]))
        .await
        .unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::TimedOut, "{}", error.message);
}

#[test]
fn debug_output_hides_the_key() {
    let e = OpenAiEmbedder::new(
        OpenAiSettings {
            api_key: Some("sk-secret".into()),
            base_url: None,
            model: "m".into(),
        },
        3,
    );
    assert!(!format!("{e:?}").contains("sk-secret"));
    assert_eq!(e.base_url(), "https://api.openai.com/v1");
}
