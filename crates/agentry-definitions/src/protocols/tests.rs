//! `call: a2a` and `call: mcp` against local servers started by each test: a tiny A2A JSON-RPC
//! responder and a tiny MCP Streamable HTTP responder (on a tokio `TcpListener`), and an MCP
//! server over stdio (a Python script).

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::model::ARGUMENTS;
use crate::outbound::Policy;

const ERRORS: &str = "https://serverlessworkflow.io/spec/1.0.0/errors/";

// ---------------------------------------------------------------------------------------------
// A local HTTP server.
// ---------------------------------------------------------------------------------------------

/// A request the test server received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC method of its body.
    fn rpc(&self) -> &str {
        self.body["method"].as_str().unwrap_or_default()
    }
}

/// An answer: status, content type, extra headers, body.
struct Reply {
    status: u16,
    content_type: &'static str,
    headers: Vec<(&'static str, String)>,
    body: String,
}

fn json_reply(body: Value) -> Reply {
    Reply {
        status: 200,
        content_type: "application/json",
        headers: Vec::new(),
        body: body.to_string(),
    }
}

/// A stream of server-sent events, one a message, each over two lines.
fn sse_reply(messages: &[Value]) -> Reply {
    // A comment, and a priming event without data (as rmcp sends).
    let mut body = String::from(": a comment\n\nid: 0\ndata: \n\n");
    for m in messages {
        body.push_str("event: message\n");
        // The data spread over two lines: JSON allows the line break between tokens.
        let text = m.to_string();
        let (a, b) = text.split_at(1);
        body.push_str(&format!("data: {a}\ndata: {b}\r\n\r\n"));
    }
    Reply {
        status: 200,
        content_type: "text/event-stream",
        headers: Vec::new(),
        body,
    }
}

fn rpc_result(seen: &Seen, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": seen.body["id"], "result": result})
}

fn rpc_error(seen: &Seen, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": seen.body["id"], "error": {"code": code, "message": message}})
}

/// A local HTTP server answering each request with `route`'s answer, and what it received.
struct Server {
    base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    async fn start(route: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (route, log) = (Arc::new(route), seen.clone());
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let (route, log) = (route.clone(), log.clone());
                tokio::spawn(async move {
                    let Some(req) = read_request(&mut sock).await else {
                        return;
                    };
                    log.lock().unwrap().push(req.clone());
                    let reply = route(&req);
                    let extra: String = reply
                        .headers
                        .iter()
                        .map(|(k, v)| format!("{k}: {v}\r\n"))
                        .collect();
                    let answer = format!(
                        "HTTP/1.1 {} Answer\r\ncontent-type: {}\r\n{extra}\
                         content-length: {}\r\nconnection: close\r\n\r\n{}",
                        reply.status,
                        reply.content_type,
                        reply.body.len(),
                        reply.body
                    );
                    let _ = sock.write_all(answer.as_bytes()).await;
                });
            }
        });
        Server { base, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn read_request(sock: &mut TcpStream) -> Option<Seen> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, path) = (first.next()?.to_owned(), first.next()?.to_owned());
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Seen {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    })
}

// ---------------------------------------------------------------------------------------------
// Calls.
// ---------------------------------------------------------------------------------------------

fn outbound() -> Outbound {
    Outbound::new(Policy::default()).unwrap()
}

/// The call of `protocol` with `with` (its `parameters` taken out, as the model does); `check`
/// must find no problem.
fn call(protocol: Protocol, with: Value) -> ProtocolCall {
    let Value::Object(mut with) = with else {
        panic!("with is an object")
    };
    let parameters = with
        .remove("parameters")
        .map(|p| Template::compile(&p, &ARGUMENTS).unwrap());
    assert_eq!(check(protocol, &with), vec![], "{with:?}");
    ProtocolCall {
        protocol,
        with,
        parameters,
    }
}

