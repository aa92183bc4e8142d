package console_test

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/console"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

func newSite(t *testing.T) (shop, *site) {
	t.Helper()
	s := newShop(t, pgtest.NewPool(t))
	return s, serve(t, console.Config{Pool: s.DB, Viewer: viewer, Operator: operator, Logger: sidecartest.Logger()})
}

func TestPagesShowTheDatabase(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	for _, who := range []console.Credentials{viewer, operator} {
		a := site.do(t, http.MethodGet, "/console/", who, nil, nil)
		require.Equal(t, http.StatusOK, a.Status, a.Body)
		require.Equal(t, "text/html; charset=utf-8", a.Header.Get("Content-Type"))
		require.Contains(t, a.Header.Get("Content-Security-Policy"), "default-src 'none'")
		for _, state := range []string{"PENDING", "PAYING", "PAID", "CANCELLED", "CLOSED"} {
			require.Contains(t, a.Body, fmt.Sprintf(`data-state="%s">`, state))
		}
		require.Contains(t, a.Body, `data-state="PAID">1<`)
		require.Contains(t, a.Body, `data-state="CANCELLED">9<`) // 1 + 2 conflicts + 6 timeouts
		require.Contains(t, a.Body, "6 cancels")
		require.Contains(t, a.Body, `<svg class="chart" id="lag-chart"`)
		require.Contains(t, a.Body, "<polyline points=")
		require.Contains(t, a.Body, who.User)
		require.Contains(t, a.Body, `id="running"`)

		a = site.do(t, http.MethodGet, "/console/conflicts", who, nil, nil)
		require.Equal(t, http.StatusOK, a.Status, a.Body)
		require.Contains(t, a.Body, fmt.Sprintf(`id="conflict-%d"`, s.LateID))
		require.Contains(t, a.Body, fmt.Sprintf(`id="conflict-%d"`, s.MismatchID))
		require.Contains(t, a.Body, "pay-short")
		require.Contains(t, a.Body, `<td class="num differs">0.01 EUR</td>`)
		require.Contains(t, a.Body, "None resolved yet.")
		if who == viewer {
			require.NotContains(t, a.Body, "<form method=\"post\"")
			require.Contains(t, a.Body, "You are a viewer")
		} else {
			require.Contains(t, a.Body, fmt.Sprintf(`action="/console/conflicts/%d/resolve"`, s.LateID))
		}

		a = site.do(t, http.MethodGet, "/console/order?id="+lateOrder, who, nil, nil)
		require.Equal(t, http.StatusOK, a.Status, a.Body)
		for _, want := range []string{`id="order-status">CANCELLED<`, "pay-late", "SPRING", "acct-1", `id="holds"`, `id="releases"`, `id="events"`, "late_payment", "25.00 EUR"} {
			require.Contains(t, a.Body, want)
		}

		a = site.do(t, http.MethodGet, "/console/settings", who, nil, nil)
		require.Equal(t, http.StatusOK, a.Status, a.Body)
		require.Contains(t, a.Body, "<th>late_payment</th><td class=\"mono\">manual</td>")
		require.NotContains(t, a.Body, "singleton")

		a = site.do(t, http.MethodGet, "/console/static/console.css", who, nil, nil)
		require.Equal(t, http.StatusOK, a.Status)
		require.Contains(t, a.Header.Get("Content-Type"), "text/css")

		a = site.do(t, http.MethodGet, "/console/nope", who, nil, nil)
		require.Equal(t, http.StatusNotFound, a.Status)
	}
}

func TestSignIn(t *testing.T) {
	t.Parallel()
	_, site := newSite(t)
	for _, who := range []console.Credentials{{}, {User: viewer.User, Password: operator.Password}, {User: "olga", Password: "operator-secreT"}, {User: "x", Password: "y"}} {
		a := site.do(t, http.MethodGet, "/console/", who, nil, nil)
		require.Equal(t, http.StatusUnauthorized, a.Status, "user %q", who.User)
		require.Contains(t, a.Header.Get("WWW-Authenticate"), `Basic realm="ordertimeout console"`)
		require.NotContains(t, a.Body, "PENDING")
	}
	a := site.do(t, http.MethodPost, "/console/conflicts/1/resolve", console.Credentials{}, url.Values{"resolution": {"manual"}}, nil)
	require.Equal(t, http.StatusUnauthorized, a.Status)
}

