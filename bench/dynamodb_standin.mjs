// A fast DynamoDB for the idempotency row: exactly the calls of the daemon's idempotent delivery, in memory, on
// 127.0.0.1 (moto serves a few hundred calls a second and deep-copies the table on each TransactWriteItems).
// Usage: node bench/dynamodb_standin.mjs -> prints {"port": N}
// AWS JSON 1.0, the signature not checked; errors 400 {"__type": "com.amazonaws.dynamodb.v20120810#Code", message}.
// TransactWriteItems takes Put items, all or nothing (TransactionCanceledException with one CancellationReason per
// item, the old Item under ALL_OLD); BatchWriteItem never leaves UnprocessedItems; DeleteItem and UpdateItem (SET
// a = b, ...) honour their ConditionExpression (dynamodb_conditions.mjs). Tables are keyed by a string hash key.
// Every answer is held D ms, half before it is applied and half after, as fauxqs_server.mjs does for SQS.
// Control: POST /_bench/delay?ms=D, GET /_bench/stats[?table=T] ({delay_ms, mean_added_ms, requests: {table:
// {action: n}}, items: the items they carried}), POST /_bench/create?table=T (keyed by `slot`), /_bench/forget?table=T
import http from "node:http";
import { performance } from "node:perf_hooks";
import { Failure, holds } from "./dynamodb_conditions.mjs";
import { sendJson, serve } from "./serve.mjs";

let [delayMs, delayed, addedSum] = [0, 0, 0];
const tables = new Map(); // name -> {key, ttl, items: Map(key value -> item), created}
const requests = new Map(); // table -> {action: n}
const carried = new Map(); // table -> {action: items}
let requestIds = 0;

function count(table, action, items) {
  for (const [map, n] of [[requests, 1], [carried, items]]) {
    let mine = map.get(table);
    if (mine === undefined) map.set(table, (mine = {}));
    mine[action] = (mine[action] ?? 0) + n;
  }
}

function tableOf(name) {
  const table = tables.get(name);
  if (table === undefined) throw new Failure("ResourceNotFoundException", `Requested resource not found: Table: ${name} not found`);
  return table;
}

function describe(name, table) {
  return {
    TableName: name, TableStatus: "ACTIVE", ItemCount: table.items.size, CreationDateTime: table.created,
    TableArn: `arn:aws:dynamodb:us-east-1:000000000000:table/${name}`,
    KeySchema: [{ AttributeName: table.key, KeyType: "HASH" }],
    AttributeDefinitions: [{ AttributeName: table.key, AttributeType: "S" }],
    BillingModeSummary: { BillingMode: "PAY_PER_REQUEST" },
  };
}

function keyValue(table, item) {
  const value = item?.[table.key]?.S;
  if (typeof value !== "string") throw new Failure("ValidationException", `missing the key ${table.key} (S)`);
  return value;
}

function checked(body) { // the table, the key and the item of a conditional write whose condition holds
  const table = tableOf(body.TableName);
  const key = keyValue(table, body.Key);
  const old = table.items.get(key);
  if (!holds(body, old)) throw new Failure("ConditionalCheckFailedException", "The conditional request failed");
  return [table, key, old];
}

