"""Exit codes and the errors that map onto them."""

from __future__ import annotations

import enum
import json

import botocore.exceptions

AWS_ERRORS = (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError)


class ExitStatus(enum.IntEnum):
    """Process exit codes; part of the CLI contract."""

    OK = 0
    ERROR = 1
    BAD_CONFIG = 2


class ConfigError(Exception):
    """A configuration problem, reported as one line naming its source and key."""

    def __init__(self, source: str, key: str, problem: str, value: object = None) -> None:
        self.source = source
        self.key = key
        self.problem = problem
        self.value = value
        super().__init__(self.line())

    def line(self) -> str:
        where = f"{self.source}: {self.key}: " if self.key else f"{self.source}: "
        shown = "" if self.value is None else f" (got {format_value(self.value)})"
        return f"{where}{self.problem}{shown}"


class StartupError(Exception):
    """The daemon could not start (credentials, unknown queue, unreachable endpoint)."""


def format_value(value: object) -> str:
    """Echo a bad value the way TOML would spell it, so users can find it."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return str(value)


def error_code(error: BaseException) -> str:
    """The AWS error code of a botocore error, or the exception's class name."""
    if isinstance(error, botocore.exceptions.ClientError):
        return str(error.response.get("Error", {}).get("Code", "ClientError"))
    return type(error).__name__


def describe_error(error: BaseException) -> str:
    """One line for logs: the code and the message, never a traceback."""
    if isinstance(error, botocore.exceptions.ClientError):
        detail = error.response.get("Error", {})
        code, message = str(detail.get("Code") or "ClientError"), str(detail.get("Message") or "")
        if code.isdigit():  # an answer with no error in it (a bare 500 from a proxy): botocore codes it by status
            return f"HTTP {code} with no AWS error in the answer" + (f": {message}" if message else "")
        return f"{code}: {message}".strip()
    return f"{type(error).__name__}: {error}"
