"""A tiny OpenTelemetry collector for tests: OTLP/HTTP (protobuf bodies) and
OTLP/gRPC, parsed with the official ``opentelemetry-proto`` messages.

::

    with OtlpCollector() as collector:           # http://127.0.0.1:PORT
        ...  # export to collector.url (HTTP) or collector.grpc_url (gRPC)
        collector.wait_for(lambda c: "gemini_cli.api_request" in c.event_names())
        collector.events("gemini_cli.user_prompt")  # [{"body": …, "attributes": {…}}]
        collector.metric_points("gemini_cli.api.request.count")  # [(attributes, value)]
        collector.raw                                # every request body received, as bytes

Never imported by runtime code (``tests/test_app.py``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def any_value(value: AnyValue) -> Any:
    """An OTLP ``AnyValue`` as a Python value."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind)


def _attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in kvs}


class OtlpCollector:
    """Receives OTLP logs and metrics over HTTP (``url``) and, with
    ``grpc=True``, over gRPC (``grpc_url``); keeps every record. With
    ``delay``, each HTTP export is answered that many seconds after it
    arrived (a slow but working collector)."""

    def __init__(self, *, grpc: bool = False, delay: float = 0.0):
        self._delay = delay
        self.logs: list[dict[str, Any]] = []
        self.metrics: list[dict[str, Any]] = []
        self.raw: list[bytes] = []
        self.paths: list[str] = []
        self._lock = threading.Condition()
        self._grpc = grpc
        self._grpc_server: Any = None
        self.grpc_url = ""

    # --- what arrived -----------------------------------------------------------------

    def add_logs(self, body: bytes) -> None:
        request = logs_service_pb2.ExportLogsServiceRequest.FromString(body)
        with self._lock:
            self.raw.append(body)
            for rl in request.resource_logs:
                resource = _attributes(rl.resource.attributes)
                for sl in rl.scope_logs:
                    for record in sl.log_records:
                        self.logs.append({"body": any_value(record.body), "attributes": _attributes(record.attributes),
                                          "event_name": record.event_name, "scope": sl.scope.name,
                                          "resource": resource})
            self._lock.notify_all()

    def add_metrics(self, body: bytes) -> None:
        request = metrics_service_pb2.ExportMetricsServiceRequest.FromString(body)
        with self._lock:
            self.raw.append(body)
            for rm in request.resource_metrics:
                for sm in rm.scope_metrics:
                    for metric in sm.metrics:
                        kind = metric.WhichOneof("data")
                        points = []
                        for p in getattr(metric, kind).data_points:
                            if kind == "histogram":
                                value: Any = {"count": p.count, "sum": p.sum}
                            else:
                                value = p.as_int if p.WhichOneof("value") == "as_int" else p.as_double
                            points.append((_attributes(p.attributes), value))
                        self.metrics.append({"name": metric.name, "kind": kind, "points": points,
                                             "scope": sm.scope.name})
            self._lock.notify_all()

    def event_names(self) -> list[str]:
        with self._lock:
            return [r["attributes"].get("event.name", "") for r in self.logs]

    def events(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.logs if r["attributes"].get("event.name") == name]

    def metric_points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        """The data points of the last export that had ``name`` (metrics are
        cumulative: the last one holds the totals)."""
        with self._lock:
            found = [m for m in self.metrics if m["name"] == name]
        return found[-1]["points"] if found else []

    def everything(self) -> bytes:
        with self._lock:
            return b"".join(self.raw)

    def wait_for(self, condition: Callable[[OtlpCollector], bool], timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        with self._lock:
            while not condition(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"the collector did not receive it in {timeout}s; events: "
                                         f"{[r['attributes'].get('event.name') for r in self.logs]}")
                self._lock.wait(min(left, 0.1))

    # --- serving --------------------------------------------------------------------------

    def __enter__(self) -> OtlpCollector:
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                time.sleep(collector._delay)
                collector.paths.append(self.path)
                if self.path.endswith("/v1/logs"):
                    collector.add_logs(body)
                    answer = logs_service_pb2.ExportLogsServiceResponse().SerializeToString()
                elif self.path.endswith("/v1/metrics"):
                    collector.add_metrics(body)
                    answer = metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString()
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}"
        if self._grpc:
            self._start_grpc()
        return self

    def _start_grpc(self) -> None:
        from concurrent import futures

        import grpc
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
        from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc

        collector = self

        class Logs(logs_service_pb2_grpc.LogsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:  # noqa: N802
                collector.add_logs(request.SerializeToString())
                return logs_service_pb2.ExportLogsServiceResponse()

        class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:  # noqa: N802
                collector.add_metrics(request.SerializeToString())
                return metrics_service_pb2.ExportMetricsServiceResponse()

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Logs(), server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self._grpc_server = server
        self.grpc_url = f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: Any) -> None:
        self._http.shutdown()
        self._http.server_close()
        if self._grpc_server is not None:
            self._grpc_server.stop(0)
