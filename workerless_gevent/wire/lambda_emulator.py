"""The answers of the Lambda Runtime Interface Emulator (the Invoke API that AWS's Lambda base images carry on
port 8080) read as Lambda's own answers to the same events, so that a target cannot tell them apart.

What the emulator answers (seen with the aws-lambda-rie that aws-sam-cli 1.170.0 carries, and in
aws/aws-lambda-runtime-interface-emulator issues #20, #21, #86): every answer is `text/plain` with no
`X-Amz-*` header; a result is 200 with the function's JSON (`null` for none); a function error is 200 with the
runtime's error object (`errorType`, `errorMessage`) and no `X-Amz-Function-Error`; a timeout is 200 with the
plain text `Task timed out after N.00 seconds`; a runtime that exits is 502 with a `Runtime.ExitError` object
(an empty body in older releases); any function name but `function` is Go's `404 page not found` (some
releases also serve the name in the container's AWS_LAMBDA_FUNCTION_NAME; 1.170.0's does not).
Lambda answers each of these failures 200 with `X-Amz-Function-Error: Unhandled`, or 404
ResourceNotFoundException. An answer that carries Lambda's own headers (an Invoke API that sends them, such
as `sam local start-lambda`) is left as it is.
"""

from __future__ import annotations

import json
from typing import Any

TIMED_OUT = b"Task timed out after"
# What the runtimes' error objects hold: Python's requestId and stackTrace, Node.js's trace, Java's and .NET's cause
# (.NET's causes too), Go's and Ruby's stackTrace
ERROR_MEMBERS = frozenset(("errorType", "errorMessage", "stackTrace", "trace", "requestId", "cause", "causes"))
FUNCTION_ERROR = "x-amz-function-error"
ERROR_TYPE = "x-amzn-errortype"


def as_lambda_answer(status: int, headers: dict[str, str], body: bytes,
                     function_name: str) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) as Lambda would have answered; headers are lower-case, as the wire keeps them."""
    if FUNCTION_ERROR in headers or ERROR_TYPE in headers:
        return status, headers, body
    if status == 404 and body.strip() == b"404 page not found":
        message = (f"the endpoint serves no function named {function_name!r}: the emulator in AWS's Lambda images "
                   f"serves 'function', the target's default")
        return 404, {**headers, ERROR_TYPE: "ResourceNotFoundException"}, json.dumps({"message": message}).encode()
    if (status == 200 or status >= 500) and is_error_object(body):
        return 200, {**headers, FUNCTION_ERROR: "Unhandled"}, body
    if status == 200 and body.lstrip().startswith(TIMED_OUT):
        error = {"errorType": "Sandbox.Timedout", "errorMessage": body.strip().decode("utf-8", "replace")}
        return 200, {**headers, FUNCTION_ERROR: "Unhandled"}, json.dumps(error).encode()
    return status, headers, body


def is_error_object(body: bytes) -> bool:
    """The runtimes' error object (Python, Node.js, Java, Go, Ruby, .NET, and the emulator's own Runtime.ExitError):
    a string `errorType` or `errorMessage`, and no member that none of them writes. The emulator answers a function
    error exactly as it answers a result (both 200, the same headers), so a handler result made only of these
    members cannot be told from an error, and is read as one (nothing is deleted); any other member, such as a
    result's own fields or `batchItemFailures`, makes it a result."""
    if not body.lstrip().startswith(b"{"):
        return False
    try:
        answer: Any = json.loads(body)
    except ValueError:
        return False
    return isinstance(answer, dict) and answer.keys() <= ERROR_MEMBERS and (
        isinstance(answer.get("errorType"), str) or isinstance(answer.get("errorMessage"), str))
