package cron_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/invariant"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/timer"
)

// stock is the units of each of the SKUs A and B.
const stock = 1_000_000

// setup gives a fresh database stock, no grace and no gateway checks (the
// no-sidecar configuration), and returns it.
func setup(t *testing.T, ctx context.Context) *pgxpool.Pool {
	t.Helper()
	db := pgtest.NewPool(t)
	_, err := db.Exec(ctx, fmt.Sprintf(`SELECT ordertimeout.put_stock('A', %d);
		SELECT ordertimeout.put_stock('B', %d);
		SELECT ordertimeout.configure(grace => interval '0', precheck => 'never')`, stock, stock))
	require.NoError(t, err)
	return db
}

// createDue creates n orders of two items, due from first to last after now
// (database clock), evenly spread.
func createDue(t *testing.T, ctx context.Context, db *pgxpool.Pool, prefix string, n int, first, last time.Duration) {
	t.Helper()
	_, err := db.Exec(ctx, `
		SELECT ordertimeout.create_order($1 || g, '[{"sku":"A","qty":1},{"sku":"B","qty":2}]',
		       $2::bigint * interval '1 microsecond' + (g * ($3::bigint - $2::bigint) / $4::bigint) * interval '1 microsecond')
		FROM generate_series(0, $4::bigint - 1) AS g`,
		prefix, first.Microseconds(), last.Microseconds(), n)
	require.NoError(t, err)
}

// runResult is what one CALL of run_sweeper did, by the database's clock.
type runResult struct {
	took    time.Duration
	standby bool // it said another run was sweeping, and stood by
	err     error
}

// callSweeper connects, tells ready, and runs CALL
// ordertimeout.run_sweeper(...) once start is closed.
func callSweeper(ctx context.Context, url, args string, ready chan<- struct{}, start <-chan struct{}) runResult {
	config, err := pgx.ParseConfig(url)
	if err != nil {
		return runResult{err: err}
	}
	var mu sync.Mutex
	var notices []string
	config.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		notices = append(notices, n.Message)
	}
	conn, err := pgx.ConnectConfig(ctx, config)
	if err != nil {
		return runResult{err: err}
	}
	defer conn.Close(ctx)
	ready <- struct{}{}
	<-start
	var began, ended time.Time
	if err := conn.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&began); err != nil {
		return runResult{err: err}
	}
	if _, err := conn.Exec(ctx, "CALL ordertimeout.run_sweeper("+args+")"); err != nil {
		return runResult{err: fmt.Errorf("call run_sweeper: %w", err)}
	}
	if err := conn.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&ended); err != nil {
		return runResult{err: err}
	}
	mu.Lock()
	defer mu.Unlock()
	r := runResult{took: ended.Sub(began)}
	for _, n := range notices {
		r.standby = r.standby || strings.Contains(n, "another run_sweeper is sweeping this database; this one stands by")
	}
	return r
}

