// An OpenAI Agents SDK Session that keeps a conversation's items in
// sessionlog. It speaks only sessions.api.append and sessions.api.read
// (DESIGN.md sections 4, 12 and 15), so the agent user's rights suffice.
//
// Every item is kept verbatim as an ignorable source/line event of format
// openai-agents, and mapped where the mapping is clear to the events the
// dashboard, repair and exports read (user and assistant messages in
// turns, function calls and their outputs as tool/*). popItem and
// clearSession are appends that retract items, never deletions. Every
// append names the session's last seq (expectedSeq): of two processes
// appending at once one wins, the other reads the new tail and tries again,
// so no item is lost, doubled or interleaved with another call's items.
import { randomUUID } from "node:crypto";
import type { AgentInputItem, Session } from "@openai/agents";
import type { NatsConnection } from "nats";
import { type Ev, type LogOptions, type Stored, Batches, Log, MAX_EVENT_BYTES, Mapper, SessionlogError, TurnState, fnv1a32, safeName, textOf, title, verbatim } from "@sessionlog/nats-log";

export { SessionlogError };

/** The format of the source/line events this session writes. */
export const FORMAT = "openai-agents";

export interface SessionlogSessionOptions extends LogOptions {
  /** The SDK's session id (default: a new random UUID, as MemorySession's). */
  sessionId?: string;
  /** Largest event the writer takes, in bytes (default 256 KiB, DESIGN.md section 3). */
  maxEventBytes?: number;
}

/** The sessionlog session id that holds the SDK session id (DESIGN.md section 15). */
export function sessionlogId(sessionId: string): string {
  if (/^[A-Za-z0-9_-]{1,100}$/.test(sessionId)) return `oa-${sessionId}`;
  // Another id is made safe and told apart from the ids it could be
  // confused with by a hash of it.
  return `oa-${safeName(sessionId, 100)}-${fnv1a32(sessionId)}`;
}

/** A record of the openai-agents source: what the source/line events carry. */
interface Rec {
  format: string;
  batch?: string;
  index?: number;
  line?: AgentInputItem;
  part?: number;
  parts?: number;
  text?: string;
  op?: "add" | "pop" | "clear";
  items?: number;
  item?: string;
}

/** The fold of the stored events: the items, and what the mapping needs. */
class Fold {
  lastSeq = 0;
  items: Array<{ ref: string; item: AgentInputItem }> = [];
  private batches = new Batches();
  // The mapping's state, from every event (a repair's too).
  readonly turns = new TurnState();

  apply(e: Stored): void {
    this.lastSeq = e.seq;
    const d = (e.data ?? {}) as Record<string, unknown>;
    if (e.type === "source/line" && d.format === FORMAT) this.record(d as unknown as Rec);
    this.turns.apply(e);
  }

  private record(r: Rec): void {
    const added = this.batches.take(r);
    for (const a of added ?? []) this.items.push(a as { ref: string; item: AgentInputItem });
    switch (r.op) {
      case "pop": {
        const i = this.items.findLastIndex((x) => x.ref === r.item);
        if (i >= 0) this.items.splice(i, 1);
        return;
      }
      case "clear":
        this.items = [];
        return;
    }
  }
}

/**
 * The Session: pass `new SessionlogSession(nc, { sessionId })` as the
 * runner's `session` option. One object serves one session; any number of
 * objects, in any number of processes, may serve the same one.
 */
export class SessionlogSession implements Session {
  readonly sessionId: string;
  /** The sessionlog session id (oa-<sessionId>). */
  readonly id: string;
  private readonly log: Log;
  private readonly maxEvent: number;
  private fold = new Fold();
  // One operation at a time per object: the fold is shared.
  private queue: Promise<unknown> = Promise.resolve();

  constructor(nc: NatsConnection, opts: SessionlogSessionOptions = {}) {
    this.sessionId = opts.sessionId ?? randomUUID();
    this.id = sessionlogId(this.sessionId);
    this.log = new Log(nc, opts);
    this.maxEvent = opts.maxEventBytes ?? MAX_EVENT_BYTES;
  }

  async getSessionId(): Promise<string> {
    return this.sessionId;
  }

  /** The items, oldest first; with limit, the last limit of them. */
  async getItems(limit?: number): Promise<AgentInputItem[]> {
    return this.serial(async () => {
      await this.sync();
      const items = this.fold.items.map((x) => structuredClone(x.item));
      if (limit === undefined) return items;
      if (limit <= 0) return [];
      return items.slice(Math.max(items.length - limit, 0));
    });
  }

  /** Appends items, after whatever another process appended first. */
  async addItems(items: AgentInputItem[]): Promise<void> {
    if (items.length === 0) return;
    const copies = items.map((item, i) => {
      const t = JSON.stringify(item);
      if (t === undefined) throw new SessionlogError("bad_request", `item ${i} is not a JSON value`);
      return JSON.parse(t) as AgentInputItem;
    });
    await this.serial(() => this.commit((batch, mapped) => this.batchEvents(batch, copies, mapped)));
  }

