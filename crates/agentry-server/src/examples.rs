//! The example registry of `examples.md`: a contract, so ids, schemas, step ids, step types and
//! results change only on purpose.

use std::time::Duration;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agentry_agents::guardrail::{MaxLength, PiiRedaction};
use agentry_agents::{
    Agent, AgentHub, Approval, Budget, FnTool, InstructionContext, MemoryConfig, Model,
    OfflineEmbedder, RecallScope, SemanticRecall, Tool, WorkingMemory, WorkingMemoryScope,
};
use agentry_engine::queue::Queue;
use agentry_engine::store::{ExecutionStore, Family, ListQuery};
use agentry_engine::workflow::{StepContext, Workflow, step};
use agentry_engine::{Engine, EngineError, StepError};
use agentry_schedules::{Overlap, ScheduleSpec};
use chrono::{NaiveDate, NaiveTime};
use serde_json::{Value, json};

use crate::calc;

/// A number as JSON, integral values without a fraction (`15`, not `15.0`). A value that
/// overflowed (infinity) or is undefined (NaN) has no JSON form: it is an error naming `what`,
/// never a silent `null` or 0.
fn num(what: &str, x: f64) -> Result<Value, String> {
    if !x.is_finite() {
        return Err(format!(
            "{what} is not a finite number (the values overflow)"
        ));
    }
    Ok(if x.fract() == 0.0 && x.abs() < 9.0e15 {
        json!(x as i64)
    } else {
        json!(x)
    })
}

