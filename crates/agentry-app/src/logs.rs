//! The logs: who may read the process's captured log records (in strict mode, admins only) and
//! which records they asked for. The capture itself (the layer, the buffer, the query) is
//! `agentry-logs`'s.

use agentry_logs::{InvalidQuery, LogHub, LogQuery, LogQueryParams, SharedRecord};

use crate::{App, AppError, Caller};

impl From<InvalidQuery> for AppError {
    /// An invalid value in the query string: a 400 naming the parameter.
    fn from(e: InvalidQuery) -> Self {
        AppError::bad_request(e.0)
    }
}

impl App {
    /// The query of `GET /api/logs` or `/ws/logs` for `caller`: first whether the caller may
    /// read the logs at all (in strict mode a non-admin is refused, whatever the query), then
    /// the query string's values (a 400 naming an invalid one).
    pub fn log_query(&self, caller: &Caller, params: LogQueryParams) -> Result<LogQuery, AppError> {
        self.policy().authorize_logs(caller)?;
        Ok(LogQuery::from_params(params)?)
    }

    /// The process's captured records matching `query`, oldest first (at most `query.limit`,
    /// the newest ones).
    pub fn logs(&self, caller: &Caller, query: &LogQuery) -> Result<Vec<SharedRecord>, AppError> {
        self.policy().authorize_logs(caller)?;
        Ok(LogHub::global().query(query))
    }
}

#[cfg(test)]
mod tests {
    use agentry_auth::User;
    use agentry_engine::Engine;
    use agentry_logs::{LogLevel, LogRecord};
    use serde_json::json;
    use utoipa::{PartialSchema, ToSchema};

    use super::*;
    use crate::{Code, wire};

    fn strict() -> App {
        crate::AppBuilder::on(Engine::in_memory())
            .strict(true)
            .build()
            .expect("the application")
    }

    fn user(roles: &[&str]) -> Caller {
        Caller::Verified(User::new(json!({"id": "u1", "roles": roles})))
    }

    fn bad_level() -> LogQueryParams {
        LogQueryParams {
            level: Some("verbose".into()),
            ..LogQueryParams::default()
        }
    }

    #[test]
    fn the_caller_is_authorized_before_the_query_is_read() {
        let app = strict();
        let err = app.log_query(&user(&[]), bad_level()).unwrap_err();
        assert_eq!(err.code, Code::Forbidden);
        assert_eq!(err.message, "Forbidden: the logs need the admin role");
        let query = LogQuery::default();
        assert_eq!(
            app.logs(&user(&[]), &query).unwrap_err().code,
            Code::Forbidden
        );

        let admin = user(&["admin"]);
        let err = app.log_query(&admin, bad_level()).unwrap_err();
        assert_eq!(err.code, Code::InvalidRequest);
        assert_eq!(err.status(), 400);
        assert_eq!(
            err.message,
            "Invalid level \"verbose\": expected trace, debug, info, warn or error"
        );
        let query = app
            .log_query(&admin, LogQueryParams::default())
            .expect("a valid query");
        assert_eq!(query, LogQuery::default());
        assert!(app.logs(&admin, &query).is_ok());

        // Outside strict mode anyone may.
        let open = crate::AppBuilder::on(Engine::in_memory())
            .build()
            .expect("the application");
        assert!(open.logs(&Caller::Anonymous, &query).is_ok());
    }

    /// `agentry-logs` is below this crate, so a record writes its time and names its schema
    /// itself: both must be the wire's.
    #[test]
    fn a_record_timestamp_is_the_wire_timestamp() {
        let record = LogRecord::now(LogLevel::Info, "t", "m");
        let json = serde_json::to_value(&record).unwrap();
        assert_eq!(json["timestamp"], wire::iso(record.timestamp));

        let schema = serde_json::to_value(LogRecord::schema()).unwrap();
        assert_eq!(
            schema["properties"]["timestamp"]["$ref"],
            format!("#/components/schemas/{}", wire::Timestamp::name())
        );
    }
}
