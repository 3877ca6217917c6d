"""A loopback stand-in for the Runtime Interface Emulator that AWS's Lambda base images run on port 8080, running
a Python handler `(event, context)` as Lambda would, and answering as the emulator does (measured on the real
aws-lambda-rie that aws-sam-cli 1.170.0 carries; see workerless_gevent/wire/lambda_emulator.py):

- only `POST /2015-03-31/functions/function/invocations` is served (and `function_name`'s, as some releases
  add the name in AWS_LAMBDA_FUNCTION_NAME); any other path is Go's `404 page not found`;
- every answer is `text/plain; charset=utf-8` without an `X-Amz-*` header; the query string and the
  signature are ignored;
- a result is 200 with its JSON (`null` for None); a raised exception is 200 with the runtime's error object;
  a handler past `timeout_seconds` is 200 with `Task timed out after N.00 seconds`; `SystemExit` (the runtime
  exits) is 502 with a `Runtime.ExitError` object;
- one invocation at a time: the real one crashes on an invocation that comes while another runs; here it is
  counted in `overlapping` and answered 400 with no body (what older releases answered).
"""

from __future__ import annotations

import json
import traceback
import uuid
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import unquote

import gevent

from .fake_lambda import INVOKE_PATH, Invocation, parse_invocation
from .http_app import RecordingServer, Reply
from .wait import wait_until

TEXT = {"Content-Type": "text/plain; charset=utf-8"}
Handler = Callable[[Any, "Context"], Any]


@dataclass(frozen=True)
class Context:
    """The parts of Lambda's context object a handler commonly reads."""
    function_name: str
    aws_request_id: str
    invoked_function_arn: str


def echo_nothing(event: Any, context: Context) -> Any:
    return None


class LambdaEmulator(RecordingServer):
    """Records invocations; set `handler`, `timeout_seconds` (the image's AWS_LAMBDA_FUNCTION_TIMEOUT)."""

    def __init__(self, handler: Handler = echo_nothing, timeout_seconds: float = 300,
                 function_name: str | None = None) -> None:
        super().__init__()
        self.handler = handler
        self.timeout_seconds = timeout_seconds
        self.function_name = function_name
        self.invocations: list[Invocation] = []
        self.overlapping = 0
        self.running = 0

    def handle(self, environ: dict[str, Any], arrived: float) -> Reply:
        match = INVOKE_PATH.match(environ.get("PATH_INFO", ""))
        name = unquote(match.group(1)) if match else ""
        if not match or match.group(0).endswith("/") or name not in ("function", self.function_name):
            return 404, {**TEXT, "X-Content-Type-Options": "nosniff"}, b"404 page not found\n"
        invocation = parse_invocation(environ, name, arrived)
        self.invocations.append(invocation)
        if self.running:
            self.overlapping += 1
            return 400, TEXT, b""
        self.running += 1
        try:
            return self.run(invocation)
        finally:
            self.running -= 1

    def run(self, invocation: Invocation) -> Reply:
        request_id = str(uuid.uuid4())
        name = self.function_name or "test_function"
        context = Context(name, request_id, f"arn:aws:lambda:us-east-1:012345678912:function:{name}")
        try:
            with gevent.Timeout(self.timeout_seconds):
                result = self.handler(invocation.payload, context)
        except gevent.Timeout:
            return 200, TEXT, f"Task timed out after {self.timeout_seconds:.2f} seconds".encode()
        except SystemExit as exit_:
            error = {"errorType": "Runtime.ExitError",
                     "errorMessage": f"RequestId: {request_id} Error: Runtime exited with error: exit status {exit_.code}"}
            return 502, TEXT, json.dumps(error, separators=(",", ":")).encode()
        except Exception as error:  # noqa: BLE001  (the runtime reports whatever the handler raised)
            body = {"errorMessage": str(error), "errorType": type(error).__name__, "requestId": request_id,
                    "stackTrace": traceback.format_tb(error.__traceback__)}
            return 200, TEXT, json.dumps(body).encode()
        return 200, TEXT, json.dumps(result).encode()

    def wait_for_invocations(self, n: int, timeout: float = 30.0) -> list[Invocation]:
        wait_until(lambda: len(self.invocations) >= n, timeout,
                   message=lambda: f"expected {n} invocations, got {len(self.invocations)}")
        return list(self.invocations)
