package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of a DBCollector.
const (
	DefaultTimeout = 5 * time.Second
	DefaultSettle  = 2 * time.Second
)

// LagBuckets are the upper bounds, in seconds, of the cancel lag histogram.
var LagBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// SweepStats are the values of label stat of ordertimeout_db_sweep, each a
// column of ordertimeout.sweep_stats (oldest_overdue_seconds is how long
// ago oldest_pending_cancel_at passed).
var SweepStats = []string{"due_timers", "overdue_orders", "oldest_overdue_seconds", "awaiting_check",
	"paying", "caught_by_sweep", "open_conflicts", "malformed_timers"}

// DBCollector is a prometheus.Collector of the database's own statistics,
// read at each scrape: ordertimeout_db_sweep{stat}, ordertimeout_db_orders
// {status} and ordertimeout_paused describe the database as it is;
// ordertimeout_db_cancel_lag_seconds{cause} counts every timeout cancel
// since the collector was made; ordertimeout_db_polls_total{result} counts
// the reads. A read that fails is logged and counted, and leaves the
// database's gauges out of that scrape.
type DBCollector struct {
	pool    *pgxpool.Pool
	timeout time.Duration
	settle  time.Duration
	logger  *slog.Logger
	made    time.Time // when NewDBCollector ran (monotonic)

	sweep, orders, paused *prometheus.Desc
	lag                   *prometheus.HistogramVec
	polls                 *prometheus.CounterVec

	mu        sync.Mutex // one read at a time
	watermark time.Time  // cancel_lag rows up to here are counted
}

// NewDBCollector returns a collector that reads pool at each scrape, each
// read bounded by timeout. Timeout cancels are added to the lag histogram
// once settle has passed since their event (their transaction has surely
// committed). A zero timeout or settle means the default.
func NewDBCollector(pool *pgxpool.Pool, timeout, settle time.Duration, logger *slog.Logger) *DBCollector {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if settle <= 0 {
		settle = DefaultSettle
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &DBCollector{
		pool:    pool,
		timeout: timeout,
		settle:  settle,
		logger:  logger,
		made:    time.Now(),
		sweep: prometheus.NewDesc("ordertimeout_db_sweep",
			"Database-wide sweep health from ordertimeout.sweep_stats: due_timers (due timer rows not yet swept), overdue_orders, oldest_overdue_seconds, awaiting_check, paying, caught_by_sweep (timeouts found without their timer row, ever), open_conflicts, malformed_timers (timer rows sweep_due set aside as malformed, still in River's table).",
			[]string{"stat"}, nil),
		orders: prometheus.NewDesc("ordertimeout_db_orders",
			"Database-wide orders by status, from ordertimeout.order_counts.", []string{"status"}, nil),
		paused: prometheus.NewDesc("ordertimeout_paused",
			"1 while timeout cancels are paused (configure(paused => true), ordertimeout pause): nothing is cancelled by a timeout.",
			nil, nil),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ordertimeout_db_cancel_lag_seconds",
			Help:    "Database-wide: how late each timeout cancel came (cancelled_at - cancel_at, database clock), from ordertimeout.cancel_lag, counted since this sidecar started; the count per cause is the number of timeout cancels (cause timeout, or sweep for a lost timer row).",
			Buckets: LagBuckets,
		}, []string{"cause"}),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ordertimeout_db_polls_total",
			Help: "Reads of the database statistics (one per scrape) by result (ok, error).",
		}, []string{"result"}),
	}
}

// Describe sends the descriptors of every metric the collector sends.
func (c *DBCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.sweep
	ch <- c.orders
	ch <- c.paused
	c.lag.Describe(ch)
	c.polls.Describe(ch)
}

// Collect reads the database and sends its statistics.
func (c *DBCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	ms, err := c.read(ctx)
	if err != nil {
		c.polls.WithLabelValues("error").Inc()
		c.logger.Warn("read database statistics", "error", err)
	} else {
		c.polls.WithLabelValues("ok").Inc()
	}
	for _, m := range ms { // the gauges read, also when the lag read failed
		ch <- m
	}
	c.lag.Collect(ch)
	c.polls.Collect(ch)
}

