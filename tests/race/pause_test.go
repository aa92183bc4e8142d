package race_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

// A pause of timeout cancels (configure(paused => true)) and the cancels
// under way are ordered: a cancel either commits before the pause returns,
// or rolls back (OT137) and leaves its timer. These tests build each
// interleaving with row locks held by a third transaction.

// pauseSetup makes orders p1, p2 and p3, each of its own SKU (a sweep holds
// the stock rows it gives back until it commits), all due a minute ago.
func pauseSetup(ctx context.Context, t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.NewPool(t)
	for _, sql := range []string{
		`SELECT ordertimeout.configure(grace => '0')`,
		`SELECT ordertimeout.put_stock('B1', 100), ordertimeout.put_stock('B2', 100), ordertimeout.put_stock('B3', 100)`,
		`SELECT ordertimeout.create_order('p1', '[{"sku":"B1","qty":1}]', interval '1 hour')`,
		`SELECT ordertimeout.create_order('p2', '[{"sku":"B2","qty":1}]', interval '1 hour')`,
		`SELECT ordertimeout.create_order('p3', '[{"sku":"B3","qty":1}]', interval '1 hour')`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	makeAllDue(ctx, t, pool)
	return pool
}

// noticeConn connects with the server's warnings collected, each as its
// SQLSTATE, ": " and its message.
type noticeConn struct {
	*pgx.Conn
	mu       sync.Mutex
	warnings []string
}

func connectWithNotices(ctx context.Context, t *testing.T, url string) *noticeConn {
	t.Helper()
	c := &noticeConn{}
	cc, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	cc.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if n.SeverityUnlocalized == "WARNING" {
			c.mu.Lock()
			c.warnings = append(c.warnings, n.Code+": "+n.Message)
			c.mu.Unlock()
		}
	}
	c.Conn, err = pgx.ConnectConfig(ctx, cc)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func (c *noticeConn) Warnings() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.warnings...)
}

func backendPID(ctx context.Context, t *testing.T, c *pgx.Conn) int {
	t.Helper()
	var pid int
	require.NoError(t, c.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	return pid
}

const waitsForALock = `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock')`

// pauseAsync starts configure(paused => true) on c; its error comes on the
// channel.
func pauseAsync(ctx context.Context, c *noticeConn) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, `SELECT ordertimeout.configure(paused => true)`)
		done <- err
	}()
	return done
}

// waitUntilQueued returns once the backend pid waits for a lock; it fails
// the test if done delivers first (the call returned without waiting).
func waitUntilQueued(ctx context.Context, t *testing.T, db querier, pid int, done <-chan error, what string) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var waiting bool
		require.NoError(t, db.QueryRow(ctx, waitsForALock, pid).Scan(&waiting))
		if waiting {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("%s returned (error %v) instead of waiting", what, err)
		case <-ctx.Done():
			t.Fatalf("%s neither returned nor waited: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// A sweep of a full batch reads the settings, then waits for an order row
// that a payment holds. The pause comes and returns; then the holder
// commits. The sweep's cancels came after the pause: they roll back (OT137)
// and every order keeps its timer for after the resume. Before, the sweep
// committed its batch as timeouts, after the pause had returned.
func TestPauseRollsBackASweepThatWaitedThroughIt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pauseSetup(ctx, t)
	url := pgtest.URL(t, pool)
	holder, sweeper := connect(ctx, t, url), connect(ctx, t, url)
	pauser := connectWithNotices(ctx, t, url)
	sweeperPID := backendPID(ctx, t, sweeper)

	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after the commit
	_, err = tx.Exec(ctx, `SELECT 1 FROM ordertimeout.orders WHERE order_id = 'p2' FOR NO KEY UPDATE`)
	require.NoError(t, err)

	swept := make(chan error, 1)
	go func() {
		_, err := sweeper.Exec(ctx, `SELECT * FROM ordertimeout.sweep_due(2)`)
		swept <- err
	}()
	waitUntilQueued(ctx, t, pool, sweeperPID, swept, "the full batch's sweep")

	require.NoError(t, <-pauseAsync(ctx, pauser), "nothing holds the pause: the sweep has not reached its cancels' end")
	require.Empty(t, pauser.Warnings())
	require.NoError(t, tx.Commit(ctx))

	err = <-swept
	require.Truef(t, sqlstate.Is(err, sqlstate.Paused), "the sweep that waited through the pause: OT137, got %v", err)
	for _, id := range []string{"p1", "p2", "p3"} {
		require.Equal(t, "PENDING", status(ctx, t, pool, id), id)
	}
	require.Equal(t, 3, queryInt(ctx, t, pool, `SELECT count(*)::int FROM public.river_job WHERE queue = 'ordertimeout_expire'`),
		"the timers stay")

	_, err = pool.Exec(ctx, `SELECT ordertimeout.configure(paused => false)`)
	require.NoError(t, err)
	require.Equal(t, 3, queryInt(ctx, t, pool, `SELECT cancelled FROM ordertimeout.sweep_due()`), "cancelled after the resume")
}

// A gateway check's cancel_checked waits for the order row a payment holds;
// a pause comes and returns; the holder lets go without paying. The cancel
// came after the pause: OT137, and the order stays PENDING.
func TestPauseRollsBackAGatewayCheckThatWaitedThroughIt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pauseSetup(ctx, t)
	url := pgtest.URL(t, pool)
	holder, checker := connect(ctx, t, url), connect(ctx, t, url)
	pauser := connectWithNotices(ctx, t, url)
	checkerPID := backendPID(ctx, t, checker)
	version := queryInt(ctx, t, pool, `SELECT deadline_version FROM ordertimeout.orders WHERE order_id = 'p1'`)

	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // the rollback is the test's
	_, err = tx.Exec(ctx, `SELECT 1 FROM ordertimeout.orders WHERE order_id = 'p1' FOR NO KEY UPDATE`)
	require.NoError(t, err)

	checked := make(chan error, 1)
	go func() {
		_, err := checker.Exec(ctx, `SELECT ordertimeout.cancel_checked('p1', $1)`, version)
		checked <- err
	}()
	waitUntilQueued(ctx, t, pool, checkerPID, checked, "cancel_checked")
	require.NoError(t, <-pauseAsync(ctx, pauser))
	require.NoError(t, tx.Rollback(ctx))

	err = <-checked
	require.Truef(t, sqlstate.Is(err, sqlstate.Paused), "the check that waited through the pause: OT137, got %v", err)
	require.Equal(t, "PENDING", status(ctx, t, pool, "p1"))
}

// A sweep has cancelled and not committed yet when the pause comes: the
// pause waits for its commit, so that no cancel commits after it returns.
func TestPauseWaitsForCancelsUnderWay(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pauseSetup(ctx, t)
	url := pgtest.URL(t, pool)
	sweeper := connect(ctx, t, url)
	pauser := connectWithNotices(ctx, t, url)
	pauserPID := backendPID(ctx, t, pauser.Conn)

	tx, err := sweeper.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after the commit
	var cancelled int
	require.NoError(t, tx.QueryRow(ctx, `SELECT cancelled FROM ordertimeout.sweep_due()`).Scan(&cancelled))
	require.Equal(t, 3, cancelled)

	paused := pauseAsync(ctx, pauser)
	waitUntilQueued(ctx, t, pool, pauserPID, paused, "configure(paused => true), with cancels uncommitted,")
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-paused)
	require.Empty(t, pauser.Warnings(), "the cancels committed within the pause's wait")
	for _, id := range []string{"p1", "p2", "p3"} {
		require.Equal(t, "CANCELLED", status(ctx, t, pool, id), id)
	}
}

