//! Semantic recall: past messages found by meaning and given to the model before a generation.
//!
//! - An [`Embedder`] turns texts into vectors: [`OfflineEmbedder`] (deterministic, no network,
//!   for tests and the examples) or a provider's (`agentry-openai`'s `OpenAiEmbedder`).
//! - A [`RecallStore`] keeps one embedding per stored message and searches them. It is keyed
//!   exactly as conversation memory ([`ConversationKey`](crate::ConversationKey)): a search names
//!   the agent and the user (the memory's namespace) and never returns another agent's or another
//!   user's message. [`InMemoryConversationStore`] is one; `agentry-store` has the SQL one.
//! - Messages are embedded off the request path by [`run_embedder`], which takes the messages
//!   not embedded yet in batches; a failure is retried later and never loses a message (it is
//!   already stored).
//! - Before a generation, [`recall`] embeds the query (one call) and searches;
//!   [`recall_prompt`] renders the result as one system message, which
//!   [`recalled_from_prompt`] reads back.

use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::memory::InMemoryConversationStore;
use crate::message::{Message, Role};
use crate::model::{ModelError, ModelErrorKind};
use agentry_engine::store::StoreError;

/// The most hits a search may ask for.
pub const MAX_TOP_K: usize = 20;
/// The most messages taken before (and after) each hit, within its conversation.
pub const MAX_RANGE: usize = 5;
/// The dimensions of [`OfflineEmbedder`]'s vectors.
pub const OFFLINE_DIMENSIONS: usize = 256;
/// The longest text (in characters) given to an embedder; the rest of a message is not embedded.
pub const MAX_EMBED_CHARS: usize = 8_000;
/// The longest text (in characters) of one recalled message in the prompt.
pub const MAX_RECALLED_CHARS: usize = 1_000;

/// Turns texts into vectors whose cosine similarity says how close their meanings are.
#[async_trait]
pub trait Embedder: Send + Sync + 'static {
    /// The model's name, stored with each embedding.
    fn name(&self) -> &str;
    /// The length of every vector it returns.
    fn dimensions(&self) -> usize;
    /// One vector per text, in the order of `texts`.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError>;
}

/// Words that say nothing about what a message is about: a question such as `what did I say
/// about pizza` is then close to `I love pizza with olives`.
const STOP_WORDS: &[&str] = &[
    "a", "about", "am", "an", "and", "are", "as", "at", "be", "but", "by", "can", "could", "did",
    "do", "does", "for", "from", "had", "has", "have", "he", "her", "him", "his", "how", "i", "if",
    "in", "is", "it", "its", "me", "my", "of", "on", "or", "our", "said", "say", "she", "so",
    "tell", "that", "the", "their", "them", "there", "they", "this", "to", "us", "was", "we",
    "were", "what", "when", "where", "which", "who", "why", "will", "with", "would", "you", "your",
];

/// A deterministic embedder without a model: a hashed bag of the text's lowercased words
/// (letters and digits; stop words left out; a plural's final `s` dropped), L2-normalised.
/// Texts sharing words are close; synonyms are not. Its name is `offline`.
#[derive(Debug, Clone, Copy, Default)]
pub struct OfflineEmbedder;

impl OfflineEmbedder {
    /// The vector of one text (all zeros when it has no word that counts).
    pub fn vector(text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; OFFLINE_DIMENSIONS];
        for word in text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            let word = word.to_lowercase();
            if STOP_WORDS.contains(&word.as_str()) {
                continue;
            }
            let word = match word.strip_suffix('s') {
                Some(stem) if stem.chars().count() >= 3 && !stem.ends_with('s') => stem,
                _ => word.as_str(),
            };
            // FNV-1a: stable across builds and platforms.
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in word.bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
            let bucket = (h % OFFLINE_DIMENSIONS as u64) as usize;
            v[bucket] += if h >> 63 == 0 { 1.0 } else { -1.0 };
        }
        normalize(&mut v);
        v
    }
}

#[async_trait]
impl Embedder for OfflineEmbedder {
    fn name(&self) -> &str {
        "offline"
    }

    fn dimensions(&self) -> usize {
        OFFLINE_DIMENSIONS
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        Ok(texts.iter().map(|t| Self::vector(t)).collect())
    }
}

/// Scales `v` to length 1 (a zero vector stays zero): the stores then score by dot product.
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Whose past messages a search looks in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecallScope {
    /// The current conversation only.
    Conversation,
    /// Every conversation of the user (the memory's namespace).
    User,
}

