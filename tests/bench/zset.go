package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// The seed's design, the one e-commerce articles describe and shops build:
// the order transaction (order row, items, stock reserved with a conditional
// UPDATE) commits, then the application adds the order to a Redis sorted set
// scored by its expiry in ms; W instances loop ZRANGEBYSCORE -inf now
// LIMIT 0 100, ZREM each member (the instance whose ZREM returns 1 owns it)
// and run a cancel transaction (conditional UPDATE ... WHERE status =
// 'PENDING', a release log row per item with a unique key, stock given
// back); a member whose cancel failed is added back with score now; an
// instance sleeps 100 ms when nothing is due. Payments go PENDING -> PAYING
// -> PAID with conditional UPDATEs. A paid order stays in the set and costs a
// no-op cancel at expiry. Its tables live in schema zset of the same
// databases (made by prepareBase), with the same 100 SKUs.

// zsetKey is the sorted set of the seed.
const zsetKey = "delay:order:cancel"

// zsetSchema is the baseline's own schema: primary keys and checks only, as
// such schemas are (the release log's primary key is its unique key).
const zsetSchema = `
CREATE SCHEMA zset;
CREATE TABLE zset.stock (
    sku       text PRIMARY KEY,
    available bigint NOT NULL CHECK (available >= 0),
    reserved  bigint NOT NULL DEFAULT 0 CHECK (reserved >= 0),
    sold      bigint NOT NULL DEFAULT 0 CHECK (sold >= 0));
CREATE TABLE zset.orders (
    order_id     text PRIMARY KEY,
    status       text NOT NULL CHECK (status IN ('PENDING', 'PAYING', 'PAID', 'CANCELLED')),
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    expire_at    timestamptz NOT NULL,
    payment_id   text,
    paid_at      timestamptz,
    cancelled_at timestamptz);
CREATE TABLE zset.order_items (
    order_id text NOT NULL,
    sku      text NOT NULL,
    qty      integer NOT NULL CHECK (qty > 0),
    PRIMARY KEY (order_id, sku));
CREATE TABLE zset.releases (
    order_id    text NOT NULL,
    sku         text NOT NULL,
    qty         integer NOT NULL,
    released_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (order_id, sku));
`

// prepareZset adds the baseline's schema and stock to database name (the
// base template).
func prepareZset(ctx context.Context, conn *pgx.Conn) error {
	if _, err := conn.Exec(ctx, zsetSchema); err != nil {
		return fmt.Errorf("create schema zset: %w", err)
	}
	if _, err := conn.Exec(ctx, `
		INSERT INTO zset.stock (sku, available)
		SELECT format('sku-%s', lpad(n::text, 3, '0')), $1
		FROM generate_series(0, $2 - 1) AS n`, initialStock, skuCount); err != nil {
		return fmt.Errorf("put zset stock: %w", err)
	}
	return nil
}

// zsetDesign is the application side of the baseline: its database pool and
// its Redis client.
type zsetDesign struct {
	pool zsetDB
	rdb  *redis.Client
}

// zsetDB is what a pool and a connection have in common for the design.
type zsetDB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// errOutOfStock is a create refused by the conditional stock UPDATE.
var errOutOfStock = errors.New("out of stock")

// create runs the order transaction, then ZADDs the order with its expiry.
// Three round trips to PostgreSQL (BEGIN; the four statements pipelined;
// COMMIT), one to Redis.
func (d *zsetDesign) create(ctx context.Context, id string, it [2]orderItem, timeout time.Duration) error {
	expire, err := d.createTx(ctx, id, it, timeout)
	if err != nil {
		return err
	}
	if err := d.rdb.ZAdd(ctx, zsetKey, redis.Z{Score: float64(expire.UnixMilli()), Member: id}).Err(); err != nil {
		return fmt.Errorf("zadd %s: %w", id, err)
	}
	return nil
}

