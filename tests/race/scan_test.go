package race_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

// scanSetup makes order o, one unit of SKU A, due a minute ago, with no full
// look of the sweep recorded (as after test.make_due).
func scanSetup(t *testing.T, ctx context.Context) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.NewPool(t)
	for _, sql := range []string{
		`SELECT ordertimeout.configure(grace => '0')`,
		`INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10)`,
		`SELECT ordertimeout.create_order('o', '[{"sku": "A", "qty": 1}]', interval '1 hour')`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	makeAllDue(ctx, t, pool)
	return pool
}

// makeAllDue makes every order and timer row due a minute ago, and forgets
// the sweep's last full look, as test.make_due does.
func makeAllDue(ctx context.Context, t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	for _, sql := range []string{
		`WITH d AS (SELECT clock_timestamp() - interval '1 minute' AS at)
		 UPDATE ordertimeout.orders SET created_at = d.at - interval '1 second', expire_at = d.at, cancel_at = d.at FROM d`,
		`UPDATE public.river_job SET scheduled_at = clock_timestamp() - interval '1 minute' WHERE queue = 'ordertimeout_expire'`,
		`UPDATE ordertimeout.scan_state SET scanned_at = NULL`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
}

// A full look of the sweep that had to leave an order due before its window
// (the last 2 seconds) to another transaction is not recorded: the next
// sweep, as soon as the holder commits, looks at every due row again and
// takes it. Recorded, it would look at the window only, and the order would
// wait for the next full look, a second later.
func TestSweepLooksAgainAfterDeferringAnOldOrder(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := scanSetup(t, ctx)

	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer holder.Rollback(ctx) //nolint:errcheck // a no-op after the commit
	_, err = holder.Exec(ctx, `SELECT 1 FROM ordertimeout.orders WHERE order_id = 'o' FOR NO KEY UPDATE`)
	require.NoError(t, err)

	var claimed, deferred int
	require.NoError(t, pool.QueryRow(ctx, `SELECT claimed, deferred FROM ordertimeout.sweep_due()`).Scan(&claimed, &deferred))
	require.Equal(t, 0, claimed)
	require.Equal(t, 1, deferred, "the order's row is held: the full look defers it")
	var recorded bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT scanned_at IS NOT NULL FROM ordertimeout.scan_state`).Scan(&recorded))
	require.False(t, recorded, "a full look that deferred an order due a minute ago is not recorded")

	require.NoError(t, holder.Commit(ctx))
	var cancelled int
	require.NoError(t, pool.QueryRow(ctx, `SELECT cancelled FROM ordertimeout.sweep_due()`).Scan(&cancelled))
	require.Equal(t, 1, cancelled, "the next sweep looks at every due row and cancels the order")
}

// plan_next_sweep never waits for a sweep: the sweep's record of its full look
// (scan_state) is held to its commit, and plan_next_sweep writes another table
// (sweep_state). A transaction left open after a sweep, in psql or a
// pg_cron job, must not stop every sidecar's planning.
func TestPlanSleepDoesNotWaitForAnOpenSweep(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := scanSetup(t, ctx)

	open, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer open.Rollback(ctx) //nolint:errcheck // the transaction is left open on purpose
	var cancelled int
	require.NoError(t, open.QueryRow(ctx, `SELECT cancelled FROM ordertimeout.sweep_due()`).Scan(&cancelled))
	require.Equal(t, 1, cancelled)
	var held bool
	require.NoError(t, pool.QueryRow(ctx,
		`SELECT count(*) = 0 FROM (SELECT 1 FROM ordertimeout.scan_state FOR NO KEY UPDATE SKIP LOCKED) AS s`).Scan(&held))
	require.True(t, held, "the open sweep holds its record of the full look")

	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET lock_timeout = '500ms'`)
	require.NoError(t, err)
	var wake bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT p.wake_at IS NOT NULL FROM ordertimeout.plan_next_sweep(interval '1 second') AS p`).Scan(&wake),
		"plan_next_sweep must not wait for the open sweep's lock")
	require.True(t, wake)
	// A second sweep neither waits: its record is skipped.
	var claimed int
	require.NoError(t, conn.QueryRow(ctx, `SELECT claimed FROM ordertimeout.sweep_due()`).Scan(&claimed))
	require.Zero(t, claimed)
	_, err = conn.Exec(ctx, `RESET lock_timeout`)
	require.NoError(t, err)
}

// After a crash scan_state is empty (it is unlogged), and the first sweep to
// record a full look inserts its row. The others used to insert too, and an
// insert that meets an uncommitted row waits for its transaction, SKIP
// LOCKED or not: a sweep left open in a transaction then stopped every
// other sweep, which held its batch's stock rows while it waited. Only the
// sweep holding the advisory lock (28532, 2) inserts; the others are not
// recorded.
func TestSweepDoesNotWaitForAnOpenSweepsFirstRecord(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := scanSetup(t, ctx)
	_, err := pool.Exec(ctx, `DELETE FROM ordertimeout.scan_state`)
	require.NoError(t, err, "as after a crash")

	open, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer open.Rollback(ctx) //nolint:errcheck // the transaction is left open on purpose
	var cancelled int
	require.NoError(t, open.QueryRow(ctx, `SELECT cancelled FROM ordertimeout.sweep_due()`).Scan(&cancelled))
	require.Equal(t, 1, cancelled)
	var inserted bool
	require.NoError(t, open.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM ordertimeout.scan_state)`).Scan(&inserted))
	require.True(t, inserted, "the open sweep inserted the record of its full look")

	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET lock_timeout = '500ms'`)
	require.NoError(t, err)
	var claimed int
	require.NoError(t, conn.QueryRow(ctx, `SELECT claimed FROM ordertimeout.sweep_due()`).Scan(&claimed),
		"a second sweep must not wait for the open sweep's insert")
	require.Zero(t, claimed)
	_, err = conn.Exec(ctx, `RESET lock_timeout`)
	require.NoError(t, err)

	require.NoError(t, open.Commit(ctx))
	var recorded bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) = 1 FROM ordertimeout.scan_state`).Scan(&recorded))
	require.True(t, recorded, "one record, the open sweep's")
}
