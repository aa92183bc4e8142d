package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// pgbenchVariant is one single-order cancel transaction run by pgbench.
type pgbenchVariant struct {
	name   string
	about  string
	script string // the transaction; :n is the order number
}

// Every client takes order numbers client_id+1, client_id+1+nc, ... so each
// order of d1..dN is cancelled exactly once, with no shared counter. pgbench
// keeps a client's variables from one transaction to the next.
const pgbenchHead = `\set n :i * :nc + :client_id + 1
\set i :i + 1
\if :n <= :total
`

var pgbenchVariants = []pgbenchVariant{
	{
		name:  "minimal_sql",
		about: "one statement per order: the order UPDATE, release rows, stock UPDATE, CANCELLED event, timer row DELETE (the tables the API writes, no PL/pgSQL)",
		script: `WITH o AS (
    UPDATE ordertimeout.orders AS o
    SET status = 'CANCELLED',
        cancelled_at = clock_timestamp(),
        cancel_cause = 'timeout',
        deadline_version = o.deadline_version + 1,
        timer_job_id = NULL
    FROM ordertimeout.orders AS prev
    WHERE o.order_id = 'd' || :n
      AND prev.order_id = o.order_id
      AND o.status = 'PENDING'
    RETURNING o.order_id, o.cancelled_at, o.cancel_at, prev.timer_job_id
), i AS (
    SELECT i.order_id, i.sku, i.qty, o.cancelled_at
    FROM o
    JOIN ordertimeout.order_items AS i ON i.order_id = o.order_id
    ORDER BY i.sku
), s AS (
    UPDATE ordertimeout.stock AS s
    SET available = s.available + i.qty,
        reserved = s.reserved - i.qty
    FROM i
    WHERE s.sku = i.sku
), r AS (
    INSERT INTO ordertimeout.releases (order_id, kind, resource_id, qty, cause, released_at)
    SELECT i.order_id, 'stock', i.sku, i.qty, 'timeout', i.cancelled_at
    FROM i
), e AS (
    INSERT INTO ordertimeout.events (order_id, from_status, to_status, cause, actor, lateness, at)
    SELECT o.order_id, 'PENDING', 'CANCELLED', 'timeout', current_user, o.cancelled_at - o.cancel_at, o.cancelled_at
    FROM o
), j AS (
    DELETE FROM public.river_job AS j
    USING o
    WHERE j.id = o.timer_job_id
)
SELECT count(*) FROM o;
`,
	},
	{
		name:   "cancel_order",
		about:  "SELECT ordertimeout.cancel_order('d' || :n): the API's single-order cancel",
		script: "SELECT ordertimeout.cancel_order('d' || :n);\n",
	},
}

// pgbenchResult is the JSON line of one pgbench variant.
type pgbenchResult struct {
	Scenario    string    `json:"scenario"`
	Variant     string    `json:"variant"`
	About       string    `json:"about"`
	Orders      int       `json:"orders"`
	Clients     int       `json:"clients"`
	TPS         float64   `json:"tps"`
	Failed      int64     `json:"failed"`
	Retried     int64     `json:"retried"`
	Cancelled   int64     `json:"cancelled"`
	CancelPerS  float64   `json:"cancel_per_s"`
	Ours        float64   `json:"ours_cancel_per_s"`
	Ratio       float64   `json:"ratio_ours_over_pgbench"`
	Runs        []float64 `json:"runs"`
	Command     string    `json:"command"`
	Script      string    `json:"script"`
	Invariants  string    `json:"invariants"`
	MeasuredBy  string    `json:"measured_by"`
	TimeToZeroS float64   `json:"time_to_zero_s"`
}

