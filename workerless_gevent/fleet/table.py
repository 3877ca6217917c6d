"""A fleet limit's DynamoDB item: one item per limit (key `slot`, `aws.tables`), its members in a
map. Every write is conditional, and every answer (a conflict's too, through
ReturnValuesOnConditionCheckFailure) returns the whole item, so a write is also the read.

- A renewal rewrites the member's own entry, never raising its share: conditioned on its own counter.
- A raise (a bigger share, or a join) is conditioned on the item's `version` and bumps it, so two raises
  computed from the same item cannot both land: the sum of the shares never exceeds the limit.
- Freeing a dead member's share (any write may) is conditioned on that member's counter being the one
  that stood for a lease: a member that renewed meanwhile keeps its share.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import botocore.exceptions

from ..aws.tables import KEY
from ..errors import error_code
from .shares import EMPTY, Member, View

logger = logging.getLogger(__name__)

ME = "#members.#me"  # this member's entry in the item's map


@dataclass(frozen=True, slots=True)
class Written:
    """A write's answer: whether it landed, and the item as it is after it (or as it was, on a conflict)."""
    landed: bool
    view: View


def parse_view(item: Mapping[str, Any] | None) -> View:
    if not item:
        return EMPTY
    members = {member_id: Member(share=float(entry["M"]["share"]["N"]), want=float(entry["M"]["want"]["N"]),
                                 counter=int(entry["M"]["counter"]["N"]),
                                 in_flight=float(entry["M"].get("in_flight", {"N": "0"})["N"]),
                                 host=str(entry["M"].get("host", {"S": ""})["S"]))
               for member_id, entry in item.get("members", {"M": {}})["M"].items()}
    return View(int(item.get("version", {"N": "0"})["N"]), members)


def entry_value(member: Member) -> dict[str, Any]:
    return {"M": {"share": {"N": number(member.share)}, "want": {"N": number(member.want)},
                  "counter": {"N": str(member.counter)}, "in_flight": {"N": number(member.in_flight)},
                  "host": {"S": member.host}}}


def number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.4f}"


class LimitItem:
    """The item of one limit, written by one member."""

    def __init__(self, dynamodb: Any, table_name: str, slot: str, member_id: str) -> None:
        self.dynamodb = dynamodb
        self.table_name = table_name
        self.slot = slot
        self.member_id = member_id

    def read(self) -> View:
        answer = self.dynamodb.get_item(TableName=self.table_name, Key={KEY: {"S": self.slot}}, ConsistentRead=True)
        return parse_view(answer.get("Item"))

    def create(self, description: str) -> None:
        """The empty item; another member creating it first is fine."""
        try:
            self.dynamodb.put_item(TableName=self.table_name, ConditionExpression="attribute_not_exists(#key)",
                                   ExpressionAttributeNames={"#key": KEY},
                                   Item={KEY: {"S": self.slot}, "version": {"N": "0"}, "members": {"M": {}},
                                         "limit": {"S": description}})
        except botocore.exceptions.ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise

    def renew(self, mine: Member, counter: int, dead: Mapping[str, int]) -> Written:
        """Rewrite this member's entry (its share no higher than before), freeing the dead as it goes."""
        return self._update([f"{ME} = :me"], [f"{ME}.#counter = :counter"],
                            {":me": entry_value(mine), ":counter": {"N": str(counter)}}, dead)

    def raise_share(self, mine: Member, counter: int | None, version: int, dead: Mapping[str, int]) -> Written:
        """Write this member's entry with a bigger share (or join), if nobody raised one since `version`."""
        own = f"attribute_not_exists({ME})" if counter is None else f"{ME}.#counter = :counter"
        values: dict[str, Any] = {":me": entry_value(mine), ":version": {"N": str(version)},
                                  ":next": {"N": str(version + 1)}}
        if counter is not None:
            values[":counter"] = {"N": str(counter)}
        return self._update([f"{ME} = :me", "#version = :next"], [own, "#version = :version"], values, dead)

    def leave(self, counter: int) -> Written:
        """Remove this member's entry: its share is free at once."""
        return self._update([], [f"{ME}.#counter = :counter"], {":counter": {"N": str(counter)}}, {}, remove_me=True)

    def _update(self, sets: list[str], conditions: list[str], values: dict[str, Any], dead: Mapping[str, int],
                remove_me: bool = False) -> Written:
        names = {"#members": "members", "#me": self.member_id, "#counter": "counter", "#version": "version"}
        removes = [ME] if remove_me else []
        for index, (member_id, counter) in enumerate(sorted(dead.items())):
            names[f"#dead{index}"] = member_id
            values[f":dead{index}"] = {"N": str(counter)}
            removes.append(f"#members.#dead{index}")
            conditions.append(f"#members.#dead{index}.#counter = :dead{index}")
        expression = " ".join(part for part in (
            "SET " + ", ".join(sets) if sets else "",
            "REMOVE " + ", ".join(removes) if removes else "") if part)
        condition = " AND ".join(conditions)
        used = {name: value for name, value in names.items()  # DynamoDB refuses names the expressions do not use
                if any(re.search(re.escape(name) + r"\b", text) for text in (expression, condition))}
        try:
            answer = self.dynamodb.update_item(
                TableName=self.table_name, Key={KEY: {"S": self.slot}}, UpdateExpression=expression,
                ConditionExpression=condition, ExpressionAttributeNames=used, ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW", ReturnValuesOnConditionCheckFailure="ALL_OLD")
        except botocore.exceptions.ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise
            return Written(False, parse_view(error.response.get("Item")))
        return Written(True, parse_view(answer.get("Attributes")))
