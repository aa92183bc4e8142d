package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"
)

// capacityResult is the JSON line summing up capacity for both designs:
// the medians over --capacity-runs ladders, and each ladder.
type capacityResult struct {
	Scenario  string  `json:"scenario"`
	Rates     []int   `json:"rates"`
	DurationS float64 `json:"duration_s"`
	Runs      int     `json:"runs"`
	// Highest is each design's median over the ladders of its highest rate
	// that kept up; Producing its median highest rate whose producer still
	// created the asked orders (the create path's capacity), whatever the
	// lag. Medians of an even count take the lower middle value, so that
	// they are rates that were asked.
	Highest   map[string]int `json:"highest_rate_kept_up"`
	Producing map[string]int `json:"highest_rate_created"`
	// Ratio and ProducingRatio are the medians of the ladders' own ratios
	// (each ladder runs both designs at each rate one after the other, so
	// its ratio compares them in the same minutes); see ladderRatio. Only
	// when the baseline ran.
	Ratio          ratioMedian      `json:"ratio_ours_over_zset"`
	ProducingRatio ratioMedian      `json:"producing_ratio_ours_over_zset"`
	Ladders        []capacityLadder `json:"ladders"`
	KeepsUpBy      string           `json:"keeps_up_means"`
	Invariants     string           `json:"invariants"`
}

// capacityLadder is one climb of both designs up the rates.
type capacityLadder struct {
	Run            int               `json:"run"`
	Highest        map[string]int    `json:"highest_rate_kept_up"`
	Producing      map[string]int    `json:"highest_rate_created"`
	Ratio          ladderRatio       `json:"ratio_ours_over_zset"`
	ProducingRatio ladderRatio       `json:"producing_ratio_ours_over_zset"`
	Why            map[string]string `json:"stopped_because"`
	steps          map[string][]steadyResult
	invariants     string // "ok", or what the last step that broke them found
}

// ladderRatio is ordertimeout's highest rate over the baseline's in one
// ladder. A ladder where only ordertimeout kept up at some rate is
// unbounded (ordertimeout won it); one where neither did has no ratio.
// Value is null in JSON in both cases.
type ladderRatio struct {
	Value     *float64 `json:"value"`
	Unbounded bool     `json:"unbounded,omitempty"`
	r         float64  // +Inf when unbounded
	ok        bool     // false: no ratio
}

func newLadderRatio(ours, zset int) ladderRatio {
	switch {
	case zset > 0:
		r := round2(float64(ours) / float64(zset))
		return ladderRatio{Value: &r, r: r, ok: true}
	case ours > 0:
		return ladderRatio{Unbounded: true, r: math.Inf(1), ok: true}
	default:
		return ladderRatio{}
	}
}

// String is the ratio for the summary.
func (l ladderRatio) String() string {
	switch {
	case !l.ok:
		return "undefined"
	case l.Unbounded:
		return "unbounded"
	default:
		return fmt.Sprintf("%.2f×", l.r)
	}
}

// ratioMedian is the median of the ladders' ratios (the lower middle one of
// an even count): Value null when it is unbounded or no ladder has a ratio.
type ratioMedian struct {
	ladderRatio
	Ladders int `json:"ladders_with_ratio"`
}

func medianOfRatios(ls []ladderRatio) ratioMedian {
	var defined []ladderRatio
	for _, l := range ls {
		if l.ok {
			defined = append(defined, l)
		}
	}
	if len(defined) == 0 {
		return ratioMedian{}
	}
	slices.SortFunc(defined, func(a, b ladderRatio) int { return cmp.Compare(a.r, b.r) })
	return ratioMedian{ladderRatio: defined[(len(defined)-1)/2], Ladders: len(defined)}
}

var designNames = map[string]string{"ordertimeout": "ordertimeout", "zset": "ZSet baseline"}

