// fauxqs (in-memory SQS emulator) bound to 127.0.0.1 only.
// The package's CLI and startFauxqs() listen on 0.0.0.0, so we build the app ourselves.
// Usage: node bench/fauxqs_server.mjs [PORT]   (0 or nothing = a free port)
// Prints one JSON line {"port": N} on stdout once listening; stops on SIGTERM/SIGINT.
import { buildApp } from "fauxqs";

const port = parseInt(process.argv[2] ?? "0", 10);
const app = buildApp({ logger: false, defaultRegion: "us-east-1" });
await app.listen({ host: "127.0.0.1", port });
const address = app.server.address();
process.stdout.write(JSON.stringify({ port: address.port }) + "\n");

for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => {
    app.close().finally(() => process.exit(0));
    setTimeout(() => process.exit(0), 1000).unref();
  });
}
