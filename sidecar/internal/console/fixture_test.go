package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/console"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var bg = context.Background()

var (
	viewer   = console.Credentials{User: "vera", Password: "viewer-secret"}
	operator = console.Credentials{User: "olga", Password: "operator-secret"}
)

// shop is a database with orders in every state the API reaches, timeout
// cancels for the lag chart, and two late payments: one of the order's
// exact amount (LateID) and one of another amount (MismatchID).
type shop struct {
	DB                 *pgxpool.Pool
	LateID, MismatchID int64
}

const (
	lateOrder     = "O-LATE"
	mismatchOrder = "O-MISMATCH"
)

func newShop(t testing.TB, db *pgxpool.Pool) shop {
	t.Helper()
	ex := func(sql string, args ...any) { sidecartest.Exec(t, db, sql, args...) }
	ex("SELECT ordertimeout.put_stock('A', 1000)")
	ex("SELECT ordertimeout.put_stock('B', 1000)")
	ex("SELECT ordertimeout.put_points('acct-1', 500)")
	// Late payments wait for a person, whatever runs.
	ex("SELECT ordertimeout.configure(grace => interval '0', late_payment => 'manual')")
	create := func(id, options string) {
		ex(`SELECT ordertimeout.create_order($1, '[{"sku":"A","qty":1},{"sku":"B","qty":2}]', interval '1 hour', $2::jsonb)`, id, options)
	}
	money := `{"amount":25.00,"currency":"EUR"}`
	create("O-PENDING", money)
	create("O-PAYING", money)
	ex("SELECT ordertimeout.begin_payment('O-PAYING', 'pay-paying')")
	create("O-PAID", `{"amount":25.00,"currency":"EUR","coupon":"WELCOME10"}`)
	ex("SELECT ordertimeout.begin_payment('O-PAID', 'pay-paid')")
	ex("SELECT ordertimeout.confirm_payment('O-PAID', 'pay-paid', 25.00, 'EUR')")
	create("O-CLOSED", money)
	ex("SELECT ordertimeout.cancel_order('O-CLOSED', 'requested')")
	ex("SELECT ordertimeout.close_cancelled(interval '0', 10)")
	create("O-CANCELLED", money)
	ex("SELECT ordertimeout.cancel_order('O-CANCELLED', 'requested')")
	create(lateOrder, `{"amount":25.00,"currency":"EUR","coupon":"SPRING","points_account":"acct-1","points":100}`)
	ex("SELECT ordertimeout.cancel_order($1, 'requested')", lateOrder)
	ex("SELECT ordertimeout.confirm_payment($1, 'pay-late', 25.00, 'EUR')", lateOrder)
	create(mismatchOrder, money)
	ex("SELECT ordertimeout.cancel_order($1, 'requested')", mismatchOrder)
	ex("SELECT ordertimeout.confirm_payment($1, 'pay-short', 0.01, 'EUR')", mismatchOrder)
	// Timeout cancels, for the cancel lag.
	for i := range 6 {
		ex(`SELECT ordertimeout.create_order($1, '[{"sku":"A","qty":1}]', $2 * interval '1 millisecond')`,
			fmt.Sprintf("O-T%d", i), 5+10*i)
	}
	sidecartest.Eventually(t, 10*time.Second, "the timeout orders to be cancelled", func() (bool, error) {
		if _, err := db.Exec(bg, "SELECT ordertimeout.cancel_due(100)"); err != nil {
			return false, err
		}
		return sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.cancel_lag") == 6, nil
	})
	s := shop{DB: db}
	s.LateID = sidecartest.Int(t, db, "SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = $1", lateOrder)
	s.MismatchID = sidecartest.Int(t, db, "SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = $1", mismatchOrder)
	return s
}

// conflictRow is what the database says about one conflict.
type conflictRow struct {
	State      string
	Resolution *string
	ResolvedBy *string
	Note       *string
	Events     int64 // events recording a resolution of it
}

func readConflict(t testing.TB, db *pgxpool.Pool, id int64) conflictRow {
	t.Helper()
	var c conflictRow
	err := db.QueryRow(bg, `
		SELECT c.state, c.resolution, coalesce(c.resolved_by, c.refund_started_by), c.note,
		       (SELECT count(*) FROM ordertimeout.events AS e
		         WHERE e.cause = 'conflict' AND (e.detail ->> 'conflict_id')::bigint = c.conflict_id)
		FROM ordertimeout.conflicts AS c WHERE c.conflict_id = $1`, id).
		Scan(&c.State, &c.Resolution, &c.ResolvedBy, &c.Note, &c.Events)
	require.NoError(t, err)
	return c
}

// site serves a console handler on a real HTTP server.
type site struct {
	URL    string
	client *http.Client
}

func serve(t testing.TB, cfg console.Config) *site {
	t.Helper()
	h, err := console.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	// Redirects are looked at, not followed.
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	return &site{URL: srv.URL, client: client}
}

type answer struct {
	Status   int
	Body     string
	Location string
	Header   http.Header
}

// do sends one request as who (zero: no credentials), with extra headers.
func (s *site) do(t testing.TB, method, path string, who console.Credentials, form url.Values, headers map[string]string) answer {
	t.Helper()
	if form == nil {
		return s.send(t, method, path, who, "", nil, headers)
	}
	return s.send(t, method, path, who, "application/x-www-form-urlencoded", strings.NewReader(form.Encode()), headers)
}

// send sends one request with body (nil: none) of contentType ("": no
// Content-Type) as who, with extra headers.
func (s *site) send(t testing.TB, method, path string, who console.Credentials, contentType string, body io.Reader, headers map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, body)
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if who.User != "" {
		req.SetBasicAuth(who.User, who.Password)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{Status: resp.StatusCode, Body: string(b), Location: resp.Header.Get("Location"), Header: resp.Header}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// token reads the CSRF token from who's conflicts page.
func (s *site) token(t testing.TB, who console.Credentials) string {
	t.Helper()
	a := s.do(t, http.MethodGet, "/console/conflicts", who, nil, nil)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	m := csrfField.FindStringSubmatch(a.Body)
	require.NotNil(t, m, "no CSRF token on the conflicts page of %s", who.User)
	return m[1]
}

// resolve posts a resolution as a form of this site would.
func (s *site) resolve(t testing.TB, who console.Credentials, id int64, resolution, token string, headers map[string]string) answer {
	t.Helper()
	if headers == nil {
		headers = map[string]string{"Origin": s.URL}
	}
	return s.do(t, http.MethodPost, fmt.Sprintf("/console/conflicts/%d/resolve", id), who,
		url.Values{"csrf": {token}, "resolution": {resolution}}, headers)
}
