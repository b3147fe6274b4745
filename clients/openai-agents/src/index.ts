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
import { type Ev, type LogOptions, type Stored, Joiner, Log, MAX_EVENT_BYTES, SessionlogError, cutText, depth, fnv1a32, safeName, textOf, validItemId, verbatim } from "@sessionlog/nats-log";

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

interface Tool {
  turn: string;
  phase: "requested" | "started" | "done";
}

/** The fold of the stored events: the items, and what the mapping needs. */
class Fold {
  lastSeq = 0;
  items: Array<{ ref: string; item: AgentInputItem }> = [];
  // The batch being read: its items by index, and the parts of one.
  private batch = "";
  private pending = new Map<number, AgentInputItem>();
  private parts = new Joiner();
  // The mapping's state, from every event (a repair's too).
  turn: string | null = null;
  replied = false;
  tools = new Map<string, Tool>();
  usedTools = new Set<string>();
  usedTurns = new Set<string>();
  openAttempts = new Map<string, string>(); // attempt id -> turn id
  openOther = 0; // steps, approvals, compactions of the open turn: a turn with one cannot end

  apply(e: Stored): void {
    this.lastSeq = e.seq;
    const d = (e.data ?? {}) as Record<string, unknown>;
    switch (e.type) {
      case "source/line":
        if (d.format === FORMAT) this.record(d as unknown as Rec);
        return;
      case "turn/started":
        this.turn = e.turnId ?? null;
        this.replied = false;
        this.openOther = 0;
        if (e.turnId) this.usedTurns.add(e.turnId);
        return;
      case "turn/ended":
        this.turn = null;
        this.openAttempts.clear();
        return;
      case "attempt/started":
        this.openAttempts.set(e.attemptId ?? "", e.turnId ?? "");
        return;
      case "message/assistant":
      case "attempt/interrupted":
        this.openAttempts.delete(e.attemptId ?? "");
        return;
      case "tool/requested":
        this.tools.set(e.toolCallId ?? "", { turn: e.turnId ?? "", phase: "requested" });
        this.usedTools.add(e.toolCallId ?? "");
        return;
      case "tool/started": {
        const t = this.tools.get(e.toolCallId ?? "");
        if (t) t.phase = "started";
        return;
      }
      case "tool/result":
        this.tools.delete(e.toolCallId ?? "");
        return;
      case "step/started":
      case "approval/requested":
      case "compaction/started":
        this.openOther++;
        return;
      case "step/ended":
      case "approval/decided":
      case "compaction/ended":
      case "compaction/aborted":
        this.openOther--;
        return;
    }
  }

