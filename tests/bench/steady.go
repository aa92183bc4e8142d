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
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

// steadyTarget is docs/workload.md's goal for the cancel lag p99, in ms.
const steadyTarget = 100

// steadyResult is the JSON line of steady.
type steadyResult struct {
	Scenario        string           `json:"scenario"`
	Design          string           `json:"design"`
	Skipped         string           `json:"skipped,omitempty"`
	Run             int              `json:"run"`
	Rate            int              `json:"rate"`
	Asked           int              `json:"asked"`
	NotSent         int64            `json:"not_sent,omitempty"`
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
	SidecarArgs     []string         `json:"sidecar_args,omitempty"`
	HostCPUS        float64          `json:"host_cpu_s"`
	CPUPer1000      float64          `json:"host_cpu_s_per_1000_orders"`
	CPUWindowS      float64          `json:"cpu_window_s"` // wall seconds of the CPU window
	OwnCPUS         float64          `json:"own_cpu_s"`
	OwnPer1000      float64          `json:"own_cpu_s_per_1000_orders"`
	OverdueAfter    *int64           `json:"overdue_pending_after_stop,omitempty"`
	Zset            map[string]int64 `json:"zset_scanners,omitempty"`
	Invariants      string           `json:"invariants"`
	MeasuredBy      string           `json:"measured_by"`
}

