package reconcile

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
)

// ChinaStandardTime is the zone of a WeChat Pay bill's times (UTC+8, no
// daylight saving since 1991; fixed, so no tz database is needed).
var ChinaStandardTime = time.FixedZone("CST", 8*3600)

// WeChat Pay trade bill columns read (by name: the bill's columns have
// changed over the years, and unknown ones are ignored).
const (
	wxTime          = "交易时间"
	wxPaymentID     = "微信订单号"
	wxOrderID       = "商户订单号"
	wxState         = "交易状态"
	wxCurrency      = "货币种类"
	wxSettleAmount  = "应结订单金额"
	wxTotalOld      = "总金额" // bills before 订单金额 existed
	wxOrderAmount   = "订单金额"
	wxRefundID      = "微信退款单号"
	wxMerchantRefID = "商户退款单号"
	wxRefundAmount  = "退款金额"
	wxSummary       = "总交易单数"
)

// Trade states (交易状态) of a bill row.
const (
	wxSuccess = "SUCCESS"
	wxRefund  = "REFUND"
	wxRevoked = "REVOKED"
)

const wxTimeLayout = "2006-01-02 15:04:05"

// parseWeChat reads a WeChat Pay trade bill (bill_type ALL). Each data row
// becomes a transaction:
//
//   - SUCCESS: paid; payment_id 微信订单号, order_id 商户订单号, amount
//     订单金额 (the order's amount; 应结订单金额, or 总金额 in older bills,
//     when the bill has no 订单金额 column), currency 货币种类, at 交易时间;
//   - REFUND: refunded, amount 退款金额, refund id 微信退款单号 (商户退款单号
//     when it is empty);
//   - REVOKED: skipped (the payment was reversed; no money moved).
//
// 交易时间 is China Standard Time. The bill must end with its summary lines
// (总交易单数, ... and their values), and 总交易单数 must equal the number of
// data rows: a cut-off download is refused.
func parseWeChat(data []byte) (*File, error) {
	cr := newReader(data)
	cr.LazyQuotes = true // the bill is not RFC 4180: product names may hold quotes
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, lineErr(1, "", "the file is empty: the first line must be the bill's header (交易时间,公众账号ID,商户号,...)")
	}
	if err != nil {
		return nil, readErr(err)
	}
	col := map[string]int{}
	for i, name := range header {
		if err := checkText(1, "header", name); err != nil {
			return nil, err
		}
		name = strings.TrimSpace(name)
		if _, dup := col[name]; dup && name != "" {
			return nil, lineErr(1, "", "the header names column %s twice", quote(name))
		}
		col[name] = i
	}
	if len(header) == 0 || strings.TrimSpace(header[0]) != wxTime {
		return nil, lineErr(1, "", "not a WeChat Pay trade bill: the header must start with %s, got %s", wxTime, quote(strings.Join(header, ",")))
	}
	amountCol := ""
	for _, c := range []string{wxOrderAmount, wxSettleAmount, wxTotalOld} {
		if _, ok := col[c]; ok {
			amountCol = c
			break
		}
	}
	for _, c := range []string{wxPaymentID, wxOrderID, wxState, wxCurrency, wxRefundID, wxMerchantRefID, wxRefundAmount} {
		if _, ok := col[c]; !ok {
			return nil, lineErr(1, "", "the header has no column %s: is this the ALL trade bill (交易账单, bill_type ALL)?", c)
		}
	}
	if amountCol == "" {
		return nil, lineErr(1, "", "the header has no amount column (%s, %s or %s)", wxOrderAmount, wxSettleAmount, wxTotalOld)
	}

	f := &File{Format: FormatWeChat, refundAmount: wxRefundAmount, columns: map[string]string{
		"payment_id": wxPaymentID, "order_id": wxOrderID, "amount": amountCol,
		"currency": wxCurrency, "status": wxState, "at": wxTime,
	}}
	rows := 0
	var first, last time.Time
	summary := false
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, readErr(err)
		}
		line, _ := cr.FieldPos(0)
		if summary {
			return nil, lineErr(line, "", "data after the summary lines")
		}
		if strings.TrimSpace(rec[0]) == wxSummary {
			if err := wxCheckSummary(cr, line, rec, rows); err != nil {
				return nil, err
			}
			summary = true
			continue
		}
		if len(rec) != len(header) {
			return nil, lineErr(line, "", "has %d fields, the header %d", len(rec), len(header))
		}
		rows++
		if rows > MaxRows {
			return nil, lineErr(line, "", "more than %d transactions: split the bill", MaxRows)
		}
		vals := make([]string, len(rec))
		for i, v := range rec {
			name := header[i]
			if err := checkText(line, name, v); err != nil {
				return nil, err
			}
			v, ok := strings.CutPrefix(v, "`")
			if !ok {
				return nil, lineErr(line, name, "a bill field starts with a backquote (`), got %s", quote(rec[i]))
			}
			vals[i] = v
		}
		get := func(name string) string { return vals[col[name]] }
		at, err := time.ParseInLocation(wxTimeLayout, get(wxTime), ChinaStandardTime)
		if err != nil {
			return nil, lineErr(line, wxTime, "must be a time like 2026-12-01 10:00:00 (China Standard Time), got %s", quote(get(wxTime)))
		}
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
		t := Transaction{Line: line, PaymentID: get(wxPaymentID), OrderID: get(wxOrderID), At: at}
		state := get(wxState)
		switch state {
		case wxSuccess:
			t.Status = StatusPaid
			if t.Amount, err = parseAmount(line, amountCol, get(amountCol)); err != nil {
				return nil, err
			}
		case wxRefund:
			t.Status = StatusRefunded
			if t.Amount, err = parseAmount(line, wxRefundAmount, get(wxRefundAmount)); err != nil {
				return nil, err
			}
			t.RefundID = get(wxRefundID)
			if t.RefundID == "" || t.RefundID == "0" {
				t.RefundID = get(wxMerchantRefID)
			}
			if t.RefundID == "" || t.RefundID == "0" {
				return nil, lineErr(line, wxRefundID, "a REFUND row needs its refund id (%s or %s)", wxRefundID, wxMerchantRefID)
			}
		case wxRevoked:
			f.Skipped++
			continue
		default:
			return nil, lineErr(line, wxState, "must be SUCCESS, REFUND or REVOKED, got %s", quote(state))
		}
		if err := checkID(line, wxPaymentID, t.PaymentID, gateway.MaxPaymentIDLength); err != nil {
			return nil, err
		}
		if err := checkID(line, wxOrderID, t.OrderID, maxOrderIDLength); err != nil {
			return nil, err
		}
		if t.Currency, err = parseCurrency(line, wxCurrency, get(wxCurrency)); err != nil {
			return nil, err
		}
		f.Transactions = append(f.Transactions, t)
	}
	if !summary {
		return nil, lineErr(max(1, lastLine(data)), "", "the bill has no summary lines (%s,...) at its end: the file is cut off", wxSummary)
	}
	if err := checkDuplicates(f.Transactions, wxPaymentID); err != nil {
		return nil, err
	}
	if !first.IsZero() {
		// A bill covers whole days of China Standard Time.
		y, m, d := first.Date()
		f.From = time.Date(y, m, d, 0, 0, 0, 0, ChinaStandardTime)
		y, m, d = last.Date()
		f.To = time.Date(y, m, d+1, 0, 0, 0, 0, ChinaStandardTime)
	}
	return f, nil
}