fn f64_at(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

/// Registers every example workflow.
pub fn register_workflows(engine: &Engine) -> Result<(), EngineError> {
    let defs = [
        expense_approval(),
        order_fulfillment(),
        word_count(),
        countdown(),
        content_pipeline(),
        flaky_step(),
        approval_deadline(),
        payment_webhook(),
        nightly_report(engine.store().clone()),
        batch_enrich(),
        enrich_customer(),
    ];
    for wf in defs {
        let wf = wf.map_err(|e| EngineError::Internal(e.to_string()))?;
        engine.register(wf)?;
    }
    Ok(())
}

type Def = Result<Workflow, agentry_engine::workflow::DefinitionError>;

pub fn expense_approval() -> Def {
    Workflow::new("expense-approval", "Expense Approval")
        .purpose("Approves an expense; amounts over 1000 wait for a manager.")
        .input_schema(json!({
            "type": "object",
            "properties": {
                "employeeId": {"type": "string"},
                "amount": {"type": "number", "minimum": 0},
                "category": {"type": "string"}
            },
            "required": ["employeeId", "amount", "category"]
        }))
        .suspend_schema(json!({
            "type": "object",
            "properties": {
                "employeeId": {"type": "string"},
                "amount": {"type": "number"}
            },
            "required": ["employeeId", "amount"]
        }))
        .resume_schema(json!({
            "type": "object",
            "properties": {
                "approved": {"type": "boolean"},
                "managerId": {"type": "string"}
            },
            "required": ["approved", "managerId"]
        }))
        .and_then(
            step("check-approval", |ctx: StepContext| async move {
                if let Some(r) = &ctx.resume_data {
                    return Ok(json!({
                        "approved": r.get("approved").and_then(Value::as_bool).unwrap_or(false),
                        "approvedBy": r.get("managerId").cloned().unwrap_or(Value::Null),
                    }));
                }
                let amount = f64_at(&ctx.input, "amount");
                if amount <= 1000.0 {
                    return Ok(json!({"approved": true, "approvedBy": "auto"}));
                }
                Err(ctx.suspend(
                    "Manager approval required for amounts over 1000",
                    Some(json!({
                        "employeeId": ctx.input.get("employeeId").cloned().unwrap_or(Value::Null),
                        "amount": ctx.input.get("amount").cloned().unwrap_or(Value::Null),
                    })),
                ))
            })
            .name("Check approval")
            .purpose("Approves up to 1000 automatically; above that, waits for a manager."),
        )
        .and_then(
            step("record-decision", |ctx: StepContext| async move {
                let approved = ctx.input.get("approved").and_then(Value::as_bool) == Some(true);
                Ok(json!({
                    "status": if approved { "approved" } else { "rejected" },
                    "employeeId": ctx.workflow_input.get("employeeId").cloned().unwrap_or(Value::Null),
                    "amount": ctx.workflow_input.get("amount").cloned().unwrap_or(Value::Null),
                    "approvedBy": ctx.input.get("approvedBy").cloned().unwrap_or(Value::Null),
                }))
            })
            .name("Record decision")
            .purpose("Records the approval decision."),
        )
        .build()
}

pub fn order_fulfillment() -> Def {
    let quote = |id: &'static str, wait_ms: u64, carrier: &'static str, cost: i64| {
        step(id, move |ctx: StepContext| async move {
            ctx.sleep(Duration::from_millis(wait_ms)).await?;
            Ok(json!({"carrier": carrier, "cost": cost}))
        })
        .name(format!("Quote {carrier}"))
        .purpose(format!(
            "Asks {carrier} for a shipping quote ({wait_ms} ms)."
        ))
    };
    Workflow::new("order-fulfillment", "Order Fulfillment")
        .purpose("Prices, checks and ships an order: every control-flow step type.")
        .input_schema(json!({
            "type": "object",
            "properties": {
                "orderId": {"type": "string"},
                "items": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "sku": {"type": "string"},
                            "quantity": {"type": "integer", "minimum": 1},
                            "unitPrice": {"type": "number", "minimum": 0}
                        },
                        "required": ["sku", "quantity", "unitPrice"]
                    }
                },
                "express": {"type": "boolean", "default": false}
            },
            "required": ["orderId", "items"]
        }))
        .and_then(
            step("price-order", |ctx: StepContext| async move {
                let subtotal: f64 = ctx
                    .input
                    .get("items")
                    .and_then(Value::as_array)
                    .map(|items| {
                        items
                            .iter()
                            .map(|i| f64_at(i, "quantity") * f64_at(i, "unitPrice"))
                            .sum()
                    })
                    .unwrap_or(0.0);
                Ok(json!({
                    "orderId": ctx.input.get("orderId").cloned().unwrap_or(Value::Null),
                    "express": ctx.input.get("express").and_then(Value::as_bool).unwrap_or(false),
                    "subtotal": num("subtotal", subtotal)?,
                }))
            })
            .name("Price order")
            .purpose("Sums quantity times unit price."),
        )
        .and_all(
            "run-checks",
            vec![
                step("check-stock", |_ctx: StepContext| async move {
                    Ok(json!({"inStock": true}))
                })
                .name("Check stock")
                .purpose("Checks every item is in stock."),
                step("check-fraud", |ctx: StepContext| async move {
                    let score = if f64_at(&ctx.input, "subtotal") > 10000.0 {
                        0.9
                    } else {
                        0.1
                    };
                    Ok(json!({"fraudScore": score}))
                })
                .name("Check fraud")
                .purpose("Scores the order for fraud."),
            ],
        )
        .with_last(|s| {
            s.name("Run checks")
                .purpose("Checks stock and fraud concurrently.")
        })
        .and_when(
            "express-fee",
            |ctx: StepContext| async move {
                ctx.workflow_input.get("express").and_then(Value::as_bool) == Some(true)
            },
            step("add-express-fee", |_ctx: StepContext| async move {
                Ok(json!({"shippingFee": 15}))
            })
            .name("Add express fee")
            .purpose("Charges the express shipping fee."),
        )
        .with_last(|s| {
            s.name("Express fee")
                .purpose("Adds a shipping fee of 15 when the order is express.")
        })
        .and_race(
            "pick-carrier",
            vec![
                quote("quote-swift", 10, "swift", 7),
                quote("quote-steady", 300, "steady", 5),
            ],
        )
        .with_last(|s| {
            s.name("Pick carrier")
                .purpose("Takes the first carrier quote to arrive.")
        })
        .and_tap(
            step("audit", |ctx: StepContext| async move {
                tracing::info!(
                    execution_id = %ctx.execution_id,
                    order_id = ?ctx.workflow_input.get("orderId"),
                    carrier = ?ctx.input.get("carrier"),
                    "order audited"
                );
                Ok(Value::Null)
            })
            .name("Audit")
            .purpose("Logs the order; its output is ignored."),
        )
        .and_then(
            step("summarize", |ctx: StepContext| async move {
                let priced = ctx.step_output("price-order").cloned().unwrap_or_default();
                let checks = ctx.step_output("run-checks").cloned().unwrap_or_default();
                let fee = if ctx.step_ran("express-fee") {
                    ctx.step_output("express-fee")
                        .map(|o| f64_at(o, "shippingFee"))
                        .unwrap_or(0.0)
                } else {
                    0.0
                };
                let carrier = ctx.step_output("pick-carrier").cloned().unwrap_or_default();
                let subtotal = f64_at(&priced, "subtotal");
                let cost = f64_at(&carrier, "cost");
                Ok(json!({
                    "orderId": priced.get("orderId").cloned().unwrap_or(Value::Null),
                    "subtotal": num("subtotal", subtotal)?,
                    "shippingFee": num("shippingFee", fee)?,
                    "carrier": carrier.get("carrier").cloned().unwrap_or(Value::Null),
                    "carrierCost": num("carrierCost", cost)?,
                    "total": num("total", subtotal + fee + cost)?,
                    "inStock": checks.get(0).and_then(|c| c.get("inStock")).cloned().unwrap_or(Value::Null),
                    "fraudScore": checks.get(1).and_then(|c| c.get("fraudScore")).cloned().unwrap_or(Value::Null),
                }))
            })
            .name("Summarize")
            .purpose("Totals the order."),
        )
        .build()
}

