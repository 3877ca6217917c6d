"""The daemon's tracing: the SDK's tracer provider for its sampler, id generator and resource from the
standard OTEL_* variables (service.name `workerless` unless they name one; OTEL_SDK_DISABLED samples
nothing), its span limits, the OTLP/HTTP exporter (endpoint, headers, timeout and compression from
OTEL_EXPORTER_OTLP_*) with its encoding step specialised for delivery spans (`encoding.py`), and the bounded
buffer of `export.py` in place of the SDK's batching thread."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from opentelemetry.exporter.otlp.proto.http import trace_exporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.environment_variables import OTEL_SDK_DISABLED
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from .. import __version__
from ..config.model import Config
from ..metrics import Count
from . import encoding
from .attributes import REPEATING
from .current import TraceIds
from .export import SpanBuffer, exporter_session
from .spans import Tracing

DEFAULT_SERVICE = "workerless"
QUIET_LOGGERS = ("opentelemetry.exporter", "opentelemetry.sdk")  # a collector down: our one WARNING per interval


@dataclass(frozen=True, slots=True)
class TracingParts:
    tracing: Tracing
    buffer: SpanBuffer


class FixedResource(Resource):
    """The SDK's Resource with its hash worked out once. The OTLP encoder groups each batch's spans by resource,
    hashing every span's (a `json.dumps` of all its attributes each time: an eighth of the encoding); the
    daemon's resource is made once and never changes."""

    def __init__(self, resource: Resource) -> None:
        super().__init__(resource.attributes, resource.schema_url)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash


def build_tracing(config: Config, count: Count) -> TracingParts:
    assert config.tracing is not None
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE}))
    resource = FixedResource(resource)
    tracing = config.tracing
    encoding.install(trace_exporter, encoding.SpanEncoder(REPEATING))
    buffer = SpanBuffer(OTLPSpanExporter(session=exporter_session()), count, max_queue_size=tracing.max_queue_size,
                        batch_size=tracing.max_export_batch_size, delay_seconds=tracing.schedule_delay_seconds,
                        report_seconds=config.metrics_interval)
    provider = TracerProvider(resource=resource)  # the sampler: OTEL_TRACES_SAMPLER (parent-based, always on)
    is_disabled = os.environ.get(OTEL_SDK_DISABLED, "false").strip().lower() == "true"
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    for handler in logging.getLogger().handlers:
        handler.addFilter(TraceIds())
    spans = Tracing(ALWAYS_OFF if is_disabled else provider.sampler, provider.id_generator, resource,
                    InstrumentationScope("workerless", __version__), SpanLimits(), buffer.on_end)
    return TracingParts(spans, buffer)
