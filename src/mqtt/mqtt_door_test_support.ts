/**
 * Test support for the MQTT door: a broker over a memory store, a door on it, and fake MQTT
 * clients that speak through MQC's codec (packets in and out), with time under the test's control.
 * Not a test file itself; used by mqtt_session.test.ts and the fuzz test.
 */
import { FailureThrottle, type Users } from "../auth/mod.ts";
import { Broker } from "../broker/broker.ts";
import type { Connection, ConsumerStore } from "../broker/ports.ts";
import type { MemoryConsumerStore } from "../testing/memory_consumer_store.ts";
import { MemoryStore } from "../testing/memory_store.ts";
import { Tip } from "../tip/tip.ts";
import { Filter } from "../topic/mod.ts";
import { TopicTable } from "../topic/topic_table.ts";
import { MqttDecoder } from "./codec.ts";
import { encodePacket } from "./codec_encode.ts";
import { MqttDoor, type SessionStateStore } from "./mqtt_door.ts";
import type { Packet, ProtocolVersion } from "./packets.ts";
import { ariaTopicMapping } from "./topic_mapping.ts";

/** A fake MQTT client: what it sends goes through the door; what it gets is decoded. */
export class FakeMqttClient {
  readonly received: Packet[] = [];
  readonly errors: string[] = [];
  closed = false;
  /** Bytes the socket takes per write (Infinity: all). */
  budget = Infinity;
  id = 0;
  private decoder: MqttDecoder;
  readonly connection: Connection;

  constructor(
    private readonly world: DoorWorld,
    readonly version: ProtocolVersion,
    remoteAddress = "10.0.0.1",
  ) {
    this.decoder = new MqttDecoder({ role: "client", protocolVersion: version });
    this.connection = {
      write: (bytes) => {
        if (this.closed) return bytes.length;
        const taken = Math.min(bytes.length, this.budget);
        this.budget -= taken;
        this.decoder.push(bytes.slice(0, taken));
        for (let r = this.decoder.next(); r !== null; r = this.decoder.next()) {
          if (r.ok) this.received.push(r.packet);
          else this.errors.push(r.error.reason);
        }
        return taken;
      },
      close: () => {
        if (this.closed) return;
        this.closed = true;
        // The runtime reports the close as an event of its own.
        this.world.later(() => this.world.door.closed(this.id));
      },
      remoteAddress,
    };
  }

  /** Sends a packet (encoded for this client's version). */
  send(packet: Packet): void {
    this.sendBytes(encodePacket(packet, this.version));
  }

  sendBytes(bytes: Uint8Array): void {
    this.world.door.receive(this.id, bytes);
  }

  /** The client's socket closes (the peer went away). */
  drop(): void {
    if (this.closed) return;
    this.closed = true;
    this.world.door.closed(this.id);
  }

  /** The socket takes `bytes` more and says so. */
  read(bytes = Infinity): void {
    this.budget = bytes;
    this.world.door.writable(this.id);
  }

  /** Received packets of `type`, removed from `received`. */
  take<T extends Packet["type"]>(type: T): (Packet & { type: T })[] {
    const taken = this.received.filter((p) => p.type === type) as (Packet & { type: T })[];
    for (let i = this.received.length - 1; i >= 0; i--)
      if (this.received[i].type === type) this.received.splice(i, 1);
    return taken;
  }
}

/** A broker, its door and the time. */
export class DoorWorld {
  readonly topics = new TopicTable();
  readonly tip = new Tip(this.topics, { capacityBytes: 1 << 20, poolBlocks: 64 });
  readonly store: MemoryStore = new MemoryStore();
  readonly tasks: (() => void)[] = [];
  readonly broker: Broker;
  readonly door: MqttDoor;
  timeUs = 1_000_000_000;

  constructor(
    options: {
      authToken?: string;
      /** Users who sign in (a server with --users). */
      users?: Users;
      /** Keep persistent sessions in the door's memory instead of durable consumers. */
      inMemorySessions?: boolean;
      /** A store and consumer store that outlive this world (a restart of the server). */
      store?: MemoryStore;
      consumerStore?: MemoryConsumerStore | ConsumerStore;
      /** Persistent sessions' states (the server passes its consumers file). */
      sessions?: SessionStateStore;
      /** The time at start (µs): a restart later than the stop. */
      timeUs?: number;
      /** MQTT 5 subscribers get `aria-seq` (default true: the server's default). */
      ariaSeq?: boolean;
    } = {},
  ) {
    if (options.store !== undefined) this.store = options.store;
    if (options.timeUs !== undefined) this.timeUs = options.timeUs;
    const clock = { nowUs: () => this.timeUs };
    this.broker = new Broker({
      topics: this.topics,
      tip: this.tip,
      store: this.store,
      clock,
      scheduler: { soon: (task) => this.tasks.push(task) },
      authToken: options.authToken,
      signIn:
        options.users === undefined
          ? undefined
          : { users: options.users, throttle: new FailureThrottle(), scheduleAfter: () => {} },
      consumerStore: options.consumerStore,
    });
    this.door = new MqttDoor({
      broker: this.broker,
      clock,
      scheduler: { soon: (task) => this.tasks.push(task) },
      mapping: ariaTopicMapping,
      consumers: options.inMemorySessions
        ? undefined
        : {
            list: () => this.broker.consumerList(),
            remove: (name) => this.broker.removeConsumer(name),
          },
      retained: {
        newest: (entries) => this.broker.newestOf(Filter.of(...entries)),
        read: (entries) => this.broker.latestMessagesOf(entries),
      },
      ariaSeq: options.ariaSeq,
      sessions: options.sessions,
    });
  }

  later(task: () => void): void {
    this.tasks.push(task);
  }

  /** A client connected (no CONNECT sent yet). */
  client(version: ProtocolVersion = 5, remoteAddress?: string): FakeMqttClient {
    const client = new FakeMqttClient(this, version, remoteAddress);
    client.id = this.door.open(client.connection);
    return client;
  }

  /** A client through CONNECT and CONNACK. */
  async connected(
    clientId: string,
    options: { version?: ProtocolVersion; cleanStart?: boolean; expiryS?: number } = {},
  ): Promise<FakeMqttClient> {
    const version = options.version ?? 5;
    const client = this.client(version);
    client.send({
      type: "connect",
      protocolVersion: version,
      clientId,
      cleanStart: options.cleanStart ?? true,
      keepAlive: 60,
      properties: options.expiryS === undefined ? {} : { sessionExpiryInterval: options.expiryS },
    });
    await this.settle();
    const connack = client.take("connack");
    if (connack.length !== 1 || connack[0].reasonCode !== 0)
      throw new Error(`no CONNACK for ${clientId}: ${JSON.stringify(connack)}`);
    return client;
  }

  /** Advances time and runs the door's and broker's timers. */
  async advance(us: number): Promise<void> {
    this.timeUs += us;
    this.broker.expire(this.timeUs);
    this.door.expire(this.timeUs);
    await this.settle();
  }

  /** Runs scheduled work and lets storage promises settle until nothing is left. */
  async settle(): Promise<void> {
    const tick = () => new Promise((resolve) => setImmediate(resolve));
    for (let round = 0; round < 10_000; round++) {
      await tick();
      if (this.tasks.length === 0) {
        await tick();
        if (this.tasks.length === 0) return;
      }
      for (const task of this.tasks.splice(0)) task();
    }
    throw new Error("settle: work never ran out");
  }
}