/// Runs `call` on `input` with `definition` as `$workflow.definition`.
async fn run(
    out: &Outbound,
    call: &ProtocolCall,
    input: Value,
    definition: Value,
    key: &str,
) -> Result<Value, DslError> {
    let args: Args<'_> = vec![
        ("secrets", Cow::Owned(json!({"token": "s3cret"}))),
        ("workflow", Cow::Owned(json!({"definition": definition}))),
    ];
    match out.protocol(call, &input, &args, key).await {
        Ok(v) => Ok(v),
        Err(Stop::Fault(e)) => Err(e),
        Err(other) => panic!("not a DSL error: {other:?}"),
    }
}

fn assert_error(e: &DslError, kind: &str, status: u16) {
    assert_eq!(e.type_, format!("{ERRORS}{kind}"), "{e:?}");
    assert_eq!(e.status, status, "{e:?}");
}

// ---------------------------------------------------------------------------------------------
// check.
// ---------------------------------------------------------------------------------------------

fn problems(protocol: Protocol, with: Value) -> Vec<String> {
    let Value::Object(with) = with else {
        panic!("an object")
    };
    check(protocol, &with)
        .into_iter()
        .map(|(at, _)| at)
        .collect()
}

#[test]
fn check_names_what_cannot_run() {
    let a2a = Protocol::A2a;
    assert_eq!(problems(a2a, json!({"server": "http://h"})), ["/method"]);
    assert_eq!(
        problems(a2a, json!({"method": "message/send"})),
        [""],
        "agentCard or server"
    );
    assert_eq!(
        problems(a2a, json!({"method": "tasks/eat", "server": "http://h"})),
        ["/method"]
    );
    assert_eq!(
        problems(a2a, json!({"method": "tasks/get", "agentCard": {}})),
        ["/agentCard/endpoint"]
    );
    assert_eq!(
        problems(
            a2a,
            json!({"method": "tasks/get", "server": {"uri": "http://h",
                "authentication": {"oauth2": {"authority": "http://a"}}}})
        ),
        ["/server/authentication"]
    );
    assert!(
        problems(
            a2a,
            json!({"method": "tasks/get", "server": {"uri": "http://h",
        "authentication": {"bearer": {"token": "t"}}}})
        )
        .is_empty()
    );

    let mcp = Protocol::Mcp;
    let http = json!({"http": {"endpoint": "http://h/mcp"}});
    assert_eq!(problems(mcp, json!({"transport": http})), ["/method"]);
    assert_eq!(
        problems(mcp, json!({"method": "tools/list"})),
        ["/transport"]
    );
    assert_eq!(
        problems(
            mcp,
            json!({"method": "tools/list", "transport": {"http": {"endpoint": "http://h"},
                "stdio": {"command": "x"}}})
        ),
        ["/transport"]
    );
    assert_eq!(
        problems(
            mcp,
            json!({"method": "tools/list", "transport": {"stdio": {"arguments": ["a"]}}})
        ),
        ["/transport/stdio/command"]
    );
    assert_eq!(
        problems(
            mcp,
            json!({"method": "tools/list", "transport": {"stdio": {"command": "x",
                "arguments": [1], "environment": {"A": 1}}}})
        ),
        ["/transport/stdio/arguments", "/transport/stdio/environment"]
    );
    assert_eq!(
        problems(
            mcp,
            json!({"method": "tools/list", "timeout": "soon", "transport": http})
        ),
        ["/timeout"]
    );
    assert_eq!(
        problems(
            mcp,
            json!({"method": "sampling/createMessage", "transport": http})
        ),
        ["/method"]
    );
    assert!(
        problems(
            mcp,
            json!({"method": "tools/call", "timeout": {"seconds": 5}, "protocolVersion": "2025-03-26",
                "client": {"name": "c", "version": "1"}, "transport": http})
        )
        .is_empty()
    );
}

// ---------------------------------------------------------------------------------------------
// A2A.
// ---------------------------------------------------------------------------------------------

