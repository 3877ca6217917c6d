"""The SQS model (`sqs_model.py`) served over HTTP on 127.0.0.1 in the AWS JSON 1.0 protocol the daemon's wire
speaks, with per-call faults (`faults.FaultPlan`): error answers (500 InternalError, 503 ServiceUnavailable,
400 RequestThrottled), a reset before the call takes effect or after it did, a stall (then the call), a slow call,
and `entries`: a batch call whose every other entry is answered Failed (InternalError) and not applied."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gevent
import gevent.pool
from gevent import pywsgi

from .faults import Fault, FaultPlan, SocketHandler, reset
from .sqs_model import ModelQueue, SqsError, SqsModel

Reply = tuple[int, dict[str, str], bytes]
ERRORS = {"error": (500, "InternalError"), "unavailable": (503, "ServiceUnavailable"),
          "throttle": (400, "RequestThrottled")}


@dataclass
class SqsCall:
    action: str
    queue: str
    arrived: float
    ended: float = 0.0
    fault: str | None = None
    status: int = 0
    message_ids: list[str] = field(default_factory=list)  # received, or named by a batch call's entries


def error_reply(status: int, code: str, message: str) -> Reply:
    headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": "explore",
               "x-amzn-query-error": f"{code};{'Sender' if status < 500 else 'Receiver'}"}
    return status, headers, json.dumps({"__type": f"com.amazonaws.sqs#{code}", "message": message}).encode()


def batch_answer(entries: list[dict[str, Any]], apply: Callable[[dict[str, Any]], None],
                 failing: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
    successful, failed = [], []
    for entry in entries:
        try:
            if entry["Id"] in failing:
                raise SqsError("InternalError", "injected by the explorer", 500)
            apply(entry)
        except SqsError as error:
            failed.append({"Id": entry["Id"], "SenderFault": error.status < 500, "Code": error.code,
                           "Message": str(error)})
        else:
            successful.append({"Id": entry["Id"]})
    return {"Successful": successful, "Failed": failed}


class SqsServer:
    def __init__(self, seed: int) -> None:
        self.plan = FaultPlan(seed)
        self.calls: list[SqsCall] = []
        self.server = pywsgi.WSGIServer(("127.0.0.1", 0), self.wsgi, log=None, error_log=None,
                                        spawn=gevent.pool.Pool(500), handler_class=SocketHandler)
        self.server.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.model = SqsModel(self.url)

    def stop(self) -> None:
        self.server.stop(timeout=0)

    def wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        status, headers, body = self.handle(environ)
        start_response(f"{status} {'OK' if status < 300 else 'Error'}",
                       [*headers.items(), ("Content-Length", str(len(body)))])
        return [body]

    def handle(self, environ: dict[str, Any]) -> Reply:
        action = environ.get("HTTP_X_AMZ_TARGET", "").rsplit(".", 1)[-1]
        params = json.loads(environ["wsgi.input"].read() or b"{}")
        call = SqsCall(action, str(params.get("QueueUrl") or params.get("QueueName") or "").rsplit("/", 1)[-1],
                       time.monotonic())
        self.calls.append(call)
        fault = self.plan.choose(action)
        call.fault = fault.kind if fault else None
        call.message_ids = [str(entry.get("ReceiptHandle", "")).split("#")[0] for entry in params.get("Entries", [])
                            if "ReceiptHandle" in entry]
        try:
            reply = self.faulted(fault, environ, action, params)
            call.status = reply[0]
        finally:
            call.ended = time.monotonic()
        if action == "ReceiveMessage" and reply[0] == 200:
            call.message_ids = [message["MessageId"] for message in json.loads(reply[2]).get("Messages", [])]
        if fault is not None and fault.kind == "reset_after":
            reset(environ)  # the call took effect, the client sees its connection reset
        return reply

    def faulted(self, fault: Fault | None, environ: dict[str, Any], action: str, params: dict[str, Any]) -> Reply:
        if fault is not None:
            self.plan.hold(fault.latency)
        if fault is not None and fault.kind in ERRORS:
            status, code = ERRORS[fault.kind]
            return error_reply(status, code, "injected by the explorer")
        if fault is not None:
            self.plan.hold(fault.seconds)
        if fault is not None and fault.kind in ("reset", "stall_reset"):
            reset(environ)
        if fault is not None and fault.kind == "entries" and "Entries" in params:
            failing = {entry["Id"] for entry in params["Entries"][1::2]}  # every other entry, answered Failed
            return self.answer(action, params, failing)
        return self.answer(action, params)

    def answer(self, action: str, params: dict[str, Any], failing: frozenset[str] | set[str] = frozenset()) -> Reply:
        try:
            document = self.dispatch(action, params, failing)
        except SqsError as error:
            return error_reply(error.status, error.code, str(error))
        return 200, {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": "explore"}, \
            json.dumps(document).encode()

    def dispatch(self, action: str, params: dict[str, Any], failing: frozenset[str] | set[str]) -> dict[str, Any]:
        """The model's answer; the entries of a batch call named in `failing` answered Failed, not applied."""
        model = self.model
        if action == "GetQueueUrl":
            return {"QueueUrl": model.queue(params["QueueName"]).url}
        queue = model.queue(params["QueueUrl"])
        if action == "ReceiveMessage":
            messages = model.receive(queue, int(params.get("MaxNumberOfMessages", 1)),
                                     float(params.get("WaitTimeSeconds", 0)), int(params.get("VisibilityTimeout", 30)))
            return {"Messages": [message.as_received() for message in messages]} if messages else {}
        if action == "DeleteMessageBatch":
            return batch_answer(params["Entries"], lambda entry: model.delete(queue, entry["ReceiptHandle"]), failing)
        if action == "ChangeMessageVisibilityBatch":
            return batch_answer(params["Entries"], lambda entry: model.change_visibility(
                queue, entry["ReceiptHandle"], int(entry["VisibilityTimeout"])), failing)
        if action == "DeleteMessage":
            model.delete(queue, params["ReceiptHandle"])
            return {}
        if action == "ChangeMessageVisibility":
            model.change_visibility(queue, params["ReceiptHandle"], int(params["VisibilityTimeout"]))
            return {}
        if action == "SendMessage":
            return self.send(queue, params)
        if action == "SendMessageBatch":
            return {"Successful": [{"Id": entry["Id"], **self.send(queue, entry)} for entry in params["Entries"]],
                    "Failed": []}
        if action == "GetQueueAttributes":
            return {"Attributes": model.attributes(queue, list(params.get("AttributeNames", ["All"])))}
        raise SqsError("InvalidAction", f"the explorer's SQS model does not serve {action}")

    def send(self, queue: ModelQueue, params: dict[str, Any]) -> dict[str, Any]:
        body = params["MessageBody"]
        message_id = self.model.send(queue, body, params.get("MessageAttributes"), params.get("MessageGroupId"),
                                     params.get("MessageDeduplicationId"))
        return {"MessageId": message_id, "MD5OfMessageBody": hashlib.md5(body.encode()).hexdigest()}
