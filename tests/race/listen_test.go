package race_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

// TestLatePaymentNotifies: a payment confirmed after the cancel notifies a
// session LISTENing on ordertimeout_conflict, with an empty payload (a
// wake-up: the conflict is in the table), within a deadline; a payment
// confirmed in time notifies nobody.
func TestLatePaymentNotifies(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pgtest.NewPool(t)
	listener := connect(ctx, t, pgtest.URL(t, pool))
	_, err := listener.Exec(ctx, `LISTEN ordertimeout_conflict`)
	require.NoError(t, err)

	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}
	exec(`SELECT ordertimeout.put_stock('A', 10)`)
	exec(`SELECT ordertimeout.create_order('in-time', '[{"sku":"A","qty":1}]')`)
	exec(`SELECT ordertimeout.create_order('late', '[{"sku":"A","qty":1}]')`)

	// Paid in time: no notification. Notifications arrive in commit order,
	// so had this one sent any, it would come before the late one's.
	var answer string
	require.NoError(t, pool.QueryRow(ctx, `SELECT ordertimeout.confirm_payment('in-time', 'p-in-time')`).Scan(&answer))
	require.Equal(t, "paid", answer)

	exec(`SELECT ordertimeout.cancel_order('late')`)
	require.NoError(t, pool.QueryRow(ctx, `SELECT ordertimeout.confirm_payment('late', 'p-late')`).Scan(&answer))
	require.Equal(t, "conflict", answer)
	var conflicts int
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT count(*) FROM ordertimeout.conflicts WHERE payment_id = 'p-late' AND kind = 'late_payment'`).
		Scan(&conflicts))
	require.Equal(t, 1, conflicts)

	waitCtx, waitCancel := context.WithTimeout(ctx, 5*time.Second)
	defer waitCancel()
	n, err := listener.WaitForNotification(waitCtx)
	require.NoError(t, err, "no notification within 5 s")
	require.Equal(t, "ordertimeout_conflict", n.Channel)
	require.Empty(t, n.Payload, "a wake-up only: the conflict is in the table")
}