/// An A2A 0.3 agent: `message/send` answers a task echoing the message; `tasks/get` an error.
async fn agent_v03() -> Server {
    Server::start(|seen| match (seen.path.as_str(), seen.rpc()) {
        ("/card.json", _) => json_reply(json!({
            "name": "old", "protocolVersion": "0.3.0", "url": "/rpc",
            "preferredTransport": "JSONRPC"
        })),
        (_, "message/send") => json_reply(rpc_result(
            seen,
            json!({"kind": "task", "id": "t1", "message": seen.body["params"]["message"]}),
        )),
        (_, "message/stream") => {
            let events: Vec<Value> = (0..3)
                .map(|i| rpc_result(seen, json!({"kind": "status-update", "n": i})))
                .collect();
            sse_reply(&events)
        }
        (_, "tasks/get") => json_reply(rpc_error(seen, -32001, "Task t9 not found")),
        _ => json_reply(rpc_error(seen, -32601, "Method not found")),
    })
    .await
}

/// An A2A 1.0 agent like agentry's: a card of `supportedInterfaces`, the 1.0 method names
/// only (the 0.3 names: -32601).
async fn agent_v1() -> Server {
    let base = Arc::new(Mutex::new(String::new()));
    let b = base.clone();
    let server = Server::start(move |seen| match (seen.path.as_str(), seen.rpc()) {
        ("/a2a/helper/.well-known/agent-card.json", _) => json_reply(json!({
            "name": "helper",
            "supportedInterfaces": [
                {"url": format!("{}/grpc", b.lock().unwrap()), "protocolBinding": "GRPC",
                 "protocolVersion": "1.0"},
                {"url": format!("{}/a2a/helper", b.lock().unwrap()),
                 "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ]
        })),
        (_, "SendMessage") => json_reply(rpc_result(
            seen,
            json!({"task": {"id": "t1", "history": [seen.body["params"]["message"]]}}),
        )),
        (_, "SendStreamingMessage") => sse_reply(&[
            rpc_result(seen, json!({"task": {"id": "t1"}})),
            rpc_result(seen, json!({"statusUpdate": {"taskId": "t1"}})),
        ]),
        (_, "GetTask") => json_reply(rpc_result(seen, json!({"id": seen.body["params"]["id"]}))),
        _ => json_reply(rpc_error(seen, -32601, "Method not found")),
    })
    .await;
    *base.lock().unwrap() = server.base.clone();
    server
}

fn send_text(text: &str) -> Value {
    json!({"message": {"parts": [{"kind": "text", "text": text}]}})
}

#[tokio::test]
async fn a2a_message_send_to_a_server_defaults_the_message_id_and_role() {
    let agent = agent_v03().await;
    let out = outbound();
    let c = call(
        Protocol::A2a,
        json!({"method": "message/send", "server": agent.url("/rpc"),
            "parameters": {"message": {"parts": [{"kind": "text", "text": "${ .q }"}]}}}),
    );
    let got = run(
        &out,
        &c,
        json!({"q": "hello"}),
        Value::Null,
        "exec-1:wf/do/0/ask",
    )
    .await
    .unwrap();
    let message = &got["message"];
    assert_eq!(message["role"], "user");
    assert_eq!(
        message["parts"][0],
        json!({"kind": "text", "text": "hello"})
    );
    assert_eq!(message["messageId"], a2a::message_id("exec-1:wf/do/0/ask"));
    let seen = agent.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].body["jsonrpc"], "2.0");
    assert_eq!(seen[0].header("a2a-version"), None);
    assert_eq!(
        seen[0].header("idempotency-key"),
        Some("exec-1:wf/do/0/ask")
    );
}

#[test]
fn the_message_id_is_a_uuid_stable_for_a_key() {
    let a = a2a::message_id("e1:wf/do/0/ask");
    assert_eq!(a, a2a::message_id("e1:wf/do/0/ask"));
    assert_ne!(a, a2a::message_id("e1:wf/do/0/ask#2"));
    let id = uuid::Uuid::parse_str(&a).unwrap();
    assert_eq!(id.get_version_num(), 5);
}

