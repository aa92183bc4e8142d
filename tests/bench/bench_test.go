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
	require.Equal(t, []int{50000}, cfg.backlogRows)
	require.Equal(t, 1, cfg.runs)

	_, err = parseFlags([]string{"--scenarios", "drain,nope"})
	require.ErrorContains(t, err, `unknown scenario "nope"`)
}
