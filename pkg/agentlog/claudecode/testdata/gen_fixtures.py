# Writes the Claude Code fixtures of this directory. They follow the shape
# of Claude Code 2.0/2.1 session files, written by hand (line by line
# below), with the 64 KiB tool output the only generated text.
import json, os

D = "projects/-home-ann-shop"
S1 = "11111111-1111-4111-8111-111111111111"
S2 = "22222222-2222-4222-8222-222222222222"
AG = "a1b2c3d"

def common(sid, uuid, parent, ts, **kw):
    d = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/home/ann/shop",
         "sessionId": sid, "version": "2.0.76", "gitBranch": "main"}
    d.update(kw)
    d["uuid"] = uuid
    d["timestamp"] = "2026-11-30T09:%s.000Z" % ts
    return d

def user(sid, uuid, parent, ts, content, **kw):
    return common(sid, uuid, parent, ts, type="user", message={"role": "user", "content": content}, **kw)

def asst(sid, uuid, parent, ts, mid, blocks, stop=None, **kw):
    return common(sid, uuid, parent, ts, type="assistant", requestId="req_" + mid[4:],
                  message={"model": "claude-sonnet-4-5-20250929", "id": mid, "type": "message", "role": "assistant",
                           "content": blocks, "stop_reason": stop, "stop_sequence": None,
                           "usage": {"input_tokens": 12, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 4000, "output_tokens": 40, "service_tier": "standard"}}, **kw)

def text(t): return {"type": "text", "text": t}
def tool_use(i, name, inp): return {"type": "tool_use", "id": i, "name": name, "input": inp}
def result(i, content, err=False):
    r = {"tool_use_id": i, "type": "tool_result", "content": content}
    if err: r["is_error"] = True
    return r

