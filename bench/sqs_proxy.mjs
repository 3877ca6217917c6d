// A counting HTTP proxy in front of the SQS emulator: every request is forwarded unchanged and
// logged as [epoch_ms, action, queue name, WaitTimeSeconds, entries]. Used only in the runs that
// count SQS requests, so it cannot slow the throughput runs.
// Usage: node bench/sqs_proxy.mjs UPSTREAM_PORT [PORT]  -> prints {"port": N}
// Control: GET /_bench/log?from=K (entries K..), POST /_bench/reset.
import http from "node:http";
import { performance } from "node:perf_hooks";
import { sendJson, serve } from "./serve.mjs";

const upstreamPort = parseInt(process.argv[2], 10);
const port = parseInt(process.argv[3] ?? "0", 10);
const now = () => performance.timeOrigin + performance.now();
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
let log = [];

function describe(headers, body) {
  // JSON protocol: X-Amz-Target "AmazonSQS.ReceiveMessage"; query protocol: Action=... in the body
  let action = (headers["x-amz-target"] ?? "").split(".").pop();
  let queue = "";
  let wait = null;
  let entries = null;
  const text = body.toString("utf8");
  if (action) {
    try {
      const doc = JSON.parse(text || "{}");
      queue = (doc.QueueUrl ?? doc.QueueName ?? "").split("/").pop();
      wait = doc.WaitTimeSeconds ?? null;
      entries = Array.isArray(doc.Entries) ? doc.Entries.length : null;
    } catch {
      // not JSON: leave the details empty
    }
  } else {
    const form = new URLSearchParams(text);
    action = form.get("Action") ?? "unknown";
    queue = (form.get("QueueUrl") ?? form.get("QueueName") ?? "").split("/").pop();
  }
  return [now(), action, queue, wait, entries];
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    const body = Buffer.concat(chunks);
    if (req.url.startsWith("/_bench/")) {
      const url = new URL(req.url, "http://proxy");
      let value = { ok: true };
      if (url.pathname === "/_bench/reset") log = [];
      else if (url.pathname === "/_bench/log") value = log.slice(parseInt(url.searchParams.get("from") ?? "0", 10));
      return sendJson(res, 200, value);
    }
    log.push(describe(req.headers, body));
    const upstream = http.request(
      { host: "127.0.0.1", port: upstreamPort, method: req.method, path: req.url, headers: req.headers, agent },
      (answer) => {
        res.writeHead(answer.statusCode, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on("error", (error) => {
      res.writeHead(502, { "Content-Type": "text/plain" });
      res.end(String(error));
    });
    upstream.end(body);
  });
});
serve(server, port);
