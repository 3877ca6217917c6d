// An OTLP/HTTP collector for the tracing row: takes POST /v1/traces (protobuf, gzip or not), answers 200 at once
// (or after a set delay: a slow collector) and counts requests, bytes and spans, walking the protobuf just deep
// enough: resource_spans (1) -> scope_spans (2) -> spans (2). Usage: node bench/otlp_sink.mjs
// Control: POST /_bench/reset, POST /_bench/delay?ms=D, GET /_bench/stats {requests, bytes, spans, delay_ms, bad, ...}
import http from "node:http";
import zlib from "node:zlib";
import { sendJson, serve } from "./serve.mjs";

let delayMs = 0;
let counts = fresh();

function fresh() {
  return { requests: 0, bytes: 0, spans: 0, in_flight: 0, max_in_flight: 0, bad: 0 };
}

// The length-delimited fields `number` of a protobuf message in buf[start, end), as [start, end) pairs.
function fields(buf, start, end, number) {
  const out = [];
  let at = start;
  const varint = () => {
    let value = 0;
    let shift = 0;
    for (;;) {
      const byte = buf[at++];
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
      shift += 7;
    }
  };
  while (at < end) {
    const key = varint();
    const wire = key % 8;
    if (wire === 0) varint();
    else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else if (wire === 2) {
      const length = varint();
      if (Math.floor(key / 8) === number) out.push([at, at + length]);
      at += length;
    } else throw new Error(`wire type ${wire}`);
  }
  return out;
}

function spanCount(buf) {
  let spans = 0;
  for (const [rs, re] of fields(buf, 0, buf.length, 1)) {
    for (const [ss, se] of fields(buf, rs, re, 2)) spans += fields(buf, ss, se, 2).length;
  }
  return spans;
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url, "http://x");
  if (url.pathname.startsWith("/_bench/")) {
    req.resume();
    if (url.pathname === "/_bench/reset") counts = fresh();
    else if (url.pathname === "/_bench/delay") delayMs = parseFloat(url.searchParams.get("ms") ?? "0");
    return sendJson(res, 200, { ...counts, delay_ms: delayMs });
  }
  const chunks = [];
  counts.in_flight += 1;
  counts.max_in_flight = Math.max(counts.max_in_flight, counts.in_flight);
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    let body = Buffer.concat(chunks);
    counts.requests += 1;
    counts.bytes += body.length;
    try {
      if (req.headers["content-encoding"] === "gzip") body = zlib.gunzipSync(body);
      counts.spans += spanCount(body);
    } catch {
      counts.bad += 1;
    }
    const answer = () => {
      counts.in_flight -= 1;
      res.writeHead(200, { "Content-Type": "application/x-protobuf", "Content-Length": "0" });
      res.end();
    };
    if (delayMs > 0) setTimeout(answer, delayMs);
    else answer();
  });
});
serve(server, 0, 60_000);
