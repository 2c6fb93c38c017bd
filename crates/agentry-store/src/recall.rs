//! Semantic recall's embeddings (`message_embeddings`), written once for both databases, and
//! their search.
//!
//! **Storage.** One row per embedded message: its vector as little-endian `f32`s (a `BLOB` on
//! SQLite, `BYTEA` on PostgreSQL), with the message's agent, user and conversation copied from
//! `agent_messages` by the insert itself, so a search's scope is the message's own. A message
//! already embedded keeps its row (`ON CONFLICT DO NOTHING`): two replicas embedding the same
//! message is harmless.
//!
//! **Search.** Exact, in process, over an index per (agent, user, dimensions) loaded from the
//! database at its first search and caught up before every search by `seq` (the order of
//! writing), so rows written by another replica are seen. The index keeps each vector quantised
//! to one signed byte per dimension with one scale (a quarter of `f32`'s memory, and an integer
//! dot product the compiler vectorises); a scan of 100,000 vectors of 256 dimensions is a few
//! milliseconds (`docs/PERFORMANCE.md`). Indexes not used lately are dropped when their total
//! passes a memory budget ([`DEFAULT_MEMORY_BUDGET`]). The hits' messages and their neighbours
//! are then read in one statement.
//!
//! On PostgreSQL a `seq` may become visible after a greater one (two transactions commit out of
//! order): an index takes a row once, by `seq`, and only forgets the `seq`s it has taken once
//! they are older, by the database's clock, than any insert can take ([`RecallDialect`]).
//!
//! Why not `pgvector` or an ANN crate: `pgvector` is not in this machine's package archive
//! (Debian 12's PostgreSQL 15 has no `postgresql-15-pgvector`), so a path using it could not be
//! tested here; an exact scan of one user's messages meets the target without an approximate
//! index's recall loss, its build time, or a C dependency, and the same code serves both
//! databases.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agentry_agents::Message;
use agentry_agents::recall::{
    Exclusion, HitRange, MAX_RANGE, MAX_TOP_K, MessageEmbedding, RecallQuery, RecallStore,
    RecalledMessage, TopK, UnembeddedMessage, assemble,
};
use agentry_engine::store::StoreError;
use async_trait::async_trait;
use sqlx::{Database, Encode, Executor, IntoArguments, Pool, QueryBuilder, Type};

use crate::row::db_err;
use crate::sql::Dialect;

/// The memory the search indexes of one process may take together, by default: 256 MiB, about
/// 900,000 messages of 256 dimensions.
pub const DEFAULT_MEMORY_BUDGET: usize = 256 << 20;

/// Rows read at once when an index catches up.
const PAGE: i64 = 5_000;

/// What recall needs to know of a database beyond [`Dialect`].
pub trait RecallDialect: Dialect {
    /// How long after its insert (by the database's clock) a `message_embeddings` row is
    /// surely visible to every reader with all the rows of smaller `seq`: 0 on SQLite (one
    /// writer: `seq`s become visible in order); on PostgreSQL, longer than any insert may take
    /// (one statement, bounded by `statement_timeout`).
    const SETTLE_MS: i64;
}

impl RecallDialect for sqlx::Sqlite {
    const SETTLE_MS: i64 = 0;
}

impl RecallDialect for sqlx::Postgres {
    const SETTLE_MS: i64 = 120_000;
}

/// Semantic recall's store in a SQL database (SQLite or PostgreSQL). Make one per process and
/// share it: it holds the search indexes.
#[derive(Debug)]
pub struct SqlRecallStore<DB: Database> {
    pool: Pool<DB>,
    indexes: Indexes,
}

impl<DB: Database> SqlRecallStore<DB> {
    pub fn new(pool: Pool<DB>) -> Self {
        Self {
            pool,
            indexes: Indexes {
                budget: DEFAULT_MEMORY_BUDGET,
                map: Mutex::new(HashMap::new()),
                clock: AtomicU64::new(0),
            },
        }
    }

    /// This store with another memory budget for its indexes (bytes).
    pub fn with_memory_budget(mut self, bytes: usize) -> Self {
        self.indexes.budget = bytes;
        self
    }

    /// The memory its indexes take now (bytes).
    pub fn index_bytes(&self) -> usize {
        self.indexes.lock().values().map(|e| e.bytes()).sum()
    }
}

/// Whose index: (agent, user, dimensions).
type IndexKey = (String, String, usize);

