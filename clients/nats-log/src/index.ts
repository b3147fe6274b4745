// What sessionlog's agent SDK clients (clients/openai-agents,
// clients/google-adk) share: a session's events read through
// sessions.api.read and appended through sessions.api.append (DESIGN.md
// sections 4 and 12), every append naming expectedSeq and retried as the
// contract says, refusals thrown as typed errors. It knows no SDK.
import { createHash, randomBytes } from "node:crypto";
import type { NatsConnection } from "nats";

/** An error answered by sessionlog (code is a contract error code of DESIGN.md section 4), or the client's own. */
export class SessionlogError extends Error {
  constructor(readonly code: string, message: string, readonly currentSeq?: number) {
    super(`sessionlog: ${code}: ${message}`);
    this.name = "SessionlogError";
  }
}

export interface LogOptions {
  /** Request timeout in milliseconds (default 20000). */
  timeoutMs?: number;
  /** How long an append keeps retrying while no writer answers or the connection is down (default 60000). */
  retryForMs?: number;
  /** Appends retried after losing a race to another writer before giving up (default 200). */
  maxConflicts?: number;
  /** The lease holder named in appends (DESIGN.md section 2), if any. */
  holder?: string;
}

/** An event as sent in an append request. */
export interface Ev {
  eventId: string;
  type: string;
  turnId?: string;
  attemptId?: string;
  toolCallId?: string;
  ignorable?: boolean;
  data: object;
}

/** A stored event as sessions.api.read answers it. */
export interface Stored extends Ev {
  seq: number;
  time: string;
}

/** The largest event the writer takes by default, in bytes (DESIGN.md section 3). */
export const MAX_EVENT_BYTES = 256 << 10;

/** FNV-1a (32 bits) of s's UTF-8 bytes, as 8 hex digits (DESIGN.md section 13). */
export function fnv1a32(s: string): string {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(s, "utf8")) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h.toString(16).padStart(8, "0");
}

/** The first n hex digits of the SHA-256 of s. */
export function sha256(s: string, n: number): string {
  return createHash("sha256").update(s, "utf8").digest("hex").slice(0, n);
}

/** s with every character outside a session id's alphabet made "-", cut to max characters. */
export function safeName(s: string, max: number): string {
  return s.replace(/[^A-Za-z0-9_-]/g, "-").slice(0, max);
}

/** Whether s is a valid envelope id (turn, tool call, event). */
export function validItemId(s: string): boolean {
  return /^[A-Za-z0-9_.:-]{1,128}$/.test(s);
}

/** JSON nesting depth of a value (sessionlog accepts at most 64). */
export function depth(v: unknown): number {
  if (v === null || typeof v !== "object") return 0;
  let d = 0;
  for (const x of Object.values(v)) d = Math.max(d, depth(x));
  return d + 1;
}

/** s split into pieces whose JSON string encodings are at most max bytes each. */
export function splitText(s: string, max: number): string[] {
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

/** s cut to about budget bytes of JSON, with a note of its whole size, when it is longer. */
export function cutText(s: string, budget: number): string {
  const parts = splitText(s, budget);
  return parts.length > 1 ? `${parts[0]}\n[cut by sessionlog: ${Buffer.byteLength(s)} bytes in all; the whole item is kept as source/line]` : s;
}

/** The text in a value (a string, the text fields of parts), for mapped data too large to keep whole. */
export function textOf(v: unknown): string {
  if (typeof v === "string") return v;
  if (Array.isArray(v)) return v.map(textOf).filter((s) => s !== "").join("\n");
  if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    if (typeof o.text === "string") return o.text;
    if (typeof o.output === "string") return o.output;
  }
  return "";
}

/**
 * The source/line events that keep value verbatim (DESIGN.md section 15):
 * one whose data is rec with line = value, or, over the event limit (or
 * nested deeper than sessionlog takes), rec with the value's JSON text in
 * parts (part, parts, text). id gives each event its id.
 */
export function verbatim(rec: object, value: unknown, maxEvent: number, id: () => string): Ev[] {
  const text = JSON.stringify(value);
  const whole = { ...rec, line: value };
  if (text.length < maxEvent / 6 || (Buffer.byteLength(JSON.stringify(whole)) < maxEvent - 2048 && depth(value) < 60)) {
    return [{ eventId: id(), type: "source/line", ignorable: true, data: whole }];
  }
  const pieces = splitText(text, maxEvent - 2048);
  return pieces.map((t, k) => ({ eventId: id(), type: "source/line", ignorable: true, data: { ...rec, part: k + 1, parts: pieces.length, text: t } }));
}

