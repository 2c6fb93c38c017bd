//! WebSocket routes: live logs (`/ws/logs`) and one execution's live events
//! (`/ws/executions/{executionId}`). Every message the server sends is a JSON text message with
//! a `type`; messages from the client are ignored (pings are answered, a close is echoed).
//!
//! `/ws/logs` takes the query of `/api/logs` (an invalid one is answered with the 400 envelope,
//! without upgrading). When `limit` or `since` is given, the socket first sends the matching
//! backlog (the last `limit` records, default 100, after `since`); then every new record that
//! matches `level`, `agentId`, `workflowId` and `executionId` as it is logged:
//! `{"type": "log", ...record}`. A client too slow to keep up is told how many records it
//! missed: `{"type": "lagged", "missed": n}`.
//!
//! `/ws/executions/{executionId}` sends `{"type": "execution-state", ...state}` (the `data` of
//! the state endpoint), then the execution's events as the SSE stream has them, ending with
//! `workflow-result`, then closes with 1000. An execution that is not running (completed,
//! failed or suspended) gets its state and a `workflow-result` built from it, then the close.
//! An execution running in another server process is polled: when it ends, its
//! `workflow-result` and the close follow; should it move to this process, a fresh
//! `execution-state` is sent and its events follow. An unknown execution gets
//! `{"type": "error", "error": "Execution <id> not found"}` and a close with 1008.
//!
//! At a graceful shutdown the server calls [`close_all`]: log sockets (and execution sockets
//! that are only polling) close with 1001; a socket following a run here ends with the run,
//! which the shutdown suspends.

use std::sync::OnceLock;
use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, get, web};
use actix_ws::{CloseCode, CloseReason, Message, MessageStream, Session};
use agentry_app::workflows::Watch;
use agentry_engine::EventKind;
use agentry_logs::{LogHub, LogQuery, LogQueryParams};

use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;

use crate::AppState;
use crate::auth::Requester;
use crate::error::ApiError;
use crate::wire::ExecutionStateView;
use crate::wire::events::WorkflowEvent;
use crate::wire::sockets::SocketMessage;

/// A ticker for keep-alive pings (`HttpConfig::ws_keepalive`) whose first tick is one period
/// away.
fn keepalive(period: Duration) -> tokio::time::Interval {
    let period = period.max(Duration::from_millis(10));
    let mut i = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    i
}

/// Bumped by [`close_all`]; every socket watches it from its start.
fn closing() -> &'static watch::Sender<u64> {
    static CLOSING: OnceLock<watch::Sender<u64>> = OnceLock::new();
    CLOSING.get_or_init(|| watch::channel(0).0)
}

/// Closes (with 1001, going away) every `/ws/logs` socket open now, and every
/// `/ws/executions/...` socket not following a run of this process (those end with their run,
/// which a graceful shutdown suspends). Call it when a graceful shutdown begins: the server waits
/// for open connections, and a log socket would otherwise hold it until the shutdown time-out.
/// Sockets opened afterwards are not affected.
pub fn close_all() {
    closing().send_modify(|generation| *generation = generation.wrapping_add(1));
}

fn going_away() -> Option<CloseReason> {
    close_reason(CloseCode::Away, Some("server shutting down"))
}

/// What the client did while the server waited for something else.
enum Client {
    /// Nothing that needs an answer beyond the one already given (a ping was answered).
    Quiet,
    /// Sent a close frame (with this reason), or the connection went away.
    Gone(Option<CloseReason>),
}

/// Handles one message from the client.
async fn client_message(
    session: &mut Session,
    msg: Option<Result<Message, actix_ws::ProtocolError>>,
) -> Client {
    match msg {
        Some(Ok(Message::Ping(bytes))) => {
            if session.pong(&bytes).await.is_err() {
                return Client::Gone(None);
            }
            Client::Quiet
        }
        Some(Ok(Message::Close(reason))) => Client::Gone(reason),
        Some(Ok(_)) => Client::Quiet,
        Some(Err(_)) | None => Client::Gone(None),
    }
}

fn close_reason(code: CloseCode, description: Option<&str>) -> Option<CloseReason> {
    Some(CloseReason {
        code,
        description: description.map(str::to_owned),
    })
}

