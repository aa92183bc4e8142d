package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// drainTarget is docs/workload.md's goal for one sweep session: cancellations per
// second.
const drainTarget = 20000

// drainStats is what one drain run measured. Rates and times come from the
// event log (events.at of the CANCELLED events, which is orders.cancelled_at)
// and the database clock at the start; batch durations are the client's
// round trip of each sweep_due call.
type drainStats struct {
	Run         int     `json:"run"`
	Cancelled   int64   `json:"cancelled"`
	CancelPerS  float64 `json:"cancel_per_s"`
	TimeToZeroS float64 `json:"time_to_zero_s"`
	Batches     int     `json:"batches"`
	BatchP50Ms  float64 `json:"batch_p50_ms"`
	BatchP99Ms  float64 `json:"batch_p99_ms"`
	BatchMaxMs  float64 `json:"batch_max_ms"`
	Invariants  string  `json:"invariants"`

	batches []batchSample
}

// batchSample is one sweep_due call.
type batchSample struct {
	session   int
	end       float64 // seconds since the start of the drain
	duration  time.Duration
	cancelled int
}

// drainResult is the JSON line of one drain variant.
type drainResult struct {
	Scenario        string       `json:"scenario"`
	Sessions        int          `json:"sessions"`
	Batch           int          `json:"batch"`
	Orders          int          `json:"orders"`
	BacklogRows     int          `json:"backlog_rows,omitempty"`
	DataSet         string       `json:"data_set,omitempty"`
	CancelPerS      float64      `json:"cancel_per_s"`
	Median          float64      `json:"median"`
	TimeToZeroS     float64      `json:"time_to_zero_s"`
	BatchP99Ms      float64      `json:"batch_p99_ms"`
	Target          float64      `json:"target_cancel_per_s,omitempty"`
	RatioVsEmpty    float64      `json:"ratio_vs_empty,omitempty"`
	BytesPerOrder   float64      `json:"bytes_per_order,omitempty"`
	MBPerMillion    float64      `json:"mb_per_million_orders,omitempty"`
	BacklogInsertS  float64      `json:"backlog_insert_s,omitempty"`
	Runs            []drainStats `json:"runs"`
	Invariants      string       `json:"invariants"`
	MeasuredBy      string       `json:"measured_by"`
	DataGeneratedBy string       `json:"data_generated_by"`
}

const (
	drainMeasuredBy = "cancel_per_s = count / (max - min) of events.at of the CANCELLED events; " +
		"time_to_zero = max(events.at) - clock_timestamp() read just before the sweep sessions start; " +
		"batch_*_ms = client round trip of each sweep_due call"
	drainDataBy = "create_order(id, 2 random items, timeout => '1 millisecond') with grace 0, " +
		"so every order is due when the canceller starts; then VACUUM ANALYZE and CHECKPOINT; " +
		"each run on a fresh CREATE DATABASE ... TEMPLATE copy, CHECKPOINT after the copy"
)

