// Package invariant checks the money-safety invariants of ordertimeout
// (docs/design.md) against a live database: no order both paid and cancelled,
// every reservation released exactly once when its order is cancelled, stock,
// points and coupons conserved, optionally no PENDING order left past its
// deadline, money exact (an order paid only by its own amount and currency,
// no NaN or infinite amounts), every conflict resolved at most once (a
// refunded payment never pays its order), and no CLOSED order with an open
// conflict.
//
// The race, fault and model tests, the benchmark, the demo and the soak test
// call Check after (or while) they run:
//
//	report, err := invariant.Check(ctx, pool, invariant.Options{StockTotals: totals})
//	if err != nil { ... }
//	if !report.OK() { t.Fatal(report) }
//
// The package is public on purpose, as River ships rivertest: a shop's own
// tests of code that calls ordertimeout can end with Check, and an operator
// can run it against a replica or a restored backup (it only reads). It is
// the one checker of these invariants in this repository; tests/internal/
// dbstate checks only what needs a full read (event logs, points balances).
//
// Every check is one SQL statement, so it sees one snapshot of the database
// even on a pool with work in flight: a check never reports a violation that
// only exists between two concurrent commits.
package invariant

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Names of the invariants, in the order of docs/design.md and of Report.Results.
const (
	// PaidXorCancelled: no order is both paid and cancelled; money confirmed
	// for an order that cannot take it exists only as a conflict row.
	PaidXorCancelled = "paid_xor_cancelled"
	// ReleasedOnce: every cancelled order has released exactly what it
	// reserved (its items, its coupon, its points), once; no other order has
	// anything released.
	ReleasedOnce = "released_once"
	// Conserved: per SKU, reserved and sold match the live and paid orders
	// (sold also what purged paid orders bought: ordertimeout.purged_sales)
	// and the total is what the caller expects; per points account, held matches
	// the live holds; every coupon is held by at most one order.
	Conserved = "conserved"
	// NoOverduePending: no PENDING order is past its cancel_at by more than
	// Options.Slack. Checked only when Slack is set.
	NoOverduePending = "no_overdue_pending"
	// MoneyExact: a PAID order's confirmed payment is of the order's amount
	// and currency, when the order has them (a payment confirmed without an
	// amount is let through only when its event records it as unverified);
	// no order, payment or conflict has an amount that is NaN, infinite,
	// negative or 10^15 or more.
	MoneyExact = "money_exact"
	// ResolvedOnce: a conflict's state and resolution agree; a resolved
	// conflict has exactly one resolution event and an unresolved one none;
	// a conflict claimed for a refund ends refunded (or is still refunding);
	// a payment refunded, or claimed for a refund, is never the payment that
	// pays its order, and a refunded payment's conflict is resolved refunded.
	ResolvedOnce = "resolved_once"
	// ClosedSettled: no CLOSED order has an unresolved (open or refunding)
	// conflict.
	ClosedSettled = "closed_settled"
)

// maxDetail is how many offending rows a Result keeps per invariant.
const maxDetail = 5

// DB is what Check reads through. *pgxpool.Pool, *pgx.Conn and pgx.Tx
// satisfy it.
type DB interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Options tunes Check. The zero value checks everything that needs no
// knowledge from the caller.
type Options struct {
	// StockTotals maps every SKU to the units it must have in all
	// (available + reserved + sold): what the caller put with put_stock. A
	// SKU in the database missing from the map, or the other way round, is a
	// violation. If nil, only the identities that need no total are checked
	// (reserved and sold against the orders).
	StockTotals map[string]int64
	// Slack is how far past its cancel_at a PENDING order may be (the sweep
	// interval plus whatever delay the caller tolerates). If zero, the
	// NoOverduePending invariant is not checked and not reported.
	Slack time.Duration
}

