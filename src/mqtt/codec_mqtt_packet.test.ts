/**
 * Cross-checks against `mqtt-packet` (the codec mqtt.js uses), both versions: it parses the bytes
 * our encoder writes into the same packet, our decoder parses the bytes it generates into the same
 * packet, and where both write one canonical form the bytes are identical.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import mqttPacket from "mqtt-packet";
import { fcParams } from "../testing/fc_params.ts";
import { decodeAll, packetArbitrary } from "./codec_arbitraries.ts";
import { encodePacket, hasProperties } from "./codec_encode.ts";
import {
  fromLoose,
  mqttPacketParse,
  normalised,
  representable,
  toLoose,
} from "./codec_mqtt_packet_support.ts";
import type { Properties, ProtocolVersion } from "./packets.ts";

for (const version of [4, 5] as ProtocolVersion[]) {
  describe(`mqtt-packet cross-check, MQTT ${version === 4 ? "3.1.1" : "5.0"}`, () => {
    const packets = packetArbitrary(version).filter(representable);

    test("mqtt-packet parses our bytes into the same packet", () => {
      fc.assert(
        fc.property(packets, (packet) => {
          const parsed = mqttPacketParse(encodePacket(packet, version), version);
          expect(parsed.map((loose) => fromLoose(loose, version))).toEqual([normalised(packet)]);
        }),
        fcParams({ runs: 300 }),
      );
    });

    test("we parse mqtt-packet's bytes into the same packet", () => {
      fc.assert(
        fc.property(packets, (packet) => {
          const bytes = new Uint8Array(
            mqttPacket.generate(toLoose(packet, version) as never, { protocolVersion: version }),
          );
          expect(decodeAll(bytes, [], { protocolVersion: version })).toEqual([
            { ok: true, packet: normalised(packet) },
          ]);
        }),
        fcParams({ runs: 300 }),
      );
    });

    test("both write the same bytes (not user properties: mqtt-packet groups them)", () => {
      // Without properties, acks, DISCONNECT and AUTH omit the property length (3.4.2.2.1,
      // 3.14.2.2.1, 3.15.2.2.1), as mosquitto does; mqtt-packet writes a 0: both are valid.
      const withReason = ["puback", "pubrec", "pubrel", "pubcomp", "disconnect", "auth"];
      const plain = packets.filter(
        (packet) =>
          !JSON.stringify(packet).includes('"userProperties"') &&
          !(
            version === 5 &&
            withReason.includes(packet.type) &&
            !hasProperties((packet as { properties: Properties }).properties)
          ),
      );
      fc.assert(
        fc.property(plain, (packet) => {
          const theirs = mqttPacket.generate(toLoose(packet, version) as never, {
            protocolVersion: version,
          });
          expect(Buffer.from(encodePacket(packet, version)).toString("hex")).toEqual(
            Buffer.from(theirs).toString("hex"),
          );
        }),
        fcParams({ runs: 300 }),
      );
    });
  });
}