#[tokio::test]
async fn a2a_by_a_1_0_card_sends_1_0_names_and_spelling() {
    let agent = agent_v1().await;
    let out = outbound();
    let card = agent.url("/a2a/helper/.well-known/agent-card.json");
    let c = call(
        Protocol::A2a,
        json!({"method": "message/send", "agentCard": {"endpoint": card},
        "parameters": {
            "message": {"kind": "message", "messageId": "m-given", "parts": [
                {"kind": "text", "text": "hi"},
                {"kind": "data", "data": {"a": 1}},
                {"kind": "file", "file": {"uri": "http://f/x.png", "mimeType": "image/png",
                    "name": "x.png"}}
            ]},
            "configuration": {"blocking": false}
        }}),
    );
    let got = run(&out, &c, Value::Null, Value::Null, "k1").await.unwrap();
    let message = &got["task"]["history"][0];
    assert_eq!(
        *message,
        json!({"messageId": "m-given", "role": "ROLE_USER", "parts": [
            {"text": "hi"},
            {"data": {"a": 1}},
            {"url": "http://f/x.png", "mediaType": "image/png", "filename": "x.png"}
        ]})
    );
    // Another method, the card kept: read once.
    let get = call(
        Protocol::A2a,
        json!({"method": "tasks/get", "agentCard": {"endpoint": {"uri": card}},
            "parameters": {"id": "t1"}}),
    );
    assert_eq!(
        run(&out, &get, Value::Null, Value::Null, "k2")
            .await
            .unwrap(),
        json!({"id": "t1"})
    );
    let seen = agent.seen();
    let cards = seen.iter().filter(|s| s.method == "GET").count();
    assert_eq!(cards, 1, "{seen:?}");
    let rpc: Vec<&Seen> = seen.iter().filter(|s| s.method == "POST").collect();
    assert_eq!(rpc[0].rpc(), "SendMessage");
    assert_eq!(rpc[0].path, "/a2a/helper");
    assert_eq!(rpc[0].header("a2a-version"), Some("1.0"));
    assert_eq!(
        rpc[0].body["params"]["configuration"],
        json!({"returnImmediately": true})
    );
    assert_eq!(rpc[1].rpc(), "GetTask");
}

#[tokio::test]
async fn a2a_by_a_0_3_card_keeps_0_3_names_and_streams() {
    let agent = agent_v03().await;
    let out = outbound();
    let c = call(
        Protocol::A2a,
        json!({"method": "message/stream", "agentCard": {"endpoint": agent.url("/card.json")},
            "parameters": send_text("hi")}),
    );
    let got = run(&out, &c, Value::Null, Value::Null, "k").await.unwrap();
    assert_eq!(
        got,
        json!([{"kind": "status-update", "n": 0}, {"kind": "status-update", "n": 1},
            {"kind": "status-update", "n": 2}])
    );
    let seen = agent.seen();
    let post = seen.iter().find(|s| s.method == "POST").unwrap();
    assert_eq!(post.path, "/rpc", "the card's relative url");
    assert_eq!(post.rpc(), "message/stream");
    assert_eq!(post.body["params"]["message"]["role"], "user");
    assert!(
        post.header("accept")
            .unwrap()
            .starts_with("text/event-stream")
    );
}

#[tokio::test]
async fn a2a_to_a_server_of_1_0_falls_back_to_1_0_names_once() {
    let agent = agent_v1().await;
    let out = outbound();
    let c = call(
        Protocol::A2a,
        json!({"method": "message/stream", "server": agent.url("/a2a/helper"),
            "parameters": send_text("hi")}),
    );
    let got = run(&out, &c, Value::Null, Value::Null, "k").await.unwrap();
    assert_eq!(
        got,
        json!([{"task": {"id": "t1"}}, {"statusUpdate": {"taskId": "t1"}}])
    );
    run(&out, &c, Value::Null, Value::Null, "k2").await.unwrap();
    let methods: Vec<String> = agent.seen().iter().map(|s| s.rpc().to_owned()).collect();
    assert_eq!(
        methods,
        [
            "message/stream",
            "SendStreamingMessage",
            "SendStreamingMessage"
        ]
    );
    let seen = agent.seen();
    assert_eq!(
        seen[0].body["params"]["message"]["messageId"],
        seen[1].body["params"]["message"]["messageId"],
        "the message sent again is the same message"
    );
}

