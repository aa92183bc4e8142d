package restart

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/migrations"
	"github.com/ordertimeout/ordertimeout/sidecar/invariant"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
	"github.com/ordertimeout/ordertimeout/tests/internal/dbstate"
	"github.com/ordertimeout/ordertimeout/tests/internal/pgcluster"
)

// stockTotal is the one SKU's stock: more than the test can sell.
const stockTotal = 1_000_000_000

// retryable reports whether err comes from the server going away or coming
// back (the connection was cut, refused, or the server is starting or
// shutting down), after which the same call may be sent again.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case sqlstate.ClassConnectionException, sqlstate.ClassOperatorIntervention: // admin shutdown, crash shutdown, cannot connect now
			return true
		}
		return false
	}
	var netErr *net.OpError
	var connectErr *pgconn.ConnectError
	return errors.As(err, &netErr) || errors.As(err, &connectErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err) ||
		strings.Contains(err.Error(), "conn closed")
}

// load is what the workers were told: acknowledged creates and payments.
type load struct {
	mu        sync.Mutex
	created   []string          // orders whose create_order call returned
	confirmed map[string]string // order -> the answer confirm_payment returned
	retries   atomic.Int64
	seen      map[string]bool // the kinds of errors retried, for the log
	swept     atomic.Int64    // cancels acknowledged by sweep_due
	failure   error           // the first error that is not the server's absence
}

func (l *load) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failure == nil {
		l.failure = err
	}
}

