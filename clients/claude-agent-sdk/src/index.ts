// A Claude Agent SDK SessionStore that keeps sessions in sessionlog.
// It maps nothing itself: it speaks only sessions.api.* (DESIGN.md
// section 15), and the service maps entries exactly as
// `sessionlog import --from claude-code` maps the same file.
import { foldSessionSummary } from "@anthropic-ai/claude-agent-sdk";
import type { SessionKey, SessionStore, SessionStoreEntry, SessionSummaryEntry } from "@anthropic-ai/claude-agent-sdk";
import { type NatsConnection, JSONCodec } from "nats";

const FORMAT = "claude-code";

/** An error answered by a sessionlog service: code is the contract's error code. */
export class SessionlogError extends Error {
  constructor(readonly code: string, message: string) {
    super(`sessionlog: ${code}: ${message}`);
    this.name = "SessionlogError";
  }
}

export interface SessionlogStoreOptions {
  /** Request timeout in milliseconds (default 20000). */
  timeoutMs?: number;
  /** Who asks for an erase, and why (recorded in the audit record). */
  eraseBy?: string;
  eraseReason?: string;
  /** Transcripts per listing request (default 500, at most 1000, the service's limit). */
  pageSize?: number;
  /** Listing requests one listSessions/listSubkeys makes at most (default 1000). */
  maxPages?: number;
  /** Transcripts listSessionSummaries loads at once (default 8). */
  loadConcurrency?: number;
}

const jc = JSONCodec();

/** The SessionStore: pass `new SessionlogStore(nc)` as the SDK's `sessionStore` option. */
export class SessionlogStore implements SessionStore {
  private readonly timeout: number;

  constructor(private readonly nc: NatsConnection, private readonly opts: SessionlogStoreOptions = {}) {
    this.timeout = opts.timeoutMs ?? 20000;
  }

  private async request<T>(subject: string, body: unknown): Promise<T> {
    return this.requestRaw<T>(subject, JSON.stringify(body));
  }

  private async requestRaw<T>(subject: string, body: string): Promise<T> {
    const m = await this.nc.request(subject, new TextEncoder().encode(body), { timeout: this.timeout });
    const code = m.headers?.get("Nats-Service-Error-Code");
    const v = jc.decode(m.data) as { error?: { code: string; message: string } };
    if (code || v?.error) {
      throw new SessionlogError(v?.error?.code ?? code ?? "internal", v?.error?.message ?? "request failed");
    }
    return v as T;
  }

  private static source(key: SessionKey) {
    return { format: FORMAT, projectKey: key.projectKey, sessionKey: key.sessionId, ...(key.subpath ? { subpath: key.subpath } : {}) };
  }

  /**
   * Appends entries. An entry whose uuid is stored adds nothing; one without
   * a uuid is appended each time, unless the batch replays stored entries.
   */
  async append(key: SessionKey, entries: SessionStoreEntry[]): Promise<void> {
    if (entries.length === 0) return;
    // A request is one NATS message: a batch larger than the server takes
    // goes in several, in order.
    const src = SessionlogStore.source(key);
    const room = (this.nc.info?.max_payload ?? 1 << 20) - jc.encode({ ...src, entries: [] }).length - 1024;
    let batch: string[] = [];
    let size = 0;
    const send = async () => {
      if (batch.length === 0) return;
      const body = `{"format":${JSON.stringify(src.format)},"projectKey":${JSON.stringify(src.projectKey)},"sessionKey":${JSON.stringify(src.sessionKey)}` +
        (src.subpath ? `,"subpath":${JSON.stringify(src.subpath)}` : "") + `,"entries":[${batch.join(",")}]}`;
      await this.requestRaw("sessions.api.source.append", body);
      batch = [];
      size = 0;
    };
    for (const [i, e] of entries.entries()) {
      const text = JSON.stringify(e);
      const n = Buffer.byteLength(text) + 1;
      if (n > room) {
        throw new SessionlogError("too_large", `entry ${i} is ${n} bytes, over the ${room} a request to the server can hold (its max_payload)`);
      }
      if (size + n > room) await send();
      batch.push(text);
      size += n;
    }
    await send();
  }

  /**
   * The entries as appended, or null for a key never written (or erased).
   * The service answers a page at a time; an entry too large for a page
   * comes as pieces of its text.
   */
  async load(key: SessionKey): Promise<SessionStoreEntry[] | null> {
    const out: SessionStoreEntry[] = [];
    let pieces = "";
    let cursor: string | undefined;
    for (;;) {
      const r = await this.request<{ found: boolean; entries: SessionStoreEntry[]; part?: { text: string; last: boolean }; next?: string }>(
        "sessions.api.source.load", { ...SessionlogStore.source(key), ...(cursor ? { cursor } : {}) });
      if (!r.found) {
        if (cursor === undefined) return null;
        throw new SessionlogError("not_found", "the transcript was erased while it loaded");
      }
      out.push(...r.entries);
      if (r.part) {
        pieces += r.part.text;
        if (r.part.last) {
          out.push(JSON.parse(pieces) as SessionStoreEntry);
          pieces = "";
        }
      }
      if (!r.next) return out;
      cursor = r.next;
    }
  }