/**
 * Joins verbatim's events back: give it each record's data in seq order;
 * it returns the value once its last part came (undefined before).
 */
export class Joiner {
  private parts: string[] = [];
  take(d: { line?: unknown; part?: number; parts?: number; text?: string }): unknown {
    if (d.line !== undefined) return d.line;
    if (d.part === undefined) return undefined;
    if (d.part === 1) this.parts = [];
    this.parts.push(d.text ?? "");
    if (d.part !== d.parts) return undefined;
    const v = JSON.parse(this.parts.join(""));
    this.parts = [];
    return v;
  }
}

/** A new batch id: unique in practice, a valid envelope id. */
export function batchId(prefix: string): string {
  return `${prefix}.${Date.now().toString(36)}.${randomBytes(6).toString("hex")}`;
}

const enc = new TextEncoder();
const dec = new TextDecoder();

/**
 * Log reads and appends sessions over one NATS connection, the caller's.
 * An agent of a tenant other than the default (DESIGN.md section 2) may
 * receive replies only on its own inbox prefix: connect it with
 * `connect({ ..., user, pass, inboxPrefix: "_INBOX.<user>" })`. With
 * another prefix the first request fails at once with `forbidden`, having
 * sent nothing (checkInbox).
 */
export class Log {
  private readonly timeout: number;
  private inbox?: Promise<void>;

  constructor(private readonly nc: NatsConnection, private readonly opts: LogOptions = {}) {
    this.timeout = opts.timeoutMs ?? 20000;
  }

  /**
   * Resolves once the server has taken a subscription under the
   * connection's inbox prefix; throws forbidden, having sent nothing, when
   * it refuses it (an agent of a tenant connected without inboxPrefix
   * "_INBOX.<user>"). A request sent anyway would be taken by the writer
   * and its answer lost. The first request calls it; its answer is kept.
   */
  checkInbox(): Promise<void> {
    this.inbox ??= (async () => {
      const prefix = (this.nc as unknown as { options?: { inboxPrefix?: string } }).options?.inboxPrefix || "_INBOX";
      let refused: Error | null = null;
      const sub = this.nc.subscribe(`${prefix}.${randomBytes(8).toString("hex")}.check`, { callback: (err) => { refused ??= err; } });
      try {
        // The server answers a refused subscription before the flush's PONG.
        await this.nc.flush();
      } catch (e) {
        this.inbox = undefined; // asked again by the next request
        throw new SessionlogError("unavailable", `checking the reply inbox: ${(e as Error).message}`);
      } finally {
        if (!sub.isClosed()) sub.unsubscribe();
      }
      if (refused) {
        throw new SessionlogError("forbidden", `the server refuses this connection's reply inbox prefix ${prefix} (${(refused as Error).message}); ` +
          `an agent of a tenant connects with inboxPrefix "_INBOX.<user>": nothing was sent`);
      }
    })();
    return this.inbox;
  }

  /**
   * Gives apply each stored event of the session after afterSeq, in seq
   * order, a page at a time, and returns the last seq read (afterSeq for a
   * session that does not exist or has nothing new).
   */
  async read(sessionId: string, afterSeq: number, apply: (e: Stored) => void): Promise<number> {
    for (;;) {
      let r: { events: Stored[]; more: boolean };
      try {
        const body = JSON.stringify({ sessionId, afterSeq });
        r = await this.retrying(() => this.request("sessions.api.read", body));
      } catch (e) {
        if (e instanceof SessionlogError && e.code === "not_found" && afterSeq === 0) return 0;
        throw e;
      }
      for (const e of r.events) {
        if (e.seq !== afterSeq + 1) throw new SessionlogError("unreadable", `session ${sessionId}: event seq ${e.seq} after ${afterSeq}`);
        apply(e);
        afterSeq = e.seq;
      }
      if (!r.more || r.events.length === 0) return afterSeq;
    }
  }