/// An agent's semantic recall: its embedder, scope, how many hits, and how many messages
/// around each hit (within the hit's conversation).
#[derive(Clone)]
pub struct SemanticRecall {
    embedder: Arc<dyn Embedder>,
    scope: RecallScope,
    top_k: usize,
    before: usize,
    after: usize,
}

impl std::fmt::Debug for SemanticRecall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SemanticRecall")
            .field("embedder", &self.embedder.name())
            .field("scope", &self.scope)
            .field("top_k", &self.top_k)
            .field("before", &self.before)
            .field("after", &self.after)
            .finish()
    }
}

impl SemanticRecall {
    /// Refuses a `top_k` outside 1..=[`MAX_TOP_K`] and a range outside 0..=[`MAX_RANGE`].
    pub fn new(
        embedder: Arc<dyn Embedder>,
        scope: RecallScope,
        top_k: usize,
        before: usize,
        after: usize,
    ) -> Result<Self, String> {
        if !(1..=MAX_TOP_K).contains(&top_k) {
            return Err(format!(
                "semantic recall's topK must be between 1 and {MAX_TOP_K}, not {top_k}"
            ));
        }
        if before > MAX_RANGE || after > MAX_RANGE {
            return Err(format!(
                "semantic recall takes at most {MAX_RANGE} messages before and after a hit, \
                 not {before} and {after}"
            ));
        }
        Ok(Self {
            embedder,
            scope,
            top_k,
            before,
            after,
        })
    }

    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.embedder
    }

    pub fn scope(&self) -> RecallScope {
        self.scope
    }

    pub fn top_k(&self) -> usize {
        self.top_k
    }

    /// Messages taken before each hit.
    pub fn before(&self) -> usize {
        self.before
    }

    /// Messages taken after each hit.
    pub fn after(&self) -> usize {
        self.after
    }
}

/// The newest messages of a conversation, which the request already has in its context: a
/// search leaves them out (as hits and as neighbours).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecentMessages {
    pub conversation_id: String,
    /// How many of its newest messages.
    pub count: usize,
}

/// A search of one agent's memory of one user.
#[derive(Debug, Clone)]
pub struct RecallQuery {
    pub agent_id: String,
    /// The memory's namespace: exactly `ConversationKey::user_id`.
    pub user_id: String,
    /// `Some`: this conversation only ([`RecallScope::Conversation`]); `None`: all the user's.
    pub conversation_id: Option<String>,
    /// The query's embedding, L2-normalised ([`normalize`]).
    pub vector: Vec<f32>,
    /// At most this many hits (bounded by [`MAX_TOP_K`]).
    pub top_k: usize,
    /// Messages taken before each hit, within its conversation (bounded by [`MAX_RANGE`]).
    pub before: usize,
    /// Messages taken after each hit, within its conversation (bounded by [`MAX_RANGE`]).
    pub after: usize,
    pub exclude: Option<RecentMessages>,
}

/// Why a message is in a search's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecalledKind {
    /// It matched the query.
    Hit,
    /// It is near a hit in the hit's conversation.
    Neighbour,
}

/// A message a search found.
#[derive(Debug, Clone, PartialEq)]
pub struct RecalledMessage {
    /// The message's id in its store (`agent_messages.id`).
    pub id: i64,
    pub conversation_id: String,
    pub message: Message,
    /// Its cosine similarity to the query; a neighbour has the score of its best hit.
    pub score: f32,
    pub kind: RecalledKind,
}

/// A stored message that has no embedding yet.
#[derive(Debug, Clone, PartialEq)]
pub struct UnembeddedMessage {
    pub id: i64,
    pub agent_id: String,
    pub message: Message,
}

/// The embedding of one stored message.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageEmbedding {
    pub message_id: i64,
    /// `None`: the message has no text to embed (a tool message, a system message, an empty
    /// text); it is marked so, and never taken again.
    pub vector: Option<Vec<f32>>,
}