pub fn word_count() -> Def {
    Workflow::new("word-count", "Word Count")
        .purpose("Counts the whitespace-separated words of a text.")
        .input_schema(json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"]
        }))
        .and_then(
            step("count", |ctx: StepContext| async move {
                let text = ctx.input.get("text").and_then(Value::as_str).unwrap_or("");
                Ok(json!({"words": text.split_whitespace().count()}))
            })
            .name("Count")
            .purpose("Counts words."),
        )
        .build()
}

pub fn countdown() -> Def {
    let tick = |n: u64| {
        step(format!("tick-{n}"), move |ctx: StepContext| async move {
            let delay = ctx
                .workflow_input
                .get("stepDelayMs")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            ctx.sleep(Duration::from_millis(delay)).await?;
            Ok::<Value, StepError>(json!({"remaining": n - 1}))
        })
        .name(format!("Tick {n}"))
        .purpose(format!("Waits stepDelayMs, then {} remain.", n - 1))
    };
    Workflow::new("countdown", "Countdown")
        .purpose("A slow workflow of five ticks, for suspending a running execution.")
        .input_schema(json!({
            "type": "object",
            "properties": {"stepDelayMs": {"type": "integer", "minimum": 0, "maximum": 60000}},
            "required": ["stepDelayMs"]
        }))
        .and_then(tick(5))
        .and_then(tick(4))
        .and_then(tick(3))
        .and_then(tick(2))
        .and_then(tick(1))
        .build()
}

/// `flaky-step`: one step with 3 retries (50 ms backoff, doubling) and a 1 s time-out per
/// attempt; attempt N sleeps `sleepMs`, then fails while N <= `failTimes`.
pub fn flaky_step() -> Def {
    Workflow::new("flaky-step", "Flaky Step")
        .purpose("One step that fails failTimes times before it succeeds: retries and time-outs.")
        .input_schema(json!({
            "type": "object",
            "properties": {
                "failTimes": {"type": "integer", "minimum": 0, "maximum": 10},
                "sleepMs": {"type": "integer", "minimum": 0, "maximum": 60000, "default": 0}
            },
            "required": ["failTimes"]
        }))
        .and_then(
            step("attempt", |ctx: StepContext| async move {
                let fail_times = ctx
                    .input
                    .get("failTimes")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                let sleep = ctx
                    .input
                    .get("sleepMs")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                ctx.sleep(Duration::from_millis(sleep)).await?;
                let n = ctx.attempt;
                if u64::from(n) <= fail_times {
                    return Err(StepError::failed(format!("attempt {n} failed")));
                }
                Ok(json!({"attempts": n}))
            })
            .name("Attempt")
            .purpose("Fails while its attempt number is at most failTimes.")
            .retries(3, Duration::from_millis(50))
            .timeout(Duration::from_millis(1000)),
        )
        .build()
}

/// `payment-webhook`: waits up to an hour for the event `payment` keyed by the order id (a
/// payment provider's webhook, `POST /events/payment`), then confirms.
pub fn payment_webhook() -> Def {
    Workflow::new("payment-webhook", "Payment Webhook")
        .purpose(
            "Waits for the payment event of an order (by its id, up to an hour), then confirms it.",
        )
        .input_schema(json!({
            "type": "object",
            "properties": {"orderId": {"type": "string", "minLength": 1, "maxLength": 256}},
            "required": ["orderId"]
        }))
        .event(
            "payment",
            json!({
                "type": "object",
                "properties": {
                    "amount": {"type": "number", "minimum": 0},
                    "status": {"enum": ["paid", "failed"]}
                },
                "required": ["amount", "status"]
            }),
        )
        .and_then(
            step("await-payment", |ctx: StepContext| async move {
                let order_id = ctx.input["orderId"].as_str().unwrap_or_default().to_owned();
                let deadline = ctx.started_at + chrono::Duration::hours(1);
                let payment = ctx
                    .wait_for_event("payment", Some(&order_id), Some(deadline))
                    .await?;
                Ok(match payment {
                    Some(p) => {
                        json!({"orderId": order_id, "amount": p["amount"], "status": p["status"]})
                    }
                    None => json!({"orderId": order_id, "amount": 0, "status": "expired"}),
                })
            })
            .name("Await Payment")
            .purpose("Waits for the event payment with the order id as its key, up to an hour."),
        )
        .and_then(
            step("confirm", |ctx: StepContext| async move {
                Ok(json!({
                    "orderId": ctx.input["orderId"],
                    "status": ctx.input["status"],
                    "amount": ctx.input["amount"],
                }))
            })
            .name("Confirm")
            .purpose("Confirms the order's payment status."),
        )
        .build()
}

