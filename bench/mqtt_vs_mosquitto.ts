/**
 * Aria's MQTT door side by side with Debian's mosquitto broker, in one run, both on loopback, both
 * with their defaults (mosquitto: `mosquitto -p PORT`, no config file, so max_queued_messages
 * 1,000 and persistence off: it never fsyncs; Aria: `aria serve --mqtt-port PORT` once per --fsync
 * policy given, `never,always` by default: `never` (or `interval`) is the like-for-like column,
 * `always` beside it; with --baseline BIN, that binary's columns too, e.g. an older build), driven by the
 * same client: a small raw-socket MQTT 3.1.1 client of this file (pre-encoded packets, pipelined
 * writes), whose own speed is measured first against a discarding sink and a parser-only run so
 * the table shows it is not the bound. Rows, each a median of --rounds, brokers alternating:
 *
 *   qos0 publish   one client publishes N messages at QoS 0; until the PINGRESP after the last
 *                  one (the broker has taken them all). No subscriber.
 *   qos1 publish   one client publishes N messages at QoS 1, WINDOW in flight; until the last
 *                  PUBACK.
 *   fan-out        100 subscribers (QoS 0) on one topic, one publisher sends M messages at QoS 0;
 *                  deliveries/s until every subscriber has M (or the wait ends).
 *   offline        a persistent session (clean session 0) subscribes at QoS 1 and leaves; OFFLINE
 *                  messages are published at QoS 1 meanwhile; it comes back and PUBACKs what it
 *                  gets: how many, whether in order (the payload carries its index), and how fast
 *                  (from its CONNECT to the last message, ending after 3 s of silence).
 *
 *
 * Beside the QoS 1 row, each round also times the disk's bound for a writer that waits for one
 * group commit per window (src/bench/fsync_bound.ts: append + fdatasync of WINDOW records' bytes
 * in the directory the data directories are made in): `--fsync always` cannot beat WINDOW
 * messages per such round, so its column is also given as a ratio of min(mosquitto, that bound).
 *
 *   npx bun bench/mqtt_vs_mosquitto.ts [--bin dist/aria] [--baseline BIN] [--rounds 3]
 *     [--fsync never,always]
 *     [--messages 200000] [--fan-messages 5000] [--offline 1000000] [--window 100]
 *     [--rows qos0,qos1,fanout,offline]   (all by default)
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { Socket } from "bun";
import { boundRate, type FsyncBound, measureFsyncBound } from "../src/bench/fsync_bound.ts";
import { median } from "../src/bench/stats.ts";
import { BunDisk } from "../src/runtime/bun_disk.ts";
import { encodeStoredProperties } from "../src/mqtt/stored_properties.ts";
import { recordBytes } from "../src/store/record.ts";

const { values } = parseArgs({
  options: {
    bin: { type: "string" },
    baseline: { type: "string" },
    rounds: { type: "string" },
    fsync: { type: "string" },
    messages: { type: "string" },
    "fan-messages": { type: "string" },
    "fan-subscribers": { type: "string" },
    offline: { type: "string" },
    window: { type: "string" },
    payload: { type: "string" },
    rows: { type: "string" },
  },
});
const BIN = values.bin ?? join(import.meta.dir, "..", "dist", "aria");
const ROUNDS = Number(values.rounds ?? 3);
const FSYNCS = (values.fsync ?? "never,always").split(",");
const BASELINE = values.baseline;
const MESSAGES = Number(values.messages ?? 200_000);
const FAN_MESSAGES = Number(values["fan-messages"] ?? 5_000);
const FAN_SUBSCRIBERS = Number(values["fan-subscribers"] ?? 100);
const OFFLINE = Number(values.offline ?? 1_000_000);
const WINDOW = Number(values.window ?? 100);
const PAYLOAD_BYTES = Number(values.payload ?? 64);
const MOSQUITTO = "/usr/sbin/mosquitto";
/** Timed rounds of the fsync bound, per benchmark round. */
const BOUND_ROUNDS = 300;
const SILENCE_MS = 3000;

// ---- The raw MQTT 3.1.1 client --------------------------------------------------------------

const encoder = new TextEncoder();