// runCapacity climbs the rates --capacity-runs times and reports the
// medians: one ladder's verdict flips with the machine's speed of the
// minute (500 or 750/s on the 2-core machine, from one ladder to the next).
func (b *bench) runCapacity(ctx context.Context) error {
	bin, err := b.sidecarBinary(ctx)
	if err != nil {
		b.out.add(row{"capacity", "skipped", "no sidecar", "", "", err.Error()})
		return nil
	}
	cfg := b.cfg
	res := capacityResult{
		Scenario:   "capacity",
		Rates:      cfg.capacityRates,
		DurationS:  cfg.capacityDuration.Seconds(),
		Runs:       cfg.capacityRuns,
		Highest:    map[string]int{},
		Producing:  map[string]int{},
		Invariants: "ok",
		KeepsUpBy: fmt.Sprintf("created >= %.0f%% of rate*duration, cancel lag p99 <= %d ms, no PENDING order past its "+
			"deadline %s after the producer stops, invariants ok", cfg.capacityCreated*100,
			cfg.capacityLagP99.Milliseconds(), cfg.capacityOverdue),
	}
	designs := []string{"ordertimeout"}
	if b.redis != nil {
		designs = append(designs, "zset")
	}
	for run := 1; run <= cfg.capacityRuns; run++ {
		slog.Info("capacity: ladder", "run", run, "of", cfg.capacityRuns)
		l, err := b.capacityLadder(ctx, bin, designs, run)
		if err != nil {
			return err
		}
		if l.invariants != "ok" {
			res.Invariants = l.invariants
		}
		res.Ladders = append(res.Ladders, l)
	}
	res.summarize(designs)
	b.out.emit(res)

	n := fmt.Sprint(cfg.capacityRuns)
	label := fmt.Sprintf("capacity, steady at %s orders/s, %s each", joinInts(cfg.capacityRates), cfg.capacityDuration)
	for _, d := range designs {
		name := designNames[d]
		var each, why []string
		for _, l := range res.Ladders {
			each = append(each, rateOrNone(l.Highest[d]))
			why = append(why, fmt.Sprintf("ladder %d: %s", l.Run, l.Why[d]))
		}
		b.out.add(row{label, name + ": highest rate that keeps up (orders/s)", rateOrNone(res.Highest[d]), n, "",
			"ladders: " + strings.Join(each, ", ") + "; " + strings.Join(why, "; ")})
		b.out.add(row{label, name + ": highest rate whose orders were all created (create path, any lag)", rateOrNone(res.Producing[d]), n, "", ""})
		for _, l := range res.Ladders {
			var cells []string
			for _, s := range l.steps[d] {
				cells = append(cells, fmt.Sprintf("%d: %s/s, p99 %.0f ms, %.3f/%.3f CPU s/1k", s.Rate, num(s.CreatedPerS), s.LagMs.P99, s.OwnPer1000, s.CPUPer1000))
			}
			b.out.add(row{label, fmt.Sprintf("%s: ladder %d, each step (asked: created/s, lag p99, own/host CPU)", name, l.Run), strings.Join(cells, "; "), "1", "", ""})
		}
	}
	if slices.Contains(designs, "zset") {
		for _, r := range res.ratioRows(label, n) {
			b.out.add(r)
		}
		if note := pollNote(cfg.zsetPoll, cfg.capacityLagP99); note != "" {
			b.out.add(row{label, "note on the ZSet baseline's verdict", note, "", "", ""})
		}
	}
	b.plotCapacity(designs, res.Ladders)
	return nil
}

// summarize sets the medians over the ladders: each design's highest rate
// that kept up and highest rate created and, when the baseline ran, each
// ladder's ratios and their medians.
func (res *capacityResult) summarize(designs []string) {
	for _, d := range designs {
		var highest, producing []int
		for _, l := range res.Ladders {
			highest = append(highest, l.Highest[d])
			producing = append(producing, l.Producing[d])
		}
		res.Highest[d], res.Producing[d] = lowerMedian(highest), lowerMedian(producing)
	}
	res.Ratio, res.ProducingRatio = ratioMedian{}, ratioMedian{}
	if !slices.Contains(designs, "zset") {
		return
	}
	var ratios, producing []ladderRatio
	for i := range res.Ladders {
		l := &res.Ladders[i]
		l.Ratio = newLadderRatio(l.Highest["ordertimeout"], l.Highest["zset"])
		l.ProducingRatio = newLadderRatio(l.Producing["ordertimeout"], l.Producing["zset"])
		ratios, producing = append(ratios, l.Ratio), append(producing, l.ProducingRatio)
	}
	res.Ratio, res.ProducingRatio = medianOfRatios(ratios), medianOfRatios(producing)
}

