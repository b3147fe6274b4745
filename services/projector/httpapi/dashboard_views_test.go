package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/natstest/tamper"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
	"github.com/sessionlog/sessionlog/services/eraser"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// startRepairer runs the repairer (sessions.api.repair and erase) and
// waits until it answers.
func startRepairer(t *testing.T, e *projectortest.Env) {
	t.Helper()
	rp, err := assemble.NewRepairer(assemble.DefaultRepairer(), e.LS, assemble.Deps{Conn: e.NC})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(api.RepairRequest{SessionID: "probe"})
	runService(t, e, rp.Run, api.SubjectRepair, body)
}

// startEraser runs an eraser on e's connection: it serves
// sessions.api.erase (probed with a request it refuses, so nothing is
// erased).
func startEraser(t *testing.T, e *projectortest.Env) {
	t.Helper()
	er, err := assemble.NewEraser(assemble.DefaultEraser(), e.LS, assemble.Deps{Conn: e.NC})
	if err != nil {
		t.Fatal(err)
	}
	runService(t, e, er.Run, api.SubjectErase, []byte(`{}`))
}

// waitDetailToken waits until the summary of id, read with the bearer
// token, satisfies ok, and returns it.
func waitDetailToken(t *testing.T, r *projectortest.Running, token, id string, ok func(httpapi.Detail) bool) httpapi.Detail {
	t.Helper()
	var d httpapi.Detail
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		req, _ := http.NewRequest("GET", r.Srv.URL+"/v1/sessions/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		d = httpapi.Detail{}
		json.NewDecoder(resp.Body).Decode(&d)
		if !ok(d) {
			return fmt.Errorf("%s: status %d, summary %+v", id, resp.StatusCode, d)
		}
		return nil
	})
	return d
}

// openToolCall scripts a session whose tool call was started and never
// finished (no holder: it is repaired only on demand).
func openToolCall(t *testing.T, e *projectortest.Env, id string) *script {
	t.Helper()
	s := newScript(t, e, id)
	s.add(schema.TypeSessionCreated, `{"title":"deploys"}`)
	s.add(schema.TypeTurnStarted, `{}`, inTurn("t1"))
	s.add(schema.TypeToolRequested, `{"name":"deploy_prod","input":{"service":"api"}}`, toolCall("t1", "c1"))
	s.add(schema.TypeToolStarted, `{}`, toolCall("t1", "c1"))
	return s
}