// checkCancelledOnce asserts that every order named prefix% is CANCELLED by
// its timeout, with one CANCELLED event and its two items released once,
// within lag of cancel_at unless lag is 0, and that the invariants hold.
func checkCancelledOnce(t *testing.T, ctx context.Context, db *pgxpool.Pool, prefix string, n int, lag time.Duration) {
	t.Helper()
	var cancelled, events, releases int
	var worst float64
	require.NoError(t, db.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE o.status = 'CANCELLED' AND o.cancel_cause = 'timeout'),
		       (SELECT count(*) FROM ordertimeout.events AS e WHERE e.order_id LIKE $1 || '%' AND e.to_status = 'CANCELLED'),
		       (SELECT count(*) FROM ordertimeout.releases AS r WHERE r.order_id LIKE $1 || '%'),
		       coalesce(max(extract(epoch FROM o.cancelled_at - o.cancel_at)), 0)::float8
		FROM ordertimeout.orders AS o
		WHERE o.order_id LIKE $1 || '%'`, prefix).Scan(&cancelled, &events, &releases, &worst))
	require.Equal(t, n, cancelled, "every order cancelled by its timeout")
	require.Equal(t, n, events, "one CANCELLED event per order")
	require.Equal(t, 2*n, releases, "each of the two items released once")
	if lag > 0 {
		require.Less(t, worst, lag.Seconds(), "cancelled within %s of cancel_at", lag)
	}
	report, err := invariant.Check(ctx, db, invariant.Options{StockTotals: map[string]int64{"A": stock, "B": stock}})
	require.NoError(t, err)
	require.True(t, report.OK(), report.String())
	t.Logf("%d orders cancelled once, worst lag %.0f ms", n, worst*1000)
}

// TestRunSweeperOverlap: two runs of run_sweeper start at once (pg_cron
// never overlaps runs of one job, but a second schedule or a manual CALL
// can), one for 2 s, one for 4 s. One sweeps while the other stands by, and
// the one left takes over when the other ends; each runs for its whole
// duration; every order due meanwhile, also after the shorter run ended, is
// cancelled exactly once, in time.
func TestRunSweeperOverlap(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := setup(t, ctx)
	url := pgtest.URL(t, db)
	const n = 300

	durations := []time.Duration{2 * time.Second, 4 * time.Second}
	ready, start := make(chan struct{}, len(durations)), make(chan struct{})
	results := make([]runResult, len(durations))
	var wg sync.WaitGroup
	for i, d := range durations {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = callSweeper(ctx, url, fmt.Sprintf("duration => %d * interval '1 millisecond'", d.Milliseconds()), ready, start)
		}()
	}
	for range durations {
		<-ready
	}
	// Due from 1 s to 3.5 s after their creation: after both runs have
	// started, and after the shorter one has ended.
	createDue(t, ctx, db, "o-", n, time.Second, 3500*time.Millisecond)
	close(start)
	wg.Wait()

	standby := 0
	for i, r := range results {
		require.NoError(t, r.err, "run %d", i)
		require.GreaterOrEqual(t, r.took, durations[i], "run %d ran for its whole duration", i)
		require.Less(t, r.took, durations[i]+time.Second, "run %d stopped when its duration was over", i)
		if r.standby {
			standby++
		}
	}
	require.GreaterOrEqual(t, standby, 1, "a run stood by while the other swept: %+v", results)
	checkCancelledOnce(t, ctx, db, "o-", n, maxLag)
}

// TestRunSweeperDrainsBacklog: with more due than one batch, run_sweeper
// sweeps again at once instead of sleeping, and drains the backlog.
func TestRunSweeperDrainsBacklog(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := setup(t, ctx)
	const n = 3000
	createDue(t, ctx, db, "b-", n, time.Second, time.Second)
	_, err := db.Exec(ctx, `UPDATE ordertimeout.orders SET cancel_at = cancel_at - interval '2 seconds',
	                                                          expire_at = expire_at - interval '2 seconds',
	                                                          created_at = created_at - interval '2 seconds'`)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE public.river_job SET scheduled_at = scheduled_at - interval '2 seconds'
	                        WHERE queue = $1`, timer.Name)
	require.NoError(t, err)
	r := callSweeper(ctx, pgtest.URL(t, db), "max => 200, duration => interval '3 seconds'",
		make(chan struct{}, 1), closed())
	require.NoError(t, r.err)
	require.False(t, r.standby)
	var pending int
	require.NoError(t, db.QueryRow(ctx, "SELECT count(*) FROM ordertimeout.orders WHERE status = 'PENDING'").Scan(&pending))
	require.Zero(t, pending, "drained in batches of 200 within the run")
	checkCancelledOnce(t, ctx, db, "b-", n, 0)
}

