package security

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

// TestRetriedTimerCancelsNothingEarly: River's UI (and River's client)
// offer "retry" on every job that is not running, and a timer row is an
// available job with a future scheduled_at, which River's JobRetry moves to
// now. The order's deadline is orders.cancel_at, not the row's
// scheduled_at: a sweep after that retry must not cancel an order an hour
// before its deadline (the buyer may be paying). The retry is made the way
// the sidecar's River client makes it for River's UI: JobRetry, as the
// sidecar's role.
func TestRetriedTimerCancelsNothingEarly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	setupStock(t, pool)
	_, err := pool.Exec(ctx, `SELECT * FROM ordertimeout.create_order('retried', '[{"sku": "A", "qty": 1}]', interval '1 hour')`)
	require.NoError(t, err)
	var jobID int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT timer_job_id FROM ordertimeout.orders WHERE order_id = 'retried'`).Scan(&jobID))

	sidecar := newLogin(t, pool, "retry", "ordertimeout_sidecar")
	sidecarPool, err := pgxpool.New(ctx, sidecar.URL)
	require.NoError(t, err)
	defer sidecarPool.Close()
	client, err := river.NewClient(riverpgxv5.New(sidecarPool), &river.Config{})
	require.NoError(t, err)
	_, err = client.JobRetry(ctx, jobID)
	require.NoError(t, err)

	_, err = sidecarPool.Exec(ctx, `SELECT * FROM ordertimeout.sweep_due(1000)`)
	require.NoError(t, err)
	var status string
	var early bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT status, cancel_at > now() FROM ordertimeout.orders WHERE order_id = 'retried'`).Scan(&status, &early))
	require.True(t, early)
	require.Equal(t, "PENDING", status, "a timer row retried in River's UI cancelled the order an hour before its cancel_at")

	// The row was moot; the sweep's fallback cancels the order once its
	// cancel_at has come, as for a lost timer row. The hour is made to pass
	// by moving the order's times back (as its owner may), and the sweep's
	// last look at every due row with them (a sweep right after one looks
	// at the last 2 seconds only: ordertimeout._scan_from).
	_, err = pool.Exec(ctx, `UPDATE ordertimeout.orders
		SET created_at = created_at - interval '2 hours', expire_at = expire_at - interval '2 hours',
		    cancel_at = cancel_at - interval '2 hours'
		WHERE order_id = 'retried'`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE ordertimeout.scan_state SET scanned_at = NULL`)
	require.NoError(t, err)
	var caught int
	require.NoError(t, sidecarPool.QueryRow(ctx, `SELECT caught_by_sweep FROM ordertimeout.sweep_due(1000)`).Scan(&caught))
	require.Equal(t, 1, caught, "the fallback found the order past its cancel_at")
	var cause string
	var onTime bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT status, cancel_cause, cancelled_at >= cancel_at FROM ordertimeout.orders
		WHERE order_id = 'retried'`).Scan(&status, &cause, &onTime))
	require.Equal(t, "CANCELLED", status)
	require.Equal(t, "sweep", cause)
	require.True(t, onTime)
}

// A gateway check before a timeout (precheck) is not asked early either: a
// retried timer row of an order whose policy wants the gateway asked first
// queues no check before cancel_at.
func TestRetriedTimerQueuesNoEarlyCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	setupStock(t, pool)
	_, err := pool.Exec(ctx, `SELECT * FROM ordertimeout.create_order('retried-check', '[{"sku": "A", "qty": 1}]',
		interval '1 hour', '{"precheck": "always"}')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE river_job SET scheduled_at = now()
		WHERE id = (SELECT timer_job_id FROM ordertimeout.orders WHERE order_id = 'retried-check')`)
	require.NoError(t, err)
	var checks int
	require.NoError(t, pool.QueryRow(ctx, `SELECT checks FROM ordertimeout.sweep_due(1000)`).Scan(&checks))
	require.Zero(t, checks)
	var status string
	var checkJob *int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT status, check_job_id FROM ordertimeout.orders WHERE order_id = 'retried-check'`).
		Scan(&status, &checkJob))
	require.Equal(t, "PENDING", status)
	require.Nil(t, checkJob, "no gateway check queued an hour early")
}
