/**
 * TLS in the runtime (Bun): the listener and the dialer over real loopback sockets with
 * certificates openssl makes at run time (tests/tls_certs.ts) — bytes both ways, each failed
 * verification a rejected dial that says why, mutual TLS and the subject it gives the session —
 * and the client over a TLS server started in this process: tls:// URLs, a plain client at a TLS
 * port, a TLS client at a plain port.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeTestCerts, type TestCerts } from "../../tests/tls_certs.ts";
import type { Connection } from "../broker/ports.ts";
import { AriaClient, type DialTls, parseTcpUrl } from "../client/mod.ts";
import { connect, type RunningServer, startServer } from "../server/mod.ts";
import { dialTcp } from "./tcp_dialer.ts";
import { listenTcp } from "./tcp_listener.ts";
import { serverTlsProblem, subjectText, type TlsServerOptions } from "./tls.ts";

let certs: TestCerts;
const dataDirs: string[] = [];

beforeAll(() => {
  certs = makeTestCerts();
});
afterAll(() => {
  certs.remove();
  for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
});

/** A listener whose sessions echo what they receive; `connections` are the broker's view. */
function echoServer(tls?: TlsServerOptions) {
  const connections: Connection[] = [];
  const listener = listenTcp(
    {
      open: (connection) => connections.push(connection),
      receive: (id, bytes) => connections[id - 1].write(bytes),
      writable: () => {},
      closed: () => {},
    },
    { host: "127.0.0.1", port: 0, tls },
  );
  return { listener, connections };
}

/** Dials, writes "ping", and resolves to what came back or how the connection ended. */
async function dialAndPing(port: number, tls: DialTls | undefined): Promise<string> {
  let settle: (text: string) => void = () => {};
  const outcome = new Promise<string>((resolve) => {
    settle = resolve;
  });
  const socket = await dialTcp(
    "127.0.0.1",
    port,
    {
      data: (bytes) => settle(`data ${new TextDecoder().decode(bytes)}`),
      drain: () => {},
      close: (error) => settle(`closed: ${error?.message ?? "no error"}`),
    },
    { tls },
  );
  socket.write(new TextEncoder().encode("ping"));
  const timer = setTimeout(() => settle("timed out"), 3000);
  const text = await outcome;
  clearTimeout(timer);
  socket.end();
  return text;
}

const serverTls = () => ({ cert: certs.text("server.pem"), key: certs.text("server.key") });

test("a TLS listener and dialer carry bytes both ways; no subject without mutual TLS", async () => {
  const { listener, connections } = echoServer(serverTls());
  try {
    expect(await dialAndPing(listener.port, { ca: certs.text("ca.pem") })).toBe("data ping");
    expect(connections[0].peerSubject).toBeUndefined();
  } finally {
    listener.stop();
  }
});

test("each failed verification rejects the dial with its reason, never a plain connection", async () => {
  const ca = certs.text("ca.pem");
  const failure = async (cert: string, tls: DialTls) => {
    const { listener, connections } = echoServer({
      cert: certs.text(`${cert}.pem`),
      key: certs.text(`${cert}.key`),
    });
    try {
      await dialAndPing(listener.port, tls);
      return "connected";
    } catch (error) {
      return (error as Error).message.replace(/:\d+ /, ":PORT ");
    } finally {
      // The server never had a readable byte from the failed client.
      expect(connections.length).toBeLessThanOrEqual(1);
      listener.stop();
    }
  };
  expect({
    unknownCa: await failure("server", {}),
    wrongHost: await failure("other", { ca }),
    expired: await failure("expired", { ca }),
  }).toMatchInlineSnapshot(`
    {
      "expired": "TLS handshake with 127.0.0.1:PORT failed: the server's certificate has expired (CERT_HAS_EXPIRED)",
      "unknownCa": "TLS handshake with 127.0.0.1:PORT failed: the server's certificate is not signed by a CA this client trusts (UNABLE_TO_VERIFY_LEAF_SIGNATURE)",
      "wrongHost": "TLS handshake with 127.0.0.1:PORT failed: the server's certificate is not for "127.0.0.1" (ERR_TLS_CERT_ALTNAME_INVALID)",
    }
  `);
});