// read returns the gauges of the database's statistics and adds the
// settled timeout cancels to the lag histogram, a page at a time. When only
// the lag read fails, it returns the gauges with the error.
func (c *DBCollector) read(ctx context.Context) ([]prometheus.Metric, error) {
	stats := make([]float64, len(SweepStats))
	var oldest *float64
	var paused bool
	err := c.pool.QueryRow(ctx, `
		SELECT due_timers::float8, overdue_orders::float8,
		       greatest(extract(epoch FROM clock_timestamp() - oldest_pending_cancel_at), 0)::float8,
		       awaiting_check::float8, paying::float8, caught_by_sweep::float8, open_conflicts::float8,
		       malformed_timers::float8, paused
		  FROM ordertimeout.sweep_stats`).Scan(&stats[0], &stats[1], &oldest, &stats[3], &stats[4], &stats[5], &stats[6], &stats[7], &paused)
	if err != nil {
		return nil, fmt.Errorf("read sweep stats: %w", err)
	}
	if oldest != nil {
		stats[2] = *oldest
	}
	ms := make([]prometheus.Metric, 0, len(stats)+8)
	for i, stat := range SweepStats {
		ms = append(ms, prometheus.MustNewConstMetric(c.sweep, prometheus.GaugeValue, stats[i], stat))
	}
	ms = append(ms, prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, boolFloat(paused)))

	rows, err := c.pool.Query(ctx, "SELECT status, orders::float8 FROM ordertimeout.order_counts")
	if err != nil {
		return nil, fmt.Errorf("read order counts: %w", err)
	}
	var status string
	var orders float64
	_, err = pgx.ForEachRow(rows, []any{&status, &orders}, func() error {
		ms = append(ms, prometheus.MustNewConstMetric(c.orders, prometheus.GaugeValue, orders, status))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read order counts: %w", err)
	}

	// The gauges come whatever the lag read does: it may have a backlog to
	// read (a long gap between scrapes), and it catches up over scrapes.
	if err := c.readLag(ctx); err != nil {
		return ms, err
	}
	return ms, nil
}

// lagPage is the most timeout cancels one scrape adds to the lag histogram
// (one query, at most a sweep batch more: see readLag). After a long gap
// without scrapes at a high cancel rate, the histogram catches up over a
// few scrapes instead of one read that outgrows the scrape's time limit,
// fails, and leaves the next read larger still.
const lagPage = 50_000

// readLag adds the timeout cancels between the watermark and now - settle
// to the lag histogram. The first read starts from when the collector was
// made, by the database's clock.
func (c *DBCollector) readLag(ctx context.Context) error {
	var from, upTo time.Time
	if err := c.pool.QueryRow(ctx, `
		SELECT clock_timestamp() - $1 * interval '1 microsecond',
		       clock_timestamp() - $2 * interval '1 microsecond'`,
		time.Since(c.made).Microseconds(), c.settle.Microseconds()).Scan(&from, &upTo); err != nil {
		return fmt.Errorf("read database clock: %w", err)
	}
	if c.watermark.IsZero() {
		c.watermark = from
	}
	if !upTo.After(c.watermark) {
		return nil
	}
	type cancel struct {
		Cause    string
		Lateness float64
		At       time.Time
	}
	read := func(sql string, args ...any) ([]cancel, error) {
		rows, err := c.pool.Query(ctx, sql, args...)
		if err != nil {
			return nil, fmt.Errorf("read cancel lag: %w", err)
		}
		cancels, err := pgx.CollectRows(rows, pgx.RowToStructByPos[cancel])
		if err != nil {
			return nil, fmt.Errorf("read cancel lag: %w", err)
		}
		return cancels, nil
	}
	// In the order of at, one page. The cancels of one sweep share their
	// at, so a full page may end inside such a group: the group is left
	// whole to the next read (the watermark stops before it), or, when it
	// fills the page alone, read whole now (a group is at most a sweep
	// batch).
	cancels, err := read(`
		SELECT cause, coalesce(extract(epoch FROM lateness), 0)::float8, at
		  FROM ordertimeout.cancel_lag
		 WHERE at > $1 AND at <= $2
		 ORDER BY at
		 LIMIT $3`, c.watermark, upTo, lagPage)
	if err != nil {
		return err
	}
	next := upTo
	if len(cancels) == lagPage {
		last := cancels[len(cancels)-1].At
		cut := len(cancels)
		for cut > 0 && cancels[cut-1].At.Equal(last) {
			cut--
		}
		if cut > 0 {
			cancels, next = cancels[:cut], cancels[cut-1].At
		} else if cancels, err = read(`
			SELECT cause, coalesce(extract(epoch FROM lateness), 0)::float8, at
			  FROM ordertimeout.cancel_lag
			 WHERE at = $1`, last); err != nil {
			return err
		} else {
			next = last
		}
	}
	// Observe only once the page is read: a read that fails half way is
	// repeated whole at the next scrape.
	for _, x := range cancels {
		c.lag.WithLabelValues(x.Cause).Observe(x.Lateness)
	}
	c.watermark = next
	return nil
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
