"""Queues as the operator's commands name them: a name or a URL, read with GetQueueUrl and GetQueueAttributes."""

from __future__ import annotations

import json
from typing import Any

QUEUE_URL_MARK = "://"


def queue_url(sqs: Any, queue: str) -> str:
    """A URL as given, else the URL of the queue of that name in the client's region and account."""
    return queue if QUEUE_URL_MARK in queue else str(sqs.get_queue_url(QueueName=queue)["QueueUrl"])


def queue_name(queue: str) -> str:
    """The name of a queue given by name, URL or ARN (its last path or colon-separated part)."""
    return queue.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]


def read_attributes(sqs: Any, url: str, names: list[str]) -> dict[str, str]:
    return dict(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"])


def redrive_target(attributes: dict[str, str]) -> tuple[str, str] | None:
    """(name, account) of the dead-letter queue in an SQS RedrivePolicy attribute, or None without one."""
    policy = attributes.get("RedrivePolicy")
    if not policy:
        return None
    arn = str(json.loads(policy).get("deadLetterTargetArn") or "")
    parts = arn.split(":")
    return (parts[5], parts[4]) if len(parts) == 6 else None


def url_of_arn_queue(sqs: Any, name: str, account: str) -> str:
    """The URL of a queue named by an ARN, which may be another account's."""
    options = {"QueueOwnerAWSAccountId": account} if account else {}
    return str(sqs.get_queue_url(QueueName=name, **options)["QueueUrl"])


def dead_letter_sources(sqs: Any, url: str) -> list[str]:
    """The names of the queues whose SQS redrive policy names this one (ListDeadLetterSourceQueues)."""
    names: list[str] = []
    for page in sqs.get_paginator("list_dead_letter_source_queues").paginate(QueueUrl=url):
        names.extend(queue_name(source) for source in page.get("queueUrls", []))
    return names