test("mutual TLS: no certificate or an untrusted one is refused; a trusted one's subject reaches the session", async () => {
  const { listener, connections } = echoServer({ ...serverTls(), clientCa: certs.text("ca.pem") });
  const ca = certs.text("ca.pem");
  try {
    expect(await dialAndPing(listener.port, { ca })).toStartWith(
      "closed: the server requires a client certificate",
    );
    const stranger = { ca, cert: certs.text("stranger.pem"), key: certs.text("stranger.key") };
    expect(await dialAndPing(listener.port, stranger)).toStartWith(
      "closed: the server closed the connection before answering: it did not accept the client certificate",
    );
    const alice = { ca, cert: certs.text("client.pem"), key: certs.text("client.key") };
    expect(await dialAndPing(listener.port, alice)).toBe("data ping");
    expect(connections.map((connection) => connection.peerSubject)).toEqual([
      undefined,
      undefined,
      "CN=alice,O=Example",
    ]);
  } finally {
    listener.stop();
  }
});

test("serverTlsProblem refuses a key of another certificate, an expired certificate, not-PEM", () => {
  const now = Date.now();
  const problem = (cert: string, key: string) =>
    serverTlsProblem({ cert: certs.text(cert), key: certs.text(key) }, now);
  expect(problem("server.pem", "server.key")).toBeNull();
  expect(problem("server.pem", "other.key")).toStartWith(
    "the key does not belong to the certificate (subject CN=127.0.0.1)",
  );
  expect(problem("expired.pem", "expired.key")).toStartWith("the certificate expired on ");
  expect(problem("server.key", "server.key")).toStartWith(
    "the certificate is not a PEM certificate",
  );
  expect(problem("server.pem", "server.pem")).toStartWith("the key is not a PEM private key");
});

test("subjectText: certificate order, repeated attributes, RFC 4514 escapes", () => {
  expect(subjectText({ CN: "alice", O: "Example" })).toBe("CN=alice,O=Example");
  expect(subjectText({ CN: "a,b=c", OU: ["x", "y+z"] })).toBe("CN=a\\,b\\=c,OU=x,OU=y\\+z");
});

test("parseTcpUrl reads tls:// as TLS; TLS options with a tcp:// URL are refused", async () => {
  expect(parseTcpUrl("tls://127.0.0.1:7400")).toEqual({ host: "127.0.0.1", port: 7400, tls: true });
  expect(parseTcpUrl("tcp://[::1]:7400/")).toEqual({ host: "::1", port: 7400, tls: false });
  expect(() => parseTcpUrl("https://127.0.0.1:7400")).toThrow("is not a tcp://HOST:PORT or tls://");
  await expect(
    AriaClient.connect("tcp://127.0.0.1:1", dialTcp, { tls: { ca: "x" } }),
  ).rejects.toThrow('TLS options were given for "tcp://127.0.0.1:1", a plain TCP URL: use tls://');
});

/** An in-process server on port 0; TLS with `tls`. */
async function server(tls?: TlsServerOptions): Promise<RunningServer> {
  const dataDir = mkdtempSync(join(tmpdir(), "aria-tls-store-"));
  dataDirs.push(dataDir);
  return await startServer({
    host: "127.0.0.1",
    port: 0,
    adminPort: 0,
    dataDir,
    tipBytes: 1 << 20,
    fsync: "never",
    tls,
  });
}

test("the client over TLS: tls:// publishes; plain at a TLS port and TLS at a plain port fail clearly", async () => {
  const secure = await server(serverTls());
  const plain = await server();
  try {
    expect(secure.tcpUrl).toMatch(/^tls:\/\/127\.0\.0\.1:\d+$/);
    const client = await connect(secure.tcpUrl, { tls: { ca: certs.text("ca.pem") } });
    expect(await client.publish("a/b", "over tls")).toBe(1);
    await client.close();
    const port = parseTcpUrl(secure.tcpUrl).port;
    await expect(connect(`tcp://127.0.0.1:${port}`, { reconnect: false })).rejects.toThrow(
      `127.0.0.1:${port} answered with TLS: connect with tls://127.0.0.1:${port}`,
    );
    const plainPort = parseTcpUrl(plain.tcpUrl).port;
    await expect(
      connect(`tls://127.0.0.1:${plainPort}`, { tls: { ca: certs.text("ca.pem") } }),
    ).rejects.toThrow(`TLS handshake with 127.0.0.1:${plainPort} failed: `);
  } finally {
    await secure.stop();
    await plain.stop();
  }
});
