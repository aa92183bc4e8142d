package console_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/console"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

// chromiumPath finds Debian's chromium (tests/bin/ensure-deps installs it),
// or the browser named by ORDERTIMEOUT_CHROMIUM.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("ORDERTIMEOUT_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("the browser test needs Chromium and none is installed: run tests/bin/ensure-deps as root " +
		"(it runs apt-get install chromium; `make test` does this), or set ORDERTIMEOUT_CHROMIUM to a Chromium binary")
	return ""
}

// screenshotDir is where the browser test keeps its screenshots:
// ORDERTIMEOUT_SCREENSHOTS, or .cache/console-screenshots in the repository.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ORDERTIMEOUT_SCREENSHOTS")
	if dir == "" {
		root, err := os.Getwd()
		require.NoError(t, err)
		for {
			if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
				break
			}
			parent := filepath.Dir(root)
			require.NotEqual(t, parent, root, "no go.mod above the test's directory")
			root = parent
		}
		dir = filepath.Join(root, ".cache", "console-screenshots")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// TestInTheBrowser drives the console of a running sidecar in Chromium:
// every page shows the database, an operator resolves a conflict with a
// click and the database has it resolved once, the operator pauses and
// resumes, a viewer cannot act, and a form of another site is refused.
func TestInTheBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	shots := screenshotDir(t)
	started := time.Now()

	db := pgtest.NewPool(t)
	s := newShop(t, db)
	// An hour of timeout cancels before the shop's six, written as the
	// sweep writes them but backdated, so that the lag chart has the shape
	// of a real hour (20 a minute, 6-30 ms late, a slow minute every 9).
	sidecartest.Exec(t, db, `
		INSERT INTO ordertimeout.events (order_id, from_status, to_status, cause, actor, lateness, at)
		SELECT 'history-' || m || '-' || i, 'PENDING', 'CANCELLED', 'timeout', 'sidecar:history',
		       make_interval(secs => (6 + (m * 7) % 11 + i + CASE WHEN i = 19 AND m % 9 = 0 THEN 100 ELSE 0 END) / 1000.0),
		       now() - make_interval(mins => m)
		FROM generate_series(2, 58) AS m, generate_series(0, 19) AS i`)
	_, gatewayURL := sidecartest.Fake(t, db)
	cfg := sidecartest.Config(pgtest.URL(t, db), gatewayURL, "browser")
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.ConsoleViewer = viewer.User + ":" + viewer.Password
	cfg.ConsoleOperator = operator.User + ":" + operator.Password
	sc, _ := sidecartest.Start(t, cfg)
	base := "http://" + sc.HTTPAddr().String()
	site := &site{URL: base, client: &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}

	// Another site with a form aimed at the console, carrying even a valid
	// token of the operator.
	token := site.token(t, operator)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!DOCTYPE html><title>prize</title><form method="post" action="%s/console/conflicts/%d/resolve">