// runDrain measures the in-database sweep on the drain data set, once per
// session count, then the baselines on the same data set.
func (b *bench) runDrain(ctx context.Context) error {
	tmpl, err := b.drainTemplate(ctx)
	if err != nil {
		return err
	}
	var plot []series
	ours := map[int]float64{}
	for _, sessions := range b.cfg.sessions {
		var runs []drainStats
		for run := 1; run <= b.cfg.runs; run++ {
			st, err := b.drainOnce(ctx, tmpl, sessions, fmt.Sprintf("drain_s%d", sessions))
			if err != nil {
				return err
			}
			st.Run = run
			slog.Info("drain run", "sessions", sessions, "run", run, "cancel_per_s", int(st.CancelPerS),
				"time_to_zero_s", st.TimeToZeroS, "invariants", st.Invariants)
			runs = append(runs, st)
		}
		res := b.drainSummary(runs, sessions, "drain", 0)
		b.out.emit(res)
		ours[sessions] = res.Median
		label := fmt.Sprintf("drain, %d session(s)", sessions)
		b.out.add(
			row{label, "cancellations/s", num(res.Median), fmt.Sprint(len(runs)), "≥ " + num(drainTarget), atLeast(res.Median, drainTarget)},
			row{label, "time to zero (s)", fmt.Sprintf("%.2f", res.TimeToZeroS), fmt.Sprint(len(runs)), "", ""},
			row{label, "batch p99 (ms)", fmt.Sprintf("%.1f", res.BatchP99Ms), fmt.Sprint(len(runs)), "", ""},
		)
		if sessions == 1 {
			m := drainStats{CancelPerS: res.Median, TimeToZeroS: res.TimeToZeroS, BatchP99Ms: res.BatchP99Ms, batches: runs[0].batches}
			b.drainEmpty = &m
		}
		plot = append(plot, batchSeries(fmt.Sprintf("%d session(s), run 1", sessions), runs[0].batches)...)
	}
	b.writePlot("drain_batches.svg", plotConfig{
		title:  fmt.Sprintf("drain: cancellations/s of each sweep_due(%d) call, %d due orders", b.cfg.batch, b.cfg.drainOrders),
		xLabel: "seconds since the canceller started",
		yLabel: "orders/s in the batch",
		series: plot,
	})

	b.out.add(row{"drain data set (loading)", fmt.Sprintf("create_order/s, %d clients", b.cfg.loadClients), num(b.loadRate), "1", "", ""})
	if b.redis != nil {
		if err := b.runZsetDrain(ctx, ours); err != nil {
			return fmt.Errorf("zset baseline: %w", err)
		}
		b.out.add(row{"ZSet drain data set (loading)", fmt.Sprintf("ZSet create transactions/s, %d clients", b.cfg.loadClients), num(b.zsetLoad), "1", "", ""})
	}
	if !b.cfg.baselines {
		return nil
	}
	one := 0.0
	if b.drainEmpty != nil {
		one = b.drainEmpty.CancelPerS
	}
	if err := b.runNaive(ctx, tmpl, one); err != nil {
		return fmt.Errorf("naive River baseline: %w", err)
	}
	if err := b.runPgbench(ctx, tmpl, one); err != nil {
		return fmt.Errorf("pgbench baseline: %w", err)
	}
	return nil
}

// drainSummary folds runs into the JSON line of one variant.
func (b *bench) drainSummary(runs []drainStats, sessions int, scenario string, backlog int) drainResult {
	var rates, ttz, p99 []float64
	inv := "ok"
	for _, r := range runs {
		rates = append(rates, r.CancelPerS)
		ttz = append(ttz, r.TimeToZeroS)
		p99 = append(p99, r.BatchP99Ms)
		if r.Invariants != "ok" {
			inv = r.Invariants
		}
	}
	res := drainResult{
		Scenario:        scenario,
		Sessions:        sessions,
		Batch:           b.cfg.batch,
		Orders:          b.cfg.drainOrders,
		BacklogRows:     backlog,
		CancelPerS:      round2(median(rates)),
		Median:          round2(median(rates)),
		TimeToZeroS:     round2(median(ttz)),
		BatchP99Ms:      round2(median(p99)),
		Runs:            runs,
		Invariants:      inv,
		MeasuredBy:      drainMeasuredBy,
		DataGeneratedBy: drainDataBy,
	}
	if scenario == "drain" {
		res.Target = drainTarget
	}
	return res
}

// drainOnce runs sessions sweep loops on a fresh copy of tmpl until every
// due order is cancelled, then checks the invariants and drops the copy.
func (b *bench) drainOnce(ctx context.Context, tmpl string, sessions int, what string) (drainStats, error) {
	name, err := b.srv.clone(ctx, tmpl, what)
	if err != nil {
		return drainStats{}, err
	}
	defer b.srv.drop(name)
	if err := b.srv.checkpoint(ctx); err != nil {
		return drainStats{}, err
	}
	return b.drainDatabase(ctx, name, sessions)
}

