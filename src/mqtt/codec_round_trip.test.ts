/**
 * Round trips of every MQTT packet, both versions: whole, byte by byte, and back to back in random
 * splits; and strings at the 65,535-byte limit.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { fcParams } from "../testing/fc_params.ts";
import { byteCuts, decodeAll, encodeAll, packetArbitrary } from "./codec_arbitraries.ts";
import { encodePacket } from "./codec_encode.ts";
import { PACKET_TYPES, type Packet, type PacketKind, type ProtocolVersion } from "./packets.ts";

const ok = (packet: Packet) => ({ ok: true as const, packet });

for (const version of [4, 5] as ProtocolVersion[]) {
  describe(`MQTT ${version === 4 ? "3.1.1" : "5.0"} round trip`, () => {
    test("every packet kind is drawn by the arbitrary", () => {
      const seen = new Set<PacketKind>();
      fc.assert(
        fc.property(packetArbitrary(version), (packet) => void seen.add(packet.type)),
        fcParams({ runs: 500 }),
      );
      const kinds = Object.keys(PACKET_TYPES) as PacketKind[];
      const expected = version === 4 ? kinds.filter((kind) => kind !== "auth") : kinds;
      expect([...seen].sort()).toEqual(expected.sort());
    });

    test("one packet, decoded from the whole buffer and one byte at a time", () => {
      fc.assert(
        fc.property(packetArbitrary(version), (packet) => {
          const bytes = encodePacket(packet, version);
          const options = { protocolVersion: version };
          expect(decodeAll(bytes, [], options)).toEqual([ok(packet)]);
          expect(decodeAll(bytes, byteCuts(bytes), options)).toEqual([ok(packet)]);
        }),
        fcParams({ runs: 400 }),
      );
    });

    test("packets back to back, decoded from random splits", () => {
      fc.assert(
        fc.property(
          fc.array(packetArbitrary(version), { minLength: 1, maxLength: 8 }),
          fc.array(fc.nat({ max: 2_000 }), { maxLength: 12 }),
          (packets, cuts) => {
            const bytes = encodeAll(packets, version);
            expect(decodeAll(bytes, cuts, { protocolVersion: version })).toEqual(packets.map(ok));
          },
        ),
        fcParams({ runs: 200 }),
      );
    });

    test("a server learns the version from CONNECT and decodes what follows", () => {
      fc.assert(
        fc.property(
          packetArbitrary(version).filter((packet) => packet.type === "connect"),
          fc.array(
            packetArbitrary(version).filter((packet) =>
              ["publish", "puback", "subscribe", "unsubscribe", "pingreq"].includes(packet.type),
            ),
            { maxLength: 5 },
          ),
          fc.array(fc.nat({ max: 2_000 }), { maxLength: 8 }),
          (connect, rest, cuts) => {
            // A server never receives subscription identifiers in a PUBLISH.
            const packets = [connect, ...rest].map((packet) =>
              packet.type === "publish"
                ? {
                    ...packet,
                    properties: { ...packet.properties, subscriptionIdentifiers: undefined },
                  }
                : packet,
            );
            const bytes = encodeAll(packets, version);
            const results = decodeAll(bytes, cuts, { role: "server" });
            expect(results).toEqual(packets.map(ok));
          },
        ),
        fcParams({ runs: 100 }),
      );
    });
  });
}

describe("long strings", () => {
  test("a topic of 65,535 bytes (ASCII, 3-byte characters) round-trips; 65,536 is a bug", () => {
    for (const topic of ["t".repeat(65_535), "日".repeat(21_845)]) {
      const packet: Packet = {
        type: "publish",
        topic,
        payload: new Uint8Array(3),
        qos: 0,
        retain: false,
        dup: false,
        properties: { userProperties: [["k", topic.slice(0, 1000)]] },
      };
      const bytes = encodePacket(packet, 5);
      expect(decodeAll(bytes, [], { protocolVersion: 5 })).toEqual([ok(packet)]);
    }
    const tooLong: Packet = {
      type: "unsubscribe",
      packetId: 1,
      filters: ["f".repeat(65_536)],
      properties: {},
    };
    expect(() => encodePacket(tooLong, 4)).toThrow("65,535");
  });
});