#[tokio::test]
async fn a2a_errors_are_runtime_errors() {
    let agent = agent_v03().await;
    let out = outbound();
    let get = call(
        Protocol::A2a,
        json!({"method": "tasks/get", "server": agent.url("/rpc"), "parameters": {"id": "t9"}}),
    );
    let e = run(&out, &get, Value::Null, Value::Null, "k")
        .await
        .unwrap_err();
    assert_error(&e, "runtime", 500);
    assert_eq!(e.detail.as_deref(), Some("Task t9 not found"));

    let down = Server::start(|_| Reply {
        status: 503,
        content_type: "text/plain",
        headers: Vec::new(),
        body: "down for maintenance".into(),
    })
    .await;
    let c = call(
        Protocol::A2a,
        json!({"method": "tasks/get", "server": down.url("/"), "parameters": {"id": "t"}}),
    );
    let e = run(&out, &c, Value::Null, Value::Null, "k")
        .await
        .unwrap_err();
    assert_error(&e, "runtime", 500);
    assert!(e.detail.as_deref().unwrap().contains("503"), "{e:?}");

    let missing_card = call(
        Protocol::A2a,
        json!({"method": "tasks/get", "agentCard": {"endpoint": down.url("/card")}}),
    );
    let e = run(&out, &missing_card, Value::Null, Value::Null, "k")
        .await
        .unwrap_err();
    assert_error(&e, "runtime", 500);
    assert!(
        e.detail
            .as_deref()
            .unwrap()
            .starts_with("reading the agent card"),
        "{e:?}"
    );
}

#[tokio::test]
async fn a2a_sends_the_authentication_it_uses() {
    let agent = agent_v03().await;
    let out = outbound();
    let c = call(
        Protocol::A2a,
        json!({"method": "message/send", "server": {"uri": agent.url("/rpc"),
            "authentication": {"use": "agentToken"}}, "parameters": send_text("x")}),
    );
    let definition = json!({"use": {"authentications": {
        "agentToken": {"bearer": {"token": "${ $secrets.token }"}}}}});
    run(&out, &c, Value::Null, definition, "k").await.unwrap();
    assert_eq!(
        agent.seen()[0].header("authorization"),
        Some("Bearer s3cret")
    );
    let e = run(&out, &c, Value::Null, json!({}), "k")
        .await
        .unwrap_err();
    assert_error(&e, "configuration", 400);
}

#[tokio::test]
async fn a2a_respects_the_outbound_policy() {
    let agent = agent_v03().await;
    let out = Outbound::new(Policy::parse("10.0.0.0/8").unwrap()).unwrap();
    let c = call(
        Protocol::A2a,
        json!({"method": "message/send", "server": agent.url("/rpc"), "parameters": send_text("x")}),
    );
    let e = run(&out, &c, Value::Null, Value::Null, "k")
        .await
        .unwrap_err();
    assert_error(&e, "authorization", 403);
    assert!(agent.seen().is_empty());
}

// ---------------------------------------------------------------------------------------------
// MCP over HTTP.
// ---------------------------------------------------------------------------------------------

const SESSION: &str = "session-7";