/// GET /ws/logs
#[utoipa::path(
    tag = "observability",
    operation_id = "logsSocket",
    summary = "WebSocket: live log records",
    description = "A WebSocket (send `Connection: Upgrade`, `Upgrade: websocket`). Takes the query \
        of `GET /api/logs`. With `limit` or `since`, first sends the matching backlog; then every \
        new record that matches, as it is logged: a text message `{\"type\": \"log\", ...record}`. \
        A client too slow to keep up is told `{\"type\": \"lagged\", \"missed\": n}`. Messages \
        from the client are ignored (pings are answered, a close is echoed).",
    params(LogQueryParams),
    responses(
        (status = 101, description = "Switching Protocols: the WebSocket is open."),
    ),
)]
#[get("/ws/logs")]
pub async fn logs(
    req: HttpRequest,
    body: web::Payload,
    app: web::Data<AppState>,
    params: web::Query<LogQueryParams>,
    caller: Requester,
) -> Result<HttpResponse, actix_web::Error> {
    app.config.allowed_origins.check(req.head())?;
    let params = params.into_inner();
    let with_backlog = [&params.limit, &params.since]
        .iter()
        .any(|p| p.as_deref().is_some_and(|s| !s.trim().is_empty()));
    // The caller first (in strict mode, admins only), then the query.
    let query = app
        .app
        .log_query(&caller.0, params)
        .map_err(ApiError::from)?;
    let period = app.config.ws_keepalive;
    let (response, session, stream) = actix_ws::handle(&req, body)?;
    actix_web::rt::spawn(pump_logs(session, stream, query, with_backlog, period));
    Ok(response)
}

