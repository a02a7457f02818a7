/**
 * input: the CLI's readings of its input that more than one command shares — byte lines of a
 * stream (never decoded: `aria pub` sends each line's bytes exactly) and the checks of topics and
 * filters written in another system's syntax (`aria pub`, `aria sub`). Pure: the stream comes in
 * as an async iterable of chunks, the warnings go out through the caller.
 */
import { dottedTopicAdvice, foreignFilterAdvice } from "../topic/mod.ts";
import { UsageError } from "./args.ts";

const NEWLINE = 0x0a;
const CARRIAGE_RETURN = 0x0d;

/**
 * The lines of a byte stream, each its own copy, without its "\n" (nor a "\r" before it); a last
 * line without a "\n" is kept as it is, and an empty one is no line. No byte is decoded.
 */
export async function* byteLinesOf(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  /** The start of the line not yet ended: pieces of earlier chunks. */
  let pieces: Uint8Array[] = [];
  for await (const chunk of chunks) {
    let start = 0;
    for (
      let newline = chunk.indexOf(NEWLINE);
      newline >= 0;
      newline = chunk.indexOf(NEWLINE, start)
    ) {
      pieces.push(chunk.subarray(start, newline));
      const line = concat(pieces);
      pieces = [];
      start = newline + 1;
      yield line.length > 0 && line[line.length - 1] === CARRIAGE_RETURN
        ? line.subarray(0, line.length - 1)
        : line;
    }
    if (start < chunk.length) pieces.push(chunk.slice(start));
  }
  const last = concat(pieces);
  if (last.length > 0) yield last;
}

/** The pieces joined into one new array (a copy even of a single piece). */
function concat(pieces: readonly Uint8Array[]): Uint8Array {
  let length = 0;
  for (const piece of pieces) length += piece.length;
  const joined = new Uint8Array(length);
  let offset = 0;
  for (const piece of pieces) {
    joined.set(piece, offset);
    offset += piece.length;
  }
  return joined;
}

/**
 * Checks the topics or filters a user typed for another system's habits: a wildcard of MQTT or
 * NATS is a usage error that says what Aria writes instead; a dotted topic (`orders.created`,
 * legal in Aria but one segment) is a one-line warning through `warn`, and goes on.
 */
export function checkForeignSyntax(texts: readonly string[], warn: (line: string) => void): void {
  for (const text of texts) {
    const advice = foreignFilterAdvice(text);
    if (advice !== null) throw new UsageError(`"${text}": ${advice}`);
  }
  for (const text of texts) {
    const warning = dottedTopicAdvice(text);
    if (warning !== null) warn(`warning: "${text}": ${warning}`);
  }
}