/// An MCP server over Streamable HTTP: a session opened by `initialize`, required after it;
/// answers in JSON, or as SSE when `sse`.
async fn mcp_server(sse: bool) -> Server {
    Server::start(move |seen| {
        let answer = |m: Value| if sse { sse_reply(&[m]) } else { json_reply(m) };
        if seen.method == "DELETE" {
            return json_reply(json!({}));
        }
        if seen.rpc() != "initialize" && seen.header("mcp-session-id") != Some(SESSION) {
            return Reply {
                status: 404,
                content_type: "text/plain",
                headers: Vec::new(),
                body: "no such session".into(),
            };
        }
        match seen.rpc() {
            "initialize" => {
                let mut reply = answer(rpc_result(
                    seen,
                    json!({"protocolVersion": "2025-03-26", "capabilities": {"tools": {}},
                        "serverInfo": {"name": "t", "version": "1"}}),
                ));
                reply.headers.push(("mcp-session-id", SESSION.into()));
                reply
            }
            "notifications/initialized" => Reply {
                status: 202,
                content_type: "application/json",
                headers: Vec::new(),
                body: String::new(),
            },
            "tools/list" => answer(rpc_result(
                seen,
                json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}),
            )),
            "tools/call" => {
                let args = &seen.body["params"]["arguments"];
                let result = if args["fail"] == true {
                    json!({"content": [{"type": "text", "text": "the tool broke"}], "isError": true})
                } else {
                    json!({"content": [{"type": "text", "text": args["text"]}]})
                };
                // A progress notification first, on the same stream.
                if sse {
                    sse_reply(&[
                        json!({"jsonrpc": "2.0", "method": "notifications/progress",
                            "params": {"progress": 1}}),
                        rpc_result(seen, result),
                    ])
                } else {
                    json_reply(rpc_result(seen, result))
                }
            }
            _ => answer(rpc_error(seen, -32601, "Method not found")),
        }
    })
    .await
}

fn mcp_http(server: &Server, method: &str, parameters: Value) -> ProtocolCall {
    call(
        Protocol::Mcp,
        json!({"method": method, "parameters": parameters,
            "client": {"name": "tester", "version": "9"},
            "transport": {"http": {"endpoint": server.url("/mcp"),
                "headers": {"x-team": "blue"}}}}),
    )
}

#[tokio::test]
async fn mcp_tools_list_over_http_in_a_session() {
    let server = mcp_server(false).await;
    let out = outbound();
    let c = mcp_http(&server, "tools/list", Value::Null);
    let got = run(&out, &c, Value::Null, Value::Null, "e:wf/do/0/list")
        .await
        .unwrap();
    assert_eq!(got["tools"][0]["name"], "echo");
    let seen = server.seen();
    let steps: Vec<String> = seen
        .iter()
        .map(|s| format!("{} {}", s.method, s.rpc()))
        .collect();
    assert_eq!(
        steps,
        [
            "POST initialize",
            "POST notifications/initialized",
            "POST tools/list",
            "DELETE "
        ]
    );
    let init = &seen[0].body["params"];
    assert_eq!(init["protocolVersion"], mcp::DEFAULT_PROTOCOL_VERSION);
    assert_eq!(
        init["clientInfo"],
        json!({"name": "tester", "version": "9"})
    );
    assert_eq!(seen[0].header("mcp-session-id"), None);
    for s in &seen[1..] {
        assert_eq!(s.header("mcp-session-id"), Some(SESSION), "{s:?}");
        assert_eq!(s.header("mcp-protocol-version"), Some("2025-03-26"));
        assert_eq!(s.header("x-team"), Some("blue"));
    }
    assert!(
        seen[0]
            .header("accept")
            .unwrap()
            .contains("text/event-stream")
    );
    assert_eq!(seen[2].header("idempotency-key"), Some("e:wf/do/0/list"));
    assert_eq!(
        seen[0].header("idempotency-key"),
        Some("e:wf/do/0/list/initialize")
    );
    assert_eq!(seen[2].body.get("params"), None, "no parameters: no params");
}

#[tokio::test]
async fn mcp_tools_call_over_http_with_sse_answers() {
    let server = mcp_server(true).await;
    let out = outbound();
    let c = mcp_http(
        &server,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "${ .t }"}}),
    );
    let got = run(&out, &c, json!({"t": "hello"}), Value::Null, "k")
        .await
        .unwrap();
    assert_eq!(got, json!({"content": [{"type": "text", "text": "hello"}]}));

    let failing = mcp_http(
        &server,
        "tools/call",
        json!({"name": "echo", "arguments": {"fail": true}}),
    );
    let e = run(&out, &failing, Value::Null, Value::Null, "k")
        .await
        .unwrap_err();
    assert_error(&e, "runtime", 500);
    assert_eq!(e.detail.as_deref(), Some("the tool broke"));

    let unknown = mcp_http(&server, "prompts/list", Value::Null);
    let e = run(&out, &unknown, Value::Null, Value::Null, "k")
        .await
        .unwrap_err();
    assert_error(&e, "runtime", 500);
    assert_eq!(e.detail.as_deref(), Some("Method not found"));
}

