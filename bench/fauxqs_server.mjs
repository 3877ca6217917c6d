// fauxqs (in-memory SQS emulator) bound to 127.0.0.1 only, with a round-trip-time knob.
// The package's CLI and startFauxqs() listen on 0.0.0.0, so we build the app ourselves.
// Usage: node bench/fauxqs_server.mjs [PORT]   (0 or nothing = a free port)
// Prints one JSON line {"port": N, "direct_port": M} on stdout once listening; stops on SIGTERM/SIGINT.
//
// Two ports, one app (the same queues):
//   port         what the measured workers talk to. Every request on it is delayed by the round
//                trip time D (env FAUXQS_DELAY_MS, default 0; changed at run time with
//                /_bench/delay): D/2 once the request is in, before fauxqs handles it, and D/2
//                once the answer is ready, before it is sent, as a network would split it. Each
//                request waits on its own timer, so 50 requests in flight wait their 10 ms at the
//                same time; nothing is serialized. Requests on it are counted by queue and action.
//   direct_port  never delayed, never counted: the runner's own setup (creating queues, sending
//                the backlog, deleting queues) goes here, so a 30 ms round trip does not make
//                loading 50,000 messages take 5000 x 30 ms. Control (runner only):
//     POST /_bench/delay?ms=D       set D for the measured port; answers the stats below, reset
//     GET  /_bench/stats[?queue=Q]  {delay_ms, delayed, mean_added_ms, counts: {queue: {action: n}}}
//     POST /_bench/forget?queue=Q   drop the counts of a queue
import http from "node:http";
import { performance } from "node:perf_hooks";
import { buildApp } from "fauxqs";

const port = parseInt(process.argv[2] ?? "0", 10);
let delayMs = parseFloat(process.env.FAUXQS_DELAY_MS ?? "0") || 0;
let counts = new Map(); // queue name -> {action: n}, requests on the measured port
let delayed = 0; // requests delayed since the last /_bench/delay
let addedSum = 0; // time they were actually held (both halves), to report the real round trip added

const app = buildApp({ logger: false, defaultRegion: "us-east-1" });

// preHandler: the body is parsed (so the queue is known) and fauxqs has not acted yet.
app.addHook("preHandler", (request, reply, done) => {
  if (request.raw.direct) return done();
  const body = request.body;
  const action = (request.headers["x-amz-target"] ?? "").split(".").pop() || "other";
  const queue = body && typeof body === "object" ? String(body.QueueUrl ?? body.QueueName ?? "").split("/").pop() : "";
  let mine = counts.get(queue);
  if (mine === undefined) counts.set(queue, (mine = {}));
  mine[action] = (mine[action] ?? 0) + 1;
  if (!(delayMs > 0)) return done();
  const half = delayMs / 2;
  const began = performance.now();
  request.benchDelay = half;
  setTimeout(() => {
    request.benchAdded = performance.now() - began;
    done();
  }, half);
});

app.addHook("onSend", (request, reply, payload, done) => {
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
  const wanted = queue === null ? counts : new Map([[queue, counts.get(queue) ?? {}]]);
  return {
    delay_ms: delayMs,
    delayed,
    mean_added_ms: delayed ? addedSum / delayed : null,
    counts: Object.fromEntries(wanted),
  };
}

function control(req, res) {
  const url = new URL(req.url, "http://fauxqs");
  const queue = url.searchParams.get("queue");
  let value;
  if (url.pathname === "/_bench/delay") {
    delayMs = parseFloat(url.searchParams.get("ms") ?? "0") || 0;
    delayed = 0;
    addedSum = 0;
    value = stats(queue);
  } else if (url.pathname === "/_bench/stats") {
    value = stats(queue);
  } else if (url.pathname === "/_bench/forget") {
    counts.delete(queue ?? "");
    value = { ok: true };
  }
  const text = JSON.stringify(value ?? { error: "unknown control path" });
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
  app.server.emit("request", req, res); // the app's own request handler, hooks and all
});
direct.keepAliveTimeout = 0;
direct.headersTimeout = 0;
direct.requestTimeout = 0;
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