// closed returns a closed channel.
func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// TestRunSweeperWaitsOnHeldTimer: a due timer that another session holds
// cannot be claimed; run_sweeper then tries it again after pauses that double
// up to max_sleep instead of spinning on it (about 12 sweeps in a second, not
// hundreds).
func TestRunSweeperWaitsOnHeldTimer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := setup(t, ctx)
	url := pgtest.URL(t, db)
	createDue(t, ctx, db, "held-", 1, time.Millisecond, time.Millisecond)

	hold(t, ctx, url, fmt.Sprintf(`SELECT 1 FROM public.river_job WHERE queue = '%s' FOR UPDATE`, timer.Name))
	waitDue(t, ctx, db)

	calls := countSweeps(t, ctx, db, "duration => interval '1 second'")
	t.Logf("%d sweeps in 1 s with the due timer held elsewhere", calls)
	require.LessOrEqual(t, calls, int64(30), "pauses that double up to max_sleep (100 ms) between sweeps that can claim nothing, not a spin")
	require.Equal(t, "PENDING", status(t, ctx, db, "held-0"), "the held timer was not taken")
}

// hold takes, in a transaction of a session of its own, the one row that
// lock (a SELECT ... FOR UPDATE) locks, as a transaction left open would,
// and returns the transaction (rolled back when the test ends) and the
// moment it took the lock (database clock).
func hold(t *testing.T, ctx context.Context, url, lock string) (pgx.Tx, time.Time) {
	t.Helper()
	holder, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Close(context.Background()) })
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	var locked int
	var at time.Time
	require.NoError(t, tx.QueryRow(ctx, `WITH l AS (`+lock+`) SELECT count(*), clock_timestamp() FROM l`).Scan(&locked, &at))
	require.Equal(t, 1, locked, "%s locks one row", lock)
	return tx, at
}

// status returns an order's status.
func status(t *testing.T, ctx context.Context, db *pgxpool.Pool, orderID string) string {
	t.Helper()
	var s string
	require.NoError(t, db.QueryRow(ctx, "SELECT status FROM ordertimeout.orders WHERE order_id = $1", orderID).Scan(&s))
	return s
}

// TestRunSweeperTriesAHeldOrderSoonAfterItIsLetGo: a due order whose stock
// row another transaction holds is deferred by each sweep. run_sweeper sweeps
// again after pauses that double from 1 ms (at most max_sleep, here a
// minute), so it neither spins on the order while it is held nor leaves it
// for max_sleep once it is let go: it is cancelled within about as long as
// it was held (here, within the measured hold plus half a second). Before
// migration 000052 the run swept twice more, after 1 ms and 2 ms, then waited
// max_sleep, and the order stayed PENDING until the run ended.
func TestRunSweeperTriesAHeldOrderSoonAfterItIsLetGo(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := setup(t, ctx)
	url := pgtest.URL(t, db)
	createDue(t, ctx, db, "deferred-", 1, time.Millisecond, time.Millisecond)
	waitDue(t, ctx, db)

	tx, heldAt := hold(t, ctx, url, `SELECT 1 FROM ordertimeout.stock WHERE sku = 'A' FOR NO KEY UPDATE`)

	run := startCounted(t, ctx, db, "max_sleep => interval '1 minute', duration => interval '4 seconds'")
	// The run has swept (it sleeps only after a sweep) and the order has been
	// held for 300 ms.
	waitFor(t, ctx, 5*time.Second, "the run to sleep after a sweep, 300 ms into the hold", func() (bool, error) {
		var ok bool
		err := db.QueryRow(ctx, `SELECT clock_timestamp() >= $1::timestamptz + interval '300 milliseconds'
		                           AND EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $2 AND wait_event = 'PgSleep')`,
			heldAt, run.pid).Scan(&ok)
		return ok, err
	})
	require.Equal(t, "PENDING", status(t, ctx, db, "deferred-0"), "the order whose stock is held was not cancelled")
	var letGo time.Time
	require.NoError(t, tx.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&letGo))
	require.NoError(t, tx.Commit(ctx))
	hold := letGo.Sub(heldAt)

	waitFor(t, ctx, 10*time.Second, "the order to be cancelled", func() (bool, error) {
		return status(t, ctx, db, "deferred-0") == "CANCELLED", nil
	})
	var cancelledAt time.Time
	require.NoError(t, db.QueryRow(ctx, "SELECT cancelled_at FROM ordertimeout.orders WHERE order_id = 'deferred-0'").Scan(&cancelledAt))
	after := cancelledAt.Sub(letGo)
	calls := run.wait(t)
	t.Logf("held %s; cancelled %s after it was let go; %d sweeps in the 4 s run", hold, after, calls)
	require.Less(t, after, hold+500*time.Millisecond, "cancelled within about as long as it was held, not after max_sleep")
	require.LessOrEqual(t, calls, int64(60), "pauses that double while the order is held, not a spin")
}

