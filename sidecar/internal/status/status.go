package status

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
)

// Querier runs queries: a *pgx.Conn, *pgxpool.Pool or pgx.Tx.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Report is the state of an ordertimeout database.
type Report struct {
	Orders []Count // orders by status

	DueTimers     int64          // timer rows due and not yet swept
	OverdueOrders int64          // PENDING orders past cancel_at (not waiting for a check)
	OldestOverdue *time.Duration // how long the oldest of them is overdue; nil when none
	AwaitingCheck int64          // due orders waiting for a gateway check
	Paying        int64          // orders in PAYING
	CaughtBySweep int64          // timeouts ever cancelled without their timer row
	OpenConflicts int64          // late or double payments not resolved
	Paused        bool           // timeout cancels are paused (configure(paused => true))
	PausedAt      *time.Time     // when the pause began, if paused
	PausedBy      *string        // who paused, if paused

	Window  time.Duration  // the lag window
	Cancels int64          // timeout cancels in the window
	LagP50  *time.Duration // nil without cancels
	LagP99  *time.Duration
}

// Count is a number of orders in one status.
type Count struct {
	Status string
	Orders int64
}

// Read reads the report; window is how far back the cancel lag looks.
func Read(ctx context.Context, db Querier, window time.Duration) (Report, error) {
	r := Report{Window: window}
	rows, err := db.Query(ctx, "SELECT status, orders FROM ordertimeout.order_counts ORDER BY status")
	if err != nil {
		return Report{}, fmt.Errorf("read order counts: %w", err)
	}
	r.Orders, err = pgx.CollectRows(rows, pgx.RowToStructByPos[Count])
	if err != nil {
		return Report{}, fmt.Errorf("read order counts: %w", err)
	}

	var oldest *float64
	err = db.QueryRow(ctx, `
		SELECT due_timers, overdue_orders,
		       CASE WHEN oldest_pending_cancel_at <= clock_timestamp()
		            THEN extract(epoch FROM clock_timestamp() - oldest_pending_cancel_at)::float8 END,
		       awaiting_check, paying, caught_by_sweep, open_conflicts, paused
		  FROM ordertimeout.sweep_stats`).Scan(&r.DueTimers, &r.OverdueOrders, &oldest,
		&r.AwaitingCheck, &r.Paying, &r.CaughtBySweep, &r.OpenConflicts, &r.Paused)
	if err != nil {
		return Report{}, fmt.Errorf("read sweep stats: %w", err)
	}
	r.OldestOverdue = seconds(oldest)
	if r.Paused {
		if err := db.QueryRow(ctx, "SELECT paused_at, paused_by FROM ordertimeout.settings").Scan(&r.PausedAt, &r.PausedBy); err != nil {
			return Report{}, fmt.Errorf("read pause: %w", err)
		}
	}

	var p50, p99 *float64
	err = db.QueryRow(ctx, `
		SELECT count(*),
		       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM lateness))::float8,
		       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM lateness))::float8
		  FROM ordertimeout.cancel_lag
		 WHERE at > clock_timestamp() - $1 * interval '1 microsecond'`,
		window.Microseconds()).Scan(&r.Cancels, &p50, &p99)
	if err != nil {
		return Report{}, fmt.Errorf("read cancel lag: %w", err)
	}
	r.LagP50, r.LagP99 = seconds(p50), seconds(p99)
	return r, nil
}

// Print writes the report as a table.
func (r Report) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ORDERS\t")
	if len(r.Orders) == 0 {
		fmt.Fprintln(tw, "  (none)\t")
	}
	for _, c := range r.Orders {
		fmt.Fprintf(tw, "  %s\t%d\n", c.Status, c.Orders)
	}
	fmt.Fprintln(tw, "SWEEP\t")
	if r.Paused {
		by := ""
		if r.PausedBy != nil {
			by = " by " + *r.PausedBy
		}
		since := ""
		if r.PausedAt != nil {
			since = " since " + r.PausedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "  PAUSED\tno timeout cancels%s%s (ordertimeout resume)\n", since, by)
	}
	fmt.Fprintf(tw, "  due timers (backlog)\t%d\n", r.DueTimers)
	fmt.Fprintf(tw, "  overdue orders\t%d\n", r.OverdueOrders)
	fmt.Fprintf(tw, "  oldest overdue\t%s\n", duration(r.OldestOverdue))
	fmt.Fprintf(tw, "  awaiting gateway check\t%d\n", r.AwaitingCheck)
	fmt.Fprintf(tw, "  paying\t%d\n", r.Paying)
	fmt.Fprintf(tw, "  caught by sweep (lost timers, ever)\t%d\n", r.CaughtBySweep)
	fmt.Fprintf(tw, "CANCEL LAG (last %s)\t\n", r.Window)
	fmt.Fprintf(tw, "  timeout cancels\t%d\n", r.Cancels)
	fmt.Fprintf(tw, "  p50\t%s\n", duration(r.LagP50))
	fmt.Fprintf(tw, "  p99\t%s\n", duration(r.LagP99))
	fmt.Fprintln(tw, "CONFLICTS\t")
	fmt.Fprintf(tw, "  open\t%d\n", r.OpenConflicts)
	return tw.Flush()
}

func seconds(f *float64) *time.Duration {
	if f == nil {
		return nil
	}
	d := time.Duration(*f * float64(time.Second))
	return &d
}

func duration(d *time.Duration) string {
	if d == nil {
		return "-"
	}
	switch {
	case *d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case *d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
}