// Check runs every probe against db in one statement and returns one Result
// per invariant. A violation is not an error: err is set only when the
// database could not be read.
func Check(ctx context.Context, db DB, opts Options) (Report, error) {
	var skus []string
	var totals []int64
	if opts.StockTotals != nil {
		skus = make([]string, 0, len(opts.StockTotals))
		totals = make([]int64, 0, len(opts.StockTotals))
		for sku, total := range opts.StockTotals {
			skus = append(skus, sku)
			totals = append(totals, total)
		}
	}
	// A nil slice is sent as SQL NULL: "no totals given".
	var skusArg, totalsArg any
	if opts.StockTotals != nil {
		skusArg, totalsArg = skus, totals
	}

	rows, err := db.Query(ctx, checkSQL, skusArg, totalsArg, opts.Slack.Microseconds())
	if err != nil {
		return Report{}, fmt.Errorf("check invariants: %w", err)
	}
	found := make(map[string][]string)
	for rows.Next() {
		var index int
		var detail string
		if err := rows.Scan(&index, &detail); err != nil {
			rows.Close()
			return Report{}, fmt.Errorf("check invariants: read row: %w", err)
		}
		name := probes[index].invariant
		found[name] = append(found[name], detail)
	}
	if err := rows.Err(); err != nil {
		return Report{}, fmt.Errorf("check invariants: %w", err)
	}

	names := []string{PaidXorCancelled, ReleasedOnce, Conserved}
	if opts.Slack > 0 {
		names = append(names, NoOverduePending)
	}
	names = append(names, MoneyExact, ResolvedOnce, ClosedSettled)
	report := Report{Results: make([]Result, 0, len(names))}
	for _, name := range names {
		detail := found[name]
		if len(detail) > maxDetail {
			detail = append(detail[:maxDetail:maxDetail], "(more not shown)")
		}
		report.Results = append(report.Results, Result{Name: name, OK: len(detail) == 0, Detail: detail})
	}
	return report, nil
}

// probe is one query finding offenders against an invariant: one text
// column, one row per offending order, SKU, account or coupon. Parameters:
// $1 text[] SKUs and $2 bigint[] their expected totals (both NULL when the
// caller gave none), $3 bigint the slack in microseconds (0: not checked).
type probe struct {
	invariant string
	sql       string
}

