/**
 * `aria pub`: publishes one message, each line of stdin, or JSON lines, and exits 0 once every
 * message is acknowledged, printing the acknowledged seq range on stderr.
 */
import { connect } from "../client/mod.ts";
import { AriaError } from "../protocol/mod.ts";
import { runtime } from "../runtime/current_runtime.ts";
import { validateTopic } from "../topic/topic.ts";
import { parseCommand, stringFlag, UsageError, checkUrl, URL_DEFAULT } from "./args.ts";
import { EXIT_FAILURE, EXIT_OK, type CliIo } from "./cli_io.ts";

/** Usage of `aria pub`. */
export const PUB_USAGE = `Usage: aria pub [--url tcp://127.0.0.1:7400] TOPIC [MESSAGE]
       aria pub [--url tcp://127.0.0.1:7400] --json-lines

Publishes MESSAGE on TOPIC; without MESSAGE, each line of stdin is one message on TOPIC.
With --json-lines, each stdin line is {"topic": "...", "payload": "..."}.
Exits 0 once every message is acknowledged; prints the seq range on stderr.

Options:
  --url URL        the server (default tcp://127.0.0.1:7400)
  --json-lines     read {"topic", "payload"} lines from stdin
  -h, --help       show this help
`;

/** Publishes in flight before pub waits for acknowledgements: bounds memory for endless stdin. */
const IN_FLIGHT_MAX = 16_384;

/** Runs `aria pub`. */
export async function pubCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommand(args, {
    url: { type: "string" },
    "json-lines": { type: "boolean" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help === true) {
    io.out(PUB_USAGE);
    return EXIT_OK;
  }
  const jsonLines = values["json-lines"] === true;
  const [topic, message, ...extra] = positionals;
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}" (quote a MESSAGE with spaces)`);
  if (!jsonLines) {
    if (topic === undefined) throw new UsageError("missing TOPIC");
    const reason = validateTopic(topic);
    if (reason !== null) throw new UsageError(`TOPIC "${topic}": ${reason}`);
  } else if (topic !== undefined) {
    throw new UsageError("--json-lines takes topics from the input, not as an argument");
  }
  const url = checkUrl(stringFlag(values, "url", URL_DEFAULT));
  let client: Awaited<ReturnType<typeof connect>>;
  try {
    client = await connect(url, { clientName: "aria-pub", reconnect: false });
  } catch (error) {
    io.err(`aria pub: cannot connect to ${url}: ${(error as Error).message}\n`);
    return EXIT_FAILURE;
  }
  let first = Infinity;
  let last = -Infinity;
  let count = 0;
  let inFlight: Promise<number>[] = [];
  /** The first publish that failed: reported by settle(); no more lines are sent after it. */
  let failure: unknown = null;
  const settle = async () => {
    for (const seq of await Promise.all(inFlight)) {
      first = Math.min(first, seq);
      last = Math.max(last, seq);
      count++;
    }
    inFlight = [];
  };
  try {
    const send = async (t: string, payload: string) => {
      if (failure !== null) throw failure;
      const published = client.publish(t, payload);
      // Handled at once: while stdin waits for the next line, a rejection awaited only at the
      // next settle() was an unhandled one (a stack trace and exit 1 instead of the message).
      published.catch((error: unknown) => {
        failure ??= error;
      });
      inFlight.push(published);
      if (inFlight.length >= IN_FLIGHT_MAX) await settle();
    };
    if (message !== undefined && !jsonLines) {
      await send(topic, message);
    } else {
      let lineNumber = 0;
      for await (const line of runtime.stdinLines()) {
        lineNumber++;
        if (!jsonLines) {
          await send(topic, line);
          continue;
        }
        if (line.trim() === "") continue;
        const parsed = parseJsonLine(line, lineNumber);
        await send(parsed.topic, parsed.payload);
      }
    }
    await settle();
  } catch (error) {
    io.err(`aria pub: ${error instanceof AriaError ? `${error.code}: ` : ""}${(error as Error).message}\n`);
    await client.close();
    return EXIT_FAILURE;
  }
  await client.close();
  io.err(count === 0 ? "aria pub: no messages\n" : `acknowledged seq ${first}..${last} (${count} message${count === 1 ? "" : "s"})\n`);
  return EXIT_OK;
}

function parseJsonLine(line: string, lineNumber: number): { topic: string; payload: string } {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    throw new Error(`line ${lineNumber} is not JSON`);
  }
  const record = value as { topic?: unknown; payload?: unknown };
  if (typeof record !== "object" || record === null || typeof record.topic !== "string" || typeof record.payload !== "string") {
    throw new Error(`line ${lineNumber}: expected {"topic": "...", "payload": "..."}`);
  }
  return { topic: record.topic, payload: record.payload };
}
