package main

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

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
	_, err = parseFlags([]string{"--capacity-runs", "0"})
	require.ErrorContains(t, err, "--capacity-runs")
}

// The medians of three ladders: each design's highest rate, and the
// median of the ladders' own ratios; a ladder whose baseline kept up at no
// rate has no ratio, while one where ordertimeout kept up at none has 0.
func TestCapacitySummarize(t *testing.T) {
	t.Parallel()
	ratio := func(v float64) *float64 { return &v }
	res := capacityResult{Highest: map[string]float64{}, Producing: map[string]float64{}, Ladders: []capacityLadder{
		{Run: 1, Highest: map[string]int{"ordertimeout": 750, "zset": 500}, Ratio: ratio(1.5),
			Producing: map[string]int{"ordertimeout": 750, "zset": 1000}, ProducingRate: ratio(0.75)},
		{Run: 2, Highest: map[string]int{"ordertimeout": 500, "zset": 500}, Ratio: ratio(1),
			Producing: map[string]int{"ordertimeout": 750, "zset": 750}, ProducingRate: ratio(1)},
		{Run: 3, Highest: map[string]int{"ordertimeout": 0, "zset": 750}, Ratio: ratio(0),
			Producing: map[string]int{"ordertimeout": 500, "zset": 750}, ProducingRate: ratio(0.67)},
	}}
	res.summarize([]string{"ordertimeout", "zset"})
	require.Equal(t, 500.0, res.Highest["ordertimeout"])
	require.Equal(t, 500.0, res.Highest["zset"])
	require.Equal(t, 1.0, res.Ratio, "the median of 1.5, 1 and 0")
	require.Equal(t, 3, res.Defined)
	require.Equal(t, 0.75, res.ProducingRate)

	res.Ladders[2].Ratio = nil
	res.Ladders[2].Highest["zset"] = 0
	res.summarize([]string{"ordertimeout", "zset"})
	require.Equal(t, 2, res.Defined, "a ladder without a baseline rate has no ratio")
	require.Equal(t, 1.25, res.Ratio, "the median of 1.5 and 1")
}