#[tokio::test]
async fn mcp_over_http_times_out() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Accepts and never answers.
    let held = tokio::spawn(async move {
        let mut socks = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            socks.push(s);
        }
    });
    let out = outbound();
    let c = call(
        Protocol::Mcp,
        json!({"method": "tools/list", "timeout": {"milliseconds": 300},
            "transport": {"http": {"endpoint": format!("http://{addr}/mcp")}}}),
    );
    let started = Instant::now();
    let e = run(&out, &c, Value::Null, Value::Null, "k")
        .await
        .unwrap_err();
    assert_error(&e, "timeout", 408);
    assert!(started.elapsed() < Duration::from_secs(5));
    held.abort();
}

// ---------------------------------------------------------------------------------------------
// MCP over stdio.
// ---------------------------------------------------------------------------------------------

/// An MCP server over stdio: `tools/list` pings the client first (and shows the pong), and
/// shows two environment variables; `tools/call` echoes, or fails as a tool.
const STDIO_SERVER: &str = r#"
import sys, json, os
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    m = json.loads(line)
    if "method" not in m or "id" not in m:
        continue
    method, mid = m["method"], m["id"]
    if method == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "py", "version": "1"}, "client": m["params"]["clientInfo"]}
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}})
        send({"jsonrpc": "2.0", "id": "ping-1", "method": "ping"})
        pong = json.loads(sys.stdin.readline())
        r = {"tools": [{"name": "echo"}], "pong": pong, "greeting": os.environ.get("GREETING"),
             "inherited": os.environ.get("CARGO_PKG_NAME")}
    elif method == "tools/call":
        a = m["params"]["arguments"]
        if a.get("fail"):
            r = {"content": [{"type": "text", "text": "no can do"}], "isError": True}
        else:
            r = {"content": [{"type": "text", "text": a["text"]}]}
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "unknown"}})
        continue
    send({"jsonrpc": "2.0", "id": mid, "result": r})
"#;

/// The Python interpreter's own path (a shim may need variables the command does not get).
fn python() -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn mcp_stdio(method: &str, parameters: Value, script: &str) -> ProtocolCall {
    call(
        Protocol::Mcp,
        json!({"method": method, "parameters": parameters, "timeout": {"seconds": 20},
            "transport": {"stdio": {"command": python(), "arguments": ["-c", script],
                "environment": {"GREETING": "${ .greeting }"}}}}),
    )
}

#[tokio::test]
async fn mcp_stdio_is_refused_unless_allowed() {
    let c = mcp_stdio("tools/list", Value::Null, STDIO_SERVER);
    let e = run(&outbound(), &c, json!({}), Value::Null, "k")
        .await
        .unwrap_err();
    assert_error(&e, "authorization", 403);
    assert!(
        e.detail
            .as_deref()
            .unwrap()
            .contains("AGENTRY_DEFINITIONS_TRUSTED"),
        "{e:?}"
    );
}

