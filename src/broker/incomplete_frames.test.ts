/**
 * Incomplete frames cannot hold the server's memory: a frame that began arriving must be whole
 * within the deadline (Broker.expire ends the connection with a fatal ERROR), and all connections'
 * incomplete frames together stay within the input budget (a frame that would pass it is a fatal
 * FRAME_TOO_LARGE, and a closed connection gives its part back).
 */
import { expect, test } from "bun:test";
import { PROTOCOL_VERSION } from "../constants.ts";
import {
  encodeFrame,
  type Frame,
  FrameDecoder,
  FrameWriter,
  type OutgoingFrame,
} from "../protocol/mod.ts";
import { MemoryStore } from "../testing/memory_store.ts";
import { Tip } from "../tip/tip.ts";
import { TopicTable } from "../topic/topic_table.ts";
import { Broker } from "./broker.ts";

function frameBytes(frame: OutgoingFrame): Uint8Array {
  const writer = new FrameWriter();
  encodeFrame(writer, frame);
  return writer.bytes().slice();
}

const HELLO = frameBytes({
  kind: "hello",
  version: PROTOCOL_VERSION,
  clientName: "t",
  authToken: null,
});

/** A PUBLISH of one message of `payloadBytes`. */
function publishOf(payloadBytes: number, requestId = 1): Uint8Array {
  return frameBytes({
    kind: "publish",
    requestId,
    messages: [{ topic: "a/b", payload: new Uint8Array(payloadBytes).fill(1) }],
  });
}

function world(options: { frameDeadlineUs?: number; inputBytesMax?: number }) {
  const topics = new TopicTable();
  const clock = { timeUs: 1_000_000 };
  const broker = new Broker({
    topics,
    tip: new Tip(topics, { capacityBytes: 8 * 1024 * 1024 }),
    store: new MemoryStore(),
    clock: { nowUs: () => clock.timeUs },
    scheduler: { soon: (task) => task() },
    ...options,
  });
  const connect = () => {
    const decoder = new FrameDecoder();
    const client = { id: 0, closed: false, errors: [] as string[] };
    client.id = broker.open({
      write: (bytes) => {
        decoder.push(bytes);
        for (let frame = decoder.next(); frame !== null; frame = decoder.next()) {
          const f = frame as Frame;
          if (f.kind === "error") client.errors.push(`${f.code} fatal=${f.fatal}: ${f.reason}`);
        }
        return bytes.length;
      },
      close: () => {
        client.closed = true;
      },
    });
    broker.receive(client.id, HELLO);
    return client;
  };
  return { broker, clock, connect };
}

test("a frame that began arriving and is not whole within the deadline ends its connection with a fatal ERROR", () => {
  const { broker, clock, connect } = world({ frameDeadlineUs: 1_000_000 });
  const slow = connect();
  const steady = connect();
  const frame = publishOf(100_000);
  broker.receive(slow.id, frame.subarray(0, 50_000));
  // The steady client sends one whole frame in two parts, then a new one begins: not late.
  broker.receive(steady.id, frame.subarray(0, 60_000));
  clock.timeUs += 600_000;
  broker.receive(steady.id, frame.subarray(60_000));
  broker.receive(steady.id, frame.subarray(0, 10));
  broker.expire(clock.timeUs);
  clock.timeUs += 500_000;
  broker.receive(slow.id, frame.subarray(50_000, 90_000)); // progress, but the frame is late
  broker.expire(clock.timeUs);
  expect(slow.closed).toBe(true);
  expect(slow.errors.length).toBe(1);
  expect(slow.errors[0]).toStartWith(
    "ARIA_ERR_MALFORMED_FRAME fatal=true: a frame began arriving 1.1 s ago",
  );
  expect(steady.closed).toBe(false);
  expect(steady.errors).toEqual([]);
  clock.timeUs += 1_000_000;
  broker.expire(clock.timeUs);
  expect(steady.closed).toBe(true);
});

test("incomplete frames of all connections stay within the input budget; a closed connection gives its part back", () => {
  const INPUT_BYTES_MAX = 1024 * 1024;
  const { broker, connect } = world({ inputBytesMax: INPUT_BYTES_MAX });
  const frame = publishOf(1000 * 1024);
  const clients = Array.from({ length: 8 }, () => connect());
  for (const client of clients) broker.receive(client.id, frame.subarray(0, 300 * 1024));
  const refused = clients.filter((client) => client.closed);
  const holding = clients.filter((client) => !client.closed);
  // Each holder's carry grew to at least 300 KiB, 236 KiB of it counted: at most four fit.
  expect(holding.length).toBeGreaterThan(0);
  expect(holding.length).toBeLessThanOrEqual(4);
  for (const client of refused) {
    expect(client.errors.length).toBe(1);
    expect(client.errors[0]).toStartWith("ARIA_ERR_FRAME_TOO_LARGE fatal=true: a frame of");
  }
  // The holders go away: a large frame fits again, whole.
  for (const client of holding) broker.closed(client.id);
  const late = connect();
  broker.receive(late.id, frame.subarray(0, 500 * 1024));
  broker.receive(late.id, frame.subarray(500 * 1024));
  expect(late.closed).toBe(false);
  expect(late.errors).toEqual([]);
  expect(broker.stats().messagesPublished).toBe(1);
});
