package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// capacityResult is the JSON line summing up capacity for both designs.
type capacityResult struct {
	Scenario  string         `json:"scenario"`
	Rates     []int          `json:"rates"`
	DurationS float64        `json:"duration_s"`
	Highest   map[string]int `json:"highest_rate_kept_up"`
	Ratio     float64        `json:"ratio_ours_over_zset,omitempty"`
	// Producing is each design's highest rate whose producer still created
	// the asked orders (the create path's capacity), whatever the lag.
	Producing     map[string]int    `json:"highest_rate_created"`
	ProducingRate float64           `json:"producing_ratio_ours_over_zset,omitempty"`
	Why           map[string]string `json:"stopped_because"`
	KeepsUpBy     string            `json:"keeps_up_means"`
	Invariants    string            `json:"invariants"`
}

// runCapacity runs the steady workload at each of --capacity-rates in
// ascending order for --capacity-duration, ordertimeout's step then the
// ZSet baseline's at each rate. It reports each design's highest rate that
// kept up (below its first rate that did not) and, climbing on while a
// design's producer still creates the asked orders, the highest rate whose
// orders were all created.
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
		Highest:    map[string]int{},
		Producing:  map[string]int{},
		Why:        map[string]string{},
		Invariants: "ok",
		KeepsUpBy: fmt.Sprintf("created >= %.0f%% of rate*duration, cancel lag p99 <= %d ms, no PENDING order past its "+
			"deadline %s after the producer stops, invariants ok", cfg.capacityCreated*100,
			cfg.capacityLagP99.Milliseconds(), cfg.capacityOverdue),
	}
	designs := []string{"ordertimeout"}
	if b.redis != nil {
		designs = append(designs, "zset")
	}
	// A design keeps climbing while its producer keeps up (created ≥
	// --capacity-created), so that the create path's capacity is measured
	// too; its "keeps up" rate is the last before its first full failure.
	alive, producing := map[string]bool{}, map[string]bool{}
	for _, d := range designs {
		alive[d], producing[d] = true, true
		res.Highest[d], res.Producing[d] = 0, 0
	}
	steps := map[string][]steadyResult{}
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
				return fmt.Errorf("capacity %s at %d/s: %w", d, rate, err)
			}
			b.out.emit(step)
			steps[d] = append(steps[d], step)
			if step.Invariants != "ok" {
				res.Invariants = step.Invariants
			}
			if float64(step.Created) >= cfg.capacityCreated*float64(step.Asked) {
				res.Producing[d] = rate
			} else {
				producing[d] = false
			}
			why := b.fallsBehind(step)
			switch {
			case why != "" && alive[d]:
				alive[d] = false
				res.Why[d] = fmt.Sprintf("at %d/s: %s", rate, why)
				slog.Info("capacity: falls behind", "design", d, "rate", rate, "why", why)
			case why == "" && alive[d]:
				res.Highest[d] = rate
				slog.Info("capacity: keeps up", "design", d, "rate", rate)
			default:
				slog.Info("capacity: producer step", "design", d, "rate", rate, "why", why)
			}
		}
		if !producing["ordertimeout"] && !producing["zset"] {
			break
		}
	}
	for _, d := range designs {
		if alive[d] {
			res.Why[d] = "kept up at every rate asked (raise --capacity-rates)"
		}
	}
	if z := res.Highest["zset"]; z > 0 {
		res.Ratio = round2(float64(res.Highest["ordertimeout"]) / float64(z))
	}
	if z := res.Producing["zset"]; z > 0 {
		res.ProducingRate = round2(float64(res.Producing["ordertimeout"]) / float64(z))
	}
	b.out.emit(res)

	label := fmt.Sprintf("capacity, steady at %s orders/s, %s each", joinInts(cfg.capacityRates), cfg.capacityDuration)
	for _, d := range designs {
		name := map[string]string{"ordertimeout": "ordertimeout", "zset": "ZSet baseline"}[d]
		b.out.add(row{label, name + ": highest rate that keeps up (orders/s)", num(float64(res.Highest[d])), "1", "", res.Why[d]})
		b.out.add(row{label, name + ": highest rate whose orders were all created (create path, any lag)", num(float64(res.Producing[d])), "1", "", ""})
		var cells []string
		for _, s := range steps[d] {
			cells = append(cells, fmt.Sprintf("%d: %s/s, p99 %.0f ms, %.3f/%.3f CPU s/1k", s.Rate, num(s.CreatedPerS), s.LagMs.P99, s.OwnPer1000, s.CPUPer1000))
		}
		b.out.add(row{label, name + ": each step (asked: created/s, lag p99, own/host CPU)", strings.Join(cells, "; "), "1", "", ""})
	}
	switch {
	case res.Ratio > 0:
		b.out.add(row{label, "capacity ratio ordertimeout / ZSet", fmt.Sprintf("%.2f×", res.Ratio), "1", "≥ 1.5×", atLeast(res.Ratio, 1.5)})
	case len(designs) == 2:
		b.out.add(row{label, "capacity ratio ordertimeout / ZSet", "undefined: the ZSet baseline kept up at no rate asked", "1", "≥ 1.5×", ""})
	}
	if res.ProducingRate > 0 {
		b.out.add(row{label, "create-path capacity ratio ordertimeout / ZSet", fmt.Sprintf("%.2f×", res.ProducingRate), "1", "", ""})
	}

	var lag, achieved []series
	achieved = append(achieved, series{name: "asked", markers: true})
	for _, r := range cfg.capacityRates {
		achieved[0].points = append(achieved[0].points, point{float64(r), float64(r)})
	}
	for _, d := range designs {
		name := map[string]string{"ordertimeout": "ordertimeout", "zset": "ZSet baseline"}[d]
		l := series{name: name + ": cancel lag p99", markers: true}
		a := series{name: name + ": created/s achieved", markers: true}
		for _, s := range steps[d] {
			l.points = append(l.points, point{float64(s.Rate), s.LagMs.P99})
			a.points = append(a.points, point{float64(s.Rate), s.CreatedPerS})
		}
		lag, achieved = append(lag, l), append(achieved, a)
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
	return nil
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

func joinInts(xs []int) string {
	var s []string
	for _, x := range xs {
		s = append(s, num(float64(x)))
	}
	return strings.Join(s, ", ")
}