/// `enrich-customer`: a queued workflow. At most 4 run at once across all replicas, one per
/// customer, and at most 50 start in any second; its one step waits `work` milliseconds.
pub fn enrich_customer() -> Def {
    Workflow::new("enrich-customer", "Enrich Customer")
        .purpose("Enriches a customer's record through a rate-limited provider: queued, 4 at once, one per customer, 50 starts a second.")
        .input_schema(json!({
            "type": "object",
            "properties": {
                "customerId": {"type": "string", "minLength": 1, "maxLength": 256},
                "work": {"type": "integer", "minimum": 0, "maximum": 10_000, "default": 50}
            },
            "required": ["customerId"]
        }))
        .queue(
            Queue::new("enrich-customer")
                .concurrency(4)
                .concurrency_key("/customerId", 1)
                .rate_limit(50, Duration::from_secs(1)),
        )
        .and_then(
            step("enrich", |ctx: StepContext| async move {
                let work = ctx.input.get("work").and_then(Value::as_u64).unwrap_or(50);
                ctx.sleep(Duration::from_millis(work)).await?;
                Ok(json!({"customerId": ctx.input["customerId"], "enriched": true}))
            })
            .name("Enrich")
            .purpose("Calls the provider (waits `work` milliseconds)."),
        )
        .build()
}

/// `batch-enrich`: maps `enrich` over the items, `concurrency` at once, each reporting the
/// progress (`{done}`) as step output; then totals.
pub fn batch_enrich() -> Def {
    Workflow::new("batch-enrich", "Batch Enrich")
        .purpose("Enriches each item (at most concurrency at once), streaming the progress; then totals.")
        .input_schema(json!({
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "items": {"type": "string", "maxLength": 10_000},
                    "minItems": 1,
                    "maxItems": 1000
                },
                "concurrency": {"type": "integer", "minimum": 1, "maximum": 32, "default": 4}
            },
            "required": ["items"]
        }))
        .and_for_each(
            "enrich",
            |ctx| ctx.input["items"].clone(),
            |ctx| {
                ctx.input
                    .get("concurrency")
                    .and_then(Value::as_u64)
                    .map_or(4, |n| n as usize)
            },
            step("enrich-item", |ctx: StepContext| async move {
                let item = ctx.input.as_str().unwrap_or_default().to_owned();
                let length = item.chars().count();
                if let Some(progress) = ctx.foreach_item() {
                    ctx.emit(json!({"done": progress.done()})).await?;
                }
                Ok(json!({"item": item, "length": length}))
            })
            .name("Enrich Item")
            .purpose("Gives an item its length, and reports the progress."),
        )
        .with_last(|s| {
            s.name("Enrich")
                .purpose("Maps enrich-item over the items, concurrency at once.")
        })
        .and_then(
            step("total", |ctx: StepContext| async move {
                let results = ctx.input.as_array().cloned().unwrap_or_default();
                let total: u64 = results
                    .iter()
                    .filter_map(|r| r["length"].as_u64())
                    .sum();
                Ok(json!({"count": results.len(), "totalLength": total}))
            })
            .name("Total")
            .purpose("Counts the items and their lengths."),
        )
        .build()
}

/// `approval-deadline`: waits for an approval until `timeoutMs` after it suspends; then it
/// resumes by itself and expires.
pub fn approval_deadline() -> Def {
    Workflow::new("approval-deadline", "Approval With a Deadline")
        .purpose("Waits for an approval, at most timeoutMs: then it expires by itself.")
        .input_schema(json!({
            "type": "object",
            "properties": {
                "requestId": {"type": "string"},
                "timeoutMs": {"type": "integer", "minimum": 100, "maximum": 86_400_000}
            },
            "required": ["requestId", "timeoutMs"]
        }))
        .resume_schema(json!({
            "type": "object",
            "properties": {"approved": {"type": "boolean"}},
            "required": ["approved"]
        }))
        .and_then(
            step("await-approval", |ctx: StepContext| async move {
                let request_id = ctx.input.get("requestId").cloned().unwrap_or(Value::Null);
                if ctx.timed_out {
                    return Ok(json!({"requestId": request_id, "status": "expired"}));
                }
                if let Some(r) = &ctx.resume_data {
                    let approved = r.get("approved").and_then(Value::as_bool) == Some(true);
                    let status = if approved { "approved" } else { "rejected" };
                    return Ok(json!({"requestId": request_id, "status": status}));
                }
                let ms = ctx
                    .input
                    .get("timeoutMs")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                let deadline = chrono::Utc::now() + chrono::Duration::milliseconds(ms);
                Err(ctx.suspend_until(format!("Approval required within {ms} ms"), None, deadline))
            })
            .name("Await approval")
            .purpose("Suspends until approved, rejected, or timeoutMs have passed."),
        )
        .build()
}

