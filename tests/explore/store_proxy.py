"""A proxy in front of moto's DynamoDB that faults item calls per call (`faults.FaultPlan`) and records each one
with the table slots it names, so that the explorer knows which claims failed and when a key became
`completed` in the table.

Fault kinds: `throughput` (ProvisionedThroughputExceededException), `throttling` (ThrottlingException),
`limit` (RequestLimitExceeded), `cancel_throttle` (a TransactWriteItems cancelled with ThrottlingError /
ProvisionedThroughputExceeded reasons; other calls: ThrottlingException), `cancel_throttle_one` (cancelled for one
item's ThrottlingError, the others' reasons None; other calls: ProvisionedThroughputExceededException),
`conflict` (a TransactWriteItems cancelled with one TransactionConflict reason; other calls go through),
`error` (500), `unavailable` (503), `reset`, `reset_after` (the call took effect, the answer is a reset),
`stall` (held, then forwarded; kept shorter than the daemon's DynamoDB read timeout), `stall_reset` (held, then
reset, never forwarded) and `slow` (latency added, then forwarded or faulted by the next mode).
Control-plane calls (DescribeTable, CreateTable, the TTL calls) are never faulted: they often answer
while writes throttle, which is why a health probe must be a write (RUNTIME-NOTES)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import gevent
import gevent.pool
from gevent import pywsgi

from tests.support.http_app import headers_from_environ
from tests.support.proxy import CountingProxy

from .faults import Fault, FaultPlan, SocketHandler, reset

Reply = tuple[int, dict[str, str], bytes]
CONTROL_PLANE = frozenset({"DescribeTable", "CreateTable", "UpdateTimeToLive", "DescribeTimeToLive", "ListTables",
                           "DeleteTable"})
# Faults the daemon sees as the store failing (a short stall is a slow answer; a conflict is an answer).
STORE_FAILURES = frozenset({"throughput", "throttling", "limit", "cancel_throttle", "cancel_throttle_one", "error",
                            "unavailable", "reset", "reset_after", "stall_reset"})
SIMPLE_ERRORS = {"throughput": (400, "ProvisionedThroughputExceededException",
                                "The level of configured provisioned throughput for the table was exceeded."),
                 "throttling": (400, "ThrottlingException", "Rate of requests exceeds the allowed throughput."),
                 "limit": (400, "RequestLimitExceeded", "Throughput exceeds the current throughput limit."),
                 "error": (500, "InternalServerError", "Internal server error"),
                 "unavailable": (503, "ServiceUnavailable", "Service is unavailable")}
THROTTLE_REASONS = ("ThrottlingError", "ProvisionedThroughputExceeded")


@dataclass
class StoreCall:
    action: str
    slots: list[str]  # the items' `slot` keys the call names
    states: list[str]  # for writes: the state each item is written with ("" for removals and updates)
    owners: list[str]  # the claim token each item is written with, or conditioned on
    deadlines: list[int]  # the `expires_at` each item is written with (a claim's deadline), 0 if none
    arrived: float
    ended: float = 0.0
    fault: str | None = None
    status: int = 0
    answer: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """The daemon saw the store fail this call (not an answer of DynamoDB's, nor a slow one)."""
        return self.fault in STORE_FAILURES

    @property
    def applied(self) -> bool:
        """It reached the table and took effect."""
        return self.status == 200 and self.fault in (None, "stall", "reset_after", "slow")


def error_reply(status: int, code: str, message: str, **members: Any) -> Reply:
    body = {"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": message, **members}
    return status, {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": "explore"}, \
        json.dumps(body).encode()


def cancelled(reasons: list[dict[str, str]]) -> Reply:
    codes = ", ".join(reason["Code"] for reason in reasons)
    return error_reply(400, "TransactionCanceledException",
                       f"Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]",
                       CancellationReasons=reasons)


def slots_of(action: str, params: dict[str, Any]) -> tuple[list[str], list[str], list[str], list[int]]:
    """The `slot` of each item a call names, the state written with it, its owner (the claim's token) and the
    deadline written with it."""
    items: list[tuple[dict[str, Any], bool]] = []  # (item or key, is a written item)
    if action == "TransactWriteItems":
        for entry in params.get("TransactItems", []):
            for kind, body in entry.items():
                items.append((body.get("Item") or body.get("Key") or {}, kind == "Put"))
    elif action == "BatchWriteItem":
        for requests in params.get("RequestItems", {}).values():
            for request in requests:
                put = request.get("PutRequest")
                items.append(((put or {}).get("Item") or request.get("DeleteRequest", {}).get("Key", {}),
                              put is not None))
    elif "Item" in params:
        items.append((params["Item"], True))
    else:  # an update that sets the state names it among its values
        values = list(params.get("ExpressionAttributeValues", {}).values())
        state = {"S": "completed"} if {"S": "completed"} in values else None
        items.append(({**params.get("Key", {}), **({"state": state} if state else {})}, state is not None))
    slots = [str(item.get("slot", {}).get("S", "")) for item, _ in items]
    states = [str(item.get("state", {}).get("S", "")) if written else "" for item, written in items]
    values = params.get("ExpressionAttributeValues", {})
    token = str(values.get(":token", {}).get("S", ""))
    owners = [str(item.get("owner", {}).get("S", "")) or token for item, _ in items]
    deadline = str(values.get(":deadline", {}).get("N", "0"))  # an extension's
    deadlines = [int(str(item.get("expires_at", {}).get("N", deadline)).split(".")[0] or 0) for item, _ in items]
    return slots, states, owners, deadlines


class StoreProxy(CountingProxy):
    def __init__(self, upstream: str, seed: int) -> None:
        super().__init__(upstream)
        self.plan = FaultPlan(seed)
        self.calls: list[StoreCall] = []
        self._server = pywsgi.WSGIServer(("127.0.0.1", 0), self._wsgi, log=None, error_log=None,
                                         spawn=gevent.pool.Pool(500), handler_class=SocketHandler)

    def stop(self) -> None:
        self._server.stop(timeout=0)

    def handle(self, environ: dict[str, Any], arrived: float) -> Reply:
        body = environ["wsgi.input"].read()
        headers = headers_from_environ(environ)
        action = headers.get("x-amz-target", "").rsplit(".", 1)[-1]
        params = json.loads(body or b"{}")
        slots, states, owners, deadlines = slots_of(action, params) if action not in CONTROL_PLANE else ([], [], [], [])
        call = StoreCall(action, slots, states, owners, deadlines, arrived)
        if action not in CONTROL_PLANE:
            self.calls.append(call)
        fault = self.plan.choose(action) if action not in CONTROL_PLANE else None
        if fault is not None and fault.kind == "conflict" and action != "TransactWriteItems":
            fault = None
        call.fault = fault.kind if fault else None
        try:
            reply = self.faulted(fault, call, environ, headers, body)
        finally:
            call.ended = time.monotonic()
        if fault is not None and fault.kind == "reset_after":
            reset(environ)  # the call took effect (recorded above), the client sees its connection reset
        return reply

    def faulted(self, fault: Fault | None, call: StoreCall, environ: dict[str, Any], headers: Any,
                body: bytes) -> Reply:
        if fault is not None:
            self.plan.hold(fault.latency)
            reply = self.error_for(fault, call)
            if reply is not None:
                call.status = reply[0]
                return reply
            self.plan.hold(fault.seconds)
            if fault.kind in ("reset", "stall_reset"):
                reset(environ)
        status, out, answer = self.forward(environ, headers, body)
        call.status = status
        if status == 200 and call.action == "BatchWriteItem":
            call.answer = json.loads(answer or b"{}")
        return status, out, answer

    @staticmethod
    def error_for(fault: Fault, call: StoreCall) -> Reply | None:
        if fault.kind in SIMPLE_ERRORS:
            return error_reply(*SIMPLE_ERRORS[fault.kind])
        if fault.kind == "cancel_throttle":
            if call.action != "TransactWriteItems":
                return error_reply(*SIMPLE_ERRORS["throttling"])
            return cancelled([{"Code": THROTTLE_REASONS[index % 2], "Message": "Throughput exceeds the limit."}
                              for index in range(len(call.slots))])
        if fault.kind == "cancel_throttle_one":  # one hot item throttled cancels the whole transaction
            if call.action != "TransactWriteItems":
                return error_reply(*SIMPLE_ERRORS["throughput"])
            reasons = [{"Code": "None"} for _ in call.slots]
            reasons[len(reasons) // 2] = {"Code": "ThrottlingError", "Message": "Throughput exceeds the limit."}
            return cancelled(reasons)
        if fault.kind == "conflict":
            reasons = [{"Code": "None"} for _ in call.slots]
            reasons[len(reasons) // 2] = {"Code": "TransactionConflict",
                                          "Message": "Transaction is ongoing for the item"}
            return cancelled(reasons)
        return None