  /** Retracts the last item and returns it (undefined when there is none). */
  async popItem(): Promise<AgentInputItem | undefined> {
    return this.serial(async () => {
      let popped: AgentInputItem | undefined;
      await this.commit((batch) => {
        const last = this.fold.items.at(-1);
        popped = last?.item;
        if (!last) return [];
        return [this.recordEvent(`${batch}.0`, { format: FORMAT, op: "pop", item: last.ref })];
      });
      return popped === undefined ? undefined : structuredClone(popped);
    });
  }

  /** Retracts every item so far; the session and its history stay in sessionlog (erasure is the operator's). */
  async clearSession(): Promise<void> {
    await this.serial(() =>
      this.commit((batch, mapped) => {
        if (this.fold.items.length === 0) return [];
        const m = new Mapper(this.fold.turns, batch);
        if (mapped) m.endTurn("interrupted");
        const out = m.events.map((e, i) => ({ ...e, eventId: `${batch}.${i}` }));
        return [...out, this.recordEvent(`${batch}.${out.length}`, { format: FORMAT, op: "clear" })];
      }),
    );
  }

  private serial<T>(f: () => Promise<T>): Promise<T> {
    const p = this.queue.then(f, f);
    this.queue = p.catch(() => undefined);
    return p;
  }

  private recordEvent(eventId: string, rec: Rec): Ev {
    return { eventId, type: "source/line", ignorable: true, data: rec };
  }

  /**
   * The events of an addItems batch: per item, its mapped events then its
   * verbatim record (in parts when larger than an event); the last record
   * carries the add that commits them. mapped=false leaves the mapping out.
   */
  private batchEvents(batch: string, items: AgentInputItem[], mapped = true): Ev[] {
    const m = new Mapper(this.fold.turns, batch, this.maxEvent);
    const out: Ev[] = [];
    let n = 0;
    const id = () => `${batch}.${n++}`;
    items.forEach((item, i) => {
      const last = i === items.length - 1;
      if (mapped) mapItem(m, item, i);
      if (mapped && last) m.finish();
      for (const e of m.take()) out.push({ ...e, eventId: id() });
      const records = verbatim({ format: FORMAT, batch, index: i }, item, this.maxEvent, id);
      // The batch's last record commits it.
      if (last) Object.assign(records[records.length - 1].data, { op: "add", items: items.length });
      out.push(...records);
    });
    if (this.fold.lastSeq === 0) {
      // A new session starts with session/created (the writer's rule).
      out.unshift({ ...created(this.sessionId, items), eventId: `${batch}.c` });
    }
    return out;
  }

  /** Appends what make gives for the fold brought up to the session's tail (Log.commit). */
  private commit(make: (batch: string, mapped: boolean) => Ev[]): Promise<void> {
    return this.log.commit(this.id, "oa", () => this.sync(), make);
  }

  /** Reads the events after the fold's last seq into it, and returns that seq. */
  private async sync(): Promise<number> {
    return this.log.read(this.id, this.fold.lastSeq, (e) => this.fold.apply(e));
  }
}

/**
 * mapItem maps one item (DESIGN.md section 15): a user message is a
 * prompt, an assistant message a reply, a function call a call, its output
 * the call's result (an error when incomplete). Other items (reasoning,
 * hosted tools, system messages) are kept verbatim only.
 */
function mapItem(m: Mapper, item: AgentInputItem, i: number): void {
  const it = item as Record<string, unknown>;
  const type = (it.type as string | undefined) ?? "message";
  if (type === "message" && it.role === "user") {
    m.prompt(it.content, i);
  } else if (type === "message" && it.role === "assistant") {
    m.reply(it.content, i);
  } else if (type === "function_call" && typeof it.callId === "string") {
    let input: unknown = { arguments: it.arguments ?? "" };
    try {
      const v = JSON.parse(String(it.arguments ?? ""));
      if (v !== null) input = v;
    } catch {
      // not JSON: kept as the string it is
    }
    m.call(it.callId, String(it.name ?? ""), input, i);
  } else if (type === "function_call_result" && typeof it.callId === "string") {
    m.result(it.callId, it.output, it.status === "incomplete");
  }
}

/** The session/created of a new session: its first prompt is the title. */
function created(sessionId: string, items: AgentInputItem[]): Ev {
  const first = items.find((i) => (i as { role?: string }).role === "user") as { content?: unknown } | undefined;
  const t = first ? title(textOf(first.content)) : "";
  return { eventId: "", type: "session/created", data: { agent: FORMAT, ...(t ? { title: t } : {}), labels: { sessionKey: sessionId.slice(0, 1024) } } };
}