/// Where embeddings live and are searched.
#[async_trait]
pub trait RecallStore: Send + Sync + 'static {
    /// Up to `limit` messages of these agents that have no embedding, whose id is greater than
    /// `after`, oldest first.
    async fn unembedded(
        &self,
        agent_ids: &[String],
        after: i64,
        limit: usize,
    ) -> Result<Vec<UnembeddedMessage>, StoreError>;

    /// Stores embeddings made by `embedder`. A message that already has one keeps it (two
    /// processes embedding the same message is harmless); a message that no longer exists is
    /// skipped.
    async fn store_embeddings(
        &self,
        embedder: &str,
        embeddings: &[MessageEmbedding],
    ) -> Result<(), StoreError>;

    /// The best `top_k` hits (each with a score above zero) of the query's agent and user (in
    /// its conversation when it names one), with their neighbours, oldest first. Messages
    /// embedded with vectors of another length than the query's are not compared.
    async fn search(&self, query: &RecallQuery) -> Result<Vec<RecalledMessage>, StoreError>;
}

/// The messages of one conversation that a search leaves out: those with an id of at least
/// `from_id` (the newest `count` of [`RecentMessages`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exclusion {
    pub conversation_id: String,
    pub from_id: i64,
}

impl Exclusion {
    /// The exclusion of `recent`, given the id of its conversation's `recent.count`-th newest
    /// message (`None` when the conversation has fewer: all of it is excluded).
    pub fn of(recent: &RecentMessages, nth_newest_id: Option<i64>) -> Option<Self> {
        (recent.count > 0).then(|| Self {
            conversation_id: recent.conversation_id.clone(),
            from_id: nth_newest_id.unwrap_or(i64::MIN),
        })
    }

    pub fn excludes(this: Option<&Self>, conversation_id: &str, id: i64) -> bool {
        this.is_some_and(|e| id >= e.from_id && e.conversation_id == conversation_id)
    }
}

/// The best hits seen so far, at most `k` (the one place that ranks: ties go to the newer
/// message).
#[derive(Debug)]
pub struct TopK {
    k: usize,
    heap: BinaryHeap<std::cmp::Reverse<Ranked>>,
}

#[derive(Debug, PartialEq)]
struct Ranked(f32, i64);

impl Eq for Ranked {}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0).then(self.1.cmp(&other.1))
    }
}

impl TopK {
    pub fn new(k: usize) -> Self {
        Self {
            k,
            heap: BinaryHeap::with_capacity(k + 1),
        }
    }

    /// The lowest score that would still get in (`-inf` while there is room).
    pub fn threshold(&self) -> f32 {
        if self.heap.len() < self.k {
            f32::NEG_INFINITY
        } else {
            self.heap.peek().map_or(f32::NEG_INFINITY, |r| r.0.0)
        }
    }

    /// Offers message `id` with `score`; scores of zero or less never get in.
    pub fn offer(&mut self, id: i64, score: f32) {
        if self.k == 0 || score <= 0.0 || score.is_nan() || score < self.threshold() {
            return;
        }
        self.heap.push(std::cmp::Reverse(Ranked(score, id)));
        if self.heap.len() > self.k {
            self.heap.pop();
        }
    }

    /// `(id, score)`, best first.
    pub fn into_sorted(self) -> Vec<(i64, f32)> {
        let mut v: Vec<_> = self.heap.into_iter().map(|r| (r.0.1, r.0.0)).collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
        v
    }
}

/// One hit and the messages of its conversation around it (its range: up to `before` older
/// messages, the hit, up to `after` newer ones, in any order).
#[derive(Debug, Clone)]
pub struct HitRange {
    pub id: i64,
    pub score: f32,
    pub conversation_id: String,
    pub messages: Vec<(i64, Message)>,
}

/// A search's answer from its hits' ranges (the one place that decides it for every store):
/// excluded messages left out, each message once (a hit stays a hit when it is also another
/// hit's neighbour; a neighbour takes its best hit's score), oldest first. A hit missing from
/// its own range (deleted meanwhile) is dropped with its range.
pub fn assemble(ranges: Vec<HitRange>, exclusion: Option<&Exclusion>) -> Vec<RecalledMessage> {
    let hits: HashMap<i64, f32> = ranges.iter().map(|r| (r.id, r.score)).collect();
    let mut out: BTreeMap<i64, RecalledMessage> = BTreeMap::new();
    for range in ranges {
        if !range.messages.iter().any(|(id, _)| *id == range.id) {
            continue;
        }
        for (id, message) in range.messages {
            if Exclusion::excludes(exclusion, &range.conversation_id, id) {
                continue;
            }
            let (score, kind) = match hits.get(&id) {
                Some(s) => (*s, RecalledKind::Hit),
                None => (range.score, RecalledKind::Neighbour),
            };
            let entry = out.entry(id).or_insert_with(|| RecalledMessage {
                id,
                conversation_id: range.conversation_id.clone(),
                message,
                score,
                kind,
            });
            if entry.kind == RecalledKind::Neighbour && score > entry.score {
                entry.score = score;
            }
        }
    }
    out.into_values().collect()
}

