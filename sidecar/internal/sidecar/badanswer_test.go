package sidecar_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/metricstest"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
)

// scriptedGateway is a real HTTP server speaking the gateway contract whose
// answer to each order is set by the test, byte for byte.
type scriptedGateway struct {
	mu      sync.Mutex
	answers map[string]string // "GET <id>" or "POST <id>/close" → body
	served  map[string]int
}

func newScriptedGateway(t *testing.T) (*scriptedGateway, string) {
	t.Helper()
	g := &scriptedGateway{answers: map[string]string{}, served: map[string]int{}}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return g, srv.URL
}

func (g *scriptedGateway) set(key, body string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.answers[key] = body
}

func (g *scriptedGateway) count(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.served[key]
}

func (g *scriptedGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Method + " " + strings.TrimPrefix(r.URL.Path, "/v1/orders/")
	g.mu.Lock()
	body, ok := g.answers[key]
	g.served[key]++
	g.mu.Unlock()
	if !ok {
		body = `{"status": "none"}`
		if r.Method == http.MethodPost {
			body = `{"status": "closed"}`
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(body))
}

// A bad gateway answer changes nothing, whatever it seems to say: the job
// snoozes with a growing pause (no attempt used, no error recorded, never
// discarded), an error line names the order and the problem, and
// ordertimeout_gateway_bad_answers_total counts it. Once the gateway answers
// properly, the job finishes. That holds for a duplicate key (which once made
// {"status":"failed","status":"paid"} a payment), an amount PostgreSQL would
// refuse ("0x1p3", which once pinned the order awaiting its check forever),
// "paid" without an amount for an order that has one (the sidecar never
// confirms such an order without the gateway's amount), and "paid" by a
// payment id of another order, which confirm_payment refuses with OT124
// (once retried with River's backoff and logged at INFO only, uncounted).
func TestBadGatewayAnswersChangeNothing(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	gw, gwURL := newScriptedGateway(t)
	logs := &sidecarproc.Buffer{}
	cfg := sidecartest.Config(pgtest.URL(t, db), gwURL, "s1")
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))

	const paid = `"status": "paid", "payment_id": "%s-pay"`
	answers := map[string]struct{ body, problem string }{
		"dup":      {`{"status": "failed", "status": "paid", "payment_id": "dup-pay", "amount": "10"}`, `answer has key \"status\" twice`},
		"hex":      {`{` + strings.ReplaceAll(paid, "%s", "hex") + `, "amount": "0x1p3"}`, "amount must be a non-negative plain decimal"},
		"noamount": {`{` + strings.ReplaceAll(paid, "%s", "noamount") + `}`, "gives no amount, and the order's amount is 10"},
		"other":    {`{"status": "paid", "payment_id": "owned-elsewhere", "amount": "10"}`, "belongs to another order"},
	}
	// The payment id of answer "other" is an attempt of another order.
	sidecartest.CreateOrder(t, db, "owner", time.Hour, `{"amount": 10}`)
	sidecartest.Exec(t, db, "SELECT ordertimeout.begin_payment('owner', 'owned-elsewhere')")
	// Each answer meets a precancel check (a due PENDING order), a payment
	// check (a PAYING order past its window) and a gateway close (an order
	// cancelled after a payment attempt).
	sidecartest.Exec(t, db, "SELECT ordertimeout.configure(precheck => 'always')")
	for name, a := range answers {
		sidecartest.CreateOrder(t, db, "pre-"+name, 200*time.Millisecond, `{"amount": 10}`)
		gw.set("GET pre-"+name, strings.ReplaceAll(a.body, name+"-pay", "pre-"+name+"-pay"))
		sidecartest.CreateOrder(t, db, "pay-"+name, time.Hour, `{"amount": 10}`)
		sidecartest.Exec(t, db, "SELECT ordertimeout.begin_payment($1, $2, interval '200 milliseconds')", "pay-"+name, "pay-"+name+"-pay")
		gw.set("GET pay-"+name, strings.ReplaceAll(a.body, name+"-pay", "pay-"+name+"-pay"))
		sidecartest.CreateOrder(t, db, "close-"+name, time.Hour, `{"amount": 10, "precheck": "never"}`)
		sidecartest.Exec(t, db, "SELECT ordertimeout.begin_payment($1, $2)", "close-"+name, "close-"+name+"-first")
		sidecartest.Exec(t, db, "SELECT ordertimeout.fail_payment($1, $2)", "close-"+name, "close-"+name+"-first")
		gw.set("POST close-"+name+"/close", strings.ReplaceAll(a.body, name+"-pay", "close-"+name+"-pay"))
	}
	s, _ := sidecartest.Start(t, cfg)
	for name := range answers {
		sidecartest.Exec(t, db, "SELECT ordertimeout.cancel_order($1)", "close-"+name)
	}

	jobs := map[string]string{"pre": "ordertimeout_precancel_check", "pay": "ordertimeout_payment_check", "close": "ordertimeout_gateway_close"}
	for name := range answers {
		for prefix, kind := range jobs {
			id := prefix + "-" + name
			sidecartest.Eventually(t, 30*time.Second, id+": its job snoozed twice on the bad answer", func() (bool, error) {
				return sidecartest.Int(t, db, `SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'order_id' = $2
				   AND coalesce((metadata->>'snoozes')::int, 0) >= 2`, kind, id) == 1, nil
			})
		}
	}
	for name, a := range answers {
		for prefix, kind := range jobs {
			id := prefix + "-" + name
			var state string
			var attempt, errs int
			require.NoError(t, db.QueryRow(bg, `SELECT state::text, attempt, coalesce(array_length(errors, 1), 0)
			   FROM river_job WHERE kind = $1 AND args->>'order_id' = $2`, kind, id).Scan(&state, &attempt, &errs))
			require.Contains(t, []string{"available", "scheduled", "running"}, state, id)
			require.LessOrEqual(t, attempt, 1, "%s: a snooze uses up no attempt", id)
			require.Zero(t, errs, "%s: a snooze records no error", id)
			require.Contains(t, logs.String(), "order_id="+id+" ", "%s: the log names the order", id)
			require.Regexp(t, `level=ERROR msg="gateway gave a bad answer: nothing changed, asking again later" sidecar=s1 kind=`+kind+` job_id=\d+ order_id=`+id+` .*`+regexp.QuoteMeta(a.problem), logs.String())
			require.Positive(t, gw.count(map[string]string{"pre": "GET ", "pay": "GET ", "close": "POST "}[prefix]+id+map[string]string{"close": "/close"}[prefix]))
		}
		require.Equal(t, "PENDING", sidecartest.Status(t, db, "pre-"+name))
		require.Equal(t, "PAYING", sidecartest.Status(t, db, "pay-"+name))
		require.Equal(t, "CANCELLED", sidecartest.Status(t, db, "close-"+name))
	}
	require.Zero(t, sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.payments WHERE status = 'confirmed'"))
	require.Zero(t, sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.conflicts"))
	for _, kind := range jobs {
		require.GreaterOrEqual(t, sidecartest.Metric(t, s.Registry(), "ordertimeout_gateway_bad_answers_total", "kind", kind), 6.0, kind)
	}
	_, found, err := metricstest.Sum(s.Registry(), "ordertimeout_conflicts_resolved_total", "outcome", "bad_answer")
	require.NoError(t, err)
	require.False(t, found, "a bad answer resolves no conflict")

	// The gateway answers properly: every job finishes.
	for name := range answers {
		good := func(id string) string {
			return `{"status": "paid", "payment_id": "` + id + `-pay", "amount": "10.00"}`
		}
		gw.set("GET pre-"+name, good("pre-"+name))
		gw.set("GET pay-"+name, good("pay-"+name))
		gw.set("POST close-"+name+"/close", good("close-"+name))
	}
	for name := range answers {
		sidecartest.WaitStatus(t, db, "pre-"+name, "PAID", 30*time.Second)
		sidecartest.WaitStatus(t, db, "pay-"+name, "PAID", 30*time.Second)
		sidecartest.Eventually(t, 30*time.Second, "the close's late payment", func() (bool, error) {
			return sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.conflicts WHERE order_id = $1", "close-"+name) == 1, nil
		})
	}
	require.Zero(t, sidecartest.Int(t, db, "SELECT count(*) FROM river_job WHERE state = 'discarded'"))
}

// A gateway that says an order is paid by a payment recorded here with
// other money (a callback said 9.99 for an order of 10, a conflict; the
// gateway now says 10) contradicts what is recorded: confirm_payment refuses
// it (OT157), and the sidecar takes it as a bad answer, not as the conflict
// the payment stands as: nothing changes, an error line names the order and
// both amounts, the metric counts it, the job asks again later. Once the
// gateway names another payment of the right amount, the order is paid.
func TestGatewayAnswerOfOtherMoneyForAKnownPaymentIsABadAnswer(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	gw, gwURL := newScriptedGateway(t)
	logs := &sidecarproc.Buffer{}
	cfg := sidecartest.Config(pgtest.URL(t, db), gwURL, "s1")
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))

	sidecartest.Exec(t, db, "SELECT ordertimeout.configure(precheck => 'always')")
	sidecartest.CreateOrder(t, db, "om", 200*time.Millisecond, `{"amount": 10, "currency": "EUR"}`)
	var answer string
	require.NoError(t, db.QueryRow(bg, "SELECT ordertimeout.confirm_payment('om', 'om-pay', 9.99, 'EUR')").Scan(&answer))
	require.Equal(t, "conflict", answer)
	gw.set("GET om", `{"status": "paid", "payment_id": "om-pay", "amount": "10.00", "currency": "EUR"}`)
	s, _ := sidecartest.Start(t, cfg)

	const kind = "ordertimeout_precancel_check"
	sidecartest.Eventually(t, 30*time.Second, "the check snoozed twice on the answer", func() (bool, error) {
		return sidecartest.Int(t, db, `SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'order_id' = 'om'
		   AND coalesce((metadata->>'snoozes')::int, 0) >= 2`, kind) == 1, nil
	})
	require.Regexp(t, `level=ERROR msg="gateway gave a bad answer: nothing changed, asking again later" sidecar=s1 kind=`+kind+
		` job_id=\d+ order_id=om .*is a conflict here, of 9.99 EUR; this confirmation says 10.00 EUR`, logs.String())
	require.GreaterOrEqual(t, sidecartest.Metric(t, s.Registry(), "ordertimeout_gateway_bad_answers_total", "kind", kind), 2.0)
	require.Equal(t, "PENDING", sidecartest.Status(t, db, "om"))
	require.EqualValues(t, 1, sidecartest.Int(t, db, `SELECT count(*) FROM ordertimeout.conflicts
	   WHERE payment_id = 'om-pay' AND kind = 'amount_mismatch' AND amount = 9.99 AND resolution IS NULL`), "the conflict as recorded")

	gw.set("GET om", `{"status": "paid", "payment_id": "om-pay-2", "amount": "10.00", "currency": "EUR"}`)
	sidecartest.WaitStatus(t, db, "om", "PAID", 30*time.Second)
}

