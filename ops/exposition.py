"""The text a Prometheus scrape receives: the counters of every gunicorn worker, plus figures that apps count in
the database at scrape time (they register a collector with ``count_in_database`` when they are ready: ops imports
no app)."""

import os

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.registry import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_database = CollectorRegistry()
_registered: set[type[Collector]] = set()


def count_in_database(collector: Collector) -> None:
    """Have every scrape run ``collector`` (once per process: app configs may be readied more than once in tests)."""
    if type(collector) not in _registered:
        _registered.add(type(collector))
        _database.register(collector)


def render() -> bytes:
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        counters = CollectorRegistry()
        multiprocess.MultiProcessCollector(counters)
    else:
        counters = REGISTRY
    return generate_latest(counters) + generate_latest(_database)
