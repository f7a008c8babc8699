package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/rowqtype"
)

// Hold runs a function while holding a lock, renewing the lease in the
// background; the function's context ends if the lease is lost. Pass the
// fencing token to what the lock protects, so that it can refuse a holder
// that lost the lock without knowing.
func ExampleClient_Hold() {
	c := client.New(rowqURL(), nil)
	err := c.Hold(context.Background(), "nightly-report", client.DefaultOwner(),
		client.AcquireOptions{TTL: 30 * time.Second, Wait: 10 * time.Second},
		func(ctx context.Context, l *rowqtype.Lease) error {
			fmt.Println("holding with token", l.Token)
			return nil // do the work here, passing l.Token along, until ctx ends
		})
	if err != nil {
		log.Fatal(err)
	}
	// Output: holding with token 1
}

// Acquire, Renew and Release are the three calls under Hold, for callers
// that manage the lease themselves.
func ExampleClient_Acquire() {
	c := client.New(rowqURL(), nil)
	ctx := context.Background()
	l, err := c.Acquire(ctx, "db-migration", client.DefaultOwner(), client.AcquireOptions{TTL: time.Minute})
	var held *client.HeldError
	switch {
	case errors.As(err, &held):
		fmt.Println("someone else migrates:", held.Holders[0].Owner)
		return
	case err != nil:
		log.Fatal(err)
	}
	defer c.Release(ctx, l)
	fmt.Println("migrating with token", l.Token)
	// … work, renewing before a minute has passed:
	if _, err := c.Renew(ctx, l, time.Minute); client.IsConflict(err) {
		log.Fatal("lost the lock")
	}
	// Output: migrating with token 1
}
