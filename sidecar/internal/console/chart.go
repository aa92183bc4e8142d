package console

import (
	"fmt"
	"math"
	"strings"
)

// lagBucket is one minute of timeout cancels: when (Unix seconds of the
// minute's start), how many, and the lag's percentiles in milliseconds.
type lagBucket struct {
	Minute  float64
	Cancels int64
	P50     float64
	P99     float64
}

// chart is an SVG line chart laid out in Go and drawn by the template:
// only numbers and fixed labels reach the markup.
type chart struct {
	Width, Height            int
	Left, Top, Right, Bottom int
	Empty                    bool
	P50, P99                 string // polyline points
	Dots50, Dots99           []point
	YTicks, XTicks           []tick
}

type point struct{ X, Y float64 }

type tick struct {
	Pos   float64
	Label string
}

// lagChart lays out the p50 and p99 of each minute over the hour before
// now (Unix seconds, the database's clock).
func lagChart(buckets []lagBucket, now float64) chart {
	c := chart{Width: 720, Height: 240, Left: 64, Top: 14, Right: 704, Bottom: 210}
	start := now - 3600
	plotW, plotH := float64(c.Right-c.Left), float64(c.Bottom-c.Top)
	x := func(t float64) float64 {
		return round1(float64(c.Left) + math.Max(0, math.Min(1, (t-start)/3600))*plotW)
	}
	for i := 0; i <= 4; i++ {
		t := start + float64(i)*900
		label := fmt.Sprintf("−%d min", 60-15*i)
		if i == 4 {
			label = "now"
		}
		c.XTicks = append(c.XTicks, tick{x(t), label})
	}
	top := 0.0
	for _, b := range buckets {
		top = math.Max(top, math.Max(b.P50, b.P99))
	}
	if len(buckets) == 0 {
		c.Empty = true
		top = 100
	}
	top = niceCeil(top)
	y := func(v float64) float64 { return round1(float64(c.Top) + plotH*(1-v/top)) }
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		c.YTicks = append(c.YTicks, tick{y(v), formatMillis(v)})
	}
	var p50, p99 []string
	for _, b := range buckets {
		// A minute's point sits at its middle.
		px := x(b.Minute + 30)
		d50, d99 := point{px, y(b.P50)}, point{px, y(b.P99)}
		c.Dots50, c.Dots99 = append(c.Dots50, d50), append(c.Dots99, d99)
		p50 = append(p50, fmt.Sprintf("%g,%g", d50.X, d50.Y))
		p99 = append(p99, fmt.Sprintf("%g,%g", d99.X, d99.Y))
	}
	c.P50, c.P99 = strings.Join(p50, " "), strings.Join(p99, " ")
	return c
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (at least 1 ms).
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func formatMillis(ms float64) string {
	switch {
	case ms >= 10000:
		return fmt.Sprintf("%.0f s", ms/1000)
	case ms >= 1000:
		return fmt.Sprintf("%.1f s", ms/1000)
	case ms >= 10 || ms == 0:
		return fmt.Sprintf("%.0f ms", ms)
	default:
		return fmt.Sprintf("%.1f ms", ms)
	}
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }
