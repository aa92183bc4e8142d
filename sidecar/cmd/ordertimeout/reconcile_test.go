package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/reconcile"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

const wechatSample = "../../internal/reconcile/testdata/wechat_all.csv"

// snapshot is what a reconciliation may change, to prove a run changed
// nothing.
func snapshot(t *testing.T, db *pgxpool.Pool) string {
	t.Helper()
	var s string
	require.NoError(t, db.QueryRow(context.Background(), `
SELECT concat_ws('|',
  (SELECT string_agg(order_id || ':' || status, ',' ORDER BY order_id) FROM ordertimeout.orders),
  (SELECT count(*) FROM ordertimeout.events),
  (SELECT string_agg(payment_id || ':' || status, ',' ORDER BY payment_id) FROM ordertimeout.payments),
  (SELECT string_agg(payment_id || ':' || kind || ':' || cause, ',' ORDER BY payment_id) FROM ordertimeout.conflicts))`).Scan(&s))
	return s
}

func runReconcile(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := reconcileCmd(t.Context(), args, &out)
	return out.String(), err
}

// The WeChat Pay bill end to end: a dry run changes nothing; the real run
// records the late payment as a conflict with cause reconcile, does not let
// WX1001's payment pay its order (the bill lists it paid and then
// refunded: no money stayed) and reports what needs a person; the same file
// again changes nothing and reports the conflict as known.
func TestReconcileWeChatBill(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	sidecartest.Setup(t, db)
	sidecartest.CreateOrder(t, db, "WX1001", time.Hour, `{"amount": 25.00, "currency": "CNY"}`)
	sidecartest.CreateOrder(t, db, "WX1002", time.Hour, `{"amount": 99.90, "currency": "CNY"}`)
	sidecartest.Exec(t, db, "SELECT ordertimeout.cancel_order('WX1002')")
	// Placed before the bill's day: a payment the gateway dates before its
	// order was created is another order's (other_order).
	sidecartest.Exec(t, db, "UPDATE ordertimeout.orders SET created_at = '2026-11-30T00:00:00Z' WHERE order_id LIKE 'WX%'")
	args := []string{"--database-url", url, "--file", wechatSample, "--format", "wechat"}

	before := snapshot(t, db)
	out, err := runReconcile(t, append(args, "--dry-run")...)
	require.ErrorIs(t, err, errNeedsPerson)
	require.Contains(t, out, "dry run, rolled back")
	require.Contains(t, out, "late_payment         1")
	require.Equal(t, before, snapshot(t, db), "a dry run changes nothing")

	out, err = runReconcile(t, args...)
	require.ErrorIs(t, err, errNeedsPerson)
	t.Log(out)
	for _, want := range []string{
		"4 transactions reconciled",
		"late_payment         1",
		"refund_unknown       2",
		"unknown_order        1",
		"skipped (revoked)    1",
		"4 rows need a person",
		"line 2      refund_unknown     order WX1001 payment 4200002026120100000001: paid and refunded at the gateway; here the payment is unknown: not confirmed",
		"line 3      late_payment       order WX1002 payment 4200002026120100000002",
		"line 5      refund_unknown     order WX1001 payment 4200002026120100000001 refund 50300002026120100000001",
		"line 6      unknown_order      order WX1004",
	} {
		require.Contains(t, out, want)
	}
	require.Equal(t, "PENDING", sidecartest.Status(t, db, "WX1001"), "not paid by a payment the bill lists as refunded")
	require.EqualValues(t, 0, sidecartest.Int(t, db, `SELECT count(*) FROM ordertimeout.payments WHERE order_id = 'WX1001'`))
	require.EqualValues(t, 1, sidecartest.Int(t, db, `SELECT count(*) FROM ordertimeout.conflicts
		WHERE order_id = 'WX1002' AND kind = 'late_payment' AND cause = 'reconcile' AND amount = 99.90 AND currency = 'CNY'`))

	after := snapshot(t, db)
	out, err = runReconcile(t, args...)
	require.ErrorIs(t, err, errNeedsPerson, "the refunded payment and the unknown order still need a person")
	for _, want := range []string{"known_conflict       1", "refund_unknown       2", "unknown_order        1", "3 rows need a person"} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "late_payment")
	require.Equal(t, after, snapshot(t, db), "the second run changes nothing")
}

