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
import { randomUUID, randomBytes } from "node:crypto";
import type { AgentInputItem, Session } from "@openai/agents";
import type { NatsConnection } from "nats";

/** The format of the source/line events this session writes. */
export const FORMAT = "openai-agents";

/** An error answered by sessionlog (code is a contract error code of DESIGN.md section 4), or the session's own. */
export class SessionlogError extends Error {
  constructor(readonly code: string, message: string, readonly currentSeq?: number) {
    super(`sessionlog: ${code}: ${message}`);
    this.name = "SessionlogError";
  }
}

export interface SessionlogSessionOptions {
  /** The SDK's session id (default: a new random UUID, as MemorySession's). */
  sessionId?: string;
  /** Request timeout in milliseconds (default 20000). */
  timeoutMs?: number;
  /** How long an append keeps retrying while no writer answers or the connection is down (default 60000). */
  retryForMs?: number;
  /** Appends retried after losing a race to another writer before giving up (default 200). */
  maxConflicts?: number;
  /** The lease holder named in appends (DESIGN.md section 2), if any. */
  holder?: string;
  /** Largest event the writer takes, in bytes (default 256 KiB, DESIGN.md section 3). */
  maxEventBytes?: number;
}

/** The sessionlog session id that holds the SDK session id (DESIGN.md section 15). */
export function sessionlogId(sessionId: string): string {
  if (/^[A-Za-z0-9_-]{1,100}$/.test(sessionId)) return `oa-${sessionId}`;
  // Another id is made safe and told apart from the ids it could be
  // confused with by a hash of it.
  let h = 0x811c9dc5;
  for (const b of Buffer.from(sessionId, "utf8")) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return `oa-${sessionId.replace(/[^A-Za-z0-9_-]/g, "-").slice(0, 100)}-${h.toString(16).padStart(8, "0")}`;
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

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

/** An event as sent in an append request. */
interface Ev {
  eventId: string;
  type: string;
  turnId?: string;
  attemptId?: string;
  toolCallId?: string;
  ignorable?: boolean;
  data: Json | object;
}

/** A stored event as sessions.api.read answers it. */
interface Stored extends Ev {
  seq: number;
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
  private parts: string[] = [];
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
      this.parts = [];
    }
    if (r.line !== undefined) {
      this.pending.set(r.index ?? 0, r.line);
    } else if (r.part !== undefined) {
      this.parts.push(r.text ?? "");
      if (r.part === r.parts) {
        this.pending.set(r.index ?? 0, reviveItem(this.parts.join("")));
        this.parts = [];
      }
    }
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

function reviveItem(text: string): AgentInputItem {
  return JSON.parse(text) as AgentInputItem;
}

/** JSON nesting depth of a value (sessionlog accepts at most 64). */
function depth(v: unknown): number {
  if (v === null || typeof v !== "object") return 0;
  let d = 0;
  for (const x of Object.values(v)) d = Math.max(d, depth(x));
  return d + 1;
}

/** s split into pieces whose JSON string encodings are at most max bytes each. */
function splitText(s: string, max: number): string[] {
  const out: string[] = [];
  let start = 0;
  let size = 0;
  for (let i = 0; i < s.length; ) {
    const c = s.codePointAt(i)!;
    const w = c > 0xffff ? 2 : 1;
    let n: number;
    if (c === 0x22 || c === 0x5c || c === 8 || c === 9 || c === 10 || c === 12 || c === 13) n = 2;
    else if (c < 0x20 || (c >= 0xd800 && c <= 0xdfff)) n = 6;
    else if (c < 0x80) n = 1;
    else if (c < 0x800) n = 2;
    else if (c < 0x10000) n = 3;
    else n = 4;
    if (size + n > max && i > start) {
      out.push(s.slice(start, i));
      start = i;
      size = 0;
    }
    size += n;
    i += w;
  }
  out.push(s.slice(start));
  return out;
}

/** The text of a message's content, for a mapped event too large to keep whole. */
function textOf(v: unknown): string {
  if (typeof v === "string") return v;
  if (Array.isArray(v)) return v.map(textOf).filter((s) => s !== "").join("\n");
  if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    if (typeof o.text === "string") return o.text;
    if (typeof o.output === "string") return o.output;
  }
  return "";
}

