// The mapping of an SDK's conversation to sessionlog's events, as `import`
// maps an agent file (DESIGN.md section 13): what the SDK clients share.
import type { Ev, Stored } from "./index.js";
import { MAX_EVENT_BYTES, cutText, depth, textOf, validItemId } from "./index.js";

interface Tool {
  turn: string;
  phase: "requested" | "started";
}

/**
 * TurnState is what the mapping needs to know of a session: the open
 * turn, its open calls and attempts, the ids used. Give it every stored
 * event (a repair's too) in seq order.
 */
export class TurnState {
  turn: string | null = null;
  replied = false;
  tools = new Map<string, Tool>();
  usedTools = new Set<string>();
  usedTurns = new Set<string>();
  openAttempts = new Map<string, string>(); // attempt id -> turn id
  openOther = 0; // steps, approvals, compactions of the open turn: a turn with one cannot end

  apply(e: Stored): void {
    switch (e.type) {
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
}

/** The first line of s, at most 120 characters (a session/created title). */
export function title(s: string): string {
  const t = s.trim().split("\n")[0].trim();
  return [...t].length > 120 ? [...t].slice(0, 119).join("") + "…" : t;
}

/**
 * Mapper writes the events of one batch after a TurnState (which it does
 * not change): a prompt opens a turn (ending the open one first, completed
 * when its last step was a reply, unless a call of it is open: then the
 * prompt joins it), a reply is an attempt and its message, a call
 * tool/requested + tool/started, its output tool/result; finish ends the
 * turn completed when the batch ends on a reply with nothing open. The
 * events have no ids yet; i (the item's place in the batch) makes the
 * turn, attempt and call ids it needs.
 */
export class Mapper {
  events: Ev[] = [];
  private readonly turnsUsed: Set<string>;
  private readonly toolsUsed: Set<string>;
  private turn: string | null;
  private replied: boolean;
  private readonly tools: Map<string, Tool>;
  private readonly attempts: Map<string, string>;
  private readonly aliases = new Map<string, string>(); // the SDK's call id -> toolCallId, where they differ

  constructor(private readonly state: TurnState, private readonly batch: string, private readonly maxEvent = MAX_EVENT_BYTES) {
    this.turn = state.turn;
    this.replied = state.replied;
    this.turnsUsed = new Set(state.usedTurns);
    this.toolsUsed = new Set(state.usedTools);
    this.tools = new Map([...state.tools].map(([k, v]) => [k, { ...v }]));
    this.attempts = new Map(state.openAttempts);
  }

  /** Takes the events mapped so far. */
  take(): Ev[] {
    const out = this.events;
    this.events = [];
    return out;
  }

  private add(e: Omit<Ev, "eventId">): void {
    this.events.push({ ...e, eventId: "", data: this.shrink(e.type, e.data as Record<string, unknown>) });
  }

  private id(prefix: string, i: number): string {
    return `${prefix}.${this.batch}.${i}`;
  }

  private openInTurn(): boolean {
    if (this.state.openOther > 0 && this.turn === this.state.turn) return true;
    for (const t of this.tools.values()) if (t.turn === this.turn) return true;
    return false;
  }

  /** Ends the open turn with reason, unless something in it is open. */
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

  prompt(content: unknown, i: number): void {
    if (this.turn !== null) this.endTurn(this.replied ? "completed" : "interrupted");
    this.add({ type: "message/user", turnId: this.openTurn(i), data: { content: content ?? "" } });
  }

  reply(content: unknown, i: number): void {
    const turn = this.openTurn(i);
    const attempt = this.id("a", i);
    this.add({ type: "attempt/started", turnId: turn, attemptId: attempt, data: {} });
    this.add({ type: "message/assistant", turnId: turn, attemptId: attempt, data: { content: content ?? [] } });
    this.replied = true;
  }

  call(callId: string, name: string, input: unknown, i: number, k = 0): void {
    const turn = this.openTurn(i);
    const id = validItemId(callId) && !this.toolsUsed.has(callId) ? callId : `${this.id("c", i)}.${k}`;
    if (this.toolsUsed.has(id)) return;
    if (id !== callId) this.aliases.set(callId, id);
    this.add({ type: "tool/requested", turnId: turn, toolCallId: id, data: { name: name || "(unnamed)", input: input ?? {} } });
    this.add({ type: "tool/started", turnId: turn, toolCallId: id, data: {} });
    this.toolsUsed.add(id);
    this.tools.set(id, { turn, phase: "started" });
    this.replied = false;
  }

  /** The result of an open call of the open turn; of any other, nothing. */
  result(callId: string, output: unknown, isError: boolean): void {
    const id = this.aliases.get(callId) ?? callId;
    const t = this.tools.get(id);
    if (!t || t.phase !== "started" || t.turn !== this.turn) return;
    this.add({ type: "tool/result", turnId: t.turn, toolCallId: id, data: { status: isError ? "error" : "ok", output: output ?? null } });
    this.tools.delete(id);
    this.replied = false;
  }

  finish(): void {
    if (this.turn !== null && this.replied) this.endTurn("completed");
  }

  /** data the writer takes: model-visible text over half the event limit is cut, with a note (the item stays whole in its record). */
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
