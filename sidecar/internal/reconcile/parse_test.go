package reconcile_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/reconcile"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

func parseFile(t *testing.T, path, format string) *reconcile.File {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	file, err := reconcile.Parse(f, format)
	require.NoError(t, err)
	return file
}

func TestParseCSVSample(t *testing.T) {
	t.Parallel()
	f := parseFile(t, "testdata/transactions.csv", reconcile.FormatCSV)
	require.Len(t, f.Transactions, 5)
	first := f.Transactions[0]
	require.Equal(t, 2, first.Line, "the header is line 1 (after the BOM)")
	require.Equal(t, "P-1001", first.PaymentID)
	require.Equal(t, "C1001", first.OrderID)
	require.Equal(t, gateway.Amount("25.00"), first.Amount)
	require.Equal(t, gateway.Currency("EUR"), first.Currency)
	require.Equal(t, reconcile.StatusPaid, first.Status)
	require.True(t, first.At.Equal(time.Date(2026, 12, 1, 9, 12, 31, 0, time.UTC)))
	require.True(t, f.Transactions[1].At.Equal(time.Date(2026, 12, 1, 9, 5, 2, 0, time.UTC)), "the zone is kept")
	require.Equal(t, "P,1003", f.Transactions[2].PaymentID, "RFC 4180 quoting")
	require.Equal(t, reconcile.StatusRefunded, f.Transactions[3].Status)
	require.Equal(t, "=cmd|' /C calc'!A0", f.Transactions[4].PaymentID, "a formula is data")
}

func TestParseWeChatSample(t *testing.T) {
	t.Parallel()
	f := parseFile(t, "testdata/wechat_all.csv", reconcile.FormatWeChat)
	require.Len(t, f.Transactions, 4, "the REVOKED row is skipped")
	require.Equal(t, 1, f.Skipped)
	cst := reconcile.ChinaStandardTime
	require.True(t, f.From.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, cst)), "the bill's day, from %s", f.From)
	require.True(t, f.To.Equal(time.Date(2026, 12, 2, 0, 0, 0, 0, cst)), "to %s", f.To)
	p := f.Transactions[0]
	require.Equal(t, reconcile.Transaction{Line: 2, PaymentID: "4200002026120100000001", OrderID: "WX1001",
		Amount: "25.00", Currency: "CNY", Status: reconcile.StatusPaid, At: p.At}, p)
	require.True(t, p.At.Equal(time.Date(2026, 12, 1, 1, 12, 31, 0, time.UTC)), "China Standard Time is UTC+8, got %s", p.At)
	r := f.Transactions[2]
	require.Equal(t, 5, r.Line)
	require.Equal(t, reconcile.StatusRefunded, r.Status)
	require.Equal(t, gateway.Amount("25.00"), r.Amount, "a refund's amount is 退款金额")
	require.Equal(t, "50300002026120100000001", r.RefundID)
	require.Equal(t, "WX1004", f.Transactions[3].OrderID)
}

func parseErr(t *testing.T, format, content string) *reconcile.LineError {
	t.Helper()
	_, err := reconcile.Parse(strings.NewReader(content), format)
	require.Error(t, err)
	var le *reconcile.LineError
	require.True(t, errors.As(err, &le), "want a LineError, got %v", err)
	return le
}

