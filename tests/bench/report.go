package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// report collects what the scenarios measured: JSON lines as they come, and
// rows of the summary table printed at the end.
type report struct {
	json     *os.File
	rows     []row
	checked  int
	violated bool
	loadAvg  []string // /proc/loadavg at the start of each scenario and at the end
	settings string   // "durable" or "fast": added to every JSON line
}

// row is one line of the summary table.
type row struct {
	Scenario string // scenario and variant
	Measure  string
	Value    string
	Runs     string
	Target   string
	Verdict  string // met, missed, or empty when there is no target
}

func newReport(jsonOut string) (*report, error) {
	r := &report{}
	if jsonOut != "" {
		if err := os.MkdirAll(filepath.Dir(jsonOut), 0o755); err != nil {
			return nil, fmt.Errorf("create --json-out folder: %w", err)
		}
		f, err := os.Create(jsonOut)
		if err != nil {
			return nil, fmt.Errorf("create --json-out file: %w", err)
		}
		r.json = f
	}
	return r, nil
}

func (r *report) close() {
	if r.json != nil {
		r.json.Close()
	}
}

// emit prints v as one JSON line on stdout (and in the --json-out file).
func (r *report) emit(v any) {
	line, err := json.Marshal(v)
	if err != nil {
		slog.Error("encode result", "err", err)
		return
	}
	// Every line says which server settings it was measured with.
	if r.settings != "" && len(line) > 2 && line[0] == '{' {
		line = append([]byte(`{"settings":"`+r.settings+`",`), line[1:]...)
	}
	fmt.Println(string(line))
	if r.json != nil {
		fmt.Fprintln(r.json, string(line))
	}
}

func (r *report) add(rows ...row) { r.rows = append(r.rows, rows...) }

// invariants records the outcome of one invariant check: "ok" or
// "VIOLATED: ...".
func (r *report) invariants(what, outcome string, took time.Duration) {
	r.checked++
	if outcome == "ok" {
		slog.Info("invariants ok", "database", what, "took", took.Round(time.Millisecond))
		return
	}
	r.violated = true
	slog.Error("invariants VIOLATED", "database", what)
	fmt.Fprintf(os.Stderr, "INVARIANTS VIOLATED after %s: %s\n", what, outcome)
}

// noteLoad remembers the load average now, a hint of how busy the machine was.
func (r *report) noteLoad(when string) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return
	}
	f := strings.Fields(string(b))
	if len(f) >= 3 {
		r.loadAvg = append(r.loadAvg, fmt.Sprintf("%s %s/%s/%s", when, f[0], f[1], f[2]))
	}
}

func (r *report) header(b *bench, took time.Duration) []string {
	inv := fmt.Sprintf("invariants: ok on all %d databases checked", r.checked)
	if r.violated {
		inv = fmt.Sprintf("invariants: VIOLATED (%d databases checked; see stderr)", r.checked)
	}
	return []string{
		"settings: " + b.settings,
		fmt.Sprintf("%d CPUs, %s; %s; took %s", runtime.NumCPU(), b.serverInfo, b.sizes(), took.Round(time.Second)),
		"load average (1/5/15 min) at each scenario start: " + strings.Join(r.loadAvg, "; "),
		inv,
	}
}

// sizes describes the sizes used, for the summary header.
func (b *bench) sizes() string {
	c := b.cfg
	return fmt.Sprintf("drain orders %d, batch %d, sessions %v, runs %d (long %d), backlog %v",
		c.drainOrders, c.batch, c.sessions, c.runs, c.longRuns, c.backlogRows)
}

// summary prints the table of every row.
func (r *report) summary(w io.Writer, b *bench, took time.Duration) {
	r.noteLoad("end")
	fmt.Fprintln(w)
	for _, h := range r.header(b, took) {
		fmt.Fprintln(w, "# "+h)
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tMEASURE\tVALUE\tRUNS\tTARGET\tVERDICT")
	for _, x := range r.rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", x.Scenario, x.Measure, x.Value, x.Runs, x.Target, x.Verdict)
	}
	tw.Flush()
}

// writeMarkdown writes the summary as a markdown table to path.
func (r *report) writeMarkdown(path string, b *bench, took time.Duration) error {
	var sb strings.Builder
	for _, h := range r.header(b, took) {
		sb.WriteString("- " + h + "\n")
	}
	sb.WriteString("\n| scenario | measure | value | runs | target | verdict |\n|---|---|---:|---:|---|---|\n")
	for _, x := range r.rows {
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s |\n", x.Scenario, x.Measure, x.Value, x.Runs, x.Target, x.Verdict)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create --md-out folder: %w", err)
	}
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		return fmt.Errorf("write --md-out file: %w", err)
	}
	return nil
}

// verdict says whether value meets a target of at least min.
func atLeast(value, min float64) string {
	if value >= min {
		return "met"
	}
	return "missed"
}

// atMost says whether value meets a target of at most max.
func atMost(value, max float64) string {
	if value <= max {
		return "met"
	}
	return "missed"
}

// num formats a count or rate with thousands separators.
func num(v float64) string {
	neg := v < 0
	if neg {
		v = -v
	}
	s := fmt.Sprintf("%.0f", v)
	var sb strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			sb.WriteByte(',')
		}
		sb.WriteRune(c)
	}
	if neg {
		return "-" + sb.String()
	}
	return sb.String()
}

// round2 rounds to 2 decimals for JSON.
func round2(v float64) float64 {
	return math.Round(v*100) / 100
}
