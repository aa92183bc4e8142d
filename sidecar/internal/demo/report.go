package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/fakegateway"
	"github.com/ordertimeout/ordertimeout/sidecar/invariant"
)

// clock is how the report shows a moment.
const clock = "15:04:05.000"

// overdueSlack is how far past its cancel_at a PENDING order may be when the
// invariants are checked: the sweep's longest sleep plus a gateway check.
const overdueSlack = 5 * time.Second

// Result is what a demo run did, read back from the database.
type Result struct {
	Elapsed  time.Duration
	Settled  bool             // every order ended PAID or CANCELLED and no conflict is open
	ByStatus map[string]int64 // orders per status
	Placed   int              // background orders placed
	Refused  int              // background orders refused: out of stock

	Timeout, Grace, PayingWindow time.Duration // the deadlines the run configured

	PaidByCallback int64 // confirmed by the gateway's callback
	PaidByCheck    int64 // found paid by the sidecar's gateway check
	Reinstated     int64 // paid by a late payment after their cancel
	// PaidByReconcile were found paid in the gateway's records (their
	// callback never came).
	PaidByReconcile int64

	CancelledAtDeadline int64 // cancelled by the sweep at their deadline
	CancelledAfterCheck int64 // cancelled once the gateway said they were not paid

	Timeouts      int64    // timeout cancels, including those later reinstated
	CaughtBySweep int64    // of which found without their timer row
	LagP50        *float64 // cancel lag of those (cancelled_at - cancel_at), seconds
	LagP99        *float64
	LagMax        *float64

	Conflicts  map[string]int64 // by resolution: reinstated, refunded, manual, open
	Gateway    fakegateway.Stats
	Stock      []StockRow
	Points     []PointsRow
	Stories    []StoryResult
	Invariants invariant.Report
	Histories  []History
	Problems   []string // unexpected errors while the shop ran
}

// StockRow is one SKU at the end of the run.
type StockRow struct {
	SKU                       string
	Put                       int64
	Available, Reserved, Sold int64
}

// PointsRow is one loyalty account at the end of the run.
type PointsRow struct {
	Account       string
	Put           int64
	Balance, Held int64
}

// History is an order's events, for the report.
type History struct {
	OrderID string
	Title   string
	Events  []event
}

// OK reports whether every money-safety invariant holds.
func (r *Result) OK() bool { return r.Invariants.OK() }

// Story returns the result of the story called id.
func (r *Result) Story(id string) (StoryResult, bool) {
	for _, s := range r.Stories {
		if s.ID == id {
			return s, true
		}
	}
	return StoryResult{}, false
}

// collect reads the result of the run from the database and the gateway.
func collect(ctx context.Context, db *pgxpool.Pool, s *shop, stories []*story, elapsed time.Duration) (*Result, error) {
	r := &Result{Elapsed: elapsed, Timeout: s.timing.timeout, Grace: s.timing.grace, PayingWindow: s.timing.payingWindow}
	r.Placed, r.Refused, r.Problems = s.counts()

	snap, err := takeSnapshot(ctx, db)
	if err != nil {
		return nil, err
	}
	r.ByStatus, r.Settled = snap.byStatus, snap.settled()

	err = db.QueryRow(ctx, `
SELECT count(*),
       count(*) FILTER (WHERE l.cause = 'sweep'),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM l.lateness)),
       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM l.lateness)),
       max(extract(epoch FROM l.lateness))::float8
FROM ordertimeout.cancel_lag AS l`).Scan(&r.Timeouts, &r.CaughtBySweep, &r.LagP50, &r.LagP99, &r.LagMax)
	if err != nil {
		return nil, fmt.Errorf("read cancel lag: %w", err)
	}

	// How orders got paid (the actor of the event says who confirmed the
	// payment) and cancelled (cancel_checked records its reason).
	err = db.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE e.cause = 'payment' AND e.actor NOT LIKE 'sidecar:%'),
       count(*) FILTER (WHERE e.cause = 'payment' AND e.actor LIKE 'sidecar:%'),
       count(*) FILTER (WHERE e.cause = 'conflict'),
       count(*) FILTER (WHERE e.cause = 'reconcile')
