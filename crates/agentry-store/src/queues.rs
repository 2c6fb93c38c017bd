//! The queues' SQL: a dequeue pass and the counts of a queue, written once for both databases.
//!
//! A pass is one transaction that first bumps its queue's row in `workflow_queues`: on
//! PostgreSQL that row lock, on SQLite the database's one write lock, makes the passes of all
//! replicas over one queue take turns, so that no two count the same free slot. Inside it, the
//! slots in use and the starts in the rate window are read, the candidates are read in the
//! queue's order, [`agentry_engine::queue::choose`] picks, and the picked ones are started
//! (`FOR UPDATE SKIP LOCKED` on PostgreSQL: a row another writer holds, a cancel say, is left
//! for the next pass).

use agentry_engine::Status;
use agentry_engine::queue::{Candidate, Load, QueueCount, choose};
use agentry_engine::store::{Dequeue, ExecutionRecord, StoreError};
use chrono::{DateTime, Utc};
use sqlx::{Encode, Executor, FromRow, IntoArguments, QueryBuilder, Type};

use crate::row::{
    CandidateRow, CountRow, EventRow, ExecutionRow, IdRow, KeyCountRow, PassRow, QueueCountRow,
    StepKeyRow, StepRow, db_err,
};
use crate::sql::{Dialect, SqlStore, WORKFLOW_KEY, header_select};

/// The most candidates one pass reads.
const MAX_CANDIDATES: u32 = 1024;

