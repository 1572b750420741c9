package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"clouddb/cloudapi/client"
)

// kind is a resource of the API at <path>/<id>, listed at path under listKey: cloud
// accounts and the ACL's rules, roles and users. The commands common to them (list, get,
// delete, and waiting for one) are built from it.
type kind[T any] struct {
	// name is what messages call it, e.g. "cloud account"; command is the clouddb command
	// that manages it, e.g. "acl users".
	name, command string
	path          string
	listKey       string
	// byList: the API has no GET by id, so one is read from the list (as the official
	// client does for ACL rules and roles).
	byList bool
	cols   columns[T]
	// example is an id for the help's examples.
	example string
}

func (k kind[T]) itemPath(id int) string { return fmt.Sprintf("%s/%d", k.path, id) }

// get reads one as received; IsNotFound(err) when it is gone.
func (k kind[T]) get(api *client.Client, id int) getter {
	if !k.byList {
		return rawAt(api, k.itemPath(id))
	}
	return func(ctx context.Context) (json.RawMessage, error) {
		raw, err := rawAt(api, k.path)(ctx)
		if err != nil {
			return nil, err
		}
		items, err := elements(raw, k.listKey)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			var v struct {
				ID int `json:"id"`
			}
			if json.Unmarshal(item, &v) == nil && v.ID == id {
				return item, nil
			}
		}
		return nil, &client.Error{StatusCode: http.StatusNotFound, Type: "NOT_FOUND", Description: fmt.Sprintf("%s %d not found", k.name, id)}
	}
}

// settle waits until the one the task made or changed is active, and returns it.
func (k kind[T]) settle(c *CLI, api *client.Client, id func(done *client.Task) int) settleFunc {
	return func(ctx context.Context, p *progress, done *client.Task) (*result, error) {
		n := id(done)
		raw, err := c.settle(ctx, p, fmt.Sprintf("%s %d", k.name, n), "active", k.get(api, n))
		if err != nil {
			return nil, err
		}
		return k.cols.one(raw)
	}
}

// gone waits until the one deleted is gone, and returns the task.
func (k kind[T]) gone(c *CLI, api *client.Client, id int) settleFunc {
	return func(ctx context.Context, p *progress, done *client.Task) (*result, error) {
		if _, err := c.settle(ctx, p, fmt.Sprintf("%s %d", k.name, id), gone, k.get(api, id)); err != nil {
			return nil, err
		}
		return taskResult(done)
	}
}

func listCommand[T any](c *CLI, k kind[T]) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List the account's " + k.name + "s",
		Example: fmt.Sprintf("  clouddb %s list\n  clouddb %s list --field id", k.command, k.command),
		Args:    noArgs,
		RunE: action(func(cmd *cobra.Command, _ []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			raw, err := getRaw(cmd, api, k.path)
			if err != nil {
				return err
			}
			items, err := elements(raw, k.listKey)
			if err != nil {
				return err
			}
			r, err := k.cols.list(raw, items)
			if err != nil {
				return err
			}
			return c.print(r)
		}),
	}
}

func getCommand[T any](c *CLI, k kind[T]) *cobra.Command {
	return &cobra.Command{
		Use:     "get ID",
		Short:   "Read a " + k.name,
		Example: fmt.Sprintf("  clouddb %s get %s\n  clouddb %s get %s -o json", k.command, k.example, k.command, k.example),
		Args:    oneArg(k.name + " ID"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			id, err := idArg(k.name+" ID", args[0])
			if err != nil {
				return err
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			raw, err := k.get(api, id)(cmd.Context())
			if err != nil {
				return err
			}
			r, err := k.cols.one(raw)
			if err != nil {
				return err
			}
			return c.print(r)
		}),
	}
}

func deleteCommand[T any](c *CLI, k kind[T], send func(ctx context.Context, api *client.Client, id int) (*client.Task, error)) *cobra.Command {
	var wait bool
	cmd := &cobra.Command{
		Use:     "delete ID",
		Short:   "Delete a " + k.name,
		Example: fmt.Sprintf("  clouddb %s delete %s --wait", k.command, k.example),
		Args:    oneArg(k.name + " ID"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			id, err := idArg(k.name+" ID", args[0])
			if err != nil {
				return err
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			return c.submitDelete(cmd, api, wait, func(ctx context.Context) (*client.Task, error) {
				return send(ctx, api, id)
			}, k.gone(c, api, id))
		}),
	}
	waitFlag(cmd, &wait, "the "+k.name+" until it is gone, and print the task")
	return cmd
}

// createCommand completes cmd, which has the create's flags, into a create: send makes
// the request from them.
func createCommand[T any](c *CLI, k kind[T], cmd *cobra.Command, send func(ctx context.Context, api *client.Client) (*client.Task, error)) *cobra.Command {
	var wait bool
	cmd.Args = noArgs
	cmd.RunE = action(func(cmd *cobra.Command, _ []string) error {
		if err := required(cmd); err != nil {
			return err
		}
		api, err := c.api()
		if err != nil {
			return err
		}
		return c.submit(cmd, api, wait, func(ctx context.Context) (*client.Task, error) {
			return send(ctx, api)
		}, k.settle(c, api, (*client.Task).ResourceID))
	})
	waitFlag(cmd, &wait, "the "+k.name+" until it is active, and print it")
	return cmd
}

// updateCommand completes cmd, which has the update's flags, into an update of the one
// whose id is the argument: send makes the request from the flags, at least one of which
// must be given.
func updateCommand[T any](c *CLI, k kind[T], cmd *cobra.Command, send func(ctx context.Context, api *client.Client, id int) (*client.Task, error)) *cobra.Command {
	var wait bool
	cmd.Args = oneArg(k.name + " ID")
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		id, err := idArg(k.name+" ID", args[0])
		if err != nil {
			return err
		}
		var names []string
		changed := false
		cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Name != "wait" && f.Name != "help" {
				names = append(names, "--"+f.Name)
				changed = changed || f.Changed
			}
		})
		if !changed {
			return usagef("nothing to change: give %s", strings.Join(names, ", "))
		}
		api, err := c.api()
		if err != nil {
			return err
		}
		return c.submit(cmd, api, wait, func(ctx context.Context) (*client.Task, error) {
			return send(ctx, api, id)
		}, k.settle(c, api, func(*client.Task) int { return id }))
	})
	waitFlag(cmd, &wait, "the "+k.name+" until it is active, and print it")
	return cmd
}

// requiredAnnotation marks a flag a command cannot run without.
const requiredAnnotation = "clouddb-required"

// requiredFlag marks the flag name of cmd as required, which its help says.
func requiredFlag(cmd *cobra.Command, name string) {
	f := cmd.Flags().Lookup(name)
	f.Usage += " (required)"
	if err := cmd.Flags().SetAnnotation(name, requiredAnnotation, []string{"true"}); err != nil {
		panic(err) // a flag registered just before: a programming error
	}
}

// required checks that every required flag of cmd was given, with a usage error naming
// the first that was not, in the words of the other checks ("--name is required").
func required(cmd *cobra.Command) error {
	var missing string
	cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if missing == "" && len(f.Annotations[requiredAnnotation]) > 0 && !f.Changed {
			missing = f.Name
		}
	})
	if missing != "" {
		return usagef("--%s is required", missing)
	}
	return nil
}
