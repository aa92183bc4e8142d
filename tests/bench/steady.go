package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// steadyTarget is docs/workload.md's goal for the cancel lag p99, in ms.
const steadyTarget = 100

// steadyResult is the JSON line of steady.
type steadyResult struct {
	Scenario        string           `json:"scenario"`
	Skipped         string           `json:"skipped,omitempty"`
	Run             int              `json:"run"`
	Rate            int              `json:"rate"`
	Conns           int              `json:"conns"`
	DurationS       float64          `json:"duration_s"`
	TimeoutS        float64          `json:"timeout_s"`
	PaidFraction    float64          `json:"paid_fraction"`
	Created         int64            `json:"created"`
	CreatedPerS     float64          `json:"created_per_s"`
	CreateErrors    int64            `json:"create_errors"`
	LagMs           lagStats         `json:"cancel_lag_ms"`
	Status          map[string]int64 `json:"status"`
	Paid            int64            `json:"paid"`
	Cancelled       int64            `json:"cancelled"`
	Conflicts       int64            `json:"conflicts"`
	CaughtBySweep   int64            `json:"caught_by_sweep"`
	BeginOK         int64            `json:"begin_ok"`
	BeginRefused    int64            `json:"begin_refused"`
	ConfirmPaid     int64            `json:"confirm_paid"`
	ConfirmConflict int64            `json:"confirm_conflict"`
	GatewayCalls    int64            `json:"gateway_calls"`
	SidecarPeakRSS  int64            `json:"sidecar_peak_rss_kb"`
	SidecarCPUS     float64          `json:"sidecar_cpu_s"`
	SidecarArgs     []string         `json:"sidecar_args"`
	Invariants      string           `json:"invariants"`
	MeasuredBy      string           `json:"measured_by"`
}

// runSteady: a producer creates orders at --steady-rate for --steady-duration
// with a --steady-timeout timeout; a --steady-paid fraction gets a payment
// (begin_payment at a random moment before expiry, confirm_payment 50-500 ms
// later); the sidecar runs throughout as a separate process.
func (b *bench) runSteady(ctx context.Context) error {
	bin, err := b.sidecarBinary(ctx)
	if err != nil {
		msg := "steady skipped: no sidecar binary: " + err.Error()
		slog.Warn(msg)
		b.out.emit(steadyResult{Scenario: "steady", Skipped: msg})
		b.out.add(row{"steady", "skipped", "no sidecar", "", "", err.Error()})
		return nil
	}
	var plotLag, plotHist []series
	var runs []steadyResult
	for run := 1; run <= b.cfg.steadyRuns; run++ {
		res, lags, err := b.steadyOnce(ctx, bin)
		if err != nil {
			return err
		}
		res.Run = run
		b.out.emit(res)
		slog.Info("steady run", "run", run, "created_per_s", int(res.CreatedPerS), "lag_p99_ms", res.LagMs.P99, "invariants", res.Invariants)
		runs = append(runs, res)
		if run == 1 {
			plotLag, plotHist = lagSeries(lags), lagHistogram(lags)
		}
	}
	// The summary: the median of each figure over the runs.
	pick := func(f func(steadyResult) float64) float64 {
		var v []float64
		for _, r := range runs {
			v = append(v, f(r))
		}
		return round2(median(v))
	}
	var p99s []string
	for _, r := range runs {
		p99s = append(p99s, fmt.Sprintf("%.1f", r.LagMs.P99))
	}
	created := pick(func(r steadyResult) float64 { return r.CreatedPerS })
	lag := lagStats{
		P50: pick(func(r steadyResult) float64 { return r.LagMs.P50 }),
		P90: pick(func(r steadyResult) float64 { return r.LagMs.P90 }),
		P99: pick(func(r steadyResult) float64 { return r.LagMs.P99 }),
		Max: pick(func(r steadyResult) float64 { return r.LagMs.Max }),
	}
	b.out.emit(steadyMedian{Scenario: "steady_median", Runs: len(runs), CreatedPerS: created, LagMs: lag,
		MeasuredBy: "median over the runs of each run's figure"})
	n := fmt.Sprint(len(runs))
	last := runs[len(runs)-1]
	label := fmt.Sprintf("steady, %d orders/s, %s timeout, %s, %d conns", b.cfg.steadyRate, b.cfg.steadyTimeout, b.cfg.steadyDuration, b.cfg.steadyConns)
	b.out.add(
		row{label, "created/s achieved", num(created), n, "≈ " + num(float64(b.cfg.steadyRate)), atLeast(created, 0.95*float64(b.cfg.steadyRate))},
		row{label, "cancel lag p50 / p90 / p99 / max (ms)", fmt.Sprintf("%.1f / %.1f / %.1f / %.1f",
			lag.P50, lag.P90, lag.P99, lag.Max), n, "p99 ≤ 100 ms", atMost(lag.P99, steadyTarget)},
		row{label, "cancel lag p99 of each run (ms)", strings.Join(p99s, ", "), n, "", ""},
		row{label, "paid / cancelled / conflicts (last run)", fmt.Sprintf("%d / %d / %d", last.Paid, last.Cancelled, last.Conflicts), "1", "", ""},
		row{label, "sidecar peak RSS / CPU", fmt.Sprintf("%.1f MB / %.1f s", pick(func(r steadyResult) float64 { return float64(r.SidecarPeakRSS) / 1024 }),
			pick(func(r steadyResult) float64 { return r.SidecarCPUS })), n, "", ""},
	)
	b.writePlot("steady_lag_time.svg", plotConfig{
		title: fmt.Sprintf("steady: cancel lag (cancelled_at - cancel_at) over time, %d orders/s, %s timeout",
			b.cfg.steadyRate, b.cfg.steadyTimeout),
		xLabel: "cancel_at, seconds since the first order",
		yLabel: "lag (ms)",
		series: plotLag,
	})
	b.writePlot("steady_lag_hist.svg", plotConfig{
		title:  "steady: distribution of the cancel lag",
		xLabel: "lag (ms)",
		yLabel: "orders",
		series: plotHist,
	})
	return nil
}