func TestViewerCannotAct(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	// Even with the operator's token, from this site's own page.
	token := site.token(t, operator)
	for _, resolution := range []string{"reinstate", "refund", "manual"} {
		a := site.resolve(t, viewer, s.LateID, resolution, token, nil)
		require.Equal(t, http.StatusForbidden, a.Status, a.Body)
		require.Contains(t, a.Body, "Viewers may not act")
	}
	c := readConflict(t, s.DB, s.LateID)
	require.Equal(t, "open", c.State)
	require.Zero(t, c.Events)
}

func TestActionsNeedTheCSRFToken(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	token := site.token(t, operator)
	ts, mac, _ := strings.Cut(token, ".")
	for name, bad := range map[string]string{
		"none":         "",
		"garbage":      "nope",
		"other time":   "1" + ts + "." + mac,
		"other mac":    ts + "." + strings.Repeat("A", len(mac)),
		"long":         strings.Repeat("9", 4000),
		"viewer's key": ts + "." + mac[1:],
	} {
		a := site.resolve(t, operator, s.LateID, "manual", bad, nil)
		require.Equal(t, http.StatusForbidden, a.Status, "%s: %s", name, a.Body)
	}
	// Without any Origin, Sec-Fetch-Site or Referer (not a browser), the
	// token alone still decides.
	a := site.resolve(t, operator, s.LateID, "manual", "", map[string]string{})
	require.Equal(t, http.StatusForbidden, a.Status)
	require.Contains(t, a.Body, "CSRF")
	require.Equal(t, "open", readConflict(t, s.DB, s.LateID).State)
}

// A form posted as multipart/form-data (a hand-made one, or a page's form
// given enctype="multipart/form-data") with a valid token was told "Refused:
// the form carries no CSRF token.": r.ParseForm leaves a multipart body
// unread. Nothing was written, but the message was wrong. A body that is
// not a URL-encoded form is refused for its type (415), with the type the
// console takes, before the token is looked for; nothing is written. A
// URL-encoded form with a charset is a form.
func TestActionsTakeOnlyURLEncodedForms(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	token := site.token(t, operator)
	origin := map[string]string{"Origin": site.URL}
	multipartForm := func(fields map[string]string) (string, *bytes.Buffer) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		for k, v := range fields {
			require.NoError(t, mw.WriteField(k, v))
		}
		require.NoError(t, mw.Close())
		return mw.FormDataContentType(), &b
	}
	resolvePath := fmt.Sprintf("/console/conflicts/%d/resolve", s.LateID)
	for _, c := range []struct{ path, contentType, body, is string }{
		{resolvePath, "", "csrf=" + url.QueryEscape(token) + "&resolution=manual", "a body without a Content-Type"},
		{resolvePath, "text/plain", "csrf=" + url.QueryEscape(token) + "&resolution=manual", "text/plain"},
		{resolvePath, "application/json", `{"csrf": "` + token + `", "resolution": "manual"}`, "application/json"},
		{resolvePath, "multipart/form-data; boundary", "", "a body whose Content-Type cannot be read"},
	} {
		a := site.send(t, http.MethodPost, c.path, operator, c.contentType, strings.NewReader(c.body), origin)
		require.Equal(t, http.StatusUnsupportedMediaType, a.Status, "%s: %s", c.contentType, a.Body)
		require.Contains(t, a.Body, "Refused: the console takes a form sent as application/x-www-form-urlencoded (as its own pages send it), and this one is "+c.is+": nothing was done.")
	}
	for _, c := range []struct {
		path   string
		fields map[string]string
	}{
		{resolvePath, map[string]string{"csrf": token, "resolution": "manual", "note": "sent as multipart"}},
		{"/console/settings/pause", map[string]string{"csrf": token, "paused": "true"}},
	} {
		contentType, body := multipartForm(c.fields)
		a := site.send(t, http.MethodPost, c.path, operator, contentType, body, origin)
		require.Equal(t, http.StatusUnsupportedMediaType, a.Status, "%s: %s", c.path, a.Body)
		require.Contains(t, a.Body, "Refused: the console takes a form sent as application/x-www-form-urlencoded (as its own pages send it), and this one is multipart/form-data: nothing was done.", c.path)
		require.NotContains(t, a.Body, "CSRF", c.path)
	}
	c := readConflict(t, s.DB, s.LateID)
	require.Equal(t, "open", c.State, "nothing resolved")
	require.Zero(t, c.Events)
	require.Equal(t, int64(0), sidecartest.Int(t, s.DB, "SELECT count(*) FROM ordertimeout.settings WHERE paused"), "not paused")

	// A viewer's multipart POST is still a viewer's; and a URL-encoded form
	// with a charset parameter is the console's form.
	contentType, body := multipartForm(map[string]string{"csrf": token, "resolution": "manual"})
	a := site.send(t, http.MethodPost, resolvePath, viewer, contentType, body, origin)
	require.Equal(t, http.StatusForbidden, a.Status, a.Body)
	require.Contains(t, a.Body, "Viewers may not act")
	a = site.send(t, http.MethodPost, resolvePath, operator, "application/x-www-form-urlencoded; charset=UTF-8",
		strings.NewReader(url.Values{"csrf": {token}, "resolution": {"manual"}}.Encode()), origin)
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
	require.Equal(t, "resolved", readConflict(t, s.DB, s.LateID).State)
}

