package race_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

// TestLastAttemptEndsUnderSnapshot: a PAYING order with two started attempts.
// One session ends attempt 2 (fail_payment, READ COMMITTED, as the sidecar
// does): the order stays PAYING, since attempt 1 is still in flight, and its
// row is not touched. A caller whose REPEATABLE READ or SERIALIZABLE
// transaction took its snapshot before that commit then ends attempt 1
// (fail_payment, or confirm_payment of another amount). Its
// _back_to_pending looked for attempts still started in its snapshot, found
// attempt 2 there, and left the order PAYING with no attempt in flight: no
// payment check acts on it any more (each finds its payment not started and
// completes as moot, and the sweep's rescue re-queues a check without a
// payment), the order is never cancelled and its stock stays reserved
// forever. The caller must either move the order back to PENDING or fail
// with a serialization failure (40001), which it retries.
func TestLastAttemptEndsUnderSnapshot(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pgtest.NewPool(t)
	url := pgtest.URL(t, pool)
	_, err := pool.Exec(ctx, `SELECT ordertimeout.put_stock('A', 100)`)
	require.NoError(t, err)
	caller := connect(ctx, t, url)

	cases := []struct {
		name string
		iso  pgx.TxIsoLevel
		end  string // how the caller ends attempt 1 ($1 order id, $2 payment id)
	}{
		{"fail_payment, repeatable read", pgx.RepeatableRead, `SELECT ordertimeout.fail_payment($1, $2)`},
		{"fail_payment, serializable", pgx.Serializable, `SELECT ordertimeout.fail_payment($1, $2)`},
		{"confirm_payment of another amount, repeatable read", pgx.RepeatableRead,
			`SELECT ordertimeout.confirm_payment($1, $2, 11, 'EUR')`},
		{"confirm_payment of another amount, serializable", pgx.Serializable,
			`SELECT ordertimeout.confirm_payment($1, $2, 11, 'EUR')`},
	}
	for i, c := range cases {
		order := "snap-" + string(rune('a'+i))
		p1, p2 := order+"-p1", order+"-p2"
		for _, sql := range []string{
			`SELECT ordertimeout.create_order($1, '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}')`,
			`SELECT ordertimeout.begin_payment($1, $1 || '-p1')`,
			`SELECT ordertimeout.begin_payment($1, $1 || '-p2')`,
		} {
			_, err := pool.Exec(ctx, sql, order)
			require.NoError(t, err, c.name)
		}

		tx, err := caller.BeginTx(ctx, pgx.TxOptions{IsoLevel: c.iso})
		require.NoError(t, err, c.name)
		// The snapshot is taken here, before attempt 2 ends.
		require.Equal(t, 2, queryInt(ctx, t, tx,
			`SELECT count(*)::integer FROM ordertimeout.payments WHERE order_id = $1 AND status = 'started'`, order), c.name)

		var answer string
		require.NoError(t, pool.QueryRow(ctx, `SELECT ordertimeout.fail_payment($1, $2)`, order, p2).Scan(&answer), c.name)
		require.Equal(t, "paying", answer, "%s: attempt 1 is still in flight", c.name)

		_, err = tx.Exec(ctx, c.end, order, p1)
		if err == nil {
			err = tx.Commit(ctx)
		} else {
			_ = tx.Rollback(ctx)
		}
		if err != nil {
			require.Equal(t, sqlstate.SerializationFailure, sqlstate.Code(err), "%s: %v", c.name, err)
			// Retried, as a client does with 40001.
			_, err = pool.Exec(ctx, c.end, order, p1)
			require.NoError(t, err, c.name)
		}

		started := queryInt(ctx, t, pool,
			`SELECT count(*)::integer FROM ordertimeout.payments WHERE order_id = $1 AND status = 'started'`, order)
		require.Equal(t, 0, started, c.name)
		require.Equal(t, "PENDING", status(ctx, t, pool, order),
			"%s: no attempt is in flight, so the order's own timeout must apply again", c.name)
		require.Equal(t, 1, queryInt(ctx, t, pool, `
			SELECT count(*)::integer
			FROM ordertimeout.orders AS o
			JOIN public.river_job AS r ON r.id = o.timer_job_id
			WHERE o.order_id = $1 AND r.queue = 'ordertimeout_expire' AND r.state = 'available'`, order),
			"%s: the PENDING order has a timer row", c.name)
	}
}

// TestPurgeUnderSnapshotMeetsADoublePayment: purge_orders in a REPEATABLE READ
// transaction whose snapshot was taken before a double payment of a PAID
// order committed. confirm_payment records that conflict (and its payments
// row) without touching the order row, so the purge locks the order, finds
// no open conflict in its snapshot, and deletes the rows it sees: the new
// conflict and payment are not among them, and the order's DELETE failed
// with a raw foreign-key violation (23503), which no client retries. It
// must fail with a serialization failure (40001) and keep the order and its
// conflict.
func TestPurgeUnderSnapshotMeetsADoublePayment(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	pool := pgtest.NewPool(t)
	url := pgtest.URL(t, pool)
	for _, sql := range []string{
		`SELECT ordertimeout.put_stock('A', 100)`,
		`SELECT ordertimeout.create_order('paid', '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}')`,
		`SELECT ordertimeout.confirm_payment('paid', 'paid-p1', 10, 'EUR')`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}

	purger := connect(ctx, t, url)
	tx, err := purger.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	require.Equal(t, 1, queryInt(ctx, t, tx, `SELECT count(*)::integer FROM ordertimeout.orders`), "the snapshot is taken")

	var answer string
	require.NoError(t, pool.QueryRow(ctx, `SELECT ordertimeout.confirm_payment('paid', 'paid-p2', 10, 'EUR')`).Scan(&answer))
	require.Equal(t, "conflict", answer)

	var purged int
	err = tx.QueryRow(ctx, `SELECT ordertimeout.purge_orders(interval '1 day', 10, interval '0')`).Scan(&purged)
	_ = tx.Rollback(ctx)
	require.Error(t, err, "purged %d orders, one with an open conflict committed after the snapshot", purged)
	require.Equal(t, sqlstate.SerializationFailure, sqlstate.Code(err), "%v", err)
	require.Equal(t, 1, queryInt(ctx, t, pool,
		`SELECT count(*)::integer FROM ordertimeout.conflicts WHERE order_id = 'paid' AND resolution IS NULL`))
}
