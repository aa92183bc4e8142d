package main

import (
	"context"
	"strings"
	"time"

	"github.com/ordertimeout/ordertimeout/sidecar/invariant"
)

// stockTotals is what every SKU must hold in all: what prepareBase put.
func stockTotals() map[string]int64 {
	totals := make(map[string]int64, skuCount)
	for i := range skuCount {
		totals[skuName(i)] = initialStock
	}
	return totals
}

// checkInvariants checks the money-safety invariants on one database with
// the shared checker (sidecar/invariant): stock conserved against the stock
// put by prepareBase, and no PENDING order more than slack past cancel_at.
// It returns "ok" or "VIOLATED: " and the violations on one line.
func checkInvariants(ctx context.Context, db invariant.DB, slack time.Duration) (string, error) {
	report, err := invariant.Check(ctx, db, invariant.Options{StockTotals: stockTotals(), Slack: slack})
	if err != nil {
		return "", err
	}
	if report.OK() {
		return "ok", nil
	}
	var bad []string
	for _, r := range report.Results {
		if !r.OK {
			bad = append(bad, r.Name+": "+strings.Join(r.Detail, "; "))
		}
	}
	return "VIOLATED: " + strings.Join(bad, " | "), nil
}

// checkDatabase runs checkInvariants on database name and records the
// outcome (a violation makes the benchmark fail) under what.
func (b *bench) checkDatabase(ctx context.Context, name, what string, slack time.Duration) (string, error) {
	conn, err := b.srv.connect(ctx, name)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	start := time.Now()
	inv, err := checkInvariants(ctx, conn, slack)
	if err != nil {
		return "", err
	}
	b.out.invariants(what, inv, time.Since(start))
	return inv, nil
}
