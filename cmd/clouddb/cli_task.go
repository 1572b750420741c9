package main

import (
	"bytes"
	"net/url"

	"github.com/spf13/cobra"
)

func (c *CLI) tasksCommand() *cobra.Command {
	cmd := group("tasks", "List, read and wait for the asynchronous tasks of the account",
		c.tasksListCommand(), c.tasksGetCommand(), c.tasksWaitCommand())
	cmd.Aliases = []string{"task"}
	return cmd
}

func (c *CLI) tasksListCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List the account's tasks of the past ten days, most recently updated first",
		Example: "  clouddb tasks list\n  clouddb tasks list --field status",
		Args:    noArgs,
		RunE: action(func(cmd *cobra.Command, _ []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			raw, err := getRaw(cmd, api, "/tasks")
			if err != nil {
				return err
			}
			// clouddb answers a bare array; the OpenAPI of the reference describes
			// {"tasks": [...]}.
			var path []string
			if b := bytes.TrimSpace(raw); len(b) > 0 && b[0] == '{' {
				path = []string{"tasks"}
			}
			items, err := elements(raw, path...)
			if err != nil {
				return err
			}
			r, err := taskColumns.list(raw, items)
			if err != nil {
				return err
			}
			return c.print(r)
		}),
	}
}

func (c *CLI) tasksGetCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "get TASK_ID",
		Short:   "Read a task",
		Example: "  clouddb tasks get 5b1c…\n  clouddb tasks get 5b1c… --field response.resourceId",
		Args:    oneArg("task ID"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			raw, err := getRaw(cmd, api, "/tasks/"+url.PathEscape(args[0]))
			if err != nil {
				return err
			}
			r, err := taskColumns.one(raw)
			if err != nil {
				return err
			}
			return c.print(r)
		}),
	}
}

func (c *CLI) tasksWaitCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "wait TASK_ID",
		Short: "Wait until a task has been processed, and print it",
		Long: `Wait until a task has been processed, and print it. A task that ends in
processing-error prints its error and exits with status 1.`,
		Example: "  TASK=$(clouddb databases delete --subscription 12 34 --field taskId)\n  clouddb tasks wait $TASK",
		Args:    oneArg("task ID"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			r, err := c.follow(cmd, api, args[0], taskOnly)
			if err != nil {
				return err
			}
			return c.print(r)
		}),
	}
}
