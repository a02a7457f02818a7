/**
 * `aria pub`: publishes one message, a file's bytes, each line of stdin, or JSON lines, and exits 0
 * once every message is acknowledged, printing the acknowledged seq range on stderr. Binary-safe:
 * stdin is read as bytes and split on "\n" bytes, never decoded; a JSON line may carry its payload
 * as payloadBase64 (as `aria sub --format json` prints a payload that is not UTF-8), so
 * `aria sub --format json … | aria pub --json-lines` copies any stream exactly.
 */
import { connect } from "../server/mod.ts";
import { PAYLOAD_BYTES_MAX } from "../constants.ts";
import { AriaError } from "../protocol/mod.ts";
import { runtime } from "../runtime/mod.ts";
import { validateTopic } from "../topic/topic.ts";
import {
  authTokenOf,
  CLIENT_AUTH_FLAGS,
  clientAuthUsage,
  clientUrlOf,
  parseCommand,
  UsageError,
  URL_DEFAULT,
} from "./args.ts";
import { EXIT_FAILURE, EXIT_OK, type CliIo } from "./cli_io.ts";
import { byteLinesOf, checkForeignSyntax } from "./input.ts";
import { CLIENT_TLS_FLAGS, clientTlsOf, clientTlsUsage } from "./tls_files.ts";

/** Usage of `aria pub`. */
export const PUB_USAGE = `Usage: aria pub [--url tcp://127.0.0.1:7400] TOPIC [MESSAGE]
       aria pub [--url tcp://127.0.0.1:7400] TOPIC --file PATH
       aria pub [--url tcp://127.0.0.1:7400] --json-lines

Publishes MESSAGE on TOPIC; with --file, the file's bytes as one message; without either, each
line of stdin is one message on TOPIC (its bytes exactly, without the line's end, LF or CRLF).
With --json-lines, each stdin line is {"topic": "...", "payload": "..."} or, for bytes that are
not text, {"topic": "...", "payloadBase64": "..."} (as 'aria sub --format json' prints them).
Exits 0 once every message is acknowledged; prints the seq range on stderr. On a failure (a lost
connection) exits 1 and prints how many messages were sent and acknowledged, the last
acknowledged seq, and the input line to resend from (those sent but not acknowledged may or may
not be stored: a resend may repeat them).

Options:
  --url URL        the server: tcp://HOST:PORT, or tls://HOST:PORT for TLS
                   (default ARIA_URL, else tcp://127.0.0.1:7400)
${clientAuthUsage(19)}${clientTlsUsage(19)}  --file PATH      publish the bytes of PATH as one message on TOPIC
  --json-lines     read {"topic", "payload" or "payloadBase64"} lines from stdin
  -h, --help       show this help
`;

/** Publishes in flight before pub waits for acknowledgements: bounds memory for endless stdin. */
const IN_FLIGHT_MAX = 16_384;

