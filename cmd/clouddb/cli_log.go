package main

import (
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"clouddb/cloudapi/client"
)

var logColumns = columns[client.LogEntry]{
	head: []string{"ID", "TIME", "ORIGINATOR", "TYPE", "RESOURCE", "DESCRIPTION"},
	row: func(e *client.LogEntry) []string {
		resource := e.Resource
		if e.ResourceID != 0 {
			resource += " " + strconv.Itoa(e.ResourceID)
		}
		return []string{strconv.Itoa(e.ID), e.Time.Local().Format(time.DateTime), e.Originator, e.Type, resource, e.Description}
	},
}

func (c *CLI) logsCommand() *cobra.Command {
	var limit, offset, resource int
	cmd := &cobra.Command{
		Use:   "logs [--limit N] [--offset N]",
		Short: "List the account's system log, newest first",
		Example: `  clouddb logs --limit 20
  clouddb logs --resource-id 34 -o json`,
		Args: noArgs,
		RunE: action(func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > 1000 {
				return usagef("--limit %d: want 1 to 1000", limit)
			}
			if offset < 0 {
				return usagef("--offset %d: must not be negative", offset)
			}
			if resource < 0 {
				return usagef("--resource-id %d: want a resource id", resource)
			}
			q := url.Values{"limit": {strconv.Itoa(limit)}, "offset": {strconv.Itoa(offset)}}
			if resource != 0 {
				q.Set("resourceId", strconv.Itoa(resource))
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			raw, err := getRaw(cmd, api, "/logs?"+q.Encode())
			if err != nil {
				return err
			}
			items, err := elements(raw, "entries")
			if err != nil {
				return err
			}
			r, err := logColumns.list(raw, items)
			if err != nil {
				return err
			}
			return c.print(r)
		}),
	}
	cmd.Flags().IntVar(&limit, "limit", 100, "most entries listed (1 to 1000)")
	cmd.Flags().IntVar(&offset, "offset", 0, "newest entries skipped")
	cmd.Flags().IntVar(&resource, "resource-id", 0, "only the entries of this resource (a subscription's or database's id)")
	cmd.Aliases = []string{"log"}
	return cmd
}
