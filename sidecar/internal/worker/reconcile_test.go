package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/worker"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// listing is a gateway whose only answer is its list of payments, oldest
// first, as the contract says.
type listing struct {
	gateway.Gateway
	all []gateway.Payment
}

func (g *listing) Payments(_ context.Context, since time.Time, limit int) ([]gateway.Payment, error) {
	var out []gateway.Payment
	for _, p := range g.all {
		if !p.At.Before(since) && len(out) < limit {
			out = append(out, p)
		}
	}
	return out, nil
}

// oldWatermark returns a migrated database whose source gateway:list has a
// watermark 800 days old, and that watermark.
func oldWatermark(t *testing.T) (*pgxpool.Pool, time.Time) {
	t.Helper()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	sidecartest.Exec(t, db, `INSERT INTO ordertimeout.reconcile_watermarks (source, watermark, updated_at)
		VALUES ('gateway:list', now() - interval '800 days', now())`)
	var start time.Time
	require.NoError(t, db.QueryRow(context.Background(), "SELECT ordertimeout.reconcile_watermark('gateway:list')").Scan(&start))
	return db, start
}

// listJob is a first attempt of the reconciliation of gateway:list.
func listJob() *river.Job[worker.ReconcileArgs] {
	return &river.Job[worker.ReconcileArgs]{
		JobRow: &rivertype.JobRow{ID: 1, Kind: "ordertimeout_reconcile", Attempt: 1, MaxAttempts: 5, EncodedArgs: []byte(`{}`)},
		Args:   worker.ReconcileArgs{Source: "gateway:list"}}
}

// A watermark 800 days old is caught up a year per run, and each run
// reconciles only its year: the payments of [watermark - overlap, that
// year's end). Found by a review of the first catch-up: it read and applied
// everything up to the present while moving the watermark a year, so every
// later payment was reconciled, and each one that needs a person reported,
// two or three times.
func TestReconcileCatchUpReadsOnlyItsYear(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, start := oldWatermark(t)
	g := &listing{}
	for i := range 800 * 3 { // one payment every 8 hours, for orders unknown here
		g.all = append(g.all, gateway.Payment{PaymentID: fmt.Sprintf("P%d", i), OrderID: fmt.Sprintf("X%d", i),
			Amount: "1.00", Currency: "EUR", Status: gateway.PaymentPaid, At: start.Add(time.Duration(i)*8*time.Hour + time.Hour).UTC()})
	}
	reported := 0
	w := &worker.ReconcileWorker{Deps: &worker.Deps{Pool: db, Gateway: g, Logger: sidecartest.Logger(),
		Reconciled: func(string) { reported++ }}}
	job := listJob()

	watermark := start
	for run := 1; ; run++ {
		require.LessOrEqual(t, run, 3, "caught up in three runs")
		since := watermark.Add(-worker.DefaultReconcileOverlap)
		reported = 0
		require.NoError(t, w.Work(ctx, job), "run %d", run)
		require.NoError(t, db.QueryRow(ctx, "SELECT ordertimeout.reconcile_watermark('gateway:list')").Scan(&watermark))
		want := 0
		for _, p := range g.all {
			if !p.At.Before(since) && p.At.Before(watermark) {
				want++
			}
		}
		require.Equal(t, want, reported, "run %d reconciles the payments of [%s, %s) only", run, since, watermark)
		var behind time.Duration
		require.NoError(t, db.QueryRow(ctx, "SELECT now() - $1::timestamptz", watermark).Scan(&behind))
		if behind < time.Hour {
			break
		}
		require.Equal(t, 365*24*time.Hour, watermark.Sub(since), "run %d: a year", run)
	}
}

