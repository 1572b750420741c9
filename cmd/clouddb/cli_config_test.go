package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
)

// adminKeyOf reads the key pair `admin keys create` printed.
func adminKeyOf(t *testing.T, out string) (key, secret string) {
	t.Helper()
	m := regexp.MustCompile(`^x-api-key: (\S+)\nx-api-secret-key: (\S+)$`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	return m[1], m[2]
}

// adminAccountOf reads the id `admin accounts create` printed.
func adminAccountOf(t *testing.T, out string) int {
	t.Helper()
	var id int
	_, err := fmt.Sscanf(out, "account %d created", &id)
	require.NoError(t, err, out)
	return id
}

// TestCLIConfigPrecedence: each setting comes from its flag, else its environment
// variable, else the default; the key pair, when neither flag nor variable gives it, from
// the data dir's credentials file.
func TestCLIConfigPrecedence(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	h := newCLICase(t, s)
	creds := readCredentials(t, s.dir)
	second := adminAccountOf(t, h.ok("admin", "accounts", "create", "--name", "second"))
	key, secret := adminKeyOf(t, h.ok("admin", "keys", "create", "--account", strconv.Itoa(second)))

	// Which account a command ran as: the subscription list names it.
	accountOf := func(args ...string) int {
		t.Helper()
		var list struct {
			AccountID int `json:"accountId"`
		}
		require.NoError(t, json.Unmarshal([]byte(h.ok(append([]string{"subscriptions", "list", "-o", "json"}, args...)...)), &list))
		return list.AccountID
	}
	require.Equal(t, creds.AccountID, accountOf(), "the credentials file")
	h.env["CLOUDDB_API_KEY"], h.env["CLOUDDB_API_SECRET_KEY"] = key, secret
	require.Equal(t, second, accountOf(), "the environment over the file")
	require.Equal(t, creds.AccountID, accountOf("--api-key", creds.APIKey, "--api-secret-key", creds.SecretKey), "the flags over the environment")

	// A wrong secret is the API's 401, an API error.
	r := h.fails(exitError, "subscriptions", "list", "--api-secret-key", "wrong")
	require.Equal(t, "clouddb: 401 UNAUTHORIZED - UNAUTHORIZED: authentication failed: send a valid x-api-key and x-api-secret-key\n", r.stderr)

	// --url over CLOUDDB_URL; /v1 may be given or left out.
	h.env["CLOUDDB_URL"] = "http://127.0.0.1:1"
	h.fails(exitError, "subscriptions", "list")
	require.Equal(t, second, accountOf("--url", "http://"+s.m.Addr+"/v1/"))
	require.Equal(t, second, accountOf("--url", "http://"+s.m.Addr))
	h.env["CLOUDDB_URL"] = "http://" + s.m.Addr + "/v1"
	require.Equal(t, second, accountOf())

	// --data-dir over CLOUDDB_DATA_DIR, where the file is looked for.
	delete(h.env, "CLOUDDB_API_KEY")
	delete(h.env, "CLOUDDB_API_SECRET_KEY")
	h.env["CLOUDDB_DATA_DIR"] = t.TempDir()
	r = h.fails(exitUsage, "subscriptions", "list")
	require.Contains(t, r.stderr, "no API key: give --api-key and --api-secret-key")
	require.Equal(t, creds.AccountID, accountOf("--data-dir", s.dir))

	// No URL given at all: the one the service wrote to its data dir, whatever port it
	// listens on (the tests' services listen on free ports, never the default's).
	delete(h.env, "CLOUDDB_URL")
	h.env["CLOUDDB_DATA_DIR"] = s.dir
	require.Equal(t, creds.AccountID, accountOf())
	// ... and the default URL beside a data dir no service wrote one to.
	empty := &CLI{}
	empty.flags.dataDir = t.TempDir()
	require.Equal(t, DefaultURL, empty.servedURL())
}

// TestCLIAdmin: clouddb admin lists accounts and keys (never a secret) and revokes a key,
// which the running service refuses as soon as the command has returned, though it had
// just accepted and cached it.
func TestCLIAdmin(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	h := newCLICase(t, s)
	creds := readCredentials(t, s.dir)

	team := adminAccountOf(t, h.ok("admin", "accounts", "create", "--name", "team-a", "--plan", "annual"))
	require.Regexp(t, fmt.Sprintf(`(?m)^ID\s+NAME\s+PLAN\s+CREATED\n%d\s+default\s+flexible\s+\S+ \S+\n%d\s+team-a\s+annual\s+`, creds.AccountID, team), h.ok("admin", "accounts", "list"))
	require.Equal(t, "default\nteam-a", h.ok("admin", "accounts", "list", "--field", "name"))

	key, secret := adminKeyOf(t, h.ok("admin", "keys", "create", "--account", strconv.Itoa(team), "--name", "ci", "--role", "viewer"))
	require.Regexp(t, fmt.Sprintf(`^ID\s+ACCOUNT\s+NAME\s+KEY\s+ROLE\s+CREATED\n\d+\s+%d\s+ci\s+%s\s+viewer\s+\S+ \S+$`, team, key), h.ok("admin", "keys", "list", "--account", strconv.Itoa(team)))
	all := h.ok("admin", "keys", "list", "-o", "json")
	var keys []map[string]any
	require.NoError(t, json.Unmarshal([]byte(all), &keys))
	require.Len(t, keys, 2, all)
	require.Equal(t, creds.APIKey, keys[0]["key"])
	require.Equal(t, key, keys[1]["key"])
	require.NotContains(t, all, secret)
	require.NotContains(t, all, creds.SecretKey)
	require.NotContains(t, strings.ToLower(all), "secret", "no secret, no digest")

	// The key works, and the service has it cached when it is revoked.
	c := client.New("http://"+s.m.Addr+"/v1", key, secret)
	acct, err := c.GetAccount(ctx)
	require.NoError(t, err)
	require.Equal(t, team, acct.ID)
	r := h.run("admin", "keys", "revoke", key)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "API key "+key+" revoked\n", r.stdout)
	require.Contains(t, r.stderr, "waiting 2.5s for running services to forget it")
	_, err = c.GetAccount(ctx)
	require.Equal(t, 401, client.StatusCode(err), "refused once revoke has returned: %v", err)
	require.Equal(t, "ID  ACCOUNT  NAME  KEY  ROLE  CREATED", h.ok("admin", "keys", "list", "--account", strconv.Itoa(team)))

	// JSON for scripts, with the names of credentials.json.
	other := h.ok("admin", "accounts", "create", "--name", "team-b", "--field", "id")
	pair := h.ok("admin", "keys", "create", "--account", other, "-o", "json")
	var made credentials
	require.NoError(t, json.Unmarshal([]byte(pair), &made))
	require.Equal(t, other, strconv.Itoa(made.AccountID))
	acct, err = client.New("http://"+s.m.Addr+"/v1", made.APIKey, made.SecretKey).GetAccount(ctx)
	require.NoError(t, err)
	require.Equal(t, other, strconv.Itoa(acct.ID))

	r = h.fails(exitError, "admin", "keys", "revoke", key)
	require.Equal(t, fmt.Sprintf("clouddb: no API key %q\n", key), r.stderr)
	_, err = s.c.GetAccount(ctx)
	require.NoError(t, err, "the other keys still work")

	// -o json and --field print JSON, as every other command does, not the sentence.
	require.JSONEq(t, fmt.Sprintf(`{"key":%q,"revoked":true}`, made.APIKey), h.ok("admin", "keys", "revoke", made.APIKey, "-o", "json", "--quiet"))
}
