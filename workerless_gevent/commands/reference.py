"""The generated reference pages: the command line from `cli.py`'s usage text (what docopt parses) with one
description per command, and the configuration (`config/reference.py`). The docs site builds both at each
build; `python -m workerless_gevent.commands.reference cli|configuration|metrics` prints one; the metrics
page lists the registry's counters."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from ..config import keys
from ..config.descriptions import KEYS
from ..config.reference import render_configuration
from ..metrics import COUNTERS, OVERALL_COUNTERS
from ..observability.prometheus import COUNTER_HELP, snake_case
from . import cli

# The commands of the usage text ("run" is `workerless [options]`), each in a sentence or two.
COMMANDS: dict[str, str] = {
    "run": "Run the daemon: receive from the queues in the configured order, deliver each message to its target, "
           "delete what succeeded and retry what failed, until SIGTERM or SIGINT (exit 0). SIGHUP reloads the "
           "configuration file.",
    "check": "Validate the configuration and print the effective configuration as JSON (exit 0, or 2 with one "
             "line). `--online` also resolves every queue on AWS; `--iam` prints the least-privilege IAM policy "
             "instead.",
    "send": "Send one message to QUEUE (a name or URL), with BODY or standard input as its body, and print its "
            "message id.",
    "demo": "Run the daemon on an embedded local AWS emulator, with sample messages, a small app that prints "
            "what it gets, and the status page: no account or credentials needed.",
    "stats": "Print each configured queue's visible, in-flight and delayed messages and its dead-letter queue's "
             "depth (`-c FILE`, or `--queues=a,b`: no target needed).",
    "redrive": "Move a dead-letter queue's messages back to the queue each came from (`workerless.source_queue`), "
               "or all to `--to=QUEUE`; a message is deleted from DLQ only once its copy was sent.",
}


@dataclass(frozen=True, slots=True)
class Option:
    names: tuple[str, ...]  # ("-c", "--config")
    value: str  # "FILE", or "" for a switch
    description: str

    @property
    def long(self) -> str:
        return self.names[-1]


def usage_lines() -> list[str]:
    section = (cli.__doc__ or "").split("Usage:", 1)[1].split("\n\n", 1)[0]
    return [line.strip() for line in section.strip().splitlines()]


def command_of(usage: str) -> str | None:
    """The command a usage line runs: its first word after `workerless` unless it is an option."""
    words = usage.split()[1:]
    if not words or words[0] == "[options]":
        return "run"
    return None if words[0].startswith("-") else words[0]


def parse_options() -> list[Option]:
    section = (cli.__doc__ or "").split("Options:", 1)[1].split("\n\n", 1)[0]
    options: list[Option] = []
    for line in section.splitlines():
        match = re.match(r"  (-\S.*?)  +(\S.*)", line)
        if match:
            names = tuple(re.split(r"[ =]", name)[0] for name in match.group(1).split(", "))
            value = match.group(1).split("=", 1)[1] if "=" in match.group(1) else ""
            options.append(Option(names, value, match.group(2)))
        elif line.strip() and options:
            last = options[-1]
            options[-1] = Option(last.names, last.value, f"{last.description} {line.strip()}")
    return options


def closing_text() -> str:
    return " ".join((cli.__doc__ or "").split("Options:", 1)[1].split("\n\n", 1)[1].split())


def render_cli() -> str:
    return "\n".join(cli_lines()) + "\n"


def cli_lines() -> Iterator[str]:
    options = parse_options()
    yield "# Command-line reference"
    yield ""
    summary = (cli.__doc__ or "").splitlines()[0].split(": ", 1)[1]
    yield f"Generated from `workerless --help`. workerless: {summary}"
    yield ""
    yield "```text"
    yield from (line for line in usage_lines())
    yield "```"
    for usage in usage_lines():
        command = command_of(usage)
        if command is None:
            continue
        yield ""
        yield "## `workerless`: run" if command == "run" else f"## `workerless {command}`"
        yield ""
        yield f"`{usage}`"
        yield ""
        yield COMMANDS[command]
        own = [option for option in options if option.description.startswith(command + ":")]
        if own:
            yield ""
            yield "Its own options: " + ", ".join(f"`{option_text(option)}`" for option in own) + "."
    yield ""
    yield "## Options"
    yield ""
    yield "| option | description | environment variable | configuration key |"
    yield "|---|---|---|---|"
    for option in options:
        yield (f"| `{option_text(option)}` | {option.description.replace('|', '&#124;')} | "
               f"{variable_of(option)} | {config_key_of(option)} |")
    yield ""
    yield "## Settings, region and exit codes"
    yield ""
    yield closing_text()


def option_text(option: Option) -> str:
    return ", ".join(f"{name}={option.value}" if option.value and name.startswith("--") else
                     f"{name} {option.value}" if option.value else name for name in option.names)


def option_name(option: Option) -> str:
    return option.long[2:].replace("-", "_")


def keys_set_by(option: Option) -> list[str]:
    return [key.key for key in KEYS if key.option == option_name(option)]


def variable_of(option: Option) -> str:
    if option.long == "--config":
        return "`WORKERLESS_CONFIG`"
    return f"`{keys.variable_of(option_name(option))}`" if keys_set_by(option) else ""


def config_key_of(option: Option) -> str:
    return ", ".join(f"[`{key}`](configuration.md#{slug(key)})" for key in keys_set_by(option))


def slug(key: str) -> str:
    """The anchor Python-Markdown's toc gives the heading of `key` (its default slugify)."""
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", key).strip().lower())


def long_flags() -> set[str]:
    return {name for option in parse_options() for name in option.names if name.startswith("--")}


def render_metrics() -> str:
    """The counters, from the registry's list and the help text `/metrics` serves with each."""
    lines = ["# Metrics reference", "", "Generated from the metrics registry. Each counter goes to CloudWatch "
             "(namespace `Workerless-<name>`, per queue with the dimension `Queue`, and overall) and to `/metrics` "
             "as a Prometheus counter (per queue with the label `queue`). Gauges, histograms and the scaling "
             "signals are in [Metrics and alarms](../operations/metrics-and-alarms.md).", "",
             "| CloudWatch | Prometheus | per queue | what it counts |", "|---|---|---|---|"]
    for name in COUNTERS + OVERALL_COUNTERS:
        per_queue = "yes" if name in COUNTERS else "no"
        lines.append(f"| `{name}` | `workerless_{snake_case(name)}_total` | {per_queue} | {COUNTER_HELP[name]} |")
    return "\n".join(lines) + "\n"


PAGES = {"cli": render_cli, "configuration": lambda: render_configuration(long_flags()), "metrics": render_metrics}


def render(page: str) -> str:
    if page not in PAGES:
        raise SystemExit(f"usage: python -m {__name__} {'|'.join(PAGES)}")
    return PAGES[page]()


if __name__ == "__main__":
    sys.stdout.write(render(sys.argv[1] if len(sys.argv) > 1 else ""))
