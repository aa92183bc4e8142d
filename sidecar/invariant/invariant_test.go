package invariant_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/invariant"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var (
	_ invariant.DB = (*pgxpool.Pool)(nil)
	_ invariant.DB = (*pgx.Conn)(nil)
	_ invariant.DB = pgx.Tx(nil)
)

// stockTotals is what seed puts with put_stock.
var stockTotals = map[string]int64{"A": 100, "B": 50, "C": 10}

// seed fills db with orders in every state the API can reach: pending,
// paying, paid (with and without begin_payment, with an amount and without
// one: unverified), cancelled by request and by timeout, closed, a late
// payment refunded, one being refunded, one left open, one of the wrong
// amount, a late payment reinstated, a closed order reopened by a late
// payment, a wrong amount then the right one, a double payment, and a paid
// order purged after it spent a coupon, with coupons and points on some of
// them.
func seed(ctx context.Context, t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := db.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}
	exec(`SELECT ordertimeout.configure(grace => '0')`)
	for sku, total := range stockTotals {
		exec(`SELECT ordertimeout.put_stock($1, $2)`, sku, total)
	}
	exec(`SELECT ordertimeout.put_points('acct-1', 1000)`)
	exec(`SELECT ordertimeout.put_points('acct-2', 500)`)

	create := func(id, items string, options string) {
		t.Helper()
		exec(`SELECT ordertimeout.create_order($1, $2::jsonb, options => $3::jsonb)`, id, items, options)
	}
	// First, so that it is due by the time it is swept.
	exec(`SELECT ordertimeout.create_order('o-timeout', '[{"sku":"B","qty":1}]', '1 millisecond',
	                                       '{"coupon":"C-timeout","points_account":"acct-1","points":7}')`)

	create("o-closed", `[{"sku":"C","qty":2}]`, `{}`)
	exec(`SELECT ordertimeout.cancel_order('o-closed')`)
	// Closed, then paid late: back to CANCELLED with an open conflict.
	create("o-reopened", `[{"sku":"B","qty":1}]`, `{}`)
	exec(`SELECT ordertimeout.cancel_order('o-reopened')`)
	exec(`SELECT ordertimeout.close_cancelled('0', 100)`)
	exec(`SELECT ordertimeout.confirm_payment('o-reopened', 'p-reopened')`)

	create("o-pending", `[{"sku":"A","qty":2},{"sku":"B","qty":1}]`,
		`{"coupon":"C-pending","points_account":"acct-1","points":100}`)

	create("o-paying", `[{"sku":"A","qty":1}]`, `{}`)
	exec(`SELECT ordertimeout.begin_payment('o-paying', 'p-paying')`)

	create("o-paid", `[{"sku":"A","qty":3},{"sku":"B","qty":2}]`,
		`{"coupon":"C-paid","points_account":"acct-2","points":50,"amount":12.5,"currency":"EUR"}`)
	exec(`SELECT ordertimeout.begin_payment('o-paid', 'p-paid')`)
	exec(`SELECT ordertimeout.confirm_payment('o-paid', 'p-paid', 12.5)`)

	create("o-paid-direct", `[{"sku":"C","qty":1}]`, `{}`)
	exec(`SELECT ordertimeout.confirm_payment('o-paid-direct', 'p-paid-direct')`)

	create("o-cancelled", `[{"sku":"A","qty":1},{"sku":"B","qty":1}]`,
		`{"coupon":"C-cancelled","points_account":"acct-1","points":30}`)
	exec(`SELECT ordertimeout.cancel_order('o-cancelled')`)

	create("o-late-refund", `[{"sku":"B","qty":2}]`, `{}`)
	exec(`SELECT ordertimeout.cancel_order('o-late-refund')`)
	exec(`SELECT ordertimeout.confirm_payment('o-late-refund', 'p-late-refund')`)
	exec(`SELECT ordertimeout.resolve_conflict(c.conflict_id, 'refund')
	        FROM ordertimeout.conflicts AS c WHERE c.payment_id = 'p-late-refund'`)
	exec(`SELECT ordertimeout.finish_refund(c.conflict_id, 'r-late-refund')
	        FROM ordertimeout.conflicts AS c WHERE c.payment_id = 'p-late-refund'`)

	// Claimed for a refund the gateway has not confirmed yet.
	create("o-refunding", `[{"sku":"C","qty":1}]`, `{"amount":7,"currency":"EUR"}`)
	exec(`SELECT ordertimeout.cancel_order('o-refunding')`)
	exec(`SELECT ordertimeout.confirm_payment('o-refunding', 'p-refunding', 7, 'EUR')`)
	exec(`SELECT ordertimeout.resolve_conflict(c.conflict_id, 'refund')
	        FROM ordertimeout.conflicts AS c WHERE c.payment_id = 'p-refunding'`)

	// Late and of the wrong currency: an amount mismatch, left open.
	create("o-late-open", `[{"sku":"A","qty":1}]`, `{"amount":5,"currency":"EUR"}`)
	exec(`SELECT ordertimeout.cancel_order('o-late-open')`)
	exec(`SELECT ordertimeout.confirm_payment('o-late-open', 'p-late-open', 5, 'USD')`)

	// Paid by an app caller that did not give the amount: unverified.
	create("o-unverified", `[{"sku":"A","qty":1}]`, `{"amount":3.5,"currency":"EUR"}`)
	exec(`SELECT ordertimeout.confirm_payment('o-unverified', 'p-unverified')`)

	create("o-reinstated", `[{"sku":"A","qty":2},{"sku":"C","qty":1}]`,
		`{"coupon":"C-reinstated","points_account":"acct-2","points":20}`)
	exec(`SELECT ordertimeout.cancel_order('o-reinstated')`)
	exec(`SELECT ordertimeout.confirm_payment('o-reinstated', 'p-reinstated')`)
	exec(`SELECT ordertimeout.resolve_conflict(c.conflict_id, 'reinstate')
	        FROM ordertimeout.conflicts AS c WHERE c.payment_id = 'p-reinstated'`)

	// A wrong amount is a conflict and sends the PAYING order back to
	// PENDING; the right amount then pays it.
	create("o-mismatch", `[{"sku":"B","qty":1}]`, `{"amount":20,"currency":"EUR"}`)
	exec(`SELECT ordertimeout.begin_payment('o-mismatch', 'p-mismatch-1')`)
	exec(`SELECT ordertimeout.confirm_payment('o-mismatch', 'p-mismatch-1', 19)`)
	exec(`SELECT ordertimeout.confirm_payment('o-mismatch', 'p-mismatch-2', 20)`)

	create("o-double", `[{"sku":"A","qty":1}]`, `{}`)
	exec(`SELECT ordertimeout.confirm_payment('o-double', 'p-double-1')`)
	exec(`SELECT ordertimeout.confirm_payment('o-double', 'p-double-2')`)

	// Paid with a coupon, then purged: the hold of the spent coupon stays,
	// with no order.
	create("o-purged", `[{"sku":"C","qty":1}]`, `{"coupon":"C-purged"}`)
	exec(`SELECT ordertimeout.confirm_payment('o-purged', 'p-purged')`)
	exec(`UPDATE ordertimeout.orders SET paid_at = paid_at - interval '1 day' WHERE order_id = 'o-purged'`)
	exec(`SELECT ordertimeout.purge_orders('100 years', 1000, paid_older_than => '12 hours')`)

	// o-timeout is due: sweep until the sweep has cancelled it.
	for {
		var status string
		require.NoError(t, db.QueryRow(ctx, `SELECT status FROM ordertimeout.orders WHERE order_id = 'o-timeout'`).Scan(&status))
		if status == "CANCELLED" {
			break
		}
		require.NoError(t, ctx.Err(), "o-timeout not cancelled by the sweep")
		exec(`SELECT ordertimeout.sweep_due(10)`)
	}

	var counts string
	require.NoError(t, db.QueryRow(ctx, `
		SELECT string_agg(status || '=' || n, ' ' ORDER BY status)
		FROM (SELECT status, count(*) AS n FROM ordertimeout.orders GROUP BY status) AS s`).Scan(&counts))
	require.Equal(t, "CANCELLED=6 CLOSED=1 PAID=6 PAYING=1 PENDING=1", counts)
}

