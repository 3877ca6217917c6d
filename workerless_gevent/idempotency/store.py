"""Idempotency items in DynamoDB: one per key (`slot`, as in the daemon's other tables: `aws.tables`), `in
progress` while a delivery holds it and `completed` once it succeeded, each with `expires_at` (epoch seconds:
the TTL attribute, and the claim's deadline or the end of the memory of a success). Every write is conditional
or batched: claims go in TransactWriteItems (`transactions.py` gathers the receives' into shared ones),
completions 25 to a BatchWriteItem. Those two are most of the table's traffic, and their requests are made from
JSON templates (`Template`): encoding a claim's constant parts again at every call was the larger part of what
a keyed message cost on the CPU."""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as quote
from typing import Any, NamedTuple

import botocore.exceptions

from ..aws.tables import KEY
from ..aws.tables import TTL_ATTRIBUTE as EXPIRES
from ..errors import error_code
from ..wire.dynamodb import METHODS
from ..wire.json_wire import ENCODE_JSON, Encoded, JsonWire

IN_PROGRESS = "in_progress"
COMPLETED = "completed"
PAYLOAD = "payload_sha256"  # validate_payload: a completed item's SHA-256 (hex) of the payload that succeeded
PROBE_SLOT = "probe/store-health"  # keys are "idempotency/<queue>/<key>" (keys.item_key): never this
CLAIM_ROUNDS = 3  # a cancelled transaction is sent again without the items that failed their condition or throttled
CONFLICT_WAIT_SECONDS = 2.0  # another transaction held the item as ours was made: look again this soon
# A cancelled transaction's reasons that mean the table's capacity ran out (the item itself was not in the way)
THROTTLED_REASONS = ("ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded")


class Claim(NamedTuple):  # a tuple: several are made for each keyed message
    slot: str
    token: str
    deadline: int  # epoch seconds
    payload_hash: str | None = None  # validate_payload: kept with the completed item, compared by later copies


class VerdictKind(enum.Enum):
    """What a claim found its key to be."""
    CLAIMED = "claimed"  # ours now
    COMPLETED = "completed"  # a success is remembered
    REUSED = "reused"  # completed with another payload (validate_payload)
    BUSY = "busy"  # held elsewhere
    THROTTLED = "throttled"  # the table's capacity ran out for this item: nothing written, claim it again later


@dataclass(frozen=True, slots=True)
class Verdict:
    """A claim's answer, and for a `BUSY` key how many `seconds` it stays held."""
    kind: VerdictKind
    seconds: float = 0.0
    payload_hash: str = ""  # `COMPLETED`: the hash the item keeps, if any
    found: bool = False  # `CLAIMED`: an earlier try of this claim, written with that try's deadline


CLAIMED = Verdict(VerdictKind.CLAIMED)
FOUND_OURS = Verdict(VerdictKind.CLAIMED, found=True)
THROTTLED = Verdict(VerdictKind.THROTTLED)


class Template:
    """A request's JSON made once from `build(*placeholders)`; `fill(*values)` puts each value in, as a JSON string,
    in its placeholder's place: the constant parts (table, condition, names) are not encoded again at each call."""

    def __init__(self, build: Callable[..., Any], fields: int) -> None:
        marks = [f"\0{index}\0" for index in range(fields)]
        text = ENCODE_JSON(build(*marks)).replace("%", "%%")
        for mark in marks:
            assert text.count(ENCODE_JSON(mark)) == 1, (mark, text)
            text = text.replace(ENCODE_JSON(mark), "%s")
        self.text = text

    def fill(self, *values: str) -> str:
        return self.text % tuple(map(quote, values))