  private record(r: Rec): void {
    if (r.batch !== undefined && r.batch !== this.batch) {
      // A batch left without its add record (its writer lost a race or
      // died) is never committed: its items are not the session's.
      this.batch = r.batch;
      this.pending = new Map();
    }
    const item = this.parts.take(r) as AgentInputItem | undefined;
    if (item !== undefined) this.pending.set(r.index ?? 0, item);
    switch (r.op) {
      case "add": {
        const n = r.items ?? 0;
        for (let i = 0; i < n; i++) {
          const item = this.pending.get(i);
          if (item === undefined) throw new SessionlogError("unreadable", `batch ${r.batch} commits ${n} items but item ${i} is missing`);
          this.items.push({ ref: `${r.batch}/${i}`, item });
        }
        this.batch = "";
        this.pending = new Map();
        return;
      }
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
        const m = new Mapper(this.fold, batch);
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
   * verbatim record (in parts when larger than an event); last the add
   * record that commits them. mapped=false leaves the mapping out.
   */
  private batchEvents(batch: string, items: AgentInputItem[], mapped = true): Ev[] {
    const m = new Mapper(this.fold, batch, this.maxEvent);
    const out: Ev[] = [];
    let n = 0;
    const id = () => `${batch}.${n++}`;
    if (this.fold.lastSeq === 0) m.created(this.sessionId, items);
    items.forEach((item, i) => {
      if (mapped) m.map(item, i);
      for (const e of m.events) out.push({ ...e, eventId: id() });
      m.events = [];
      out.push(...verbatim({ format: FORMAT, batch, index: i }, item, this.maxEvent, id));
    });
    if (mapped) m.finish();
    for (const e of m.events) out.push({ ...e, eventId: id() });
    out.push(this.recordEvent(id(), { format: FORMAT, batch, op: "add", items: items.length }));
    if (this.fold.lastSeq === 0) {
      // A new session starts with session/created (the writer's rule).
      out.unshift({ ...(m.createdEvent ?? { type: "session/created", data: { agent: FORMAT } }), eventId: `${batch}.c` });
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
 * Mapper turns items into sessionlog events after the fold's state, as
 * `import` maps an agent file (DESIGN.md section 13): a user message opens
 * a turn (ending the open one first, completed when its last step was a
 * reply), an assistant message is an attempt and its reply, a function
 * call tool/requested + tool/started, its output tool/result; the turn
 * ends completed when a batch ends on a reply with nothing open. Other
 * items (reasoning, hosted tools, system messages) are kept verbatim only.
 */
class Mapper {
  events: Ev[] = [];
  createdEvent?: Ev;
  private readonly turnsUsed: Set<string>;
  private readonly toolsUsed: Set<string>;
  private turn: string | null;
  private replied: boolean;
  private readonly tools: Map<string, Tool>;
  private readonly attempts: Map<string, string>;

  constructor(private readonly fold: Fold, private readonly batch: string, private readonly maxEvent = MAX_EVENT_BYTES) {
    this.turn = fold.turn;
    this.replied = fold.replied;
    this.turnsUsed = new Set(fold.usedTurns);
    this.toolsUsed = new Set(fold.usedTools);
    this.tools = new Map([...fold.tools].map(([k, v]) => [k, { ...v }]));
    this.attempts = new Map(fold.openAttempts);
  }

  created(sessionId: string, items: AgentInputItem[]): void {
    const first = items.find((i) => (i as { role?: string }).role === "user") as { content?: unknown } | undefined;
    let title = first ? textOf(first.content).trim().split("\n")[0] : "";
    if ([...title].length > 120) title = [...title].slice(0, 119).join("") + "…";
    this.createdEvent = {
      eventId: "", type: "session/created",
      data: { agent: FORMAT, ...(title ? { title } : {}), labels: { sessionKey: sessionId.slice(0, 1024) } },
    };
  }

  private add(e: Omit<Ev, "eventId">): void {
    this.events.push({ ...e, eventId: "", data: this.shrink(e.type, e.data as Record<string, unknown>) });
  }

  private id(prefix: string, i: number): string {
    return `${prefix}.${this.batch}.${i}`;
  }

  private openInTurn(): boolean {
    if (this.fold.openOther > 0 && this.turn === this.fold.turn) return true;
    for (const t of this.tools.values()) if (t.turn === this.turn) return true;
    return false;
  }

  endTurn(reason: string): void {
    if (this.turn === null || this.openInTurn()) return;
    for (const [a, t] of this.attempts) {
      if (t === this.turn) this.add({ type: "attempt/interrupted", turnId: t, attemptId: a, data: { reason: "interrupted" } });
    }
    this.attempts.clear();
    this.add({ type: "turn/ended", turnId: this.turn, data: { reason } });
    this.turn = null;
  }

  private openTurn(i: number): string {
    if (this.turn !== null) return this.turn;
    let id = this.id("t", i);
    for (let k = 2; this.turnsUsed.has(id); k++) id = `${this.id("t", i)}.${k}`;
    this.turnsUsed.add(id);
    this.turn = id;
    this.replied = false;
    this.add({ type: "turn/started", turnId: id, data: {} });
    return id;
  }

  map(item: AgentInputItem, i: number): void {
    const it = item as Record<string, unknown>;
    const type = (it.type as string | undefined) ?? "message";
    if (type === "message" && it.role === "user") {
      if (this.turn !== null) this.endTurn(this.replied ? "completed" : "interrupted");
      const turn = this.openTurn(i);
      this.add({ type: "message/user", turnId: turn, data: { content: it.content ?? "" } });
      return;
    }
    if (type === "message" && it.role === "assistant") {
      const turn = this.openTurn(i);
      const attempt = this.id("a", i);
      this.add({ type: "attempt/started", turnId: turn, attemptId: attempt, data: {} });
      this.add({ type: "message/assistant", turnId: turn, attemptId: attempt, data: { content: it.content ?? [] } });
      this.replied = true;
      return;
    }
    if (type === "function_call" && typeof it.callId === "string") {
      const turn = this.openTurn(i);
      let id = validItemId(it.callId) ? it.callId : this.id("c", i);
      if (this.toolsUsed.has(id)) id = this.id("c", i);
      if (this.toolsUsed.has(id)) return;
      let input: unknown = { arguments: it.arguments ?? "" };
      try {
        const v = JSON.parse(String(it.arguments ?? ""));
        if (v !== null) input = v;
      } catch {
        // not JSON: kept as the string it is
      }
      this.add({ type: "tool/requested", turnId: turn, toolCallId: id, data: { name: String(it.name || "(unnamed)"), input } });
      this.add({ type: "tool/started", turnId: turn, toolCallId: id, data: {} });
      this.toolsUsed.add(id);
      this.tools.set(id, { turn, phase: "started" });
      this.replied = false;
      return;
    }
    if (type === "function_call_result" && typeof it.callId === "string") {
      const t = this.tools.get(it.callId);
      if (!t || t.phase !== "started" || t.turn !== this.turn) return;
      this.add({ type: "tool/result", turnId: t.turn, toolCallId: it.callId, data: { status: it.status === "incomplete" ? "error" : "ok", output: it.output ?? null } });
      this.tools.delete(it.callId);
      this.replied = false;
    }
  }

  finish(): void {
    if (this.turn !== null && this.replied) this.endTurn("completed");
  }

  /** data the writer takes: model-visible text over the event limit is cut, with a note (the item stays whole in its record). */
  private shrink(type: string, data: Record<string, unknown>): object {
    const budget = Math.floor(this.maxEvent / 2);
    if (Buffer.byteLength(JSON.stringify(data)) < budget && depth(data) < 60) return data;
    const cut = (s: string) => cutText(s, budget / 2);
    switch (type) {
      case "message/user":
      case "message/assistant":
        return { content: cut(textOf(data.content)) };
      case "tool/requested":
        return { name: data.name, input: { truncated: cut(JSON.stringify(data.input)) } };
      case "tool/result":
        return { status: data.status, output: cut(textOf(data.output) || JSON.stringify(data.output)) };
    }
    return data;
  }
}