#[tokio::test]
async fn mcp_stdio_runs_the_command_when_allowed() {
    assert!(std::env::var("CARGO_PKG_NAME").is_ok(), "cargo sets it");
    let out = outbound().with_stdio(true);
    let list = mcp_stdio("tools/list", Value::Null, STDIO_SERVER);
    let got = run(&out, &list, json!({"greeting": "hi"}), Value::Null, "k")
        .await
        .unwrap();
    assert_eq!(got["tools"][0]["name"], "echo");
    assert_eq!(
        got["pong"],
        json!({"jsonrpc": "2.0", "id": "ping-1", "result": {}})
    );
    assert_eq!(got["greeting"], "hi");
    assert_eq!(
        got["inherited"],
        Value::Null,
        "the server's environment is not passed"
    );

    let echo = mcp_stdio(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "bonjour"}}),
        STDIO_SERVER,
    );
    let got = run(&out, &echo, json!({}), Value::Null, "k").await.unwrap();
    assert_eq!(got["content"][0]["text"], "bonjour");

    let fail = mcp_stdio(
        "tools/call",
        json!({"name": "echo", "arguments": {"fail": true}}),
        STDIO_SERVER,
    );
    let e = run(&out, &fail, json!({}), Value::Null, "k")
        .await
        .unwrap_err();
    assert_error(&e, "runtime", 500);
    assert_eq!(e.detail.as_deref(), Some("no can do"));

    let prompts = mcp_stdio("prompts/list", Value::Null, STDIO_SERVER);
    let e = run(&out, &prompts, json!({}), Value::Null, "k")
        .await
        .unwrap_err();
    assert_error(&e, "runtime", 500);
    assert_eq!(e.detail.as_deref(), Some("unknown"));
}

#[tokio::test]
async fn mcp_stdio_failures_and_time_out() {
    let out = outbound().with_stdio(true);
    let crash = mcp_stdio(
        "tools/list",
        Value::Null,
        "import sys; sys.stderr.write('cannot start: no token'); sys.exit(3)",
    );
    let e = run(&out, &crash, json!({}), Value::Null, "k")
        .await
        .unwrap_err();
    assert_error(&e, "runtime", 500);
    assert!(
        e.detail
            .as_deref()
            .unwrap()
            .contains("cannot start: no token"),
        "{e:?}"
    );

    let missing = call(
        Protocol::Mcp,
        json!({"method": "tools/list",
            "transport": {"stdio": {"command": "/nonexistent/mcp-server"}}}),
    );
    let e = run(&out, &missing, json!({}), Value::Null, "k")
        .await
        .unwrap_err();
    assert_error(&e, "runtime", 500);

    let silent = call(
        Protocol::Mcp,
        json!({"method": "tools/list", "timeout": {"milliseconds": 400},
            "transport": {"stdio": {"command": python(),
                "arguments": ["-c", "import time; time.sleep(30)"]}}}),
    );
    let started = Instant::now();
    let e = run(&out, &silent, json!({}), Value::Null, "k")
        .await
        .unwrap_err();
    assert_error(&e, "timeout", 408);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

// ---------------------------------------------------------------------------------------------
// Server-sent events.
// ---------------------------------------------------------------------------------------------

#[test]
fn sse_reads_events_across_chunks_and_bounds_them() {
    let mut sse = Sse::default();
    assert!(sse.push(b": hello\n\ndata: {\"a\"").unwrap().is_empty());
    assert_eq!(sse.push(b":1}\r\n\r\nid: 3\nda").unwrap(), ["{\"a\":1}"]);
    assert_eq!(sse.push(b"ta: x\ndata: y\n\n").unwrap(), ["x\ny"]);
    assert_eq!(sse.push(b"data: last").unwrap(), Vec::<String>::new());
    assert_eq!(sse.finish().unwrap(), ["last"]);

    let mut many = Sse::default();
    let event = b"data: {}\n\n".repeat(MAX_MESSAGES + 1);
    let e = many.push(&event).unwrap_err();
    assert_error(&e, "runtime", 500);
}

#[test]
fn the_cache_forgets_the_oldest_when_full() {
    let cache = Cache::default();
    for i in 0..MAX_CACHED + 3 {
        cache.put(&format!("k{i}"), json!(i));
    }
    assert_eq!(cache.get("k0"), None);
    assert_eq!(
        cache.get(&format!("k{}", MAX_CACHED + 2)),
        Some(json!(MAX_CACHED + 2))
    );
    assert_eq!(cache.entries.lock().unwrap().len(), MAX_CACHED);
}
