"""Shared test harness: real servers on 127.0.0.1 and the real daemon, never mocks."""

from .fake_lambda import (
    FakeLambda,
    Invocation,
    LambdaReply,
    lambda_function_error,
    lambda_result,
    lambda_service_error,
    lambda_throttle,
)
from .http_app import Headers, HttpApp, RecordedRequest
from .moto import MotoInvocation, MotoServer
from .process import REPO_ROOT, Daemon, write_config
from .proxy import CountingProxy, ProxiedRequest
from .sqs import Queue, count_messages, create_queue, drain_bodies
from .wait import wait_until

__all__ = [
    "REPO_ROOT",
    "CountingProxy",
    "Daemon",
    "FakeLambda",
    "Headers",
    "HttpApp",
    "Invocation",
    "LambdaReply",
    "MotoInvocation",
    "MotoServer",
    "ProxiedRequest",
    "Queue",
    "RecordedRequest",
    "count_messages",
    "create_queue",
    "drain_bodies",
    "lambda_function_error",
    "lambda_result",
    "lambda_service_error",
    "lambda_throttle",
    "wait_until",
    "write_config",
]