// TestDashboardForkCopyNotRepair: in a fork child, the synthetic events of
// the copy (up to its fork/committed) are labelled "copied by fork", and
// only a repair's batch after it "written by repair".
func TestDashboardForkCopyNotRepair(t *testing.T) {
	e := projectortest.NewEnv(t)
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	s := newScript(t, e, "fc-child")
	s.add(schema.TypeSessionCreated, `{"title":"a fork","parent":{"sessionId":"fc-parent","seedLength":7,"depth":1}}`, synthetic)
	s.add(schema.TypeTurnStarted, `{}`, inTurn("t0"), synthetic)
	s.add(schema.TypeToolRequested, `{"name":"migrate_db","input":{}}`, toolCall("t0", "c0"), synthetic)
	s.add(schema.TypeToolStarted, `{}`, toolCall("t0", "c0"), synthetic)
	s.add(schema.TypeToolResult, `{"status":"outcome_unknown"}`, toolCall("t0", "c0"), synthetic) // the parent's agent reported it
	s.add(schema.TypeTurnEnded, `{"reason":"completed"}`, inTurn("t0"), synthetic)
	s.add(schema.TypeMessageUser, `{"content":"three"}`, synthetic)
	s.add(schema.TypeForkCommitted, `{"seedLength":7}`, synthetic)
	s.add(schema.TypeTurnStarted, `{}`, inTurn("t1"))
	s.add(schema.TypeToolRequested, `{"name":"deploy_prod","input":{}}`, toolCall("t1", "c1"))
	s.add(schema.TypeToolStarted, `{}`, toolCall("t1", "c1"))
	st := session.New("fc-child")
	for i := range s.evs {
		if err := st.Apply(&s.evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	firstRepair, repairedResult := s.seq+1, uint64(0)
	for _, ev := range session.PlanRepair(st, session.RepairOptions{Now: projectortest.T0}) {
		s.seq = ev.Seq
		s.publish(ev)
		if ev.Type == schema.TypeToolResult {
			repairedResult = ev.Seq
		}
	}
	r.WaitSession(t, "fc-child", func(d httpapi.Detail) bool { return d.LastSeq == s.seq })

	b := projectortest.NewBrowser(t, e.Ctx, 1280, 860)
	b.Do("open the child", chromedp.Navigate(r.Srv.URL+"/?s=fc-child"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="fc-child"]`)))
	for seq := uint64(1); seq <= s.seq; seq++ {
		got := b.EvalString(fmt.Sprintf(`(document.querySelector('#timeline .ev[data-seq="%d"] .txt') || {}).textContent || "(no row)"`, seq))
		switch {
		case seq <= 8 && (!strings.Contains(got, "copied by fork") || strings.Contains(got, "repair")):
			t.Errorf("seq %d (the fork's copy) says %q, want copied by fork", seq, got)
		case seq > 8 && seq < firstRepair && (strings.Contains(got, "copied by fork") || strings.Contains(got, "written by repair")):
			t.Errorf("seq %d (the agent's) says %q", seq, got)
		case seq >= firstRepair && (!strings.Contains(got, "written by repair") || strings.Contains(got, "fork")):
			t.Errorf("seq %d (the repair's) says %q, want written by repair", seq, got)
		}
	}
	if got := b.Text(`#checks li[data-check="5"]`); strings.Contains(got, "repair") || !strings.Contains(got, "copied by the fork") {
		t.Errorf("the copied outcome_unknown is listed as %q", got)
	}
	if got := b.Text(fmt.Sprintf(`#checks li[data-check="%d"]`, repairedResult)); !strings.Contains(got, "by a repair") {
		t.Errorf("the repaired outcome_unknown is listed as %q", got)
	}
	b.Shot("fork-copy")
	b.NoPageErrors()
}

// TestDashboardChartsFit: at 1400 and at 1000 px the three fleet charts
// stay inside their columns, no two time labels overlap, and the value
// axis is as wide as its widest label (thousands included), measured in
// the page.
func TestDashboardChartsFit(t *testing.T) {
	t.Cleanup(httpapi.SetFleetEvery(100 * time.Millisecond))
	e := projectortest.NewEnv(t)
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	for i := range 4 {
		projectortest.PublishN(t, e, gen.NewSession(fmt.Sprintf("cf-%d", i), projectortest.T0), 600)
	}
	var o httpapi.Overview
	for deadline := time.Now().Add(30 * time.Second); len(o.History) < 40; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the overview holds %d samples", len(o.History))
		}
		r.GetJSON(t, "/v1/overview", &o)
	}

	// problems lists, for every chart, an element outside its column, two
	// time labels that overlap, and a value label wider than its axis.
	const problems = `(() => {
	  const out = [], grid = document.querySelector("#detail .charts").getBoundingClientRect();
	  for (const col of document.querySelectorAll("#detail .charts > div")) {
	    const c = col.getBoundingClientRect(), name = col.querySelector("h4").textContent;
	    if (c.right > grid.right + 0.5 || c.left < grid.left - 0.5) out.push(name + ": column outside the grid");
	    for (const x of col.querySelectorAll("*")) {
	      const b = x.getBoundingClientRect();
	      if (b.width && (b.right > c.right + 0.5 || b.left < c.left - 0.5)) out.push(name + ": " + x.tagName + "." + x.className + " spans " + Math.round(b.left) + "-" + Math.round(b.right) + ", its column " + Math.round(c.left) + "-" + Math.round(c.right));
	    }
	  }
	  const ctx = document.createElement("canvas").getContext("2d");
	  const width = (ax, s) => { ctx.font = Array.isArray(ax.font) ? ax.font[0] : ax.font; return ctx.measureText(s).width / devicePixelRatio; };
	  for (const u of window.__charts || []) {
	    const x = u.axes[0], y = u.axes[1], name = u.series[1].label;
	    const labels = (x._values || []).map((v, i) => ({v: String(v), at: u.valToPos(x._splits[i], "x")})).filter(l => l.v.trim());
	    for (let i = 1; i < labels.length; i++) {
	      const a = labels[i - 1], b = labels[i];
	      const gap = (b.at - a.at) - (Math.max(...a.v.split("\n").map(s => width(x, s))) + Math.max(...b.v.split("\n").map(s => width(x, s)))) / 2;
	      if (gap < 4) out.push(name + ": time labels " + JSON.stringify(a.v) + " and " + JSON.stringify(b.v) + " " + Math.round(gap) + " px apart");
	    }
	    for (const v of y._values || []) {
	      const need = width(y, String(v)) + y.ticks.size + y.gap;
	      if (need > y._size) out.push(name + ": value label " + JSON.stringify(String(v)) + " needs " + Math.ceil(need) + " px, its axis has " + y._size);
	    }
	  }
	  return JSON.stringify({charts: (window.__charts || []).length, problems: out});
	})()`
	check := func(b *projectortest.Browser, width int) {
		t.Helper()
		var got struct {
			Charts   int
			Problems []string
		}
		if err := json.Unmarshal([]byte(b.EvalString(problems)), &got); err != nil {
			t.Fatal(err)
		}
		if got.Charts != 3 {
			t.Errorf("at %d px: %d charts drawn, want 3", width, got.Charts)
		}
		for _, p := range got.Problems {
			t.Errorf("at %d px: %s", width, p)
		}
	}
	b := projectortest.NewBrowser(t, e.Ctx, 1400, 900)
	b.Do("open the fleet", chromedp.Navigate(r.Srv.URL+"/?view=overview"),
		chromedp.WaitVisible(chromedp.CSS(`[data-chart="lag"] .uplot`)))
	check(b, 1400)
	b.Shot("fleet-1400")
	b.Do("narrow the window", chromedp.EmulateViewport(1000, 900), chromedp.Sleep(300*time.Millisecond))
	check(b, 1000)
	b.Do("open the fleet at 1000 px", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`[data-chart="lag"] .uplot`)))
	check(b, 1000)
	b.Shot("fleet-1000")
	b.NoPageErrors()
}