/** Runs `aria pub`. */
export async function pubCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommand(args, {
    url: { type: "string" },
    "json-lines": { type: "boolean" },
    file: { type: "string" },
    ...CLIENT_AUTH_FLAGS,
    ...CLIENT_TLS_FLAGS,
    help: { type: "boolean", short: "h" },
  });
  if (values.help === true) {
    io.out(PUB_USAGE);
    return EXIT_OK;
  }
  const jsonLines = values["json-lines"] === true;
  const file = typeof values.file === "string" ? values.file : null;
  const [topic, message, ...extra] = positionals;
  if (extra.length > 0)
    throw new UsageError(`unexpected argument "${extra[0]}" (quote a MESSAGE with spaces)`);
  if (file !== null && jsonLines)
    throw new UsageError("--file and --json-lines exclude each other");
  if (file !== null && message !== undefined)
    throw new UsageError("--file PATH is the message: give no MESSAGE with it");
  if (file === "") throw new UsageError("--file needs a path");
  if (!jsonLines) {
    if (topic === undefined) throw new UsageError("missing TOPIC");
    const reason = validateTopic(topic);
    if (reason !== null) throw new UsageError(`TOPIC "${topic}": ${reason}`);
    checkForeignSyntax([topic], (line) => io.err(`aria pub: ${line}\n`));
  } else if (topic !== undefined) {
    throw new UsageError("--json-lines takes topics from the input, not as an argument");
  }
  const environment = io.env?.() ?? {};
  const url = clientUrlOf(values, environment, URL_DEFAULT);
  const authToken = authTokenOf(values, environment);
  const tls = await clientTlsOf(values, url, io);
  if (!tls.ok) {
    io.err(`aria pub: ${tls.message}\n`);
    return EXIT_FAILURE;
  }
  let fileBytes: Uint8Array | null = null;
  if (file !== null) {
    // Read before connecting: a missing file fails alone, whether a server runs or not.
    const read = await runtime.readBytesFile(file, { bytesMax: PAYLOAD_BYTES_MAX });
    if (!read.ok) {
      io.err(`aria pub: --file: ${read.reason}\n`);
      return EXIT_FAILURE;
    }
    fileBytes = read.bytes;
  }
  let client: Awaited<ReturnType<typeof connect>>;
  let lostReason: (reason: string) => void = () => {};
  try {
    client = await connect(url, {
      clientName: "aria-pub",
      reconnect: false,
      onConnectionEvent: (event) => {
        if (event.kind === "disconnected") lostReason(event.reason);
      },
      tls: tls.tls,
      authToken,
    });
  } catch (error) {
    io.err(`aria pub: cannot connect to ${url}: ${(error as Error).message}\n`);
    return EXIT_FAILURE;
  }
  let first = Infinity;
  let last = -Infinity;
  let count = 0;
  /** Messages handed to the connection, and how many from the first on were all acknowledged. */
  let sent = 0;
  let ackedPrefix = 0;
  const ackedAhead = new Set<number>();
  /** The input line of each message not acknowledged yet (a stream's; 0: the argument/file). */
  const lineOf = new Map<number, number>();
  let lastLine = 0;
  let inFlight: Promise<number>[] = [];
  /** The first publish that failed: reported by settle(); no more lines are sent after it. */
  let failure: unknown = null;
  // The connection ended (no reconnect): a publish after it would wait for one that never comes.
  lostReason = (reason) => {
    failure ??= new AriaError("ARIA_ERR_CONNECTION_LOST", reason);
  };
  const settle = async () => {
    await Promise.all(inFlight);
    inFlight = [];
  };
  try {
    const send = async (t: string, payload: Uint8Array | string, line = 0) => {
      if (failure !== null) throw failure;
      const index = sent++;
      lineOf.set(index, line);
      lastLine = line;
      const published = client.publish(t, payload);
      // Handled at once: while stdin waits for the next line, a rejection awaited only at the
      // next settle() was an unhandled one (a stack trace and exit 1 instead of the message).
      published.then(
        (seq) => {
          first = Math.min(first, seq);
          last = Math.max(last, seq);
          count++;
          ackedAhead.add(index);
          lineOf.delete(index);
          while (ackedAhead.delete(ackedPrefix)) ackedPrefix++;
        },
        (error: unknown) => {
          failure ??= error;
        },
      );
      inFlight.push(published);
      if (inFlight.length >= IN_FLIGHT_MAX) await settle();
    };
    if (fileBytes !== null) {
      await send(topic, fileBytes);
    } else if (message !== undefined && !jsonLines) {
      await send(topic, message);
    } else {
      let lineNumber = 0;
      for await (const line of byteLinesOf(runtime.stdinChunks())) {
        lineNumber++;
        if (!jsonLines) {
          await send(topic, line, lineNumber);
          continue;
        }
        const parsed = parseJsonLine(line, lineNumber);
        if (parsed !== null) await send(parsed.topic, parsed.payload, lineNumber);
      }
    }
    await settle();
  } catch (error) {
    io.err(
      `aria pub: ${error instanceof AriaError ? `${error.code}: ` : ""}${(error as Error).message}\n`,
    );
    // Acknowledgements settle before a rejection is seen here: the counts are final.
    await Promise.allSettled(inFlight);
    // Every message sent acknowledged: the line after the last one sent (a stream's), else none.
    const resendLine = lineOf.get(ackedPrefix) ?? (lastLine > 0 ? lastLine + 1 : null);
    // Only a lost connection leaves the fate of what was sent unknown; a refusal (a bad line, a
    // permission) is the error's one line, as before.
    const lost = error instanceof AriaError && error.code === "ARIA_ERR_CONNECTION_LOST";
    if (lost && sent > 0)
      io.err(`aria pub: ${unacknowledgedReport(sent, count, last, resendLine)}\n`);
    await client.close();
    return EXIT_FAILURE;
  }
  await client.close();
  io.err(
    count === 0
      ? "aria pub: no messages\n"
      : `acknowledged seq ${first}..${last} (${count} message${count === 1 ? "" : "s"})\n`,
  );
  return EXIT_OK;
}

/**
 * What an operator resends after a failure: from the first message not acknowledged on (its
 * input line, with a stream: `resendLine`; null when every message sent was acknowledged, 0 for
 * the argument or file); those sent may be stored or not (a resend may repeat them).
 */
export function unacknowledgedReport(
  sent: number,
  acked: number,
  lastSeq: number,
  resendLine: number | null,
): string {
  const lastAcked = acked === 0 ? "none acknowledged" : `last acknowledged seq ${lastSeq}`;
  const resend =
    resendLine === null
      ? "nothing to resend"
      : resendLine === 0
        ? "resend the message"
        : `resend from input line ${resendLine}`;
  return `${sent} message${sent === 1 ? "" : "s"} sent, ${acked} acknowledged (${lastAcked}), ${sent - acked} sent but not acknowledged (stored or not: a resend may repeat them); ${resend}`;
}

const UTF8 = new TextDecoder("utf-8", { fatal: true });
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * One --json-lines line: {"topic", "payload"} (text, sent as UTF-8) or {"topic", "payloadBase64"}
 * (bytes); other fields (seq, time, as `aria sub` prints them) are ignored. Null for a blank line.
 */
export function parseJsonLine(
  line: Uint8Array,
  lineNumber: number,
): { topic: string; payload: Uint8Array | string } | null {
  let value: unknown;
  try {
    const text = UTF8.decode(line);
    if (text.trim() === "") return null;
    value = JSON.parse(text);
  } catch {
    throw new Error(`line ${lineNumber} is not JSON`);
  }
  const shape = `line ${lineNumber}: expected {"topic": "...", "payload": "..."} or {"topic": "...", "payloadBase64": "..."}`;
  if (typeof value !== "object" || value === null) throw new Error(shape);
  const record = value as { topic?: unknown; payload?: unknown; payloadBase64?: unknown };
  if (typeof record.topic !== "string") throw new Error(shape);
  if (record.payload !== undefined && record.payloadBase64 !== undefined)
    throw new Error(`line ${lineNumber}: payload and payloadBase64 exclude each other`);
  if (typeof record.payload === "string") return { topic: record.topic, payload: record.payload };
  if (typeof record.payloadBase64 !== "string") throw new Error(shape);
  if (!BASE64.test(record.payloadBase64))
    throw new Error(`line ${lineNumber}: payloadBase64 is not base64`);
  return {
    topic: record.topic,
    payload: new Uint8Array(Buffer.from(record.payloadBase64, "base64")),
  };
}