func TestCheckClean(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := pgtest.NewPool(t)

	// An empty database holds every invariant.
	report, err := invariant.Check(ctx, db, invariant.Options{StockTotals: map[string]int64{}, Slack: time.Second})
	require.NoError(t, err)
	require.True(t, report.OK(), report.String())

	seed(ctx, t, db)

	report, err = invariant.Check(ctx, db, invariant.Options{StockTotals: stockTotals, Slack: time.Minute})
	require.NoError(t, err)
	require.True(t, report.OK(), report.String())
	require.Equal(t, "ok       paid_xor_cancelled\nok       released_once\nok       conserved\nok       no_overdue_pending\n"+
		"ok       money_exact\nok       resolved_once\nok       closed_settled\n",
		report.String())

	// Without totals and slack: six invariants, the stock identities only.
	report, err = invariant.Check(ctx, db, invariant.Options{})
	require.NoError(t, err)
	require.True(t, report.OK(), report.String())
	require.Len(t, report.Results, 6)
	_, found := report.Result(invariant.NoOverduePending)
	require.False(t, found)

	// Totals that do not match the database are a violation.
	report, err = invariant.Check(ctx, db, invariant.Options{StockTotals: map[string]int64{"A": 100, "B": 50, "D": 1}})
	require.NoError(t, err)
	requireViolations(t, report, invariant.Conserved)
	conserved, _ := report.Result(invariant.Conserved)
	require.ElementsMatch(t, []string{
		"sku C: 10 units in all, but no total was expected for it",
		"sku D: expected 1 units in all, but it has no stock row",
	}, conserved.Detail)
}