  /** Pages through a listing (sessions.api.source.list or .subkeys). */
  private async page<R, T>(subject: string, body: object, items: (reply: R) => T[]): Promise<T[]> {
    const out: T[] = [];
    let cursor: string | undefined;
    for (let n = 0; n < (this.opts.maxPages ?? 1000); n++) {
      const r = await this.request<R & { next?: string }>(subject, { ...body, limit: this.opts.pageSize ?? 500, ...(cursor ? { cursor } : {}) });
      out.push(...items(r));
      if (!r.next) return out;
      cursor = r.next;
    }
    throw new SessionlogError("too_large", `${subject}: more than ${this.opts.maxPages ?? 1000} pages`);
  }

  /**
   * The project's main transcripts and the epoch ms of their last write
   * (the service's clock). A transcript written again while the listing
   * pages is listed once, with its later mtime.
   */
  async listSessions(projectKey: string): Promise<Array<{ sessionId: string; mtime: number }>> {
    const rows = await this.page("sessions.api.source.list", { format: FORMAT, projectKey },
      (r: { sessions: Array<{ sessionKey: string; mtime: number }> }) => r.sessions);
    const latest = new Map<string, number>();
    for (const s of rows) latest.set(s.sessionKey, Math.max(latest.get(s.sessionKey) ?? 0, s.mtime));
    return [...latest].map(([sessionId, mtime]) => ({ sessionId, mtime }));
  }

  /**
   * Summaries of the project's sessions, folded by the SDK's own
   * foldSessionSummary over each transcript's stored entries, stamped with
   * the listing's mtime. The fold is SDK-owned code, so the service keeps no
   * summary: it is computed here from what load returns (one load per
   * session), and equals what a store folding every append would hold.
   */
  async listSessionSummaries(projectKey: string): Promise<SessionSummaryEntry[]> {
    const sessions = await this.listSessions(projectKey);
    const out: SessionSummaryEntry[] = [];
    let next = 0;
    const worker = async () => {
      while (next < sessions.length) {
        const { sessionId, mtime } = sessions[next++];
        const entries = await this.load({ projectKey, sessionId });
        if (entries && entries.length > 0) out.push(foldSessionSummary(undefined, { projectKey, sessionId }, entries, { mtime }));
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, this.opts.loadConcurrency ?? 8) }, worker));
    return out;
  }

  /** The subpaths stored under a session (its subagent transcripts). */
  async listSubkeys(key: { projectKey: string; sessionId: string }): Promise<string[]> {
    return this.page("sessions.api.source.subkeys", { format: FORMAT, projectKey: key.projectKey, sessionKey: key.sessionId },
      (r: { subkeys: string[] }) => r.subkeys).then((keys) => [...new Set(keys)]);
  }

  /**
   * Erases the session (sessions.api.erase, DESIGN.md section 14) for good,
   * its fork children with it, and for a main transcript its subagent
   * transcripts too, as the SDK's InMemorySessionStore deletes a main key's
   * subkeys: afterwards each loads null and is listed nowhere. Erasure is
   * for operators: with the agent user's rights it is refused, and the
   * refusal is thrown. A key never written (or erased already) is nothing
   * to do.
   */
  async delete(key: SessionKey): Promise<void> {
    const keys: SessionKey[] = [];
    if (!key.subpath) {
      for (const subpath of await this.listSubkeys(key)) keys.push({ ...key, subpath });
    }
    // The main transcript last: a delete that fails part way can be
    // repeated, and still finds the subagents through it.
    keys.push(key);
    for (const k of keys) await this.erase(k);
  }

  private async erase(key: SessionKey): Promise<void> {
    const load = await this.request<{ found: boolean; sessionId?: string }>("sessions.api.source.load", SessionlogStore.source(key));
    if (!load.found || !load.sessionId) return;
    try {
      await this.request("sessions.api.erase", {
        sessionId: load.sessionId,
        reason: this.opts.eraseReason ?? "deleted through the Claude Agent SDK session store",
        by: this.opts.eraseBy ?? "claude-agent-sdk",
        cascade: true,
      });
    } catch (e) {
      if (e instanceof SessionlogError) throw e;
      const msg = e instanceof Error ? e.message : String(e);
      if ((e as { code?: string }).code === "503") {
        throw new SessionlogError("unavailable", `erase of ${load.sessionId}: no service answers sessions.api.erase: ${msg}`);
      }
      throw new SessionlogError("forbidden", `erase of ${load.sessionId} refused (erasure is operator-only; the agent user may not publish sessions.api.erase): ${msg}`);
    }
  }
}
