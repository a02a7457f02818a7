/**
 * mqtt_codec.bench: the MQTT door's hot paths, PUBLISH packets (QoS 1, a 16-byte topic, a 100-byte
 * payload) encoded and decoded by Aria's codec (src/mqtt) and, side by side in the same run, by
 * `mqtt-packet` (the codec mqtt.js uses), for MQTT 3.1.1 and 5.0. Each body returns a checksum of
 * the bytes or packets it made, so the work cannot be dropped. Run: `bun bench/mqtt_codec.bench.ts`.
 */
import { bench, do_not_optimize, run, summary } from "mitata";
import mqttPacket from "mqtt-packet";
import { encodePacket, MqttDecoder, type Packet, type ProtocolVersion } from "../src/mqtt/mod.ts";

const PACKETS = 10_000;
const TOPIC = "bench/topic/0001";
const PAYLOAD = new Uint8Array(100).fill(0x61);
const PAYLOAD_BUFFER = Buffer.from(PAYLOAD);

function publish(index: number): Packet {
  return {
    type: "publish",
    topic: TOPIC,
    payload: PAYLOAD,
    qos: 1,
    packetId: (index % 65_535) + 1,
    retain: false,
    dup: false,
    properties: {},
  };
}

/** Encodes `count` PUBLISH packets with Aria's codec; returns the bytes written. */
export function encodeOurs(count: number, version: ProtocolVersion): number {
  let bytes = 0;
  for (let index = 0; index < count; index++) bytes += encodePacket(publish(index), version).length;
  return bytes;
}

/** Encodes `count` PUBLISH packets with mqtt-packet; returns the bytes written. */
export function encodeTheirs(count: number, version: ProtocolVersion): number {
  let bytes = 0;
  for (let index = 0; index < count; index++) {
    const packet = {
      cmd: "publish" as const,
      topic: TOPIC,
      payload: PAYLOAD_BUFFER,
      qos: 1 as const,
      messageId: (index % 65_535) + 1,
      retain: false,
      dup: false,
    };
    bytes += mqttPacket.generate(packet, { protocolVersion: version }).length;
  }
  return bytes;
}

/** `count` PUBLISH packets back to back, as a receive buffer. */
export function stream(count: number, version: ProtocolVersion): Uint8Array {
  const parts = Array.from({ length: count }, (_, index) => encodePacket(publish(index), version));
  const bytes = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    bytes.set(part, offset);
    offset += part.length;
  }
  return bytes;
}

/** Decodes `bytes` in 64 KiB chunks with Aria's codec; returns a checksum over the packets. */
export function decodeOurs(bytes: Uint8Array, version: ProtocolVersion): number {
  const decoder = new MqttDecoder({ protocolVersion: version });
  let checksum = 0;
  for (let at = 0; at < bytes.length; at += 65_536) {
    decoder.push(bytes.subarray(at, at + 65_536));
    for (let result = decoder.next(); result !== null; result = decoder.next()) {
      if (!result.ok || result.packet.type !== "publish") throw new Error("bench decodes PUBLISH");
      checksum = (checksum + (result.packet.packetId ?? 0) + result.packet.payload.length) | 0;
    }
  }
  return checksum;
}

/** Decodes `bytes` in 64 KiB chunks with mqtt-packet; returns a checksum over the packets. */
export function decodeTheirs(bytes: Uint8Array, version: ProtocolVersion): number {
  const parser = mqttPacket.parser({ protocolVersion: version });
  let checksum = 0;
  parser.on("packet", (packet) => {
    if (packet.cmd !== "publish") throw new Error("bench decodes PUBLISH");
    checksum = (checksum + (packet.messageId ?? 0) + (packet.payload as Buffer).length) | 0;
  });
  parser.on("error", (error) => {
    throw error;
  });
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
  for (let at = 0; at < buffer.length; at += 65_536) parser.parse(buffer.subarray(at, at + 65_536));
  return checksum;
}

if (import.meta.main) {
  let sink = 0;
  for (const version of [4, 5] as ProtocolVersion[]) {
    const bytes = stream(PACKETS, version);
    const label = version === 4 ? "3.1.1" : "5.0";
    summary(() => {
      bench(`Aria encode PUBLISH ${label}`, () => do_not_optimize(encodeOurs(PACKETS, version)));
      bench(`mqtt-packet encode PUBLISH ${label}`, () =>
        do_not_optimize(encodeTheirs(PACKETS, version)),
      );
    });
    summary(() => {
      bench(`Aria decode PUBLISH ${label}`, () => {
        sink = (sink + decodeOurs(bytes, version)) | 0;
      });
      bench(`mqtt-packet decode PUBLISH ${label}`, () => {
        sink = (sink + decodeTheirs(bytes, version)) | 0;
      });
    });
  }
  const results = await run();
  console.log(`checksum ${sink}`);
  for (const trial of results.benchmarks) {
    const stats = trial.runs[0]?.stats;
    if (stats) {
      const perSecond = (PACKETS / stats.p50) * 1e9;
      console.log(`${trial.alias}: median ${(perSecond / 1e6).toFixed(2)} M packets/s`);
    }
  }
}
