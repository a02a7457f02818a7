/**
 * Smoke test of bench/mqtt_codec.bench.ts: each body once with small parameters; Aria's codec and
 * mqtt-packet agree on the bytes and the checksum, so the bench cannot rot.
 */
import { expect, test } from "bun:test";
import { decodeOurs, decodeTheirs, encodeOurs, encodeTheirs, stream } from "./mqtt_codec.bench.ts";

test("mqtt_codec.bench bodies agree with mqtt-packet", () => {
  for (const version of [4, 5] as const) {
    expect(encodeOurs(50, version)).toBe(encodeTheirs(50, version));
    const bytes = stream(200, version);
    expect(bytes.length).toBe(encodeOurs(200, version));
    expect(decodeOurs(bytes, version)).toBe(decodeTheirs(bytes, version));
    expect(decodeOurs(bytes, version)).not.toBe(0);
  }
});
