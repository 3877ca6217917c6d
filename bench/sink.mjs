// The app the daemon delivers to: answers 200 at once or after a delay, and records every arrival (time, queue).
// Usage: node bench/sink.mjs [PORT] -> prints {"port": N}
// A POST to /2015-03-31/functions/NAME/invocations is a Lambda Invoke (the Lambda target's stand-in; the signature
// is not checked): answered {} with X-Amz-Executed-Version, as a synchronous invocation that returned nothing. A
// batch POST (X-Aws-Sqsd-Msgcount: N) counts as N arrivals at once, answered 200 with an empty body (every record
// succeeded); in_flight, the held times and `posts` count requests.
// Control: POST /_bench/reset?delay_ms=D (forget everything, answer after D ms from now on), GET /_bench/stats,
//   GET /_bench/events?from=K ([[epoch_ms, queue], ...]), GET /_bench/wait?count=N&timeout_ms=T (answers the stats
//   once count >= N, or at the timeout)
import http from "node:http";
import { performance } from "node:perf_hooks";
import { sendJson as json, serve } from "./serve.mjs";

const port = parseInt(process.argv[2] ?? "0", 10);
const now = () => performance.timeOrigin + performance.now(); // epoch ms with sub-ms resolution
const INVOKE = "/2015-03-31/functions/";
const INVOKED = { "Content-Type": "application/json", "Content-Length": "2", "X-Amz-Executed-Version": "$LATEST",
  "x-amzn-RequestId": "00000000-0000-4000-8000-000000000000" };
let s = fresh(0, 0);
let waiters = [];

function fresh(delayMs, inFlight) {
  return { delayMs, times: [], queues: [], byQueue: {}, inFlight, maxInFlight: inFlight, heldSum: 0, heldCount: 0,
    lastDone: null, invocations: 0, posts: 0 };
}

function stats() {
  const { times } = s;
  return { count: times.length, posts: s.posts, first: times[0] ?? null, last: times.at(-1) ?? null,
    last_done: s.lastDone, in_flight: s.inFlight, max_in_flight: s.maxInFlight, by_queue: s.byQueue,
    delay_ms: s.delayMs, mean_held_ms: s.heldCount ? s.heldSum / s.heldCount : null, invocations: s.invocations,
    now: now() };
}

function wake(all = false) {
  const [ready, still] = [[], []];
  for (const waiter of waiters) (all || s.times.length >= waiter.count ? ready : still).push(waiter);
  waiters = still;
  for (const waiter of ready) {
    clearTimeout(waiter.timer);
    json(waiter.res, 200, stats());
  }
}

function control(res, url) {
  const get = (name, fallback) => parseFloat(url.searchParams.get(name) ?? fallback) || 0;
  if (url.pathname === "/_bench/reset") {
    s = fresh(get("delay_ms", "0"), s.inFlight);
    wake(true);
    return json(res, 200, stats());
  }
  if (url.pathname === "/_bench/stats") return json(res, 200, stats());
  if (url.pathname === "/_bench/events") {
    const from = get("from", "0");
    return json(res, 200, s.times.slice(from).map((time, i) => [time, s.queues[from + i]]));
  }
  if (url.pathname !== "/_bench/wait") return json(res, 404, { error: "unknown control path" });
  const waiter = { count: get("count", "1"), res };
  if (s.times.length >= waiter.count) return json(res, 200, stats());
  waiter.timer = setTimeout(() => {
    waiters = waiters.filter((w) => w !== waiter);
    json(res, 200, stats());
  }, get("timeout_ms", "30000"));
  waiters.push(waiter);
}

serve(http.createServer((req, res) => {
  if (req.url.startsWith("/_bench/")) {
    req.resume();
    return req.on("end", () => control(res, new URL(req.url, "http://sink")));
  }
  const [arrived, mine] = [now(), s];
  const invoke = req.url.startsWith(INVOKE) && req.url.includes("/invocations");
  const queue = invoke ? "lambda" : req.headers["x-aws-sqsd-queue"] ?? "";
  const batch = parseInt(req.headers["x-aws-sqsd-msgcount"] ?? "0", 10);
  for (let i = 0; i < Math.max(batch, 1); i++) {
    mine.times.push(arrived);
    mine.queues.push(queue);
  }
  mine.byQueue[queue] = (mine.byQueue[queue] ?? 0) + Math.max(batch, 1);
  mine.posts += 1;
  mine.inFlight += 1;
  mine.maxInFlight = Math.max(mine.maxInFlight, mine.inFlight);
  req.resume(); // read the body fully before answering, as a real app would
  req.on("end", () => {
    const answer = () => {
      s.inFlight -= 1;
      s.lastDone = now();
      s.heldSum += s.lastDone - arrived;
      s.heldCount += 1;
      if (invoke) s.invocations += 1;
      res.writeHead(200, invoke ? INVOKED : { "Content-Length": batch > 0 ? "0" : "2" });
      res.end(invoke ? "{}" : batch > 0 ? "" : "ok");
    };
    if (mine.delayMs > 0) setTimeout(answer, mine.delayMs);
    else answer();
  });
  wake();
}), port);
