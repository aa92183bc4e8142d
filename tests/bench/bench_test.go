package main

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// These tests need no database: they pin the pure helpers. The benchmark
// itself runs with `make bench`.

func TestPercentile(t *testing.T) {
	t.Parallel()
	xs := []float64{5, 1, 4, 2, 3}
	require.InDelta(t, 3.0, median(xs), 1e-9)
	require.InDelta(t, 1.0, percentile(xs, 0), 1e-9)
	require.InDelta(t, 5.0, percentile(xs, 100), 1e-9)
	require.InDelta(t, 4.96, percentile(xs, 99), 1e-9)
	require.InDelta(t, 2.5, median([]float64{3, 2}), 1e-9)
	require.Zero(t, median(nil))
	require.Equal(t, []float64{5, 1, 4, 2, 3}, xs, "percentile must not reorder its input")
}

func TestItems(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		var got []struct {
			SKU string `json:"sku"`
			Qty int    `json:"qty"`
		}
		require.NoError(t, json.Unmarshal([]byte(items(r)), &got))
		require.Len(t, got, 2)
		require.NotEqual(t, got[0].SKU, got[1].SKU, "the two SKUs of an order are distinct")
		for _, it := range got {
			require.Regexp(t, `^sku-0[0-9][0-9]$`, it.SKU)
			require.GreaterOrEqual(t, it.Qty, 1)
			require.LessOrEqual(t, it.Qty, 3)
		}
	}
}

func TestNiceStep(t *testing.T) {
	t.Parallel()
	for raw, want := range map[float64]float64{0.7: 1, 1.3: 2, 3: 5, 7: 10, 120: 200, 0.013: 0.02, 0: 1} {
		require.InDelta(t, want, niceStep(raw), 1e-12, "niceStep(%v)", raw)
	}
}

func TestRenderSVG(t *testing.T) {
	t.Parallel()
	svg := string(renderSVG(plotConfig{
		title:  "a <title> & more",
		xLabel: "x",
		yLabel: "y",
		series: []series{
			{name: "dots", dots: true, points: []point{{0, 1}, {1, 2}}},
			{name: "line", points: []point{{0, 1}, {1, 3}}},
			{name: "bars", barWidth: 0.5, points: []point{{0.25, 4}}},
		},
	}))
	require.True(t, strings.HasPrefix(svg, "<svg "))
	require.True(t, strings.HasSuffix(svg, "</svg>\n"))
	require.Contains(t, svg, "a &lt;title&gt; &amp; more")
	require.Equal(t, 2, strings.Count(svg, "<circle"))
	require.Equal(t, 1, strings.Count(svg, "<polyline"))
	// An empty plot still renders.
	require.Contains(t, string(renderSVG(plotConfig{title: "empty"})), "</svg>")
}

func TestNum(t *testing.T) {
	t.Parallel()
	require.Equal(t, "0", num(0))
	require.Equal(t, "999", num(999))
	require.Equal(t, "1,000", num(1000))
	require.Equal(t, "1,234,568", num(1234567.8))
	require.Equal(t, "-20,000", num(-20000))
}

func TestParseFlagsQuick(t *testing.T) {
	t.Parallel()
	cfg, err := parseFlags([]string{"--quick", "--drain-orders", "7000"})
	require.NoError(t, err)
	require.Equal(t, 7000, cfg.drainOrders, "an explicit flag wins over --quick")
	require.Equal(t, []int{20000}, cfg.backlogRows)
	require.Equal(t, 1, cfg.runs)

	_, err = parseFlags([]string{"--scenarios", "drain,nope"})
	require.ErrorContains(t, err, `unknown scenario "nope"`)
}

