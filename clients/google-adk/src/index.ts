// A Google ADK SessionService that keeps sessions in sessionlog. It
// speaks only sessions.api.append and sessions.api.read (DESIGN.md
// sections 4, 12 and 15), and sessions.api.erase for deleteSession, which
// is the operator's right (section 14).
//
// A session's events are kept verbatim as ignorable source/line events of
// format google-adk and mapped, where the mapping is clear, to the events
// the dashboard, repair and exports read. Its state is the fold of its
// events' state deltas, as ADK applies them; the app: and user: scopes,
// shared across sessions, are sessions of their own in the log (the
// agent user may use no KV bucket), temp: keys are never stored.
import { randomUUID } from "node:crypto";
import { BaseSessionService, State, createEvent } from "@google/adk";
import type { AppendEventRequest, CreateSessionRequest, DeleteSessionRequest, Event, GetSessionRequest, ListSessionsRequest, ListSessionsResponse, Session } from "@google/adk";
import type { NatsConnection } from "nats";
import { type BatchRecord, type Ev, type LogOptions, type Stored, Batches, Log, MAX_EVENT_BYTES, Mapper, SessionlogError, TurnState, safeName, sha256, verbatim } from "@sessionlog/nats-log";

export { SessionlogError };

/** The format of the source/line events this service writes. */
export const FORMAT = "google-adk";

export interface SessionlogSessionServiceOptions extends LogOptions {
  /** Who asks for an erase, and why (recorded in the audit record). */
  eraseBy?: string;
  eraseReason?: string;
  /** How long deleteSession waits for the erase, in milliseconds (default 600000: the secure delete of a long session takes minutes). */
  eraseTimeoutMs?: number;
  /** Largest event the writer takes, in bytes (default 256 KiB, DESIGN.md section 3). */
  maxEventBytes?: number;
}

/** The sessionlog session ids of an app's sessions, its index and its shared state scopes (DESIGN.md section 15). */
export const ids = {
  session: (app: string, user: string, id: string) => `adk-${safeName(id, 60)}-${sha256(`${app}\0${user}\0${id}`, 16)}`,
  index: (app: string) => `adk-index-${safeName(app, 60)}-${sha256(app, 16)}`,
  app: (app: string) => `adk-app-${safeName(app, 60)}-${sha256(app, 16)}`,
  user: (app: string, user: string) => `adk-user-${safeName(user, 60)}-${sha256(`${app}\0${user}`, 16)}`,
};

/** The records of the google-adk source (the data of its source/line events). */
interface Rec extends BatchRecord {
  format: string;
  // op "session": the session's key, initial state and creation time
  appName?: string;
  userId?: string;
  sessionId?: string;
  state?: Record<string, unknown>;
  time?: number;
  // op "delta": a shared scope's change (keys without their prefix)
  delta?: Record<string, unknown>;
}

/** The fold of one sessionlog session of this service: an ADK session, an index or a shared scope. */
class Fold {
  lastSeq = 0;
  erased = false;
  // ADK session
  key?: { appName: string; userId: string; sessionId: string };
  state: Record<string, unknown> = {};
  events: Event[] = [];
  lastUpdateTime = 0;
  readonly turns = new TurnState();
  private batches = new Batches();
  // index: user -> session ids, in order of creation
  users = new Map<string, string[]>();
  // shared scope
  scope: Record<string, unknown> = {};

  apply(e: Stored): void {
    this.lastSeq = e.seq;
    this.turns.apply(e);
    const r = e.data as Rec;
    if (e.type !== "source/line" || r.format !== FORMAT) return;
    switch (r.op) {
      case "session":
        this.key = { appName: r.appName ?? "", userId: r.userId ?? "", sessionId: r.sessionId ?? "" };
        this.state = { ...(r.state ?? {}) };
        this.lastUpdateTime = r.time ?? 0;
        return;
      case "created": {
        const list = this.users.get(r.userId ?? "") ?? [];
        if (!list.includes(r.sessionId ?? "")) list.push(r.sessionId ?? "");
        this.users.set(r.userId ?? "", list);
        return;
      }
      case "deleted": {
        const list = this.users.get(r.userId ?? "");
        if (list) this.users.set(r.userId ?? "", list.filter((s) => s !== r.sessionId));
        return;
      }
      case "delta":
        Object.assign(this.scope, r.delta ?? {});
        return;
    }
    for (const { item } of this.batches.take(r) ?? []) this.event(item as Event);
  }

