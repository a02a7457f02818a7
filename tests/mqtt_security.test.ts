/**
 * The MQTT door under the security issue's users and TLS, with mqtt.js (npm `mqtt`) against the
 * binary: with `--users`, the user name and password are the user and its token (a wrong one is
 * CONNACK 0x86 on 5.0, return code 4 on 3.1.1); a user's publish and subscribe permissions hold
 * (PUBACK and SUBACK 0x87, nothing stored or delivered outside them); over `mqtts://` with
 * `--tls-client-ca` the client certificate's subject signs in as its user, and a client without
 * a trusted certificate gets no session at all.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import mqtt, { type IClientOptions, type MqttClient } from "mqtt";
import {
  type AriaServer,
  cleanupAll,
  makeTempDir,
  runAria,
  startAria,
} from "./fixtures/e2e_server.ts";
import { makeTestCerts, type TestCerts } from "./tls_certs.ts";

let dir: string;
let certs: TestCerts;
let plain: AriaServer;
let secure: AriaServer;
let aliceToken: string;
let opsToken: string;
const clients = new Set<MqttClient>();

beforeAll(async () => {
  dir = makeTempDir("aria-mqtt-security-");
  certs = makeTestCerts();
  const usersFile = join(dir, "users.json");
  const alice = await runAria(
    ["users", "add", "alice", "--users", usersFile].concat(
      ["--publish", "a/**"],
      ["--subscribe", "a/**"],
    ),
  );
  expect(alice.exitCode).toBe(0);
  aliceToken = alice.stdout.trim(); // alice:SECRET
  const certified = await runAria(
    ["users", "add", "certy", "--users", usersFile, "--no-token"].concat(
      ["--cert-subject", "CN=alice,O=Example"],
      ["--publish", "c/**", "--subscribe", "c/**"],
    ),
  );
  expect(certified.exitCode).toBe(0);
  const ops = await runAria(["users", "add", "ops", "--users", usersFile, "--role", "admin"]);
  opsToken = ops.stdout.trim();
  const users = ["--users", usersFile, "--mqtt-port", "0"];
  plain = await startAria({ fsync: "never", args: users });
  secure = await startAria({
    fsync: "never",
    args: users.concat(
      ["--tls-cert", certs.path("server.pem"), "--tls-key", certs.path("server.key")],
      ["--tls-client-ca", certs.path("ca.pem")],
    ),
  });
});

afterAll(async () => {
  for (const client of clients) client.end(true);
  await plain?.stop();
  await secure?.stop();
  certs?.remove();
  await cleanupAll();
});

function password(token: string): { username: string; password: string } {
  const colon = token.indexOf(":");
  return { username: token.slice(0, colon), password: token.slice(colon + 1) };
}

async function mqttClient(url: string, options: IClientOptions): Promise<MqttClient> {
  const client = await mqtt.connectAsync(url, {
    reconnectPeriod: 0,
    connectTimeout: 5000,
    ...options,
  });
  clients.add(client);
  return client;
}

/** The SUBACK codes of a SUBSCRIBE (mqtt.js rejects when one is a failure; its packet says which). */
async function subscribeCodes(client: MqttClient, filters: Record<string, { qos: 1 }>) {
  try {
    return (await client.subscribeAsync(filters)).map((grant) => grant.qos);
  } catch (error) {
    return (error as { packet: { granted: number[] } }).packet.granted;
  }
}

/** The PUBACK reason code of a QoS 1 publish (mqtt.js rejects a failure with its code). */
async function pubackCode(client: MqttClient, topic: string): Promise<number> {
  try {
    const ack = (await client.publishAsync(topic, "m", { qos: 1 })) as { reasonCode?: number };
    return ack?.reasonCode ?? 0;
  } catch (error) {
    return (error as { code: number }).code;
  }
}

/** The CONNACK code a refused connection got: `reasonCode` on 5.0, `returnCode` on 3.1.1. */
async function refusal(url: string, options: IClientOptions): Promise<number | string> {
  try {
    const client = await mqttClient(url, options);
    client.end(true);
    return "accepted";
  } catch (error) {
    const code = (error as { code?: number }).code;
    return code ?? (error as Error).message;
  }
}

test("serve prints mqtt:// plain and mqtts:// with --tls-cert", () => {
  expect(plain.mqttUrl).toMatch(/^mqtt:\/\/127\.0\.0\.1:\d+$/);
  expect(secure.mqttUrl).toMatch(/^mqtts:\/\/127\.0\.0\.1:\d+$/);
});

test("user name and password sign in; a wrong password or none is refused (5.0: 0x86, 3.1.1: 4 / 5)", async () => {
  const url = plain.mqttUrl!;
  const { username } = password(aliceToken);
  const ok = await mqttClient(url, { protocolVersion: 5, ...password(aliceToken) });
  expect(ok.connected).toBe(true);
  ok.end(true);
  expect(await refusal(url, { protocolVersion: 5, username, password: "wrong" })).toBe(0x86);
  expect(await refusal(url, { protocolVersion: 4, username, password: "wrong" })).toBe(4);
  // No credential on a server with users: not authorized.
  expect(await refusal(url, { protocolVersion: 5 })).toBe(0x87);
  expect(await refusal(url, { protocolVersion: 4 })).toBe(5);
});

test("permissions hold: PUBACK and SUBACK 0x87 outside them, nothing stored or delivered", async () => {
  const url = plain.mqttUrl!;
  const client = await mqttClient(url, { protocolVersion: 5, ...password(aliceToken) });
  expect(await subscribeCodes(client, { "a/#": { qos: 1 }, "b/#": { qos: 1 } })).toEqual([1, 0x87]);
  const got: string[] = [];
  client.on("message", (topic) => got.push(topic));
  expect(await pubackCode(client, "b/x")).toBe(0x87);
  expect(await pubackCode(client, "a/x")).toBe(0);
  for (let i = 0; i < 200 && got.length === 0; i++) await Bun.sleep(10);
  expect(got).toEqual(["a/x"]);
  // The log holds only the allowed message.
  const stats = await (
    await fetch(`${plain.adminUrl}/api/stats`, { headers: { authorization: `Bearer ${opsToken}` } })
  ).json();
  expect((stats as { broker: { nextSeq: number } }).broker.nextSeq).toBe(2);
});

test("mqtts with a client certificate signs in as its subject's user, held to its permissions; no certificate, no session", async () => {
  const url = secure.mqttUrl!;
  const tls = {
    ca: certs.text("ca.pem"),
    cert: certs.text("client.pem"),
    key: certs.text("client.key"),
  };
  const client = await mqttClient(url, { protocolVersion: 5, ...tls });
  expect(await subscribeCodes(client, { "c/#": { qos: 1 }, "a/#": { qos: 1 } })).toEqual([1, 0x87]);
  expect(await pubackCode(client, "c/x")).toBe(0);
  expect(await pubackCode(client, "a/x")).toBe(0x87);
  const untrusted = await refusal(url, { protocolVersion: 5, ca: certs.text("ca.pem") });
  expect(untrusted).not.toBe("accepted");
});
