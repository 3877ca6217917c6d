// fauxqs (in-memory SQS emulator) on 127.0.0.1 only (its CLI binds 0.0.0.0), with the bench's knobs.
// Usage: node bench/fauxqs_server.mjs [PORT] -> prints {"port": N, "direct_port": M} once listening.
//
//   port         the measured workers'. Every request is held D ms (env FAUXQS_DELAY_MS, /_bench/delay): D/2
//                before fauxqs acts on it and D/2 before the answer goes, each on its own timer, as a network
//                would split it. Requests are counted by queue and action.
//   direct_port  the runner's own setup: never delayed, never counted.
// Fair queues: fauxqs 1.9.2 drops a standard queue's MessageGroupId at send. This server keeps it on the stored
// message, so ReceiveMessage returns it as the MessageGroupId system attribute (and a dead letter keeps it).
// POST /_bench/fair?queue=Q makes Q hand out first the messages whose group has the fewest in flight, as SQS's
// fair queues favour quiet tenants (an emulation: SQS documents the aim, not the algorithm).
// Faults (the soak rows' sqs_faults): POST /_bench/faults?share=S&seed=N&actions=A,B gives a seeded share of the
// workers' calls of those actions one fault each: throttle (400 RequestThrottled), error (500), unavailable (503),
// reset (the connection reset, unforwarded), reset_after (forwarded, then reset: a delete that happened although
// the caller saw it fail), stall (held 0.5-2 s, then forwarded), stall_reset (held, then reset).
// Control: POST /_bench/delay?ms=D, GET /_bench/stats[?queue=Q], POST /_bench/forget?queue=Q, POST /_bench/fair?queue=Q
import http from "node:http";
import { performance } from "node:perf_hooks";
import { buildApp } from "fauxqs";
import { SqsStore } from "./node_modules/fauxqs/dist/sqs/sqsStore.js";

const port = parseInt(process.argv[2] ?? "0", 10);
let delayMs = parseFloat(process.env.FAUXQS_DELAY_MS ?? "0") || 0;
let counts = new Map(); // queue -> {action: requests}
let delayed = 0;
let addedSum = 0;
const store = new SqsStore();
const app = buildApp({ logger: false, defaultRegion: "us-east-1", stores: { sqsStore: store } });
const KINDS = ["throttle", "error", "unavailable", "reset", "reset_after", "stall", "stall_reset"];
const ERRORS = { throttle: [400, "RequestThrottled", "Sender"], error: [500, "InternalError", "Receiver"],
  unavailable: [503, "ServiceUnavailable", "Receiver"] };
let faults = null; // {share, actions, rngs: {action: rng}, counts: {action: {kind: n}}}
const nameOf = (body) => String(body?.QueueUrl ?? body?.QueueName ?? "").split("/").pop();

function count(queue, action) {
  let mine = counts.get(queue);
  if (mine === undefined) counts.set(queue, (mine = {}));
  mine[action] = (mine[action] ?? 0) + 1;
}

function noteGroups(request, action, body, queue) {
  if (queue.endsWith(".fifo") || !action.startsWith("SendMessage")) return;
  const groups = action === "SendMessage" ? { "": body.MessageGroupId }
    : Object.fromEntries((body.Entries ?? []).map((entry) => [entry.Id, entry.MessageGroupId]));
  if (Object.values(groups).some(Boolean)) request.benchGroups = { queue, groups };
}

function keepGroups(request, payload) {
  const { queue, groups } = request.benchGroups;
  const stored = store.queuesByName.get(queue);
  const answer = JSON.parse(payload);
  const sent = answer.Successful ?? [{ Id: "", MessageId: answer.MessageId }];
  const recent = [...(stored?.messages ?? []).slice(-2 * sent.length), ...(stored?.delayedMessages ?? [])];
  for (const { Id, MessageId } of sent) {
    const message = recent.find((m) => m.messageId === MessageId);
    if (message && groups[Id]) message.messageGroupId = groups[Id];
  }
}

function seeded(text) { // an LCG seeded by the text: the n-th call of an action always gets the same fault
  let a = [...text].reduce((h, c) => Math.imul(h ^ c.charCodeAt(0), 2654435761) >>> 0, 1779033703);
  return () => (a = (Math.imul(a, 1664525) + 1013904223) >>> 0) / 4294967296;
}