struct Indexes {
    budget: usize,
    map: Mutex<HashMap<IndexKey, Arc<Entry>>>,
    /// Ticks at each use, to find the index used least lately.
    clock: AtomicU64,
}

impl std::fmt::Debug for Indexes {
    /// The indexes' sizes, not their vectors.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let map = self.lock();
        f.debug_struct("Indexes")
            .field("budget", &self.budget)
            .field("indexes", &map.len())
            .field("bytes", &map.values().map(|e| e.bytes()).sum::<usize>())
            .finish()
    }
}

impl Indexes {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IndexKey, Arc<Entry>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn entry(&self, key: IndexKey) -> Arc<Entry> {
        let tick = self.clock.fetch_add(1, Ordering::Relaxed);
        let entry = self
            .lock()
            .entry(key.clone())
            .or_insert_with(|| {
                Arc::new(Entry {
                    index: tokio::sync::Mutex::new(UserIndex::new(key.2)),
                    bytes: AtomicUsize::new(0),
                    used: AtomicU64::new(0),
                })
            })
            .clone();
        entry.used.store(tick, Ordering::Relaxed);
        entry
    }

    /// Drops the indexes used least lately, other than `keep`, while their total passes the
    /// budget.
    fn evict(&self, keep: &Arc<Entry>) {
        let mut map = self.lock();
        let mut total: usize = map.values().map(|e| e.bytes()).sum();
        while total > self.budget {
            let Some(key) = map
                .iter()
                .filter(|(_, e)| !Arc::ptr_eq(e, keep))
                .min_by_key(|(_, e)| e.used.load(Ordering::Relaxed))
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(e) = map.remove(&key) {
                total -= e.bytes();
            }
        }
    }
}

struct Entry {
    index: tokio::sync::Mutex<UserIndex>,
    bytes: AtomicUsize,
    used: AtomicU64,
}

impl Entry {
    fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// One agent's embeddings of one user's messages (of one length), quantised.
struct UserIndex {
    dimensions: usize,
    /// Per row: its message, its conversation (an index into `conversations`), its scale.
    ids: Vec<i64>,
    conversation_of: Vec<u32>,
    scales: Vec<f32>,
    /// `dimensions` codes per row.
    codes: Vec<i8>,
    conversations: Vec<String>,
    conversation_ids: HashMap<String, u32>,
    /// Every row of `seq` up to this one is in the index.
    settled: i64,
    /// The rows above `settled` already in the index.
    taken: HashSet<i64>,
}

impl UserIndex {
    fn new(dimensions: usize) -> Self {
        Self {
            dimensions,
            ids: Vec::new(),
            conversation_of: Vec::new(),
            scales: Vec::new(),
            codes: Vec::new(),
            conversations: Vec::new(),
            conversation_ids: HashMap::new(),
            settled: 0,
            taken: HashSet::new(),
        }
    }

    fn bytes(&self) -> usize {
        self.codes.capacity()
            + self.ids.capacity() * 8
            + self.conversation_of.capacity() * 4
            + self.scales.capacity() * 4
            + self
                .conversations
                .iter()
                .map(|c| c.len() * 2 + 48)
                .sum::<usize>()
            + self.taken.capacity() * 16
    }

    fn push(&mut self, id: i64, conversation: String, vector: &[f32]) {
        let next = u32::try_from(self.conversations.len()).unwrap_or(u32::MAX);
        let c = *self
            .conversation_ids
            .entry(conversation)
            .or_insert_with_key(|name| {
                self.conversations.push(name.clone());
                next
            });
        let scale = quantise(vector, &mut self.codes);
        self.ids.push(id);
        self.conversation_of.push(c);
        self.scales.push(scale);
    }

    /// Takes the rows read from the database (by `seq`), and settles what is old enough.
    fn catch_up(&mut self, rows: Vec<EmbeddingRow>, settle_before_ms: i64) {
        for (seq, id, conversation, vector, _) in &rows {
            if *seq <= self.settled || !self.taken.insert(*seq) {
                continue;
            }
            if let Some(v) = decode_vector(vector, self.dimensions) {
                self.push(*id, conversation.clone(), &v);
            }
        }
        // The newest row old enough: every row of smaller `seq` is committed, and was read.
        if let Some(seq) = rows
            .iter()
            .filter(|r| r.4 < settle_before_ms)
            .map(|r| r.0)
            .max()
            && seq > self.settled
        {
            self.settled = seq;
            self.taken.retain(|s| *s > seq);
        }
    }