async fn pump_logs(
    mut session: Session,
    mut stream: MessageStream,
    query: LogQuery,
    with_backlog: bool,
    period: Duration,
) {
    let mut shutdown = closing().subscribe();
    let (backlog, mut live) = LogHub::global().subscribe_with_backlog(&query);
    if with_backlog {
        for r in backlog {
            if session
                .text(SocketMessage::Log(&r).to_json())
                .await
                .is_err()
            {
                return;
            }
        }
    }
    let mut ping = keepalive(period);
    loop {
        tokio::select! {
            _ = shutdown.changed() => {
                let _ = session.close(going_away()).await;
                return;
            }
            _ = ping.tick() => {
                if session.ping(b"").await.is_err() {
                    return;
                }
            }
            msg = stream.recv() => {
                if let Client::Gone(reason) = client_message(&mut session, msg).await {
                    let _ = session.close(reason).await;
                    return;
                }
            }
            rec = live.recv() => {
                let msg = match rec {
                    Ok(r) if query.matches(&r) => SocketMessage::Log(&r).to_json(),
                    Ok(_) => continue,
                    Err(RecvError::Lagged(n)) => SocketMessage::Lagged { missed: n }.to_json(),
                    Err(RecvError::Closed) => {
                        let _ = session.close(close_reason(CloseCode::Away, None)).await;
                        return;
                    }
                };
                if session.text(msg).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// GET /ws/executions/{executionId}
#[utoipa::path(
    tag = "observability",
    operation_id = "executionSocket",
    summary = "WebSocket: one execution's live events",
    description = "A WebSocket (send `Connection: Upgrade`, `Upgrade: websocket`). Sends \
        `{\"type\": \"execution-state\", ...state}` (the `data` of the state endpoint), then the \
        execution's events as the workflow stream has them, ending with `workflow-result`, then \
        closes with 1000. An execution that is not running gets its state and a \
        `workflow-result`, then the close. An unknown execution gets \
        `{\"type\": \"error\", \"error\": \"Execution <id> not found\"}` and a close with 1008.",
    params(("execution_id" = String, Path, description = "The execution's id.", example = "exp-1")),
    responses(
        (status = 101, description = "Switching Protocols: the WebSocket is open."),
    ),
)]
#[get("/ws/executions/{execution_id}")]
pub async fn execution(
    req: HttpRequest,
    body: web::Payload,
    app: web::Data<AppState>,
    path: web::Path<String>,
    caller: Requester,
) -> Result<HttpResponse, actix_web::Error> {
    app.config.allowed_origins.check(req.head())?;
    let watch = app
        .app
        .watch(&caller.0, &path.into_inner().into())
        .await
        .map_err(ApiError::from)?;
    let (response, session, stream) = actix_ws::handle(&req, body)?;
    let shutdown = closing().subscribe();
    let keepalive = app.config.ws_keepalive;
    actix_web::rt::spawn(async move {
        let mut follow = Follow {
            watch,
            session,
            stream,
            shutdown,
            keepalive,
        };
        let end = follow.run().await;
        let Follow { mut session, .. } = follow;
        let reason = match end {
            End::Done => close_reason(CloseCode::Normal, None),
            End::Client(reason) => reason,
            End::Shutdown => going_away(),
            End::Failed(message, code, description) => {
                let msg = SocketMessage::Error { error: message };
                if session.text(msg.to_json()).await.is_err() {
                    return;
                }
                close_reason(code, Some(description))
            }
            End::Closed => return,
        };
        let _ = session.close(reason).await;
    });
    Ok(response)
}

/// How following an execution ended.
enum End {
    /// The last event was sent.
    Done,
    /// The client closed (echo its reason).
    Client(Option<CloseReason>),
    /// The server is shutting down (close with 1001).
    Shutdown,
    /// Send `{"type": "error", "error": message}`, then close with the code.
    Failed(String, CloseCode, &'static str),
    /// The socket is gone: nothing more to send.
    Closed,
}

struct Follow {
    watch: Watch,
    session: Session,
    stream: MessageStream,
    shutdown: watch::Receiver<u64>,
    keepalive: Duration,
}

impl Follow {
    async fn send(&mut self, text: String) -> Result<(), End> {
        self.session.text(text).await.map_err(|_| End::Closed)
    }

    async fn read(&self) -> Result<ExecutionStateView, End> {
        match self.watch.state().await {
            Ok(Some(state)) => Ok(state),
            Ok(None) => Err(End::Failed(
                format!("Execution {} not found", self.watch.execution_id()),
                CloseCode::Policy,
                "execution not found",
            )),
            Err(e) => Err(End::Failed(e.message, CloseCode::Error, "store error")),
        }
    }

    /// Reads the state and sends it as `execution-state`.
    async fn send_state(&mut self) -> Result<(), End> {
        let state = self.read().await?;
        self.send(SocketMessage::ExecutionState(Box::new(state)).to_json())
            .await
    }

    async fn run(&mut self) -> End {
        match self.follow().await {
            Ok(()) => End::Done,
            Err(end) => end,
        }
    }

    async fn follow(&mut self) -> Result<(), End> {
        self.send_state().await?;
        // The whole log from its first event, then each new one, wherever the execution runs;
        // `workflow-result` last.
        let mut events = match self.watch.events().await {
            Ok(Some(handle)) => handle.events,
            Ok(None) => return Err(self.read().await.err().unwrap_or(End::Done)),
            Err(e) => return Err(End::Failed(e.message, CloseCode::Error, "store error")),
        };
        let mut ping = keepalive(self.keepalive);
        loop {
            tokio::select! {
                _ = self.shutdown.changed() => return Err(End::Shutdown),
                _ = ping.tick() => {
                    self.session.ping(b"").await.map_err(|_| End::Closed)?;
                }
                msg = self.stream.recv() => self.client(msg).await?,
                ev = events.recv() => match ev {
                    Some(ev) => {
                        self.send(WorkflowEvent::to_json(&ev)).await?;
                        if matches!(ev.kind, EventKind::WorkflowResult { .. }) {
                            return Ok(());
                        }
                    }
                    None => return Ok(()),
                },
            }
        }
    }

    async fn client(
        &mut self,
        msg: Option<Result<Message, actix_ws::ProtocolError>>,
    ) -> Result<(), End> {
        match client_message(&mut self.session, msg).await {
            Client::Quiet => Ok(()),
            Client::Gone(reason) => Err(End::Client(reason)),
        }
    }
}

/// Registers the WebSocket routes.
pub fn routes(cfg: &mut crate::registration::Routes<'_, '_>) {
    cfg.service(logs).service(execution);
}
