// Package outcome checks "nothing lost, nothing twice" after a fault test or
// a soak run, on top of the money-safety invariants of package invariant:
// every cancelled order was cancelled exactly once (one PENDING → CANCELLED
// event), orders the caller knows were paid in time were never cancelled,
// orders the caller knows nobody paid were cancelled, every order whose
// creation was acknowledged exists, and once the work is done nothing is left
// PENDING, PAYING or in an unresolved conflict.
//
//	rep, err := outcome.Check(ctx, pool, outcome.Expect{Created: ids, Paid: paid, Settled: true})
//	if !rep.OK() { t.Fatal(rep) }
//
// Every check is one SQL statement, like package invariant's.
package outcome

import (
	"context"
	"fmt"
	"strings"

	"github.com/ordertimeout/ordertimeout/sidecar/invariant"
)

// maxDetail is how many offending orders a Report keeps per check.
const maxDetail = 5

// Expect is what the caller knows about its orders. Every field is optional.
type Expect struct {
	// Created are orders whose create_order call returned: each must exist
	// (an acknowledged commit is never lost).
	Created []string
	// Paid are orders whose payment was confirmed before their deadline:
	// each must be PAID and must never have been cancelled.
	Paid []string
	// Cancelled are orders nobody paid: each must be CANCELLED.
	Cancelled []string
	// Settled says the work is done: no order may still be PENDING or
	// PAYING, no conflict unresolved.
	Settled bool
}

// Check names, in the order of Report.Checks. A transition into CANCELLED is
// an event with to_status CANCELLED from a live status: a late payment logs a
// CANCELLED -> CANCELLED event on a cancelled order and CLOSED -> CANCELLED on
// a closed one (it reopens it), and neither is a cancel.
const (
	CancelledOnce  = "cancelled_once"  // one PENDING -> CANCELLED transition per cancelled order, never two
	NothingLost    = "nothing_lost"    // every acknowledged order exists
	PaidNotCancel  = "paid_not_cancel" // orders paid in time are PAID and were never cancelled
	UnpaidCancel   = "unpaid_cancel"   // orders nobody paid are CANCELLED
	NothingPending = "nothing_pending" // with Settled: no PENDING or PAYING order, no unresolved conflict is left
)

// Result is the outcome of one check.
type Result struct {
	Name   string
	Count  int64    // offending orders
	Detail []string // the first few of them
}

// Report is the outcome of Check.
type Report struct {
	Checks []Result
}

// OK reports whether no check found an offending order.
func (r Report) OK() bool {
	for _, c := range r.Checks {
		if c.Count > 0 {
			return false
		}
	}
	return true
}

// Violations returns the number of offending orders over all checks.
func (r Report) Violations() int64 {
	var n int64
	for _, c := range r.Checks {
		n += c.Count
	}
	return n
}

// String prints one line per check, "ok" or "VIOLATED", its name and the
// number of offenders, then the first offenders, indented.
func (r Report) String() string {
	var b strings.Builder
	for _, c := range r.Checks {
		if c.Count == 0 {
			fmt.Fprintf(&b, "ok       %s\n", c.Name)
			continue
		}
		fmt.Fprintf(&b, "VIOLATED %s (%d orders)\n", c.Name, c.Count)
		for _, d := range c.Detail {
			fmt.Fprintf(&b, "         %s\n", d)
		}
	}
	return b.String()
}

type check struct {
	name string
	sql  string // offenders: one text column; $1 created, $2 paid, $3 cancelled (text[])
}