FROM ordertimeout.events AS e
WHERE e.to_status = 'PAID'`).Scan(&r.PaidByCallback, &r.PaidByCheck, &r.Reinstated, &r.PaidByReconcile)
	if err != nil {
		return nil, fmt.Errorf("read payments: %w", err)
	}
	err = db.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE o.cancel_reason IS NULL),
       count(*) FILTER (WHERE o.cancel_reason IS NOT NULL)
FROM ordertimeout.orders AS o
WHERE o.status IN ('CANCELLED', 'CLOSED')
  AND o.cancel_cause IN ('timeout', 'sweep')`).Scan(&r.CancelledAtDeadline, &r.CancelledAfterCheck)
	if err != nil {
		return nil, fmt.Errorf("read cancels: %w", err)
	}

	err = db.QueryRow(ctx, `
SELECT coalesce(jsonb_object_agg(c.resolution, c.n), '{}')
FROM (SELECT coalesce(resolution, 'open') AS resolution, count(*) AS n
        FROM ordertimeout.conflicts
       GROUP BY 1) AS c`).Scan(&r.Conflicts)
	if err != nil {
		return nil, fmt.Errorf("read conflicts: %w", err)
	}

	if r.Gateway, err = s.gw.Stats(ctx); err != nil {
		return nil, err
	}

	totals := s.stockTotals()
	rows, err := db.Query(ctx, "SELECT sku, available, reserved, sold FROM ordertimeout.stock ORDER BY sku")
	if err != nil {
		return nil, fmt.Errorf("read stock: %w", err)
	}
	r.Stock, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (StockRow, error) {
		var st StockRow
		err := row.Scan(&st.SKU, &st.Available, &st.Reserved, &st.Sold)
		st.Put = totals[st.SKU]
		return st, err
	})
	if err != nil {
		return nil, fmt.Errorf("read stock: %w", err)
	}
	rows, err = db.Query(ctx, "SELECT account_id, balance, held FROM ordertimeout.points_accounts ORDER BY account_id")
	if err != nil {
		return nil, fmt.Errorf("read points: %w", err)
	}
	r.Points, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (PointsRow, error) {
		var p PointsRow
		err := row.Scan(&p.Account, &p.Balance, &p.Held)
		for _, a := range pointsAccounts {
			if a.id == p.Account {
				p.Put = a.balance * s.scale
			}
		}
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("read points: %w", err)
	}

	for _, st := range stories {
		res, err := st.verify(ctx, db)
		if err != nil {
			return nil, fmt.Errorf("story %s: %w", st.id, err)
		}
		res.What = st.what
		r.Stories = append(r.Stories, res)
	}

	r.Invariants, err = invariant.Check(ctx, db, invariant.Options{StockTotals: totals, Slack: overdueSlack})
	if err != nil {
		return nil, err
	}

	for _, h := range []History{
		{OrderID: StoryLate, Title: "the late payment"},
		{OrderID: StorySilent, Title: "the silent payment"},
		{OrderID: StoryQR, Title: "the QR payment found by reconciliation"},
	} {
		if h.Events, err = loadEvents(ctx, db, h.OrderID); err != nil {
			return nil, err
		}
		r.Histories = append(r.Histories, h)
	}
	return r, nil
}