/** A remaining-length varint followed by `body`, after the fixed header byte. */
function packet(header: number, body: Uint8Array): Uint8Array {
  const length: number[] = [];
  let rest = body.length;
  do {
    let byte = rest % 128;
    rest = Math.floor(rest / 128);
    if (rest > 0) byte |= 0x80;
    length.push(byte);
  } while (rest > 0);
  const out = new Uint8Array(1 + length.length + body.length);
  out[0] = header;
  out.set(length, 1);
  out.set(body, 1 + length.length);
  return out;
}

function mqttString(text: string): Uint8Array {
  const bytes = encoder.encode(text);
  return new Uint8Array([bytes.length >> 8, bytes.length & 0xff, ...bytes]);
}

function connectPacket(clientId: string, clean: boolean): Uint8Array {
  const head = [0, 4, 0x4d, 0x51, 0x54, 0x54, 4, clean ? 0x02 : 0x00, 0, 60];
  return packet(0x10, new Uint8Array([...head, ...mqttString(clientId)]));
}

function subscribePacket(topic: string, qos: number): Uint8Array {
  return packet(0x82, new Uint8Array([0, 1, ...mqttString(topic), qos]));
}

/**
 * PUBLISH packets of one topic and payload size, written into a caller's buffer with the message
 * index in the payload's first 4 bytes and, at QoS 1, a packet id: no allocation per message.
 */
class PublishTemplate {
  readonly bytes: Uint8Array;
  private readonly indexAt: number;
  private readonly idAt: number;
  constructor(topic: string, qos: 0 | 1, payloadBytes: number) {
    const body = new Uint8Array([
      ...mqttString(topic),
      ...(qos === 1 ? [0, 1] : []),
      ...new Uint8Array(payloadBytes).fill(0x61),
    ]);
    this.bytes = packet(qos === 1 ? 0x32 : 0x30, body);
    const topicEnd = this.bytes.length - body.length + 2 + encoder.encode(topic).length;
    this.idAt = topicEnd;
    this.indexAt = qos === 1 ? topicEnd + 2 : topicEnd;
  }
  /** Writes the packet of message `index` (packet id `id`) at `into[at]`; returns the end. */
  write(into: Uint8Array, at: number, index: number, id: number): number {
    into.set(this.bytes, at);
    const view = at + this.indexAt;
    into[view] = index >>> 24;
    into[view + 1] = (index >>> 16) & 0xff;
    into[view + 2] = (index >>> 8) & 0xff;
    into[view + 3] = index & 0xff;
    into[at + this.idAt] = id >> 8;
    into[at + this.idAt + 1] = id & 0xff;
    return at + this.bytes.length;
  }
}

/** What a client hears: each callback is optional. */
interface Handlers {
  connack?: (sessionPresent: boolean, code: number) => void;
  suback?: () => void;
  puback?: () => void;
  pingresp?: () => void;
  /** A PUBLISH: its QoS and the index its payload carries. */
  publish?: (qos: number, index: number) => void;
  closed?: () => void;
}

/**
 * The incoming half: a pull parser over the bytes received, with no object per packet; it
 * answers a QoS 1 PUBLISH with PUBACK (batched into one write per read).
 */
class Parser {
  private pending = new Uint8Array(0);
  constructor(
    private readonly handlers: Handlers,
    private readonly reply: (bytes: Uint8Array) => void,
  ) {}
  push(chunk: Uint8Array): void {
    let data = chunk;
    if (this.pending.length > 0) {
      data = new Uint8Array(this.pending.length + chunk.length);
      data.set(this.pending);
      data.set(chunk, this.pending.length);
    }
    let at = 0;
    const acks: number[] = [];
    while (at + 2 <= data.length) {
      let length = 0;
      let multiplier = 1;
      let cursor = at + 1;
      let complete = false;
      while (cursor < data.length) {
        const byte = data[cursor++]!;
        length += (byte & 0x7f) * multiplier;
        multiplier *= 128;
        if ((byte & 0x80) === 0) {
          complete = true;
          break;
        }
      }
      if (!complete || cursor + length > data.length) break;
      this.handle(data, at, cursor, acks);
      at = cursor + length;
    }
    this.pending = at < data.length ? data.slice(at) : new Uint8Array(0);
    if (acks.length > 0) {
      const out = new Uint8Array(acks.length * 4);
      for (let i = 0; i < acks.length; i++) {
        out[i * 4] = 0x40;
        out[i * 4 + 1] = 2;
        out[i * 4 + 2] = acks[i]! >> 8;
        out[i * 4 + 3] = acks[i]! & 0xff;
      }
      this.reply(out);
    }
  }
  private handle(data: Uint8Array, at: number, body: number, acks: number[]) {
    const type = data[at]! >> 4;
    if (type === 3) {
      const qos = (data[at]! >> 1) & 3;
      const topicBytes = (data[body]! << 8) | data[body + 1]!;
      let cursor = body + 2 + topicBytes;
      if (qos > 0) {
        acks.push((data[cursor]! << 8) | data[cursor + 1]!);
        cursor += 2;
      }
      const index =
        ((data[cursor]! << 24) | (data[cursor + 1]! << 16) | (data[cursor + 2]! << 8)) +
        data[cursor + 3]!;
      this.handlers.publish?.(qos, index >>> 0);
    } else if (type === 2) this.handlers.connack?.((data[body]! & 1) === 1, data[body + 1]!);
    else if (type === 4) this.handlers.puback?.();
    else if (type === 9) this.handlers.suback?.();
    else if (type === 13) this.handlers.pingresp?.();
  }
}

