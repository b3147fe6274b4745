package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// TestDashboardInChromium drives the embedded dashboard in headless
// Chromium: a session appended during the test appears in the list, and
// its timeline grows live through the watch stream, without a reload.
func TestDashboardInChromium(t *testing.T) {
	e := projectortest.NewEnv(t)
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	first := gen.NewSession("dash-first", projectortest.T0.Add(-time.Hour))
	projectortest.PublishN(t, e, first, 12)

	b := projectortest.NewBrowser(t, e.Ctx, 1400, 900)
	do, text := b.Do, b.Text
	do("open the dashboard",
		chromedp.Navigate(r.Srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`[data-session-id="dash-first"]`)),
	)
	// A marker that a reload would wipe.
	b.EvalInt(`window.__noReload = 42`)

	// A session appended while the page is open shows up in the list.
	live := gen.NewSession("dash-live", projectortest.T0)
	projectortest.PublishN(t, e, live, 5) // created, turn/started, user message, attempt, assistant
	do("new session listed", chromedp.WaitVisible(chromedp.CSS(`[data-session-id="dash-live"]`)))

	do("open its timeline",
		chromedp.Click(chromedp.CSS(`[data-session-id="dash-live"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .ev[data-seq="5"]`)),
	)
	// More events arrive: the timeline grows through the watch stream.
	projectortest.PublishN(t, e, live, 3) // tool requested, started, result
	do("timeline updates live", chromedp.WaitVisible(chromedp.CSS(`#timeline .ev[data-seq="8"]`)))

	// A transient event is shown as live output.
	subj, _ := logstore.LiveSubject("dash-live")
	body, _ := json.Marshal(map[string]any{"afterSeq": 8, "kind": "delta", "text": "streaming tokens…"})
	deadline := time.Now().Add(20 * time.Second)
	for tr := ""; !strings.Contains(tr, "streaming tokens"); tr = text(`#transient`) {
		if time.Now().After(deadline) {
			t.Fatalf("transient event not shown: %q", tr)
		}
		e.NC.Publish(subj, body)
		e.NC.Flush()
		do("wait", chromedp.Sleep(200*time.Millisecond))
	}

	if marker := b.EvalInt(`window.__noReload`); marker != 42 {
		t.Fatalf("the page reloaded (marker %d)", marker)
	}
	if phase := text(`#timeline .ev[data-seq="7"] .phase`); phase != "started" {
		t.Fatalf("tool/started shown with phase %q", phase)
	}
	if status := text(`[data-session-id="dash-live"] .pill`); !strings.EqualFold(status, "active") {
		t.Fatalf("the open turn's session is shown as %q", status)
	}
	b.Shot("dashboard")
}