  /**
   * Appends the events make gives, in requests of one NATS message each,
   * chained by expectedSeq, after sync brought the caller's fold up to the
   * tail (it returns the tail's seq). When another writer got there first,
   * sync and make run again with a new batch id: the events a batch left
   * this way are never committed by it. A refusal that names the mapped
   * events (structure, invalid_event) runs make again with mapped = false.
   * make returning nothing is nothing to do.
   */
  async commit(sessionId: string, prefix: string, sync: () => Promise<number>, make: (batch: string, mapped: boolean) => Ev[]): Promise<void> {
    let mapped = true;
    for (let round = 0; ; round++) {
      let expected = await sync();
      const events = make(batchId(prefix), mapped);
      if (events.length === 0) return;
      try {
        for (const req of this.requests(events)) expected = await this.append(sessionId, req, expected);
        return;
      } catch (e) {
        if (!(e instanceof SessionlogError)) throw e;
        if (e.code === "conflict" && round < (this.opts.maxConflicts ?? 200)) continue;
        if ((e.code === "structure" || e.code === "invalid_event") && mapped) {
          mapped = false;
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
  private async append(sessionId: string, events: Ev[], expectedSeq: number): Promise<number> {
    const body = JSON.stringify({ sessionId, expectedSeq, ...(this.opts.holder ? { holder: this.opts.holder } : {}), events });
    return (await this.retrying(() => this.request<{ lastSeq: number }>("sessions.api.append", body))).lastSeq;
  }

  /**
   * f, called again after a pause (100 ms, doubling to 2 s) while it
   * fails with not_committed, outcome_unknown or unavailable (no answer:
   * a writer restarting, the connection reconnecting), for retryForMs.
   */
  private async retrying<T>(f: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + (this.opts.retryForMs ?? 60000);
    for (let wait = 100; ; wait = Math.min(wait * 2, 2000)) {
      try {
        return await f();
      } catch (e) {
        if (!(e instanceof SessionlogError) || !["not_committed", "outcome_unknown", "unavailable"].includes(e.code) || Date.now() > deadline) throw e;
      }
      await new Promise((r) => setTimeout(r, wait));
    }
  }

  /** One request; an error reply is thrown as a SessionlogError, and so is no answer (unavailable). */
  async request<T>(subject: string, body: string, timeoutMs = this.timeout): Promise<T> {
    await this.checkInbox();
    let m;
    try {
      m = await this.nc.request(subject, enc.encode(body), { timeout: timeoutMs });
    } catch (e) {
      // No responder, a timeout, a connection reconnecting or a subject
      // the user may not publish: nothing said whether it was taken.
      const { code, permissionContext } = e as { code?: string; permissionContext?: { operation?: string } };
      // A refused subscription is the connection's reply inbox: nats.js
      // fails every request waiting on it at once.
      const hint = permissionContext?.operation === "subscription"
        ? `: this user may not receive replies on the connection's inbox prefix; an agent of a tenant connects with inboxPrefix "_INBOX.<user>"`
        : "";
      throw new SessionlogError(code === "PERMISSIONS_VIOLATION" ? "forbidden" : "unavailable", `${subject}: ${(e as Error).message}${hint}`);
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

export { Mapper, TurnState, title } from "./mapping.js";

/** A record of a verbatim batch: an item (whole or a part), or a batch's add record. */
export interface BatchRecord {
  batch?: string;
  index?: number;
  line?: unknown;
  part?: number;
  parts?: number;
  text?: string;
  op?: string;
  items?: number;
}

/**
 * Batches folds the records of batches (DESIGN.md section 15): the items
 * of a batch count once its add record comes, and a batch left without
 * one (its writer lost a race between two of its requests, or died) is
 * dropped when the next batch's records begin.
 */
export class Batches {
  private batch = "";
  private pending = new Map<number, unknown>();
  private parts = new Joiner();

  /** Takes one record; for an add record, returns the batch's items in order with their refs (batch/index). */
  take(r: BatchRecord): Array<{ ref: string; item: unknown }> | undefined {
    if (r.batch !== undefined && r.batch !== this.batch) {
      this.batch = r.batch;
      this.pending = new Map();
    }
    const item = this.parts.take(r);
    if (item !== undefined) this.pending.set(r.index ?? 0, item);
    if (r.op !== "add") return undefined;
    const out: Array<{ ref: string; item: unknown }> = [];
    for (let i = 0; i < (r.items ?? 0); i++) {
      if (!this.pending.has(i)) throw new SessionlogError("unreadable", `batch ${r.batch} commits ${r.items} items but item ${i} is missing`);
      out.push({ ref: `${r.batch}/${i}`, item: this.pending.get(i) });
    }
    this.batch = "";
    this.pending = new Map();
    return out;
  }
}