/// The dot product of two vectors of the same length.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[async_trait]
impl RecallStore for InMemoryConversationStore {
    async fn unembedded(
        &self,
        agent_ids: &[String],
        after: i64,
        limit: usize,
    ) -> Result<Vec<UnembeddedMessage>, StoreError> {
        let rows = self.rows();
        let mut out: Vec<UnembeddedMessage> = rows
            .conversations
            .iter()
            .filter(|(key, _)| agent_ids.contains(&key.agent_id))
            .flat_map(|(key, messages)| {
                messages
                    .iter()
                    .filter(|(id, _)| *id > after && !rows.embeddings.contains_key(id))
                    .map(|(id, message)| UnembeddedMessage {
                        id: *id,
                        agent_id: key.agent_id.clone(),
                        message: message.clone(),
                    })
            })
            .collect();
        out.sort_by_key(|m| m.id);
        out.truncate(limit);
        Ok(out)
    }

    async fn store_embeddings(
        &self,
        _embedder: &str,
        embeddings: &[MessageEmbedding],
    ) -> Result<(), StoreError> {
        let mut rows = self.rows();
        for e in embeddings {
            if e.message_id <= rows.last_id {
                rows.embeddings
                    .entry(e.message_id)
                    .or_insert_with(|| e.vector.clone());
            }
        }
        Ok(())
    }

    async fn search(&self, query: &RecallQuery) -> Result<Vec<RecalledMessage>, StoreError> {
        let rows = self.rows();
        let mine = |key: &crate::ConversationKey| {
            key.agent_id == query.agent_id
                && key.user_id == query.user_id
                && query
                    .conversation_id
                    .as_ref()
                    .is_none_or(|c| *c == key.conversation_id)
        };
        let exclusion = query.exclude.as_ref().and_then(|recent| {
            let key = crate::ConversationKey {
                agent_id: query.agent_id.clone(),
                user_id: query.user_id.clone(),
                conversation_id: recent.conversation_id.clone(),
            };
            let nth_newest = rows.conversations.get(&key).and_then(|m| {
                m.iter()
                    .rev()
                    .nth(recent.count.saturating_sub(1))
                    .map(|(id, _)| *id)
            });
            Exclusion::of(recent, nth_newest)
        });
        let mut top = TopK::new(query.top_k.min(MAX_TOP_K));
        for (key, messages) in rows.conversations.iter().filter(|(k, _)| mine(k)) {
            for (id, _) in messages {
                if Exclusion::excludes(exclusion.as_ref(), &key.conversation_id, *id) {
                    continue;
                }
                if let Some(Some(v)) = rows.embeddings.get(id)
                    && v.len() == query.vector.len()
                {
                    top.offer(*id, dot(v, &query.vector));
                }
            }
        }
        let (before, after) = (query.before.min(MAX_RANGE), query.after.min(MAX_RANGE));
        let mut ranges = Vec::new();
        for (id, score) in top.into_sorted() {
            let Some((key, messages)) = rows
                .conversations
                .iter()
                .filter(|(k, _)| mine(k))
                .find(|(_, m)| m.iter().any(|(i, _)| *i == id))
            else {
                continue;
            };
            let at = messages.iter().position(|(i, _)| *i == id).unwrap_or(0);
            let end = (at + after + 1).min(messages.len());
            ranges.push(HitRange {
                id,
                score,
                conversation_id: key.conversation_id.clone(),
                messages: messages[at.saturating_sub(before)..end].to_vec(),
            });
        }
        Ok(assemble(ranges, exclusion.as_ref()))
    }
}

/// Why [`recall`] failed.
#[derive(Debug, thiserror::Error)]
pub enum RecallError {
    /// The embedder failed on the query.
    #[error("embedding the query failed: {0}")]
    Embedding(ModelError),
    /// The store failed.
    #[error("{0}")]
    Store(StoreError),
}