var probes = []probe{
	// 1. No order both paid and cancelled.
	{PaidXorCancelled, `
SELECT format('order %s is %s with paid_at %L and cancelled_at %L', o.order_id, o.status, o.paid_at, o.cancelled_at)
FROM ordertimeout.orders AS o
WHERE (o.paid_at IS NOT NULL AND o.cancelled_at IS NOT NULL)
   OR (o.status IN ('PAID', 'REFUNDED') AND (o.paid_at IS NULL OR o.cancelled_at IS NOT NULL))
   OR (o.status IN ('CANCELLED', 'CLOSED') AND (o.cancelled_at IS NULL OR o.paid_at IS NOT NULL))
ORDER BY o.order_id`},
	{PaidXorCancelled, `
SELECT 'constraint orders_not_paid_and_cancelled is missing or not validated'
WHERE NOT EXISTS (SELECT 1
                    FROM pg_catalog.pg_constraint AS c
                   WHERE c.conrelid = 'ordertimeout.orders'::regclass
                     AND c.conname = 'orders_not_paid_and_cancelled'
                     AND c.contype = 'c'
                     AND c.convalidated)`},
	{PaidXorCancelled, `
SELECT format('order %s is %s but its %s release of %s is not reclaimed', o.order_id, o.status, r.kind, r.resource_id)
FROM ordertimeout.releases AS r
JOIN ordertimeout.orders AS o ON o.order_id = r.order_id
WHERE o.status IN ('PAID', 'REFUNDED')
  AND r.reclaimed_at IS NULL
ORDER BY o.order_id, r.kind, r.resource_id`},
	{PaidXorCancelled, `
SELECT format('payment %s of order %s is %s but has no conflict row', p.payment_id, p.order_id, p.status)
FROM ordertimeout.payments AS p
WHERE p.status IN ('late', 'refunded')
  AND NOT EXISTS (SELECT 1
                    FROM ordertimeout.conflicts AS c
                   WHERE c.payment_id = p.payment_id
                     AND c.order_id = p.order_id)
ORDER BY p.payment_id`},
	{PaidXorCancelled, `
SELECT format('payment %s is confirmed on order %s, which is %s: money kept outside a conflict', p.payment_id, o.order_id, o.status)
FROM ordertimeout.payments AS p
JOIN ordertimeout.orders AS o ON o.order_id = p.order_id
WHERE p.status = 'confirmed'
  AND o.status NOT IN ('PAID', 'REFUNDED')
ORDER BY p.payment_id`},
	{PaidXorCancelled, `
SELECT format('order %s is PAID with %s confirmed payments, want 1', o.order_id, count(p.payment_id))
FROM ordertimeout.orders AS o
LEFT JOIN ordertimeout.payments AS p ON p.order_id = o.order_id AND p.status = 'confirmed'
WHERE o.status = 'PAID'
GROUP BY o.order_id
HAVING count(p.payment_id) <> 1
ORDER BY o.order_id`},
	{PaidXorCancelled, `
SELECT format('conflict %s (%s, payment %s) is on order %s, which is %s', c.conflict_id, c.kind, c.payment_id, o.order_id, o.status)
FROM ordertimeout.conflicts AS c
JOIN ordertimeout.orders AS o ON o.order_id = c.order_id
WHERE (c.kind = 'late_payment'
       AND o.status NOT IN ('CANCELLED', 'CLOSED')
       AND NOT EXISTS (SELECT 1
                         FROM ordertimeout.conflicts AS r
                        WHERE r.order_id = c.order_id
                          AND r.resolution = 'reinstated'))
   OR (c.kind = 'double_payment' AND o.status NOT IN ('PAID', 'REFUNDED'))
ORDER BY c.conflict_id`},

	// 2. Every cancelled order released what it reserved, once; nothing else
	// was released.
	{ReleasedOnce, `
SELECT format('order %s is %s but its item %s (qty %s) has %s', o.order_id, o.status, i.sku, i.qty,
              CASE WHEN r.order_id IS NULL THEN 'no stock release'
                   WHEN r.reclaimed_at IS NOT NULL THEN 'a reclaimed stock release'
                   ELSE format('a stock release of qty %s', r.qty) END)
FROM ordertimeout.orders AS o
JOIN ordertimeout.order_items AS i ON i.order_id = o.order_id
LEFT JOIN ordertimeout.releases AS r
       ON r.order_id = i.order_id AND r.kind = 'stock' AND r.resource_id = i.sku
WHERE o.status IN ('CANCELLED', 'CLOSED')
  AND (r.order_id IS NULL OR r.reclaimed_at IS NOT NULL OR r.qty <> i.qty)
ORDER BY o.order_id, i.sku`},
	{ReleasedOnce, `
SELECT format('%s release of %s (qty %s) for order %s matches no %s of it', r.kind, r.resource_id, r.qty, r.order_id,
              CASE r.kind WHEN 'stock' THEN 'item' ELSE r.kind || ' hold' END)
FROM ordertimeout.releases AS r
WHERE (r.kind = 'stock' AND NOT EXISTS (SELECT 1
                                          FROM ordertimeout.order_items AS i
                                         WHERE i.order_id = r.order_id
                                           AND i.sku = r.resource_id
                                           AND i.qty = r.qty))
   OR (r.kind = 'coupon' AND NOT EXISTS (SELECT 1
                                           FROM ordertimeout.coupon_holds AS h
                                          WHERE h.order_id = r.order_id
                                            AND h.coupon_id = r.resource_id
                                            AND r.qty = 1))
   OR (r.kind = 'points' AND NOT EXISTS (SELECT 1
                                           FROM ordertimeout.points_holds AS h
                                          WHERE h.order_id = r.order_id
                                            AND h.account_id = r.resource_id
                                            AND h.points = r.qty))
ORDER BY r.order_id, r.kind, r.resource_id`},
	{ReleasedOnce, `
SELECT format('order %s is %s but has a%s %s release of %s', r.order_id, coalesce(o.status, 'missing'),
              CASE WHEN r.reclaimed_at IS NULL THEN 'n unreclaimed' ELSE ' reclaimed' END, r.kind, r.resource_id)
FROM ordertimeout.releases AS r
LEFT JOIN ordertimeout.orders AS o ON o.order_id = r.order_id
WHERE NOT coalesce((o.status IN ('CANCELLED', 'CLOSED') AND r.reclaimed_at IS NULL)
                   OR (o.status IN ('PAID', 'REFUNDED') AND r.reclaimed_at IS NOT NULL), false)
ORDER BY r.order_id, r.kind, r.resource_id`},
	{ReleasedOnce, `
SELECT format('%s of %s released %s times for order %s', r.kind, r.resource_id, count(*), r.order_id)
FROM ordertimeout.releases AS r
GROUP BY r.order_id, r.kind, r.resource_id
HAVING count(*) > 1
ORDER BY r.order_id, r.kind, r.resource_id`},
	{ReleasedOnce, `
SELECT format('order %s is %s but its hold of coupon %s has used_at %L, released_at %L and %s live release row(s)',
              h.order_id, coalesce(o.status, 'missing'), h.coupon_id, h.used_at, h.released_at, r.n)
FROM ordertimeout.coupon_holds AS h
LEFT JOIN ordertimeout.orders AS o ON o.order_id = h.order_id
CROSS JOIN LATERAL (SELECT count(*) AS n
                      FROM ordertimeout.releases AS r
                     WHERE r.order_id = h.order_id
                       AND r.kind = 'coupon'
                       AND r.resource_id = h.coupon_id
                       AND r.reclaimed_at IS NULL) AS r
WHERE NOT CASE
          WHEN o.status IN ('PENDING', 'PAYING') THEN h.used_at IS NULL AND h.released_at IS NULL AND r.n = 0
          WHEN o.status IN ('PAID', 'REFUNDED') THEN h.used_at IS NOT NULL AND h.released_at IS NULL AND r.n = 0
          WHEN o.status IN ('CANCELLED', 'CLOSED') THEN h.used_at IS NULL AND h.released_at IS NOT NULL AND r.n = 1
          -- no order: purge_orders keeps the hold of a coupon its order spent
          WHEN o.order_id IS NULL THEN h.used_at IS NOT NULL AND h.released_at IS NULL AND r.n = 0
          ELSE false
      END
ORDER BY h.order_id`},
	{ReleasedOnce, `
SELECT format('order %s is %s but its hold of %s points of account %s has used_at %L, released_at %L and %s live release row(s)',
              h.order_id, coalesce(o.status, 'missing'), h.points, h.account_id, h.used_at, h.released_at, r.n)
FROM ordertimeout.points_holds AS h
LEFT JOIN ordertimeout.orders AS o ON o.order_id = h.order_id
CROSS JOIN LATERAL (SELECT count(*) AS n
                      FROM ordertimeout.releases AS r
                     WHERE r.order_id = h.order_id
                       AND r.kind = 'points'
                       AND r.resource_id = h.account_id
                       AND r.qty = h.points
                       AND r.reclaimed_at IS NULL) AS r
WHERE NOT CASE
          WHEN o.status IN ('PENDING', 'PAYING') THEN h.used_at IS NULL AND h.released_at IS NULL AND r.n = 0
          WHEN o.status IN ('PAID', 'REFUNDED') THEN h.used_at IS NOT NULL AND h.released_at IS NULL AND r.n = 0
          WHEN o.status IN ('CANCELLED', 'CLOSED') THEN h.used_at IS NULL AND h.released_at IS NOT NULL AND r.n = 1
          ELSE false
      END
ORDER BY h.order_id`},
	{ReleasedOnce, `
SELECT format('order %s names coupon %L but has no hold of it', o.order_id, o.coupon_id)
FROM ordertimeout.orders AS o
WHERE o.coupon_id IS NOT NULL
  AND NOT EXISTS (SELECT 1
                    FROM ordertimeout.coupon_holds AS h
                   WHERE h.order_id = o.order_id
                     AND h.coupon_id = o.coupon_id)
UNION ALL
SELECT format('order %s names %s points of account %L but has no such points hold', o.order_id, o.points, o.points_account)
FROM ordertimeout.orders AS o
WHERE o.points_account IS NOT NULL
  AND NOT EXISTS (SELECT 1
                    FROM ordertimeout.points_holds AS h
                   WHERE h.order_id = o.order_id
                     AND h.account_id = o.points_account
                     AND h.points = o.points)
UNION ALL
SELECT format('order %s holds coupon %s but names %L', h.order_id, h.coupon_id, o.coupon_id)
FROM ordertimeout.coupon_holds AS h
JOIN ordertimeout.orders AS o ON o.order_id = h.order_id
WHERE o.coupon_id IS DISTINCT FROM h.coupon_id
UNION ALL
SELECT format('order %s holds %s points of account %s but names %s points of %L', h.order_id, h.points, h.account_id,
              coalesce(o.points::text, 'no'), o.points_account)
FROM ordertimeout.points_holds AS h
JOIN ordertimeout.orders AS o ON o.order_id = h.order_id
WHERE o.points_account IS DISTINCT FROM h.account_id
   OR o.points IS DISTINCT FROM h.points`},

	// 3. Stock, points and coupons conserved.
	{Conserved, `
SELECT format('sku %s: %s', s.sku,
              concat_ws('; ',
                        CASE WHEN s.reserved <> coalesce(t.live, 0)
                             THEN format('reserved %s but live orders hold %s', s.reserved, coalesce(t.live, 0)) END,
                        CASE WHEN s.sold <> coalesce(t.paid, 0) + coalesce(ps.qty, 0)
                             THEN format('sold %s but paid orders bought %s%s', s.sold, coalesce(t.paid, 0),
                                         CASE WHEN ps.qty IS NOT NULL THEN format(' and purged ones %s', ps.qty) ELSE '' END)
                        END))
FROM ordertimeout.stock AS s
LEFT JOIN (SELECT i.sku,
                  sum(i.qty) FILTER (WHERE o.status IN ('PENDING', 'PAYING')) AS live,
                  sum(i.qty) FILTER (WHERE o.status IN ('PAID', 'REFUNDED')) AS paid
             FROM ordertimeout.order_items AS i
             JOIN ordertimeout.orders AS o ON o.order_id = i.order_id
            GROUP BY i.sku) AS t ON t.sku = s.sku
-- what paid orders that purge_orders deleted bought
LEFT JOIN ordertimeout.purged_sales AS ps ON ps.sku = s.sku
WHERE s.reserved <> coalesce(t.live, 0)
   OR s.sold <> coalesce(t.paid, 0) + coalesce(ps.qty, 0)
ORDER BY s.sku`},
	{Conserved, `
SELECT format('order %s has %s of sku %s, which has no stock row', i.order_id, i.qty, i.sku)
FROM ordertimeout.order_items AS i
WHERE NOT EXISTS (SELECT 1 FROM ordertimeout.stock AS s WHERE s.sku = i.sku)
ORDER BY i.order_id, i.sku`},
	{Conserved, `
SELECT CASE
           WHEN s.sku IS NULL THEN format('sku %s: expected %s units in all, but it has no stock row', e.sku, e.total)
           WHEN e.sku IS NULL THEN format('sku %s: %s units in all, but no total was expected for it',
                                          s.sku, s.available + s.reserved + s.sold)
           ELSE format('sku %s: available %s + reserved %s + sold %s = %s units, expected %s',
                       s.sku, s.available, s.reserved, s.sold, s.available + s.reserved + s.sold, e.total)
       END
FROM ordertimeout.stock AS s
FULL JOIN unnest($1::text[], $2::bigint[]) AS e(sku, total) ON e.sku = s.sku
WHERE $1::text[] IS NOT NULL
  AND (s.available + s.reserved + s.sold) IS DISTINCT FROM e.total
ORDER BY coalesce(s.sku, e.sku)`},
	{Conserved, `
SELECT format('points account %s: held %s but live holds add up to %s', a.account_id, a.held, coalesce(h.live, 0))
FROM ordertimeout.points_accounts AS a
LEFT JOIN (SELECT h.account_id, sum(h.points) AS live
             FROM ordertimeout.points_holds AS h
            WHERE h.released_at IS NULL
              AND h.used_at IS NULL
            GROUP BY h.account_id) AS h ON h.account_id = a.account_id
WHERE a.held <> coalesce(h.live, 0)
ORDER BY a.account_id`},
	{Conserved, `
SELECT format('order %s holds %s points of account %s, which does not exist', h.order_id, h.points, h.account_id)
FROM ordertimeout.points_holds AS h
WHERE NOT EXISTS (SELECT 1 FROM ordertimeout.points_accounts AS a WHERE a.account_id = h.account_id)
ORDER BY h.order_id`},
	{Conserved, `
SELECT format('coupon %s is held by %s orders at once: %s', h.coupon_id, count(*), string_agg(h.order_id, ', ' ORDER BY h.order_id))
FROM ordertimeout.coupon_holds AS h
WHERE h.released_at IS NULL
GROUP BY h.coupon_id
HAVING count(*) > 1
ORDER BY h.coupon_id`},

	// 4. No PENDING order left past its deadline.
	{NoOverduePending, `
SELECT format('order %s is PENDING %s past its cancel_at %s%s', o.order_id, statement_timestamp() - o.cancel_at, o.cancel_at,
              CASE WHEN o.check_job_id IS NOT NULL THEN ' (waiting for its gateway check)' ELSE '' END)
FROM ordertimeout.orders AS o
WHERE $3::bigint > 0
  AND o.status = 'PENDING'
  AND o.cancel_at < statement_timestamp() - $3::bigint * interval '1 microsecond'
ORDER BY o.cancel_at, o.order_id`},

	// 6. Money is exact. (NaN compares equal to NaN and above every number in
	// PostgreSQL: the upper bound is what catches it.)
	{MoneyExact, `
SELECT format('order %s of %s %s is %s by payment %s of %s %s', o.order_id, o.amount, coalesce(o.currency, ''), o.status,
              p.payment_id, coalesce(p.amount::text, 'no amount (not recorded as unverified)'), coalesce(p.currency, ''))
FROM ordertimeout.orders AS o
JOIN ordertimeout.payments AS p ON p.order_id = o.order_id AND p.status = 'confirmed'
WHERE o.status IN ('PAID', 'REFUNDED')
  AND ((o.amount IS NOT NULL
        AND p.amount IS DISTINCT FROM o.amount
        AND NOT (p.amount IS NULL
                 AND EXISTS (SELECT 1
                               FROM ordertimeout.events AS e
                              WHERE e.order_id = o.order_id
                                AND e.to_status = 'PAID'
                                AND e.cause = 'payment'
                                AND e.detail ->> 'payment_id' = p.payment_id
                                AND e.detail -> 'unverified' = 'true'::jsonb)))
       OR (o.currency IS NOT NULL AND p.currency IS DISTINCT FROM o.currency))
ORDER BY o.order_id`},
	{MoneyExact, `
SELECT format('%s has amount %s', a.what, a.amount)
FROM (SELECT 'order ' || o.order_id, o.amount FROM ordertimeout.orders AS o WHERE o.amount IS NOT NULL
      UNION ALL
      SELECT format('payment %s of order %s', p.payment_id, p.order_id), p.amount
        FROM ordertimeout.payments AS p WHERE p.amount IS NOT NULL
      UNION ALL
      SELECT format('conflict %s of order %s', c.conflict_id, c.order_id), c.amount
        FROM ordertimeout.conflicts AS c WHERE c.amount IS NOT NULL) AS a(what, amount)
WHERE NOT (a.amount >= 0 AND a.amount < 1000000000000000)
ORDER BY a.what`},

	// 7. Every conflict ends in at most one resolution; a refund that started
	// is the one that finishes.
	{ResolvedOnce, `
SELECT format('conflict %s (%s on order %s) is %s with resolution %s%s and %s resolution event(s)%s',
              c.conflict_id, c.kind, c.order_id, c.state, coalesce(c.resolution, 'none'),
              CASE WHEN c.refund_started_at IS NOT NULL THEN ', claimed for a refund' ELSE '' END,
              e.resolutions, CASE WHEN e.claims > 1 THEN format(', %s refund claims', e.claims) ELSE '' END)
FROM ordertimeout.conflicts AS c
CROSS JOIN LATERAL (SELECT count(*) FILTER (WHERE e.detail ->> 'resolution' IN ('reinstated', 'refunded', 'manual')) AS resolutions,
                           count(*) FILTER (WHERE e.detail ->> 'resolution' = 'refunding') AS claims
                      FROM ordertimeout.events AS e
                     WHERE e.order_id = c.order_id
                       AND e.cause = 'conflict'
                       AND e.detail -> 'conflict_id' = to_jsonb(c.conflict_id)) AS e
WHERE c.state IS DISTINCT FROM 'open' AND c.state IS DISTINCT FROM 'refunding' AND c.state IS DISTINCT FROM 'resolved'
   OR (c.state = 'resolved') <> (c.resolution IS NOT NULL)
   OR (c.state = 'refunding') AND c.refund_started_at IS NULL
   OR c.refund_started_at IS NOT NULL AND c.state <> 'refunding' AND c.resolution IS DISTINCT FROM 'refunded'
   OR e.resolutions <> CASE WHEN c.resolution IS NULL THEN 0 ELSE 1 END
   OR e.claims > 1
ORDER BY c.conflict_id`},
	{ResolvedOnce, `
SELECT format('payment %s of order %s (%s) is %s, but conflict %s %s', p.payment_id, o.order_id, o.status, p.status,
              c.conflict_id,
              CASE WHEN p.status = 'confirmed' THEN 'was claimed for a refund (' || c.state || ' ' || coalesce(c.resolution, '') || ')'
                   ELSE 'is ' || c.state || ' ' || coalesce(c.resolution, '') END)
FROM ordertimeout.conflicts AS c
JOIN ordertimeout.payments AS p ON p.payment_id = c.payment_id
JOIN ordertimeout.orders AS o ON o.order_id = p.order_id
WHERE (p.status = 'confirmed' AND (c.refund_started_at IS NOT NULL OR c.resolution = 'refunded' OR c.refund_id IS NOT NULL))
   OR (p.status = 'refunded') <> (c.resolution IS NOT DISTINCT FROM 'refunded')
ORDER BY c.conflict_id`},

	// 8. No CLOSED order has an open conflict.
	{ClosedSettled, `
SELECT format('order %s is CLOSED with conflict %s (%s, payment %s) %s', o.order_id, c.conflict_id, c.kind, c.payment_id, c.state)
FROM ordertimeout.orders AS o
JOIN ordertimeout.conflicts AS c ON c.order_id = o.order_id
WHERE o.status = 'CLOSED'
  AND c.resolution IS NULL
ORDER BY o.order_id, c.conflict_id`},
}

// checkSQL runs every probe in one statement (one snapshot), each limited to
// one row more than a Result keeps, so that a truncated detail is known.
var checkSQL = func() string {
	parts := make([]string, len(probes))
	for i, p := range probes {
		parts[i] = fmt.Sprintf("(SELECT %d AS probe, d.detail FROM (%s\n) AS d(detail) LIMIT %d)", i, p.sql, maxDetail+1)
	}
	return "SELECT c.probe, c.detail FROM (\n" + strings.Join(parts, "\nUNION ALL\n") + "\n) AS c"
}()