// ratioRows are the summary's rows of the two ratios; n is the number of
// ladders.
func (res *capacityResult) ratioRows(label, n string) []row {
	var each, eachMade []string
	for _, l := range res.Ladders {
		each, eachMade = append(each, l.Ratio.String()), append(eachMade, l.ProducingRatio.String())
	}
	runs := func(m ratioMedian) string {
		if m.Ladders == len(res.Ladders) {
			return n
		}
		return fmt.Sprintf("%d of %s", m.Ladders, n)
	}
	var rows []row
	if res.Ratio.ok {
		// A verdict needs a ratio from most ladders: one ladder of three
		// where only ordertimeout kept up, with neither keeping up in the
		// other two, says little about the two designs.
		verdict := atLeast(res.Ratio.r, 1.5)
		if res.Ratio.Ladders*2 <= len(res.Ladders) {
			verdict = fmt.Sprintf("no verdict: %d of %d ladders have a ratio (neither design kept up at any rate in the others)",
				res.Ratio.Ladders, len(res.Ladders))
		}
		rows = append(rows, row{label, "capacity ratio ordertimeout / ZSet (median of the ladders' ratios; unbounded: only ordertimeout kept up at some rate)",
			res.Ratio.String(), runs(res.Ratio), "≥ 1.5×", verdict + " (ladders: " + strings.Join(each, ", ") + ")"})
	} else {
		rows = append(rows, row{label, "capacity ratio ordertimeout / ZSet", "undefined: neither design kept up at any rate asked", n, "≥ 1.5×", ""})
	}
	if res.ProducingRatio.ok {
		rows = append(rows, row{label, "create-path capacity ratio ordertimeout / ZSet (median of the ladders' ratios)",
			res.ProducingRatio.String(), runs(res.ProducingRatio), "", "ladders: " + strings.Join(eachMade, ", ")})
	}
	return rows
}

// pollNote warns, when the lag line (--capacity-lag-p99) is below 1.5
// times the ZSet scanners' sleep (--zset-poll), that the baseline's lag p99
// sits near that sleep whatever the rate (97-129 ms with the defaults, 100
// ms each, on the 2-core machine), so its verdict is about the sleep rather
// than its throughput; "" otherwise.
func pollNote(poll, lagLine time.Duration) string {
	if 2*lagLine >= 3*poll {
		return ""
	}
	return fmt.Sprintf("its scanners sleep %s when nothing is due, so its lag p99 is about that much at any rate it keeps up with, "+
		"against a line of %s: its verdict is about the sleep more than its throughput (compare its highest rate created, "+
		"or raise --capacity-lag-p99)", poll, lagLine)
}

// capacityLadder runs the steady workload at each of --capacity-rates in
// ascending order for --capacity-duration, ordertimeout's step then the
// ZSet baseline's at each rate. It finds each design's highest rate that
// kept up (below its first rate that did not) and, climbing on while a
// design's producer still creates the asked orders, the highest rate whose
// orders were all created.
func (b *bench) capacityLadder(ctx context.Context, bin string, designs []string, run int) (capacityLadder, error) {
	cfg := b.cfg
	l := capacityLadder{
		Run:        run,
		Highest:    map[string]int{},
		Producing:  map[string]int{},
		Why:        map[string]string{},
		steps:      map[string][]steadyResult{},
		invariants: "ok",
	}
	// A design keeps climbing while its producer keeps up (created ≥
	// --capacity-created), so that the create path's capacity is measured
	// too; its "keeps up" rate is the last before its first full failure.
	alive, producing := map[string]bool{}, map[string]bool{}
	for _, d := range designs {
		alive[d], producing[d] = true, true
		l.Highest[d], l.Producing[d] = 0, 0
	}
	for _, rate := range cfg.capacityRates {
		for _, d := range designs {
			if !producing[d] {
				continue
			}
			p := steadyParams{rate: rate, duration: cfg.capacityDuration, capacity: true}
			var step steadyResult
			var err error
			if d == "zset" {
				step, _, err = b.zsetSteadyOnce(ctx, p)
			} else {
				step, _, err = b.steadyOnce(ctx, bin, p)
			}
			if err != nil {
				return l, fmt.Errorf("capacity ladder %d, %s at %d/s: %w", run, d, rate, err)
			}
			step.Run = run
			b.out.emit(step)
			l.steps[d] = append(l.steps[d], step)
			if step.Invariants != "ok" {
				l.invariants = step.Invariants
			}
			if float64(step.Created) >= cfg.capacityCreated*float64(step.Asked) {
				l.Producing[d] = rate
			} else {
				producing[d] = false
			}
			why := b.fallsBehind(step)
			switch {
			case why != "" && alive[d]:
				alive[d] = false
				l.Why[d] = fmt.Sprintf("at %d/s: %s", rate, why)
				slog.Info("capacity: falls behind", "ladder", run, "design", d, "rate", rate, "why", why)
			case why == "" && alive[d]:
				l.Highest[d] = rate
				slog.Info("capacity: keeps up", "ladder", run, "design", d, "rate", rate)
			default:
				slog.Info("capacity: producer step", "ladder", run, "design", d, "rate", rate, "why", why)
			}
		}
		if !producing["ordertimeout"] && !producing["zset"] {
			break
		}
	}
	for _, d := range designs {
		if alive[d] {
			l.Why[d] = "kept up at every rate asked (raise --capacity-rates)"
		}
	}
	return l, nil
}

