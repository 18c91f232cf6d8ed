"""The OpenTelemetry SDK behind :class:`~gemini_split.telemetry.recorder.EventRecorder`.

Imported only when telemetry is on (``gemini_split/lazy_imports.py``). One
``LoggerProvider`` and one ``MeterProvider`` per activation, never the SDK's
global ones (a process may run several commands, each with its own
configuration, and the globals can be set only once).

Exports run on the SDK's own threads (a batch of log records at least every
second, metrics every 10 s as gemini-cli does, and both once more on close),
so a slow or dead collector never slows a turn. Each export is bounded
(:data:`EXPORT_TIMEOUT`); closing waits at most its budget. The SDK's own
log lines about failed exports are kept off the terminal: the user gets one
warning when exports start failing (and a note when they work again).

``outfile``: records are appended as gemini-cli's file exporters write them,
each one a JSON object indented by two spaces: a log record with ``hrTime``,
``hrTimeObserved``, ``resource``, ``instrumentationScope``, ``attributes``
and ``_body``; a metrics collection with ``resource`` and ``scopeMetrics``
(``descriptor``, ``dataPointType``, ``dataPoints``…). The file is created
0600: with ``logPrompts`` it holds prompts.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from urllib.parse import urlsplit
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Histogram,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
    Sum,
)
from opentelemetry.sdk.resources import Resource

import gemini_split

from . import TelemetryConfig
from .recorder import INSTRUMENTS, SCOPE

log = logging.getLogger(__name__)

#: Seconds one export may take (each HTTP or gRPC call, retries included).
EXPORT_TIMEOUT = 5.0
#: Milliseconds between two metric exports (gemini-cli's 10 s) and at most
#: between two batches of log records.
METRIC_INTERVAL_MS = 10_000
LOG_DELAY_MS = 1_000


def open_sink(config: TelemetryConfig, *, warn: Callable[[str], None]) -> OtelSink:
    """The providers and exporters ``config`` names, started."""
    return OtelSink(config, warn=warn)


class OtelSink:
    """Log records and metric instruments on the SDK (see the module)."""

    def __init__(self, config: TelemetryConfig, *, warn: Callable[[str], None]):
        self.health = ExportHealth(config.destination(), warn)
        self._unwatch = _watch_sdk_logs(self.health)
        resource = Resource.create({"service.name": "gemini-split", "service.version": gemini_split.__version__})
        log_exporter, metric_exporter = _exporters(config)
        self._exporters = (log_exporter, metric_exporter)
        self._log_processor = BatchLogRecordProcessor(
            _Watched(log_exporter, self.health), schedule_delay_millis=LOG_DELAY_MS,
            export_timeout_millis=EXPORT_TIMEOUT * 1000)
        self._logs = LoggerProvider(resource=resource, shutdown_on_exit=False)
        self._logs.add_log_record_processor(self._log_processor)
        self._reader = PeriodicExportingMetricReader(
            _WatchedMetrics(metric_exporter, self.health), export_interval_millis=METRIC_INTERVAL_MS,
            export_timeout_millis=EXPORT_TIMEOUT * 1000)
        self._meters = MeterProvider(resource=resource, metric_readers=[self._reader], shutdown_on_exit=False)
        self._logger = self._logs.get_logger(SCOPE)
        meter = self._meters.get_meter(SCOPE)
        self._instruments: dict[str, Any] = {}
        for name, (kind, description, unit) in INSTRUMENTS.items():
            make = meter.create_counter if kind == "counter" else meter.create_histogram
            self._instruments[name] = make(name, unit=unit, description=description)
        self._closed = False

    def emit(self, body: str, attributes: dict[str, Any]) -> None:
        self._logger.emit(body=body, attributes=attributes, event_name=attributes.get("event.name"))

    def add(self, name: str, value: int, attributes: dict[str, Any]) -> None:
        self._instruments[name].add(value, attributes)

    def record(self, name: str, value: float, attributes: dict[str, Any]) -> None:
        self._instruments[name].record(value, attributes)

    def close(self, budget: float) -> None:
        """Export what is left (logs and metrics at once), waiting at most
        ``budget`` seconds: what a dead collector did not take is dropped,
        with the one warning."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + budget
        # Each on its own thread, waited for until the deadline only: the
        # SDK bounds its own waits (30 s) far beyond what a command may take.
        closers = [threading.Thread(target=shutdown, name="telemetry-close", daemon=True)
                   for shutdown in (self._log_processor.shutdown, self._meters.shutdown)]
        for thread in closers:
            thread.start()
        while any(t.is_alive() for t in closers) and time.monotonic() < deadline:
            if self.health.trouble:
                # The collector is failing (the exporters are waiting to
                # retry): waiting longer would only delay the exit.
                for exporter in self._exporters:
                    try:
                        exporter.shutdown()  # ends their retry waits
                    except Exception:
                        pass
                for thread in closers:
                    thread.join(max(0.0, min(0.2, deadline - time.monotonic())))
                break
            for thread in closers:
                thread.join(0.02)
        if any(thread.is_alive() for thread in closers):
            self.health.dropped()
        self.health.close()
        self._unwatch()


