/**
 * `aria sub`: subscribes and prints messages, one JSON line each (or raw payloads), from the live
 * end, the oldest message, a seq or a time; stops after --limit messages or, with
 * --until-caught-up, when the subscription reaches the live end.
 */
import { connect, type Message, type StartFrom } from "../client/mod.ts";
import { AriaError } from "../protocol/mod.ts";
import { runtime } from "../runtime/current_runtime.ts";
import { OutputClosedError } from "../runtime/runtime.ts";
import { Filter } from "../topic/filter.ts";
import { parseCommand, parseCount, stringFlag, UsageError, checkUrl, URL_DEFAULT } from "./args.ts";
import { EXIT_FAILURE, EXIT_OK, type CliIo } from "./cli_io.ts";

/** Usage of `aria sub`. */
export const SUB_USAGE = `Usage: aria sub [--url tcp://127.0.0.1:7400] FILTER... [options]

Subscribes to FILTERs (a topic, a subtree like app/orders/**, or **) and prints each message.

Options:
  --url URL                  the server (default tcp://127.0.0.1:7400)
  --from live|earliest|SEQ|TIME
                             where to start; TIME is ISO-8601 (default live)
  --limit N                  exit after N messages
  --until-caught-up          exit when the subscription reaches the live end
  --format json|raw          json: one {"seq","time","topic","payload"} line per message
                             (payloadBase64 when the payload is not UTF-8); raw: payload + newline
  -h, --help                 show this help

When standard output closes (its reader exits, as in \`aria sub ... | head\`), sub stops and exits 0.
`;

const OUTPUT_CHUNK_BYTES = 64 * 1024;

/** Parses --from. */
export function parseFrom(text: string): StartFrom {
  if (text === "live" || text === "earliest") return text;
  if (/^\d+$/.test(text)) {
    const seq = Number(text);
    if (seq < 1 || !Number.isSafeInteger(seq)) throw new UsageError(`--from: seq ${text} is out of range`);
    return seq;
  }
  const time = Date.parse(text);
  if (!/^\d{4}-\d{2}-\d{2}/.test(text) || Number.isNaN(time)) throw new UsageError(`--from: "${text}" is not live, earliest, a seq or an ISO-8601 time`);
  return new Date(time);
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
  const body = payload === null ? { payloadBase64: Buffer.from(message.payload).toString("base64") } : { payload };
  return JSON.stringify({ seq: message.seq, time, topic: message.topic, ...body });
}

/** Runs `aria sub`. */
export async function subCommand(args: string[], io: CliIo, write: (text: string | Uint8Array) => Promise<void> = (text) => runtime.writeStdoutAsync(text)): Promise<number> {
  const { values, positionals } = parseCommand(args, {
    url: { type: "string" },
    from: { type: "string" },
    limit: { type: "string" },
    "until-caught-up": { type: "boolean" },
    format: { type: "string" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help === true) {
    io.out(SUB_USAGE);
    return EXIT_OK;
  }
  if (positionals.length === 0) throw new UsageError("missing FILTER");
  const parsed = Filter.parse(positionals);
  if (!parsed.ok) throw new UsageError(parsed.reason);
  const format = stringFlag(values, "format", "json");
  if (format !== "json" && format !== "raw") throw new UsageError(`--format: "${format}" is not json or raw`);
  const from = parseFrom(stringFlag(values, "from", "live"));
  const limit = typeof values.limit === "string" ? parseCount(values.limit, "--limit") : Infinity;
  const url = checkUrl(stringFlag(values, "url", URL_DEFAULT));
  let client: Awaited<ReturnType<typeof connect>>;
  try {
    client = await connect(url, { clientName: "aria-sub" });
  } catch (error) {
    io.err(`aria sub: cannot connect to ${url}: ${(error as Error).message}\n`);
    return EXIT_FAILURE;
  }
  const subscription = client.subscribe(positionals, { from, untilCaughtUp: values["until-caught-up"] === true });
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
        if (format === "json") pending += messageJson(message) + "\n";
        else parts.push(message.payload, newline);
        printed++;
        if (printed >= limit) break batches;
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
    io.err(`aria sub: ${error instanceof AriaError ? `${error.code}: ` : ""}${(error as Error).message}\n`);
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
  }
}
