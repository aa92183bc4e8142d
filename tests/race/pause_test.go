package race_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

// TestPauseWaitsForTheSweepUnderWay: configure(paused => true) returned at
// once, while a sweep that had read the settings before it was still under
// way; that sweep's cancels then committed after the pause, as timeouts. A
// full batch (a backlog) waits for the order rows other transactions hold,
// so "under way" can be long. The pause now waits for it: when the pause
// returns, the sweep has committed, and a sweep after it cancels nothing.
//
// The interleaving is built: a transaction holds order p2's row; a sweep of
// a full batch (p1, p2) waits for it; the pause is asked; the holder commits.
func TestPauseWaitsForTheSweepUnderWay(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pgtest.NewPool(t)
	url := pgtest.URL(t, pool)
	for _, sql := range []string{
		`SELECT ordertimeout.configure(grace => '0')`,
		`SELECT ordertimeout.put_stock('B', 100)`,
		`SELECT ordertimeout.create_order('p1', '[{"sku":"B","qty":1}]', interval '1 hour')`,
		`SELECT ordertimeout.create_order('p2', '[{"sku":"B","qty":1}]', interval '1 hour')`,
		`SELECT ordertimeout.create_order('p3', '[{"sku":"B","qty":1}]', interval '1 hour')`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	makeAllDue(ctx, t, pool)
	holder, sweeper, pauser := connect(ctx, t, url), connect(ctx, t, url), connect(ctx, t, url)
	var sweeperPID, pauserPID int
	require.NoError(t, sweeper.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&sweeperPID))
	require.NoError(t, pauser.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pauserPID))
	waiting := `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock')`

	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM ordertimeout.orders WHERE order_id = 'p2' FOR NO KEY UPDATE`)
	require.NoError(t, err)

	type sweep struct {
		cancelled int
		err       error
	}
	swept := make(chan sweep, 1)
	go func() {
		var s sweep
		s.err = sweeper.QueryRow(ctx, `SELECT cancelled FROM ordertimeout.sweep_due(2)`).Scan(&s.cancelled)
		swept <- s
	}()
	require.NoError(t, waitFor(ctx, pool, waiting, sweeperPID), "the full batch waits for p2's row")

	paused := make(chan error, 1)
	go func() {
		_, err := pauser.Exec(ctx, `SELECT ordertimeout.configure(paused => true)`)
		paused <- err
	}()
	// The holder still holds p2, so the sweep cannot have committed: a pause
	// that returns now returned under it.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for queued := false; !queued; {
		var err error
		queued, err = waitingNow(ctx, pool, pauserPID)
		require.NoError(t, err)
		select {
		case err := <-paused:
			require.NoError(t, err)
			t.Fatal("configure(paused => true) returned while a sweep that read the settings before it was under way")
		case <-ctx.Done():
			t.Fatal("the pause neither returned nor waited")
		case <-tick.C:
		}
	}
	require.NoError(t, tx.Commit(ctx))

	require.NoError(t, <-paused)
	var cancelled int
	require.NoError(t, pool.QueryRow(ctx,
		`SELECT count(*)::int FROM ordertimeout.orders WHERE order_id IN ('p1', 'p2') AND status = 'CANCELLED'`).Scan(&cancelled))
	require.Equal(t, 2, cancelled, "when the pause returns, the sweep under way has committed its batch")
	s := <-swept
	require.NoError(t, s.err)
	require.Equal(t, 2, s.cancelled)
	var claimed int
	require.NoError(t, pool.QueryRow(ctx, `SELECT claimed FROM ordertimeout.sweep_due()`).Scan(&claimed))
	require.Zero(t, claimed, "paused: p3 stays")
	require.Equal(t, "PENDING", status(ctx, t, pool, "p3"))
}

// waitingNow says whether the backend pid waits for a lock right now.
func waitingNow(ctx context.Context, db querier, pid int) (bool, error) {
	var waiting bool
	err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock')`,
		pid).Scan(&waiting)
	return waiting, err
}