func TestParseCSVErrors(t *testing.T) {
	t.Parallel()
	const h = reconcile.CSVHeader + "\n"
	for _, c := range []struct {
		name, content string
		line          int
		field, msg    string
	}{
		{"empty", "", 1, "", "empty"},
		{"wrong header", "payment_id,order_id,amount,currency,status,at\n", 1, "", "header must be exactly"},
		{"header in another order", "order_id,payment_id,amount,currency,status,time\n", 1, "", "header must be exactly"},
		// 5 fields, one of them quoted with a comma inside: the same text
		// when joined, but not the header.
		{"two columns in one quoted header field", "\"payment_id,order_id\",amount,currency,status,time\nP1,A1,1.00,EUR,paid,2026-12-01T10:00:00Z\n", 1, "",
			`header must be exactly payment_id,order_id,amount,currency,status,time (6 fields), got 5 fields: "\"payment_id,order_id\",amount,currency,status,time"`},
		{"too few fields", h + "P1,A1,1.00,EUR,paid\n", 2, "", "has 5 fields"},
		{"bad quoting", h + "P1,\"A1,1.00,EUR,paid,2026-12-01T10:00:00Z\n", 2, "", "column"},
		{"empty payment id", h + ",A1,1.00,EUR,paid,2026-12-01T10:00:00Z\n", 2, "payment_id", "empty"},
		{"long order id", h + "P1," + strings.Repeat("x", 65) + ",1.00,EUR,paid,2026-12-01T10:00:00Z\n", 2, "order_id", "longer than 64"},
		{"negative amount", h + "P1,A1,-1.00,EUR,paid,2026-12-01T10:00:00Z\n", 2, "amount", "non-negative"},
		{"NaN", h + "P1,A1,NaN,EUR,paid,2026-12-01T10:00:00Z\n", 2, "amount", "plain decimal"},
		{"exponent", h + "P1,A1,1e3,EUR,paid,2026-12-01T10:00:00Z\n", 2, "amount", "plain decimal"},
		{"comma decimal", h + "P1,A1,\"1,00\",EUR,paid,2026-12-01T10:00:00Z\n", 2, "amount", "plain decimal"},
		{"currency", h + "P1,A1,1.00,eur,paid,2026-12-01T10:00:00Z\n", 2, "currency", "upper-case"},
		{"status", h + "P1,A1,1.00,EUR,PAID,2026-12-01T10:00:00Z\n", 2, "status", "paid or refunded"},
		{"no zone", h + "P1,A1,1.00,EUR,paid,2026-12-01T10:00:00\n", 2, "time", "zone"},
		{"nanoseconds", h + "P1,A1,1.00,EUR,paid,2026-12-01T10:00:00.123456789Z\n", 2, "time", "microseconds"},
		// Go's parser takes offsets up to 24:00, PostgreSQL up to 15:59.
		{"zone offset +16:00", h + "P1,A1,1.00,EUR,paid,2026-12-04T03:25:10+16:00\n", 2, "time",
			`zone offset must be from -15:59 to +15:59 (what PostgreSQL accepts), got +16:00, in "2026-12-04T03:25:10+16:00"`},
		{"zone offset -16:00", h + "P1,A1,1.00,EUR,paid,2026-12-04T03:25:10-16:00\n", 2, "time", "got -16:00"},
		{"zone offset +23:59", h + "P1,A1,1.00,EUR,paid,2026-12-04T03:25:10+23:59\n", 2, "time", "got +23:59"},
		{"zone offset +15:60", h + "P1,A1,1.00,EUR,paid,2026-12-04T03:25:10+15:60\n", 2, "time", "RFC 3339"},
		{"control character", h + "P1,\"A\x1b[2J\",1.00,EUR,paid,2026-12-01T10:00:00Z\n", 2, "order_id", "control character"},
		{"newline in a quoted field", h + "\"P\n1\",A1,1.00,EUR,paid,2026-12-01T10:00:00Z\n", 2, "payment_id", "control character"},
		{"bidi override", h + "P1,A\u202e1,1.00,EUR,paid,2026-12-01T10:00:00Z\n", 2, "order_id", "format character U+202E"},
		{"not UTF-8", h + "P1,A\xff1,1.00,EUR,paid,2026-12-01T10:00:00Z\n", 2, "order_id", "UTF-8"},
		{"twice", h + "P1,A1,1.00,EUR,paid,2026-12-01T10:00:00Z\r\nP2,A2,1.00,EUR,paid,2026-12-01T10:00:00Z\r\nP1,A1,1.00,EUR,paid,2026-12-01T11:00:00Z\r\n", 4, "payment_id", "twice"},
		{"third line", h + "P1,A1,1.00,EUR,paid,2026-12-01T10:00:00Z\n\nP2,A2,x,EUR,paid,2026-12-01T10:00:00Z\n", 4, "amount", "plain decimal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			le := parseErr(t, reconcile.FormatCSV, c.content)
			require.Equal(t, c.line, le.Line, le.Error())
			require.Equal(t, c.field, le.Field, le.Error())
			require.Contains(t, le.Msg, c.msg)
		})
	}
}