func TestParseCPU(t *testing.T) {
	t.Parallel()
	got, err := parseCPU("cpu  100 20 30 400 50 6 4 10 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
	require.NoError(t, err)
	require.InDelta(t, 1.6, got.busy, 1e-9, "user+nice+system+irq+softirq in seconds")
	require.InDelta(t, 6.2, got.all, 1e-9, "busy+idle+iowait+steal")
	_, err = parseCPU("intr 1 2 3\n")
	require.Error(t, err)
}

func TestStackedSVG(t *testing.T) {
	t.Parallel()
	svg := string(renderStackedSVG([]plotConfig{{title: "one"}, {title: "two"}}))
	require.Equal(t, 3, strings.Count(svg, "<svg "))
	require.Contains(t, svg, `<svg y="480" `)
	require.True(t, strings.HasSuffix(svg, "</svg>\n</svg>\n"))
}

func TestFallsBehind(t *testing.T) {
	t.Parallel()
	cfg, err := parseFlags(nil)
	require.NoError(t, err)
	b := &bench{cfg: cfg}
	zero, two := int64(0), int64(2)
	ok := steadyResult{Asked: 1000, Created: 970, LagMs: lagStats{P99: 100}, OverdueAfter: &zero, Invariants: "ok"}
	require.Empty(t, b.fallsBehind(ok))
	slow := ok
	slow.Created, slow.LagMs.P99, slow.OverdueAfter = 969, 101, &two
	why := b.fallsBehind(slow)
	require.Contains(t, why, "created 969 of 1000")
	require.Contains(t, why, "lag p99 101 ms")
	require.Contains(t, why, "2 PENDING overdue")
}

func TestParseFlagsCapacity(t *testing.T) {
	t.Parallel()
	cfg, err := parseFlags([]string{"--capacity-rates", "2000,1000"})
	require.NoError(t, err)
	require.Equal(t, []int{1000, 2000}, cfg.capacityRates, "rates rise")
	require.False(t, cfg.fastSettings, "durable settings by default")
	require.Contains(t, cfg.scenarios, "capacity")
	_, err = parseFlags([]string{"--capacity-rates", "x"})
	require.ErrorContains(t, err, "--capacity-rates")
}

func TestDrawItemsSorted(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		it := drawItems(r)
		require.Less(t, it[0].sku, it[1].sku, "items come in SKU order, the lock order of both designs")
	}
}

func TestMarkers(t *testing.T) {
	t.Parallel()
	svg := string(renderSVG(plotConfig{series: []series{{name: "one rate", markers: true, points: []point{{1000, 20}}}}}))
	require.Equal(t, 1, strings.Count(svg, "<circle"), "a line of one point still shows its marker")
}

func TestParseFlagsCapacityRuns(t *testing.T) {
	t.Parallel()
	cfg, err := parseFlags(nil)
	require.NoError(t, err)
	require.Equal(t, 3, cfg.capacityRuns, "a median of three ladders by default")
	cfg, err = parseFlags([]string{"--quick"})
	require.NoError(t, err)
	require.Equal(t, 1, cfg.capacityRuns, "one ladder in a smoke check")
	cfg, err = parseFlags([]string{"--quick", "--capacity-runs", "3"})
	require.NoError(t, err)
	require.Equal(t, 3, cfg.capacityRuns, "an explicit flag wins over --quick")
	for _, bad := range []string{"0", "-1"} {
		_, err = parseFlags([]string{"--capacity-runs", bad})
		require.ErrorContains(t, err, "--capacity-runs")
	}
}

// A series' own colour wins over the palette's, in the data and the legend.
func TestSeriesColor(t *testing.T) {
	t.Parallel()
	svg := string(renderSVG(plotConfig{title: "c", series: []series{
		{name: "own", color: "#123456", points: []point{{0, 1}, {1, 2}}},
		{name: "palette", points: []point{{0, 2}, {1, 1}}},
	}}))
	require.Equal(t, 2, strings.Count(svg, "#123456"), "its line and its legend box")
	require.Equal(t, 2, strings.Count(svg, palette[1]), "the second series keeps the palette's second colour")
}

