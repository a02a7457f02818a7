import { expect, test } from "bun:test";
import { TopicTable } from "../topic/topic_table.ts";
import { Delivery } from "./delivery.ts";
import type { Subscription } from "./subscription.ts";

test("a stored message on a topic the full table refuses is still delivered, with its name", () => {
  const topics = new TopicTable({ topicsMax: 1 });
  expect(topics.intern("app/a").ok).toBe(true);
  const delivery = new Delivery(topics, {} as never);
  const frames: string[] = [];
  const subscription = {
    id: 7,
    messagesDelivered: 0,
    session: {
      addData: (id: number, seq: number, _t: number, topic: Uint8Array, payload: Uint8Array) =>
        frames.push(`${id} ${seq} ${new TextDecoder().decode(topic)} ${payload.length}`),
    },
  } as unknown as Subscription;
  const payload = new Uint8Array(3);
  delivery.fromStore(subscription, { seq: 5, timeUs: 1, topic: "app/b", payload } as never);
  delivery.fromStore(subscription, { seq: 6, timeUs: 2, topic: "app/a", payload } as never);
  expect(frames).toEqual(["7 5 app/b 3", "7 6 app/a 3"]);
  expect(subscription.messagesDelivered).toBe(2);
  expect(topics.stats().known).toBe(1);
});

test("a borrowed stored message's topic bytes go into its frame as they are: no name looked up", () => {
  const topics = new TopicTable({ topicsMax: 16 });
  const delivery = new Delivery(topics, {} as never);
  const written: Uint8Array[] = [];
  const subscription = {
    id: 7,
    messagesDelivered: 0,
    session: {
      addData: (_id: number, _seq: number, _t: number, topic: Uint8Array) => written.push(topic),
    },
  } as unknown as Subscription;
  const topicUtf8 = new TextEncoder().encode("app/b");
  const source = new Uint8Array(8);
  const message = { seq: 5, timeUs: 1, topic: "app/b", topicUtf8, source, start: 0, length: 3 };
  delivery.fromStore(subscription, message as never);
  delivery.fromStore(subscription, { ...message, seq: 6 } as never);
  expect(written).toEqual([topicUtf8, topicUtf8]);
  expect(written[0]).toBe(topicUtf8);
  // The broker's topic table did not take the name in (a whole-stream replay looked up each one).
  expect(topics.lookup("app/b")).toBe(-1);
});
