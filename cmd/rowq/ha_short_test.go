//go:build ha && !halong

package main_test

// long: `make test` runs the short HA runs (about 40 s each); `make ha`
// the five-minute ones (tag halong).
const long = false
