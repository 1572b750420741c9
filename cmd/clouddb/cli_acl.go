package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"clouddb/cloudapi/client"
)

var (
	aclRuleKind = kind[client.RedisRule]{
		name: "ACL rule", command: "acl rules", path: "/acl/redisRules", listKey: "redisRules", byList: true, example: "7",
		cols: columns[client.RedisRule]{
			head: []string{"ID", "NAME", "RULE", "DEFAULT", "STATUS"},
			row: func(r *client.RedisRule) []string {
				return []string{strconv.Itoa(r.ID), r.Name, r.ACL, yesNo(r.IsDefault), r.Status}
			},
		},
	}
	aclRoleKind = kind[client.Role]{
		name: "ACL role", command: "acl roles", path: "/acl/roles", listKey: "roles", byList: true, example: "3",
		cols: columns[client.Role]{
			head: []string{"ID", "NAME", "RULES", "USERS", "STATUS"},
			row: func(r *client.Role) []string {
				rules := make([]string, 0, len(r.RedisRules))
				for _, rr := range r.RedisRules {
					rules = append(rules, formatRoleRule(rr))
				}
				users := make([]string, 0, len(r.Users))
				for _, u := range r.Users {
					users = append(users, u.Name)
				}
				return []string{strconv.Itoa(r.ID), r.Name, strings.Join(rules, " "), strings.Join(users, ","), r.Status}
			},
		},
	}
	aclUserKind = kind[client.User]{
		name: "ACL user", command: "acl users", path: "/acl/users", listKey: "users", example: "5",
		cols: columns[client.User]{
			head: []string{"ID", "NAME", "ROLE", "STATUS"},
			row: func(u *client.User) []string {
				return []string{strconv.Itoa(u.ID), u.Name, u.Role, u.Status}
			},
		},
	}
)

func (c *CLI) aclCommand() *cobra.Command {
	rules := group("rules", "List, read, create, change and delete Redis ACL rules",
		listCommand(c, aclRuleKind), getCommand(c, aclRuleKind), c.aclRulesCreateCommand(), c.aclRulesUpdateCommand(),
		deleteCommand(c, aclRuleKind, func(ctx context.Context, api *client.Client, id int) (*client.Task, error) {
			return api.DeleteRedisRule(ctx, id)
		}))
	rules.Aliases = []string{"rule", "redis-rules"}
	roles := group("roles", "List, read, create, change and delete ACL roles (rules applied to databases)",
		listCommand(c, aclRoleKind), getCommand(c, aclRoleKind), c.aclRolesCreateCommand(), c.aclRolesUpdateCommand(),
		deleteCommand(c, aclRoleKind, func(ctx context.Context, api *client.Client, id int) (*client.Task, error) {
			return api.DeleteRole(ctx, id)
		}))
	roles.Aliases = []string{"role"}
	users := group("users", "List, read, create, change and delete ACL users (a role and a password)",
		listCommand(c, aclUserKind), getCommand(c, aclUserKind), c.aclUsersCreateCommand(), c.aclUsersUpdateCommand(),
		deleteCommand(c, aclUserKind, func(ctx context.Context, api *client.Client, id int) (*client.Task, error) {
			return api.DeleteUser(ctx, id)
		}))
	users.Aliases = []string{"user"}
	return group("acl", "Access control of the databases: Redis rules, roles and users", rules, roles, users)
}

func (c *CLI) aclRulesCreateCommand() *cobra.Command {
	var name, rule string
	cmd := &cobra.Command{
		Use:     "create --name NAME --rule ACL",
		Short:   "Create a Redis ACL rule",
		Example: "  clouddb acl rules create --name cache-reader --rule '+@read ~cache:*' --wait",
	}
	cmd.Flags().StringVar(&name, "name", "", "rule name")
	cmd.Flags().StringVar(&rule, "rule", "", "the rule in Redis ACL syntax, e.g. '+@read ~*'")
	requiredFlag(cmd, "name")
	requiredFlag(cmd, "rule")
	return createCommand(c, aclRuleKind, cmd, func(ctx context.Context, api *client.Client) (*client.Task, error) {
		return api.CreateRedisRule(ctx, client.CreateRedisRule{Name: &name, RedisRule: &rule})
	})
}

func (c *CLI) aclRulesUpdateCommand() *cobra.Command {
	var name, rule string
	cmd := &cobra.Command{
		Use:     "update ID",
		Short:   "Change a Redis ACL rule",
		Example: "  clouddb acl rules update 7 --rule '+@read +@write ~cache:*' --wait",
	}
	cmd.Flags().StringVar(&name, "name", "", "new name")
	cmd.Flags().StringVar(&rule, "rule", "", "new rule in Redis ACL syntax")
	return updateCommand(c, aclRuleKind, cmd, func(ctx context.Context, api *client.Client, id int) (*client.Task, error) {
		f := cmd.Flags()
		return api.UpdateRedisRule(ctx, id, client.CreateRedisRule{Name: given(f, "name", name), RedisRule: given(f, "rule", rule)})
	})
}

// roleRulesHelp describes --rule of the role commands.
const roleRulesHelp = "a rule and the databases it applies to, RULE=SUBSCRIPTION/DATABASE[,SUBSCRIPTION/DATABASE...] (repeatable)"