/// The example schedules: `nightly-report` at 02:00 UTC, paused (a fresh server fires nothing).
pub fn schedules() -> Vec<ScheduleSpec> {
    vec![
        ScheduleSpec::new("nightly-report", "nightly-report", "0 2 * * *")
            .timezone("UTC")
            .overlap(Overlap::Skip)
            .catchup_window(Duration::from_secs(3600))
            .paused(true),
    ]
}

/// `nightly-report`: one step `report` counting the executions of every workflow that started on
/// `day` (default: the date of the fire time of the schedule that started it, else today).
pub fn nightly_report(executions: Arc<dyn ExecutionStore>) -> Def {
    Workflow::new("nightly-report", "Nightly Report")
        .purpose("Counts the executions of every workflow that started on a day; its schedule runs it each night.")
        .input_schema(json!({
            "type": "object",
            "properties": {
                "day": {
                    "type": "string",
                    "format": "date",
                    "description": "YYYY-MM-DD (default: the fire time's date)"
                }
            }
        }))
        .and_then(
            step("report", move |ctx: StepContext| {
                let executions = executions.clone();
                async move {
                    let day = report_day(&ctx)?;
                    let count = executions_started_on(executions.as_ref(), day).await?;
                    Ok::<Value, StepError>(json!({"day": day.to_string(), "executions": count}))
                }
            })
            .name("Report")
            .purpose("Counts the executions of every workflow that started that day."),
        )
        .build()
}

/// The day a report is about: the input's `day`, else the date (UTC) of the schedule's fire
/// time in the context, else today.
fn report_day(ctx: &StepContext) -> Result<NaiveDate, StepError> {
    if let Some(day) = ctx.input.get("day").and_then(Value::as_str) {
        return NaiveDate::parse_from_str(day, "%Y-%m-%d")
            .map_err(|_| StepError::failed(format!("day {day:?} is not a date (YYYY-MM-DD)")));
    }
    let fire_time = ctx
        .context
        .get("schedule")
        .and_then(|s| s.get("fireTime"))
        .and_then(Value::as_str)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
    Ok(match fire_time {
        Some(t) => t.with_timezone(&chrono::Utc).date_naive(),
        None => ctx.now().date_naive(),
    })
}

/// How many executions of every workflow started on `day` (UTC), read newest first a page at a
/// time from the end of the day.
async fn executions_started_on(
    executions: &dyn ExecutionStore,
    day: NaiveDate,
) -> Result<u64, StepError> {
    const PAGE: u32 = 1000;
    let start = day.and_time(NaiveTime::MIN).and_utc();
    let end = start + chrono::Duration::days(1);
    let mut before = Some((end, String::new()));
    let mut count = 0;
    loop {
        let page = executions
            .list(&ListQuery {
                workflow_id: None,
                family: Family::default(),
                status: None,
                owner: None,
                before: before.take(),
                limit: PAGE,
            })
            .await
            .map_err(|e| StepError::failed(format!("reading the executions: {e}")))?;
        count += page.iter().filter(|r| r.start_at >= start).count() as u64;
        match page.last() {
            Some(last) if page.len() == PAGE as usize && last.start_at >= start => {
                before = Some((last.start_at, last.id.clone()));
            }
            _ => return Ok(count),
        }
    }
}

/// `get_weather`: `{city}` gives `{city, temperatureC: 21, condition: "sunny"}`.
pub fn get_weather() -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "get_weather",
        "Gets the current weather of a city.",
        json!({
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city"}},
            "required": ["city"]
        }),
        |args, _ctx| async move {
            Ok(json!({"city": args["city"], "temperatureC": 21, "condition": "sunny"}))
        },
    ))
}

/// `lookup_order`: `{orderId}` gives `{orderId, customerId: "c-<orderId>", total: 250,
/// currency: "EUR", status: "delivered"}`; an order id that starts with `pii-` also carries
/// `email: "<orderId>@example.com"` and `phone: "+1 555 0100"` (what the operator's output
/// guardrail redacts).
pub fn lookup_order() -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "lookup_order",
        "Looks up an order: its customer, total, currency and status.",
        json!({
            "type": "object",
            "properties": {"orderId": {"type": "string", "description": "The order's id"}},
            "required": ["orderId"]
        }),
        |args, _ctx| async move {
            let id = args["orderId"].as_str().unwrap_or_default().to_owned();
            let mut order = json!({
                "orderId": id,
                "customerId": format!("c-{id}"),
                "total": 250,
                "currency": "EUR",
                "status": "delivered"
            });
            if id.starts_with("pii-") {
                order["email"] = json!(format!("{id}@example.com"));
                order["phone"] = json!("+1 555 0100");
            }
            Ok(order)
        },
    ))
}