// steadyMedian is the JSON line summing up the steady runs.
type steadyMedian struct {
	Scenario    string   `json:"scenario"`
	Runs        int      `json:"runs"`
	CreatedPerS float64  `json:"created_per_s"`
	LagMs       lagStats `json:"cancel_lag_ms"`
	MeasuredBy  string   `json:"measured_by"`
}

// lagStats summarizes the cancel lags of a run, in ms.
type lagStats struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// lagSample is one timeout cancel: when it was due (seconds since the first
// order was created) and how late it came (ms).
type lagSample struct{ due, lagMs float64 }

func (b *bench) steadyOnce(ctx context.Context, bin string) (steadyResult, []lagSample, error) {
	cfg := b.cfg
	res := steadyResult{
		Scenario:     "steady",
		Rate:         cfg.steadyRate,
		Conns:        cfg.steadyConns,
		DurationS:    cfg.steadyDuration.Seconds(),
		TimeoutS:     cfg.steadyTimeout.Seconds(),
		PaidFraction: cfg.steadyPaid,
		Status:       map[string]int64{},
		MeasuredBy: "created_per_s = count / (max - min) of orders.created_at; cancel lag = events.lateness " +
			"(cancelled_at - cancel_at) of the CANCELLED events of cause timeout or sweep; peak RSS = VmHWM " +
			"of /proc/<sidecar pid>/status read just before SIGTERM",
	}
	name, err := b.srv.clone(ctx, b.base, "steady")
	if err != nil {
		return res, nil, err
	}
	defer b.srv.drop(name)
	if err := b.srv.checkpoint(ctx); err != nil {
		return res, nil, err
	}

	// A stand-in payment gateway: in this scenario no order needs one (paid
	// orders never reach a timeout; cancelled ones never started a payment),
	// so every call is counted and answered 503.
	var gatewayCalls atomic.Int64
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		gatewayCalls.Add(1)
		http.Error(w, "bench: no gateway", http.StatusServiceUnavailable)
	}))
	defer gateway.Close()

	args := b.sidecarArgs(ctx, bin, gateway.URL)
	res.SidecarArgs = args
	proc, err := b.startSidecar(ctx, bin, args, b.srv.plainURLFor(name))
	if err != nil {
		return res, nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = proc.stop()
		}
	}()

	pool, err := b.srv.pool(ctx, name, 2*cfg.steadyConns+2)
	if err != nil {
		return res, nil, err
	}
	defer pool.Close()
	if err := waitSidecarReady(ctx, pool, proc); err != nil {
		return res, nil, err
	}
	slog.Info("steady: sidecar running, producing", "rate", cfg.steadyRate, "duration", cfg.steadyDuration, "log", proc.log)

	counts, err := b.produce(ctx, pool)
	if err != nil {
		return res, nil, err
	}
	res.CreateErrors, res.BeginOK, res.BeginRefused = counts.createErrors, counts.beginOK, counts.beginRefused
	res.ConfirmPaid, res.ConfirmConflict = counts.confirmPaid, counts.confirmConflict

	// Let the sidecar cancel the last orders.
	var lastDue time.Time
	if err := pool.QueryRow(ctx, `SELECT coalesce(max(cancel_at), clock_timestamp()) FROM ordertimeout.orders`).Scan(&lastDue); err != nil {
		return res, nil, err
	}
	now, err := dbNow(ctx, pool)
	if err != nil {
		return res, nil, err
	}
	select {
	case <-ctx.Done():
		return res, nil, ctx.Err()
	case <-time.After(lastDue.Sub(now) + cfg.steadySettle):
	}
	select {
	case <-proc.exited:
		return res, nil, fmt.Errorf("sidecar exited during the run: %v (log %s)", proc.err, proc.log)
	default:
	}
	res.SidecarPeakRSS, res.SidecarCPUS = proc.usage()
	stopped = true
	if err := proc.stop(); err != nil {
		slog.Warn("steady: stopping the sidecar", "err", err)
	}
	res.GatewayCalls = gatewayCalls.Load()

	var first, last *time.Time
	if err := pool.QueryRow(ctx, `SELECT count(*), min(created_at), max(created_at) FROM ordertimeout.orders`).
		Scan(&res.Created, &first, &last); err != nil {
		return res, nil, err
	}
	if first == nil {
		return res, nil, errors.New("steady: no order was created")
	}
	res.CreatedPerS = round2(perSecond(res.Created, *first, *last))
	rows, err := pool.Query(ctx, `SELECT status, count(*) FROM ordertimeout.orders GROUP BY status`)
	if err != nil {
		return res, nil, err
	}
	var status string
	var count int64
	if _, err := pgx.ForEachRow(rows, []any{&status, &count}, func() error { res.Status[status] = count; return nil }); err != nil {
		return res, nil, err
	}
	res.Paid, res.Cancelled = res.Status["PAID"], res.Status["CANCELLED"]
	if err := pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM ordertimeout.conflicts),
		       (SELECT count(*) FROM ordertimeout.events WHERE cause = 'sweep' AND to_status = 'CANCELLED')`).
		Scan(&res.Conflicts, &res.CaughtBySweep); err != nil {
		return res, nil, err
	}

	rows, err = pool.Query(ctx, `
		SELECT extract(epoch FROM o.cancel_at - $1::timestamptz)::float8,
		       (extract(epoch FROM e.lateness) * 1000)::float8
		FROM ordertimeout.events AS e
		JOIN ordertimeout.orders AS o ON o.order_id = e.order_id
		WHERE e.to_status = 'CANCELLED'
		  AND e.cause IN ('timeout', 'sweep')
		ORDER BY o.cancel_at`, *first)
	if err != nil {
		return res, nil, err
	}
	var lags []lagSample
	var s lagSample
	if _, err := pgx.ForEachRow(rows, []any{&s.due, &s.lagMs}, func() error { lags = append(lags, s); return nil }); err != nil {
		return res, nil, err
	}
	ms := make([]float64, len(lags))
	for i, l := range lags {
		ms[i] = l.lagMs
	}
	slices.Sort(ms)
	res.LagMs = lagStats{
		Count: len(ms),
		P50:   round2(percentileSorted(ms, 50)),
		P90:   round2(percentileSorted(ms, 90)),
		P99:   round2(percentileSorted(ms, 99)),
		Max:   round2(percentileSorted(ms, 100)),
	}
	res.Invariants, err = b.checkDatabase(ctx, name, name+" (steady)", cfg.maxOverdue)
	slog.Info("steady", "created_per_s", int(res.CreatedPerS), "lag_ms", res.LagMs, "paid", res.Paid,
		"cancelled", res.Cancelled, "conflicts", res.Conflicts, "invariants", res.Invariants)
	return res, lags, err
}

// lagSeries is the lag of every cancel over time, plus per-second p50 and p99
// lines.
func lagSeries(lags []lagSample) []series {
	dots := series{name: "each timeout cancel", dots: true}
	bySecond := map[int][]float64{}
	for _, l := range lags {
		dots.points = append(dots.points, point{l.due, l.lagMs})
		sec := int(math.Floor(l.due))
		bySecond[sec] = append(bySecond[sec], l.lagMs)
	}
	secs := make([]int, 0, len(bySecond))
	for s := range bySecond {
		secs = append(secs, s)
	}
	slices.Sort(secs)
	p50 := series{name: "p50 per second"}
	p99 := series{name: "p99 per second"}
	for _, s := range secs {
		p50.points = append(p50.points, point{float64(s) + 0.5, percentile(bySecond[s], 50)})
		p99.points = append(p99.points, point{float64(s) + 0.5, percentile(bySecond[s], 99)})
	}
	return []series{dots, p50, p99}
}

// lagHistogram bins the lags up to their 99.9th percentile; later ones go to
// the last bin.
func lagHistogram(lags []lagSample) []series {
	if len(lags) == 0 {
		return nil
	}
	ms := make([]float64, len(lags))
	for i, l := range lags {
		ms[i] = l.lagMs
	}
	slices.Sort(ms)
	top := math.Max(percentileSorted(ms, 99.9), 1)
	width := niceStep(top / 40)
	bins := int(math.Ceil(top/width)) + 1
	counts := make([]float64, bins)
	for _, v := range ms {
		i := min(int(math.Max(v, 0)/width), bins-1)
		counts[i]++
	}
	h := series{name: fmt.Sprintf("orders per %.3g ms bin (last bin: all later)", width), barWidth: width}
	for i, c := range counts {
		h.points = append(h.points, point{(float64(i) + 0.5) * width, c})
	}
	return []series{h}
}

// produced counts the calls of the producer and of the payments.
type produced struct {
	createErrors, beginOK, beginRefused, confirmPaid, confirmConflict int64
}

// produce creates --steady-rate orders per second for --steady-duration on
// pool and pays a --steady-paid fraction of them: begin_payment at a random
// moment before expiry, confirm_payment 50-500 ms later. It returns once every
// payment is done.
func (b *bench) produce(ctx context.Context, pool *pgxpool.Pool) (produced, error) {
	cfg := b.cfg
	// The producer: the number of orders due by now grows at the rate; the
	// connections take them from a queue.
	total := int(float64(cfg.steadyRate) * cfg.steadyDuration.Seconds())
	queue := make(chan int, cfg.steadyRate)
	go func() {
		defer close(queue)
		start := time.Now()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		sent := 0
		for sent < total {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			due := min(total, int(time.Since(start).Seconds()*float64(cfg.steadyRate)))
			for ; sent < due; sent++ {
				queue <- sent
			}
		}
	}()

	var createErrors, beginOK, beginRefused, confirmPaid, confirmConflict atomic.Int64
	var firstErr error
	var errOnce sync.Once
	fail := func(err error) { errOnce.Do(func() { firstErr = err }) }
	var payments, producers sync.WaitGroup
	for c := range cfg.steadyConns {
		r := b.newRand(uint64(3000 + c))
		producers.Go(func() {
			for i := range queue {
				id := "s" + strconv.Itoa(i+1)
				if _, err := pool.Exec(ctx, `SELECT FROM ordertimeout.create_order($1, $2::jsonb, $3::interval)`,
					id, items(r), cfg.steadyTimeout); err != nil {
					createErrors.Add(1)
					fail(fmt.Errorf("create_order %s: %w", id, err))
					continue
				}
				if r.Float64() >= cfg.steadyPaid {
					continue
				}
				begin := time.Duration(r.Float64() * 0.95 * float64(cfg.steadyTimeout))
				confirm := 50*time.Millisecond + time.Duration(r.Float64()*float64(450*time.Millisecond))
				payments.Add(1)
				time.AfterFunc(begin, func() {
					payment := "p" + id
					if _, err := pool.Exec(ctx, `SELECT FROM ordertimeout.begin_payment($1, $2)`, id, payment); err != nil {
						if pgCode(err) == "" {
							fail(fmt.Errorf("begin_payment %s: %w", id, err))
						}
						beginRefused.Add(1)
						payments.Done()
						return
					}
					beginOK.Add(1)
					time.AfterFunc(confirm, func() {
						defer payments.Done()
						var outcome string
						if err := pool.QueryRow(ctx, `SELECT ordertimeout.confirm_payment($1, $2)`, id, payment).Scan(&outcome); err != nil {
							fail(fmt.Errorf("confirm_payment %s: %w", id, err))
							return
						}
						if outcome == "paid" {
							confirmPaid.Add(1)
						} else {
							confirmConflict.Add(1)
						}
					})
				})
			}
		})
	}
	producers.Wait()
	payments.Wait()
	if firstErr != nil {
		slog.Warn("steady: calls failed", "first", firstErr)
	}
	return produced{
		createErrors:    createErrors.Load(),
		beginOK:         beginOK.Load(),
		beginRefused:    beginRefused.Load(),
		confirmPaid:     confirmPaid.Load(),
		confirmConflict: confirmConflict.Load(),
	}, ctx.Err()
}
