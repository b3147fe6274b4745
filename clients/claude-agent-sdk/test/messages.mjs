// Run by pkg/agentlog/claudecode's TestSDKMessages:
//   node test/messages.mjs FILE...
// For each Claude Code transcript FILE (named <sessionId>.jsonl), prints
// one JSON line with what the SDK's own reader, getSessionMessages,
// returns for it: per message its type, uuid, message id, the tool_use
// ids it carries and the tool_result ids it answers. The files are copied
// under a temporary CLAUDE_CONFIG_DIR, the only place the reader looks.
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";

const dir = mkdtempSync(join(tmpdir(), "sdk-messages-"));
process.env.CLAUDE_CONFIG_DIR = dir;
const { getSessionMessages } = await import("@anthropic-ai/claude-agent-sdk");

const ids = (content, type, field) =>
  Array.isArray(content) ? content.filter((b) => b && b.type === type).map((b) => b[field]) : [];

try {
  for (const [i, file] of process.argv.slice(2).entries()) {
    const project = join(dir, "projects", `p${i}`);
    mkdirSync(project, { recursive: true });
    const sessionId = basename(file, ".jsonl");
    copyFileSync(file, join(project, `${sessionId}.jsonl`));
    const messages = (await getSessionMessages(sessionId)).map((m) => ({
      type: m.type,
      uuid: m.uuid,
      messageId: m.type === "assistant" ? (m.message?.id ?? "") : "",
      toolUse: ids(m.message?.content, "tool_use", "id"),
      toolResult: ids(m.message?.content, "tool_result", "tool_use_id"),
      compactSummary: m.isCompactSummary === true,
    }));
    process.stdout.write(JSON.stringify({ file, messages }) + "\n");
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
