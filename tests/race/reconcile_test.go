package race_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

// TestReconcileDoesNotDeadlockWithAPayment: reconcile_payments confirms the
// lost callbacks of a period one line after the other in one transaction:
// order A's row, A's stock rows (the sale), then order B's row. That is not
// the lock order of every other function (order rows, then stock rows), so a
// confirm_payment of B, a single call in its own transaction, that holds B
// and then needs the stock row reconcile took for A, deadlocks with it
// (40P01): one of the two fails, the gateway callback or the reconciliation.
//
// The interleaving is built: an extend_deadline of B in an open transaction
// holds B's row; confirm_payment(B) queues on it, then reconcile_payments
// (having confirmed A) queues behind it; the extend commits, B goes to the
// confirmation, which then waits for the stock row that reconcile holds.
func TestReconcileDoesNotDeadlockWithAPayment(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pgtest.NewPool(t)
	url := pgtest.URL(t, pool)
	for _, sql := range []string{
		`SELECT ordertimeout.put_stock('S', 100)`,
		`SELECT ordertimeout.create_order('rA', '[{"sku":"S","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}')`,
		`SELECT ordertimeout.create_order('rB', '[{"sku":"S","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}')`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	holder, payer, reconciler := connect(ctx, t, url), connect(ctx, t, url), connect(ctx, t, url)
	var payerPID, reconcilerPID int
	require.NoError(t, payer.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&payerPID))
	require.NoError(t, reconciler.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&reconcilerPID))
	waiting := `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock')`

	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT ordertimeout.extend_deadline('rB', interval '1 minute')`)
	require.NoError(t, err)

	paid := make(chan error, 1)
	go func() {
		var answer string
		err := payer.QueryRow(ctx, `SELECT ordertimeout.confirm_payment('rB', 'rB-cb', 10, 'EUR')`).Scan(&answer)
		paid <- err
	}()
	require.NoError(t, waitFor(ctx, pool, waiting, payerPID))

	reconciled := reconcileInBackground(ctx, reconciler, "rA", "rB")
	// reconcile has confirmed A (its stock row is locked) and waits for B.
	require.NoError(t, waitFor(ctx, pool, waiting, reconcilerPID))
	require.NoError(t, tx.Commit(ctx))

	errPay, errRec := <-paid, <-reconciled
	require.NoError(t, errPay, "confirm_payment of B")
	require.NoError(t, errRec, "reconcile_payments")
	require.Equal(t, "PAID", status(ctx, t, pool, "rA"))
	require.Equal(t, "PAID", status(ctx, t, pool, "rB"))
}

// TestReconcileDoesNotDeadlockWithACreate: reconcile_payments confirmed its
// lost callbacks line by line, each taking its order's stock rows in sku
// order, but the rows of two orders not in sku order: A's Z, then B's Y. A
// create_order of Y and Z, taking Y and waiting for Z, then deadlocked with
// it (40P01), and the buyer's checkout was the one that failed. reconcile
// now locks every stock row its confirmations may need, in sku order,
// before the first one.
//
// The interleaving is built: a transaction holds Z; reconcile queues on it
// (before: confirming A; now: locking the stock up front), then create_order
// queues behind one of them; the holder commits.
func TestReconcileDoesNotDeadlockWithACreate(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pgtest.NewPool(t)
	url := pgtest.URL(t, pool)
	for _, sql := range []string{
		`SELECT ordertimeout.put_stock('Y', 100)`,
		`SELECT ordertimeout.put_stock('Z', 100)`,
		`SELECT ordertimeout.create_order('cA', '[{"sku":"Z","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}')`,
		`SELECT ordertimeout.create_order('cB', '[{"sku":"Y","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}')`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	holder, creator, reconciler := connect(ctx, t, url), connect(ctx, t, url), connect(ctx, t, url)
	var creatorPID, reconcilerPID int
	require.NoError(t, creator.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&creatorPID))
	require.NoError(t, reconciler.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&reconcilerPID))
	waiting := `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock')`

	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM ordertimeout.stock WHERE sku = 'Z' FOR NO KEY UPDATE`)
	require.NoError(t, err)

	reconciled := reconcileInBackground(ctx, reconciler, "cA", "cB")
	require.NoError(t, waitFor(ctx, pool, waiting, reconcilerPID))

	created := make(chan error, 1)
	go func() {
		_, err := creator.Exec(ctx, `SELECT ordertimeout.create_order('cC', '[{"sku":"Y","qty":1},{"sku":"Z","qty":1}]')`)
		created <- err
	}()
	require.NoError(t, waitFor(ctx, pool, waiting, creatorPID))
	require.NoError(t, tx.Commit(ctx))

	errRec, errCreate := <-reconciled, <-created
	require.NoError(t, errRec, "reconcile_payments")
	require.NoError(t, errCreate, "create_order")
	require.Equal(t, "PAID", status(ctx, t, pool, "cA"))
	require.Equal(t, "PAID", status(ctx, t, pool, "cB"))
	require.Equal(t, "PENDING", status(ctx, t, pool, "cC"))
}

// reconcileInBackground runs reconcile_payments on conn, in a goroutine, with
// a paid gateway transaction of 10 EUR (payment <order>-gw) for each order,
// in that order; the channel gets its error.
func reconcileInBackground(ctx context.Context, conn *pgx.Conn, orders ...string) <-chan error {
	var lines []string
	// Paid now: in the period, and after the orders were created.
	at := time.Now().UTC().Format(time.RFC3339)
	for _, o := range orders {
		lines = append(lines, fmt.Sprintf(
			`{"payment_id":%q,"order_id":%q,"amount":"10","currency":"EUR","status":"paid","at":%q}`,
			o+"-gw", o, at))
	}
	reconciled := make(chan error, 1)
	go func() {
		rows, err := conn.Query(ctx, `SELECT outcome FROM ordertimeout.reconcile_payments($1::jsonb,
			now() - interval '1 hour', now() + interval '1 hour', false)`, "["+strings.Join(lines, ",")+"]")
		if err == nil {
			for rows.Next() {
			}
			rows.Close()
			err = rows.Err()
		}
		reconciled <- err
	}()
	return reconciled
}