// The medians of the ladders: each design's highest rate, and the median of
// the ladders' own ratios (the lower middle one of an even count). A
// ladder where only ordertimeout kept up at some rate counts as unbounded,
// one where only the baseline did as 0, one where neither did not at all.
func TestCapacitySummarize(t *testing.T) {
	t.Parallel()
	both := []string{"ordertimeout", "zset"}
	ladder := func(ours, zset, oursMade, zsetMade int) capacityLadder {
		return capacityLadder{
			Highest:   map[string]int{"ordertimeout": ours, "zset": zset},
			Producing: map[string]int{"ordertimeout": oursMade, "zset": zsetMade},
		}
	}
	summarize := func(designs []string, ladders ...capacityLadder) capacityResult {
		res := capacityResult{Highest: map[string]int{}, Producing: map[string]int{}, Ladders: ladders}
		res.summarize(designs)
		return res
	}
	value := func(t *testing.T, r ratioMedian) float64 {
		t.Helper()
		require.NotNil(t, r.Value)
		return *r.Value
	}

	res := summarize(both, ladder(750, 500, 750, 1000), ladder(500, 500, 750, 750), ladder(0, 750, 500, 750))
	require.Equal(t, 500, res.Highest["ordertimeout"])
	require.Equal(t, 500, res.Highest["zset"])
	require.Equal(t, 1.0, value(t, res.Ratio), "the median of 1.5, 1 and 0")
	require.False(t, res.Ratio.Unbounded)
	require.Equal(t, 3, res.Ratio.Ladders)
	require.Equal(t, 0.75, value(t, res.ProducingRatio), "the median of 0.75, 1 and 0.67")
	require.Equal(t, "0.00×", res.Ladders[2].Ratio.String(), "only the baseline kept up: 0")
	rows := res.ratioRows("capacity", "3")
	require.Len(t, rows, 2)
	require.Equal(t, "1.00×", rows[0].Value)
	require.Equal(t, "missed (ladders: 1.50×, 1.00×, 0.00×)", rows[0].Verdict)

	// The baseline kept up at no rate in two ladders of three.
	res = summarize(both, ladder(750, 500, 500, 750), ladder(500, 0, 500, 750), ladder(500, 0, 500, 750))
	require.Nil(t, res.Ratio.Value)
	require.True(t, res.Ratio.Unbounded, "the median of 1.5 and two unbounded ladders")
	require.Equal(t, "unbounded", res.Ratio.String())
	require.Equal(t, 0, res.Highest["zset"])
	rows = res.ratioRows("capacity", "3")
	require.Equal(t, "met (ladders: 1.50×, unbounded, unbounded)", rows[0].Verdict)
	line, err := json.Marshal(res)
	require.NoError(t, err, "an unbounded ratio is no float in JSON")
	require.Contains(t, string(line), `"ratio_ours_over_zset":{"value":null,"unbounded":true,"ladders_with_ratio":3}`)
	require.Contains(t, string(line), `"ratio_ours_over_zset":{"value":1.5}`, "each ladder's own ratio")

	// An unbounded create-path ratio is told apart from none.
	res = summarize(both, ladder(500, 500, 500, 0))
	require.True(t, res.ProducingRatio.Unbounded)
	require.Equal(t, 1, res.ProducingRatio.Ladders)

	// A ladder where neither kept up is left out, and the runs say so.
	res = summarize(both, ladder(750, 500, 750, 750), ladder(0, 0, 750, 750))
	require.Equal(t, 1, res.Ratio.Ladders)
	require.Equal(t, 1.5, value(t, res.Ratio))
	rows = res.ratioRows("capacity", "2")
	require.Equal(t, "1 of 2", rows[0].Runs)
	require.Equal(t, "no verdict: 1 of 2 ladders have a ratio (neither design kept up at any rate in the others) (ladders: 1.50×, undefined)",
		rows[0].Verdict, "one ladder of two is no majority")
	// This stop's run: only ordertimeout kept up, in one ladder of three.
	res = summarize(both, ladder(500, 0, 500, 750), ladder(0, 0, 0, 750), ladder(0, 0, 500, 750))
	require.True(t, res.Ratio.Unbounded)
	rows = res.ratioRows("capacity", "3")
	require.Equal(t, "1 of 3", rows[0].Runs)
	require.Equal(t, "no verdict: 1 of 3 ladders have a ratio (neither design kept up at any rate in the others) (ladders: unbounded, undefined, undefined)",
		rows[0].Verdict)
	res = summarize(both, ladder(0, 0, 0, 0))
	require.Zero(t, res.Ratio.Ladders)
	require.Nil(t, res.Ratio.Value)
	require.False(t, res.Ratio.Unbounded)
	rows = res.ratioRows("capacity", "1")
	require.Len(t, rows, 1)
	require.Contains(t, rows[0].Value, "undefined")

	// Even counts take the lower middle value: a rate that was asked, a
	// ratio that was measured; never an unbounded one next to a finite one.
	res = summarize(both, ladder(750, 500, 750, 750), ladder(500, 0, 500, 750))
	require.Equal(t, 500, res.Highest["ordertimeout"])
	require.Equal(t, 1.5, value(t, res.Ratio), "the lower of 1.5 and unbounded")
	res = summarize(both, ladder(0, 500, 750, 750), ladder(500, 0, 500, 750))
	require.Equal(t, 0.0, value(t, res.Ratio), "the lower of 0 and unbounded")

	// Without the baseline (no Redis) there is no ratio at all.
	res = summarize([]string{"ordertimeout"}, capacityLadder{
		Highest: map[string]int{"ordertimeout": 500}, Producing: map[string]int{"ordertimeout": 500}})
	require.Equal(t, 500, res.Highest["ordertimeout"])
	require.False(t, res.Ratio.ok)
	require.False(t, res.ProducingRatio.ok)
	require.False(t, res.Ladders[0].Ratio.ok)
}

// The note on the baseline's verdict appears when its sleep is near the
// lag line, not when the line is far above it.
func TestPollNote(t *testing.T) {
	t.Parallel()
	require.Contains(t, pollNote(100*time.Millisecond, 100*time.Millisecond), "sleep 100ms")
	require.NotEmpty(t, pollNote(100*time.Millisecond, 149*time.Millisecond))
	require.Empty(t, pollNote(100*time.Millisecond, 150*time.Millisecond))
	require.Empty(t, pollNote(100*time.Millisecond, 200*time.Millisecond))
}

