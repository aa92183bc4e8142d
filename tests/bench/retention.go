package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// The retention scenario: the steady workload for a long run against the
// real sidecar with closing and purging on (--close-after, --purge-after,
// --purge-paid-after at short retentions), sampled from the database every
// --retention-sample; then, with --retention-compare, the same run with the
// purge off. It shows that the database stops growing once the purge keeps
// up, and that the sweep's throughput and lag stay flat meanwhile.

// retentionEvery is how often the sidecar's River leader runs the retention
// job: the sidecar's DefaultRetentionEvery. `ordertimeout run` has no flag
// for it, so the benchmark runs what production runs.
const retentionEvery = time.Minute

// windowGrace is how far behind the database clock a sample's cancel window
// ends, so that every sweep transaction that stamped an event inside the
// window has committed when the window is read.
const windowGrace = time.Second

// retentionConfig holds the flags of the retention scenario.
type retentionConfig struct {
	duration       time.Duration
	warmup         time.Duration
	rate           int
	sample         time.Duration
	closeAfter     time.Duration
	purgeAfter     time.Duration
	purgePaidAfter time.Duration
	compare        bool
	sizeGrowth     float64
	cancelDrift    float64
}

// addRetentionFlags defines the retention scenario's flags on fs.
func addRetentionFlags(fs *flag.FlagSet, c *retentionConfig) {
	fs.DurationVar(&c.duration, "retention-duration", 6*time.Minute, "retention: how long the producer runs (the steady workload: --steady-timeout, --steady-paid, --steady-conns)")
	fs.DurationVar(&c.warmup, "retention-warmup", 3*time.Minute, "retention: the first part of the run that is not judged (the tables fill up to the retention and autovacuum starts reusing the purged rows' space)")
	fs.IntVar(&c.rate, "retention-rate", 1000, "retention: orders created per second")
	fs.DurationVar(&c.sample, "retention-sample", 5*time.Second, "retention: how often the database is sampled (sizes, orders by state, cancels and their lag in the window since the last sample)")
	fs.DurationVar(&c.closeAfter, "retention-close-after", 5*time.Second, "retention: the sidecar's --close-after")
	fs.DurationVar(&c.purgeAfter, "retention-purge-after", 30*time.Second, "retention: the sidecar's --purge-after")
	fs.DurationVar(&c.purgePaidAfter, "retention-purge-paid-after", time.Minute, "retention: the sidecar's --purge-paid-after (paid orders are half of the workload: without it they pile up)")
	fs.BoolVar(&c.compare, "retention-compare", true, "retention: also run the same workload with the purge off (closing still on), for the size's comparison")
	fs.Float64Var(&c.sizeGrowth, "retention-size-growth", 0.10, "retention: flat size means the largest database size of the last third after warm-up is at most this fraction above that of the first third")
	fs.Float64Var(&c.cancelDrift, "retention-cancel-drift", 0.10, "retention: flat throughput means the median cancels/s of the last third's windows is within this fraction of the first third's")
}

// retentionQuick are --quick's sizes: one retention job inside the run
// (the first runs when the sidecar starts, the next a minute later), which
// closes and, at once, purges: too short a run to judge the size's
// flatness, long enough to see the purge work and to judge throughput.
var retentionQuick = map[string]string{
	"retention-duration":         "70s",
	"retention-warmup":           "25s",
	"retention-rate":             "200",
	"retention-sample":           "2s",
	"retention-close-after":      "2s",
	"retention-purge-after":      "1ms",
	"retention-purge-paid-after": "10s",
	"retention-compare":          "false",
}

// validate checks the retention flags.
func (c *retentionConfig) validate() error {
	switch {
	case c.duration <= 0 || c.warmup < 0 || c.warmup >= c.duration:
		return errors.New("--retention-duration must be more than 0 and --retention-warmup between 0 and it")
	case c.rate < 1:
		return errors.New("--retention-rate must be at least 1")
	case c.sample < 100*time.Millisecond:
		return errors.New("--retention-sample must be at least 100ms")
	case c.closeAfter <= 0 || c.purgeAfter <= 0 || c.purgePaidAfter < 0:
		return errors.New("--retention-close-after and --retention-purge-after must be more than 0, --retention-purge-paid-after at least 0 (0: keep paid orders)")
	case c.sizeGrowth <= 0 || c.cancelDrift <= 0:
		return errors.New("--retention-size-growth and --retention-cancel-drift must be more than 0")
	}
	return nil
}

// retentionTables are the relations whose total size (indexes and TOAST
// included) each sample reads: the tables that grow with the orders, and
// River's job table, which holds the timers.
var retentionTables = []string{
	"ordertimeout.orders", "ordertimeout.order_items", "ordertimeout.events",
	"ordertimeout.releases", "ordertimeout.payments", "public.river_job",
}

