"""Command-line mistakes in words: what docopt refused, as one line the CLI prints before exiting 2."""

from __future__ import annotations

import re
from collections.abc import Sequence

COMMANDS = ("check", "send", "demo", "stats", "redrive")
COMMAND_OPTIONS = {"--online": "check", "--iam": "check", "--attr": "send", "--trace-header": "send",
                   "--s3-bucket": "send", "--json": "stats", "--watch": "stats", "--to": "redrive",
                   "--max": "redrive", "--rate": "redrive", "--dry-run": "redrive",
                   "--parallel": "redrive"}  # options only one command takes
REPEATABLE_OPTIONS = ("--attr",)


def describe_usage_error(arguments: Sequence[str], usage: str) -> str:
    """What docopt refused, in words: it only says "found unmatched (duplicate?) arguments [Option(...)]".
    `usage` is the CLI's docopt text, whose Options lines name every option."""
    options: dict[str, bool] = {}  # --long -> takes a value
    shorts: dict[str, str] = {}  # -c -> --config
    for short, long, value in re.findall(r"(?m)^  (?:(-\w)[ =]?\S*, )?(--[\w-]+)(=\S+)?", usage):
        options[long] = bool(value)
        if short:
            shorts[short] = long
    seen: list[str] = []
    words: list[str] = []
    tokens = list(arguments)
    while tokens:
        token = tokens.pop(0)
        if token.startswith("--") and token != "--":
            name, equals, _ = token.partition("=")
            matches = [name] if name in options else [option for option in options if option.startswith(name)]
            if not matches:
                return f"unknown option {name}"
            if len(matches) > 1:
                return f"ambiguous option {name}: {' or '.join(matches)}"
            long = matches[0]
            if options[long] and not equals and (not tokens or tokens.pop(0) == "--"):
                return f"option {long} needs a value"
            if equals and not options[long]:
                return f"option {long} takes no value"
            seen.append(long)
        elif token.startswith("-") and token not in ("-", "--"):
            for index, letter in enumerate(token[1:], start=1):
                long = shorts.get("-" + letter, "")
                if not long:
                    return f"unknown option -{letter}"
                seen.append(long)
                if options[long]:
                    if index == len(token) - 1 and (not tokens or tokens.pop(0) == "--"):
                        return f"option -{letter} needs a value"
                    break
        else:
            words.append(token)
    for option in seen:
        if seen.count(option) > 1 and option not in REPEATABLE_OPTIONS:
            return f"option {option} given more than once"
    if words and words[0] not in COMMANDS:
        return f"unknown command {words[0]}: the commands are {', '.join(COMMANDS[:-1])} and {COMMANDS[-1]}"
    command = words[0] if words else ""
    for option, owner in COMMAND_OPTIONS.items():
        if option in seen and command != owner:
            return f"option {option} is only for workerless {owner}"
    if command == "send" and len(words) < 2:
        return "send needs a QUEUE"
    if command == "redrive" and len(words) < 2:
        return "redrive needs a DLQ (the dead-letter queue to move messages from)"
    extra = words[3:] if command == "send" else words[2:] if command == "redrive" else words[1:]
    if extra:
        return f"unexpected argument {extra[0]}"
    return "cannot parse the command line"
