/**
 * `aria sub`: subscribes and prints messages, one JSON line each (or raw payloads), from the live
 * end, the oldest message, a seq, a time or a time ago (`15m`); stops after --limit messages or,
 * with --until-caught-up, when the subscription reaches the live end. A dropped connection and
 * its resumption are one line each on stderr (the client resumes with no gap or duplicate).
 * With --durable NAME it is a durable consumer: each message is acknowledged once written out;
 * with --shared as well, a member of the shared group NAME (each message to one member).
 */
import type { ClientSubscription, ConnectionEvent, Message, StartFrom } from "../client/mod.ts";
import { AriaError, consumerNameRefusal, type StartPosition } from "../protocol/mod.ts";
import { OutputClosedError, runtime } from "../runtime/mod.ts";
import { connect } from "../server/mod.ts";
import { Filter } from "../topic/filter.ts";
import {
  authTokenOf,
  CLIENT_AUTH_FLAGS,
  clientAuthUsage,
  clientUrlOf,
  parseCommand,
  parseCount,
  stringFlag,
  UsageError,
  URL_DEFAULT,
} from "./args.ts";
import { CLIENT_TLS_FLAGS, clientTlsOf, clientTlsUsage } from "./tls_files.ts";
import { EXIT_FAILURE, EXIT_OK, type CliIo } from "./cli_io.ts";
import { checkForeignSyntax } from "./input.ts";

/** Usage of `aria sub`. */
export const SUB_USAGE = `Usage: aria sub [--url tcp://127.0.0.1:7400] FILTER... [options]

Subscribes to FILTERs (a topic, a subtree like app/orders/**, a pattern like app/*/orders
where * stands for one whole segment, or **) and prints each message.

Options:
  --url URL                  the server: tcp://HOST:PORT, or tls://HOST:PORT for TLS
                             (default ARIA_URL, else tcp://127.0.0.1:7400)
${clientAuthUsage(29)}${clientTlsUsage(29)}  --from live|earliest|SEQ|AGO|TIME
                             where to start (default live): the live end, the oldest
                             message, a seq (1200), a time ago (30s, 15m, 2h, 7d, 1w)
                             or an ISO-8601 time (2026-01-31T12:00:00Z)
  --limit N                  exit after N messages
  --until-caught-up          exit when the subscription reaches the live end
  --format json|raw          json: one {"seq","time","topic","payload"} line per message
                             (payloadBase64 when the payload is not UTF-8); raw: payload + newline
  --durable NAME             a durable consumer: the server keeps its position, and the next
                             \`aria sub --durable NAME\` (same FILTERs) starts after the last
                             message acknowledged (--from applies only to a new consumer)
  --ack auto|none            with --durable: auto (default) acknowledges each message once it
                             is written to standard output; none acknowledges nothing (see
                             what the consumer would get without moving it)
  --shared                   with --durable: NAME is a shared group; every \`aria sub
                             --durable NAME --shared\` running is a member, each message
                             goes to one of them (all of a topic's to the same one), and
                             what a member that ends did not acknowledge goes to another
  -h, --help                 show this help

Filters use '/' between segments, * for one segment and ** for a subtree (quote them in a
shell): MQTT's app/+/x is app/*/x and app/# is app/**; NATS's orders.* is orders/* and
orders.> is orders/**.
When the connection drops, sub says so on stderr, reconnects and resumes where it was.
When standard output closes (its reader exits, as in \`aria sub ... | head\`), sub stops and exits 0.
`;

const OUTPUT_CHUNK_BYTES = 64 * 1024;

/** What --from takes, for its errors. */
const FROM_FORMS =
  "live, earliest, a seq (1200), a time ago (30s, 15m, 2h, 7d, 1w) or an ISO-8601 time (2026-01-31T12:00:00Z)";

/** A time ago's units, in µs. */
const AGO_UNIT_US: Record<string, number> = {
  s: 1e6,
  m: 60e6,
  h: 3600e6,
  d: 86_400e6,
  w: 604_800e6,
};

/**
 * Parses --from: `live`, `earliest`, a seq, a time ago (`30s`, `15m`, `2h`, `7d`, `1w`: that long
 * before `nowUs`, as `nats sub --since` reads it) or an ISO-8601 time.
 */