// ladderColors are the colours of a design's ladders in capacity.svg:
// shades of one colour per design, so that the ladders of a design group
// together and keep their colour in both panels.
var ladderColors = map[string][]string{
	"ordertimeout": {"#1f77b4", "#6baed6", "#08306b", "#4292c6", "#2171b5"},
	"zset":         {"#d62728", "#fc9272", "#67000d", "#ef3b2c", "#a50f15"},
}

// plotCapacity writes capacity.svg: lag p99 and achieved rate against the
// asked rate, each design's ladders as their own lines.
func (b *bench) plotCapacity(designs []string, ladders []capacityLadder) {
	cfg := b.cfg
	var lag, achieved []series
	achieved = append(achieved, series{name: "asked", markers: true, color: "#7f7f7f"})
	for _, r := range cfg.capacityRates {
		achieved[0].points = append(achieved[0].points, point{float64(r), float64(r)})
	}
	for _, d := range designs {
		for i, ld := range ladders {
			name := designNames[d]
			if len(ladders) > 1 {
				name = fmt.Sprintf("%s, ladder %d", name, ld.Run)
			}
			color := ladderColors[d][i%len(ladderColors[d])]
			l := series{name: name + ": cancel lag p99", markers: true, color: color}
			a := series{name: name + ": created/s achieved", markers: true, color: color}
			for _, s := range ld.steps[d] {
				l.points = append(l.points, point{float64(s.Rate), s.LagMs.P99})
				a.points = append(a.points, point{float64(s.Rate), s.CreatedPerS})
			}
			lag, achieved = append(lag, l), append(achieved, a)
		}
	}
	b.writeStackedPlot("capacity.svg", []plotConfig{
		{
			title:  fmt.Sprintf("capacity: cancel lag p99 vs asked rate (keeps up: p99 ≤ %d ms)", cfg.capacityLagP99.Milliseconds()),
			xLabel: "asked rate (orders/s)", yLabel: "lag p99 (ms)", series: lag,
		},
		{
			title:  fmt.Sprintf("capacity: orders created/s vs asked rate (keeps up: ≥ %.0f%% of asked)", cfg.capacityCreated*100),
			xLabel: "asked rate (orders/s)", yLabel: "created/s", series: achieved,
		},
	})
}

// fallsBehind returns why a capacity step did not keep up, "" when it did.
func (b *bench) fallsBehind(s steadyResult) string {
	cfg := b.cfg
	var why []string
	if float64(s.Created) < cfg.capacityCreated*float64(s.Asked) {
		why = append(why, fmt.Sprintf("created %d of %d asked", s.Created, s.Asked))
	}
	if s.LagMs.P99 > float64(cfg.capacityLagP99.Milliseconds()) {
		why = append(why, fmt.Sprintf("lag p99 %.0f ms", s.LagMs.P99))
	}
	if s.OverdueAfter != nil && *s.OverdueAfter > 0 {
		why = append(why, fmt.Sprintf("%d PENDING overdue %s after the producer stopped", *s.OverdueAfter, cfg.capacityOverdue))
	}
	if s.Invariants != "ok" {
		why = append(why, "invariants "+s.Invariants)
	}
	return strings.Join(why, ", ")
}

// rateOrNone is a capacity rate for the summary: "none" when the design
// kept up at no rate asked (0 in JSON), as README's tables write it.
func rateOrNone(rate int) string {
	if rate == 0 {
		return "none"
	}
	return num(float64(rate))
}

func joinInts(xs []int) string {
	var s []string
	for _, x := range xs {
		s = append(s, num(float64(x)))
	}
	return strings.Join(s, ", ")
}