function fault(request, reply, action, done) {
  const rng = (faults.rngs[action] ??= seeded(`${faults.seed}:${action}`));
  if (!faults.actions.includes(action) || rng() >= faults.share) return done();
  const kind = KINDS[Math.floor(rng() * KINDS.length)];
  const mine = (faults.counts[action] ??= {});
  mine[kind] = (mine[kind] ?? 0) + 1;
  const reset = () => request.raw.socket.resetAndDestroy();
  if (ERRORS[kind]) {
    const [status, code, side] = ERRORS[kind];
    return reply.code(status).header("x-amzn-query-error", `${code};${side}`).type("application/x-amz-json-1.0")
      .send(JSON.stringify({ __type: `com.amazonaws.sqs#${code}`, message: code }));
  }
  if (kind === "reset") return reset();
  if (kind === "reset_after") request.benchReset = true;
  if (!kind.startsWith("stall")) return done();
  setTimeout(() => (kind === "stall" ? done() : reset()), 500 + rng() * 1500);
}

function makeFair(queue) {
  if (queue.benchFair) return;
  queue.benchFair = true;
  const dequeue = queue.dequeue.bind(queue);
  queue.dequeue = (...args) => {
    const held = new Map();
    for (const { message } of queue.inflightMessages.values()) {
      held.set(message.messageGroupId, (held.get(message.messageGroupId) ?? 0) + 1);
    }
    queue.messages.sort((a, b) => (held.get(a.messageGroupId) ?? 0) - (held.get(b.messageGroupId) ?? 0));
    return dequeue(...args);
  };
}

app.addHook("preHandler", (request, reply, done) => {
  const body = request.body && typeof request.body === "object" ? request.body : {};
  const action = (request.headers["x-amz-target"] ?? "").split(".").pop() || "other";
  const queue = nameOf(body);
  noteGroups(request, action, body, queue);
  if (request.raw.direct) return done();
  count(queue, action);
  if (faults) return fault(request, reply, action, done);
  if (!(delayMs > 0)) return done();
  const began = performance.now();
  request.benchDelay = delayMs / 2;
  setTimeout(() => {
    request.benchAdded = performance.now() - began;
    done();
  }, delayMs / 2);
});

app.addHook("onSend", (request, reply, payload, done) => {
  if (request.benchGroups && reply.statusCode === 200) keepGroups(request, payload);
  if (request.benchReset) return request.raw.socket.resetAndDestroy();
  const half = request.benchDelay;
  if (half === undefined) return done(null, payload);
  const began = performance.now();
  setTimeout(() => {
    delayed += 1;
    addedSum += (request.benchAdded ?? 0) + performance.now() - began;
    done(null, payload);
  }, half);
});

function stats(queue) {
  return { delay_ms: delayMs, delayed, mean_added_ms: delayed ? addedSum / delayed : null, counts: Object.fromEntries(
    queue === null ? counts : [[queue, counts.get(queue) ?? {}]]), faults: faults && faults.counts };
}

function control(req, res) {
  const url = new URL(req.url, "http://fauxqs");
  const queue = url.searchParams.get("queue");
  let value = { ok: true };
  if (url.pathname === "/_bench/delay") {
    delayMs = parseFloat(url.searchParams.get("ms") ?? "0") || 0;
    [delayed, addedSum] = [0, 0];
    value = stats(queue);
  } else if (url.pathname === "/_bench/stats") value = stats(queue);
  else if (url.pathname === "/_bench/forget") counts.delete(queue ?? "");
  else if (url.pathname === "/_bench/faults") {
    const [share, seed] = [parseFloat(url.searchParams.get("share") ?? "0"), url.searchParams.get("seed") ?? "1"];
    faults = share > 0 ? { share, seed, actions: (url.searchParams.get("actions") ?? "").split(","), rngs: {},
      counts: {} } : null;
  } else if (url.pathname === "/_bench/fair" && store.queuesByName.has(queue)) makeFair(store.queuesByName.get(queue));
  else value = null;
  const text = JSON.stringify(value ?? { error: "unknown control path or queue" });
  res.writeHead(value ? 200 : 404, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}

await app.listen({ host: "127.0.0.1", port });
const direct = http.createServer((req, res) => {
  if (req.url.startsWith("/_bench/")) {
    req.resume();
    req.on("end", () => control(req, res));
    return;
  }
  req.direct = true;
  app.server.emit("request", req, res); // the app's own handler, hooks and all
});
[direct.keepAliveTimeout, direct.headersTimeout, direct.requestTimeout] = [0, 0, 0];
await new Promise((resolve) => direct.listen(0, "127.0.0.1", resolve));
process.stdout.write(JSON.stringify({ port: app.server.address().port, direct_port: direct.address().port }) + "\n");
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => {
    direct.closeAllConnections?.();
    direct.close();
    app.close().finally(() => process.exit(0));
    setTimeout(() => process.exit(0), 1000).unref();
  });
}
