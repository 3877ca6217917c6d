"""The status page's section on fleet-wide limits: each limit's live members and shares, this member's share,
its deliveries in flight and waits, and why it is paused when its lease lapsed."""

from __future__ import annotations

from html import escape
from typing import Any


def render_fleet(limits: list[dict[str, Any]]) -> str:
    if not limits:
        return ""
    rows = "".join(
        f"<tr><td>{escape(limit['limit'])}</td><td>{escape(limit_value(limit))}</td>"
        f"<td class=\"{escape(limit['state'])}\">{escape(limit['state'])}</td><td>{limit['share']:g}</td>"
        f"<td>{limit['in_flight']}</td><td>{limit['waits']}</td><td>{limit['live_members']}</td>"
        f"<td class=\"wrap\">{escape(members_text(limit['members']))}</td>"
        f"<td class=\"wrap\">{escape(limit['reason'])}</td></tr>"
        for limit in limits)
    head = "".join(f"<th>{name}</th>" for name in ("limit", "fleet-wide", "state", "this member's share", "in flight",
                                                  "waits", "live members", "shares (want)", "reason"))
    return (f'<section id="fleet"><h2>Fleet-wide limits</h2><table><thead><tr>{head}</tr></thead>'
            f"<tbody>{rows}</tbody></table></section>")


def limit_value(limit: dict[str, Any]) -> str:
    return f"{limit['value']:g}/s" if limit["kind"] == "rate" else f"{limit['value']:g} in flight"


def members_text(members: list[dict[str, Any]]) -> str:
    return ", ".join(f"{member['host']}{' (this)' if member['this'] else ''}: {member['share']:g} ({member['want']:g})"
                     for member in members) or "none"