export function parseFrom(text: string, nowUs: number): StartFrom {
  if (text === "live" || text === "earliest") return text;
  if (/^\d+$/.test(text)) {
    const seq = Number(text);
    if (seq < 1 || !Number.isSafeInteger(seq))
      throw new UsageError(`--from: seq ${text} is out of range`);
    return seq;
  }
  const ago = /^(\d+)([smhdw])$/.exec(text);
  if (ago !== null) {
    const count = Number(ago[1]);
    if (count === 0)
      throw new UsageError(`--from: "${text}" is now: use live, or a time ago of at least 1s`);
    // Further back than 1970 is from the oldest message.
    return { timeUs: Math.max(0, nowUs - count * AGO_UNIT_US[ago[2]]) };
  }
  if (/^-\d/.test(text))
    throw new UsageError(
      `--from: "${text}": a time ago has no sign (5m is 5 minutes ago); --from takes ${FROM_FORMS}`,
    );
  const time = Date.parse(text);
  if (!/^\d{4}-\d{2}-\d{2}/.test(text) || Number.isNaN(time))
    throw new UsageError(`--from: "${text}" is not ${FROM_FORMS}`);
  return new Date(time);
}

/** A start as sub's stderr names it. */
export function describeStart(start: StartPosition | null): string {
  if (start === null) return "its start";
  if (start.kind === "seq") return `seq ${start.seq}`;
  if (start.kind === "time") return new Date(Math.floor(start.timeUs / 1000)).toISOString();
  return start.kind === "live" ? "the live end" : "the oldest message";
}

/** The stderr line of a connection event. */
export function connectionEventLine(
  event: ConnectionEvent,
  subscription: ClientSubscription | null,
): string {
  if (event.kind === "disconnected")
    return `aria sub: ${event.reason}${event.reconnecting ? "; reconnecting" : ""}\n`;
  if (event.kind === "reconnected")
    return `aria sub: reconnected; resumed from ${describeStart(subscription?.startSent ?? null)}\n`;
  return `aria sub: gave up reconnecting after ${event.attempts} attempt${event.attempts === 1 ? "" : "s"}\n`;
}

const UTF8 = new TextDecoder("utf-8", { fatal: true });

/** One message as the JSON line `aria sub` prints. */
export function messageJson(message: Message): string {
  let payload: string | null = null;
  try {
    payload = UTF8.decode(message.payload);
  } catch {
    payload = null;
  }
  const time = new Date(Math.floor(message.timeUs / 1000)).toISOString();
  const body =
    payload === null
      ? { payloadBase64: Buffer.from(message.payload).toString("base64") }
      : { payload };
  return JSON.stringify({ seq: message.seq, time, topic: message.topic, ...body });
}

/**
 * `--from -5m` as `--from=-5m`: parseArgs refuses a value that starts with "-" as "ambiguous",
 * and the answer to a time ago written with a sign should say what --from takes. A "-" and a digit
 * is never one of sub's flags.
 */
function joinDashValues(args: readonly string[]): string[] {
  const joined: string[] = [];
  for (let index = 0; index < args.length; index++) {
    if (args[index] === "--") return [...joined, ...args.slice(index)];
    if (args[index] === "--from" && /^-\d/.test(args[index + 1] ?? ""))
      joined.push(`--from=${args[++index]}`);
    else joined.push(args[index]);
  }
  return joined;
}

