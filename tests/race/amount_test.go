package race_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

// TestALateAmountIsNeverDropped: a late payment recorded without an amount
// learns it from a confirmation that brings it, while its conflict is open.
// When another transaction holds the conflict's row (resolve_conflict locks
// the conflict, then waits for the order that the confirmation holds), the
// confirmation cannot wait for it without a deadlock; it fails with 40001,
// writing nothing, and the amount is learned when it is called again. A
// review reproduced the confirmation answering "conflict" and dropping the
// amount: the sidecar's reinstate failed for want of it (OT132) and an exact
// late payment was refunded instead.
func TestALateAmountIsNeverDropped(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pgtest.NewPool(t)
	url := pgtest.URL(t, pool)
	_, err := pool.Exec(ctx, `SELECT ordertimeout.put_stock('A', 1000)`)
	require.NoError(t, err)
	late := func(order string) int64 {
		t.Helper()
		return latePayment(ctx, t, pool, order, nil)
	}
	learned := func(id int64) string {
		t.Helper()
		var s string
		require.NoError(t, pool.QueryRow(ctx,
			`SELECT c.state || ' ' || c.kind || ' ' || coalesce(c.amount::text, '-') || ' ' || coalesce(p.amount::text, '-')
			   FROM ordertimeout.conflicts AS c JOIN ordertimeout.payments AS p USING (payment_id)
			  WHERE c.conflict_id = $1`, id).Scan(&s))
		return s
	}

	// The conflict's row held by another transaction.
	id := late("held")
	holder := connect(ctx, t, url)
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM ordertimeout.conflicts WHERE conflict_id = $1 FOR UPDATE`, id)
	require.NoError(t, err)
	var answer string
	err = pool.QueryRow(ctx, `SELECT ordertimeout.confirm_payment('held', 'held-p', 10, 'EUR')`).Scan(&answer)
	require.Equal(t, sqlstate.SerializationFailure, sqlstate.Code(err), "the amount of a held conflict: %v (answer %q)", err, answer)
	require.Equal(t, "open late_payment - -", learned(id), "nothing written")
	require.NoError(t, tx.Rollback(ctx))
	require.NoError(t, pool.QueryRow(ctx, `SELECT ordertimeout.confirm_payment('held', 'held-p', 10, 'EUR')`).Scan(&answer))
	require.Equal(t, "conflict", answer)
	require.Equal(t, "open late_payment 10 10", learned(id), "called again: the amount is learned")

	// The review's interleaving: the confirmation holds the order; the
	// resolver locks the conflict and waits for the order; the confirmation
	// then meets the conflict held.
	id = late("race")
	payer := connect(ctx, t, url)
	resolver := connect(ctx, t, url)
	pid := backendPID(ctx, t, resolver)
	ptx, err := payer.Begin(ctx)
	require.NoError(t, err)
	_, err = ptx.Exec(ctx, `SELECT 1 FROM ordertimeout.orders WHERE order_id = 'race' FOR NO KEY UPDATE`)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := resolver.Exec(ctx, `SELECT ordertimeout.resolve_conflict($1, 'reinstate')`, id)
		done <- err
	}()
	waitUntilQueued(ctx, t, pool, pid, done, "resolve_conflict")
	err = ptx.QueryRow(ctx, `SELECT ordertimeout.confirm_payment('race', 'race-p', 10, 'EUR')`).Scan(&answer)
	require.Equal(t, sqlstate.SerializationFailure, sqlstate.Code(err), "the confirmation meets the resolver's lock: %v (answer %q)", err, answer)
	require.NoError(t, ptx.Rollback(ctx))
	require.Equal(t, sqlstate.CannotReinstate, sqlstate.Code(<-done), "the resolver cannot reinstate a payment of unknown amount")
	require.Equal(t, "open late_payment - -", learned(id), "nothing written by either")

	require.NoError(t, pool.QueryRow(ctx, `SELECT ordertimeout.confirm_payment('race', 'race-p', 10, 'EUR')`).Scan(&answer))
	require.Equal(t, "conflict", answer)
	require.Equal(t, "open late_payment 10 10", learned(id), "called again: learned")
	require.NoError(t, pool.QueryRow(ctx, `SELECT ordertimeout.resolve_conflict($1, 'reinstate')`, id).Scan(&answer))
	require.Equal(t, "reinstated", answer, "the exact late payment is reinstated, not refunded")
	require.Equal(t, "PAID", status(ctx, t, pool, "race"))
}

// TestOneRefundIDUnderConcurrency: two finish_refund calls with the same
// refund_id for two conflicts, at once. The second waits for the first's
// commit on the unique constraint, then fails with OT177 naming the first
// conflict, nothing written. Under REPEATABLE READ the second is refused at
// once (OT154): its snapshot, older than the first's commit, could not name
// the conflict it met (a review found an OT177 naming nothing), nor see a
// refund id a purge kept meanwhile (another review saw one refund recorded
// twice so).
func TestOneRefundIDUnderConcurrency(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pgtest.NewPool(t)
	url := pgtest.URL(t, pool)
	_, err := pool.Exec(ctx, `SELECT ordertimeout.put_stock('A', 1000)`)
	require.NoError(t, err)
	ids := map[string]int64{}
	for _, o := range []string{"f1", "f2"} {
		id := latePayment(ctx, t, pool, o, 10)
		_, err = pool.Exec(ctx, `SELECT ordertimeout.resolve_conflict($1, 'refund')`, id)
		require.NoError(t, err)
		ids[o] = id
	}

	first := connect(ctx, t, url)
	ftx, err := first.Begin(ctx)
	require.NoError(t, err)
	_, err = ftx.Exec(ctx, `SELECT ordertimeout.finish_refund($1, 'RF-D')`, ids["f1"])
	require.NoError(t, err)

	second := connect(ctx, t, url)
	rr, err := second.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	_, err = rr.Exec(ctx, `SELECT ordertimeout.finish_refund($1, 'RF-D')`, ids["f2"])
	require.Equal(t, sqlstate.NotReadCommitted, sqlstate.Code(err), "REPEATABLE READ: refused at once, not queued")
	require.NoError(t, rr.Rollback(ctx))

	pid := backendPID(ctx, t, second)
	done := make(chan error, 1)
	go func() {
		_, err := second.Exec(ctx, `SELECT ordertimeout.finish_refund($1, 'RF-D')`, ids["f2"])
		done <- err
	}()
	waitUntilQueued(ctx, t, pool, pid, done, "the second finish_refund")
	require.NoError(t, ftx.Commit(ctx))
	err = <-done
	require.Equal(t, sqlstate.RefundOfAnother, sqlstate.Code(err), "after the first's commit: OT177")
	require.ErrorContains(t, err, fmt.Sprintf("recorded for conflict %d (payment \"f1-p\")", ids["f1"]))
	var state string
	require.NoError(t, pool.QueryRow(ctx, `SELECT state FROM ordertimeout.conflicts WHERE conflict_id = $1`, ids["f2"]).Scan(&state))
	require.Equal(t, "refunding", state, "nothing recorded")
}

// latePayment places order (one unit of sku "A", 10 EUR), cancels it and
// confirms its payment "<order>-p" late, with amount (nil: a callback that
// does not say it): a conflict, whose id it returns.
func latePayment(ctx context.Context, t *testing.T, pool *pgxpool.Pool, order string, amount any) int64 {
	t.Helper()
	for _, sql := range []string{
		`SELECT ordertimeout.create_order($1, '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}')`,
		`SELECT ordertimeout.cancel_order($1)`,
	} {
		_, err := pool.Exec(ctx, sql, order)
		require.NoError(t, err, sql)
	}
	_, err := pool.Exec(ctx, `SELECT ordertimeout.confirm_payment($1, $1 || '-p', $2::numeric)`, order, amount)
	require.NoError(t, err)
	var id int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = $1`, order).Scan(&id))
	return id
}