  /** An appended event, as BaseSessionService.appendEvent takes it (its temp: keys were never stored). */
  private event(stored: Event): void {
    const event = createEvent(stored);
    for (const [k, v] of Object.entries(event.actions?.stateDelta ?? {})) {
      if (!k.startsWith(State.TEMP_PREFIX)) this.state[k] = v;
    }
    const i = this.events.findIndex((x) => x.id === event.id);
    if (i >= 0) this.events[i] = event;
    else this.events.push(event);
    this.lastUpdateTime = event.timestamp;
  }
}

/** ADK's mergeStates: the session's state with the app and user scopes under their prefixes. */
function mergeStates(app: Record<string, unknown>, user: Record<string, unknown>, session: Record<string, unknown>): Record<string, unknown> {
  const merged = structuredClone(session);
  for (const [k, v] of Object.entries(app)) merged[State.APP_PREFIX + k] = v;
  for (const [k, v] of Object.entries(user)) merged[State.USER_PREFIX + k] = v;
  return merged;
}

function withoutTemp(state: Record<string, unknown> | undefined): Record<string, unknown> {
  return Object.fromEntries(Object.entries(state ?? {}).filter(([k]) => !k.startsWith(State.TEMP_PREFIX)));
}

/**
 * mapEvent maps one ADK event: the user's text is a prompt, an agent's
 * text (not its thoughts) a reply, a functionCall a call, a
 * functionResponse its result. Other parts are kept verbatim only.
 */
function mapEvent(m: Mapper, event: Event, i: number): void {
  const parts = event.content?.parts ?? [];
  const texts = parts.filter((p) => typeof p.text === "string" && !p.thought);
  if (texts.length > 0) {
    if (event.author === "user") m.prompt(texts, i);
    else m.reply(texts, i);
  }
  parts.forEach((p, k) => {
    if (p.functionCall) m.call(p.functionCall.id ?? "", p.functionCall.name ?? "", p.functionCall.args ?? {}, i, k);
    if (p.functionResponse) {
      const r = p.functionResponse.response as Record<string, unknown> | undefined;
      m.result(p.functionResponse.id ?? "", r ?? null, r !== undefined && "error" in r);
    }
  });
}

/**
 * The SessionService: pass `new SessionlogSessionService(nc)` as the
 * Runner's `sessionService`. Any number of services, in any number of
 * processes, may serve the same sessions.
 */
export class SessionlogSessionService extends BaseSessionService {
  private readonly log: Log;
  private readonly maxEvent: number;
  private readonly folds = new Map<string, Fold>();

  constructor(nc: NatsConnection, private readonly opts: SessionlogSessionServiceOptions = {}) {
    super();
    this.log = new Log(nc, opts);
    this.maxEvent = opts.maxEventBytes ?? MAX_EVENT_BYTES;
  }

  /** The fold of a sessionlog session, brought up to its tail. An erased session folds as erased. */
  private async sync(id: string): Promise<Fold> {
    let f = this.folds.get(id);
    if (!f) {
      f = new Fold();
      this.folds.set(id, f);
    }
    if (f.erased) return f;
    try {
      await this.log.read(id, f.lastSeq, (e) => f.apply(e));
    } catch (e) {
      if (!(e instanceof SessionlogError && e.code === "erased")) throw e;
      f.erased = true;
    }
    return f;
  }

