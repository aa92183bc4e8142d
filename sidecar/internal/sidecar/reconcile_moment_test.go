package sidecar_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
)

// listingGateway is a real HTTP server that lists its payments on
// GET /v1/payments exactly as the contract says (at or after since, oldest
// first by at then payment_id, at most limit, has_more), answers every
// order query "none" and every close "closed".
type listingGateway struct {
	mu       sync.Mutex
	payments []gateway.Payment
}

func newListingGateway(t *testing.T, ps []gateway.Payment) string {
	t.Helper()
	g := &listingGateway{payments: slices.Clone(ps)}
	slices.SortFunc(g.payments, func(a, b gateway.Payment) int {
		return cmp.Or(a.At.Compare(b.At), strings.Compare(a.PaymentID, b.PaymentID))
	})
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return srv.URL
}

func (g *listingGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path != "/v1/payments" {
		if r.Method == http.MethodPost {
			fmt.Fprint(w, `{"status": "closed"}`)
		} else {
			fmt.Fprint(w, `{"status": "none"}`)
		}
		return
	}
	since, err := time.Parse(time.RFC3339Nano, r.URL.Query().Get("since"))
	limit, err2 := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || err2 != nil {
		http.Error(w, "bad since or limit", http.StatusBadRequest)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	page := []gateway.Payment{}
	more := false
	for _, p := range g.payments {
		if p.At.Before(since) {
			continue
		}
		if len(page) == limit {
			more = true
			break
		}
		page = append(page, p)
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"payments": page, "has_more": more})
}

// More transactions at one moment than a page holds (1,000: Stripe's times
// are whole seconds, and so may a gateway's be) cannot be paged past, since
// the contract's cursor is a time. The reconcile job once stopped reading at
// the full page that brought nothing new and still moved the watermark to
// the start of the run: the rest of that moment, and everything after it up
// to the run, was skipped for good, here a lost callback on a live order
// that stayed PENDING. It is a bad answer now (the contract says so): an
// error line, the metric, nothing applied and the watermark left where it
// was, so the records are read once the gateway can list them.
func TestContinuousReconcileNeverSkipsPastAFullMoment(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	sidecartest.CreateOrder(t, db, "L1", time.Hour, `{"amount": 10, "currency": "EUR"}`)
	sidecartest.CreateOrder(t, db, "L2", time.Hour, `{"amount": 10, "currency": "EUR"}`)

	moment := time.Now().Add(-10 * time.Minute).Truncate(time.Second).UTC()
	var ps []gateway.Payment
	for i := range 1000 {
		ps = append(ps, gateway.Payment{PaymentID: fmt.Sprintf("P-%04d", i), OrderID: fmt.Sprintf("U%04d", i),
			Amount: "1.00", Currency: "EUR", Status: gateway.PaymentPaid, At: moment})
	}
	// The 1,001st at that moment, and one a second later: lost callbacks.
	ps = append(ps,
		gateway.Payment{PaymentID: "P-L1", OrderID: "L1", Amount: "10.00", Currency: "EUR", Status: gateway.PaymentPaid, At: moment},
		gateway.Payment{PaymentID: "P-L2", OrderID: "L2", Amount: "10.00", Currency: "EUR", Status: gateway.PaymentPaid, At: moment.Add(time.Second)})
	gwURL := newListingGateway(t, ps)

	logs := &sidecarproc.Buffer{}
	cfg := sidecartest.Config(pgtest.URL(t, db), gwURL, "m1")
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.ReconcileEvery = 300 * time.Millisecond
	cfg.ReconcileSource = "gateway:moment"
	s, _ := sidecartest.Start(t, cfg)

	const kind = "ordertimeout_reconcile"
	sidecartest.Eventually(t, 30*time.Second, "a run to end", func() (bool, error) {
		return sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.reconcile_watermarks") > 0 ||
			sidecartest.Metric(t, s.Registry(), "ordertimeout_gateway_bad_answers_total", "kind", kind) >= 2, nil
	})
	var wm *time.Time
	require.NoError(t, db.QueryRow(bg, "SELECT ordertimeout.reconcile_watermark('gateway:moment')").Scan(&wm))
	if wm != nil {
		require.Equal(t, "PAID", sidecartest.Status(t, db, "L1"), "the watermark moved to %s past a lost callback it never read", wm)
		require.Equal(t, "PAID", sidecartest.Status(t, db, "L2"), "the watermark moved to %s past a lost callback it never read", wm)
	}
	require.Regexp(t, `level=ERROR msg="gateway gave a bad answer: nothing changed, asking again later" sidecar=m1 kind=`+kind+
		` .*more than 1000 transactions at `+moment.Format(time.RFC3339), logs.String())
	require.Zero(t, sidecartest.Int(t, db, "SELECT count(*) FROM ordertimeout.events WHERE cause = 'reconcile'"), "nothing applied")
}
