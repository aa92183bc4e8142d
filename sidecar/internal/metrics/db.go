package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of a DBPoller.
const (
	DefaultPollInterval = 10 * time.Second
	DefaultSettle       = 2 * time.Second
)

// LagBuckets are the upper bounds, in seconds, of the cancel lag histogram.
var LagBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// DBPoller reads the database's statistics into metrics every Interval.
type DBPoller struct {
	pool     *pgxpool.Pool
	interval time.Duration
	settle   time.Duration
	logger   *slog.Logger

	stats  *Gauge
	orders *Gauge
	lag    *Histogram
	polls  *Counter
	paused *Gauge

	watermark   time.Time // cancel_lag rows up to here are counted
	pauseLogged time.Time // when the last "paused" line was logged
	lastOK      atomic.Int64
}

// NewDBPoller registers the ordertimeout_db_* metrics in reg and returns a
// poller that fills them from pool. A zero interval or settle means the
// default.
func NewDBPoller(reg *Registry, pool *pgxpool.Pool, interval, settle time.Duration, logger *slog.Logger) *DBPoller {
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	if settle <= 0 {
		settle = DefaultSettle
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &DBPoller{
		pool:     pool,
		interval: interval,
		settle:   settle,
		logger:   logger,
		stats: reg.NewGauge("ordertimeout_db_sweep",
			"Database-wide sweep health from ordertimeout.sweep_stats: due_timers (due timer rows not yet swept), overdue_orders, oldest_overdue_seconds, awaiting_check, paying, caught_by_sweep (timeouts found without their timer row, ever), open_conflicts, malformed_timers (timer rows sweep_due set aside as malformed, still in River's table).",
			"stat"),
		orders: reg.NewGauge("ordertimeout_db_orders",
			"Database-wide orders by status, from ordertimeout.order_counts.", "status"),
		lag: reg.NewHistogram("ordertimeout_db_cancel_lag_seconds",
			"Database-wide: how late each timeout cancel came (cancelled_at - cancel_at, database clock), from ordertimeout.cancel_lag, counted since this sidecar started; the count per cause is the number of timeout cancels (cause timeout, or sweep for a lost timer row).",
			LagBuckets, "cause"),
		polls: reg.NewCounter("ordertimeout_db_polls_total",
			"Polls of the database statistics by result (ok, error).", "result"),
		paused: reg.NewGauge("ordertimeout_paused",
			"1 while timeout cancels are paused (configure(paused => true), ordertimeout pause): nothing is cancelled by a timeout."),
	}
}

// LastOK returns when a poll last succeeded (zero if never).
func (p *DBPoller) LastOK() time.Time {
	n := p.lastOK.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Run polls until ctx is done.
func (p *DBPoller) Run(ctx context.Context) {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		if err := p.Poll(ctx); err != nil && ctx.Err() == nil {
			p.logger.Warn("poll database statistics", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Poll reads the statistics once.
func (p *DBPoller) Poll(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.interval)
	defer cancel()
	if err := p.poll(ctx); err != nil {
		p.polls.Inc("error")
		return err
	}
	p.polls.Inc("ok")
	p.lastOK.Store(time.Now().UnixNano())
	return nil
}

func (p *DBPoller) poll(ctx context.Context) error {
	var due, overdue, awaiting, paying, caught, conflicts, malformed int64
	var oldest *float64
	var paused bool
	err := p.pool.QueryRow(ctx, `
		SELECT due_timers, overdue_orders,
		       greatest(extract(epoch FROM clock_timestamp() - oldest_pending_cancel_at), 0)::float8,
		       awaiting_check, paying, caught_by_sweep, open_conflicts, malformed_timers, paused
		  FROM ordertimeout.sweep_stats`).Scan(&due, &overdue, &oldest, &awaiting, &paying, &caught, &conflicts, &malformed, &paused)
	if err != nil {
		return fmt.Errorf("read sweep stats: %w", err)
	}
	p.stats.Set(float64(due), "due_timers")
	p.stats.Set(float64(overdue), "overdue_orders")
	p.stats.Set(deref(oldest), "oldest_overdue_seconds")
	p.stats.Set(float64(awaiting), "awaiting_check")
	p.stats.Set(float64(paying), "paying")
	p.stats.Set(float64(caught), "caught_by_sweep")
	p.stats.Set(float64(conflicts), "open_conflicts")
	p.stats.Set(float64(malformed), "malformed_timers")
	p.setPaused(ctx, paused, due+overdue)

	rows, err := p.pool.Query(ctx, "SELECT status, orders FROM ordertimeout.order_counts")
	if err != nil {
		return fmt.Errorf("read order counts: %w", err)
	}
	type count struct {
		Status string
		Orders int64
	}
	counts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[count])
	if err != nil {
		return fmt.Errorf("read order counts: %w", err)
	}
	p.orders.Reset()
	for _, c := range counts {
		p.orders.Set(float64(c.Orders), c.Status)
	}

	return p.pollLag(ctx)
}

// pollLag adds the timeout cancels between the watermark and now - settle to
// the lag histogram. The first poll only sets the watermark.
func (p *DBPoller) pollLag(ctx context.Context) error {
	var upTo time.Time
	if err := p.pool.QueryRow(ctx, "SELECT clock_timestamp() - $1 * interval '1 microsecond'",
		p.settle.Microseconds()).Scan(&upTo); err != nil {
		return fmt.Errorf("read database clock: %w", err)
	}
	if p.watermark.IsZero() {
		p.watermark = upTo
		return nil
	}
	if !upTo.After(p.watermark) {
		return nil
	}
	rows, err := p.pool.Query(ctx, `
		SELECT cause, extract(epoch FROM lateness)::float8
		  FROM ordertimeout.cancel_lag
		 WHERE at > $1 AND at <= $2`, p.watermark, upTo)
	if err != nil {
		return fmt.Errorf("read cancel lag: %w", err)
	}
	var cause string
	var lateness *float64
	_, err = pgx.ForEachRow(rows, []any{&cause, &lateness}, func() error {
		p.lag.Observe(deref(lateness), cause)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read cancel lag: %w", err)
	}
	p.watermark = upTo
	return nil
}

func deref(f *float64) float64 {
	if f == nil {
		return 0
	}
	return *f
}

// pauseLogEvery is how often a paused database is logged.
const pauseLogEvery = time.Minute

// setPaused sets ordertimeout_paused and, while paused, logs a warning at
// most once a minute with who paused, since when, and what waits.
func (p *DBPoller) setPaused(ctx context.Context, paused bool, waiting int64) {
	if !paused {
		p.paused.Set(0)
		p.pauseLogged = time.Time{}
		return
	}
	p.paused.Set(1)
	if !p.pauseLogged.IsZero() && time.Since(p.pauseLogged) < pauseLogEvery {
		return
	}
	p.pauseLogged = time.Now()
	var at *time.Time
	var by *string
	var secs *float64
	err := p.pool.QueryRow(ctx, `SELECT paused_at, paused_by, extract(epoch FROM clock_timestamp() - paused_at)::float8
	                               FROM ordertimeout.settings`).Scan(&at, &by, &secs)
	if err != nil {
		p.logger.Warn("timeout cancels are paused", "error", err)
		return
	}
	args := []any{"due_or_overdue", waiting}
	if at != nil && secs != nil {
		args = append(args, "paused_at", at.UTC(), "paused_for", time.Duration(*secs*float64(time.Second)).Round(time.Second))
	}
	if by != nil {
		args = append(args, "paused_by", *by)
	}
	p.logger.Warn("timeout cancels are paused: nothing is cancelled until 'ordertimeout resume'", args...)
}
