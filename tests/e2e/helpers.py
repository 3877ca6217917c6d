"""Helpers shared by the end-to-end tests."""

from __future__ import annotations

from typing import Any

from tests.support import HttpApp


def send_batch(sqs: Any, url: str, bodies: list[str], **attributes: Any) -> list[str]:
    """Send up to 10 bodies in one call (atomic for a watcher's long poll); return message ids."""
    ids: list[str] = []
    for start in range(0, len(bodies), 10):
        entries = [{"Id": str(i), "MessageBody": body, **attributes}
                   for i, body in enumerate(bodies[start:start + 10])]
        response = sqs.send_message_batch(QueueUrl=url, Entries=entries)
        assert not response.get("Failed"), response
        by_id = {item["Id"]: item["MessageId"] for item in response["Successful"]}
        ids.extend(by_id[str(i)] for i in range(len(entries)))
    return ids


def queue_of(app: HttpApp) -> list[str]:
    """The X-Aws-Sqsd-Queue of every request the app has received, in arrival order."""
    return [request.headers["x-aws-sqsd-queue"] for request in list(app.requests)]


def bodies_of(app: HttpApp) -> list[str]:
    return [request.body.decode("utf-8") for request in list(app.requests)]