  /** Appends records to a sessionlog session of this service (made with created first when new). */
  private async put(id: string, created: object, make: (f: Fold, batch: string, mapped: boolean) => Ev[]): Promise<void> {
    let f = new Fold();
    await this.log.commit(id, "adk", async () => (f = await this.sync(id)).lastSeq, (batch, mapped) => {
      let n = 0;
      const out = make(f, batch, mapped).map((e) => ({ ...e, eventId: `${batch}.${n++}` }));
      if (f.lastSeq === 0 && out.length > 0) out.unshift({ eventId: `${batch}.c`, type: "session/created", data: created });
      return out;
    });
  }

  private record(rec: Omit<Rec, "format">): Ev {
    return { eventId: "", type: "source/line", ignorable: true, data: { format: FORMAT, ...rec } };
  }

  private async scopes(appName: string, userId: string): Promise<[Record<string, unknown>, Record<string, unknown>]> {
    const [app, user] = await Promise.all([this.sync(ids.app(appName)), this.sync(ids.user(appName, userId))]);
    return [app.scope, user.scope];
  }

  /** Creates a session; an id that exists (or was erased) is refused with conflict (or erased). */
  async createSession({ appName, userId, state, sessionId }: CreateSessionRequest): Promise<Session> {
    const id = sessionId || randomUUID();
    const sid = ids.session(appName, userId, id);
    const initial = withoutTemp(state);
    const time = Date.now();
    const labels = { appName: appName.slice(0, 1024), userId: userId.slice(0, 1024), sessionKey: id.slice(0, 1024) };
    await this.put(sid, { agent: FORMAT, labels }, (f) => {
      if (f.lastSeq > 0) throw new SessionlogError("conflict", `session ${id} of user ${userId} in ${appName} exists (${sid})`);
      return [this.record({ op: "session", appName, userId, sessionId: id, state: initial, time })];
    });
    await this.put(ids.index(appName), { agent: FORMAT, title: `index of ${appName}`.slice(0, 120), labels: { appName: labels.appName, kind: "index" } },
      () => [this.record({ op: "created", userId, sessionId: id })]);
    const [app, user] = await this.scopes(appName, userId);
    return { id, appName, userId, state: mergeStates(app, user, initial), events: [], lastUpdateTime: time };
  }

  /** The session with its events (config as InMemorySessionService reads it), or undefined for one never created or erased. */
  async getSession({ appName, userId, sessionId, config }: GetSessionRequest): Promise<Session | undefined> {
    const f = await this.sync(ids.session(appName, userId, sessionId));
    if (f.erased || !f.key) return undefined;
    let events = f.events.map((e) => createEvent(structuredClone(e)));
    if (config?.numRecentEvents) events = events.slice(-config.numRecentEvents);
    if (config?.afterTimestamp) {
      let i = events.length - 1;
      while (i >= 0 && events[i].timestamp >= config.afterTimestamp) i--;
      if (i >= 0) events = events.slice(i + 1);
    }
    const [app, user] = await this.scopes(appName, userId);
    return { id: sessionId, appName, userId, state: mergeStates(app, user, f.state), events, lastUpdateTime: f.lastUpdateTime };
  }

  /**
   * The app's sessions (of one user, or of all), without events or state,
   * paged and ordered as InMemorySessionService does. It reads the app's
   * index and the tail of each listed session.
   */
  async listSessions({ appName, userId, limit, offset, page, order }: ListSessionsRequest): Promise<ListSessionsResponse> {
    const index = await this.sync(ids.index(appName));
    const all: Session[] = [];
    for (const [user, sessions] of index.users) {
      if (userId !== undefined && user !== userId) continue;
      for (const id of sessions) {
        const f = await this.sync(ids.session(appName, user, id));
        if (!f.erased && f.key) all.push({ id, appName, userId: user, state: {}, events: [], lastUpdateTime: f.lastUpdateTime });
      }
    }
    if (order === "asc") all.sort((a, b) => a.lastUpdateTime - b.lastUpdateTime || a.id.localeCompare(b.id));
    if (order === "desc") all.sort((a, b) => b.lastUpdateTime - a.lastUpdateTime || a.id.localeCompare(b.id));
    const totalItems = all.length;
    if (limit === undefined) {
      if (totalItems === 0) return { sessions: [], page: 1, limit: 0, totalItems: 0, totalPages: 0 };
      return { sessions: offset ? all.slice(offset) : all, page: 1, limit: totalItems, totalItems, totalPages: 1 };
    }
    const start = page !== undefined ? (page - 1) * limit : (offset ?? 0);
    const current = page !== undefined ? page : limit === 0 ? 1 : Math.floor(start / limit) + 1;
    const totalPages = totalItems === 0 || limit === 0 ? 0 : Math.ceil(totalItems / limit);
    return { sessions: all.slice(start, start + limit), page: current, limit, totalItems, totalPages };
  }

