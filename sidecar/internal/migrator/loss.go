package migrator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// A loss is what rolling back one migration destroys for good, with a query
// that says whether the database holds any of it.
type loss struct {
	what  string
	query string
}

// losses are the migrations whose down drops tables or columns that hold
// data, rather than only functions, views, types and constraints.
var losses = map[uint]loss{
	61: {"the ids of orders purged lately (purged_orders: an hour, and while an order given such an id within 10 minutes of its purge lives): with them goes the refusal to reconcile a purged order's unseen payment as a new order's under its id",
		"SELECT EXISTS (SELECT 1 FROM ordertimeout.purged_orders)"},
	60: {"the refund ids of purged orders' conflicts (purged_refunds): with them goes the refusal of a refund already recorded for a purged conflict as another conflict's (OT177)",
		"SELECT EXISTS (SELECT 1 FROM ordertimeout.purged_refunds)"},
	58: {"which conflicts the sidecar handed to a person, when and why (conflicts.handed_over_at, handed_over_why): an open one would be the sidecar's again, which claims some refunds of them without asking the gateway",
		"SELECT EXISTS (SELECT 1 FROM ordertimeout.conflicts WHERE handed_over_at IS NOT NULL)"},
	55: {"the payment ids of purged orders (purged_payments): with them go the refusals of a late callback, or a new attempt, under the id of a purged order that a new order took (OT176)",
		"SELECT EXISTS (SELECT 1 FROM ordertimeout.purged_payments)"},
	31: {"the units sold by purged orders (purged_sales), which the stock conservation check counts",
		"SELECT EXISTS (SELECT 1 FROM ordertimeout.purged_sales)"},
	13: {"the notes of conflict resolutions (conflicts.note)",
		"SELECT EXISTS (SELECT 1 FROM ordertimeout.conflicts WHERE note IS NOT NULL)"},
	10: {"the reconciliation watermarks, the payment methods, each conflict's currency, state, cause and refund, each payment's currency, each order's payment method and gateway expiry, and the pause",
		`SELECT EXISTS (SELECT 1 FROM ordertimeout.reconcile_watermarks)
		     OR EXISTS (SELECT 1 FROM ordertimeout.conflicts) OR EXISTS (SELECT 1 FROM ordertimeout.payments)
		     OR EXISTS (SELECT 1 FROM ordertimeout.orders) OR ` + shopsMethods},
	9: {"the ordertimeout schema: every table (orders, stock, points balances, coupon holds, payments, conflicts, events), the payment methods and the settings",
		// Any row of any of its tables, but the rows every install has: the
		// settings, the sweep's own state, the three seeded payment methods
		// as seeded ($1, shopsMethods: a table that only 000010 makes, so
		// read only when pg_class lists it).
		`SELECT coalesce(bool_or((xpath('/row/held/text()', query_to_xml(
		            CASE WHEN c.relname = 'payment_methods'
		                 THEN $1
		                 ELSE format('SELECT EXISTS (SELECT 1 FROM %s) AS held', c.oid::regclass) END,
		            false, true, '')))[1]::text::boolean), false)
		   FROM pg_class AS c
		  WHERE c.relnamespace = 'ordertimeout'::regnamespace AND c.relkind IN ('r', 'p')
		    AND c.relname NOT IN ('settings', 'sweep_state', 'scan_state', 'rescue_state')`},
	2: {"River's job table (river_job) with every job, timers included",
		"SELECT EXISTS (SELECT 1 FROM public.river_job)"},
}

// shopsMethods says whether the payment methods are other than the three
// that 000010 seeds, as it seeds them: a method of the shop's own, or a seed
// it changed.
const shopsMethods = `EXISTS (SELECT method, paying_window, gateway_close, late_payment FROM ordertimeout.payment_methods
	EXCEPT VALUES ('card', interval '15 minutes', true, NULL::text), ('qr', interval '2 hours', true, NULL),
	              ('bank_transfer', interval '3 days', false, 'refund'))`

// checkLoss refuses to roll back from version current down to version target
// when a migration in between would drop data the database holds: each is
// named with what would be lost.
func (g *Migrator) checkLoss(current, target uint) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, g.url)
	if err != nil {
		return fmt.Errorf("connect for the rollback's check: %w", err)
	}
	defer conn.Close(ctx)
	var versions []uint
	for v := range losses {
		if v > target && v <= current {
			versions = append(versions, v)
		}
	}
	slices.Sort(versions)
	slices.Reverse(versions)
	var lost []string
	for _, v := range versions {
		var held bool
		var args []any
		if v == 9 {
			// The table is read by name in 000009's query: it exists
			// only from 000010 on.
			args = append(args, "SELECT "+shopsMethods+" AS held")
		}
		if err := conn.QueryRow(ctx, losses[v].query, args...).Scan(&held); err != nil {
			return fmt.Errorf("check what rolling back migration %d would drop: %w", v, err)
		}
		if held {
			lost = append(lost, fmt.Sprintf("%06d drops %s", v, losses[v].what))
		}
	}
	if len(lost) == 0 {
		return nil
	}
	return fmt.Errorf("migrate down to version %d would drop data this database holds: %s; nothing was rolled back (give --drop-data to roll back anyway)",
		target, strings.Join(lost, "; "))
}
