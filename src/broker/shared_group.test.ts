/**
 * SharedGroup: examples of each rule (assignment by topic, rebalance after drain, windows,
 * leaving members, ACK semantics, restart from a position), then a property test that runs
 * random joins, leaves, publishes, ACKs, stalls and restarts against a model of what each
 * member was given and checks every delivery and the final state.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { fcParams } from "../testing/fc_params.ts";
import { type GroupMessage, rendezvousWeight, SharedGroup } from "./shared_group.ts";

type Delivered = [member: number, seq: number];

function recorder(options: ConstructorParameters<typeof SharedGroup>[1] = {}) {
  const delivered: Delivered[] = [];
  const group = new SharedGroup<GroupMessage>(
    (member, m) => delivered.push([member, m.seq]),
    options,
  );
  return { group, delivered };
}

/** The member rendezvous hashing gives `topicId` among `members`. */
function preferred(topicId: number, members: number[]): number {
  let best = -1;
  for (const id of members) {
    if (best === -1 || rendezvousWeight(topicId, id) > rendezvousWeight(topicId, best)) best = id;
  }
  return best;
}

describe("SharedGroup examples", () => {
  test("each message goes to one member, every message of a topic to the same one", () => {
    const { group, delivered } = recorder();
    for (const id of [1, 2, 3]) group.join(id);
    for (let seq = 0; seq < 300; seq++) group.offer({ seq, topicId: seq % 30 });
    expect(delivered.length).toBe(300);
    const ownerOf = new Map<number, number>();
    for (const [member, seq] of delivered) {
      const topicId = seq % 30;
      expect(ownerOf.get(topicId) ?? member).toBe(member);
      ownerOf.set(topicId, member);
      expect(member).toBe(preferred(topicId, [1, 2, 3]));
    }
    expect(new Set(ownerOf.values()).size).toBe(3);
    expect([1, 2, 3].map((id) => group.inFlightOf(id)).reduce((a, b) => a + b)).toBe(300);
  });

  test("rendezvous hashing spreads topics evenly and moves only the joiner's share", () => {
    const before = new Map<number, number>();
    const counts = new Map<number, number>();
    for (let topic = 0; topic < 4000; topic++) {
      const member = preferred(topic, [10, 11, 12, 13]);
      before.set(topic, member);
      counts.set(member, (counts.get(member) ?? 0) + 1);
    }
    for (const count of counts.values()) expect(Math.abs(count - 1000)).toBeLessThan(150);
    let moved = 0;
    for (let topic = 0; topic < 4000; topic++) {
      const member = preferred(topic, [10, 11, 12, 13, 14]);
      if (member !== before.get(topic)) {
        expect(member).toBe(14);
        moved++;
      }
    }
    expect(Math.abs(moved - 800)).toBeLessThan(150);
  });

  test("a topic moves to a new member only once its old member acknowledged it", () => {
    // A topic that member 2 takes from member 1 when it joins.
    let topicId = 0;
    while (preferred(topicId, [1, 2]) !== 2) topicId++;
    const { group, delivered } = recorder();
    group.join(1);
    group.offer({ seq: 0, topicId });
    group.offer({ seq: 1, topicId });
    group.join(2);
    group.offer({ seq: 2, topicId });
    expect(delivered).toEqual([
      [1, 0],
      [1, 1],
    ]);
    expect(group.pendingCount).toBe(1);
    expect(group.ack(1, 0)).toEqual({ ok: true, acked: 1 });
    expect(delivered.length).toBe(2); // seq 1 still in flight on member 1
    expect(group.ack(1, 1)).toEqual({ ok: true, acked: 1 });
    expect(delivered).toEqual([
      [1, 0],
      [1, 1],
      [2, 2],
    ]);
  });

  test("a member at its window takes nothing more; its topics wait rather than move", () => {
    const { group, delivered } = recorder({ windowMax: 2 });
    group.join(1);
    for (let seq = 0; seq < 5; seq++) group.offer({ seq, topicId: 7 });
    group.join(2); // whatever topic 7 prefers now, it has messages in flight on member 1 or waits
    expect(delivered.length).toBe(2);
    expect(group.pendingCount).toBe(3);
    group.ack(1, 1); // now the topic, drained, goes to its rendezvous choice, two at a time
    expect(delivered.map(([, seq]) => seq)).toEqual([0, 1, 2, 3]);
    const owner = preferred(7, [1, 2]);
    expect(delivered.slice(2).map(([member]) => member)).toEqual([owner, owner]);
  });

  test("a leaving member's unacknowledged messages go to another, before newer ones", () => {
    const { group, delivered } = recorder();
    group.join(1);
    for (let seq = 0; seq < 4; seq++) group.offer({ seq, topicId: 3 });
    group.ack(1, 1);
    group.setReady(1, false);
    group.offer({ seq: 4, topicId: 3 }); // waits: member 1 is backed up
    group.join(2);
    group.leave(1);
    expect(delivered.slice(4)).toEqual([
      [2, 2],
      [2, 3],
      [2, 4],
    ]);
    expect(group.inFlightOf(2)).toBe(3);
    expect(group.position()).toEqual({ nextSeq: 5, unackedSeqs: [2, 3, 4] });
  });

  test("with no member left, messages wait for the next one", () => {
    const { group, delivered } = recorder();
    group.join(1);
    group.offer({ seq: 0, topicId: 1 });
    group.leave(1);
    expect(group.wantsMore).toBe(false);
    group.offer({ seq: 1, topicId: 1 });
    group.join(5);
    expect(delivered).toEqual([
      [1, 0],
      [5, 0],
      [5, 1],
    ]);
  });

  test("ACK: above what was delivered is refused; delivery order, not seq order, bounds it", () => {
    let low = 0;
    while (preferred(low, [1, 2]) !== 1) low++;
    let high = 0;
    while (preferred(high, [1, 2]) !== 2) high++;
    const { group, delivered } = recorder();
    group.join(1);
    group.join(2);
    group.offer({ seq: 5, topicId: low }); // to member 1
    group.offer({ seq: 20, topicId: high }); // to member 2
    expect(group.ack(2, 21)).toEqual({
      ok: false,
      reason: "seq 21 was not delivered to this subscription",
    });
    group.leave(1); // seq 5 goes to member 2, after 20
    expect(delivered.at(-1)).toEqual([2, 5]);
    // Member 2 acks 20 before it saw 5: that must not acknowledge 5.
    expect(group.ack(2, 20)).toEqual({ ok: true, acked: 1 });
    expect(group.position().unackedSeqs).toEqual([5]);
    // Nor an ACK naming no message in flight (20 again, 7): 5 came late, only its own seq acks it.
    expect(group.ack(2, 20)).toEqual({ ok: true, acked: 0 });
    expect(group.ack(2, 7)).toEqual({ ok: true, acked: 0 });
    expect(group.ack(2, 5)).toEqual({ ok: true, acked: 1 });
    expect(group.lowestUnackedSeq()).toBe(21);
  });

  test("an ACK naming no in-flight seq acknowledges the prefix at or below it", () => {
    const { group } = recorder();
    group.join(1);
    for (const seq of [10, 20, 30]) group.offer({ seq, topicId: 1 });
    expect(group.ack(1, 25)).toEqual({ ok: true, acked: 2 });
    expect(group.position()).toEqual({ nextSeq: 31, unackedSeqs: [30] });
  });

  test("a restarted group delivers only what was unacknowledged, then what follows", () => {
    const first = recorder();
    first.group.join(1);
    for (let seq = 0; seq < 10; seq++) first.group.offer({ seq, topicId: seq % 2 });
    first.group.ack(1, 3);
    first.group.ack(1, 5); // in seq order here: acks 4 and 5 too
    expect(first.group.position()).toEqual({ nextSeq: 10, unackedSeqs: [6, 7, 8, 9] });
    const second = recorder({ start: first.group.position() });
    expect(second.group.cursorStartSeq).toBe(6);
    second.group.join(9);
    for (let seq = 6; seq < 12; seq++) second.group.offer({ seq, topicId: seq % 2 });
    expect(second.delivered.map(([, seq]) => seq)).toEqual([6, 7, 8, 9, 10, 11]);
  });

  test("a restored seq that retention removed is dropped when the cursor passes it", () => {
    const { group, delivered } = recorder({ start: { nextSeq: 10, unackedSeqs: [2, 4, 8] } });
    group.join(1);
    group.readTo(5); // the oldest stored message is now 5: seqs 2 and 4 are gone
    expect(group.position()).toEqual({ nextSeq: 10, unackedSeqs: [8] });
    expect(group.offer({ seq: 6, topicId: 0 })).toBe(false); // acknowledged before the restart
    expect(group.offer({ seq: 8, topicId: 0 })).toBe(true);
    expect(group.offer({ seq: 12, topicId: 0 })).toBe(true);
    expect(delivered).toEqual([
      [1, 8],
      [1, 12],
    ]);
  });

  test("byte bounds: a member's window in bytes (one message always fits), pending bytes", () => {
    const sizes = new Map([
      [0, 600],
      [1, 600],
      [2, 2000],
      [3, 10],
    ]);
    const { group, delivered } = recorder({
      bytesOf: (m) => sizes.get(m.seq)!,
      windowBytesMax: 1000,
      pendingBytesMax: 2500,
    });
    group.join(1);
    group.offer({ seq: 0, topicId: 0 });
    group.offer({ seq: 1, topicId: 0 }); // 1200 > 1000: waits
    expect(delivered).toEqual([[1, 0]]);
    group.offer({ seq: 2, topicId: 0 });
    expect(group.pendingBytesHeld).toBe(2600);
    expect(group.wantsMore).toBe(false);
    group.ack(1, 0);
    expect(delivered.at(-1)).toEqual([1, 1]);
    group.ack(1, 1); // 2000 alone is over the window, but a member with nothing in flight takes it
    expect(delivered.at(-1)).toEqual([1, 2]);
    expect(group.pendingBytesHeld).toBe(0);
    group.leave(1);
    expect(group.pendingBytesHeld).toBe(2000);
  });

  test("wantsMore stops the cursor at the pending bound", () => {
    const { group } = recorder({ windowMax: 1, pendingMax: 3 });
    group.join(1);
    let seq = 0;
    while (group.wantsMore && seq < 100) group.offer({ seq: seq++, topicId: 0 });
    expect(seq).toBe(4);
    expect(group.pendingCount).toBe(3);
  });
});