def _exporters(config: TelemetryConfig) -> tuple[LogRecordExporter, MetricExporter]:
    if config.outfile:
        out = _AppendFile(config.outfile)
        return FileLogExporter(out), FileMetricExporter(out)
    if config.otlp_protocol == "http":
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        base = config.otlp_endpoint.rstrip("/")
        return (OTLPLogExporter(endpoint=f"{base}/v1/logs", timeout=EXPORT_TIMEOUT),
                OTLPMetricExporter(endpoint=f"{base}/v1/metrics", timeout=EXPORT_TIMEOUT))
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetricExporter

    parts = urlsplit(config.otlp_endpoint)  # gemini-cli sends gRPC to the URL's origin
    origin = f"{parts.scheme}://{parts.netloc}"
    insecure = parts.scheme != "https"
    return (GrpcLogExporter(endpoint=origin, insecure=insecure, timeout=EXPORT_TIMEOUT),
            GrpcMetricExporter(endpoint=origin, insecure=insecure, timeout=EXPORT_TIMEOUT))


# --- one warning per outage ------------------------------------------------------


class ExportHealth:
    """Whether exports to one destination work, said once per change: a
    warning when they start failing, a note when they work again, and on
    close whether records were dropped."""

    def __init__(self, destination: str, warn: Callable[[str], None]):
        self.destination = destination
        self._warn = warn
        self.failing = False
        #: The SDK said an export failed or is being retried (before the
        #: export itself gives up and reports the failure).
        self.trouble = False
        self.reason = ""
        self._lock = threading.Lock()
        self._closed = False

    def heard(self, logger: str, level: int, message: str) -> None:
        """One of the SDK's log lines."""
        if logger.startswith("opentelemetry.exporter"):
            self.trouble = True
        if not self.reason and level >= logging.WARNING:
            self.reason = _reason(message)

    def result(self, ok: bool) -> None:
        with self._lock:
            if ok == (not self.failing) or self._closed:
                return
            self.failing = not ok
        if ok:
            log.info("telemetry: exporting to %s works again", self.destination)
        else:
            reason = f" ({self.reason})" if self.reason else ""
            self._say(f"telemetry: cannot export to {self.destination}{reason}; records are dropped "
                      "until it answers")

    def dropped(self) -> None:
        """Said on close when the last records were not taken in time."""
        with self._lock:
            if self.failing or self._closed:
                return  # said already, when exports started failing
        self._say(f"telemetry: {self.destination} did not take the last records in time; they are dropped")

    def close(self) -> None:
        """Nothing more is said: exports still finishing are after the run."""
        with self._lock:
            self._closed = True

    def _say(self, line: str) -> None:
        try:
            self._warn(line)
        except Exception:  # a closed stream at exit: nothing more to say
            pass


