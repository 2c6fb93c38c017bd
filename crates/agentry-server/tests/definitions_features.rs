//! Serverless Workflow definitions, black-box, with the real binary: `agentry check` on good
//! and bad folders, a folder refused whole at the start, `$secrets` (hidden everywhere, a
//! missing one refused), a `schedule`, `run: workflow`, and the examples of
//! `examples/definitions/` running as their comments say.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::definitions::*;
use serde_json::{Value, json};

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A folder of definitions (`workflows/<name>.yaml`) under a fresh temporary folder.
fn folder(workflows: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agentry-defs-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(dir.join("workflows")).expect("a folder");
    for (name, yaml) in workflows {
        std::fs::write(dir.join("workflows").join(format!("{name}.yaml")), yaml).expect("a file");
    }
    dir
}

/// Runs the binary with `args` to its end (at most 30 s): its exit code, stdout and stderr.
fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentry"));
    for var in ENV_CLEARED {
        cmd.env_remove(var);
    }
    let mut child = cmd
        .args(args)
        .envs(env.iter().copied())
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("agentry");
    let started = Instant::now();
    while child.try_wait().expect("waiting").is_none() {
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("agentry {args:?} did not end within 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("its output");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const GOOD: &str = "
document: { dsl: '1.0.3', namespace: t, name: good, version: '1.0.0' }
do:
  - greet:
      set:
        hello: '${ .name }'
";

/// Three problems: a misspelled task kind, an unknown function, a bad expression.
const BAD: &str = "
document: { dsl: '1.0.3', namespace: t, name: bad, version: '1.0.0' }
do:
  - greet:
      sett:
        hello: world
  - fetch:
      call: carrier-pigeon
  - shout:
      set:
        loud: '${ .name | ascii_upcase( }'
";

#[test]
fn check_passes_good_folders_and_names_each_problem_of_bad_ones() {
    let (code, out, err) = run(
        &[
            "check",
            repo().join("examples/definitions").to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("6 definitions"), "{out}");

    let bad = folder(&[("good", GOOD), ("bad", BAD)]);
    let (code, _, err) = run(&["check", bad.to_str().unwrap()], &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("workflows/bad.yaml: /do/0/greet/sett"),
        "{err}"
    );
    assert!(err.contains("did you mean `set`"), "{err}");
    assert!(!err.contains("good.yaml"), "{err}");
    let _ = std::fs::remove_dir_all(bad);

    // The same document with the shape fixed: agentry's own rules speak.
    let rules = folder(&[(
        "bad",
        &BAD.replace("sett:", "set:").replace(
            "carrier-pigeon",
            "http\n      with: { method: get, endpoint: 'http://localhost/' }",
        ),
    )]);
    let (code, _, err) = run(&["check", rules.to_str().unwrap()], &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("workflows/bad.yaml: /do/2/shout/set/loud: bad expression"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(rules);
}

/// The event forms agentry does not run: `any: []`, an `until` of `all` events, two ways to
/// start in one `schedule`, a correlation in `schedule.on`; each with its pointer.
const EVENT_FORMS: &str = "
document: { dsl: '1.0.3', namespace: t, name: events, version: '1.0.0' }
schedule:
  after: { seconds: 5 }
  on:
    one:
      with: { type: com.example.go }
      correlate:
        id: { from: '${ .id }', expect: x }
do:
  - anything:
      listen:
        to:
          any: []
  - untilAll:
      listen:
        to:
          any:
            - with: { type: com.example.a }
          until:
            all:
              - with: { type: com.example.b }
";

#[test]
fn check_names_the_event_forms_agentry_does_not_run() {
    let dir = folder(&[("events", EVENT_FORMS)]);
    let (code, _, err) = run(&["check", dir.to_str().unwrap()], &[]);
    assert_eq!(code, 1, "{err}");
    for expected in [
        "/schedule: one of `cron`, `every`, `after` or `on`",
        "/schedule/on/one/correlate: a correlation in `schedule.on`",
        "/do/0/anything/listen/to: an empty list of event filters",
        "/do/1/untilAll/listen/to/until: an `until` of `all` events",
    ] {
        assert!(err.contains(expected), "{expected}:\n{err}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_folder_with_a_problem_or_a_taken_name_stops_the_start() {
    let bad = folder(&[("good", GOOD), ("bad", BAD)]);
    let db = format!("sqlite://{}", bad.join("a.db").display());
    let args = [
        "serve",
        "--bind",
        "127.0.0.1:0",
        "--database-url",
        &db,
        "--definitions",
        bad.to_str().unwrap(),
    ];
    let (code, _, err) = run(&args, &[("AGENTRY_NO_EXAMPLES", "1")]);
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains("are refused") && err.contains("/do/0/greet/sett"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(bad);

    let taken = folder(&[("wc", &GOOD.replace("name: good", "name: word-count"))]);
    let db = format!("sqlite://{}", taken.join("a.db").display());
    let args = [
        "serve",
        "--bind",
        "127.0.0.1:0",
        "--database-url",
        &db,
        "--definitions",
        taken.to_str().unwrap(),
    ];
    let (code, _, err) = run(&args, &[]);
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains("the workflow word-count is compiled into the server"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(taken);
}

const SECRET_USER: &str = "
document: { dsl: '1.0.3', namespace: t, name: secret-user, version: '1.0.0' }
use:
  secrets: [ apiToken ]
do:
  - show:
      set:
        header: '${ \"Bearer \" + $secrets.apiToken }'
        length: '${ $secrets.apiToken | length }'
  - fail:
      if: '${ .length > 100 }'
      raise:
        error: { type: 'https://agentry.example/never', status: 500 }
";

const SECRET_MISSING: &str = "
document: { dsl: '1.0.3', namespace: t, name: secret-missing, version: '1.0.0' }
use:
  secrets: [ notSetAnywhere ]
do:
  - nothing:
      set: { x: 1 }
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_read_and_never_shown() {
    within(async {
        let secret = "hunter2-Zq9-never-shown";
        let s = Server::start(
            &[
                ("user", SECRET_USER.into()),
                ("missing", SECRET_MISSING.into()),
            ],
            &[("AGENTRY_SECRET_APITOKEN", secret)],
        );
        let done = execute(&s, "secret-user", "s-1", json!({}), None).await;
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(
            done["result"],
            json!({"header": "Bearer ***", "length": secret.len()})
        );
        let st = state(&s, "secret-user", "s-1", None).await;
        assert!(!st.to_string().contains(secret), "{st}");
        let log = client()
            .get(s.url("/workflows/secret-user/executions/s-1/stream"))
            .send()
            .await
            .expect("the stream")
            .text()
            .await
            .expect("its events");
        assert!(
            log.contains("task-complete") && !log.contains(secret),
            "{log}"
        );
        assert!(
            !s.log().contains(secret),
            "the server's log shows the secret"
        );

        let (status, _) = post(
            &s,
            "/workflows/secret-missing/execute",
            &json!({"input": {}, "options": {"executionId": "m-1"}}),
            None,
        )
        .await;
        assert_eq!(status, 500);
        let st = ended(&s, "secret-missing", "m-1", None).await;
        let error = &st["error"];
        assert_eq!(
            error["type"],
            "https://serverlessworkflow.io/spec/1.0.0/errors/authorization"
        );
        assert_eq!(error["status"], 403);
        assert!(
            error["detail"]
                .as_str()
                .unwrap()
                .contains("AGENTRY_SECRET_NOTSETANYWHERE"),
            "{error}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_starts_the_definition_by_itself() {
    within(async {
        let ticker = "
document: { dsl: '1.0.3', namespace: t, name: ticker, version: '1.0.0' }
schedule:
  every: { seconds: 1 }
do:
  - tick:
      set: { ticked: true }
";
        let s = Server::start(&[("ticker", ticker.into())], &[]);
        let (status, body) = answer(client().get(s.url("/schedules/definition-ticker"))).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["data"]["cron"], "*/1 * * * * *");
        let started = Instant::now();
        loop {
            let (_, list) =
                answer(client().get(s.url("/workflows/ticker/executions?status=completed"))).await;
            if list["data"]["executions"]
                .as_array()
                .is_some_and(|e| e.len() >= 2)
            {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(8),
                "no two fires: {list}\n{}",
                s.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_workflow_starts_a_child_execution() {
    within(async {
        let parent = "
document: { dsl: '1.0.3', namespace: t, name: parent, version: '1.0.0' }
do:
  - child:
      run:
        workflow: { namespace: t, name: child, version: '1.0.0', input: { n: '${ .n }' } }
  - after:
      set: { doubled: '${ .doubled }', via: child }
";
        let child = "
document: { dsl: '1.0.3', namespace: t, name: child, version: '1.0.0' }
do:
  - double:
      set: { doubled: '${ .n * 2 }' }
";
        let s = Server::start(&[("parent", parent.into()), ("child", child.into())], &[]);
        let done = execute(&s, "parent", "p-1", json!({"n": 21}), None).await;
        assert_eq!(
            done["result"],
            json!({"doubled": 42, "via": "child"}),
            "{done}"
        );
        let child_state = completed(&s, "child", "p-1:workflow.do.0.child", None).await;
        assert_eq!(child_state["context"]["parentExecutionId"], "p-1");
    })
    .await;
}

/// `output.schema` (a task's and the workflow's) and `export.schema` check what their `as`
/// made: a value they refuse is the DSL's `validation` error (400) naming the task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_and_export_schemas_check_their_values() {
    within(async {
        let doc = "
document: { dsl: '1.0.3', namespace: t, name: shaped, version: '1.0.0' }
output:
  schema: { format: json, document: { type: object, required: [total] } }
do:
  - count:
      set: { total: '${ .n }' }
      output:
        as: '${ {total: .total} }'
        schema: { format: json, document: { type: object, properties: { total: { type: integer } } } }
      export:
        as: '${ {seen: .total} }'
        schema: { format: json, document: { type: object, properties: { seen: { maximum: 100 } } } }
";
        let s = Server::start(&[("shaped", doc.into())], &[]);
        let done = execute(&s, "shaped", "ok-1", json!({"n": 7}), None).await;
        assert_eq!(done["result"], json!({"total": 7}), "{done}");

        let failed = |body: Value| body["error"].clone();
        for (id, n, instance) in [
            ("output-1", json!("seven"), "/do/0/count"),
            ("export-1", json!(500), "/do/0/count"),
        ] {
            let body = json!({"input": {"n": n}, "options": {"executionId": id}});
            let (status, answer) = post(&s, "/workflows/shaped/execute", &body, None).await;
            assert_eq!(status, 500, "{answer}");
            let st = ended(&s, "shaped", id, None).await;
            let error = failed(st.clone());
            assert_eq!(
                error["type"],
                "https://serverlessworkflow.io/spec/1.0.0/errors/validation",
                "{st:#}"
            );
            assert_eq!(error["status"], 400, "{st:#}");
            assert_eq!(error["instance"], instance, "{st:#}");
        }
    })
    .await;
}

/// The examples of `examples/definitions/`, as their comments run them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_examples_run_as_documented() {
    within(async {
        let port = common::free_port();
        let dir = repo().join("examples/definitions/workflows");
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("the examples") {
            let path = entry.expect("an example").path();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path)
                .expect("an example")
                .replace("127.0.0.1:3141", &format!("127.0.0.1:{port}"));
            files.push((name, text));
        }
        let files: Vec<(&str, String)> =
            files.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
        let bind = format!("127.0.0.1:{port}");
        let s = Server::start(
            &files,
            &[("AGENTRY_NO_EXAMPLES", "0"), ("AGENTRY_BIND", &bind)],
        );

        let shipped = execute(
            &s,
            "order-saga",
            "o-1",
            json!({"orderId": "o-1", "amount": 40}),
            None,
        )
        .await;
        assert_eq!(
            shipped["result"],
            json!({"orderId": "o-1", "charged": 40, "status": "shipped"})
        );
        let refused = execute(
            &s,
            "order-saga",
            "o-2",
            json!({"orderId": "o-2", "amount": 4000}),
            None,
        )
        .await;
        assert_eq!(refused["result"]["status"], "cancelled", "{refused}");
        assert_eq!(
            refused["result"]["reason"],
            "the card refused a charge of 4000"
        );

        let counted = execute(
            &s,
            "word-count-fan-out",
            "w-1",
            json!({"texts": ["one two three", "four five", "six"]}),
            None,
        )
        .await;
        assert_eq!(
            counted["result"],
            json!({"total": 6, "longest": "one two three"})
        );

        let waiting = execute(
            &s,
            "expense-decision",
            "e-7",
            json!({"expenseId": "e-7", "amount": 120}),
            None,
        )
        .await;
        assert_eq!(waiting["status"], "suspended", "{waiting}");
        let (status, sent) = post(
            &s,
            "/events/expense.decided",
            &json!({"key": "e-7", "data": {"expenseId": "e-7", "approved": true, "by": "ana"}}),
            None,
        )
        .await;
        assert_eq!(status, 200, "{sent}");
        let decided = completed(&s, "expense-decision", "e-7", None).await;
        assert_eq!(
            decided["result"],
            json!({"expenseId": "e-7", "amount": 120, "approved": true, "by": "ana"})
        );

        let asked = execute(
            &s,
            "ask-assistant",
            "a-1",
            json!({"question": "What is 6 times 7?"}),
            None,
        )
        .await;
        assert_eq!(asked["status"], "completed", "{asked}\n{}", s.log());
        assert!(
            asked["result"]["answer"]
                .as_str()
                .is_some_and(|a| !a.is_empty()),
            "{asked}"
        );

        // A definition shows its document.
        let (_, detail) = answer(client().get(s.url("/workflows/order-saga"))).await;
        assert_eq!(
            detail["data"]["definition"]["document"]["name"],
            "order-saga"
        );
        assert_eq!(detail["data"]["version"], "1.0.0");
        let _: &Value = &detail;
    })
    .await;
}

/// A retry whose delay is over the in-process limit suspends the execution with a durable timer
/// at a recorded time (`<try>/retry-<n>`): the timer's run waits no more, and the policy's limit
/// then gives up to the handler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_retry_delay_is_a_durable_timer_at_a_recorded_time() {
    let retrier = "
document: { dsl: '1.0.3', namespace: t, name: retrier, version: '1.0.0' }
do:
  - attempt:
      try:
        - fail:
            raise:
              error: { type: 'https://agentry.example/flaky', status: 503, title: Flaky }
      catch:
        errors:
          with: { status: 503 }
        retry:
          delay: { seconds: 11 }
          limit:
            attempt: { count: 2 }
        do:
          - gaveUp:
              set: { gaveUp: true }
";
    let test = async {
        let s = Server::start(&[("retrier", retrier.into())], &[]);
        let first = execute(&s, "retrier", "r-1", json!({}), None).await;
        assert_eq!(first["status"], "suspended", "{first}");
        assert!(
            first["suspension"]["reason"]
                .as_str()
                .unwrap()
                .starts_with("Retrying until")
        );
        let started = Instant::now();
        let st = loop {
            let st = state(&s, "retrier", "r-1", None).await;
            if st["status"] == "completed" {
                break st;
            }
            assert!(
                started.elapsed() < Duration::from_secs(40),
                "{st:#}\n{}",
                s.log()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        assert_eq!(st["result"], json!({"gaveUp": true}));
        let retry = &st["steps"]["workflow/do/0/attempt/retry-1"];
        assert_eq!(retry["status"], "completed", "{st:#}");
        assert!(retry["output"]["until"].is_string(), "{retry}");
        // Tried twice, no more: the second failure is the task's second run.
        assert_eq!(
            st["steps"]["workflow/do/0/attempt/try/0/fail#2"]["status"],
            "failed"
        );
        assert!(
            st["steps"]
                .get("workflow/do/0/attempt/try/0/fail#3")
                .is_none()
        );
    };
    tokio::time::timeout(Duration::from_secs(60), test)
        .await
        .expect("the test took longer than a minute");
}
