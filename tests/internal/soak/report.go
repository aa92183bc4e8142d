package soak

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ordertimeout/ordertimeout/sidecar/invariant"
	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
	"github.com/ordertimeout/ordertimeout/tests/internal/outcome"
)

// LagStats summarizes the lateness of timeout cancels (cancelled_at -
// cancel_at, database timestamps).
type LagStats struct {
	N             int
	P50, P99, Max time.Duration
}

func lagStats(d []time.Duration) LagStats {
	if len(d) == 0 {
		return LagStats{}
	}
	slices.Sort(d)
	q := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	return LagStats{N: len(d), P50: q(0.50), P99: q(0.99), Max: d[len(d)-1]}
}

func (s LagStats) String() string {
	if s.N == 0 {
		return "none"
	}
	return fmt.Sprintf("p50 %s  p99 %s  max %s  (n=%d)", ms(s.P50), ms(s.P99), ms(s.Max), s.N)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond)) }

// Lag is the cancel lag of timeout cancels, apart for cancels that a fault
// may have delayed (a fault window, plus recovery and FaultTail, overlaps
// the time between the order's cancel_at and its cancel) and the others.
// Direct cancels are orders without a payment attempt, which the sweep
// cancels itself; checked ones were handed to a gateway check first.
type Lag struct {
	SteadyDirect, SteadyChecked LagStats
	FaultDirect, FaultChecked   LagStats
}

// Report is the outcome of a soak run.
type Report struct {
	Config   Config
	Start    time.Time     // when production started
	Produced time.Duration // how long orders were produced
	Drain    time.Duration // how long the drain took
	Drained  bool          // every order finished within DrainTimeout

	Created   int64
	Abandoned int // create_order calls given up (ambiguous)
	Refused   int // payments refused because the order had expired first
	Unsure    int // orders without an expectation (a call given up, a slow producer)
	Retries   int64
	ByKind    map[string]int   // created orders by scenario
	Statuses  map[string]int64 // final orders by status
	Errors    map[string]int   // errors the producer gave up on, by kind

	Faults   []FaultRecord
	Restarts []FaultRecord // the PostgreSQL restarts, in order

	Invariants      invariant.Report // after the drain, with stock totals and Slack
	CheckTook       time.Duration    // how long that check took
	Outcomes        outcome.Report
	ChecksDuring    int      // invariant checks made while the run went on
	ChecksMissed    int      // checks that could not run (the database was away)
	DuringFindings  []string // violations found by them
	UnexpectedExits []string // sidecars that exited without being killed
	NotRecovered    int      // PostgreSQL restarts whose backlog never cleared
	FaultsFailed    int      // faults that could not be injected or undone
	StopErrors      []string // sidecars that did not exit 0 on SIGTERM at the end

	Lag  Lag
	Fake sidecarproc.FakeStats

	// PIDs are, per sidecar name, the processes that ran as it: more than
	// one only after kill-sidecar faults (or an unexpected exit).
	PIDs map[string][]int

	LogDir string // the processes' logs, if kept
	Err    string // a failure to read the final state
}

// Violations counts everything that must not happen: broken invariants,
// orders lost, cancelled twice or left unfinished, sidecars that died by
// themselves, restarts never recovered from, faults that could not be undone
// (a killed sidecar that would not start again), sidecars that did not exit 0
// on SIGTERM at the end.
func (r *Report) Violations() int {
	n := len(r.DuringFindings) + len(r.UnexpectedExits) + r.NotRecovered + r.FaultsFailed + len(r.StopErrors) +
		int(r.Outcomes.Violations())
	for _, res := range r.Invariants.Results {
		if !res.OK {
			n++
		}
	}
	if !r.Drained {
		n++
	}
	if r.Err != "" {
		n++
	}
	return n
}