// runPgbench measures the raw limit of one transaction per order with
// pgbench on copies of the drain data set.
func (b *bench) runPgbench(ctx context.Context, tmpl string, ours float64) error {
	if _, err := os.Stat(b.cfg.pgbench); err != nil {
		return fmt.Errorf("pgbench not found (set --pgbench or PGBIN): %w", err)
	}
	dir, err := os.MkdirTemp("", "bench-pgbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, v := range pgbenchVariants {
		var results []pgbenchResult
		for run := 1; run <= b.cfg.longRuns; run++ {
			res, err := b.pgbenchOnce(ctx, tmpl, dir, v)
			if err != nil {
				return err
			}
			slog.Info("pgbench run", "variant", v.name, "run", run, "tps", int(res.TPS),
				"cancel_per_s", int(res.CancelPerS), "invariants", res.Invariants)
			results = append(results, res)
		}
		var rates, tps []float64
		for _, r := range results {
			rates = append(rates, r.CancelPerS)
			tps = append(tps, r.TPS)
		}
		res := results[0]
		res.Runs = rates
		res.CancelPerS = round2(median(rates))
		res.TPS = round2(median(tps))
		res.Ours = ours
		if res.CancelPerS > 0 {
			res.Ratio = round2(ours / res.CancelPerS)
		}
		for _, r := range results {
			if r.Invariants != "ok" {
				res.Invariants = r.Invariants
			}
		}
		b.out.emit(res)
		label := fmt.Sprintf("baseline: pgbench %s, %d clients", v.name, b.cfg.pgbenchClients)
		b.out.add(
			row{label, "cancellations/s (pgbench tps)", fmt.Sprintf("%s (%s)", num(res.CancelPerS), num(res.TPS)), fmt.Sprint(len(rates)), "", ""},
			row{"ratio drain (1 session) / pgbench " + v.name, "×", fmt.Sprintf("%.1f×", res.Ratio), "", "", ""},
		)
	}
	return nil
}

var (
	tpsRe     = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
	failedRe  = regexp.MustCompile(`number of failed transactions: ([0-9]+)`)
	retriedRe = regexp.MustCompile(`number of transactions retried: ([0-9]+)`)
)

func (b *bench) pgbenchOnce(ctx context.Context, tmpl, dir string, v pgbenchVariant) (pgbenchResult, error) {
	cfg := b.cfg
	clients := cfg.pgbenchClients
	perClient := (cfg.drainOrders + clients - 1) / clients
	script := pgbenchHead + v.script + `\endif` + "\n"
	res := pgbenchResult{
		Scenario:   "drain_baseline_pgbench",
		Variant:    v.name,
		About:      v.about,
		Orders:     cfg.drainOrders,
		Clients:    clients,
		Script:     script,
		MeasuredBy: "cancel_per_s from events.at like drain; tps as pgbench reports it",
	}
	path := filepath.Join(dir, v.name+".sql")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		return res, err
	}
	name, err := b.srv.clone(ctx, tmpl, "pgbench_"+v.name)
	if err != nil {
		return res, err
	}
	defer b.srv.drop(name)
	if err := b.srv.checkpoint(ctx); err != nil {
		return res, err
	}
	conn, err := b.srv.connect(ctx, name)
	if err != nil {
		return res, err
	}
	defer conn.Close(context.Background())
	dbStart, err := dbNow(ctx, conn)
	if err != nil {
		return res, err
	}

	args := []string{
		"-n", "-M", "prepared", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(clients),
		"-t", strconv.Itoa(perClient), "--max-tries=10",
		"-D", "i=0", "-D", "nc=" + strconv.Itoa(clients), "-D", "total=" + strconv.Itoa(cfg.drainOrders),
		"-f", path, b.srv.urlFor(name),
	}
	res.Command = "pgbench " + strings.Join(args[:len(args)-3], " ") + " -f " + v.name + ".sql DBURL"
	cmd := exec.CommandContext(ctx, cfg.pgbench, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return res, fmt.Errorf("pgbench %s: %w\n%s", v.name, err, out)
	}
	text := string(out)
	if m := tpsRe.FindStringSubmatch(text); m != nil {
		res.TPS, _ = strconv.ParseFloat(m[1], 64)
		res.TPS = round2(res.TPS)
	}
	if m := failedRe.FindStringSubmatch(text); m != nil {
		res.Failed, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := retriedRe.FindStringSubmatch(text); m != nil {
		res.Retried, _ = strconv.ParseInt(m[1], 10, 64)
	}

	count, first, last, err := cancelRate(ctx, conn, dbStart)
	if err != nil {
		return res, err
	}
	res.Cancelled = count
	res.CancelPerS = round2(perSecond(count, first, last))
	res.TimeToZeroS = round2(last.Sub(dbStart).Seconds())
	res.Invariants, err = b.checkDatabase(ctx, name, name+" (pgbench "+v.name+")", cfg.maxOverdue)
	return res, err
}