// retentionSample is what one sample read from the database.
type retentionSample struct {
	// T is the database clock at the sample, in seconds since the producer
	// started.
	T       float64 `json:"t_s"`
	DBBytes int64   `json:"db_bytes"`
	// Tables maps each of retentionTables to pg_total_relation_size, its
	// dead rows and its autovacuum runs so far (pg_stat_user_tables).
	Tables      map[string]int64 `json:"table_bytes"`
	Dead        map[string]int64 `json:"dead_rows"`
	Autovacuums map[string]int64 `json:"autovacuums"`
	// Orders counts the orders left by state.
	Orders    map[string]int64 `json:"orders"`
	RiverJobs int64            `json:"river_job_rows"`
	// PurgedSoFar is n_tup_del of ordertimeout.orders: only the purge
	// deletes orders. The statistics lag the commits by up to a few seconds.
	PurgedSoFar int64 `json:"purged_so_far"`
	// The cancel window: timeout cancels whose event is stamped from the
	// previous sample's clock to this one's, both minus windowGrace.
	WindowS     float64 `json:"window_s,omitempty"`
	CreatedPerS float64 `json:"window_created_per_s"`
	Cancels     int64   `json:"window_cancels"`
	CancelsPerS float64 `json:"window_cancels_per_s"`
	// PerCreated is the window's cancels over its new orders: about the
	// unpaid fraction while the sweep keeps pace with what the producer,
	// slowed or not by a shared machine, creates.
	PerCreated float64 `json:"window_cancels_per_created"`
	LagP99Ms   float64 `json:"window_lag_p99_ms"`
	// QueryMs is how long this sample's queries took (the client's clock).
	QueryMs float64 `json:"query_ms"`
}

// thirds compares the first and last third of the judged part of a run.
type thirds struct {
	First  float64 `json:"first"`
	Last   float64 `json:"last"`
	Change float64 `json:"change"` // Last / First - 1
	Judged bool    `json:"judged"`
	Why    string  `json:"why,omitempty"` // why not judged
}

// retentionResult is the JSON line of one retention run.
type retentionResult struct {
	Scenario        string           `json:"scenario"`
	Variant         string           `json:"variant"` // purge_on or purge_off
	Rate            int              `json:"rate"`
	DurationS       float64          `json:"duration_s"`
	WarmupS         float64          `json:"warmup_s"`
	SampleS         float64          `json:"sample_s"`
	TimeoutS        float64          `json:"timeout_s"`
	PaidFraction    float64          `json:"paid_fraction"`
	CloseAfterS     float64          `json:"close_after_s"`
	PurgeAfterS     float64          `json:"purge_after_s,omitempty"`
	PurgePaidAfterS float64          `json:"purge_paid_after_s,omitempty"`
	RetentionEveryS float64          `json:"retention_every_s"`
	SidecarArgs     []string         `json:"sidecar_args"`
	Created         int64            `json:"created"`
	CreatedPerS     float64          `json:"created_per_s"`
	CreateErrors    int64            `json:"create_errors"`
	Paid            int64            `json:"paid"`
	Purged          int64            `json:"purged"`
	PurgedPaid      int64            `json:"purged_paid"`
	PurgedClosed    int64            `json:"purged_closed"`
	Left            map[string]int64 `json:"orders_left"`
	CancelsCounted  int64            `json:"cancels_counted"`
	LagMs           lagStats         `json:"cancel_lag_ms"`
	SizeMB          thirds           `json:"db_size_mb_max_per_third"`
	SizeSlopeMBMin  float64          `json:"db_size_slope_mb_per_min"`
	// TableMB is SizeMB for each of retentionTables: a table that keeps
	// growing while others shrink can hide in the database's total.
	TableMB          map[string]thirds `json:"table_size_mb_max_per_third"`
	CancelsPerS      thirds            `json:"cancels_per_s_median_per_third"`
	WindowCreated    thirds            `json:"created_per_s_median_per_third"`
	PerCreated       thirds            `json:"cancels_per_created_median_per_third"`
	LagP99Ms         thirds            `json:"window_lag_p99_ms_median_per_third"`
	EndBytes         map[string]int64  `json:"end_table_bytes"`
	EndDBBytes       int64             `json:"end_db_bytes"`
	RiverJobsByState map[string]int64  `json:"end_river_jobs_by_state"`
	Samples          []retentionSample `json:"samples"`
	Invariants       string            `json:"invariants"`
	Criterion        string            `json:"criterion"`
	MeasuredBy       string            `json:"measured_by"`
}

// runRetention runs the retention scenario: purge on, then (with
// --retention-compare) purge off, and judges the purge-on run.
func (b *bench) runRetention(ctx context.Context) error {
	bin, err := b.sidecarBinary(ctx)
	if err != nil {
		msg := "retention skipped: no sidecar binary: " + err.Error()
		slog.Warn(msg)
		b.out.emit(retentionResult{Scenario: "retention", Criterion: msg})
		b.out.add(row{"retention", "skipped", "no sidecar", "", "", err.Error()})
		return nil
	}
	c := b.cfg.retention
	on, err := b.retentionOnce(ctx, bin, true)
	if err != nil {
		return fmt.Errorf("purge on: %w", err)
	}
	b.out.emit(on)
	var off *retentionResult
	if c.compare {
		r, err := b.retentionOnce(ctx, bin, false)
		if err != nil {
			return fmt.Errorf("purge off: %w", err)
		}
		b.out.emit(r)
		off = &r
	}
	b.retentionRows(on, off)
	b.retentionPlots(on, off)
	return nil
}