// A year of catching up that holds more than MaxRows payments is applied
// MaxRows at a time, each run ending its period at the last one applied.
// Found by a review: when the page that passed MaxRows was also the one that
// reached the year's end, the run sent every row read and was refused whole
// ("at most 100000 per call"), and every later run read the same pages:
// the source's reconciliation stopped for good.
func TestReconcileTakesAtMostMaxRowsAcrossTheEndOfItsYear(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, start := oldWatermark(t)
	since := start.Add(-worker.DefaultReconcileOverlap)
	const inYear = 100500 // the 100,001st is on the page that reaches the year's end
	step := 365 * 24 * time.Hour / (inYear + 1)
	g := &listing{}
	for i := range inYear + 2000 {
		g.all = append(g.all, gateway.Payment{PaymentID: fmt.Sprintf("P%d", i), OrderID: fmt.Sprintf("X%d", i),
			Amount: "1.00", Currency: "EUR", Status: gateway.PaymentPaid, At: since.Add(time.Duration(i+1) * step).UTC()})
	}
	w := &worker.ReconcileWorker{Deps: &worker.Deps{Pool: db, Gateway: g, Logger: sidecartest.Logger()}}
	job := listJob()

	require.NoError(t, w.Work(ctx, job), "run 1")
	var watermark time.Time
	require.NoError(t, db.QueryRow(ctx, "SELECT ordertimeout.reconcile_watermark('gateway:list')").Scan(&watermark))
	require.True(t, watermark.Equal(g.all[99999].At), "run 1 ends at the 100,000th payment: %s, not %s", watermark, g.all[99999].At)
	for run := 2; ; run++ {
		require.LessOrEqual(t, run, 4, "caught up")
		before := watermark
		require.NoError(t, w.Work(ctx, job), "run %d", run)
		require.NoError(t, db.QueryRow(ctx, "SELECT ordertimeout.reconcile_watermark('gateway:list')").Scan(&watermark))
		require.True(t, watermark.After(before), "run %d moves the watermark", run)
		var behind time.Duration
		require.NoError(t, db.QueryRow(ctx, "SELECT now() - $1::timestamptz", watermark).Scan(&behind))
		if behind < time.Hour {
			break
		}
	}
}

// More than MaxRows transactions inside the overlap (a day of overlap at 1.2
// payments a second) no longer hold the watermark where it is: the run that
// finds them all before the watermark reads from the watermark instead, and
// the payment after it is reconciled. Found by a review: every run applied
// the same 100,000 transactions of the overlap and ended its period there,
// the watermark never moved, and a lost callback after it was never found.
func TestReconcileOverlapOfMoreThanMaxRowsMovesOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	sidecartest.Exec(t, db, `INSERT INTO ordertimeout.reconcile_watermarks (source, watermark, updated_at)
		VALUES ('gateway:list', now() - interval '2 days', now())`)
	var mark time.Time
	require.NoError(t, db.QueryRow(ctx, "SELECT ordertimeout.reconcile_watermark('gateway:list')").Scan(&mark))
	const overlap = 24 * time.Hour
	const inOverlap = 100001
	step := overlap / (inOverlap + 1)
	g := &listing{}
	for i := range inOverlap {
		g.all = append(g.all, gateway.Payment{PaymentID: fmt.Sprintf("P%d", i), OrderID: fmt.Sprintf("X%d", i),
			Amount: "1.00", Currency: "EUR", Status: gateway.PaymentPaid, At: mark.Add(-overlap + time.Duration(i+1)*step).UTC()})
	}
	after := mark.Add(time.Minute).UTC()
	g.all = append(g.all, gateway.Payment{PaymentID: "P-after", OrderID: "X-after",
		Amount: "1.00", Currency: "EUR", Status: gateway.PaymentPaid, At: after})
	outcomes := map[string]int{}
	w := &worker.ReconcileWorker{Deps: &worker.Deps{Pool: db, Gateway: g, Logger: sidecartest.Logger(),
		ReconcileOverlap: overlap, Reconciled: func(o string) { outcomes[o]++ }}}

	require.NoError(t, w.Work(ctx, listJob()))
	var watermark time.Time
	require.NoError(t, db.QueryRow(ctx, "SELECT ordertimeout.reconcile_watermark('gateway:list')").Scan(&watermark))
	require.True(t, watermark.After(after), "the watermark moves past the payment after it: %s, was %s", watermark, mark)
	require.Equal(t, map[string]int{"unknown_order": 1}, outcomes, "the payment after the watermark is judged, the overlap's skipped this run")
}

