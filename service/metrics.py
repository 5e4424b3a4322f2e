"""Request counters and latency histograms, written in the Prometheus text exposition format (0.0.4).

Labels are route templates (``/v1/sessions/{id}``), never raw paths, tenants or keys: the series stay
few and say nothing about any tenant's data.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Iterable

__all__ = ["BUCKETS", "CONTENT_TYPE", "Metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

_Labels = tuple[tuple[str, str], ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: _Labels, extra: tuple[str, str] | None = None) -> str:
    items = [*labels, extra] if extra else list(labels)
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in items) + "}" if items else ""


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


class _Histogram:
    __slots__ = ("count", "counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * len(BUCKETS)  # per bucket, not cumulative; summed when written
        self.count = 0
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        i = bisect.bisect_left(BUCKETS, seconds)
        if i < len(BUCKETS):
            self.counts[i] += 1
        self.count += 1
        self.total += seconds


class Metrics:
    def __init__(self) -> None:
        self.requests: defaultdict[_Labels, int] = defaultdict(int)
        self.errors: defaultdict[_Labels, int] = defaultdict(int)
        self.latency: defaultdict[_Labels, _Histogram] = defaultdict(_Histogram)
        self.gauges: dict[str, tuple[str, Callable[[], float]]] = {}
        self.in_flight = 0

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests[(("route", route), ("method", method), ("status", str(status)))] += 1
        self.latency[(("route", route), ("method", method))].observe(seconds)

    def error(self, route: str, code: str) -> None:
        self.errors[(("route", route), ("code", code))] += 1

    def gauge(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        self.gauges[name] = (help_text, read)

    def render(self) -> str:
        out: list[str] = []

        def family(name: str, kind: str, help_text: str, lines: Iterable[str]) -> None:
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} {kind}")
            out.extend(lines)

        family(
            "macupos_http_requests_total",
            "counter",
            "HTTP requests answered, by route template, method and status.",
            (f"macupos_http_requests_total{_labels(k)} {v}" for k, v in sorted(self.requests.items())),
        )
        family(
            "macupos_http_errors_total",
            "counter",
            "Requests answered with an error, by route template and error code.",
            (f"macupos_http_errors_total{_labels(k)} {v}" for k, v in sorted(self.errors.items())),
        )
        hist: list[str] = []
        name = "macupos_http_request_duration_seconds"
        for k, h in sorted(self.latency.items()):
            running = 0
            for le, n in zip(BUCKETS, h.counts, strict=True):
                running += n
                hist.append(f"{name}_bucket{_labels(k, ('le', _number(le)))} {running}")
            hist.append(f"{name}_bucket{_labels(k, ('le', '+Inf'))} {h.count}")
            hist.append(f"{name}_sum{_labels(k)} {h.total!r}")
            hist.append(f"{name}_count{_labels(k)} {h.count}")
        family(name, "histogram", "Time from a request's arrival to its response's end, by route template.", hist)
        family(
            "macupos_http_requests_in_flight",
            "gauge",
            "Requests being answered now.",
            [f"macupos_http_requests_in_flight {self.in_flight}"],
        )
        for gname, (help_text, read) in sorted(self.gauges.items()):
            family(gname, "gauge", help_text, [f"{gname} {_number(read())}"])
        return "\n".join(out) + "\n"
