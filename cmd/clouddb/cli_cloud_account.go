package main

import (
	"context"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"clouddb/cloudapi/client"
)

var cloudAccountKind = kind[client.CloudAccount]{
	name: "cloud account", command: "cloud-accounts", path: "/cloud-accounts", listKey: "cloudAccounts", example: "2",
	cols: columns[client.CloudAccount]{
		head: []string{"ID", "NAME", "PROVIDER", "STATUS", "ACCESS_KEY_ID"},
		row: func(a *client.CloudAccount) []string {
			return []string{strconv.Itoa(a.ID), a.Name, a.Provider, a.Status, a.AccessKeyID}
		},
	},
}

func (c *CLI) cloudAccountsCommand() *cobra.Command {
	k := cloudAccountKind
	cmd := group("cloud-accounts", "List, read, create, change and delete cloud accounts (1 is the service's own)",
		listCommand(c, k), getCommand(c, k), c.cloudAccountsCreateCommand(), c.cloudAccountsUpdateCommand(),
		deleteCommand(c, k, func(ctx context.Context, api *client.Client, id int) (*client.Task, error) {
			return api.DeleteCloudAccount(ctx, id)
		}))
	cmd.Aliases = []string{"cloud-account"}
	return cmd
}

// cloudAccountSettings are the flags a create and an update share. The secrets are flags
// like the rest: a command line is visible to the machine's other users, so run these
// where that does not matter, or use the API.
type cloudAccountSettings struct {
	name, accessKeyID, accessSecretKey, consoleUsername, consolePassword, signInLoginURL string
}

func (s *cloudAccountSettings) flags(f *pflag.FlagSet) {
	f.StringVar(&s.name, "name", "", "cloud account name")
	f.StringVar(&s.accessKeyID, "access-key-id", "", "access key id of the provider's API")
	f.StringVar(&s.accessSecretKey, "access-secret-key", "", "access secret key of the provider's API (never shown back)")
	f.StringVar(&s.consoleUsername, "console-username", "", "user name of the provider's console")
	f.StringVar(&s.consolePassword, "console-password", "", "password of the provider's console (never shown back)")
	f.StringVar(&s.signInLoginURL, "sign-in-login-url", "", "sign-in URL of the provider's console")
}

func (c *CLI) cloudAccountsCreateCommand() *cobra.Command {
	var (
		s        cloudAccountSettings
		provider string
	)
	cmd := &cobra.Command{
		Use:   "create --name NAME --access-key-id ID --access-secret-key KEY --console-username USER --console-password PASSWORD --sign-in-login-url URL",
		Short: "Create a cloud account",
		Example: `  clouddb cloud-accounts create --name team-aws --access-key-id AKIA… --access-secret-key … \
    --console-username ops --console-password … --sign-in-login-url https://team.signin.aws.amazon.com/console --wait`,
	}
	s.flags(cmd.Flags())
	cmd.Flags().StringVar(&provider, "provider", "AWS", "cloud provider: AWS or GCP")
	for _, name := range []string{"name", "access-key-id", "access-secret-key", "console-username", "console-password", "sign-in-login-url"} {
		requiredFlag(cmd, name)
	}
	return createCommand(c, cloudAccountKind, cmd, func(ctx context.Context, api *client.Client) (*client.Task, error) {
		return api.CreateCloudAccount(ctx, client.CreateCloudAccount{
			Name: &s.name, Provider: &provider, AccessKeyID: &s.accessKeyID, AccessSecretKey: &s.accessSecretKey,
			ConsoleUsername: &s.consoleUsername, ConsolePassword: &s.consolePassword, SignInLoginURL: &s.signInLoginURL,
		})
	})
}

func (c *CLI) cloudAccountsUpdateCommand() *cobra.Command {
	var s cloudAccountSettings
	cmd := &cobra.Command{
		Use:     "update ID",
		Short:   "Change a cloud account (its provider cannot change)",
		Example: "  clouddb cloud-accounts update 2 --name team-aws-2 --wait",
	}
	s.flags(cmd.Flags())
	return updateCommand(c, cloudAccountKind, cmd, func(ctx context.Context, api *client.Client, id int) (*client.Task, error) {
		f := cmd.Flags()
		return api.UpdateCloudAccount(ctx, id, client.UpdateCloudAccount{
			Name: given(f, "name", s.name), AccessKeyID: given(f, "access-key-id", s.accessKeyID), AccessSecretKey: given(f, "access-secret-key", s.accessSecretKey),
			ConsoleUsername: given(f, "console-username", s.consoleUsername), ConsolePassword: given(f, "console-password", s.consolePassword),
			SignInLoginURL: given(f, "sign-in-login-url", s.signInLoginURL),
		})
	})
}