func TestCrossOriginActionsAreRefused(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	token := site.token(t, operator) // even with a valid token
	for _, h := range []map[string]string{
		{"Origin": "http://evil.example"},
		{"Origin": "null"},
		{"Origin": strings.Replace(site.URL, "127.0.0.1", "localhost", 1)},
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site"},
		{"Referer": "http://evil.example/page"},
	} {
		a := site.resolve(t, operator, s.LateID, "reinstate", token, h)
		require.Equal(t, http.StatusForbidden, a.Status, "%v: %s", h, a.Body)
		require.Contains(t, a.Body, "cross-origin request refused")
	}
	c := readConflict(t, s.DB, s.LateID)
	require.Equal(t, "open", c.State)
	require.Zero(t, c.Events)
}

// Operators clicking at once, with different resolutions: the conflict is
// resolved once, with one event, by the console's operator.
func TestAConflictIsResolvedOnce(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	token := site.token(t, operator)
	var wg sync.WaitGroup
	answers := make([]answer, 12)
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = site.resolve(t, operator, s.LateID, []string{"reinstate", "manual", "reinstate"}[i%3], token, nil)
		}()
	}
	wg.Wait()
	c := readConflict(t, s.DB, s.LateID)
	require.Equal(t, "resolved", c.State)
	require.NotNil(t, c.Resolution)
	require.Equal(t, "console:olga", *c.ResolvedBy)
	require.EqualValues(t, 1, c.Events)
	want := map[string]string{"reinstated": "reinstate", "manual": "manual"}[*c.Resolution]
	for i, a := range answers {
		if []string{"reinstate", "manual", "reinstate"}[i%3] == want {
			require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
			require.Equal(t, fmt.Sprintf("/console/conflicts?resolved=%d&outcome=%s", s.LateID, *c.Resolution), a.Location)
		} else {
			require.Equal(t, http.StatusConflict, a.Status, a.Body)
			require.Contains(t, a.Body, "("+sqlstate.ConflictResolved+")")
			require.Contains(t, a.Body, "Someone resolved this conflict otherwise already")
		}
	}
	if *c.Resolution == "reinstated" {
		require.Equal(t, "PAID", sidecartest.Status(t, s.DB, lateOrder))
	}

	// Shown afterwards: who resolved what, and when.
	a := site.do(t, http.MethodGet, answers[0].Location, viewer, nil, nil)
	if answers[0].Status != http.StatusSeeOther {
		a = site.do(t, http.MethodGet, "/console/conflicts", viewer, nil, nil)
	}
	require.Equal(t, http.StatusOK, a.Status)
	require.Contains(t, a.Body, fmt.Sprintf(`id="resolved-%d"`, s.LateID))
	require.Contains(t, a.Body, "console:olga")
	require.NotContains(t, a.Body, fmt.Sprintf(`id="conflict-%d"`, s.LateID))
}

