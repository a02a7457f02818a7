/**
 * The admin app of the built binary against hostile requests, over a raw loopback socket (so any
 * Host, Origin and header bytes can be sent): `--admin-allowed-hosts` adds names to the loopback
 * ones, other names are 403 with the reason, malformed and oversized heads are answered (never a
 * crash or a hang), and a body over a route's limit is refused from its Content-Length alone.
 */
import { afterAll, expect, test } from "bun:test";
import { connect } from "node:net";
import { cleanupAll, runAria, startAria } from "./fixtures/e2e_server.ts";

afterAll(cleanupAll);

/** Sends `head` (and `body`), returns the status line and body the server answered, or why not. */
function rawRequest(
  port: number,
  head: string,
  body = "",
): Promise<{ status: string; body: string }> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(head + body));
    let text = "";
    const done = (status: string) => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ status, body: text.slice(text.indexOf("\r\n\r\n") + 4) });
    };
    const timer = setTimeout(() => done(text === "" ? "TIMEOUT" : text.split("\r\n")[0]), 5000);
    socket.on("data", (chunk) => {
      text += chunk.toString("latin1");
      const end = text.indexOf("\r\n\r\n");
      if (end < 0) return;
      const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, end));
      if (length === null || text.length >= end + 4 + Number(length[1]))
        done(text.split("\r\n")[0]);
    });
    socket.on("close", () => done(text.split("\r\n")[0] || "CLOSED"));
    socket.on("error", () => undefined);
  });
}

const get = (path: string, headers: string[]) =>
  `GET ${path} HTTP/1.1\r\n${headers.map((line) => `${line}\r\n`).join("")}Connection: close\r\n\r\n`;

test("--admin-allowed-hosts: those names and loopback are answered, others are 403; hostile heads never crash it", async () => {
  const server = await startAria({ args: ["--admin-allowed-hosts", "aria.test,Bus.Example."] });
  const port = Number(new URL(server.adminUrl).port);
  for (const host of [
    "aria.test",
    `ARIA.test:${port}`,
    "bus.example",
    `127.0.0.1:${port}`,
    "localhost",
  ]) {
    const answer = await rawRequest(port, get("/api/stats", [`Host: ${host}`]));
    expect({ host, status: answer.status }).toEqual({ host, status: "HTTP/1.1 200 OK" });
  }
  const evil = await rawRequest(port, get("/api/stats", ["Host: evil.com"]));
  expect(evil.status).toBe("HTTP/1.1 403 Forbidden");
  expect(JSON.parse(evil.body).error).toStartWith('this server does not answer as host "evil.com"');
  const crossSite = await rawRequest(
    port,
    `POST /api/split/plan?algorithm=heuristic HTTP/1.1\r\nHost: aria.test\r\nOrigin: http://evil.com\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`,
  );
  expect(crossSite.status).toBe("HTTP/1.1 403 Forbidden");

  const hostile = [
    ["Host:"],
    [`Host: ${"a".repeat(15_000)}`],
    [`Host: ${"é".repeat(3000)}`],
    ["Host: \u00ff\u00fe\u0001"],
    ["Host: localhost", "Host: evil.com"],
    ["Host: localhost.evil.com"],
    ["Host: 127.0.0.1.nip.io"],
    ["Host: 0x7f.1"],
    ["Host: a@127.0.0.1"],
    ["Host: [::1"],
    ["Host: [::ffff:127.0.0.1]:1"],
    ["Host: [0:0:0:0:0:0:0:1]", `Origin: ${"x".repeat(15_000)}`],
    ["Host: localhost", "Origin: null"],
    ["Host: localhost", "Origin: http://localhost", "Origin: http://evil.com"],
    ["Host: localhost", "Origin: \u00e9\u0000"],
    [`X-Many: ${"v".repeat(20_000)}`],
    ...[Array.from({ length: 400 }, (_, index) => `X-${index}: v`)],
  ];
  for (const headers of hostile) {
    for (const path of ["/api/stats", "/healthz", `/${"p".repeat(20_000)}`]) {
      const answer = await rawRequest(port, get(path, headers));
      expect(answer.status).toMatch(/^HTTP\/1\.1 (200|400|403|404|431)/);
    }
  }
  const http10 = await rawRequest(port, "GET /api/stats HTTP/1.0\r\n\r\n");
  expect(http10.status).toMatch(/^HTTP\/1\.1 403/);
  const healthz = await rawRequest(port, get("/healthz", ["Host: localhost"]));
  expect(healthz.status).toBe("HTTP/1.1 200 OK");
  expect(server.alive()).toBe(true);
  await server.stop();
}, 60_000);

test("a body over a route's limit is refused from its Content-Length, before it is sent", async () => {
  const server = await startAria();
  const port = Number(new URL(server.adminUrl).port);
  for (const [path, bytes] of [
    ["/internal/split/commit", 124_000_000],
    ["/internal/split/reserve", 2048],
    ["/api/split/compare", 9_000_000],
  ] as const) {
    const answer = await rawRequest(
      port,
      `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ${bytes}\r\nConnection: close\r\n\r\n`,
    );
    expect({ path, status: answer.status }).toEqual({
      path,
      status: "HTTP/1.1 413 Payload Too Large",
    });
  }
  expect(server.alive()).toBe(true);
  await server.stop();
}, 30_000);

test("--admin-allowed-hosts refuses what is not a host name", async () => {
  for (const value of ["a@b", "evil.com:80", "", " , "]) {
    const run = await runAria([
      "serve",
      "--admin-allowed-hosts",
      value,
      "--port",
      "0",
      "--admin-port",
      "0",
    ]);
    expect({ value, exitCode: run.exitCode }).toEqual({ value, exitCode: 2 });
    expect(run.stderr).toContain("--admin-allowed-hosts:");
  }
});

test("--admin-token: a wrong bearer token is counted, logged with the address, and answered after a delay growing per address", async () => {
  const server = await startAria({ args: ["--admin-token", "right-t0ken"] });
  try {
    const wrong = { headers: { Authorization: "Bearer wrong" } };
    const took: number[] = [];
    for (let i = 0; i < 3; i++) {
      const started = performance.now();
      expect((await fetch(`${server.adminUrl}/api/stats`, wrong)).status).toBe(401);
      took.push(performance.now() - started);
    }
    // 100, 200, 400 ms (auth/throttle.ts); no token at all is the UI asking, not a guess.
    expect(took[2]).toBeGreaterThanOrEqual(390);
    const started = performance.now();
    expect((await fetch(`${server.adminUrl}/api/stats`)).status).toBe(401);
    expect(performance.now() - started).toBeLessThan(took[2]);
    const metrics = await fetch(`${server.adminUrl}/metrics`, {
      headers: { Authorization: "Bearer right-t0ken" },
    });
    expect(await metrics.text()).toContain("\naria_auth_failures_total 3\n");
    expect(server.stderr()).toMatch(
      / WARN admin app refused a bearer token address=127\.0\.0\.1 reason="wrong admin token" errorAfterMs=400\n/,
    );
  } finally {
    await server.stop();
  }
});
