"""Shared test harness: real servers on 127.0.0.1 and the real daemon, never mocks."""

from .config_file import build_config_file, write_config
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
from .process import REPO_ROOT, Daemon, status_url
from .proxy import CountingProxy, ProxiedRequest
from .sqs import (
    Queue,
    count_messages,
    count_visible,
    create_queue,
    drain_bodies,
    receive_all,
)
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
    "build_config_file",
    "count_messages",
    "count_visible",
    "create_queue",
    "drain_bodies",
    "lambda_function_error",
    "lambda_result",
    "lambda_service_error",
    "lambda_throttle",
    "receive_all",
    "status_url",
    "wait_until",
    "write_config",
]