  /**
   * Erases the session for good (sessions.api.erase, DESIGN.md section 14)
   * and takes it out of the app's index. Erasure is the operator's: with
   * the agent user's rights the refusal is thrown (forbidden). A session
   * never created, or erased already, is nothing to do.
   */
  async deleteSession({ appName, userId, sessionId }: DeleteSessionRequest): Promise<void> {
    const sid = ids.session(appName, userId, sessionId);
    const f = await this.sync(sid);
    if (!f.erased && f.key) {
      await this.log.request("sessions.api.erase", JSON.stringify({
        sessionId: sid, cascade: true,
        reason: this.opts.eraseReason ?? "deleted through the Google ADK session service",
        by: this.opts.eraseBy ?? "google-adk",
      }), this.opts.eraseTimeoutMs ?? 600000);
      this.folds.delete(sid);
    }
    const index = await this.sync(ids.index(appName));
    if (index.users.get(userId)?.includes(sessionId)) {
      await this.put(ids.index(appName), {}, () => [this.record({ op: "deleted", userId, sessionId })]);
    }
  }

  /**
   * Appends an event as ADK does (a partial event is not stored, temp: keys
   * are dropped, the state delta applied to session.state), stores it with
   * its mapped events, then the app: and user: keys of its delta in their
   * shared scopes. An event whose id is stored replaces it, as in
   * InMemorySessionService.
   */
  override async appendEvent({ session, event }: AppendEventRequest): Promise<Event> {
    if (event.partial) return event;
    await super.appendEvent({ session, event });
    session.lastUpdateTime = event.timestamp;
    const sid = ids.session(session.appName, session.userId, session.id);
    const stored = JSON.parse(JSON.stringify(event)) as Event;
    await this.put(sid, {}, (f, batch, mapped) => {
      if (f.erased || !f.key) throw new SessionlogError("not_found", `session ${session.id} of user ${session.userId} in ${session.appName} does not exist (${sid})`);
      const m = new Mapper(f.turns, batch, this.maxEvent);
      if (mapped) mapEvent(m, stored, 0);
      if (mapped) m.finish();
      // The event's last record commits it (op add): one record, unless the
      // event is larger than an event of sessionlog.
      const records = verbatim({ format: FORMAT, batch, index: 0 }, stored, this.maxEvent, () => "");
      Object.assign(records[records.length - 1].data, { op: "add", items: 1 });
      return [...m.take(), ...records];
    });
    const app: Record<string, unknown> = {};
    const user: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(stored.actions?.stateDelta ?? {})) {
      if (k.startsWith(State.APP_PREFIX)) app[k.slice(State.APP_PREFIX.length)] = v;
      if (k.startsWith(State.USER_PREFIX)) user[k.slice(State.USER_PREFIX.length)] = v;
    }
    if (Object.keys(app).length > 0) {
      await this.put(ids.app(session.appName), { agent: FORMAT, labels: { appName: session.appName.slice(0, 1024), kind: "app-state" } },
        () => [this.record({ op: "delta", delta: app })]);
    }
    if (Object.keys(user).length > 0) {
      await this.put(ids.user(session.appName, session.userId), { agent: FORMAT, labels: { appName: session.appName.slice(0, 1024), userId: session.userId.slice(0, 1024), kind: "user-state" } },
        () => [this.record({ op: "delta", delta: user })]);
    }
    return event;
  }
}
