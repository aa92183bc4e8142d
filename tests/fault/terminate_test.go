package fault

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
	"github.com/ordertimeout/ordertimeout/sidecar/timer"
	"github.com/ordertimeout/ordertimeout/tests/internal/outcome"
)

// pg_terminate_backend of every connection of the sidecar — its LISTEN
// connection (both channels) and its whole pool (sweep sessions, River, workers) — in the
// middle of a drain, four times: the sidecar process lives on, reconnects by
// itself each time and finishes the drain; every order is cancelled exactly
// once. Afterwards both channels work again: a wake-up makes a cancel on time
// although the sidecar would otherwise sleep 5 s, and a late payment's
// notification gets the conflict resolved.
func TestTerminateConnections(t *testing.T) {
	t.Parallel()
	const orders = 3000
	const cuts = 4
	e := newTestEnv(t)
	ctx := t.Context()

	// Due at once; every 10th also needs a gateway check first, so River
	// has work in flight too.
	e.createMany("t", orders, time.Hour, "")
	e.exec(`UPDATE ordertimeout.orders SET precheck = 'always' WHERE order_id ~ '^t[0-9]*0$'`)
	e.exec(`WITH d AS (SELECT clock_timestamp() AS at)
	        UPDATE ordertimeout.orders SET expire_at = d.at, cancel_at = d.at FROM d WHERE status = 'PENDING'`)
	e.exec(`UPDATE river_job SET scheduled_at = clock_timestamp() WHERE queue = $1`, timer.Name)

	// Small batches, one session, a long sleep: the drain takes a while, and
	// only a working wake-up LISTEN makes a new order's cancel on time.
	s := e.startSidecar("t1", "--sweep-batch", "5", "--sweep-sessions", "1", "--max-sleep", "5s")
	pid := s.PID()
	names := []string{sidecarproc.PoolApplicationName("t1"), sidecarproc.ListenerName}
	connected := func() (pool, listen int64) {
		err := e.db.QueryRow(ctx, `
			SELECT count(*) FILTER (WHERE application_name = $1),
			       count(*) FILTER (WHERE application_name = $2)
			FROM pg_stat_activity
			WHERE datname = current_database()`, names[0], names[1]).Scan(&pool, &listen)
		require.NoError(t, err)
		return pool, listen
	}
	cancelled := func() int64 {
		return e.count("SELECT count(*) FROM ordertimeout.orders WHERE status = 'CANCELLED'")
	}

	for cut := 1; cut <= cuts; cut++ {
		eventually(t, 30*time.Second, fmt.Sprintf("reconnection before cut %d", cut), func() bool {
			pool, listen := connected()
			return pool > 0 && listen == 1
		})
		before := cancelled()
		require.Less(t, before, int64(orders), "cut %d must come mid-drain", cut)
		var killed int64
		require.NoError(t, e.db.QueryRow(ctx, `
			SELECT count(pg_terminate_backend(pid))
			FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = ANY($1)`, names).Scan(&killed))
		t.Logf("cut %d: terminated %d connections after %d cancels", cut, killed, before)
		require.GreaterOrEqual(t, killed, int64(2))
		// Let the drain go on a little before the next cut.
		eventually(t, 30*time.Second, "the drain to go on", func() bool { return cancelled() >= before+100 })
	}

	eventually(t, 2*time.Minute, "every order cancelled", func() bool { return cancelled() == orders })
	require.True(t, s.Running(), "the sidecar must survive the cuts")
	require.Equal(t, pid, s.PID())
	eventually(t, 30*time.Second, "the LISTEN connection back", func() bool {
		_, listen := connected()
		return listen == 1
	})
	e.check(0, outcome.Expect{Created: ids("t", orders), Cancelled: ids("t", orders), Settled: true})

	// The wake-up LISTEN works: an order due in 300 ms is cancelled well
	// before the 5 s sleep would end. create_order notifies only when the
	// order is due before the sweeper's planned wake-up: wait until the
	// sweeper sleeps for more than a second, else a wake-up it had planned
	// anyway could cancel the order on time without a NOTIFY (seen once in
	// CI: lateness 5 ms, no wake-up received).
	eventually(t, 30*time.Second, "the sweeper asleep for more than a second", func() bool {
		return e.count(`SELECT count(*) FROM ordertimeout.sweep_state
		                 WHERE wake_at > clock_timestamp() + interval '1 second'`) == 1
	})
	wakeups := s.metrics(t).Sum("ordertimeout_sweep_wakeups_total")
	e.createOrder("t-wake", 300*time.Millisecond, "")
	e.waitStatus("t-wake", "CANCELLED", 10*time.Second)
	var lateness float64
	require.NoError(t, e.db.QueryRow(ctx, `SELECT extract(epoch FROM lateness)::float8 FROM ordertimeout.cancel_lag
	                                         WHERE order_id = 't-wake'`).Scan(&lateness))
	t.Logf("cancel lateness after the cuts: %.3fs", lateness)
	require.Less(t, lateness, 2.5, "the wake-up must come through the LISTEN, not the 5 s sleep")
	require.Greater(t, s.metrics(t).Sum("ordertimeout_sweep_wakeups_total"), wakeups)

	// The conflict LISTEN works: a payment on the cancelled order is a
	// conflict, resolved (reinstated) through its notification, not the
	// 5 minute rescan.
	notified := s.metrics(t).Sum("ordertimeout_conflict_notifications_total")
	var result string
	require.NoError(t, e.db.QueryRow(ctx, "SELECT ordertimeout.confirm_payment('t1', 't1-late')").Scan(&result))
	require.Equal(t, "conflict", result)
	e.waitStatus("t1", "PAID", 20*time.Second)
	require.Greater(t, s.metrics(t).Sum("ordertimeout_conflict_notifications_total"), notified)
	e.check(0, outcome.Expect{Created: ids("t", orders), Settled: true})
	require.EqualValues(t, 1, e.count(`SELECT count(*) FROM ordertimeout.conflicts WHERE order_id = 't1' AND resolution = 'reinstated'`))
}