def dump(path, lines, torn=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for l in lines:
            f.write(l if isinstance(l, str) else json.dumps(l, ensure_ascii=False, separators=(",", ":")))
            f.write("\n")
        if torn:
            f.write(torn)

big = "".join("line %05d: ok ✓ — résumé 🚀 %s\n" % (i, "x" * 20) for i in range(1500))
assert len(big.encode()) > 64 * 1024

s1 = [
    {"type": "summary", "summary": "Fix the failing checkout tests", "leafUuid": "u1-a9"},
    {"type": "file-history-snapshot", "messageId": "u1-01", "snapshot": {"messageId": "u1-01", "trackedFileBackups": {}, "timestamp": "2026-11-30T09:00:00.000Z"}, "isSnapshotUpdate": False},
    # turn 1: a prompt, text, two parallel calls, one result ok and one error, a final answer
    user(S1, "u1-01", None, "00:01", "The checkout tests fail. Can you look?"),
    asst(S1, "u1-02", "u1-01", "00:03", "msg_01A", [text("I'll run the tests and read the cart module.")]),
    asst(S1, "u1-03", "u1-02", "00:03", "msg_01A", [tool_use("toolu_01", "Bash", {"command": "go test ./checkout/...", "description": "Run the checkout tests"})]),
    asst(S1, "u1-04", "u1-03", "00:04", "msg_01A", [tool_use("toolu_02", "Read", {"file_path": "/home/ann/shop/cart.go"})], stop="tool_use"),
    user(S1, "u1-05", "u1-04", "00:06", [result("toolu_01", "--- FAIL: TestTotal (0.00s)\n    cart_test.go:12: got 9, want 10", err=True)],
         toolUseResult="Error: --- FAIL: TestTotal"),
    user(S1, "u1-06", "u1-05", "00:06", [result("toolu_02", [{"type": "text", "text": "package cart\n\nfunc Total(p []int) int { ... }"}])],
         toolUseResult={"type": "text", "file": {"filePath": "/home/ann/shop/cart.go"}}),
    asst(S1, "u1-07", "u1-06", "00:09", "msg_01B", [text("Total drops the last item: the loop stops at len(p)-1.")], stop="end_turn"),
    # turn 2: unicode, and a 64 KiB tool output
    user(S1, "u1-08", "u1-07", "01:00", "Merci ! Montre-moi le journal complet — 日本語もOK 🚀"),
    asst(S1, "u1-09", "u1-08", "01:02", "msg_02A", [tool_use("toolu_03", "Bash", {"command": "cat build.log"})], stop="tool_use"),
    user(S1, "u1-10", "u1-09", "01:03", [result("toolu_03", big)]),
    asst(S1, "u1-11", "u1-10", "01:05", "msg_02B", [text("Voilà : 1500 lignes, toutes ✓.")], stop="end_turn"),
    # a line of a kind this mapping does not know
    {"type": "x-future-kind", "uuid": "u1-12", "parentUuid": "u1-11", "sessionId": S1, "payload": {"n": 1}, "timestamp": "2026-11-30T09:01:06.000Z"},
    # a garbled line in the middle of the file
    '{"parentUuid":"u1-11","type":"user","message":{"role":"user","content":"this line was cut',
    # turn 3: interrupted while a tool runs
    user(S1, "u1-13", "u1-12", "02:00", "Now fix it and run every test."),
    asst(S1, "u1-14", "u1-13", "02:02", "msg_03A", [tool_use("toolu_04", "Bash", {"command": "go test ./..."})], stop="tool_use"),
    user(S1, "u1-15", "u1-14", "02:09", [result("toolu_04", "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you how to proceed.", err=True)],
         toolUseResult="Error: The user doesn't want to proceed with this tool use."),
    user(S1, "u1-16", "u1-15", "02:09", [text("[Request interrupted by user for tool use]")]),
    # a compaction: the boundary starts a new root, the summary follows
    common(S1, "u1-17", None, "03:00", type="system", subtype="compact_boundary", content="Conversation compacted", isMeta=False,
           level="info", logicalParentUuid="u1-16", compactMetadata={"trigger": "manual", "preTokens": 48210}),
    user(S1, "u1-18", "u1-17", "03:00", "This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\nAnn asked to fix the checkout tests; Total drops the last item.",
         isVisibleInTranscriptOnly=True, isCompactSummary=True),
    # turn 4, after the compaction
    user(S1, "u1-19", "u1-18", "03:10", "Fix the loop bound only."),
    asst(S1, "u1-20", "u1-19", "03:12", "msg_04A", [{"type": "thinking", "thinking": "Change p[:len(p)-1] to p.", "signature": "c2ln"}, text("Fixed: the loop now covers every item.")], stop="end_turn"),
]
dump(os.path.join(D, S1 + ".jsonl"), s1,
     torn='{"parentUuid":"u1-20","isSidechain":false,"type":"user","message":{"role":"user","content":"and now the rel')

# session 2: a subagent (Task) and a rewind
s2 = [
    user(S2, "u2-01", None, "10:00", "Find where prices are rounded."),
    asst(S2, "u2-02", "u2-01", "10:02", "msg_11A", [tool_use("toolu_11", "Task", {"description": "Find rounding", "prompt": "Search the repo for price rounding.", "subagent_type": "Explore"})], stop="tool_use"),
    user(S2, "u2-03", "u2-02", "10:30", [result("toolu_11", [{"type": "text", "text": "Rounding happens in money/round.go:14."}])],
         toolUseResult={"status": "completed", "agentId": AG}),
    asst(S2, "u2-04", "u2-03", "10:32", "msg_11B", [text("Prices are rounded in money/round.go line 14.")], stop="end_turn"),
    user(S2, "u2-05", "u2-04", "11:00", "Round half up there."),
    asst(S2, "u2-06", "u2-05", "11:02", "msg_12A", [text("Done with math.Floor(x+0.5).")], stop="end_turn"),
    # the user rewinds to before "Round half up" and asks something else
    user(S2, "u2-07", "u2-04", "12:00", "Actually, round half to even."),
    asst(S2, "u2-08", "u2-07", "12:02", "msg_13A", [text("Done with math.RoundToEven.")], stop="end_turn"),
]
dump(os.path.join(D, S2 + ".jsonl"), s2)

sub = [
    user(S2, "s2-01", None, "10:03", "Search the repo for price rounding.", isSidechain=True, agentId=AG),
    asst(S2, "s2-02", "s2-01", "10:05", "msg_21A", [tool_use("toolu_21", "Grep", {"pattern": "Round"})], stop="tool_use", isSidechain=True, agentId=AG),
    user(S2, "s2-03", "s2-02", "10:06", [result("toolu_21", "money/round.go:14: return math.Round(x*100) / 100")], isSidechain=True, agentId=AG),
    asst(S2, "s2-04", "s2-03", "10:08", "msg_21B", [text("Rounding happens in money/round.go:14.")], stop="end_turn", isSidechain=True, agentId=AG),
]
for l in sub:
    l["isSidechain"] = True
dump(os.path.join(D, S2, "subagents", "agent-%s.jsonl" % AG), sub)