// drainDatabase drains database name with sessions sweep loops and measures.
func (b *bench) drainDatabase(ctx context.Context, name string, sessions int) (drainStats, error) {
	var st drainStats
	conns := make([]*pgx.Conn, sessions)
	for i := range conns {
		conn, err := b.srv.connect(ctx, name)
		if err != nil {
			return st, err
		}
		defer conn.Close(context.Background())
		conns[i] = conn
	}
	dbStart, err := dbNow(ctx, conns[0])
	if err != nil {
		return st, err
	}
	samples, err := sweepUntilZero(ctx, conns, b.cfg.batch, time.Now())
	if err != nil {
		return st, err
	}
	count, first, last, err := cancelRate(ctx, conns[0], dbStart)
	if err != nil {
		return st, err
	}
	var durations []float64
	for _, s := range samples {
		if s.cancelled > 0 {
			durations = append(durations, float64(s.duration.Microseconds())/1000)
		}
	}
	st = drainStats{
		Cancelled:   count,
		CancelPerS:  round2(perSecond(count, first, last)),
		TimeToZeroS: round2(last.Sub(dbStart).Seconds()),
		Batches:     len(durations),
		BatchP50Ms:  round2(percentile(durations, 50)),
		BatchP99Ms:  round2(percentile(durations, 99)),
		BatchMaxMs:  round2(percentile(durations, 100)),
		batches:     samples,
	}
	if count == 0 {
		st.TimeToZeroS = 0
	}
	st.Invariants, err = b.checkDatabase(ctx, name, name, b.cfg.maxOverdue)
	return st, err
}

// sweepUntilZero runs one loop of `SELECT * FROM ordertimeout.sweep_due(batch)`
// per connection until a call cancels nothing, and returns every call.
func sweepUntilZero(ctx context.Context, conns []*pgx.Conn, batch int, start time.Time) ([]batchSample, error) {
	var mu sync.Mutex
	var samples []batchSample
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, conn := range conns {
		wg.Go(func() {
			var local []batchSample
			for ctx.Err() == nil {
				t0 := time.Now()
				var claimed, cancelled int
				err := conn.QueryRow(ctx, `SELECT claimed, cancelled FROM ordertimeout.sweep_due($1)`, batch).
					Scan(&claimed, &cancelled)
				if err != nil {
					errs[i] = fmt.Errorf("sweep_due: %w", err)
					break
				}
				now := time.Now()
				local = append(local, batchSample{session: i + 1, end: now.Sub(start).Seconds(),
					duration: now.Sub(t0), cancelled: cancelled})
				if cancelled == 0 {
					break
				}
			}
			mu.Lock()
			samples = append(samples, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return samples, ctx.Err()
}

// batchSeries turns the batches of one run into plot points: the rate of
// each sweep_due call over time, one series per session.
func batchSeries(label string, batches []batchSample) []series {
	sessions := 0
	for _, s := range batches {
		sessions = max(sessions, s.session)
	}
	out := make([]series, sessions)
	for i := range out {
		out[i] = series{name: label, dots: true}
		if sessions > 1 {
			out[i].name = fmt.Sprintf("%s, session %d", label, i+1)
		}
	}
	for _, s := range batches {
		if s.cancelled > 0 && s.duration > 0 {
			out[s.session-1].points = append(out[s.session-1].points,
				point{s.end, float64(s.cancelled) / s.duration.Seconds()})
		}
	}
	return out
}

// writeStackedPlot writes plots one below the other into one SVG of --plot-dir.
func (b *bench) writeStackedPlot(file string, plots []plotConfig) {
	if b.cfg.plotDir == "" {
		return
	}
	path := filepath.Join(b.cfg.plotDir, file)
	if err := os.WriteFile(path, renderStackedSVG(plots), 0o644); err != nil {
		slog.Warn("could not write plot", "file", path, "err", err)
		return
	}
	slog.Info("wrote plot", "file", path)
}

// writePlot writes an SVG plot into --plot-dir (nothing without one).
func (b *bench) writePlot(file string, p plotConfig) {
	if b.cfg.plotDir == "" {
		return
	}
	path := filepath.Join(b.cfg.plotDir, file)
	if err := writeSVG(path, p); err != nil {
		slog.Warn("could not write plot", "file", path, "err", err)
		return
	}
	slog.Info("wrote plot", "file", path)
}