/** One TCP connection speaking the client's side; writes queue while the socket is full. */
class Client {
  private queue: Uint8Array[] = [];
  private drained: (() => void) | null = null;
  private constructor(private socket: Socket<undefined> | null) {}

  static async open(port: number, handlers: Handlers): Promise<Client> {
    const holder: { client?: Client; parser?: Parser } = {};
    const socket = await Bun.connect({
      hostname: "127.0.0.1",
      port,
      socket: {
        data(_socket, chunk) {
          holder.parser!.push(chunk);
        },
        drain() {
          holder.client!.flush();
        },
        close() {
          handlers.closed?.();
        },
        error() {
          handlers.closed?.();
        },
      },
    });
    const client = new Client(socket);
    holder.client = client;
    holder.parser = new Parser(handlers, (bytes) => client.write(bytes));
    return client;
  }

  write(bytes: Uint8Array): void {
    if (this.queue.length > 0) {
      this.queue.push(bytes);
      return;
    }
    const written = this.socket!.write(bytes);
    if (written < bytes.length) this.queue.push(bytes.subarray(written));
  }

  private flush(): void {
    while (this.queue.length > 0) {
      const head = this.queue[0]!;
      const written = this.socket!.write(head);
      if (written < head.length) {
        this.queue[0] = head.subarray(written);
        return;
      }
      this.queue.shift();
    }
    const waiter = this.drained;
    this.drained = null;
    waiter?.();
  }

  /** Resolves once everything written so far has left this process. */
  async drain(): Promise<void> {
    if (this.queue.length === 0) return;
    await new Promise<void>((resolve) => {
      this.drained = resolve;
    });
  }

  close(): void {
    this.socket?.end();
    this.socket = null;
  }
}

/** Resolves when `condition` holds (polled), or rejects after `timeoutMs`. */
async function until(condition: () => boolean, what: string, timeoutMs = 120_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(1);
  }
}

/** A connected client: CONNECT sent, CONNACK accepted. */
async function connected(
  port: number,
  clientId: string,
  handlers: Handlers,
  clean = true,
): Promise<{ client: Client; sessionPresent: boolean }> {
  let connack: { sessionPresent: boolean; code: number } | null = null;
  const client = await Client.open(port, {
    ...handlers,
    connack: (sessionPresent, code) => {
      connack = { sessionPresent, code };
    },
  });
  client.write(connectPacket(clientId, clean));
  await until(() => connack !== null, `CONNACK for ${clientId}`, 10_000);
  const got = connack as unknown as { sessionPresent: boolean; code: number };
  if (got.code !== 0) throw new Error(`CONNACK ${got.code} for ${clientId}`);
  return { client, sessionPresent: got.sessionPresent };
}

async function subscribed(client: Client, state: { subacks: number }, topic: string, qos: number) {
  const before = state.subacks;
  client.write(subscribePacket(topic, qos));
  await until(() => state.subacks > before, `SUBACK on ${topic}`, 10_000);
}

/**
 * Publishes messages `first..first+count-1` on `topic`: QoS 0 in 64 KiB writes, QoS 1 with at most
 * `window` unacknowledged (`acked()` counts PUBACKs).
 */