func TestParseOversized(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	b.WriteString(reconcile.CSVHeader + "\n")
	for i := range reconcile.MaxRows + 1 {
		fmt.Fprintf(&b, "P%d,A1,1.00,EUR,paid,2026-12-01T10:00:00Z\n", i)
	}
	le := parseErr(t, reconcile.FormatCSV, b.String())
	require.Equal(t, reconcile.MaxRows+2, le.Line)
	require.Contains(t, le.Msg, "more than 100000 transactions")

	big := reconcile.CSVHeader + "\n" + strings.Repeat("x", reconcile.MaxFileBytes)
	_, err := reconcile.Parse(strings.NewReader(big), reconcile.FormatCSV)
	require.ErrorContains(t, err, "larger than 64 MiB")
}

func TestParseWeChatErrors(t *testing.T) {
	t.Parallel()
	sample, err := os.ReadFile("testdata/wechat_all.csv")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimRight(string(sample), "\r\n"), "\r\n")
	with := func(i int, f func(string) string) string {
		out := append([]string(nil), lines...)
		out[i] = f(out[i])
		return strings.Join(out, "\r\n") + "\r\n"
	}
	field := func(i, col int, v string) string {
		return with(i, func(l string) string {
			fs := strings.Split(l, ",")
			fs[col] = v
			return strings.Join(fs, ",")
		})
	}
	for _, c := range []struct {
		name, content string
		line          int
		field, msg    string
	}{
		{"csv header", reconcile.CSVHeader + "\n", 1, "", "not a WeChat Pay trade bill"},
		{"missing column", with(0, func(l string) string { return strings.Replace(l, "微信订单号", "订单号X", 1) }), 1, "", "no column 微信订单号"},
		{"no backquote", field(1, 6, "WX1001"), 2, "商户订单号", "backquote"},
		{"bad time", field(2, 0, "`2026/12/01 10:05:02"), 3, "交易时间", "China Standard Time"},
		{"bad amount", field(1, 24, "`25,00"), 2, "", "has 28 fields"},
		{"amount grammar", field(1, 24, "`25.0.0"), 2, "订单金额", "plain decimal"},
		{"state", field(1, 9, "`CLOSED"), 2, "交易状态", "SUCCESS, REFUND or REVOKED"},
		{"currency", field(1, 11, "`cny"), 2, "货币种类", "upper-case"},
		{"control character", field(1, 20, "`T恤\x07"), 2, "商品名称", "control character"},
		{"cut off", strings.Join(lines[:4], "\r\n") + "\r\n", 4, "", "no summary lines"},
		{"count differs", field(7, 0, "`6"), 8, "总交易单数", "says 6 transactions, the bill has 5"},
		// Counts are plain digits: no sign, space or other notation.
		{"count with a sign", field(7, 0, "`+5"), 8, "总交易单数", "must be a count of plain digits"},
		{"count negative zero", field(7, 0, "`-0"), 8, "总交易单数", "must be a count of plain digits"},
		{"count with a space", field(7, 0, "` 5"), 8, "总交易单数", "must be a count of plain digits"},
		{"count empty", field(7, 0, "`"), 8, "总交易单数", "must be a count of plain digits"},
		{"count without its backquote", field(7, 0, "5"), 8, "总交易单数", "starts with a backquote"},
		{"data after summary", strings.Join(append(append([]string(nil), lines...), lines[1]), "\r\n"), 9, "", "after the summary"},
		// The same SUCCESS row twice (and a summary that counts it): the
		// bill's own column is named, not the CSV format's payment_id.
		{"twice", func() string {
			out := append(append(append([]string(nil), lines[:2]...), lines[1]), lines[2:]...)
			fs := strings.Split(out[8], ",")
			fs[0] = "`6"
			out[8] = strings.Join(fs, ",")
			return strings.Join(out, "\r\n") + "\r\n"
		}(), 3, "微信订单号", "twice in the file (first on line 2)"},
		{"format character", field(1, 20, "`T\u200b恤"), 2, "商品名称", "format character U+200B"},
	} {
		t.Run(c.name, func(t *testing.T) {
			le := parseErr(t, reconcile.FormatWeChat, c.content)
			require.Equal(t, c.line, le.Line, le.Error())
			require.Equal(t, c.field, le.Field, le.Error())
			require.Contains(t, le.Msg, c.msg)
		})
	}
	// A REFUND row without either refund id (商户退款单号 is the fallback).
	le := parseErr(t, reconcile.FormatWeChat, with(4, func(l string) string {
		fs := strings.Split(l, ",")
		fs[14], fs[15] = "`0", "`"
		return strings.Join(fs, ",")
	}))
	require.Equal(t, 5, le.Line)
	require.Equal(t, "微信退款单号", le.Field)
}