class IdempotencyStore:
    def __init__(self, dynamodb: Any, table: str) -> None:
        self.dynamodb = dynamodb  # a wire.dynamodb.DynamoDbWire (or a botocore client: the same calls)
        self.table = table
        # each template's placeholders in the order they appear in its JSON
        self.claim_json = Template(lambda slot, token, deadline, now: self.claim_item(
            Claim(slot, token, deadline), now), 4)
        self.completed_json = Template(lambda slot, token, expires, payload: self.completed_item(
            Claim(slot, token, 0, payload), expires), 4)
        self.completed_without_payload_json = Template(lambda slot, token, expires: self.completed_item(
            Claim(slot, token, 0), expires), 3)

    def write(self, method: str, request: str) -> dict[str, Any]:
        """A claims' or completions' call from its JSON: sent as it is on our wire; decoded for botocore's client
        (behind a proxy, or at a FIPS endpoint), which takes keyword arguments."""
        if isinstance(self.dynamodb, JsonWire):
            return self.dynamodb.call(METHODS[method], Encoded(request))
        answer: dict[str, Any] = getattr(self.dynamodb, method)(**json.loads(request))
        return answer

    def claim_all(self, claims: list[Claim]) -> list[Verdict]:
        """Claim each key `in progress` until its deadline where no live item holds it; raises the wire's
        errors when DynamoDB fails as a whole. An item throttled inside a cancelled transaction is `THROTTLED`
        (the others are sent again without it). At most 100 claims (one transaction); their slots must differ."""
        verdicts: list[Verdict | None] = [None] * len(claims)
        pending = list(range(len(claims)))
        was_throttled = False
        for _ in range(CLAIM_ROUNDS):
            if not pending:
                break
            now = int(time.time())
            fill, at = self.claim_json.fill, str(now)
            items = ",".join([fill(claims[i].slot, claims[i].token, str(claims[i].deadline), at) for i in pending])
            try:
                self.write("transact_write_items", '{"TransactItems":[' + items + "]}")
            except botocore.exceptions.ClientError as error:
                if error_code(error) != "TransactionCanceledException":
                    raise
                reasons = error.response.get("CancellationReasons")
                was_throttled = is_throttled(reasons)
                pending = self.judge_cancelled([(index, claims[index].token) for index in pending], reasons,
                                               verdicts, now)
                continue
            for index in pending:
                verdicts[index] = CLAIMED
            pending = []
        # Still cancelled after the last round: behind another's throttled item, it is throttling too (the
        # claim waits in place); behind a conflict, another claim was in the way at that instant.
        left = THROTTLED if was_throttled else Verdict(VerdictKind.BUSY, CONFLICT_WAIT_SECONDS)
        return [against_payload(claim, verdict or left) for claim, verdict in zip(claims, verdicts)]

    @staticmethod
    def judge_cancelled(pending: list[tuple[int, str]], reasons: object, verdicts: list[Verdict | None],
                        now: int) -> list[int]:
        """The claims (index, token) to send again: those that failed nothing (cancelled with the rest) and those
        that met another transaction; a failed condition gives its verdict from the item that failed it, a
        throttled item is `THROTTLED` (the table's capacity, not another claim: a store failure, never "held
        elsewhere")."""
        if not isinstance(reasons, list) or len(reasons) != len(pending):
            raise botocore.exceptions.HTTPClientError(error=f"TransactWriteItems cancelled without a reason per "
                                                             f"item: {reasons!r:.200}")
        again = []
        for (index, token), reason in zip(pending, reasons):
            code = reason.get("Code") if isinstance(reason, dict) else None
            item = reason.get("Item") if isinstance(reason, dict) else None
            if code in THROTTLED_REASONS:
                verdicts[index] = THROTTLED
            elif code == "ConditionalCheckFailed" and isinstance(item, dict):
                verdicts[index] = verdict_of(item, now, token)
            else:
                again.append(index)
        return again

    def claim_item(self, claim: Claim, now: int | str) -> dict[str, Any]:
        """One claim of a transaction (`claim_json` is made from it)."""
        item = {KEY: {"S": claim.slot}, "state": {"S": IN_PROGRESS}, "owner": {"S": claim.token},
                EXPIRES: {"N": str(claim.deadline)}}
        return {"Put": {"TableName": self.table, "Item": item,
                        "ConditionExpression": "attribute_not_exists(#key) OR #expires < :now",
                        "ExpressionAttributeNames": {"#key": KEY, "#expires": EXPIRES},
                        "ExpressionAttributeValues": {":now": {"N": str(now)}},
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}

    def complete_all(self, claims: list[Claim], expires_at: int) -> set[str]:
        """Mark these keys `completed` until `expires_at`; the slots written (DynamoDB may leave some
        unprocessed under load: the caller sends those again). At most 25 claims."""
        unique = {claim.slot: claim for claim in claims}
        expires = str(expires_at)
        items = ",".join([self.completed_json.fill(claim.slot, claim.token, expires, claim.payload_hash)
                          if claim.payload_hash else self.completed_without_payload_json.fill(claim.slot, claim.token,
                                                                                              expires)
                          for claim in unique.values()])
        answer = self.write("batch_write_item", '{"RequestItems":{' + quote(self.table) + ":[" + items + "]}}")
        left = answer.get("UnprocessedItems", {}).get(self.table, [])
        unprocessed = {str(request.get("PutRequest", {}).get("Item", {}).get(KEY, {}).get("S")) for request in left}
        return set(unique) - unprocessed

    @staticmethod
    def completed_item(claim: Claim, expires_at: int | str) -> dict[str, Any]:
        """One completion of a BatchWriteItem (`completed_json` is made from it)."""
        return {"PutRequest": {"Item": {KEY: {"S": claim.slot}, "state": {"S": COMPLETED}, "owner": {"S": claim.token},
                                        EXPIRES: {"N": str(expires_at)},
                                        **({PAYLOAD: {"S": claim.payload_hash}} if claim.payload_hash else {})}}}

    def remove(self, claim: Claim) -> None:
        """Give a claim up (the delivery failed or never started), unless another holds the key by now."""
        try:
            self.dynamodb.delete_item(TableName=self.table, Key={KEY: {"S": claim.slot}},
                                      ConditionExpression="#owner = :token AND #state = :state",
                                      ExpressionAttributeNames={"#owner": "owner", "#state": "state"},
                                      ExpressionAttributeValues={":token": {"S": claim.token},
                                                                 ":state": {"S": IN_PROGRESS}})
        except botocore.exceptions.ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise

    def extend(self, claim: Claim) -> bool:
        """Move a claim's deadline (the heartbeat kept its message hidden longer); False if it is not ours."""
        try:
            self.dynamodb.update_item(TableName=self.table, Key={KEY: {"S": claim.slot}},
                                      UpdateExpression="SET #expires = :deadline",
                                      ConditionExpression="#owner = :token AND #state = :state",
                                      ExpressionAttributeNames={"#owner": "owner", "#state": "state",
                                                                "#expires": EXPIRES},
                                      ExpressionAttributeValues={":token": {"S": claim.token},
                                                                 ":state": {"S": IN_PROGRESS},
                                                                 ":deadline": {"N": str(claim.deadline)}})
        except botocore.exceptions.ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def probe(self) -> None:
        """Whether the table takes writes (a read or DescribeTable can answer while writes throttle): one
        unconditional write of an item no key maps to, kept an hour past the latest probe (TTL garbage)."""
        self.dynamodb.update_item(TableName=self.table, Key={KEY: {"S": PROBE_SLOT}},
                                  UpdateExpression="SET #expires = :at",
                                  ExpressionAttributeNames={"#expires": EXPIRES},
                                  ExpressionAttributeValues={":at": {"N": str(int(time.time()) + 3600)}})


def is_throttled(reasons: object) -> bool:
    """A cancelled transaction's reasons name throttling for at least one item."""
    return isinstance(reasons, list) and any(isinstance(reason, dict) and reason.get("Code") in THROTTLED_REASONS
                                             for reason in reasons)


def verdict_of(item: dict[str, Any], now: int, token: str = "") -> Verdict:
    """What a live item that failed our claim's condition says. An `in progress` item with our own token is our
    claim: an earlier try of it was written though its answer never came back (a timeout, a reset)."""
    state = item.get("state", {}).get("S")
    if token and state == IN_PROGRESS and item.get("owner", {}).get("S") == token:
        return FOUND_OURS
    if state == COMPLETED:
        return Verdict(VerdictKind.COMPLETED, payload_hash=str(item.get(PAYLOAD, {}).get("S", "")))
    try:
        expires = int(item.get(EXPIRES, {}).get("N", "0"))
    except ValueError:
        expires = 0
    return Verdict(VerdictKind.BUSY, max(1.0, expires - now))


def against_payload(claim: Claim, verdict: Verdict) -> Verdict:
    """A completed key whose item keeps another payload's hash than this copy's is `reused`; an item written
    without a hash (validate_payload off at the time) cannot tell, and stays `completed`."""
    if verdict.kind is VerdictKind.COMPLETED and claim.payload_hash and verdict.payload_hash \
            and verdict.payload_hash != claim.payload_hash:
        return Verdict(VerdictKind.REUSED)
    return verdict
