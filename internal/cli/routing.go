package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/rowqtype"
)

// routingCmd is `rowq routing`.
func routingCmd(args []string, stdout, stderr io.Writer) error {
	return dispatchSub("routing", routingSubs, args, stdout, stderr)
}

func routingTable(rs ...*rowqtype.Routing) func(w io.Writer) {
	return func(w io.Writer) {
		fmt.Fprintln(w, "CATEGORY\tQUEUE")
		for _, r := range rs {
			fmt.Fprintf(w, "%s\t%s\n", r.JobCategory, r.QueueName)
		}
	}
}

var routingSubs = []subcommand{
	{"ls", "", "list routings", simple(0, "no arguments", func(ctx context.Context, c *client.Client, _ []string) (any, func(io.Writer), error) {
		rs, err := c.Routings(ctx)
		return rs, routingTable(rs...), err
	})},
	{"get", "CATEGORY", "show a routing", simple(1, "CATEGORY", func(ctx context.Context, c *client.Client, pos []string) (any, func(io.Writer), error) {
		r, err := c.Routing(ctx, pos[0])
		return r, routingTable(r), err
	})},
	{"put", "CATEGORY QUEUE", "route a category to a queue", simple(2, "CATEGORY QUEUE", func(ctx context.Context, c *client.Client, pos []string) (any, func(io.Writer), error) {
		r, err := c.PutRouting(ctx, pos[0], pos[1])
		return r, routingTable(r), err
	})},
	{"rm", "CATEGORY", "delete a routing", simple(1, "CATEGORY", func(ctx context.Context, c *client.Client, pos []string) (any, func(io.Writer), error) {
		r, err := c.DeleteRouting(ctx, pos[0])
		return r, routingTable(r), err
	})},
}
