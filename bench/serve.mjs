// What the bench's node services share: a JSON answer, and listening on 127.0.0.1 with the port printed.

export function sendJson(res, status, value, headers = {}) {
  const text = JSON.stringify(value);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

// Prints {"port": N} once listening, which the runner reads. Idle connections stay open (keepAliveMs 0): the
// daemon's pool must not meet stale ones.
export function serve(server, port, keepAliveMs = 0) {
  server.keepAliveTimeout = keepAliveMs;
  if (!keepAliveMs) {
    server.headersTimeout = 0;
    server.requestTimeout = 0;
  }
  server.listen(port, "127.0.0.1", () => {
    process.stdout.write(JSON.stringify({ port: server.address().port }) + "\n");
  });
  for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => process.exit(0));
}
