"""A real OTLP/HTTP receiver on 127.0.0.1 (port 0): it decodes each POST /v1/traces as the protobuf
ExportTraceServiceRequest an OpenTelemetry exporter sends, and keeps the spans. `delay` makes it slow."""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field
from typing import Any

import gevent
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (ExportTraceServiceRequest,
                                                                        ExportTraceServiceResponse)

from .http_app import RecordingServer, Reply

KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


@dataclass
class ReceivedSpan:
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    status_code: int  # 0 unset, 1 ok, 2 error
    status_message: str
    events: list[tuple[str, dict[str, Any]]]
    links: list[tuple[str, str]]  # (trace id, span id)
    resource: dict[str, Any] = field(default_factory=dict)


def value_of(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def attributes_of(pairs: Any) -> dict[str, Any]:
    return {pair.key: value_of(pair.value) for pair in pairs}


class OtlpReceiver(RecordingServer):
    def __init__(self) -> None:
        super().__init__()
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self.delay = 0.0

    @property
    def endpoint(self) -> str:
        return self.url

    def handle(self, environ: dict[str, Any], arrived: float) -> Reply:
        body = environ["wsgi.input"].read()
        self.requests += 1
        if self.delay:
            gevent.sleep(self.delay)
        if environ.get("PATH_INFO") != "/v1/traces":
            return 404, {}, b""
        if environ.get("HTTP_CONTENT_ENCODING") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource_spans in request.resource_spans:
            resource = attributes_of(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(ReceivedSpan(
                        span.name, KINDS.get(span.kind, str(span.kind)), span.trace_id.hex(), span.span_id.hex(),
                        span.parent_span_id.hex(), attributes_of(span.attributes), span.status.code,
                        span.status.message, [(event.name, attributes_of(event.attributes)) for event in span.events],
                        [(link.trace_id.hex(), link.span_id.hex()) for link in span.links], resource))
        return 200, {"Content-Type": "application/x-protobuf"}, ExportTraceServiceResponse().SerializeToString()

    def named(self, name: str) -> list[ReceivedSpan]:
        return [span for span in list(self.spans) if span.name == name]
