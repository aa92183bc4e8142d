package sidecar_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
)

// While timeout cancels are paused nothing is cancelled by a timeout: the
// sidecar keeps sweeping (and finds nothing to claim), the gateway close of
// an order the shop cancelled waits, payments go on. On resume the backlog
// is cancelled at once, each cancel with its whole lateness and an event
// that says it waited for the pause; the close is sent.
func TestPauseStopsTimeoutsUntilResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	s, _ := sidecartest.Start(t, e.config("s1"))
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(paused => true)")

	const n = 20
	sidecartest.CreateMany(t, e.db, "pz-", n, 1, 200*time.Millisecond)
	sidecartest.CreateOrder(t, e.db, "paid", 200*time.Millisecond, "")
	// An order whose payment was started, cancelled by the shop: its
	// gateway close must wait for the resume.
	sidecartest.CreateOrder(t, e.db, "shop", time.Hour, "")
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.begin_payment('shop', 'shop-p')")
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.fail_payment('shop', 'shop-p')")
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.cancel_order('shop', 'out of stock')")

	// Everything is due; let the sweeper run a good number of sweeps past
	// that and the close job snooze at least once.
	sidecartest.Eventually(t, 10*time.Second, "all due", func() (bool, error) {
		return sidecartest.Int(t, e.db, "SELECT due_timers FROM ordertimeout.sweep_stats") == n+1, nil
	})
	batches := s.Sweeper().Stats().Batches
	sidecartest.Eventually(t, 10*time.Second, "the sweeper sweeping while paused", func() (bool, error) {
		return s.Sweeper().Stats().Batches >= batches+3, nil
	})
	sidecartest.Eventually(t, 15*time.Second, "the close snoozed for the pause", func() (bool, error) {
		return sidecartest.Int(t, e.db, `SELECT count(*) FROM river_job WHERE kind = 'ordertimeout_gateway_close'
		   AND metadata ? 'snoozes'`) == 1, nil
	})
	require.EqualValues(t, n+1, sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.orders WHERE status = 'PENDING'"),
		"nothing cancelled by a timeout while paused")
	require.Zero(t, e.fake.Order("shop").Closes, "the close waits")
	require.Zero(t, s.Sweeper().Stats().Cancelled)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.confirm_payment('paid', 'paid-p')")
	require.Equal(t, "PAID", sidecartest.Status(t, e.db, "paid"), "payments go on")

	sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(paused => false)")
	sidecartest.Eventually(t, 5*time.Second, "the backlog cancelled", func() (bool, error) {
		return sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.orders WHERE order_id LIKE 'pz-%' AND status = 'CANCELLED'") == n, nil
	})
	require.EqualValues(t, n, sidecartest.Int(t, e.db, `
		SELECT count(*) FROM ordertimeout.events AS e
		  JOIN ordertimeout.orders AS o USING (order_id)
		  JOIN ordertimeout.settings AS s ON true
		 WHERE e.order_id LIKE 'pz-%' AND e.to_status = 'CANCELLED' AND e.cause = 'timeout'
		   AND (e.detail ->> 'waited_for_pause')::boolean
		   AND e.at >= s.resumed_at
		   AND e.lateness = e.at - o.cancel_at`),
		"each cancel, after the resume, says it waited for the pause, and its lateness covers the pause")
	sidecartest.Eventually(t, 15*time.Second, "the close sent after the resume", func() (bool, error) {
		return e.fake.Order("shop").Closes == 1, nil
	})
}

// The sidecar sweeps in READ COMMITTED whatever the database's default:
// under a default of REPEATABLE READ, sweep_due would refuse every sweep
// (OT154, it would not see a pause).
func TestSweepsUnderARepeatableReadDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	sidecartest.Exec(t, e.db, `DO $$ BEGIN
		EXECUTE format('ALTER DATABASE %I SET default_transaction_isolation = %L', current_database(), 'repeatable read');
	END $$`)
	s, _ := sidecartest.Start(t, e.config("s1"))
	sidecartest.CreateOrder(t, e.db, "rr", 50*time.Millisecond, "")
	sidecartest.WaitStatus(t, e.db, "rr", "CANCELLED", 10*time.Second)
	require.Zero(t, s.Sweeper().Stats().Errors)
}