// retentionOnce runs the workload once against a fresh database and the
// sidecar, with the purge on or off (closing is on in both).
func (b *bench) retentionOnce(ctx context.Context, bin string, purge bool) (retentionResult, error) {
	cfg, c := b.cfg, b.cfg.retention
	res := retentionResult{
		Scenario: "retention", Variant: "purge_off",
		Rate: c.rate, DurationS: c.duration.Seconds(), WarmupS: c.warmup.Seconds(), SampleS: c.sample.Seconds(),
		TimeoutS: cfg.steadyTimeout.Seconds(), PaidFraction: cfg.steadyPaid,
		CloseAfterS: c.closeAfter.Seconds(), RetentionEveryS: retentionEvery.Seconds(),
		Left: map[string]int64{}, EndBytes: map[string]int64{}, RiverJobsByState: map[string]int64{},
		Criterion: retentionCriterion(c),
		MeasuredBy: "every sample reads pg_database_size, pg_total_relation_size of each table, pg_stat_user_tables " +
			"(n_dead_tup, autovacuum_count, n_tup_del of orders = purged so far) and the orders by state; its window's " +
			"cancels are the CANCELLED events of cause timeout or sweep stamped (events.at) between the previous sample's " +
			"database clock and this one's, both minus 1 s, and their lag is events.lateness; created and paid are " +
			"the producer's successful create_order and confirm_payment calls ('paid'); purged = created - orders left; " +
			"purged paid = paid - PAID orders left",
	}
	if purge {
		res.Variant = "purge_on"
		res.PurgeAfterS, res.PurgePaidAfterS = c.purgeAfter.Seconds(), c.purgePaidAfter.Seconds()
	}
	name, err := b.srv.clone(ctx, b.base, "retention")
	if err != nil {
		return res, err
	}
	defer b.srv.drop(name)
	if err := b.srv.checkpoint(ctx); err != nil {
		return res, err
	}

	// The stand-in gateway of steady: no order of this workload needs one.
	var gatewayCalls atomic.Int64
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		gatewayCalls.Add(1)
		http.Error(w, "bench: no gateway", http.StatusServiceUnavailable)
	}))
	defer gateway.Close()

	args := append(b.sidecarArgs(ctx, bin, gateway.URL), "--close-after", c.closeAfter.String())
	if purge {
		args = append(args, "--purge-after", c.purgeAfter.String())
		if c.purgePaidAfter > 0 {
			args = append(args, "--purge-paid-after", c.purgePaidAfter.String())
		}
	}
	res.SidecarArgs = args
	proc, err := b.startSidecar(ctx, bin, args, b.srv.plainURLFor(name))
	if err != nil {
		return res, err
	}
	// startSidecar writes steady's log file: this run's log gets its own
	// name (the open file follows the rename).
	logPath := filepath.Join(filepath.Dir(proc.log), "retention-"+strings.ReplaceAll(res.Variant, "_", "-")+"-sidecar.log")
	if err := os.Rename(proc.log, logPath); err == nil {
		proc.log = logPath
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = proc.stop()
		}
	}()

	pool, err := b.srv.pool(ctx, name, 2*cfg.steadyConns+2)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	if err := waitSidecarReady(ctx, pool, proc); err != nil {
		return res, err
	}
	if err := warmPool(ctx, pool, 2*cfg.steadyConns+2); err != nil {
		return res, err
	}
	sampler, err := b.srv.connect(ctx, name)
	if err != nil {
		return res, err
	}
	defer sampler.Close(context.Background())
	start, err := dbNow(ctx, sampler)
	if err != nil {
		return res, err
	}
	slog.Info("retention: sidecar running, producing", "variant", res.Variant, "rate", c.rate, "duration", c.duration, "log", proc.log)

	// The sampler reads the database every --retention-sample while the
	// producer runs.
	// Its queries run on ctx: a query cancelled half-way would close the
	// connection, which reads the end of the run too.
	stopSampling := make(chan struct{})
	var samples []retentionSample
	var lags []float64
	var sampleErr error
	var sampling sync.WaitGroup
	sampling.Go(func() {
		samples, lags, sampleErr = sampleRetention(ctx, stopSampling, sampler, start, c.sample)
	})
	counter := newSoldCounter(&otDesign{pool: pool})
	// The producer stops at the end of the duration, as capacity's does: on
	// a busy machine what it could not send by then is not created, and the
	// run does not stretch past its samples.
	counts, err := b.produce(ctx, counter, steadyParams{rate: c.rate, duration: c.duration, capacity: true})
	close(stopSampling)
	sampling.Wait()
	if err != nil {
		return res, err
	}
	if sampleErr != nil {
		return res, fmt.Errorf("sample the database: %w", sampleErr)
	}
	res.Samples, res.CreateErrors = samples, counts.createErrors
	res.Created = int64(float64(c.rate)*c.duration.Seconds()) - counts.createErrors - counts.notSent
	res.CreatedPerS = round2(float64(res.Created) / c.duration.Seconds())
	res.Paid = counts.confirmPaid
	res.LagMs = lagStatsOfMs(lags)
	for _, s := range samples {
		res.CancelsCounted += s.Cancels
	}

	if _, err := b.afterProduce(ctx, pool, counts, steadyParams{rate: c.rate, duration: c.duration},
		"", `SELECT coalesce(max(cancel_at), clock_timestamp()) FROM ordertimeout.orders WHERE status <> 'PAID'`); err != nil {
		return res, err
	}
	select {
	case <-proc.Exited():
		return res, fmt.Errorf("sidecar exited during the run: %v (log %s)", proc.Err(), proc.log)
	default:
	}
	stopped = true
	if err := proc.stop(); err != nil {
		slog.Warn("retention: stopping the sidecar", "err", err)
	}
	if n := gatewayCalls.Load(); n > 0 {
		slog.Warn("retention: the stand-in gateway was called", "calls", n)
	}

	if err := b.retentionEnd(ctx, sampler, &res); err != nil {
		return res, err
	}
	judgeRetention(&res)
	res.Invariants, err = b.checkRetentionDatabase(ctx, name, name+" (retention "+res.Variant+")", counter.soldUnits())
	slog.Info("retention", "variant", res.Variant, "created", res.Created, "purged", res.Purged,
		"size_mb", res.SizeMB, "cancels_per_s", res.CancelsPerS, "lag_ms", res.LagMs, "invariants", res.Invariants)
	return res, err
}

