"""Log output as plain text lines or one JSON object per line."""

from __future__ import annotations

import json
import logging
import sys
import time


# What every LogRecord carries; anything else on a record came from `extra=` (queue, message_id, target, ...).
STANDARD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the record's `extra` fields, the traceback."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in STANDARD_ATTRIBUTES and key not in entry:
                entry[key] = value if isinstance(value, (str, int, float, bool, type(None))) else str(value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def fields(**values: object) -> dict[str, object]:
    """`extra=` for a record: the given fields (queue, message_id, target, outcome, ...) that are set."""
    return {key: value for key, value in values.items() if value is not None}


def configure_logging(log_format: str, log_level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(log_level)
    for noisy in ("botocore", "boto3", "urllib3"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


def duration_text(seconds: float) -> str:
    """How long something has lasted, for a log line: "42s", or "5min" from two minutes on."""
    return f"{seconds:.0f}s" if seconds < 120 else f"{seconds / 60:.0f}min"
