"""What a ``serve`` process tells operators and load balancers.

On the WebSocket listener's HTTP side (``plugins/gemini_split_websocket``):

``GET /health``
    JSON: status, versions, live sessions, and with a store on a server
    (Redis) whether it is reachable (``"store": "ok"`` / ``"unreachable"``)
    and its round-trip time.
``GET /ready``
    200 while this server takes new sessions; 503 while it shuts down, while
    no access token can be had for the model (Vertex AI credentials), or
    while its Redis is unreachable (a load balancer sends new connections
    elsewhere; running requests go on streaming here).
``GET /metrics``
    Prometheus text format: sessions (live, running, and
    ``gemini_split_sessions{state="idle"|"running"}``), attached and relayed
    clients, events logged (a counter: ``rate()`` gives events/s), events
    waiting for the store (the outbox's back-pressure) and requests stopped
    because it overflowed, store round-trip time, leases held, taken and lost
    (counters: a takeover after a replica died shows as a rise in takes).

:class:`Operations` also watches the store: every :data:`CHECK_INTERVAL`
seconds it pings a store that can be pinged, and ends with an error
(``storage_error``) the running request of any session whose events did not
fit in the buffer while the store was away — never a silent loss.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from gemini_split.protocol import ErrorCode

from .store import StoreError

log = logging.getLogger(__name__)

#: Seconds between two store checks.
CHECK_INTERVAL = 1.0


class Operations:
    def __init__(self, service: Any):
        self.service = service
        self.store = service.store
        #: None until checked; True/False after (stores without a server: None).
        self.store_up: bool | None = None
        self.latency: float | None = None
        self.ping_sum = 0.0
        self.ping_count = 0
        self._pingable = callable(getattr(self.store, "ping", None))
        #: None until checked; False while no access token can be had for
        #: the model (Vertex AI credentials).
        self.credentials_up: bool | None = None
        #: Requests stopped because their events overflowed the store's buffer.
        self.overflow_stops = 0

    async def run(self) -> None:
        """Check the store (and the model's credentials) until cancelled."""
        async with trio.open_nursery() as nursery:
            check_credentials = getattr(self.service.model, "check_credentials", None)
            if callable(check_credentials):
                # Apart from the store checks: a token endpoint may take
                # its whole timeout to fail.
                nursery.start_soon(self._watch_credentials, check_credentials)
            while True:
                await self.check()
                await trio.sleep(CHECK_INTERVAL)

    async def _watch_credentials(self, check_credentials: Any) -> None:
        """Keep :attr:`credentials_up`: an access token can be had (it is
        refreshed here before it expires, so requests seldom wait)."""
        while True:
            up = await check_credentials()
            if up is None:
                return  # nothing to refresh (an API key)
            if up != self.credentials_up:
                if up:
                    log.info("the model's credentials are working%s",
                             "" if self.credentials_up is None else " again")
                else:
                    log.warning("no access token can be had for the model (see the errors of the requests); "
                                "/ready answers 503 until one can")
            self.credentials_up = up
            await trio.sleep(CHECK_INTERVAL)

    async def check(self) -> None:
        if self._pingable:
            try:
                self.latency = await self.store.ping()
            except StoreError as exc:
                if self.store_up is not False:
                    log.warning("%s; new sessions are refused until it is back", exc)
                self.store_up = False
            else:
                if self.store_up is False:
                    log.info("the session store is reachable again")
                self.store_up = True
                self.ping_sum += self.latency
                self.ping_count += 1
        self._end_overflowed()

    def _end_overflowed(self) -> None:
        lost: set[str] = getattr(self.store, "overflowed", set())
        while lost:
            sid = lost.pop()
            session = self.service.sessions.get(sid)
            if session is not None and session.busy:
                log.error("session %s: events were lost while the store was unreachable or too slow; request stopped",
                          sid)
                self.overflow_stops += 1
                session.cancel_active(because=(
                    ErrorCode.STORAGE_ERROR,
                    "the session store was unreachable or too slow for too long: this request's events no longer "
                    "fit in the server's buffer, so it was stopped (what you saw was shown in full; a resume "
                    "cannot replay all of it)"))

    # --- what the HTTP side answers --------------------------------------------------

    def ready(self) -> bool:
        return not self.service.shutting_down and self.store_up is not False and self.credentials_up is not False

    def health(self) -> dict[str, Any]:
        report = dict(self.service.health())
        if self._pingable:
            report["store"] = {True: "ok", False: "unreachable", None: "unknown"}[self.store_up]
            if self.latency is not None:
                report["store_latency_ms"] = round(self.latency * 1000, 3)
            if self.store_up is False:
                report["status"] = "degraded"
        return report

    def metrics(self) -> str:
        service = self.service
        sessions = service.sessions
        replica = getattr(service.manager, "replica", None)
        rows: list[tuple[str, str, str, float]] = [
            ("gemini_split_sessions_live", "gauge", "Sessions live in this process.", len(sessions)),
            ("gemini_split_sessions_running", "gauge", "Sessions running a request here.",
             sum(1 for s in sessions.values() if s.busy)),
            ("gemini_split_clients_attached", "gauge", "Client connections attached to sessions run here.",
             len(getattr(service, "_streams", {}))),
            ("gemini_split_clients_relayed", "gauge", "Client connections relayed to another replica.",
             getattr(service, "relays", 0)),
            ("gemini_split_ready", "gauge", "1 while new sessions are taken here.", 1 if self.ready() else 0),
        ]
        appended = getattr(self.store, "events_appended", None)
        if appended is not None:
            rows.append(("gemini_split_events_total", "counter", "Session events logged by this process.",
                         appended))
            rows.append(("gemini_split_store_events_pending", "gauge", "Events waiting to be written to the store.",
                         getattr(self.store, "events_pending", 0)))
            rows.append(("gemini_split_store_overflow_stops_total", "counter",
                         "Requests stopped because their events overflowed the store's buffer.", self.overflow_stops))
        if self._pingable:
            rows.append(("gemini_split_store_up", "gauge", "1 when the last store check succeeded.",
                         1 if self.store_up else 0))
            if self.latency is not None:
                rows.append(("gemini_split_store_latency_seconds", "gauge", "Round trip of the last store check.",
                             self.latency))
        if replica is not None:
            rows.append(("gemini_split_leases_held", "gauge", "Sessions whose lease this replica holds.",
                         len(replica.held)))
            rows.append(("gemini_split_leases_taken_total", "counter", "Session leases taken by this replica.",
                         replica.leases_taken))
            rows.append(("gemini_split_leases_lost_total", "counter",
                         "Session leases lost here to another replica (the session stopped here).", replica.leases_lost))
        lines = []
        for name, kind, help_text, value in rows:
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {_number(value)}"]
        running = sum(1 for s in sessions.values() if s.busy)
        name = "gemini_split_sessions"
        lines += [f"# HELP {name} Sessions live in this process, by state.", f"# TYPE {name} gauge",
                  f'{name}{{state="idle"}} {len(sessions) - running}', f'{name}{{state="running"}} {running}']
        if self._pingable:
            name = "gemini_split_store_ping_seconds"
            lines += [f"# HELP {name} Store round trips measured by the health check.", f"# TYPE {name} summary",
                      f"{name}_sum {_number(self.ping_sum)}", f"{name}_count {self.ping_count}"]
        return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))