func TestRefusalsAreShown(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	token := site.token(t, operator)

	// Another amount is never reinstated.
	a := site.resolve(t, operator, s.MismatchID, "reinstate", token, nil)
	require.Equal(t, http.StatusConflict, a.Status, a.Body)
	require.Contains(t, a.Body, "("+sqlstate.CannotReinstate+")")
	require.Contains(t, a.Body, "it is a amount_mismatch on a CANCELLED order")
	require.Equal(t, "open", readConflict(t, s.DB, s.MismatchID).State)

	// A refund claims it; nothing else can end it then.
	a = site.resolve(t, operator, s.MismatchID, "refund", token, nil)
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
	require.Equal(t, fmt.Sprintf("/console/conflicts?resolved=%d&outcome=refunding", s.MismatchID), a.Location)
	c := readConflict(t, s.DB, s.MismatchID)
	require.Equal(t, "refunding", c.State)
	require.Equal(t, "console:olga", *c.ResolvedBy)
	a = site.resolve(t, operator, s.MismatchID, "manual", token, nil)
	require.Equal(t, http.StatusConflict, a.Status, a.Body)
	require.Contains(t, a.Body, "("+sqlstate.ConflictRefunding+")")
	a = site.do(t, http.MethodGet, "/console/conflicts?resolved=1&outcome=%3Cscript%3E", operator, nil, nil)
	require.Contains(t, a.Body, fmt.Sprintf(`<tr id="conflict-%d" data-state="refunding">`, s.MismatchID))
	require.Contains(t, a.Body, "refund in progress")
	require.NotContains(t, a.Body, "<script>")

	// Unknown conflicts and bad input.
	a = site.resolve(t, operator, 999999, "manual", token, nil)
	require.Equal(t, http.StatusNotFound, a.Status)
	require.Contains(t, a.Body, "("+sqlstate.UnknownConflict+")")
	a = site.resolve(t, operator, s.LateID, "delete", token, nil)
	require.Equal(t, http.StatusBadRequest, a.Status)
	for _, id := range []string{"0", "-1", "abc", "99999999999999999999"} {
		a = site.do(t, http.MethodPost, "/console/conflicts/"+id+"/resolve", operator,
			url.Values{"csrf": {token}, "resolution": {"manual"}}, map[string]string{"Origin": site.URL})
		require.Equal(t, http.StatusBadRequest, a.Status, id)
	}
	require.Equal(t, "open", readConflict(t, s.DB, s.LateID).State)
}

func TestOrderLookupTreatsItsInputAsHostile(t *testing.T) {
	t.Parallel()
	_, site := newSite(t)
	for id, status := range map[string]int{
		"":                          http.StatusOK, // the form only
		"<script>alert(1)</script>": http.StatusNotFound,
		"a\u202eb":                  http.StatusBadRequest,
		"a\nb":                      http.StatusBadRequest,
		"..":                        http.StatusBadRequest,
		strings.Repeat("x", 65):     http.StatusBadRequest,
		strings.Repeat("x", 100000): http.StatusBadRequest,
		"O-PAID' OR '1'='1":         http.StatusNotFound,
	} {
		a := site.do(t, http.MethodGet, "/console/order?id="+url.QueryEscape(id), viewer, nil, nil)
		require.Equal(t, status, a.Status, "%.40q", id)
		require.NotContains(t, a.Body, "<script>alert")
		require.Less(t, len(a.Body), 20000)
	}
}