// TestRunSweeperSweepsOtherOrdersOnTimeWhileOneIsHeld: while a due order's
// row is held for long (a payment's transaction left open), an order that
// comes due later is cancelled at its moment, not max_sleep (here a minute)
// after the sweep that passed the held one over, as before migration 000052.
func TestRunSweeperSweepsOtherOrdersOnTimeWhileOneIsHeld(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := setup(t, ctx)
	url := pgtest.URL(t, db)
	createDue(t, ctx, db, "held-", 1, time.Millisecond, time.Millisecond)
	waitDue(t, ctx, db)

	hold(t, ctx, url, `SELECT 1 FROM ordertimeout.orders WHERE order_id = 'held-0' FOR UPDATE`)
	createDue(t, ctx, db, "later-", 3, 500*time.Millisecond, 900*time.Millisecond)

	run := startCounted(t, ctx, db, "max_sleep => interval '1 minute', duration => interval '1500 milliseconds'")
	// When the CALL began, by the database's clock: on a busy box it can
	// begin after the later orders are due, and its first sweep then owes
	// them nothing earlier.
	var began *time.Time
	waitFor(t, ctx, 5*time.Second, "the run to begin", func() (bool, error) {
		err := db.QueryRow(ctx, `SELECT max(query_start) FROM pg_stat_activity
		                         WHERE pid = $1 AND query LIKE 'CALL ordertimeout.run_sweeper%'`, run.pid).Scan(&began)
		return began != nil, err
	})
	calls := run.wait(t)
	t.Logf("%d sweeps in the 1.5 s run", calls)
	require.Equal(t, "PENDING", status(t, ctx, db, "held-0"), "the held order was not cancelled")
	checkCancelledOnce(t, ctx, db, "later-", 3, 0)
	var worst float64
	require.NoError(t, db.QueryRow(ctx, `SELECT max(extract(epoch FROM cancelled_at - greatest(cancel_at, $1)))::float8
		FROM ordertimeout.orders WHERE order_id LIKE 'later-%'`, *began).Scan(&worst))
	t.Logf("worst lag %.0f ms after cancel_at or the run's start, whichever came last", worst*1000)
	require.Less(t, worst, 0.25, "cancelled within 250 ms of cancel_at (or of the run's start, when it began after)")
	require.LessOrEqual(t, calls, int64(40), "pauses that double while the order is held, not a spin")
}