// A sweep left open in a transaction after its cancels holds the pause for
// at most 2 seconds: then the pause returns with a warning naming its
// backend. Meanwhile another sweep does not queue behind the waiting pause:
// it claims nothing, at once. A pause asked again while the open sweep's
// cancels are still uncommitted waits and warns again; once they have
// committed, it returns without a warning.
func TestPauseWarnsOfASweepLeftOpenAndHoldsNoOneElse(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pauseSetup(ctx, t)
	url := pgtest.URL(t, pool)
	open, second := connect(ctx, t, url), connect(ctx, t, url)
	pauser := connectWithNotices(ctx, t, url)
	openPID, pauserPID := backendPID(ctx, t, open), backendPID(ctx, t, pauser.Conn)

	tx, err := open.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after the commit
	var cancelled int
	require.NoError(t, tx.QueryRow(ctx, `SELECT cancelled FROM ordertimeout.sweep_due(1)`).Scan(&cancelled))
	require.Equal(t, 1, cancelled)

	start := time.Now()
	paused := pauseAsync(ctx, pauser)
	waitUntilQueued(ctx, t, pool, pauserPID, paused, "configure(paused => true), with a sweep left open,")

	sctx, scancel := context.WithTimeout(ctx, time.Second)
	var claimed int
	err = second.QueryRow(sctx, `SELECT claimed FROM ordertimeout.sweep_due()`).Scan(&claimed)
	scancel()
	require.NoError(t, err, "a sweep while the pause waits returns at once")
	require.Zero(t, claimed, "a pause is pending")

	require.NoError(t, <-paused)
	require.GreaterOrEqual(t, time.Since(start), 2*time.Second, "the pause waited its 2 seconds")
	warnings := pauser.Warnings()
	require.Len(t, warnings, 1)
	require.Contains(t, warnings[0], "not committed after 2s")
	require.Contains(t, warnings[0], "(backend pid "+strconv.Itoa(openPID)+")")
	require.True(t, strings.HasPrefix(warnings[0], sqlstate.PauseNotFenced+": "), "the warning's own SQLSTATE: %s", warnings[0])

	require.NoError(t, <-pauseAsync(ctx, pauser))
	require.Len(t, pauser.Warnings(), 2, "asked again, the pause warns again: the cancels are still uncommitted")
	require.Contains(t, pauser.Warnings()[1], "(backend pid "+strconv.Itoa(openPID)+")")

	require.Zero(t, queryInt(ctx, t, pool, `SELECT claimed FROM ordertimeout.sweep_due()`), "paused")
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, 1, queryInt(ctx, t, pool, `SELECT count(*)::int FROM ordertimeout.orders WHERE status = 'CANCELLED'`),
		"the open sweep's cancel is kept when it commits, as the warning says")
	require.Equal(t, 2, queryInt(ctx, t, pool, `SELECT count(*)::int FROM ordertimeout.orders WHERE status = 'PENDING'`))
	require.NoError(t, <-pauseAsync(ctx, pauser))
	require.Len(t, pauser.Warnings(), 2, "once they have committed, a pause asked again does not warn")
}

// A pause that warned and is not committed yet (its transaction is still
// open) already stops every timeout cancel: a gateway check whose cancel
// comes to the fence rolls back (OT137), a sweep claims nothing, and
// plan_next_sweep plans a sleep of a second (not max_sleep: a pause that rolls
// back sends no wake-up). Before, the cancels of that window passed the
// fence and committed.
func TestAPauseNotCommittedYetStopsCancels(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pauseSetup(ctx, t)
	url := pgtest.URL(t, pool)
	open, other := connect(ctx, t, url), connect(ctx, t, url)
	pauser := connectWithNotices(ctx, t, url)
	version := queryInt(ctx, t, pool, `SELECT deadline_version FROM ordertimeout.orders WHERE order_id = 'p2'`)

	tx, err := open.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // the test's end
	require.Equal(t, 1, queryInt(ctx, t, tx, `SELECT cancelled FROM ordertimeout.sweep_due(1)`))

	ptx, err := pauser.Begin(ctx)
	require.NoError(t, err)
	defer ptx.Rollback(ctx) //nolint:errcheck // committed below
	_, err = ptx.Exec(ctx, `SELECT ordertimeout.configure(paused => true)`)
	require.NoError(t, err)
	require.Len(t, pauser.Warnings(), 1, "the open sweep held the pause 2 seconds")

	_, err = other.Exec(ctx, `SELECT ordertimeout.cancel_checked('p2', $1)`, version)
	require.Truef(t, sqlstate.Is(err, sqlstate.Paused), "a gateway check's cancel while the pause is uncommitted: OT137, got %v", err)
	require.Zero(t, queryInt(ctx, t, other, `SELECT claimed FROM ordertimeout.sweep_due()`))
	var sleep time.Duration
	require.NoError(t, other.QueryRow(ctx,
		`SELECT p.wake_at - clock_timestamp() FROM ordertimeout.plan_next_sweep(interval '1 minute') AS p`).Scan(&sleep))
	require.Greater(t, sleep, 500*time.Millisecond, "a long sleep while a pause is pending")
	require.LessOrEqual(t, sleep, time.Second, "a second at most: a pause that rolls back sends no wake-up")

	require.NoError(t, ptx.Commit(ctx))
	require.NoError(t, tx.Rollback(ctx))
	for _, id := range []string{"p1", "p2", "p3"} {
		require.Equal(t, "PENDING", status(ctx, t, pool, id), id)
	}
}

