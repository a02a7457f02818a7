/**
 * Fuzz of the MQTT door's session machine: valid client packets in random order, mutated and
 * random bytes, in random splits, with time passing and sockets dropping. Never a throw, every
 * packet the server sends decodes, and once every client is gone nothing is left: no door
 * connection, no broker session.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { fcParams } from "../testing/fc_params.ts";
import { encodePacket } from "./codec_encode.ts";
import { DoorWorld } from "./mqtt_door_test_support.ts";
import type { Packet, ProtocolVersion, QoS } from "./packets.ts";

const qos = fc.constantFrom<QoS>(0, 1, 2);
const topic = fc.constantFrom("a/b", "a/c", "$sys/x", "a//b", "x");
const filter = fc.constantFrom("a/#", "+/b", "#", "a/+", "$share/g/a/#", "a/#/b", "");
const packetId = fc.integer({ min: 1, max: 4 });

function packetArbitrary(version: ProtocolVersion): fc.Arbitrary<Packet> {
  const v5 = version === 5;
  return fc.oneof(
    fc.record({
      type: fc.constant("connect" as const),
      protocolVersion: fc.constant(version),
      clientId: fc.constantFrom("c1", "c2", ""),
      cleanStart: fc.boolean(),
      keepAlive: fc.integer({ min: 0, max: 3 }),
      will: fc.option(
        fc.record({
          topic,
          payload: fc.uint8Array({ maxLength: 4 }),
          qos,
          retain: fc.constant(false),
          properties: v5
            ? fc.record({ willDelayInterval: fc.integer({ min: 0, max: 8 }) })
            : fc.constant({}),
        }),
        { nil: undefined },
      ),
      properties: v5
        ? fc.record({ sessionExpiryInterval: fc.integer({ min: 0, max: 5 }) })
        : fc.constant({}),
    }),
    fc
      .record({
        topic,
        qos,
        retain: fc.boolean(),
        id: packetId,
        payload: fc.uint8Array({ maxLength: 8 }),
      })
      .map(
        ({ topic, qos, retain, id, payload }): Packet => ({
          type: "publish",
          topic,
          payload,
          qos,
          retain,
          dup: false,
          packetId: qos === 0 ? undefined : id,
          properties: {},
        }),
      ),
    fc.record({
      type: fc.constantFrom(
        "puback" as const,
        "pubrec" as const,
        "pubrel" as const,
        "pubcomp" as const,
      ),
      packetId,
      reasonCode: fc.constant(0),
      properties: fc.constant({}),
    }),
    fc
      .record({
        filter,
        qos,
        id: packetId,
        from: fc.constantFrom(undefined, "earliest", "1", "bad"),
      })
      .map(
        ({ filter, qos, id, from }): Packet => ({
          type: "subscribe",
          packetId: id,
          subscriptions: [
            { filter, qos, noLocal: false, retainAsPublished: false, retainHandling: 0 },
          ],
          properties: v5 && from !== undefined ? { userProperties: [["aria-from", from]] } : {},
        }),
      ),
    fc.record({ filter, id: packetId }).map(
      ({ filter, id }): Packet => ({
        type: "unsubscribe",
        packetId: id,
        filters: [filter],
        properties: {},
      }),
    ),
    fc.constant<Packet>({ type: "pingreq" }),
    fc.constant<Packet>({ type: "disconnect", reasonCode: 0, properties: {} }),
  );
}

/** One step of a client's life: bytes (valid, mutated, or random), time, a drop, a read. */
const step = (version: ProtocolVersion) =>
  fc.oneof(
    {
      weight: 6,
      arbitrary: packetArbitrary(version).map((packet) => ({ kind: "packet" as const, packet })),
    },
    {
      weight: 1,
      arbitrary: fc
        .uint8Array({ minLength: 1, maxLength: 12 })
        .map((bytes) => ({ kind: "bytes" as const, bytes })),
    },
    {
      weight: 1,
      arbitrary: fc
        .record({
          packet: packetArbitrary(version),
          at: fc.nat(),
          value: fc.integer({ min: 0, max: 255 }),
        })
        .map(({ packet, at, value }) => ({ kind: "mutated" as const, packet, at, value })),
    },
    {
      weight: 1,
      arbitrary: fc
        .integer({ min: 0, max: 4_000_000 })
        .map((us) => ({ kind: "time" as const, us })),
    },
    { weight: 1, arbitrary: fc.constant({ kind: "drop" as const }) },
  );

const script = fc.constantFrom<ProtocolVersion>(4, 5).chain((version) =>
  fc.record({
    version: fc.constant(version),
    clients: fc.array(fc.array(step(version), { maxLength: 12 }), { minLength: 1, maxLength: 3 }),
    splits: fc.array(fc.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 4 }),
  }),
);

describe("MQTT session fuzz", () => {
  test("no throw; nothing left once every client is gone", async () => {
    await fc.assert(
      fc.asyncProperty(script, async ({ version, clients, splits }) => {
        const world = new DoorWorld();
        const fakes = clients.map(() => world.client(version));
        let split = 0;
        const feed = (index: number, bytes: Uint8Array) => {
          for (let at = 0; at < bytes.length; ) {
            const size = splits[split++ % splits.length];
            fakes[index].sendBytes(bytes.slice(at, at + size));
            at += size;
          }
        };
        const longest = Math.max(...clients.map((c) => c.length));
        for (let i = 0; i < longest; i++) {
          for (const [index, steps] of clients.entries()) {
            const s = steps[i];
            if (s === undefined) continue;
            if (s.kind === "packet") feed(index, encodePacket(s.packet, version));
            else if (s.kind === "bytes") feed(index, s.bytes);
            else if (s.kind === "mutated") {
              const bytes = encodePacket(s.packet, version);
              bytes[s.at % bytes.length] = s.value;
              feed(index, bytes);
            } else if (s.kind === "time") await world.advance(s.us);
            else fakes[index].drop();
          }
          await world.settle();
        }
        for (const fake of fakes) fake.drop();
        // Wills wait at most their delay (≤ the session expiry here) and then their ack.
        for (let i = 0; i < 4; i++) await world.advance(20_000_000);
        // Whatever came in, what the server sent decodes (valid reason codes in every packet).
        for (const fake of fakes) expect(fake.errors).toEqual([]);
        expect(world.door.stats().connections).toBe(0);
        expect(world.broker.stats().connections).toBe(0);
      }),
      fcParams({ runs: 150 }),
    );
  });
});