// TestRunSweeperPlansAfterTheClockStepsBack: when the database's clock steps
// back between run_sweeper's reading of it and plan_next_sweep's, the plan
// refuses held_due_by as ahead of the clock (OT156). The run then plans
// without it, as the sidecar does, and goes on sweeping; before migration
// 000054 the CALL ended with OT156, rolling back the sweep it had just made,
// and nothing swept until pg_cron's next minute. The step
// is simulated: in this test's own database, plan_next_sweep is wrapped to
// raise OT156 whenever it is given held_due_by.
func TestRunSweeperPlansAfterTheClockStepsBack(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := setup(t, ctx)
	_, err := db.Exec(ctx, `
		DO $$ BEGIN
		    EXECUTE replace(pg_get_functiondef('ordertimeout.plan_next_sweep(interval, timestamptz, interval)'::regprocedure),
		                    'plan_next_sweep', 'plan_next_sweep_unwrapped');
		END $$;
		CREATE OR REPLACE FUNCTION ordertimeout.plan_next_sweep(max_sleep interval, held_due_by timestamptz DEFAULT NULL,
		                                             retry_held_in interval DEFAULT NULL)
		RETURNS TABLE (wake_at timestamptz, held boolean) LANGUAGE plpgsql AS $$
		BEGIN
		    IF held_due_by IS NOT NULL THEN
		        RAISE EXCEPTION 'held_due_by must not be later than the database''s clock (a simulated step back)'
		            USING ERRCODE = 'OT156';
		    END IF;
		    RETURN QUERY SELECT * FROM ordertimeout.plan_next_sweep_unwrapped(max_sleep);
		END $$`)
	require.NoError(t, err)
	createDue(t, ctx, db, "stepped-", 20, 100*time.Millisecond, time.Second)

	// Every order cancelled within the run is what the old CALL failed
	// (it ended at the first plan); the lag bound is loose, for a loaded
	// machine: a CI run saw 532 ms against a bound of 500 ms.
	calls := countSweeps(t, ctx, db, "duration => interval '2500 milliseconds'")
	t.Logf("%d sweeps; every plan given held_due_by refused it", calls)
	checkCancelledOnce(t, ctx, db, "stepped-", 20, time.Second)
}

// waitDue waits until the earliest timer row is due (database clock).
func waitDue(t *testing.T, ctx context.Context, db *pgxpool.Pool) {
	t.Helper()
	waitFor(t, ctx, 5*time.Second, "the timer to be due", func() (bool, error) {
		var due bool
		err := db.QueryRow(ctx, "SELECT ordertimeout.next_due() <= clock_timestamp()").Scan(&due)
		return due, err
	})
}

// countSweeps runs CALL ordertimeout.run_sweeper(args) on a session of its
// own and returns how many sweep_due calls the run made.
func countSweeps(t *testing.T, ctx context.Context, db *pgxpool.Pool, args string) int64 {
	t.Helper()
	return startCounted(t, ctx, db, args).wait(t)
}

// flushedSweeps returns how many sweep_due calls conn's session made, once
// it has flushed them to pg_stat_user_functions (track_functions on).
func flushedSweeps(t *testing.T, ctx context.Context, conn *pgx.Conn, db *pgxpool.Pool) int64 {
	t.Helper()
	_, err := conn.Exec(ctx, "SELECT pg_stat_force_next_flush()")
	require.NoError(t, err)
	var calls int64
	waitFor(t, ctx, 10*time.Second, "the sweeps to show in pg_stat_user_functions", func() (bool, error) {
		_, err := conn.Exec(ctx, "SELECT 1") // an idle moment after it flushes the session's counts
		if err != nil {
			return false, err
		}
		err = db.QueryRow(ctx, `SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions
		                         WHERE schemaname = 'ordertimeout' AND funcname = 'sweep_due'`).Scan(&calls)
		return calls > 0, err
	})
	return calls
}

// countedRun is a CALL of run_sweeper under way on a session of its own
// (startCounted).
type countedRun struct {
	ctx  context.Context
	conn *pgx.Conn
	db   *pgxpool.Pool
	pid  uint32 // the run's backend
	done chan error
}

// startCounted starts CALL ordertimeout.run_sweeper(args) on a session of
// its own (so that its sweep_due calls are the only ones it counts), closed
// when the test ends, and returns at once; wait returns how many sweep_due
// calls the run made.
func startCounted(t *testing.T, ctx context.Context, db *pgxpool.Pool, args string) *countedRun {
	t.Helper()
	conn, err := pgx.Connect(ctx, pgtest.URL(t, db))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, "SET track_functions = 'pl'")
	require.NoError(t, err)
	r := &countedRun{ctx: ctx, conn: conn, db: db, pid: conn.PgConn().PID(), done: make(chan error, 1)}
	go func() {
		_, err := conn.Exec(ctx, "CALL ordertimeout.run_sweeper("+args+")")
		r.done <- err
	}()
	return r
}