// TestDashboardRendersAnyJSON opens a session whose events carry data of
// every JSON kind where the page expects text (null, numbers, booleans,
// arrays, nested objects, a huge string, markup, data that is not an
// object at all): the timeline shows every event, the one after the odd
// ones too, the page throws nothing, and no markup runs.
func TestDashboardRendersAnyJSON(t *testing.T) {
	e := projectortest.NewEnv(t)
	r := e.Start(t.TempDir())
	r.WaitReady(t)

	const id = "dash-odd"
	var seq uint64
	pub := func(typ string, data string, mod ...func(*schema.Envelope)) {
		t.Helper()
		seq++
		ev := schema.Envelope{
			SchemaVersion: schema.Version, SessionID: id, Seq: seq, EventID: fmt.Sprintf("odd-%d", seq),
			Time: projectortest.T0.Add(time.Duration(seq) * time.Millisecond), Type: typ, Data: json.RawMessage(data),
		}
		for _, m := range mod {
			m(&ev)
		}
		if _, err := gen.Publish(e.Ctx, e.LS, ev); err != nil {
			t.Fatalf("publish %s %s: %v", typ, data, err)
		}
	}
	turn := func(ev *schema.Envelope) { ev.TurnID = "t1" }
	attempt := func(ev *schema.Envelope) { ev.TurnID, ev.AttemptID = "t1", "a1" }
	toolCall := func(ev *schema.Envelope) { ev.TurnID, ev.ToolCallID = "t1", "c1" }
	huge := strings.Repeat("many words ", 20_000) // 220 kB
	hugeJSON, _ := json.Marshal(map[string]any{"content": huge})
	pub(schema.TypeSessionCreated, `{"title":"odd values","agent":{"name":["a",1]}}`)
	pub(schema.TypeTurnStarted, `{"input":false}`, turn)
	pub(schema.TypeMessageUser, `{"content":{"text":null}}`, turn) // the case that blanked the timeline
	pub(schema.TypeMessageUser, `{"content":null}`, turn)
	pub(schema.TypeMessageUser, `{"content":-12.5e3}`, turn)
	pub(schema.TypeMessageUser, `{"content":true}`, turn)
	pub(schema.TypeMessageUser, `{"content":[1,"two",null,{"x":[]}]}`, turn)
	pub(schema.TypeMessageUser, `{"content":{"a":{"b":{"c":[{"d":null,"text":{"t":1}}]}}}}`, turn)
	pub(schema.TypeMessageUser, string(hugeJSON), turn)
	pub(schema.TypeMessageUser, `{"content":"<img src=x onerror=\"window.__xss=1\"><script>window.__xss=2</script>"}`, turn)
	pub(schema.TypeMessageUser, `{"content":{"text":"<b onmouseover=\"window.__xss=3\">bold?</b>"}}`, turn)
	pub(schema.TypeAttemptStarted, `{"model":{"id":7}}`, attempt)
	pub(schema.TypeMessageAssistant, `{"content":{"text":123}}`, attempt)
	pub(schema.TypeToolRequested, `{"name":["read"],"input":null,"idempotent":"yes"}`, toolCall)
	pub(schema.TypeToolStarted, `null`, toolCall)
	pub(schema.TypeToolResult, `{"status":null,"output":{"text":null}}`, toolCall)
	pub(schema.TypeGoalUpdated, `{"revision":"r","objective":null,"status":{"s":1},"blockedReason":[]}`)
	pub(schema.TypeJobEnded, `{"jobId":{"a":1},"status":false,"exitCode":null}`)
	pub(schema.TypeRepairApplied, `{"reason":7,"closed":"not an array"}`)
	pub(schema.TypeRepairApplied, `{"reason":"r","closed":[null,1,{"kind":{},"id":[]}]}`)
	pub(schema.TypeSessionPaused, `[1,2,3]`)
	pub(schema.TypeSessionResumed, `"just a string"`)
	pub(schema.TypeCompactionEnded, `42`)
	pub("x.vendor/odd", `{"__proto__":{"polluted":true}}`, func(ev *schema.Envelope) { ev.Ignorable = true })
	pub(schema.TypeMessageUser, `{"content":"the end"}`, turn)
	last := seq

	b := projectortest.NewBrowser(t, e.Ctx, 1400, 900)
	do, text := b.Do, b.Text
	do("open the session's timeline",
		chromedp.Navigate(r.Srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`[data-session-id="`+id+`"]`)),
		chromedp.Click(chromedp.CSS(`[data-session-id="`+id+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#timeline .ev[data-seq="%d"]`, last))),
	)
	// A transient event with odd values, then a plain one after it.
	subj, _ := logstore.LiveSubject(id)
	deadline := time.Now().Add(20 * time.Second)
	for tr := ""; !strings.Contains(tr, "still live"); tr = text(`#transient`) {
		if time.Now().After(deadline) {
			t.Fatalf("transient event not shown: %q", tr)
		}
		for _, b := range []string{
			fmt.Sprintf(`{"afterSeq":%d,"text":null,"delta":{"x":null}}`, last),
			fmt.Sprintf(`{"afterSeq":%d,"kind":[1,null]}`, last),
			fmt.Sprintf(`{"afterSeq":%d,"text":"still live"}`, last),
		} {
			e.NC.Publish(subj, []byte(b))
		}
		e.NC.Flush()
		do("wait", chromedp.Sleep(200*time.Millisecond))
	}

	if n := b.EvalInt(`document.querySelectorAll("#timeline .ev").length`); uint64(n) != last {
		t.Fatalf("timeline rows: %d, want %d", n, last)
	}
	for s := uint64(1); s <= last; s++ {
		if txt := text(fmt.Sprintf(`#timeline .ev[data-seq="%d"] .txt`, s)); strings.TrimSpace(txt) == "" {
			t.Errorf("seq %d shown without text", s)
		}
	}
	for seq, want := range map[int]string{
		3: "User: {\"text\":null}", 5: "User: -12500", 6: "User: true", 7: `User: [1,"two",null,{"x":[]}]`,
		10: `<img src=x onerror="window.__xss=1">`, 11: `<b onmouseover="window.__xss=3">bold?</b>`,
		13: `Assistant: {"text":123}`, int(last): "User: the end",
	} {
		if got := text(fmt.Sprintf(`#timeline .ev[data-seq="%d"] .txt`, seq)); !strings.Contains(got, want) {
			t.Errorf("seq %d shows %q, want it to contain %q", seq, got, want)
		}
	}
	if got := text(`#timeline .ev[data-seq="9"] .txt`); len(got) > 1000 || !strings.Contains(got, "many words") {
		t.Errorf("the huge string is shown as %d bytes: %.80q", len(got), got)
	}
	if xss := b.EvalString(`String(window.__xss) + "," + String(({}).polluted) + "," + document.querySelectorAll("#timeline img, #timeline script, #timeline b[onmouseover]").length`); xss != "undefined,undefined,0" {
		t.Fatalf("markup from event data ran or was parsed: %q", xss)
	}
	b.NoPageErrors()
}