// retentionCriterion says how a run is judged.
func retentionCriterion(c retentionConfig) string {
	return fmt.Sprintf("after the %s warm-up, the rest of the producer's %s is cut in thirds: the size is flat when the "+
		"largest pg_database_size of the last third is at most %.0f%% above that of the first, and so is each sampled "+
		"table's pg_total_relation_size (judged only when a third spans at least one %s retention cycle); throughput is flat when the median cancels/s of the last third's "+
		"windows is within %.0f%% of the first third's, and so is the median of cancels per order created (which takes "+
		"out a producer slowed by a shared machine); the purge must have removed orders; the invariants must hold",
		c.warmup, c.duration, c.sizeGrowth*100, retentionEvery, c.cancelDrift*100)
}

// sampleRetention samples the database every every until stop is closed;
// it returns the samples and the lag (ms) of every cancel its windows saw.
func sampleRetention(ctx context.Context, stop <-chan struct{}, conn *pgx.Conn, start time.Time, every time.Duration) ([]retentionSample, []float64, error) {
	var samples []retentionSample
	var lags []float64
	windowStart := start.Add(-windowGrace)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		s, windowEnd, windowLags, err := sampleOnce(ctx, conn, start, windowStart)
		if err != nil {
			return samples, lags, err
		}
		if len(samples) == 0 {
			// The first sample only opens the first window.
			s.WindowS, s.Cancels, s.CancelsPerS, s.CreatedPerS, s.PerCreated, s.LagP99Ms = 0, 0, 0, 0, 0, 0
		} else {
			lags = append(lags, windowLags...)
		}
		samples = append(samples, s)
		windowStart = windowEnd
		select {
		case <-ctx.Done():
			return samples, lags, ctx.Err()
		case <-stop:
			return samples, lags, nil
		case <-tick.C:
		}
	}
}