/// How many times `issue_refund` ran in this process.
static REFUNDS: AtomicU64 = AtomicU64::new(0);

/// How many refunds `issue_refund` has issued in this process (tests see whether a call ran).
pub fn refunds_issued() -> u64 {
    REFUNDS.load(Ordering::SeqCst)
}

/// `issue_refund`: `{orderId, amount, reason}` gives `{orderId, refunded: amount, refundId:
/// "rf-<orderId>"}`. A refund over 100 (or of an amount that is not a number) waits for a
/// person's approval, at most a day; a denial is told to the model as `Refund not approved`.
pub fn issue_refund() -> Arc<dyn Tool> {
    Arc::new(
        FnTool::new(
            "issue_refund",
            "Refunds an amount of an order to its customer.",
            json!({
                "type": "object",
                "properties": {
                    "orderId": {"type": "string", "description": "The order's id"},
                    "amount": {"type": "number", "exclusiveMinimum": 0, "description": "The amount to refund"},
                    "reason": {"type": "string", "description": "Why the order is refunded"}
                },
                "required": ["orderId", "amount", "reason"]
            }),
            |args, _ctx| async move {
                REFUNDS.fetch_add(1, Ordering::SeqCst);
                let id = args["orderId"].as_str().unwrap_or_default().to_owned();
                let amount = num("amount", args["amount"].as_f64().unwrap_or(0.0))?;
                Ok(json!({"orderId": id, "refunded": amount, "refundId": format!("rf-{id}")}))
            },
        )
        .needs_approval(
            Approval::when(|args| args["amount"].as_f64().is_none_or(|a| a > 100.0))
                .within(Duration::from_secs(24 * 3600))
                .denial("Refund not approved"),
        ),
    )
}

/// `text` as is when short, else its first 60 characters and `…` (an error message never echoes
/// a whole oversized input).
fn abbreviated(text: &str) -> String {
    match text.char_indices().nth(60) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// `calculate`: `{expression}` gives `{expression, result}`; a bad expression is a tool error.
pub fn calculate() -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "calculate",
        "Evaluates an arithmetic expression with + - * /, parentheses and decimals.",
        json!({
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "e.g. (2 + 3) * 4"}},
            "required": ["expression"]
        }),
        |args, _ctx| async move {
            let expr = args["expression"].as_str().unwrap_or_default().to_owned();
            let result = calc::evaluate(&expr)
                .map_err(|e| format!("cannot evaluate {:?}: {e}", abbreviated(&expr)))?;
            Ok(json!({"expression": expr, "result": num("result", result)?}))
        },
    ))
}

/// Instructions that add the requested language and the user's name to a base text.
fn with_context(base: &'static str) -> impl Fn(&InstructionContext<'_>) -> String + Send + Sync {
    move |ctx| {
        let mut text = base.to_owned();
        if let Some(lang) = ctx.context.get("language").and_then(Value::as_str) {
            text.push_str(&format!(" Answer in {lang}."));
        }
        if let Some(name) = ctx.user.and_then(|u| u.get("name")).and_then(Value::as_str) {
            text.push_str(&format!(" You are talking to {name}."));
        }
        text
    }
}

/// `assistant`'s working memory: the user's preferred city and units (`examples.md`).
fn preferences() -> WorkingMemory {
    WorkingMemory::schema(
        WorkingMemoryScope::User,
        json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "units": {"type": "string", "enum": ["metric", "imperial"]}
            },
            "additionalProperties": false
        }),
    )
    .expect("a valid schema")
}

/// The variable naming a remote A2A agent's card URL that the example `assistant` may ask
/// (the tool `ask_<remote agent id>`).
pub const EXAMPLE_A2A_AGENT: &str = "AGENTRY_EXAMPLE_A2A_AGENT";

/// The example agents' quality settings (running.md): `operator`'s fallback models, on the
/// default model's endpoint (`AGENTRY_FALLBACK_MODELS`), and every example agent's daily token
/// budget per user (`AGENTRY_TOKEN_BUDGET_PER_USER_DAY`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Quality {
    pub fallback_models: Vec<String>,
    pub token_budget_per_user_day: Option<u64>,
    /// The share of `assistant`'s generations scored live (`AGENTRY_EXAMPLE_SCORE_RATE`, 0 to
    /// 1); `None`: all of them on the offline model, a tenth on an endpoint (each scored
    /// generation costs two judge calls there).
    pub score_rate: Option<f64>,
}

/// What [`Quality`] makes of the example agents.
#[derive(Clone)]
pub struct QualityModels {
    pub fallbacks: Vec<Arc<dyn Model>>,
    pub budget: Budget,
    /// The share of `assistant`'s generations scored live.
    pub score_rate: f64,
}

/// The most characters of a message `operator` takes (its input guardrail).
pub const OPERATOR_MAX_INPUT_CHARS: usize = 2000;

