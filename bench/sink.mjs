// The local HTTP app the daemon delivers to: answers 200 at once or after a delay, and records
// every delivery (arrival time, queue) so the runner can compute rates, latencies and ordering.
// Usage: node bench/sink.mjs [PORT]  -> prints {"port": N}
//
// Deliveries: any POST outside /_bench/. A POST to /2015-03-31/functions/NAME/invocations is taken as a
// Lambda Invoke (the stand-in the lambda scenario points AWS_ENDPOINT_URL_LAMBDA at): counted like any
// delivery, its SigV4 signature not checked, answered 200 with the payload {} and
// X-Amz-Executed-Version: $LATEST, as Lambda answers a synchronous invocation that returned nothing.
// A batch POST (an HTTP target with batch_size > 1: X-Aws-Sqsd-Msgcount: N) counts as N deliveries, all
// arriving at once, and is answered 200 with an empty body (every record succeeded); in_flight, the held
// times and `posts` count requests.
// Control (used by bench/run.py only):
//   POST /_bench/reset?delay_ms=D   forget everything, answer deliveries after D ms from now on
//   GET  /_bench/stats              {count, posts, first, last, in_flight, max_in_flight, by_queue, invocations}
//   GET  /_bench/events?from=K      arrivals K.. as [[epoch_ms, queue], ...]
//   GET  /_bench/wait?count=N&timeout_ms=T   answers once count >= N (or at the timeout) with stats
import http from "node:http";
import { performance } from "node:perf_hooks";
import { sendJson as json, serve } from "./serve.mjs";

const port = parseInt(process.argv[2] ?? "0", 10);
const origin = performance.timeOrigin;
const now = () => origin + performance.now(); // epoch milliseconds with sub-ms resolution

let delayMs = 0;
let times = [];
let queues = [];
let byQueue = {};
let inFlight = 0;
let maxInFlight = 0;
let waiters = [];
let heldSum = 0; // actual time each delayed answer was held, to compare the ideal with what the sink did
let heldCount = 0;
let lastDone = null; // when the latest answer was sent: rates run from the first arrival to this
let invocations = 0; // Lambda Invoke requests answered
let posts = 0; // delivery requests (a batch POST carries several deliveries)
const INVOKE_PREFIX = "/2015-03-31/functions/";
const INVOKE_HEADERS = {
  "Content-Type": "application/json",
  "Content-Length": "2",
  "X-Amz-Executed-Version": "$LATEST",
  "x-amzn-RequestId": "00000000-0000-4000-8000-000000000000",
};

function stats() {
  return {
    count: times.length,
    posts,
    first: times.length ? times[0] : null,
    last: times.length ? times[times.length - 1] : null,
    last_done: lastDone,
    in_flight: inFlight,
    max_in_flight: maxInFlight,
    by_queue: byQueue,
    delay_ms: delayMs,
    mean_held_ms: heldCount ? heldSum / heldCount : null,
    invocations,
    now: now(),
  };
}

function wakeWaiters() {
  if (!waiters.length) return;
  const still = [];
  for (const waiter of waiters) {
    if (times.length >= waiter.count) {
      clearTimeout(waiter.timer);
      json(waiter.res, 200, stats());
    } else {
      still.push(waiter);
    }
  }
  waiters = still;
}

function control(req, res, url) {
  const path = url.pathname;
  if (path === "/_bench/reset") {
    delayMs = parseFloat(url.searchParams.get("delay_ms") ?? "0") || 0;
    times = [];
    queues = [];
    byQueue = {};
    maxInFlight = inFlight;
    heldSum = 0;
    heldCount = 0;
    lastDone = null;
    invocations = 0;
    posts = 0;
    for (const waiter of waiters) {
      clearTimeout(waiter.timer);
      json(waiter.res, 200, stats());
    }
    waiters = [];
    return json(res, 200, stats());
  }
  if (path === "/_bench/stats") return json(res, 200, stats());
  if (path === "/_bench/events") {
    const from = parseInt(url.searchParams.get("from") ?? "0", 10);
    const events = [];
    for (let i = from; i < times.length; i++) events.push([times[i], queues[i]]);
    return json(res, 200, events);
  }
  if (path === "/_bench/wait") {
    const count = parseInt(url.searchParams.get("count") ?? "1", 10);
    const timeoutMs = parseFloat(url.searchParams.get("timeout_ms") ?? "30000");
    if (times.length >= count) return json(res, 200, stats());
    const waiter = { count, res };
    waiter.timer = setTimeout(() => {
      waiters = waiters.filter((w) => w !== waiter);
      json(res, 200, stats());
    }, timeoutMs);
    waiters.push(waiter);
    return;
  }
  json(res, 404, { error: "unknown control path" });
}

const server = http.createServer((req, res) => {
  if (req.url.startsWith("/_bench/")) {
    req.resume();
    req.on("end", () => control(req, res, new URL(req.url, "http://sink")));
    return;
  }
  const arrived = now();
  const invoke = req.url.startsWith(INVOKE_PREFIX) && req.url.includes("/invocations");
  const queue = invoke ? "lambda" : req.headers["x-aws-sqsd-queue"] ?? "";
  const batch = parseInt(req.headers["x-aws-sqsd-msgcount"] ?? "0", 10);
  const messages = batch > 0 ? batch : 1;
  for (let i = 0; i < messages; i++) {
    times.push(arrived);
    queues.push(queue);
  }
  byQueue[queue] = (byQueue[queue] ?? 0) + messages;
  posts += 1;
  inFlight += 1;
  if (inFlight > maxInFlight) maxInFlight = inFlight;
  const delay = delayMs;
  req.resume(); // read the body fully before answering, as a real app would
  req.on("end", () => {
    const answer = () => {
      inFlight -= 1;
      lastDone = now();
      heldSum += lastDone - arrived;
      heldCount += 1;
      if (invoke) {
        invocations += 1;
        res.writeHead(200, INVOKE_HEADERS);
        res.end("{}");
        return;
      }
      if (batch > 0) {
        res.writeHead(200, { "Content-Length": "0" });
        res.end();
        return;
      }
      res.writeHead(200, { "Content-Length": "2", "Content-Type": "text/plain" });
      res.end("ok");
    };
    if (delay > 0) setTimeout(answer, delay);
    else answer();
  });
  wakeWaiters();
});
serve(server, port);