// With only the ordertimeout_sidecar role, every page works; what needs the
// tables says so.
func TestWithTheSidecarRole(t *testing.T) {
	t.Parallel()
	s := newShop(t, pgtest.NewPool(t))
	role := "console_" + strings.ReplaceAll(s.DB.Config().ConnConfig.Database, "pgtest_", "")
	sidecartest.Exec(t, s.DB, fmt.Sprintf("CREATE ROLE %s LOGIN IN ROLE ordertimeout_sidecar", pgx.Identifier{role}.Sanitize()))
	t.Cleanup(func() { _, _ = s.DB.Exec(bg, fmt.Sprintf("DROP ROLE IF EXISTS %s", pgx.Identifier{role}.Sanitize())) })
	u, err := url.Parse(pgtest.URL(t, s.DB))
	require.NoError(t, err)
	u.User = url.User(role)
	pool, err := pgxpool.New(bg, u.String())
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	site := serve(t, console.Config{Pool: pool, Operator: operator, Logger: sidecartest.Logger()})
	for _, path := range []string{"/console/", "/console/conflicts", "/console/order?id=" + lateOrder, "/console/settings"} {
		a := site.do(t, http.MethodGet, path, operator, nil, nil)
		require.Equal(t, http.StatusOK, a.Status, "%s: %s", path, a.Body)
	}
	a := site.do(t, http.MethodGet, "/console/conflicts", operator, nil, nil)
	require.Contains(t, a.Body, "cannot read table ordertimeout.conflicts")
	a = site.do(t, http.MethodGet, "/console/order?id="+lateOrder, operator, nil, nil)
	require.Contains(t, a.Body, "cannot read the tables of holds")
	require.Contains(t, a.Body, `id="events"`)

	token := site.token(t, operator)
	a = site.do(t, http.MethodPost, "/console/settings/pause", operator, url.Values{"csrf": {token}, "paused": {"true"}}, map[string]string{"Origin": site.URL})
	require.Equal(t, http.StatusForbidden, a.Status, a.Body)
	require.Contains(t, a.Body, "pausing needs ordertimeout_admin")

	a = site.resolve(t, operator, s.LateID, "reinstate", token, nil)
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
	c := readConflict(t, s.DB, s.LateID)
	require.Equal(t, "console:olga", *c.ResolvedBy)
	require.EqualValues(t, 1, c.Events)
}

func TestAnonymousIsReadOnly(t *testing.T) {
	t.Parallel()
	s := newShop(t, pgtest.NewPool(t))
	site := serve(t, console.Config{Pool: s.DB, Anonymous: true, Logger: sidecartest.Logger()})
	a := site.do(t, http.MethodGet, "/console/conflicts", console.Credentials{}, nil, nil)
	require.Equal(t, http.StatusOK, a.Status)
	require.Contains(t, a.Body, "anonymous")
	require.NotContains(t, a.Body, `name="csrf"`)
	a = site.resolve(t, console.Credentials{}, s.LateID, "manual", "", nil)
	require.Equal(t, http.StatusForbidden, a.Status)
	require.Equal(t, "open", readConflict(t, s.DB, s.LateID).State)
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	pool := &pgxpool.Pool{}
	for name, cfg := range map[string]console.Config{
		"no pool":      {Operator: operator},
		"nobody":       {Pool: pool},
		"same name":    {Pool: pool, Viewer: viewer, Operator: console.Credentials{User: viewer.User, Password: "x"}},
		"control char": {Pool: pool, Operator: console.Credentials{User: "a\x1bb", Password: "x"}},
		"long name":    {Pool: pool, Operator: console.Credentials{User: strings.Repeat("a", 65), Password: "x"}},
	} {
		_, err := console.New(cfg)
		require.Error(t, err, name)
	}
	for _, bad := range []string{"user", ":pw", "user:", "nocolon"} {
		_, err := console.ParseCredentials(bad)
		require.Error(t, err, bad)
	}
	c, err := console.ParseCredentials("ann:pa:ss")
	require.NoError(t, err)
	require.Equal(t, console.Credentials{User: "ann", Password: "pa:ss"}, c)
}

