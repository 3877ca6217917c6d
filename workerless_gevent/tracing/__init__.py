"""OpenTelemetry for `[tracing]` (the optional extra `otel`): a span per delivery in the producer's trace
(`spans.py`) with the messaging conventions' attributes (`attributes.py`), the message's context read and the
app's written (`context.py`), finished spans encoded (`encoding.py`) and exported from a bounded buffer that
never slows a delivery (`export.py`), and the provider that ties them (`setup.py`). Nothing here is imported
without `[tracing]`."""