// The documented CSV: a payment confirmed here in the period that the file
// does not list is reported; a clean file exits 0; a bad file names its line
// and field and applies nothing; the source's watermark advances.
func TestReconcileCSV(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	sidecartest.Setup(t, db)
	for _, id := range []string{"C1", "C2", "C3"} {
		sidecartest.CreateOrder(t, db, id, time.Hour, `{"amount": 10, "currency": "EUR"}`)
	}
	sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment('C1', 'P-C1', 10, 'EUR')")
	sidecartest.Exec(t, db, "SELECT ordertimeout.confirm_payment('C3', 'P-C3', 10, 'EUR')")
	now := time.Now().UTC()
	from, to := now.Add(-time.Hour).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339)
	at := now.Format(time.RFC3339)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	good := write("good.csv", "\uFEFF"+reconcile.CSVHeader+"\r\n"+
		"P-C1,C1,10.00,EUR,paid,"+at+"\r\n"+
		"P-C2,C2,10,EUR,paid,"+at+"\r\n")
	args := func(file string, more ...string) []string {
		return append([]string{"--database-url", url, "--file", file, "--format", "csv", "--from", from, "--to", to}, more...)
	}

	// A source's watermark moves only to a moment that has passed: the
	// period ends at the database's time, after the confirmations.
	var dbNow time.Time
	require.NoError(t, db.QueryRow(context.Background(), "SELECT clock_timestamp()").Scan(&dbNow))
	srcTo := dbNow.UTC().Format(time.RFC3339Nano)
	_, err := runReconcile(t, args(good, "--source", "csv:test")...)
	require.ErrorContains(t, err, sqlstate.PeriodInFuture, "--to an hour ahead with --source")
	out, err := runReconcile(t, "--database-url", url, "--file", good, "--format", "csv", "--from", from, "--to", srcTo, "--source", "csv:test")
	require.ErrorIs(t, err, errNeedsPerson)
	require.Contains(t, out, "ok                   1")
	require.Contains(t, out, "confirmed            1")
	require.Contains(t, out, "line -      missing_at_gateway order C3 payment P-C3")
	require.Equal(t, "PAID", sidecartest.Status(t, db, "C2"))
	require.EqualValues(t, 1, sidecartest.Int(t, db, `SELECT count(*) FROM ordertimeout.reconcile_watermarks
		WHERE source = 'csv:test' AND watermark = $1::timestamptz`, srcTo))
	// The next period of the source must start at or before its watermark.
	_, err = runReconcile(t, "--database-url", url, "--file", good, "--format", "csv", "--no-missing", "--source", "csv:test",
		"--from", dbNow.Add(time.Microsecond).UTC().Format(time.RFC3339Nano), "--to", time.Now().UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano))
	require.ErrorContains(t, err, sqlstate.PeriodAfterWatermark, "a gap after the watermark")

	out, err = runReconcile(t, args(good, "--no-missing")...)
	require.NoError(t, err, "nothing needs a person: %s", out)
	require.Contains(t, out, "nothing needs a person")

	before := snapshot(t, db)
	bad := write("bad.csv", reconcile.CSVHeader+"\n"+
		"P-C3,C3,10.00,EUR,paid,"+at+"\n"+
		"P-X,C2,1O.00,EUR,paid,"+at+"\n")
	_, err = runReconcile(t, args(bad)...)
	require.ErrorContains(t, err, "line 3, field amount")
	wrong := write("wrong.csv", "payment,order,amount,currency,status,time\n")
	_, err = runReconcile(t, args(wrong)...)
	require.ErrorContains(t, err, "line 1: the header must be exactly")
	_, err = runReconcile(t, "--database-url", url, "--file", write("empty.csv", reconcile.CSVHeader+"\n"), "--format", "csv")
	require.ErrorContains(t, err, "give the period with --from and --to")
	_, err = runReconcile(t, args(good, "--format", "alipay")...)
	require.ErrorContains(t, err, "format must be csv or wechat")
	// The period is held to the file's time grammar: time.Parse alone reads
	// a zone minute of 60 as the next hour, takes a comma before the
	// fraction and an offset PostgreSQL refuses.
	for flag, value := range map[string]string{
		"--from": now.Add(-time.Hour).Format("2006-01-02T15:04:05") + "+00:60",
		"--to":   now.Add(time.Hour).Format("2006-01-02T15:04:05") + ",5Z",
	} {
		more := []string{"--database-url", url, "--file", good, "--format", "csv", "--from", from, "--to", to}
		more[slices.Index(more, flag)+1] = value
		_, err = runReconcile(t, more...)
		require.ErrorContains(t, err, flag+" must be an RFC 3339 time with a zone")
	}
	_, err = runReconcile(t, "--database-url", url, "--file", good, "--format", "csv", "--from", from,
		"--to", now.Add(time.Hour).Format("2006-01-02T15:04:05")+"+16:00")
	require.ErrorContains(t, err, "--to ")
	_, err = runReconcile(t, args(good, "--source", "Bad Source")...)
	require.ErrorContains(t, err, sqlstate.InvalidSource)
	require.Equal(t, before, snapshot(t, db), "refused files change nothing")
}

