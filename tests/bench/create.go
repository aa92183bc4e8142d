package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// createTarget is docs/workload.md's goal for create with 4 clients, in orders/s.
const createTarget = 2000

// createRun is what one create run measured.
type createRun struct {
	Run        int     `json:"run"`
	Orders     int64   `json:"orders"`
	Errors     int64   `json:"errors"`
	OrdersPerS float64 `json:"orders_per_s"`
	HostCPUS   float64 `json:"host_cpu_s"`
	CPUPer1000 float64 `json:"host_cpu_s_per_1000_orders"`
	OwnCPUS    float64 `json:"own_cpu_s"`
	OwnPer1000 float64 `json:"own_cpu_s_per_1000_orders"`
	// WALPerOrder is the server's WAL written during the run per order
	// (pg_current_wal_insert_lsn before and after; the server runs nothing else).
	WALPerOrder float64 `json:"wal_bytes_per_order"`
	Invariants  string  `json:"invariants"`
}

// createResult is the JSON line of create.
type createResult struct {
	Scenario   string      `json:"scenario"`
	Design     string      `json:"design"`
	Clients    int         `json:"clients"`
	DurationS  float64     `json:"duration_s"`
	OrdersPerS float64     `json:"orders_per_s"`
	Median     float64     `json:"median"`
	CPUPer1000 float64     `json:"host_cpu_s_per_1000_orders"`
	OwnPer1000 float64     `json:"own_cpu_s_per_1000_orders"`
	Runs       []createRun `json:"runs"`
	Invariants string      `json:"invariants"`
	MeasuredBy string      `json:"measured_by"`
}

// runCreate has --create-clients clients call create_order (2 random items,
// timeout 1 hour) back to back for --create-duration, on a fresh database per
// run; then the ZSet baseline's create path (its order transaction and the
// ZADD) the same way. Runs of the two alternate.
func (b *bench) runCreate(ctx context.Context) error {
	designs := []string{"ordertimeout"}
	if b.redis != nil {
		designs = append(designs, "zset")
	}
	runs := map[string][]createRun{}
	for run := 1; run <= b.cfg.runs; run++ {
		for _, d := range designs {
			r, err := b.createOnce(ctx, d)
			if err != nil {
				return fmt.Errorf("create %s: %w", d, err)
			}
			r.Run = run
			slog.Info("create run", "design", d, "run", run, "orders_per_s", int(r.OrdersPerS), "host_cpu_s_per_1000", r.CPUPer1000, "own_cpu_s_per_1000", r.OwnPer1000, "invariants", r.Invariants)
			runs[d] = append(runs[d], r)
		}
	}
	label := fmt.Sprintf("create, %d clients, %s", b.cfg.createClients, b.cfg.createDuration)
	cpu := map[string]float64{}
	for _, d := range designs {
		var rates, cpus, owns, wal []float64
		inv := "ok"
		for _, r := range runs[d] {
			rates = append(rates, r.OrdersPerS)
			cpus = append(cpus, r.CPUPer1000)
			owns = append(owns, r.OwnPer1000)
			wal = append(wal, r.WALPerOrder)
			if r.Invariants != "ok" {
				inv = r.Invariants
			}
		}
		res := createResult{
			Scenario:   "create",
			Design:     d,
			Clients:    b.cfg.createClients,
			DurationS:  b.cfg.createDuration.Seconds(),
			OrdersPerS: round2(median(rates)),
			Median:     round2(median(rates)),
			CPUPer1000: round3(median(cpus)),
			OwnPer1000: round3(median(owns)),
			Runs:       runs[d],
			Invariants: inv,
			MeasuredBy: "count(orders) / (max(created_at) - min(created_at)); host CPU from /proc/stat over the clients' run, " +
				"every process of the machine included",
		}
		cpu[d] = res.OwnPer1000
		b.out.emit(res)
		n := fmt.Sprint(len(runs[d]))
		if d == "ordertimeout" {
			b.out.add(row{label, "ordertimeout: orders created/s (create_order)", num(res.Median), n, "≥ " + num(createTarget), atLeast(res.Median, createTarget)})
		} else {
			b.out.add(row{label, "ZSet baseline: orders created/s (order transaction + ZADD)", num(res.Median), n, "", ""})
		}
		b.out.add(row{label, designNames[d] +
			": CPU s per 1,000 orders, create alone: own processes / host", fmt.Sprintf("%.3f / %.3f", res.OwnPer1000, res.CPUPer1000), n, "", ""},
			row{label, designNames[d] +
				": WAL bytes per order (create alone)", num(median(wal)), n, "", ""})
	}
	if z := cpu["zset"]; z > 0 {
		ratio := cpu["ordertimeout"] / z
		verdict := "met"
		if ratio > 1 {
			verdict = "missed"
		}
		b.out.add(row{label, "create CPU per order (own processes): ordertimeout / ZSet", fmt.Sprintf("%.2f×", ratio), fmt.Sprint(b.cfg.runs), "≤ 1×", verdict})
	}
	return nil
}