// TestDashboardViews: Sessions, Fleet and Audit each show their own view,
// chosen by the address (?view=overview, ?view=audit) or the nav entry.
func TestDashboardViews(t *testing.T) {
	e := projectortest.NewEnv(t)
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	projectortest.PublishN(t, e, gen.NewSession("vw-1", projectortest.T0), 11)
	r.WaitSession(t, "vw-1", func(d httpapi.Detail) bool { return d.LastSeq == 11 })

	b := projectortest.NewBrowser(t, e.Ctx, 1280, 860)
	view := func(what, want string) {
		t.Helper()
		if got := b.EvalString(`document.body.dataset.view + " " + location.search + " " + (document.querySelector("nav.top a[aria-current]") || {}).textContent`); got != want {
			t.Errorf("%s: view, address and nav %q, want %q", what, got, want)
		}
	}
	b.Do("open the fleet by address", chromedp.Navigate(r.Srv.URL+"/?view=overview"),
		chromedp.WaitVisible(chromedp.CSS(`#overview[data-home="fleet"]`)), chromedp.WaitVisible(chromedp.CSS(`#fleet-charts`)),
		chromedp.WaitNotVisible(chromedp.CSS(`#side`)))
	view("fleet by address", "overview ?view=overview Fleet")
	b.Do("Sessions", chromedp.Click(chromedp.CSS(`nav.top a[data-view-link="sessions"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#overview[data-home="sessions"]`)), chromedp.WaitVisible(chromedp.CSS(`#list [data-session-id="vw-1"]`)))
	if n := b.EvalInt(`document.querySelectorAll("#fleet-charts").length`); n != 0 {
		t.Errorf("the Sessions view shows the fleet charts")
	}
	view("sessions", "sessions  Sessions")
	b.Shot("sessions")
	b.Do("Fleet", chromedp.Click(chromedp.CSS(`nav.top a[data-view-link="overview"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#overview[data-home="fleet"]`)))
	view("fleet", "overview ?view=overview Fleet")
	b.Do("Audit", chromedp.Click(chromedp.CSS(`nav.top a[data-view-link="audit"]`)), chromedp.WaitVisible(chromedp.CSS(`#audit`)))
	view("audit", "audit ?view=audit Audit")
	if got := b.Text(`#audit`); !strings.Contains(got, "No session has been erased") {
		t.Errorf("the empty audit view says %q", got)
	}
	b.Do("back to the fleet", chromedp.NavigateBack(), chromedp.WaitVisible(chromedp.CSS(`#overview[data-home="fleet"]`)))
	b.Do("the fleet at phone width", chromedp.EmulateViewport(390, 844), chromedp.Navigate(r.Srv.URL+"/?view=overview"),
		chromedp.WaitVisible(chromedp.CSS(`#overview[data-home="fleet"]`)), chromedp.WaitVisible(chromedp.CSS(`#fleet-charts`)))
	if w := b.EvalInt(`document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("at phone width the fleet is %d px wide", w)
	}
	b.Shot("fleet-phone")
	b.Do("the audit at phone width", chromedp.Navigate(r.Srv.URL+"/?view=audit"), chromedp.WaitVisible(chromedp.CSS(`#audit`)))
	b.NoPageErrors()
}

// TestDashboardMissingSession: an id no session has shows one clear "not
// found" and no loading line.
func TestDashboardMissingSession(t *testing.T) {
	e := projectortest.NewEnv(t)
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	b := projectortest.NewBrowser(t, e.Ctx, 1280, 860)
	b.Do("open a missing session", chromedp.Navigate(r.Srv.URL+"/?s=does-not-exist"),
		chromedp.WaitVisible(chromedp.CSS(`#detail h2`)), chromedp.Sleep(500*time.Millisecond))
	if got := b.Text(`#detail`); strings.Count(got, "does-not-exist") != 1 || !strings.Contains(got, "Session does-not-exist not found") || strings.Contains(got, "loading") || strings.Contains(got, "null") {
		t.Errorf("the page says %q", got)
	}
	if n := b.EvalInt(`[...document.querySelectorAll("#loading")].filter(x => x.offsetParent && x.textContent).length`); n != 0 {
		t.Errorf("a loading line is shown")
	}
	b.Shot("missing")
	b.NoPageErrors()
}

// TestDashboardRepairNow: "Repair now" on a session with an open tool
// call closes it: repair/applied and the closers appear in the timeline.
func TestDashboardRepairNow(t *testing.T) {
	e := projectortest.NewEnv(t)
	startRepairer(t, e)
	r := e.Start(t.TempDir(), func(c *projector.Config) { c.Conn = e.NC })
	r.WaitReady(t)
	openToolCall(t, e, "rn-1")
	r.WaitSession(t, "rn-1", func(d httpapi.Detail) bool { return d.LastSeq == 4 })

	b := projectortest.NewBrowser(t, e.Ctx, 1280, 860)
	b.Do("repair now", chromedp.Navigate(r.Srv.URL+"/?s=rn-1"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="rn-1"]`)),
		chromedp.Click(chromedp.CSS(`#act-repair`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-ok`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .ev[data-type="repair/applied"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .ev[data-type="session/paused"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#head .pill.st-paused`)),
		chromedp.WaitVisible(chromedp.CSS(`#act-resume`)),
	)
	if got := b.Text(`#outcome`); !strings.Contains(got, "Repaired: seqs 5 to") {
		t.Errorf("the outcome says %q", got)
	}
	if got := b.Text(`#timeline .ev[data-type="tool/result"]`); !strings.Contains(got, "outcome unknown — repaired, needs a check") || !strings.Contains(got, "written by repair") {
		t.Errorf("the closed call says %q", got)
	}
	b.Shot("repaired")
	b.NoPageErrors()
}

// TestDashboardErase: erasing from the page asks for a reason and the id,
// goes through sessions.api.erase with the operator's rights, and the
// audit view lists the record; the session then shows as erased. A
// projector without the operator's rights refuses, saying so.
func TestDashboardErase(t *testing.T) {
	e := projectortest.NewEnv(t)
	startEraser(t, e)
	const token = "erase-token"
	r := e.Start(t.TempDir(), func(c *projector.Config) { c.HTTPToken, c.Conn, c.Operator = token, e.NC, e.NC })
	plain := e.Start(t.TempDir(), func(c *projector.Config) { c.HTTPToken, c.Conn = token, e.NC })
	r.WaitReady(t)
	plain.WaitReady(t)
	projectortest.PublishN(t, e, gen.NewSession("er-1", projectortest.T0), 11)
	for _, p := range []*projectortest.Running{r, plain} {
		waitDetailToken(t, p, token, "er-1", func(d httpapi.Detail) bool { return d.LastSeq == 11 })
	}
	eraseForm := func(b *projectortest.Browser, reason, confirm string) {
		b.Do("erase "+reason, chromedp.Click(chromedp.CSS(`#act-erase`)),
			chromedp.WaitVisible(chromedp.CSS(`#confirm input[name="reason"]`)),
			chromedp.SendKeys(chromedp.CSS(`#confirm input[name="reason"]`), reason),
			chromedp.SendKeys(chromedp.CSS(`#confirm input[name="confirm"]`), confirm),
			chromedp.Click(chromedp.CSS(`#confirm-ok`)))
	}

	// Without the operator's rights: refused, in words.
	b := projectortest.NewBrowser(t, e.Ctx, 1280, 860)
	b.Login(plain.Srv.URL+"/?s=er-1", token)
	b.Do("open on the plain projector", chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="er-1"]`)))
	eraseForm(b, "privacy request", "er-1")
	b.Do("refused", chromedp.WaitVisible(chromedp.CSS(`#outcome.bad`)))
	if got := b.Text(`#outcome`); !strings.Contains(got, "forbidden") || !strings.Contains(got, "operator") {
		t.Errorf("the refusal says %q", got)
	}
	b.Shot("erase-refused")

	// With them: a wrong id is not sent; the right one erases.
	b.Login(r.Srv.URL+"/?s=er-1", token)
	b.Do("open on the operator's projector", chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="er-1"]`)))
	eraseForm(b, "privacy request", "er-2")
	b.Do("not confirmed", chromedp.WaitVisible(chromedp.CSS(`#outcome.bad`)))
	if got := b.Text(`#outcome`); !strings.Contains(got, "does not match") {
		t.Errorf("a wrong confirmation says %q", got)
	}
	eraseForm(b, "privacy request", "er-1")
	b.Do("erased", chromedp.WaitVisible(chromedp.CSS(`#outcome[data-erase="done"]`)))
	if got := b.Text(`#outcome`); !strings.Contains(got, "Erased er-1 (11 events)") {
		t.Errorf("the outcome says %q", got)
	}
	b.Shot("erased")
	b.Do("the session is erased", chromedp.Navigate(r.Srv.URL+"/?s=er-1"),
		chromedp.WaitVisible(chromedp.CSS(`#missing[data-missing="erased"]`)))
	if got := b.Text(`#detail`); strings.Count(got, "er-1") != 1 || strings.Contains(got, "loading") || strings.Contains(got, "null") {
		t.Errorf("the erased session's page says %q", got)
	}
	b.Shot("erased-session")
	// er-g: sealed, its second body garbled (it does not open), erased
	// with one unhashed.
	sealing, err := logstore.Open(e.Ctx, e.NC, logstore.Config{SealBodies: true})
	if err != nil {
		t.Fatal(err)
	}
	g := newScript(t, e, "er-g")
	g.ls = sealing
	g.add(schema.TypeSessionCreated, `{"title":"g"}`)
	for _, w := range []string{"zebra", "yak", "gnu"} {
		g.add(schema.TypeMessageUser, `{"content":[{"type":"text","text":"feed the `+w+`"}]}`)
	}
	tamper.BreakChainAt(t, e.NC, "SESSIONS", logstore.SubjectPrefix+"er-g", tamper.BreakGarble, 1)
	er, err := eraser.New(eraser.Config{Store: sealing, Conn: e.NC})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := er.Erase(e.Ctx, api.EraseRequest{SessionID: "er-g", Reason: "garbled", By: "test"}); err != nil {
		t.Fatal(err)
	}
	b.Do("the audit view", chromedp.Navigate(r.Srv.URL+"/?view=audit"),
		chromedp.WaitVisible(chromedp.CSS(`#audit tr[data-audit="er-1"]`)), chromedp.WaitVisible(chromedp.CSS(`#audit tr[data-audit="er-g"]`)))
	if got := b.Text(`#audit tr[data-audit="er-1"]`); !strings.Contains(got, "privacy request") || !strings.Contains(got, "dashboard") || !strings.Contains(got, "11") || strings.Contains(got, "unhashed") {
		t.Errorf("the audit record reads %q", got)
	}
	if got := b.Text(`#audit tr[data-audit="er-g"]`); !strings.Contains(got, "3 + 1 unhashed") {
		t.Errorf("the audit record of er-g reads %q, want its 3 events + 1 unhashed", got)
	}
	b.Shot("audit")
	b.NoPageErrors()
}

// TestDashboardEraseAccepted: an eraser that takes the erase as a job
// answers accepted with its progress, and the page says it is erasing,
// with that progress, until the session answers erased. The eraser here
// is a responder that answers as such a job does.
func TestDashboardEraseAccepted(t *testing.T) {
	e := projectortest.NewEnv(t)
	sub, err := e.NC.Subscribe(api.SubjectErase, func(m *nats.Msg) {
		var req api.EraseRequest
		json.Unmarshal(m.Data, &req)
		m.Respond(fmt.Appendf(nil, `{"sessionId":%q,"erased":[],"events":0,"state":"accepted","jobs":[{"sessionId":%q,"phase":"deleting","total":11,"deleted":3,"done":false}]}`, req.SessionID, req.SessionID))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	r := e.Start(t.TempDir(), func(c *projector.Config) { c.Conn, c.Operator = e.NC, e.NC })
	r.WaitReady(t)
	projectortest.PublishN(t, e, gen.NewSession("ea-1", projectortest.T0), 11)
	r.WaitSession(t, "ea-1", func(d httpapi.Detail) bool { return d.LastSeq == 11 })

	b := projectortest.NewBrowser(t, e.Ctx, 1280, 860)
	b.Do("erase", chromedp.Navigate(r.Srv.URL+"/?s=ea-1"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="ea-1"]`)),
		chromedp.Click(chromedp.CSS(`#act-erase`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm input[name="reason"]`)),
		chromedp.SendKeys(chromedp.CSS(`#confirm input[name="reason"]`), "secret in a prompt"),
		chromedp.SendKeys(chromedp.CSS(`#confirm input[name="confirm"]`), "ea-1"),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)),
		chromedp.WaitVisible(chromedp.CSS(`#outcome[data-erase="accepted"]`)))
	if got := b.Text(`#outcome`); got != "Erasing… (accepted: 3 of 11 events deleted)" {
		t.Errorf("the outcome says %q", got)
	}
	b.Shot("erasing")
	b.NoPageErrors()
}