    /// The best hits, skipping what is out of scope or excluded.
    fn scan(
        &self,
        query: &[f32],
        top_k: usize,
        conversation: Option<&str>,
        exclusion: Option<&Exclusion>,
    ) -> Vec<(i64, u32, f32)> {
        let only = match conversation {
            Some(c) => match self.conversation_ids.get(c) {
                Some(i) => Some(*i),
                None => return Vec::new(),
            },
            None => None,
        };
        let excluded = exclusion.and_then(|e| {
            self.conversation_ids
                .get(&e.conversation_id)
                .map(|c| (*c, e.from_id))
        });
        let mut q = Vec::with_capacity(self.dimensions);
        let q_scale = quantise(query, &mut q);
        let mut top = TopK::new(top_k);
        for (row, codes) in self.codes.chunks_exact(self.dimensions).enumerate() {
            let c = self.conversation_of[row];
            if only.is_some_and(|o| o != c) {
                continue;
            }
            let id = self.ids[row];
            if excluded.is_some_and(|(ec, from)| ec == c && id >= from) {
                continue;
            }
            let dot: i32 = codes
                .iter()
                .zip(&q)
                .map(|(a, b)| i32::from(*a) * i32::from(*b))
                .sum();
            top.offer(row as i64, dot as f32 * q_scale * self.scales[row]);
        }
        top.into_sorted()
            .into_iter()
            .map(|(row, score)| {
                let row = row as usize;
                (self.ids[row], self.conversation_of[row], score)
            })
            .collect()
    }
}

/// Appends `v`'s codes (one signed byte per dimension) to `codes` and returns their scale.
fn quantise(v: &[f32], codes: &mut Vec<i8>) -> f32 {
    let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if max == 0.0 || !max.is_finite() {
        codes.extend(std::iter::repeat_n(0, v.len()));
        return 0.0;
    }
    let scale = max / 127.0;
    codes.extend(
        v.iter()
            .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8),
    );
    scale
}

fn encode_vector(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn decode_vector(bytes: &[u8], dimensions: usize) -> Option<Vec<f32>> {
    (bytes.len() == dimensions * 4).then(|| {
        bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    })
}

/// `(seq, message_id, conversation_id, vector, created_ms)`.
type EmbeddingRow = (i64, i64, String, Vec<u8>, i64);

fn decode_message(text: &str) -> Result<Message, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
        id: "agent_messages".into(),
        reason: e.to_string(),
    })
}

fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[async_trait]
impl<DB> RecallStore for SqlRecallStore<DB>
where
    DB: RecallDialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> String: Encode<'t, DB> + Type<DB> + sqlx::Decode<'t, DB>,
    for<'t> i64: Encode<'t, DB> + Type<DB> + sqlx::Decode<'t, DB>,
    for<'t> Option<Vec<u8>>: Encode<'t, DB> + Type<DB>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
    (i64, String, String): for<'r> sqlx::FromRow<'r, DB::Row>,
    (i64, i64, String): for<'r> sqlx::FromRow<'r, DB::Row>,
    EmbeddingRow: for<'r> sqlx::FromRow<'r, DB::Row>,
{
    async fn unembedded(
        &self,
        agent_ids: &[String],
        after: i64,
        max: usize,
    ) -> Result<Vec<UnembeddedMessage>, StoreError> {
        if agent_ids.is_empty() || max == 0 {
            return Ok(Vec::new());
        }
        let mut q = QueryBuilder::<DB>::new(format!(
            "SELECT m.id, m.agent_id, m.message{} FROM agent_messages m WHERE m.id > ",
            DB::AS_TEXT
        ));
        q.push_bind(after).push(" AND m.agent_id IN (");
        let mut ids = q.separated(", ");
        for a in agent_ids {
            ids.push_bind(a.clone());
        }
        q.push(
            ") AND NOT EXISTS (SELECT 1 FROM message_embeddings e WHERE e.message_id = m.id) \
             ORDER BY m.id LIMIT ",
        )
        .push_bind(limit(max));
        let rows: Vec<(i64, String, String)> = q
            .build_query_as()
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        rows.into_iter()
            .map(|(id, agent_id, message)| {
                Ok(UnembeddedMessage {
                    id,
                    agent_id,
                    message: decode_message(&message)?,
                })
            })
            .collect()
    }

    /// One statement: each row's scope is read from its message, in the same statement.
    async fn store_embeddings(
        &self,
        embedder: &str,
        embeddings: &[MessageEmbedding],
    ) -> Result<(), StoreError> {
        let _turn = DB::write_turn(&self.pool).await;
        let mut seen = HashSet::new();
        let embeddings: Vec<&MessageEmbedding> = embeddings
            .iter()
            .filter(|e| seen.insert(e.message_id))
            .collect();
        if embeddings.is_empty() {
            return Ok(());
        }
        let mut q = QueryBuilder::<DB>::new(
            "INSERT INTO message_embeddings (message_id, agent_id, user_id, conversation_id, \
             embedder, dimensions, vector, created_ms) ",
        );
        for (i, e) in embeddings.iter().enumerate() {
            if i > 0 {
                q.push(" UNION ALL ");
            }
            let vector = e.vector.as_deref();
            q.push("SELECT id, agent_id, user_id, conversation_id, ")
                .push_bind(embedder.to_owned())
                .push(", ")
                .push_bind(limit(vector.map_or(0, <[f32]>::len)))
                .push(", ")
                .push_bind(vector.map(encode_vector))
                .push(format!(", {} FROM agent_messages WHERE id = ", DB::NOW_MS))
                .push_bind(e.message_id);
        }
        q.push(" ON CONFLICT (message_id) DO NOTHING");
        q.build().execute(&self.pool).await.map_err(db_err)?;
        Ok(())
    }

    async fn search(&self, query: &RecallQuery) -> Result<Vec<RecalledMessage>, StoreError> {
        let dimensions = query.vector.len();
        let top_k = query.top_k.min(MAX_TOP_K);
        if dimensions == 0 || top_k == 0 {
            return Ok(Vec::new());
        }
        let exclusion = match &query.exclude {
            Some(recent) if recent.count > 0 => {
                let mut q =
                    QueryBuilder::<DB>::new("SELECT id FROM agent_messages WHERE agent_id = ");
                q.push_bind(query.agent_id.clone())
                    .push(" AND user_id = ")
                    .push_bind(query.user_id.clone())
                    .push(" AND conversation_id = ")
                    .push_bind(recent.conversation_id.clone())
                    .push(" ORDER BY id DESC LIMIT 1 OFFSET ")
                    .push_bind(limit(recent.count - 1));
                let nth: Option<i64> = q
                    .build_query_scalar()
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_err)?;
                Exclusion::of(recent, nth)
            }
            _ => None,
        };

        let entry = self
            .indexes
            .entry((query.agent_id.clone(), query.user_id.clone(), dimensions));
        let hits = {
            let mut index = entry.index.lock().await;
            self.catch_up(&mut index, query).await?;
            entry.bytes.store(index.bytes(), Ordering::Relaxed);
            index
                .scan(
                    &query.vector,
                    top_k,
                    query.conversation_id.as_deref(),
                    exclusion.as_ref(),
                )
                .into_iter()
                .map(|(id, c, score)| (id, index.conversations[c as usize].clone(), score))
                .collect::<Vec<_>>()
        };
        self.indexes.evict(&entry);
        if hits.is_empty() {
            return Ok(Vec::new());
        }

        // Each hit's range in one statement: `before` older messages and the hit, then `after`
        // newer ones, each row tagged with its hit.
        let (before, after) = (query.before.min(MAX_RANGE), query.after.min(MAX_RANGE));
        let mut q = QueryBuilder::<DB>::new("");
        for (i, (id, conversation, _)) in hits.iter().enumerate() {
            let sides: &[(&str, &str, usize)] = &[("<=", "DESC", before + 1), (">", "ASC", after)];
            for (side, (op, order, n)) in sides.iter().enumerate() {
                if *n == 0 {
                    continue;
                }
                if i > 0 || side > 0 {
                    q.push(" UNION ALL ");
                }
                q.push(format!(
                    "SELECT * FROM (SELECT CAST({i} AS BIGINT) AS hit, id, message{} AS message \
                     FROM agent_messages WHERE agent_id = ",
                    DB::AS_TEXT
                ))
                .push_bind(query.agent_id.clone())
                .push(" AND user_id = ")
                .push_bind(query.user_id.clone())
                .push(" AND conversation_id = ")
                .push_bind(conversation.clone())
                .push(format!(" AND id {op} "))
                .push_bind(*id)
                .push(format!(" ORDER BY id {order} LIMIT "))
                .push_bind(limit(*n))
                .push(format!(") AS range_{i}_{side}"));
            }
        }
        let rows: Vec<(i64, i64, String)> = q
            .build_query_as()
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        let mut ranges: Vec<HitRange> = hits
            .into_iter()
            .map(|(id, conversation_id, score)| HitRange {
                id,
                score,
                conversation_id,
                messages: Vec::new(),
            })
            .collect();
        for (hit, id, message) in rows {
            if let Some(range) = usize::try_from(hit).ok().and_then(|h| ranges.get_mut(h)) {
                range.messages.push((id, decode_message(&message)?));
            }
        }
        Ok(assemble(ranges, exclusion.as_ref()))
    }
}