/// The past messages relevant to `query_text` (the user's new message) for a generation of
/// `agent_id` for `user_id` in `conversation_id`, whose newest `in_context` messages the request
/// already has: embeds the query (one call) and searches the scope of `config`. A query without
/// any word that counts finds nothing.
pub async fn recall(
    store: &dyn RecallStore,
    config: &SemanticRecall,
    agent_id: &str,
    user_id: &str,
    conversation_id: &str,
    query_text: &str,
    in_context: usize,
) -> Result<Vec<RecalledMessage>, RecallError> {
    let text: String = query_text.chars().take(MAX_EMBED_CHARS).collect();
    let mut vectors = config
        .embedder
        .embed(&[text])
        .await
        .map_err(RecallError::Embedding)?;
    let mut vector = match vectors.pop() {
        Some(v) if vectors.is_empty() && v.len() == config.embedder.dimensions() => v,
        _ => {
            return Err(RecallError::Embedding(ModelError::new(format!(
                "the embedder {} did not return one vector of {} dimensions",
                config.embedder.name(),
                config.embedder.dimensions()
            ))));
        }
    };
    normalize(&mut vector);
    if vector.iter().all(|x| *x == 0.0) {
        return Ok(Vec::new());
    }
    let query = RecallQuery {
        agent_id: agent_id.to_owned(),
        user_id: user_id.to_owned(),
        conversation_id: (config.scope == RecallScope::Conversation)
            .then(|| conversation_id.to_owned()),
        vector,
        top_k: config.top_k,
        before: config.before,
        after: config.after,
        exclude: Some(RecentMessages {
            conversation_id: conversation_id.to_owned(),
            count: in_context,
        }),
    };
    store.search(&query).await.map_err(RecallError::Store)
}

/// The first line of the system message [`recall_prompt`] writes.
const RECALL_HEADER: &str = "Messages recalled from earlier in your memory of this user, oldest \
first, one JSON object a line (role, conversation, content):";

/// One recalled message as written in the prompt.
#[derive(serde::Serialize, serde::Deserialize)]
struct RecalledLine {
    role: Role,
    conversation: String,
    content: String,
}

/// The system message that gives `recalled` to the model (`None` when there is nothing): the
/// header, then one JSON line per message (its text cut at [`MAX_RECALLED_CHARS`]).
pub fn recall_prompt(recalled: &[RecalledMessage]) -> Option<Message> {
    if recalled.is_empty() {
        return None;
    }
    let mut text = RECALL_HEADER.to_owned();
    for r in recalled {
        let mut content: String = r.message.content.chars().take(MAX_RECALLED_CHARS).collect();
        if content.len() < r.message.content.len() {
            content.push('…');
        }
        let line = RecalledLine {
            role: r.message.role,
            conversation: r.conversation_id.clone(),
            content,
        };
        text.push('\n');
        text.push_str(&serde_json::to_string(&line).unwrap_or_default());
    }
    Some(Message::system(text))
}

/// The recalled messages (role and text) in the system messages of `messages` that
/// [`recall_prompt`] wrote, in order.
pub fn recalled_from_prompt(messages: &[Message]) -> Vec<Message> {
    messages
        .iter()
        .filter(|m| m.role == Role::System)
        .filter_map(|m| m.content.strip_prefix(RECALL_HEADER))
        .flat_map(|body| body.lines())
        .filter_map(|line| serde_json::from_str::<RecalledLine>(line).ok())
        .map(|l| Message::new(l.role, l.content))
        .collect()
}

/// The agents whose messages are embedded, each with its embedder (asked again at every pass,
/// so agents registered later are picked up).
pub type RecallAgents = Arc<dyn Fn() -> Vec<(String, Arc<dyn Embedder>)> + Send + Sync>;

/// How [`run_embedder`] paces itself.
#[derive(Debug, Clone)]
pub struct EmbedderSettings {
    /// The longest it sleeps when not woken.
    pub interval: Duration,
    /// Messages taken (and embedded) at once.
    pub batch: usize,
    /// The first wait after a failure, doubled at each failure in a row.
    pub min_backoff: Duration,
    /// The longest wait after failures.
    pub max_backoff: Duration,
    /// How often it looks again from where its cursor was one such period ago: a message that
    /// committed after one of greater id (on PostgreSQL, whose ids are taken before commit) is
    /// then not missed. Longer than any insert of messages may take.
    pub rescan: Duration,
}

impl Default for EmbedderSettings {
    fn default() -> Self {
        Self {
            interval: Duration::from_millis(500),
            batch: 64,
            min_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            rescan: Duration::from_secs(60),
        }
    }
}

/// Failures in a row of one thing (an agent's embedder, the store), and when to try again
/// (`None`: being tried again now; the streak ends at the first success).
#[derive(Debug, Clone, Copy)]
struct Backoff {
    failures: u32,
    until: Option<Instant>,
    /// An agent's messages not embedded have ids greater than this.
    behind: i64,
}

