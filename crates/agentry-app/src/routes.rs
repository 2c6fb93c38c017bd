//! The route table of the application's use cases: each HTTP route's method and path, declared
//! once. `agentry-http` registers and guards them by these rows (its `access.rs` table is built
//! from them), and every link an answer carries (MCP's resume link, `/doc`'s links) is made
//! from them, so a path is never written twice.

/// A route: its method and its path pattern (`{name}` for each parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
}

impl Route {
    pub const fn new(method: &'static str, path: &'static str) -> Self {
        Self { method, path }
    }

    /// The path with its parameters filled in, in order (a value is used as given: ids are
    /// plain words that need no escaping).
    pub fn link(&self, values: &[&str]) -> String {
        let mut out = String::with_capacity(self.path.len() + 32);
        let mut values = values.iter();
        let mut rest = self.path;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let close = rest[open..].find('}').map_or(rest.len(), |c| open + c + 1);
            out.push_str(values.next().copied().unwrap_or(&rest[open..close]));
            rest = &rest[close..];
        }
        out.push_str(rest);
        out
    }
}

pub const LIST_AGENTS: Route = Route::new("GET", "/agents");
pub const GET_AGENT: Route = Route::new("GET", "/agents/{id}");
pub const GENERATE_TEXT: Route = Route::new("POST", "/agents/{id}/text");
pub const STREAM_TEXT: Route = Route::new("POST", "/agents/{id}/stream");
pub const GENERATE_OBJECT: Route = Route::new("POST", "/agents/{id}/object");
pub const STREAM_OBJECT: Route = Route::new("POST", "/agents/{id}/stream-object");
pub const CHAT: Route = Route::new("POST", "/agents/{id}/chat");
pub const GET_WORKING_MEMORY: Route = Route::new("GET", "/agents/{id}/memory/working");
pub const SET_WORKING_MEMORY: Route = Route::new("PUT", "/agents/{id}/memory/working");
pub const AGENT_USAGE: Route = Route::new("GET", "/agents/{id}/usage");

pub const LIST_AGENT_RUNS: Route = Route::new("GET", "/agents/{id}/runs");
pub const LIST_ALL_RUNS: Route = Route::new("GET", "/agent-runs");
pub const GET_RUN: Route = Route::new("GET", "/agents/{id}/runs/{run_id}");
pub const ATTACH_RUN: Route = Route::new("GET", "/agents/{id}/runs/{run_id}/stream");
pub const RESUME_CHAT: Route = Route::new("GET", "/agents/{id}/chat/{conversation_id}/stream");
pub const CANCEL_RUN: Route = Route::new("POST", "/agents/{id}/runs/{run_id}/cancel");
pub const ANSWER_APPROVAL: Route =
    Route::new("POST", "/agents/{id}/runs/{run_id}/approvals/{approval_id}");
pub const LIST_AGENT_SCORES: Route = Route::new("GET", "/agents/{id}/scores");

pub const LIST_WORKFLOWS: Route = Route::new("GET", "/workflows");
pub const GET_WORKFLOW: Route = Route::new("GET", "/workflows/{id}");
pub const EXECUTE: Route = Route::new("POST", "/workflows/{id}/execute");
pub const STREAM: Route = Route::new("POST", "/workflows/{id}/stream");
pub const SUSPEND: Route = Route::new("POST", "/workflows/{id}/executions/{execution_id}/suspend");
pub const RESUME: Route = Route::new("POST", "/workflows/{id}/executions/{execution_id}/resume");
pub const STATE: Route = Route::new("GET", "/workflows/{id}/executions/{execution_id}/state");
pub const ATTACH: Route = Route::new("GET", "/workflows/{id}/executions/{execution_id}/stream");
pub const LIST_EXECUTIONS: Route = Route::new("GET", "/workflows/{id}/executions");
pub const CANCEL: Route = Route::new("POST", "/workflows/{id}/executions/{execution_id}/cancel");
pub const DELIVER_EVENT: Route = Route::new(
    "POST",
    "/workflows/{id}/executions/{execution_id}/events/{name}",
);
pub const SEND_EVENT: Route = Route::new("POST", "/events/{name}");
pub const SEND_CLOUD_EVENT: Route = Route::new("POST", "/events");
pub const RETRY: Route = Route::new("POST", "/workflows/{id}/executions/{execution_id}/retry");
pub const FORK: Route = Route::new("POST", "/workflows/{id}/executions/{execution_id}/fork");

pub const LIST_ALL_EXECUTIONS: Route = Route::new("GET", "/executions");
pub const FIND_EXECUTION: Route = Route::new("GET", "/executions/{execution_id}");
pub const COUNT_EXECUTIONS: Route = Route::new("GET", "/api/execution-counts");

pub const LIST_QUEUES: Route = Route::new("GET", "/queues");
pub const GET_QUEUE: Route = Route::new("GET", "/queues/{name}");

pub const DEPLOY_DEFINITION: Route = Route::new("PUT", "/definitions/workflows/{name}");
pub const GET_DEFINITION: Route = Route::new("GET", "/definitions/workflows/{name}");
pub const DELETE_DEFINITION: Route = Route::new("DELETE", "/definitions/workflows/{name}");

pub const LIST_SCHEDULES: Route = Route::new("GET", "/schedules");
pub const CREATE_SCHEDULE: Route = Route::new("POST", "/schedules");
pub const GET_SCHEDULE: Route = Route::new("GET", "/schedules/{id}");
pub const DELETE_SCHEDULE: Route = Route::new("DELETE", "/schedules/{id}");
pub const PAUSE_SCHEDULE: Route = Route::new("POST", "/schedules/{id}/pause");
pub const UNPAUSE_SCHEDULE: Route = Route::new("POST", "/schedules/{id}/unpause");
pub const TRIGGER_SCHEDULE: Route = Route::new("POST", "/schedules/{id}/trigger");
pub const BACKFILL_SCHEDULE: Route = Route::new("POST", "/schedules/{id}/backfill");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_fill_the_parameters_in_order() {
        assert_eq!(
            RESUME.link(&["expense-approval", "exp-1"]),
            "/workflows/expense-approval/executions/exp-1/resume"
        );
        assert_eq!(LIST_AGENTS.link(&[]), "/agents");
        assert_eq!(GET_AGENT.link(&[]), "/agents/{id}");
    }
}
