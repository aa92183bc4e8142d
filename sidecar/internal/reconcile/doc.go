// Package reconcile reads the gateway's records of a period and hands them to
// ordertimeout.reconcile_payments, which judges each transaction against the
// database, all or nothing.
//
// Two file formats are read (Parse):
//
//   - "csv", the documented format: the header exactly
//     payment_id,order_id,amount,currency,status,time, then one
//     transaction per record (RFC 4180 quoting), status paid or refunded,
//     time RFC 3339 with a zone whose offset PostgreSQL accepts (at most
//     15:59 east or west of UTC);
//   - "wechat", WeChat Pay's trade bill (交易账单, bill_type ALL) as the
//     merchant platform or the download API gives it: a Chinese header
//     row, every field prefixed with a backquote, times in China Standard
//     Time without a zone, amounts in yuan, and two summary lines at the
//     end (总交易单数, ...).
//
// Files are hostile input. A file larger than MaxFileBytes or with more than
// MaxRows transactions, a wrong header, a malformed record, a field that is
// not UTF-8 or holds control characters, an amount, currency, status or
// time outside its grammar: each is an error naming the file's line and the
// field (a *LineError), and nothing is applied. A byte order mark and CRLF
// line ends are accepted. Characters such as = + - @ at the start of a
// field are data: nothing here evaluates them.
//
// Apply passes the parsed transactions to reconcile_payments with each
// transaction's file line in its "line" key, so the database's errors
// (OT171) and the report name file lines too.
package reconcile