impl Backoff {
    fn next(
        previous: Option<Backoff>,
        settings: &EmbedderSettings,
        asked: Option<Duration>,
        behind: i64,
    ) -> Self {
        let failures = previous.map_or(0, |b| b.failures) + 1;
        let doubled = settings
            .min_backoff
            .saturating_mul(1u32 << (failures - 1).min(16))
            .min(settings.max_backoff);
        let wait = asked.map_or(doubled, |a| {
            a.clamp(settings.min_backoff, settings.max_backoff)
        });
        Self {
            failures,
            until: Some(Instant::now() + wait),
            behind: previous.map_or(behind, |b| b.behind.min(behind)),
        }
    }

    /// How long is left to wait, if anything.
    fn left(&self, now: Instant) -> Option<Duration> {
        self.until.filter(|u| *u > now).map(|u| u - now)
    }
}

/// What [`run_embedder`] remembers between passes.
#[derive(Debug)]
struct EmbedderState {
    /// Messages up to this id were all taken by an earlier pass (a cursor).
    after: i64,
    /// The cursor when the last rescan was due: the next one goes back to it.
    rescan_from: i64,
    rescan_at: Instant,
    /// The agents whose embedder failed last time it was called.
    agents: HashMap<String, Backoff>,
    store: Option<Backoff>,
}

/// What a pass did.
enum Pass {
    /// It took a full batch: there may be more at once.
    Busy,
    /// Nothing more for now: sleep until woken, at most this long.
    Idle(Duration),
}