// call runs fn until it succeeds, fails with an error that is not the
// server's absence, or ctx ends; it reports whether fn succeeded.
func (l *load) call(ctx context.Context, what string, fn func() error) bool {
	for ctx.Err() == nil {
		err := fn()
		if err == nil {
			return true
		}
		if !retryable(err) {
			if ctx.Err() == nil {
				l.fail(fmt.Errorf("%s: %w", what, err))
			}
			return false
		}
		l.retries.Add(1)
		l.mu.Lock()
		l.seen[pgcluster.ErrorKind(err)] = true
		l.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	return false
}

// create makes orders one after another, each retried with the same id and
// content until acknowledged (create_order is idempotent), and pays some.
func (l *load) create(ctx context.Context, pool *pgxpool.Pool, worker int) {
	r := rand.New(rand.NewPCG(uint64(worker), uint64(time.Now().UnixNano())))
	for i := 0; ctx.Err() == nil; i++ {
		id := fmt.Sprintf("restart-%d-%06d", worker, i)
		timeout := time.Duration(100+r.IntN(700)) * time.Millisecond
		items := fmt.Sprintf(`[{"sku": "R", "qty": %d}]`, 1+r.IntN(3))
		if !l.call(ctx, "create_order "+id, func() error {
			_, err := pool.Exec(ctx, `SELECT ordertimeout.create_order($1, $2::jsonb, $3)`, id, items, timeout)
			return err
		}) {
			return
		}
		l.mu.Lock()
		l.created = append(l.created, id)
		l.mu.Unlock()

		if r.IntN(3) == 0 {
			// Pay an order created a little earlier: around its deadline.
			l.mu.Lock()
			target := l.created[max(0, len(l.created)-1-r.IntN(20))]
			l.mu.Unlock()
			var answer string
			if !l.call(ctx, "confirm_payment "+target, func() error {
				return pool.QueryRow(ctx, `SELECT ordertimeout.confirm_payment($1, $2)`, target, "pay-"+target).Scan(&answer)
			}) {
				return
			}
			l.mu.Lock()
			l.confirmed[target] = answer
			l.mu.Unlock()
		}
	}
}

// sweep runs sweep_due until ctx ends.
func (l *load) sweep(ctx context.Context, pool *pgxpool.Pool) {
	for ctx.Err() == nil {
		var claimed, cancelled int64
		if !l.call(ctx, "sweep_due", func() error {
			return pool.QueryRow(ctx, `SELECT claimed, cancelled FROM ordertimeout.sweep_due(200)`).Scan(&claimed, &cancelled)
		}) {
			return
		}
		l.swept.Add(cancelled)
		if claimed == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// TestRestartUnderLoad restarts PostgreSQL twice (fast, then immediate)
// while two sessions create and pay orders and two sweep them. The sessions
// carry on by themselves once the server is back; after a drain, every
// acknowledged order exists, every order is PAID or CANCELLED, an
// acknowledged payment stuck, no order was cancelled or released twice, and
// the invariants hold.
func TestRestartUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts PostgreSQL: not in -short mode")
	}
	srv := pgcluster.New(t, pgcluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, migrations.Up(srv.URL()))

	config, err := pgxpool.ParseConfig(srv.URL())
	require.NoError(t, err)
	config.MaxConns = 8
	config.HealthCheckPeriod = 200 * time.Millisecond
	pool, err := pgxpool.NewWithConfig(ctx, config)
	require.NoError(t, err)
	defer pool.Close()
	_, err = pool.Exec(ctx, `
SELECT ordertimeout.configure(grace => interval '0', precheck => 'never');
SELECT ordertimeout.put_stock('R', `+fmt.Sprint(stockTotal)+`);`)
	require.NoError(t, err)

	l := &load{confirmed: make(map[string]string), seen: make(map[string]bool)}
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() { l.create(loadCtx, pool, w) })
		wg.Go(func() { l.sweep(loadCtx, pool) })
	}

	// progress waits until the workers acknowledged more orders.
	progress := func(what string) {
		l.mu.Lock()
		from := len(l.created)
		l.mu.Unlock()
		deadline := time.Now().Add(20 * time.Second)
		for {
			l.mu.Lock()
			n := len(l.created)
			l.mu.Unlock()
			if n >= from+50 {
				t.Logf("%s: %d orders acknowledged", what, n)
				return
			}
			require.NoError(t, l.failure)
			require.True(t, time.Now().Before(deadline), "%s: no progress for 20 s (%d orders acknowledged)", what, n)
			time.Sleep(20 * time.Millisecond)
		}
	}
	progress("before the restarts")
	for _, mode := range []pgcluster.Mode{pgcluster.Fast, pgcluster.Immediate} {
		start := time.Now()
		require.NoError(t, srv.Restart(ctx, mode))
		t.Logf("restart -m %s took %v", mode, time.Since(start).Round(time.Millisecond))
		progress("after restart -m " + string(mode))
	}
	progress("carrying on")
	stopLoad()
	wg.Wait()
	require.NoError(t, l.failure)
	t.Logf("%d orders acknowledged, %d payments, %d calls retried, %d cancels acknowledged by the sweepers",
		len(l.created), len(l.confirmed), l.retries.Load(), l.swept.Load())
	require.Positive(t, l.retries.Load(), "the restarts never interrupted a call")
	t.Logf("errors retried: %v", slices.Sorted(maps.Keys(l.seen)))

	// Drain: once every deadline has passed, sweep until nothing is due.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var claimed, live int
		require.NoError(t, pool.QueryRow(ctx, `SELECT claimed FROM ordertimeout.sweep_due(1000)`).Scan(&claimed))
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM ordertimeout.orders WHERE status IN ('PENDING', 'PAYING')`).Scan(&live))
		if claimed == 0 && live == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "%d orders still live after 30 s of draining", live)
		if claimed == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}

	report, err := invariant.Check(ctx, pool, invariant.Options{StockTotals: map[string]int64{"R": stockTotal}, Slack: time.Millisecond})
	require.NoError(t, err)
	require.True(t, report.OK(), "invariants after the restarts:\n%s", report)

	state, err := dbstate.Load(ctx, pool)
	require.NoError(t, err)
	require.Empty(t, state.Violations(dbstate.Expect{}))

	// Nothing lost: every acknowledged order exists and ended PAID or
	// CANCELLED; an acknowledged payment stuck.
	var lost []string
	for _, id := range l.created {
		o, ok := state.Orders[id]
		switch {
		case !ok:
			lost = append(lost, id+" (missing)")
		case o.Status != "PAID" && o.Status != "CANCELLED":
			lost = append(lost, id+" ("+o.Status+")")
		}
	}
	require.Empty(t, lost, "acknowledged orders lost or left unfinished")
	for id, answer := range l.confirmed {
		o := state.Orders[id]
		switch answer {
		case "paid":
			require.Equal(t, "PAID", o.Status, "order %s: confirm_payment answered paid", id)
		case "conflict":
			require.Equal(t, "CANCELLED", o.Status, "order %s: confirm_payment answered conflict", id)
		default:
			t.Fatalf("order %s: confirm_payment answered %q", id, answer)
		}
	}
	// Nothing done twice: each cancel has one event; the sweepers' answers
	// never exceed what the log shows (an answer lost in a restart is not
	// counted by them).
	timeouts := 0
	for _, e := range state.Events {
		if e.To == "CANCELLED" && (e.Cause == "timeout" || e.Cause == "sweep") {
			timeouts++
		}
	}
	require.LessOrEqual(t, l.swept.Load(), int64(timeouts))
}