/** Runs `aria sub`. */
export async function subCommand(
  args: string[],
  io: CliIo,
  write: (text: string | Uint8Array) => Promise<void> = (text) => runtime.writeStdoutAsync(text),
): Promise<number> {
  const { values, positionals } = parseCommand(joinDashValues(args), {
    url: { type: "string" },
    from: { type: "string" },
    limit: { type: "string" },
    "until-caught-up": { type: "boolean" },
    format: { type: "string" },
    durable: { type: "string" },
    ack: { type: "string" },
    shared: { type: "boolean" },
    ...CLIENT_AUTH_FLAGS,
    ...CLIENT_TLS_FLAGS,
    help: { type: "boolean", short: "h" },
  });
  if (values.help === true) {
    io.out(SUB_USAGE);
    return EXIT_OK;
  }
  if (positionals.length === 0) throw new UsageError("missing FILTER");
  const parsed = Filter.parse(positionals);
  if (!parsed.ok) throw new UsageError(parsed.reason);
  checkForeignSyntax(positionals, (line) => io.err(`aria sub: ${line}\n`));
  const format = stringFlag(values, "format", "json");
  if (format !== "json" && format !== "raw")
    throw new UsageError(`--format: "${format}" is not json or raw`);
  const from = parseFrom(stringFlag(values, "from", "live"), runtime.clock.nowUs());
  const limit = typeof values.limit === "string" ? parseCount(values.limit, "--limit") : Infinity;
  const durable = typeof values.durable === "string" ? values.durable : undefined;
  if (durable !== undefined) {
    const refusal = consumerNameRefusal(durable);
    if (refusal !== null) throw new UsageError(`--durable: ${refusal}`);
  }
  const ack = stringFlag(values, "ack", "auto");
  if (ack !== "auto" && ack !== "none") throw new UsageError(`--ack: "${ack}" is not auto or none`);
  if (typeof values.ack === "string" && durable === undefined)
    throw new UsageError("--ack applies to a durable consumer: add --durable NAME");
  const shared = values.shared === true;
  if (shared && durable === undefined)
    throw new UsageError("--shared needs --durable NAME (the shared group's name)");
  // Acknowledged once written out (not once handed to this loop): a crash before the write
  // leaves the message to the next run.
  const ackWritten = durable !== undefined && ack === "auto";
  let written: Message | null = null;
  const environment = io.env?.() ?? {};
  const url = clientUrlOf(values, environment, URL_DEFAULT);
  const authToken = authTokenOf(values, environment);
  const tls = await clientTlsOf(values, url, io);
  if (!tls.ok) {
    io.err(`aria sub: ${tls.message}\n`);
    return EXIT_FAILURE;
  }
  let client: Awaited<ReturnType<typeof connect>>;
  let subscription: ClientSubscription | null = null;
  try {
    client = await connect(url, {
      clientName: "aria-sub",
      tls: tls.tls,
      authToken,
      onConnectionEvent: (event) => io.err(connectionEventLine(event, subscription)),
    });
  } catch (error) {
    io.err(`aria sub: cannot connect to ${url}: ${(error as Error).message}\n`);
    return EXIT_FAILURE;
  }
  subscription = client.subscribe(positionals, {
    from,
    untilCaughtUp: values["until-caught-up"] === true,
    durable,
    shared,
    ack: "manual",
  });
  let printed = 0;
  let pending = "";
  const parts: Uint8Array[] = [];
  const newline = new Uint8Array([10]);
  try {
    // One DATA frame at a time, written out once it is formatted: a replay goes out in chunks of
    // up to a frame, and a live message is printed as soon as it arrives (not once 64 KiB of
    // them have gathered, which left a quiet live subscription printing nothing).
    batches: for await (const batch of limit > 0 ? subscription.batches() : []) {
      for (const message of batch) {
        if (format === "json") pending += `${messageJson(message)}\n`;
        else parts.push(message.payload, newline);
        written = message;
        printed++;
        if (printed >= limit) {
          // Written (and acknowledged) before the break ends the subscription.
          await flushOutput();
          break batches;
        }
        if (pending.length >= OUTPUT_CHUNK_BYTES || parts.length >= 1024) await flushOutput();
      }
      await flushOutput();
    }
    await flushOutput();
  } catch (error) {
    // The reader of standard output is gone: nothing more can be printed, and that is how a
    // pipeline such as `aria sub … | head` ends.
    if (error instanceof OutputClosedError) {
      await client.close();
      return EXIT_OK;
    }
    await flushOutput().catch((flushError: unknown) => {
      if (!(flushError instanceof OutputClosedError)) throw flushError;
    });
    io.err(
      `aria sub: ${error instanceof AriaError ? `${error.code}: ` : ""}${(error as Error).message}\n`,
    );
    await client.close();
    return EXIT_FAILURE;
  }
  await client.close();
  return EXIT_OK;

  async function flushOutput(): Promise<void> {
    if (pending.length > 0) {
      const text = pending;
      pending = "";
      await write(text);
    }
    if (parts.length > 0) {
      await write(Buffer.concat(parts));
      parts.length = 0;
    }
    if (ackWritten && written !== null) written.ack();
    written = null;
  }
}