function validItemId(s: string): boolean {
  return /^[A-Za-z0-9_.:-]{1,128}$/.test(s);
}

const enc = new TextEncoder();
const dec = new TextDecoder();

/**
 * The Session: pass `new SessionlogSession(nc, { sessionId })` as the
 * runner's `session` option. One object serves one session; any number of
 * objects, in any number of processes, may serve the same one.
 */
export class SessionlogSession implements Session {
  readonly sessionId: string;
  /** The sessionlog session id (oa-<sessionId>). */
  readonly id: string;
  private readonly timeout: number;
  private readonly maxEvent: number;
  private fold = new Fold();
  // One operation at a time per object: the fold is shared.
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly nc: NatsConnection, private readonly opts: SessionlogSessionOptions = {}) {
    this.sessionId = opts.sessionId ?? randomUUID();
    this.id = sessionlogId(this.sessionId);
    this.timeout = opts.timeoutMs ?? 20000;
    this.maxEvent = opts.maxEventBytes ?? 256 << 10;
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
    const texts = items.map((item, i) => {
      const t = JSON.stringify(item);
      if (t === undefined) throw new SessionlogError("bad_request", `item ${i} is not a JSON value`);
      return t;
    });
    const copies = texts.map((t) => JSON.parse(t) as AgentInputItem);
    await this.serial(() => this.commit((batch, mapped) => this.batchEvents(batch, copies, texts, mapped)));
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
  private batchEvents(batch: string, items: AgentInputItem[], texts: string[], mapped = true): Ev[] {
    const m = new Mapper(this.fold, batch, this.maxEvent);
    const out: Ev[] = [];
    let n = 0;
    const id = () => `${batch}.${n++}`;
    if (this.fold.lastSeq === 0) m.created(this.sessionId, items);
    items.forEach((item, i) => {
      if (mapped) m.map(item, i);
      for (const e of m.events) out.push({ ...e, eventId: id() });
      m.events = [];
      const whole: Rec = { format: FORMAT, batch, index: i, line: item };
      if (texts[i].length < this.maxEvent / 6 || (Buffer.byteLength(JSON.stringify(whole)) < this.maxEvent - 2048 && depth(item) < 60)) {
        out.push(this.recordEvent(id(), whole));
        return;
      }
      const pieces = splitText(texts[i], this.maxEvent - 2048);
      pieces.forEach((text, k) => out.push(this.recordEvent(id(), { format: FORMAT, batch, index: i, part: k + 1, parts: pieces.length, text })));
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

  /**
   * Appends the events make gives for the fold as it is, in requests of
   * one NATS message each, chained by expectedSeq. When another writer got
   * there first the fold is read again and make called again for a new
   * batch: the events already stored of a batch left this way are never
   * committed. A refusal of the mapped events (a session some other writer
   * left in a state the mapping does not foresee) falls back to the
   * verbatim records alone.
   */
  private async commit(make: (batch: string, mapped: boolean) => Ev[]): Promise<void> {
    let verbatimOnly = false;
    for (let round = 0; ; round++) {
      await this.sync();
      const batch = `oa.${Date.now().toString(36)}.${randomBytes(6).toString("hex")}`;
      const events = make(batch, !verbatimOnly);
      if (events.length === 0) return;
      try {
        let expected = this.fold.lastSeq;
        for (const req of this.requests(events)) {
          expected = await this.append(req, expected);
        }
        return;
      } catch (e) {
        if (!(e instanceof SessionlogError)) throw e;
        if (e.code === "conflict" && round < (this.opts.maxConflicts ?? 200)) continue;
        if ((e.code === "structure" || e.code === "invalid_event") && !verbatimOnly) {
          verbatimOnly = true;
          continue;
        }
        throw e;
      }
    }
  }

  /** events in requests that each fit in a NATS message and hold at most 1000 events. */
  private *requests(events: Ev[]): Generator<Ev[]> {
    const room = (this.nc.info?.max_payload ?? 1 << 20) - 4096;
    let req: Ev[] = [];
    let size = 0;
    for (const e of events) {
      const n = Buffer.byteLength(JSON.stringify(e)) + 1;
      if (req.length > 0 && (size + n > room || req.length === 1000)) {
        yield req;
        req = [];
        size = 0;
      }
      req.push(e);
      size += n;
    }
    if (req.length > 0) yield req;
  }

  /**
   * One append request, retried as it is (same event ids, so a retry of
   * one that was stored is answered as a duplicate) while the outcome is
   * unknown, nothing was committed, or no writer answers (the connection
   * reconnecting). Returns the session's new last seq.
   */
  private async append(events: Ev[], expectedSeq: number): Promise<number> {
    const body = JSON.stringify({ sessionId: this.id, expectedSeq, ...(this.opts.holder ? { holder: this.opts.holder } : {}), events });
    const deadline = Date.now() + (this.opts.retryForMs ?? 60000);
    for (let wait = 100; ; wait = Math.min(wait * 2, 2000)) {
      try {
        const r = await this.request<{ lastSeq: number }>("sessions.api.append", body);
        return r.lastSeq;
      } catch (e) {
        const code = e instanceof SessionlogError ? e.code : "unavailable";
        if (!["not_committed", "outcome_unknown", "unavailable"].includes(code) || Date.now() > deadline) {
          throw e instanceof SessionlogError ? e : new SessionlogError("unavailable", `append to ${this.id}: ${(e as Error).message}`);
        }
      }
      await new Promise((r) => setTimeout(r, wait));
    }
  }

  /** Reads the events after the fold's last seq into it (sessions.api.read, a page at a time). */
  private async sync(): Promise<void> {
    for (;;) {
      let r: { events: Stored[]; more: boolean };
      try {
        r = await this.request("sessions.api.read", JSON.stringify({ sessionId: this.id, afterSeq: this.fold.lastSeq }));
      } catch (e) {
        if (e instanceof SessionlogError && e.code === "not_found" && this.fold.lastSeq === 0) return;
        throw e;
      }
      for (const e of r.events) {
        if (e.seq !== this.fold.lastSeq + 1) {
          throw new SessionlogError("unreadable", `session ${this.id}: event seq ${e.seq} after ${this.fold.lastSeq}`);
        }
        this.fold.apply(e);
      }
      if (!r.more || r.events.length === 0) return;
    }
  }

  private async request<T>(subject: string, body: string): Promise<T> {
    let m;
    try {
      m = await this.nc.request(subject, enc.encode(body), { timeout: this.timeout });
    } catch (e) {
      // No responder, a timeout, a connection reconnecting: nothing said
      // whether a request was taken.
      throw new SessionlogError("unavailable", `${subject}: ${(e as Error).message}`);
    }
    const text = dec.decode(m.data);
    let v: { error?: { code: string; message: string; currentSeq?: number } };
    try {
      v = JSON.parse(text);
    } catch {
      throw new SessionlogError("internal", `${subject}: reply is not JSON: ${text.slice(0, 200)}`);
    }
    const code = m.headers?.get("Nats-Service-Error-Code");
    if (v?.error || code) {
      throw new SessionlogError(v?.error?.code ?? code ?? "internal", v?.error?.message ?? "request failed", v?.error?.currentSeq);
    }
    return v as T;
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

  constructor(private readonly fold: Fold, private readonly batch: string, private readonly maxEvent = 256 << 10) {
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
    const cut = (s: string) => {
      const parts = splitText(s, budget / 2);
      return parts.length > 1 ? `${parts[0]}\n[cut by sessionlog: ${Buffer.byteLength(s)} bytes in all; the whole item is kept as source/line]` : s;
    };
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