// A watermark ahead of the database's clock (the clock stepped forward, a
// run moved the watermark there, the clock was set right) no longer stops
// reconciliation until the clock catches up: each run reads its overlap
// before now, and a lost callback made meanwhile is found. A review found
// the runs doing nothing, and the payments made before the clock reached
// the watermark less the overlap never read.
func TestReconcileWatermarkAheadOfTheClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	sidecartest.Exec(t, db, `INSERT INTO ordertimeout.reconcile_watermarks (source, watermark, updated_at)
		VALUES ('gateway:list', now() + interval '1 day', now())`)
	var now time.Time
	require.NoError(t, db.QueryRow(ctx, "SELECT now()").Scan(&now))
	g := &listing{all: []gateway.Payment{{PaymentID: "P-meanwhile", OrderID: "X-meanwhile",
		Amount: "1.00", Currency: "EUR", Status: gateway.PaymentPaid, At: now.Add(-30 * time.Second).UTC()}}}
	outcomes := map[string]int{}
	w := &worker.ReconcileWorker{Deps: &worker.Deps{Pool: db, Gateway: g, Logger: sidecartest.Logger(),
		Reconciled: func(o string) { outcomes[o]++ }}}
	require.NoError(t, w.Work(ctx, listJob()))
	require.Equal(t, map[string]int{"unknown_order": 1}, outcomes, "the payment made meanwhile is read")
}

// secondsListing lists from the whole second of since, as Stripe's
// created[gte] does.
type secondsListing struct{ listing }

func (g *secondsListing) Payments(ctx context.Context, since time.Time, limit int) ([]gateway.Payment, error) {
	return g.listing.Payments(ctx, since.Truncate(time.Second), limit)
}

// A gateway that lists from the whole second of since gives transactions of
// before the period; the run leaves them out (earlier runs read them)
// instead of sending them, which reconcile_payments refuses whole (OT171):
// a review found every run of a Stripe source failing so, the watermark
// stuck, after migration 000057.
func TestReconcileLeavesOutWhatIsListedBeforeItsPeriod(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	sidecartest.Exec(t, db, `INSERT INTO ordertimeout.reconcile_watermarks (source, watermark, updated_at)
		VALUES ('gateway:list', date_trunc('second', now() - interval '1 hour') + interval '0.5 seconds', now())`)
	var mark time.Time
	require.NoError(t, db.QueryRow(ctx, "SELECT ordertimeout.reconcile_watermark('gateway:list')").Scan(&mark))
	since := mark.Add(-worker.DefaultReconcileOverlap)
	g := &secondsListing{listing{all: []gateway.Payment{
		{PaymentID: "P-before", OrderID: "X-before", Amount: "1.00", Currency: "EUR", Status: gateway.PaymentPaid, At: since.Truncate(time.Second).UTC()},
		{PaymentID: "P-in", OrderID: "X-in", Amount: "1.00", Currency: "EUR", Status: gateway.PaymentPaid, At: mark.Add(time.Minute).Truncate(time.Second).UTC()},
	}}}
	outcomes := map[string]int{}
	w := &worker.ReconcileWorker{Deps: &worker.Deps{Pool: db, Gateway: g, Logger: sidecartest.Logger(),
		Reconciled: func(o string) { outcomes[o]++ }}}
	require.NoError(t, w.Work(ctx, listJob()))
	require.Equal(t, map[string]int{"unknown_order": 1}, outcomes, "only the transaction in the period is judged")
	var watermark time.Time
	require.NoError(t, db.QueryRow(ctx, "SELECT ordertimeout.reconcile_watermark('gateway:list')").Scan(&watermark))
	require.True(t, watermark.After(mark), "the watermark moves on")
}
