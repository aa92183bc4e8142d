// Command ordertimeout is the ordertimeout sidecar: it drives the in-database
// cancel sweep, works the River jobs that need the payment gateway, resolves
// late payments, and serves metrics and River's UI. It also migrates the
// database, prints its status, and runs a fake payment gateway.
//
//	ordertimeout [run] [flags]        run the sidecar (the default)
//	ordertimeout migrate up|down|version [flags]
//	ordertimeout status [flags]
//	ordertimeout fakegateway [flags]
//
// Run `ordertimeout <subcommand> --help` for each subcommand's flags.
package main
