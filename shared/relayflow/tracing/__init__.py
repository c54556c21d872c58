"""OpenTelemetry traces of runs (see docs/guides/tracing.md).

``ids`` derives a run's trace and span ids (no OpenTelemetry); ``context`` makes a span
current for step code and reads a caller's trace; ``spans`` emits spans through the
OpenTelemetry API; ``observer`` turns the engine's saves into the run's spans; ``sdk``
configures the OpenTelemetry SDK (the ``relayflow[otel]`` extra) from the ``OTEL_*``
variables. Only ``sdk`` imports the SDK.
"""