async function publishAll(
  client: Client,
  options: { topic: string; qos: 0 | 1; count: number; acked?: () => number; window?: number },
): Promise<void> {
  const template = new PublishTemplate(options.topic, options.qos, PAYLOAD_BYTES);
  const perChunk = Math.max(1, Math.floor(65_536 / template.bytes.length));
  let sent = 0;
  let id = 1;
  while (sent < options.count) {
    let batch = Math.min(perChunk, options.count - sent);
    if (options.qos === 1) {
      const room = options.window! - (sent - options.acked!());
      if (room <= 0) {
        await until(() => sent - options.acked!() < options.window!, "PUBACKs", 60_000);
        continue;
      }
      batch = Math.min(batch, room);
    }
    const chunk = new Uint8Array(batch * template.bytes.length);
    let at = 0;
    for (let i = 0; i < batch; i++) {
      at = template.write(chunk, at, sent + i, id);
      id = id === 65_535 ? 1 : id + 1;
    }
    client.write(chunk);
    sent += batch;
    await client.drain();
    if (options.qos === 1 && sent - options.acked!() >= options.window!) await Bun.sleep(0);
  }
}

// ---- Brokers ----------------------------------------------------------------------------------

/** A broker as a column of the table: mosquitto, or an Aria binary under one fsync policy. */
interface Variant {
  label: string;
  bin: string | null;
  fsync: string;
}

interface Broker {
  name: string;
  port: number;
  pid: number;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address !== null ? resolve(address.port) : reject(),
      );
    });
  });
}

async function accepting(port: number): Promise<void> {
  const deadline = performance.now() + 15_000;
  for (;;) {
    try {
      const socket = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {} } });
      socket.end();
      return;
    } catch (error) {
      if (performance.now() > deadline) throw error;
      await Bun.sleep(20);
    }
  }
}

/** A fresh broker (fresh data directory for Aria): each round and row starts from nothing. */
async function startBroker(variant: Variant): Promise<Broker> {
  const name = variant.label;
  const port = await freePort();
  const data = mkdtempSync(join(tmpdir(), "mqtt-vs-mosquitto-"));
  const argv =
    variant.bin === null
      ? [MOSQUITTO, "-p", String(port)]
      : [
          variant.bin,
          "serve",
          "--mqtt-port",
          String(port),
          "--port",
          "0",
          "--admin-port",
          "0",
        ].concat(["--data-dir", data, "--fsync", variant.fsync, "--log-level", "warn"]);
  const child = Bun.spawn(argv, { stdin: "ignore", stdout: "ignore", stderr: "ignore" });
  await accepting(port);
  return {
    name,
    port,
    pid: child.pid,
    stop: async () => {
      child.kill("SIGKILL");
      await child.exited;
      rmSync(data, { recursive: true, force: true });
    },
  };
}

// ---- Rows -------------------------------------------------------------------------------------

interface Measured {
  rate: number;
  note: string;
}

async function qos0Publish(port: number): Promise<Measured> {
  let pongs = 0;
  const { client } = await connected(port, "bench-q0", { pingresp: () => pongs++ });
  const started = performance.now();
  await publishAll(client, { topic: "bench/q0", qos: 0, count: MESSAGES });
  client.write(new Uint8Array([0xc0, 0]));
  await until(() => pongs > 0, "PINGRESP");
  const seconds = (performance.now() - started) / 1000;
  client.close();
  return { rate: MESSAGES / seconds, note: "" };
}

const QOS1_TOPIC = "bench/q1";

/**
 * The disk's bound for QoS 1 with WINDOW in flight under `--fsync always`: one round appends and
 * fdatasyncs WINDOW records of the QoS 1 row's size, in the directory the brokers' data go to.
 */