impl<DB> SqlRecallStore<DB>
where
    DB: RecallDialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> String: Encode<'t, DB> + Type<DB> + sqlx::Decode<'t, DB>,
    for<'t> i64: Encode<'t, DB> + Type<DB> + sqlx::Decode<'t, DB>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
    EmbeddingRow: for<'r> sqlx::FromRow<'r, DB::Row>,
{
    /// Reads the rows of the query's index written since it last caught up.
    async fn catch_up(&self, index: &mut UserIndex, query: &RecallQuery) -> Result<(), StoreError> {
        // Taken before the rows: a row older than this is settled.
        let settle_before_ms = if DB::SETTLE_MS == 0 {
            i64::MAX
        } else {
            let now: i64 = QueryBuilder::<DB>::new(format!("SELECT {}", DB::NOW_MS))
                .build_query_scalar()
                .fetch_one(&self.pool)
                .await
                .map_err(db_err)?;
            now - DB::SETTLE_MS
        };
        let mut from = index.settled;
        loop {
            let mut q = QueryBuilder::<DB>::new(
                "SELECT seq, message_id, conversation_id, vector, created_ms \
                 FROM message_embeddings WHERE agent_id = ",
            );
            q.push_bind(query.agent_id.clone())
                .push(" AND user_id = ")
                .push_bind(query.user_id.clone())
                .push(" AND dimensions = ")
                .push_bind(limit(index.dimensions))
                .push(" AND seq > ")
                .push_bind(from)
                .push(" ORDER BY seq LIMIT ")
                .push_bind(PAGE);
            let rows: Vec<EmbeddingRow> = q
                .build_query_as()
                .fetch_all(&self.pool)
                .await
                .map_err(db_err)?;
            let full = rows.len() as i64 >= PAGE;
            from = rows.last().map_or(from, |r| r.0);
            index.catch_up(rows, settle_before_ms);
            if !full {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_and_quantise_closely() {
        let v = agentry_agents::OfflineEmbedder::vector("pizza with olives and anchovies");
        assert_eq!(decode_vector(&encode_vector(&v), v.len()), Some(v.clone()));
        assert_eq!(decode_vector(&encode_vector(&v), v.len() + 1), None);
        let mut codes = Vec::new();
        let scale = quantise(&v, &mut codes);
        let back: Vec<f32> = codes.iter().map(|c| f32::from(*c) * scale).collect();
        let exact: f32 = v.iter().map(|x| x * x).sum();
        let approx: f32 = v.iter().zip(&back).map(|(a, b)| a * b).sum();
        assert!((exact - approx).abs() < 0.01, "{exact} {approx}");
    }

    #[test]
    fn an_index_takes_each_row_once_and_settles_by_age() {
        let v = encode_vector(&agentry_agents::OfflineEmbedder::vector("pizza"));
        let row = |seq: i64, id: i64, at: i64| (seq, id, "c".to_owned(), v.clone(), at);
        let mut index = UserIndex::new(agentry_agents::recall::OFFLINE_DIMENSIONS);
        // Seq 2 is seen before seq 1 committed: nothing settles while 2 is young.
        index.catch_up(vec![row(2, 20, 1_000)], 500);
        assert_eq!((index.ids.len(), index.settled), (1, 0));
        index.catch_up(vec![row(1, 10, 1_000), row(2, 20, 1_000)], 500);
        assert_eq!(index.ids, [20, 10]);
        index.catch_up(vec![row(1, 10, 1_000), row(2, 20, 1_000)], 5_000);
        assert_eq!((index.ids.len(), index.settled), (2, 2));
        assert!(index.taken.is_empty());
    }
}
