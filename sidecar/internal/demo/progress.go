package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// snapshot is the state of the shop as the database sees it.
type snapshot struct {
	byStatus      map[string]int64 // from ordertimeout.order_counts
	conflicts     int64            // late and double payments, ever
	openConflicts int64
	due           int64    // due timer rows and overdue orders not yet swept
	awaitingCheck int64    // due orders waiting for their gateway check
	lagP99        *float64 // cancel lag p99 over the last minute, seconds
}

func (s snapshot) total() int64 {
	var n int64
	for _, c := range s.byStatus {
		n += c
	}
	return n
}

// settled reports whether every order has reached a final state and no
// conflict is waiting to be resolved.
func (s snapshot) settled() bool {
	return s.byStatus["PENDING"] == 0 && s.byStatus["PAYING"] == 0 && s.openConflicts == 0
}

// takeSnapshot reads the views the operators read: order_counts, sweep_stats
// and cancel_lag.
func takeSnapshot(ctx context.Context, db *pgxpool.Pool) (snapshot, error) {
	var s snapshot
	err := db.QueryRow(ctx, `
SELECT (SELECT coalesce(jsonb_object_agg(c.status, c.orders), '{}') FROM ordertimeout.order_counts AS c),
       (SELECT count(*) FROM ordertimeout.conflicts),
       st.open_conflicts,
       st.due_timers + st.overdue_orders,
       st.awaiting_check,
       (SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM l.lateness))
          FROM ordertimeout.cancel_lag AS l
         WHERE l.at > now() - interval '1 minute')
FROM ordertimeout.sweep_stats AS st`).Scan(
		&s.byStatus, &s.conflicts, &s.openConflicts, &s.due, &s.awaitingCheck, &s.lagP99)
	if err != nil {
		return snapshot{}, fmt.Errorf("read progress: %w", err)
	}
	return s, nil
}

// progress prints one line a second on w: rewritten in place on a terminal,
// a new line every few seconds otherwise (a log file, a test).
type progress struct {
	db      *pgxpool.Pool
	w       io.Writer
	start   time.Time
	tty     bool
	width   int  // of the terminal; 0 if unknown
	printed bool // a line is on screen and must be ended before other output
}

func newProgress(db *pgxpool.Pool, w io.Writer) *progress {
	p := &progress{db: db, w: w, start: time.Now()}
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		p.tty, p.width = true, termWidth(f)
	}
	return p
}

// legend explains the progress line.
const legend = `progress, read from the database once a second (views order_counts, sweep_stats, cancel_lag):
  orders by status │ late payments (conflicts) │ due: orders past their deadline not yet cancelled or checked │
  lag p99: how late the timeouts of the last minute were cancelled`

// run prints progress until ctx ends, then ends the line.
func (p *progress) run(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			p.done()
			return
		case <-tick.C:
		}
		if !p.tty && n%5 != 0 {
			continue
		}
		s, err := takeSnapshot(ctx, p.db)
		if err != nil {
			continue // the next tick will tell; the report says what matters
		}
		p.print(s)
	}
}

func (p *progress) print(s snapshot) {
	lag := "-"
	if s.lagP99 != nil {
		lag = short(*s.lagP99)
	}
	line := fmt.Sprintf("%3.0fs │ %d orders: %d pending, %d paying, %d paid, %d cancelled │ late payments %d (%d open) │ due %d │ lag p99 %s",
		time.Since(p.start).Seconds(), s.total(), s.byStatus["PENDING"], s.byStatus["PAYING"], s.byStatus["PAID"],
		s.byStatus["CANCELLED"]+s.byStatus["CLOSED"], s.conflicts, s.openConflicts, s.due+s.awaitingCheck, lag)
	if p.tty {
		// A line that wraps could not be rewritten in place.
		if r := []rune(line); p.width > 1 && len(r) >= p.width {
			line = string(r[:p.width-2]) + "…"
		}
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.printed = true
	} else {
		fmt.Fprintln(p.w, line)
	}
}

// done ends the line on a terminal.
func (p *progress) done() {
	if p.printed {
		fmt.Fprintln(p.w)
		p.printed = false
	}
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