// sampleOnce reads one sample; its cancel window runs from windowStart to
// the database clock minus windowGrace, which it returns with the window's
// lags (ms).
func sampleOnce(ctx context.Context, conn *pgx.Conn, start, windowStart time.Time) (retentionSample, time.Time, []float64, error) {
	began := time.Now()
	s := retentionSample{Tables: map[string]int64{}, Dead: map[string]int64{}, Autovacuums: map[string]int64{}, Orders: map[string]int64{}}
	var now time.Time
	if err := conn.QueryRow(ctx, `SELECT clock_timestamp(), pg_database_size(current_database())`).Scan(&now, &s.DBBytes); err != nil {
		return s, time.Time{}, nil, fmt.Errorf("read database size: %w", err)
	}
	s.T = now.Sub(start).Seconds()
	rows, err := conn.Query(ctx, `
		SELECT t.name, pg_total_relation_size(t.name::regclass),
		       coalesce(st.n_dead_tup, 0), coalesce(st.autovacuum_count, 0), coalesce(st.n_tup_del, 0)
		FROM unnest($1::text[]) AS t(name)
		LEFT JOIN pg_stat_user_tables AS st ON st.relid = t.name::regclass`, retentionTables)
	if err != nil {
		return s, time.Time{}, nil, fmt.Errorf("read table sizes: %w", err)
	}
	var name string
	var size, dead, vacuums, deleted int64
	if _, err := pgx.ForEachRow(rows, []any{&name, &size, &dead, &vacuums, &deleted}, func() error {
		short := shortName(name)
		s.Tables[short], s.Dead[short], s.Autovacuums[short] = size, dead, vacuums
		if name == "ordertimeout.orders" {
			s.PurgedSoFar = deleted
		}
		return nil
	}); err != nil {
		return s, time.Time{}, nil, fmt.Errorf("read table sizes: %w", err)
	}
	rows, err = conn.Query(ctx, `SELECT status, count(*) FROM ordertimeout.orders GROUP BY status`)
	if err != nil {
		return s, time.Time{}, nil, fmt.Errorf("count orders: %w", err)
	}
	var status string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&status, &n}, func() error { s.Orders[status] = n; return nil }); err != nil {
		return s, time.Time{}, nil, fmt.Errorf("count orders: %w", err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM public.river_job`).Scan(&s.RiverJobs); err != nil {
		return s, time.Time{}, nil, fmt.Errorf("count river_job rows: %w", err)
	}
	windowEnd := now.Add(-windowGrace)
	var lags []float64
	if err := conn.QueryRow(ctx, `
		SELECT coalesce(array_agg((extract(epoch FROM e.lateness) * 1000)::float8), '{}')
		FROM ordertimeout.events AS e
		WHERE e.to_status = 'CANCELLED'
		  AND e.cause IN ('timeout', 'sweep')
		  AND e.at >= $1 AND e.at < $2`, windowStart, windowEnd).Scan(&lags); err != nil {
		return s, time.Time{}, nil, fmt.Errorf("read the window's cancels: %w", err)
	}
	// Orders created in the window: none of them is old enough to have
	// been purged.
	var created int64
	if err := conn.QueryRow(ctx, `
		SELECT count(*) FROM ordertimeout.orders AS o
		WHERE o.created_at >= $1 AND o.created_at < $2`, windowStart, windowEnd).Scan(&created); err != nil {
		return s, time.Time{}, nil, fmt.Errorf("count the window's new orders: %w", err)
	}
	s.WindowS = round2(windowEnd.Sub(windowStart).Seconds())
	s.Cancels = int64(len(lags))
	if s.WindowS > 0 {
		s.CancelsPerS = round2(float64(s.Cancels) / s.WindowS)
		s.CreatedPerS = round2(float64(created) / s.WindowS)
	}
	if created > 0 {
		s.PerCreated = round3(float64(s.Cancels) / float64(created))
	}
	s.LagP99Ms = round2(percentile(lags, 99))
	s.QueryMs = round2(float64(time.Since(began).Microseconds()) / 1000)
	return s, windowEnd, lags, nil
}

// retentionEnd reads what is left once the sidecar has stopped.
func (b *bench) retentionEnd(ctx context.Context, q querier, res *retentionResult) error {
	rows, err := q.Query(ctx, `SELECT status, count(*) FROM ordertimeout.orders GROUP BY status`)
	if err != nil {
		return fmt.Errorf("count orders: %w", err)
	}
	var status string
	var n, left int64
	if _, err := pgx.ForEachRow(rows, []any{&status, &n}, func() error { res.Left[status] = n; left += n; return nil }); err != nil {
		return fmt.Errorf("count orders: %w", err)
	}
	res.Purged = res.Created - left
	res.PurgedPaid = res.Paid - res.Left["PAID"]
	res.PurgedClosed = res.Purged - res.PurgedPaid
	rows, err = q.Query(ctx, `
		SELECT t.name, pg_total_relation_size(t.name::regclass) FROM unnest($1::text[]) AS t(name)
		UNION ALL
		SELECT 'database', pg_database_size(current_database())`, retentionTables)
	if err != nil {
		return fmt.Errorf("read table sizes: %w", err)
	}
	if _, err := pgx.ForEachRow(rows, []any{&status, &n}, func() error {
		if status == "database" {
			res.EndDBBytes = n
		} else {
			res.EndBytes[shortName(status)] = n
		}
		return nil
	}); err != nil {
		return fmt.Errorf("read table sizes: %w", err)
	}
	rows, err = q.Query(ctx, `SELECT state::text, count(*) FROM public.river_job GROUP BY state`)
	if err != nil {
		return fmt.Errorf("count river_job rows: %w", err)
	}
	if _, err := pgx.ForEachRow(rows, []any{&status, &n}, func() error { res.RiverJobsByState[status] = n; return nil }); err != nil {
		return fmt.Errorf("count river_job rows: %w", err)
	}
	return nil
}

// judgeRetention fills the thirds and the size's slope from the samples.
func judgeRetention(res *retentionResult) {
	w, end := res.WarmupS, res.DurationS
	mb := func(s retentionSample) (float64, bool) { return float64(s.DBBytes) / 1e6, true }
	res.SizeMB = compareThirds(res.Samples, w, end, mb, slices.Max)
	if third := (end - w) / 3; third < res.RetentionEveryS {
		res.SizeMB.Judged = false
		res.SizeMB.Why = fmt.Sprintf("each third (%.0f s) is shorter than one %.0f s retention cycle", third, res.RetentionEveryS)
	}
	res.SizeSlopeMBMin = round2(60 * slope(res.Samples, w, end, mb))
	res.TableMB = map[string]thirds{}
	for _, t := range retentionTables {
		short := shortName(t)
		th := compareThirds(res.Samples, w, end, func(s retentionSample) (float64, bool) { return float64(s.Tables[short]) / 1e6, true }, slices.Max)
		th.Judged, th.Why = th.Judged && res.SizeMB.Judged, res.SizeMB.Why
		res.TableMB[short] = th
	}
	windowed := func(pick func(retentionSample) float64) func(retentionSample) (float64, bool) {
		return func(s retentionSample) (float64, bool) { return pick(s), s.WindowS > 0 && s.T <= end }
	}
	res.CancelsPerS = compareThirds(res.Samples, w, end, windowed(func(s retentionSample) float64 { return s.CancelsPerS }), median)
	res.PerCreated = compareThirds(res.Samples, w, end, windowed(func(s retentionSample) float64 { return s.PerCreated }), median)
	res.WindowCreated = compareThirds(res.Samples, w, end, windowed(func(s retentionSample) float64 { return s.CreatedPerS }), median)
	res.LagP99Ms = compareThirds(res.Samples, w, end, windowed(func(s retentionSample) float64 { return s.LagP99Ms }), median)
}

// compareThirds cuts [from, to] into thirds and compares agg of the values
// that pick accepts in the first third with those of the last.
func compareThirds(samples []retentionSample, from, to float64, pick func(retentionSample) (float64, bool), agg func([]float64) float64) thirds {
	third := (to - from) / 3
	var first, last []float64
	for _, s := range samples {
		v, ok := pick(s)
		switch {
		case !ok:
		case s.T >= from && s.T < from+third:
			first = append(first, v)
		case s.T >= to-third && s.T <= to:
			last = append(last, v)
		}
	}
	if len(first) == 0 || len(last) == 0 {
		return thirds{Why: "no sample in the first or the last third"}
	}
	t := thirds{First: round2(agg(first)), Last: round2(agg(last)), Judged: true}
	if t.First > 0 {
		t.Change = math.Round((agg(last)/agg(first)-1)*1000) / 1000 // round3 truncates negatives
	}
	return t
}

// slope is the least-squares slope (per second) of pick over the samples
// from from to to.
func slope(samples []retentionSample, from, to float64, pick func(retentionSample) (float64, bool)) float64 {
	var n, sx, sy, sxx, sxy float64
	for _, s := range samples {
		v, ok := pick(s)
		if !ok || s.T < from || s.T > to {
			continue
		}
		n++
		sx += s.T
		sy += v
		sxx += s.T * s.T
		sxy += s.T * v
	}
	d := n*sxx - sx*sx
	if n < 2 || d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// lagStatsOfMs summarizes lags given in ms.
func lagStatsOfMs(ms []float64) lagStats {
	s := slices.Clone(ms)
	slices.Sort(s)
	return lagStats{
		Count: len(s),
		P50:   round2(percentileSorted(s, 50)),
		P90:   round2(percentileSorted(s, 90)),
		P99:   round2(percentileSorted(s, 99)),
		Max:   round2(percentileSorted(s, 100)),
	}
}

// retentionRows adds the summary rows and the verdicts of the purge-on run
// (and the purge-off run's figures beside them).
func (b *bench) retentionRows(on retentionResult, off *retentionResult) {
	c := b.cfg.retention
	label := fmt.Sprintf("retention, %s orders/s, %s, close %s / purge %s / paid %s, job every %s",
		num(float64(c.rate)), c.duration, c.closeAfter, c.purgeAfter, c.purgePaidAfter, retentionEvery)
	sizeVerdict := "not judged: " + on.SizeMB.Why
	if on.SizeMB.Judged {
		sizeVerdict = atMost(on.SizeMB.Change, c.sizeGrowth)
	}
	cancelVerdict := driftVerdict(on.CancelsPerS, c.cancelDrift)
	purgedVerdict := "missed"
	if on.Purged > 0 {
		purgedVerdict = "met"
	}
	sizeTarget := fmt.Sprintf("≤ +%.0f %%", c.sizeGrowth*100)
	growing, growingVerdict := growingTables(on, c.sizeGrowth)
	b.out.add(
		row{label, "purge on: created (of asked) / paid / purged (closed + paid) / left", fmt.Sprintf("%s (of %s) / %s / %s (%s + %s) / %s",
			num(float64(on.Created)), num(float64(c.rate)*c.duration.Seconds()), num(float64(on.Paid)), num(float64(on.Purged)), num(float64(on.PurgedClosed)),
			num(float64(on.PurgedPaid)), num(float64(sumValues(on.Left)))), "1", "purged > 0", purgedVerdict},
		row{label, "purge on: database size after warm-up, largest of first → last third (MB)", thirdsText(on.SizeMB, "%.1f"), "1", sizeTarget, sizeVerdict},
		row{label, "purge on: database size slope after warm-up (MB/min)", fmt.Sprintf("%.2f", on.SizeSlopeMBMin), "1", "", ""},
		row{label, "purge on: tables whose largest size grew from first to last third (MB)", growing, "1", "none above " + sizeTarget, growingVerdict},
		row{label, "purge on: cancels/s per window, median of first → last third", thirdsText(on.CancelsPerS, "%.0f"), "1",
			fmt.Sprintf("within ±%.0f %%", c.cancelDrift*100), cancelVerdict},
		row{label, "purge on: cancels per order created, per window, median of first → last third", thirdsText(on.PerCreated, "%.3f"), "1",
			fmt.Sprintf("within ±%.0f %%", c.cancelDrift*100), driftVerdict(on.PerCreated, c.cancelDrift)},
		row{label, "purge on: orders created/s per window, median of first → last third (the producer on a shared machine)", thirdsText(on.WindowCreated, "%.0f"), "1", "", ""},
		row{label, "purge on: cancel lag p99 per window, median of first → last third (ms)", thirdsText(on.LagP99Ms, "%.1f"), "1", "", ""},
		row{label, "purge on: cancel lag p50 / p99 / max over the sampled windows (ms)", fmt.Sprintf("%.1f / %.1f / %.1f", on.LagMs.P50, on.LagMs.P99, on.LagMs.Max), "1", "", ""},
		row{label, "purge on: size at the end: database / orders / items / events / releases / payments / river_job (MB)", endSizes(on), "1", "", ""},
		row{label, "purge on: invariants", on.Invariants, "1", "hold", verdictOK(on.Invariants)},
	)
	if off == nil {
		return
	}
	b.out.add(
		row{label, "purge off: database size after warm-up, largest of first → last third (MB)", thirdsText(off.SizeMB, "%.1f"), "1", "", ""},
		row{label, "purge off: database size slope after warm-up (MB/min)", fmt.Sprintf("%.2f", off.SizeSlopeMBMin), "1", "", ""},
		row{label, "purge off: cancels/s per window, median of first → last third", thirdsText(off.CancelsPerS, "%.0f"), "1", "", ""},
		row{label, "purge off: cancel lag p99 per window, median of first → last third (ms)", thirdsText(off.LagP99Ms, "%.1f"), "1", "", ""},
		row{label, "purge off: size at the end: database / orders / items / events / releases / payments / river_job (MB)", endSizes(*off), "1", "", ""},
		row{label, "purge off: invariants", off.Invariants, "1", "hold", verdictOK(off.Invariants)},
	)
}

// growingTables lists the tables of r whose size grew by more than growth
// from the first third to the last, and the verdict (none may).
func growingTables(r retentionResult, growth float64) (string, string) {
	var grew, bad []string
	judged := true
	for _, t := range retentionTables {
		th := r.TableMB[shortName(t)]
		judged = judged && th.Judged
		if th.Change > growth {
			bad = append(bad, shortName(t))
		}
		if th.Change > 0.005 {
			grew = append(grew, fmt.Sprintf("%s %s", shortName(t), thirdsText(th, "%.1f")))
		}
	}
	list := strings.Join(grew, "; ")
	if list == "" {
		list = "none"
	}
	switch {
	case !judged:
		return list, "not judged: " + r.SizeMB.Why
	case len(bad) > 0:
		return list, "missed: " + strings.Join(bad, ", ")
	}
	return list, "met"
}

// shortName is a relation's name without its schema.
func shortName(t string) string {
	return strings.TrimPrefix(strings.TrimPrefix(t, "ordertimeout."), "public.")
}

// driftVerdict says whether t's last third is within drift of its first.
func driftVerdict(t thirds, drift float64) string {
	if !t.Judged {
		return "not judged: " + t.Why
	}
	return atMost(math.Abs(t.Change), drift)
}

// thirdsText formats t as "first → last (change)", or says why there is none.
func thirdsText(t thirds, format string) string {
	if !t.Judged && t.First == 0 && t.Last == 0 {
		return "n/a (" + t.Why + ")"
	}
	return fmt.Sprintf(format+" → "+format+" (%+.1f %%)", t.First, t.Last, t.Change*100)
}

// endSizes lists the database's size and each table's at the end of r, in MB.
func endSizes(r retentionResult) string {
	mb := func(n int64) string { return fmt.Sprintf("%.0f", float64(n)/1e6) }
	parts := []string{mb(r.EndDBBytes)}
	for _, t := range retentionTables {
		parts = append(parts, mb(r.EndBytes[shortName(t)]))
	}
	return strings.Join(parts, " / ")
}

// sumValues adds up the values of m.
func sumValues(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// retentionPlots writes retention_size.svg (database size, purge on and
// off; the tables of the purge-on run; orders left) and
// retention_throughput.svg (cancels/s and lag p99 per window).
func (b *bench) retentionPlots(on retentionResult, off *retentionResult) {
	runs := []retentionResult{on}
	if off != nil {
		runs = append(runs, *off)
	}
	variant := map[string]string{"purge_on": "purge on", "purge_off": "purge off"}
	line := func(r retentionResult, what string, pick func(retentionSample) (float64, bool)) series {
		s := series{name: variant[r.Variant] + ": " + what}
		for _, x := range r.Samples {
			if v, ok := pick(x); ok {
				s.points = append(s.points, point{x.T, v})
			}
		}
		return s
	}
	warmup := func(top float64) series {
		return series{name: fmt.Sprintf("end of warm-up (%s)", b.cfg.retention.warmup), points: []point{{on.WarmupS, 0}, {on.WarmupS, top}}}
	}
	top := func(ss []series) float64 {
		m := 0.0
		for _, s := range ss {
			for _, p := range s.points {
				m = math.Max(m, p.y)
			}
		}
		return m
	}
	c := b.cfg.retention
	xLabel := "seconds since the producer started (database clock)"
	var size, left, tables, rate, lag []series
	for _, r := range runs {
		size = append(size, line(r, "pg_database_size", func(s retentionSample) (float64, bool) { return float64(s.DBBytes) / 1e6, true }))
		left = append(left, line(r, "orders in the table", func(s retentionSample) (float64, bool) { return float64(sumValues(s.Orders)), true }))
		windowed := func(v func(retentionSample) float64) func(retentionSample) (float64, bool) {
			return func(s retentionSample) (float64, bool) { return v(s), s.WindowS > 0 }
		}
		rate = append(rate, line(r, "cancels/s per window", windowed(func(s retentionSample) float64 { return s.CancelsPerS })),
			line(r, "orders created/s per window", windowed(func(s retentionSample) float64 { return s.CreatedPerS })))
		lag = append(lag, line(r, "cancel lag p99 per window", windowed(func(s retentionSample) float64 { return s.LagP99Ms })))
	}
	for _, t := range retentionTables {
		short := shortName(t)
		tables = append(tables, line(on, short, func(s retentionSample) (float64, bool) { return float64(s.Tables[short]) / 1e6, true }))
	}
	size = append(size, warmup(top(size)))
	tables = append(tables, warmup(top(tables)))
	rate = append(rate, warmup(top(rate)))
	lag = append(lag, warmup(top(lag)))
	what := fmt.Sprintf("%s orders/s, close %s, purge %s, paid %s, job every %s", num(float64(c.rate)), c.closeAfter, c.purgeAfter, c.purgePaidAfter, retentionEvery)
	b.writeStackedPlot("retention_size.svg", []plotConfig{
		{title: "retention: database size, " + what, xLabel: xLabel, yLabel: "MB", series: size},
		{title: "retention, purge on: total size of each table (indexes included)", xLabel: xLabel, yLabel: "MB", series: tables},
		{title: "retention: orders in ordertimeout.orders (any state)", xLabel: xLabel, yLabel: "orders", series: left},
	})
	b.writeStackedPlot("retention_throughput.svg", []plotConfig{
		{title: fmt.Sprintf("retention: timeout cancels and new orders per second, %s windows", c.sample), xLabel: xLabel, yLabel: "per second", series: rate},
		{title: "retention: cancel lag p99 per window (events.lateness)", xLabel: xLabel, yLabel: "ms", series: lag},
	})
}

// soldCounter wraps a design and counts, per SKU, the units of every order
// whose confirm_payment answered "paid": what stock.sold must hold, also
// once the purge has deleted paid orders and their items.
type soldCounter struct {
	design
	mu    sync.Mutex
	items map[string][2]orderItem
	sold  map[string]int64
}

// newSoldCounter wraps d.
func newSoldCounter(d design) *soldCounter {
	return &soldCounter{design: d, items: map[string][2]orderItem{}, sold: map[string]int64{}}
}

// create creates the order and remembers its items.
func (c *soldCounter) create(ctx context.Context, id string, it [2]orderItem, timeout time.Duration) error {
	if err := c.design.create(ctx, id, it, timeout); err != nil {
		return err
	}
	c.mu.Lock()
	c.items[id] = it
	c.mu.Unlock()
	return nil
}

// confirm confirms the payment and, when the order became PAID, counts its
// items as sold.
func (c *soldCounter) confirm(ctx context.Context, id, payment string) (bool, error) {
	paid, err := c.design.confirm(ctx, id, payment)
	if paid {
		c.mu.Lock()
		for _, x := range c.items[id] {
			c.sold[x.sku] += int64(x.qty)
		}
		delete(c.items, id)
		c.mu.Unlock()
	}
	return paid, err
}

// soldUnits returns the units sold so far per SKU.
func (c *soldCounter) soldUnits() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.sold)
}

// checkRetentionDatabase runs the bench's invariant checks on database name
// after a retention run (purge_orders adds what the paid orders it deletes
// bought to purged_sales, which the checks count in sold), and compares
// every SKU's sold with what the producer saw sold: they pass only when both
// hold.
func (b *bench) checkRetentionDatabase(ctx context.Context, name, what string, sold map[string]int64) (string, error) {
	conn, err := b.srv.connect(ctx, name)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	started := time.Now()
	skus := make([]string, 0, len(sold))
	units := make([]int64, 0, len(sold))
	for sku, n := range sold {
		skus, units = append(skus, sku), append(units, n)
	}
	var differs []string
	if err := conn.QueryRow(ctx, `
		SELECT coalesce(array_agg(format('sku %s: sold %s, the producer saw %s sold',
		                                 coalesce(st.sku, p.sku), coalesce(st.sold, 0), coalesce(p.units, 0))
		                          ORDER BY coalesce(st.sku, p.sku)), '{}')
		FROM ordertimeout.stock AS st
		FULL JOIN unnest($1::text[], $2::bigint[]) AS p(sku, units) ON p.sku = st.sku
		WHERE coalesce(st.sold, 0) <> coalesce(p.units, 0)`, skus, units).Scan(&differs); err != nil {
		return "", fmt.Errorf("compare sold with what the producer saw: %w", err)
	}
	inv, err := checkInvariants(ctx, conn, b.cfg.maxOverdue)
	if err != nil {
		return "", err
	}
	if len(differs) > 0 {
		if inv == "ok" {
			inv = "VIOLATED: "
		} else {
			inv += " | "
		}
		inv += strings.Join(differs, "; ")
	}
	b.out.invariants(what, inv, time.Since(started))
	return inv, nil
}