impl Quality {
    /// The fallback models on `endpoint` (the default model's; without one the offline model
    /// serves, which never fails: no fallbacks), and the budget.
    pub fn models(&self, endpoint: &Option<agentry_openai::OpenAiSettings>) -> QualityModels {
        let fallbacks = match endpoint {
            Some(endpoint) => self
                .fallback_models
                .iter()
                .map(|name| {
                    Arc::new(agentry_openai::OpenAiModel::new(
                        agentry_openai::OpenAiSettings {
                            model: name.clone(),
                            ..endpoint.clone()
                        },
                    )) as Arc<dyn Model>
                })
                .collect(),
            None => {
                if !self.fallback_models.is_empty() {
                    tracing::info!(
                        "AGENTRY_FALLBACK_MODELS is set but no endpoint is: the offline model serves, and never fails"
                    );
                }
                Vec::new()
            }
        };
        let score_rate = self
            .score_rate
            .unwrap_or(if endpoint.is_some() { 0.1 } else { 1.0 });
        QualityModels {
            fallbacks,
            budget: Budget {
                tokens_per_run: None,
                tokens_per_user_day: self.token_budget_per_user_day,
            },
            score_rate,
        }
    }
}

/// `assistant`'s live scoring: relevance and faithfulness judged by `judge` (the server's
/// model), an answer within 30 seconds and 10,000 tokens, on `rate` of its generations.
fn assistant_scoring(
    judge: Arc<dyn agentry_agents::Model>,
    rate: f64,
) -> agentry_agents::LiveScoring {
    use agentry_agents::scorers::{Faithfulness, LatencyBelow, Relevance, TokensBelow};
    agentry_agents::LiveScoring::new(
        vec![
            Arc::new(Relevance::new(judge.clone())),
            Arc::new(Faithfulness::new(judge)),
            Arc::new(LatencyBelow(Duration::from_secs(30))),
            Arc::new(TokensBelow(10_000)),
        ],
        rate,
    )
}

/// Registers the example agents: `assistant`, `writer`, `supervisor`, `operator`. `remote`:
/// tools `assistant` also has (a remote A2A agent, [`EXAMPLE_A2A_AGENT`]); `quality`: fallback
/// models and budgets.
pub fn register_agents(
    hub: &AgentHub,
    remote: Vec<Arc<dyn agentry_agents::Tool>>,
    quality: QualityModels,
) -> Result<(), agentry_agents::AgentError> {
    let assistant = Agent::new("assistant", "Assistant")
        .description("Answers questions; can look up the weather and do arithmetic.")
        .dynamic_instructions(with_context(
            "You are a helpful assistant. Use get_weather for weather questions and calculate for arithmetic.",
        ))
        .tool(get_weather())
        .tool(calculate())
        .memory(MemoryConfig::default())
        .working_memory(preferences())
        .semantic_recall(
            SemanticRecall::new(Arc::new(OfflineEmbedder), RecallScope::User, 3, 0, 1)
                .expect("a valid recall"),
        )
        .budget(quality.budget)
        .live_scoring(assistant_scoring(hub.default_model(), quality.score_rate));
    hub.register(remote.into_iter().fold(assistant, Agent::tool))?;
    hub.register(
        Agent::new("writer", "Writer")
            .description("Writes short drafts on a topic.")
            .dynamic_instructions(with_context(
                "You write short, clear drafts on the topic you are given.",
            ))
            .budget(quality.budget),
    )?;
    hub.register(
        Agent::new("supervisor", "Supervisor")
            .description("Hands tasks to the assistant or the writer.")
            .dynamic_instructions(with_context(
                "You hand each task to the right sub-agent with delegate_task: the assistant for questions, weather and arithmetic; the writer for drafts.",
            ))
            .sub_agent("assistant")
            .sub_agent("writer")
            .memory(MemoryConfig::default())
            .budget(quality.budget),
    )?;
    let operator = Agent::new("operator", "Operator")
            .description("Looks up orders and issues refunds; refunds over 100 need a person's approval.")
            .dynamic_instructions(with_context(
                "You handle refunds. Look the order up with lookup_order first, then refund it with issue_refund; a refund over 100 waits for a person's approval.",
            ))
            .tool(lookup_order())
            .tool(issue_refund())
            .memory(MemoryConfig::default())
            .input_guardrail(Arc::new(
                MaxLength::new(OPERATOR_MAX_INPUT_CHARS).named("input-length"),
            ))
            .output_guardrail(Arc::new(PiiRedaction::new()))
            .budget(quality.budget)
            .durable();
    hub.register(
        quality
            .fallbacks
            .into_iter()
            .fold(operator, Agent::fallback_model),
    )?;
    Ok(())
}