const ACTIONS = {
  DescribeTable: (body) => ({ Table: describe(body.TableName, tableOf(body.TableName)) }),
  CreateTable: (body) => {
    if (tables.has(body.TableName)) throw new Failure("ResourceInUseException", `Table already exists: ${body.TableName}`);
    const key = body.KeySchema.find((part) => part.KeyType === "HASH").AttributeName;
    const table = { key, ttl: null, items: new Map(), created: Date.now() / 1000 };
    tables.set(body.TableName, table);
    return { TableDescription: describe(body.TableName, table) };
  },
  DescribeTimeToLive: (body) => {
    const ttl = tableOf(body.TableName).ttl;
    return { TimeToLiveDescription: ttl ? { TimeToLiveStatus: "ENABLED", AttributeName: ttl } : { TimeToLiveStatus: "DISABLED" } };
  },
  UpdateTimeToLive: (body) => {
    const spec = body.TimeToLiveSpecification;
    tableOf(body.TableName).ttl = spec.Enabled ? spec.AttributeName : null;
    return { TimeToLiveSpecification: spec };
  },
  TransactWriteItems: (body) => {
    const puts = body.TransactItems.map((entry) => {
      if (!entry.Put) throw new Failure("ValidationException", "this stand-in takes Put items only");
      const table = tableOf(entry.Put.TableName);
      return { put: entry.Put, table, key: keyValue(table, entry.Put.Item) };
    });
    if (new Set(puts.map(({ put, key }) => `${put.TableName}\u0000${key}`)).size !== puts.length) {
      throw new Failure("ValidationException", "Transaction request cannot include multiple operations on one item");
    }
    const reasons = puts.map(({ put, table, key }) => {
      const old = table.items.get(key);
      if (holds(put, old)) return { Code: "None" };
      const reason = { Code: "ConditionalCheckFailed", Message: "The conditional request failed" };
      if (put.ReturnValuesOnConditionCheckFailure === "ALL_OLD" && old) reason.Item = old;
      return reason;
    });
    if (reasons.some((reason) => reason.Code !== "None")) {
      const codes = reasons.map((reason) => reason.Code).join(", ");
      throw new Failure("TransactionCanceledException",
        `Transaction cancelled, please refer cancellation reasons for specific reasons [${codes}]`,
        { CancellationReasons: reasons });
    }
    for (const { put, table, key } of puts) table.items.set(key, put.Item);
    return {};
  },
  BatchWriteItem: (body) => {
    for (const [name, writes] of Object.entries(body.RequestItems)) {
      const table = tableOf(name);
      for (const write of writes) {
        if (write.PutRequest) table.items.set(keyValue(table, write.PutRequest.Item), write.PutRequest.Item);
        else table.items.delete(keyValue(table, write.DeleteRequest.Key));
      }
    }
    return { UnprocessedItems: {} };
  },
  DeleteItem: (body) => {
    const [table, key] = checked(body);
    table.items.delete(key);
    return {};
  },
  UpdateItem: (body) => {
    const [table, key, old] = checked(body);
    const match = /^\s*SET\s+(.+)$/i.exec(body.UpdateExpression ?? "");
    if (!match) throw new Failure("ValidationException", "this stand-in takes UpdateExpression SET a = b, ... only");
    const item = { ...(old ?? body.Key) };
    for (const assignment of match[1].split(",")) {
      const [name, value] = assignment.split("=").map((part) => part.trim());
      item[name.startsWith("#") ? body.ExpressionAttributeNames[name] : name] = body.ExpressionAttributeValues[value];
    }
    table.items.set(key, item);
    return {};
  },
};

function tablesNamed(action, body) {
  if (action === "TransactWriteItems") return body.TransactItems.map((entry) => Object.values(entry)[0]?.TableName);
  if (action === "BatchWriteItem") return Object.entries(body.RequestItems).flatMap(([name, writes]) => writes.map(() => name));
  return [body.TableName];
}

function apply(action, body) {
  const named = tablesNamed(action, body);
  count(named[0] ?? "", action, named.length);
  const handler = ACTIONS[action];
  if (handler === undefined) throw new Failure("UnknownOperationException", `${action} is not served by this stand-in`);
  return handler(body);
}

const send = (res, status, value) => sendJson(res, status, value, { "Content-Type": "application/x-amz-json-1.0",
  "x-amzn-RequestId": `standin-${++requestIds}` });

function answer(action, data) {
  try {
    return [200, apply(action, JSON.parse(data || "{}"))];
  } catch (error) {
    if (!(error instanceof Failure)) return [400, { __type: "com.amazon.coral.validate#ValidationException", message: String(error) }];
    return [400, { __type: `com.amazonaws.dynamodb.v20120810#${error.code}`, message: error.message, ...error.extra }];
  }
}

function stats(table) {
  const pick = (map) => Object.fromEntries(table === null ? map : [[table, map.get(table) ?? {}]]);
  return { delay_ms: delayMs, delayed, mean_added_ms: delayed ? addedSum / delayed : null, requests: pick(requests),
    items: pick(carried) };
}

function control(res, url) {
  const table = url.searchParams.get("table");
  if (url.pathname === "/_bench/delay") {
    [delayMs, delayed, addedSum] = [parseFloat(url.searchParams.get("ms") ?? "0") || 0, 0, 0];
    return send(res, 200, stats(table));
  }
  if (url.pathname === "/_bench/stats") return send(res, 200, stats(table));
  if (url.pathname === "/_bench/create") {
    tables.set(table, { key: "slot", ttl: null, items: new Map(), created: Date.now() / 1000 });
    return send(res, 200, { ok: true });
  }
  if (url.pathname === "/_bench/forget") {
    for (const map of [tables, requests, carried]) map.delete(table ?? "");
    return send(res, 200, { ok: true });
  }
  send(res, 404, { error: "unknown control path" });
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    if (req.url.startsWith("/_bench/")) return control(res, new URL(req.url, "http://standin"));
    const action = String(req.headers["x-amz-target"] ?? "").split(".").pop();
    const data = Buffer.concat(chunks).toString();
    if (!(delayMs > 0)) return send(res, ...answer(action, data));
    const half = delayMs / 2;
    const began = performance.now();
    setTimeout(() => {
      const [status, value] = answer(action, data);
      setTimeout(() => {
        delayed += 1;
        addedSum += performance.now() - began;
        send(res, status, value);
      }, half);
    }, half);
  });
});
serve(server, 0);