// Print writes the report.
func (r *Result) Print(w io.Writer) {
	by := r.ByStatus
	fmt.Fprintf(w, "\nordertimeout demo: %d orders in %.0f s (timeout %s + %s grace, paying window %s)\n",
		sum(by), r.Elapsed.Seconds(), r.Timeout, r.Grace, r.PayingWindow)

	section(w, "Orders")
	tw := table(w)
	fmt.Fprintf(tw, "  placed\t%4d\t", sum(by))
	if r.Refused > 0 {
		fmt.Fprintf(tw, "%d more refused: out of stock at that moment (held by unpaid orders)", r.Refused)
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "  PAID\t%4d\t%d confirmed by the gateway's callback, %d found paid by the sidecar's gateway check, %d found in the gateway's records, %d reinstated after a late payment\n",
		by["PAID"], r.PaidByCallback, r.PaidByCheck, r.PaidByReconcile, r.Reinstated)
	fmt.Fprintf(tw, "  CANCELLED\t%4d\t%d by the sweep at their deadline, %d after the gateway said not paid\n",
		by["CANCELLED"]+by["CLOSED"], r.CancelledAtDeadline, r.CancelledAfterCheck)
	fmt.Fprintf(tw, "  PENDING\t%4d\t\n", by["PENDING"])
	fmt.Fprintf(tw, "  PAYING\t%4d\t\n", by["PAYING"])
	fmt.Fprintf(tw, "  cancel lag\t\tp50 %s, p99 %s, max %s over %d timeouts (cancelled_at - cancel_at; reinstated orders included)",
		secs(r.LagP50), secs(r.LagP99), secs(r.LagMax), r.Timeouts)
	if r.CaughtBySweep > 0 {
		fmt.Fprintf(tw, "; %d caught by the fallback sweep (lost timers)", r.CaughtBySweep)
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "  late payments\t%4d\t%d reinstated, %d refunded, %d open\n", sum(r.Conflicts),
		r.Conflicts["reinstated"], r.Conflicts["refunded"], r.Conflicts["open"])
	fmt.Fprintf(tw, "  gateway\t\tcallbacks %d, status queries %d, closes %d, refunds %d\n",
		r.Gateway.Callbacks, r.Gateway.Queries, r.Gateway.Closes, r.Gateway.Refunds)
	tw.Flush()
	if !r.Settled {
		fmt.Fprintln(w, "  (not settled: some orders are still PENDING or PAYING, or a conflict is open)")
	}

	section(w, "Stories")
	for _, s := range r.Stories {
		mark := "ok    "
		if !s.OK {
			mark = "MISSED"
		}
		fmt.Fprintf(w, "  %s %s: %s\n", mark, s.ID, s.What)
		fmt.Fprintf(w, "         → %s\n", s.Outcome)
	}

	section(w, "Stock (put = available + reserved + sold) and loyalty points")
	fmt.Fprintf(w, "  %-14s %5s %10s %9s %5s\n", "sku", "put", "available", "reserved", "sold")
	for _, s := range r.Stock {
		fmt.Fprintf(w, "  %-14s %5d %10d %9d %5d\n", s.SKU, s.Put, s.Available, s.Reserved, s.Sold)
	}
	fmt.Fprintf(w, "\n  %-14s %5s %10s %9s %5s\n", "account", "put", "balance", "held", "spent")
	for _, p := range r.Points {
		fmt.Fprintf(w, "  %-14s %5d %10d %9d %5d\n", p.Account, p.Put, p.Balance, p.Held, p.Put-p.Balance)
	}

	section(w, "Money-safety invariants, checked against the database")
	for line := range strings.Lines(r.Invariants.String()) {
		fmt.Fprint(w, "  ", line)
	}

	for _, h := range r.Histories {
		section(w, fmt.Sprintf("History of %s, %s (ordertimeout.order_events)", h.OrderID, h.Title))
		printHistory(w, h.Events)
	}

	if len(r.Problems) > 0 {
		section(w, "Problems while the shop ran")
		for i, p := range r.Problems {
			if i == 10 {
				fmt.Fprintf(w, "  ... and %d more\n", len(r.Problems)-i)
				break
			}
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
}

// printHistory prints events as a table, times relative to the first one.
func printHistory(w io.Writer, events []event) {
	tw := table(w)
	fmt.Fprintln(tw, "  at\ttime\tfrom\t\tto\tcause\tactor\tdetail")
	for _, e := range events {
		from := e.from
		if from == "" {
			from = "-"
		}
		detail := describe(e.detail)
		if e.lateness != nil {
			detail = strings.TrimSpace(fmt.Sprintf("%s late %s", lateness(e.lateness), detail))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t→\t%s\t%s\t%s\t%s\n",
			since(events, e), e.at.Local().Format(clock), from, e.to, e.cause, e.actor, detail)
	}
	tw.Flush()
}

// describe formats an event's detail as key=value pairs in key order.
func describe(detail map[string]any) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(detail)) {
		v := detail[k]
		switch v := v.(type) {
		case string:
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
				v = t.Local().Format(clock)
			}
			parts = append(parts, k+"="+v)
		case nil:
		default:
			b, _ := json.Marshal(v)
			parts = append(parts, k+"="+string(b))
		}
	}
	return strings.Join(parts, " ")
}

func section(w io.Writer, title string) {
	fmt.Fprintf(w, "\n%s\n", title)
}

func table(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

func secs(v *float64) string {
	if v == nil {
		return "-"
	}
	return short(*v)
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