/// Embeds stored messages off the request path until `cancel`: at each pass the messages of
/// `agents` not embedded yet, oldest first, [`EmbedderSettings::batch`] at a time, one embedder
/// call per agent and batch; only user and assistant messages with text are embedded (the others
/// are marked as having nothing to embed). It sleeps until `wake` is notified (call
/// `notify_one` after each append) or [`EmbedderSettings::interval`] passes. A failing embedder
/// is retried after a backoff (its `Retry-After` when it gave one) while the other agents go on;
/// a failing store is retried after a backoff too. No message is lost: what is not embedded is
/// taken again.
pub async fn run_embedder(
    store: Arc<dyn RecallStore>,
    agents: RecallAgents,
    wake: Arc<Notify>,
    cancel: CancellationToken,
    settings: EmbedderSettings,
) {
    let mut state = EmbedderState {
        after: 0,
        rescan_from: 0,
        rescan_at: Instant::now() + settings.rescan,
        agents: HashMap::new(),
        store: None,
    };
    loop {
        let listed = agents();
        let pass = tokio::select! {
            _ = cancel.cancelled() => return,
            pass = embed_pass(store.as_ref(), &listed, &mut state, &settings) => pass,
        };
        let wait = match pass {
            Pass::Busy => {
                tokio::task::yield_now().await;
                continue;
            }
            Pass::Idle(wait) => wait,
        };
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = wake.notified() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

async fn embed_pass(
    store: &dyn RecallStore,
    agents: &[(String, Arc<dyn Embedder>)],
    state: &mut EmbedderState,
    settings: &EmbedderSettings,
) -> Pass {
    let now = Instant::now();
    if let Some(left) = state.store.and_then(|b| b.left(now)) {
        return Pass::Idle(left);
    }
    if now >= state.rescan_at {
        let from = std::mem::replace(&mut state.rescan_from, state.after);
        state.after = state.after.min(from);
        state.rescan_at = now + settings.rescan;
    }
    state
        .agents
        .retain(|id, _| agents.iter().any(|(a, _)| a == id));
    for b in state.agents.values_mut() {
        if b.until.is_some_and(|u| u <= now) {
            // Back from a backoff: its messages may be behind the cursor.
            b.until = None;
            state.after = state.after.min(b.behind);
        }
    }
    let active: Vec<String> = agents
        .iter()
        .map(|(id, _)| id.clone())
        .filter(|id| state.agents.get(id).is_none_or(|b| b.until.is_none()))
        .collect();
    let idle = |state: &EmbedderState| {
        let next_retry = state.agents.values().filter_map(|b| b.left(now)).min();
        next_retry.map_or(settings.interval, |r| r.min(settings.interval))
    };
    if active.is_empty() {
        return Pass::Idle(idle(state));
    }
    let batch = match store
        .unembedded(&active, state.after, settings.batch.max(1))
        .await
    {
        Ok(batch) => batch,
        Err(e) => {
            let b = Backoff::next(state.store, settings, None, 0);
            tracing::warn!(error = %e, failures = b.failures, "cannot read the messages to embed; retrying later");
            state.store = Some(b);
            return Pass::Idle(b.left(now).unwrap_or_default());
        }
    };
    let full = batch.len() >= settings.batch.max(1);
    for (agent_id, embedder) in agents {
        let mine: Vec<&UnembeddedMessage> =
            batch.iter().filter(|m| &m.agent_id == agent_id).collect();
        if mine.is_empty() {
            continue;
        }
        let embeddings = match embed_messages(embedder.as_ref(), &mine).await {
            Ok(e) => e,
            Err(e) => {
                let b = Backoff::next(
                    state.agents.get(agent_id).copied(),
                    settings,
                    e.retry_after,
                    mine[0].id - 1,
                );
                tracing::warn!(agent = %agent_id, embedder = %embedder.name(), error = %e, failures = b.failures,
                    "embedding messages failed; retrying later");
                state.agents.insert(agent_id.clone(), b);
                continue;
            }
        };
        if let Err(e) = store.store_embeddings(embedder.name(), &embeddings).await {
            let b = Backoff::next(state.store, settings, None, 0);
            tracing::warn!(error = %e, failures = b.failures, "cannot store embeddings; retrying later");
            state.store = Some(b);
            return Pass::Idle(b.left(now).unwrap_or_default());
        }
    }
    state.store = None;
    // An agent tried again without failing ends its streak.
    state.agents.retain(|_, b| b.until.is_some());
    if let Some(last) = batch.last() {
        state.after = last.id;
    }
    if full {
        Pass::Busy
    } else {
        Pass::Idle(idle(state))
    }
}

/// The embeddings of `messages` by `embedder` (one call): user and assistant messages with text
/// get a normalised vector, the others none.
async fn embed_messages(
    embedder: &dyn Embedder,
    messages: &[&UnembeddedMessage],
) -> Result<Vec<MessageEmbedding>, ModelError> {
    let embeddable = |m: &Message| {
        matches!(m.role, Role::User | Role::Assistant) && !m.content.trim().is_empty()
    };
    let texts: Vec<String> = messages
        .iter()
        .filter(|m| embeddable(&m.message))
        .map(|m| m.message.content.chars().take(MAX_EMBED_CHARS).collect())
        .collect();
    let mut vectors = if texts.is_empty() {
        Vec::new()
    } else {
        embedder.embed(&texts).await?
    };
    if vectors.len() != texts.len()
        || vectors
            .iter()
            .any(|v| v.len() != embedder.dimensions() || v.iter().any(|x| !x.is_finite()))
    {
        return Err(ModelError::of(
            ModelErrorKind::Failed,
            format!(
                "the embedder {} returned {} vectors for {} texts, or vectors not of {} finite numbers",
                embedder.name(),
                vectors.len(),
                texts.len(),
                embedder.dimensions()
            ),
        ));
    }
    vectors.iter_mut().for_each(|v| normalize(v));
    let mut vectors = vectors.into_iter();
    Ok(messages
        .iter()
        .map(|m| MessageEmbedding {
            message_id: m.id,
            vector: if embeddable(&m.message) {
                vectors.next()
            } else {
                None
            },
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offline_vectors_match_on_the_words_that_count() {
        let q = OfflineEmbedder::vector("What did I say about pizza?");
        let pizza = OfflineEmbedder::vector("I love pizza with olives");
        let pizzas = OfflineEmbedder::vector("Pizzas are great");
        let weather = OfflineEmbedder::vector("Is it raining in Paris today");
        assert!(dot(&q, &pizza) > 0.4, "{}", dot(&q, &pizza));
        assert!(dot(&q, &pizzas) > 0.4, "{}", dot(&q, &pizzas));
        assert!(dot(&q, &weather) < 0.1, "{}", dot(&q, &weather));
        assert_eq!(q, OfflineEmbedder::vector("PIZZA"));
        assert!(
            OfflineEmbedder::vector("what did I say")
                .iter()
                .all(|x| *x == 0.0)
        );
        let norm: f32 = pizza.iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-5);
    }

    #[test]
    fn recall_settings_are_bounded() {
        let e: Arc<dyn Embedder> = Arc::new(OfflineEmbedder);
        assert!(SemanticRecall::new(e.clone(), RecallScope::User, 0, 0, 0).is_err());
        assert!(SemanticRecall::new(e.clone(), RecallScope::User, 21, 0, 0).is_err());
        assert!(SemanticRecall::new(e.clone(), RecallScope::User, 20, 6, 0).is_err());
        assert!(SemanticRecall::new(e.clone(), RecallScope::User, 20, 0, 6).is_err());
        let r = SemanticRecall::new(e, RecallScope::Conversation, 3, 5, 1).unwrap();
        assert_eq!((r.top_k(), r.before(), r.after()), (3, 5, 1));
    }

    #[test]
    fn the_prompt_reads_back() {
        let recalled = vec![
            RecalledMessage {
                id: 1,
                conversation_id: "c\"1".into(),
                message: Message::user("I love pizza\nwith olives"),
                score: 0.8,
                kind: RecalledKind::Hit,
            },
            RecalledMessage {
                id: 2,
                conversation_id: "c\"1".into(),
                message: Message::assistant("x".repeat(MAX_RECALLED_CHARS + 5)),
                score: 0.8,
                kind: RecalledKind::Neighbour,
            },
        ];
        let prompt = recall_prompt(&recalled).unwrap();
        assert_eq!(prompt.role, Role::System);
        let back = recalled_from_prompt(&[Message::user("hi"), prompt]);
        assert_eq!(back.len(), 2);
        assert_eq!(back[0], Message::user("I love pizza\nwith olives"));
        assert_eq!(back[1].role, Role::Assistant);
        assert_eq!(back[1].content.chars().count(), MAX_RECALLED_CHARS + 1);
        assert!(recall_prompt(&[]).is_none());
        assert!(recalled_from_prompt(&[Message::system("plain instructions")]).is_empty());
    }

    /// An embedder that is always down.
    struct Down(std::sync::atomic::AtomicUsize);

    #[async_trait]
    impl Embedder for Down {
        fn name(&self) -> &str {
            "down"
        }

        fn dimensions(&self) -> usize {
            4
        }

        async fn embed(&self, _: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err(ModelError::of(ModelErrorKind::Unavailable, "HTTP 503"))
        }
    }

    /// A failing embedder is called again after 1, 2, 4, 8 ... seconds, while an agent beside
    /// it has its messages embedded at once; every message stays there to be taken again.
    #[tokio::test(start_paused = true)]
    async fn a_failing_embedder_backs_off_and_the_others_go_on() {
        use crate::memory::{ConversationKey, ConversationStore};
        let store = Arc::new(InMemoryConversationStore::default());
        let key = |agent: &str| ConversationKey {
            agent_id: agent.into(),
            user_id: "u".into(),
            conversation_id: "c".into(),
        };
        store
            .append(&key("down"), &[Message::user("pizza")])
            .await
            .unwrap();
        store
            .append(&key("up"), &[Message::user("olives")])
            .await
            .unwrap();
        let down = Arc::new(Down(Default::default()));
        let listed = down.clone();
        let agents: RecallAgents = Arc::new(move || {
            vec![
                ("down".to_owned(), listed.clone() as Arc<dyn Embedder>),
                (
                    "up".to_owned(),
                    Arc::new(OfflineEmbedder) as Arc<dyn Embedder>,
                ),
            ]
        });
        let cancel = CancellationToken::new();
        let task = tokio::spawn(run_embedder(
            store.clone(),
            agents,
            Arc::new(Notify::new()),
            cancel.clone(),
            EmbedderSettings::default(),
        ));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let ids = |agent: &str| vec![agent.to_owned()];
        assert!(
            store
                .unembedded(&ids("up"), 0, 10)
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(down.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        // Calls at 0, 1, 3, 7 and 15 seconds.
        tokio::time::sleep(Duration::from_millis(15_500)).await;
        assert_eq!(down.0.load(std::sync::atomic::Ordering::SeqCst), 5);
        assert_eq!(
            store.unembedded(&ids("down"), 0, 10).await.unwrap().len(),
            1
        );
        cancel.cancel();
        task.await.unwrap();
    }

    #[test]
    fn top_k_keeps_the_best() {
        let mut top = TopK::new(2);
        for (id, s) in [(1, 0.5), (2, 0.9), (3, 0.0), (4, 0.7), (5, -1.0), (6, 0.6)] {
            top.offer(id, s);
        }
        assert_eq!(top.into_sorted(), vec![(2, 0.9), (4, 0.7)]);
    }
}