<input type="hidden" name="csrf" value="%s"><input type="hidden" name="resolution" value="manual">
<button id="go" type="submit">Claim your prize</button></form>`, base, s.MismatchID, token)
	}))
	t.Cleanup(evil.Close)

	setup := time.Since(started)
	var chromeOut bytes.Buffer
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox, // as root
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.CombinedOutput(&chromeOut),
	)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	// The browser starts with its first action; everything after is bounded.
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start Chromium %s: %v\n%s", chromium, err, chromeOut.String())
	}
	browserUp := time.Since(started)
	deadline, cancelDeadline := context.WithTimeout(browser, 60*time.Second)
	t.Cleanup(cancelDeadline)

	// tab opens a tab signed in as who.
	tab := func(who console.Credentials) context.Context {
		ctx, cancel := chromedp.NewContext(deadline)
		t.Cleanup(cancel)
		auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(who.User+":"+who.Password))
		_, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
			Headers: network.Headers{"Authorization": auth},
		})
		require.NoError(t, err)
		return ctx
	}
	visit := func(ctx context.Context, path, waitFor string) {
		t.Helper()
		resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(base+path))
		require.NoError(t, err, path)
		require.EqualValues(t, http.StatusOK, resp.Status, path)
		require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(waitFor))), path)
	}
	text := func(ctx context.Context, sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err, sel)
		return s
	}
	count := func(ctx context.Context, sel string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", sel)))
		require.NoError(t, err, sel)
		return n
	}
	shoot := func(ctx context.Context, name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644))
	}

	op := tab(operator)

	visit(op, "/console/", "#lag-chart")
	require.Equal(t, "1", text(op, `td[data-state="PAID"]`))
	require.Equal(t, "1", text(op, `td[data-state="CLOSED"]`))
	require.Equal(t, "9", text(op, `td[data-state="CANCELLED"]`))
	require.Equal(t, 2, count(op, "#lag-chart polyline"))
	require.Contains(t, text(op, "main"), fmt.Sprintf("%d cancels", 6+57*20))
	shoot(op, "overview")

	visit(op, "/console/order?id="+lateOrder, "#events")
	require.Equal(t, "CANCELLED", text(op, "#order-status"))
	require.GreaterOrEqual(t, count(op, "#events tbody tr"), 3)
	require.GreaterOrEqual(t, count(op, "#releases tbody tr"), 4) // A, B, coupon, points
	shoot(op, "order")

	visit(op, "/console/settings", "#settings")
	require.Contains(t, text(op, "#settings"), "late_payment")
	shoot(op, "settings")

	// Pause, see it on the overview, resume.
	click := func(ctx context.Context, sel string, status int) {
		t.Helper()
		resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel)))
		require.NoError(t, err, sel)
		require.EqualValues(t, status, resp.Status, sel)
	}
	click(op, "#pause", http.StatusOK)
	require.Contains(t, text(op, "#paused"), "Paused")
	shoot(op, "settings-paused")
	visit(op, "/console/", "#paused")
	require.Contains(t, text(op, "#paused"), "by console:olga")
	visit(op, "/console/settings", "#resume")
	click(op, "#resume", http.StatusOK)
	require.NoError(t, chromedp.Do(op, chromedp.WaitVisible(chromedp.CSS("#running"))))
	require.EqualValues(t, 0, sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.settings WHERE paused"))

	// The operator reinstates the late payment of the exact amount, with a
	// note saying why.
	visit(op, "/console/conflicts", "#open-conflicts")
	require.Equal(t, 2, count(op, "#open-conflicts tbody tr"))
	shoot(op, "conflicts")
	const note = "the buyer still wants it; stock checked"
	require.NoError(t, chromedp.Do(op, chromedp.SendKeys(fmt.Sprintf(`#conflict-%d input[name="note"]`, s.LateID), note)))
	resp, err := chromedp.RunResponse(op, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#conflict-%d button[value="reinstate"]`, s.LateID))))
	require.NoError(t, err)
	require.EqualValues(t, http.StatusOK, resp.Status)
	require.Contains(t, resp.URL, fmt.Sprintf("/console/conflicts?resolved=%d&outcome=reinstated", s.LateID))
	require.NoError(t, chromedp.Do(op, chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf("#resolved-%d", s.LateID)))))
	require.Contains(t, text(op, fmt.Sprintf("#resolved-%d", s.LateID)), "console:olga")
	require.Contains(t, text(op, fmt.Sprintf("#resolved-%d", s.LateID)), note, "the note is shown with the resolution")
	require.Equal(t, 1, count(op, "#open-conflicts tbody tr"))
	shoot(op, "conflicts-resolved")
	c := readConflict(t, db, s.LateID)
	require.Equal(t, "resolved", c.State)
	require.Equal(t, "reinstated", *c.Resolution)
	require.Equal(t, "console:olga", *c.ResolvedBy)
	require.NotNil(t, c.Note)
	require.Equal(t, note, *c.Note, "the note is kept on the conflict")
	require.EqualValues(t, 1, c.Events, "one resolution event")
	require.Equal(t, "PAID", sidecartest.Status(t, db, lateOrder))

	// A refusal is shown: the short payment cannot be reinstated.
	resp, err = chromedp.RunResponse(op, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#conflict-%d button[value="reinstate"]`, s.MismatchID))))
	require.NoError(t, err)
	require.EqualValues(t, http.StatusConflict, resp.Status)
	require.Contains(t, text(op, ".flash.error"), "("+sqlstate.CannotReinstate+")")
	shoot(op, "conflicts-refused")

	// A viewer sees no action, and a form it makes on the console's own
	// page is refused.
	vw := tab(viewer)
	visit(vw, "/console/conflicts", "#open-conflicts")
	require.Zero(t, count(vw, `form[method="post"]`))
	require.Contains(t, text(vw, "main"), "You are a viewer")
	forge := fmt.Sprintf(`(() => {
		const f = document.createElement('form');
		f.method = 'post';
		f.action = '/console/conflicts/%d/resolve';
		for (const [k, v] of [['csrf', %q], ['resolution', 'manual']]) {
			const i = document.createElement('input');
			i.type = 'hidden'; i.name = k; i.value = v; f.appendChild(i);
		}
		document.body.appendChild(f);
		f.submit();
		return true;
	})()`, s.MismatchID, token)
	resp, err = chromedp.RunResponse(vw, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](forge)(ctx, tg)
		return err
	}))
	require.NoError(t, err)
	require.EqualValues(t, http.StatusForbidden, resp.Status)
	require.Contains(t, text(vw, "main"), "Viewers may not act")

	// The operator, signed in, on another site's page: refused.
	resp, err = chromedp.RunResponse(op, chromedp.Navigate(evil.URL))
	require.NoError(t, err)
	require.EqualValues(t, http.StatusOK, resp.Status)
	resp, err = chromedp.RunResponse(op, chromedp.Click(chromedp.ID("go")))
	require.NoError(t, err)
	require.EqualValues(t, http.StatusForbidden, resp.Status)
	require.Contains(t, text(op, "body"), "cross-origin request refused")
	shoot(op, "cross-origin-refused")

	m := readConflict(t, db, s.MismatchID)
	require.Equal(t, "open", m.State, "the short payment's conflict is untouched")
	require.Zero(t, m.Events)
	t.Logf("browser test: %s (database and sidecar ready after %s, Chromium after %s); screenshots in %s",
		time.Since(started).Round(time.Millisecond), setup.Round(time.Millisecond), browserUp.Round(time.Millisecond), shots)
	if strings.Contains(chromeOut.String(), "Running as root without --no-sandbox") {
		t.Fatalf("Chromium refused to run as root:\n%s", chromeOut.String())
	}
}