// createTx is the order transaction alone; it returns expire_at.
func (d *zsetDesign) createTx(ctx context.Context, id string, it [2]orderItem, timeout time.Duration) (time.Time, error) {
	var expire time.Time
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		batch := &pgx.Batch{}
		batch.Queue(`INSERT INTO zset.orders (order_id, status, expire_at)
			VALUES ($1, 'PENDING', clock_timestamp() + $2::interval) RETURNING expire_at`, id, timeout).
			QueryRow(func(row pgx.Row) error { return row.Scan(&expire) })
		batch.Queue(`INSERT INTO zset.order_items (order_id, sku, qty) VALUES ($1, $2, $3), ($1, $4, $5)`,
			id, it[0].sku, it[0].qty, it[1].sku, it[1].qty)
		for _, x := range it {
			batch.Queue(`UPDATE zset.stock SET available = available - $2, reserved = reserved + $2
				WHERE sku = $1 AND available >= $2`, x.sku, x.qty).
				Exec(func(tag pgconn.CommandTag) error {
					if tag.RowsAffected() != 1 {
						return fmt.Errorf("reserve %s: %w", x.sku, errOutOfStock)
					}
					return nil
				})
		}
		return tx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("create %s: %w", id, err)
	}
	return expire, nil
}

// begin is begin_payment: PENDING -> PAYING, false when the order was not
// PENDING.
func (d *zsetDesign) begin(ctx context.Context, id, payment string) (bool, error) {
	tag, err := d.pool.Exec(ctx, `UPDATE zset.orders SET status = 'PAYING', payment_id = $2
		WHERE order_id = $1 AND status = 'PENDING'`, id, payment)
	if err != nil {
		return false, fmt.Errorf("begin payment %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// confirm is the gateway's success callback: PAYING -> PAID and the reserved
// stock sold, in one transaction; false when the order was not PAYING with
// this payment.
func (d *zsetDesign) confirm(ctx context.Context, id, payment string) (bool, error) {
	paid := false
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		its, ok, err := transition(ctx, tx, `UPDATE zset.orders SET status = 'PAID', paid_at = clock_timestamp()
			WHERE order_id = $1 AND status = 'PAYING' AND payment_id = $2`, id, payment)
		if err != nil || !ok {
			return err
		}
		batch := &pgx.Batch{}
		for _, x := range its {
			batch.Queue(`UPDATE zset.stock SET reserved = reserved - $2, sold = sold + $2 WHERE sku = $1`, x.sku, x.qty)
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		paid = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("confirm payment %s: %w", id, err)
	}
	return paid, nil
}

// cancel is the scanner's cancel transaction: PENDING -> CANCELLED, a
// release row per item (the unique key refuses a second release), the stock
// given back. It returns false when the order was not PENDING (paid, paying
// or cancelled already): a no-op that still cost a transaction.
func (d *zsetDesign) cancel(ctx context.Context, id string) (bool, error) {
	cancelled := false
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		its, ok, err := transition(ctx, tx, `UPDATE zset.orders SET status = 'CANCELLED', cancelled_at = clock_timestamp()
			WHERE order_id = $1 AND status = 'PENDING'`, id)
		if err != nil || !ok {
			return err
		}
		batch := &pgx.Batch{}
		for _, x := range its {
			batch.Queue(`INSERT INTO zset.releases (order_id, sku, qty) VALUES ($1, $2, $3)`, id, x.sku, x.qty)
			batch.Queue(`UPDATE zset.stock SET available = available + $2, reserved = reserved - $2 WHERE sku = $1`, x.sku, x.qty)
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		cancelled = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("cancel %s: %w", id, err)
	}
	return cancelled, nil
}

// transition runs the conditional UPDATE update ($1 is the order id) and
// reads the order's items in SKU order (the lock order of every
// transaction) in one round trip; ok is whether the UPDATE changed the row.
func transition(ctx context.Context, tx pgx.Tx, update string, args ...any) ([]orderItem, bool, error) {
	batch := &pgx.Batch{}
	var changed bool
	batch.Queue(update, args...).Exec(func(tag pgconn.CommandTag) error {
		changed = tag.RowsAffected() == 1
		return nil
	})
	var its []orderItem
	batch.Queue(`SELECT sku, qty FROM zset.order_items WHERE order_id = $1 ORDER BY sku`, args[0]).
		Query(func(rows pgx.Rows) error {
			var x orderItem
			_, err := pgx.ForEachRow(rows, []any{&x.sku, &x.qty}, func() error { its = append(its, x); return nil })
			return err
		})
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, false, err
	}
	return its, changed, nil
}

// zsetCounts counts what the scanners did.
type zsetCounts struct {
	scans, emptyScans, grabbed, lostRace, cancelled, noop, errors, readded atomic.Int64
}

// zsetScanners runs W scanner instances until stop is called.
type zsetScanners struct {
	counts zsetCounts
	cancel context.CancelFunc
	wg     sync.WaitGroup
	pool   *pgxpool.Pool
	errMu  sync.Mutex
	first  error
}

// startScanners starts cfg.zsetInstances instances on database name, each
// with its own Redis connection and database connection, like separate
// application instances.
func (b *bench) startScanners(ctx context.Context, name string) (*zsetScanners, error) {
	pool, err := b.srv.pool(ctx, name, b.cfg.zsetInstances)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &zsetScanners{cancel: cancel, pool: pool}
	d := &zsetDesign{pool: pool}
	for range b.cfg.zsetInstances {
		rdb := b.redis.client(1)
		s.wg.Go(func() {
			defer rdb.Close()
			s.scan(ctx, d, rdb, int64(b.cfg.zsetBatch), b.cfg.zsetPoll)
		})
	}
	return s, nil
}

// scan is one instance's loop.
func (s *zsetScanners) scan(ctx context.Context, d *zsetDesign, rdb *redis.Client, limit int64, poll time.Duration) {
	sleep := func() {
		select {
		case <-ctx.Done():
		case <-time.After(poll):
		}
	}
	for ctx.Err() == nil {
		now := time.Now().UnixMilli()
		ids, err := rdb.ZRangeByScore(ctx, zsetKey, &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(now, 10), Offset: 0, Count: limit}).Result()
		if err != nil {
			if ctx.Err() == nil {
				s.fail(fmt.Errorf("zrangebyscore: %w", err))
			}
			sleep()
			continue
		}
		s.counts.scans.Add(1)
		if len(ids) == 0 {
			s.counts.emptyScans.Add(1)
			sleep()
			continue
		}
		for _, id := range ids {
			if ctx.Err() != nil {
				return
			}
			n, err := rdb.ZRem(ctx, zsetKey, id).Result()
			if err != nil {
				if ctx.Err() == nil {
					s.counts.errors.Add(1)
					s.fail(fmt.Errorf("zrem %s: %w", id, err))
				}
				continue
			}
			if n != 1 {
				s.counts.lostRace.Add(1) // another instance owns it
				continue
			}
			s.counts.grabbed.Add(1)
			cancelled, err := d.cancel(ctx, id)
			switch {
			case err != nil:
				s.counts.errors.Add(1)
				if ctx.Err() == nil {
					s.fail(err)
				}
				// Put it back, due now, for the next scan (of any instance).
				back := context.WithoutCancel(ctx)
				if rdb.ZAdd(back, zsetKey, redis.Z{Score: float64(time.Now().UnixMilli()), Member: id}).Err() == nil {
					s.counts.readded.Add(1)
				}
			case cancelled:
				s.counts.cancelled.Add(1)
			default:
				s.counts.noop.Add(1)
			}
		}
	}
}

func (s *zsetScanners) fail(err error) {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if s.first == nil {
		s.first = err
		slog.Warn("zset scanner", "err", err)
	}
}

// stop stops the instances and closes their pool.
func (s *zsetScanners) stop() {
	s.cancel()
	s.wg.Wait()
	s.pool.Close()
}

// zsetCheck checks the baseline's invariants on database name and records
// the outcome like checkDatabase: per SKU available + reserved + sold =
// initial, reserved = the items of PENDING and PAYING orders, sold = the
// items of PAID ones; every cancelled order has exactly its items in the
// release log, no other order has any; no order is both paid and cancelled;
// no PENDING order is more than slack past expire_at.
func (b *bench) zsetCheck(ctx context.Context, name, what string, slack time.Duration) (string, error) {
	conn, err := b.srv.connect(ctx, name)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	start := time.Now()
	checks := []struct {
		name, sql string
		args      []any
	}{
		{"stock conserved", `
			SELECT s.sku || ': available ' || s.available || ' + reserved ' || s.reserved || ' + sold ' || s.sold
			       || ' <> ' || $1::bigint || ' or reserved <> ' || coalesce(o.open, 0) || ' or sold <> ' || coalesce(o.sold, 0)
			FROM zset.stock AS s
			LEFT JOIN (
			    SELECT i.sku,
			           sum(i.qty) FILTER (WHERE o.status IN ('PENDING', 'PAYING')) AS open,
			           sum(i.qty) FILTER (WHERE o.status = 'PAID') AS sold
			    FROM zset.order_items AS i JOIN zset.orders AS o USING (order_id)
			    GROUP BY i.sku) AS o USING (sku)
			WHERE s.available + s.reserved + s.sold <> $1::bigint
			   OR s.reserved <> coalesce(o.open, 0)
			   OR s.sold <> coalesce(o.sold, 0)
			LIMIT 5`, []any{int64(initialStock)}},
		// Two anti-joins (hash-joinable) rather than one FULL JOIN: a join
		// on coalesce(...) after a FULL JOIN is a nested loop, quadratic.
		{"every cancelled order's items released", `
			SELECT i.order_id || ' ' || i.sku || ': item qty ' || i.qty || ', released ' || coalesce(r.qty::text, 'nothing')
			FROM zset.order_items AS i
			JOIN zset.orders AS o USING (order_id)
			LEFT JOIN zset.releases AS r USING (order_id, sku)
			WHERE o.status = 'CANCELLED'
			  AND r.qty IS DISTINCT FROM i.qty
			LIMIT 5`, nil},
		{"releases only of cancelled orders' items", `
			SELECT r.order_id || ' ' || r.sku || ': released ' || r.qty || ', status ' || coalesce(o.status, 'no order')
			       || ', item qty ' || coalesce(i.qty::text, 'no item')
			FROM zset.releases AS r
			LEFT JOIN zset.orders AS o USING (order_id)
			LEFT JOIN zset.order_items AS i USING (order_id, sku)
			WHERE o.status IS DISTINCT FROM 'CANCELLED'
			   OR i.qty IS DISTINCT FROM r.qty
			LIMIT 5`, nil},
		{"never paid and cancelled", `
			SELECT order_id || ': status ' || status || ', paid_at ' || coalesce(paid_at::text, '-') || ', cancelled_at ' || coalesce(cancelled_at::text, '-')
			FROM zset.orders
			WHERE (paid_at IS NOT NULL AND cancelled_at IS NOT NULL)
			   OR (status = 'PAID') <> (paid_at IS NOT NULL)
			   OR (status = 'CANCELLED') <> (cancelled_at IS NOT NULL)
			LIMIT 5`, nil},
		{"no PENDING order overdue", `
			SELECT order_id || ': PENDING ' || (clock_timestamp() - expire_at) || ' past expire_at'
			FROM zset.orders
			WHERE status = 'PENDING' AND expire_at < clock_timestamp() - $1::interval
			LIMIT 5`, []any{slack}},
	}
	var bad []string
	for _, c := range checks {
		rows, err := conn.Query(ctx, c.sql, c.args...)
		if err != nil {
			return "", fmt.Errorf("zset invariant %q: %w", c.name, err)
		}
		details, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return "", fmt.Errorf("zset invariant %q: %w", c.name, err)
		}
		if len(details) > 0 {
			bad = append(bad, c.name+": "+strings.Join(details, "; "))
		}
	}
	inv := "ok"
	if len(bad) > 0 {
		inv = "VIOLATED: " + strings.Join(bad, " | ")
	}
	b.out.invariants(what, inv, time.Since(start))
	return inv, nil
}