var checks = []check{
	{CancelledOnce, `
SELECT format('order %s was cancelled %s times (%s from PENDING)', e.order_id, count(*),
              count(*) FILTER (WHERE e.from_status = 'PENDING'))
FROM ordertimeout.events AS e
WHERE e.to_status = 'CANCELLED'
  AND (e.from_status IS NULL OR e.from_status NOT IN ('CANCELLED', 'CLOSED'))
GROUP BY e.order_id
HAVING count(*) <> 1 OR count(*) FILTER (WHERE e.from_status = 'PENDING') <> 1
UNION ALL
SELECT format('order %s is %s without a CANCELLED event', o.order_id, o.status)
FROM ordertimeout.orders AS o
WHERE o.status IN ('CANCELLED', 'CLOSED')
  AND NOT EXISTS (SELECT 1 FROM ordertimeout.events AS e
                   WHERE e.order_id = o.order_id AND e.to_status = 'CANCELLED')`},
	{NothingLost, `
SELECT format('order %s was acknowledged but does not exist', c.id)
FROM unnest($1::text[]) AS c(id)
WHERE NOT EXISTS (SELECT 1 FROM ordertimeout.orders AS o WHERE o.order_id = c.id)`},
	{PaidNotCancel, `
SELECT format('order %s was paid in time but is %s with %s CANCELLED event(s)', p.id, coalesce(o.status, 'missing'),
              (SELECT count(*) FROM ordertimeout.events AS e WHERE e.order_id = p.id AND e.to_status = 'CANCELLED'))
FROM unnest($2::text[]) AS p(id)
LEFT JOIN ordertimeout.orders AS o ON o.order_id = p.id
WHERE o.status IS DISTINCT FROM 'PAID'
   OR EXISTS (SELECT 1 FROM ordertimeout.events AS e WHERE e.order_id = p.id AND e.to_status = 'CANCELLED')`},
	{UnpaidCancel, `
SELECT format('order %s was never paid but is %s', u.id, coalesce(o.status, 'missing'))
FROM unnest($3::text[]) AS u(id)
LEFT JOIN ordertimeout.orders AS o ON o.order_id = u.id
WHERE o.status IS DISTINCT FROM 'CANCELLED'`},
	{NothingPending, `
SELECT format('order %s is still %s (cancel_at %s, paying_until %s, check job %s)', o.order_id, o.status,
              o.cancel_at, o.paying_until, o.check_job_id)
FROM ordertimeout.orders AS o
WHERE $4::boolean
  AND o.status IN ('PENDING', 'PAYING')
UNION ALL
SELECT format('conflict %s (%s, payment %s) on order %s is unresolved', c.conflict_id, c.kind, c.payment_id, c.order_id)
FROM ordertimeout.conflicts AS c
WHERE $4::boolean
  AND c.resolution IS NULL`},
}

// Check runs every check in one statement and returns a Report. A violation
// is not an error: err is set only when the database could not be read.
func Check(ctx context.Context, db invariant.DB, want Expect) (Report, error) {
	parts := make([]string, len(checks))
	for i, c := range checks {
		parts[i] = fmt.Sprintf("(SELECT %d AS check_no, d.detail FROM (%s\n) AS d(detail))", i, c.sql)
	}
	sql := "SELECT c.check_no, c.detail FROM (\n" + strings.Join(parts, "\nUNION ALL\n") + "\n) AS c"
	rows, err := db.Query(ctx, sql, nonNil(want.Created), nonNil(want.Paid), nonNil(want.Cancelled), want.Settled)
	if err != nil {
		return Report{}, fmt.Errorf("check outcomes: %w", err)
	}
	defer rows.Close()
	rep := Report{Checks: make([]Result, len(checks))}
	for i, c := range checks {
		rep.Checks[i].Name = c.name
	}
	for rows.Next() {
		var i int
		var detail string
		if err := rows.Scan(&i, &detail); err != nil {
			return Report{}, fmt.Errorf("check outcomes: read row: %w", err)
		}
		r := &rep.Checks[i]
		r.Count++
		if len(r.Detail) < maxDetail {
			r.Detail = append(r.Detail, detail)
		}
	}
	if err := rows.Err(); err != nil {
		return Report{}, fmt.Errorf("check outcomes: %w", err)
	}
	return rep, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