func TestParseUnknownFormat(t *testing.T) {
	t.Parallel()
	_, err := reconcile.Parse(strings.NewReader(""), "alipay")
	require.ErrorContains(t, err, "format must be csv or wechat")
}

// The database names a bad row's field by reconcile_payments' JSON name;
// Explain names the file's column instead: WeChat's 交易时间 for at, and
// for amount the column the row's amount came from (退款金额 for a refund).
func TestExplainNamesTheFilesColumn(t *testing.T) {
	t.Parallel()
	f := parseFile(t, "testdata/wechat_all.csv", reconcile.FormatWeChat)
	dbErr := func(msg string) error {
		return fmt.Errorf("reconcile: %w", &pgconn.PgError{Code: sqlstate.InvalidTransaction, Message: msg})
	}
	for _, tc := range []struct{ msg, want string }{
		{"line 2: at 2026-12-01 01:12:31+00 is outside the period", "line 2, field 交易时间: at 2026-12-01 01:12:31+00 is outside the period (OT171)"},
		{"line 2: amount must be a decimal", "line 2, field 订单金额: amount must be a decimal (OT171)"},
		{"line 5: amount must be a decimal", "line 5, field 退款金额: amount must be a decimal (OT171)"},
		{"line 2: currency must be three upper-case letters (ISO 4217)", "line 2, field 货币种类: currency must be three upper-case letters (ISO 4217) (OT171)"},
	} {
		err := f.Explain(dbErr(tc.msg))
		require.EqualError(t, err, tc.want)
		var le *reconcile.LineError
		require.ErrorAs(t, err, &le)
	}
	// Anything else stays as it was: another code, a whole-line message,
	// a field the file does not name.
	for _, err := range []error{
		&pgconn.PgError{Code: "OT174", Message: "line 2: at is late"},
		dbErr("line 2: line must be a positive integer"),
		dbErr("payment P1 is listed twice"),
		errors.New("line 2: at nothing"),
	} {
		require.Equal(t, err, f.Explain(err))
	}
	csv, err := reconcile.Parse(strings.NewReader(reconcile.CSVHeader+"\nP1,O1,1,EUR,paid,2026-12-01T00:00:00Z\n"), reconcile.FormatCSV)
	require.NoError(t, err)
	require.EqualError(t, csv.Explain(dbErr("line 2: at x")), "line 2, field time: at x (OT171)")
}