// loadZset reloads the sorted set from database name: every PENDING or
// PAYING order at its expiry (what the creates ZADDed and no scanner
// removed yet), after a FLUSHDB.
func (b *bench) loadZset(ctx context.Context, name string) (int, error) {
	rdb := b.redis.client(2)
	defer rdb.Close()
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return 0, fmt.Errorf("flushdb: %w", err)
	}
	conn, err := b.srv.connect(ctx, name)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT order_id, (extract(epoch FROM expire_at) * 1000)::bigint
		FROM zset.orders WHERE status IN ('PENDING', 'PAID', 'PAYING')`)
	if err != nil {
		return 0, fmt.Errorf("read zset orders: %w", err)
	}
	var members []redis.Z
	var id string
	var ms int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &ms}, func() error {
		members = append(members, redis.Z{Score: float64(ms), Member: id})
		return nil
	}); err != nil {
		return 0, fmt.Errorf("read zset orders: %w", err)
	}
	for lo := 0; lo < len(members); lo += 1000 {
		if err := rdb.ZAdd(ctx, zsetKey, members[lo:min(lo+1000, len(members))]...).Err(); err != nil {
			return 0, fmt.Errorf("zadd: %w", err)
		}
	}
	return len(members), nil
}

// zsetPending counts the orders still PENDING.
func zsetPending(ctx context.Context, q querier) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, `SELECT count(*) FROM zset.orders WHERE status = 'PENDING'`).Scan(&n)
	return n, err
}