func (b *bench) createOnce(ctx context.Context, which string) (createRun, error) {
	var res createRun
	name, err := b.srv.clone(ctx, b.base, "create")
	if err != nil {
		return res, err
	}
	defer b.srv.drop(name)
	if err := b.srv.checkpoint(ctx); err != nil {
		return res, err
	}

	var conns []*pgx.Conn
	for range b.cfg.createClients {
		conn, err := b.srv.connect(ctx, name)
		if err != nil {
			return res, err
		}
		conns = append(conns, conn)
	}
	var walStart string
	if err := conns[0].QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&walStart); err != nil {
		return res, fmt.Errorf("read WAL position: %w", err)
	}
	cpu := b.startCPU(b.redis.pid())
	runCtx, cancel := context.WithTimeout(ctx, b.cfg.createDuration)
	defer cancel()
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for c, conn := range conns {
		r := b.newRand(uint64(2000 + c))
		var d design = &otDesign{pool: conn}
		if which == "zset" {
			rdb := b.redis.client(1)
			defer rdb.Close()
			d = &zsetDesign{pool: conn, rdb: rdb}
		}
		wg.Go(func() {
			defer conn.Close(context.Background())
			for i := 1; runCtx.Err() == nil; i++ {
				id := "c" + strconv.Itoa(c) + "-" + strconv.Itoa(i)
				err := d.create(runCtx, id, drawItems(r), time.Hour)
				if err != nil && runCtx.Err() == nil {
					mu.Lock()
					res.Errors++
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	res.HostCPUS = round2(cpu.stop(b))
	var walBytes float64
	res.OwnCPUS = round2(cpu.own())
	if firstErr != nil {
		slog.Warn("create_order failed", "errors", res.Errors, "first", firstErr)
	}

	conn, err := b.srv.connect(ctx, name)
	if err != nil {
		return res, err
	}
	defer conn.Close(context.Background())
	var first, last *time.Time
	table := "ordertimeout.orders"
	if which == "zset" {
		table = "zset.orders"
	}
	if err := conn.QueryRow(ctx, `SELECT count(*), min(created_at), max(created_at) FROM `+table).
		Scan(&res.Orders, &first, &last); err != nil {
		return res, fmt.Errorf("count orders: %w", err)
	}
	if first != nil {
		res.OrdersPerS = round2(perSecond(res.Orders, *first, *last))
	}
	if err := conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::float8`, walStart).Scan(&walBytes); err != nil {
		return res, fmt.Errorf("read WAL position: %w", err)
	}
	if res.Orders > 0 {
		res.WALPerOrder = round2(walBytes / float64(res.Orders))
	}
	res.CPUPer1000 = perThousand(res.HostCPUS, res.Orders)
	res.OwnPer1000 = perThousand(res.OwnCPUS, res.Orders)
	if which == "zset" {
		res.Invariants, err = b.zsetCheck(ctx, name, name+" (zset create)", b.cfg.maxOverdue)
	} else {
		res.Invariants, err = b.checkDatabase(ctx, name, name+" (create)", b.cfg.maxOverdue)
	}
	return res, err
}
