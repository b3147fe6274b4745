package perms

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// TestSealedEraseWithoutPurgePermission: a deployment that turns sealing
// on (--seal-bodies) with an auth.conf older than sealing, whose eraser
// user may not purge the log's streams (the shipped config with the
// eraser's $JS.API.STREAM.PURGE.SESSIONS* lines taken out). The erase of a
// sealed session destroys its key, is refused the purge, securely deletes
// the session's events one at a time instead and finishes: the operator's
// `erase` returns, the events, the key and the lease are gone, the audit
// holds the session's digest, and the eraser says once what to deploy.
// Before, the job failed at the purge on every sweep and never finished.
func TestSealedEraseWithoutPurgePermission(t *testing.T) {
	conf, env, users := tenantsDeployment(t)
	authPath := filepath.Join(filepath.Dir(conf), "auth.conf")
	auth, err := os.ReadFile(authPath)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	removed := 0
	for _, l := range strings.Split(string(auth), "\n") {
		if strings.Contains(l, `"$JS.API.STREAM.PURGE.SESSIONS`) {
			removed++
			continue
		}
		kept = append(kept, l)
	}
	if removed != 1+natsauth.MaxPartitions {
		t.Fatalf("took %d purge permissions out of auth.conf, want the eraser's %d", removed, 1+natsauth.MaxPartitions)
	}
	if err := os.WriteFile(authPath, []byte(strings.Join(kept, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	// Without the monitoring port (8222), which another server on this
	// machine may hold.
	srvConf, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte(strings.Replace(string(srvConf), `http: "127.0.0.1:8222"`, "", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startUp(t, env, "--nats-config", conf, "--seal-bodies")
	agent := connect(t, s.natsURL, users["agent"])
	opC := creds{"operator", deployPasswords["OPERATOR"]}
	op := connect(t, s.natsURL, opC, nats.CustomInboxPrefix(natsauth.OperatorInboxPrefix))

	const id, marker = "s-sealed", "sealed-marker-4c1d"
	appendEvents(t, agent, id, "h-sealed",
		ev("e1", "session/created", "", "", `{"title":"sealed"}`),
		ev("e2", "turn/started", "t1", "", ""),
		ev("e3", "message/user", "t1", "", fmt.Sprintf(`{"content":%q}`, marker)),
		ev("e4", "turn/ended", "t1", "", `{"reason":"completed"}`))
	// A session stored after it, kept: the block files the erased
	// session's messages are in stay (one whose every message is gone is
	// removed), and the search finds its body after the erase.
	appendEvents(t, agent, "s-kept", "h-kept",
		ev("k1", "session/created", "", "", `{"title":"kept"}`),
		ev("k2", "message/user", "", "", `{"content":"kept-marker-9e2a"}`))
	// last is the session's last stored message as the leader has it (nil:
	// none), its headers.
	last := func(stream, subject string) (nats.Header, []byte) {
		t.Helper()
		m, err := op.Request("$JS.API.STREAM.MSG.GET."+stream, []byte(fmt.Sprintf(`{"last_by_subj":%q}`, subject)), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Message *struct {
				Header []byte `json:"hdrs"`
				Data   []byte `json:"data"`
			} `json:"message"`
			Error *struct {
				Code int `json:"err_code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &r); err != nil {
			t.Fatalf("msg get %s: %s: %v", subject, m.Data, err)
		}
		if r.Error != nil && r.Error.Code == 10037 { // no message found
			return nil, nil
		}
		if r.Message == nil {
			t.Fatalf("msg get %s: %s", subject, m.Data)
		}
		h, err := nats.DecodeHeadersMsg(r.Message.Header)
		if err != nil {
			t.Fatal(err)
		}
		return h, r.Message.Data
	}
	if h, _ := last("SESSIONS", "sessions.ev."+id); h == nil || h.Get(logstore.HeaderSeal) != logstore.SealVersion {
		t.Fatalf("the session's last event is not sealed: %v", h)
	}
	// What the erase must leave in no file: each stored body (the
	// ciphertext) and the session's key as stored. The search finds them
	// before the erase.
	var stored [][]byte
	for seq := uint64(1); ; seq++ {
		m, err := op.Request("$JS.API.STREAM.MSG.GET.SESSIONS", []byte(fmt.Sprintf(`{"seq":%d,"next_by_subj":"sessions.ev.%s"}`, seq, id)), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Message *struct {
				Seq  uint64 `json:"seq"`
				Data []byte `json:"data"`
			} `json:"message"`
		}
		if err := json.Unmarshal(m.Data, &r); err != nil {
			t.Fatal(err)
		}
		if r.Message == nil {
			break
		}
		stored, seq = append(stored, r.Message.Data), r.Message.Seq
	}
	_, key := last("KV_SESSION_KEYS", "$KV.SESSION_KEYS."+id)
	if len(stored) != 4 || len(key) == 0 {
		t.Fatalf("stored %d bodies, key %x", len(stored), key)
	}
	onDisk := func() (found []string) {
		t.Helper()
		err := filepath.WalkDir(s.dataDir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, needle := range append(slices.Clone(stored), key) {
				if bytes.Contains(b, needle) {
					found = append(found, fmt.Sprintf("%d in %s", i, path))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return found
	}
	if found := onDisk(); len(found) < len(stored)+1 {
		t.Fatalf("before the erase, the search finds %v of the %d bodies and the key", found, len(stored))
	}

	out, err := cli(t, s, opC, "erase", id, "--reason", "old auth.conf")
	if err != nil || !strings.Contains(out, "erased "+id) {
		t.Fatalf("erase: %q %v", out, err)
	}
	if h, _ := last("SESSIONS", "sessions.ev."+id); h != nil {
		t.Fatalf("an event of %s is left: %v", id, h)
	}
	if h, _ := last("KV_SESSION_KEYS", "$KV.SESSION_KEYS."+id); h != nil && h.Get("KV-Operation") == "" {
		t.Fatalf("the key of %s is left", id)
	}
	_, body := last("SESSION_AUDIT", "sessions.audit.erased."+id)
	var audit struct {
		Events   uint64 `json:"events"`
		SHA256   string `json:"sha256"`
		Unhashed uint64 `json:"unhashed"`
	}
	if err := json.Unmarshal(body, &audit); err != nil || audit.Events != 4 || audit.SHA256 == "" || audit.Unhashed != 0 {
		t.Fatalf("audit %s: %v", body, err)
	}
	m, err := agent.Request("sessions.api.read", []byte(`{"sessionId":"`+id+`"}`), 15*time.Second)
	if err != nil || !strings.Contains(string(m.Data), `"code":"erased"`) {
		t.Fatalf("read after the erase: %v", err)
	}

	// The eraser was refused the purge (and nothing else), and said once
	// what to deploy. Then up stops: no byte of the session's bodies or
	// of its key is left in any file (the fall back's deletes were secure
	// deletes, the key's too).
	natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if n := strings.Count(s.stderr.String(), "may not purge the log's streams"); n != 1 {
			return fmt.Errorf("the eraser said %d times that it may not purge", n)
		}
		return nil
	})
	refused := 0
	for _, l := range strings.Split(s.stderr.String(), "\n") {
		if !strings.Contains(l, "Violation") {
			continue
		}
		if !strings.Contains(l, "$JS.API.STREAM.PURGE.SESSIONS") {
			t.Errorf("refused, not the purge: %s", l)
		}
		refused++
	}
	if refused == 0 {
		t.Error("no purge was refused: the deployment let the eraser purge")
	}
	_, keptBody := last("SESSIONS", "sessions.ev.s-kept")
	_, keptKey := last("KV_SESSION_KEYS", "$KV.SESSION_KEYS.s-kept")
	s.stop()
	if found := onDisk(); len(found) > 0 {
		t.Errorf("after the erase (0-%d: bodies, %d: the key): %v", len(stored)-1, len(stored), found)
	}
	stored, key = [][]byte{keptBody}, keptKey
	if found := onDisk(); len(found) != 2 {
		t.Errorf("the kept session's body and key are found in %v", found)
	}
}