/// `content-pipeline`: an agent step and a sub-workflow step.
pub fn content_pipeline() -> Def {
    Workflow::new("content-pipeline", "Content Pipeline")
        .purpose("Drafts a text on a topic with the writer agent, counts its words, packages both.")
        .input_schema(json!({
            "type": "object",
            "properties": {"topic": {"type": "string"}},
            "required": ["topic"]
        }))
        .step(
            agentry_engine::Step::with_kind(
                "draft",
                agentry_engine::workflow::StepKind::Agent {
                    agent_id: "writer".into(),
                    prompt: Arc::new(|ctx: &StepContext| {
                        json!(format!(
                            "Write a two-sentence draft about {}.",
                            ctx.input["topic"].as_str().unwrap_or("anything")
                        ))
                    }),
                    output: Some(Arc::new(|answer: Value| json!({"draft": answer}))),
                },
            )
            .name("Draft")
            .purpose("Asks the writer agent for a two-sentence draft about the topic."),
        )
        .and_workflow(
            "count-words",
            "word-count",
            Some(Arc::new(|ctx: &StepContext| json!({"text": ctx.input["draft"]}))),
        )
        .with_last(|s| {
            s.name("Count words")
                .purpose("Runs the word-count workflow on the draft.")
        })
        .and_then(
            step("package", |ctx: StepContext| async move {
                Ok(json!({
                    "topic": ctx.workflow_input["topic"],
                    "draft": ctx.step_output("draft").and_then(|d| d.get("draft")).cloned().unwrap_or(Value::Null),
                    "words": ctx.input["words"],
                }))
            })
            .name("Package")
            .purpose("Packages topic, draft and word count."),
        )
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentry_engine::{ExecuteOptions, ExecutionId, Status};

    async fn engine() -> Engine {
        let e = Engine::in_memory();
        register_workflows(&e).unwrap();
        e
    }

    #[tokio::test]
    async fn order_fulfillment_worked_example() {
        let e = engine().await;
        let rec = e
            .execute(
                &"order-fulfillment".into(),
                json!({"orderId": "o-1", "express": true, "items": [
                    {"sku": "A", "quantity": 2, "unitPrice": 10},
                    {"sku": "B", "quantity": 1, "unitPrice": 5.5}
                ]}),
                ExecuteOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(
            rec.state.result().unwrap(),
            &json!({"orderId": "o-1", "subtotal": 25.5, "shippingFee": 15, "carrier": "swift",
                    "carrierCost": 7, "total": 47.5, "inStock": true, "fraudScore": 0.1})
        );
    }

    #[tokio::test]
    async fn expense_suspends_over_1000_and_resumes() {
        let e = engine().await;
        let rec = e
            .execute(
                &"expense-approval".into(),
                json!({"employeeId": "e1", "amount": 1500, "category": "travel"}),
                ExecuteOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(rec.state.status(), Status::Suspended);
        let done = e
            .resume(
                &"expense-approval".into(),
                &ExecutionId::from(&rec.id),
                json!({"approved": false, "managerId": "m1"}),
                None,
            )
            .await
            .unwrap();
        assert_eq!(
            done.state.result().unwrap(),
            &json!({"status": "rejected", "employeeId": "e1", "amount": 1500, "approvedBy": "m1"})
        );
    }

    #[test]
    fn the_operator_is_durable_and_refunds_over_100_need_approval() {
        let hub = AgentHub::new(Arc::new(agentry_agents::OfflineModel), None);
        register_agents(&hub, Vec::new(), Quality::default().models(&None)).unwrap();
        let operator = hub.agent(&"operator".into()).unwrap();
        assert_eq!(operator.name, "Operator");
        assert!(operator.durable);
        assert!(operator.memory.is_some());
        assert_eq!(hub.tool_names(&operator), ["lookup_order", "issue_refund"]);
        let refund = issue_refund();
        let rule = refund.approval().expect("issue_refund needs approval");
        assert!(rule.applies(&json!({"orderId": "o-1", "amount": 250, "reason": "broken"})));
        assert!(!rule.applies(&json!({"orderId": "o-1", "amount": 40, "reason": "broken"})));
        assert!(rule.applies(&json!({"orderId": "o-1", "amount": "40", "reason": "broken"})));
        assert_eq!(rule.deadline, Some(Duration::from_secs(24 * 3600)));
        assert_eq!(rule.denial.as_deref(), Some("Refund not approved"));
        assert!(lookup_order().approval().is_none());
    }

    #[test]
    fn numbers_drop_needless_fractions() {
        assert_eq!(num("x", 15.0), Ok(json!(15)));
        assert!(
            num("x", f64::INFINITY)
                .unwrap_err()
                .contains("x is not a finite number")
        );
        assert!(num("x", f64::NAN).is_err());
        assert_eq!(num("x", 47.5), Ok(json!(47.5)));
    }
}