// runSteady: a producer creates orders at --steady-rate for --steady-duration
// with a --steady-timeout timeout; a --steady-paid fraction gets a payment
// (begin_payment at a random moment before expiry, confirm_payment 50-500 ms
// later); the sidecar runs throughout as a separate process. The ZSet
// baseline runs the same workload, its runs alternating with ordertimeout's.
func (b *bench) runSteady(ctx context.Context) error {
	bin, err := b.sidecarBinary(ctx)
	if err != nil {
		msg := "steady skipped: no sidecar binary: " + err.Error()
		slog.Warn(msg)
		b.out.emit(steadyResult{Scenario: "steady", Skipped: msg})
		b.out.add(row{"steady", "skipped", "no sidecar", "", "", err.Error()})
		return nil
	}
	p := b.steadyParams()
	var plotLag, plotHist []series
	var runs, zruns []steadyResult
	for run := 1; run <= b.cfg.steadyRuns; run++ {
		res, lags, err := b.steadyOnce(ctx, bin, p)
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
		if b.redis == nil {
			continue
		}
		zres, zlags, err := b.zsetSteadyOnce(ctx, p)
		if err != nil {
			return fmt.Errorf("zset baseline: %w", err)
		}
		zres.Run = run
		b.out.emit(zres)
		zruns = append(zruns, zres)
		if run == 1 {
			for _, s := range lagSeries(zlags)[1:] {
				s.name = "ZSet baseline: " + s.name
				plotLag = append(plotLag, s)
			}
		}
	}
	label := fmt.Sprintf("steady, %d orders/s, %s timeout, %s, %d conns", b.cfg.steadyRate, b.cfg.steadyTimeout, b.cfg.steadyDuration, b.cfg.steadyConns)
	ours := b.steadyRows(label, "ordertimeout", runs, true)
	if len(zruns) > 0 {
		theirs := b.steadyRows(label, "ZSet baseline", zruns, false)
		if ours.LagMs.P99 > 0 {
			ratio := round2(theirs.LagMs.P99 / ours.LagMs.P99)
			b.out.add(row{label, "cancel lag p99: ZSet / ordertimeout", fmt.Sprintf("%.1f×", ratio), fmt.Sprint(len(runs)), "≥ 5×", atLeast(ratio, 5)})
		}
		if theirs.OwnPer1000 > 0 {
			b.out.add(row{label, "CPU per order, whole lifecycle (own processes): ordertimeout / ZSet",
				fmt.Sprintf("%.2f×", ours.OwnPer1000/theirs.OwnPer1000), fmt.Sprint(len(runs)), "", ""})
		}
	}
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

// steadyRows emits the median line of one design's steady runs and adds its
// rows to the summary; target says whether WORKLOAD's targets apply.
func (b *bench) steadyRows(label, design string, runs []steadyResult, target bool) steadyMedian {
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
	m := steadyMedian{Scenario: "steady_median", Design: runs[0].Design, Runs: len(runs),
		CreatedPerS: pick(func(r steadyResult) float64 { return r.CreatedPerS }),
		LagMs: lagStats{
			P50: pick(func(r steadyResult) float64 { return r.LagMs.P50 }),
			P90: pick(func(r steadyResult) float64 { return r.LagMs.P90 }),
			P99: pick(func(r steadyResult) float64 { return r.LagMs.P99 }),
			Max: pick(func(r steadyResult) float64 { return r.LagMs.Max }),
		},
		CPUPer1000: round3(median(func() []float64 {
			var v []float64
			for _, r := range runs {
				v = append(v, r.CPUPer1000)
			}
			return v
		}())),
		OwnPer1000: round3(median(func() []float64 {
			var v []float64
			for _, r := range runs {
				v = append(v, r.OwnPer1000)
			}
			return v
		}())),
		MeasuredBy: "median over the runs of each run's figure"}
	b.out.emit(m)
	n := fmt.Sprint(len(runs))
	last := runs[len(runs)-1]
	createdTarget, createdVerdict, lagTarget, lagVerdict := "", "", "", ""
	if target {
		createdTarget, createdVerdict = "≈ "+num(float64(b.cfg.steadyRate)), atLeast(m.CreatedPerS, 0.95*float64(b.cfg.steadyRate))
		lagTarget, lagVerdict = "p99 ≤ 100 ms", atMost(m.LagMs.P99, steadyTarget)
	}
	b.out.add(
		row{label, design + ": created/s achieved", num(m.CreatedPerS), n, createdTarget, createdVerdict},
		row{label, design + ": cancel lag p50 / p90 / p99 / max (ms)", fmt.Sprintf("%.1f / %.1f / %.1f / %.1f",
			m.LagMs.P50, m.LagMs.P90, m.LagMs.P99, m.LagMs.Max), n, lagTarget, lagVerdict},
		row{label, design + ": cancel lag p99 of each run (ms)", strings.Join(p99s, ", "), n, "", ""},
		row{label, design + ": paid / cancelled / conflicts (last run)", fmt.Sprintf("%d / %d / %d", last.Paid, last.Cancelled, last.Conflicts), "1", "", ""},
		row{label, design + ": CPU s per 1,000 orders, whole lifecycle: own processes / host", fmt.Sprintf("%.3f / %.3f", m.OwnPer1000, m.CPUPer1000), n, "", ""},
	)
	if design == "ordertimeout" {
		b.out.add(row{label, "sidecar peak RSS / CPU", fmt.Sprintf("%.1f MB / %.1f s", pick(func(r steadyResult) float64 { return float64(r.SidecarPeakRSS) / 1024 }),
			pick(func(r steadyResult) float64 { return r.SidecarCPUS })), n, "", ""})
	}
	return m
}

// steadyMedian is the JSON line summing up the steady runs.
type steadyMedian struct {
	Scenario    string   `json:"scenario"`
	Design      string   `json:"design"`
	Runs        int      `json:"runs"`
	CreatedPerS float64  `json:"created_per_s"`
	LagMs       lagStats `json:"cancel_lag_ms"`
	CPUPer1000  float64  `json:"host_cpu_s_per_1000_orders"`
	OwnPer1000  float64  `json:"own_cpu_s_per_1000_orders"`
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

// steadyParams is one steady run: its rate and duration; capacity runs stop
// the producer at the end of the duration (what it could not send by then
// is not created) and count the overdue PENDING orders
// --capacity-overdue-after the producer stopped.
type steadyParams struct {
	rate     int
	duration time.Duration
	capacity bool
}

func (b *bench) steadyParams() steadyParams {
	return steadyParams{rate: b.cfg.steadyRate, duration: b.cfg.steadyDuration}
}

// newSteadyResult fills what both designs report alike.
func (b *bench) newSteadyResult(design string, p steadyParams) steadyResult {
	cfg := b.cfg
	scenario := "steady"
	if p.capacity {
		scenario = "capacity_step"
	}
	return steadyResult{
		Scenario:     scenario,
		Design:       design,
		Rate:         p.rate,
		Asked:        int(float64(p.rate) * p.duration.Seconds()),
		Conns:        cfg.steadyConns,
		DurationS:    p.duration.Seconds(),
		TimeoutS:     cfg.steadyTimeout.Seconds(),
		PaidFraction: cfg.steadyPaid,
		Status:       map[string]int64{},
	}
}

// hostCPUBy says how the host CPU figures are measured.
const hostCPUBy = "host_cpu_s = busy time (user+nice+system+irq+softirq) of /proc/stat's cpu line from just " +
	"before the producer starts to the end of the settle wait, every process of the machine included; " +
	"per 1,000 orders = host_cpu_s / created * 1000; own_cpu_s = the same window's CPU of this run's processes only " +
	"(PostgreSQL's postmaster and children, the benchmark process with the producer, payments and ZSet scanners, " +
	"the sidecar, redis-server), from /proc/<pid>/stat"

func (b *bench) steadyOnce(ctx context.Context, bin string, p steadyParams) (steadyResult, []lagSample, error) {
	cfg := b.cfg
	res := b.newSteadyResult("ordertimeout", p)
	res.MeasuredBy = "created_per_s = count / (max - min) of orders.created_at; cancel lag = events.lateness " +
		"(cancelled_at - cancel_at) of the CANCELLED events of cause timeout or sweep; peak RSS = VmHWM " +
		"of /proc/<sidecar pid>/status read just before SIGTERM; " + hostCPUBy
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
	slog.Info("steady: sidecar running, producing", "rate", p.rate, "duration", p.duration, "log", proc.log)

	if err := warmPool(ctx, pool, 2*cfg.steadyConns+2); err != nil {
		return res, nil, err
	}
	cpu := b.startCPU(proc.PID(), b.redis.pid())
	counts, err := b.produce(ctx, &otDesign{pool: pool}, p)
	if err != nil {
		return res, nil, err
	}
	counts.fill(&res)

	// Let the sidecar cancel the last orders.
	res.OverdueAfter, err = b.afterProduce(ctx, pool, counts, p,
		`SELECT count(*) FROM ordertimeout.orders WHERE status = 'PENDING' AND cancel_at < clock_timestamp()`,
		// Paid orders do not count: begin_payment moved their cancel_at to
		// the gateway's expiry (the default paying window, 15 minutes).
		`SELECT coalesce(max(cancel_at), clock_timestamp()) FROM ordertimeout.orders WHERE status <> 'PAID'`)
	if err != nil {
		return res, nil, err
	}
	res.HostCPUS = round2(cpu.stop(b))
	res.OwnCPUS = round2(cpu.own())
	res.CPUWindowS = round2(cpu.wall.Seconds())
	select {
	case <-proc.Exited():
		return res, nil, fmt.Errorf("sidecar exited during the run: %v (log %s)", proc.Err(), proc.log)
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
	res.CPUPer1000 = perThousand(res.HostCPUS, res.Created)
	res.OwnPer1000 = perThousand(res.OwnCPUS, res.Created)
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
	res.LagMs = lagStatsOf(lags)
	res.Invariants, err = b.checkDatabase(ctx, name, name+" ("+res.Scenario+")", cfg.maxOverdue)
	slog.Info(res.Scenario, "design", res.Design, "rate", p.rate, "created_per_s", int(res.CreatedPerS), "lag_ms", res.LagMs, "paid", res.Paid,
		"cancelled", res.Cancelled, "conflicts", res.Conflicts, "own_cpu_s_per_1000", res.OwnPer1000, "invariants", res.Invariants)
	return res, lags, err
}

// lagStatsOf summarizes lags.
func lagStatsOf(lags []lagSample) lagStats {
	ms := make([]float64, len(lags))
	for i, l := range lags {
		ms[i] = l.lagMs
	}
	slices.Sort(ms)
	return lagStats{
		Count: len(ms),
		P50:   round2(percentileSorted(ms, 50)),
		P90:   round2(percentileSorted(ms, 90)),
		P99:   round2(percentileSorted(ms, 99)),
		Max:   round2(percentileSorted(ms, 100)),
	}
}

// afterProduce waits until every order is due and settled: for a capacity
// run it first counts, --capacity-overdue-after the producer stopped, the
// PENDING orders past their deadline (overdueSQL); then it waits until the
// last deadline (lastDueSQL) plus --steady-settle.
func (b *bench) afterProduce(ctx context.Context, q querier, counts produced, p steadyParams, overdueSQL, lastDueSQL string) (*int64, error) {
	var overdue *int64
	if p.capacity {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Until(counts.producerDone.Add(b.cfg.capacityOverdue))):
		}
		var n int64
		if err := q.QueryRow(ctx, overdueSQL).Scan(&n); err != nil {
			return nil, fmt.Errorf("count overdue orders: %w", err)
		}
		overdue = &n
	}
	var lastDue time.Time
	if err := q.QueryRow(ctx, lastDueSQL).Scan(&lastDue); err != nil {
		return nil, err
	}
	now, err := dbNow(ctx, q)
	if err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(lastDue.Sub(now) + b.cfg.steadySettle):
	}
	return overdue, nil
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
	createErrors, beginOK, beginRefused, confirmPaid, confirmConflict, notSent int64
	producerDone                                                               time.Time
}

