package gen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ClaudeCodeFiles writes n Claude Code session files of turns turns each
// into dir/-bench: a prompt, a tool call, its 1.5 KB result and a reply
// per turn. It returns the bytes written.
func ClaudeCodeFiles(dir string, n, turns int) (int64, error) {
	if err := os.MkdirAll(filepath.Join(dir, "-bench"), 0o755); err != nil {
		return 0, err
	}
	output := strings.Repeat("result line of a typical tool output\n", 40)
	var total int64
	for i := 0; i < n; i++ {
		sid := fmt.Sprintf("bbbbbbbb-bbbb-4bbb-8bbb-%012d", i)
		f, err := os.Create(filepath.Join(dir, "-bench", sid+".jsonl"))
		if err != nil {
			return 0, err
		}
		bw := bufio.NewWriter(f)
		parent := ""
		k := 0
		put := func(typ string, msg any, extra map[string]any) {
			k++
			uuid := fmt.Sprintf("%s-%06d", sid[:8], k)
			l := map[string]any{"parentUuid": nullable(parent), "isSidechain": false, "userType": "external", "cwd": "/bench",
				"sessionId": sid, "version": "2.1.3", "gitBranch": "main", "type": typ, "message": msg, "uuid": uuid,
				"timestamp": "2026-11-30T10:00:00.000Z"}
			for key, v := range extra {
				l[key] = v
			}
			b, _ := json.Marshal(l)
			bw.Write(b)
			bw.WriteByte('\n')
			parent = uuid
		}
		for t := 0; t < turns; t++ {
			call := "toolu_" + strconv.Itoa(t)
			put("user", map[string]any{"role": "user", "content": fmt.Sprintf("step %d: run the tests", t)}, nil)
			put("assistant", map[string]any{"id": "msg_a" + strconv.Itoa(t), "type": "message", "role": "assistant", "model": "m",
				"content":     []any{map[string]any{"type": "tool_use", "id": call, "name": "Bash", "input": map[string]string{"command": "go test ./..."}}},
				"stop_reason": "tool_use", "usage": map[string]int{"input_tokens": 100, "output_tokens": 20}}, nil)
			put("user", map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": call, "content": output}}}, nil)
			put("assistant", map[string]any{"id": "msg_b" + strconv.Itoa(t), "type": "message", "role": "assistant", "model": "m",
				"content": []any{map[string]any{"type": "text", "text": "All tests pass."}}, "stop_reason": "end_turn"}, nil)
		}
		if err := bw.Flush(); err != nil {
			return 0, err
		}
		info, err := f.Stat()
		if err == nil {
			total += info.Size()
		}
		if err := f.Close(); err != nil {
			return 0, err
		}
	}
	return total, nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