// wait waits for the run to end and returns how many sweeps it made.
func (r *countedRun) wait(t *testing.T) int64 {
	t.Helper()
	select {
	case err := <-r.done:
		require.NoError(t, err, "CALL run_sweeper")
	case <-r.ctx.Done():
		t.Fatalf("run_sweeper did not end: %v", r.ctx.Err())
	}
	return flushedSweeps(t, r.ctx, r.conn, r.db)
}

// TestRunSweeperUnderARepeatableReadDefault: run_sweeper sweeps in READ
// COMMITTED whatever the database's default_transaction_isolation; under
// REPEATABLE READ sweep_due would refuse every sweep (OT154, it would not see
// a pause) and the run would fail.
func TestRunSweeperUnderARepeatableReadDefault(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := setup(t, ctx)
	_, err := db.Exec(ctx, `DO $$ BEGIN
		EXECUTE format('ALTER DATABASE %I SET default_transaction_isolation = %L', current_database(), 'repeatable read');
	END $$`)
	require.NoError(t, err)
	const n = 20
	createDue(t, ctx, db, "rr-", n, 100*time.Millisecond, 300*time.Millisecond)
	r := callSweeper(ctx, pgtest.URL(t, db), "duration => interval '1 second'", make(chan struct{}, 1), closed())
	require.NoError(t, r.err)
	checkCancelledOnce(t, ctx, db, "rr-", n, 0)
}

// TestRunSweeperSweepsOnAfterALockTimeout: a full batch waits for the stock
// rows it gives back, and a lock_timeout of the database (or of the role
// pg_cron runs as) ends that wait with 55P03 while another transaction
// holds one of them. The run sweeps again and cancels every order once the
// row is let go. Before migration 000060 the error ended the whole run, and
// under pg_cron every due order waited for the next minute's run.
func TestRunSweeperSweepsOnAfterALockTimeout(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := setup(t, ctx)
	url := pgtest.URL(t, db)
	const n = 300
	_, err := db.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s SET lock_timeout = '100ms'",
		pgx.Identifier{db.Config().ConnConfig.Database}.Sanitize()))
	require.NoError(t, err)
	createDue(t, ctx, db, "lt-", n, time.Millisecond, time.Millisecond)
	waitDue(t, ctx, db)
	holder, _ := hold(t, ctx, url, "SELECT 1 FROM ordertimeout.stock WHERE sku = 'A' FOR UPDATE")

	ready, start := make(chan struct{}, 1), make(chan struct{})
	result := make(chan runResult, 1)
	go func() { result <- callSweeper(ctx, url, "max => 100, duration => interval '8 seconds'", ready, start) }()
	<-ready
	close(start)
	// seen holds the transactions of the run seen waiting for the held row:
	// each sweep is a transaction of its own, so a second one means the run
	// swept again after a lock timeout ended the first one's wait.
	seen := map[string]bool{}
	waitFor(t, ctx, 6*time.Second, "the run to wait for the held stock row a second time, after a lock timeout", func() (bool, error) {
		var started string
		err := db.QueryRow(ctx, `
			SELECT a.backend_xid::text FROM pg_stat_activity AS a
			 WHERE a.datname = current_database() AND a.wait_event_type = 'Lock' AND a.backend_xid IS NOT NULL`).Scan(&started)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		seen[started] = true
		return len(seen) >= 2, nil
	})
	require.Equal(t, "PENDING", status(t, ctx, db, "lt-0"), "nothing cancelled while the row is held")
	require.NoError(t, holder.Rollback(ctx))

	r := <-result
	require.NoError(t, r.err, "the run ends at its duration, not at the lock timeout")
	checkCancelledOnce(t, ctx, db, "lt-", n, 0)
}
