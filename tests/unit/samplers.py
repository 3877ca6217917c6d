"""A sampler of the kind an operator may plug in (OTEL_TRACES_SAMPLER's entry points), for the tracing tests:
it samples every span and adds attributes, and a trace state, of its own. Import it after the test module's
`pytest.importorskip` of OpenTelemetry."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind, TraceState
from opentelemetry.util.types import Attributes


class Marking(Sampler):
    """Samples, and adds `attributes` (and `trace_state`) of its own, as a custom sampler may."""

    def __init__(self, attributes: dict[str, object], trace_state: TraceState | None = None) -> None:
        self.attributes = attributes
        self.trace_state = trace_state

    def should_sample(self, parent_context: Context | None, trace_id: int, name: str, kind: SpanKind | None = None,
                      attributes: Attributes = None, links: Sequence[Link] | None = None,
                      trace_state: object = None) -> SamplingResult:
        return SamplingResult(Decision.RECORD_AND_SAMPLE, self.attributes,  # type: ignore[arg-type]
                              self.trace_state)

    def get_description(self) -> str:
        return "Marking"
