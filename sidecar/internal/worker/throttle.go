package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/rivertype"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
)

// riverSchedulerInterval is River's scheduler interval (v0.51:
// maintenance.JobSchedulerIntervalDefault, not configurable). River makes a
// job snoozed for at most this long `available` at its new time, so it is
// fetched within the fetch poll interval once due; a longer snooze makes it
// `scheduled`, and the leader's scheduler makes it available on its first
// pass after that time: up to 5 s late, together with every other job due
// since its last pass (internal/jobexecutor's reportResult).
const riverSchedulerInterval = 5 * time.Second

// MaxSlotGrace is how late a job may come back for the token it reserved
// and still use it when Deps.SlotGrace is zero, and the most it may be set
// to.
const MaxSlotGrace = time.Second

// slotKey is the key of the job's metadata that holds its reserved token.
const slotKey = "ordertimeout_gateway_slot"

// gatewaySlot is a token of the gateway rate limit that a throttled job
// reserved ahead (gateway.Ticket), kept in the job's metadata between its
// runs: due At by the database's clock, good for the run after the snooze
// that recorded it only (Attempt and Snoozes as that run will have them),
// so that a token is used once, whatever happens to the call it was for.
type gatewaySlot struct {
	At      time.Time `json:"at"`
	Attempt int       `json:"attempt"`
	Snoozes int       `json:"snoozes"`
}

// gatewayTicket returns ctx with a gateway.Ticket for the job's gateway
// calls, holding the token the job reserved in its last run if it is still
// good. With it, a call the rate limit throttles keeps a token reserved
// ahead, and retry records it on the job.
//
// The slot is in the job's row, not in this sidecar's memory, so the run
// that uses it may be on another sidecar: it sends on the token this one
// reserved, and no token is wasted or taken twice. A sidecar that starts
// takes the tokens still to come out of its own rate limit
// (ReservedGatewayTokens, gateway.Limited.Occupy), so that the held tokens
// and its own calls together keep the rate; a token that came due before it
// started is not used (Deps.SlotsFrom), nor one its job comes back for more
// than Deps.SlotGrace late: sent late, all at once, such tokens would go out
// on top of the rate.
func (d *Deps) gatewayTicket(ctx context.Context, job *rivertype.JobRow) context.Context {
	t := &gateway.Ticket{}
	if left, ok := heldSlot(job, d.now(), d.SlotsFrom, d.slotGrace()); ok {
		t.Held, t.Due = true, time.Now().Add(left)
	}
	return gateway.WithTicket(ctx, t)
}

// heldSlot returns how long from now the token job reserved in its last
// run is due, if the job may use it: the slot is for this run (attempt and
// snoozes), was not due before slotsFrom, and is at most grace past.
func heldSlot(job *rivertype.JobRow, now, slotsFrom time.Time, grace time.Duration) (time.Duration, bool) {
	var meta map[string]json.RawMessage
	var slot gatewaySlot
	if json.Unmarshal(job.Metadata, &meta) != nil || meta[slotKey] == nil ||
		json.Unmarshal(meta[slotKey], &slot) != nil ||
		slot.Attempt != job.Attempt || slot.Snoozes != snoozes(job) || slot.At.Before(slotsFrom) {
		return 0, false
	}
	left := slot.At.Sub(now)
	return left, left >= -grace
}

// slotGrace is Deps.SlotGrace, or MaxSlotGrace if it is zero or more.
func (d *Deps) slotGrace() time.Duration {
	if d.SlotGrace <= 0 || d.SlotGrace > MaxSlotGrace {
		return MaxSlotGrace
	}
	return d.SlotGrace
}

// keepSlot records on the running job the token the rate limit reserved
// for it, due in `in`, for its run after this snooze. River's snooze merges
// its own keys into the metadata and keeps this one.
func (d *Deps) keepSlot(ctx context.Context, job *rivertype.JobRow, in time.Duration) error {
	slot, err := json.Marshal(gatewaySlot{At: d.now().Add(in), Attempt: job.Attempt, Snoozes: snoozes(job) + 1})
	if err != nil {
		return err
	}
	_, err = d.Pool.Exec(ctx,
		`UPDATE river_job SET metadata = metadata || jsonb_build_object($2::text, $3::jsonb)
		  WHERE id = $1 AND state = 'running'`, job.ID, slotKey, slot)
	if err != nil {
		return fmt.Errorf("record the reserved gateway token of job %d: %w", job.ID, err)
	}
	return nil
}

// ReservedGatewayTokens counts the gateway tokens that snoozed jobs hold
// for their next run and that are still to come by the database's clock
// (their slot, written by keepSlot), and returns when the last one is due
// and the database's time of the count (for Deps.SlotsFrom). A slot that
// cannot be read is not counted: it will not be honoured either.
func ReservedGatewayTokens(ctx context.Context, pool *pgxpool.Pool) (n int, last, now time.Time, err error) {
	// One row at least, for the clock, with a NULL slot when no job holds one.
	rows, err := pool.Query(ctx, `
		SELECT c.now, j.metadata -> $1
		  FROM (SELECT clock_timestamp() AS now) AS c
		  LEFT JOIN river_job AS j ON j.state IN ('available', 'scheduled') AND j.metadata ? $1`, slotKey)
	if err != nil {
		return 0, time.Time{}, time.Time{}, fmt.Errorf("read the gateway tokens snoozed jobs hold: %w", err)
	}
	var raw []byte
	_, err = pgx.ForEachRow(rows, []any{&now, &raw}, func() error {
		var slot gatewaySlot
		if raw == nil || json.Unmarshal(raw, &slot) != nil || !slot.At.After(now) {
			return nil
		}
		n++
		if slot.At.After(last) {
			last = slot.At
		}
		return nil
	})
	if err != nil {
		return 0, time.Time{}, time.Time{}, fmt.Errorf("read the gateway tokens snoozed jobs hold: %w", err)
	}
	return n, last, now, nil
}

// reservedSnooze is how long a job snoozes for a token due in `in`. Up to
// River's scheduler interval, exactly that: the job is fetched about when
// the token is due. Further, until riverSchedulerInterval before it: the
// scheduler wakes the job at most that late, before the token is due, and
// that run waits for it or snoozes the short rest.
func reservedSnooze(in time.Duration) time.Duration {
	if in > riverSchedulerInterval {
		return in - riverSchedulerInterval
	}
	return max(in, 0)
}
