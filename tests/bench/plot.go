package main

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"os"
	"strconv"
)

// A tiny SVG plotter: dots, lines and bars on linear axes, with ticks and a
// legend. Enough for the benchmark's plots, no dependency.

// point is one (x, y) value.
type point struct{ x, y float64 }

// series is one set of points drawn alike.
type series struct {
	name     string
	points   []point
	dots     bool    // draw each point as a dot (otherwise a line through them)
	markers  bool    // a line with a marker on each point (visible with one point too)
	barWidth float64 // when > 0, draw each point as a bar this wide centred on x, from 0 to y
	color    string  // its colour; empty: the palette's colour of its position
}

// colorOf is the colour of the i-th series s.
func colorOf(i int, s series) string {
	if s.color != "" {
		return s.color
	}
	return palette[i%len(palette)]
}

// plotConfig is one plot.
type plotConfig struct {
	title, xLabel, yLabel string
	series                []series
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"}

const (
	svgWidth, svgHeight                              = 900, 480
	marginLeft, marginRight, marginTop, marginBottom = 80, 20, 40, 55
)

// writeSVG draws p into the file at path.
func writeSVG(path string, p plotConfig) error {
	return os.WriteFile(path, renderSVG(p), 0o644)
}

func renderSVG(p plotConfig) []byte {
	xmin, xmax, ymax := math.Inf(1), math.Inf(-1), 0.0
	for _, s := range p.series {
		for _, pt := range s.points {
			xmin = math.Min(xmin, pt.x-s.barWidth/2)
			xmax = math.Max(xmax, pt.x+s.barWidth/2)
			ymax = math.Max(ymax, pt.y)
		}
	}
	if math.IsInf(xmin, 1) {
		xmin, xmax = 0, 1
	}
	if xmax <= xmin {
		xmax = xmin + 1
	}
	if ymax <= 0 {
		ymax = 1
	}
	xStep := niceStep((xmax - xmin) / 8)
	yStep := niceStep(ymax / 6)
	xmin = math.Floor(xmin/xStep) * xStep
	xmax = math.Ceil(xmax/xStep) * xStep
	ymax = math.Ceil(ymax*1.05/yStep) * yStep

	plotW := float64(svgWidth - marginLeft - marginRight)
	plotH := float64(svgHeight - marginTop - marginBottom)
	sx := func(x float64) float64 { return marginLeft + (x-xmin)/(xmax-xmin)*plotW }
	sy := func(y float64) float64 { return marginTop + plotH - y/ymax*plotH }

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, svgHeight, svgWidth, svgHeight)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", marginLeft, html.EscapeString(p.title))

	// Grid and ticks.
	for y := 0.0; y <= ymax+yStep/2; y += yStep {
		fmt.Fprintf(&b, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", marginLeft, marginLeft+plotW, sy(y), sy(y))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", marginLeft-6, sy(y), tickLabel(y, yStep))
	}
	for x := xmin; x <= xmax+xStep/2; x += xStep {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%.1f" stroke="#eee"/>`+"\n", sx(x), sx(x), marginTop, marginTop+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", sx(x), marginTop+plotH+16, tickLabel(x, xStep))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%.1f" fill="none" stroke="#333"/>`+"\n", marginLeft, marginTop, plotW, plotH)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", marginLeft+plotW/2, svgHeight-12, html.EscapeString(p.xLabel))
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", marginTop+plotH/2, html.EscapeString(p.yLabel))

	// Data.
	for i, s := range p.series {
		color := colorOf(i, s)
		switch {
		case s.barWidth > 0:
			for _, pt := range s.points {
				x0, x1 := sx(pt.x-s.barWidth/2), sx(pt.x+s.barWidth/2)
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="0.75"/>`+"\n",
					x0, sy(pt.y), math.Max(x1-x0-0.5, 0.5), sy(0)-sy(pt.y), color)
			}
		case s.dots:
			fmt.Fprintf(&b, `<g fill="%s" fill-opacity="0.5">`+"\n", color)
			for _, pt := range s.points {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="1.8"/>`+"\n", sx(pt.x), sy(pt.y))
			}
			b.WriteString("</g>\n")
		default:
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.8" points="`, color)
			for _, pt := range s.points {
				fmt.Fprintf(&b, "%.1f,%.1f ", sx(pt.x), sy(pt.y))
			}
			b.WriteString(`"/>` + "\n")
			if s.markers {
				fmt.Fprintf(&b, `<g fill="%s">`+"\n", color)
				for _, pt := range s.points {
					fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5"/>`+"\n", sx(pt.x), sy(pt.y))
				}
				b.WriteString("</g>\n")
			}
		}
	}

	// Legend, top right, on a white box.
	if len(p.series) > 0 {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="294" height="%d" fill="white" fill-opacity="0.85" stroke="#ccc"/>`+"\n",
			svgWidth-marginRight-306, marginTop+2, 18*len(p.series)+6)
	}
	for i, s := range p.series {
		y := marginTop + 14 + 18*i
		x := svgWidth - marginRight - 300
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`+"\n", x, y-10, colorOf(i, s))
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", x+18, y, html.EscapeString(s.name))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// niceStep rounds raw up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*pow {
			return m * pow
		}
	}
	return 10 * pow
}

// tickLabel formats v with as many decimals as step needs.
func tickLabel(v, step float64) string {
	decimals := 0
	if step < 1 {
		decimals = int(math.Ceil(-math.Log10(step)))
	}
	if math.Abs(v) >= 10000 && decimals == 0 {
		return num(v)
	}
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

// renderStackedSVG draws the plots one below the other in one SVG.
func renderStackedSVG(plots []plotConfig) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`+"\n",
		svgWidth, svgHeight*len(plots), svgWidth, svgHeight*len(plots))
	for i, p := range plots {
		inner := renderSVG(p)
		// Place each plot at its offset: an <svg> inside an <svg> takes x and y.
		inner = bytes.Replace(inner, []byte("<svg "), []byte(fmt.Sprintf(`<svg y="%d" `, i*svgHeight)), 1)
		b.Write(inner)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}