func (c produced) fill(res *steadyResult) {
	res.CreateErrors, res.BeginOK, res.BeginRefused = c.createErrors, c.beginOK, c.beginRefused
	res.ConfirmPaid, res.ConfirmConflict, res.NotSent = c.confirmPaid, c.confirmConflict, c.notSent
}

// design is the application side of one design: create an order, begin and
// confirm its payment.
type design interface {
	create(ctx context.Context, id string, it [2]orderItem, timeout time.Duration) error
	// begin returns false when the design refused the payment (the order
	// was no longer open).
	begin(ctx context.Context, id, payment string) (bool, error)
	// confirm returns true when the order became PAID.
	confirm(ctx context.Context, id, payment string) (bool, error)
}

// otDesign is ordertimeout's SQL API.
type otDesign struct{ pool otDB }

// otDB is what a pool and a connection have in common for the API calls.
type otDB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (d *otDesign) create(ctx context.Context, id string, it [2]orderItem, timeout time.Duration) error {
	if _, err := d.pool.Exec(ctx, `SELECT FROM ordertimeout.create_order($1, $2::jsonb, $3::interval)`,
		id, itemsJSON(it), timeout); err != nil {
		return fmt.Errorf("create_order %s: %w", id, err)
	}
	return nil
}

func (d *otDesign) begin(ctx context.Context, id, payment string) (bool, error) {
	if _, err := d.pool.Exec(ctx, `SELECT FROM ordertimeout.begin_payment($1, $2)`, id, payment); err != nil {
		if sqlstate.Code(err) != "" {
			return false, nil
		}
		return false, fmt.Errorf("begin_payment %s: %w", id, err)
	}
	return true, nil
}

func (d *otDesign) confirm(ctx context.Context, id, payment string) (bool, error) {
	var outcome string
	if err := d.pool.QueryRow(ctx, `SELECT ordertimeout.confirm_payment($1, $2)`, id, payment).Scan(&outcome); err != nil {
		return false, fmt.Errorf("confirm_payment %s: %w", id, err)
	}
	return outcome == "paid", nil
}

// warmPool opens n connections of pool and pings them, so that the
// measured window starts with a warm pool, as an application's is.
func warmPool(ctx context.Context, pool *pgxpool.Pool, n int) error {
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("warm the pool: %w", err)
		}
		conns = append(conns, c)
		if err := c.Ping(ctx); err != nil {
			return fmt.Errorf("warm the pool: %w", err)
		}
	}
	return nil
}

// produce creates p.rate orders per second for p.duration through d, from
// --steady-conns goroutines, and pays a --steady-paid fraction of them:
// begin at a random moment before expiry, confirm 50-500 ms later. It
// returns once every payment is done. A capacity run stops creating at the
// end of p.duration: orders not sent by then are counted as not sent.
func (b *bench) produce(ctx context.Context, d design, p steadyParams) (produced, error) {
	cfg := b.cfg
	// The producer: the number of orders due by now grows at the rate; the
	// connections take them from a queue.
	total := int(float64(p.rate) * p.duration.Seconds())
	queue := make(chan int, p.rate)
	start := time.Now()
	// A capacity run's producer stops at the end of the duration: what it
	// could not hand to a connection by then is not sent, neither what it
	// had not queued nor what waited in the queue (up to a second's worth).
	// Created after the duration, those would count towards "created ≥ 97 %
	// of asked" orders the design could not take in time.
	var stopAt <-chan struct{}
	if p.capacity {
		halt := make(chan struct{})
		timer := time.AfterFunc(p.duration, func() { close(halt) })
		defer timer.Stop()
		stopAt = halt
	}
	var notSent int64
	var late atomic.Int64 // taken from the queue after the stop, not sent
	go func() {
		defer close(queue)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		sent := 0
		defer func() { notSent = int64(total - sent) }()
		for sent < total {
			select {
			case <-ctx.Done():
				return
			case <-stopAt:
				return
			case <-tick.C:
			}
			due := min(total, int(time.Since(start).Seconds()*float64(p.rate)))
			for ; sent < due; sent++ {
				select {
				case queue <- sent:
				case <-ctx.Done():
					return
				case <-stopAt:
					return
				}
			}
		}
	}()

	var createErrors, beginOK, beginRefused, confirmPaid, confirmConflict atomic.Int64
	var firstErr error
	var errOnce sync.Once
	fail := func(err error) { errOnce.Do(func() { firstErr = err }) }
	var payments, producers sync.WaitGroup
	// The payments have --steady-conns connections of their own, as the
	// producer has: at most that many payment calls at once. The pool holds
	// both, and two more for the benchmark's queries; without this bound
	// the payments of a slow minute took every free connection of it.
	paySlots := make(chan struct{}, cfg.steadyConns)
	pay := func(call func()) {
		paySlots <- struct{}{}
		defer func() { <-paySlots }()
		call()
	}
	for c := range cfg.steadyConns {
		r := b.newRand(uint64(3000 + c))
		producers.Go(func() {
			for i := range queue {
				select {
				case <-stopAt:
					late.Add(1)
					continue
				default:
				}
				id := "s" + strconv.Itoa(i+1)
				if err := d.create(ctx, id, drawItems(r), cfg.steadyTimeout); err != nil {
					createErrors.Add(1)
					fail(err)
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
					var ok bool
					var err error
					pay(func() { ok, err = d.begin(ctx, id, payment) })
					if err != nil {
						fail(err)
					}
					if !ok {
						beginRefused.Add(1)
						payments.Done()
						return
					}
					beginOK.Add(1)
					time.AfterFunc(confirm, func() {
						defer payments.Done()
						var paid bool
						var err error
						pay(func() { paid, err = d.confirm(ctx, id, payment) })
						switch {
						case err != nil:
							fail(err)
						case paid:
							confirmPaid.Add(1)
						default:
							confirmConflict.Add(1)
						}
					})
				})
			}
		})
	}
	producers.Wait()
	done := time.Now()
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
		notSent:         notSent + late.Load(),
		producerDone:    done,
	}, ctx.Err()
}