// A page of a trusted host (the HTTP server's --http-allowed-hosts, e.g. a
// reverse proxy's name) may act; its look-alikes may not.
func TestTrustedHostsMayAct(t *testing.T) {
	t.Parallel()
	s := newShop(t, pgtest.NewPool(t))
	site := serve(t, console.Config{Pool: s.DB, Operator: operator, TrustedHosts: []string{"Console.Example:443"}, Logger: sidecartest.Logger()})
	token := site.token(t, operator)
	for _, origin := range []string{"https://console.example.evil", "https://evil-console.example", "ftp://console.example"} {
		a := site.resolve(t, operator, s.LateID, "manual", token, map[string]string{"Origin": origin})
		require.Equal(t, http.StatusForbidden, a.Status, origin)
	}
	a := site.resolve(t, operator, s.LateID, "manual", token, map[string]string{"Origin": "https://console.example"})
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
	require.Equal(t, "resolved", readConflict(t, s.DB, s.LateID).State)
}

// An operator pauses and resumes timeout cancels from the settings page;
// the overview shows it, with who paused.
func TestPauseAndResume(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	a := site.do(t, http.MethodGet, "/console/", viewer, nil, nil)
	require.Contains(t, a.Body, `id="running"`)
	a = site.do(t, http.MethodGet, "/console/settings", viewer, nil, nil)
	require.NotContains(t, a.Body, `id="pause"`)
	token := site.token(t, operator)
	pause := func(who console.Credentials, paused string, headers map[string]string) answer {
		if headers == nil {
			headers = map[string]string{"Origin": site.URL}
		}
		form := url.Values{"csrf": {token}, "paused": {paused}}
		if paused == "false" {
			// The pause the page shows, as its Resume form sends it.
			form.Set("paused_at", pauseForm(t, site).Get("paused_at"))
		}
		return site.do(t, http.MethodPost, "/console/settings/pause", who, form, headers)
	}
	isPaused := func() bool {
		var p bool
		require.NoError(t, s.DB.QueryRow(bg, "SELECT paused FROM ordertimeout.settings").Scan(&p))
		return p
	}
	require.Equal(t, http.StatusForbidden, pause(viewer, "true", nil).Status)
	require.Equal(t, http.StatusForbidden, pause(operator, "true", map[string]string{"Origin": "http://evil.example"}).Status)
	require.Equal(t, http.StatusBadRequest, pause(operator, "yes", nil).Status)
	require.False(t, isPaused())

	a = pause(operator, "true", nil)
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
	require.Equal(t, "/console/settings?paused=true", a.Location)
	require.True(t, isPaused())
	var by string
	require.NoError(t, s.DB.QueryRow(bg, "SELECT paused_by FROM ordertimeout.settings").Scan(&by))
	require.Equal(t, "console:olga", by)
	a = site.do(t, http.MethodGet, "/console/", viewer, nil, nil)
	require.Contains(t, a.Body, `class="flash paused"`)
	require.Contains(t, a.Body, "by console:olga")
	a = site.do(t, http.MethodGet, "/console/settings?paused=true", operator, nil, nil)
	require.Contains(t, a.Body, `id="resume"`)
	require.Contains(t, a.Body, "<th>paused</th><td class=\"mono\">true</td>")

	a = pause(operator, "false", nil)
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
	require.False(t, isPaused())
	a = site.do(t, http.MethodGet, "/console/", viewer, nil, nil)
	require.Contains(t, a.Body, `id="running"`)
}