// A time whose zone offset PostgreSQL refuses (16:00 or more east or west:
// Go's parser takes up to 24:00) is refused by the parser, naming its line
// and field, with nothing applied; it once reached the database, which
// raised a raw 22009. The largest offsets PostgreSQL takes, ±15:59, are
// applied.
func TestReconcileZoneOffsets(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	sidecartest.Setup(t, db)
	for _, id := range []string{"Z1", "Z2"} {
		sidecartest.CreateOrder(t, db, id, time.Hour, `{"amount": 10, "currency": "EUR"}`)
	}
	now := time.Now().UTC().Truncate(time.Second)
	from, to := now.Add(-time.Hour).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339)
	in := func(offset time.Duration) string {
		return now.In(time.FixedZone("", int(offset.Seconds()))).Format(time.RFC3339)
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	args := func(file string) []string {
		return []string{"--database-url", url, "--file", file, "--format", "csv", "--from", from, "--to", to, "--no-missing"}
	}

	before := snapshot(t, db)
	for _, offset := range []time.Duration{16 * time.Hour, -16 * time.Hour, 23*time.Hour + 59*time.Minute} {
		at := in(offset)
		bad := write("bad.csv", reconcile.CSVHeader+"\n"+
			"P-Z1,Z1,10.00,EUR,paid,"+in(0)+"\n"+
			"P-Z2,Z2,10.00,EUR,paid,"+at+"\n")
		_, err := runReconcile(t, args(bad)...)
		require.ErrorContains(t, err, "line 3, field time: zone offset must be from -15:59 to +15:59", at)
		require.ErrorContains(t, err, at)
		require.NotContains(t, err.Error(), "22009")
	}
	require.Equal(t, before, snapshot(t, db), "refused files change nothing")

	const limit = 15*time.Hour + 59*time.Minute
	good := write("good.csv", reconcile.CSVHeader+"\n"+
		"P-Z1,Z1,10.00,EUR,paid,"+in(limit)+"\n"+
		"P-Z2,Z2,10.00,EUR,paid,"+in(-limit)+"\n")
	out, err := runReconcile(t, args(good)...)
	require.NoError(t, err, out)
	require.Contains(t, out, "confirmed            2")
	require.Equal(t, "PAID", sidecartest.Status(t, db, "Z1"))
	require.Equal(t, "PAID", sidecartest.Status(t, db, "Z2"))
}

// A transaction the database refuses is named by its file line (the "line"
// key), and nothing of the call is applied.
func TestReconcileDatabaseErrorNamesFileLine(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := pgtest.NewPool(t)
	sidecartest.Setup(t, db)
	sidecartest.CreateOrder(t, db, "D1", time.Hour, "")
	before := snapshot(t, db)
	now := time.Now()
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	_, err = reconcile.Apply(ctx, tx, []reconcile.Transaction{
		{Line: 41, PaymentID: "P-D1", OrderID: "D1", Amount: "1", Currency: "EUR", Status: "paid", At: now},
		{Line: 42, PaymentID: "P-D2", OrderID: "D1", Amount: "1", Currency: "eur", Status: "paid", At: now},
	}, now.Add(-time.Hour), now.Add(time.Hour), true, "")
	require.ErrorContains(t, err, "line 42: currency")
	require.ErrorContains(t, err, sqlstate.InvalidTransaction)
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, before, snapshot(t, db))
}

// The database's refusal of a row names the file's column, not the field
// of reconcile_payments' JSON: CSV's time, not at.
func TestReconcileDatabaseErrorNamesFileColumn(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	sidecartest.Setup(t, db)
	sidecartest.CreateOrder(t, db, "F1", time.Hour, "")
	before := snapshot(t, db)
	now := time.Now().UTC()
	file := filepath.Join(t.TempDir(), "late.csv")
	require.NoError(t, os.WriteFile(file, []byte(reconcile.CSVHeader+"\n"+
		"P-F1,F1,1,EUR,paid,"+now.Format(time.RFC3339)+"\n"+
		"P-F2,F1,1,EUR,paid,"+now.Add(-3*time.Hour).Format(time.RFC3339)+"\n"), 0o600))
	_, err := runReconcile(t, "--database-url", url, "--file", file, "--format", "csv",
		"--from", now.Add(-time.Hour).Format(time.RFC3339), "--to", now.Add(time.Hour).Format(time.RFC3339))
	require.ErrorContains(t, err, "(nothing applied): line 3, field time: at ")
	require.ErrorContains(t, err, "is outside the period")
	require.ErrorContains(t, err, "("+sqlstate.InvalidTransaction+")")
	require.Equal(t, before, snapshot(t, db))
}

// The binary exits 2 when rows need a person, 1 on a refused file or command
// line.
func TestReconcileExitStatus(t *testing.T) {
	t.Parallel()
	bin := build(t)
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	sidecartest.Setup(t, db)
	run := func(args ...string) (int, string) {
		cmd := exec.Command(bin, append([]string{"reconcile", "--database-url", url}, args...)...)
		out, _ := cmd.CombinedOutput()
		return cmd.ProcessState.ExitCode(), string(out)
	}
	code, out := run("--file", wechatSample, "--format", "wechat")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "unknown_order")
	code, out = run("--file", wechatSample, "--format", "csv")
	require.Equal(t, 1, code, out)
	require.True(t, strings.Contains(out, "line 1: the header must be exactly"), out)
	code, out = run("--help")
	require.Equal(t, 0, code, out)
	// A stray argument is an error like a bad flag: 1, nothing applied.
	code, out = run("--file", wechatSample, "--format", "wechat", "2026-12-02T00:00:00Z", "--dry-run")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, `(after --format and its value) is not a flag or a flag's value (a flag's name forgotten?); the flags after it were not read: --dry-run; nothing was done`)
}