class _Watched(LogRecordExporter):
    def __init__(self, exporter: LogRecordExporter, health: ExportHealth):
        self._exporter = exporter
        self._health = health

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        try:
            with _exporting_for(self._health):
                result = self._exporter.export(batch)
        except Exception as exc:
            self._health.reason = self._health.reason or str(exc)
            result = LogRecordExportResult.FAILURE
        self._health.result(result is LogRecordExportResult.SUCCESS)
        return result

    def shutdown(self) -> None:
        with _exporting_for(self._health):
            self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._exporter.force_flush(timeout_millis)


class _WatchedMetrics(MetricExporter):
    def __init__(self, exporter: MetricExporter, health: ExportHealth):
        super().__init__(preferred_temporality=exporter._preferred_temporality,
                         preferred_aggregation=exporter._preferred_aggregation)
        self._exporter = exporter
        self._health = health

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        try:
            with _exporting_for(self._health):
                result = self._exporter.export(metrics_data, timeout_millis=timeout_millis)
        except Exception as exc:
            self._health.reason = self._health.reason or str(exc)
            result = MetricExportResult.FAILURE
        self._health.result(result is MetricExportResult.SUCCESS)
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self._exporter.force_flush(timeout_millis=timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        with _exporting_for(self._health):
            self._exporter.shutdown(timeout_millis=timeout_millis)


#: The destination whose exporter this thread is running, if any: the SDK's
#: log lines name no exporter, and another activation in this process (a
#: command before this one whose dead collector is still being retried)
#: must not make this one's healthy exports look failing.
_current = threading.local()


@contextlib.contextmanager
def _exporting_for(health: ExportHealth) -> Iterator[None]:
    """Attribute the SDK's log lines on this thread to ``health`` meanwhile."""
    outer = getattr(_current, "health", None)
    _current.health = health
    try:
        yield
    finally:
        _current.health = outer


class _SdkLogs(logging.Handler):
    """The SDK's exporter log lines (one per failed batch, per retry…),
    kept off the terminal for good once telemetry has been on in this
    process (exports may still be finishing after a command returned):
    the :class:`ExportHealth` of the exporter that logged them hears them
    instead, while it is watching (the first problem becomes the reason in
    its one warning), and ``--debug`` shows them as this module's debug
    lines."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.watching: set[ExportHealth] = set()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:
            return
        health = getattr(_current, "health", None)
        if health in self.watching:
            health.heard(record.name, record.levelno, message)
        log.debug("%s: %s", record.name, message)


_SDK_LOGS: _SdkLogs | None = None


def _watch_sdk_logs(health: ExportHealth) -> Callable[[], None]:
    """Let ``health`` hear the SDK's log lines until the returned function is called."""
    global _SDK_LOGS
    if _SDK_LOGS is None:
        _SDK_LOGS = _SdkLogs()
        logger = logging.getLogger("opentelemetry")
        logger.addHandler(_SDK_LOGS)
        logger.propagate = False
    sdk_logs = _SDK_LOGS
    sdk_logs.watching.add(health)
    return lambda: sdk_logs.watching.discard(health)


def _reason(message: str) -> str:
    """The gist of an exporter's log line (requests' errors run to lines)."""
    lowered = message.lower()
    for gist in ("connection refused", "timed out", "timeout", "name or service not known", "connection reset",
                 "certificate verify failed", "unavailable", "deadline exceeded"):
        if gist in lowered:
            return gist
    return message[:200]


# --- gemini-cli's file format ---------------------------------------------------------


class _AppendFile:
    """One file written by both exporters (their threads), a batch at a
    time: one ``write`` on an ``O_APPEND`` descriptor, so the batches of
    several processes sharing the file (a client and its local daemon)
    never interleave."""

    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()

    def write(self, text: str) -> bool:
        data = text.encode("utf-8")
        with self._lock:
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    while data:
                        data = data[os.write(fd, data):]
                finally:
                    os.close(fd)
            except OSError as exc:
                log.debug("telemetry: cannot write %s: %s", self.path, exc)
                return False
        return True


def _dump(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n"


def _hr_time(nanos: int | None) -> list[int]:
    """gemini-cli's ``HrTime``: ``[seconds, nanoseconds]``."""
    nanos = nanos or time.time_ns()
    return [nanos // 1_000_000_000, nanos % 1_000_000_000]


def _resource(resource: Resource) -> dict[str, Any]:
    return {"_rawAttributes": [[k, _plain(v)] for k, v in resource.attributes.items()]}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


class FileLogExporter(LogRecordExporter):
    """gemini-cli's ``FileLogExporter``: each record as indented JSON."""

    def __init__(self, out: _AppendFile):
        self._out = out

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        text = "".join(_dump(self._record(r)) for r in batch)
        return LogRecordExportResult.SUCCESS if self._out.write(text) else LogRecordExportResult.FAILURE

    @staticmethod
    def _record(readable: ReadableLogRecord) -> dict[str, Any]:
        record = readable.log_record
        scope = readable.instrumentation_scope
        return {
            "hrTime": _hr_time(record.timestamp or record.observed_timestamp),
            "hrTimeObserved": _hr_time(record.observed_timestamp),
            "resource": _resource(readable.resource),
            "instrumentationScope": {"name": scope.name if scope else SCOPE},
            "attributes": {k: _plain(v) for k, v in (record.attributes or {}).items()},
            "_body": record.body,
        }

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def shutdown(self) -> None:
        pass


class FileMetricExporter(MetricExporter):
    """gemini-cli's ``FileMetricExporter``: each collection (cumulative) as
    indented JSON, in the JavaScript SDK's shape."""

    def __init__(self, out: _AppendFile):
        super().__init__()
        self._out = out

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        text = "".join(_dump(self._resource_metrics(rm)) for rm in metrics_data.resource_metrics)
        if not text:
            return MetricExportResult.SUCCESS
        return MetricExportResult.SUCCESS if self._out.write(text) else MetricExportResult.FAILURE

    @staticmethod
    def _resource_metrics(rm: Any) -> dict[str, Any]:
        scopes = []
        for sm in rm.scope_metrics:
            metrics = []
            for metric in sm.metrics:
                data = metric.data
                histogram = isinstance(data, Histogram)
                points = []
                for p in data.data_points:
                    if histogram:
                        value: Any = {"min": p.min, "max": p.max, "sum": p.sum, "count": p.count,
                                      "buckets": {"boundaries": list(p.explicit_bounds),
                                                  "counts": list(p.bucket_counts)}}
                    else:
                        value = p.value
                    points.append({"attributes": {k: _plain(v) for k, v in (p.attributes or {}).items()},
                                   "startTime": _hr_time(p.start_time_unix_nano),
                                   "endTime": _hr_time(p.time_unix_nano), "value": value})
                entry: dict[str, Any] = {
                    "descriptor": {"name": metric.name, "type": "HISTOGRAM" if histogram else "COUNTER",
                                   "description": metric.description, "unit": metric.unit,
                                   # The JavaScript SDK's ValueType: INT 0, DOUBLE 1.
                                   "valueType": 1 if metric.unit == "s" else 0},
                    "aggregationTemporality": 1 if data.aggregation_temporality
                    is AggregationTemporality.CUMULATIVE else 0,
                    # The JavaScript SDK's DataPointType: HISTOGRAM 0, SUM 3.
                    "dataPointType": 0 if histogram else 3,
                    "dataPoints": points,
                }
                if isinstance(data, Sum):
                    entry["isMonotonic"] = data.is_monotonic
                metrics.append(entry)
            scopes.append({"scope": {"name": sm.scope.name, "version": sm.scope.version or ""},
                           "metrics": metrics})
        return {"resource": _resource(rm.resource), "scopeMetrics": scopes}

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        pass
