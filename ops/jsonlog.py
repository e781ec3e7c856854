"""One JSON object per log line, for log routers (a PaaS drain, Loki, CloudWatch) to index without parsing prose."""

import json
import logging
from datetime import UTC, datetime
from typing import Any

from ops.request_id import request_id_of

# Built once: json.dumps with non-default options would build a new encoder for every line.
_ENCODER = json.JSONEncoder(default=str, ensure_ascii=False, separators=(",", ":"))


class JsonFormatter(logging.Formatter):
    """time, level, logger and message, then the record's `fields` (structured extras), the request id of the
    request being logged when Django passes one, and the traceback as one string."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if fields:
            entry.update(fields)
        # django.request passes the request with its errors: the id ties a traceback to the request's log line.
        request: Any = getattr(record, "request", None)
        request_id = request_id_of(request) if hasattr(request, "META") else None
        if request_id and "request_id" not in entry:
            entry["request_id"] = request_id
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        elif record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return _ENCODER.encode(entry)
