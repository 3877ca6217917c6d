"""The parts of the aws-sqsd headers that come from a message's content: attribute values, which a
header line cannot always carry as they are, and the trace context (X-Amzn-Trace-Id, W3C traceparent).

The rule for values, one for every header made from message content: a value goes as it is, in UTF-8,
unless HTTP would change or refuse it (a control character, or a space at either end, which parsers
strip); such a value is percent-encoded (UTF-8) and its header is named in X-Workerless-Encoded."""

from __future__ import annotations

import re
import urllib.parse

from ..message import Message

ENCODED_HEADER = "X-Workerless-Encoded"
NEEDS_ENCODING = re.compile(r"[\x00-\x1f\x7f]|\A | \Z")
ENCODING_SAFE = "!#$&'()*+,/:;=?@[]~"  # kept readable; "%" itself is always encoded
PRINTABLE_ASCII = re.compile(r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?\Z")  # and no space at either end
TRACEPARENT = re.compile(r"(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}(-[\x21-\x7e]*)?\Z")
XRAY_ROOT = re.compile(r"1-([0-9a-f]{8})-([0-9a-f]{24})\Z")
SPAN_ID = re.compile(r"(?!0{16})[0-9a-f]{16}\Z")


def put_value(headers: dict[str, str], name: str, value: str, encoded: list[str]) -> None:
    """headers[name] = value by the rule above; `encoded` collects the names of percent-encoded ones."""
    if NEEDS_ENCODING.search(value):
        headers[name] = urllib.parse.quote(value, safe=ENCODING_SAFE)
        encoded.append(name)
    elif value.isascii():
        headers[name] = value
    else:  # UTF-8 bytes on the wire; the request is written as latin-1, which maps each char to one byte
        headers[name] = value.encode("utf-8").decode("latin-1")


def trace_headers(message: Message) -> dict[str, str]:
    """X-Amzn-Trace-Id from the AWSTraceHeader system attribute, as it is; traceparent (and tracestate)
    from message attributes of those names, else traceparent derived from AWSTraceHeader."""
    headers: dict[str, str] = {}
    aws_trace = message.attributes.get("AWSTraceHeader")
    if aws_trace is not None and PRINTABLE_ASCII.match(aws_trace):
        headers["X-Amzn-Trace-Id"] = aws_trace
    traceparent = message.string_attribute("traceparent")
    if traceparent is not None and TRACEPARENT.match(traceparent):
        headers["traceparent"] = traceparent
        tracestate = message.string_attribute("tracestate")
        if tracestate is not None and PRINTABLE_ASCII.match(tracestate):
            headers["tracestate"] = tracestate
    elif "X-Amzn-Trace-Id" in headers:
        derived = traceparent_from_xray(headers["X-Amzn-Trace-Id"])
        if derived is not None:
            headers["traceparent"] = derived
    return headers


def traceparent_from_xray(header: str) -> str | None:
    """Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1 ->
    00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01. W3C requires a parent id, so a header
    without a valid Parent gives no traceparent rather than an invented one."""
    fields = dict(part.strip().partition("=")[::2] for part in header.split(";"))
    root = XRAY_ROOT.match(fields.get("Root", ""))
    parent = fields.get("Parent", "")
    if root is None or not SPAN_ID.match(parent) or root.group(1) + root.group(2) == "0" * 32:
        return None
    flags = "01" if fields.get("Sampled") == "1" else "00"
    return f"00-{root.group(1)}{root.group(2)}-{parent}-{flags}"
