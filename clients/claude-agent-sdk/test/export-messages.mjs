// Run by pkg/agentlog/formats' TestExportsReadByClaudeAgentSDK:
//   node test/export-messages.mjs FILE
// FILE is a Claude Code transcript named <session id>.jsonl; prints the
// messages the SDK's getSessionMessages gives for it (the conversation
// Claude Code resumes) as one JSON line. The file is read from a copy
// under a config directory of its own (CLAUDE_CONFIG_DIR), so nothing of
// the user's ~/.claude is read.
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";

const [file] = process.argv.slice(2);
const dir = mkdtempSync(join(tmpdir(), "cc-export-"));
try {
  process.env.CLAUDE_CONFIG_DIR = dir;
  mkdirSync(join(dir, "projects", "export"), { recursive: true });
  copyFileSync(file, join(dir, "projects", "export", basename(file)));
  const { getSessionMessages } = await import("@anthropic-ai/claude-agent-sdk");
  const messages = await getSessionMessages(basename(file, ".jsonl"));
  process.stdout.write(JSON.stringify(messages) + "\n");
} finally {
  rmSync(dir, { recursive: true, force: true });
}
