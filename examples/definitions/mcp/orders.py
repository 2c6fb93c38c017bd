"""An MCP server over stdio, with no dependency but Python 3: the orders of a small shop.

Tools: `lookup_order` ({orderId}: its customer, total, currency and status) and `issue_refund`
({orderId, amount, reason}: the refund). agents/refund-desk.yaml uses them; agentry starts it
(in the definitions folder, so the path is mcp/orders.py) when the folder is trusted:
`agentry serve --definitions examples/definitions --definitions-trusted`.
"""

import json
import sys

TOOLS = [
    {
        "name": "lookup_order",
        "description": "Looks up an order: its customer, total, currency and status.",
        "inputSchema": {
            "type": "object",
            "properties": {"orderId": {"type": "string", "description": "The order's id"}},
            "required": ["orderId"],
        },
    },
    {
        "name": "issue_refund",
        "description": "Refunds an amount of an order to its customer.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "orderId": {"type": "string", "description": "The order's id"},
                "amount": {"type": "number", "exclusiveMinimum": 0},
                "reason": {"type": "string", "description": "Why the order is refunded"},
            },
            "required": ["orderId", "amount", "reason"],
        },
    },
]


def call(name, args):
    order = str(args.get("orderId", ""))
    if name == "lookup_order":
        return {"orderId": order, "customerId": "c-" + order, "total": 250,
                "currency": "EUR", "status": "delivered"}
    if name == "issue_refund":
        return {"orderId": order, "refunded": args.get("amount"), "refundId": "rf-" + order}
    raise KeyError(name)


def answer(message):
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        return {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "orders", "version": "1.0.0"}}
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        try:
            result = call(params.get("name"), params.get("arguments") or {})
        except KeyError:
            return {"content": [{"type": "text", "text": "no such tool"}], "isError": True}
        return {"content": [{"type": "text", "text": json.dumps(result)}],
                "structuredContent": result}
    return None


for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    if "id" not in message or "method" not in message:
        continue  # a notification, or an answer
    result = answer(message)
    if result is None:
        reply = {"jsonrpc": "2.0", "id": message["id"],
                 "error": {"code": -32601, "message": "unknown method"}}
    else:
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