// A pause that a transaction left open after its sweep holds up (its
// timeout cancels, made before the pause, are not committed) shows the
// database's warning, naming that backend, instead of the plain redirect;
// the pause is in force.
func TestPauseShowsTheCancelsItCouldNotWaitFor(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	sidecartest.Exec(t, s.DB, `SELECT ordertimeout.create_order('O-OPEN', '[{"sku":"A","qty":1}]', interval '1 millisecond')`)
	sidecartest.Eventually(t, 10*time.Second, "the order to come due", func() (bool, error) {
		return sidecartest.Int(t, s.DB, "SELECT count(*) FROM ordertimeout.preview_due()") == 1, nil
	})
	open, err := s.DB.Begin(bg)
	require.NoError(t, err)
	defer open.Rollback(bg) //nolint:errcheck // the test's end
	var cancelled, pid int
	require.NoError(t, open.QueryRow(bg, "SELECT cancelled, pg_backend_pid() FROM ordertimeout.sweep_due()").Scan(&cancelled, &pid))
	require.Equal(t, 1, cancelled)

	token := site.token(t, operator)
	a := site.do(t, http.MethodPost, "/console/settings/pause", operator,
		url.Values{"csrf": {token}, "paused": {"true"}}, map[string]string{"Origin": site.URL})
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	require.Contains(t, a.Body, "Paused, with a warning from the database: paused, but timeout cancels made before the pause are still not committed after 2s")
	require.Contains(t, a.Body, fmt.Sprintf("(backend pid %d)", pid))
	require.EqualValues(t, 1, sidecartest.Int(t, s.DB, "SELECT count(*) FROM ordertimeout.settings WHERE paused"))
}

// A warning about something else than the cancels a pause could not wait
// for (here a misspelt plpgsql setting in the database's configuration) does
// not turn the pause into "Paused, with a warning": it redirects as usual,
// and so does the resume.
func TestPauseShowsNoOtherWarning(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	sidecartest.WarnOnPlpgsqlLoad(t, pgtest.URL(t, s.DB))
	token := site.token(t, operator)
	a := site.do(t, http.MethodPost, "/console/settings/pause", operator,
		url.Values{"csrf": {token}, "paused": {"true"}}, map[string]string{"Origin": site.URL})
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
	require.EqualValues(t, 1, sidecartest.Int(t, s.DB, "SELECT count(*) FROM ordertimeout.settings WHERE paused"))
	var at time.Time
	require.NoError(t, s.DB.QueryRow(bg, "SELECT paused_at FROM ordertimeout.settings").Scan(&at))
	a = site.do(t, http.MethodPost, "/console/settings/pause", operator,
		url.Values{"csrf": {token}, "paused": {"false"}, "paused_at": {at.Format(time.RFC3339Nano)}}, map[string]string{"Origin": site.URL})
	require.Equal(t, http.StatusSeeOther, a.Status, a.Body)
	require.Zero(t, sidecartest.Int(t, s.DB, "SELECT count(*) FROM ordertimeout.settings WHERE paused"))
}

// When the console cannot open a connection of its own for a pause (none
// left in an incident; here the database refuses new ones), it pauses on its
// pool and says that it could not read the database's warnings, instead of
// the plain redirect.
func TestPauseSaysWhenItCouldNotReadTheWarnings(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	token := site.token(t, operator) // also leaves the pool a connection
	// From another database: PostgreSQL refuses it from the one it closes.
	cc, err := pgx.ParseConfig(pgtest.URL(t, s.DB))
	require.NoError(t, err)
	name := cc.Database
	cc.Database = "postgres"
	admin, err := pgx.ConnectConfig(bg, cc)
	require.NoError(t, err)
	defer admin.Close(bg) //nolint:errcheck // the test's end
	allow := func(b bool) {
		_, err := admin.Exec(bg, fmt.Sprintf("ALTER DATABASE %s ALLOW_CONNECTIONS %t", pgx.Identifier{name}.Sanitize(), b))
		require.NoError(t, err)
	}
	allow(false)
	defer allow(true)
	a := site.do(t, http.MethodPost, "/console/settings/pause", operator,
		url.Values{"csrf": {token}, "paused": {"true"}}, map[string]string{"Origin": site.URL})
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	require.Contains(t, a.Body, "Paused, but the console could not open a connection of its own to read the database&#39;s warnings")
	require.EqualValues(t, 1, sidecartest.Int(t, s.DB, "SELECT count(*) FROM ordertimeout.settings WHERE paused"))
}
