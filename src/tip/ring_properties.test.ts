/**
 * Ring records with properties: the payload, properties and topic id of each record read back
 * across wraps and evictions, records without properties unchanged, and the evict hook and the
 * cursor's topic word given the topic id without the properties bit.
 */
import { expect, test } from "bun:test";
import { RECORD_HEADER_BYTES } from "../constants.ts";
import { Ring } from "./ring.ts";

test("records with and without properties read back through wraps; evictions name topic ids", () => {
  const evicted: number[] = [];
  const ring = new Ring(4096, (topicId) => evicted.push(topicId));
  const payloadOf = (seq: number) => Uint8Array.from({ length: seq % 50 }, (_, i) => seq + i);
  const propertiesOf = (seq: number) =>
    seq % 2 === 0
      ? new Uint8Array(0)
      : Uint8Array.from({ length: 1 + (seq % 90) }, (_, i) => i ^ seq);
  const at = new Map<number, number>();
  for (let seq = 1; seq <= 400; seq++) {
    const payload = payloadOf(seq);
    const properties = propertiesOf(seq);
    const topicId = (seq * 7919) % 4_000_000;
    const offset = ring.append(
      topicId,
      seq,
      seq * 10,
      payload,
      0,
      payload.length,
      properties,
      0,
      properties.length,
    );
    at.set(seq, offset);
    for (let held = ring.firstSeq; held <= seq; held++) {
      const position = ring.offsetOfSeq(held);
      expect(ring.topicAt(position)).toBe((held * 7919) % 4_000_000);
      expect([...ring.payloadAt(position)]).toEqual([...payloadOf(held)]);
      expect(ring.payloadLengthAt(position)).toBe(payloadOf(held).length);
      expect([...ring.propertiesAt(position)]).toEqual([...propertiesOf(held)]);
      expect(ring.propertiesLengthAt(position)).toBe(propertiesOf(held).length);
    }
  }
  expect(evicted).toEqual(
    Array.from({ length: ring.firstSeq - 1 }, (_, i) => ((i + 1) * 7919) % 4_000_000),
  );
  // A record without properties is as long as before properties existed.
  expect(ring.u32[at.get(400)! >> 2]).toBe(RECORD_HEADER_BYTES + payloadOf(400).length);
});
