import { describe, expect, test } from "bun:test";
import { crc32 } from "./crc32.ts";
import {
  decodeManifestRecords,
  encodeManifestRecords,
  MANIFEST_ADD,
  MANIFEST_JOURNAL,
  MANIFEST_REMOVE,
  MANIFEST_SPLIT,
  MANIFEST_SWAP,
  MANIFEST_TOPICS,
  MANIFEST_WATERMARK,
  type ManifestRecord,
} from "./manifest_codec.ts";
import type { SegmentMeta } from "./segment_index.ts";

const segment = (id: number, pack?: SegmentMeta["pack"]): SegmentMeta => ({
  id,
  partition: `app/p${id}`,
  firstSeq: 10 * id + 1,
  lastSeq: 10 * id + 9,
  firstTimeUs: 1_700_000_000_000_000 + id,
  lastTimeUs: 1_700_000_000_000_900 + id,
  records: 9,
  bytes: 4096 + id,
  ...(pack === undefined ? {} : { pack }),
});

describe("manifest codec", () => {
  test("ADD records of each kind (own file, packed, packed with the records' CRC) decode as written, beside REMOVE and WATERMARK", () => {
    const records: ManifestRecord[] = [
      { kind: MANIFEST_ADD, segment: segment(1) },
      // Kind 5, as manifests written before the records' CRC was kept hold it.
      {
        kind: MANIFEST_ADD,
        segment: segment(2, { pack: 7, offset: 3_000_000_000, indexBytes: 96 }),
      },
      // Kind 6: a CRC past 2^31 keeps its value (u32).
      {
        kind: MANIFEST_ADD,
        segment: segment(3, { pack: 7, offset: 5000, indexBytes: 128, recordsCrc: 0xfedcba98 }),
      },
      {
        kind: MANIFEST_ADD,
        segment: segment(4, { pack: 8, offset: 48, indexBytes: 64, recordsCrc: 0 }),
      },
      { kind: MANIFEST_REMOVE, id: 1 },
      { kind: MANIFEST_WATERMARK, partition: "app/p2", seq: 29 },
    ];
    const bytes = encodeManifestRecords(records, crc32);
    const kinds: number[] = [];
    for (let at = 0; at < bytes.length; at += new DataView(bytes.buffer, at).getUint32(0, true))
      kinds.push(bytes[at + 8]);
    expect(kinds).toEqual([1, 5, 6, 6, 2, 3]);
    expect(decodeManifestRecords(bytes, crc32)).toEqual({
      records,
      validBytes: bytes.length,
      problem: null,
    });
  });

  test("a kind 6 record cut short or damaged stops the decode at its start", () => {
    const records: ManifestRecord[] = [
      {
        kind: MANIFEST_ADD,
        segment: segment(1, { pack: 1, offset: 48, indexBytes: 64, recordsCrc: 12345 }),
      },
      {
        kind: MANIFEST_ADD,
        segment: segment(2, { pack: 1, offset: 9000, indexBytes: 64, recordsCrc: 67890 }),
      },
    ];
    const bytes = encodeManifestRecords(records, crc32);
    const second = new DataView(bytes.buffer).getUint32(0, true);
    expect(decodeManifestRecords(bytes.subarray(0, bytes.length - 1), crc32)).toEqual({
      records: records.slice(0, 1),
      validBytes: second,
      problem: "record cut short",
    });
    const damaged = bytes.slice();
    damaged[second + 88] ^= 1;
    expect(decodeManifestRecords(damaged, crc32)).toEqual({
      records: records.slice(0, 1),
      validBytes: second,
      problem: "checksum mismatch",
    });
  });

  test("a SWAP shorter than the other kinds' fixed part (a retention of a few stores) decodes at the end of the manifest; cut short, it is a torn tail", () => {
    for (const removed of [[], [7], [7, 8, 9, 10, 11]]) {
      const records: ManifestRecord[] = [
        { kind: MANIFEST_REMOVE, id: 3 },
        { kind: MANIFEST_SWAP, removed, added: [] },
      ];
      const bytes = encodeManifestRecords(records, crc32);
      expect(bytes.length - 68).toBeLessThan(68); // the SWAP is shorter than an ADD's fixed part
      expect(decodeManifestRecords(bytes, crc32)).toEqual({
        records,
        validBytes: bytes.length,
        problem: null,
      });
      for (const cut of [1, bytes.length - 68 - 19]) {
        expect(decodeManifestRecords(bytes.subarray(0, bytes.length - cut), crc32)).toEqual({
          records: records.slice(0, 1),
          validBytes: 68,
          problem: "record cut short",
        });
      }
    }
  });

  test("an intact record of an unknown kind is told apart from damage (unknownKind)", () => {
    const valid = encodeManifestRecords([{ kind: MANIFEST_REMOVE, id: 3 }], crc32);
    const future = new Uint8Array(24);
    const view = new DataView(future.buffer);
    view.setUint32(0, future.length, true);
    future[8] = 200;
    view.setUint32(4, crc32(future.subarray(8)), true);
    const bytes = new Uint8Array([...valid, ...future]);
    expect(decodeManifestRecords(bytes, crc32)).toEqual({
      records: [{ kind: MANIFEST_REMOVE, id: 3 }],
      validBytes: valid.length,
      problem: "unknown record kind 200",
      unknownKind: 200,
    });
    bytes[valid.length + 20] ^= 1;
    expect(decodeManifestRecords(bytes, crc32)).toEqual({
      records: [{ kind: MANIFEST_REMOVE, id: 3 }],
      validBytes: valid.length,
      problem: "unknown record kind 200",
    });
  });

  test("SPLIT records (kind 7) decode as written, recorded or not; cut short, a torn tail", () => {
    const records: ManifestRecord[] = [
      {
        kind: MANIFEST_SPLIT,
        split: {
          generation: 41,
          storesWritten: 6,
          storeBytes: 3_000_000_000,
          finishedUs: 1_700_000_000_123_456,
          durationUs: 2_500_000,
          algorithm: "adaptive",
          plan: { stores: 8, wastedBytesTotal: 1.05e9, worstRatio: 304.25 },
        },
      },
      {
        kind: MANIFEST_SPLIT,
        split: {
          generation: 9,
          storesWritten: 1,
          storeBytes: 10,
          finishedUs: null,
          durationUs: null,
          algorithm: null,
          plan: null,
        },
      },
      {
        kind: MANIFEST_SPLIT,
        split: {
          generation: 9,
          storesWritten: 1,
          storeBytes: 10,
          finishedUs: 5,
          durationUs: 0,
          algorithm: "heuristic",
          plan: null,
        },
      },
    ];
    const bytes = encodeManifestRecords(records, crc32);
    expect(bytes.length).toBe(3 * 76);
    expect(decodeManifestRecords(bytes, crc32)).toEqual({
      records,
      validBytes: bytes.length,
      problem: null,
    });
    expect(decodeManifestRecords(bytes.subarray(0, bytes.length - 1), crc32)).toEqual({
      records: records.slice(0, 2),
      validBytes: 152,
      problem: "record cut short",
    });
    const damaged = bytes.slice();
    damaged[76 + 70] ^= 1;
    expect(decodeManifestRecords(damaged, crc32)).toEqual({
      records: records.slice(0, 1),
      validBytes: 76,
      problem: "checksum mismatch",
    });
  });

  test("TOPICS records (kind 8) decode as written, before the ADD they count for; cut short, a torn tail", () => {
    const records: ManifestRecord[] = [
      {
        kind: MANIFEST_TOPICS,
        id: 5,
        topics: [
          { topic: "app/p5/a", messages: 7, bytes: 3_000_000_000_000 },
          { topic: "app/p5", messages: 2, bytes: 80 },
        ],
      },
      {
        kind: MANIFEST_ADD,
        segment: segment(5, { pack: 4, offset: 48, indexBytes: 64, recordsCrc: 1 }),
      },
      { kind: MANIFEST_TOPICS, id: 6, topics: [] },
    ];
    const bytes = encodeManifestRecords(records, crc32);
    expect(new DataView(bytes.buffer).getUint32(0, true)).toBe(24 + 18 + 8 + 18 + 6);
    expect(decodeManifestRecords(bytes, crc32)).toEqual({
      records,
      validBytes: bytes.length,
      problem: null,
    });
    const third = bytes.length - 24;
    expect(decodeManifestRecords(bytes.subarray(0, bytes.length - 1), crc32)).toEqual({
      records: records.slice(0, 2),
      validBytes: third,
      problem: "record cut short",
    });
    const damaged = bytes.slice();
    damaged[30] ^= 1;
    expect(decodeManifestRecords(damaged, crc32)).toEqual({
      records: [],
      validBytes: 0,
      problem: "checksum mismatch",
    });
  });

  test("JOURNAL records (kind 9) decode as written, started and retired; cut short, a torn tail; an unknown event refused", () => {
    const records: ManifestRecord[] = [
      { kind: MANIFEST_JOURNAL, event: "started", gen: 7, firstSeq: 1 },
      { kind: MANIFEST_JOURNAL, event: "started", gen: 8, firstSeq: 2 ** 40 + 3 },
      { kind: MANIFEST_JOURNAL, event: "retired", gen: 7, firstSeq: 1 },
    ];
    const bytes = encodeManifestRecords(records, crc32);
    expect(bytes.length).toBe(3 * 28);
    expect(bytes[8]).toBe(9);
    expect(decodeManifestRecords(bytes, crc32)).toEqual({
      records,
      validBytes: bytes.length,
      problem: null,
    });
    expect(decodeManifestRecords(bytes.subarray(0, bytes.length - 1), crc32)).toEqual({
      records: records.slice(0, 2),
      validBytes: 56,
      problem: "record cut short",
    });
    const damaged = bytes.slice();
    damaged[28 + 20] ^= 1;
    expect(decodeManifestRecords(damaged, crc32)).toEqual({
      records: records.slice(0, 1),
      validBytes: 28,
      problem: "checksum mismatch",
    });
    // An event this build does not know, CRC intact: refused rather than guessed.
    const unknown = bytes.slice(0, 28);
    unknown[9] = 3;
    new DataView(unknown.buffer).setUint32(4, crc32(unknown.subarray(8, 28)), true);
    expect(decodeManifestRecords(unknown, crc32).problem).toBe(
      "journal record names an unknown event",
    );
  });
});
