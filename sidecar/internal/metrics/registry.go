package metrics

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Registry holds metric families and writes them in the Prometheus text
// format. The zero Registry is ready to use; it is safe for concurrent use.
type Registry struct {
	mu       sync.Mutex
	families []family
}

type family interface {
	name() string
	write(w *bufio.Writer)
}

func (r *Registry) add(f family) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.families {
		if g.name() == f.name() {
			panic("metrics: " + f.name() + " registered twice")
		}
	}
	r.families = append(r.families, f)
}

// WriteTo writes every family, sorted by name.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	fams := slices.Clone(r.families)
	r.mu.Unlock()
	slices.SortFunc(fams, func(a, b family) int { return strings.Compare(a.name(), b.name()) })
	cw := &countingWriter{w: w}
	bw := bufio.NewWriter(cw)
	for _, f := range fams {
		f.write(bw)
	}
	err := bw.Flush()
	return cw.n, err
}

// Handler serves the registry at GET.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = r.WriteTo(w)
	})
}

type countingWriter struct {
	w io.Writer
	n int64
}

// Write writes p and counts the bytes written.
func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// vec is the shared part of labelled families.
type vec struct {
	fname, help, typ string
	labels           []string
}

func (v *vec) name() string { return v.fname }

func (v *vec) header(w *bufio.Writer) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", v.fname, escapeHelp(v.help), v.fname, v.typ)
}

func (v *vec) check(values []string) string {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("metrics: %s wants %d label values, got %d", v.fname, len(v.labels), len(values)))
	}
	return strings.Join(values, "\xff")
}

// labelString renders {a="x",b="y"} plus extra pairs (for le).
func labelString(names, values []string, extra ...string) string {
	if len(names) == 0 && len(extra) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n + `="` + escapeValue(values[i]) + `"`)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(extra[i] + `="` + escapeValue(extra[i+1]) + `"`)
	}
	b.WriteByte('}')
	return b.String()
}

// Counter is a family of counters, one per combination of label values.
type Counter struct {
	vec
	mu     sync.Mutex
	values map[string]*sample
}

type sample struct {
	labels []string
	v      float64
}

// NewCounter registers a counter family.
func (r *Registry) NewCounter(name, help string, labels ...string) *Counter {
	c := &Counter{vec: vec{fname: name, help: help, typ: "counter", labels: labels}, values: map[string]*sample{}}
	r.add(c)
	return c
}

// Add adds d (>= 0) to the counter with the given label values.
func (c *Counter) Add(d float64, labelValues ...string) {
	key := c.check(labelValues)
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.values[key]
	if !ok {
		s = &sample{labels: slices.Clone(labelValues)}
		c.values[key] = s
	}
	s.v += d
}

// Inc adds 1.
func (c *Counter) Inc(labelValues ...string) { c.Add(1, labelValues...) }

func (c *Counter) write(w *bufio.Writer) {
	c.header(w)
	c.mu.Lock()
	defer c.mu.Unlock()
	writeSamples(w, c.fname, c.labels, c.values)
}

func writeSamples(w *bufio.Writer, name string, labels []string, values map[string]*sample) {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		s := values[k]
		fmt.Fprintf(w, "%s%s %s\n", name, labelString(labels, s.labels), formatFloat(s.v))
	}
}

// Gauge is a family of gauges, one per combination of label values.
type Gauge struct {
	vec
	mu     sync.Mutex
	values map[string]*sample
}

// NewGauge registers a gauge family.
func (r *Registry) NewGauge(name, help string, labels ...string) *Gauge {
	g := &Gauge{vec: vec{fname: name, help: help, typ: "gauge", labels: labels}, values: map[string]*sample{}}
	r.add(g)
	return g
}

// Set sets the gauge with the given label values.
func (g *Gauge) Set(v float64, labelValues ...string) {
	key := g.check(labelValues)
	g.mu.Lock()
	defer g.mu.Unlock()
	s, ok := g.values[key]
	if !ok {
		s = &sample{labels: slices.Clone(labelValues)}
		g.values[key] = s
	}
	s.v = v
}

// Reset removes every sample (before setting a fresh set of label values).
func (g *Gauge) Reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	clear(g.values)
}

func (g *Gauge) write(w *bufio.Writer) {
	g.header(w)
	g.mu.Lock()
	defer g.mu.Unlock()
	writeSamples(w, g.fname, g.labels, g.values)
}

// Func is a metric without labels whose value is read when written: a
// counter or gauge kept elsewhere (e.g. a sweeper's atomic counters).
type Func struct {
	vec
	f func() float64
}

// NewCounterFunc registers a counter read from f.
func (r *Registry) NewCounterFunc(name, help string, f func() float64) {
	r.add(&Func{vec: vec{fname: name, help: help, typ: "counter"}, f: f})
}

// NewGaugeFunc registers a gauge read from f.
func (r *Registry) NewGaugeFunc(name, help string, f func() float64) {
	r.add(&Func{vec: vec{fname: name, help: help, typ: "gauge"}, f: f})
}

func (f *Func) write(w *bufio.Writer) {
	f.header(w)
	fmt.Fprintf(w, "%s %s\n", f.fname, formatFloat(f.f()))
}

// Histogram is a family of histograms with fixed buckets.
type Histogram struct {
	vec
	buckets []float64
	mu      sync.Mutex
	values  map[string]*histSample
}

type histSample struct {
	labels []string
	counts []uint64 // per bucket, not cumulative
	count  uint64
	sum    float64
}

// NewHistogram registers a histogram family with the given upper bounds
// (sorted ascending; +Inf is implied).
func (r *Registry) NewHistogram(name, help string, buckets []float64, labels ...string) *Histogram {
	h := &Histogram{
		vec:     vec{fname: name, help: help, typ: "histogram", labels: labels},
		buckets: slices.Clone(buckets),
		values:  map[string]*histSample{},
	}
	slices.Sort(h.buckets)
	r.add(h)
	return h
}

// Observe records v.
func (h *Histogram) Observe(v float64, labelValues ...string) {
	key := h.check(labelValues)
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.values[key]
	if !ok {
		s = &histSample{labels: slices.Clone(labelValues), counts: make([]uint64, len(h.buckets))}
		h.values[key] = s
	}
	if i, _ := slices.BinarySearch(h.buckets, v); i < len(h.buckets) {
		s.counts[i]++
	}
	s.count++
	s.sum += v
}

func (h *Histogram) write(w *bufio.Writer) {
	h.header(w)
	h.mu.Lock()
	defer h.mu.Unlock()
	keys := make([]string, 0, len(h.values))
	for k := range h.values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		s := h.values[k]
		var cum uint64
		for i, ub := range h.buckets {
			cum += s.counts[i]
			fmt.Fprintf(w, "%s_bucket%s %d\n", h.fname, labelString(h.labels, s.labels, "le", formatFloat(ub)), cum)
		}
		fmt.Fprintf(w, "%s_bucket%s %d\n", h.fname, labelString(h.labels, s.labels, "le", "+Inf"), s.count)
		fmt.Fprintf(w, "%s_sum%s %s\n", h.fname, labelString(h.labels, s.labels), formatFloat(s.sum))
		fmt.Fprintf(w, "%s_count%s %d\n", h.fname, labelString(h.labels, s.labels), s.count)
	}
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

func escapeValue(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(s)
}