// report reads the final state and builds the Report.
func (r *run) report(ctx context.Context, produced, drain time.Duration, drained bool) *Report {
	l := &r.ledger
	l.mu.Lock()
	rep := &Report{
		Config:    r.cfg,
		Start:     r.start,
		Produced:  produced,
		Drain:     drain,
		Drained:   drained,
		Created:   l.nCreated.Load(),
		Abandoned: l.abandoned,
		Refused:   l.refused,
		Unsure:    l.unsure,
		Retries:   l.retries.Load(),
		ByKind:    map[string]int{},
		Statuses:  map[string]int64{},
		Errors:    maps.Clone(l.errs),
	}
	for k, n := range l.byKind {
		rep.ByKind[scenarioNames[k]] = n
	}
	want := outcome.Expect{Created: l.created, Paid: l.paid, Cancelled: l.cancelled, Settled: true}
	l.mu.Unlock()

	r.mu.Lock()
	for _, f := range r.faults {
		rep.Faults = append(rep.Faults, *f)
		if f.Failed {
			rep.FaultsFailed++
		}
		if f.Kind == RestartFast || f.Kind == RestartImmediate {
			rep.Restarts = append(rep.Restarts, *f)
			if !f.Recovered {
				rep.NotRecovered++
			}
		}
	}
	rep.ChecksDuring = r.checksRun
	rep.ChecksMissed = r.checksFailed
	rep.PIDs = map[string][]int{}
	for _, s := range r.sidecars {
		s.mu.Lock()
		rep.PIDs[s.name] = slices.Clone(s.pids)
		s.mu.Unlock()
	}
	rep.DuringFindings = slices.Clone(r.checkFindings)
	rep.UnexpectedExits = slices.Clone(r.unexpectedExits)
	r.mu.Unlock()

	var errs []string
	try := func(within time.Duration, f func(ctx context.Context) error) {
		qctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		if err := f(qctx); err != nil {
			errs = append(errs, err.Error())
		}
	}
	// PostgreSQL loses its table statistics counters in an immediate
	// restart, so autovacuum may not have analyzed the tables since they
	// grew; without statistics the checks' plans can take minutes instead
	// of a second (measured: over 5 minutes on 128,000 orders).
	try(10*time.Minute, func(ctx context.Context) error {
		if _, err := r.mon.Exec(ctx, "ANALYZE"); err != nil {
			return fmt.Errorf("analyze: %w", err)
		}
		return nil
	})
	checkStart := time.Now()
	try(10*time.Minute, func(ctx context.Context) (err error) {
		rep.Invariants, err = invariant.Check(ctx, r.mon, invariant.Options{StockTotals: r.totals, Slack: r.cfg.Slack})
		return err
	})
	rep.CheckTook = time.Since(checkStart)
	try(10*time.Minute, func(ctx context.Context) (err error) {
		rep.Outcomes, err = outcome.Check(ctx, r.mon, want)
		return err
	})
	try(time.Minute, func(ctx context.Context) error { return r.readStatuses(ctx, rep) })
	try(5*time.Minute, func(ctx context.Context) error { return r.readLag(ctx, rep) })
	try(time.Minute, func(ctx context.Context) (err error) {
		rep.Fake, err = r.fake.Stats(ctx)
		return err
	})
	rep.Err = strings.Join(errs, "; ")
	return rep
}