async function qos1FsyncBound(): Promise<FsyncBound> {
  const dir = mkdtempSync(join(tmpdir(), "mqtt-vs-mosquitto-fsync-"));
  try {
    // The record the door stores for a 3.1.1 QoS 1 PUBLISH: its topic, payload and the QoS flag.
    const properties = encodeStoredProperties({}, 1, false).length;
    const record = recordBytes(encoder.encode(QOS1_TOPIC).length, PAYLOAD_BYTES, properties);
    return await measureFsyncBound(new BunDisk(dir), {
      roundBytes: WINDOW * record,
      rounds: BOUND_ROUNDS,
      nowMs: () => performance.now(),
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function qos1Publish(port: number): Promise<Measured> {
  let acked = 0;
  const { client } = await connected(port, "bench-q1", { puback: () => acked++ });
  const started = performance.now();
  await publishAll(client, {
    topic: QOS1_TOPIC,
    qos: 1,
    count: MESSAGES,
    acked: () => acked,
    window: WINDOW,
  });
  await until(() => acked >= MESSAGES, "the last PUBACK");
  const seconds = (performance.now() - started) / 1000;
  client.close();
  return { rate: MESSAGES / seconds, note: "" };
}

async function fanOut(port: number): Promise<Measured> {
  const counts = new Int32Array(FAN_SUBSCRIBERS);
  const subscribers: Client[] = [];
  for (let index = 0; index < FAN_SUBSCRIBERS; index++) {
    const state = { subacks: 0 };
    const { client } = await connected(port, `bench-fan-${index}`, {
      suback: () => state.subacks++,
      publish: () => counts[index]!++,
    });
    await subscribed(client, state, "bench/fan", 0);
    subscribers.push(client);
  }
  const { client: publisher } = await connected(port, "bench-fan-pub", {});
  const started = performance.now();
  await publishAll(publisher, { topic: "bench/fan", qos: 0, count: FAN_MESSAGES });
  const total = () => counts.reduce((sum, count) => sum + count, 0);
  let last = total();
  let lastChange = performance.now();
  let lastAt = performance.now();
  while (total() < FAN_MESSAGES * FAN_SUBSCRIBERS && performance.now() - lastChange < SILENCE_MS) {
    await Bun.sleep(2);
    const now = total();
    if (now !== last) {
      last = now;
      lastChange = performance.now();
      lastAt = lastChange;
    }
  }
  const delivered = total();
  const seconds = (lastAt - started) / 1000;
  publisher.close();
  for (const client of subscribers) client.close();
  return {
    rate: delivered / seconds,
    note: `${delivered.toLocaleString("en")} of ${(FAN_MESSAGES * FAN_SUBSCRIBERS).toLocaleString("en")} delivered`,
  };
}

async function offlineSession(port: number): Promise<Measured> {
  const state = { subacks: 0 };
  const first = await connected(port, "bench-offline", { suback: () => state.subacks++ }, false);
  await subscribed(first.client, state, "bench/offline", 1);
  first.client.write(new Uint8Array([0xe0, 0]));
  first.client.close();
  await Bun.sleep(200);
  let acked = 0;
  const { client: publisher } = await connected(port, "bench-offline-pub", {
    puback: () => acked++,
  });
  const publishStarted = performance.now();
  await publishAll(publisher, {
    topic: "bench/offline",
    qos: 1,
    count: OFFLINE,
    acked: () => acked,
    window: WINDOW,
  });
  await until(() => acked >= OFFLINE, "the offline publishes' PUBACKs", 600_000);
  const publishSeconds = (performance.now() - publishStarted) / 1000;
  publisher.close();
  let received = 0;
  let inOrder = true;
  let expected = 0;
  let lastAt = 0;
  const started = performance.now();
  const back = await connected(
    port,
    "bench-offline",
    {
      publish: (_qos, index) => {
        if (index !== expected) inOrder = false;
        expected = index + 1;
        received++;
        lastAt = performance.now();
      },
    },
    false,
  );
  let seen = 0;
  let lastChange = performance.now();
  while (received < OFFLINE && performance.now() - lastChange < SILENCE_MS) {
    await Bun.sleep(5);
    if (received !== seen) {
      seen = received;
      lastChange = performance.now();
    }
  }
  back.client.close();
  const seconds = ((lastAt || performance.now()) - started) / 1000;
  const first1 = expected - received;
  return {
    rate: received / seconds,
    note:
      `${received.toLocaleString("en")} of ${OFFLINE.toLocaleString("en")} delivered, ` +
      `${inOrder ? "in order" : `not in order (first index ${first1})`}, session present ` +
      `${back.sessionPresent}; publishing took ${publishSeconds.toFixed(1)} s`,
  };
}

// ---- The client's own speed ---------------------------------------------------------------------

/** QoS 0 publishes into a socket whose other end discards: the client's send ceiling. */
async function clientSendCeiling(): Promise<number> {
  let bytes = 0;
  const sink = Bun.listen({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      data(_socket, chunk) {
        bytes += chunk.length;
      },
    },
  });
  const client = await Client.open(sink.port, {});
  const template = new PublishTemplate("bench/q0", 0, PAYLOAD_BYTES);
  const started = performance.now();
  await publishAll(client, { topic: "bench/q0", qos: 0, count: MESSAGES });
  await until(() => bytes >= MESSAGES * template.bytes.length, "the sink");
  const seconds = (performance.now() - started) / 1000;
  client.close();
  sink.stop(true);
  return MESSAGES / seconds;
}

/** PUBLISH packets parsed per second from 64 KiB chunks: the client's receive ceiling. */
function clientParseCeiling(): number {
  const template = new PublishTemplate("bench/fan", 1, PAYLOAD_BYTES);
  const count = 1_000_000;
  const buffer = new Uint8Array(count * template.bytes.length);
  for (let index = 0, at = 0; index < count; index++)
    at = template.write(buffer, at, index, (index % 65_535) + 1);
  let got = 0;
  const parser = new Parser({ publish: () => got++ }, () => undefined);
  const started = performance.now();
  for (let at = 0; at < buffer.length; at += 65_536) parser.push(buffer.subarray(at, at + 65_536));
  const seconds = (performance.now() - started) / 1000;
  if (got !== count) throw new Error(`parser counted ${got} of ${count}`);
  return count / seconds;
}

// ---- Main -------------------------------------------------------------------------------------

const ALL_ROWS: {
  key: string;
  name: string;
  unit: string;
  run: (port: number) => Promise<Measured>;
}[] = [
  { key: "qos0", name: `QoS 0 publish, ${PAYLOAD_BYTES} B`, unit: "msg/s", run: qos0Publish },
  {
    key: "qos1",
    name: `QoS 1 publish, ${PAYLOAD_BYTES} B, ${WINDOW} in flight`,
    unit: "msg/s",
    run: qos1Publish,
  },
  {
    key: "fanout",
    name: `fan-out to ${FAN_SUBSCRIBERS} subscribers`,
    unit: "deliveries/s",
    run: fanOut,
  },
  {
    key: "offline",
    name: `offline persistent session, ${OFFLINE.toLocaleString("en")} missed`,
    unit: "msg/s on return",
    run: offlineSession,
  },
];
const ROW_KEYS = (values.rows ?? "qos0,qos1,fanout,offline").split(",");
const ROWS = ALL_ROWS.filter((row) => ROW_KEYS.includes(row.key));

const fmt = (value: number) => Math.round(value).toLocaleString("en");
const load = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
const version = Bun.spawnSync([MOSQUITTO, "-h"]).stdout.toString().split("\n")[0]!.trim();
const versionOf = (bin: string) => Bun.spawnSync([bin, "--version"]).stdout.toString().trim();
const VARIANTS: Variant[] = [{ label: "mosquitto", bin: null, fsync: "-" }];
for (const fsync of FSYNCS) VARIANTS.push({ label: `Aria, fsync ${fsync}`, bin: BIN, fsync });
if (BASELINE !== undefined)
  for (const fsync of FSYNCS)
    VARIANTS.push({ label: `baseline Aria, fsync ${fsync}`, bin: BASELINE, fsync });

console.log(`# MQTT: Aria vs mosquitto (${new Date().toISOString()})`);
console.log(`machine: ${cpus().length} cores (${cpus()[0]?.model}); load before: ${load()}`);
console.log(
  `mosquitto: ${version} (default config: persistence off, no fsync); aria: ${versionOf(BIN)}` +
    (BASELINE === undefined ? "" : `; baseline: ${versionOf(BASELINE)}`),
);
const sendCeiling = await clientSendCeiling();
const parseCeiling = clientParseCeiling();
console.log(
  `client ceilings: send ${fmt(sendCeiling)} QoS 0 msg/s into a discarding socket; parse ` +
    `${fmt(parseCeiling)} PUBLISH/s`,
);

const results = new Map<string, Map<string, Measured[]>>();
for (const row of ROWS)
  results.set(row.name, new Map(VARIANTS.map((variant) => [variant.label, []])));
const bounds: FsyncBound[] = [];
for (let round = 0; round < ROUNDS; round++)
  for (const row of ROWS) {
    if (row.run === qos1Publish) {
      const bound = await qos1FsyncBound();
      bounds.push(bound);
      console.error(
        `round ${round + 1} fsync bound: append + fdatasync of ${fmt(bound.roundBytes)} B: ` +
          `median ${bound.medianUs.toFixed(0)} µs (p90 ${bound.p90Us.toFixed(0)}) → ` +
          `${fmt(boundRate(bound, WINDOW))} msg/s at ${WINDOW} per round`,
      );
    }
    for (let turn = 0; turn < VARIANTS.length; turn++) {
      // Each round starts at another broker, so none is always first after a quiet spell.
      const variant = VARIANTS[(turn + round) % VARIANTS.length]!;
      const broker = await startBroker(variant);
      try {
        const measured = await row.run(broker.port);
        results.get(row.name)!.get(variant.label)!.push(measured);
        console.error(
          `round ${round + 1} ${variant.label} ${row.name}: ${fmt(measured.rate)} ${row.unit} ${measured.note}`,
        );
      } finally {
        await broker.stop();
      }
    }
  }

const arias = VARIANTS.slice(1);
console.log("");
console.log(`| row | mosquitto | ${arias.map((v) => `${v.label} | / mosquitto`).join(" | ")} |`);
console.log(`| --- | ---: | ${arias.map(() => "---: | ---:").join(" | ")} |`);
for (const row of ROWS) {
  const got = results.get(row.name)!;
  const mosquitto = median(got.get("mosquitto")!.map((m) => m.rate));
  const cells = arias.map((variant) => {
    const rate = median(got.get(variant.label)!.map((m) => m.rate));
    return `${fmt(rate)} | ${(rate / mosquitto).toFixed(2)}`;
  });
  console.log(`| ${row.name} (${row.unit}) | ${fmt(mosquitto)} | ${cells.join(" | ")} |`);
}
const qos1 = ROWS.find((row) => row.run === qos1Publish);
if (qos1 !== undefined) {
  const qos1Rate = (label: string) =>
    median(
      results
        .get(qos1.name)!
        .get(label)!
        .map((m) => m.rate),
    );
  const boundRates = bounds.map((bound) => boundRate(bound, WINDOW));
  const fsyncBound = median(boundRates);
  const fsyncUs = median(bounds.map((bound) => bound.medianUs));
  const qos1Mosquitto = qos1Rate("mosquitto");
  const limit = Math.min(qos1Mosquitto, fsyncBound);
  console.log("");
  console.log(
    `fsync bound (same run, ${ROUNDS} rounds): append + fdatasync of ${WINDOW} records ` +
      `(${fmt(bounds[0]?.roundBytes ?? 0)} B) median ${fsyncUs.toFixed(0)} µs → ` +
      `${fmt(fsyncBound)} msg/s (rounds: ${boundRates.map(fmt).join(", ")}); ` +
      `min(mosquitto ${fmt(qos1Mosquitto)}, bound) = ${fmt(limit)}`,
  );
  for (const variant of arias.filter((v) => v.fsync === "always")) {
    const rate = qos1Rate(variant.label);
    // With WINDOW in flight the whole window is one group: the client sends the next only after
    // its PUBACKs, so a round is the same binary's round without fsync plus one fsync.
    const never = arias.find((v) => v.bin === variant.bin && v.fsync === "never");
    const serial =
      never === undefined ? NaN : WINDOW / (WINDOW / qos1Rate(never.label) + fsyncUs / 1e6);
    console.log(
      `- ${qos1.name}, ${variant.label}: ${fmt(rate)} msg/s = ${(rate / fsyncBound).toFixed(2)} ` +
        `of the fsync bound, ${(rate / limit).toFixed(2)} of min(mosquitto, bound)` +
        (never === undefined
          ? ""
          : `; ${(rate / serial).toFixed(2)} of ${fmt(serial)} (its fsync-never round + one fsync)`),
    );
  }
}
console.log("");
for (const row of ROWS)
  for (const variant of VARIANTS) {
    const note = results.get(row.name)!.get(variant.label)!.at(-1)?.note;
    if (note) console.log(`- ${row.name}, ${variant.label} (last round): ${note}`);
  }
console.log(
  `\nmedians of ${ROUNDS} rounds; mosquitto never fsyncs, so the Aria columns with fsync never ` +
    `(or interval) are the like-for-like ones; load after: ${load()}`,
);