// TestCheckCorrupted corrupts a seeded database one way at a time, inside a
// transaction that is rolled back, and checks through that transaction that
// exactly the invariants the corruption breaks are reported VIOLATED.
func TestCheckCorrupted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := pgtest.NewPool(t)
	seed(ctx, t, db)

	withTotals := invariant.Options{StockTotals: stockTotals}
	cases := []struct {
		name     string
		corrupt  string
		opts     invariant.Options
		violated []string // exactly these; the others must hold
		mention  string   // a detail line of the first violated invariant contains this
	}{{
		name:     "stock appears from nowhere",
		corrupt:  `UPDATE ordertimeout.stock SET available = available + 1 WHERE sku = 'A'`,
		opts:     withTotals,
		violated: []string{invariant.Conserved},
		mention:  "sku A: available",
	}, {
		name:    "stock appears from nowhere, no totals given",
		corrupt: `UPDATE ordertimeout.stock SET available = available + 1 WHERE sku = 'A'`,
	}, {
		name:     "reserved stock drifts",
		corrupt:  `UPDATE ordertimeout.stock SET reserved = reserved + 1, available = available - 1 WHERE sku = 'B'`,
		violated: []string{invariant.Conserved},
		mention:  "sku B: reserved",
	}, {
		name:     "release row deleted",
		corrupt:  `DELETE FROM ordertimeout.releases WHERE order_id = 'o-cancelled' AND kind = 'stock' AND resource_id = 'A'`,
		opts:     withTotals,
		violated: []string{invariant.ReleasedOnce},
		mention:  "order o-cancelled is CANCELLED but its item A (qty 1) has no stock release",
	}, {
		name: "stock released twice",
		corrupt: `ALTER TABLE ordertimeout.releases DROP CONSTRAINT releases_once_per_resource;
		          INSERT INTO ordertimeout.releases SELECT * FROM ordertimeout.releases
		           WHERE order_id = 'o-cancelled' AND kind = 'stock' AND resource_id = 'B'`,
		opts:     withTotals,
		violated: []string{invariant.ReleasedOnce},
		mention:  "stock of B released 2 times for order o-cancelled",
	}, {
		name:     "coupon of a cancelled order not released",
		corrupt:  `UPDATE ordertimeout.coupon_holds SET released_at = NULL WHERE order_id = 'o-cancelled'`,
		opts:     withTotals,
		violated: []string{invariant.ReleasedOnce},
		mention:  "hold of coupon C-cancelled",
	}, {
		name:     "coupon held for an order that names none",
		corrupt:  `INSERT INTO ordertimeout.coupon_holds (order_id, coupon_id, held_at) VALUES ('o-closed', 'C-stray', now())`,
		opts:     withTotals,
		violated: []string{invariant.ReleasedOnce},
		mention:  "order o-closed holds coupon C-stray but names NULL",
	}, {
		name:     "coupon of a purged order released but not spent",
		corrupt:  `UPDATE ordertimeout.coupon_holds SET used_at = NULL, released_at = now() WHERE order_id = 'o-purged'`,
		opts:     withTotals,
		violated: []string{invariant.ReleasedOnce},
		mention:  "order o-purged is missing but its hold of coupon C-purged",
	}, {
		name:     "sold drifts from what the purged orders bought",
		corrupt:  `UPDATE ordertimeout.purged_sales SET qty = qty + 1 WHERE sku = 'C'`,
		opts:     withTotals,
		violated: []string{invariant.Conserved},
		mention:  "and purged ones 2",
	}, {
		name: "coupon held by two orders",
		corrupt: `DROP INDEX ordertimeout.coupon_holds_one_live_order;
		          INSERT INTO ordertimeout.coupon_holds (order_id, coupon_id, held_at) VALUES ('o-paying', 'C-pending', now())`,
		opts:     withTotals,
		violated: []string{invariant.Conserved, invariant.ReleasedOnce},
		mention:  "coupon C-pending is held by 2 orders at once: o-paying, o-pending",
	}, {
		name:     "points held drift",
		corrupt:  `UPDATE ordertimeout.points_accounts SET held = held + 5 WHERE account_id = 'acct-1'`,
		opts:     withTotals,
		violated: []string{invariant.Conserved},
		mention:  "points account acct-1: held 105 but live holds add up to 100",
	}, {
		name: "cancelled order marked paid",
		corrupt: `UPDATE ordertimeout.orders SET status = 'PAID', paid_at = now(), cancelled_at = NULL
		           WHERE order_id = 'o-cancelled'`,
		opts:     withTotals,
		violated: []string{invariant.PaidXorCancelled, invariant.ReleasedOnce, invariant.Conserved},
		mention:  "order o-cancelled is PAID but its",
	}, {
		name: "paid and cancelled once the constraint is gone",
		corrupt: `ALTER TABLE ordertimeout.orders DROP CONSTRAINT orders_not_paid_and_cancelled;
		          UPDATE ordertimeout.orders SET paid_at = now() WHERE order_id = 'o-cancelled'`,
		opts:     withTotals,
		violated: []string{invariant.PaidXorCancelled},
		mention:  "order o-cancelled is CANCELLED with paid_at",
	}, {
		name:     "late payment without its conflict",
		corrupt:  `DELETE FROM ordertimeout.conflicts WHERE order_id = 'o-late-refund'`,
		opts:     withTotals,
		violated: []string{invariant.PaidXorCancelled},
		mention:  "payment p-late-refund of order o-late-refund is refunded but has no conflict row",
	}, {
		name:    "payment confirmed on a cancelled order",
		corrupt: `UPDATE ordertimeout.payments SET status = 'confirmed' WHERE payment_id = 'p-late-refund'`,
		opts:    withTotals,
		// and the refunded payment is no longer refunded
		violated: []string{invariant.PaidXorCancelled, invariant.ResolvedOnce},
		mention:  "payment p-late-refund is confirmed on order o-late-refund, which is CANCELLED",
	}, {
		name:     "paid by another amount",
		corrupt:  `UPDATE ordertimeout.payments SET amount = 12.49 WHERE payment_id = 'p-paid'`,
		opts:     withTotals,
		violated: []string{invariant.MoneyExact},
		mention:  "order o-paid of 12.5 EUR is PAID by payment p-paid of 12.49 EUR",
	}, {
		name:     "paid in another currency",
		corrupt:  `UPDATE ordertimeout.payments SET currency = 'USD' WHERE payment_id = 'p-paid'`,
		opts:     withTotals,
		violated: []string{invariant.MoneyExact},
		mention:  "by payment p-paid of 12.5 USD",
	}, {
		name:     "paid without an amount, not recorded as unverified",
		corrupt:  `UPDATE ordertimeout.events SET detail = detail - 'unverified' WHERE order_id = 'o-unverified'`,
		opts:     withTotals,
		violated: []string{invariant.MoneyExact},
		mention:  "order o-unverified of 3.5 EUR is PAID by payment p-unverified of no amount",
	}, {
		name: "NaN amount once the constraint is gone",
		corrupt: `ALTER DOMAIN ordertimeout.money_amount DROP CONSTRAINT money_amount_finite;
		          UPDATE ordertimeout.payments SET amount = 'NaN' WHERE payment_id = 'p-mismatch-1'`,
		opts:     withTotals,
		violated: []string{invariant.MoneyExact},
		mention:  "payment p-mismatch-1 of order o-mismatch has amount NaN",
	}, {
		name: "a reinstated payment refunded too",
		corrupt: `ALTER TABLE ordertimeout.conflicts DROP CONSTRAINT conflicts_refund_started_ends_refunded;
		          UPDATE ordertimeout.conflicts SET refund_started_at = now() WHERE payment_id = 'p-reinstated'`,
		opts:     withTotals,
		violated: []string{invariant.ResolvedOnce},
		mention:  "is resolved with resolution reinstated, claimed for a refund",
	}, {
		name: "resolved twice",
		corrupt: `INSERT INTO ordertimeout.events (order_id, from_status, to_status, cause, actor, at, detail)
		          SELECT e.order_id, e.from_status, e.to_status, e.cause, e.actor, e.at,
		                 jsonb_set(e.detail, '{resolution}', '"manual"')
		            FROM ordertimeout.events AS e
		           WHERE e.order_id = 'o-late-refund' AND e.detail ->> 'resolution' = 'refunded'`,
		opts:     withTotals,
		violated: []string{invariant.ResolvedOnce},
		mention:  "and 2 resolution event(s)",
	}, {
		name: "refunded payment of a conflict resolved otherwise",
		corrupt: `ALTER TABLE ordertimeout.conflicts DROP CONSTRAINT conflicts_refund_started_ends_refunded;
		          UPDATE ordertimeout.conflicts SET resolution = 'manual' WHERE payment_id = 'p-late-refund';
		          UPDATE ordertimeout.events SET detail = jsonb_set(detail, '{resolution}', '"manual"')
		           WHERE order_id = 'o-late-refund' AND detail ->> 'resolution' = 'refunded'`,
		opts: withTotals,
		// claimed for a refund and resolved manual: both probes of the invariant
		violated: []string{invariant.ResolvedOnce},
		mention:  "claimed for a refund",
	}, {
		name:     "closed with an open conflict",
		corrupt:  `UPDATE ordertimeout.orders SET status = 'CLOSED', closed_at = now() WHERE order_id = 'o-late-open'`,
		opts:     withTotals,
		violated: []string{invariant.ClosedSettled},
		mention:  "order o-late-open is CLOSED with conflict",
	}, {
		name: "pending order overdue",
		corrupt: `UPDATE ordertimeout.orders
		             SET created_at = now() - interval '2 hours',
		                 expire_at = now() - interval '1 hour',
		                 cancel_at = now() - interval '1 hour'
		           WHERE order_id = 'o-pending'`,
		opts:     invariant.Options{StockTotals: stockTotals, Slack: time.Minute},
		violated: []string{invariant.NoOverduePending},
		mention:  "order o-pending is PENDING",
	}, {
		name: "pending order overdue, no slack given",
		corrupt: `UPDATE ordertimeout.orders
		             SET created_at = now() - interval '2 hours',
		                 expire_at = now() - interval '1 hour',
		                 cancel_at = now() - interval '1 hour'
		           WHERE order_id = 'o-pending'`,
		opts: withTotals,
	}}

	// One after the other: they share the seeded database, and some take
	// table locks.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tx, err := db.Begin(ctx)
			require.NoError(t, err)
			defer func() { require.NoError(t, tx.Rollback(ctx)) }()

			_, err = tx.Exec(ctx, tc.corrupt)
			require.NoError(t, err)
			report, err := invariant.Check(ctx, tx, tc.opts)
			require.NoError(t, err)
			t.Logf("report:\n%s", report)

			requireViolations(t, report, tc.violated...)
			if len(tc.violated) > 0 {
				res, _ := report.Result(tc.violated[0])
				require.Contains(t, strings.Join(res.Detail, "\n"), tc.mention)
				require.Contains(t, report.String(), "VIOLATED "+tc.violated[0]+"\n")
			}
		})
	}

	// Every corruption was rolled back.
	report, err := invariant.Check(ctx, db, invariant.Options{StockTotals: stockTotals, Slack: time.Minute})
	require.NoError(t, err)
	require.True(t, report.OK(), report.String())
}

