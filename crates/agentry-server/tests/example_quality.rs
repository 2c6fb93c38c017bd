//! The example agents' quality settings through the real binary (running.md): `operator` falls
//! back to `AGENTRY_FALLBACK_MODELS` on the default endpoint when its model answers 503 (a
//! stand-in OpenAI-compatible server), its answer through its PII guardrail; an agent without
//! fallbacks answers with the provider's own failure; `AGENTRY_TOKEN_BUDGET_PER_USER_DAY`
//! refuses a user over the day's budget.

mod common;

use common::definitions::{Server, client, within};
use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const COMPLETIONS: &str = "/v1/chat/completions";

fn completion(text: &str, total: u64) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1741570283,
        "model": "backup",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "logprobs": null, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": total - 5, "completion_tokens": 5, "total_tokens": total}
    })
}

async fn stand_in() -> MockServer {
    let mock = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .and(body_string_contains("\"model\":\"primary\""))
        .respond_with(ResponseTemplate::new(503).set_body_string("overloaded"))
        .mount(&mock)
        .await;
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .and(body_string_contains("\"model\":\"backup\""))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(
            "Reach the customer at ada@example.com or +1 555 0100.",
            600,
        )))
        .mount(&mock)
        .await;
    mock
}

async fn text(s: &Server, agent: &str, user: &str) -> (u16, Value, Option<String>) {
    let resp = client()
        .post(s.url(&format!("/agents/{agent}/text")))
        .json(&json!({"input": "hello", "options": {"userId": user}}))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let retry = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, resp.json().await.unwrap(), retry)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_falls_back_redacts_and_budgets_hold() {
    within(async {
        let mock = stand_in().await;
        let base = format!("{}/v1", mock.uri());
        let s = Server::serve(
            None,
            &[
                ("OPENAI_BASE_URL", base.as_str()),
                ("OPENAI_API_KEY", "sk-test"),
                ("AGENTRY_MODEL", "primary"),
                ("AGENTRY_FALLBACK_MODELS", "backup"),
                ("AGENTRY_TOKEN_BUDGET_PER_USER_DAY", "1000"),
            ],
            &[],
        );
        // The operator's model is down: the fallback answers, redacted.
        let (status, body, _) = text(&s, "operator", "ada").await;
        assert_eq!(status, 200, "{body}\n{}", s.log());
        assert_eq!(
            body["data"]["text"], "Reach the customer at [email] or [phone].",
            "{body}"
        );
        let run = body["data"]["runId"].as_str().unwrap();
        let (_, state) = common::definitions::answer(
            client().get(s.url(&format!("/agents/operator/runs/{run}"))),
        )
        .await;
        assert_eq!(state["data"]["steps"][0]["model"], "backup", "{state}");
        // The writer has no fallbacks: the provider's own failure.
        let (status, body, _) = text(&s, "writer", "ada").await;
        assert_eq!(
            (status, body["code"].as_str()),
            (502, Some("model_unavailable")),
            "{body}"
        );
        // 600 tokens were spent of 1000: the next answer spends the rest, then the budget
        // refuses (usage is counted as answers come: give it a moment).
        let (status, body, _) = text(&s, "operator", "ada").await;
        assert_eq!(status, 200, "{body}");
        let mut refused = None;
        for _ in 0..50 {
            let (status, body, retry) = text(&s, "operator", "ada").await;
            if status == 429 {
                refused = Some((body, retry));
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let (body, retry) = refused.expect("the daily budget was never refused");
        assert_eq!(body["code"], "budget_exceeded", "{body}");
        let retry: u64 = retry.expect("Retry-After").parse().unwrap();
        assert!((1..=86_400).contains(&retry), "{retry}");
        // Another user's budget is untouched.
        let (status, body, _) = text(&s, "operator", "grace").await;
        assert_eq!(status, 200, "{body}");
    })
    .await;
}
