/**
 * Readable pictures of encoded bytes and decoded frames, for expect tests, debugging and the CLI:
 * `hexDump` prints 16 bytes a line with offsets; `describeFrame` turns a decoded frame into a plain
 * JSON-friendly object (messages materialised, filter as texts). Not for hot paths.
 */
import type { DecodeError, Frame } from "./frames.ts";

/** Hex dump: "0000  0a 00 00 00 01 00 00 00 ..." 16 bytes a line. */
export function hexDump(bytes: Uint8Array): string {
  const lines: string[] = [];
  for (let offset = 0; offset < bytes.length; offset += 16) {
    const row = Array.from(bytes.subarray(offset, offset + 16), (byte) =>
      byte.toString(16).padStart(2, "0"),
    );
    lines.push(`${offset.toString(16).padStart(4, "0")}  ${row.join(" ")}`);
  }
  return lines.join("\n");
}

/** A plain-object picture of a decoded frame or error. Copies payloads, so it outlives the decoder's views. */
export function describeFrame(frame: Frame | DecodeError): Record<string, unknown> {
  switch (frame.kind) {
    case "publish":
    case "data": {
      const { messages, ...rest } = frame;
      // Messages carry `properties` when the frame has the flag PROPERTIES; a DATA frame with it
      // says `properties: true`, as encodeData takes it.
      const list = messages.toArray().map((message) => {
        if (frame.kind === "data") return message;
        const { topic, payload, properties } = message;
        return properties === undefined ? { topic, payload } : { topic, payload, properties };
      });
      const flag = frame.kind === "data" && messages.hasProperties ? { properties: true } : {};
      return { ...rest, ...flag, messages: list };
    }
    case "subscribe":
      return { ...frame, filter: frame.filter.toStrings() };
    default:
      return { ...frame };
  }
}
