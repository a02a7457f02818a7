/**
 * Fuzz: random bytes and mutated valid packets, both versions, server and any role, in random
 * splits. The decoder never throws; it yields packets then at most one error, the same whatever
 * the split; the error's reason code is one of the spec's; every packet it accepts re-encodes
 * to bytes that decode to the same packet; and a stream it accepts whole, mqtt-packet parses into
 * the same packets (a second opinion on every field). FC_RUNS scales the runs (see fc_params.ts).
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { fcParams } from "../testing/fc_params.ts";
import { decodeAll, encodeAll, packetArbitrary } from "./codec_arbitraries.ts";
import type { MqttDecoderOptions } from "./codec.ts";
import { encodePacket } from "./codec_encode.ts";
import {
  fromLoose,
  mqttPacketParse,
  normalised,
  representable,
} from "./codec_mqtt_packet_support.ts";
import { type MqttDecodeResult, type ProtocolVersion, REASON } from "./packets.ts";

const ERROR_CODES = new Set<number>([
  REASON.MALFORMED_PACKET,
  REASON.PROTOCOL_ERROR,
  REASON.UNSUPPORTED_PROTOCOL_VERSION,
  REASON.CLIENT_IDENTIFIER_NOT_VALID,
  REASON.TOPIC_ALIAS_INVALID,
  REASON.PACKET_TOO_LARGE,
]);

function checkResults(results: MqttDecodeResult[], version: ProtocolVersion | null): void {
  const errorIndex = results.findIndex((result) => !result.ok);
  if (errorIndex >= 0) {
    expect(errorIndex).toBe(results.length - 1);
    const last = results[errorIndex];
    if (!last.ok) expect(ERROR_CODES.has(last.error.reasonCode)).toBe(true);
  }
  let known = version;
  for (const result of results) {
    if (!result.ok) continue;
    if (result.packet.type === "connect") known = result.packet.protocolVersion;
    if (known === null) continue;
    const again = decodeAll(encodePacket(result.packet, known), [], { protocolVersion: known });
    expect(again).toEqual([result]);
  }
}

function fuzz(bytes: Uint8Array, cuts: number[], options: MqttDecoderOptions): void {
  const whole = decodeAll(bytes, [], options);
  expect(decodeAll(bytes, cuts, options)).toEqual(whole);
  checkResults(whole, options.protocolVersion ?? null);
}

const optionsArbitrary: fc.Arbitrary<MqttDecoderOptions> = fc.oneof(
  fc.constant({ role: "server" as const }),
  fc.constant({ role: "any" as const, protocolVersion: 4 as const }),
  fc.constant({ role: "any" as const, protocolVersion: 5 as const }),
  fc.constant({ role: "client" as const, protocolVersion: 5 as const, packetBytesMax: 64 }),
);

/** A mutation: overwrite, insert or delete a byte at a position (taken modulo the length). */
const mutationArbitrary = fc.tuple(
  fc.constantFrom("set", "insert", "delete"),
  fc.nat(),
  fc.integer({ min: 0, max: 255 }),
);

function mutate(bytes: Uint8Array, mutations: [string, number, number][]): Uint8Array {
  const list = [...bytes];
  for (const [kind, position, value] of mutations) {
    const at = list.length === 0 ? 0 : position % list.length;
    if (kind === "set" && list.length > 0) list[at] = value;
    else if (kind === "insert") list.splice(at, 0, value);
    else list.splice(at, 1);
  }
  return Uint8Array.from(list);
}

describe("fuzz", () => {
  test("random bytes: never throws, packets then at most one error", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 300 }),
        fc.array(fc.nat({ max: 300 }), { maxLength: 6 }),
        optionsArbitrary,
        (bytes, cuts, options) => fuzz(bytes, cuts, options),
      ),
      fcParams({ runs: 1000 }),
    );
  });

  for (const version of [4, 5] as ProtocolVersion[]) {
    test(`mutated valid MQTT ${version === 4 ? "3.1.1" : "5.0"} streams`, () => {
      fc.assert(
        fc.property(
          fc.array(packetArbitrary(version), { minLength: 1, maxLength: 4 }),
          fc.array(mutationArbitrary, { minLength: 1, maxLength: 4 }),
          fc.array(fc.nat({ max: 500 }), { maxLength: 6 }),
          fc.boolean(),
          (packets, mutations, cuts, asServer) => {
            // As a server: a CONNECT first, so the rest is read in its version.
            const connect = encodePacket(
              {
                type: "connect",
                protocolVersion: version,
                clientId: "c",
                cleanStart: true,
                keepAlive: 0,
                properties: {},
              },
              version,
            );
            const body = mutate(encodeAll(packets, version), mutations);
            const bytes = asServer ? Uint8Array.from([...connect, ...body]) : body;
            const options: MqttDecoderOptions = asServer
              ? { role: "server" }
              : { role: "any", protocolVersion: version };
            fuzz(bytes, cuts, options);
            const results = decodeAll(body, [], { protocolVersion: version });
            const accepted = results.flatMap((result) => (result.ok ? [result.packet] : []));
            if (accepted.length === results.length && accepted.every(representable)) {
              const theirs = mqttPacketParse(body, version).map((loose) =>
                fromLoose(loose, version),
              );
              expect(theirs).toEqual(accepted.map(normalised));
            }
          },
        ),
        fcParams({ runs: 600 }),
      );
    });
  }
});