// ---- Property: random operations against a model ----------------------------------------------

type Op =
  | { kind: "publish"; topicId: number; gap: number }
  | { kind: "join" }
  | { kind: "leave"; pick: number }
  | { kind: "ack"; pick: number; index: number; exact: boolean }
  | { kind: "ready"; pick: number; ready: boolean }
  | { kind: "restart" };

const opArbitrary: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("publish" as const),
      topicId: fc.nat(7),
      gap: fc.nat(2),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("join" as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("leave" as const), pick: fc.nat() }) },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("ack" as const),
      pick: fc.nat(),
      index: fc.nat(),
      exact: fc.boolean(),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("ready" as const),
      pick: fc.nat(),
      ready: fc.boolean(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("restart" as const) }) },
);

/** Runs `ops`, checking each delivery and each position against the model, then liveness. */
function runModel(ops: Op[], windowMax: number, pendingMax: number, windowBytesMax: number): void {
  const bytesOf = (m: GroupMessage): number => 1 + ((m.seq * 7) % 5);
  const log: GroupMessage[] = []; // every published message (the stream, seqs with gaps)
  let nextSeq = 0;
  let cursor = 0; // index into log of the next message the group's cursor offers
  const acked = new Set<number>();
  const holder = new Map<number, number>(); // seq -> member it is in flight on
  const inFlight = new Map<number, number[]>(); // member -> seqs in delivery order
  const deliveredMax = new Map<number, number>(); // member -> highest seq it was given
  const late = new Set<number>(); // seqs in flight that came after a higher one to their member
  let members: number[] = [];
  let nextMemberId = 0;
  let returned = 0;

  const onDeliver = (member: number, m: GroupMessage): void => {
    const list = inFlight.get(member);
    expect(list).toBeDefined(); // a current member
    expect(acked.has(m.seq)).toBe(false); // never again once acknowledged
    expect(holder.has(m.seq)).toBe(false); // in flight on one member at a time
    for (const earlier of log) {
      if (earlier.seq >= m.seq) break;
      if (earlier.topicId !== m.topicId || acked.has(earlier.seq)) continue;
      expect(holder.get(earlier.seq)).toBe(member); // per-topic order
    }
    list!.push(m.seq);
    holder.set(m.seq, member);
    if (m.seq < deliveredMax.get(member)!) late.add(m.seq);
    deliveredMax.set(member, Math.max(deliveredMax.get(member)!, m.seq));
    expect(list!.length).toBeLessThanOrEqual(windowMax);
    const bytes = list!.reduce((sum, seq) => sum + bytesOf({ seq, topicId: 0 }), 0);
    if (list!.length > 1) expect(bytes).toBeLessThanOrEqual(windowBytesMax);
  };
  const options = { windowMax, pendingMax, windowBytesMax, bytesOf, pendingBytesMax: 12 };
  let group = new SharedGroup<GroupMessage>(onDeliver, options);

  const feed = (): void => {
    while (cursor < log.length && group.wantsMore) group.offer(log[cursor++]!);
    if (cursor === log.length) group.readTo(nextSeq);
    expect(group.pendingCount).toBeLessThanOrEqual(pendingMax + returned);
    expect(group.pendingBytesHeld).toBeLessThanOrEqual(12 + 5 + 5 * returned);
  };
  const join = (): void => {
    const id = nextMemberId++;
    members.push(id);
    inFlight.set(id, []);
    deliveredMax.set(id, -1);
    group.join(id);
  };
  const forget = (member: number): void => {
    for (const seq of inFlight.get(member)!) {
      holder.delete(seq);
      late.delete(seq);
    }
    returned += inFlight.get(member)!.length;
    inFlight.delete(member);
  };
  const checkPosition = (): void => {
    const position = group.position();
    const expected = log
      .filter((m) => m.seq < position.nextSeq && !acked.has(m.seq))
      .map((m) => m.seq);
    expect(position.unackedSeqs).toEqual(expected);
    expect(group.lowestUnackedSeq()).toBe(expected[0] ?? position.nextSeq);
  };

  for (const op of ops) {
    switch (op.kind) {
      case "publish":
        nextSeq += op.gap;
        log.push({ seq: nextSeq++, topicId: op.topicId });
        break;
      case "join":
        join();
        break;
      case "leave": {
        if (members.length === 0) break;
        const member = members[op.pick % members.length]!;
        members = members.filter((id) => id !== member);
        forget(member);
        group.leave(member);
        break;
      }
      case "ack": {
        if (members.length === 0) break;
        const member = members[op.pick % members.length]!;
        const list = inFlight.get(member)!;
        if (list.length === 0) break;
        const index = op.index % list.length;
        // exact: a seq it holds; otherwise any seq up to one past what it was given (refused)
        const seq = op.exact ? list[index]! : op.index % (deliveredMax.get(member)! + 2);
        const found = list.indexOf(seq);
        let count = found + 1;
        if (found === -1) {
          while (count < list.length && list[count]! <= seq && !late.has(list[count]!)) count++;
        }
        if (seq > deliveredMax.get(member)!) {
          expect(group.ack(member, seq).ok).toBe(false);
          break;
        }
        // The model lets go first: the ACK may deliver more at once, pushed after these.
        for (const s of list.splice(0, count)) {
          holder.delete(s);
          late.delete(s);
          acked.add(s);
        }
        expect(group.ack(member, seq)).toEqual({ ok: true, acked: count });
        break;
      }
      case "ready": {
        if (members.length === 0) break;
        group.setReady(members[op.pick % members.length]!, op.ready);
        break;
      }
      case "restart": {
        const position = group.position();
        for (const member of members) forget(member);
        const count = members.length;
        members = [];
        returned = 0;
        group = new SharedGroup<GroupMessage>(onDeliver, { ...options, start: position });
        for (const m of log) if (!acked.has(m.seq)) expect(m.seq >= group.cursorStartSeq);
        cursor = log.findIndex((m) => m.seq >= group.cursorStartSeq);
        if (cursor === -1) cursor = log.length;
        for (let i = 0; i < count; i++) join();
        break;
      }
    }
    feed();
    checkPosition();
  }

  // Liveness: with a ready member that acknowledges everything, every message is acknowledged.
  if (members.length === 0) join();
  for (const member of members) group.setReady(member, true);
  for (let round = 0; round < log.length + 2; round++) {
    feed();
    for (const member of members) {
      const list = inFlight.get(member)!;
      if (list.length === 0) continue;
      const seq = list.at(-1)!;
      const count = list.length;
      for (const s of list.splice(0, count)) {
        holder.delete(s);
        late.delete(s);
        acked.add(s);
      }
      expect(group.ack(member, seq)).toEqual({ ok: true, acked: count });
    }
  }
  expect(log.filter((m) => !acked.has(m.seq))).toEqual([]);
  expect(group.pendingCount + group.inFlightCount).toBe(0);
  checkPosition();
}

describe("SharedGroup property", () => {
  test("random joins, leaves, publishes, ACKs, stalls and restarts keep every rule", () => {
    fc.assert(
      fc.property(
        fc.array(opArbitrary, { maxLength: 200, size: "max" }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 1, max: 12 }),
        (ops, windowMax, pendingMax, windowBytesMax) =>
          runModel(ops, windowMax, pendingMax, windowBytesMax),
      ),
      fcParams({ runs: 300 }),
    );
  });
});