// wxCheckSummary reads the values line after the summary header and checks
// that 总交易单数 counts the data rows.
func wxCheckSummary(cr interface {
	Read() ([]string, error)
	FieldPos(int) (int, int)
}, line int, header []string, rows int) error {
	vals, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return lineErr(line+1, wxSummary, "the summary header has no values line after it: the file is cut off")
	}
	if err != nil {
		return readErr(err)
	}
	vline, _ := cr.FieldPos(0)
	if len(vals) != len(header) {
		return lineErr(vline, "", "the summary has %d values for %d columns", len(vals), len(header))
	}
	for i, v := range vals {
		if err := checkText(vline, header[i], v); err != nil {
			return err
		}
	}
	// Backquoted like every bill field, then plain digits only: strconv.Atoi
	// alone would take "+5" or "-0".
	digits, ok := strings.CutPrefix(vals[0], "`")
	if !ok {
		return lineErr(vline, wxSummary, "a bill field starts with a backquote (`), got %s", quote(vals[0]))
	}
	n, err := strconv.Atoi(digits)
	if err != nil || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return lineErr(vline, wxSummary, "must be a count of plain digits, got %s", quote(vals[0]))
	}
	if n != rows {
		return lineErr(vline, wxSummary, "says %d transactions, the bill has %d rows", n, rows)
	}
	return nil
}

func lastLine(data []byte) int {
	return strings.Count(strings.TrimRight(string(data), "\r\n"), "\n") + 1
}

// String names the format for messages.
func (f *File) String() string {
	return fmt.Sprintf("%s file with %d transactions", f.Format, len(f.Transactions))
}