func (r *run) readStatuses(ctx context.Context, rep *Report) error {
	rows, err := r.mon.Query(ctx, "SELECT status, orders FROM ordertimeout.order_counts")
	if err != nil {
		return fmt.Errorf("read order counts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int64
		if err := rows.Scan(&status, &n); err != nil {
			return fmt.Errorf("read order counts: %w", err)
		}
		rep.Statuses[status] = n
	}
	return rows.Err()
}

// readLag reads every timeout cancel and sorts it into Lag's buckets.
func (r *run) readLag(ctx context.Context, rep *Report) error {
	rows, err := r.mon.Query(ctx, `
		SELECT e.at - e.lateness, e.at, e.lateness, o.payment_attempted
		FROM ordertimeout.events AS e
		JOIN ordertimeout.orders AS o ON o.order_id = e.order_id
		WHERE e.to_status = 'CANCELLED'
		  AND e.from_status = 'PENDING'
		  AND e.cause IN ('timeout', 'sweep')`)
	if err != nil {
		return fmt.Errorf("read cancel lag: %w", err)
	}
	defer rows.Close()
	type window struct{ from, to time.Time }
	var windows []window
	for _, f := range rep.Faults {
		windows = append(windows, window{f.Start, f.until(r.cfg.FaultTail)})
	}
	sort.Slice(windows, func(i, j int) bool { return windows[i].from.Before(windows[j].from) })
	var sd, sc, fd, fc []time.Duration
	for rows.Next() {
		var due, at time.Time
		var lateness time.Duration
		var checked bool
		if err := rows.Scan(&due, &at, &lateness, &checked); err != nil {
			return fmt.Errorf("read cancel lag: %w", err)
		}
		hit := false
		for _, w := range windows {
			if w.from.After(at) {
				break
			}
			if w.to.After(due) {
				hit = true
				break
			}
		}
		switch {
		case hit && checked:
			fc = append(fc, lateness)
		case hit:
			fd = append(fd, lateness)
		case checked:
			sc = append(sc, lateness)
		default:
			sd = append(sd, lateness)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read cancel lag: %w", err)
	}
	rep.Lag = Lag{SteadyDirect: lagStats(sd), SteadyChecked: lagStats(sc), FaultDirect: lagStats(fd), FaultChecked: lagStats(fc)}
	return nil
}

// Print writes the report for a human.
func (r *Report) Print(w io.Writer) {
	c := r.Config
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("")
	p("soak report")
	p("  seed %d (replay with --seed %d), %d sidecars, order timeout %s, grace 0, paying window %s",
		c.Seed, c.Seed, c.Sidecars, c.Timeout, c.PayingWindow)
	achieved := float64(r.Created) / r.Produced.Seconds()
	p("  produced for %s at %d orders/s asked, %.0f/s achieved; drain took %s%s",
		r.Produced.Round(time.Second), c.Rate, achieved, r.Drain.Round(time.Millisecond), map[bool]string{true: "", false: " (NOT drained)"}[r.Drained])
	p("")
	p("orders: %d created (%s)", r.Created, formatCounts(r.ByKind))
	p("  final: %s", formatCounts64(r.Statuses))
	p("  producer: %d calls retried while the database was away; %d creates abandoned, %d payments refused (expired first), %d without expectation",
		r.Retries, r.Abandoned, r.Refused, r.Unsure)
	if len(r.Errors) > 0 {
		p("  producer errors given up on: %s", formatCounts(r.Errors))
	}
	p("  gateway: %d queries, %d closes, %d refunds, %d callbacks (%d failed: the database was away)",
		r.Fake.Queries, r.Fake.Closes, r.Fake.Refunds, r.Fake.Callbacks, r.Fake.CallbackErrors)
	p("")
	byKind := map[string]int{}
	for _, f := range r.Faults {
		byKind[string(f.Kind)]++
	}
	p("faults: %d injected (%s)", len(r.Faults), formatCounts(byKind))
	for _, f := range r.Faults {
		if f.Failed {
			p("  FAILED at %s: %s: %s", f.Start.Sub(r.Start).Round(time.Second), f.Kind, f.Detail)
		}
	}
	p("")
	p("PostgreSQL restarts (down = pg_ctl restart; recovered = until no PENDING order is overdue by more than 1s):")
	if len(r.Restarts) == 0 {
		p("  none")
	}
	var recoveries []time.Duration
	for i, f := range r.Restarts {
		state := fmt.Sprintf("recovered %s later", ms(f.Recovery))
		if !f.Recovered {
			state = "NOT RECOVERED"
		} else {
			recoveries = append(recoveries, f.Recovery)
		}
		p("  %2d. at %8s  %-21s down %s, %s", i+1, f.Start.Sub(r.Start).Round(time.Second),
			f.Kind, ms(f.End.Sub(f.Start)), state)
	}
	if len(recoveries) > 0 {
		s := lagStats(recoveries)
		p("  time to recover: p50 %s, max %s", ms(s.P50), ms(s.Max))
	}
	p("")
	p("cancel lag of timeout cancels (database timestamps):")
	p("  outside faults, direct:  %s", r.Lag.SteadyDirect)
	p("  outside faults, checked: %s", r.Lag.SteadyChecked)
	p("  during faults, direct:   %s", r.Lag.FaultDirect)
	p("  during faults, checked:  %s", r.Lag.FaultChecked)
	p("  (direct: no payment attempt, cancelled by the sweep; checked: the gateway was asked first.")
	p("   during: a fault, its recovery or the %s after it overlaps the time between cancel_at and the cancel)", c.FaultTail)
	p("")
	p("invariants after the drain (stock totals, no_overdue_pending with slack %s; checked in %s):",
		c.Slack, r.CheckTook.Round(time.Millisecond))
	for _, line := range strings.Split(strings.TrimRight(r.Invariants.String(), "\n"), "\n") {
		p("  %s", line)
	}
	p("nothing lost, nothing twice:")
	for _, line := range strings.Split(strings.TrimRight(r.Outcomes.String(), "\n"), "\n") {
		p("  %s", line)
	}
	p("invariant checks during the run: %d (%d could not run: the database was away), violations %d",
		r.ChecksDuring, r.ChecksMissed, len(r.DuringFindings))
	for _, f := range r.DuringFindings {
		p("  %s", f)
	}
	for _, name := range slices.Sorted(maps.Keys(r.PIDs)) {
		p("sidecar %s ran as %d process(es): pids %v", name, len(r.PIDs[name]), r.PIDs[name])
	}
	p("sidecars exited by themselves: %d", len(r.UnexpectedExits))
	for _, e := range r.UnexpectedExits {
		p("  %s", e)
	}
	p("stopped cleanly at the end (SIGTERM, exit 0): %s", map[bool]string{true: "yes", false: "NO: " + strings.Join(r.StopErrors, "; ")}[len(r.StopErrors) == 0])
	if r.Err != "" {
		p("ERROR reading the final state: %s", r.Err)
	}
	if r.LogDir != "" {
		p("logs: %s", r.LogDir)
	}
	p("")
	if v := r.Violations(); v > 0 {
		p("VIOLATIONS: %d", v)
	} else {
		p("violations: 0")
	}
}

func formatCounts(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func formatCounts64(m map[string]int64) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