// TestCheckDetailTruncated: a violation with many offenders keeps the first
// few.
func TestCheckDetailTruncated(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := pgtest.NewPool(t)

	_, err := db.Exec(ctx, `SELECT ordertimeout.put_stock('S' || i, 10) FROM generate_series(1, 8) AS i`)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE ordertimeout.stock SET sold = 1`)
	require.NoError(t, err)

	report, err := invariant.Check(ctx, db, invariant.Options{})
	require.NoError(t, err)
	requireViolations(t, report, invariant.Conserved)
	res, _ := report.Result(invariant.Conserved)
	require.Len(t, res.Detail, 6)
	require.Equal(t, "sku S1: sold 1 but paid orders bought 0", res.Detail[0])
	require.Equal(t, "(more not shown)", res.Detail[5])
}

// requireViolations requires that exactly the invariants named are violated,
// each with some detail, and that every other one in report holds.
func requireViolations(t *testing.T, report invariant.Report, names ...string) {
	t.Helper()
	var violated []string
	for _, res := range report.Results {
		if !res.OK {
			violated = append(violated, res.Name)
			require.NotEmpty(t, res.Detail, res.Name)
		} else {
			require.Empty(t, res.Detail, res.Name)
		}
	}
	require.ElementsMatch(t, names, violated, report.String())
	require.Equal(t, len(names) == 0, report.OK())
}