// A gateway's transaction time whose zone offset PostgreSQL refuses
// ("+16:00": Go's parser takes up to 24:00, PostgreSQL up to 15:59) is a bad
// answer of the continuous reconciliation: an error line names it, the
// metric counts it, nothing is applied, and the run asks again later. It once
// reached reconcile_payments, which failed with a raw 22009 that River
// retried as a database error. The largest offset PostgreSQL takes, -15:59,
// is reconciled.
func TestContinuousReconcileRefusesZoneOffsetsPostgresRefuses(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	sidecartest.CreateOrder(t, db, "Z1", time.Hour, `{"amount": 10, "currency": "EUR"}`)
	gw, gwURL := newScriptedGateway(t)
	list := func(at time.Time, offset time.Duration) string {
		return `{"payments": [{"payment_id": "P-Z1", "order_id": "Z1", "amount": "10.00", "currency": "EUR", "status": "paid", "at": "` +
			at.In(time.FixedZone("", int(offset.Seconds()))).Format(time.RFC3339Nano) + `"}], "has_more": false}`
	}
	paidAt := time.Now()
	gw.set("GET /v1/payments", list(paidAt, 16*time.Hour))
	logs := &sidecarproc.Buffer{}
	cfg := sidecartest.Config(pgtest.URL(t, db), gwURL, "s1")
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.ReconcileEvery = 300 * time.Millisecond
	s, _ := sidecartest.Start(t, cfg)

	const kind = "ordertimeout_reconcile"
	sidecartest.Eventually(t, 30*time.Second, "two bad answers counted", func() (bool, error) {
		return sidecartest.Metric(t, s.Registry(), "ordertimeout_gateway_bad_answers_total", "kind", kind) >= 2, nil
	})
	require.Regexp(t, `level=ERROR msg="gateway gave a bad answer: nothing changed, asking again later" sidecar=s1 kind=`+kind+
		` .*zone offset must be from -15:59 to \+15:59 \(what PostgreSQL accepts\), got \+16:00`, logs.String())
	// PostgreSQL's error for the offset (22009) never reached the log. Its
	// SQLSTATE as the error names it: a bare "22009" also matches a snooze
	// of "2.099422009s".
	require.NotContains(t, logs.String(), "SQLSTATE 22009")
	require.Zero(t, sidecartest.Metric(t, s.Registry(), "ordertimeout_jobs_total", "kind", kind, "outcome", "error"))
	require.Equal(t, "PENDING", sidecartest.Status(t, db, "Z1"))
	require.Zero(t, sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.reconcile_watermarks"))

	gw.set("GET /v1/payments", list(paidAt, -(15*time.Hour+59*time.Minute)))
	sidecartest.WaitStatus(t, db, "Z1", "PAID", 30*time.Second)
	require.EqualValues(t, 1, sidecartest.Int(t, db, `SELECT count(*) FROM ordertimeout.events
		WHERE order_id = 'Z1' AND to_status = 'PAID' AND cause = 'reconcile'`))
}