// slowDesign creates one order per delay and counts them; each payment
// call takes payDelay, and it keeps the most calls it saw at once.
type slowDesign struct {
	delay, payDelay time.Duration
	created         atomic.Int64
	paying, maxPay  atomic.Int64
}

func (d *slowDesign) create(context.Context, string, [2]orderItem, time.Duration) error {
	time.Sleep(d.delay)
	d.created.Add(1)
	return nil
}

func (d *slowDesign) payCall() {
	n := d.paying.Add(1)
	defer d.paying.Add(-1)
	for m := d.maxPay.Load(); n > m && !d.maxPay.CompareAndSwap(m, n); m = d.maxPay.Load() {
	}
	time.Sleep(d.payDelay)
}

func (d *slowDesign) begin(context.Context, string, string) (bool, error) {
	d.payCall()
	return true, nil
}

func (d *slowDesign) confirm(context.Context, string, string) (bool, error) {
	d.payCall()
	return true, nil
}

// A capacity step's producer stops at the end of its duration, queue
// included: a design that cannot take the rate does not get the orders
// left in the queue created after the duration, which would count towards
// "created ≥ 97 % of asked".
func TestProduceCapacityStopsAtDuration(t *testing.T) {
	t.Parallel()
	cfg, err := parseFlags([]string{"--steady-conns", "1", "--steady-paid", "0"})
	require.NoError(t, err)
	b := &bench{cfg: cfg}
	d := &slowDesign{delay: 10 * time.Millisecond} // at most 100/s on one connection
	p := steadyParams{rate: 1000, duration: 300 * time.Millisecond, capacity: true}
	start := time.Now()
	counts, err := b.produce(context.Background(), d, p)
	require.NoError(t, err)
	asked := int64(300)
	require.Less(t, d.created.Load(), asked/2, "the queued orders are not created after the duration")
	require.Equal(t, asked, d.created.Load()+counts.notSent, "every asked order is created or not sent")
	require.Less(t, counts.producerDone.Sub(start), p.duration+200*time.Millisecond, "the producer stops at the duration")
}

// The payments run on --steady-conns connections, as the producer does
// (docs/workload.md: "on as many connections"), however many are due at
// once.
func TestProducePaymentsOnSteadyConns(t *testing.T) {
	t.Parallel()
	cfg, err := parseFlags([]string{"--steady-conns", "2", "--steady-paid", "1", "--steady-timeout", "20ms"})
	require.NoError(t, err)
	b := &bench{cfg: cfg}
	d := &slowDesign{payDelay: 20 * time.Millisecond}
	counts, err := b.produce(context.Background(), d, steadyParams{rate: 2000, duration: 50 * time.Millisecond})
	require.NoError(t, err)
	require.EqualValues(t, 100, counts.confirmPaid, "every order paid")
	require.LessOrEqual(t, d.maxPay.Load(), int64(2), "at most --steady-conns payment calls at once")
}

// cpu_window_s is the window's length, not the CPU time of all the
// machine's CPUs in it (twice as much on 2 cores).
func TestCPUWindowWall(t *testing.T) {
	t.Parallel()
	w := (&bench{}).startCPU()
	time.Sleep(50 * time.Millisecond)
	w.stop(&bench{})
	require.True(t, w.ok, "/proc/stat read")
	require.GreaterOrEqual(t, w.wall, 50*time.Millisecond)
	require.Less(t, w.wall, time.Second)
	stat, err := os.ReadFile("/proc/stat")
	require.NoError(t, err)
	cpus := float64(strings.Count(string(stat), "\ncpu")) // cpu0, cpu1, ...: every CPU of the host
	require.InDelta(t, w.wall.Seconds()*cpus, w.end.all-w.start.all, 0.05*cpus+0.03,
		"/proc/stat's all counts every CPU")
}

// The ZSet drain waits on its scanners' counts, not on a count(*) of the
// table every 100 ms: it returns once every loaded member was cancelled or
// found not PENDING.
func TestZsetDrainWaitsOnCounts(t *testing.T) {
	t.Parallel()
	s := &zsetScanners{}
	go func() {
		for range 3 {
			time.Sleep(20 * time.Millisecond)
			s.counts.cancelled.Add(1)
		}
		s.counts.noop.Add(1)
	}()
	require.NoError(t, waitCondition(context.Background(), 5*time.Second, func() (int64, error) { return s.left(4), nil }))
	require.Zero(t, s.left(4))
}

// A design that kept up at no rate reads "none" in the summary, not 0.
func TestRateOrNone(t *testing.T) {
	t.Parallel()
	require.Equal(t, "none", rateOrNone(0))
	require.Equal(t, "1,250", rateOrNone(1250))
}