// parseRoleRules reads the --rule values of a role.
func parseRoleRules(values []string) ([]client.RoleRule, error) {
	rules := make([]client.RoleRule, 0, len(values))
	for _, v := range values {
		name, dbs, ok := strings.Cut(v, "=")
		if !ok || name == "" || dbs == "" {
			return nil, usagef("--rule %q: want RULE=SUBSCRIPTION/DATABASE[,SUBSCRIPTION/DATABASE...]", v)
		}
		rule := client.RoleRule{RuleName: name}
		for db := range strings.SplitSeq(dbs, ",") {
			sub, id, ok := strings.Cut(db, "/")
			s, errS := strconv.Atoi(sub)
			d, errD := strconv.Atoi(id)
			if !ok || errS != nil || errD != nil || s <= 0 || d <= 0 {
				return nil, usagef("--rule %q: %q is not SUBSCRIPTION/DATABASE (two ids)", v, db)
			}
			rule.Databases = append(rule.Databases, client.RoleDatabase{SubscriptionID: s, DatabaseID: d})
		}
		rules = append(rules, rule)
	}
	return rules, nil
}

// formatRoleRule is a role's rule as --rule takes it.
func formatRoleRule(r client.RoleRule) string {
	dbs := make([]string, 0, len(r.Databases))
	for _, d := range r.Databases {
		dbs = append(dbs, fmt.Sprintf("%d/%d", d.SubscriptionID, d.DatabaseID))
	}
	return r.RuleName + "=" + strings.Join(dbs, ",")
}

func (c *CLI) aclRolesCreateCommand() *cobra.Command {
	var (
		name  string
		rules []string
	)
	cmd := &cobra.Command{
		Use:     "create --name NAME --rule RULE=SUBSCRIPTION/DATABASE",
		Short:   "Create an ACL role",
		Example: "  clouddb acl roles create --name readers --rule Read-Only=12/34 --wait",
	}
	cmd.Flags().StringVar(&name, "name", "", "role name")
	cmd.Flags().StringArrayVar(&rules, "rule", nil, roleRulesHelp)
	requiredFlag(cmd, "name")
	requiredFlag(cmd, "rule")
	var parsed []client.RoleRule
	cmd.PreRunE = func(*cobra.Command, []string) (err error) {
		parsed, err = parseRoleRules(rules)
		return err
	}
	return createCommand(c, aclRoleKind, cmd, func(ctx context.Context, api *client.Client) (*client.Task, error) {
		return api.CreateRole(ctx, client.CreateRole{Name: &name, RedisRules: parsed})
	})
}

func (c *CLI) aclRolesUpdateCommand() *cobra.Command {
	var (
		name  string
		rules []string
	)
	cmd := &cobra.Command{
		Use:     "update ID",
		Short:   "Change an ACL role: its name, or its rules (which replace them all)",
		Example: "  clouddb acl roles update 3 --rule Read-Write=12/34 --wait",
	}
	cmd.Flags().StringVar(&name, "name", "", "new name")
	cmd.Flags().StringArrayVar(&rules, "rule", nil, roleRulesHelp)
	var parsed []client.RoleRule
	cmd.PreRunE = func(*cobra.Command, []string) (err error) {
		parsed, err = parseRoleRules(rules)
		return err
	}
	return updateCommand(c, aclRoleKind, cmd, func(ctx context.Context, api *client.Client, id int) (*client.Task, error) {
		return api.UpdateRole(ctx, id, client.CreateRole{Name: given(cmd.Flags(), "name", name), RedisRules: parsed})
	})
}

func (c *CLI) aclUsersCreateCommand() *cobra.Command {
	var name, role, password string
	cmd := &cobra.Command{
		Use:     "create --name NAME --role ROLE --password PASSWORD",
		Short:   "Create an ACL user",
		Example: "  clouddb acl users create --name alice --role readers --password 'S3cret-pass!' --wait",
	}
	cmd.Flags().StringVar(&name, "name", "", "user name")
	cmd.Flags().StringVar(&role, "role", "", "name of the user's role")
	cmd.Flags().StringVar(&password, "password", "", "the user's password (never shown back)")
	for _, f := range []string{"name", "role", "password"} {
		requiredFlag(cmd, f)
	}
	return createCommand(c, aclUserKind, cmd, func(ctx context.Context, api *client.Client) (*client.Task, error) {
		return api.CreateUser(ctx, client.CreateUser{Name: &name, Role: &role, Password: &password})
	})
}

func (c *CLI) aclUsersUpdateCommand() *cobra.Command {
	var role, password string
	cmd := &cobra.Command{
		Use:     "update ID",
		Short:   "Change an ACL user's role or password",
		Example: "  clouddb acl users update 5 --role writers --wait",
	}
	cmd.Flags().StringVar(&role, "role", "", "name of the new role")
	cmd.Flags().StringVar(&password, "password", "", "new password")
	return updateCommand(c, aclUserKind, cmd, func(ctx context.Context, api *client.Client, id int) (*client.Task, error) {
		f := cmd.Flags()
		return api.UpdateUser(ctx, id, client.UpdateUser{Role: given(f, "role", role), Password: given(f, "password", password)})
	})
}
