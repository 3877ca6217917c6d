"""The JSON formatter: one object per line, with the record's `extra` fields and nothing else added."""

from __future__ import annotations

import json
import logging

from workerless_gevent.logs import JsonFormatter, fields


def record(**extra: object) -> logging.LogRecord:
    logger = logging.getLogger("workerless_gevent.test")
    return logger.makeRecord(logger.name, logging.WARNING, __file__, 1, "queue=%s failed: %s", ("jobs", "boom"),
                             None, extra=extra)


def test_extra_fields_become_keys_and_the_text_stays() -> None:
    line = JsonFormatter().format(record(**fields(queue="jobs", message_id="m-1", target="default", outcome=None,
                                                  receive_count=3, error=ValueError("x"))))
    entry = json.loads(line)
    assert entry["message"] == "queue=jobs failed: boom" and entry["level"] == "WARNING"
    assert (entry["queue"], entry["message_id"], entry["target"], entry["receive_count"]) == ("jobs", "m-1", "default", 3)
    assert entry["error"] == "x" and "outcome" not in entry  # not JSON-native: its text; None: left out


def test_a_record_without_extra_has_only_the_standard_keys() -> None:
    assert set(json.loads(JsonFormatter().format(record()))) == {"time", "level", "logger", "message"}