// Under a statement_timeout shorter than its 2 seconds, a pause held up by
// a sweep left open waits half of it, then warns: the pause itself is not
// lost to the timeout.
func TestPauseUnderAShortStatementTimeout(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pauseSetup(ctx, t)
	url := pgtest.URL(t, pool)
	open := connect(ctx, t, url)
	pauser := connectWithNotices(ctx, t, url)

	tx, err := open.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // the test's end
	require.Equal(t, 1, queryInt(ctx, t, tx, `SELECT cancelled FROM ordertimeout.sweep_due(1)`))

	_, err = pauser.Exec(ctx, `SET statement_timeout = '1s'`)
	require.NoError(t, err)
	_, err = pauser.Exec(ctx, `SELECT ordertimeout.configure(paused => true)`)
	require.NoError(t, err)
	require.Len(t, pauser.Warnings(), 1)
	require.Contains(t, pauser.Warnings()[0], "not committed after 500ms")
	require.Equal(t, 1, queryInt(ctx, t, pool, `SELECT count(*)::int FROM ordertimeout.settings WHERE paused`))
}

// Under REPEATABLE READ or SERIALIZABLE a snapshot taken before a pause
// would not show it: the functions that cancel timeouts refuse (OT154) and
// write nothing.
func TestTimeoutCancelsRefuseAnOlderSnapshot(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pauseSetup(ctx, t)
	version := queryInt(ctx, t, pool, `SELECT deadline_version FROM ordertimeout.orders WHERE order_id = 'p1'`)
	for _, iso := range []pgx.TxIsoLevel{pgx.RepeatableRead, pgx.Serializable} {
		// READ UNCOMMITTED is READ COMMITTED in PostgreSQL: taken (below).
		for _, call := range []struct {
			sql  string
			args []any
		}{
			{`SELECT * FROM ordertimeout.sweep_due()`, nil},
			{`SELECT ordertimeout.cancel_due()`, nil},
			{`SELECT ordertimeout.cancel_checked('p1', $1)`, []any{version}},
		} {
			err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: iso}, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, call.sql, call.args...)
				return err
			})
			require.Truef(t, sqlstate.Is(err, sqlstate.NotReadCommitted), "%s under %s: OT154, got %v", call.sql, iso, err)
		}
	}
	require.Equal(t, 3, queryInt(ctx, t, pool, `SELECT count(*)::int FROM ordertimeout.orders WHERE status = 'PENDING'`))
	var cancelled int
	require.NoError(t, pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.ReadUncommitted}, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT cancelled FROM ordertimeout.sweep_due()`).Scan(&cancelled)
	}))
	require.Equal(t, 3, cancelled, "READ UNCOMMITTED, which is READ COMMITTED, sweeps")
}

// Both of the pause's waits share its 2 seconds: with (28532, 4) held by a
// session that kept it and a sweep left open holding (28532, 3), the pause
// returns after about 2 seconds, not 4, and names both backends.
func TestPauseWaitsTwoSecondsInAll(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pauseSetup(ctx, t)
	url := pgtest.URL(t, pool)
	keeper, open := connect(ctx, t, url), connect(ctx, t, url)
	pauser := connectWithNotices(ctx, t, url)
	keeperPID, openPID := backendPID(ctx, t, keeper), backendPID(ctx, t, open)

	_, err := keeper.Exec(ctx, `SELECT pg_advisory_lock_shared(28532, 4)`)
	require.NoError(t, err)
	tx, err := open.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // the test's end
	require.Equal(t, 1, queryInt(ctx, t, tx, `SELECT cancelled FROM ordertimeout.sweep_due(1)`))

	start := time.Now()
	_, err = pauser.Exec(ctx, `SELECT ordertimeout.configure(paused => true)`)
	took := time.Since(start)
	require.NoError(t, err)
	require.Less(t, took, 3*time.Second, "one budget of 2 seconds for both waits")
	warnings := pauser.Warnings()
	require.Len(t, warnings, 2)
	require.Contains(t, warnings[0], "advisory lock (28532, 4) is held by backend pid "+strconv.Itoa(keeperPID))
	require.True(t, strings.HasPrefix(warnings[0], sqlstate.PauseNotFenced+": "), "the warning's own SQLSTATE: %s", warnings[0])
	require.Contains(t, warnings[1], "(backend pid "+strconv.Itoa(openPID)+")")
}
