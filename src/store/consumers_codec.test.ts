/** consumers_codec: a shared group's position (flag 2) round-trips; malformed ones are refused. */
import { describe, expect, test } from "bun:test";
import {
  CONSUMERS_FILE_MAGIC,
  type ConsumerEntry,
  decodeConsumersFile,
  encodeConsumerEntries,
} from "./consumers_codec.ts";
import { crc32 } from "./crc32.ts";

function file(entries: ConsumerEntry[]): Uint8Array {
  const body = encodeConsumerEntries(entries, crc32);
  const bytes = new Uint8Array(CONSUMERS_FILE_MAGIC.length + body.length);
  bytes.set(CONSUMERS_FILE_MAGIC);
  bytes.set(body, CONSUMERS_FILE_MAGIC.length);
  return bytes;
}

const base = { kind: "put" as const, filter: ["a/**", "b/*"], lastActiveUs: 9 };

describe("consumers codec: group positions", () => {
  test("a group's unacknowledged seqs round-trip beside records without them", () => {
    const entries: ConsumerEntry[] = [
      { ...base, name: "plain", shared: false, nextSeq: 4 },
      {
        ...base,
        name: "g",
        shared: true,
        nextSeq: 3,
        group: { readSeq: 41, unackedSeqs: [3, 9, 40] },
      },
      { ...base, name: "h", shared: true, nextSeq: 7 },
    ];
    const decoded = decodeConsumersFile(file(entries), crc32);
    if (!decoded.ok) throw new Error(decoded.reason);
    expect([...decoded.entries.values()] as ConsumerEntry[]).toEqual(entries);
  });

  test("a group position that does not hold together is refused as damage", () => {
    for (const group of [
      { readSeq: 41, unackedSeqs: [4, 9] }, // the first is not the position
      { readSeq: 41, unackedSeqs: [3, 3] }, // not ascending
      { readSeq: 9, unackedSeqs: [3, 9] }, // not below the read seq
    ]) {
      const bytes = file([{ ...base, name: "g", shared: true, nextSeq: 3, group }]);
      const decoded = decodeConsumersFile(bytes, crc32);
      expect(decoded.ok).toBe(false);
    }
  });
});

describe("consumers codec: owners (flag 4)", () => {
  test("an owner round-trips, with and without a group position; a record without one reads as before", () => {
    const entries: ConsumerEntry[] = [
      { ...base, name: "old", shared: false, nextSeq: 4 },
      { ...base, name: "mine", shared: false, nextSeq: 5, owner: "alice" },
      {
        ...base,
        name: "g",
        shared: true,
        nextSeq: 3,
        group: { readSeq: 41, unackedSeqs: [3, 9] },
        owner: "bøb",
      },
    ];
    const bytes = file(entries);
    const decoded = decodeConsumersFile(bytes, crc32);
    if (!decoded.ok) throw new Error(decoded.reason);
    expect([...decoded.entries.values()] as ConsumerEntry[]).toEqual(entries);
    // A record without an owner is byte for byte what older servers wrote: flags 0.
    const old = file([entries[0]]);
    expect(old[CONSUMERS_FILE_MAGIC.length + 8 + 2 + 3]).toBe(0);
  });
});

describe("consumers codec: a bad last record", () => {
  const first = { ...base, name: "a", shared: false, nextSeq: 4 };
  // A state of 1,200 bytes, all 7s: the last record spans two 512-byte sector boundaries.
  const state = { kind: "state" as const, name: "mqtt/x", state: new Uint8Array(1200).fill(7) };
  const whole = file([first, state]);
  const lastAt = whole.length - (8 + 2 + 6 + 4 + 1200);

  test("zeros from a sector boundary inside it to the end: a power loss tore it, dropped", () => {
    const torn = Uint8Array.from(whole);
    torn.fill(0, 1024);
    const decoded = decodeConsumersFile(torn, crc32);
    if (!decoded.ok) throw new Error(decoded.reason);
    expect(decoded.validBytes).toBe(lastAt);
    expect([...decoded.entries.keys()]).toEqual(["a"]);
    expect(decoded.states.size).toBe(0);
    // Cut short (kill -9 stops a write after a prefix of it): dropped too.
    const cut = decodeConsumersFile(whole.subarray(0, 700), crc32);
    expect(cut.ok && cut.validBytes === lastAt).toBe(true);
  });

  test("a flipped length bit that points past the end, with whole records after it, is damage", () => {
    const records = file([
      first,
      { ...base, name: "b", shared: false, nextSeq: 5 },
      { ...base, name: "c", shared: false, nextSeq: 6 },
    ]);
    const at = CONSUMERS_FILE_MAGIC.length;
    for (const bit of [10, 18, 22]) {
      const flipped = Uint8Array.from(records);
      flipped[at + (bit >> 3)] ^= 1 << (bit & 7); // the first record's length, little-endian
      const decoded = decodeConsumersFile(flipped, crc32);
      expect(decoded).toMatchObject({ ok: false, offset: at, reason: "a record is cut short" });
    }
  });

  test("a full-length record with bytes that are not a crash's (a flip, zeros off a boundary) is damage", () => {
    const flipped = Uint8Array.from(whole);
    flipped[flipped.length - 1] ^= 0xff;
    const zerosOff = Uint8Array.from(whole);
    zerosOff.fill(0, 1000, 1010);
    for (const bytes of [flipped, zerosOff]) {
      const decoded = decodeConsumersFile(bytes, crc32);
      expect(decoded).toMatchObject({ ok: false, offset: lastAt, reason: "checksum mismatch" });
    }
  });
});