impl<DB> SqlStore<DB>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> String: Encode<'t, DB> + Type<DB>,
    for<'t> Option<String>: Encode<'t, DB> + Type<DB>,
    for<'t> i64: Encode<'t, DB> + Type<DB>,
    for<'t> Option<i64>: Encode<'t, DB> + Type<DB>,
    for<'t> bool: Encode<'t, DB> + Type<DB>,
    for<'t> DateTime<Utc>: Encode<'t, DB> + Type<DB>,
    for<'t> Option<DateTime<Utc>>: Encode<'t, DB> + Type<DB>,
    for<'r> ExecutionRow: FromRow<'r, DB::Row>,
    for<'r> StepRow: FromRow<'r, DB::Row>,
    for<'r> EventRow: FromRow<'r, DB::Row>,
    for<'r> IdRow: FromRow<'r, DB::Row>,
    for<'r> StepKeyRow: FromRow<'r, DB::Row>,
    for<'r> CountRow: FromRow<'r, DB::Row>,
    for<'r> CandidateRow: FromRow<'r, DB::Row>,
    for<'r> KeyCountRow: FromRow<'r, DB::Row>,
    for<'r> PassRow: FromRow<'r, DB::Row>,
    for<'r> QueueCountRow: FromRow<'r, DB::Row>,
{
    pub(crate) async fn dequeue_pass(
        &self,
        pass: &Dequeue<'_>,
    ) -> Result<Vec<ExecutionRecord>, StoreError> {
        let queue = pass.queue;
        let name = queue.name().to_owned();
        if pass.workflows.is_empty() || pass.limit == 0 || !self.any_queued(&name).await? {
            return Ok(Vec::new());
        }
        let _turn = DB::write_turn(self.pool()).await;
        // Inside `to_the_end` (`ExecutionStore::dequeue`).
        let mut tx = self.pool().begin().await.map_err(db_err)?; // to_the_end
        // The queue's lock, and the pass's number (the round-robin's clock).
        let mut q = QueryBuilder::<DB>::new("INSERT INTO workflow_queues (name, passes) VALUES (");
        q.push_bind(name.clone()).push(
            ", 1) ON CONFLICT (name) DO UPDATE SET passes = workflow_queues.passes + 1 \
             RETURNING passes",
        );
        let turn: PassRow = q
            .build_query_as()
            .fetch_one(&mut *tx)
            .await
            .map_err(db_err)?;
        let mut load = Load {
            in_flight: Self::key_counts(&mut tx, &name, "status IN ('running', 'suspended')", None)
                .await?,
            ..Load::default()
        };
        if let Some(rate) = queue.rate() {
            let period = i64::try_from(rate.period.as_millis()).unwrap_or(i64::MAX);
            let since = format!("dequeued_at_ms > {} - ", DB::NOW_MS);
            load.in_window = Self::key_counts(&mut tx, &name, &since, Some(period)).await?;
        }
        let room = load.room(queue, pass.limit);
        if room == 0 {
            tx.commit().await.map_err(db_err)?;
            return Ok(Vec::new());
        }
        let candidates = Self::candidates(&mut tx, pass, &load.full_keys(queue), room).await?;
        let chosen = choose(queue, &load, &candidates, room);
        if chosen.is_empty() {
            tx.commit().await.map_err(db_err)?;
            return Ok(Vec::new());
        }
        let ttl_ms = i64::try_from(pass.ttl.as_millis()).unwrap_or(i64::MAX);
        let mut q = QueryBuilder::<DB>::new(
            "UPDATE workflow_executions SET status = 'running', lease_node = ",
        );
        q.push_bind(pass.node.to_owned())
            .push(", lease_epoch = lease_epoch + 1, lease_ttl_ms = ")
            .push_bind(ttl_ms)
            .push(format!(", lease_expires_at = {} + ", DB::NOW_MS))
            .push_bind(ttl_ms)
            .push(format!(", dequeued_at_ms = {}, updated_at = ", DB::NOW_MS))
            .push_bind(pass.now)
            .push(
                ", version = version + 1 WHERE id IN (SELECT id FROM workflow_executions \
                 WHERE status = 'queued' AND id IN (",
            );
        Self::push_list(&mut q, &chosen);
        q.push(format!(
            "){}) RETURNING {}",
            DB::SKIP_LOCKED,
            header_select::<DB>()
        ));
        let rows: Vec<ExecutionRow> = q
            .build_query_as()
            .fetch_all(&mut *tx)
            .await
            .map_err(db_err)?;
        if !rows.is_empty() {
            let mut q = QueryBuilder::<DB>::new(
                "INSERT INTO workflow_queue_keys (queue_name, queue_key, served) ",
            );
            let mut keys: Vec<String> = rows
                .iter()
                .map(|r| r.queue_key.clone().unwrap_or_default())
                .collect();
            keys.sort();
            keys.dedup();
            q.push_values(keys, |mut v, key| {
                v.push_bind(name.clone())
                    .push_bind(key)
                    .push_bind(turn.passes);
            });
            q.push(" ON CONFLICT (queue_name, queue_key) DO UPDATE SET served = excluded.served");
            q.build().execute(&mut *tx).await.map_err(db_err)?;
        }
        tx.commit().await.map_err(db_err)?;
        let mut conn = self.pool().acquire().await.map_err(db_err)?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let steps = Self::read_steps(&mut conn, &row.id).await?;
            out.push(row.into_record(steps)?);
        }
        Ok(out)
    }

    /// Whether queue `name` has an execution waiting: an idle queue's pass writes nothing (an
    /// execution queued after this read is passed over by its own start's nudge).
    async fn any_queued(&self, name: &str) -> Result<bool, StoreError> {
        let mut q = QueryBuilder::<DB>::new(
            "SELECT id FROM workflow_executions WHERE status = 'queued' AND queue_name = ",
        );
        q.push_bind(name.to_owned()).push(" LIMIT 1");
        let found: Vec<IdRow> = q
            .build_query_as()
            .fetch_all(self.pool())
            .await
            .map_err(db_err)?;
        Ok(!found.is_empty())
    }

    /// How many of queue `name`'s executions match `condition` (followed by the bound
    /// `value`, if any), per key (`""` for none).
    async fn key_counts(
        conn: &mut DB::Connection,
        name: &str,
        condition: &str,
        value: Option<i64>,
    ) -> Result<std::collections::HashMap<String, u64>, StoreError> {
        let mut q = QueryBuilder::<DB>::new(
            "SELECT queue_key, COUNT(*) AS count FROM workflow_executions WHERE queue_name = ",
        );
        q.push_bind(name.to_owned()).push(" AND ").push(condition);
        if let Some(v) = value {
            q.push_bind(v);
        }
        q.push(" GROUP BY queue_key");
        let rows: Vec<KeyCountRow> = q
            .build_query_as()
            .fetch_all(&mut *conn)
            .await
            .map_err(db_err)?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let n = u64::try_from(r.count).unwrap_or_default();
                (r.queue_key.unwrap_or_default(), n)
            })
            .collect())
    }

    /// The queued executions a pass may start, in the queue's order (by priority, then each
    /// key's turn, the key served least recently first, then first in), keys that are full
    /// left out.
    async fn candidates(
        conn: &mut DB::Connection,
        pass: &Dequeue<'_>,
        full_keys: &[String],
        room: u32,
    ) -> Result<Vec<Candidate>, StoreError> {
        let name = pass.queue.name().to_owned();
        let mut q = QueryBuilder::<DB>::new(
            "SELECT e.id, e.queue_key, e.queue_priority, e.queued_at, k.served FROM (\
             SELECT id, queue_key, queue_priority, queued_at, ROW_NUMBER() OVER (\
             PARTITION BY queue_key, queue_priority ORDER BY queued_at, id) AS turn \
             FROM workflow_executions WHERE queue_name = ",
        );
        q.push_bind(name.clone())
            .push(format!(" AND status = 'queued' AND {WORKFLOW_KEY} IN ("));
        Self::push_list(&mut q, &pass.workflows[..pass.workflows.len().min(500)]);
        q.push(")");
        if !full_keys.is_empty() {
            q.push(" AND COALESCE(queue_key, '') NOT IN (");
            Self::push_list(&mut q, &full_keys[..full_keys.len().min(500)]);
            q.push(")");
        }
        q.push(") e LEFT JOIN workflow_queue_keys k ON k.queue_name = ")
            .push_bind(name)
            .push(
                " AND k.queue_key = COALESCE(e.queue_key, '') ORDER BY e.queue_priority DESC, \
                 e.turn, COALESCE(k.served, 0), e.queued_at, e.id LIMIT ",
            )
            .push_bind(i64::from((room.saturating_mul(4) + 16).min(MAX_CANDIDATES)));
        let rows: Vec<CandidateRow> = q
            .build_query_as()
            .fetch_all(&mut *conn)
            .await
            .map_err(db_err)?;
        Ok(rows
            .into_iter()
            .map(|r| Candidate {
                id: r.id,
                key: r.queue_key.unwrap_or_default(),
                priority: r.queue_priority,
                queued_at: r.queued_at,
                served: r.served.unwrap_or(0),
            })
            .collect())
    }

    pub(crate) async fn queue_counts_of(
        &self,
        queue: &str,
        owner: Option<&str>,
    ) -> Result<Vec<QueueCount>, StoreError> {
        let mut q = QueryBuilder::<DB>::new(
            "SELECT queue_key, status, COUNT(*) AS count, MIN(queued_at) AS oldest \
             FROM workflow_executions WHERE queue_name = ",
        );
        q.push_bind(queue.to_owned())
            .push(" AND status IN ('queued', 'running', 'suspended')");
        if let Some(owner) = owner {
            q.push(" AND owner = ").push_bind(owner.to_owned());
        }
        q.push(" GROUP BY queue_key, status");
        let rows: Vec<QueueCountRow> = q
            .build_query_as()
            .fetch_all(self.pool())
            .await
            .map_err(db_err)?;
        rows.into_iter()
            .map(|r| {
                let status = Status::parse(&r.status).ok_or_else(|| StoreError::Corrupt {
                    id: format!("queue {queue}"),
                    reason: format!("unknown status {}", r.status),
                })?;
                Ok(QueueCount {
                    key: r.queue_key,
                    status,
                    count: u64::try_from(r.count).unwrap_or_default(),
                    oldest: r.oldest,
                })
            })
            .collect()
    }
}
